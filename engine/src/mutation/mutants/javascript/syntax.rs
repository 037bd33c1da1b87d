//! The JavaScript parser behind mutation: tree-sitter's JavaScript grammar (ES modules and
//! CommonJS alike).

use crate::mutation::mutants::syntax;
use tree_sitter::{Node, Tree};

/// The grammar this language's files are parsed with.
pub(crate) fn grammar() -> tree_sitter::Language {
    tree_sitter_javascript::LANGUAGE.into()
}

/// Parses `source`; `None` only if the parser could not be set up or was cancelled.
pub(crate) fn parse(source: &str) -> Option<Tree> {
    syntax::parse(tree_sitter_javascript::LANGUAGE.into(), source)
}

/// The tree of `source` when it parses cleanly; otherwise the 1-based line of the first problem.
pub(crate) fn parse_clean(source: &str) -> Result<Tree, u32> {
    syntax::parse_clean(tree_sitter_javascript::LANGUAGE.into(), source)
}

pub(crate) fn text<'s>(node: Node<'_>, source: &'s str) -> &'s str {
    source.get(node.byte_range()).unwrap_or("")
}
