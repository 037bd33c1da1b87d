//! End-to-end mutation checks: the real binary proves a real fix with real pytest, then mutates
//! the fix's changed lines and runs the proving tests against each mutant.

mod support;

use support::{PAGER_FIXED, Run, prove, pytest_pager_repo};

const PARTIAL_TEST: &str =
    "\n\ndef test_partial_last_page_is_counted():\n    assert page_count(11, 5) == 3\n";

/// The pager fix with a test for the partial page, committed on top of the buggy base.
fn pager_fix() -> support::Repo {
    let repo = pytest_pager_repo();
    let tests = std::fs::read_to_string(repo.path().join("tests/test_pages.py")).unwrap();
    repo.write("pager.py", PAGER_FIXED)
        .write("tests/test_pages.py", &format!("{tests}{PARTIAL_TEST}"));
    repo.commit("pager: count the last partial page");
    repo
}

fn check(run: &Run) -> &serde_json::Value {
    let evidence = run.evidence.as_ref().expect("evidence written");
    evidence
        .get("mutation_check")
        .unwrap_or_else(|| panic!("mutation_check in {evidence:#}"))
}

fn statuses(check: &serde_json::Value) -> Vec<(String, String)> {
    check["mutants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["mutant"]["description"].as_str().unwrap().to_owned(),
                m["outcome"]["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_weak_proving_test_lets_the_bound_swap_survive_and_the_summary_names_it() {
    let repo = pager_fix();
    let run = prove(
        &repo,
        &[
            "--base",
            "main~1",
            "--criterion",
            "test: test_partial_last_page_is_counted",
        ],
    );
    assert_eq!(
        run.code,
        0,
        "the check never changes the exit code\n{}",
        run.explain()
    );
    let check = check(&run);
    assert_eq!(check["budget_s"], 900);
    assert!(check["unmutated_s"].as_f64().is_some(), "{check:#}");
    let statuses = statuses(check);
    assert!(statuses.len() >= 4, "{statuses:?}");
    let survivors: Vec<&str> = statuses
        .iter()
        .filter(|(_, s)| s == "survived")
        .map(|(d, _)| d.as_str())
        .collect();
    assert_eq!(survivors, ["`>` -> `>=`"], "{check:#}");
    assert_eq!(check["survived"], 1);
    assert_eq!(check["not_run"], 0, "{check:#}");
    let killed = check["mutants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["outcome"]["status"] == "killed")
        .expect("a killed mutant");
    assert_eq!(
        killed["outcome"]["by"][0],
        "test_partial_last_page_is_counted"
    );
    let expected = "test_partial_last_page_is_counted passes with pager.py:3 changed (`>` -> `>=`)";
    assert_eq!(check["survivors"][0]["message"], expected);
    assert!(run.stdout.contains(expected), "{}", run.explain());
    assert!(run.stdout.contains("PROVEN"), "{}", run.explain());
}

#[test]
fn a_strong_guard_kills_every_mutant_of_the_fix() {
    let repo = pager_fix();
    let run = prove(
        &repo,
        &[
            "--base",
            "main~1",
            "--criterion",
            "test: test_partial_last_page_is_counted",
            "--criterion",
            "guard: test_full_pages",
            "--jobs",
            "2",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.explain());
    let check = check(&run);
    let statuses = statuses(check);
    assert!(statuses.len() >= 4, "{statuses:?}");
    assert!(
        statuses.iter().all(|(_, s)| s == "killed"),
        "{statuses:?}\n{check:#}"
    );
    assert_eq!(check["survivors"].as_array().unwrap().len(), 0);
    assert!(
        check["excluded_files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["path"] == "tests/test_pages.py" && f["reason"] == "test_file"),
        "{check:#}"
    );
    assert!(run.stdout.contains("0 survived"), "{}", run.explain());
}

#[test]
fn no_mutation_leaves_the_evidence_without_a_mutation_check() {
    let repo = pager_fix();
    let run = prove(
        &repo,
        &[
            "--base",
            "main~1",
            "--criterion",
            "test: test_partial_last_page_is_counted",
            "--no-mutation",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.explain());
    assert!(
        run.evidence
            .as_ref()
            .unwrap()
            .get("mutation_check")
            .is_none()
    );
    assert!(!run.stdout.contains("mutation check"), "{}", run.explain());
}

#[test]
fn mutation_false_in_assay_toml_turns_the_check_off() {
    let repo = pager_fix();
    repo.write("assay.toml", "mutation = false\nmutation-budget = 120\n");
    repo.commit("assay: no mutation check");
    let run = prove(
        &repo,
        &[
            "--base",
            "main~2",
            "--criterion",
            "test: test_partial_last_page_is_counted",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.explain());
    assert!(
        run.evidence
            .as_ref()
            .unwrap()
            .get("mutation_check")
            .is_none()
    );
}

#[test]
fn a_refuted_proof_runs_no_mutant() {
    let repo = pytest_pager_repo();
    repo.write(
        "pager.py",
        "def page_count(total, size):\n    if size > 0:\n        return total // size\n    return 0\n",
    )
    .write(
        "tests/test_partial.py",
        "from pager import page_count\n\n\ndef test_partial_last_page_is_counted():\n    assert page_count(11, 5) == 3\n",
    );
    repo.commit("pager: guard against zero");
    let run = prove(
        &repo,
        &[
            "--base",
            "main~1",
            "--criterion",
            "test: test_partial_last_page_is_counted",
        ],
    );
    assert_eq!(run.code, 1, "{}", run.explain());
    let evidence = run.evidence.as_ref().unwrap();
    assert!(evidence.get("mutation_check").is_none(), "{evidence:#}");
    assert!(!run.stderr.contains("mutant ("), "{}", run.explain());
}
