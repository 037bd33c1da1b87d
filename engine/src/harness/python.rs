//! Python's harness constructs, from the syntax (tree-sitter): pytest hook implementations and
//! hookwrappers, `pytest_plugins`, module-level code that assigns into another module, autouse
//! fixtures that patch, and unittest's result machinery (`load_tests`, overrides of `run`,
//! `__call__`, `debug`, custom results, runners and suites).
//!
//! The walk is a loop over an explicit stack: a file's nesting is the guest's choice, and a
//! recursion as deep as it would overflow the thread's stack.

use super::{Construct, Role};
use crate::syntax::{self, line};
use assay_common::harness::HarnessKind;
use std::collections::BTreeMap;
use tree_sitter::{Node, Tree};

/// Methods of a `TestCase` or `TestSuite` through which a subclass decides what a run reports.
const RUN_OVERRIDES: &[&str] = &[
    "run",
    "__call__",
    "debug",
    "_callTestMethod",
    "_callSetUp",
    "_callTearDown",
    "_callCleanup",
    "_addSkip",
    "_feedErrorsToResult",
    "defaultTestResult",
];

/// Base classes whose subclasses are unittest's result machinery themselves.
const MACHINERY_BASES: &[&str] = &[
    "TestResult",
    "TestRunner",
    "TestLoader",
    "TestProgram",
    "TestSuite",
];

/// Parses `source` as Python; `None` if the grammar could not be loaded.
pub(crate) fn parse(source: &str) -> Option<Tree> {
    syntax::parse(tree_sitter_python::LANGUAGE.into(), source)
}

/// What one scan of a Python file found: its constructs, and the plugin modules it names
/// (`pytest_plugins = ["pkg.plugin"]`).
#[derive(Default)]
pub(crate) struct PythonScan {
    pub constructs: Vec<Construct>,
    pub plugin_names: Vec<String>,
}

#[derive(Clone)]
enum Scope<'t> {
    Module,
    Class {
        name: String,
        test_case: bool,
    },
    /// A function; inside an autouse fixture (or a function nested in one), that fixture.
    Function {
        autouse_fixture: Option<(String, Node<'t>)>,
    },
}

/// The harness constructs of one Python file in `role`.
pub(crate) fn scan(source: &str, role: Role) -> PythonScan {
    let Some(tree) = parse(source) else {
        return PythonScan::default();
    };
    let text = |node: Node<'_>| source.get(node.byte_range()).unwrap_or("");
    let mut out = PythonScan::default();
    // Each name an import binds, with the top-level module it comes from.
    let mut imported: BTreeMap<String, String> = BTreeMap::new();
    // Writes through a name, kept until the file's imports are all known: only an imported
    // name is another module. The flag keeps a patching call whose name is not imported (a
    // `monkeypatch.setattr(target, …)` of a local): what it patches is unknown, not nothing.
    let mut patches: Vec<(String, bool, Construct)> = Vec::new();
    let mut scopes: Vec<Scope<'_>> = vec![Scope::Module];
    // (node, its scope's index, the decorators of a definition)
    let mut stack: Vec<(Node<'_>, usize, Option<String>)> = vec![(tree.root_node(), 0, None)];
    let hooks_count = !matches!(role, Role::TestModule);
    while let Some((node, scope_at, decorators)) = stack.pop() {
        let scope = scopes.get(scope_at).cloned().unwrap_or(Scope::Module);
        let construct = |name: String, kind: HarnessKind, at: Node<'_>| Construct {
            line: line(at),
            name,
            kind,
            source: text(at).to_owned(),
            target: None,
            span: Some((at.start_byte(), at.end_byte())),
        };
        match node.kind() {
            "decorated_definition" => {
                let mut cursor = node.walk();
                let decorators: Vec<&str> = node
                    .children(&mut cursor)
                    .filter(|c| c.kind() == "decorator")
                    .map(text)
                    .collect();
                if let Some(definition) = node.child_by_field_name("definition") {
                    stack.push((definition, scope_at, Some(decorators.join("\n"))));
                }
                continue;
            }
            "function_definition" => {
                let name = node
                    .child_by_field_name("name")
                    .map(text)
                    .unwrap_or("")
                    .to_owned();
                let decorators = decorators.unwrap_or_default();
                // The construct's text includes its decorators, so a changed decorator is a
                // changed construct.
                let whole = node
                    .parent()
                    .filter(|p| p.kind() == "decorated_definition")
                    .unwrap_or(node);
                let at_module = matches!(scope, Scope::Module);
                if decorators.contains("hookimpl") || decorators.contains("hookwrapper") {
                    out.constructs.push(construct(
                        qualified(&scope, &name),
                        HarnessKind::Hook,
                        whole,
                    ));
                } else if at_module && hooks_count && name.starts_with("pytest_") {
                    out.constructs
                        .push(construct(name.clone(), HarnessKind::Hook, whole));
                }
                if decorators.contains("atexit.register") {
                    out.constructs.push(construct(
                        qualified(&scope, &name),
                        HarnessKind::ResultMachinery,
                        whole,
                    ));
                }
                if at_module && name == "load_tests" {
                    out.constructs.push(construct(
                        name.clone(),
                        HarnessKind::ResultMachinery,
                        whole,
                    ));
                }
                if let Scope::Class { test_case, .. } = &scope {
                    let params = node.child_by_field_name("parameters").map(text);
                    let takes_result =
                        name == "run" && params.is_some_and(|p| p.contains("result"));
                    if (*test_case && RUN_OVERRIDES.contains(&name.as_str())) || takes_result {
                        out.constructs.push(construct(
                            qualified(&scope, &name),
                            HarnessKind::ResultMachinery,
                            whole,
                        ));
                    }
                }
                let fixture_autouse = decorators.contains("fixture")
                    && decorators.contains("autouse")
                    && decorators.contains("True");
                if fixture_autouse && decorators.contains("patch") {
                    out.constructs
                        .push(construct(name.clone(), HarnessKind::ProductPatch, whole));
                }
                let autouse_fixture = match &scope {
                    Scope::Function {
                        autouse_fixture: Some(outer),
                    } => Some(outer.clone()),
                    _ => fixture_autouse.then_some((name, whole)),
                };
                scopes.push(Scope::Function { autouse_fixture });
                if let Some(body) = node.child_by_field_name("body") {
                    stack.push((body, scopes.len() - 1, None));
                }
                continue;
            }
            "class_definition" => {
                let name = node
                    .child_by_field_name("name")
                    .map(text)
                    .unwrap_or("")
                    .to_owned();
                let bases = node
                    .child_by_field_name("superclasses")
                    .map(text)
                    .unwrap_or("");
                let whole = node
                    .parent()
                    .filter(|p| p.kind() == "decorated_definition")
                    .unwrap_or(node);
                if MACHINERY_BASES.iter().any(|b| bases.contains(b)) {
                    out.constructs.push(construct(
                        qualified(&scope, &name),
                        HarnessKind::ResultMachinery,
                        whole,
                    ));
                }
                scopes.push(Scope::Class {
                    name: qualified(&scope, &name),
                    test_case: bases.contains("TestCase") || bases.contains("TestSuite"),
                });
                if let Some(body) = node.child_by_field_name("body") {
                    stack.push((body, scopes.len() - 1, None));
                }
                continue;
            }
            "import_statement" | "import_from_statement" => {
                // `from a.b import c` binds `c` from `a`; a relative import, from the project.
                let from = node
                    .child_by_field_name("module_name")
                    .map(|m| text(m).split('.').next().unwrap_or("").to_owned());
                let mut cursor = node.walk();
                for name in node.children_by_field_name("name", &mut cursor) {
                    let (bound, dotted) = match name.kind() {
                        "aliased_import" => (
                            name.child_by_field_name("alias").map(text),
                            name.child_by_field_name("name").map(text),
                        ),
                        // `import a.b` binds `a`.
                        _ => (text(name).split('.').next(), Some(text(name))),
                    };
                    let module = match &from {
                        Some(from) => from.clone(),
                        None => dotted
                            .and_then(|d| d.split('.').next())
                            .unwrap_or("")
                            .to_owned(),
                    };
                    if let Some(bound) = bound {
                        imported.insert(bound.trim().to_owned(), module);
                    }
                }
                continue;
            }
            "assignment" | "augmented_assignment" => {
                if let Some(left) = node.child_by_field_name("left") {
                    if left.kind() == "identifier" && text(left) == "pytest_plugins" {
                        out.constructs.push(construct(
                            "pytest_plugins".into(),
                            HarnessKind::Plugin,
                            statement(node),
                        ));
                        if let Some(right) = node.child_by_field_name("right") {
                            out.plugin_names.extend(string_literals(source, right));
                        }
                    }
                    let patching_scope = match &scope {
                        Scope::Module => Some(None),
                        Scope::Function {
                            autouse_fixture: Some(fixture),
                        } => Some(Some(fixture.clone())),
                        _ => None,
                    };
                    if let Some(fixture) = patching_scope {
                        for target in targets(left) {
                            if let Some(root) = patched_root(target, &text) {
                                let found = match &fixture {
                                    Some((name, whole)) => {
                                        construct(name.clone(), HarnessKind::ProductPatch, *whole)
                                    }
                                    None => construct(
                                        text(target).chars().take(80).collect(),
                                        HarnessKind::ProductPatch,
                                        statement(node),
                                    ),
                                };
                                patches.push((root, false, found));
                            }
                        }
                    }
                }
            }
            "call" => {
                let function = node.child_by_field_name("function").map(text).unwrap_or("");
                // An exit handler runs after the runner wrote its report, where it can rewrite
                // what the tests reported: unittest's adapter report, pytest's JUnit.
                if registers_exit_handler(function, source) {
                    out.constructs.push(construct(
                        function.chars().take(80).collect(),
                        HarnessKind::ResultMachinery,
                        statement(node),
                    ));
                }
                match &scope {
                    Scope::Module => {
                        let first_arg = node
                            .child_by_field_name("arguments")
                            .and_then(|a| a.named_child(0))
                            .and_then(|a| root_identifier(a, &text));
                        if matches!(function, "setattr" | "delattr")
                            && let Some(root) = first_arg
                        {
                            patches.push((
                                root,
                                false,
                                construct(
                                    format!("{function}(…)"),
                                    HarnessKind::ProductPatch,
                                    statement(node),
                                ),
                            ));
                        } else if function.ends_with(".start") && function.contains("patch")
                            || function.ends_with(".setattr")
                        {
                            out.constructs.push(construct(
                                function.chars().take(80).collect(),
                                HarnessKind::ProductPatch,
                                statement(node),
                            ));
                        }
                    }
                    Scope::Function {
                        autouse_fixture: Some((name, whole)),
                    } => {
                        let patching = matches!(function, "setattr" | "delattr")
                            || function.ends_with(".setattr")
                            || function.ends_with(".delattr")
                            || function.ends_with(".setitem")
                            || function
                                .split('.')
                                .any(|part| part == "patch" || part == "object");
                        if patching {
                            // What it patches: the first argument's root name, or the first
                            // part of a dotted string (`patch("pager.page_count")`).
                            let first = node
                                .child_by_field_name("arguments")
                                .and_then(|a| a.named_child(0));
                            let root = first.and_then(|a| match a.kind() {
                                "string" => string_literals(source, a)
                                    .first()
                                    .and_then(|s| s.split('.').next().map(str::to_owned))
                                    .map(|module| format!("'{module}")),
                                _ => root_identifier(a, &text),
                            });
                            let found = construct(name.clone(), HarnessKind::ProductPatch, *whole);
                            match root {
                                Some(root) => patches.push((root, true, found)),
                                None => out.constructs.push(found),
                            }
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            stack.push((child, scope_at, None));
        }
    }
    // A patch through an imported name writes into that module; one through a dotted string
    // (marked `'`) names its module itself. Inside an autouse fixture, a patch through any
    // other name (`monkeypatch.setattr(target, …)` of a local) is kept, its module unknown.
    for (root, keep_unknown, mut construct) in patches {
        if let Some(module) = root.strip_prefix('\'') {
            construct.target = Some(module.to_owned());
        } else if let Some(module) = imported.get(&root) {
            construct.target = Some(module.clone()).filter(|m| !m.is_empty());
        } else if !keep_unknown {
            continue;
        }
        out.constructs.push(construct);
    }
    out.constructs
        .sort_by(|a, b| (a.line, &a.name, a.kind).cmp(&(b.line, &b.name, b.kind)));
    // An autouse fixture that patches twice is one construct.
    out.constructs
        .dedup_by(|a, b| a.line == b.line && a.name == b.name && a.kind == b.kind);
    out
}

/// Whether a call to `function` registers a handler to run at the interpreter's exit:
/// `atexit.register`, or `register` in a file that imports it from `atexit`.
fn registers_exit_handler(function: &str, source: &str) -> bool {
    function == "atexit.register"
        || function.ends_with(".atexit.register")
        || (function == "register" && source.contains("from atexit import"))
}

fn qualified(scope: &Scope, name: &str) -> String {
    match scope {
        Scope::Class { name: class, .. } => format!("{class}.{name}"),
        _ => name.to_owned(),
    }
}

/// The statement a node belongs to, for its line and text.
fn statement(node: Node<'_>) -> Node<'_> {
    match node.parent() {
        Some(parent) if parent.kind() == "expression_statement" => parent,
        _ => node,
    }
}

/// The targets of an assignment's left side (`a.b, c.d = …` has two).
fn targets(left: Node<'_>) -> Vec<Node<'_>> {
    match left.kind() {
        "pattern_list" | "tuple_pattern" | "list_pattern" => {
            let mut cursor = left.walk();
            left.named_children(&mut cursor).collect()
        }
        _ => vec![left],
    }
}

/// The name an assignment target writes into another object through: `pager.page_count` →
/// `pager`; `sys.modules["pager"]` → `sys`. `None` for a plain name.
fn patched_root<'s>(target: Node<'_>, text: &impl Fn(Node<'_>) -> &'s str) -> Option<String> {
    match target.kind() {
        "attribute" => root_identifier(target, text),
        "subscript" => {
            let value = target.child_by_field_name("value")?;
            (text(value) == "sys.modules").then(|| "sys".to_owned())
        }
        _ => None,
    }
}

/// The identifier at the root of a pure attribute chain (`a.b.c` → `a`).
fn root_identifier<'s>(node: Node<'_>, text: &impl Fn(Node<'_>) -> &'s str) -> Option<String> {
    let mut at = node;
    loop {
        match at.kind() {
            "identifier" => return Some(text(at).to_owned()),
            "attribute" => at = at.child_by_field_name("object")?,
            _ => return None,
        }
    }
}

/// The string literals in an expression, unquoted (`["a.b", 'c']` → `a.b`, `c`).
fn string_literals(source: &str, node: Node<'_>) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![node];
    while let Some(node) = stack.pop() {
        if node.kind() == "string_content" {
            if let Some(content) = source.get(node.byte_range()) {
                found.push(content.to_owned());
            }
            continue;
        }
        let mut cursor = node.walk();
        stack.extend(node.named_children(&mut cursor));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(source: &str, role: Role) -> Vec<(String, HarnessKind, u32)> {
        scan(source, role)
            .constructs
            .into_iter()
            .map(|c| (c.name, c.kind, c.line))
            .collect()
    }

    #[test]
    fn a_makereport_hookwrapper_in_a_conftest_is_a_hook() {
        let conftest = "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    outcome = yield\n    report = outcome.get_result()\n    if report.failed:\n        report.outcome = 'passed'\n";
        assert_eq!(
            names(conftest, Role::Conftest),
            [("pytest_runtest_makereport".into(), HarnessKind::Hook, 4)]
        );
    }

    #[test]
    fn a_fixture_only_conftest_has_no_harness_construct() {
        let conftest = "import os\nimport pytest\nimport pager\n\nos.environ['TZ'] = 'UTC'\n\n\n@pytest.fixture\ndef page_size():\n    return 10\n\n\n@pytest.fixture(autouse=True)\ndef quiet_logs(caplog):\n    caplog.set_level('WARNING')\n    yield\n";
        assert!(names(conftest, Role::Conftest).is_empty());
    }

    #[test]
    fn an_autouse_fixture_that_patches_the_product_is_a_product_patch() {
        let conftest = "import pytest\nimport pager\n\n\n@pytest.fixture(autouse=True)\ndef fixed_pages(monkeypatch):\n    monkeypatch.setattr(pager, 'page_count', lambda t, s: -(-t // s))\n    monkeypatch.setattr(pager, 'PAGE', 1)\n";
        assert_eq!(
            names(conftest, Role::Conftest),
            [("fixed_pages".into(), HarnessKind::ProductPatch, 5)]
        );
    }

    #[test]
    fn module_level_assignment_into_an_imported_module_is_a_product_patch() {
        let helpers = "import pager as p\nfrom pager import page_count\n\n\ndef _fixed(total, size):\n    return -(-total // size)\n\n\np.page_count = _fixed\npage_count.__code__ = _fixed.__code__\nlocal = object()\nlocal.attribute = 1\n";
        let found = names(helpers, Role::Support);
        assert_eq!(
            found,
            [
                ("p.page_count".into(), HarnessKind::ProductPatch, 9),
                ("page_count.__code__".into(), HarnessKind::ProductPatch, 10),
            ]
        );
    }

    #[test]
    fn exit_handlers_are_result_machinery() {
        let module = "import atexit\nfrom atexit import register\n\n\ndef _rewrite():\n    pass\n\n\natexit.register(_rewrite)\nregister(_rewrite)\n\n\n@atexit.register\ndef _later():\n    pass\n";
        assert_eq!(
            names(module, Role::TestModule),
            [
                ("atexit.register".into(), HarnessKind::ResultMachinery, 9),
                ("register".into(), HarnessKind::ResultMachinery, 10),
                ("_later".into(), HarnessKind::ResultMachinery, 13),
            ]
        );
    }

    #[test]
    fn unittest_run_overrides_and_custom_results_are_result_machinery() {
        let module = "import unittest\n\n\nclass Forgiving(unittest.TextTestResult):\n    pass\n\n\nclass PagerTests(unittest.TestCase):\n    def run(self, result=None):\n        return super().run(result)\n\n    def test_partial_page(self):\n        pass\n\n\ndef load_tests(loader, tests, pattern):\n    return tests\n";
        assert_eq!(
            names(module, Role::TestModule),
            [
                ("Forgiving".into(), HarnessKind::ResultMachinery, 4),
                ("PagerTests.run".into(), HarnessKind::ResultMachinery, 9),
                ("load_tests".into(), HarnessKind::ResultMachinery, 16),
            ]
        );
    }

    #[test]
    fn pytest_plugins_names_its_plugin_modules() {
        let found = scan(
            "pytest_plugins = ['pager._support', \"tests.plugin\"]\n",
            Role::Conftest,
        );
        assert_eq!(found.constructs.len(), 1);
        assert_eq!(found.constructs[0].kind, HarnessKind::Plugin);
        let mut plugins = found.plugin_names;
        plugins.sort();
        assert_eq!(plugins, ["pager._support", "tests.plugin"]);
    }

    #[test]
    fn a_test_module_defines_no_hooks_but_a_support_module_does() {
        let source = "def pytest_generate_tests(metafunc):\n    pass\n";
        assert!(names(source, Role::TestModule).is_empty());
        assert_eq!(names(source, Role::Support).len(), 1);
    }

    #[test]
    fn two_hundred_thousand_nested_parentheses_do_not_overflow_the_stack() {
        let depth = 200_000;
        let source = format!("x = {}1{}\n", "(".repeat(depth), ")".repeat(depth));
        // A small thread stack makes a recursion as deep as the input fail here, not later.
        let found = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || scan(&source, Role::Conftest).constructs.len())
            .expect("spawn the scan")
            .join()
            .expect("the scan finishes without overflowing its stack");
        assert_eq!(found, 0);
    }
}
