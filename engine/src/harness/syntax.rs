//! What every language's harness scan asks of its syntax tree: a parse with the language's
//! grammar, a node's text and its line.

use tree_sitter::{Language, Node, Parser, Tree};

/// Parses `source` with `language`; `None` if the grammar could not be loaded.
pub(super) fn parse(language: Language, source: &str) -> Option<Tree> {
    let mut parser = Parser::new();
    parser.set_language(&language).ok()?;
    parser.parse(source, None)
}

/// The source text a node spans.
pub(super) fn text<'s>(node: Node<'_>, source: &'s str) -> &'s str {
    source.get(node.byte_range()).unwrap_or("")
}

/// 1-based line of a node's first byte.
pub(super) fn line(node: Node<'_>) -> u32 {
    u32::try_from(node.start_position().row)
        .unwrap_or(u32::MAX - 1)
        .saturating_add(1)
}
