//! End-to-end tests of `assay test`, `assay history`, `assay halt` and `assay resume`: the real
//! binary against real pytest and unittest projects committed to real git repositories built
//! in temp dirs. Needs `python3` with `pytest` installed.

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
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
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

#[test]
fn list_cases_prints_plan_order_and_runs_nothing() {
    let project = pytest_project();
    let out = project.test(&["--list-cases"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let displays: Vec<String> = listing(&out).into_iter().map(|(_, d)| d).collect();
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
fn results_keep_plan_order_with_three_jobs_and_uneven_durations() {
    let project = pytest_project();
    let report = project.json_path();
    let out = project.test(&["--jobs", "3", "--json", report.to_str().expect("utf-8")]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(err.contains("[test] 0/7"), "{err}");
    assert!(err.contains("[test] 7/7 passed"), "{err}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).expect("report")).expect("JSON");
    assert_eq!(json["schema"], "assay.suite/v1");
    assert_eq!(json["status"], "passed");
    let cases = json["cases"].as_array().expect("cases");
    let displays: Vec<&str> = cases
        .iter()
        .map(|c| c["display"].as_str().unwrap_or(""))
        .collect();
    let listed: Vec<String> = listing(&project.test(&["--list-cases"]))
        .into_iter()
        .map(|(_, d)| d)
        .collect();
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
    let stored = walk_find(project.store.path(), stdout_key).expect("artifact stored");
    let text = std::fs::read_to_string(stored).expect("artifact readable");
    assert!(
        text.contains("rendered the slow page") || text.contains("passed"),
        "{text}"
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
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let displays: Vec<String> = listing(&out).into_iter().map(|(_, d)| d).collect();
    assert_eq!(
        displays,
        [
            "tests/billing/test_invoice.py::test_total",
            "tests/billing/test_invoice.py::test_tax",
            "tests/test_pager.py::TestCursor::test_next",
        ]
    );
    let run = project.test(&["--file", "tests/billing/test_invoice.py", "--jobs", "2"]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
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
        (vec!["--case", "test_total"], "malformed"),
        (vec!["--case", "v1.0000000000000000"], "stale or unknown"),
        (
            vec!["--case", &cursor_ref, "--case", &cursor_ref],
            "given twice",
        ),
        (vec!["--jobs", "0"], "greater than zero"),
        (vec!["--jobs", "+2"], "not a decimal"),
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
    assert_eq!(code(&first), 0, "{}", stderr(&first));
    project.commit(
        &[(
            "tests/billing/test_invoice.py",
            &INVOICE_TESTS.replace("== 20.0", "== 21.0"),
        )],
        "tax rounding regression",
    );
    let report = project.json_path();
    let second = project.test(&["--jobs", "2", "--json", report.to_str().expect("utf-8")]);
    let err = stderr(&second);
    assert_eq!(code(&second), 1, "{err}");
    assert!(
        err.contains("[test] FAIL tests/billing/test_invoice.py::test_tax"),
        "{err}"
    );
    assert!(
        err.contains("[ALERT] [warning] regression: 1 new failure (was 0, now 1)"),
        "{err}"
    );
    assert!(
        stdout(&second).contains("Status: failing | vs previous: +1 failed"),
        "{}",
        stdout(&second)
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).expect("report")).expect("JSON");
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
    assert_eq!(code(&halt), 0, "{}", stderr(&halt));
    let blocked = project.test(&["--jobs", "2"]);
    assert_eq!(code(&blocked), 3, "{}", stderr(&blocked));
    assert!(
        stderr(&blocked).contains("[HALT] test stopped. Reason: invoice database migration"),
        "{}",
        stderr(&blocked)
    );
    assert!(!stderr(&blocked).contains("[test] 0/"));
    let resume = project.assay(&["resume"]);
    assert_eq!(code(&resume), 0);
    let run = project.test(&["--jobs", "2"]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
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
    git(project.path(), &["branch", "base"]);
    let gained = format!(
        "{LEDGER}\n[[quarantine]]\ntest = \"tests/billing/test_invoice.py::test_tax\"\nreason = \"rounding\"\nadded = \"2026-09-10\"\n"
    );
    project.commit(
        &[(".assay/quarantine.toml", &gained)],
        "quarantine the tax test",
    );
    let out = project.test(&["--audit-base", "base"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(
        err.contains("the ledger gains entry tests/billing/test_invoice.py::test_tax"),
        "{err}"
    );
    assert!(!err.contains("[test] 0/"), "nothing ran: {err}");
    project.commit(
        &[(".assay/quarantine.toml", "")],
        "the slow render is fixed",
    );
    let out = project.test(&["--audit-base", "base", "--jobs", "2"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
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
    let report = project.json_path();
    let out = project.test(&["--jobs", "3", "--json", report.to_str().expect("utf-8")]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).expect("report")).expect("JSON");
    let outcomes: Vec<&str> = json["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| c["outcome"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(outcomes, ["passed", "passed", "skipped"]);
    assert_eq!(json["runner"], "unittest");
}
