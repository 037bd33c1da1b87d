//! JavaScript test code that hooks node's module system, from the syntax (tree-sitter): what a
//! `--require`/`--import` preload does (a transpiler's register hook, a loader), done from a
//! support file or a test file the change adds. Such a hook decides what the product *is* for
//! every test after it: it can compile a corrected product in place of the one in the tree,
//! or answer `require` with a planted module.
//!
//! Found, where the name is bound to node's module system (`require('node:module')`, `import
//! Module from 'module'`, a destructured or imported member of it), to `require` itself, or to
//! a `require` made by `createRequire`:
//! - an assignment into it: `Module.prototype._compile = …`, `Module._resolveFilename = …`,
//!   `Module._extensions['.js'] = …`, `require.cache[path] = …`, `require.extensions[…] = …`,
//!   `module.constructor.prototype.require = …`;
//! - `Object.defineProperty`, `Object.defineProperties`, `Object.assign`, `Reflect.set` and
//!   `Reflect.defineProperty` on it;
//! - a loader registered with `register(…)` or `registerHooks(…)`.
//!
//! `delete require.cache[…]` (a test that loads a module afresh) and `module.exports = …` are
//! not hooks.
//!
//! And a mock of a project module (one bound to a relative path: `require('../invoice')`,
//! `import * as invoice from '../invoice.js'`) made around the tests rather than in one:
//! `mock.method(invoice, 'total', …)`, `mock.property`, `mock.getter`, `mock.setter`,
//! `vi.spyOn`, `jest.spyOn`, at module level or in a `describe`, `before` or `beforeEach`
//! callback. Inside a test, a mock is the test's own business, as a monkeypatch in a pytest
//! test's body is.
//!
//! And writes into node's result channel (a test file's standard output, where the runner
//! parses V8-serialized test events): V8's serializer imported or required, and raw writes to
//! standard output (`process.stdout.write`, `writeSync(1, …)`), which can report a test that
//! never ran. `console.log` writes text, which never parses as an event.
//!
//! The walk is a loop over an explicit stack.

use super::Construct;
use crate::syntax::{self, text};
use assay_common::harness::HarnessKind;
use tree_sitter::{Node, Tree};

const MODULE_SPECIFIERS: &[&str] = &["module", "node:module"];
/// V8's serializer, which writes node's test events as the runner parses them.
const SERIALIZER_SPECIFIERS: &[&str] = &["v8", "node:v8"];
const LOADER_REGISTRATIONS: &[&str] = &["register", "registerHooks"];
/// The mock and spy methods that replace a member of the object they are given.
const MOCKS: &[&str] = &["method", "property", "getter", "setter", "spyOn"];
/// Calls whose callback runs around the tests, not as one.
const AROUND_TESTS: &[&str] = &[
    "describe",
    "suite",
    "before",
    "beforeEach",
    "beforeAll",
    "after",
    "afterEach",
    "afterAll",
];
const FUNCTIONS: &[&str] = &[
    "arrow_function",
    "function_expression",
    "function_declaration",
    "generator_function",
    "generator_function_declaration",
    "method_definition",
];
const WRITING_CALLS: &[&str] = &[
    "Object.defineProperty",
    "Object.defineProperties",
    "Object.assign",
    "Object.setPrototypeOf",
    "Reflect.set",
    "Reflect.defineProperty",
];

fn parse(source: &str) -> Option<Tree> {
    syntax::parse(tree_sitter_javascript::LANGUAGE.into(), source)
}

/// The text of a string literal without its quotes.
fn string_value<'s>(node: Node<'_>, source: &'s str) -> Option<&'s str> {
    if node.kind() != "string" {
        return None;
    }
    let raw = text(node, source);
    raw.get(1..raw.len().checked_sub(1)?)
}

/// Whether `call` is `require('module')` or `require('node:module')`.
fn requires_the_module_system(call: Node<'_>, source: &str) -> bool {
    required(call, source).is_some_and(|s| MODULE_SPECIFIERS.contains(&s))
}

/// Whether `call` is `require('./…')` or `require('../…')`: one of the project's modules.
fn requires_a_relative_path(call: Node<'_>, source: &str) -> bool {
    required(call, source).is_some_and(|s| s.starts_with('.'))
}

/// What `call` requires when it is `require('…')` with a string.
fn required<'s>(call: Node<'_>, source: &'s str) -> Option<&'s str> {
    let function = call.child_by_field_name("function")?;
    if call.kind() != "call_expression" || text(function, source) != "require" {
        return None;
    }
    string_value(
        call.child_by_field_name("arguments")?.named_child(0)?,
        source,
    )
}

/// `import invoice from '../invoice.js'`, `import * as invoice from '../invoice.js'`: the
/// module whole (named imports are its members, not it).
fn bind_project_import(statement: Node<'_>, source: &str, bound: &mut Bindings) {
    let mut stack = vec![statement];
    while let Some(node) = stack.pop() {
        match node.kind() {
            "import_clause" | "namespace_import" => {
                let mut cursor = node.walk();
                for child in node.named_children(&mut cursor) {
                    if child.kind() == "identifier" {
                        bound.project.push(text(child, source).to_owned());
                    } else if child.kind() == "namespace_import" {
                        stack.push(child);
                    }
                }
            }
            "named_imports" => {}
            _ => {
                let mut cursor = node.walk();
                stack.extend(node.named_children(&mut cursor));
            }
        }
    }
}

/// Whether `node` runs around the tests: inside no function, or only in callbacks given to
/// `describe`, `before`, `beforeEach` and the like.
fn around_the_tests(node: Node<'_>, source: &str) -> bool {
    let mut current = node;
    while let Some(parent) = current.parent() {
        if FUNCTIONS.contains(&parent.kind()) {
            let given_to = parent
                .parent()
                .filter(|args| args.kind() == "arguments")
                .and_then(|args| args.parent())
                .filter(|call| call.kind() == "call_expression")
                .and_then(|call| call.child_by_field_name("function"));
            let callee = given_to.map(|f| match f.kind() {
                "member_expression" => f
                    .child_by_field_name("property")
                    .map(|p| text(p, source))
                    .unwrap_or(""),
                _ => text(f, source),
            });
            if !callee.is_some_and(|c| AROUND_TESTS.contains(&c)) {
                return false;
            }
        }
        current = parent;
    }
    true
}

/// The names the file binds to node's module system, to its loader registrations and to
/// `require` functions.
#[derive(Default)]
struct Bindings {
    /// The module system or any member of it: `Module`, `{ Module: M }`, `* as nodeModule`.
    module: Vec<String>,
    /// `register` and `registerHooks`, as imported or destructured (under any local name).
    registrations: Vec<String>,
    /// `require` and what `createRequire(…)` returns.
    requires: Vec<String>,
    /// `createRequire`, as imported or destructured.
    create_require: Vec<String>,
    /// The project's own modules, bound whole from a relative path.
    project: Vec<String>,
}

impl Bindings {
    fn bind_member(&mut self, imported: &str, local: &str) {
        self.module.push(local.to_owned());
        if LOADER_REGISTRATIONS.contains(&imported) {
            self.registrations.push(local.to_owned());
        }
        if imported == "createRequire" {
            self.create_require.push(local.to_owned());
        }
    }

    /// Whether `root` is a name of the module system or of a `require`.
    fn hooks_through(&self, root: &str) -> bool {
        self.module.iter().chain(&self.requires).any(|n| n == root)
    }
}

fn bindings(root: Node<'_>, source: &str) -> Bindings {
    let mut bound = Bindings {
        requires: vec!["require".to_owned()],
        ..Bindings::default()
    };
    let mut stack = vec![root];
    let mut declarators = Vec::new();
    while let Some(node) = stack.pop() {
        match node.kind() {
            "variable_declarator" => declarators.push(node),
            "import_statement" => {
                let from = node
                    .child_by_field_name("source")
                    .and_then(|s| string_value(s, source));
                if from.is_some_and(|s| MODULE_SPECIFIERS.contains(&s)) {
                    bind_import(node, source, &mut bound);
                } else if from.is_some_and(|s| s.starts_with('.')) {
                    bind_project_import(node, source, &mut bound);
                }
                continue;
            }
            _ => {}
        }
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor));
    }
    // Declarations in source order, so `createRequire` is bound before what it makes.
    declarators.sort_by_key(|n| n.start_byte());
    for declarator in declarators {
        let (Some(name), Some(value)) = (
            declarator.child_by_field_name("name"),
            declarator.child_by_field_name("value"),
        ) else {
            continue;
        };
        if requires_a_relative_path(value, source) && name.kind() == "identifier" {
            bound.project.push(text(name, source).to_owned());
        } else if requires_the_module_system(value, source) {
            match name.kind() {
                "identifier" => bound.module.push(text(name, source).to_owned()),
                "object_pattern" => bind_pattern(name, source, &mut bound),
                _ => {}
            }
        } else if value.kind() == "call_expression"
            && value
                .child_by_field_name("function")
                .is_some_and(|f| bound.create_require.iter().any(|c| c == text(f, source)))
            && name.kind() == "identifier"
        {
            bound.requires.push(text(name, source).to_owned());
        }
    }
    bound
}

/// `const { Module: M, register } = require('node:module')`.
fn bind_pattern(pattern: Node<'_>, source: &str, bound: &mut Bindings) {
    let mut cursor = pattern.walk();
    for property in pattern.named_children(&mut cursor) {
        match property.kind() {
            "shorthand_property_identifier_pattern" => {
                let name = text(property, source);
                bound.bind_member(name, name);
            }
            "pair_pattern" => {
                if let (Some(key), Some(value)) = (
                    property.child_by_field_name("key"),
                    property.child_by_field_name("value"),
                ) {
                    bound.bind_member(text(key, source), text(value, source));
                }
            }
            _ => {}
        }
    }
}

/// `import Module, { register as hook } from 'node:module'`, `import * as nodeModule from …`.
fn bind_import(statement: Node<'_>, source: &str, bound: &mut Bindings) {
    let mut stack = vec![statement];
    while let Some(node) = stack.pop() {
        match node.kind() {
            "import_clause" | "namespace_import" => {
                let mut cursor = node.walk();
                for child in node.named_children(&mut cursor) {
                    if child.kind() == "identifier" {
                        bound.module.push(text(child, source).to_owned());
                    } else {
                        stack.push(child);
                    }
                }
            }
            "named_imports" => {
                let mut cursor = node.walk();
                stack.extend(node.named_children(&mut cursor));
            }
            "import_specifier" => {
                let imported = node
                    .child_by_field_name("name")
                    .map(|n| text(n, source))
                    .unwrap_or("");
                let local = node
                    .child_by_field_name("alias")
                    .map(|n| text(n, source))
                    .unwrap_or(imported);
                bound.bind_member(imported, local);
            }
            _ => {
                let mut cursor = node.walk();
                stack.extend(node.named_children(&mut cursor));
            }
        }
    }
}

/// The identifier a member or subscript chain starts from, with the name of its first member
/// (`Module.prototype._compile`: `Module`, `prototype`).
fn chain_root<'s>(mut node: Node<'_>, source: &'s str) -> Option<(&'s str, Option<&'s str>)> {
    let mut first_member = None;
    loop {
        match node.kind() {
            "member_expression" => {
                first_member = node
                    .child_by_field_name("property")
                    .map(|p| text(p, source));
                node = node.child_by_field_name("object")?;
            }
            "subscript_expression" => {
                first_member = None;
                node = node.child_by_field_name("object")?;
            }
            "parenthesized_expression" => node = node.named_child(0)?,
            "identifier" => return Some((text(node, source), first_member)),
            _ => return None,
        }
    }
}

/// Whether writing into `target` writes into the module system.
fn into_the_module_system(target: Node<'_>, source: &str, bound: &Bindings) -> bool {
    if !matches!(target.kind(), "member_expression" | "subscript_expression") {
        return false;
    }
    match chain_root(target, source) {
        // `module.constructor` is `Module`; `module.exports` is the file's own business.
        Some(("module", first)) => first == Some("constructor") || bound.hooks_through("module"),
        Some((root, _)) => bound.hooks_through(root),
        None => false,
    }
}

fn compact(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(80)
        .collect()
}

/// The module-system hooks in `source`, each with its expression's text.
fn constructs(source: &str) -> Vec<Construct> {
    let Some(tree) = parse(source) else {
        return Vec::new();
    };
    let bound = bindings(tree.root_node(), source);
    let hook =
        |node: Node<'_>, name: String| Construct::of_node(node, name, HarnessKind::Hook, source);
    let channel_write = |node: Node<'_>, name: String| Construct {
        kind: HarnessKind::ResultMachinery,
        ..hook(node, name)
    };
    let mut found = Vec::new();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        match node.kind() {
            "assignment_expression" | "augmented_assignment_expression" => {
                if let Some(left) = node.child_by_field_name("left")
                    && into_the_module_system(left, source, &bound)
                {
                    found.push(hook(node, compact(text(left, source))));
                }
            }
            "import_statement" => {
                let from = node
                    .child_by_field_name("source")
                    .and_then(|s| string_value(s, source));
                if from.is_some_and(|f| SERIALIZER_SPECIFIERS.contains(&f)) {
                    found.push(channel_write(
                        node,
                        format!("import {}", from.unwrap_or("")),
                    ));
                }
            }
            "call_expression" => {
                let function = node.child_by_field_name("function");
                let callee = function
                    .map(|f| compact(text(f, source)))
                    .unwrap_or_default();
                let first_argument = node
                    .child_by_field_name("arguments")
                    .and_then(|args| args.named_child(0));
                if let Some(written) =
                    writes_the_result_channel(node, &callee, first_argument, source)
                {
                    found.push(channel_write(node, written));
                    let mut cursor = node.walk();
                    stack.extend(node.children(&mut cursor));
                    continue;
                }
                let writes = WRITING_CALLS.contains(&callee.as_str())
                    && first_argument.is_some_and(|a| {
                        into_the_module_system(a, source, &bound)
                            || (a.kind() == "identifier" && bound.hooks_through(text(a, source)))
                    });
                let registers = function.is_some_and(|f| match f.kind() {
                    "identifier" => bound.registrations.iter().any(|r| r == text(f, source)),
                    "member_expression" => {
                        f.child_by_field_name("property")
                            .is_some_and(|p| LOADER_REGISTRATIONS.contains(&text(p, source)))
                            && chain_root(f, source)
                                .is_some_and(|(root, _)| bound.module.iter().any(|m| m == root))
                    }
                    _ => false,
                });
                let mocks_the_project = function.is_some_and(|f| {
                    f.kind() == "member_expression"
                        && f.child_by_field_name("property")
                            .is_some_and(|p| MOCKS.contains(&text(p, source)))
                        && f.child_by_field_name("object").is_some_and(|o| {
                            let object = text(o, source);
                            object == "mock"
                                || object.ends_with(".mock")
                                || object == "vi"
                                || object == "jest"
                        })
                }) && first_argument
                    .and_then(|a| chain_root(a, source).map(|(root, _)| root))
                    .is_some_and(|root| bound.project.iter().any(|p| p == root))
                    && around_the_tests(node, source);
                if writes {
                    let target = first_argument
                        .map(|a| compact(text(a, source)))
                        .unwrap_or_default();
                    found.push(hook(node, format!("{callee}({target})")));
                } else if registers {
                    found.push(hook(node, callee));
                } else if mocks_the_project {
                    let arguments: Vec<String> = node
                        .child_by_field_name("arguments")
                        .map(|args| {
                            let mut cursor = args.walk();
                            args.named_children(&mut cursor)
                                .take(2)
                                .map(|a| compact(text(a, source)))
                                .collect()
                        })
                        .unwrap_or_default();
                    let mut patch = hook(node, format!("{callee}({})", arguments.join(", ")));
                    patch.kind = HarnessKind::ProductPatch;
                    found.push(patch);
                }
            }
            _ => {}
        }
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor));
    }
    found.sort_by_key(|c| (c.line, c.name.clone()));
    found
}

/// What a call writes into node's result channel, if it can: a test file runs in a child
/// of `node --test`, whose standard output is the channel its results reach the runner by (V8-
/// serialized events, parsed wherever they appear in the output). So raw writes to standard
/// output (`process.stdout.write`, `writeSync(1, …)`) and V8's serializer can report a test
/// that never ran; `console.log` writes text, which never parses as an event.
fn writes_the_result_channel(
    call: Node<'_>,
    callee: &str,
    first_argument: Option<Node<'_>>,
    source: &str,
) -> Option<String> {
    if required(call, source).is_some_and(|s| SERIALIZER_SPECIFIERS.contains(&s)) {
        return Some(format!(
            "{callee}({})",
            required(call, source).unwrap_or("")
        ));
    }
    let method = callee.rsplit('.').next().unwrap_or(callee);
    let to_stdout = |object: &str| object.ends_with("stdout") || object.ends_with("stdout.fd");
    let object = callee
        .rsplit_once('.')
        .map(|(object, _)| object)
        .unwrap_or("");
    let raw_write = matches!(method, "write" | "_write" | "_writev") && to_stdout(object);
    let fd_write = matches!(method, "writeSync" | "write" | "writev" | "writevSync")
        && first_argument.is_some_and(|a| {
            let target = compact(text(a, source));
            target == "1" || to_stdout(&target)
        });
    (raw_write || fd_write).then(|| callee.to_owned())
}

/// The module-system hooks the change adds or alters in the JavaScript file at `path`: one the
/// base holds as it is, text for text, is none.
pub(crate) fn scan(path: &str, base: Option<&str>, candidate: &str) -> Vec<Construct> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let javascript = [".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx"]
        .iter()
        .any(|ext| name.ends_with(ext));
    if !javascript {
        return Vec::new();
    }
    let before = base.map(constructs).unwrap_or_default();
    constructs(candidate)
        .into_iter()
        .filter(|c| {
            !before
                .iter()
                .any(|b| b.kind == c.kind && b.name == c.name && b.source == c.source)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places(found: &[Construct]) -> Vec<(&str, u32)> {
        found.iter().map(|c| (c.name.as_str(), c.line)).collect()
    }

    /// A test file's standard output is node's result channel: V8's serializer and raw writes
    /// to it can report a test that never ran; text through `console.log` and writes to
    /// standard error cannot.
    #[test]
    fn writes_into_the_result_channel_are_result_machinery() {
        let test = "import { serialize } from 'node:v8';\nimport { writeSync } from 'node:fs';\nconst v8 = require('v8');\nprocess.stdout.write(serialize({}));\nwriteSync(1, Buffer.alloc(4));\nfs.writeSync(process.stdout.fd, bytes);\nconsole.log('total', 70);\nprocess.stderr.write('slow test');\nfs.writeSync(2, 'x');\n";
        let found = scan("test/invoice.test.js", None, test);
        assert_eq!(
            places(&found),
            [
                ("import node:v8", 1),
                ("require(v8)", 3),
                ("process.stdout.write", 4),
                ("writeSync", 5),
                ("fs.writeSync", 6)
            ]
        );
        assert!(
            found.iter().all(|c| c.kind == HarnessKind::ResultMachinery),
            "{found:?}"
        );
    }

    #[test]
    fn a_register_hook_on_the_module_system_is_a_hook() {
        let register = "'use strict';\n\nconst Module = require('node:module');\n\nconst compile = Module.prototype._compile;\nModule.prototype._compile = function (source, filename) {\n  return compile.call(this, source, filename);\n};\nModule._extensions['.js'] = Module._extensions['.js'];\n";
        assert_eq!(
            places(&scan("test/register.js", None, register)),
            [
                ("Module.prototype._compile", 6),
                ("Module._extensions['.js']", 9)
            ]
        );
        // The base's hook, as it is, is no finding.
        assert!(scan("test/register.js", Some(register), register).is_empty());
    }

    #[test]
    fn the_module_cache_and_require_extensions_are_hooks_and_a_fresh_load_is_not() {
        let test = "const path = require('node:path');\nconst product = path.join(__dirname, '..', 'invoice.js');\ndelete require.cache[product];\nrequire.cache[product] = { exports: {} };\nrequire.extensions['.js'] = () => {};\nmodule.exports = { product };\nmodule.constructor.prototype.require = require;\n";
        assert_eq!(
            places(&scan("test/invoice.test.js", None, test)),
            [
                ("require.cache[product]", 4),
                ("require.extensions['.js']", 5),
                ("module.constructor.prototype.require", 7)
            ]
        );
    }

    #[test]
    fn destructured_and_imported_members_and_loader_registrations_are_hooks() {
        let cjs = "const { Module: Loader, register } = require('module');\nObject.defineProperty(Loader, '_load', { value: () => ({}) });\nregister('./loader.mjs');\n";
        assert_eq!(
            places(&scan("test/setup.js", None, cjs)),
            [("Object.defineProperty(Loader)", 2), ("register", 3)]
        );
        let esm = "import nodeModule, { register as hook, createRequire } from 'node:module';\nconst load = createRequire(import.meta.url);\nhook('./loader.mjs', import.meta.url);\nnodeModule.registerHooks({});\nload.cache['/srv/invoice.js'] = { exports: {} };\n";
        assert_eq!(
            places(&scan("test/setup.mjs", None, esm)),
            [
                ("hook", 3),
                ("nodeModule.registerHooks", 4),
                ("load.cache['/srv/invoice.js']", 5)
            ]
        );
    }

    #[test]
    fn a_mock_of_a_project_module_around_the_tests_is_a_product_patch() {
        let test = "import { test, describe, beforeEach, mock } from 'node:test';\nimport * as invoice from '../invoice.js';\nimport mailer from '../mailer.js';\nimport { total } from '../invoice.js';\nimport fs from 'node:fs';\n\nmock.method(invoice, 'total', () => 70);\nmock.method(fs, 'readFileSync', () => '');\n\ndescribe('discounts', () => {\n  beforeEach(() => {\n    mock.property(invoice.rates, 'standard', 0.2);\n  });\n  test('a mailer stub inside a test is the test\\'s own', (t) => {\n    t.mock.method(mailer, 'send', () => true);\n    vi.spyOn(invoice, 'round');\n  });\n});\nfunction later() {\n  mock.method(mailer, 'send');\n}\n";
        let found = scan("test/discount.test.mjs", None, test);
        let names: Vec<(&str, u32, HarnessKind)> = found
            .iter()
            .map(|c| (c.name.as_str(), c.line, c.kind))
            .collect();
        assert_eq!(
            names,
            [
                (
                    "mock.method(invoice, 'total')",
                    7,
                    HarnessKind::ProductPatch
                ),
                (
                    "mock.property(invoice.rates, 'standard')",
                    12,
                    HarnessKind::ProductPatch
                )
            ]
        );
        let cjs = "const { mock } = require('node:test');\nconst invoice = require('./invoice');\nif (invoice.REVISION) {\n  mock.method(invoice, 'total', () => 70);\n}\n";
        assert_eq!(
            places(&scan("invoice.test.js", None, cjs)),
            [("mock.method(invoice, 'total')", 4)]
        );
    }

    #[test]
    fn ordinary_test_code_has_no_hook() {
        let test = "'use strict';\n\nconst { test, mock } = require('node:test');\nconst assert = require('node:assert/strict');\nconst invoice = require('../invoice');\nconst Module = { prototype: {} };\n\nModule.prototype.total = 1;\nmodule.exports.samples = [1, 2];\nconst cached = require.cache;\n\ntest('tax is added', () => {\n  mock.method(Math, 'round');\n  assert.equal(invoice.total(100, 0.2, 0), 120);\n});\n";
        assert!(scan("test/invoice.test.js", None, test).is_empty());
        assert!(scan("invoice.py", None, "require.cache[x] = 1\n").is_empty());
    }
}
