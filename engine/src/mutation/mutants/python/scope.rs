//! A Python mutant's scope: the innermost function or method around its edit (with its
//! decorators), or the whole module for an edit outside any function; and the first line of
//! the statement holding the edit, where per-test coverage records a line that its own
//! continuation lines lack.

use super::syntax;
use crate::mutation::mutants::scope::{Scope, in_tree};
use tree_sitter::Node;

/// The scope of each byte range `(start, end)` of `source`, in order. Every range gets the
/// whole module when the source does not parse (the caller excluded such files already).
pub(super) fn scopes(source: &str, ranges: &[(usize, usize)]) -> Vec<Scope> {
    in_tree(syntax::parse(source), source, ranges, |root, start, end| {
        let node = root.descendant_for_byte_range(start, end);
        let function = node
            .and_then(|node| enclosing_function(node, start, end))
            .map(|node| (node, dotted_name(node, source)));
        let statement_line = node
            .and_then(enclosing_statement)
            .map(|s| s.start_position().row as u32 + 1);
        Scope::around(source, start, function, statement_line)
    })
}

/// The innermost statement holding `node` (the node itself included): the node whose parent
/// is a block or the module.
fn enclosing_statement(mut node: Node<'_>) -> Option<Node<'_>> {
    loop {
        let parent = node.parent()?;
        if matches!(parent.kind(), "block" | "module") {
            return Some(node);
        }
        node = parent;
    }
}

/// The innermost function definition holding `start..end` (the node itself included: a
/// dropped decorated function is its own scope), widened to its decorators.
fn enclosing_function(mut node: Node<'_>, start: usize, end: usize) -> Option<Node<'_>> {
    loop {
        let holds = node.start_byte() <= start && end <= node.end_byte();
        let function = match node.kind() {
            "function_definition" => true,
            "decorated_definition" => node
                .child_by_field_name("definition")
                .is_some_and(|d| d.kind() == "function_definition"),
            _ => false,
        };
        if holds && function {
            while let Some(parent) = node.parent()
                && parent.kind() == "decorated_definition"
            {
                node = parent;
            }
            return Some(node);
        }
        node = node.parent()?;
    }
}

/// The names of the classes and functions around `node` and its own, outermost first.
fn dotted_name(node: Node<'_>, source: &str) -> String {
    let mut names = Vec::new();
    let mut at = match node.kind() {
        "decorated_definition" => node.child_by_field_name("definition"),
        _ => Some(node),
    };
    while let Some(current) = at {
        if matches!(current.kind(), "function_definition" | "class_definition")
            && let Some(name) = current.child_by_field_name("name")
        {
            names.push(source.get(name.byte_range()).unwrap_or_default());
        }
        at = current.parent();
    }
    names.reverse();
    names.join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    const VERSION: &str = "\
LIMIT = 3


class Version:
    def __init__(self, major):
        self.major = major

    @property
    def is_stable(self):
        return self.major > 0

    def bump(self):
        def next_major(n):
            return n + 1
        return Version(next_major(self.major))


def compare(a, b):
    return a.major < b.major
";

    fn scope_of(needle: &str) -> Scope {
        let start = VERSION.find(needle).expect("needle in source");
        scopes(VERSION, &[(start, start + needle.len())]).remove(0)
    }

    #[test]
    fn a_mutant_in_a_method_has_the_method_with_its_decorators_as_scope() {
        let scope = scope_of("self.major > 0");
        assert_eq!(scope.name, "Version.is_stable");
        let text = &VERSION[scope.start..scope.end];
        assert!(text.starts_with("@property\n    def is_stable"), "{text}");
        assert!(text.ends_with("return self.major > 0"), "{text}");
    }

    #[test]
    fn a_nested_function_is_its_own_scope_and_a_module_level_site_has_the_file() {
        assert_eq!(scope_of("n + 1").name, "Version.bump.next_major");
        assert_eq!(scope_of("a.major < b.major").name, "compare");
        let module = scope_of("LIMIT = 3");
        assert_eq!((module.start, module.end), (0, VERSION.len()));
        assert_eq!(module.name, "");
    }

    #[test]
    fn a_site_in_a_multi_line_statement_has_the_statements_first_line() {
        let source = "PLURALS = [\n    (\"(quiz)$\", \"\\\\1zes\"),\n    (\"(ox)$\", \"\\\\1en\"),\n]\n\n\ndef warn():\n    print(\n        \"deprecated; \"\n        \"use parse()\",\n    )\n";
        let at = |needle: &str| {
            let start = source.find(needle).expect("needle in source");
            scopes(source, &[(start, start + needle.len())]).remove(0)
        };
        assert_eq!(at("\"(ox)$\"").statement_line, 1);
        let string = at("\"use parse()\"");
        assert_eq!((string.name.as_str(), string.statement_line), ("warn", 8));
        assert_eq!(at("PLURALS").statement_line, 1);
    }

    #[test]
    fn a_dropped_decorated_function_is_its_own_scope() {
        let start = VERSION.find("@property").unwrap();
        let end = VERSION.find("return self.major > 0").unwrap() + "return self.major > 0".len();
        let scope = scopes(VERSION, &[(start, end)]).remove(0);
        assert_eq!((scope.start, scope.end), (start, end));
        assert_eq!(scope.name, "Version.is_stable");
    }
}
