//! What every language's parser shares: a tree-sitter parse (`crate::syntax`'s), the first
//! syntax error in a tree, a node's lines, and whether a node touches the changed lines. Each
//! language's own `syntax` module names its grammar and adds its rules.

use super::sites::{Candidate, mutated};
use std::collections::BTreeSet;
use tree_sitter::{InputEdit, Language, Node, Parser, Point, Tree};

pub(crate) use crate::syntax::{line, parse, text};

/// The tree of `source` when it parses cleanly with `grammar`; otherwise the 1-based line of
/// the first problem (an error or a missing node).
pub(crate) fn parse_clean(grammar: Language, source: &str) -> Result<Tree, u32> {
    let tree = parse(grammar, source).ok_or(1u32)?;
    match first_error(tree.root_node()) {
        None => Ok(tree),
        Some(node) => Err(line(node)),
    }
}

/// Parses one file's candidates: each is the file with one small edit, so each is parsed
/// incrementally from the file's own tree (tree-sitter reuses the subtrees the edit leaves
/// alone, and gives the tree a parse from scratch gives). A parse of the whole file per
/// candidate was nine tenths of planning a 30 KB Python file's 700 mutants.
pub(crate) struct Reparser<'s> {
    source: &'s str,
    /// The byte offset where each line of `source` starts.
    line_starts: Vec<usize>,
    parser: Parser,
    /// `source`'s own tree, and the grammar it was parsed with.
    original: Option<(Language, Tree)>,
}

impl<'s> Reparser<'s> {
    pub(crate) fn new(source: &'s str) -> Self {
        let line_starts = std::iter::once(0)
            .chain(source.match_indices('\n').map(|(at, _)| at + 1))
            .collect();
        Self {
            source,
            line_starts,
            parser: Parser::new(),
            original: None,
        }
    }

    /// The tree of the file with `candidate` applied when it parses cleanly with `grammar`;
    /// otherwise the 1-based line of the first problem, as [`parse_clean`] says.
    pub(crate) fn mutated_clean(
        &mut self,
        grammar: Language,
        candidate: &Candidate,
    ) -> Result<Tree, u32> {
        let mutated = mutated(self.source, candidate);
        if self
            .original
            .as_ref()
            .is_none_or(|(known, _)| *known != grammar)
        {
            self.parser.set_language(&grammar).map_err(|_| 1u32)?;
            let tree = self.parser.parse(self.source, None).ok_or(1u32)?;
            self.original = Some((grammar, tree));
        }
        let Some((_, original)) = &self.original else {
            return Err(1);
        };
        let mut edited = original.clone();
        let start_position = self.point(candidate.start);
        edited.edit(&InputEdit {
            start_byte: candidate.start,
            old_end_byte: candidate.end,
            new_end_byte: candidate.start + candidate.replacement.len(),
            start_position,
            old_end_position: self.point(candidate.end),
            new_end_position: match candidate.replacement.rfind('\n') {
                Some(last) => Point::new(
                    start_position.row + candidate.replacement.matches('\n').count(),
                    candidate.replacement.len() - last - 1,
                ),
                None => Point::new(
                    start_position.row,
                    start_position.column + candidate.replacement.len(),
                ),
            },
        });
        let tree = self.parser.parse(&mutated, Some(&edited)).ok_or(1u32)?;
        match first_error(tree.root_node()) {
            None => Ok(tree),
            Some(node) => Err(line(node)),
        }
    }

    /// Row and byte column of byte `at` of the original source.
    fn point(&self, at: usize) -> Point {
        let row = self.line_starts.partition_point(|start| *start <= at) - 1;
        Point::new(row, at - self.line_starts[row])
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

/// A node's `operator` field when it touches the `changed` lines: the token an operator swap
/// replaces, mutated only where the change is.
pub(crate) fn changed_operator<'t>(node: Node<'t>, changed: &BTreeSet<u32>) -> Option<Node<'t>> {
    node.child_by_field_name("operator")
        .filter(|op| touches(*op, changed))
}
