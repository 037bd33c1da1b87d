//! One test per verdict rule, over hand-built observations.

use super::*;
use crate::criteria::parse_criterion;
use crate::ids::{JobId, WorkerId};
use crate::outcome::{CollectionError, ReportOutcome};

fn case(file: &str, name: &str, variant: Option<&str>, outcome: Outcome) -> CaseResult {
    CaseResult {
        file: file.into(),
        suite: file.trim_end_matches(".py").replace('/', "."),
        name: name.into(),
        variant: variant.map(String::from),
        outcome,
        message: None,
    }
}

fn result(index: u32, status: JobStatus, report: ReportOutcome) -> JobResult {
    JobResult {
        job_id: JobId(format!("p/{index}")),
        index,
        status,
        report,
        artifacts: vec![],
        duration_ms: 10,
        worker: WorkerId("w".into()),
        sandbox: None,
    }
}

fn ran(index: u32, cases: Vec<CaseResult>) -> JobResult {
    result(
        index,
        JobStatus::Completed { exit_code: 1 },
        ReportOutcome::Parsed(TestReport {
            cases,
            collection_errors: vec![],
            collection_reruns: Vec::new(),
        }),
    )
}

/// The jobs a proof ran: what each was, on which side, and its result.
type Jobs = Vec<(JobKind, Side, JobResult)>;

fn observations(jobs: &[(JobKind, Side, JobResult)]) -> Vec<Observation<'_>> {
    jobs.iter()
        .map(|(kind, side, result)| Observation {
            kind: *kind,
            side: *side,
            result,
        })
        .collect()
}

fn verdict_of(criterion: &str, jobs: &[(JobKind, Side, JobResult)]) -> CriterionVerdict {
    let criterion = parse_criterion(criterion, 1).unwrap();
    decide(&[criterion], &observations(jobs)).remove(0)
}

const FILE: &str = "tests/test_pager.py";
const T: &str = "test_partial_page";

/// `name` of [`FILE`], reported once with `outcome`.
fn only(name: &str, outcome: Outcome) -> Vec<CaseResult> {
    vec![case(FILE, name, None, outcome)]
}

/// A `kind` job on the base (job 0) and one on the candidate (job 1), each reporting its cases.
fn on_both_sides(kind: JobKind, base: Vec<CaseResult>, candidate: Vec<CaseResult>) -> Jobs {
    vec![
        (kind, Side::Base, ran(0, base)),
        (kind, Side::Candidate, ran(1, candidate)),
    ]
}

fn targeted(base: Outcome, candidate: Outcome) -> Jobs {
    on_both_sides(JobKind::Targeted, only(T, base), only(T, candidate))
}

/// A targeted base job that ended as `base`, and [`T`] passing on the candidate.
fn targeted_after_base(base: JobResult) -> Jobs {
    vec![
        (JobKind::Targeted, Side::Base, base),
        (
            JobKind::Targeted,
            Side::Candidate,
            ran(1, only(T, Outcome::Passed)),
        ),
    ]
}

/// The suite passing `test_full_pages` on the base, and a candidate suite job that ended as
/// `candidate`.
fn suite_before_candidate(candidate: JobResult) -> Jobs {
    vec![
        (
            JobKind::Suite,
            Side::Base,
            ran(0, only("test_full_pages", Outcome::Passed)),
        ),
        (JobKind::Suite, Side::Candidate, candidate),
    ]
}

#[test]
fn test_is_proven_when_it_fails_on_base_and_passes_with_the_change() {
    let v = verdict_of(
        "test: test_partial_page",
        &targeted(Outcome::Failed, Outcome::Passed),
    );
    assert_eq!(v.verdict, Verdict::Proven, "{}", v.reason);
    assert_eq!(v.base.outcome, SideOutcome::Failed);
}

#[test]
fn test_that_passes_on_base_does_not_reproduce() {
    let v = verdict_of(
        "test: test_partial_page",
        &targeted(Outcome::Passed, Outcome::Passed),
    );
    assert_eq!(v.verdict, Verdict::Refuted);
    assert!(v.reason.contains("does not reproduce"), "{}", v.reason);
}

#[test]
fn setup_or_fixture_error_on_base_is_missing_evidence_not_a_refutation() {
    let v = verdict_of(
        "test: test_partial_page",
        &targeted(Outcome::Error, Outcome::Passed),
    );
    assert_eq!(v.verdict, Verdict::Unverified, "{}", v.reason);
    assert!(v.reason.contains("not reproduced"), "{}", v.reason);
    // The report says "error", nothing more: the reason must not guess where it happened.
    assert!(!v.reason.contains("in setup or a fixture"), "{}", v.reason);
}

#[test]
fn import_error_on_base_is_missing_evidence_not_a_refutation() {
    let base = result(
        0,
        JobStatus::Completed { exit_code: 1 },
        ReportOutcome::Parsed(TestReport {
            cases: vec![],
            collection_errors: vec![CollectionError {
                file: FILE.into(),
                message: "ImportError".into(),
            }],
            collection_reruns: Vec::new(),
        }),
    );
    let v = verdict_of("test: test_partial_page", &targeted_after_base(base));
    assert_eq!(v.verdict, Verdict::Unverified, "{}", v.reason);
    assert!(matches!(v.base.outcome, SideOutcome::CollectionError(ref f) if f == FILE));
    // What the report says of the error is named with it: a compiler's first error, here.
    assert_eq!(v.base.error.as_deref(), Some("ImportError"));
    assert!(
        v.reason.contains("build there (ImportError)"),
        "{}",
        v.reason
    );
    assert!(
        v.reason.contains("names the base already has"),
        "{}",
        v.reason
    );
}

#[test]
fn a_run_cut_short_by_its_jobs_timeout_is_timed_out_where_its_repeats_reported_the_test() {
    // The base's first job hung on another test and timed out before reporting T; its two
    // repeats report T failing.
    let mut jobs = targeted_after_base(result(0, JobStatus::TimedOut, ReportOutcome::Missing));
    for index in [2, 3] {
        jobs.push((
            JobKind::Stability,
            Side::Base,
            ran(index, only(T, Outcome::Failed)),
        ));
    }
    let v = verdict_of(&format!("test: {T}"), &jobs);
    assert_eq!(v.verdict, Verdict::Unverified, "{}", v.reason);
    assert_eq!(v.reason_code, Some(ReasonCode::TimedOut), "{}", v.reason);
    assert!(
        v.reason.contains("timed out before reporting every test"),
        "{}",
        v.reason
    );
    // A repeat that timed out is named the same way.
    let mut jobs = targeted_after_base(ran(0, only(T, Outcome::Failed)));
    jobs.push((
        JobKind::Stability,
        Side::Base,
        result(2, JobStatus::TimedOut, ReportOutcome::Missing),
    ));
    let v = verdict_of(&format!("test: {T}"), &jobs);
    assert_eq!(v.reason_code, Some(ReasonCode::TimedOut), "{}", v.reason);
}

#[test]
fn a_stability_run_that_does_not_report_the_test_leaves_it_unverified() {
    let guard = "test_full_pages";
    let mut jobs = on_both_sides(
        JobKind::Suite,
        only(guard, Outcome::Passed),
        only(guard, Outcome::Passed),
    );
    for index in [2, 3] {
        jobs.push((
            JobKind::Stability,
            Side::Candidate,
            ran(index, only("test_other", Outcome::Passed)),
        ));
    }
    let v = verdict_of(&format!("guard: {guard}"), &jobs);
    assert_eq!(v.verdict, Verdict::Unverified, "{}", v.reason);
    assert!(
        v.reason.contains("job 2 reports it not_found"),
        "{}",
        v.reason
    );
    let labels: Vec<&str> = v.candidate.runs.iter().map(|r| r.outcome.label()).collect();
    assert_eq!(labels, ["passed", "not_found", "not_found"]);
}

#[test]
fn test_failing_with_the_change_is_refuted() {
    let v = verdict_of(
        "test: test_partial_page",
        &targeted(Outcome::Failed, Outcome::Failed),
    );
    assert_eq!(v.verdict, Verdict::Refuted);
}

#[test]
fn skipped_and_expected_failures_are_never_passes() {
    let v = verdict_of(
        "test: test_partial_page",
        &targeted(Outcome::Failed, Outcome::Skipped),
    );
    assert_eq!(v.verdict, Verdict::Unverified);
    assert!(v.reason.contains("skip"), "{}", v.reason);
}

#[test]
fn duplicate_identities_are_never_passes() {
    let jobs = on_both_sides(
        JobKind::Targeted,
        only(T, Outcome::Failed),
        vec![
            case(FILE, T, None, Outcome::Passed),
            case(FILE, T, None, Outcome::Passed),
        ],
    );
    let v = verdict_of("test: test_partial_page", &jobs);
    assert_eq!(v.verdict, Verdict::Unverified);
    assert!(v.reason.contains("more than once"), "{}", v.reason);
}

#[test]
fn guard_breaks_when_one_parametrized_variant_fails_even_if_it_failed_before() {
    let variants = |second: Outcome| {
        vec![
            case(FILE, "test_full_pages", Some("10-2"), Outcome::Passed),
            case(FILE, "test_full_pages", Some("0-0"), second),
        ]
    };
    let jobs = on_both_sides(
        JobKind::Suite,
        variants(Outcome::Failed),
        variants(Outcome::Failed),
    );
    let v = verdict_of("guard: test_full_pages", &jobs);
    assert_eq!(v.verdict, Verdict::Refuted);
    assert!(v.reason.contains("test_full_pages[0-0]"), "{}", v.reason);
}

#[test]
fn guard_breaks_when_a_subtest_or_other_class_variant_fails() {
    let mut other_class = case(FILE, "test_full_pages", None, Outcome::Failed);
    other_class.suite = "tests.test_pager.LegacyPager".into();
    let jobs = on_both_sides(
        JobKind::Suite,
        only("test_full_pages", Outcome::Passed),
        vec![
            case(FILE, "test_full_pages", None, Outcome::Passed),
            other_class,
        ],
    );
    assert_eq!(
        verdict_of("guard: test_full_pages", &jobs).verdict,
        Verdict::Refuted
    );
}

#[test]
fn a_name_in_two_files_is_ambiguous_and_names_both() {
    let both = |outcome| {
        vec![
            case("tests/test_pager.py", "test_counts", None, outcome),
            case("tests/test_report.py", "test_counts", None, outcome),
        ]
    };
    let jobs = on_both_sides(JobKind::Suite, both(Outcome::Passed), both(Outcome::Passed));
    let v = verdict_of("guard: test_counts", &jobs);
    assert_eq!(v.verdict, Verdict::Unverified);
    assert!(
        v.reason
            .contains("tests/test_pager.py and tests/test_report.py"),
        "{}",
        v.reason
    );
}

#[test]
fn timed_out_suite_leaves_a_guard_unverified_not_refuted() {
    let jobs = suite_before_candidate(result(1, JobStatus::TimedOut, ReportOutcome::Missing));
    let v = verdict_of("guard: test_full_pages", &jobs);
    assert_eq!(v.verdict, Verdict::Unverified);
    assert!(v.reason.contains("timed out"), "{}", v.reason);
}

#[test]
fn partial_or_inconsistent_suite_report_leaves_a_guard_unverified() {
    let jobs = suite_before_candidate(result(
        1,
        JobStatus::Completed { exit_code: 0 },
        ReportOutcome::Inconsistent("suite declares 9 tests but lists 4".into()),
    ));
    assert_eq!(
        verdict_of("guard: test_full_pages", &jobs).verdict,
        Verdict::Unverified
    );
}

#[test]
fn repeats_that_disagree_make_the_test_unstable() {
    let mut jobs = targeted(Outcome::Failed, Outcome::Passed);
    jobs.push((
        JobKind::Stability,
        Side::Candidate,
        ran(2, only(T, Outcome::Passed)),
    ));
    jobs.push((
        JobKind::Stability,
        Side::Candidate,
        ran(3, only(T, Outcome::Failed)),
    ));
    let v = verdict_of("test: test_partial_page", &jobs);
    assert_eq!(v.verdict, Verdict::Unstable);
    assert_eq!(v.candidate.runs.len(), 3);
    assert!(
        v.reason.contains("passed in job 1, failed in job 3"),
        "{}",
        v.reason
    );
}

#[test]
fn guards_repeat_on_the_candidate_only() {
    let mut jobs = on_both_sides(
        JobKind::Suite,
        only("test_full_pages", Outcome::Passed),
        only("test_full_pages", Outcome::Passed),
    );
    jobs.push((
        JobKind::Stability,
        Side::Base,
        ran(2, only("test_full_pages", Outcome::Failed)),
    ));
    let v = verdict_of("guard: test_full_pages", &jobs);
    assert_eq!(v.verdict, Verdict::Proven, "{}", v.reason);
    assert_eq!(v.base.runs.len(), 1);
}

#[test]
fn criterion_id_fallback_matches_the_id_named_test() {
    let jobs = on_both_sides(
        JobKind::Targeted,
        only("test_c1_partial_page", Outcome::Failed),
        only("test_c1_partial_page", Outcome::Passed),
    );
    let v = verdict_of("C1: test: the last partial page is counted", &jobs);
    assert_eq!(v.verdict, Verdict::Proven, "{}", v.reason);
    assert_eq!(v.test, "test_c1_");
}

#[test]
fn a_missing_test_is_unverified() {
    let jobs = on_both_sides(
        JobKind::Targeted,
        only("test_other", Outcome::Failed),
        only("test_other", Outcome::Passed),
    );
    let v = verdict_of("test: test_partial_page", &jobs);
    assert_eq!(v.verdict, Verdict::Unverified);
    assert_eq!(v.candidate.outcome, SideOutcome::NotFound);
}

#[test]
fn proof_verdict_needs_every_criterion_proven() {
    let mk = |verdict| CriterionVerdict {
        id: "C1".into(),
        kind: CriterionKind::Test,
        test: "t".into(),
        verdict,
        reason: String::new(),
        reason_code: None,
        suggestions: Vec::new(),
        base: SideEvidence {
            outcome: SideOutcome::NotFound,
            cases: vec![],
            runs: vec![],
            error: None,
        },
        candidate: SideEvidence {
            outcome: SideOutcome::NotFound,
            cases: vec![],
            runs: vec![],
            error: None,
        },
    };
    assert_eq!(
        proof_verdict(&[mk(Verdict::Proven), mk(Verdict::Proven)]),
        Verdict::Proven
    );
    assert_eq!(
        proof_verdict(&[mk(Verdict::Proven), mk(Verdict::Unstable)]),
        Verdict::Unverified
    );
    assert_eq!(
        proof_verdict(&[mk(Verdict::Unverified), mk(Verdict::Refuted)]),
        Verdict::Refuted
    );
    assert_eq!(proof_verdict(&[]), Verdict::Unverified);
}

#[test]
fn a_non_zero_exit_with_no_failing_case_is_not_a_reproduced_failure() {
    // The base run exits 1 (the build tool failed after the tests) but its report says the
    // test passed: the exit code never stands in for a failing case.
    let jobs = targeted(Outcome::Passed, Outcome::Passed);
    assert!(matches!(
        jobs[0].2.status,
        JobStatus::Completed { exit_code: 1 }
    ));
    let verdict = verdict_of(&format!("test: {T}"), &jobs);
    assert_eq!(verdict.verdict, Verdict::Refuted);
    assert_eq!(verdict.base.outcome, SideOutcome::Passed);
}

#[test]
fn a_failing_go_subtest_breaks_a_guard_on_its_function_but_not_on_a_sibling() {
    let package = "example.com/pager/cache";
    let go = |outcome_of_limit: Outcome| {
        vec![
            case(package, "TestCacheExpiry", None, Outcome::Failed),
            case(package, "TestCacheExpiry/expired", None, Outcome::Passed),
            case(
                package,
                "TestCacheExpiry/at_the_limit",
                None,
                outcome_of_limit,
            ),
        ]
    };
    let jobs = on_both_sides(JobKind::Suite, go(Outcome::Failed), go(Outcome::Failed));
    let function = verdict_of("guard: TestCacheExpiry", &jobs);
    assert_eq!(function.verdict, Verdict::Refuted, "{}", function.reason);
    let sibling = verdict_of("guard: TestCacheExpiry/expired", &jobs);
    assert_eq!(sibling.verdict, Verdict::Proven, "{}", sibling.reason);
}

#[test]
fn a_file_that_spawns_a_runner_refuses_the_tests_reported_in_it_and_no_others() {
    let delegating = RefusedFile {
        path: crate::tree_path::TreePath::new("test/delegates.test.js").unwrap(),
        spawns: "npx vitest".into(),
        // Spells the other file's test name as an argument to the runner it spawns.
        source: "execFileSync('npx', ['vitest', 'run', '-t', 'test_partial_page'])".into(),
    };
    let in_file = |file: &str| {
        on_both_sides(
            JobKind::Suite,
            vec![case(file, T, None, Outcome::Failed)],
            vec![case(file, T, None, Outcome::Passed)],
        )
    };
    let mut elsewhere = vec![verdict_of("test: test_partial_page", &in_file(FILE))];
    refuse_spawning_files(&mut elsewhere, std::slice::from_ref(&delegating));
    assert_eq!(
        elsewhere[0].verdict,
        Verdict::Proven,
        "{}",
        elsewhere[0].reason
    );

    let mut inside = vec![verdict_of(
        "test: test_partial_page",
        &in_file("test/delegates.test.js"),
    )];
    refuse_spawning_files(&mut inside, std::slice::from_ref(&delegating));
    assert_eq!(inside[0].verdict, Verdict::Unverified);
    assert!(
        inside[0].reason.contains("test/delegates.test.js"),
        "{}",
        inside[0].reason
    );

    // No report lists the test: the file's literal is all there is to go on.
    let mut unlisted = vec![verdict_of(
        "test: test_partial_page",
        &in_file_without_cases(),
    )];
    refuse_spawning_files(&mut unlisted, &[delegating]);
    assert_eq!(unlisted[0].verdict, Verdict::Unverified);
    assert!(
        unlisted[0].reason.contains("npx vitest"),
        "{}",
        unlisted[0].reason
    );
}

fn in_file_without_cases() -> Jobs {
    on_both_sides(
        JobKind::Suite,
        only("test_other", Outcome::Passed),
        only("test_other", Outcome::Passed),
    )
}

#[test]
fn each_verdict_carries_the_stable_code_of_its_reason() {
    let code = |base, candidate| {
        verdict_of("test: test_partial_page", &targeted(base, candidate)).reason_code
    };
    assert_eq!(
        code(Outcome::Failed, Outcome::Passed),
        Some(ReasonCode::Reproduced)
    );
    assert_eq!(
        code(Outcome::Passed, Outcome::Passed),
        Some(ReasonCode::PassesOnBase)
    );
    assert_eq!(
        code(Outcome::Failed, Outcome::Failed),
        Some(ReasonCode::FailsWithChange)
    );
    assert_eq!(
        code(Outcome::Error, Outcome::Passed),
        Some(ReasonCode::ErroredOnBase)
    );
    assert_eq!(
        code(Outcome::Failed, Outcome::Skipped),
        Some(ReasonCode::Skipped)
    );
    let guard = verdict_of(
        "guard: test_partial_page",
        &targeted(Outcome::Passed, Outcome::Passed),
    );
    assert_eq!(guard.reason_code, Some(ReasonCode::PassedOnBoth));
    let timed_out = targeted_after_base(result(0, JobStatus::TimedOut, ReportOutcome::Missing));
    let v = verdict_of("test: test_partial_page", &timed_out);
    assert_eq!(v.reason_code, Some(ReasonCode::TimedOut), "{}", v.reason);
    let unreported = targeted_after_base(result(
        0,
        JobStatus::Completed { exit_code: 2 },
        ReportOutcome::Missing,
    ));
    let v = verdict_of("test: test_partial_page", &unreported);
    assert_eq!(v.reason_code, Some(ReasonCode::NoReport), "{}", v.reason);
    let json = serde_json::to_value(&v).expect("serializes");
    assert_eq!(json["reason_code"], "no_report");
}

#[test]
fn a_name_that_did_not_run_is_answered_with_the_closest_names_that_did() {
    let jobs = |declared_side_names: &[&str]| -> Jobs {
        let cases = || {
            declared_side_names
                .iter()
                .map(|name| case(FILE, name, None, Outcome::Passed))
                .collect()
        };
        on_both_sides(JobKind::Targeted, cases(), cases())
    };
    let v = verdict_of(
        "guard: full_pages",
        &jobs(&["tests::full_pages", "tests::partial_page", "ledger::totals"]),
    );
    assert_eq!(v.reason_code, Some(ReasonCode::NotFound), "{}", v.reason);
    assert_eq!(v.suggestions, ["tests::full_pages"]);

    let v = verdict_of(
        "test: test_5_normalise_path",
        &jobs(&[
            "test_5_normalize_path",
            "test_6_normalize_path_with_dots",
            "test_match_file",
        ]),
    );
    assert_eq!(v.suggestions, ["test_5_normalize_path"]);

    let v = verdict_of(
        "test: partial_last_page_is_counted",
        &jobs(&["partial last page is counted", "full pages are counted"]),
    );
    assert_eq!(v.suggestions, ["partial last page is counted"]);

    let v = verdict_of("guard: full_pages", &jobs(&["test_full_pages"]));
    assert_eq!(v.suggestions, ["test_full_pages"]);

    let v = verdict_of("test: test_export_invoice", &jobs(&["test_full_pages"]));
    assert!(v.suggestions.is_empty(), "{:?}", v.suggestions);
}

#[test]
fn under_the_test_only_exception_a_test_is_judged_on_the_candidate_alone() {
    let criterion = parse_criterion("test: test_partial_page", 1).unwrap();
    let judged = |jobs: &[(JobKind, Side, JobResult)]| {
        decide_as(std::slice::from_ref(&criterion), &observations(jobs), true).remove(0)
    };
    let passing_everywhere = targeted(Outcome::Passed, Outcome::Passed);
    let v = judged(&passing_everywhere);
    assert_eq!(v.verdict, Verdict::Proven, "{}", v.reason);
    assert_eq!(v.reason_code, Some(ReasonCode::PassedTestOnly));
    // Without the exception the same runs do not reproduce a bug.
    let plain = verdict_of("test: test_partial_page", &passing_everywhere);
    assert_eq!(plain.reason_code, Some(ReasonCode::PassesOnBase));

    let v = judged(&targeted(Outcome::Passed, Outcome::Failed));
    assert_eq!(v.verdict, Verdict::Refuted, "{}", v.reason);
    let mut flaky = targeted(Outcome::Passed, Outcome::Passed);
    flaky.push((
        JobKind::Stability,
        Side::Candidate,
        ran(2, only(T, Outcome::Failed)),
    ));
    let v = judged(&flaky);
    assert_eq!(v.verdict, Verdict::Unstable, "{}", v.reason);
}
