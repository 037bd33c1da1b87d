//! What every reading of source code through tree-sitter shares: a parse with a language's
//! grammar, a node's text and its line. The harness scan and each mutation language ask for
//! these; the grammars and their rules stay in their own modules.

use tree_sitter::{Language, Node, Parser, Tree};

/// Parses `source` with `grammar`; `None` only if the parser could not be set up or was
/// cancelled.
pub(crate) fn parse(grammar: Language, source: &str) -> Option<Tree> {
    let mut parser = Parser::new();
    parser.set_language(&grammar).ok()?;
    parser.parse(source, None)
}

/// The source text a node spans; empty where the node's bytes are not `source`'s.
pub(crate) fn text<'s>(node: Node<'_>, source: &'s str) -> &'s str {
    source.get(node.byte_range()).unwrap_or("")
}

/// 1-based line of a node's first byte.
pub(crate) fn line(node: Node<'_>) -> u32 {
    u32::try_from(node.start_position().row)
        .unwrap_or(u32::MAX - 1)
        .saturating_add(1)
}
