//! Incremental `assay mutate` through the real binary, real git repositories and real pytest:
//! after a one-function edit only that function's mutants run, and the report equals a cold
//! run's; a test-file change re-runs what its tests cover; what may not be trusted is never
//! stored; a tampered entry is refused; `--no-cache` and `--refresh-cache` do what they say.

use crate::support;

use serde_json::Value;
use std::collections::BTreeSet;
use support::{Repo, Run};

const PRICING: &str = "\
def discount(total, rate):
    if rate < 0:
        return total
    if rate > 100:
        rate = 100
    return total - total * rate // 100


def shipping(weight):
    if weight <= 0:
        return 0
    if weight < 5:
        return 4
    return 9


def is_free_shipping(total):
    return total >= 50
";

/// `shipping` rewritten (one more line, so every later mutant moves), the rest untouched.
const PRICING_EDITED: &str = "\
def discount(total, rate):
    if rate < 0:
        return total
    if rate > 100:
        rate = 100
    return total - total * rate // 100


def shipping(weight):
    if weight <= 0:
        return 0
    small = weight < 5
    if small:
        return 4
    return 9


def is_free_shipping(total):
    return total >= 50
";

const STOCK: &str = "\
def reorder(level, minimum):
    if level < minimum:
        return minimum - level
    return 0


def in_stock(level):
    return level > 0
";

const PRICING_TESTS: &str = "\
from shop.pricing import discount, is_free_shipping, shipping


def test_discount_is_capped_at_the_whole_total():
    assert discount(200, 10) == 180
    assert discount(200, 150) == 0
    assert discount(200, -5) == 200


def test_shipping_by_weight():
    assert shipping(0) == 0
    assert shipping(2) == 4
    assert shipping(7) == 9


def test_free_shipping_from_fifty():
    assert is_free_shipping(50) is True
    assert is_free_shipping(49) is False
";

const STOCK_TESTS: &str = "\
from shop.stock import in_stock, reorder


def test_reorder_up_to_the_minimum():
    assert reorder(3, 10) == 7
    assert reorder(12, 10) == 0


def test_in_stock():
    assert in_stock(1) is True
    assert in_stock(0) is False
";

/// A small shop library: two product files, one test per function.
fn shop() -> Repo {
    let repo = Repo::new();
    repo.write("shop/__init__.py", "")
        .write("shop/pricing.py", PRICING)
        .write("shop/stock.py", STOCK)
        .write("conftest.py", "")
        .write("tests/test_pricing.py", PRICING_TESTS)
        .write("tests/test_stock.py", STOCK_TESTS);
    repo.commit("shop: pricing and stock");
    repo
}

/// `assay mutate` with one store for every call of a test.
struct Mutator {
    dir: tempfile::TempDir,
}

impl Mutator {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn store(&self) -> std::path::PathBuf {
        self.dir.path().join("store")
    }

    fn entries(&self) -> Vec<std::path::PathBuf> {
        let dir = self.store().join("cache/v1/mutants");
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        entries.sort();
        entries
    }

    fn mutate(&self, repo: &Repo, extra: &[&str]) -> Run {
        let run = self.mutate_with_env(repo, extra, &[]);
        assert!(
            run.evidence.is_some() && run.code != 101,
            "{}",
            run.explain()
        );
        run
    }

    /// `assay mutate`, whatever it ends with, with `env` set.
    fn mutate_with_env(
        &self,
        repo: &Repo,
        extra: &[&str],
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Run {
        let json = self.dir.path().join("mutation.json");
        let _ = std::fs::remove_file(&json);
        let mut command = support::assay();
        command
            .envs(env.iter().copied())
            .arg("mutate")
            .arg("-C")
            .arg(repo.path())
            .args(["--jobs", "2"])
            .args(extra)
            .arg("--json")
            .arg(&json)
            .arg("--store")
            .arg(format!("file://{}", self.store().display()));
        support::run(command, Some(json))
    }
}

fn report(run: &Run) -> &Value {
    run.evidence.as_ref().expect("report written")
}

/// Every mutant of the report: `(file, mutant)`.
fn mutants(run: &Run) -> Vec<(String, Value)> {
    report(run)["files"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, file)| {
            file["mutants"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| (path.clone(), m.clone()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The ids the cache answered, as the report's `assay.cache.mutants` names them.
fn cached_ids(run: &Run) -> BTreeSet<String> {
    report(run)["assay"]["cache"]["mutants"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// The ids of mutants with coverage (those the cache may answer) matching `pick`.
fn covered_ids(run: &Run, pick: impl Fn(&str, u64) -> bool) -> BTreeSet<String> {
    mutants(run)
        .iter()
        .filter(|(path, m)| {
            m["status"] != "NoCoverage"
                && pick(path, m["location"]["start"]["line"].as_u64().unwrap())
        })
        .map(|(_, m)| m["id"].as_str().unwrap().to_owned())
        .collect()
}

fn cache_line(run: &Run) -> String {
    run.stderr
        .lines()
        .find(|l| l.contains("mutants answered from the cache"))
        .unwrap_or_else(|| panic!("no cache line: {}", run.explain()))
        .to_owned()
}

/// The report without what differs between equal runs: timings (the phases too), the cache's
/// marks.
fn comparable(run: &Run) -> Value {
    let mut doc = report(run).clone();
    for file in doc["files"].as_object_mut().unwrap().values_mut() {
        for mutant in file["mutants"].as_array_mut().unwrap() {
            mutant.as_object_mut().unwrap().remove("duration");
        }
    }
    doc.as_object_mut().unwrap().remove("performance");
    let assay = doc["assay"].as_object_mut().unwrap();
    assay.remove("cache");
    let summary = assay["summary"].as_object_mut().unwrap();
    summary.remove("elapsed_s");
    summary.remove("mutants_per_minute");
    doc
}

#[test]
fn after_a_one_function_edit_only_its_mutants_run_and_the_report_equals_a_cold_run() {
    let repo = shop();
    let mutator = Mutator::new();
    let cold = mutator.mutate(&repo, &[]);
    let total = mutants(&cold).len();
    assert!(total >= 20, "{total} mutants: {}", cold.explain());
    let eligible = covered_ids(&cold, |_, _| true).len();
    let trusted = mutants(&cold)
        .iter()
        .filter(|(_, m)| m["status"] == "Killed" || m["status"] == "Survived")
        .count();
    assert_eq!(
        cache_line(&cold),
        format!(
            "[cache] 0 of {eligible} mutants answered from the cache, {trusted} results stored"
        )
    );
    assert_eq!(mutator.entries().len(), trusted);

    repo.write("shop/pricing.py", PRICING_EDITED);
    repo.commit("pricing: name the small-parcel check");
    let warm = mutator.mutate(&repo, &[]);
    // `shipping` is lines 9-15 of the edited file.
    let in_shipping = |path: &str, line: u64| path == "shop/pricing.py" && (9..=15).contains(&line);
    let ran = covered_ids(&warm, in_shipping);
    let answered = covered_ids(&warm, |path, line| !in_shipping(path, line));
    assert!(
        !ran.is_empty() && !answered.is_empty(),
        "{}",
        warm.explain()
    );
    assert_eq!(cached_ids(&warm), answered, "{}", warm.explain());
    let marks = report(&warm)["assay"]["cache"]["mutants"].clone();
    let cold_run = marks.as_object().unwrap().values().next().unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        cache_line(&warm),
        format!(
            "[cache] {} of {} mutants answered from the cache (stored by run {cold_run}), {} results stored",
            answered.len(),
            ran.len() + answered.len(),
            ran.len()
        )
    );
    assert!(
        warm.stderr.contains(&format!(
            "{} to run, {} from the cache",
            ran.len(),
            answered.len()
        )),
        "{}",
        warm.explain()
    );
    // Each answer names the run that stored it.
    let first_run = report(&cold)["assay"]["cache"]["mutants"].clone();
    assert_eq!(first_run, Value::Object(Default::default()));
    for (_, mark) in report(&warm)["assay"]["cache"]["mutants"]
        .as_object()
        .unwrap()
    {
        assert_eq!(mark["run_id"], cold_run.as_str(), "{mark}");
        assert_eq!(mark["key"].as_str().map(str::len), Some(64), "{mark}");
        assert!(mark["stored_at"].as_u64().unwrap() > 0, "{mark}");
    }

    let uncached = mutator.mutate(&repo, &["--no-cache"]);
    assert_eq!(comparable(&warm), comparable(&uncached));
    assert_eq!(warm.code, uncached.code);
}

#[test]
fn a_test_file_change_re_runs_every_mutant_its_tests_cover() {
    let repo = shop();
    let mutator = Mutator::new();
    mutator.mutate(&repo, &[]);
    repo.write(
        "tests/test_stock.py",
        &format!("{STOCK_TESTS}\n\ndef test_a_full_shelf_needs_no_order():\n    assert reorder(10, 10) == 0\n"),
    );
    repo.commit("tests: a full shelf");
    let again = mutator.mutate(&repo, &[]);
    let stock = covered_ids(&again, |path, _| path == "shop/stock.py");
    let pricing = covered_ids(&again, |path, _| path == "shop/pricing.py");
    assert!(!stock.is_empty(), "{}", again.explain());
    assert_eq!(cached_ids(&again), pricing, "{}", again.explain());
}

#[test]
fn a_timeout_and_a_flaky_kill_are_never_stored() {
    let repo = Repo::new();
    // `i > 0` -> `i >= 0` loops forever (0 // 2 is 0); `is_past_end`'s test only checks on
    // its first call in a process, so its kills are flaky.
    repo.write(
        "countdown/__init__.py",
        "def countdown(n):\n    i = n\n    while i > 0:\n        i = i // 2\n    return i\n\n\ndef is_past_end(page, last):\n    return page > last\n",
    )
    .write(
        "tests/test_countdown.py",
        "from countdown import countdown, is_past_end\n\n_calls = []\n\n\ndef test_it_stops_at_zero():\n    assert countdown(3) == 0\n\n\ndef test_the_last_page_is_not_past_the_end():\n    _calls.append(1)\n    if len(_calls) == 1:\n        assert is_past_end(3, 3) is False\n",
    );
    repo.commit("countdown");
    let mutator = Mutator::new();
    let first = mutator.mutate(&repo, &[]);
    let all = mutants(&first);
    let untrusted: BTreeSet<String> = all
        .iter()
        .filter(|(_, m)| {
            m["status"] == "Timeout"
                || m["statusReason"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("flaky kill"))
        })
        .map(|(_, m)| m["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        all.iter().any(|(_, m)| m["status"] == "Timeout"),
        "{}",
        first.explain()
    );
    assert!(
        all.iter().any(|(_, m)| m["statusReason"]
            .as_str()
            .is_some_and(|r| r.starts_with("flaky kill"))),
        "{}",
        first.explain()
    );
    let again = mutator.mutate(&repo, &[]);
    let served = cached_ids(&again);
    let eligible = covered_ids(&again, |_, _| true);
    assert!(!served.is_empty(), "{}", again.explain());
    assert_eq!(
        eligible
            .difference(&served)
            .cloned()
            .collect::<BTreeSet<_>>(),
        untrusted,
        "{}",
        again.explain()
    );
}

#[test]
fn a_tampered_entry_is_refused_reported_and_the_mutant_runs() {
    let repo = shop();
    let mutator = Mutator::new();
    let cold = mutator.mutate(&repo, &[]);
    let entries = mutator.entries();
    // One entry's claimed verdict turned around; another's pinned report rewritten.
    let verdict_of = |path: &std::path::Path| -> Value {
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    };
    let killed = entries
        .iter()
        .find(|p| verdict_of(p)["verdict"]["status"] == "Killed")
        .expect("a stored kill")
        .clone();
    let text = std::fs::read_to_string(&killed).unwrap();
    std::fs::write(
        &killed,
        text.replace("\"status\":\"Killed\"", "\"status\":\"Survived\""),
    )
    .unwrap();
    // Signed again, as whoever holds the key could: the runs still say otherwise.
    support::resign::<assay_engine::mutation::campaign::mutant_cache::MutantEntry>(&killed);
    let other = entries.iter().find(|p| **p != killed).unwrap().clone();
    let entry = verdict_of(&other);
    let report_key = entry["runs"][0]["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "report")
        .expect("a report artifact")["key"]
        .as_str()
        .unwrap()
        .to_owned();
    let report_path = mutator.store().join(&report_key);
    let report_text = std::fs::read_to_string(&report_path).unwrap();
    std::fs::write(&report_path, format!("{report_text}\n")).unwrap();
    // A third holds a valid entry of another mutant, as a swapped file would.
    let swapped = entries
        .iter()
        .find(|p| **p != killed && **p != other)
        .unwrap()
        .clone();
    let donor = entries
        .iter()
        .find(|p| ![&killed, &other, &swapped].contains(p))
        .unwrap();
    std::fs::copy(donor, &swapped).unwrap();

    let again = mutator.mutate(&repo, &[]);
    // One line says how many were refused and why, each reason with its count.
    let refused: Vec<&str> = again
        .stderr
        .lines()
        .filter(|l| l.starts_with("[cache] 3 entries refused, their mutants ran instead: "))
        .collect();
    assert_eq!(refused.len(), 1, "{}", again.explain());
    assert!(
        again
            .stderr
            .contains("the entry names another key or schema"),
        "{}",
        again.explain()
    );
    assert!(
        again
            .stderr
            .contains("its runs do not judge to the verdict the entry claims"),
        "{}",
        again.explain()
    );
    assert!(
        again.stderr.contains("does not match its recorded sha256"),
        "{}",
        again.explain()
    );
    let key_of = |path: &std::path::Path| path.file_stem().unwrap().to_str().unwrap().to_owned();
    let served_keys: BTreeSet<String> = report(&again)["assay"]["cache"]["mutants"]
        .as_object()
        .unwrap()
        .values()
        .map(|m| m["key"].as_str().unwrap().to_owned())
        .collect();
    for tampered in [&killed, &other, &swapped] {
        assert!(
            !served_keys.contains(&key_of(tampered)),
            "{tampered:?} was served"
        );
    }
    assert_eq!(served_keys.len(), entries.len() - 3);
    // The three ran again and say what the cold run said; their entries are whole again.
    assert_eq!(comparable(&again), comparable(&cold));
    assert_eq!(verdict_of(&killed)["verdict"]["status"], "Killed");
    assert!(
        cache_line(&again).ends_with(", 3 results stored"),
        "{}",
        again.explain()
    );
}

#[test]
fn no_cache_neither_reads_nor_writes_and_refresh_cache_runs_all_and_rewrites() {
    let repo = shop();
    let mutator = Mutator::new();
    let uncached = mutator.mutate(&repo, &["--no-cache"]);
    assert!(mutator.entries().is_empty());
    assert!(
        !uncached.stderr.contains("[cache]"),
        "{}",
        uncached.explain()
    );
    assert_eq!(report(&uncached)["assay"]["cache"], Value::Null);

    mutator.mutate(&repo, &[]);
    let entries = mutator.entries();
    assert!(!entries.is_empty());
    let snapshot: Vec<Vec<u8>> = entries.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let uncached = mutator.mutate(&repo, &["--no-cache"]);
    assert!(cached_ids(&uncached).is_empty());
    let after: Vec<Vec<u8>> = mutator
        .entries()
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    assert_eq!(snapshot, after, "--no-cache rewrote entries");

    let refreshed = mutator.mutate(&repo, &["--refresh-cache"]);
    assert!(cached_ids(&refreshed).is_empty(), "{}", refreshed.explain());
    assert_eq!(
        cache_line(&refreshed),
        format!(
            "[cache] 0 of {} mutants answered from the cache, {} results stored",
            covered_ids(&refreshed, |_, _| true).len(),
            entries.len()
        )
    );
    assert_eq!(
        report(&refreshed)["assay"]["cache"]["stored"],
        entries.len()
    );
    // Each entry now names the refreshing run.
    let warm = mutator.mutate(&repo, &[]);
    let runs: BTreeSet<String> = report(&warm)["assay"]["cache"]["mutants"]
        .as_object()
        .unwrap()
        .values()
        .map(|m| m["run_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let refreshed_entry: Value =
        serde_json::from_slice(&std::fs::read(&entries[0]).unwrap()).unwrap();
    assert_eq!(
        runs.iter().next().unwrap(),
        refreshed_entry["produced_by"]["proof_id"].as_str().unwrap()
    );
    assert_ne!(snapshot[0], std::fs::read(&entries[0]).unwrap());

    // `assay cache stats` and `prune` see these entries.
    let store = format!("file://{}", mutator.store().display());
    let mut stats = support::assay();
    stats.args(["cache", "stats", "--store", &store]);
    let stats = support::run(stats, None);
    assert!(
        stats.stdout.contains(&format!(
            ": {n} entries ({n} of assay mutate, 0 of assay test)",
            n = entries.len()
        )),
        "{}",
        stats.explain()
    );
    let mut prune = support::assay();
    prune.args(["cache", "prune", "--max-size-mb", "0", "--store", &store]);
    let prune = support::run(prune, None);
    assert!(
        prune
            .stdout
            .contains(&format!("{} entries deleted", entries.len())),
        "{}",
        prune.explain()
    );
    assert!(mutator.entries().is_empty());
}

#[test]
fn a_baseline_test_that_needs_the_network_is_named_a_network_failure() {
    // A suite test that looks the warehouse service's host up: jobs have no network.
    let repo = shop();
    repo.write(
        "tests/test_warehouse.py",
        "import socket\n\n\ndef test_warehouse_host_resolves():\n    assert socket.getaddrinfo(\"warehouse.example.com\", 443)\n",
    );
    repo.commit("tests: the warehouse host resolves");
    let run = Mutator::new().mutate_with_env(&repo, &[], &[]);
    assert_eq!(run.code, 3, "{}", run.explain());
    assert!(
        run.stderr.contains(
            "the unmutated baseline run did not pass: tests/test_warehouse.py::test_warehouse_host_resolves failed; its output shows a network failure ("
        ) && run
            .stderr
            .contains("and jobs run with no network beyond a loopback of their own; no mutant was run"),
        "{}",
        run.explain()
    );
}

#[test]
fn a_run_whose_baseline_fails_stops_before_any_mutant_naming_the_failing_test() {
    let repo = shop();
    let mutator = Mutator::new();
    mutator.mutate(&repo, &[]);
    let stored = mutator.entries();
    assert!(!stored.is_empty());
    let snapshot: Vec<Vec<u8>> = stored.iter().map(|p| std::fs::read(p).unwrap()).collect();
    // A test that fails unmutated: every kill it would record says nothing of the mutant.
    repo.write(
        "tests/test_stock.py",
        &format!("{STOCK_TESTS}\n\ndef test_an_empty_shelf_is_in_stock():\n    assert in_stock(0) is True\n"),
    );
    repo.commit("tests: a wrong expectation");
    let broken = mutator.mutate_with_env(&repo, &[], &[]);
    assert_eq!(broken.code, 3, "{}", broken.explain());
    assert!(
        broken.stderr.contains(
            "the unmutated baseline run did not pass: tests/test_stock.py::test_an_empty_shelf_is_in_stock failed; no mutant was run (hint: a mutation score means nothing against a red suite"
        ),
        "{}",
        broken.explain()
    );
    assert!(
        broken.evidence.is_none(),
        "no report of kills: {}",
        broken.explain()
    );
    assert!(!broken.stdout.contains("killed"), "{}", broken.explain());
    let after: Vec<Vec<u8>> = mutator
        .entries()
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    assert_eq!(snapshot, after, "a failing baseline's run wrote entries");
}

#[test]
fn a_run_whose_interpreter_has_no_pytest_stops_before_any_mutant() {
    let repo = shop();
    // An interpreter without pytest first on PATH: the baseline cannot run a single test. It
    // lives beside the build's own temp dir, which holds the cache key and is masked from jobs.
    let target = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target dir");
    let venv = tempfile::tempdir_in(target).expect("temp dir");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(venv.path())
        .status()
        .expect("python3 runs");
    assert!(made.success());
    let path = std::env::join_paths(std::iter::once(venv.path().join("bin")).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("a PATH");
    let mutator = Mutator::new();
    let run = mutator.mutate_with_env(&repo, &[], &[("PATH", path.as_os_str())]);
    assert_eq!(run.code, 3, "{}", run.explain());
    // The toolchain's own words end the line: the infrastructure lane, with its stderr.
    assert!(
        run.stderr
            .contains("infrastructure failure: the unmutated baseline run could not be run"),
        "{}",
        run.explain()
    );
    assert!(
        run.stderr.contains("No module named pytest"),
        "{}",
        run.explain()
    );
    // No test failed: the suite is not red, and nothing says it is.
    assert!(!run.stderr.contains("red suite"), "{}", run.explain());
    assert!(run.evidence.is_none(), "{}", run.explain());
    assert!(!run.stdout.contains("mutation score"), "{}", run.explain());
    assert!(mutator.entries().is_empty());
}
