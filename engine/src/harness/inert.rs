//! Whether a product file's change has an executable effect: the same tokens on both sides,
//! once comments and docstrings are set aside, mean the same program. Python and Rust only;
//! any other language's change is taken to have an effect (nothing here can show otherwise).
//!
//! Doctests: a Python docstring that holds `>>>` is a doctest pytest or `doctest` may run, so it
//! is compared like code; so are Rust's doc comments (`///`, `//!`, `/** */`), which hold
//! rustdoc's doctests. Only plain comments and docstrings without an example are set aside.

use tree_sitter::{Language, Node, Parser};

/// Whether `base` and `candidate` of the file at `path` are the same program; `None` when the
/// language is not one this module reads or a side does not parse cleanly.
pub(crate) fn same_program(path: &str, base: &str, candidate: &str) -> Option<bool> {
    let grammar: Language = if path.ends_with(".py") {
        tree_sitter_python::LANGUAGE.into()
    } else if path.ends_with(".rs") {
        tree_sitter_rust::LANGUAGE.into()
    } else {
        return None;
    };
    let before = tokens(&grammar, base)?;
    let after = tokens(&grammar, candidate)?;
    Some(before == after)
}

/// The file's leaf tokens in order (kind and text), without comments and example-free
/// docstrings; `None` if it does not parse cleanly.
fn tokens<'s>(grammar: &Language, source: &'s str) -> Option<Vec<(&'static str, &'s str)>> {
    let mut parser = Parser::new();
    parser.set_language(grammar).ok()?;
    let tree = parser.parse(source, None)?;
    if tree.root_node().has_error() {
        return None;
    }
    let mut out = Vec::new();
    // An explicit stack, children pushed in reverse so they pop in source order.
    let mut stack: Vec<Node<'_>> = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        if set_aside(node, source) {
            continue;
        }
        if node.child_count() == 0 {
            out.push((node.kind(), source.get(node.byte_range())?));
            continue;
        }
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    Some(out)
}

fn set_aside(node: Node<'_>, source: &str) -> bool {
    let text = source.get(node.byte_range()).unwrap_or("");
    match node.kind() {
        // Python's comments; Rust's plain ones (doc comments are compared, for doctests).
        "comment" => true,
        "line_comment" | "block_comment" => !["///", "//!", "/**", "/*!"]
            .iter()
            .any(|doc| text.starts_with(doc)),
        // A statement that is only a string literal has no effect (a docstring among them),
        // unless it holds an example a doctest run would execute.
        "expression_statement" => {
            node.named_child_count() == 1
                && node
                    .named_child(0)
                    .is_some_and(|c| matches!(c.kind(), "string" | "concatenated_string"))
                && !text.contains(">>>")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_comment_and_docstring_change_is_the_same_python_program() {
        let base = "def page_count(total, size):\n    return total // size\n";
        let candidate = "def page_count(total, size):\n    \"\"\"Pages needed; partial pages count.\"\"\"\n    # fixed: round up\n    return total // size\n";
        assert_eq!(same_program("pager.py", base, candidate), Some(true));
    }

    #[test]
    fn a_real_change_is_another_program() {
        let base = "def page_count(total, size):\n    return total // size\n";
        let candidate = "def page_count(total, size):\n    return -(-total // size)\n";
        assert_eq!(same_program("pager.py", base, candidate), Some(false));
        let assigned = "FIXED = True\ndef page_count(total, size):\n    return total // size\n";
        assert_eq!(same_program("pager.py", base, assigned), Some(false));
    }

    #[test]
    fn a_changed_doctest_is_not_inert() {
        let base = "def page_count(total, size):\n    \"\"\"\n    >>> page_count(10, 5)\n    2\n    \"\"\"\n    return total // size\n";
        let candidate = "def page_count(total, size):\n    \"\"\"\n    >>> page_count(11, 5)\n    3\n    \"\"\"\n    return total // size\n";
        assert_eq!(same_program("pager.py", base, candidate), Some(false));
    }

    #[test]
    fn rust_plain_comments_are_set_aside_but_doc_comments_are_compared() {
        let base = "pub fn pages(items: u32, per: u32) -> u32 {\n    items / per\n}\n";
        let comment = "// rounds up now\npub fn pages(items: u32, per: u32) -> u32 {\n    items / per // really\n}\n";
        assert_eq!(same_program("src/lib.rs", base, comment), Some(true));
        let doc = "/// ```\n/// assert_eq!(pager::pages(3, 2), 2);\n/// ```\npub fn pages(items: u32, per: u32) -> u32 {\n    items / per\n}\n";
        assert_eq!(same_program("src/lib.rs", base, doc), Some(false));
    }

    #[test]
    fn other_languages_and_broken_files_are_not_judged() {
        assert_eq!(same_program("pager.go", "a", "b"), None);
        assert_eq!(same_program("pager.py", "def f(:\n", "def f(:\n"), None);
    }
}
