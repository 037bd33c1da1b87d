//! End-to-end tests of `assay test`, `assay history`, `assay halt` and `assay resume`: the real
//! binary against real pytest, unittest, Go, node:test, manifest and command projects committed
//! to real git repositories built in temp dirs. Needs `python3` with `pytest` and `coverage`,
//! `go` and `node`.

use assay_test_support::cluster::{ClusterSandbox, FleetProcess};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Project {
    dir: tempfile::TempDir,
    state: tempfile::TempDir,
    store: tempfile::TempDir,
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=Invoice Team",
            "-c",
            "user.email=invoices@example.com",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Project {
    fn new(files: &[(&str, &str)]) -> Self {
        let project = Self {
            dir: tempfile::tempdir().expect("temp dir"),
            state: tempfile::tempdir().expect("temp dir"),
            store: tempfile::tempdir().expect("temp dir"),
        };
        git(project.path(), &["init", "-q", "-b", "main"]);
        project.commit(files, "invoice service");
        project
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn commit(&self, files: &[(&str, &str)], message: &str) {
        for (path, text) in files {
            let full = self.path().join(path);
            std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
            std::fs::write(full, text).expect("write");
        }
        git(self.path(), &["add", "-A"]);
        git(self.path(), &["commit", "-q", "-m", message]);
    }

    fn assay(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_assay"))
            .args(args)
            .arg("--state-dir")
            .arg(self.state.path())
            .current_dir(self.path())
            .env("XDG_CACHE_HOME", self.store.path())
            .output()
            .expect("assay runs")
    }

    fn test(&self, args: &[&str]) -> Output {
        let mut all = vec!["test"];
        all.extend_from_slice(args);
        self.assay(&all)
    }

    fn json_path(&self) -> PathBuf {
        self.state.path().join("report.json")
    }

    /// [`Project::test`] writing its JSON report to [`Project::json_path`].
    fn test_reporting(&self, args: &[&str]) -> Output {
        let report = self.json_path();
        let mut all = args.to_vec();
        all.extend(["--json", report.to_str().expect("utf-8")]);
        self.test(&all)
    }

    /// The JSON report the last [`Project::test_reporting`] wrote.
    fn report(&self) -> serde_json::Value {
        read_json(&self.json_path())
    }

    /// Names the commit checked out `base`, the base an audit compares the next commits with.
    fn mark_base(&self) {
        git(self.path(), &["branch", "base"]);
    }
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The run exited with `expected`; its stderr, which the failure shows.
#[track_caller]
fn assert_exit(out: &Output, expected: i32) -> String {
    let err = stderr(out);
    assert_eq!(code(out), expected, "{err}");
    err
}

/// [`assert_exit`], and its stderr holds every one of `lines`.
#[track_caller]
fn assert_exit_saying(out: &Output, expected: i32, lines: &[&str]) -> String {
    let err = assert_exit(out, expected);
    assert_says(&err, lines);
    err
}

/// `text` (a run's output) holds every one of `lines`; a failure shows it whole.
#[track_caller]
fn assert_says(text: &str, lines: &[&str]) {
    for line in lines {
        assert!(text.contains(line), "{text}");
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const PAGER_TESTS: &str = r#"import time
import pytest


def test_slow_render():
    time.sleep(1.2)
    print("rendered the slow page")


def test_first_page():
    print("first page")
    assert [1, 2, 3][:2] == [1, 2]


@pytest.mark.parametrize("size", [10, 25])
def test_page_size(size):
    time.sleep(0.4 if size == 10 else 0.0)
    assert size > 0


class TestCursor:
    def test_next(self):
        assert "cursor-2" > "cursor-1"
"#;

const INVOICE_TESTS: &str = r#"def test_total():
    assert 40 + 2 == 42


def test_tax():
    assert round(100 * 0.2, 2) == 20.0
"#;

fn pytest_project() -> Project {
    Project::new(&[
        ("tests/test_pager.py", PAGER_TESTS),
        ("tests/billing/test_invoice.py", INVOICE_TESTS),
        ("conftest.py", ""),
    ])
}

fn listing(out: &Output) -> Vec<(String, String)> {
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("listing is JSON");
    assert_eq!(json["schema"], "assay.cases/v1");
    json["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| {
            (
                c["ref"].as_str().expect("ref").to_owned(),
                c["display"].as_str().expect("display").to_owned(),
            )
        })
        .collect()
}

/// The displays of the cases a `--list-cases` run printed, in plan order.
fn listed_displays(out: &Output) -> Vec<String> {
    listing(out).into_iter().map(|(_, d)| d).collect()
}

#[test]
fn list_cases_prints_plan_order_and_runs_nothing() {
    let project = pytest_project();
    let out = project.test(&["--list-cases"]);
    assert_exit(&out, 0);
    let displays = listed_displays(&out);
    assert_eq!(
        displays,
        [
            "tests/billing/test_invoice.py::test_total",
            "tests/billing/test_invoice.py::test_tax",
            "tests/test_pager.py::test_slow_render",
            "tests/test_pager.py::test_first_page",
            "tests/test_pager.py::test_page_size[10]",
            "tests/test_pager.py::test_page_size[25]",
            "tests/test_pager.py::TestCursor::test_next",
        ]
    );
    assert!(
        !stderr(&out).contains("[test]"),
        "nothing ran: {}",
        stderr(&out)
    );
    let history = project.assay(&["history", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&history.stdout).expect("history JSON");
    assert_eq!(json["runs"].as_array().map(Vec::len), Some(0));
}

#[test]
fn a_project_whose_pytest_config_adds_verbosity_still_lists_its_cases() {
    // chardet's setup.cfg says `addopts = -v`: `-q` would only cancel it, and the collection
    // would print its tree, with no node id to read.
    let project = Project::new(&[
        (
            "setup.cfg",
            "[tool:pytest]\naddopts = -v\npython_files = test.py\n",
        ),
        ("test.py", INVOICE_TESTS),
    ]);
    let out = project.test(&["--runner", "pytest", "--list-cases"]);
    assert_exit(&out, 0);
    let displays = listed_displays(&out);
    assert_eq!(displays, ["test.py::test_total", "test.py::test_tax"]);
}

#[test]
fn results_keep_plan_order_with_three_jobs_and_uneven_durations() {
    let project = pytest_project();
    let out = project.test_reporting(&["--jobs", "3"]);
    let err = assert_exit(&out, 0);
    // A first run lists nothing: each batch collects the suite, so the count follows them.
    assert_says(&err, &["[test] 0/?", "[test] 7/7 passed"]);
    let json = project.report();
    assert_eq!(json["schema"], "assay.test/v1");
    assert_eq!(json["status"], "passed");
    let cases = json["cases"].as_array().expect("cases");
    let displays: Vec<&str> = cases
        .iter()
        .map(|c| c["display"].as_str().unwrap_or(""))
        .collect();
    let listed = listed_displays(&project.test(&["--list-cases"]));
    assert_eq!(displays, listed);
    // The slow case finished last but is reported third, where the plan has it.
    let slow = &cases[2];
    assert_eq!(slow["outcome"], "passed");
    assert!(slow["duration_s"].as_f64().unwrap_or(0.0) >= 1.0);
    // Its stdout is its own artifact, stored with a sha256.
    let artifacts = slow["artifacts"].as_array().expect("artifacts");
    let stdout_key = artifacts
        .iter()
        .find(|a| a["name"] == "stdout")
        .and_then(|a| a["key"].as_str())
        .expect("stdout artifact");
    let text = artifact_text(&project, slow, "stdout");
    assert!(text.contains("rendered the slow page"), "{text}");
    assert!(
        !text.contains("first page"),
        "another case's output: {text}"
    );
    let first = cases[3]["artifacts"].as_array().expect("artifacts");
    assert_ne!(
        first
            .iter()
            .find(|a| a["name"] == "stdout")
            .map(|a| &a["key"]),
        Some(&serde_json::Value::String(stdout_key.into())),
        "each case has its own stdout"
    );
    assert_eq!(json["audit"]["selection"]["contained"], true);
    assert_eq!(json["audit"]["selection"]["executed"], 7);
}

/// The stored text of a case's artifact of this name.
fn artifact_text(project: &Project, case: &serde_json::Value, name: &str) -> String {
    let key = case["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .find(|a| a["name"] == name)
        .and_then(|a| a["key"].as_str())
        .unwrap_or_else(|| panic!("no {name} artifact: {case}"));
    let stored = walk_find(project.store.path(), key).expect("artifact stored");
    std::fs::read_to_string(stored).expect("artifact readable")
}

const RECEIPT_TESTS: &str = r#"import pytest


@pytest.fixture
def printer():
    raise RuntimeError("the receipt printer is offline")


def test_header():
    print("header: ACME")


def test_footer():
    print("footer: thanks")
    assert "thanks".upper() == "Thanks"


@pytest.mark.parametrize("lines", [1, 2, 3])
def test_line_count(lines):
    print(f"counting {lines} lines")
    assert lines != 2


def test_cut(printer):
    pass


@pytest.mark.skip(reason="no paper")
def test_paper():
    pass
"#;

const TOTALS_TESTS: &str = r#"import sys


def test_sum():
    print("sum stays quiet", file=sys.stderr)
    assert sum([1, 2]) == 3


def test_average():
    assert 7 / 2 == 3
"#;

/// The cases a run of pytest itself reports failed or errored, by node id.
fn pytest_failures(dir: &Path) -> Vec<String> {
    let out = Command::new("python3")
        .args(["-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE"])
        .current_dir(dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("pytest runs");
    let mut failed: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            l.strip_prefix("FAILED ")
                .or_else(|| l.strip_prefix("ERROR "))
        })
        .map(|l| l.split(" - ").next().unwrap_or(l).to_owned())
        .collect();
    failed.sort();
    failed
}

fn assay_failures(json: &serde_json::Value) -> Vec<String> {
    let mut failed: Vec<String> = json["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .filter(|c| c["outcome"] == "failed" || c["outcome"] == "error")
        .map(|c| c["display"].as_str().unwrap_or("").to_owned())
        .collect();
    failed.sort();
    failed
}

#[test]
fn cases_run_in_batches_by_default_fail_as_pytest_fails_and_keep_their_own_output() {
    let project = Project::new(&[
        ("tests/test_receipt.py", RECEIPT_TESTS),
        ("tests/test_totals.py", TOTALS_TESTS),
        ("conftest.py", ""),
    ]);
    let report = project.json_path();
    // Batching is what is under test: every run runs every case (the result cache would
    // answer the passes; tests/suite_cache.rs covers it).
    let run = |extra: &[&str]| {
        let mut args = vec![
            "--jobs",
            "2",
            "--no-cache",
            "--json",
            report.to_str().expect("utf-8"),
        ];
        args.extend_from_slice(extra);
        let out = project.test(&args);
        assert_exit(&out, 1);
        (read_json(&report), stdout(&out))
    };
    let (first, _) = run(&[]);
    assert_eq!(first["totals"]["total"], 9);
    // No history yet: one batch per slot, each running its part of the collection.
    assert_eq!(first["jobs"].as_array().map(Vec::len), Some(2), "{first}");
    let expected = [
        "tests/test_receipt.py::test_cut",
        "tests/test_receipt.py::test_footer",
        "tests/test_receipt.py::test_line_count[2]",
        "tests/test_totals.py::test_average",
    ];
    assert_eq!(assay_failures(&first), expected);
    assert_eq!(pytest_failures(project.path()), expected);
    let case = |json: &serde_json::Value, display: &str| {
        json["cases"]
            .as_array()
            .expect("cases")
            .iter()
            .find(|c| c["display"] == display)
            .unwrap_or_else(|| panic!("no case {display}"))
            .clone()
    };
    // A failing case shows what it printed and its own traceback, and nothing of its batch's.
    let footer = case(&first, "tests/test_receipt.py::test_footer");
    let out = artifact_text(&project, &footer, "stdout");
    assert!(out.contains("footer: thanks"), "{out}");
    for other in ["header: ACME", "counting"] {
        assert!(!out.contains(other), "{out}");
    }
    let traceback = artifact_text(&project, &footer, "traceback");
    assert!(traceback.contains("AssertionError"), "{traceback}");
    let cut = case(&first, "tests/test_receipt.py::test_cut");
    assert_eq!(cut["outcome"], "error");
    let traceback = artifact_text(&project, &cut, "traceback");
    assert!(
        traceback.contains("the receipt printer is offline"),
        "{traceback}"
    );
    let sum = case(&first, "tests/test_totals.py::test_sum");
    assert!(artifact_text(&project, &sum, "stderr").contains("sum stays quiet"));
    assert_eq!(artifact_text(&project, &sum, "stdout"), "");
    let variant = case(&first, "tests/test_receipt.py::test_line_count[3]");
    assert_eq!(
        artifact_text(&project, &variant, "stdout").trim_end(),
        "--------------------------------- Captured Out ---------------------------------\ncounting 3 lines"
    );
    // Durations are each case's own, not its batch's divided among them.
    assert!(
        variant["duration_s"].as_f64().unwrap_or(1.0) < 0.2,
        "{variant}"
    );

    // With every duration recorded: one batch per slot, the same results.
    let (second, trend) = run(&[]);
    assert_eq!(second["jobs"].as_array().map(Vec::len), Some(2), "{second}");
    assert_eq!(assay_failures(&second), expected);
    assert!(trend.contains("vs previous: failures unchanged"), "{trend}");
    // One job per case on request.
    let (per_case, _) = run(&["--shards", "per-case"]);
    assert_eq!(per_case["jobs"].as_array().map(Vec::len), Some(9));
    assert_eq!(assay_failures(&per_case), expected);
    let footer = case(&per_case, "tests/test_receipt.py::test_footer");
    assert!(artifact_text(&project, &footer, "stdout").contains("footer: thanks"));
}

const LAST_ITEM_TESTS: &str = r#"from unittest import TestCase


def last(items):
    return items[-1]


def repeat_last(items, times):
    return items + items[-1:] * (times + 1)


class LastTests(TestCase):
    def test_basic(self):
        self.assertEqual(last([1, 2, 3]), 3)


class RepeatLastTests(TestCase):
    def test_basic(self):
        self.assertEqual(repeat_last([1, 2], 2), [1, 2, 2, 2])
"#;

#[test]
fn a_class_does_not_take_the_results_of_a_class_whose_name_ends_like_it() {
    let project = Project::new(&[("tests/test_last.py", LAST_ITEM_TESTS), ("conftest.py", "")]);
    // One batch holds both classes, as a history-planned batch of a real suite did.
    let out = project.test_reporting(&["--shards", "1"]);
    assert_exit(&out, 1);
    let json = project.report();
    let expected = ["tests/test_last.py::RepeatLastTests::test_basic"];
    assert_eq!(assay_failures(&json), expected, "{json}");
    assert_eq!(pytest_failures(project.path()), expected);
}

#[test]
fn a_suite_that_fails_to_collect_says_which_file_and_why_on_a_first_run() {
    // A test module that cannot import: pytest's own account names the module and the error.
    let project = Project::new(&[
        (
            "tests/test_refunds.py",
            "import refund_gateway\n\n\ndef test_refund():\n    pass\n",
        ),
        (
            "tests/test_totals.py",
            "def test_total():\n    assert 40 + 2 == 42\n",
        ),
        ("conftest.py", ""),
    ]);
    let out = project.test(&["--jobs", "2"]);
    let err = stderr(&out);
    assert_ne!(code(&out), 0, "{err}");
    assert_says(
        &err,
        &[
            "tests/test_refunds.py failed to collect",
            "No module named 'refund_gateway'",
        ],
    );
    // A conftest.py that cannot import stops every session before it collects: its error is
    // on stderr, and the message carries it.
    project.commit(
        &[
            ("conftest.py", "import payment_sandbox\n"),
            ("tests/test_refunds.py", "def test_refund():\n    pass\n"),
        ],
        "a conftest that needs a missing module",
    );
    let out = project.test(&["--jobs", "2"]);
    let err = stderr(&out);
    assert_ne!(code(&out), 0, "{err}");
    assert_says(
        &err,
        &[
            "ImportError while loading conftest",
            "No module named 'payment_sandbox'",
        ],
    );
}

#[test]
fn a_run_with_history_starts_its_batches_at_once_and_follows_added_and_removed_cases() {
    let project = Project::new(&[
        ("tests/test_receipt.py", RECEIPT_TESTS),
        ("tests/test_totals.py", TOTALS_TESTS),
        ("conftest.py", ""),
    ]);
    let report = project.json_path();
    let run = || {
        let out = project.test(&["--jobs", "2", "--json", report.to_str().expect("utf-8")]);
        assert_exit(&out, 1);
        (read_json(&report), stderr(&out))
    };
    let listed_by_a_job = |json: &serde_json::Value| listed_by_a_job(&project, json);
    let (first, err) = run();
    // No history: one batch per slot collects the suite and runs its part, no listing first.
    assert!(
        !listed_by_a_job(&first),
        "a first run listed its cases: {err}"
    );
    assert_eq!(first["jobs"].as_array().map(Vec::len), Some(2), "{first}");
    assert_eq!(first["audit"]["selection"]["collected"], 9, "{first}");
    assert_eq!(assay_failures(&first), pytest_failures(project.path()));
    let (second, err) = run();
    assert!(!listed_by_a_job(&second), "history knew the cases: {err}");
    assert_eq!(second["jobs"].as_array().map(Vec::len), Some(2), "{second}");
    assert_eq!(outcomes(&second), outcomes(&first));
    assert_eq!(assay_failures(&second), assay_failures(&first));
    assert_eq!(second["audit"]["selection"]["contained"], true, "{second}");
    assert_eq!(second["audit"]["selection"]["collected"], 9);
    // Each case's output is still its own.
    let footer = second["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .find(|c| c["display"] == "tests/test_receipt.py::test_footer")
        .expect("footer")
        .clone();
    let out = artifact_text(&project, &footer, "stdout");
    assert!(
        out.contains("footer: thanks") && !out.contains("header: ACME"),
        "{out}"
    );
    assert!(
        !err.contains("FAIL tests/test_receipt.py::test_header"),
        "{err}"
    );

    // A case removed, one added to a known file and a new file: the batches' own collection
    // says so, the added cases run in one more round, and the report is pytest's.
    project.commit(
        &[
            (
                "tests/test_totals.py",
                &TOTALS_TESTS.replace("def test_average():", "def test_mean():"),
            ),
            (
                "tests/test_refund.py",
                "def test_refund():\n    assert -5 + 5 == 1\n\n\ndef test_void():\n    pass\n",
            ),
        ],
        "rename a test, add refunds",
    );
    let (third, err) = run();
    assert!(!listed_by_a_job(&third), "{err}");
    let listed = listed_displays(&project.test(&["--list-cases"]));
    let displays: Vec<String> = outcomes(&third).into_iter().map(|(d, _)| d).collect();
    assert_eq!(displays, listed, "the collection's cases, in its order");
    assert_eq!(assay_failures(&third), pytest_failures(project.path()));
    assert!(
        assay_failures(&third).contains(&"tests/test_refund.py::test_refund".to_owned()),
        "{third}"
    );
    assert!(
        third["jobs"].as_array().map_or(0, Vec::len) > 2,
        "a round for the added cases"
    );
    assert_eq!(third["audit"]["selection"]["contained"], true, "{third}");
    assert!(
        !err.contains("test_average"),
        "a removed case is not reported: {err}"
    );
    // The next run knows every case again.
    let (fourth, _) = run();
    assert_eq!(fourth["jobs"].as_array().map(Vec::len), Some(2), "{fourth}");
    assert_eq!(outcomes(&fourth), outcomes(&third));
}

/// Whether the run `json` reports listed its cases with a job of its own before its batches.
fn listed_by_a_job(project: &Project, json: &serde_json::Value) -> bool {
    let run_id = json["run_id"].as_str().expect("run id");
    walk_find(
        project.store.path(),
        &format!("{run_id}-collect/jobs/0000/stdout.log"),
    )
    .is_some()
}

fn walk_find(root: &Path, key: &str) -> Option<PathBuf> {
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).ok()?.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.to_string_lossy().ends_with(key) {
                return Some(path);
            }
        }
    }
    None
}

#[test]
fn selectors_union_in_plan_order_and_one_that_matches_nothing_fails_first() {
    let project = pytest_project();
    let cases = listing(&project.test(&["--list-cases"]));
    let cursor_ref = cases[6].0.clone();
    let out = project.test(&[
        "--list-cases",
        "--case",
        &cursor_ref,
        "--directory",
        "tests/billing",
    ]);
    assert_exit(&out, 0);
    let displays = listed_displays(&out);
    assert_eq!(
        displays,
        [
            "tests/billing/test_invoice.py::test_total",
            "tests/billing/test_invoice.py::test_tax",
            "tests/test_pager.py::TestCursor::test_next",
        ]
    );
    let run = project.test(&["--file", "tests/billing/test_invoice.py", "--jobs", "2"]);
    assert_exit(&run, 0);
    assert!(
        stderr(&run).contains("[test] 2/2 passed"),
        "{}",
        stderr(&run)
    );
    for (args, needle) in [
        (
            vec!["--file", "tests/test_missing.py"],
            "matches no collected case",
        ),
        (
            vec!["--directory", "tests/bill"],
            "matches no collected case",
        ),
        (vec!["--case", "test_total"], "neither a case ref nor"),
        (vec!["--case", "v1.0000000000000000"], "stale or unknown"),
        (
            vec!["--case", &cursor_ref, "--case", &cursor_ref],
            "given twice",
        ),
        (vec!["--jobs", "0"], "greater than zero"),
        (vec!["--jobs", "+2"], "not a decimal"),
        (vec!["--jobs", "x"], "not a decimal"),
        (
            vec!["--jobs", "2", "--jobs", "3"],
            "cannot be used multiple times",
        ),
        (vec!["--jobs"], "a value is required"),
    ] {
        let out = project.test(&args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
        assert!(
            !stderr(&out).contains("[test] 0/"),
            "{args:?} ran something"
        );
    }
}

#[test]
fn a_failing_case_exits_one_and_a_new_failure_raises_a_history_alert() {
    let project = pytest_project();
    let first = project.test(&["--jobs", "2"]);
    assert_exit(&first, 0);
    project.commit(
        &[(
            "tests/billing/test_invoice.py",
            &INVOICE_TESTS.replace("== 20.0", "== 21.0"),
        )],
        "tax rounding regression",
    );
    let second = project.test_reporting(&["--jobs", "2"]);
    assert_exit_saying(
        &second,
        1,
        &[
            "[test] FAIL tests/billing/test_invoice.py::test_tax",
            "[ALERT] [warning] regression: 1 new failure (was 0, now 1)",
        ],
    );
    assert!(
        stdout(&second).contains("Status: failing | vs previous: 1 new failure"),
        "{}",
        stdout(&second)
    );
    let json = project.report();
    assert_eq!(json["status"], "failed");
    assert_eq!(json["totals"]["failed"], 1);
    assert_eq!(json["history"]["alerts"][0]["type"], "regression");
    let history = project.assay(&["history"]);
    let trend = stdout(&history);
    assert_eq!(code(&history), 0);
    assert!(trend.contains("2 runs recorded"), "{trend}");
    assert!(trend.contains("Tests: 7/7 passed"), "{trend}");
    assert!(
        trend.contains("Tests: 6/7 passed") && trend.contains("regression"),
        "{trend}"
    );
}

#[test]
fn a_halt_stops_admission_until_resume() {
    let project = pytest_project();
    let halt = project.assay(&["halt", "--reason", "invoice database migration"]);
    assert_exit(&halt, 0);
    let blocked = project.test(&["--jobs", "2"]);
    assert_exit(&blocked, 3);
    assert!(
        stderr(&blocked).contains("[HALT] test stopped. Reason: invoice database migration"),
        "{}",
        stderr(&blocked)
    );
    assert!(!stderr(&blocked).contains("[test] 0/"));
    let resume = project.assay(&["resume"]);
    assert_eq!(code(&resume), 0);
    let run = project.test(&["--jobs", "2"]);
    assert_exit(&run, 0);
    assert!(stderr(&run).contains("[test] 7/7 passed"));
}

const LEDGER: &str = r#"[[quarantine]]
test = "tests/test_pager.py::test_slow_render"
reason = "timing-dependent under parallel execution"
added = "2026-09-02"
expires = "2026-11-02"
tracker = "INV-4412"
"#;

#[test]
fn the_audit_gate_refuses_a_ledger_that_gains_an_entry_and_allows_a_removal() {
    let project = pytest_project();
    project.commit(
        &[(".assay/quarantine.toml", LEDGER)],
        "quarantine the slow render",
    );
    project.mark_base();
    let gained = format!(
        "{LEDGER}\n[[quarantine]]\ntest = \"tests/billing/test_invoice.py::test_tax\"\nreason = \"rounding\"\nadded = \"2026-09-10\"\n"
    );
    project.commit(
        &[(".assay/quarantine.toml", &gained)],
        "quarantine the tax test",
    );
    let out = project.test(&["--audit-base", "base"]);
    let err = assert_exit_saying(
        &out,
        1,
        &["the ledger gains entry tests/billing/test_invoice.py::test_tax"],
    );
    assert!(!err.contains("[test] 0/"), "nothing ran: {err}");
    project.commit(
        &[(".assay/quarantine.toml", "")],
        "the slow render is fixed",
    );
    let out = project.test(&["--audit-base", "base", "--jobs", "2"]);
    assert_exit(&out, 0);
}

#[test]
fn unittest_projects_run_case_by_case_through_the_adapter() {
    let project = Project::new(&[
        ("tests/__init__.py", ""),
        (
            "tests/test_ledger.py",
            "import unittest\n\n\nclass LedgerTests(unittest.TestCase):\n    def test_balance(self):\n        print('balance checked')\n        self.assertEqual(3 - 1, 2)\n\n    def test_overdraft(self):\n        self.assertLess(-5, 0)\n\n    @unittest.skip('needs the bank sandbox')\n    def test_transfer(self):\n        pass\n",
        ),
    ]);
    let cases = listing(&project.test(&["--list-cases"]));
    let displays: Vec<&str> = cases.iter().map(|(_, d)| d.as_str()).collect();
    assert_eq!(
        displays,
        [
            "tests/test_ledger.py::LedgerTests::test_balance",
            "tests/test_ledger.py::LedgerTests::test_overdraft",
            "tests/test_ledger.py::LedgerTests::test_transfer",
        ]
    );
    let out = project.test_reporting(&["--jobs", "3"]);
    assert_exit(&out, 0);
    let json = project.report();
    let outcomes: Vec<&str> = json["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| c["outcome"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(outcomes, ["passed", "passed", "skipped"]);
    assert_eq!(json["runner"], "unittest");
}

/// A first unittest run lists nothing before its batches: each of the slots' batches discovers
/// the suite itself, runs its part's modules whole (a module's class state stays in one
/// process) and records the collection; the next run, with a result cache, lists the cases so
/// the cache can answer them.
#[test]
fn a_first_unittest_run_partitions_the_suite_by_module_without_a_listing() {
    let project = Project::new(&[
        ("tests/__init__.py", ""),
        (
            "tests/test_ledger.py",
            "import unittest\n\n\nclass LedgerTests(unittest.TestCase):\n    opened = None\n\n    def test_a_open(self):\n        LedgerTests.opened = 'cash'\n\n    def test_b_post(self):\n        self.assertEqual(LedgerTests.opened, 'cash')\n",
        ),
        (
            "tests/test_rates.py",
            "import unittest\n\n\nclass RateTests(unittest.TestCase):\n    def test_standard(self):\n        self.assertEqual(round(100 * 0.2), 20)\n\n    def test_reduced(self):\n        self.assertEqual(round(100 * 0.05), 6)\n",
        ),
        (
            "tests/test_refunds.py",
            "import unittest\n\n\nclass RefundTests(unittest.TestCase):\n    def test_void(self):\n        self.assertTrue(True)\n",
        ),
    ]);
    let run = || {
        let out = project.test_reporting(&["--runner", "unittest", "--jobs", "2"]);
        assert_exit(&out, 1);
        (project.report(), stderr(&out))
    };
    let listed_by_a_job = |json: &serde_json::Value| listed_by_a_job(&project, json);
    let (first, err) = run();
    assert!(
        !listed_by_a_job(&first),
        "a first run listed its cases: {err}"
    );
    assert_eq!(first["jobs"].as_array().map(Vec::len), Some(2), "{first}");
    assert_eq!(first["audit"]["selection"]["collected"], 5, "{first}");
    assert_eq!(
        assay_failures(&first),
        ["tests/test_rates.py::RateTests::test_reduced"],
        "{first}"
    );
    // Each module ran whole in one batch.
    let job_of = |json: &serde_json::Value, display: &str| {
        json["cases"]
            .as_array()
            .expect("cases")
            .iter()
            .find(|c| c["display"] == display)
            .map(|c| c["job"].clone())
    };
    assert_eq!(
        job_of(&first, "tests/test_ledger.py::LedgerTests::test_a_open"),
        job_of(&first, "tests/test_ledger.py::LedgerTests::test_b_post"),
        "{first}"
    );
    let (second, err) = run();
    assert!(
        listed_by_a_job(&second),
        "the cache had nothing to answer: {err}"
    );
    assert_eq!(second["cache"]["served"], 4, "{second}");
    assert_eq!(outcomes(&second), outcomes(&first));
}

/// A module that cannot import stops a first, partitioned run as the listing would have: with
/// the module's name and the import error.
#[test]
fn a_unittest_module_that_fails_to_import_is_named_on_a_first_run() {
    let project = Project::new(&[
        ("tests/__init__.py", ""),
        (
            "tests/test_refunds.py",
            "import unittest\n\nimport refund_gateway\n\n\nclass RefundTests(unittest.TestCase):\n    def test_void(self):\n        pass\n",
        ),
        (
            "tests/test_rates.py",
            "import unittest\n\n\nclass RateTests(unittest.TestCase):\n    def test_standard(self):\n        self.assertEqual(round(100 * 0.2), 20)\n",
        ),
    ]);
    let out = project.test(&["--runner", "unittest", "--jobs", "2", "--no-cache"]);
    let err = stderr(&out);
    assert_ne!(code(&out), 0, "{err}");
    assert_says(
        &err,
        &[
            "tests/test_refunds.py failed to collect",
            "No module named 'refund_gateway'",
        ],
    );
}

/// more-itertools' shape: a test module's `load_tests` adds the product module's doctests,
/// whose ids name the documented objects (a class, a function), not a test method.
#[test]
fn doctests_a_load_tests_hook_adds_are_cases_of_the_product_file_and_run_by_id() {
    let project = Project::new(&[
        (
            "ledger.py",
            "import pathlib\n\n\ndef balance(entries):\n    \"\"\"The sum of the entries.\n\n    >>> balance([5, -2])\n    3\n    \"\"\"\n    return sum(entries)\n\n\ndef reset():\n    \"\"\"Clears the ledger.\n\n    >>> 1 + 1\n    2\n    \"\"\"\n    pathlib.Path('ledger-was-reset').write_text('yes')\n\n\nclass Account:\n    \"\"\"An account.\n\n    >>> Account('savings').name\n    'checking'\n    \"\"\"\n\n    def __init__(self, name):\n        self.name = name\n",
        ),
        ("tests/__init__.py", ""),
        (
            "tests/test_ledger.py",
            "import doctest\nimport unittest\n\nimport ledger\n\n\ndef load_tests(loader, tests, ignore):\n    tests.addTests(doctest.DocTestSuite(ledger))\n    return tests\n\n\nclass LedgerTests(unittest.TestCase):\n    def test_balance(self):\n        self.assertEqual(ledger.balance([1, 1]), 2)\n",
        ),
    ]);
    let cases = listing(&project.test(&["--runner", "unittest", "--list-cases"]));
    let displays: Vec<&str> = cases.iter().map(|(_, d)| d.as_str()).collect();
    assert_eq!(
        displays,
        [
            "tests/test_ledger.py::LedgerTests::test_balance",
            "ledger.py::ledger::Account",
            "ledger.py::ledger::balance",
            "ledger.py::ledger::reset",
        ]
    );
    let out = project.test_reporting(&["--runner", "unittest", "--shards", "per-case"]);
    assert_eq!(code(&out), 1, "the Account doctest fails: {}", stderr(&out));
    assert_eq!(
        outcomes(&project.report()),
        pairs(&[
            ("tests/test_ledger.py::LedgerTests::test_balance", "passed"),
            ("ledger.py::ledger::Account", "failed"),
            ("ledger.py::ledger::balance", "passed"),
            // Selected by id without calling `reset` (which would make it no test at all).
            ("ledger.py::ledger::reset", "passed"),
        ])
    );
}

/// pathspec 0.11.2's shape: a test sets a class attribute that a later test of its class reads.
/// Run apart it fails; with the whole suite in order it passes, as `python -m unittest` does.
#[test]
fn a_case_that_passes_only_after_another_is_order_dependent_not_a_regression() {
    const ARCHIVE_TESTS: &str = "import unittest\n\n\nclass ArchiveTests(unittest.TestCase):\n    root = None\n\n    def test_1_create_root(self):\n        ArchiveTests.root = 'archive'\n\n    def test_2_list_root(self):\n        self.assertEqual(ArchiveTests.root, 'archive')\n\n    def test_3_checksum(self):\n        self.assertEqual(sum([1, 2]), 3)\n";
    let project = Project::new(&[
        ("tests/__init__.py", ""),
        ("tests/test_archive.py", ARCHIVE_TESTS),
    ]);
    let report = project.json_path();
    let args = [
        "--runner",
        "unittest",
        "--shards",
        "per-case",
        "--json",
        report.to_str().expect("utf-8"),
    ];
    let out = project.test(&args);
    assert_exit(&out, 0);
    let json = read_json(&report);
    assert_eq!(
        outcomes(&json),
        pairs(&[
            (
                "tests/test_archive.py::ArchiveTests::test_1_create_root",
                "passed"
            ),
            (
                "tests/test_archive.py::ArchiveTests::test_2_list_root",
                "passed"
            ),
            (
                "tests/test_archive.py::ArchiveTests::test_3_checksum",
                "passed"
            ),
        ])
    );
    let flagged: Vec<bool> = json["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| c["order_dependent"] == true)
        .collect();
    assert_eq!(flagged, [false, true, false]);
    let message = json["cases"][1]["message"].as_str().unwrap_or("");
    assert!(
        message.contains("AssertionError: None != 'archive'"),
        "{message}"
    );
    let err = stderr(&out);
    assert!(
        err.contains("[order] 1 case is order-dependent")
            && err.contains("ArchiveTests::test_2_list_root"),
        "{err}"
    );
    // A real failure next time is the one new failure: the order-dependent case never is.
    project.commit(
        &[(
            "tests/test_archive.py",
            &ARCHIVE_TESTS.replace("[1, 2]), 3)", "[1, 2]), 4)"),
        )],
        "Checksum counts the header",
    );
    let out = project.test(&args);
    assert_exit(&out, 1);
    let json = read_json(&report);
    assert_eq!(
        json["history"]["newly_failing"],
        serde_json::json!(["tests/test_archive.py::ArchiveTests::test_3_checksum"]),
        "{}",
        stderr(&out)
    );
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).expect("report written")).expect("JSON")
}

/// The cases of a report as (display, outcome), in report order.
fn outcomes(json: &serde_json::Value) -> Vec<(String, String)> {
    json["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| {
            (
                c["display"].as_str().unwrap_or("").to_owned(),
                c["outcome"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

const LEDGER_GO: &str = "package ledger\n\nfunc Balance(entries []int) int {\n\ttotal := 0\n\tfor _, e := range entries {\n\t\ttotal += e\n\t}\n\treturn total\n}\n\nfunc Overdrawn(balance int) bool { return balance < -1 }\n";

const LEDGER_TEST_GO: &str = "package ledger\n\nimport \"testing\"\n\nfunc TestBalance(t *testing.T) {\n\tif Balance([]int{5, -2}) != 3 {\n\t\tt.Fatal(\"balance\")\n\t}\n}\n\nfunc TestOverdrawn(t *testing.T) {\n\tif !Overdrawn(-1) {\n\t\tt.Fatal(\"a negative balance is overdrawn\")\n\t}\n}\n\nfunc BenchmarkBalance(b *testing.B) {\n\tfor i := 0; i < b.N; i++ {\n\t\tBalance([]int{1})\n\t}\n}\n";

const CACHE_GO: &str = "package cache\n\nfunc Expired(age, ttl int) bool { return age >= ttl }\n";

const CACHE_TEST_GO: &str = "package cache\n\nimport \"testing\"\n\nfunc TestExpiry(t *testing.T) {\n\tt.Run(\"expired\", func(t *testing.T) {\n\t\tif !Expired(5, 3) {\n\t\t\tt.Fatal(\"past its ttl\")\n\t\t}\n\t})\n\tt.Run(\"fresh\", func(t *testing.T) {\n\t\tif Expired(1, 3) {\n\t\t\tt.Fatal(\"fresh\")\n\t\t}\n\t})\n}\n\nfunc TestRedis(t *testing.T) {\n\tt.Skip(\"needs a redis server\")\n}\n";

#[test]
fn go_tests_are_listed_per_package_and_run_one_by_one() {
    let project = Project::new(&[
        ("go.mod", "module example.com/ledger\n\ngo 1.19\n"),
        ("ledger.go", LEDGER_GO),
        ("ledger_test.go", LEDGER_TEST_GO),
        ("cache/cache.go", CACHE_GO),
        ("cache/expiry_test.go", CACHE_TEST_GO),
    ]);
    let listed = project.test(&["--list-cases"]);
    assert_exit(&listed, 0);
    let displays = listed_displays(&listed);
    assert_eq!(
        displays,
        [
            "ledger_test.go::TestBalance",
            "ledger_test.go::TestOverdrawn",
            "cache/expiry_test.go::TestExpiry",
            "cache/expiry_test.go::TestRedis",
        ]
    );
    let cache_only = listed_displays(&project.test(&["--list-cases", "--directory", "cache"]));
    assert_eq!(cache_only.len(), 2, "{cache_only:?}");
    let run = project.test_reporting(&["--jobs", "2"]);
    assert_exit_saying(&run, 1, &["[test] FAIL ledger_test.go::TestOverdrawn"]);
    let json = project.report();
    assert_eq!(json["runner"], "go");
    assert_eq!(
        outcomes(&json),
        pairs(&[
            ("ledger_test.go::TestBalance", "passed"),
            ("ledger_test.go::TestOverdrawn", "failed"),
            ("cache/expiry_test.go::TestExpiry", "passed"),
            ("cache/expiry_test.go::TestRedis", "skipped"),
        ])
    );
    // Subtests ran and belong to their test; nothing ran that was not selected.
    assert_eq!(json["audit"]["selection"]["contained"], true);
    assert_eq!(json["audit"]["selection"]["executed"], 4);
}

/// The outcomes of the node projects' two test files: the rounding file's test fails.
const INVOICE_PASSES_ROUNDING_FAILS: &[(&str, &str)] = &[
    ("test/invoice.test.js", "passed"),
    ("test/rounding.test.js", "failed"),
];

/// A node project's `--list-cases` lists its two test files (by their JavaScript's names),
/// each a case.
fn assert_node_lists_its_two_test_files(project: &Project) {
    let listed = project.test(&["--runner", "node", "--list-cases"]);
    assert_exit(&listed, 0);
    let displays = listed_displays(&listed);
    assert_eq!(displays, ["test/invoice.test.js", "test/rounding.test.js"]);
}

const INVOICE_JS: &str = "exports.total = (net, rate) => Math.round(net * (1 + rate));\n";

#[test]
fn node_test_files_are_cases_and_a_failing_file_fails_its_case() {
    let project = Project::new(&[
        (
            "package.json",
            "{\"name\": \"invoice\", \"private\": true}\n",
        ),
        ("invoice.js", INVOICE_JS),
        (
            "test/invoice.test.js",
            "const { test } = require('node:test');\nconst assert = require('node:assert/strict');\nconst { total } = require('../invoice.js');\n\ntest('adds the tax', () => {\n  assert.equal(total(100, 0.2), 120);\n});\n\ntest('zero stays zero', () => {\n  assert.equal(total(0, 0.2), 0);\n});\n",
        ),
        (
            "test/rounding.test.js",
            "const { test } = require('node:test');\nconst assert = require('node:assert/strict');\nconst { total } = require('../invoice.js');\n\ntest('rounds half cents down', () => {\n  assert.equal(total(0.5, 0), 0);\n});\n",
        ),
    ]);
    assert_node_lists_its_two_test_files(&project);
    // One job per file, then both files in one node run: either way each result is attributed
    // to the file that reported it.
    for (layout, jobs) in [("--jobs", 2), ("--shards", 1)] {
        let run = project.test_reporting(&["--runner", "node", layout, &jobs.to_string()]);
        let err = assert_exit_saying(&run, 1, &["[test] FAIL test/rounding.test.js"]);
        assert!(!err.contains("[test] FAIL test/invoice.test.js"), "{err}");
        let json = project.report();
        assert_eq!(outcomes(&json), pairs(INVOICE_PASSES_ROUNDING_FAILS));
        let planned = json["jobs"].as_array().expect("jobs");
        assert_eq!(planned.len(), jobs, "{layout}: {planned:?}");
        assert_eq!(json["audit"]["selection"]["contained"], true);
        assert_eq!(json["audit"]["selection"]["executed"], 2);
    }
}

#[test]
fn typescript_test_files_run_as_their_javascript_and_a_failing_one_fails_its_case() {
    let project = Project::new(&[
        (
            "package.json",
            "{\"name\": \"invoice\", \"private\": true, \"type\": \"module\"}\n",
        ),
        (
            "src/invoice.ts",
            "export interface Line { net: number; rate: number }\n\nexport const total = ({ net, rate }: Line): number => Math.round(net * (1 + rate));\n",
        ),
        (
            "src/invoice.d.ts",
            "export declare const total: (line: { net: number; rate: number }) => number;\n",
        ),
        (
            "test/invoice.test.ts",
            "import { test } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { total, type Line } from '../src/invoice.js';\n\nconst taxed: Line = { net: 100, rate: 0.2 };\n\ntest('adds the tax', () => {\n  assert.equal(total(taxed), 120);\n});\n",
        ),
        (
            "test/rounding.test.ts",
            "import { test } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { total } from '../src/invoice.js';\n\ntest('rounds half cents down', () => {\n  assert.equal(total({ net: 0.5, rate: 0 }), 0);\n});\n",
        ),
    ]);
    assert_node_lists_its_two_test_files(&project);
    let run = project.test_reporting(&["--runner", "node", "--jobs", "2"]);
    assert_exit(&run, 1);
    assert_eq!(
        outcomes(&project.report()),
        pairs(INVOICE_PASSES_ROUNDING_FAILS)
    );
}

/// The manifest corpus fixture: `interpreter.py` and `corpus/`, rows of expressions for a tiny
/// interpreter that gets halving and booleans wrong.
fn corpus_files() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/manifest-corpus");
    let mut files = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("fixture dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(&root).expect("inside").to_string_lossy();
                let text = std::fs::read_to_string(&path).expect("fixture file");
                files.push((rel.into_owned(), text));
            }
        }
    }
    files
}

#[test]
fn manifest_rows_are_cases_judged_by_their_expectations() {
    let files = corpus_files();
    let borrowed: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let project = Project::new(&borrowed);
    let manifest = [
        "--runner",
        "manifest",
        "--manifest",
        "corpus/manifest.tsv",
        "--test-command",
        "python3 interpreter.py",
    ];
    let report = project.json_path();
    let mut args = manifest.to_vec();
    args.extend(["--jobs", "3", "--json", report.to_str().expect("utf-8")]);
    let run = project.test(&args);
    let err = assert_exit_saying(&run, 1, &["[test] FAIL corpus/integer/halve.inv"]);
    for failing in ["corpus/boolean/over-limit.inv", "corpus/boolean/paid.inv"] {
        assert!(err.contains(&format!("[test] FAIL {failing}")), "{err}");
    }
    assert_says(&err, &["[test] 9/9 completed, 3 failed"]);
    let json = read_json(&report);
    assert_eq!(
        outcomes(&json),
        pairs(&[
            ("corpus/integer/add-small.inv", "passed"),
            ("corpus/integer/halve.inv", "failed"),
            ("corpus/boolean/over-limit.inv", "failed"),
            ("corpus/float-sum.inv", "passed"),
            ("corpus/float-nan.inv", "passed"),
            ("corpus/no-discount.inv", "passed"),
            ("corpus/error/divide.inv", "passed"),
            ("corpus/boolean/paid.inv", "failed"),
            ("corpus/error/unknown-rate.inv", "passed"),
        ])
    );
    let expected = outcomes(&json);
    // By default rows are batched: no durations recorded yet, so two batches per slot.
    assert_eq!(json["jobs"].as_array().expect("jobs").len(), 6);

    // Rows batched three jobs to the worker: the same outcomes, each row with its own output.
    let mut args = manifest.to_vec();
    args.extend(["--shards", "3", "--json", report.to_str().expect("utf-8")]);
    let batched = project.test(&args);
    assert_exit_saying(&batched, 1, &["[test] 9/9 completed, 3 failed"]);
    let json = read_json(&report);
    assert_eq!(outcomes(&json), expected);
    assert_eq!(json["jobs"].as_array().expect("jobs").len(), 3);
    assert_eq!(json["audit"]["selection"]["contained"], true);
    assert_eq!(json["audit"]["selection"]["executed"], 9);
    let store = project.store.path();
    for case in json["cases"].as_array().expect("cases") {
        let display = case["display"].as_str().expect("display");
        let row = display.strip_prefix("corpus/").expect("a corpus case");
        let names: Vec<&str> = case["artifacts"]
            .as_array()
            .expect("artifacts")
            .iter()
            .map(|a| a["name"].as_str().expect("name"))
            .collect();
        assert_eq!(
            names,
            [format!("{row}:stdout"), format!("{row}:stderr")],
            "{display}"
        );
        if display == "corpus/integer/halve.inv" {
            let key = case["artifacts"][0]["key"].as_str().expect("key");
            let stored = walk_find(store, key).expect("the row's stdout is stored");
            let stdout = std::fs::read_to_string(stored).expect("artifact readable");
            assert_eq!(stdout.trim(), "3", "halving 7 floors to 3");
        }
    }

    // --file selects one row.
    let mut args = manifest.to_vec();
    args.extend([
        "--file",
        "corpus/integer/halve.inv",
        "--json",
        report.to_str().expect("utf-8"),
    ]);
    let one = project.test(&args);
    assert_exit(&one, 1);
    assert_eq!(
        outcomes(&read_json(&report)),
        pairs(&[("corpus/integer/halve.inv", "failed")])
    );

    let mut args = manifest.to_vec();
    args.extend(["--list-cases", "--directory", "corpus/integer"]);
    let integer = listed_displays(&project.test(&args));
    assert_eq!(
        integer,
        ["corpus/integer/add-small.inv", "corpus/integer/halve.inv"]
    );
    // An `error` row whose file is missing would "pass" by failing to open it: refused first.
    let rows = std::fs::read_to_string(project.path().join("corpus/manifest.tsv")).expect("read");
    project.commit(
        &[(
            "corpus/manifest.tsv",
            &format!("{rows}error/overdraft.inv\terror\n"),
        )],
        "corpus: an overdraft row",
    );
    let refused = project.test(&manifest);
    let err = assert_exit_saying(
        &refused,
        1,
        &["the case file error/overdraft.inv is not in the tree"],
    );
    assert!(!err.contains("[test] 0/"), "nothing runs: {err}");
}

const PRICING_PY: &str = "def net(gross, rate):\n    return round(gross / (1 + rate), 2)\n\n\ndef gross(net, rate):\n    return round(net * (1 + rate), 2)\n";

const PRICING_TESTS: &str = "from pricing import gross, net\n\n\ndef test_net():\n    assert net(120, 0.2) == 100\n\n\ndef test_gross():\n    assert gross(100, 0.2) == 120\n";

/// Coverage of the pricing module drops when uncovered code lands.
const PRICING_UNTESTED: &str = "\n\ndef discount(price, code):\n    if code == 'SPRING':\n        return price * 0.9\n    if code == 'STAFF':\n        return price * 0.7\n    if code == 'VIP':\n        return price * 0.8\n    return price\n";

const COVERAGE_COMMAND: &str = "sh -c 'python3 -m coverage run --include=pricing.py -m pytest -q -p no:cacheprovider && python3 -m coverage report'";

#[test]
fn a_command_suite_records_counts_and_coverage_and_a_coverage_drop_raises_an_alert() {
    let project = Project::new(&[
        ("pricing.py", PRICING_PY),
        ("tests/test_pricing.py", PRICING_TESTS),
    ]);
    let command = ["--runner", "command", "--test-command", COVERAGE_COMMAND];
    let listed = project.test(&[&command[..], &["--list-cases"][..]].concat());
    let displays = listed_displays(&listed);
    assert_eq!(displays, [COVERAGE_COMMAND]);
    let first = project.test(&command);
    assert_exit(&first, 0);
    assert!(
        stdout(&first).contains("Tests: 2/2 passed, 0 skipped (100.0% coverage)"),
        "{}",
        stdout(&first)
    );
    project.commit(
        &[("pricing.py", &format!("{PRICING_PY}{PRICING_UNTESTED}"))],
        "pricing: discount codes",
    );
    let report = project.json_path();
    let junit = project.state.path().join("junit.xml");
    let outputs = [
        "--json",
        report.to_str().expect("utf-8"),
        "--junit",
        junit.to_str().expect("utf-8"),
    ];
    let second = project.test(&[&command[..], &outputs[..]].concat());
    assert_exit_saying(
        &second,
        0,
        &["[ALERT] [warning] coverage_drop: coverage dropped"],
    );
    let json = read_json(&report);
    assert_eq!(json["history"]["alerts"][0]["type"], "coverage_drop");
    assert!(json["history"]["coverage_drop"].as_f64().unwrap_or(0.0) > 5.0);
    let history = project.assay(&["history", "--json"]);
    let history: serde_json::Value = serde_json::from_slice(&history.stdout).expect("JSON");
    let runs = history["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["coverage_pct"], 100.0);
    assert!(runs[1]["coverage_pct"].as_f64().unwrap_or(100.0) < 95.0);
    assert_eq!(
        (runs[1]["total"].as_u64(), runs[1]["passed"].as_u64()),
        (Some(2), Some(2))
    );
    let xml = std::fs::read_to_string(&junit).expect("junit written");
    assert!(xml.contains("tests=\"1\" failures=\"0\""), "{xml}");
}

#[test]
fn a_command_that_is_not_found_errors_and_a_failing_one_fails() {
    let project = Project::new(&[("ci/check.sh", "echo '3 passed, 1 failed'\nexit 1\n")]);
    let missing = project.test(&[
        "--runner",
        "command",
        "--test-command",
        "sh -c ./ci/lint.sh",
    ]);
    assert_exit(&missing, 1);
    assert!(
        stdout(&missing).contains("Status: error"),
        "{}",
        stdout(&missing)
    );
    let failing =
        project.test_reporting(&["--runner", "command", "--test-command", "sh ci/check.sh"]);
    assert_exit(&failing, 1);
    assert!(
        stdout(&failing).contains("Tests: 3/4 passed")
            && stdout(&failing).contains("Status: failing"),
        "{}",
        stdout(&failing)
    );
    let json = project.report();
    assert_eq!(json["cases"][0]["outcome"], "failed");
    let history = project.assay(&["history", "--json"]);
    let history: serde_json::Value = serde_json::from_slice(&history.stdout).expect("JSON");
    assert_eq!(history["runs"][0]["status"], "error");
    assert_eq!(
        history["runs"][0]["status_detail"],
        "test command not found or not executable"
    );
}

#[test]
fn a_junit_command_is_one_case_judged_by_its_report() {
    let script = "import sys\nfailed = len(sys.argv) > 1\nwith open('build/TEST-pricing.xml', 'w') as f:\n    f.write('<testsuite name=\"pricing\" tests=\"2\" failures=\"%d\" errors=\"0\" skipped=\"0\">'\n            '<testcase classname=\"pricing.NetTest\" name=\"net\"/>'\n            '<testcase classname=\"pricing.GrossTest\" name=\"gross\">%s</testcase>'\n            '</testsuite>' % (int(failed), '<failure message=\"off by a cent\"/>' if failed else ''))\n";
    let project = Project::new(&[("ci/junit.py", script), ("build/.keep", "")]);
    let report = project.json_path();
    let passing = project.test(&[
        "--runner",
        "junit",
        "--test-command",
        "python3 ci/junit.py",
        "--test-report",
        "junit:build/TEST-pricing.xml",
        "--json",
        report.to_str().expect("utf-8"),
    ]);
    assert_exit(&passing, 0);
    assert_eq!(
        outcomes(&read_json(&report)),
        pairs(&[("python3 ci/junit.py", "passed")])
    );
    let failing = project.test(&[
        "--runner",
        "junit",
        "--test-command",
        "python3 ci/junit.py fail",
        "--test-report",
        "junit:build/TEST-pricing.xml",
    ]);
    assert_exit(&failing, 1);
    assert!(
        stderr(&failing).contains("[test] FAIL python3 ci/junit.py fail"),
        "{}",
        stderr(&failing)
    );
    let refused = project.test(&["--runner", "junit"]);
    assert_exit(&refused, 2);
    assert!(
        stderr(&refused).contains("needs a command"),
        "{}",
        stderr(&refused)
    );
}

/// Strips what depends on timing or the run's identity: run ids, start times, durations,
/// job ids and the artifacts (their keys name the run; their bytes include timings).
fn timing_free(mut json: serde_json::Value) -> serde_json::Value {
    let null = serde_json::Value::Null;
    for key in ["run_id", "started_at", "duration_s"] {
        json[key] = null.clone();
    }
    for case in json["cases"].as_array_mut().expect("cases") {
        case["duration_s"] = null.clone();
        case["artifacts"] = null.clone();
    }
    for job in json["jobs"].as_array_mut().expect("jobs") {
        for key in ["job_id", "duration_s", "artifacts"] {
            job[key] = null.clone();
        }
    }
    for run in json["history"]["recent"]
        .as_array_mut()
        .expect("recent runs")
    {
        for key in ["timestamp", "run_id", "duration_s"] {
            run[key] = null.clone();
        }
    }
    json
}

#[test]
fn a_three_hundred_test_suite_reports_the_same_with_one_job_or_four() {
    let mut files: Vec<(String, String)> = vec![("conftest.py".into(), String::new())];
    for module in 0..30 {
        let mut text = String::from("import pytest\n\n");
        for test in 0..10u32 {
            let body = match (module, test) {
                (7, 3) => "    assert round(2.675, 2) == 2.68, 'binary rounding'\n".to_owned(),
                (12, 0) => "    pytest.skip('needs the currency table')\n".to_owned(),
                _ => format!(
                    "    assert sum(range({test})) == {}\n",
                    (0..test).sum::<u32>()
                ),
            };
            text.push_str(&format!(
                "\ndef test_invoice_{module:02}_{test}():\n{body}\n"
            ));
        }
        files.push((format!("tests/test_invoices_{module:02}.py"), text));
    }
    let borrowed: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let project = Project::new(&borrowed);
    // Batches of about 15 cases keep 300 cases to seconds; each run starts without recorded
    // durations, so both plan the same batches and only the number in flight differs; both
    // run every case.
    let run = |jobs: &str, report: &Path| {
        let _ = std::fs::remove_dir_all(project.state.path().join("history"));
        let out = project.test(&[
            "--jobs",
            jobs,
            "--no-cache",
            "--shards",
            "20",
            "--json",
            report.to_str().expect("utf-8"),
        ]);
        assert_exit(&out, 1);
        assert!(
            stderr(&out).contains("[test] FAIL tests/test_invoices_07.py::test_invoice_07_3"),
            "{}",
            stderr(&out)
        );
        read_json(report)
    };
    let one = run("1", &project.state.path().join("one.json"));
    let four = run("4", &project.state.path().join("four.json"));
    assert_eq!(one["totals"]["total"], 300);
    assert_eq!(one["totals"]["passed"], 298);
    assert_eq!(one["totals"]["failed"], 1);
    assert_eq!(one["totals"]["skipped"], 1);
    assert_eq!(one["jobs"].as_array().map(Vec::len), Some(20));
    assert_eq!(timing_free(one), timing_free(four));
}

/// A fleet (`ClusterSandbox`, a file store) with its coordinator and one process-sandbox
/// worker of two slots, as `assay` processes.
fn fleet_with_one_worker() -> (ClusterSandbox, [FleetProcess; 2]) {
    let fleet = ClusterSandbox::with_file_store();
    let assay = Path::new(env!("CARGO_BIN_EXE_assay"));
    let coordinator = fleet
        .process(assay, "coordinator", &["coordinator"])
        .ready("coordinator started")
        .start();
    let worker = fleet
        .process(
            assay,
            "worker",
            &["worker", "--slots", "2", "--sandbox", "process"],
        )
        .env(
            "ASSAY_TREE_CACHE_DIR",
            fleet.dir().join("worker-trees").display().to_string(),
        )
        .ready("worker started")
        .start();
    (fleet, [coordinator, worker])
}

#[test]
fn a_suite_runs_through_the_fleet_and_the_fleet_halt_stops_it_until_resume() {
    let (fleet, _services) = fleet_with_one_worker();
    let url = fleet.nats_url();
    let store = fleet.store_url();
    let store_dir = fleet.store_path().expect("a file store");
    let project = pytest_project();
    let report = project.json_path();
    let fleet = ["--cluster", url.as_str(), "--store", store.as_str()];
    let out = project.test(
        &[
            &fleet[..],
            &["--jobs", "3", "--json", report.to_str().expect("utf-8")][..],
        ]
        .concat(),
    );
    let err = assert_exit_saying(&out, 0, &["[test] 7/7 passed"]);
    // Only a fleet's coordinator may write cache entries there: a fleet run keeps the cache
    // off and says so.
    assert_says(&err, &["[cache] not used: a fleet run"]);
    let json = read_json(&report);
    assert!(
        json["cache"]["not_used"]
            .as_str()
            .is_some_and(|why| why.starts_with("a fleet run")),
        "{json}"
    );
    assert!(!store_dir.as_path().join("cache/v1/cases").exists());
    let listed = listed_displays(&project.test(&["--list-cases"]));
    let ran: Vec<String> = outcomes(&json).into_iter().map(|(d, _)| d).collect();
    assert_eq!(ran, listed, "plan order on the fleet as embedded");
    assert!(outcomes(&json).iter().all(|(_, o)| o == "passed"), "{json}");
    // Each case's stdout is its own artifact in the fleet's store.
    let key = json["cases"][2]["artifacts"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["name"] == "stdout"))
        .and_then(|a| a["key"].as_str())
        .expect("stdout artifact")
        .to_owned();
    let stored = walk_find(store_dir.as_path(), &key).expect("artifact in the fleet store");
    let text = std::fs::read_to_string(stored).expect("readable");
    assert!(
        text.contains("rendered the slow page") && !text.contains("first page"),
        "the slow case's own output: {text}"
    );

    let halt = project.assay(&[
        "halt",
        "--cluster",
        &url,
        "--reason",
        "invoice database migration",
    ]);
    assert_exit(&halt, 0);
    let blocked = project.test(&fleet);
    assert_exit(&blocked, 3);
    assert!(
        stderr(&blocked).contains("[HALT] test stopped. Reason: invoice database migration"),
        "{}",
        stderr(&blocked)
    );
    // The fleet halt is the fleet's: this machine's embedded runs are not halted by it.
    let embedded = project.test(&["--file", "tests/billing/test_invoice.py"]);
    assert_exit(&embedded, 0);
    let resume = project.assay(&["resume", "--cluster", &url]);
    assert_exit(&resume, 0);
    assert!(
        stdout(&resume).contains("admission resumed"),
        "{}",
        stdout(&resume)
    );
    let again =
        project.test(&[&fleet[..], &["--file", "tests/billing/test_invoice.py"][..]].concat());
    assert_exit(&again, 0);
    assert!(
        stderr(&again).contains("[test] 2/2 passed"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn reachability_names_the_changed_lines_no_executed_test_reaches() {
    let project = Project::new(&[
        ("conftest.py", ""),
        // The project's own coverage settings must not narrow the map: read, this would hide
        // pricing.py from the run.
        (".coveragerc", "[run]\nomit = pricing.py\nbranch = True\n"),
        ("pricing.py", PRICING_PY),
        ("tests/test_pricing.py", PRICING_TESTS),
    ]);
    project.mark_base();
    project.commit(
        &[
            ("pricing.py", &format!("{PRICING_PY}{PRICING_UNTESTED}")),
            ("refunds.py", "def refund(amount):\n    return -amount\n"),
            (
                "tests/test_discount.py",
                "from pricing import discount\n\n\ndef test_spring():\n    assert discount(100, 'SPRING') == 90\n",
            ),
        ],
        "pricing: discount codes; refunds",
    );
    let out = project.test_reporting(&["--audit-base", "base", "--reachability"]);
    let err = assert_exit(&out, 0);
    // discount(): the SPRING branch is tested; STAFF, VIP and the fallback are not.
    assert_says(
        &err,
        &[
            "[audit] UNREACHED pricing.py: changed lines 12-16",
            "[audit] UNREACHED refunds.py: no executed test imports it",
        ],
    );
    let json = project.report();
    let files = json["audit"]["reachability"]
        .as_array()
        .expect("reachability");
    assert_eq!(files[0]["file"], "pricing.py");
    assert_eq!(
        files[0]["reached_by"],
        serde_json::json!(["tests/test_discount.py::test_spring"])
    );
    let refused = project.test(&["--reachability"]);
    assert_exit(&refused, 2);
}

const RATES_CONFTEST: &str = r#"import json
import subprocess

import pytest


@pytest.fixture(scope="session")
def rates():
    with open("tests/data/rates.json") as f:
        return json.load(f)


@pytest.fixture
def seeded():
    # Read by another process: no recording sees it, the registry declares it.
    return subprocess.run(["cat", "seeds/db.sql"], capture_output=True, text=True).stdout
"#;

const RATES_TESTS: &str = r#"def test_rates_loaded(rates):
    assert rates["eur"] == 1.1


def test_rates_reused(rates):
    assert "eur" in rates
"#;

fn rates_project() -> Project {
    Project::new(&[
        ("tests/conftest.py", RATES_CONFTEST),
        ("tests/data/rates.json", "{\"eur\": 1.1}\n"),
        ("seeds/db.sql", "insert into customers values (1);\n"),
        ("tests/test_rates.py", RATES_TESTS),
        (
            "tests/test_seed.py",
            "def test_seeded(seeded):\n    assert 'customers' in seeded\n",
        ),
        (
            "tests/test_spring.py",
            "def test_spring():\n    assert 90 == 100 - 10\n",
        ),
        (
            ".assay/fixture_reads.toml",
            "[fixtures.seeded]\nfiles = [\"seeds/\"]\n",
        ),
    ])
}

#[test]
fn a_fixture_file_change_whose_readers_did_not_run_fails_the_audit_naming_them() {
    let project = rates_project();
    project.mark_base();
    project.commit(
        &[
            ("tests/data/rates.json", "{\"eur\": 1.2}\n"),
            ("seeds/db.sql", "insert into customers values (2);\n"),
        ],
        "rates: new quarter",
    );
    let report = project.json_path();
    let report_arg = report.to_str().expect("utf-8");
    let audited = [
        "--audit-base",
        "base",
        "--file",
        "tests/test_spring.py",
        "--json",
        report_arg,
    ];
    let out = project.test(&audited);
    let err = assert_exit(&out, 1);
    // The session fixture's read counts for both of its tests, not only the first.
    for test in ["test_rates_loaded", "test_rates_reused"] {
        assert!(
            err.contains(&format!(
                "[audit] FAIL closure: tests/test_rates.py::{test} reads tests/data/rates.json, which the change touches, and was not run"
            )),
            "{err}"
        );
    }
    assert!(
        err.contains(
            "[audit] FAIL closure: tests/test_seed.py::test_seeded reads seeds/db.sql (declared)"
        ),
        "{err}"
    );
    assert!(!err.contains("test_spring reads"), "{err}");
    let json = read_json(&report);
    assert_eq!(json["status"], "failed");
    let closure = &json["audit"]["scope"]["closure"];
    assert_eq!(closure["recorded"], "recorded", "{closure}");
    assert_eq!(closure["registry"], ".assay/fixture_reads.toml");
    assert_eq!(
        closure["gaps"][0]["test"],
        "tests/test_rates.py::test_rates_loaded"
    );
    assert_eq!(
        closure["gaps"][0]["reads"],
        serde_json::json!([{"file": "tests/data/rates.json", "source": "recorded"}])
    );

    // A second audit of the same base records nothing again.
    let again = project.test(&audited);
    assert_exit(&again, 1);
    assert_eq!(
        read_json(&report)["audit"]["scope"]["closure"]["recorded"],
        "stored"
    );

    // Running the readers closes the gap: the edit breaks one of them, which then fails as
    // a test, not as a hidden gap.
    let all = project.test(&["--audit-base", "base", "--json", report_arg]);
    let err = assert_exit_saying(
        &all,
        1,
        &["[test] FAIL tests/test_rates.py::test_rates_loaded"],
    );
    assert!(!err.contains("FAIL closure"), "{err}");
    assert_eq!(
        read_json(&report)["audit"]["scope"]["closure"]["gaps"],
        serde_json::json!([])
    );
}

const EXCEPTIONS: &str = r#"[[exception]]
test = "tests/test_rates.py::test_rates_loaded"
reason = "rates are re-checked by the nightly job"
expires = "2999-01-01"

[[exception]]
test = "tests/test_rates.py::test_rates_reused"
reason = "an old excuse"
expires = "2020-01-01"
"#;

#[test]
fn a_scope_exception_excuses_a_named_gap_until_it_expires_and_is_reported() {
    let project = rates_project();
    project.mark_base();
    project.commit(
        &[
            ("tests/data/rates.json", "{\"eur\": 1.2}\n"),
            (".assay/scope_exceptions.toml", EXCEPTIONS),
        ],
        "rates: new quarter",
    );
    let out = project.test_reporting(&["--audit-base", "base", "--file", "tests/test_spring.py"]);
    let err = stderr(&out);
    assert_says(
        &err,
        &[
            "[audit] EXCUSED closure: tests/test_rates.py::test_rates_loaded reads tests/data/rates.json, which the change touches, and was not run — EXCUSED by .assay/scope_exceptions.toml until 2999-01-01: rates are re-checked by the nightly job",
        ],
    );
    // The expired one excuses nothing: its gap still fails the run.
    assert_says(
        &err,
        &[
            "[audit] FAIL closure: tests/test_rates.py::test_rates_reused",
            "exception for tests/test_rates.py::test_rates_reused expired on 2020-01-01",
        ],
    );
    assert_eq!(code(&out), 1, "{err}");
    let exceptions = project.report()["audit"]["scope"]["exceptions"].clone();
    assert_eq!(
        exceptions["used"][0]["test"],
        "tests/test_rates.py::test_rates_loaded"
    );
    assert_eq!(
        exceptions["expired"][0]["test"],
        "tests/test_rates.py::test_rates_reused"
    );

    // With the expired excuse renewed, the run passes and still says what excused it.
    project.commit(
        &[(
            ".assay/scope_exceptions.toml",
            &EXCEPTIONS.replace("2020-01-01", "2999-01-01"),
        )],
        "renew the excuse",
    );
    let out = project.test(&["--audit-base", "base", "--file", "tests/test_spring.py"]);
    let err = assert_exit(&out, 0);
    assert_eq!(err.matches("[audit] EXCUSED closure").count(), 2, "{err}");
    // A malformed exceptions file is a usage error, before anything is judged.
    project.commit(
        &[(
            ".assay/scope_exceptions.toml",
            "[[exception]]\ntest = \"x\"\n",
        )],
        "break the file",
    );
    let broken = project.test(&["--audit-base", "base", "--file", "tests/test_spring.py"]);
    let err = assert_exit_saying(&broken, 2, &[".assay/scope_exceptions.toml"]);
    assert!(!err.contains("[test] 0/"), "nothing ran: {err}");
}

#[test]
fn a_deleted_failing_test_fails_the_inventory_and_a_renamed_one_is_reported_as_renamed() {
    let project = Project::new(&[
        ("conftest.py", ""),
        (
            "tests/test_ingest.py",
            "def test_ingest():\n    assert 2 + 2 == 5\n",
        ),
        (
            "tests/test_totals.py",
            "def test_total():\n    assert sum([1, 2]) == 3\n\n\ndef test_tax():\n    assert round(0.2 * 100) == 20\n",
        ),
        (
            ".assay/quarantine.toml",
            "[[quarantine]]\ntest = \"tests/test_ingest.py::test_ingest\"\nreason = \"flaky upstream\"\nadded = \"2026-11-01\"\n",
        ),
    ]);
    project.mark_base();
    std::fs::remove_file(project.path().join("tests/test_ingest.py")).expect("delete");
    project.commit(
        &[
            (".assay/quarantine.toml", ""),
            (
                "tests/test_totals.py",
                "def test_total_of_lines():\n    assert sum([1, 2]) == 3\n\n\ndef test_tax():\n    assert round(0.2 * 100) == 20\n",
            ),
        ],
        "drop the ingest test; name the total test after what it checks",
    );
    let out = project.test_reporting(&["--audit-base", "base"]);
    let err = assert_exit_saying(
        &out,
        1,
        &[
            "[test] 2/2 passed; the selection audit failed",
            "[audit] FAIL inventory: tests/test_ingest.py::test_ingest is collected at base and gone at the candidate",
            "[audit] RENAMED tests/test_totals.py::test_total -> tests/test_totals.py::test_total_of_lines",
        ],
    );
    assert!(
        !err.contains("FAIL inventory: tests/test_totals.py"),
        "{err}"
    );
    let json = project.report();
    assert_eq!(json["status"], "failed");
    let inventory = &json["audit"]["scope"]["inventory"];
    assert_eq!(inventory["base_collected"], 3);
    assert_eq!(inventory["candidate_collected"], 2);
    assert_eq!(
        inventory["removed"][0]["test"],
        "tests/test_ingest.py::test_ingest"
    );
    assert_eq!(inventory["relocated"][0]["kind"], "renamed");

    // Excused by name, with a reason and an expiry, the removal passes and is reported.
    project.commit(
        &[(
            ".assay/scope_exceptions.toml",
            "[[exception]]\ntest = \"tests/test_ingest.py::test_ingest\"\nreason = \"ingest moved to the loader service\"\nexpires = \"2999-01-01\"\n",
        )],
        "excuse the ingest test",
    );
    let out = project.test(&["--audit-base", "base"]);
    assert_exit_saying(
        &out,
        0,
        &[
            "[audit] EXCUSED inventory: tests/test_ingest.py::test_ingest is collected at base and gone at the candidate — EXCUSED by .assay/scope_exceptions.toml until 2999-01-01: ingest moved to the loader service",
        ],
    );
}

#[test]
fn a_run_whose_report_names_a_test_it_did_not_select_stores_nothing_and_names_it_natively() {
    let forging = r#"import re


def pytest_unconfigure(config):
    path = getattr(config.option, "xmlpath", None)
    if not path:
        return
    text = open(path).read()
    text = re.sub(r'tests="(\d+)"', lambda m: 'tests="%d"' % (int(m.group(1)) + 1), text)
    text = text.replace(
        "</testsuite>",
        '<testcase classname="tests.test_pricing" name="test_phantom_refund" time="0.001" /></testsuite>',
    )
    open(path, "w").write(text)
"#;
    let project = Project::new(&[
        ("conftest.py", forging),
        (
            "tests/test_pricing.py",
            "def test_net():\n    assert 100 - 20 == 80\n",
        ),
    ]);
    let out = project.test_reporting(&[]);
    let err = assert_exit(&out, 1);
    assert!(
        err.contains(
            "executed tests/test_pricing.py::test_phantom_refund, which it did not select"
        ),
        "{err}"
    );
    let json = project.report();
    assert_eq!(json["audit"]["selection"]["contained"], false);
    assert_eq!(json["cache"]["stored"], 0, "{json}");
    assert!(
        json["cache"]["withheld"]
            .as_str()
            .is_some_and(|w| w.contains("not trusted")),
        "{json}"
    );
    assert_says(&err, &["[cache] passes not stored"]);
    // Nothing was stored, so the next run runs the case again rather than trusting it.
    let again = project.test_reporting(&[]);
    assert_exit(&again, 1);
    assert_eq!(project.report()["cache"]["served"], 0);
}

#[test]
fn a_change_that_hides_the_reader_from_collection_is_caught_by_the_inventory() {
    let project = rates_project();
    project.mark_base();
    // The data edit, and a conftest that stops collecting the tests that would notice.
    project.commit(
        &[
            ("tests/data/rates.json", "{\"eur\": 1.2}\n"),
            (
                "tests/conftest.py",
                &format!("{RATES_CONFTEST}\ncollect_ignore = [\"test_rates.py\"]\n"),
            ),
        ],
        "rates: new quarter",
    );
    let out = project.test(&["--audit-base", "base"]);
    let err = assert_exit(&out, 1);
    for test in ["test_rates_loaded", "test_rates_reused"] {
        assert!(
            err.contains(&format!(
                "[audit] FAIL inventory: tests/test_rates.py::{test} is collected at base and gone at the candidate"
            )),
            "{err}"
        );
    }
}

#[test]
fn a_go_suite_audit_names_removed_tests_and_declared_reads() {
    // Go records no reads: the registry's test entries are its closure.
    let project = Project::new(&[
        ("go.mod", "module example.com/ledger\n\ngo 1.19\n"),
        ("ledger.go", LEDGER_GO),
        ("ledger_test.go", LEDGER_TEST_GO),
        ("cache/cache.go", CACHE_GO),
        ("cache/expiry_test.go", CACHE_TEST_GO),
        ("cache/testdata/ttl.txt", "3\n"),
        (
            ".assay/fixture_reads.toml",
            "[tests.\"example.com/ledger/cache.TestExpiry\"]\nfiles = [\"cache/testdata/\"]\n",
        ),
    ]);
    project.mark_base();
    let without_redis = CACHE_TEST_GO
        .split("\n\nfunc TestRedis")
        .next()
        .expect("the file")
        .to_owned()
        + "\n";
    project.commit(
        &[
            ("cache/expiry_test.go", &without_redis),
            ("cache/testdata/ttl.txt", "4\n"),
        ],
        "cache: a longer ttl; drop the redis test",
    );
    let out = project.test_reporting(&["--audit-base", "base", "--file", "ledger_test.go"]);
    assert_exit_saying(
        &out,
        1,
        &[
            "[audit] FAIL closure: example.com/ledger/cache.TestExpiry reads cache/testdata/ttl.txt (declared), which the change touches, and was not run",
            "[audit] FAIL inventory: example.com/ledger/cache.TestRedis is collected at base and gone at the candidate",
        ],
    );
    let scope = project.report()["audit"]["scope"].clone();
    assert_eq!(
        scope["closure"]["recorded"],
        serde_json::Value::Null,
        "{scope}"
    );
    assert_eq!(scope["inventory"]["base_collected"], 4, "{scope}");
}

#[test]
fn a_fleet_run_audits_its_scope_with_the_base_jobs_on_the_fleet() {
    let (fleet, _services) = fleet_with_one_worker();
    let url = fleet.nats_url();
    let store = fleet.store_url();
    let store_dir = fleet.store_path().expect("a file store");
    let project = rates_project();
    project.mark_base();
    project.commit(
        &[("tests/data/rates.json", "{\"eur\": 1.2}\n")],
        "rates: new quarter",
    );
    let out = project.test_reporting(&[
        "--cluster",
        &url,
        "--store",
        &store,
        "--audit-base",
        "base",
        "--file",
        "tests/test_spring.py",
    ]);
    assert_exit_saying(
        &out,
        1,
        &[
            "[audit] FAIL closure: tests/test_rates.py::test_rates_loaded reads tests/data/rates.json",
        ],
    );
    let closure = &project.report()["audit"]["scope"]["closure"];
    assert_eq!(closure["recorded"], "recorded", "{closure}");
    // Recorded afresh and never stored where any submitter writes.
    assert!(!store_dir.as_path().join("audit").exists());
}

/// The user guide's selection-audit examples, run as written: each `# [audit] …` line under a
/// command must be printed (up to its first `…`).
#[test]
fn the_selection_audit_examples_in_the_user_guide_print_what_they_say() {
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/suites.md"))
        .expect("the user guide");
    let start = guide.find("## The selection audit").expect("the section");
    let section = &guide[start..];
    let section = &section[..section[3..]
        .find("\n## ")
        .map_or(section.len(), |at| at + 3)];
    let mut script = String::new();
    let mut expected = Vec::new();
    for block in section.split("```sh\n").skip(1) {
        let block = block.split("```").next().expect("a closed block");
        script.push_str(block);
        for line in block.lines() {
            if let Some(said) = line.strip_prefix("# [") {
                let said = format!("[{said}");
                expected.push(said.split('…').next().expect("text").to_owned());
            }
        }
    }
    assert!(expected.len() >= 6, "{expected:?}");
    let dir = tempfile::tempdir().expect("temp dir");
    let bin = Path::new(env!("CARGO_BIN_EXE_assay"))
        .parent()
        .expect("bin dir");
    let path = std::env::join_paths(std::iter::once(bin.to_owned()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH");
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(dir.path())
        .env("PATH", path)
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .env("ASSAY_STATE_DIR", dir.path().join("state"))
        .output()
        .expect("bash runs");
    let printed = format!("{}{}", stdout(&out), stderr(&out));
    for line in &expected {
        assert!(
            printed.contains(line.as_str()),
            "{line:?} not printed:\n{printed}"
        );
    }
}
