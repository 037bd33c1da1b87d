//! End-to-end mutation checks: the real binary proves a real fix with real pytest, then mutates
//! the fix's changed lines and runs the proving tests against each mutant.

use crate::support;

use support::{Run, commit_pager_fix, prove, pytest_pager_repo};

/// The pager fix with a test for the partial page, committed on top of the buggy base.
fn pager_fix() -> support::Repo {
    let repo = pytest_pager_repo();
    commit_pager_fix(&repo);
    repo
}

/// `assay prove` of `repo` against `base`, proving the partial-page test, with `extra` flags.
fn prove_partial_page(repo: &support::Repo, base: &str, extra: &[&str]) -> Run {
    let mut args = vec![
        "--base",
        base,
        "--criterion",
        "test: test_partial_last_page_is_counted",
    ];
    args.extend_from_slice(extra);
    prove(repo, &args)
}

/// The evidence holds no mutation check at all.
fn assert_no_mutation_check(run: &Run) {
    assert!(
        run.evidence
            .as_ref()
            .unwrap()
            .get("mutation_check")
            .is_none()
    );
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
    let run = prove_partial_page(&repo, "main~1", &[]);
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
    // The mutants show under their own phase, after the proof's jobs.
    assert!(run.stderr.contains("[prove] 1/"), "{}", run.explain());
    assert!(run.stderr.contains("[mutation] 1/"), "{}", run.explain());
    assert!(run.stderr.contains(" unmutated ("), "{}", run.explain());
    assert!(
        !run.stderr.contains("[prove] 1/7 mutant"),
        "{}",
        run.explain()
    );
}

#[test]
fn a_strong_guard_kills_every_mutant_of_the_fix() {
    let repo = pager_fix();
    let run = prove_partial_page(
        &repo,
        "main~1",
        &["--criterion", "guard: test_full_pages", "--jobs", "2"],
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
    let run = prove_partial_page(&repo, "main~1", &["--no-mutation"]);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_no_mutation_check(&run);
    assert!(!run.stdout.contains("mutation check"), "{}", run.explain());
}

#[test]
fn mutation_false_in_assay_toml_turns_the_check_off() {
    let repo = pager_fix();
    repo.write("assay.toml", "mutation = false\nmutation-budget = 120\n");
    repo.commit("assay: no mutation check");
    let run = prove_partial_page(&repo, "main~2", &[]);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_no_mutation_check(&run);
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
    let run = prove_partial_page(&repo, "main~1", &[]);
    assert_eq!(run.code, 1, "{}", run.explain());
    let evidence = run.evidence.as_ref().unwrap();
    assert!(evidence.get("mutation_check").is_none(), "{evidence:#}");
    assert!(!run.stderr.contains("mutant ("), "{}", run.explain());
}

/// A pager library whose tests pin `page_count` but never call `clamp`.
fn pager_library() -> support::Repo {
    let repo = support::Repo::new();
    repo.write(
        "pager/__init__.py",
        "def page_count(total, size):\n    pages = total // size\n    if total % size > 0:\n        pages += 1\n    return pages\n\n\ndef clamp(page, last):\n    if page > last:\n        return last\n    return page\n",
    )
    .write("conftest.py", "")
    .write(
        "tests/test_pager.py",
        "from pager import page_count\n\n\ndef test_partial_last_page_is_counted():\n    assert page_count(11, 5) == 3\n\n\ndef test_full_pages():\n    assert page_count(10, 5) == 2\n",
    );
    repo.commit("pager: count pages");
    repo
}

fn mutate(repo: &support::Repo, args: &[&str]) -> Run {
    mutate_in(&tempfile::tempdir().expect("temp dir"), repo, args)
}

fn mutate_in(out_dir: &tempfile::TempDir, repo: &support::Repo, args: &[&str]) -> Run {
    mutate_in_with_env(out_dir, repo, args, &[])
}

fn mutate_with_env(repo: &support::Repo, args: &[&str], env: &[(&str, &str)]) -> Run {
    mutate_in_with_env(&tempfile::tempdir().expect("temp dir"), repo, args, env)
}

fn mutate_in_with_env(
    out_dir: &tempfile::TempDir,
    repo: &support::Repo,
    args: &[&str],
    env: &[(&str, &str)],
) -> Run {
    let json = out_dir.path().join("mutation.json");
    let mut command = support::assay();
    command
        .envs(env.iter().copied())
        .arg("mutate")
        .arg("-C")
        .arg(repo.path())
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg("--store")
        .arg(format!("file://{}", out_dir.path().join("store").display()));
    support::run(command, Some(json))
}

#[test]
fn mutate_writes_a_stryker_report_and_exits_5_when_a_line_is_uncovered() {
    let repo = pager_library();
    let run = mutate(&repo, &["--jobs", "2"]);
    assert_eq!(run.code, 5, "{}", run.explain());
    let report = run.evidence.as_ref().expect("report written");
    assert_eq!(report["schemaVersion"], "1");
    // Stryker's phases in milliseconds: the baseline ran a real pytest session, and the phases
    // add up to no more than the whole run.
    let phase = |name: &str| report["performance"][name].as_u64().expect("a phase in ms");
    let phases = phase("setup") + phase("initialRun") + phase("mutation");
    assert!(
        phase("initialRun") > 0 && phase("mutation") > 0,
        "{report:#}"
    );
    let elapsed_ms = report["assay"]["summary"]["elapsed_s"].as_f64().unwrap() * 1000.0;
    assert!(phases as f64 <= elapsed_ms + 1.0, "{report:#}");
    let file = &report["files"]["pager/__init__.py"];
    assert_eq!(file["language"], "python");
    assert!(
        file["source"]
            .as_str()
            .unwrap()
            .starts_with("def page_count")
    );
    let mutants = file["mutants"].as_array().unwrap();
    assert!(mutants.len() >= 8, "{report:#}");
    for mutant in mutants {
        assert_eq!(mutant["id"].as_str().unwrap().len(), 12);
        assert!(mutant["mutatorName"].is_string() && mutant["replacement"].is_string());
        assert!(mutant["location"]["start"]["line"].as_u64().unwrap() >= 1);
        assert!(mutant["location"]["end"]["column"].as_u64().unwrap() >= 1);
        let line = mutant["location"]["start"]["line"].as_u64().unwrap();
        let expected = if line >= 9 { "NoCoverage" } else { "Killed" };
        assert_eq!(mutant["status"], expected, "{mutant:#}");
    }
    let killed = mutants.iter().find(|m| m["status"] == "Killed").unwrap();
    assert!(
        killed["coveredBy"][0]
            .as_str()
            .unwrap()
            .starts_with("tests/test_pager.py::"),
        "per-line selection names the covering tests: {killed:#}"
    );
    // A kill names its tests by the same node ids as the mutant's covering tests.
    for mutant in mutants.iter().filter(|m| m["status"] == "Killed") {
        let covered: Vec<&str> = mutant["coveredBy"]
            .as_array()
            .map(|c| c.iter().filter_map(|id| id.as_str()).collect())
            .unwrap_or_default();
        let killers = mutant["killedBy"].as_array().cloned().unwrap_or_default();
        assert!(!killers.is_empty(), "{mutant:#}");
        for killer in killers {
            assert!(
                covered.contains(&killer.as_str().unwrap_or_default()),
                "{killer} is not among the covering tests: {mutant:#}"
            );
        }
    }
    assert_eq!(report["assay"]["perLineSelection"], true);
    assert!(
        run.stdout.contains("no coverage: pager/__init__.py:9"),
        "{}",
        run.explain()
    );
}

#[test]
fn mutate_exits_0_when_every_mutant_of_the_named_path_is_killed() {
    let repo = pager_library();
    repo.write(
        "pager/clamp.py",
        "def is_past_end(page, last):\n    return page > last\n",
    )
    .write(
        "tests/test_clamp.py",
        "from pager.clamp import is_past_end\n\n\ndef test_the_last_page_is_not_past_the_end():\n    assert is_past_end(4, 3) is True\n    assert is_past_end(3, 3) is False\n",
    );
    repo.commit("pager: end check");
    let run = mutate(&repo, &["pager/clamp.py", "--jobs", "2"]);
    let report = run.evidence.as_ref().expect("report written");
    assert_eq!(run.code, 0, "{}\n{report:#}", run.explain());
    let files = report["files"].as_object().unwrap();
    assert_eq!(files.keys().collect::<Vec<_>>(), ["pager/clamp.py"]);
    assert_eq!(report["assay"]["summary"]["mutation_score"], 1.0);
}

/// The kill is re-run inside the mutant's own session: a test that only checks on its first
/// call in a process passes when re-run there (a flaky kill), where a separate confirmation job
/// (a fresh process) would have failed again and called the kill confirmed.
#[test]
fn a_kill_whose_test_passes_when_re_run_at_once_is_flaky_and_a_steady_kill_is_not() {
    let repo = pager_library();
    repo.write(
        "pager/clamp.py",
        "def is_past_end(page, last):\n    return page > last\n\n\ndef is_first(page):\n    return page <= 1\n",
    )
    .write(
        "tests/test_clamp.py",
        "from pager.clamp import is_first, is_past_end\n\n_calls = []\n\n\ndef test_the_last_page_is_not_past_the_end():\n    _calls.append(1)\n    if len(_calls) == 1:\n        assert is_past_end(3, 3) is False\n\n\ndef test_only_page_one_is_first():\n    assert is_first(1) is True\n    assert is_first(2) is False\n",
    );
    repo.commit("pager: end and first page checks");
    let run = mutate(&repo, &["pager/clamp.py", "--jobs", "2"]);
    let report = run.evidence.as_ref().expect("report written");
    support::assert_flaky_and_steady_kills(report, "pager/clamp.py", 2..=2, 6..=6);
}

#[test]
fn mutate_writes_each_mutants_diff_and_prints_the_survivors() {
    let repo = pager_library();
    let out = tempfile::tempdir().expect("temp dir");
    let diff_path = out.path().join("mutants.diff");
    let diff_arg = diff_path.to_str().unwrap();
    let run = mutate_in(&out, &repo, &["--jobs", "2", "--diff", diff_arg]);
    assert_eq!(run.code, 5, "{}", run.explain());
    let report = run.evidence.as_ref().expect("report written");
    let mutants = report["files"]["pager/__init__.py"]["mutants"]
        .as_array()
        .unwrap();
    let diffs = std::fs::read_to_string(&diff_path).expect("diff file written");
    assert_eq!(diffs.matches("# mutant ").count(), mutants.len(), "{diffs}");
    let swap = mutants
        .iter()
        .find(|m| m["description"] == "`>` -> `>=`" && m["location"]["start"]["line"] == 3)
        .expect("the bound swap on line 3");
    let id = swap["id"].as_str().unwrap();
    assert!(
        diffs.contains(&format!(
            "# mutant {id} Killed: pager/__init__.py:3 changed (`>` -> `>=`)\n--- a/pager/__init__.py\n+++ b/pager/__init__.py\n@@ -1,6 +1,6 @@\n"
        )),
        "{diffs}"
    );
    assert!(diffs.contains("\n-    if total % size > 0:\n+    if total % size >= 0:\n"));
    // The diff applies to the committed file as it is.
    let one: String = diffs
        .split("# mutant ")
        .find(|d| d.starts_with(id))
        .map(|d| d.split_once('\n').unwrap().1.to_owned())
        .unwrap();
    std::fs::write(out.path().join("one.diff"), one).unwrap();
    repo.git(&[
        "apply",
        "--check",
        out.path().join("one.diff").to_str().unwrap(),
    ]);
}

#[test]
fn a_budget_too_small_for_any_mutant_leaves_them_pending_with_the_reason() {
    let repo = pager_library();
    let run = mutate(&repo, &["--jobs", "2", "--budget", "30"]);
    assert_eq!(
        run.code,
        5,
        "uncovered lines still count: {}",
        run.explain()
    );
    let report = run.evidence.as_ref().expect("report written");
    let summary = &report["assay"]["summary"];
    let mutants = report["files"]["pager/__init__.py"]["mutants"]
        .as_array()
        .unwrap();
    let pending: Vec<&serde_json::Value> = mutants
        .iter()
        .filter(|m| m["status"] == "Pending")
        .collect();
    assert_eq!(summary["pending"], pending.len(), "{report:#}");
    assert_eq!(
        pending.len() + summary["no_coverage"].as_u64().unwrap() as usize,
        mutants.len(),
        "{report:#}"
    );
    assert!(
        pending[0]["statusReason"]
            .as_str()
            .unwrap()
            .contains("of the mutation budget left"),
        "{report:#}"
    );
    // Only uncovered mutants have a verdict: the score is theirs, 0 of them detected.
    assert_eq!(summary["mutation_score"], 0.0);
    assert!(
        run.stdout.contains(&format!("{} pending", pending.len())),
        "{}",
        run.explain()
    );
}

/// A mutant that breaks the module at import time, where the root conftest imports it. In a
/// fresh session pytest exits 4 and writes no report; in a fork of the collected session the
/// mutated top-level code, run again, raises, and the module is reported as failing to collect
/// (twice, which confirms the kill in its own job). The tests plainly detected it either way:
/// killed, with the reason or the module that failed, never a runtime error.
#[test]
fn a_mutant_that_breaks_the_test_session_is_killed_with_the_reason() {
    let repo = support::Repo::new();
    repo.write(
        "pager/settings.py",
        "import os\n\nif os.sep == \"/\":\n    SEPARATOR = \"/\"\nelse:\n    SEPARATOR = \"\\\\\"\nLIMIT = SEPARATOR * 2\n",
    )
    .write("pager/__init__.py", "")
    .write("conftest.py", "from pager.settings import LIMIT\n")
    .write(
        "tests/test_settings.py",
        "from pager.settings import LIMIT\n\n\ndef test_the_limit_is_two_separators():\n    assert LIMIT == \"//\"\n",
    );
    repo.commit("pager: settings");
    let dropped_branch = |run: &Run| {
        let report = run.evidence.as_ref().expect("report written");
        let mutants = report["files"]["pager/settings.py"]["mutants"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            mutants.iter().all(|m| m["status"] != "RuntimeError"),
            "{report:#}"
        );
        mutants
            .into_iter()
            .find(|m| m["mutatorName"] == "drop_branch" && m["location"]["start"]["line"] == 4)
            .unwrap_or_else(|| panic!("no drop-branch mutant of line 4: {report:#}"))
    };
    let fresh = dropped_branch(&mutate_with_env(
        &repo,
        &["pager/settings.py", "--jobs", "2"],
        &[("ASSAY_MUTATE_HOT_SWAP", "0")],
    ));
    assert_eq!(fresh["status"], "Killed", "{fresh:#}");
    let reason = fresh["statusReason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("broke the test session: exit 4"),
        "{fresh:#}"
    );
    let forked = dropped_branch(&mutate(&repo, &["pager/settings.py", "--jobs", "2"]));
    assert_eq!(forked["status"], "Killed", "{forked:#}");
    assert_eq!(
        forked["killedBy"],
        serde_json::json!(["pager/settings.py"]),
        "{forked:#}"
    );
}

/// A project's conftest controls the durations the per-test coverage run records; an absurd
/// one (`1e20` seconds) must cost a mutant no more than the budget, not crash the run.
#[test]
fn a_conftest_reporting_absurd_durations_does_not_crash_mutate() {
    let repo = pager_library();
    repo.write(
        "conftest.py",
        "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    outcome = yield\n    outcome.get_result().duration = 1e20\n",
    );
    repo.commit("conftest: report absurd durations");
    let run = mutate(&repo, &["--jobs", "2"]);
    assert_ne!(run.code, 101, "assay mutate panicked: {}", run.explain());
    assert_eq!(run.code, 5, "{}", run.explain());
    let report = run.evidence.as_ref().expect("report written");
    assert!(
        report["files"]["pager/__init__.py"]["mutants"]
            .as_array()
            .is_some_and(|m| !m.is_empty()),
        "{report:#}"
    );
}

/// A mutant that loops forever (`i > 0` -> `i >= 0` in a halving countdown: 0 // 2 is 0) times
/// out under a limit sized from its own tests' baseline durations, far below the proof's 60 s
/// floor, and is not retried. Run in a fork of the collected session it pays no start-up, so
/// it is stopped at the tighter limit of its tests alone; in a fresh session (hot swap off), at
/// the limit that allows for start-up and collection too.
#[test]
fn a_hanging_mutant_times_out_at_a_limit_sized_from_its_tests_and_is_not_retried() {
    let repo = support::Repo::new();
    repo.write(
        "countdown/__init__.py",
        "def countdown(n):\n    i = n\n    while i > 0:\n        i = i // 2\n    return i\n",
    )
    .write(
        "tests/test_countdown.py",
        "from countdown import countdown\n\n\ndef test_it_stops_at_zero():\n    assert countdown(3) == 0\n",
    );
    repo.commit("countdown");
    let hang_of = |run: &Run| {
        let report = run.evidence.as_ref().expect("report written");
        report["files"]["countdown/__init__.py"]["mutants"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["description"] == "`>` -> `>=`"))
            .cloned()
            .unwrap_or_else(|| panic!("no bound swap on the loop: {report:#}"))
    };
    let seconds = |text: &str| -> u64 {
        text.parse()
            .unwrap_or_else(|_| panic!("not a number of seconds: {text}"))
    };

    let forked = mutate(&repo, &["--jobs", "2"]);
    let hang = hang_of(&forked);
    assert_eq!(hang["status"], "Timeout", "{hang:#}");
    let reason = hang["statusReason"].as_str().unwrap_or_default();
    let (fork_limit, fresh_limit) = reason
        .strip_prefix("ran past its ")
        .and_then(|rest| rest.split_once("s limit in a fork of the collected session ("))
        .and_then(|(fork, rest)| {
            Some((
                seconds(fork),
                seconds(rest.strip_suffix("s in a fresh one)")?),
            ))
        })
        .unwrap_or_else(|| panic!("one run in a fork, both limits named: {hang:#}"));
    assert!(fork_limit < fresh_limit && fresh_limit < 60, "{hang:#}");
    let ran_ms = hang["duration"].as_u64().expect("a duration");
    assert!(ran_ms < fresh_limit * 1000, "{hang:#}");
    // The progress line says so.
    assert!(
        forked
            .stderr
            .lines()
            .any(|l| l.contains("countdown/__init__.py:3 swap_bound")
                && l.contains(&format!(
                    "TIMEOUT, ran past its {fork_limit}s limit in a fork"
                ))),
        "{}",
        forked.explain()
    );

    let fresh = mutate_with_env(&repo, &["--jobs", "2"], &[("ASSAY_MUTATE_HOT_SWAP", "0")]);
    let hang = hang_of(&fresh);
    assert_eq!(hang["status"], "Timeout", "{hang:#}");
    let reason = hang["statusReason"].as_str().unwrap_or_default();
    let limit = reason
        .strip_prefix("ran past its ")
        .and_then(|rest| rest.strip_suffix("s limit"))
        .map(seconds)
        .unwrap_or_else(|| panic!("one fresh run, its limit named: {hang:#}"));
    assert!(limit < 60, "{hang:#}");
}

/// Progress for long runs: one line per mutant with its file:line and operator, the counts so
/// far and an ETA, over a denominator that stays the plan's size (confirmation runs add none).
#[test]
fn mutate_progress_names_each_mutant_over_a_stable_denominator() {
    let repo = pager_library();
    let run = mutate(&repo, &["--jobs", "2"]);
    let report = run.evidence.as_ref().expect("report written");
    let total = report["files"]["pager/__init__.py"]["mutants"]
        .as_array()
        .map_or(0, |m| m.len());
    let uncovered = report["assay"]["summary"]["no_coverage"]
        .as_u64()
        .unwrap_or(0) as usize;
    assert!(
        run.stderr.contains(&format!(
            "[mutate] {total} mutants: {} to run, {uncovered} no coverage",
            total - uncovered
        )),
        "{}",
        run.explain()
    );
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("[mutate] ") && l.contains('/'))
        .collect();
    assert_eq!(lines.len(), total - uncovered, "{}", run.explain());
    let mut last = 0;
    for line in &lines {
        let (done, rest) = line["[mutate] ".len()..]
            .split_once('/')
            .expect("done/total");
        let done: usize = done.parse().expect("a count");
        assert!(done > last, "{line}");
        last = done;
        assert!(
            rest.starts_with(&format!("{total} pager/__init__.py:")),
            "{line}"
        );
        assert!(
            [
                "negate_condition",
                "swap_bound",
                "drop_branch",
                "return_constant",
                "shift_bound"
            ]
            .iter()
            .any(|op| rest.contains(&format!(" {op} "))),
            "{line}"
        );
        assert!(
            rest.contains(" killed, ") && rest.contains(" survived"),
            "{line}"
        );
    }
    assert_eq!(last, total, "{}", run.explain());
    assert!(lines[0].contains("; ETA "), "{}", run.explain());
    // The coverage baseline writes a coverage map, not JUnit: no line calls it malformed.
    assert!(!run.stderr.contains("malformed"), "{}", run.explain());
}

/// The page count's `return None` mutant in a project whose `tests/test_labels.py` (LABELS)
/// indexes a list by the page count while it imports, beside `tests/test_pages.py` (PAGES):
/// the mutant keeps the labels module from importing. Checks the kill names that module and
/// has no flaky reason; returns the run.
fn kill_by_a_module_that_cannot_import(labels: &str, pages: &str) -> Run {
    let repo = support::Repo::new();
    repo.write(
        "pager/__init__.py",
        "def page_count(total, size):\n    pages = total // size\n    if total % size > 0:\n        pages += 1\n    return pages\n",
    )
    .write("tests/test_labels.py", labels)
    .write("tests/test_pages.py", pages);
    repo.commit("pager: labels");
    let run = mutate(&repo, &["--jobs", "2"]);
    let report = run.evidence.as_ref().expect("report written");
    let mutants = report["files"]["pager/__init__.py"]["mutants"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let none = mutants
        .iter()
        .find(|m| m["description"] == "`return pages` -> `return None`")
        .unwrap_or_else(|| panic!("no `return None` mutant: {report:#}"));
    assert_eq!(none["status"], "Killed", "{none:#}");
    assert_eq!(
        none["killedBy"],
        serde_json::json!(["tests/test_labels.py"]),
        "{none:#}"
    );
    assert!(none.get("statusReason").is_none(), "{none:#}");
    run
}

/// A mutant that makes a test module fail to import, with another module collected after it:
/// under `-x` pytest also fails its session's collection (a case with no name and no file).
/// The kill names the module that failed, nothing else (once it read `["tests/test_labels.py",
/// ".py"]`). Its session collected the module once more, which failed again: the kill is
/// confirmed in its own run, with no second run.
#[test]
fn a_collection_error_kill_names_the_module_that_failed_to_import() {
    let run = kill_by_a_module_that_cannot_import(
        "from pager import page_count\n\nLABELS = [\"none\", \"one\", \"two\", \"three\"]\nLABEL_OF_ELEVEN = LABELS[page_count(11, 5)]\n\n\ndef test_labels_follow_the_page_count():\n    assert LABELS[page_count(11, 5)] == LABEL_OF_ELEVEN == \"three\"\n",
        // The slower test runs last, so its module is collected after the one that fails. It
        // is weak (the mutant passes it): a test outside the labels module that failed would
        // kill the mutant in a fork of the collected session, with the labels module's items
        // held back, and name itself.
        "import time\n\nfrom pager import page_count\n\n\ndef test_full_pages():\n    time.sleep(0.3)\n    assert page_count(10, 5) != 3\n",
    );
    assert!(
        !run.stderr.contains("[mutate] confirming"),
        "{}",
        run.explain()
    );
}

/// The same mutant beside a test outside the labels module that catches it: the mutant runs in
/// a fork of the collected session with the labels module's items held back (they were
/// collected with the unmutated `page_count`), and that test kills it there and is named.
#[test]
fn a_function_the_collection_ran_is_killed_in_a_fork_by_a_test_of_another_module() {
    let repo = support::Repo::new();
    repo.write(
        "pager/__init__.py",
        "def page_count(total, size):\n    pages = total // size\n    if total % size > 0:\n        pages += 1\n    return pages\n",
    )
    .write(
        "tests/test_labels.py",
        "from pager import page_count\n\nLABELS = [\"none\", \"one\", \"two\", \"three\"]\nLABEL_OF_ELEVEN = LABELS[page_count(11, 5)]\n\n\ndef test_labels_follow_the_page_count():\n    assert LABEL_OF_ELEVEN == \"three\"\n",
    )
    .write(
        "tests/test_pages.py",
        "from pager import page_count\n\n\ndef test_full_pages():\n    assert page_count(10, 5) == 2\n",
    );
    repo.commit("pager: labels");
    let run = mutate(&repo, &["--jobs", "2"]);
    let report = run.evidence.as_ref().expect("report written");
    let none = report["files"]["pager/__init__.py"]["mutants"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["description"] == "`return pages` -> `return None`")
        .unwrap_or_else(|| panic!("no `return None` mutant: {report:#}"));
    assert_eq!(none["status"], "Killed", "{none:#}");
    // A fresh session would fail to collect the labels module and name it instead.
    assert_eq!(
        none["killedBy"],
        serde_json::json!(["tests/test_pages.py::test_full_pages"]),
        "{none:#}"
    );
}

/// A test module whose second import in the same process passes (it checks once per process)
/// says nothing of the kill: the mutant's own run cannot confirm it, a second run in a fresh
/// process does, and the progress says so after the last verdict rather than going quiet.
#[test]
fn a_module_whose_second_import_passes_has_its_kill_confirmed_by_a_second_run() {
    let run = kill_by_a_module_that_cannot_import(
        "import pager\nfrom pager import page_count\n\nLABELS = [\"none\", \"one\", \"two\", \"three\"]\nif not getattr(pager, \"labels_checked\", False):\n    pager.labels_checked = True\n    LABEL_OF_ELEVEN = LABELS[page_count(11, 5)]\n\n\ndef test_labels_follow_the_page_count():\n    assert LABELS[page_count(11, 5)] == \"three\"\n",
        "from pager import page_count\n\n\ndef test_full_pages():\n    assert page_count(10, 5) == 2\n",
    );
    let last_verdict = run.stderr.rfind("[mutate] 5/5 ").expect("a last verdict");
    let confirming = run
        .stderr
        .find("[mutate] confirming 1 kill by a second run")
        .unwrap_or_else(|| panic!("{}", run.explain()));
    assert!(last_verdict < confirming, "{}", run.explain());
}

/// Lines inside a multi-line statement that hold no code of their own (the items of a list
/// literal folded to one constant, a piece of an implicitly joined string) have no line of
/// their own in per-test coverage: their statement's line says which tests run them, never
/// "no coverage".
#[test]
fn a_site_on_a_continuation_line_is_covered_by_its_statements_tests() {
    let repo = support::Repo::new();
    repo.write(
        "pager/units.py",
        "UNITS = [\n    (\"page\", \"pages\"),\n    (\"sheet\", \"sheets\"),\n    (\"leaf\", \"leaves\"),\n]\n\n\ndef describe(count):\n    if count == 1:\n        return \"1 \" + UNITS[0][0]\n    raise ValueError(\n        \"describe() takes \"\n        \"exactly one page\"\n    )\n",
    )
    .write("pager/__init__.py", "")
    .write(
        "tests/test_units.py",
        "import pytest\n\nfrom pager.units import describe\n\n\ndef test_one_page():\n    assert describe(1) == \"1 page\"\n\n\ndef test_more_pages_are_refused():\n    with pytest.raises(ValueError, match=\"^describe\\\\(\\\\) takes exactly one page$\"):\n        describe(2)\n",
    );
    repo.commit("pager: units");
    let run = mutate(&repo, &["--jobs", "2", "--operators", "extended"]);
    let report = run.evidence.as_ref().expect("report written");
    let mutants = report["files"]["pager/units.py"]["mutants"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        mutants.iter().all(|m| m["status"] != "NoCoverage"),
        "{report:#}"
    );
    let by_description = |description: &str| {
        mutants
            .iter()
            .find(|m| m["description"] == description)
            .unwrap_or_else(|| panic!("no mutant {description}: {report:#}"))
    };
    let joined = by_description("`\"exactly one page\"` -> `\"XXexactly one pageXX\"`");
    assert_eq!(joined["status"], "Killed", "{joined:#}");
    assert_eq!(
        joined["coveredBy"],
        serde_json::json!(["tests/test_units.py::test_more_pages_are_refused"]),
        "{joined:#}"
    );
    // Run at import only: every test may observe it, and none reads the sheets.
    let sheet = by_description("`\"sheet\"` -> `\"XXsheetXX\"`");
    assert_eq!(sheet["status"], "Survived", "{sheet:#}");
    assert_eq!(sheet["static"], true, "{sheet:#}");
}

/// The baseline runs the very command the mutants run: a test command that is no test runner
/// at all leaves no report of passing tests, so nothing is scored. (The per-test coverage map
/// was made by `python3 -m pytest` whatever the command said, the baseline passed, and every
/// mutant's failure to start was a kill: "5 killed, mutation score 100.0%", exit 0.)
#[test]
fn a_test_command_that_runs_no_tests_stops_mutate_with_exit_3_and_scores_nothing() {
    let repo = pager_library();
    let run = mutate(
        &repo,
        &["--test-command", "python3 -m no_such_test_runner", "-q"],
    );
    assert_eq!(run.code, 3, "{}", run.explain());
    assert!(
        run.stderr
            .contains("the unmutated baseline run did not pass"),
        "{}",
        run.explain()
    );
    assert!(!run.stderr.contains("red suite"), "{}", run.explain());
    assert!(!run.stdout.contains("mutation score"), "{}", run.explain());
    assert!(
        run.evidence.is_none(),
        "no report is written: {}",
        run.explain()
    );
}

/// A test command's own interpreter makes the coverage map, with the command's own options.
#[test]
fn the_per_test_map_is_made_by_the_test_commands_own_interpreter() {
    let repo = pager_library();
    let venv = tempfile::tempdir().expect("temp dir");
    let python = venv.path().join("bin/python");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--system-site-packages"])
        .arg(venv.path())
        .status()
        .expect("python3 runs");
    assert!(made.success());
    let command = format!("{} -m pytest -p no:cacheprovider", python.display());
    let run = mutate(&repo, &["--test-command", &command, "-q"]);
    let report = run.evidence.as_ref().expect("a report");
    assert_eq!(report["assay"]["perLineSelection"], true, "{report:#}");
    assert!(
        report["assay"]["summary"]["killed"].as_u64().unwrap_or(0) > 0,
        "{}",
        run.explain()
    );
}

fn mutated_lines(run: &Run) -> Vec<u64> {
    let report = run.evidence.as_ref().expect("a report");
    let mut lines: Vec<u64> = report["files"]
        .as_object()
        .expect("files")
        .values()
        .flat_map(|file| file["mutants"].as_array().cloned().unwrap_or_default())
        .map(|m| m["location"]["start"]["line"].as_u64().expect("a line"))
        .collect();
    lines.sort_unstable();
    lines.dedup();
    lines
}

#[test]
fn a_line_range_mutates_only_those_lines_of_the_file() {
    let repo = pager_library();
    // Lines 8-11 are `clamp`.
    let run = mutate(&repo, &["pager/__init__.py:8-11", "-q"]);
    let lines = mutated_lines(&run);
    assert!(!lines.is_empty(), "{}", run.explain());
    assert!(
        lines.iter().all(|line| (8..=11).contains(line)),
        "{lines:?}"
    );
    let refused = mutate(&repo, &["pager/__init__.py:11-8", "-q"]);
    assert_eq!(refused.code, 2, "{}", refused.explain());
    assert!(refused.stderr.contains("hint:"), "{}", refused.explain());
}

#[test]
fn since_mutates_only_the_lines_changed_since_the_revision_and_nothing_changed_is_exit_0() {
    let repo = pager_library();
    let source = std::fs::read_to_string(repo.path().join("pager/__init__.py")).unwrap();
    repo.write(
        "pager/__init__.py",
        &source.replace("    if page > last:\n", "    if page >= last:\n"),
    );
    repo.commit("pager: clamp at the last page");
    let run = mutate(&repo, &["--since", "HEAD~1", "-q"]);
    assert_eq!(mutated_lines(&run), vec![9], "{}", run.explain());
    repo.write(
        "tests/test_more.py",
        "def test_nothing_new():\n    assert True\n",
    );
    repo.commit("tests: one more");
    let quiet = mutate(&repo, &["--since", "HEAD~1", "-q"]);
    assert_eq!(quiet.code, 0, "{}", quiet.explain());
    assert!(
        quiet.stdout.contains("no changed line"),
        "{}",
        quiet.explain()
    );
    let unknown = mutate(&repo, &["--since", "no-such-branch", "-q"]);
    assert_eq!(unknown.code, 2, "{}", unknown.explain());
    assert!(
        unknown.stderr.contains("--since no-such-branch"),
        "{}",
        unknown.explain()
    );
}

#[test]
fn fail_under_fails_the_run_only_below_the_score() {
    // `clamp` has no test: its mutants are uncovered, the score is below 100.
    let repo = pager_library();
    let strict = mutate(&repo, &["-q"]);
    assert_eq!(strict.code, 5, "{}", strict.explain());
    let lenient = mutate(&repo, &["--fail-under", "10", "-q"]);
    assert_eq!(lenient.code, 0, "{}", lenient.explain());
    assert!(
        lenient.stdout.contains("--fail-under 10%: the score")
            && lenient.stdout.contains("is not below it"),
        "the summary says what the threshold decided: {}",
        lenient.explain()
    );
    let demanding = mutate(&repo, &["--fail-under", "100", "-q"]);
    assert_eq!(demanding.code, 5, "{}", demanding.explain());
    assert!(
        demanding
            .stdout
            .contains("is below it: the survivors fail the run (exit 5)"),
        "{}",
        demanding.explain()
    );
    let nonsense = mutate(&repo, &["--fail-under", "150", "-q"]);
    assert_eq!(nonsense.code, 2, "{}", nonsense.explain());
}
