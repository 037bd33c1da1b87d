//! A Rust mutant's scope: the innermost function around its edit (its outer attributes are
//! not part of it), named by the modules, `impl`s and traits around it (`Version::compare`),
//! or the whole file outside any function; and the first line of its statement.

use super::syntax::{self, text};
use crate::mutation::mutants::scope::{Scope, in_tree};
use tree_sitter::Node;

pub(super) fn scopes(source: &str, ranges: &[(usize, usize)]) -> Vec<Scope> {
    in_tree(syntax::parse(source), source, ranges, |root, start, end| {
        let node = root.descendant_for_byte_range(start, end);
        let function = node
            .and_then(|node| {
                std::iter::successors(Some(node), |n| n.parent()).find(|n| {
                    n.kind() == "function_item" && n.start_byte() <= start && end <= n.end_byte()
                })
            })
            .map(|function| (function, path_name(function, source)));
        let statement_line = node
            .and_then(|node| {
                std::iter::successors(Some(node), |n| n.parent()).find(|n| {
                    n.parent().is_some_and(|p| {
                        matches!(p.kind(), "block" | "declaration_list" | "source_file")
                    })
                })
            })
            .map(syntax::line);
        Scope::around(source, start, function, statement_line)
    })
}

/// `outer::Type::method`: the names of the modules, `impl` types, traits and functions around
/// `function`, and its own, outermost first.
fn path_name(function: Node<'_>, source: &str) -> String {
    let mut names = Vec::new();
    for node in std::iter::successors(Some(function), |n| n.parent()) {
        let name = match node.kind() {
            "function_item" | "mod_item" | "trait_item" => node.child_by_field_name("name"),
            "impl_item" => node.child_by_field_name("type"),
            _ => None,
        };
        if let Some(name) = name {
            names.push(text(name, source));
        }
    }
    names.reverse();
    names.join("::")
}
