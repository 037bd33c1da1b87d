//! What every language's parser shares: a tree-sitter parse, the first syntax error in a tree,
//! a node's lines, and whether a node touches the changed lines. Each language's own `syntax`
//! module names its grammar and adds its rules.

use std::collections::BTreeSet;
use tree_sitter::{Language, Node, Parser, Tree};

/// Parses `source` with `grammar`; `None` only if the parser could not be set up or was
/// cancelled.
pub(crate) fn parse(grammar: Language, source: &str) -> Option<Tree> {
    let mut parser = Parser::new();
    parser.set_language(&grammar).ok()?;
    parser.parse(source, None)
}

/// The tree of `source` when it parses cleanly with `grammar`; otherwise the 1-based line of
/// the first problem (an error or a missing node).
pub(crate) fn parse_clean(grammar: Language, source: &str) -> Result<Tree, u32> {
    let tree = parse(grammar, source).ok_or(1u32)?;
    match first_error(tree.root_node()) {
        None => Ok(tree),
        Some(node) => Err(line(node)),
    }
}

/// The first error or missing node in `root`'s tree, in document order; a node that says it
/// holds an error none of its children shows is its own first error. A loop down the tree,
/// not a recursion: the source chooses the depth (200,000 nested parentheses are a valid
/// input), and a recursion that deep overflows the stack.
fn first_error(root: Node<'_>) -> Option<Node<'_>> {
    let faulty = |node: &Node<'_>| node.is_error() || node.is_missing() || node.has_error();
    if !faulty(&root) {
        return None;
    }
    let mut node = root;
    loop {
        if node.is_error() || node.is_missing() {
            return Some(node);
        }
        let mut cursor = node.walk();
        let next = node.children(&mut cursor).find(faulty);
        match next {
            Some(child) => node = child,
            None => return Some(node),
        }
    }
}

/// 1-based line of a node's first byte.
pub(crate) fn line(node: Node<'_>) -> u32 {
    u32::try_from(node.start_position().row)
        .unwrap_or(u32::MAX - 1)
        .saturating_add(1)
}

/// 1-based line of a node's last byte.
pub(crate) fn end_line(node: Node<'_>) -> u32 {
    let end = node.end_position();
    // A node ending at column 0 ends with the newline of the line before.
    let row = if end.column == 0 && end.row > node.start_position().row {
        end.row - 1
    } else {
        end.row
    };
    u32::try_from(row).unwrap_or(u32::MAX - 1).saturating_add(1)
}

/// Whether any of the node's lines is among `changed`.
pub(crate) fn touches(node: Node<'_>, changed: &BTreeSet<u32>) -> bool {
    changed.range(line(node)..=end_line(node)).next().is_some()
}
