//! The unmutated run the check's mutants are judged against: whether a run can stand as the
//! baseline, and the runs of it (from the candidate's build, or from the schema's prebuilt
//! tests).

use super::schemata::{self, NoPrebuiltBaseline};
use crate::dispatch::run_one;
use crate::mutation::mutants::budget::{MutantTimeout, NotRunReason};
use crate::mutation::mutants::judge::{Expected, Judgement, judge_run};
use crate::mutation::mutants::rust::prebuilt;
use assay_common::criteria::TestSelector;
use assay_common::job::{ArtifactRef, JobResult, JobSpec, JobStatus};
use assay_common::outcome::Outcome;
use assay_common::test_binaries::Selection;
use assay_common::verdict::network::network_failure;
use assay_transport::error_chain::error_chain;
use assay_transport::queue::{JobQueue, QueueError};
use std::time::Duration;

/// Why the unmutated run did not pass, by whose doing: its tests', or what ran them.
fn why_not_passed(judgement: &Judgement) -> BaselineProblem {
    match judgement {
        Judgement::Killed {
            reason: Some(reason),
            ..
        } => BaselineProblem::TestsFailed(reason.clone()),
        Judgement::Killed { by, reason: None } => {
            BaselineProblem::TestsFailed(format!("{} failed", by.join(", ")))
        }
        Judgement::TimedOut { limit } => {
            BaselineProblem::NotPassed(format!("timed out after {}s", limit.as_secs()))
        }
        // The sandbox or the queue failed: nothing of the tests is known.
        Judgement::NotRun(NotRunReason::Infrastructure { message }) => {
            BaselineProblem::Unrun(message.clone())
        }
        Judgement::NotRun(why) => BaselineProblem::NotPassed(why.to_string()),
        Judgement::Survived { .. } => BaselineProblem::NotPassed("it passed".to_owned()),
    }
}

/// Whether an unmutated run can stand as the baseline mutants are judged against: it ran at
/// least one test and every test it had to pass passed. Against a red or empty baseline every
/// mutant "dies" of the baseline's own failure, so, as mutmut and Stryker refuse a red initial
/// run, nothing is judged; `Err` says why, naming the failing tests.
pub fn judge_baseline(result: &JobResult, judgement: &Judgement) -> Result<(), BaselineProblem> {
    match (judgement, &result.status) {
        (Judgement::Survived { tests_run }, _) if *tests_run > 0 => Ok(()),
        (Judgement::Survived { .. }, _) => Err(BaselineProblem::RanNoTest),
        (_, JobStatus::Completed { exit_code }) if result.report.parsed().is_none() => {
            Err(BaselineProblem::NoReport {
                exit_code: *exit_code,
                problem: result
                    .report
                    .problem()
                    .unwrap_or_else(|| "left no usable report".into()),
            })
        }
        (other, _) => Err(with_network_failure(
            why_not_passed(other),
            result.report.parsed().into_iter().flat_map(|report| {
                report
                    .cases
                    .iter()
                    .filter(|case| matches!(case.outcome, Outcome::Failed | Outcome::Error))
                    .filter_map(|case| case.message.as_deref())
            }),
        )),
    }
}

/// `problem`, and where it is failed tests one of whose failure `messages` shows a network
/// failure (a name lookup, an unreachable network), that too: jobs run with no network, which
/// no fix to the tests' code changes.
pub fn with_network_failure<'a>(
    problem: BaselineProblem,
    messages: impl IntoIterator<Item = &'a str>,
) -> BaselineProblem {
    let BaselineProblem::TestsFailed(reason) = problem else {
        return problem;
    };
    let sign = messages.into_iter().find_map(network_failure);
    BaselineProblem::TestsFailed(match sign {
        Some(sign) => format!(
            "{reason}; its output shows a network failure ({sign}), and jobs run with no network beyond a loopback of their own"
        ),
        None => reason,
    })
}

/// Why an unmutated run cannot stand as the baseline mutants are judged against.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BaselineProblem {
    /// The run passed without running a single test.
    #[error("it ran no test")]
    RanNoTest,
    /// The run left no report to read.
    #[error(
        "it exited {exit_code} and {problem} (hint: is the test runner installed where the tests run?)"
    )]
    NoReport {
        /// The run's exit code.
        exit_code: i32,
        /// What is wrong with its report (missing, unparsable).
        problem: String,
    },
    /// Tests failed, or broke the session: the suite is red. Names them where it can.
    #[error("{0}")]
    TestsFailed(String),
    /// It did not pass for another reason (it timed out, the budget ran out, the runner exited
    /// with an error of its own), as the judgement or the per-test coverage map says it.
    #[error("{0}")]
    NotPassed(String),
    /// The queue or the sandbox could not run it, with its error chain: nothing of the tests
    /// is known.
    #[error("it could not be run: {0}")]
    Unrun(String),
}

impl BaselineProblem {
    /// Whether the run's own tests failed (rather than the run being empty, unreported, out of
    /// time or never run): only then is the suite red.
    pub fn tests_failed(&self) -> bool {
        matches!(self, Self::TestsFailed(_))
    }
}

/// The executables the schema build kept, the proving tests among them, and their unmutated
/// run.
pub(super) struct Prebuilt {
    pub(super) archive: ArtifactRef,
    pub(super) selection: Selection,
    pub(super) result: JobResult,
}

/// The unmutated run of the prebuilt tests in `archive` (as `spec`, a job of the proving tests
/// on the candidate), and the proving tests by executable as it names them; `Err` says why it
/// cannot stand as the baseline. Fails only when the queue's result stream closes.
pub(super) async fn prebuilt_baseline(
    queue: &dyn JobQueue,
    mut spec: JobSpec,
    archive: ArtifactRef,
    tests: &[(String, TestSelector)],
    limit: Duration,
    finished: &(dyn Fn(&JobSpec, &JobResult) + Sync),
) -> Result<Result<Prebuilt, NoPrebuiltBaseline>, QueueError> {
    prebuilt::make_run_job(&mut spec, &archive, 0, None);
    Ok(
        match unmutated_run(queue, &spec, tests, limit, finished).await? {
            Unmutated::Passed(result) => {
                schemata::proving_selection(tests, &result).map(|selection| Prebuilt {
                    archive,
                    selection,
                    result,
                })
            }
            Unmutated::Failed(_, why) => Err(why.into()),
            Unmutated::Unrun(why) => Err(NoPrebuiltBaseline::NotRun(why)),
        },
    )
}

/// The unmutated run of the proving tests.
pub(super) enum Unmutated {
    /// Every proving test passed: the baseline mutants are judged against.
    Passed(JobResult),
    /// It ran and cannot stand as the baseline, with why.
    Failed(JobResult, BaselineProblem),
    /// It could not run (the queue refused it), with why.
    Unrun(String),
}

/// Runs `spec`, the unmutated run of the proving `tests`, and judges whether it can stand as
/// the baseline. Fails only when the queue's result stream closes.
pub(super) async fn unmutated_run(
    queue: &dyn JobQueue,
    spec: &JobSpec,
    tests: &[(String, TestSelector)],
    limit: Duration,
    finished: &(dyn Fn(&JobSpec, &JobResult) + Sync),
) -> Result<Unmutated, QueueError> {
    let result = match run_one(queue, spec).await {
        Ok(result) => result,
        Err(closed @ QueueError::Closed { .. }) => return Err(closed),
        Err(e) => return Ok(Unmutated::Unrun(error_chain(&e))),
    };
    finished(spec, &result);
    let timeout = MutantTimeout {
        limit,
        set_by_budget: true,
    };
    let judgement = judge_run(&result, timeout, Expected::ProvingTests(tests));
    Ok(match judge_baseline(&result, &judgement) {
        Ok(()) => Unmutated::Passed(result),
        Err(why) => Unmutated::Failed(result, why),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unmutated_run(exit_code: i32, report: assay_common::outcome::ReportOutcome) -> JobResult {
        JobResult {
            job_id: assay_common::JobId("p-1-0008".into()),
            index: 8,
            status: JobStatus::Completed { exit_code },
            report,
            artifacts: Vec::new(),
            duration_ms: 900,
            worker: assay_common::WorkerId("w-1".into()),
            sandbox: None,
        }
    }

    fn judged(result: &JobResult) -> Result<(), BaselineProblem> {
        let judgement = judge_run(
            result,
            MutantTimeout {
                limit: Duration::from_secs(60),
                set_by_budget: true,
            },
            Expected::EveryTestRun,
        );
        judge_baseline(result, &judgement)
    }

    #[test]
    fn a_red_or_empty_unmutated_run_is_no_baseline() {
        use assay_common::outcome::{CaseResult, Outcome, ReportOutcome, TestReport};
        let case = |name: &str, outcome| CaseResult {
            file: "tests/test_version.py".into(),
            suite: "tests.test_version".into(),
            name: name.into(),
            variant: None,
            outcome,
            message: None,
        };
        let report = |cases| {
            ReportOutcome::Parsed(TestReport {
                cases,
                collection_errors: vec![],
                collection_reruns: Vec::new(),
            })
        };
        let green = unmutated_run(0, report(vec![case("test_parse", Outcome::Passed)]));
        assert_eq!(judged(&green), Ok(()));
        // The runner is missing: `python3 -m pytest` exits 1 with no report.
        let missing = judged(&unmutated_run(1, ReportOutcome::Missing)).unwrap_err();
        assert!(
            matches!(missing, BaselineProblem::NoReport { exit_code: 1, .. }),
            "{missing:?}"
        );
        let missing = missing.to_string();
        assert!(
            missing.starts_with("it exited 1 and the command wrote no report")
                && missing.contains("is the test runner installed"),
            "{missing}"
        );
        let red = unmutated_run(
            1,
            report(vec![
                case("test_parse", Outcome::Passed),
                case("test_compare", Outcome::Failed),
            ]),
        );
        let why = judged(&red).unwrap_err().to_string();
        assert!(
            why.contains("test_compare") && why.ends_with("failed"),
            "{why}"
        );
        assert!(judged(&red).unwrap_err().tests_failed());
        // A worker that could not run it says nothing of the tests.
        let mut lost = green.clone();
        lost.status = JobStatus::Infrastructure {
            message: "tree 7f95 is not in the store s3://fleet".into(),
            cause: assay_common::fault::InfraCause::TreeFetch,
        };
        let unrun = judged(&lost).unwrap_err();
        assert_eq!(
            unrun,
            BaselineProblem::Unrun("tree 7f95 is not in the store s3://fleet".into())
        );
        assert!(!unrun.tests_failed());
        let skipped = unmutated_run(0, report(vec![case("test_parse", Outcome::Skipped)]));
        assert_eq!(
            judged(&skipped),
            Err(BaselineProblem::NotPassed(
                "the run executed zero tests".into()
            ))
        );
    }
}
