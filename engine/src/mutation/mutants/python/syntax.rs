//! The Python parser behind the mutation check: tree-sitter's Python grammar, which gives the
//! byte ranges a mutant replaces, plus the few source-level rules (coding cookies) it lacks.

use crate::mutation::mutants::syntax;
use tree_sitter::Tree;

pub(crate) use crate::mutation::mutants::syntax::{end_line, line};

/// The grammar this language's files are parsed with.
pub(crate) fn grammar() -> tree_sitter::Language {
    tree_sitter_python::LANGUAGE.into()
}

/// Parses `source`; `None` only if the parser could not be set up or was cancelled.
pub(crate) fn parse(source: &str) -> Option<Tree> {
    syntax::parse(tree_sitter_python::LANGUAGE.into(), source)
}

/// `Ok` when `source` parses without error or missing nodes; otherwise the 1-based line of the
/// first problem.
pub(crate) fn parses(source: &str) -> Result<(), u32> {
    parse_clean(source).map(|_| ())
}

/// The tree of `source` when it parses cleanly; otherwise the 1-based line of the first problem.
pub(crate) fn parse_clean(source: &str) -> Result<Tree, u32> {
    syntax::parse_clean(tree_sitter_python::LANGUAGE.into(), source)
}

/// The encoding a PEP 263 coding cookie on the first two lines names, unless it is UTF-8.
pub(crate) fn declared_encoding(source: &str) -> Option<String> {
    for line in source.lines().take(2) {
        let trimmed = line.trim_start_matches([' ', '\t', '\x0c']);
        if !trimmed.starts_with('#') {
            continue;
        }
        let Some(at) = trimmed.find("coding") else {
            continue;
        };
        let rest = &trimmed[at + "coding".len()..];
        let Some(rest) = rest.strip_prefix([':', '=']) else {
            continue;
        };
        let name: String = rest
            .trim_start_matches([' ', '\t'])
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            .collect();
        if name.is_empty() {
            continue;
        }
        let normalized = name.to_ascii_lowercase().replace('_', "-");
        if normalized == "utf-8" || normalized == "utf8" || normalized.starts_with("utf-8-") {
            return None;
        }
        return Some(name);
    }
    None
}
