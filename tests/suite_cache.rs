//! `assay test`'s result cache through the real binary, real git repositories and real
//! pytest: an unchanged tree's passes are answered from the cache and no job runs, a new tree
//! runs everything, failures, flakes and timeouts are never stored, tampered entries are
//! refused and the case runs, `--no-cache` and `--refresh-cache` do what they say, and
//! `assay cache stats` counts the entries; a unittest suite is answered likewise. Needs
//! `python3` with `pytest`.

use crate::support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use support::Repo;

/// A repository with its own state directory and store, and `assay test` run against them.
struct Suite {
    repo: Repo,
    dir: tempfile::TempDir,
}

/// One `assay test` run: exit code, stderr and the JSON report.
struct TestRun {
    code: i32,
    stderr: String,
    report: Value,
}

impl TestRun {
    /// Each case's display and outcome, in plan order.
    fn outcomes(&self) -> Vec<(String, String)> {
        self.cases()
            .iter()
            .map(|c| (text(&c["display"]), text(&c["outcome"])))
            .collect()
    }

    fn cases(&self) -> Vec<Value> {
        self.report["cases"].as_array().cloned().unwrap_or_default()
    }

    fn case(&self, display: &str) -> Value {
        self.cases()
            .into_iter()
            .find(|c| c["display"] == display)
            .unwrap_or_else(|| panic!("no case {display}: {}", self.report))
    }

    /// Whether `display`'s outcome came from the cache.
    fn cached(&self, display: &str) -> bool {
        !self.case(display)["cached"].is_null()
    }

    fn jobs(&self) -> usize {
        self.report["jobs"].as_array().map_or(0, Vec::len)
    }

    fn explain(&self) -> String {
        format!("exit {}\n{}\n{}", self.code, self.stderr, self.report)
    }
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

impl Suite {
    fn new(files: &[(&str, &str)]) -> Self {
        let repo = Repo::new();
        for (path, body) in files {
            repo.write(path, body);
        }
        repo.commit("invoicing service");
        Self {
            repo,
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn store(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    fn store_url(&self) -> String {
        format!("file://{}", self.store().display())
    }

    fn test(&self, extra: &[&str]) -> TestRun {
        self.test_exposing(extra, None)
    }

    /// [`Suite::test`] with `exposed` readable by the confined tests (`ASSAY_SANDBOX_EXPOSE`).
    fn test_exposing(&self, extra: &[&str], exposed: Option<&std::path::Path>) -> TestRun {
        let json = self.dir.path().join("report.json");
        let _ = std::fs::remove_file(&json);
        let mut command = support::assay();
        if let Some(exposed) = exposed {
            command.env("ASSAY_SANDBOX_EXPOSE", exposed);
        }
        let out = command
            .arg("test")
            .arg("-C")
            .arg(self.repo.path())
            .args(["--jobs", "2", "--progress", "plain", "--store"])
            .arg(self.store_url())
            .arg("--state-dir")
            .arg(self.dir.path().join("state"))
            .arg("--json")
            .arg(&json)
            .args(extra)
            .output()
            .expect("assay runs");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let report = std::fs::read(&json)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_else(|| panic!("no report: {stderr}"));
        TestRun {
            code: out.status.code().unwrap_or(-1),
            stderr,
            report,
        }
    }

    /// The case entries in the store, by the case they name, with their file's bytes.
    fn entries(&self) -> BTreeMap<String, (PathBuf, Vec<u8>)> {
        let dir = self.store().join("cache/v1/cases");
        let Ok(listing) = std::fs::read_dir(&dir) else {
            return BTreeMap::new();
        };
        listing
            .flatten()
            .map(|entry| {
                let bytes = std::fs::read(entry.path()).expect("read entry");
                let json: Value = serde_json::from_slice(&bytes).expect("entry is JSON");
                (text(&json["case"]), (entry.path(), bytes))
            })
            .collect()
    }

    /// How many entries name `case` (one per key: each timeout keys its own).
    fn entries_naming(&self, case: &str) -> usize {
        let dir = self.store().join("cache/v1/cases");
        std::fs::read_dir(dir).map_or(0, |listing| {
            listing
                .flatten()
                .filter(|entry| {
                    let bytes = std::fs::read(entry.path()).expect("read entry");
                    let json: Value = serde_json::from_slice(&bytes).expect("entry is JSON");
                    json["case"] == case
                })
                .count()
        })
    }

    fn entry(&self, case: &str) -> (PathBuf, Value) {
        let (path, bytes) = self
            .entries()
            .remove(case)
            .unwrap_or_else(|| panic!("no entry for {case}: {:?}", self.entries().keys()));
        (path, serde_json::from_slice(&bytes).expect("entry is JSON"))
    }

    fn history(&self) -> Value {
        let out = support::assay()
            .arg("history")
            .arg("-C")
            .arg(self.repo.path())
            .arg("--state-dir")
            .arg(self.dir.path().join("state"))
            .arg("--json")
            .output()
            .expect("assay runs");
        serde_json::from_slice(&out.stdout).expect("history is JSON")
    }
}

const LEDGER_TESTS: &str = r#"import pytest

from ledger import balance


def test_opening_balance():
    assert balance([]) == 0


def test_deposits_add_up():
    assert balance([40, 2]) == 42


@pytest.mark.parametrize("entries", [[1, -1], [5, -5, 0]])
def test_entries_that_cancel(entries):
    assert balance(entries) == 0


@pytest.mark.skip(reason="multi-currency ledgers come later")
def test_currency_conversion():
    assert False
"#;

const INVOICE_TESTS: &str = r#"from ledger import balance


def test_invoice_total():
    assert balance([100, 20]) == 120


def test_credit_note():
    assert balance([100, -100]) == 0
"#;

fn ledger_suite() -> Suite {
    Suite::new(&[
        (
            "ledger.py",
            "def balance(entries):\n    return sum(entries)\n",
        ),
        ("conftest.py", ""),
        ("tests/test_ledger.py", LEDGER_TESTS),
        ("tests/test_invoice.py", INVOICE_TESTS),
    ])
}

fn is_hex_key(value: &Value) -> bool {
    value
        .as_str()
        .is_some_and(|k| k.len() == 64 && k.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[test]
fn an_unchanged_tree_runs_no_job_and_a_new_tree_runs_every_case_again() {
    let suite = ledger_suite();
    let first = suite.test(&[]);
    assert_eq!(first.code, 0, "{}", first.explain());
    assert_eq!(first.cases().len(), 7, "{}", first.explain());
    assert!(first.cases().iter().all(|c| c["cached"].is_null()));
    assert_eq!(first.report["cache"]["stored"], 7, "{}", first.explain());
    let durations_before = suite.history()["durations"].clone();

    let second = suite.test(&[]);
    assert_eq!(second.code, 0, "{}", second.explain());
    assert_eq!(second.jobs(), 0, "no job runs: {}", second.explain());
    assert_eq!(second.outcomes(), first.outcomes());
    for case in second.cases() {
        let cached = &case["cached"];
        assert!(is_hex_key(&cached["entry"]), "{case}");
        assert_eq!(cached["run_id"], first.report["run_id"], "{case}");
        assert!(
            text(&cached["job_id"]).starts_with(&text(&first.report["run_id"])),
            "{case}"
        );
    }
    assert_eq!(second.report["cache"]["served"], 7);
    assert!(
        second
            .stderr
            .contains("[cache] 7 of 7 cases answered from the cache (stored by run"),
        "{}",
        second.explain()
    );
    // History counts the cases as this tree's outcomes, but keeps the durations of the run
    // that ran them.
    let history = suite.history();
    let last = &history["runs"].as_array().expect("runs")[1];
    assert_eq!(
        (last["total"].clone(), last["cached"].clone()),
        (7.into(), 7.into())
    );
    assert_eq!(history["durations"], durations_before);
    let stats = support::assay()
        .args(["cache", "stats", "--store"])
        .arg(suite.store_url())
        .output()
        .expect("assay runs");
    let stats = String::from_utf8_lossy(&stats.stdout);
    assert!(
        stats.contains("7 entries (0 of assay mutate, 7 of assay test)"),
        "{stats}"
    );

    // A product-only edit is a new tree: every case runs again.
    suite.repo.write(
        "ledger.py",
        "def balance(entries):\n    total = 0\n    for entry in entries:\n        total += entry\n    return total\n",
    );
    suite.repo.commit("ledger: explicit loop");
    let edited = suite.test(&[]);
    assert_eq!(edited.code, 0, "{}", edited.explain());
    assert!(edited.jobs() > 0);
    assert!(
        edited.cases().iter().all(|c| c["cached"].is_null()),
        "{}",
        edited.explain()
    );
    assert_eq!(edited.outcomes(), first.outcomes());

    // Back to the first tree after a run of a tree without the invoice tests: the recorded
    // cases are that tree's, so the run cannot tell from them which cases this one has, and
    // runs them rather than answer only the recorded ones.
    suite.repo.remove("tests/test_invoice.py");
    suite.repo.commit("invoices move to their own service");
    assert_eq!(suite.test(&[]).cases().len(), 5);
    suite
        .repo
        .write(
            "ledger.py",
            "def balance(entries):\n    return sum(entries)\n",
        )
        .write("tests/test_invoice.py", INVOICE_TESTS);
    suite.repo.commit("invoices are back");
    let returned = suite.test(&[]);
    assert_eq!(
        returned.outcomes(),
        first.outcomes(),
        "{}",
        returned.explain()
    );
    // Which it now records, with this tree: the next run is answered again.
    assert_eq!(suite.test(&[]).jobs(), 0);
}

/// One in-session retry of a failing test marked `flaky`, as pytest-rerunfailures does it:
/// the failed attempt is reported as a `rerun` (which the JUnit report leaves out and the
/// summary line counts), then the retry's reports.
const RETRYING_CONFTEST: &str = r#"import pytest
from _pytest.runner import runtestprotocol


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    reports = runtestprotocol(item, nextitem=nextitem, log=False)
    if item.get_closest_marker("flaky") and any(report.failed for report in reports):
        for report in reports:
            if report.failed:
                report.outcome = "rerun"
                item.ihook.pytest_runtest_logreport(report=report)
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def pytest_configure(config):
    config.addinivalue_line("markers", "flaky: retried once after a failure")


def pytest_report_teststatus(report):
    if report.outcome == "rerun":
        return "rerun", "R", ("RERUN", {"yellow": True})
"#;

/// A test that fails its first attempt in a session and passes the retry (a counter in the
/// session's own tree), and one that always fails.
const SETTLEMENT_TESTS: &str = r#"import pathlib

import pytest


def test_settlement_posts():
    assert 2 + 2 == 4


def test_refund_rounding():
    assert round(2.675, 2) == 2.68


@pytest.mark.flaky
def test_bank_feed_reconnects():
    attempts = pathlib.Path("attempts.txt")
    count = int(attempts.read_text()) if attempts.exists() else 0
    attempts.write_text(str(count + 1))
    assert count >= 1, "the bank feed dropped the first connection"


def test_ledger_closes():
    assert sum([3, -3]) == 0
"#;

const QUARANTINE: &str = r#"[[quarantine]]
test = "tests/test_ledger.py::test_opening_balance"
reason = "fails when the fixture ledger is rotated mid-run"
added = "2026-11-20"
tracker = "LED-318"
"#;

#[test]
fn failures_passes_after_a_retry_and_quarantined_cases_are_never_stored() {
    let suite = Suite::new(&[
        ("conftest.py", RETRYING_CONFTEST),
        ("tests/test_settlement.py", SETTLEMENT_TESTS),
        ("tests/test_ledger.py", LEDGER_TESTS),
        ("tests/test_invoice.py", INVOICE_TESTS),
        (
            "ledger.py",
            "def balance(entries):\n    return sum(entries)\n",
        ),
        (".assay/quarantine.toml", QUARANTINE),
    ]);
    let rounding = "tests/test_settlement.py::test_refund_rounding";
    let watched = "tests/test_ledger.py::test_opening_balance";
    let feed = "tests/test_settlement.py::test_bank_feed_reconnects";
    let first = suite.test(&[]);
    assert_eq!(first.code, 1, "{}", first.explain());
    assert_eq!(first.case(rounding)["outcome"], "failed");
    assert_eq!(
        first.case(feed)["outcome"],
        "passed",
        "the report shows only the retry: {}",
        first.explain()
    );
    // Stored: the passes and skips of every batch but the one whose session re-ran a test, but
    // for the quarantined case, which is under watch and always runs.
    assert_eq!(first.case(watched)["outcome"], "passed");
    let retried_in = first.case(feed)["job"].clone();
    let mut expected: Vec<String> = first
        .cases()
        .iter()
        .filter(|c| {
            (c["outcome"] == "passed" || c["outcome"] == "skipped")
                && c["job"] != retried_in
                && c["display"] != watched
        })
        .map(|c| text(&c["display"]))
        .collect();
    expected.sort();
    let stored: Vec<String> = suite.entries().into_keys().collect();
    assert_eq!(stored, expected, "{}", first.explain());
    assert!(!expected.is_empty(), "the other batch stores its passes");
    assert!(!stored.contains(&feed.to_owned()) && !stored.contains(&rounding.to_owned()));

    let second = suite.test(&[]);
    for case in second.cases() {
        let display = text(&case["display"]);
        assert_eq!(
            second.cached(&display),
            expected.contains(&display),
            "{display}: {}",
            second.explain()
        );
    }
    assert_eq!(second.case(rounding)["outcome"], "failed");
    assert_eq!(second.case(feed)["outcome"], "passed");
}

#[test]
fn a_timed_out_batch_is_never_stored_and_the_timeout_is_in_the_key() {
    // The export hangs while a switch outside the tree is on (the tests may read it, never
    // write it); the others pass.
    let switch = tempfile::tempdir().expect("temp dir");
    let hang = switch.path().join("hang");
    let export_tests = format!(
        r#"import pathlib
import time


def test_statement_export():
    if pathlib.Path({hang:?}).exists():
        time.sleep(30)
"#,
        hang = hang.display().to_string()
    );
    let suite = Suite::new(&[
        ("conftest.py", ""),
        ("tests/test_export.py", &export_tests),
        ("tests/test_ledger.py", LEDGER_TESTS),
        (
            "ledger.py",
            "def balance(entries):\n    return sum(entries)\n",
        ),
    ]);
    let export = "tests/test_export.py::test_statement_export";
    let first = suite.test_exposing(&["--timeout", "600"], Some(switch.path()));
    assert_eq!(first.code, 0, "{}", first.explain());
    assert!(suite.entries().contains_key(export));

    // A shorter timeout answers nothing, and the export hangs past it.
    std::fs::write(&hang, "").expect("switch on");
    let timed = suite.test_exposing(&["--timeout", "4"], Some(switch.path()));
    std::fs::remove_file(&hang).expect("switch off");
    assert!(
        timed.cases().iter().all(|c| c["cached"].is_null()),
        "{}",
        timed.explain()
    );
    assert_eq!(
        timed.case(export)["message"],
        "timed out",
        "{}",
        timed.explain()
    );
    assert_eq!(
        suite.entries_naming(export),
        1,
        "only the 600 s run's entry"
    );
    let after = suite.test_exposing(&["--timeout", "4"], Some(switch.path()));
    assert_eq!(
        after.case(export)["outcome"],
        "passed",
        "{}",
        after.explain()
    );
    assert!(
        !after.cached(export),
        "a timeout was stored: {}",
        after.explain()
    );
    // The timed-out batch's other cases ran again too; the rest were answered.
    for case in timed.cases() {
        let display = text(&case["display"]);
        let timed_out = case["message"] == "timed out";
        assert_eq!(
            after.cached(&display),
            !timed_out,
            "{display}: {}",
            after.explain()
        );
    }
}

#[test]
fn tampered_entries_are_refused_and_reported_and_the_case_runs() {
    let suite = ledger_suite();
    let first = suite.test(&[]);
    assert_eq!(first.code, 0, "{}", first.explain());
    let deposits = "tests/test_ledger.py::test_deposits_add_up";
    let opening = "tests/test_ledger.py::test_opening_balance";
    let refused = |run: &TestRun| -> Vec<(String, String)> {
        run.report["cache"]["refused"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| (text(&r["entry"]), text(&r["why"])))
            .collect()
    };

    // An entry copied over another case's.
    let (deposits_path, deposits_entry) = suite.entry(deposits);
    let (opening_path, opening_entry) = suite.entry(opening);
    std::fs::copy(&deposits_path, &opening_path).expect("copy entry");
    let copied = suite.test(&[]);
    assert_eq!(copied.code, 0, "{}", copied.explain());
    assert!(
        copied.cached(deposits) && !copied.cached(opening),
        "{}",
        copied.explain()
    );
    let why = refused(&copied);
    assert_eq!(why.len(), 1, "{}", copied.explain());
    assert_eq!(why[0].0, text(&opening_entry["key"]));
    assert!(why[0].1.contains("another key"), "{why:?}");
    assert!(
        copied.stderr.contains(&format!(
            "[cache] refused entry {}: the entry names another key or schema; the case ran instead",
            text(&opening_entry["key"])
        )),
        "{}",
        copied.explain()
    );

    // An entry under the right key that names another case.
    let mut forged = deposits_entry.clone();
    forged["key"] = opening_entry["key"].clone();
    std::fs::write(&opening_path, serde_json::to_vec(&forged).expect("encode")).expect("write");
    support::resign::<assay_engine::suite::case_cache::CaseEntry>(&opening_path);
    let renamed = suite.test(&[]);
    assert!(!renamed.cached(opening), "{}", renamed.explain());
    let why = refused(&renamed);
    assert_eq!(why.len(), 1, "{}", renamed.explain());
    assert!(
        why[0]
            .1
            .contains(&format!("the entry is for {deposits}, not {opening}")),
        "{why:?}"
    );

    // The report an entry pins, altered: it and every case of its batch run again.
    let (_, entry) = suite.entry(deposits);
    let report = suite.store().join(text(&entry["report"]["key"]));
    let xml = std::fs::read_to_string(&report).expect("read report");
    std::fs::write(&report, xml.replace("</testsuite>", "</testsuite>\n")).expect("write");
    let altered = suite.test(&[]);
    assert_eq!(altered.code, 0, "{}", altered.explain());
    assert!(!altered.cached(deposits), "{}", altered.explain());
    assert_eq!(altered.case(deposits)["outcome"], "passed");
    let why = refused(&altered);
    assert!(
        why.iter()
            .any(|(key, why)| *key == text(&entry["key"]) && why.contains("sha256")),
        "{why:?}"
    );

    // An entry that is not JSON, and one that claims a failure (never stored): both refused.
    let (opening_path, _) = suite.entry(opening);
    let (deposits_path, mut claims_failure) = suite.entry(deposits);
    std::fs::write(&opening_path, b"\x00not an entry").expect("write");
    claims_failure["outcome"] = "failed".into();
    std::fs::write(
        &deposits_path,
        serde_json::to_vec(&claims_failure).expect("encode"),
    )
    .expect("write");
    support::resign::<assay_engine::suite::case_cache::CaseEntry>(&deposits_path);
    let garbled = suite.test(&[]);
    assert_eq!(garbled.code, 0, "{}", garbled.explain());
    assert!(!garbled.cached(opening) && !garbled.cached(deposits));
    let why: Vec<String> = refused(&garbled).into_iter().map(|(_, why)| why).collect();
    assert!(
        why.iter().any(|w| w.contains("does not parse"))
            && why.iter().any(|w| w.contains("never stored")),
        "{why:?}"
    );
}

#[test]
fn no_cache_reads_and_writes_nothing_and_refresh_cache_runs_everything_and_stores_over() {
    let suite = ledger_suite();
    let off = suite.test(&["--no-cache"]);
    assert_eq!(off.code, 0, "{}", off.explain());
    assert!(suite.entries().is_empty(), "--no-cache wrote entries");
    assert_eq!(off.report["cache"]["not_used"], "--no-cache");

    let stored = suite.test(&[]);
    assert_eq!(stored.code, 0, "{}", stored.explain());
    let entries = suite.entries();
    assert_eq!(entries.len(), 7);
    let off_again = suite.test(&["--no-cache"]);
    assert!(off_again.jobs() > 0);
    assert!(
        off_again.cases().iter().all(|c| c["cached"].is_null()),
        "{}",
        off_again.explain()
    );
    assert_eq!(suite.entries(), entries, "--no-cache rewrote entries");

    let refreshed = suite.test(&["--refresh-cache"]);
    assert_eq!(refreshed.code, 0, "{}", refreshed.explain());
    assert!(refreshed.jobs() > 0);
    assert!(refreshed.cases().iter().all(|c| c["cached"].is_null()));
    assert_eq!(refreshed.report["cache"]["stored"], 7);
    for (case, (path, _)) in suite.entries() {
        let entry: Value = serde_json::from_slice(&std::fs::read(path).expect("read")).unwrap();
        assert_eq!(
            entry["produced_by"]["proof_id"], refreshed.report["run_id"],
            "{case} was not stored over"
        );
    }
    let served = suite.test(&[]);
    assert_eq!(served.jobs(), 0, "{}", served.explain());
    assert!(
        served
            .cases()
            .iter()
            .all(|c| c["cached"]["run_id"] == refreshed.report["run_id"])
    );
}

#[test]
fn a_unittest_suite_run_case_by_case_is_answered_too_but_for_its_failure() {
    let suite = Suite::new(&[
        ("tests/__init__.py", ""),
        (
            "tests/test_vat.py",
            "import unittest\n\n\nclass VatTests(unittest.TestCase):\n    def test_standard_rate(self):\n        self.assertEqual(round(100 * 0.2), 20)\n\n    def test_reduced_rate(self):\n        self.assertEqual(round(100 * 0.05), 6)\n",
        ),
    ]);
    let standard = "tests/test_vat.py::VatTests::test_standard_rate";
    let reduced = "tests/test_vat.py::VatTests::test_reduced_rate";
    let first = suite.test(&["--runner", "unittest"]);
    assert_eq!(first.code, 1, "{}", first.explain());
    assert_eq!(first.report["cache"]["stored"], 1, "{}", first.explain());
    let second = suite.test(&["--runner", "unittest"]);
    assert_eq!(second.outcomes(), first.outcomes());
    assert!(
        second.cached(standard) && !second.cached(reduced),
        "{}",
        second.explain()
    );
    // Of the cases' jobs, only the failing one's ran (the listing is no case's job).
    assert_eq!(second.jobs(), 1, "{}", second.explain());
}
