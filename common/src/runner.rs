//! Runner conventions: which files are tests, how to select tests by name, and which structured
//! report a run writes. The command built here carries `{report}`, `{adapter}` and
//! `{node_reporter}` placeholders so the same job runs in any sandbox.

pub mod go;
pub mod node;

use crate::manifest::ManifestJob;
use crate::tree_path::{TreePath, TreePathError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunnerKind {
    Pytest,
    Unittest,
    /// `go test -json`; tests and subtests by path.
    Go,
    /// `node --test` with the reporter Assay ships (results with their files).
    Node,
    /// Vitest 4 with its JSON reporter.
    Vitest,
    /// An explicit command that writes one JUnit XML file inside the tree
    /// (`--test-report junit:RELATIVE/PATH.xml`); see [`ReportFormat::parse_test_report`].
    Junit,
    /// A `manifest.tsv` corpus, one interpreter run per row; see [`crate::manifest`].
    Manifest,
}

/// The interpreter and pytest arguments of `PYTHON -m pytest ARGS…`; `None` for any other
/// command (a wrapper such as `uv run pytest` included).
pub fn python_m_pytest(command: &[String]) -> Option<(&String, &[String])> {
    match command {
        [python, m, pytest, args @ ..] if m == "-m" && pytest == "pytest" => Some((python, args)),
        _ => None,
    }
}

/// The pytest session of a suite batch that chooses its own cases: run as `PYTHON -c SCRIPT
/// ARGS… --assay-select SPEC…` in place of `PYTHON -m pytest ARGS…` (the same interpreter, the
/// same arguments, the working directory first on `sys.path` as with `-m`). The session collects
/// the whole suite, as `pytest --collect-only` would, records every collected node id in its
/// JUnit report (one `assay.collected` property each, in collection order), and runs only the
/// node ids SPEC names (the others are deselected). So a batch needs no separate listing
/// session, and a node id the tree no longer has costs nothing.
pub const PYTEST_SELECT_SCRIPT: &str = r#"import hashlib
import sys
import pytest

argv = sys.argv[1:]
cut = argv.index("--assay-select")
args, spec = argv[:cut], argv[cut + 1:]


def wanted(nodeid):
    if spec[:1] == ["--assay-partition"]:
        digest = hashlib.sha256(nodeid.encode("utf-8", "surrogateescape")).digest()
        return int.from_bytes(digest[:8], "big") % int(spec[2]) == int(spec[1])
    return nodeid in chosen


chosen = set(spec)


class AssaySelect:
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        for plugin in config.pluginmanager.get_plugins():
            if hasattr(plugin, "add_global_property") and hasattr(plugin, "node_reporters"):
                for item in items:
                    plugin.add_global_property("assay.collected", item.nodeid)
        keep = [item for item in items if wanted(item.nodeid)]
        if len(keep) < len(items):
            kept = set(map(id, keep))
            config.hook.pytest_deselected(items=[i for i in items if id(i) not in kept])
            items[:] = keep


sys.exit(pytest.main(args, plugins=[AssaySelect()]))
"#;

/// The argument after which [`PYTEST_SELECT_SCRIPT`] reads what its batch runs.
pub const PYTEST_SELECT_FLAG: &str = "--assay-select";

/// What follows [`PYTEST_SELECT_FLAG`] to run one part of the whole collection: the cases
/// whose [`partition_of`] is the part's number.
pub const PYTEST_PARTITION_FLAG: &str = "--assay-partition";

/// The part of `parts` a pytest node id falls in, as [`PYTEST_SELECT_SCRIPT`] computes it: the
/// first 8 bytes of the id's sha256, big-endian, modulo `parts`. Stable across runs and
/// machines, so every batch of a first run takes its own cases from the same collection.
pub fn partition_of(node_id: &str, parts: usize) -> usize {
    let digest = Sha256::digest(node_id.as_bytes());
    let mut head = [0u8; 8];
    head.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(head) % parts.max(1) as u64) as usize
}

/// The JUnit property under which [`PYTEST_SELECT_SCRIPT`] records each collected node id.
pub const PYTEST_COLLECTED_PROPERTY: &str = "assay.collected";

/// `PYTHON -m pytest ARGS…` rewritten to run [`PYTEST_SELECT_SCRIPT`] with the same
/// interpreter and arguments; `None` for any other command (a wrapper such as `uv run pytest`).
pub fn pytest_select_prefix(command: &[String]) -> Option<Vec<String>> {
    let (python, args) = python_m_pytest(command)?;
    let mut argv = vec![python.clone(), "-c".into(), PYTEST_SELECT_SCRIPT.into()];
    argv.extend(args.iter().cloned());
    Some(argv)
}

/// Is this command a whole pytest session: `PYTHON -m pytest …` or a batch run through
/// [`PYTEST_SELECT_SCRIPT`]?
pub fn is_pytest_session(command: &[String]) -> bool {
    python_m_pytest(command).is_some()
        || matches!(command, [_, c, script, ..] if c == "-c" && script == PYTEST_SELECT_SCRIPT)
}

impl RunnerKind {
    pub const ALL: [RunnerKind; 7] = [
        RunnerKind::Pytest,
        RunnerKind::Unittest,
        RunnerKind::Go,
        RunnerKind::Node,
        RunnerKind::Vitest,
        RunnerKind::Junit,
        RunnerKind::Manifest,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Pytest => "pytest",
            Self::Unittest => "unittest",
            Self::Go => "go",
            Self::Node => "node",
            Self::Vitest => "vitest",
            Self::Junit => "junit",
            Self::Manifest => "manifest",
        }
    }

    /// The command prefix used when the user gives none. The generic JUnit runner and the
    /// manifest runner have none: their command (or interpreter) must be configured.
    pub fn default_command(self) -> Vec<String> {
        let words: &[&str] = match self {
            Self::Pytest => &["python3", "-m", "pytest"],
            Self::Unittest => &["python3"],
            Self::Go => &["go", "test"],
            Self::Node => &["node"],
            Self::Vitest => &["npx", "--no-install", "vitest"],
            Self::Junit | Self::Manifest => &[],
        };
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    /// Whether selecting by a name also selects every test whose name starts with it: pytest's
    /// `-k` matches substrings and the unittest adapter prefixes; the other runners anchor
    /// their patterns to whole names.
    pub fn selects_by_prefix(self) -> bool {
        matches!(self, Self::Pytest | Self::Unittest)
    }

    /// Whether the runner can run at all without a configured command.
    pub fn needs_explicit_command(self) -> bool {
        matches!(self, Self::Junit | Self::Manifest)
    }

    /// Where the structured report of a run comes from. The generic JUnit runner's report lives
    /// in the tree at a configured path: build it with [`ReportFormat::parse_test_report`]; this
    /// default (the scratch `{report}` file) only serves commands that spell `{report}`.
    pub fn report_format(self) -> ReportFormat {
        match self {
            Self::Pytest | Self::Junit => ReportFormat::JunitXml,
            Self::Unittest => ReportFormat::UnittestJson,
            Self::Go => ReportFormat::GoTestJson,
            Self::Node => ReportFormat::NodeJson,
            Self::Vitest => ReportFormat::VitestJson,
            Self::Manifest => ReportFormat::ManifestCases(ManifestJob::default()),
        }
    }

    /// Is `path` (relative, `/`-separated) a test file by this runner's conventions? Test
    /// directories count whole, so fixtures, `conftest.py`, `testdata/` and goldens travel with
    /// the tests.
    pub fn is_test_file(self, path: &str) -> bool {
        let file_name = path.rsplit('/').next().unwrap_or(path);
        let mut dirs = path.split('/').rev().skip(1);
        match self {
            Self::Pytest | Self::Unittest => {
                let in_test_dir = dirs.any(|dir| matches!(dir, "tests" | "test" | "testing"));
                let python_test = file_name.ends_with(".py")
                    && (file_name.starts_with("test_")
                        || file_name.ends_with("_test.py")
                        || file_name == "conftest.py");
                in_test_dir || python_test
            }
            // Go's own conventions: `_test.go` files and `testdata/` directories.
            Self::Go => file_name.ends_with("_test.go") || dirs.any(|dir| dir == "testdata"),
            Self::Node | Self::Vitest => {
                let in_test_dir = dirs.any(|dir| {
                    matches!(
                        dir,
                        "test" | "tests" | "__tests__" | "__fixtures__" | "fixtures"
                    )
                });
                in_test_dir || is_js_test_name(file_name)
            }
            // The interpreter is the product; the manifest and the corpus directories are tests.
            Self::Manifest => {
                file_name == "manifest.tsv"
                    || dirs.any(|dir| {
                        matches!(
                            dir,
                            "tests" | "test" | "corpus" | "conformance" | "testdata"
                        )
                    })
            }
            // A JUnit project's layout is the build tool's.
            Self::Junit => {
                let in_test_dir = dirs.any(|dir| matches!(dir, "test" | "tests" | "spec"));
                in_test_dir || file_name.ends_with("_spec.rb")
            }
        }
    }

    /// Is this test file one the runner itself loads tests from (rather than a fixture)?
    pub fn is_test_module(self, path: &str) -> bool {
        let file_name = path.rsplit('/').next().unwrap_or(path);
        match self {
            Self::Pytest => {
                file_name.ends_with(".py")
                    && (file_name.starts_with("test_") || file_name.ends_with("_test.py"))
            }
            Self::Unittest => file_name.ends_with(".py") && file_name.starts_with("test"),
            Self::Go => file_name.ends_with("_test.go"),
            Self::Node | Self::Vitest => is_js_test_name(file_name),
            Self::Manifest => file_name == "manifest.tsv",
            Self::Junit => false,
        }
    }

    /// The full argv for a run of `files` (all tests when empty), narrowed to `names`. Selection
    /// may run more than was named; exact attribution happens later from the report.
    pub fn command(self, prefix: &[String], files: &[String], names: &[String]) -> Vec<String> {
        let mut argv = prefix.to_vec();
        match self {
            Self::Pytest => {
                argv.extend(
                    [
                        "-p",
                        "no:cacheprovider",
                        "-o",
                        "junit_family=xunit1",
                        "--junitxml={report}",
                        "--continue-on-collection-errors",
                        "-q",
                    ]
                    .map(String::from),
                );
                argv.extend(files.iter().cloned());
                if !names.is_empty() {
                    argv.push("-k".into());
                    argv.push(names.join(" or "));
                }
            }
            Self::Unittest => {
                argv.extend(["{adapter}", "--report", "{report}"].map(String::from));
                for name in names {
                    argv.push("--name".into());
                    argv.push(name.clone());
                }
                argv.extend(files.iter().cloned());
            }
            Self::Go => {
                // -count=1: a cached result is not a fresh execution. -vet=off: a vet finding
                // is neither a pass nor a failure of the named tests, and would hide them.
                argv.extend(["-json", "-count=1", "-vet=off"].map(String::from));
                if let Some(pattern) = go::run_pattern(names) {
                    argv.push("-run".into());
                    argv.push(pattern);
                }
                argv.extend(go::packages(files));
            }
            Self::Node => {
                argv.extend(
                    [
                        "--test",
                        "--test-reporter={node_reporter}",
                        "--test-reporter-destination={report}",
                    ]
                    .map(String::from),
                );
                if !names.is_empty() {
                    argv.push("--test-name-pattern".into());
                    argv.push(node::name_pattern(names));
                }
                argv.extend(files.iter().cloned());
            }
            Self::Vitest => {
                argv.extend(["run", "--reporter=json", "--outputFile={report}"].map(String::from));
                if !names.is_empty() {
                    argv.push("-t".into());
                    argv.push(node::name_pattern(names));
                }
                argv.extend(files.iter().cloned());
            }
            // An explicit command has no portable selector: it runs as configured.
            Self::Junit => {}
            // One interpreter process per case: the worker appends each case's path in turn.
            Self::Manifest => {}
        }
        argv
    }

    /// The argv that lists a suite's cases without running them. pytest prints node ids on
    /// stdout; the unittest adapter writes `assay.unittest.cases/v1` to `{report}`. `None`:
    /// `assay test` cannot collect this runner's cases yet.
    pub fn collect_command(self, prefix: &[String]) -> Option<Vec<String>> {
        let mut argv = prefix.to_vec();
        match self {
            // `--verbosity=-1`, not `-q`: it overrides a project's `addopts = -v`, which with
            // `-q` would print the collection tree instead of node ids.
            Self::Pytest => argv.extend(
                ["-p", "no:cacheprovider", "--collect-only", "--verbosity=-1"].map(String::from),
            ),
            Self::Unittest => {
                argv.extend(["{adapter}", "--collect", "--report", "{report}"].map(String::from))
            }
            Self::Go | Self::Node | Self::Vitest | Self::Junit | Self::Manifest => return None,
        }
        Some(argv)
    }

    /// The argv that runs exactly the collected cases `ids` (runner-native ids from
    /// [`Self::collect_command`]), writing the structured report.
    pub fn case_command(self, prefix: &[String], ids: &[String]) -> Vec<String> {
        match self {
            Self::Pytest => self.command(prefix, ids, &[]),
            Self::Unittest => {
                let mut argv = prefix.to_vec();
                argv.extend(["{adapter}", "--report", "{report}"].map(String::from));
                for id in ids {
                    argv.push("--id".into());
                    argv.push(id.clone());
                }
                argv
            }
            _ => self.command(prefix, ids, &[]),
        }
    }
}

/// `pager.test.js`, `pager.spec.ts`, `pager.test.mjs`, …
fn is_js_test_name(file_name: &str) -> bool {
    let Some((stem, ext)) = file_name.rsplit_once('.') else {
        return false;
    };
    matches!(
        ext,
        "js" | "mjs" | "cjs" | "ts" | "mts" | "cts" | "jsx" | "tsx"
    ) && (stem.ends_with(".test") || stem.ends_with(".spec") || stem.ends_with("_test"))
}

impl fmt::Display for RunnerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RunnerKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = Self::ALL.iter().map(|r| r.name()).collect();
                format!("unknown runner {s:?} (known: {})", known.join(", "))
            })
    }
}

/// The structured report a job yields, and so where the worker finds it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportFormat {
    /// JUnit XML at `{report}` (pytest, or an explicit command that spells `{report}`).
    JunitXml,
    UnittestJson,
    /// `go test -json`'s event stream. The go command writes it only to stdout, so the worker
    /// hands the job's captured stdout to the parser: no shell wrapper, and stdout is already
    /// private to the job. Test output is wrapped in events, so nothing else lands there.
    GoTestJson,
    /// The `assay.node/v1` JSON of the node:test reporter Assay ships (`{node_reporter}`), at
    /// `{report}`. Node's built-in JUnit reporter names no file, so it cannot attribute a test.
    NodeJson,
    /// Vitest's `json` reporter at `{report}`.
    VitestJson,
    /// JUnit XML the configured command writes inside the tree. The worker deletes this file
    /// before the command and reads it fresh after; a stale one must never be read.
    JunitXmlInTree(TreePath),
    /// Manifest rows, each run in its own process: the interpreter's exit code and stdout are
    /// judged against the row's expectation with [`crate::manifest::judge`], not parsed by
    /// [`crate::report::parse`]. The runner's default holds no case; the engine fills it in.
    ManifestCases(ManifestJob),
}

/// Where the worker reads a job's report from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportLocation<'a> {
    /// The job's private `{report}` file in its scratch directory.
    Scratch,
    /// The command's captured stdout.
    Stdout,
    /// A file inside the job's tree, removed before the command runs.
    Tree(&'a TreePath),
    /// No report: each case's exit code and stdout, one process per case.
    Cases(&'a ManifestJob),
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TestReportError {
    #[error("test report {spec:?} does not name a format (hint: write `junit:RELATIVE/PATH.xml`)")]
    NoFormat { spec: String },
    #[error("test report format {format:?} in {spec:?} is not supported (hint: use `junit:`)")]
    UnknownFormat { spec: String, format: String },
    #[error("test report path in {spec:?} is not confined to the tree")]
    Path {
        spec: String,
        #[source]
        source: TreePathError,
    },
}

impl ReportFormat {
    pub fn location(&self) -> ReportLocation<'_> {
        match self {
            Self::GoTestJson => ReportLocation::Stdout,
            Self::ManifestCases(job) => ReportLocation::Cases(job),
            Self::JunitXmlInTree(path) => ReportLocation::Tree(path),
            Self::JunitXml | Self::UnittestJson | Self::NodeJson | Self::VitestJson => {
                ReportLocation::Scratch
            }
        }
    }

    /// Parses `--test-report junit:RELATIVE/PATH.xml` (or `test-report = "junit:…"`).
    pub fn parse_test_report(spec: &str) -> Result<Self, TestReportError> {
        let Some((format, path)) = spec.split_once(':') else {
            return Err(TestReportError::NoFormat {
                spec: spec.to_owned(),
            });
        };
        if format != "junit" {
            return Err(TestReportError::UnknownFormat {
                spec: spec.to_owned(),
                format: format.to_owned(),
            });
        }
        let path = TreePath::new(path).map_err(|source| TestReportError::Path {
            spec: spec.to_owned(),
            source,
        })?;
        Ok(Self::JunitXmlInTree(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn the_select_script_and_assay_put_each_node_id_in_the_same_part() {
        let ids = [
            "tests/test_more.py::LastTests::test_basic",
            "tests/test_recipes.py::TakeTests::test_simple_take",
            "tests/test_pages.py::test_partial[3-page \u{e9}t\u{e9}]",
            "tests/test_pages.py::test_partial[]",
        ];
        // The script's own `wanted`, run once by the real interpreter over every id and part
        // count: it prints, per line, the part each id falls in.
        let head = PYTEST_SELECT_SCRIPT
            .split("\nchosen = set(spec)")
            .next()
            .expect("the script defines wanted first")
            .replace("cut = argv.index(\"--assay-select\")", "cut = 0");
        let probe = format!(
            "{head}\nids = sys.stdin.read().split('\\n')\nfor parts in (2, 3):\n    for nodeid in ids:\n        found = []\n        for part in range(parts):\n            spec = ['--assay-partition', str(part), str(parts)]\n            if wanted(nodeid):\n                found.append(part)\n        print(*found)\n"
        );
        let mut child = std::process::Command::new("python3")
            .args(["-c", &probe])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs");
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(ids.join("\n").as_bytes())
            .expect("write");
        let out = child.wait_with_output().expect("python3 ends");
        let expected: Vec<String> = [2usize, 3]
            .iter()
            .flat_map(|&parts| {
                ids.iter()
                    .map(move |id| partition_of(id, parts).to_string())
            })
            .collect();
        let found: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        assert_eq!(found, expected, "each id in exactly one part, the same one");
        assert_eq!(partition_of("any", 0), 0, "no parts is one part");
    }

    #[test]
    fn test_files_follow_python_conventions() {
        let pytest = RunnerKind::Pytest;
        assert!(pytest.is_test_file("tests/test_pager.py"));
        assert!(pytest.is_test_file("tests/fixtures/page.json"));
        assert!(pytest.is_test_file("pkg/pager_test.py"));
        assert!(pytest.is_test_file("conftest.py"));
        assert!(!pytest.is_test_file("pager/__init__.py"));
        assert!(!pytest.is_test_file("tests.py.bak"));
        assert!(pytest.is_test_module("tests/test_pager.py"));
        assert!(!pytest.is_test_module("tests/fixtures/page.json"));
    }

    #[test]
    fn test_files_follow_go_and_node_conventions() {
        let go = RunnerKind::Go;
        assert!(go.is_test_file("cache/cache_test.go"));
        assert!(go.is_test_file("cache/testdata/golden.json"));
        assert!(!go.is_test_file("cache/cache.go"));
        assert!(!go.is_test_file("tests/helper.go"));
        assert!(go.is_test_module("cache/cache_test.go"));
        assert!(!go.is_test_module("cache/testdata/golden.json"));
        for runner in [RunnerKind::Node, RunnerKind::Vitest] {
            assert!(runner.is_test_file("test/invoice.test.js"));
            assert!(runner.is_test_file("src/invoice.spec.ts"));
            assert!(runner.is_test_file("test/fixtures/invoice.json"));
            assert!(!runner.is_test_file("src/invoice.js"));
            assert!(runner.is_test_module("src/invoice.spec.ts"));
            assert!(!runner.is_test_module("test/fixtures/invoice.json"));
        }
    }

    #[test]
    fn pytest_selects_by_name_and_writes_junit() {
        let argv = RunnerKind::Pytest.command(
            &RunnerKind::Pytest.default_command(),
            &["tests/test_pager.py".into()],
            &["test_a".into(), "test_b".into()],
        );
        assert!(argv.contains(&"--junitxml={report}".to_string()));
        assert_eq!(
            argv[argv.len() - 2..],
            ["-k".to_string(), "test_a or test_b".into()]
        );
    }

    #[test]
    fn go_runs_fresh_json_by_package_with_an_anchored_run_pattern() {
        let argv = RunnerKind::Go.command(
            &RunnerKind::Go.default_command(),
            &strings(&["cache/cache_test.go", "cache/ttl_test.go", "store_test.go"]),
            &strings(&["TestCacheExpiry/expired"]),
        );
        assert_eq!(
            argv,
            strings(&[
                "go",
                "test",
                "-json",
                "-count=1",
                "-vet=off",
                "-run",
                "^(TestCacheExpiry)$/^(expired)$",
                "./cache",
                "."
            ])
        );
        assert_eq!(
            RunnerKind::Go.report_format().location(),
            ReportLocation::Stdout
        );
        let all = RunnerKind::Go.command(&RunnerKind::Go.default_command(), &[], &[]);
        assert_eq!(all.last().map(String::as_str), Some("./..."));
    }

    #[test]
    fn node_and_vitest_write_their_structured_reports_to_the_scratch_file() {
        let node = RunnerKind::Node.command(
            &RunnerKind::Node.default_command(),
            &strings(&["test/invoice.test.js"]),
            &strings(&["test_c1_totals"]),
        );
        assert_eq!(
            node,
            strings(&[
                "node",
                "--test",
                "--test-reporter={node_reporter}",
                "--test-reporter-destination={report}",
                "--test-name-pattern",
                "test_c1_totals",
                "test/invoice.test.js"
            ])
        );
        let vitest = RunnerKind::Vitest.command(
            &RunnerKind::Vitest.default_command(),
            &strings(&["tests/invoice.test.js"]),
            &[],
        );
        assert_eq!(
            vitest,
            strings(&[
                "npx",
                "--no-install",
                "vitest",
                "run",
                "--reporter=json",
                "--outputFile={report}",
                "tests/invoice.test.js"
            ])
        );
    }

    #[test]
    fn the_generic_junit_report_is_a_confined_tree_path() {
        let format =
            ReportFormat::parse_test_report("junit:target/surefire-reports/TEST-x.xml").unwrap();
        let ReportLocation::Tree(path) = format.location() else {
            panic!("expected an in-tree report")
        };
        assert_eq!(path.as_str(), "target/surefire-reports/TEST-x.xml");
        let explicit = strings(&["mvn", "-o", "-Dtest=PageCountTest", "test"]);
        assert_eq!(
            RunnerKind::Junit.command(&explicit, &strings(&["src/test/x.java"]), &strings(&["a"])),
            explicit
        );
        for (spec, expected) in [
            ("junit:/tmp/x.xml", "not confined"),
            ("junit:../x.xml", "not confined"),
            ("junit:", "not confined"),
            ("trx:x.trx", "not supported"),
            ("x.xml", "does not name a format"),
        ] {
            let err = ReportFormat::parse_test_report(spec)
                .unwrap_err()
                .to_string();
            assert!(err.contains(expected), "{spec}: {err}");
        }
    }

    #[test]
    fn a_corpus_is_test_data_and_its_interpreter_is_the_product() {
        let manifest = RunnerKind::Manifest;
        assert!(manifest.is_test_file("corpus/manifest.tsv"));
        assert!(manifest.is_test_file("corpus/integer/add-small.inv"));
        assert!(manifest.is_test_file("tests/conformance/boolean/paid.inv"));
        assert!(!manifest.is_test_file("interpreter.py"));
        assert!(!manifest.is_test_file("src/eval.rs"));
        let format = manifest.report_format();
        let ReportLocation::Cases(job) = format.location() else {
            panic!("a manifest job reports per case")
        };
        assert!(job.cases.is_empty(), "the engine fills in the cases");
        let prefix = strings(&["python3", "interpreter.py"]);
        assert_eq!(manifest.command(&prefix, &strings(&["x.inv"]), &[]), prefix);
    }

    #[test]
    fn runners_without_a_default_command_say_so() {
        for runner in RunnerKind::ALL {
            assert_eq!(
                runner.default_command().is_empty(),
                runner.needs_explicit_command(),
                "{runner}"
            );
        }
    }

    #[test]
    fn unknown_runner_lists_the_known_ones() {
        let err = "jest".parse::<RunnerKind>().unwrap_err();
        assert!(
            err.contains("pytest, unittest, go, node, vitest, junit, manifest"),
            "{err}"
        );
        assert_eq!("go".parse::<RunnerKind>(), Ok(RunnerKind::Go));
    }
}
