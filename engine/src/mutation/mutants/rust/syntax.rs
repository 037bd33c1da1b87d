//! The Rust parser behind mutation: tree-sitter's Rust grammar, and the syntax-level facts the
//! sites and the schema rewrite share (test-only code, const contexts, lines).

use crate::mutation::mutants::syntax;
use tree_sitter::{Node, Tree};

pub(crate) use crate::mutation::mutants::syntax::{line, text};

/// The grammar this language's files are parsed with.
pub(crate) fn grammar() -> tree_sitter::Language {
    tree_sitter_rust::LANGUAGE.into()
}

/// Parses `source`; `None` only if the parser could not be set up or was cancelled.
pub(crate) fn parse(source: &str) -> Option<Tree> {
    syntax::parse(tree_sitter_rust::LANGUAGE.into(), source)
}

/// The tree of `source` when it parses cleanly; otherwise the 1-based line of the first problem.
pub(crate) fn parse_clean(source: &str) -> Result<Tree, u32> {
    syntax::parse_clean(tree_sitter_rust::LANGUAGE.into(), source)
}

/// The outer attributes of an item: the `attribute_item`s right before it.
fn attributes<'t>(item: Node<'t>) -> impl Iterator<Item = Node<'t>> {
    std::iter::successors(item.prev_named_sibling(), |n| n.prev_named_sibling())
        .take_while(|n| n.kind() == "attribute_item")
}

/// An attribute that makes an item test code: `#[test]`, `#[tokio::test]` and the like,
/// `#[cfg(test)]` (or any `cfg` naming `test`), or cargo-mutants' `#[mutants::skip]`.
fn marks_test(attribute: &str) -> bool {
    let inner: String = attribute
        .trim_start_matches("#!")
        .trim_start_matches('#')
        .trim_start_matches('[')
        .trim_end_matches(']')
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let path = inner.split('(').next().unwrap_or("");
    if path == "test" || path.ends_with("::test") || path == "mutants::skip" {
        return true;
    }
    // `cfg(test)`, `cfg(all(test, unix))`; `cfg(not(test))` is product code.
    (path == "cfg" || path == "cfg_attr")
        && !inner.contains("not(test")
        && inner
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|word| word == "test")
}

/// Whether `node` is test code or inside it: an item marked by [`marks_test`].
pub(crate) fn is_test_code(node: Node<'_>, source: &str) -> bool {
    std::iter::successors(Some(node), |n| n.parent())
        .any(|item| attributes(item).any(|attribute| marks_test(text(attribute, source))))
}

/// A file whose inner attributes compile it for tests only (`#![cfg(test)]`).
pub(crate) fn is_test_only_file(root: Node<'_>, source: &str) -> bool {
    let mut cursor = root.walk();
    root.named_children(&mut cursor)
        .filter(|n| n.kind() == "inner_attribute_item")
        .any(|n| marks_test(text(n, source)) && text(n, source).contains("cfg"))
}

/// Why `node` is evaluated at compile time, when it is: a runtime switch cannot go there, so
/// the schema leaves its mutants to a build of their own.
pub(crate) fn const_context(node: Node<'_>) -> Option<&'static str> {
    let mut child = node;
    let mut at = node.parent();
    while let Some(parent) = at {
        let why = match parent.kind() {
            "const_item" => Some("a `const` item"),
            "static_item" => Some("a `static` item"),
            "const_block" => Some("a `const` block"),
            "array_type" => Some("an array type's length"),
            "enum_variant" => Some("an enum discriminant"),
            "type_arguments" | "const_parameter" => Some("a const generic argument"),
            "attribute_item" | "inner_attribute_item" => Some("an attribute"),
            "array_expression"
                if parent
                    .child_by_field_name("length")
                    .is_some_and(|length| length.id() == child.id()) =>
            {
                Some("an array length")
            }
            "function_item" if is_const_fn(parent) => Some("a `const fn`"),
            _ => None,
        };
        if why.is_some() {
            return why;
        }
        child = parent;
        at = parent.parent();
    }
    None
}

pub(crate) fn is_const_fn(function: Node<'_>) -> bool {
    let mut cursor = function.walk();
    function
        .children(&mut cursor)
        .filter(|c| c.kind() == "function_modifiers")
        .any(|modifiers| {
            let mut inner = modifiers.walk();
            modifiers.children(&mut inner).any(|m| m.kind() == "const")
        })
}
