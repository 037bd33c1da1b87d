//! Kill confirmation inside the mutant's own pytest session. A test that fails is re-run once,
//! at once, in the same session (as pytest-rerunfailures does: function fixtures are set up
//! afresh), and the second run is reported beside the first as `NAME[assay-rerun]` (or
//! `NAME[PARAMS-assay-rerun]`). A kill whose every killing test has such a re-run needs no
//! confirmation job: a re-run that fails again confirms it, re-runs that all pass make it a
//! flaky kill. Kills with no re-run to read (a collection error, a runner other than
//! `PYTHON -m pytest`) are still confirmed by a job that runs the killing tests alone.
//!
//! Why: a confirmation job costs a whole pytest session (configuration, plugin registration,
//! collection), about as much as the mutant's own run; with most mutants killed, it nearly
//! doubled the sessions a mutation run pays for. The trade-off: a failure caused by state an
//! earlier test of the same session left behind is re-run with that state still there, where a
//! separate job would start clean; kills that cannot be re-run this way keep the separate job.

use assay_common::outcome::{CaseResult, Outcome, TestReport};
use assay_common::runner::python_m_pytest;

/// The variant (or variant suffix) that marks a re-run case; a run of prebuilt Rust test
/// executables marks its re-runs the same way.
pub const RERUN_MARK: &str = assay_common::report::libtest::RERUN_VARIANT;

/// Runs pytest with the re-run plugin: `PYTHON -c RERUN_SCRIPT PYTEST_ARGS…`.
const RERUN_SCRIPT: &str = r#"
import sys
import pytest
from _pytest.runner import runtestprotocol


class Rerun:
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        ihook = item.ihook
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        for report in reports:
            ihook.pytest_runtest_logreport(report=report)
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        if any(report.failed for report in reports):
            if item.nodeid.endswith("]"):
                nodeid = item.nodeid[:-1] + "-assay-rerun]"
            else:
                nodeid = item.nodeid + "[assay-rerun]"
            ihook.pytest_runtest_logstart(nodeid=nodeid, location=item.location)
            for report in runtestprotocol(item, nextitem=nextitem, log=False):
                report.nodeid = nodeid
                ihook.pytest_runtest_logreport(report=report)
            ihook.pytest_runtest_logfinish(nodeid=nodeid, location=item.location)
        return True


sys.exit(pytest.main(sys.argv[1:], plugins=[Rerun()]))
"#;

/// `PYTHON -m pytest ARGS…` as `PYTHON -c RERUN_SCRIPT ARGS…`; any other command is kept (its
/// kills are confirmed by a job).
pub fn with_rerun(command: Vec<String>) -> Vec<String> {
    let Some((python, args)) = python_m_pytest(&command) else {
        return command;
    };
    let mut argv = vec![python.clone(), "-c".into(), RERUN_SCRIPT.into()];
    argv.extend(args.iter().cloned());
    argv
}

/// Whether a reported case is the re-run of another.
pub fn is_rerun(case: &CaseResult) -> bool {
    case.variant
        .as_deref()
        .and_then(|v| v.strip_suffix(RERUN_MARK))
        .is_some_and(|rest| rest.is_empty() || rest.ends_with('-'))
}

/// What the report's re-runs say of its kill: `Some(true)` confirmed (a killing test failed
/// again), `Some(false)` flaky (every re-run passed), `None` when a killer was not re-run.
pub fn confirmation(report: &TestReport) -> Option<bool> {
    if !report.collection_errors.is_empty() {
        return None;
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
    use assay_common::outcome::CollectionError;

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
        }
    }

    #[test]
    fn only_python_dash_m_pytest_gains_the_rerun_plugin() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let command = with_rerun(argv(&[
            "python3",
            "-m",
            "pytest",
            "-x",
            "tests/test_pager.py",
        ]));
        assert_eq!(command[..2], argv(&["python3", "-c"]));
        assert!(command[2].contains("runtestprotocol"));
        assert_eq!(command[3..], argv(&["-x", "tests/test_pager.py"]));
        let other = argv(&["uv", "run", "pytest", "-x"]);
        assert_eq!(with_rerun(other.clone()), other);
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
}
