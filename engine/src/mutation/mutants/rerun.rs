//! Kill confirmation inside the mutant's own run. The runner re-runs a failing run's tests once,
//! at once, in the same job ([`assay_common::runner::Runner::rerunning_failures`]): pytest
//! re-runs each failing test in its session (as pytest-rerunfailures does: function fixtures
//! are set up afresh), node:test and Go's test executables run the same selection again. The
//! second run is reported beside the first as `NAME[assay-rerun]` (or `NAME[PARAMS-assay-rerun]`).
//! A kill whose every killing test has such a re-run needs no confirmation job: a re-run that
//! fails again confirms it, re-runs that all pass make it a flaky kill. A pytest module that
//! fails to import is collected once more in the same run; failing again (`FILE[assay-rerun]`)
//! confirms its kill. Kills with nothing to read (a second import that passed, a collection
//! error of something other than a module, a runner that cannot re-run) are still confirmed by
//! a job that runs the killing tests alone.
//!
//! Why: a confirmation job costs a whole session (a sandbox, the tree, the runner's start-up and
//! collection), about as much as the mutant's own run; with most mutants killed, it nearly
//! doubled the sessions a mutation run pays for. The trade-off: a failure caused by state an
//! earlier test of the same session left behind is re-run with that state still there, where a
//! separate job would start clean (and a product module the first import left half-made in
//! `sys.modules` is found again as it was); kills that cannot be re-run this way keep the
//! separate job.

use assay_common::outcome::{CaseResult, CollectionError, Outcome, TestReport};

/// The variant (or variant suffix) that marks a re-run case; a run of prebuilt Rust test
/// executables marks its re-runs the same way.
pub const RERUN_MARK: &str = assay_common::report::libtest::RERUN_VARIANT;

/// Whether a reported case is the re-run of another.
pub fn is_rerun(case: &CaseResult) -> bool {
    case.variant
        .as_deref()
        .and_then(|v| v.strip_suffix(RERUN_MARK))
        .is_some_and(|rest| rest.is_empty() || rest.ends_with('-'))
}

/// What the report's re-runs say of its kill: `Some(true)` confirmed (a killing test failed
/// again, or every module that failed to import failed again), `Some(false)` flaky (every
/// re-run passed), `None` when a killer was not re-run. A module's second import that passed
/// leaves no trace in the report, so it is never read as flaky: its job of its own decides.
pub fn confirmation(report: &TestReport) -> Option<bool> {
    if !report.collection_errors.is_empty() {
        let failed_again = |error: &CollectionError| {
            report
                .collection_reruns
                .iter()
                .any(|again| again.file == error.file)
        };
        return report
            .collection_errors
            .iter()
            .all(failed_again)
            .then_some(true);
    }
    let killers: Vec<&CaseResult> = report
        .cases
        .iter()
        .filter(|c| !is_rerun(c) && is_failure(c))
        .collect();
    let reruns: Vec<&CaseResult> = report.cases.iter().filter(|c| is_rerun(c)).collect();
    let rerun_of = |killer: &CaseResult| {
        reruns
            .iter()
            .any(|r| r.file == killer.file && r.suite == killer.suite && r.name == killer.name)
    };
    if killers.is_empty() || !killers.iter().all(|k| rerun_of(k)) {
        return None;
    }
    Some(reruns.iter().any(|r| is_failure(r)))
}

fn is_failure(case: &CaseResult) -> bool {
    matches!(case.outcome, Outcome::Failed | Outcome::Error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str, variant: Option<&str>, outcome: Outcome) -> CaseResult {
        CaseResult {
            file: "tests/test_pager.py".into(),
            suite: "tests.test_pager".into(),
            name: name.into(),
            variant: variant.map(str::to_owned),
            outcome,
            message: None,
        }
    }

    fn report(cases: Vec<CaseResult>) -> TestReport {
        TestReport {
            cases,
            collection_errors: Vec::new(),
            collection_reruns: Vec::new(),
        }
    }

    #[test]
    fn rerun_cases_are_told_apart_by_their_variant() {
        assert!(is_rerun(&case(
            "test_last_page",
            Some("assay-rerun"),
            Outcome::Failed
        )));
        assert!(is_rerun(&case(
            "test_pages",
            Some("11-assay-rerun"),
            Outcome::Failed
        )));
        assert!(!is_rerun(&case("test_pages", Some("11"), Outcome::Failed)));
        assert!(!is_rerun(&case(
            "test_pages",
            Some("no-assay-rerunning"),
            Outcome::Failed
        )));
        assert!(!is_rerun(&case(
            "test_pages",
            Some("xassay-rerun"),
            Outcome::Failed
        )));
        assert!(!is_rerun(&case("test_pages", None, Outcome::Failed)));
    }

    #[test]
    fn a_failure_that_fails_again_is_confirmed_and_one_that_passes_is_flaky() {
        let confirmed = report(vec![
            case("test_full_pages", None, Outcome::Passed),
            case("test_last_page", None, Outcome::Failed),
            case("test_last_page", Some("assay-rerun"), Outcome::Failed),
        ]);
        assert_eq!(confirmation(&confirmed), Some(true));
        let flaky = report(vec![
            case("test_last_page", None, Outcome::Failed),
            case("test_last_page", Some("assay-rerun"), Outcome::Passed),
        ]);
        assert_eq!(confirmation(&flaky), Some(false));
        let setup_error_again = report(vec![
            case("test_pages", Some("11"), Outcome::Error),
            case("test_pages", Some("11-assay-rerun"), Outcome::Error),
        ]);
        assert_eq!(confirmation(&setup_error_again), Some(true));
    }

    #[test]
    fn a_kill_without_a_rerun_to_read_needs_a_confirmation_job() {
        let no_rerun = report(vec![case("test_last_page", None, Outcome::Failed)]);
        assert_eq!(confirmation(&no_rerun), None);
        let survivors = report(vec![case("test_last_page", None, Outcome::Passed)]);
        assert_eq!(confirmation(&survivors), None);
        let mut collection = report(vec![
            case("test_last_page", None, Outcome::Failed),
            case("test_last_page", Some("assay-rerun"), Outcome::Failed),
        ]);
        collection.collection_errors.push(CollectionError {
            file: "tests/test_bounds.py".into(),
            message: "collection failure".into(),
        });
        assert_eq!(confirmation(&collection), None);
    }

    #[test]
    fn a_module_that_failed_to_import_again_confirms_its_kill() {
        let error = |file: &str| CollectionError {
            file: file.into(),
            message: "collection failure".into(),
        };
        let mut broken = report(vec![]);
        broken.collection_errors.push(error("tests/test_format.py"));
        broken.collection_reruns.push(error("tests/test_format.py"));
        assert_eq!(confirmation(&broken), Some(true));
        // A second module with no second failure: its second import passed or never ran.
        broken.collection_errors.push(error("tests/test_bump.py"));
        assert_eq!(confirmation(&broken), None);
        // A re-run of another module confirms nothing.
        let mut elsewhere = report(vec![]);
        elsewhere
            .collection_errors
            .push(error("tests/test_format.py"));
        elsewhere
            .collection_reruns
            .push(error("tests/test_parsing.py"));
        assert_eq!(confirmation(&elsewhere), None);
        // A re-run with no first failure is no kill to confirm.
        let mut only_rerun = report(vec![case("test_last_page", None, Outcome::Passed)]);
        only_rerun
            .collection_reruns
            .push(error("tests/test_format.py"));
        assert_eq!(confirmation(&only_rerun), None);
    }
}
