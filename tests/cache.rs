//! The result cache through the real binary: a re-proof answers unchanged jobs from the cache
//! and says so, what may not be trusted is never stored, and a tampered entry is refused. A Go
//! build failure is answered with the compiler's error its stored stderr holds.

use crate::support;

use support::{PAGER_FIXED, Repo, Run, commit_pager_fix, fixture, pytest_pager_repo};

fn pager_fix() -> Repo {
    let repo = pytest_pager_repo();
    commit_pager_fix(&repo);
    repo
}

/// `assay prove` with one store and state directory for every call of a test.
struct Prover {
    dir: tempfile::TempDir,
}

impl Prover {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn store(&self) -> std::path::PathBuf {
        self.dir.path().join("store")
    }

    fn prove(&self, repo: &Repo, base: &str, extra: &[&str]) -> Run {
        let json = self.dir.path().join("proof.json");
        let mut command = support::assay();
        command
            .arg("prove")
            .arg("-C")
            .arg(repo.path())
            .args(["--base", base, "--no-mutation"])
            .args(
                (!extra.contains(&"--repeats"))
                    .then_some(["--repeats", "2"])
                    .into_iter()
                    .flatten(),
            )
            .args(["--criterion", "test: test_partial_last_page_is_counted"])
            .args(["--criterion", "guard: test_full_pages"])
            .args(extra)
            .arg("--json")
            .arg(&json)
            .arg("--store")
            .arg(format!("file://{}", self.store().display()))
            .env("ASSAY_STATE_DIR", self.dir.path().join("state"));
        let _ = std::fs::remove_file(&json);
        support::run(command, Some(json))
    }
}

/// `(kind, served from the cache)` of each job, in plan order.
fn cached_jobs(run: &Run) -> Vec<(String, bool)> {
    run.evidence.as_ref().map_or_else(Vec::new, |e| {
        e["jobs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|j| {
                (
                    j["kind"].as_str().unwrap_or_default().to_owned(),
                    j.get("cached").is_some_and(|c| !c.is_null()),
                )
            })
            .collect()
    })
}

/// The run's progress lines for finished jobs (`[prove] 3/6 base (…): …`), each with whether it
/// says the cache answered its job.
fn job_lines(run: &Run) -> Vec<(String, bool)> {
    run.stderr
        .lines()
        .filter(|l| l.starts_with("[prove] ") && l.contains('/') && l.contains("): "))
        .map(|l| (l.to_owned(), l.contains(" (cached): ")))
        .collect()
}

#[test]
fn a_reproof_after_a_product_only_edit_runs_only_the_candidate_side() {
    let repo = pager_fix();
    let prover = Prover::new();
    let first = prover.prove(&repo, "main~1", &[]);
    assert_eq!(first.code, 0, "{}", first.explain());
    assert!(cached_jobs(&first).iter().all(|(_, cached)| !cached));
    let lines = job_lines(&first);
    assert_eq!(lines.len(), 6, "{}", first.explain());
    assert!(lines.iter().all(|(_, cached)| !cached), "{lines:#?}");
    let first_id = first.evidence.as_ref().unwrap()["proof_id"].clone();

    // The same change again: every job is answered, naming the entry and the run behind it.
    let again = prover.prove(&repo, "main~1", &[]);
    assert_eq!(again.code, 0, "{}", again.explain());
    assert!(
        cached_jobs(&again).iter().all(|(_, cached)| *cached),
        "{}",
        again.explain()
    );
    let job = &again.evidence.as_ref().unwrap()["jobs"][0];
    assert_eq!(job["cached"]["proof_id"], first_id);
    assert_eq!(job["cached"]["entry"].as_str().map(str::len), Some(64));
    assert!(
        again.stderr.contains("6 of 6 jobs answered from the cache"),
        "{}",
        again.explain()
    );
    // Each job's progress line says so, in place of a time it did not take in this run.
    let lines = job_lines(&again);
    assert_eq!(lines.len(), 6, "{}", again.explain());
    assert!(lines.iter().all(|(_, cached)| *cached), "{lines:#?}");

    // A product-only edit: the base tree is unchanged, the candidate's is new.
    repo.write(
        "pager.py",
        &format!(
            "{PAGER_FIXED}\n\ndef last_page(total, size):\n    return page_count(total, size)\n"
        ),
    );
    repo.commit("pager: last page helper");
    let edited = prover.prove(&repo, "main~2", &[]);
    assert_eq!(edited.code, 0, "{}", edited.explain());
    let jobs = cached_jobs(&edited);
    assert_eq!(jobs.len(), 6, "{}", edited.explain());
    let evidence = edited.evidence.as_ref().unwrap();
    for (index, (kind, cached)) in jobs.iter().enumerate() {
        let side = evidence["jobs"][index]["side"].as_str().unwrap_or_default();
        assert_eq!(
            *cached,
            side == "base",
            "{kind} on the {side}: {}",
            edited.explain()
        );
    }
    // Only the answered jobs' lines say cached: the candidate's ran.
    let lines = job_lines(&edited);
    let served = jobs.iter().filter(|(_, cached)| *cached).count();
    assert_eq!(lines.len(), 6, "{}", edited.explain());
    assert_eq!(
        lines.iter().filter(|(_, cached)| *cached).count(),
        served,
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .all(|(line, cached)| !cached || !line.contains(" candidate ")),
        "{lines:#?}"
    );

    // --no-cache runs everything; --refresh-cache too, and stores what it ran.
    let uncached = prover.prove(&repo, "main~2", &["--no-cache"]);
    assert!(cached_jobs(&uncached).iter().all(|(_, cached)| !cached));
    let refreshed = prover.prove(&repo, "main~2", &["--refresh-cache"]);
    assert!(cached_jobs(&refreshed).iter().all(|(_, cached)| !cached));
    assert!(
        refreshed.stderr.contains("6 results stored"),
        "{}",
        refreshed.explain()
    );
}

/// Go 1.19 prints a build failure's compiler error on stderr, outside the report the entry pins:
/// a served result is re-read with the stored stderr, so it keeps the error and is not refused.
#[test]
fn a_go_build_failure_is_answered_from_the_cache_with_its_compiler_error() {
    let repo = Repo::new();
    repo.copy_fixture("go-cache", &["ledger/ledger_test.go"]);
    repo.commit("cache and ledger");
    let ledger = fixture("go-cache/ledger/ledger.go")
        + "\n// RoundedTotal is the total a printed invoice shows.\nfunc RoundedTotal(lines []int) int { return Total(lines) }\n";
    repo.write("ledger/ledger.go", &ledger).write(
        "ledger/ledger_test.go",
        &fixture("go-cache/ledger/ledger_test.go"),
    );
    repo.commit("ledger: rounded totals");
    let out = tempfile::tempdir().unwrap();
    let prove = || {
        let (command, json) = support::prove_command(
            &repo,
            &[
                "--base",
                "main~1",
                "--no-mutation",
                "--criterion",
                "test: TestTotalRounds",
            ],
            out.path(),
        );
        support::run(command, Some(json))
    };
    let first = prove();
    let again = prove();
    for run in [&first, &again] {
        assert_eq!(run.verdict_of("C1"), "unverified", "{}", run.explain());
        assert_eq!(
            run.criterion("C1")["base"]["error"],
            "ledger/ledger_test.go:8:5: undefined: RoundedTotal",
            "{}",
            run.explain()
        );
    }
    assert!(cached_jobs(&first).iter().all(|(_, cached)| !cached));
    assert!(
        cached_jobs(&again).iter().all(|(_, cached)| *cached),
        "{}",
        again.explain()
    );
    assert!(!again.stderr.contains("refused"), "{}", again.explain());
}

#[test]
fn an_unstable_proof_stores_nothing() {
    let repo = Repo::new();
    // With the fix, passes on about half of its runs: its repeats on the candidate disagree.
    repo.write("pager.py", support::PAGER_BUGGY)
        .write("conftest.py", "")
        .write(
            "tests/test_pages.py",
            "from pager import page_count\n\n\ndef test_full_pages():\n    assert page_count(10, 5) == 2\n",
        );
    repo.commit("pager");
    repo.write("pager.py", PAGER_FIXED).write(
        "tests/test_pages.py",
        "import os\nfrom pager import page_count\n\n\ndef test_full_pages():\n    assert page_count(10, 5) == 2\n\n\ndef test_partial_last_page_is_counted():\n    assert page_count(11, 5) == 3\n    assert os.urandom(1)[0] % 2, 'flaky'\n",
    );
    repo.commit("pager: partial page, flaky test");
    let prover = Prover::new();
    // A coin flip per run (a confined test keeps no state between runs): 20 runs all agree
    // once in half a million proofs.
    let first = prover.prove(&repo, "main~1", &["--jobs", "2", "--repeats", "20"]);
    assert_eq!(first.verdict_of("C1"), "unstable", "{}", first.explain());
    assert!(
        first.stderr.contains("0 results stored"),
        "{}",
        first.explain()
    );
}

#[test]
fn a_timed_out_job_is_never_stored() {
    let repo = pytest_pager_repo();
    let tests = std::fs::read_to_string(repo.path().join("tests/test_pages.py")).unwrap();
    repo.write("pager.py", PAGER_FIXED).write(
        "tests/test_pages.py",
        &format!("import time\n{tests}\n\ndef test_partial_last_page_is_counted():\n    time.sleep(30)\n    assert page_count(11, 5) == 3\n"),
    );
    repo.commit("pager: a slow test");
    let prover = Prover::new();
    let first = prover.prove(&repo, "main~1", &["--timeout", "2"]);
    let evidence = first.evidence.as_ref().expect("evidence written");
    let jobs = evidence["jobs"].as_array().unwrap();
    let timed_out = jobs.iter().filter(|j| j["status"] == "timed_out").count();
    assert!(timed_out > 0, "{}", first.explain());
    let again = prover.prove(&repo, "main~1", &["--timeout", "2"]);
    let evidence = again.evidence.as_ref().expect("evidence written");
    for job in evidence["jobs"].as_array().unwrap() {
        if job["status"] == "timed_out" {
            assert!(job.get("cached").is_none(), "a timeout was served: {job:#}");
        }
    }
}

#[test]
fn a_tampered_entry_is_refused_reported_and_the_job_runs() {
    let repo = pager_fix();
    let prover = Prover::new();
    let first = prover.prove(&repo, "main~1", &[]);
    assert_eq!(first.code, 0, "{}", first.explain());
    // Turn every stored failure into a pass, as a poisoned cache would; without the key, the
    // signature gives it away.
    let entries = prover.store().join("cache/v1");
    let turn_failures_into_passes = |resign: bool| {
        let mut tampered = 0;
        for entry in std::fs::read_dir(&entries).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            if text.contains("\"failed\"") {
                std::fs::write(&path, text.replace("\"failed\"", "\"passed\"")).unwrap();
                if resign {
                    support::resign::<assay_engine::result_cache::CacheEntry>(&path);
                }
                tampered += 1;
            }
        }
        tampered
    };
    let tampered = turn_failures_into_passes(false);
    assert!(tampered > 0);
    let unsigned = prover.prove(&repo, "main~1", &[]);
    assert_eq!(
        unsigned.verdict_of("C1"),
        "proven",
        "{}",
        unsigned.explain()
    );
    assert!(
        unsigned.stderr.lines().any(|l| l.starts_with("[cache] ")
            && l.contains(" refused, ")
            && l.contains(&format!(
                "the entry's signature does not verify under this user's key ({tampered})"
            ))),
        "{}",
        unsigned.explain()
    );
    // Signed again with the key, the entry still pins a report that says otherwise.
    assert_eq!(turn_failures_into_passes(true), tampered);
    let again = prover.prove(&repo, "main~1", &[]);
    assert_eq!(again.code, 0, "{}", again.explain());
    assert_eq!(again.verdict_of("C1"), "proven");
    // The refusals are one line: how many, and each reason with its count.
    let refusals: Vec<&str> = again
        .stderr
        .lines()
        .filter(|l| l.starts_with("[cache] ") && l.contains(" refused, "))
        .collect();
    assert_eq!(refusals.len(), 1, "{}", again.explain());
    assert!(
        refusals[0].contains(&format!(
            "the pinned report does not say what the entry claims ({tampered})"
        )),
        "{}",
        again.explain()
    );
    let ran = cached_jobs(&again)
        .iter()
        .filter(|(_, cached)| !cached)
        .count();
    assert_eq!(ran, tampered, "{}", again.explain());
}

#[test]
fn cache_stats_and_prune_see_and_trim_the_entries() {
    let repo = pager_fix();
    let prover = Prover::new();
    assert_eq!(prover.prove(&repo, "main~1", &[]).code, 0);
    let store = format!("file://{}", prover.store().display());
    let stats = support::run(
        {
            let mut c = support::assay();
            c.args(["cache", "stats", "--store", &store]);
            c
        },
        None,
    );
    assert_eq!(stats.code, 0, "{}", stats.explain());
    assert!(stats.stdout.contains(": 6 entries"), "{}", stats.explain());
    let prune = support::run(
        {
            let mut c = support::assay();
            c.args(["cache", "prune", "--max-size-mb", "0", "--store", &store]);
            c
        },
        None,
    );
    assert_eq!(prune.code, 0, "{}", prune.explain());
    assert!(
        prune.stdout.contains("6 entries deleted"),
        "{}",
        prune.explain()
    );
    let no_limit = support::run(
        {
            let mut c = support::assay();
            c.args(["cache", "prune", "--store", &store]);
            c
        },
        None,
    );
    assert_eq!(no_limit.code, 2, "{}", no_limit.explain());
}
