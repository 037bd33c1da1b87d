//! The Go parser behind mutation: tree-sitter's Go grammar, and the file-level facts the
//! planner needs (a generated file's marker).

use crate::mutation::mutants::syntax;
use tree_sitter::Tree;

pub(crate) use crate::mutation::mutants::syntax::{line, text};

/// The grammar this language's files are parsed with.
pub(crate) fn grammar() -> tree_sitter::Language {
    tree_sitter_go::LANGUAGE.into()
}

/// Parses `source`; `None` only if the parser could not be set up or was cancelled.
pub(crate) fn parse(source: &str) -> Option<Tree> {
    syntax::parse(tree_sitter_go::LANGUAGE.into(), source)
}

/// The tree of `source` when it parses cleanly; otherwise the 1-based line of the first problem.
pub(crate) fn parse_clean(source: &str) -> Result<Tree, u32> {
    syntax::parse_clean(tree_sitter_go::LANGUAGE.into(), source)
}

/// The 1-based line of Go's generated-code marker, when the file has one: a line that is
/// exactly `// Code generated … DO NOT EDIT.` (the convention `go generate` documents and
/// `go vet`, `gopls` and linters honour).
pub(crate) fn generated_marker(source: &str) -> Option<u32> {
    source.lines().enumerate().find_map(|(at, line)| {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let marked = line.starts_with("// Code generated ")
            && line.ends_with(" DO NOT EDIT.")
            && line.len() >= "// Code generated  DO NOT EDIT.".len();
        marked.then(|| u32::try_from(at + 1).unwrap_or(u32::MAX))
    })
}
