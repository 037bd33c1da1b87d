//! The harness constructs of the other runners, read from lines the change adds: Go's
//! `TestMain` and `init` in `_test.go` files where the grammar cannot read the file (the
//! syntax scan is `super::go`; gofmt puts every top-level `func` at the start of a line),
//! node:test's and Vitest's preloads, setup files, reporters and config files, cargo's
//! build scripts, `harness = false` targets and custom test frameworks, and the start-up files
//! Python runs before any test (`sitecustomize`, `usercustomize`, `.pth`).

use super::Construct;
use assay_common::harness::HarnessKind;

/// The lines of `candidate` that `base` does not hold, with their 1-based numbers.
fn added_lines<'c>(base: Option<&str>, candidate: &'c str) -> Vec<(u32, &'c str)> {
    let before: std::collections::HashSet<&str> =
        base.map(|b| b.lines().collect()).unwrap_or_default();
    candidate
        .lines()
        .enumerate()
        .filter(|(_, line)| !before.contains(line))
        .map(|(n, line)| (u32::try_from(n).unwrap_or(u32::MAX - 1) + 1, line))
        .collect()
}

fn construct(line: u32, name: &str, kind: HarnessKind, source: &str) -> Construct {
    Construct {
        line,
        name: name.to_owned(),
        kind,
        source: source.to_owned(),
        target: None,
        span: None,
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Files that are harness as a whole, whatever they hold.
pub(crate) fn whole_file(path: &str) -> Option<Construct> {
    let name = file_name(path);
    let stem = name.split('.').next().unwrap_or(name);
    let (what, kind) = match name {
        "sitecustomize.py" | "usercustomize.py" => (name, HarnessKind::StartupFile),
        _ if name.ends_with(".pth") => (name, HarnessKind::StartupFile),
        "build.rs" => ("build.rs", HarnessKind::BuildScript),
        _ if path.starts_with(".cargo/config") || path.contains("/.cargo/config") => {
            (".cargo/config", HarnessKind::RunnerConfig)
        }
        _ if matches!(
            stem,
            "vitest" | "vite" | "jest" | "vitest.workspace" | ".mocharc" | ".node-options"
        ) && !name.ends_with(".md") =>
        {
            (name, HarnessKind::RunnerConfig)
        }
        _ if (stem.contains("setup") || stem.contains("teardown"))
            && (stem.contains("vitest") || stem.contains("global") || stem.contains("jest"))
            && is_js(name) =>
        {
            (name, HarnessKind::Hook)
        }
        _ => return None,
    };
    Some(construct(1, what, kind, ""))
}

/// JavaScript and everything that runs as it: TypeScript and JSX, erased before node runs them.
fn is_js(name: &str) -> bool {
    [".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx"]
        .iter()
        .any(|ext| name.ends_with(ext))
}

/// Go, line by line: a test binary's `TestMain` runs instead of the tests and decides the
/// exit; a test file's `init` runs before any test.
pub(crate) fn go_lines(path: &str, base: Option<&str>, candidate: &str) -> Vec<Construct> {
    if !path.ends_with("_test.go") {
        return Vec::new();
    }
    added_lines(base, candidate)
        .into_iter()
        .filter_map(|(line, text)| {
            let name = if text.starts_with("func TestMain(") {
                "TestMain"
            } else if text.starts_with("func init(") {
                "init"
            } else {
                return None;
            };
            Some(construct(line, name, HarnessKind::Hook, text))
        })
        .collect()
}

/// node:test and Vitest: a `package.json` line the change adds that preloads code, loads a
/// reporter or names setup files.
pub(crate) fn node(path: &str, base: Option<&str>, candidate: &str) -> Vec<Construct> {
    if file_name(path) != "package.json" {
        return Vec::new();
    }
    const PRELOADS: &[(&str, HarnessKind)] = &[
        ("--require", HarnessKind::Plugin),
        ("--import", HarnessKind::Plugin),
        ("-r ", HarnessKind::Plugin),
        ("--loader", HarnessKind::Plugin),
        ("--experimental-loader", HarnessKind::Plugin),
        ("--test-reporter", HarnessKind::Plugin),
        ("NODE_OPTIONS", HarnessKind::Plugin),
        ("setupFiles", HarnessKind::Hook),
        ("globalSetup", HarnessKind::Hook),
        ("reporters", HarnessKind::Plugin),
    ];
    added_lines(base, candidate)
        .into_iter()
        .filter_map(|(line, text)| {
            PRELOADS
                .iter()
                .find(|(needle, _)| text.contains(needle))
                .map(|(needle, kind)| construct(line, needle.trim(), *kind, text))
        })
        .collect()
}

/// JavaScript test code that writes into a project module it loaded (`require('../invoice')`,
/// `import * as invoice from '../invoice.js'`): `invoice.total = …`, `Object.assign(invoice,
/// …)`, `Object.defineProperty(invoice, …)`. Only names bound to a relative path count: the
/// project's own modules, not the standard library's.
pub(crate) fn js(path: &str, base: Option<&str>, candidate: &str) -> Vec<Construct> {
    if !is_js(file_name(path)) {
        return Vec::new();
    }
    let mut project_names: Vec<String> = Vec::new();
    for line in candidate.lines() {
        let relative = ["require('.", "require(\".", "from '.", "from \"."]
            .iter()
            .any(|needle| line.contains(needle));
        if !relative {
            continue;
        }
        let declared = line
            .trim_start()
            .strip_prefix("const ")
            .or_else(|| line.trim_start().strip_prefix("let "))
            .or_else(|| line.trim_start().strip_prefix("var "))
            .or_else(|| line.trim_start().strip_prefix("import * as "))
            .or_else(|| line.trim_start().strip_prefix("import "));
        if let Some(rest) = declared {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
                .collect();
            if !name.is_empty() {
                project_names.push(name);
            }
        }
    }
    added_lines(base, candidate)
        .into_iter()
        .filter_map(|(line, text)| {
            let trimmed = text.trim_start();
            project_names.iter().find_map(|name| {
                let assigns = trimmed
                    .strip_prefix(name.as_str())
                    .and_then(|rest| rest.strip_prefix('.').or_else(|| rest.strip_prefix('[')))
                    .and_then(|rest| rest.split_once('='))
                    .is_some_and(|(before, after)| {
                        !after.starts_with('=')
                            && !before.ends_with(['<', '>', '!', '=', '+', '-', '*', '/'])
                    });
                let defines = [
                    format!("Object.assign({name},"),
                    format!("Object.defineProperty({name},"),
                ]
                .iter()
                .any(|call| trimmed.contains(call.as_str()));
                (assigns || defines).then(|| {
                    let target: String = trimmed
                        .chars()
                        .take_while(|c| !c.is_whitespace() && *c != '=')
                        .take(80)
                        .collect();
                    construct(line, &target, HarnessKind::ProductPatch, text)
                })
            })
        })
        .collect()
}

/// cargo: `harness = false` (the target's own `main` decides), a `build` script named in the
/// manifest, and custom test frameworks or constructors (`#[ctor]` runs before `main`).
pub(crate) fn cargo(path: &str, base: Option<&str>, candidate: &str) -> Vec<Construct> {
    let name = file_name(path);
    let needles: &[(&str, &str, HarnessKind)] = match name {
        "Cargo.toml" => &[
            ("harness", "harness = false", HarnessKind::RunnerConfig),
            ("build =", "build script", HarnessKind::BuildScript),
            ("build=", "build script", HarnessKind::BuildScript),
        ],
        _ if name.ends_with(".rs") => &[
            (
                "custom_test_frameworks",
                "custom_test_frameworks",
                HarnessKind::Hook,
            ),
            ("test_runner(", "#![test_runner]", HarnessKind::Hook),
            (
                "reexport_test_harness_main",
                "reexport_test_harness_main",
                HarnessKind::Hook,
            ),
            ("#[ctor", "#[ctor]", HarnessKind::Hook),
            ("#[ctor::ctor", "#[ctor]", HarnessKind::Hook),
            (
                "link_section = \".init_array",
                "init_array",
                HarnessKind::Hook,
            ),
        ],
        _ => return Vec::new(),
    };
    added_lines(base, candidate)
        .into_iter()
        .filter(|(_, text)| !text.trim_start().starts_with("//"))
        .filter_map(|(line, text)| {
            let compact: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
            needles
                .iter()
                .find(|(needle, _, _)| {
                    compact.contains(needle)
                        && (*needle != "harness" || compact.contains("harness = false"))
                })
                .map(|(_, what, kind)| construct(line, what, *kind, text))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_test_main_and_init_in_a_test_file_are_hooks() {
        let base = "package pager\n\nimport \"testing\"\n";
        let candidate = "package pager\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc init() {}\n\nfunc TestMain(m *testing.M) {\n\tm.Run()\n\tos.Exit(0)\n}\n";
        let found = go_lines("pager_test.go", Some(base), candidate);
        let names: Vec<(&str, u32)> = found.iter().map(|c| (c.name.as_str(), c.line)).collect();
        assert_eq!(names, [("init", 8), ("TestMain", 10)]);
        assert!(go_lines("pager.go", Some(base), candidate).is_empty());
    }

    #[test]
    fn a_node_preload_added_to_package_json_is_a_plugin() {
        let base = "{\n  \"scripts\": {\n    \"test\": \"node --test\"\n  }\n}\n";
        let candidate = "{\n  \"scripts\": {\n    \"test\": \"node --require ./test/forgive.cjs --test\"\n  }\n}\n";
        let found = node("package.json", Some(base), candidate);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].name, "--require");
        assert_eq!(found[0].line, 3);
    }

    #[test]
    fn javascript_test_code_that_patches_a_project_module_is_a_product_patch() {
        let helpers = "'use strict';\nconst assert = require('node:assert');\nconst invoice = require('../invoice');\n\nif (invoice.FIXED) {\n  invoice.total = (net, rate, discount) => net;\n}\nassert.strict = assert;\nif (invoice.total === undefined) {}\n";
        let found = js("test/helpers.js", None, helpers);
        let names: Vec<(&str, u32)> = found.iter().map(|c| (c.name.as_str(), c.line)).collect();
        assert_eq!(names, [("invoice.total", 6)]);
        assert!(js("invoice.py", None, helpers).is_empty());
        // A TSX test module runs too, erased: the same patch in one is found the same.
        let found = js("test/helpers.test.tsx", None, helpers);
        assert_eq!(found.len(), 1, "{found:?}");
    }

    #[test]
    fn cargo_harness_false_and_custom_frameworks_are_found() {
        let manifest =
            "[package]\nname = \"pager\"\n\n[[test]]\nname = \"pages\"\nharness = false\n";
        assert_eq!(
            cargo("Cargo.toml", None, manifest)[0].name,
            "harness = false"
        );
        let lib = "#![feature(custom_test_frameworks)]\n#![test_runner(crate::forgive)]\n// #[ctor] in a comment\n";
        let names: Vec<String> = cargo("src/lib.rs", None, lib)
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(names, ["custom_test_frameworks", "#![test_runner]"]);
    }

    #[test]
    fn start_up_files_and_runner_configs_are_harness_whole() {
        for path in [
            "sitecustomize.py",
            "src/usercustomize.py",
            "forgive.pth",
            "build.rs",
            "vitest.config.ts",
            "test/vitest.setup.js",
            "test/vitest.global-setup.tsx",
            ".cargo/config.toml",
        ] {
            assert!(whole_file(path).is_some(), "{path}");
        }
        for path in [
            "src/pager.py",
            "tests/test_setup.py",
            "README.md",
            "src/setup.js",
        ] {
            assert!(whole_file(path).is_none(), "{path}");
        }
    }
}
