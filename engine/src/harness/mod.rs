//! The harness-change classifier: what of the change can alter how tests are collected, run or
//! reported (hooks, plugins, runner configuration, start-up files, result machinery, support
//! code that patches the product), found from the syntax of the change's files, and the plan
//! that checks it: the candidate tree with those files put back as the base has them, for one
//! differential run of the proving tests. See SECURITY.md, "The change as its own judge".
//!
//! A construct the base already has, unchanged, is no finding: only what the change adds or
//! alters can be the change judging itself.

mod config;
mod go;
mod inert;
mod javascript;
mod other;
mod python;

use crate::source::{self, Change, SourceError};
use assay_common::harness::{HarnessFinding, HarnessKind, HarnessPlan, InertProduct};
use assay_common::runner::RunnerKind;
use std::collections::BTreeSet;
use std::path::Path;

/// One construct as a scan finds it, with its source text to tell a changed one from one the
/// base holds as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Construct {
    pub line: u32,
    pub name: String,
    pub kind: HarnessKind,
    pub source: String,
    /// For a product patch, the top-level module it writes into, when the syntax names it.
    pub target: Option<String>,
    /// Its bytes in the file, where it is one statement or definition the differential run
    /// can take out alone (Python); `None`: only the whole file can be put back.
    pub span: Option<(usize, usize)>,
}

impl Construct {
    /// A construct of `kind` that is the syntax node `node` of `source`, named `name`, with no
    /// target or span of its own.
    pub(crate) fn of_node(
        node: tree_sitter::Node<'_>,
        name: String,
        kind: HarnessKind,
        source: &str,
    ) -> Self {
        Self {
            line: crate::syntax::line(node),
            name,
            kind,
            source: crate::syntax::text(node, source).to_owned(),
            target: None,
            span: None,
        }
    }
}

/// What a Python file is to the runner, which decides what in it is harness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// `conftest.py`: pytest loads it as a plugin.
    Conftest,
    /// A module named as a plugin (`-p`, `pytest_plugins`).
    Plugin,
    /// A test file that is not a test module: helpers, fixtures, `__init__.py`.
    Support,
    /// A test module: its hooks are not registered, but its module-level code and classes run.
    TestModule,
}

/// One changed file as the classifier reads it: `None` on the side it is absent from.
#[derive(Clone, Debug)]
pub struct ChangedSource {
    /// The file's repository-relative path.
    pub path: String,
    /// Its contents on the base.
    pub base: Option<String>,
    /// Its contents on the candidate.
    pub candidate: Option<String>,
    /// A test file by the runner's conventions (and the configured globs).
    pub test_file: bool,
    /// A test module the change's proving run collects: its constructs cannot be taken away
    /// from its tests.
    pub test_module: bool,
}

/// Root configuration files whose `-p` plugins name modules even when the change leaves the
/// configuration alone.
const ROOT_CONFIGS: &[&str] = &["pyproject.toml", "pytest.ini", "setup.cfg", "tox.ini"];

/// The harness constructs among the change's files. `unchanged_configs` are the candidate's
/// root configuration files the change does not touch (path and text), for the plugins they
/// load. `project_modules` are the project's own top-level modules: in a test module, an
/// autouse fixture or module-level code that patches another module counts only when it
/// patches one of them (patching `time` or `random` for a deterministic test is the test's
/// own business); an empty set counts every patch.
pub fn classify(
    files: &[ChangedSource],
    unchanged_configs: &[(String, String)],
    project_modules: &BTreeSet<String>,
) -> Vec<HarnessFinding> {
    findings_of(files, constructs(files, unchanged_configs, project_modules))
}

/// Each construct [`classify`] reports, with the file it is in.
fn constructs(
    files: &[ChangedSource],
    unchanged_configs: &[(String, String)],
    project_modules: &BTreeSet<String>,
) -> Vec<(String, Construct)> {
    let mut found: Vec<(String, Construct)> = Vec::new();
    let mut plugin_names: Vec<String> = Vec::new();
    for (path, text) in unchanged_configs {
        plugin_names.extend(config::scan(path, Some(text), text).1);
    }
    for file in files {
        let Some(candidate) = &file.candidate else {
            continue;
        };
        if config::is_config(&file.path) {
            let (constructs, plugins) = config::scan(&file.path, file.base.as_deref(), candidate);
            found.extend(constructs.into_iter().map(|c| (file.path.clone(), c)));
            plugin_names.extend(plugins);
        }
        if file_name(&file.path) == "conftest.py" {
            plugin_names.extend(python::scan(candidate, Role::Conftest).plugin_names);
        }
    }
    for file in files {
        let Some(candidate) = &file.candidate else {
            continue;
        };
        let path = file.path.as_str();
        if let Some(construct) = other::whole_file(path) {
            found.push((file.path.clone(), construct));
        }
        if path.ends_with(".py") {
            let role = if file_name(path) == "conftest.py" {
                Some(Role::Conftest)
            } else if plugin_names.iter().any(|name| names_module(path, name)) {
                Some(Role::Plugin)
            } else if file.test_module {
                Some(Role::TestModule)
            } else if file.test_file {
                Some(Role::Support)
            } else {
                None
            };
            if let Some(role) = role {
                let before = file
                    .base
                    .as_deref()
                    .map(|b| python::scan(b, role).constructs)
                    .unwrap_or_default();
                for construct in python::scan(candidate, role).constructs {
                    let outside_the_project = role == Role::TestModule
                        && !project_modules.is_empty()
                        && construct
                            .target
                            .as_ref()
                            .is_some_and(|module| !project_modules.contains(module));
                    if outside_the_project {
                        continue;
                    }
                    if !before.iter().any(|b| same_construct(b, &construct)) {
                        found.push((file.path.clone(), construct));
                    }
                }
            }
        }
        let base = file.base.as_deref();
        let test_js = match file.test_file {
            true => {
                let mut found = other::js(path, base, candidate);
                found.extend(javascript::scan(path, base, candidate));
                found
            }
            false => Vec::new(),
        };
        for construct in go::scan(path, base, candidate)
            .into_iter()
            .chain(test_js)
            .chain(other::node(path, base, candidate))
            .chain(other::cargo(path, base, candidate))
        {
            found.push((file.path.clone(), construct));
        }
    }
    found
}

fn findings_of(files: &[ChangedSource], found: Vec<(String, Construct)>) -> Vec<HarnessFinding> {
    let mut findings: Vec<HarnessFinding> = found
        .into_iter()
        .map(|(path, construct)| {
            let replaceable = !files.iter().any(|f| f.path == path && f.test_module);
            HarnessFinding {
                file: path,
                line: construct.line,
                construct: construct.name,
                kind: construct.kind,
                replaceable,
            }
        })
        .collect();
    findings.sort_by(|a, b| (&a.file, a.line, &a.construct).cmp(&(&b.file, b.line, &b.construct)));
    findings.dedup();
    findings
}

/// The Python file `candidate` with each construct the change added or altered taken out: put
/// back as the base has it where the base has one of that name and kind, else replaced by
/// `pass` (with as many newlines, so a construct inside a block leaves the block valid). The
/// rest of the file, the change's fixtures among it, stays. `None` when a construct cannot be
/// taken out alone or the result does not parse: the whole file is put back instead.
fn without_constructs(
    candidate: &str,
    base: Option<&str>,
    role: Role,
    changed: &[&Construct],
) -> Option<String> {
    let base_constructs = base
        .map(|b| python::scan(b, role).constructs)
        .unwrap_or_default();
    let mut spans: Vec<((usize, usize), String)> = Vec::new();
    for construct in changed {
        let span = construct.span?;
        let replacement = match base_constructs
            .iter()
            .find(|b| b.kind == construct.kind && b.name == construct.name)
        {
            Some(before) => before.source.clone(),
            None => format!(
                "pass{}",
                "\n".repeat(candidate.get(span.0..span.1)?.matches('\n').count())
            ),
        };
        spans.push((span, replacement));
    }
    // Outermost first; a span inside one already taken out goes with it.
    spans.sort_by(|a, b| a.0.0.cmp(&b.0.0).then(b.0.1.cmp(&a.0.1)));
    let mut kept: Vec<((usize, usize), String)> = Vec::new();
    for (span, replacement) in spans {
        match kept.last() {
            Some((last, _)) if span.0 < last.1 => continue,
            _ => kept.push((span, replacement)),
        }
    }
    let mut text = candidate.to_owned();
    for ((start, end), replacement) in kept.into_iter().rev() {
        text.replace_range(start..end, &replacement);
    }
    let parsed = python::parse(&text)?;
    (!parsed.root_node().has_error()).then_some(text)
}

fn same_construct(a: &Construct, b: &Construct) -> bool {
    a.kind == b.kind && a.name == b.name && a.source == b.source
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Whether `path` is the module a plugin name imports: `pager._support` is
/// `pager/_support.py` or `pager/_support/__init__.py`, under any source root (`src/`).
fn names_module(path: &str, module: &str) -> bool {
    let relative = module.replace('.', "/");
    [format!("{relative}.py"), format!("{relative}/__init__.py")]
        .iter()
        .any(|end| path == end || path.ends_with(&format!("/{end}")))
}

/// Documentation a test run does not execute: set aside when judging whether the product
/// change is inert.
fn is_documentation(path: &str) -> bool {
    let name = file_name(path);
    let upper = name.to_ascii_uppercase();
    [".md", ".rst", ".txt", ".adoc"]
        .iter()
        .any(|ext| name.ends_with(ext))
        || ["LICENSE", "CHANGELOG", "CHANGES", "AUTHORS", "NOTICE"]
            .iter()
            .any(|n| upper.starts_with(n))
        || path.starts_with("docs/")
}

/// The changed product files, when every one is the same program as on the base without its
/// comments and docstrings (and there is one at least). Harness files and configuration are
/// not product; documentation is set aside.
pub fn inert_product(files: &[ChangedSource], findings: &[HarnessFinding]) -> Option<InertProduct> {
    let product: Vec<&ChangedSource> = files
        .iter()
        .filter(|f| {
            !f.test_file
                && !config::is_config(&f.path)
                && !is_documentation(&f.path)
                && !findings.iter().any(|h| h.file == f.path)
        })
        .collect();
    if product.is_empty() {
        return None;
    }
    for file in &product {
        let (Some(base), Some(candidate)) = (&file.base, &file.candidate) else {
            return None;
        };
        if inert::same_program(&file.path, base, candidate) != Some(true) {
            return None;
        }
    }
    Some(InertProduct {
        files: product.iter().map(|f| f.path.clone()).collect(),
    })
}

/// Whether a changed file may hold a harness construct or decide inertness, so is worth reading.
fn worth_reading(path: &str) -> bool {
    let name = file_name(path);
    [
        ".py", ".pth", ".rs", ".toml", ".ini", ".cfg", ".go", ".json", ".js", ".mjs", ".cjs",
        ".jsx", ".ts", ".mts", ".cts", ".tsx",
    ]
    .iter()
    .any(|ext| name.ends_with(ext))
        || path.contains(".cargo/config")
        || name.starts_with(".mocharc")
}

/// Reads the change's files and classifies them; builds the differential tree when a person has
/// not accepted the harness change and every finding can be replaced. Runs where the
/// repository is.
pub fn plan(
    repo: &Path,
    change: &Change,
    runner: RunnerKind,
    trusted: bool,
) -> Result<HarnessPlan, SourceError> {
    let is_test_file = |path: &str| change.changed_test_files.iter().any(|f| f.path == path);
    let text = |bytes: Option<Vec<u8>>| bytes.map(|b| String::from_utf8_lossy(&b).into_owned());
    let unread_product = change
        .changed
        .iter()
        .any(|f| !worth_reading(&f.path) && !is_test_file(&f.path) && !is_documentation(&f.path));
    let wanted: Vec<&crate::source::ChangedFile> = change
        .changed
        .iter()
        .filter(|f| worth_reading(&f.path))
        .collect();
    let paths: Vec<&str> = wanted.iter().map(|f| f.path.as_str()).collect();
    let bases = source::read_files(repo, &change.base.tree, &paths)?;
    let candidates = source::read_files(repo, &change.candidate.tree, &paths)?;
    let files: Vec<ChangedSource> = wanted
        .iter()
        .zip(bases.into_iter().zip(candidates))
        .map(|(changed, (base, candidate))| {
            let test_file = is_test_file(&changed.path);
            ChangedSource {
                path: changed.path.clone(),
                base: text(base),
                candidate: if changed.deleted {
                    None
                } else {
                    text(candidate)
                },
                test_file,
                test_module: test_file && runner.is_test_module(&changed.path),
            }
        })
        .collect();
    let unchanged: Vec<&str> = ROOT_CONFIGS
        .iter()
        .copied()
        .filter(|config| !change.changed.iter().any(|f| f.path == *config))
        .collect();
    let unchanged_configs: Vec<(String, String)> = unchanged
        .iter()
        .zip(source::read_files(
            repo,
            &change.candidate.tree,
            &unchanged,
        )?)
        .filter_map(|(path, bytes)| Some(((*path).to_owned(), text(bytes)?)))
        .collect();
    let mut project_modules = BTreeSet::new();
    for dir in ["", "src", "lib", "python"] {
        for name in source::entry_names(repo, &change.candidate.tree, dir)? {
            project_modules.insert(name.strip_suffix(".py").unwrap_or(&name).to_owned());
        }
    }
    let found = constructs(&files, &unchanged_configs, &project_modules);
    let findings = findings_of(&files, found.clone());
    let inert_product = match unread_product {
        true => None,
        false => inert_product(&files, &findings),
    };
    let mut reverted_files: Vec<String> = Vec::new();
    let mut rewritten: Vec<(String, Vec<u8>)> = Vec::new();
    let all_replaceable = findings.iter().all(|f| f.replaceable);
    if !trusted && all_replaceable {
        for finding in &findings {
            let path = &finding.file;
            if reverted_files.contains(path) {
                continue;
            }
            reverted_files.push(path.clone());
            // A Python harness file loses only its harness constructs; another is put back
            // whole (removed where the base has none).
            let file = files.iter().find(|f| &f.path == path);
            let role = match file_name(path) {
                "conftest.py" => Role::Conftest,
                _ => Role::Support,
            };
            let in_file: Vec<&Construct> = found
                .iter()
                .filter(|(p, _)| p == path)
                .map(|(_, c)| c)
                .collect();
            let taken_out = file.filter(|_| path.ends_with(".py")).and_then(|f| {
                without_constructs(f.candidate.as_deref()?, f.base.as_deref(), role, &in_file)
            });
            if let Some(text) = taken_out {
                rewritten.push((path.clone(), text.into_bytes()));
            }
        }
    }
    let whole: Vec<String> = reverted_files
        .iter()
        .filter(|p| !rewritten.iter().any(|(r, _)| r == *p))
        .cloned()
        .collect();
    let check_tree = match reverted_files.is_empty() {
        true => None,
        false => Some(source::tree_reverting(
            repo,
            &change.candidate.tree,
            &change.base.tree,
            &whole,
            &rewritten,
        )?),
    };
    Ok(HarnessPlan {
        findings,
        check_tree,
        reverted_files,
        trusted,
        inert_product,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changed(
        path: &str,
        base: Option<&str>,
        candidate: &str,
        test_module: bool,
    ) -> ChangedSource {
        ChangedSource {
            path: path.into(),
            base: base.map(str::to_owned),
            candidate: Some(candidate.into()),
            test_file: test_module || path.starts_with("tests/") || path.ends_with("conftest.py"),
            test_module,
        }
    }

    #[test]
    fn a_hook_the_base_already_has_unchanged_is_no_finding() {
        let hook =
            "def pytest_configure(config):\n    config.addinivalue_line('markers', 'slow: slow')\n";
        let fixture = "\nimport pytest\n\n@pytest.fixture\ndef pages():\n    return 3\n";
        let files = [changed(
            "tests/conftest.py",
            Some(hook),
            &format!("{hook}{fixture}"),
            false,
        )];
        assert!(classify(&files, &[], &BTreeSet::new()).is_empty());
        let changed_hook = hook.replace("slow: slow", "slow: slower");
        let files = [changed(
            "tests/conftest.py",
            Some(hook),
            &changed_hook,
            false,
        )];
        assert_eq!(
            classify(&files, &[], &BTreeSet::new())[0].construct,
            "pytest_configure"
        );
    }

    #[test]
    fn a_plugin_module_named_by_unchanged_config_is_scanned_for_hooks() {
        let plugin = "def pytest_runtest_logreport(report):\n    report.outcome = 'passed'\n";
        let files = [changed("src/pager/_support.py", None, plugin, false)];
        let config = [(
            "pyproject.toml".to_owned(),
            "[tool.pytest.ini_options]\naddopts = \"-p pager._support\"\n".to_owned(),
        )];
        let findings = classify(&files, &config, &BTreeSet::new());
        assert_eq!(findings.len(), 1);
        assert_eq!(
            findings[0].place(),
            "src/pager/_support.py:1 pytest_runtest_logreport"
        );
        assert!(findings[0].replaceable);
        assert!(classify(&files, &[], &BTreeSet::new()).is_empty());
    }

    #[test]
    fn a_construct_in_a_changed_test_module_is_not_replaceable() {
        let module = "import unittest\n\nclass PagerTests(unittest.TestCase):\n    def run(self, result=None):\n        pass\n";
        let findings = classify(
            &[changed("tests/test_pager.py", None, module, true)],
            &[],
            &BTreeSet::new(),
        );
        assert_eq!(findings.len(), 1);
        assert!(!findings[0].replaceable);
    }

    #[test]
    fn a_test_module_may_patch_the_standard_library_but_not_the_project() {
        let module = "import time\n\nimport pytest\n\nimport pager\n\n\n@pytest.fixture(autouse=True)\ndef frozen_clock(monkeypatch):\n    monkeypatch.setattr(time, 'time', lambda: 0.0)\n\n\n@pytest.fixture(autouse=True)\ndef rounding(monkeypatch):\n    monkeypatch.setattr('pager.page_count', lambda t, s: -(-t // s))\n\n\ndef test_partial_page():\n    assert pager.page_count(11, 5) == 3\n";
        let project: BTreeSet<String> = ["pager", "tests"].map(String::from).into();
        let findings = classify(
            &[changed("tests/test_pager.py", None, module, true)],
            &[],
            &project,
        );
        let names: Vec<&str> = findings.iter().map(|f| f.construct.as_str()).collect();
        assert_eq!(names, ["rounding"]);
        // In a conftest, any patch counts: the differential run decides.
        let conftest = classify(
            &[changed("tests/conftest.py", None, module, false)],
            &[],
            &project,
        );
        assert_eq!(conftest.len(), 2);
    }

    #[test]
    fn taking_the_harness_out_of_a_conftest_keeps_its_fixtures_and_the_bases_hooks() {
        let base =
            "def pytest_configure(config):\n    config.addinivalue_line('markers', 'slow: slow')\n";
        let candidate = "import pytest\n\nimport pager\n\n\ndef pytest_configure(config):\n    config.addinivalue_line('markers', 'slow: slower')\n\n\n@pytest.fixture\ndef partial_total():\n    return 11\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    outcome = yield\n    outcome.get_result().outcome = 'passed'\n\n\nif getattr(pager, 'FIXED', False):\n    pager.page_count = lambda total, size: -(-total // size)\n";
        let files = [changed("tests/conftest.py", Some(base), candidate, false)];
        let found = constructs(&files, &[], &BTreeSet::new());
        let names: Vec<&str> = found.iter().map(|(_, c)| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "pytest_configure",
                "pytest_runtest_makereport",
                "pager.page_count"
            ]
        );
        let in_file: Vec<&Construct> = found.iter().map(|(_, c)| c).collect();
        let taken_out =
            without_constructs(candidate, Some(base), Role::Conftest, &in_file).expect("parses");
        assert!(taken_out.contains("def partial_total():"), "{taken_out}");
        assert!(taken_out.contains("'slow: slow'"), "{taken_out}");
        assert!(!taken_out.contains("slower"), "{taken_out}");
        assert!(
            !taken_out.contains("pytest_runtest_makereport"),
            "{taken_out}"
        );
        assert!(
            taken_out.contains("if getattr(pager, 'FIXED', False):\n    pass\n"),
            "{taken_out}"
        );
        // Nothing harness is left for the classifier to find.
        let again = [changed("tests/conftest.py", Some(base), &taken_out, false)];
        assert!(classify(&again, &[], &BTreeSet::new()).is_empty());
    }

    #[test]
    fn a_comment_only_product_change_is_inert_and_documentation_is_set_aside() {
        let files = [
            changed(
                "pager.py",
                Some("def f():\n    return 1\n"),
                "def f():\n    # one\n    return 1\n",
                false,
            ),
            changed("README.md", Some("a"), "b", false),
        ];
        let inert = inert_product(&files, &[]).expect("inert");
        assert_eq!(inert.files, ["pager.py"]);
        let fixed = [changed(
            "pager.py",
            Some("def f():\n    return 1\n"),
            "def f():\n    return 2\n",
            false,
        )];
        assert!(inert_product(&fixed, &[]).is_none());
    }
}
