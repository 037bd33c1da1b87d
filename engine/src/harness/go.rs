//! Go's harness constructs, from the syntax (tree-sitter), in `_test.go` files: `TestMain`,
//! which runs instead of the tests and decides what the test binary prints and how it exits;
//! `init` functions; and package-level variables whose initializer runs code that writes
//! outside itself (a function literal it calls, or a function of the file, that assigns to a
//! package variable), which runs, like `init`, before any test.
//!
//! An import of a package that reaches the exit system call without the testing package
//! (`syscall`, `golang.org/x/sys/unix`, `unsafe` for a linked-in runtime function, cgo's `C`)
//! is one too: a test that prints go test's own `--- PASS` line and then calls
//! `syscall.Exit(0)` (which `-test.paniconexit0` does not catch) has test2json read the line as
//! a pass, and no test after it runs.
//!
//! Each declaration is compared whole with the base's: a `TestMain` or `init` whose first line
//! the base holds but whose body the change rewrote is a finding, one the base holds as it is
//! is not.
//!
//! The walk is a loop over an explicit stack: a file's nesting is the guest's choice, and a
//! recursion as deep as it would overflow the thread's stack.

use super::Construct;
use crate::syntax::{self, text};
use assay_common::harness::HarnessKind;
use tree_sitter::{Node, Tree};

fn parse(source: &str) -> Option<Tree> {
    syntax::parse(tree_sitter_go::LANGUAGE.into(), source)
}

/// The harness constructs of the Go test file `source`, each with its declaration's text.
fn constructs(source: &str) -> Vec<Construct> {
    let Some(tree) = parse(source) else {
        return Vec::new();
    };
    let root = tree.root_node();
    let mut found = Vec::new();
    let mut functions: Vec<(&str, Node<'_>)> = Vec::new();
    let mut cursor = root.walk();
    for declaration in root.children(&mut cursor) {
        if declaration.kind() == "function_declaration"
            && let Some(name) = declaration.child_by_field_name("name")
        {
            functions.push((text(name, source), declaration));
        }
    }
    let mut cursor = root.walk();
    for declaration in root.children(&mut cursor) {
        match declaration.kind() {
            "function_declaration" => {
                let name = declaration
                    .child_by_field_name("name")
                    .map(|n| text(n, source))
                    .unwrap_or("");
                if name == "TestMain" || name == "init" {
                    found.push(Construct::of_node(
                        declaration,
                        name.to_owned(),
                        HarnessKind::Hook,
                        source,
                    ));
                }
            }
            "import_declaration" => {
                for spec in specs(declaration, "import_spec") {
                    let Some(path) = spec.child_by_field_name("path") else {
                        continue;
                    };
                    let imported = text(path, source).trim_matches(|c| c == '"' || c == '`');
                    if EXITS_AROUND_TESTING.contains(&imported) {
                        found.push(Construct::of_node(
                            spec,
                            format!("import {imported:?}"),
                            HarnessKind::Hook,
                            source,
                        ));
                    }
                }
            }
            "var_declaration" => {
                for spec in specs(declaration, "var_spec") {
                    if let Some(name) = runs_code(spec, source, &functions) {
                        found.push(Construct::of_node(
                            spec,
                            format!("var {name}"),
                            HarnessKind::Hook,
                            source,
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    found
}

/// Packages through which a test can end its process with any exit status while the testing
/// package has not finished: see the module's comment.
const EXITS_AROUND_TESTING: &[&str] = &["syscall", "golang.org/x/sys/unix", "unsafe", "C"];

/// The specs of `kind` (`import_spec`, `var_spec`) of a declaration, grouped (`var ( … )`)
/// or not, in source order.
fn specs<'a>(declaration: Node<'a>, kind: &str) -> Vec<Node<'a>> {
    let mut specs = Vec::new();
    let mut stack = vec![declaration];
    while let Some(node) = stack.pop() {
        if node.kind() == kind {
            specs.push(node);
            continue;
        }
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor));
    }
    specs.sort_by_key(|n| n.start_byte());
    specs
}

/// The names a `var_spec` declares, when its initializer runs code at package initialization
/// that writes outside itself: it calls a function literal, or a function this file declares,
/// whose body (or that of a function of this file it calls in turn) assigns to a name it did
/// not declare, a package variable of the product's among them. A table built by a function
/// literal, a flag (`var update = flag.Bool(…)`) and a spec registered by a call into another
/// package (`var _ = Describe(…)`) are not findings.
fn runs_code(spec: Node<'_>, source: &str, functions: &[(&str, Node<'_>)]) -> Option<String> {
    let value = spec.child_by_field_name("value")?;
    let mut names = Vec::new();
    let mut cursor = spec.walk();
    for name in spec.children_by_field_name("name", &mut cursor) {
        names.push(text(name, source));
    }
    // The bodies the initializer runs: function literals it calls, and the file's functions
    // it calls, followed through the calls in their bodies.
    let mut pending: Vec<Node<'_>> = vec![value];
    let mut followed: Vec<&str> = Vec::new();
    while let Some(code) = pending.pop() {
        let mut stack = vec![code];
        while let Some(node) = stack.pop() {
            if node.kind() == "call_expression"
                && let Some(function) = node.child_by_field_name("function")
            {
                let literal = match function.kind() {
                    "func_literal" => Some(function),
                    "parenthesized_expression" => function
                        .named_child(0)
                        .filter(|inner| inner.kind() == "func_literal"),
                    _ => None,
                };
                if let Some(literal) = literal
                    && writes_outside(literal, source)
                {
                    return Some(names.join(", "));
                }
                if function.kind() == "identifier" {
                    let called = text(function, source);
                    if !followed.contains(&called)
                        && let Some((_, declaration)) =
                            functions.iter().find(|(name, _)| *name == called)
                    {
                        followed.push(called);
                        if writes_outside(*declaration, source) {
                            return Some(names.join(", "));
                        }
                        pending.push(*declaration);
                    }
                }
            }
            let mut cursor = node.walk();
            stack.extend(node.children(&mut cursor));
        }
    }
    None
}

/// Nodes that open a scope for the names declared in them.
const SCOPES: &[&str] = &[
    "block",
    "func_literal",
    "function_declaration",
    "for_statement",
    "if_statement",
    "expression_switch_statement",
    "type_switch_statement",
    "select_statement",
    "communication_case",
    "expression_case",
    "type_case",
    "default_case",
];

/// Whether the function (a literal or a declaration) assigns to a name it does not declare
/// before the assignment in a scope that holds it: a package variable, the product's or
/// another package's (`pager.Divide = …`).
fn writes_outside(function: Node<'_>, source: &str) -> bool {
    // Each declared name with the scope it is declared in and where.
    let mut declared: Vec<(&str, std::ops::Range<usize>, usize)> = Vec::new();
    let mut targets: Vec<Node<'_>> = Vec::new();
    let mut stack = vec![function];
    while let Some(node) = stack.pop() {
        let names: Vec<Node<'_>> = match node.kind() {
            "parameter_declaration"
            | "variadic_parameter_declaration"
            | "var_spec"
            | "const_spec" => {
                let mut cursor = node.walk();
                node.children_by_field_name("name", &mut cursor).collect()
            }
            "short_var_declaration" | "range_clause" | "receive_statement" => node
                .child_by_field_name("left")
                .map(|left| {
                    let mut cursor = left.walk();
                    left.named_children(&mut cursor).collect()
                })
                .unwrap_or_default(),
            "type_switch_statement" => node
                .child_by_field_name("alias")
                .map(|alias| {
                    let mut cursor = alias.walk();
                    alias.named_children(&mut cursor).collect()
                })
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        for name in names.into_iter().filter(|n| n.kind() == "identifier") {
            if let Some(scope) = enclosing_scope(name) {
                declared.push((text(name, source), scope.byte_range(), name.start_byte()));
            }
        }
        match node.kind() {
            "assignment_statement" => {
                if let Some(left) = node.child_by_field_name("left") {
                    let mut cursor = left.walk();
                    targets.extend(left.named_children(&mut cursor));
                }
            }
            "inc_statement" | "dec_statement" => targets.extend(node.named_child(0)),
            _ => {}
        }
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor));
    }
    targets.into_iter().any(|target| {
        let Some(root) = target_root(target) else {
            return false;
        };
        let name = text(root, source);
        name != "_"
            && !declared.iter().any(|(declared_name, scope, at)| {
                *declared_name == name
                    && *at <= root.start_byte()
                    && scope.start <= root.start_byte()
                    && root.end_byte() <= scope.end
            })
    })
}

/// The scope a declared name belongs to: the nearest enclosing scope node (a function's
/// parameters belong to the function).
fn enclosing_scope(name: Node<'_>) -> Option<Node<'_>> {
    let mut node = name.parent()?;
    loop {
        if SCOPES.contains(&node.kind()) {
            return Some(node);
        }
        node = node.parent()?;
    }
}

/// The identifier an assignment's target starts from: `divide`, `pager.Divide`,
/// `limits["page"]`, `(*cursor).next`.
fn target_root(mut node: Node<'_>) -> Option<Node<'_>> {
    loop {
        match node.kind() {
            "identifier" => return Some(node),
            "selector_expression" => node = node.child_by_field_name("operand")?,
            "index_expression" | "slice_expression" => {
                node = node.child_by_field_name("operand")?
            }
            "parenthesized_expression" => node = node.named_child(0)?,
            "unary_expression" => node = node.child_by_field_name("operand")?,
            _ => return None,
        }
    }
}

/// The harness constructs the change adds or alters in the Go file at `path`: only `_test.go`
/// files are read (a product file's `init` is the product's), and a construct the base holds
/// as it is, text for text, is none.
pub(crate) fn scan(path: &str, base: Option<&str>, candidate: &str) -> Vec<Construct> {
    if !path.ends_with("_test.go") {
        return Vec::new();
    }
    let before = base.map(constructs).unwrap_or_default();
    let mut found: Vec<Construct> = constructs(candidate)
        .into_iter()
        .filter(|c| {
            !before
                .iter()
                .any(|b| b.kind == c.kind && b.name == c.name && b.source == c.source)
        })
        .collect();
    // Where the grammar and the compiler may disagree (a file with a syntax error to
    // tree-sitter), the added lines that open a `TestMain` or an `init` count as well.
    if parse(candidate).is_none_or(|tree| tree.root_node().has_error()) {
        for construct in super::other::go_lines(path, base, candidate) {
            if !found
                .iter()
                .any(|c| c.name == construct.name && c.line == construct.line)
            {
                found.push(construct);
            }
        }
        found.sort_by_key(|c| c.line);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places(found: &[Construct]) -> Vec<(&str, u32)> {
        found.iter().map(|c| (c.name.as_str(), c.line)).collect()
    }

    #[test]
    fn a_test_main_and_init_the_change_adds_are_hooks() {
        let base = "package pager\n\nimport \"testing\"\n";
        let candidate = "package pager\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc init() {}\n\nfunc TestMain(m *testing.M) {\n\tm.Run()\n\tos.Exit(0)\n}\n";
        assert_eq!(
            places(&scan("pager_test.go", Some(base), candidate)),
            [("init", 8), ("TestMain", 10)]
        );
        assert!(scan("pager.go", Some(base), candidate).is_empty());
    }

    #[test]
    fn a_test_main_whose_body_the_change_rewrote_is_a_hook_and_one_kept_is_not() {
        let base = "package pager\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) {\n\tos.Setenv(\"TZ\", \"UTC\")\n\tos.Exit(m.Run())\n}\n";
        let rewritten = base.replace("\tos.Exit(m.Run())\n", "\tm.Run()\n\tos.Exit(0)\n");
        assert_eq!(
            places(&scan("main_test.go", Some(base), &rewritten)),
            [("TestMain", 8)]
        );
        // A test added beside it, and the declaration moved down: the same `TestMain`.
        let kept = base.replace(
            ")\n\nfunc TestMain",
            ")\n\nfunc TestZone(t *testing.T) {}\n\nfunc TestMain",
        );
        assert!(scan("main_test.go", Some(base), &kept).is_empty());
    }

    #[test]
    fn a_second_init_with_the_same_first_line_as_the_bases_is_a_hook() {
        let base = "package pager\n\nimport \"log\"\n\nfunc init() {\n\tlog.SetFlags(0)\n}\n";
        let candidate = format!(
            "{base}\nfunc init() {{\n\tdivide = func(a, b int) int {{ return (a + b - 1) / b }}\n}}\n"
        );
        assert_eq!(
            places(&scan("pager_test.go", Some(base), &candidate)),
            [("init", 9)]
        );
    }

    #[test]
    fn an_import_that_reaches_the_exit_call_around_testing_is_a_hook() {
        let base = "package pager\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n";
        let candidate = "package pager\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\t\"syscall\"\n\t\"testing\"\n\n\tu \"golang.org/x/sys/unix\"\n)\n\nfunc TestPages(t *testing.T) {\n\tfmt.Println(\"--- PASS: TestPages (0.00s)\")\n\tsyscall.Exit(0)\n\tu.Exit(0)\n}\n";
        let found = scan("pager/pages_test.go", Some(base), candidate);
        assert_eq!(
            places(&found),
            [
                ("import \"syscall\"", 6),
                ("import \"golang.org/x/sys/unix\"", 9)
            ]
        );
        // One the base already imports is not the change's.
        assert!(scan("pager/pages_test.go", Some(candidate), candidate).is_empty());
    }

    #[test]
    fn a_package_variable_whose_initializer_runs_code_is_a_hook() {
        let candidate = "package pager\n\nimport (\n\t\"flag\"\n\t\"io\"\n\t\"strings\"\n)\n\nvar update = flag.Bool(\"update\", false, \"rewrite the golden files\")\n\nvar _ io.Writer = (*strings.Builder)(nil)\n\nvar cases = []int{1, 2, 3}\n\nvar _ = func() bool {\n\tdivide = func(a, b int) int { return (a + b - 1) / b }\n\treturn true\n}()\n\nvar (\n\trounding = patch()\n\t_        = Describe(\"pages\", func() { divide = nil })\n)\n\nfunc patch() bool { return rounded() }\n\nfunc rounded() bool {\n\tpager.Divide++\n\treturn true\n}\n";
        assert_eq!(
            places(&scan("pager_test.go", None, candidate)),
            [("var _", 15), ("var rounding", 21)]
        );
    }

    #[test]
    fn a_table_built_by_a_function_literal_writes_only_its_own_names() {
        let candidate = "package pager\n\nvar sizes = func() (out []int) {\n\tvar last int\n\tfor i := 1; i < 4; i++ {\n\t\tlast = i * 5\n\t\tout = append(out, last)\n\t}\n\tlimits := map[string]int{}\n\tlimits[\"page\"] = last\n\treturn\n}()\n\nvar shadowed = func() bool {\n\tif true {\n\t\tdivide := 0\n\t\t_ = divide\n\t}\n\tdivide = nil\n\treturn true\n}()\n";
        // `out` is a named result, a parameter of the literal; `divide` is declared only in an
        // inner block, so the last assignment writes the package's.
        assert_eq!(
            places(&scan("pager_test.go", None, candidate)),
            [("var shadowed", 14)]
        );
    }

    #[test]
    fn a_file_the_grammar_cannot_read_is_scanned_by_its_added_lines() {
        let candidate =
            "package pager\n\nfunc init() {\n\tdivide = nil\n\nfunc TestMain(m *testing.M) {}\n";
        let found = scan("pager_test.go", None, candidate);
        let names: Vec<&str> = found.iter().map(|c| c.name.as_str()).collect();
        assert!(
            names.contains(&"init") && names.contains(&"TestMain"),
            "{names:?}"
        );
    }
}
