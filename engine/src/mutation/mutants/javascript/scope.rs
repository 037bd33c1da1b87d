//! A JavaScript mutant's scope: the innermost function, method or arrow function around its
//! edit (`Ledger.balance` for a method), or the whole file outside any; and the first line of
//! its statement. Both come from one walk down the tree to the edit, never by climbing
//! parents, which tree-sitter finds from the root each time (the source chooses the depth).

use super::syntax::{self, Dialect, text};
use crate::mutation::mutants::scope::{Scope, in_tree};
use crate::mutation::mutants::syntax::line;
use tree_sitter::Node;

pub(super) fn scopes(dialect: Dialect, source: &str, ranges: &[(usize, usize)]) -> Vec<Scope> {
    in_tree(
        syntax::parse(dialect, source),
        source,
        ranges,
        |root, start, end| {
            let (function, class, statement) = walk_down(root, start, end);
            let function = function.map(|function| {
                let name = function
                    .child_by_field_name("name")
                    .map_or("", |name| text(name, source));
                let name = match class.and_then(|c| c.child_by_field_name("name")) {
                    Some(class) if function.kind() == "method_definition" => {
                        format!("{}.{name}", text(class, source))
                    }
                    _ => name.to_owned(),
                };
                (function, name)
            });
            Scope::around(source, start, function, statement)
        },
    )
}

/// The innermost function and class holding `start..end`, and the first line of the innermost
/// statement holding `start`.
fn walk_down(
    root: Node<'_>,
    start: usize,
    end: usize,
) -> (Option<Node<'_>>, Option<Node<'_>>, Option<u32>) {
    let (mut function, mut class, mut statement) = (None, None, None);
    let mut cursor = root.walk();
    loop {
        let node = cursor.node();
        if node.start_byte() <= start && end <= node.end_byte() {
            match node.kind() {
                "function_declaration"
                | "function_expression"
                | "generator_function_declaration"
                | "generator_function"
                | "arrow_function"
                | "method_definition" => {
                    function = Some(node);
                }
                "class_declaration" | "class" => class = Some(node),
                _ => {}
            }
        }
        let parent = node.kind();
        if cursor.goto_first_child_for_byte(start).is_none() {
            break;
        }
        let child = cursor.node();
        if child.start_byte() > start {
            break;
        }
        if matches!(parent, "program" | "statement_block") {
            statement = Some(line(child));
        }
    }
    (function, class, statement)
}
