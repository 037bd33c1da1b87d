//! A Go mutant's scope: the function or method around its edit (`Ledger.Balance`; a function
//! literal belongs to the declaration that holds it), or the whole file outside any; and the
//! first line of its statement. Go declares functions only at the top level, so the scope is
//! found among the file's top-level declarations, and the statement by one walk down: never
//! by climbing parents, which tree-sitter finds from the root each time (the source chooses
//! the depth).

use super::syntax::{self, text};
use crate::mutation::mutants::scope::{Scope, in_tree};
use tree_sitter::Node;

pub(super) fn scopes(source: &str, ranges: &[(usize, usize)]) -> Vec<Scope> {
    in_tree(syntax::parse(source), source, ranges, |root, start, end| {
        let mut cursor = root.walk();
        let function = root
            .named_children(&mut cursor)
            .find(|n| {
                matches!(n.kind(), "function_declaration" | "method_declaration")
                    && n.start_byte() <= start
                    && end <= n.end_byte()
            })
            .map(|function| (function, name_of(function, source)));
        Scope::around(source, start, function, statement_line(root, start))
    })
}

/// `Func`, or `Type.Method` for a method (its receiver's type without `*` or type arguments).
fn name_of(function: Node<'_>, source: &str) -> String {
    let name = function
        .child_by_field_name("name")
        .map_or("", |name| text(name, source));
    let receiver = function
        .child_by_field_name("receiver")
        .and_then(|list| list.named_child(0))
        .and_then(|parameter| parameter.child_by_field_name("type"))
        .map(|receiver| {
            let receiver = text(receiver, source).trim_start_matches('*').trim();
            receiver.split('[').next().unwrap_or(receiver).to_owned()
        });
    match receiver {
        Some(receiver) if !receiver.is_empty() => format!("{receiver}.{name}"),
        _ => name.to_owned(),
    }
}

/// The first line of the innermost statement holding byte `at`: one walk down the tree.
fn statement_line(root: Node<'_>, at: usize) -> Option<u32> {
    let mut cursor = root.walk();
    let mut line = None;
    loop {
        let parent = cursor.node().kind();
        if cursor.goto_first_child_for_byte(at).is_none() {
            return line;
        }
        let child = cursor.node();
        if child.start_byte() > at {
            return line;
        }
        if matches!(parent, "statement_list" | "source_file") {
            line = Some(syntax::line(child));
        }
    }
}
