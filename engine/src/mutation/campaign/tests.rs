use super::dispatch::*;
use super::progress::*;
use super::*;

fn record(status: Status, reason: Option<&str>) -> MutantResult {
    let source = "def is_past_end(page, last):\n    return page > last\n";
    let plan = mutants::plan_mutants(
        &[ChangedFile {
            path: "pager/clamp.py".into(),
            bytes: source.as_bytes().to_vec(),
            changed_lines: [1, 2].into(),
        }],
        Some(1),
    );
    MutantResult {
        mutant: plan.mutants[0].clone(),
        verdict: Verdict {
            duration_s: Some(60.0),
            ..Verdict::of(status, reason.map(str::to_owned))
        },
        covered_by: vec!["tests/test_clamp.py::test_the_last_page".into()],
        flaky: false,
        cached: None,
    }
}

fn second(status: Status, killed_by: &[&str]) -> Judged {
    Judged {
        verdict: Verdict {
            status,
            status_reason: None,
            killed_by: killed_by.iter().map(|s| s.to_string()).collect(),
            tests_completed: Some(1),
            duration_s: Some(0.4),
        },
        confirmed: None,
    }
}

#[test]
fn the_eta_follows_the_rate_of_the_latest_verdicts() {
    let slot = record(Status::Killed, None);
    let killed = second(Status::Killed, &[]);
    let total = RATE_WINDOW * 4;
    let mut tally = Tally::default();
    let at = |tally: &mut Tally, elapsed: Duration| {
        tally
            .record(&killed, &slot.mutant, total, total, elapsed)
            .eta
    };
    // A slow start: one verdict a second.
    for n in 1..=RATE_WINDOW {
        let eta = at(&mut tally, Duration::from_secs(n as u64));
        if n == 1 {
            let left = (total - 1) as u64;
            assert_eq!(eta, Some(Duration::from_secs(left)));
        }
    }
    // Then ten a second: once the window holds only those, the ETA is at that rate.
    let start = Duration::from_secs(RATE_WINDOW as u64);
    let mut eta = None;
    for n in 1..=RATE_WINDOW + 1 {
        eta = at(&mut tally, start + Duration::from_millis(100 * n as u64));
    }
    let left = total - 2 * RATE_WINDOW - 1;
    let expected = Duration::from_millis(100 * left as u64);
    let eta = eta.expect("an ETA");
    assert!(
        eta.abs_diff(expected) < Duration::from_millis(5),
        "{eta:?} against {expected:?}"
    );
}

#[test]
fn a_timeout_is_final_and_only_an_unconfirmed_kill_runs_again() {
    assert!(!needs_second_run(Status::Timeout, None));
    assert!(needs_second_run(Status::Killed, None));
    assert!(!needs_second_run(Status::Killed, Some(true)));
    assert!(!needs_second_run(Status::Killed, Some(false)));
    assert!(!needs_second_run(Status::Survived, None));
}

#[test]
fn a_kill_is_confirmed_by_the_killing_tests_alone() {
    let covered: Vec<String> = [
        "tests/test_pager.py::test_full_pages",
        "tests/test_pager.py::PageTests::test_partial_last_page_is_counted",
        "tests/test_pager.py::test_bounds[11-5]",
    ]
    .map(String::from)
    .to_vec();
    let killers = |names: &[&str]| {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        killing_node_ids(&covered, &names)
    };
    assert_eq!(
        killers(&[
            "tests/test_pager.py::test_bounds[11-5]",
            "tests/test_pager.py::PageTests::test_partial_last_page_is_counted"
        ]),
        [
            "tests/test_pager.py::PageTests::test_partial_last_page_is_counted",
            "tests/test_pager.py::test_bounds[11-5]"
        ]
    );
    assert!(
        killers(&[
            "tests/test_pager.py::test_full_pages",
            "tests/test_pager.py"
        ])
        .is_empty()
    );
    assert!(killers(&[]).is_empty());
}

#[test]
fn a_kill_the_second_run_does_not_repeat_is_flaky() {
    let mut slot = record(Status::Killed, None);
    settle(&mut slot, &second(Status::Survived, &[]));
    assert_eq!(slot.verdict.status, Status::Killed);
    assert!(slot.flaky);
    let mut slot = record(Status::Killed, None);
    settle(&mut slot, &second(Status::Killed, &["test_the_last_page"]));
    assert!(!slot.flaky && slot.verdict.status_reason.is_none());
}

#[test]
fn a_mutant_that_does_not_compile_is_outside_the_score_and_the_exit_code() {
    let results = [Status::Killed, Status::Timeout, Status::CompileError]
        .into_iter()
        .map(|status| record(status, None))
        .collect();
    let report = MutateReport {
        tree: "41e7".into(),
        per_line_selection: false,
        selection_note: None,
        files: BTreeMap::new(),
        results,
        plan: MutationPlan::default(),
        elapsed_s: 30.0,
        phases: Phases::default(),
        cache: None,
        schemata: None,
    };
    let summary = report.summary();
    assert_eq!((summary.compile_error, summary.mutants), (1, 3));
    assert_eq!(summary.mutation_score, Some(1.0));
    assert_eq!(report.exit_code(), 0);
}

#[test]
fn a_budget_cut_run_scores_what_ran_with_a_wilson_interval() {
    let statuses = [
        (Status::Killed, 8),
        (Status::Survived, 2),
        (Status::Pending, 5),
    ];
    let results: Vec<MutantResult> = statuses
        .iter()
        .flat_map(|(status, n)| std::iter::repeat_n(*status, *n))
        .map(|status| record(status, None))
        .collect();
    let report = MutateReport {
        tree: "41e7".into(),
        per_line_selection: true,
        selection_note: None,
        files: BTreeMap::new(),
        results,
        plan: MutationPlan::default(),
        elapsed_s: 30.0,
        phases: Phases::default(),
        cache: None,
        schemata: None,
    };
    let summary = report.summary();
    assert_eq!((summary.mutants, summary.pending), (15, 5));
    assert_eq!(summary.mutation_score, Some(0.8));
    let (low, high) = summary.confidence_interval.unwrap();
    assert!(
        (low - 0.4902).abs() < 1e-3 && (high - 0.9433).abs() < 1e-3,
        "{low} {high}"
    );
    // Only the ten with a verdict count towards the rate.
    assert_eq!(summary.mutants_per_minute, 20.0);
    assert_eq!(report.exit_code(), EXIT_SURVIVORS);
}

#[test]
fn only_a_baseline_whose_tests_failed_is_told_to_fix_its_red_suite() {
    use crate::mutation::check::BaselineProblem;
    let hint = "a mutation score means nothing against a red suite";
    let red = MutateError::RedBaseline {
        reason: BaselineProblem::TestsFailed("tests/test_stock.py::test_empty failed".into()),
    }
    .to_string();
    assert!(
        red.starts_with("the unmutated baseline run did not pass: tests/test_stock.py::test_empty failed; no mutant was run")
            && red.contains(hint),
        "{red}"
    );
    for reason in [
        BaselineProblem::RanNoTest,
        BaselineProblem::NoReport {
            exit_code: 127,
            problem: "the command wrote no report".into(),
        },
        BaselineProblem::NotPassed("cut short by the mutation budget after 60s".into()),
    ] {
        let text = MutateError::RedBaseline { reason }.to_string();
        assert!(!text.contains(hint), "{text}");
    }
    let unrun = MutateError::BaselineUnrun {
        reason: "job m-1/0001: tree 7f95 is not in the store s3://fleet (hint: check both use the same store)".into(),
    }
    .to_string();
    assert!(
        unrun.starts_with(
            "infrastructure failure: the unmutated baseline run could not be run: job m-1/0001"
        ) && unrun.ends_with("same store); no mutant was run"),
        "{unrun}"
    );
}
