//! End-to-end proofs: the real binary on real git repositories with real pytest and unittest.

use crate::support;

use support::{
    PAGER_FIX_CRITERIA, PAGER_FIXED, Repo, Run, assay, commit_pager_fix, prove,
    prove_keeping_store, pytest_pager_repo,
};

/// [`prove`] of `repo`'s last commit against its parent with `flags`; it must exit `code`.
#[track_caller]
fn prove_against_parent(repo: &Repo, flags: &[&str], code: i32) -> Run {
    let run = prove(repo, &[&["--base", "main~1"][..], flags].concat());
    assert_eq!(run.code, code, "{}", run.explain());
    run
}

/// [`prove_against_parent`], C1's verdict being `verdict`.
#[track_caller]
fn c1_against_parent(repo: &Repo, flags: &[&str], code: i32, verdict: &str) -> Run {
    let run = prove_against_parent(repo, flags, code);
    assert_eq!(run.verdict_of("C1"), verdict);
    run
}

/// Why C1 was given its verdict.
fn c1_reason(run: &Run) -> &str {
    run.criterion("C1")["reason"].as_str().unwrap()
}

#[test]
fn a_real_fix_is_proven_and_the_evidence_pins_every_artifact() {
    let repo = pytest_pager_repo();
    commit_pager_fix(&repo);
    let before = repo.status();
    let run = c1_against_parent(
        &repo,
        &[&["--candidate", "main"][..], &PAGER_FIX_CRITERIA].concat(),
        0,
        "proven",
    );
    assert_eq!(run.verdict_of("C2"), "proven");
    let evidence = run.evidence.as_ref().unwrap();
    assert_eq!(evidence["schema"], "assay.proof/v1");
    assert_eq!(evidence["runner"], "pytest");
    assert_eq!(evidence["changed_test_files"][0], "tests/test_pages.py");
    let jobs = evidence["jobs"].as_array().unwrap();
    let kinds: Vec<&str> = jobs.iter().map(|j| j["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "base",
            "candidate",
            "base-suite",
            "candidate-suite",
            "stability",
            "stability",
            "stability",
            "stability"
        ]
    );
    for (index, job) in jobs.iter().enumerate() {
        assert_eq!(job["index"], index as u64);
        let report = job["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == "report");
        let report = report.unwrap_or_else(|| panic!("job {index} has a pinned report: {job:#}"));
        assert_eq!(report["sha256"].as_str().unwrap().len(), 64);
    }
    assert_eq!(
        run.criterion("C1")["base"]["runs"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert!(run.stdout.contains("PROVEN"), "{}", run.explain());
    assert!(run.stderr.contains("[prove] 8/8"), "{}", run.explain());
    assert_eq!(
        repo.status(),
        before,
        "the user's working tree is untouched"
    );
}

#[test]
fn a_test_that_passes_on_the_base_does_not_reproduce() {
    let repo = pytest_pager_repo();
    // A product change that leaves `page_count` as it was, and a test that already passes.
    repo.write(
        "pager.py",
        &format!("{}\n\ndef last_page(total, size):\n    return page_count(total, size)\n", support::PAGER_BUGGY),
    )
    .write(
        "tests/test_pages.py",
        "from pager import page_count\n\n\ndef test_full_pages():\n    assert page_count(10, 5) == 2\n\n\ndef test_twenty_items():\n    assert page_count(20, 5) == 4\n",
    );
    repo.commit("pager: last page; tests: twenty items");
    let run = c1_against_parent(
        &repo,
        &["--criterion", "test: test_twenty_items"],
        1,
        "refuted",
    );
    assert!(c1_reason(&run).contains("does not reproduce"));
}

#[test]
fn a_broken_guard_refutes_the_proof() {
    let repo = pytest_pager_repo();
    repo.write("pager.py", "def page_count(total, size):\n    return total // size + 1\n")
        .write(
            "tests/test_partial.py",
            "from pager import page_count\n\n\ndef test_partial_last_page_is_counted():\n    assert page_count(11, 5) == 3\n",
        );
    repo.commit("pager: always add a page");
    let run = c1_against_parent(&repo, &PAGER_FIX_CRITERIA, 1, "proven");
    assert_eq!(run.verdict_of("C2"), "refuted");
    assert_eq!(run.criterion("C2")["candidate"]["outcome"], "failed");
}

#[test]
fn a_guard_that_needs_the_network_is_refuted_with_a_hint_naming_the_sandboxs_network() {
    // The guard looks up the exchange-rate service's host: jobs have no network, so it fails
    // on the base before the change is ever judged.
    let repo = pytest_pager_repo();
    repo.write(
        "tests/test_rates.py",
        "import socket\n\n\ndef test_exchange_rates_host_resolves():\n    assert socket.getaddrinfo(\"rates.example.com\", 443)\n",
    );
    repo.commit("rates: the service's host resolves");
    commit_pager_fix(&repo);
    let run = prove_against_parent(
        &repo,
        &[
            "--no-mutation",
            "--criterion",
            "test: test_partial_last_page_is_counted",
            "--criterion",
            "guard: test_exchange_rates_host_resolves",
        ],
        1,
    );
    assert_eq!(run.verdict_of("C2"), "refuted", "{}", run.explain());
    let reason = run.criterion("C2")["reason"].as_str().expect("a reason");
    assert!(
        reason.starts_with("guard test_exchange_rates_host_resolves does not pass on the base")
            && reason.contains("shows a network failure (")
            && reason.contains("jobs run with no network beyond a loopback of their own")
            && reason.contains("--network bridge"),
        "{reason}"
    );
    // A guard that fails for its own reasons gets no such hint.
    let broken = pytest_pager_repo();
    broken
        .write("pager.py", "def page_count(total, size):\n    return total // size + 1\n")
        .write(
            "tests/test_partial.py",
            "from pager import page_count\n\n\ndef test_partial_last_page_is_counted():\n    assert page_count(11, 5) == 3\n",
        );
    broken.commit("pager: always add a page");
    let run = c1_against_parent(&broken, &PAGER_FIX_CRITERIA, 1, "proven");
    assert!(!c1_reason(&run).contains("network"));
    let guard = run.criterion("C2")["reason"].as_str().expect("a reason");
    assert!(!guard.contains("network"), "{guard}");
}

#[test]
fn an_import_error_on_the_base_is_missing_evidence_not_a_refutation() {
    let repo = pytest_pager_repo();
    repo.write("pager.py", &format!("{PAGER_FIXED}\n\ndef last_page_size(total, size):\n    return total % size or size\n"))
        .write(
            "tests/test_last_page.py",
            "from pager import last_page_size\n\n\ndef test_last_page_size():\n    assert last_page_size(11, 5) == 1\n",
        );
    repo.commit("pager: last page size");
    let run = c1_against_parent(
        &repo,
        &["--criterion", "test: test_last_page_size"],
        4,
        "unverified",
    );
    assert_eq!(run.criterion("C1")["base"]["outcome"], "collection_error");
    let reason = c1_reason(&run);
    assert!(reason.contains("names the base already has"), "{reason}");
}

#[test]
fn one_failing_parametrized_variant_breaks_a_guard() {
    let repo = Repo::new();
    repo.write("pager.py", PAGER_FIXED).write("conftest.py", "").write(
        "tests/test_pages.py",
        "import pytest\nfrom pager import page_count\n\n\n@pytest.mark.parametrize('total,size,pages', [(10, 5, 2), (0, 5, 0), (7, 7, 1)])\ndef test_pages(total, size, pages):\n    assert page_count(total, size) == pages\n",
    );
    repo.commit("pager");
    repo.write(
        "pager.py",
        "def page_count(total, size):\n    return max(1, -(-total // size))\n",
    );
    repo.commit("pager: at least one page");
    let run = c1_against_parent(&repo, &["--criterion", "guard: test_pages"], 1, "refuted");
    assert!(
        c1_reason(&run).contains("test_pages[0-5-0]"),
        "{}",
        run.explain()
    );
}

#[test]
fn a_name_in_two_files_is_ambiguous() {
    let repo = pytest_pager_repo();
    repo.write("tests/test_more.py", "from pager import page_count\n\n\ndef test_full_pages():\n    assert page_count(15, 5) == 3\n");
    repo.commit("tests: more");
    let run = c1_against_parent(
        &repo,
        &["--criterion", "guard: test_full_pages"],
        4,
        "unverified",
    );
    let reason = c1_reason(&run);
    assert!(
        reason.contains("tests/test_more.py") && reason.contains("tests/test_pages.py"),
        "{reason}"
    );
}

#[test]
fn a_flaky_test_is_unstable() {
    let repo = pytest_pager_repo();
    // A coin flip per run (a confined test keeps no state between runs): 20 runs all agree
    // once in half a million proofs.
    repo.write("pager.py", PAGER_FIXED).write(
        "tests/test_flaky.py",
        "import os\n\n\ndef test_partial_last_page_is_counted():\n    assert os.urandom(1)[0] % 2\n",
    );
    repo.commit("tests: flaky");
    let run = c1_against_parent(
        &repo,
        &[
            "--repeats",
            "20",
            "--criterion",
            "test: test_partial_last_page_is_counted",
        ],
        4,
        "unstable",
    );
    assert!(c1_reason(&run).contains("unstable"));
}

#[test]
fn guards_alone_rest_on_the_existing_suite_when_no_test_changes() {
    let repo = pytest_pager_repo();
    repo.write("pager.py", PAGER_FIXED);
    repo.commit("pager: refactor");
    let run = prove_against_parent(&repo, &["--criterion", "guard: test_full_pages"], 0);
    let kinds: Vec<String> = run.evidence.as_ref().unwrap()["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds,
        ["base-suite", "candidate-suite", "stability", "stability"]
    );
}

#[test]
fn a_qualified_selector_is_refused_before_anything_runs() {
    let repo = pytest_pager_repo();
    let run = prove(
        &repo,
        &[
            "--base",
            "main",
            "--criterion",
            "test: tests/test_pages.py::test_full_pages",
        ],
    );
    assert_eq!(run.code, 2, "{}", run.explain());
    assert!(run.evidence.is_none());
    assert!(
        run.stderr.contains("bare test name") && run.stderr.contains("test: test_full_pages"),
        "{}",
        run.explain()
    );
    assert!(
        !run.stderr.contains("[prove]"),
        "nothing ran: {}",
        run.explain()
    );
}

#[test]
fn a_unittest_fix_is_proven_with_the_shipped_adapter() {
    let repo = Repo::new();
    repo.write("pager.py", support::PAGER_BUGGY).write("tests/__init__.py", "").write(
        "tests/test_pages.py",
        "import unittest\n\nfrom pager import page_count\n\n\nclass PageTests(unittest.TestCase):\n    def test_full_pages(self):\n        self.assertEqual(page_count(10, 5), 2)\n",
    );
    repo.commit("pager");
    repo.write("pager.py", PAGER_FIXED).write(
        "tests/test_pages.py",
        "import unittest\n\nfrom pager import page_count\n\n\nclass PageTests(unittest.TestCase):\n    def test_full_pages(self):\n        self.assertEqual(page_count(10, 5), 2)\n\n    def test_partial_last_page_is_counted(self):\n        self.assertEqual(page_count(11, 5), 3)\n",
    );
    repo.commit("pager: partial page");
    let run = prove_against_parent(&repo, &PAGER_FIX_CRITERIA, 0);
    assert_eq!(run.evidence.as_ref().unwrap()["runner"], "unittest");
}

#[test]
fn a_patch_file_stands_in_for_a_candidate_revision() {
    let repo = pytest_pager_repo();
    commit_pager_fix(&repo);
    let patch = repo.git(&["diff", "main~1", "main"]);
    repo.git(&["reset", "-q", "--hard", "main~1"]);
    let patch_file = repo
        .dir
        .path()
        .parent()
        .unwrap()
        .join(format!("fix-{}.patch", std::process::id()));
    std::fs::write(&patch_file, patch).unwrap();
    let run = prove(
        &repo,
        &[
            "--base",
            "main",
            "--patch",
            patch_file.to_str().unwrap(),
            "--criterion",
            "test: test_partial_last_page_is_counted",
        ],
    );
    let _ = std::fs::remove_file(&patch_file);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert!(run.evidence.as_ref().unwrap()["candidate"]["commit"].is_null());
}

#[test]
fn configuration_comes_from_assay_toml_and_flags_win() {
    let repo = pytest_pager_repo();
    commit_pager_fix(&repo);
    repo.write(
        "assay.toml",
        "base = \"main~1\"\ncriteria = [\"test: test_partial_last_page_is_counted\"]\nrepeats = 2\n",
    );
    let run = prove(&repo, &["--repeats", "1"]);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(
        run.evidence.as_ref().unwrap()["jobs"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
}

#[test]
fn usage_and_infrastructure_errors_are_one_clear_line_with_their_codes() {
    let repo = pytest_pager_repo();
    commit_pager_fix(&repo);
    let criterion = ["--criterion", "test: test_partial_last_page_is_counted"];

    let unknown = prove(&repo, &[&["--base", "release-9"][..], &criterion].concat());
    assert_eq!(unknown.code, 2, "{}", unknown.explain());
    assert!(
        unknown.stderr.contains("unknown revision \"release-9\""),
        "{}",
        unknown.explain()
    );
    assert!(unknown.evidence.is_none());

    let mut missing_dir = support::assay();
    missing_dir
        .args(["prove", "-C", "/nonexistent/checkout", "--base", "main"])
        .args(criterion);
    let missing_dir = support::run(missing_dir, None);
    assert_eq!(missing_dir.code, 2, "{}", missing_dir.explain());
    assert!(missing_dir.stderr.contains("/nonexistent/checkout"));

    let no_python = prove_against_parent(
        &repo,
        &[
            &["--test-command", "python3-not-installed -m pytest"][..],
            &criterion,
        ]
        .concat(),
        3,
    );
    assert!(
        no_python.stderr.contains("python3-not-installed"),
        "{}",
        no_python.explain()
    );
    assert!(no_python.stderr.contains("hint"), "{}", no_python.explain());

    prove_against_parent(&repo, &[&["--jobs", "0"][..], &criterion].concat(), 2);
}

/// `assay history --json` for the proof's repository, reading the state a proof wrote.
fn history(repo: &Repo, state: &std::path::Path, branch: Option<&str>) -> serde_json::Value {
    let mut command = assay();
    command
        .arg("history")
        .arg("-C")
        .arg(repo.path())
        .arg("--json");
    command.arg("--state-dir").arg(state);
    if let Some(branch) = branch {
        command.args(["--branch", branch]);
    }
    let out = command.output().expect("assay history runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("history is JSON")
}

#[test]
fn a_proof_records_its_suite_jobs_in_the_candidate_branch_history() {
    let repo = pytest_pager_repo();
    repo.git(&["checkout", "-q", "-b", "fix/partial-pages"]);
    commit_pager_fix(&repo);
    let criteria = [
        "--base",
        "main",
        "--no-mutation",
        "--criterion",
        "test: test_partial_last_page_is_counted",
    ];
    let (run, out) = prove_keeping_store(&repo, &criteria);
    assert_eq!(run.code, 0, "{}", run.explain());
    let proof_id = run.evidence.as_ref().unwrap()["proof_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let state = out.path().join("state");
    // HEAD is on fix/partial-pages: `assay history` there reads that branch by default.
    let json = history(&repo, &state, None);
    assert_eq!(json["schema"], "assay.history/v1");
    assert_eq!(json["branch"], "fix/partial-pages");
    let runs = json["runs"].as_array().unwrap();
    let ids: Vec<&str> = runs.iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            format!("{proof_id}-base-suite"),
            format!("{proof_id}-candidate-suite")
        ]
    );
    // The base runs the change's new test against the old code: it fails there.
    let base = &runs[0];
    assert_eq!(
        (
            &base["total"],
            &base["passed"],
            &base["failed"],
            &base["status"]
        ),
        (&2.into(), &1.into(), &1.into(), &"failing".into())
    );
    assert!(
        base["failed_cases"][0]
            .as_str()
            .unwrap()
            .ends_with("test_partial_last_page_is_counted"),
        "{base}"
    );
    let candidate = &runs[1];
    assert_eq!(
        (
            &candidate["total"],
            &candidate["passed"],
            &candidate["failed"],
            &candidate["skipped"],
            &candidate["status"]
        ),
        (
            &2.into(),
            &2.into(),
            &0.into(),
            &0.into(),
            &"passing".into()
        )
    );
    assert_eq!(candidate["coverage_pct"], serde_json::Value::Null);
    assert_eq!(candidate["new_failures"], 0);

    // A second proof of the same fix: its base-suite fails the test the fix makes pass, as
    // before; that is a baseline, not a regression against the first proof's candidate.
    let mut again = criteria.to_vec();
    let state_arg = state.display().to_string();
    again.extend(["--state-dir", &state_arg]);
    let (second, _out) = prove_keeping_store(&repo, &again);
    assert_eq!(second.code, 0, "{}", second.explain());
    assert!(!second.stderr.contains("[ALERT]"), "{}", second.explain());
    let runs = history(&repo, &state, None)["runs"].clone();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 4);
    for run in runs {
        assert_eq!(run["alerts"], serde_json::json!([]), "{run}");
    }
    assert_eq!(
        runs[2]["failed"], 1,
        "the second base fails as the first did"
    );

    // A candidate named by its commit has no branch: it is recorded under `detached`.
    let commit = repo.git(&["rev-parse", "HEAD"]);
    let mut by_commit = criteria.to_vec();
    by_commit.extend(["--candidate", commit.trim()]);
    let (run, out) = prove_keeping_store(&repo, &by_commit);
    assert_eq!(run.code, 0, "{}", run.explain());
    let state = out.path().join("state");
    let detached = history(&repo, &state, Some("detached"));
    assert_eq!(detached["runs"].as_array().unwrap().len(), 2);
    let branch = history(&repo, &state, None);
    assert!(branch["runs"].as_array().unwrap().is_empty(), "{branch}");
}

#[test]
fn an_empty_xdg_cache_home_counts_as_unset() {
    let repo = pytest_pager_repo();
    commit_pager_fix(&repo);
    let home = tempfile::tempdir().expect("temp dir");
    let out = tempfile::tempdir().expect("temp dir");
    let json = out.path().join("proof.json");
    let mut command = assay();
    command
        .arg("prove")
        .arg("-C")
        .arg(repo.path())
        .args([
            "--base",
            "main~1",
            "--criterion",
            "test: test_partial_last_page_is_counted",
        ])
        .arg("--json")
        .arg(&json)
        .env("XDG_CACHE_HOME", "")
        .env("HOME", home.path())
        .env("ASSAY_STATE_DIR", out.path().join("state"));
    let run = support::run(command, Some(json));
    assert_eq!(run.code, 0, "{}", run.explain());
    assert!(
        home.path().join(".cache/assay/store").is_dir(),
        "the default store lives under $HOME/.cache: {}",
        run.explain()
    );
}
