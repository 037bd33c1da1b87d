//! How one mutant's run is judged: the one place a job's result becomes a mutant's verdict,
//! for the proof's mutation check and `assay mutate` alike. Each front end only names its
//! verdicts its own way (the evidence's `MutantOutcome`, Stryker's statuses).

use super::budget::{MutantOutcome, MutantTimeout, NotRunReason};
use super::rerun;
use assay_common::criteria::TestSelector;
use assay_common::job::{JobResult, JobStatus};
use assay_common::outcome::{CaseResult, Outcome, ReportOutcome, TestReport};
use std::collections::BTreeSet;
use std::time::Duration;

/// A mutant's verdict, before any front end names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Judgement {
    /// Tests detected the mutant. `by` names them (pytest node ids where the report allows);
    /// `reason` says how when the run itself shows it (the mutant broke the test session).
    Killed {
        /// The tests that failed.
        by: Vec<String>,
        /// How the run showed the kill, when the tests alone do not.
        reason: Option<String>,
    },
    /// The run hit the mutant's own limit: a hang the mutant caused, so detected.
    TimedOut {
        /// The limit it ran under.
        limit: Duration,
    },
    /// Every test that had to pass passed; `tests_run` counts the cases that ran.
    Survived {
        /// Cases that ran and passed.
        tests_run: usize,
    },
    /// The run says nothing of the mutant; why.
    NotRun(NotRunReason),
}

/// The evidence's name for a judgement: a hang kills by every proving test.
pub fn outcome_of(judgement: Judgement, proving_tests: &[String]) -> MutantOutcome {
    match judgement {
        Judgement::Killed { by, reason } => MutantOutcome::Killed {
            by,
            timed_out: false,
            reason,
        },
        Judgement::TimedOut { .. } => MutantOutcome::Killed {
            by: proving_tests.to_vec(),
            timed_out: true,
            reason: None,
        },
        Judgement::Survived { .. } => MutantOutcome::Survived,
        Judgement::NotRun(reason) => MutantOutcome::NotRun {
            reason: reason.to_string(),
        },
    }
}

/// What must still pass for a mutant to survive.
#[derive(Clone, Copy, Debug)]
pub enum Expected<'a> {
    /// The proof's named tests: any that does not pass kills the mutant.
    ProvingTests(&'a [(String, TestSelector)]),
    /// Whatever the run selected: any failing case or collection error kills the mutant.
    EveryTestRun,
}

/// Judges one mutant's run. The unmutated run of the same command passed before any mutant
/// ran, so a session that ends with no usable report was broken by the mutant (an import-time
/// error in a conftest, say, makes pytest exit 4 without a report): that is a kill, as mutmut
/// and PIT count it, and only a sandbox or queue failure leaves a mutant not run.
pub fn judge_run(result: &JobResult, timeout: MutantTimeout, expected: Expected<'_>) -> Judgement {
    match (&result.status, &result.report) {
        (JobStatus::TimedOut, _) if timeout.set_by_budget => {
            Judgement::NotRun(NotRunReason::CutShort {
                after: timeout.limit,
            })
        }
        (JobStatus::TimedOut, _) => Judgement::TimedOut {
            limit: timeout.limit,
        },
        (JobStatus::Completed { .. }, ReportOutcome::Parsed(report)) => {
            judge_report(report, expected)
        }
        (JobStatus::Completed { exit_code }, report) => Judgement::Killed {
            by: match expected {
                Expected::ProvingTests(tests) => {
                    tests.iter().map(|(name, _)| name.clone()).collect()
                }
                Expected::EveryTestRun => Vec::new(),
            },
            reason: Some(format!(
                "the mutant broke the test session: exit {exit_code}, {}",
                report
                    .problem()
                    .unwrap_or_else(|| "no usable report".into())
            )),
        },
        (JobStatus::Infrastructure { message, .. }, _) => {
            Judgement::NotRun(NotRunReason::Infrastructure {
                message: message.clone(),
            })
        }
        (JobStatus::Cancelled, _) => Judgement::NotRun(NotRunReason::Infrastructure {
            message: "the job was cancelled".into(),
        }),
    }
}

/// The compiler's first error, when a run's report shows its build failed and no test ran:
/// for a compiled language, the mutant did not compile (Stryker's `CompileError`).
pub fn compile_error(result: &JobResult) -> Option<String> {
    let (JobStatus::Completed { .. }, ReportOutcome::Parsed(report)) =
        (&result.status, &result.report)
    else {
        return None;
    };
    let error = report.collection_errors.first()?;
    if !report.cases.is_empty() {
        return None;
    }
    // The compiler's heading, and where it points (another member's file, say).
    let mut lines = error.message.lines();
    let heading = lines.next().unwrap_or("");
    Some(
        match lines.find_map(|l| l.trim_start().strip_prefix("--> ")) {
            Some(at) => format!("{heading} at {at}"),
            None => heading.to_owned(),
        },
    )
}

fn judge_report(report: &TestReport, expected: Expected<'_>) -> Judgement {
    // The in-session re-runs of killing tests confirm a kill; they are not tests of their own.
    let cases = || report.cases.iter().filter(|c| !rerun::is_rerun(c));
    let tests_run = cases().filter(|c| c.outcome != Outcome::Skipped).count();
    let by: Vec<String> = match expected {
        Expected::ProvingTests(tests) => {
            let passed = passed_tests(tests, report);
            tests
                .iter()
                .map(|(name, _)| name)
                .filter(|name| !passed.contains(*name))
                .cloned()
                .collect()
        }
        Expected::EveryTestRun => {
            if tests_run == 0 && report.collection_errors.is_empty() {
                // Zero tests executed says nothing about the mutant: never a survivor.
                return Judgement::NotRun(NotRunReason::NoTestRan);
            }
            cases()
                .filter(|c| matches!(c.outcome, Outcome::Failed | Outcome::Error))
                .map(node_id)
                .chain(report.collection_errors.iter().map(|e| e.file.clone()))
                .collect()
        }
    };
    if by.is_empty() {
        Judgement::Survived { tests_run }
    } else {
        Judgement::Killed { by, reason: None }
    }
}

/// The proving tests a report shows passing: each matched at least once, every match passed.
pub fn passed_tests(tests: &[(String, TestSelector)], report: &TestReport) -> BTreeSet<String> {
    tests
        .iter()
        .filter(|(_, selector)| {
            let mut matched = report
                .cases
                .iter()
                .filter(|case| selector.matches(&case.name))
                .peekable();
            matched.peek().is_some() && matched.all(|case| case.outcome == Outcome::Passed)
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// A case's pytest node id (`tests/test_pages.py::PageTests::test_partial[2]`), the form
/// per-test coverage names tests in, so a kill's tests and a mutant's covering tests compare.
/// The class path is the report's dotted class name less the module the file names; a case
/// without a file keeps its bare name.
pub fn node_id(case: &CaseResult) -> String {
    let variant = case
        .variant
        .as_deref()
        .map(|v| format!("[{v}]"))
        .unwrap_or_default();
    if case.file.is_empty() {
        return format!("{}{variant}", case.name);
    }
    let module = case.file.trim_end_matches(".py").replace('/', ".");
    let classes = case
        .suite
        .strip_prefix(module.as_str())
        .and_then(|rest| rest.strip_prefix('.'))
        .filter(|rest| !rest.is_empty());
    match classes {
        Some(classes) => format!(
            "{}::{}::{}{variant}",
            case.file,
            classes.replace('.', "::"),
            case.name
        ),
        None => format!("{}::{}{variant}", case.file, case.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_common::outcome::CollectionError;
    use assay_common::{JobId, WorkerId};

    fn case(name: &str, variant: Option<&str>, outcome: Outcome) -> CaseResult {
        CaseResult {
            file: "tests/test_pages.py".into(),
            suite: "tests.test_pages.PageTests".into(),
            name: name.into(),
            variant: variant.map(String::from),
            outcome,
            message: None,
        }
    }

    fn result(status: JobStatus, report: ReportOutcome) -> JobResult {
        JobResult {
            job_id: JobId("p/5".into()),
            index: 5,
            status,
            report,
            artifacts: vec![],
            duration_ms: 40,
            worker: WorkerId("w".into()),
            sandbox: None,
        }
    }

    fn ran(cases: Vec<CaseResult>) -> JobResult {
        result(
            JobStatus::Completed { exit_code: 1 },
            ReportOutcome::Parsed(TestReport {
                cases,
                collection_errors: vec![],
                collection_reruns: Vec::new(),
            }),
        )
    }

    const OWN_LIMIT: MutantTimeout = MutantTimeout {
        limit: Duration::from_secs(60),
        set_by_budget: false,
    };

    fn proving() -> Vec<(String, TestSelector)> {
        ["test_full_pages", "test_partial_last_page_is_counted"]
            .iter()
            .map(|n| (n.to_string(), TestSelector::Exact(n.to_string())))
            .collect()
    }

    #[test]
    fn a_proving_test_that_does_not_pass_kills_and_all_passing_survive() {
        let tests = proving();
        let expected = Expected::ProvingTests(&tests);
        let killed = ran(vec![
            case("test_full_pages", None, Outcome::Passed),
            case("test_partial_last_page_is_counted", None, Outcome::Failed),
        ]);
        assert_eq!(
            judge_run(&killed, OWN_LIMIT, expected),
            Judgement::Killed {
                by: vec!["test_partial_last_page_is_counted".into()],
                reason: None
            }
        );
        let survived = ran(vec![
            case("test_full_pages", None, Outcome::Passed),
            case("test_partial_last_page_is_counted", None, Outcome::Passed),
        ]);
        assert_eq!(
            judge_run(&survived, OWN_LIMIT, expected),
            Judgement::Survived { tests_run: 2 }
        );
        // A proving test the mutant kept from loading is not passing either.
        assert_eq!(
            judge_run(&ran(vec![]), OWN_LIMIT, expected),
            Judgement::Killed {
                by: tests.iter().map(|(n, _)| n.clone()).collect(),
                reason: None
            }
        );
    }

    #[test]
    fn a_session_the_mutant_breaks_is_a_kill_with_its_reason_in_both_front_ends() {
        let tests = proving();
        // pytest exits 4 and writes no report when a conftest cannot import the module.
        let broken = result(
            JobStatus::Completed { exit_code: 4 },
            ReportOutcome::Missing,
        );
        for expected in [Expected::ProvingTests(&tests), Expected::EveryTestRun] {
            let Judgement::Killed {
                reason: Some(reason),
                ..
            } = judge_run(&broken, OWN_LIMIT, expected)
            else {
                panic!("{expected:?}: a broken session must be a kill")
            };
            assert!(
                reason.contains("broke the test session: exit 4"),
                "{reason}"
            );
        }
    }

    #[test]
    fn hangs_kill_budget_cuts_and_infrastructure_do_not() {
        let hung = result(JobStatus::TimedOut, ReportOutcome::Missing);
        assert_eq!(
            judge_run(&hung, OWN_LIMIT, Expected::EveryTestRun),
            Judgement::TimedOut {
                limit: Duration::from_secs(60)
            }
        );
        let cut = MutantTimeout {
            limit: Duration::from_secs(75),
            set_by_budget: true,
        };
        assert_eq!(
            judge_run(&hung, cut, Expected::EveryTestRun),
            Judgement::NotRun(NotRunReason::CutShort {
                after: Duration::from_secs(75)
            })
        );
        let infra = result(
            JobStatus::Infrastructure {
                message: "sandbox did not start".into(),
                cause: assay_common::fault::InfraCause::SandboxStart,
            },
            ReportOutcome::Missing,
        );
        assert_eq!(
            judge_run(&infra, OWN_LIMIT, Expected::EveryTestRun),
            Judgement::NotRun(NotRunReason::Infrastructure {
                message: "sandbox did not start".into()
            })
        );
    }

    #[test]
    fn every_test_run_names_killers_by_node_id_and_zero_tests_are_no_verdict() {
        let report = ran(vec![
            case("test_partial", Some("2"), Outcome::Failed),
            CaseResult {
                file: "tests/test_totals.py".into(),
                suite: "tests.test_totals".into(),
                name: "test_rounding".into(),
                variant: None,
                outcome: Outcome::Error,
                message: None,
            },
            case("test_full_pages", None, Outcome::Passed),
        ]);
        assert_eq!(
            judge_run(&report, OWN_LIMIT, Expected::EveryTestRun),
            Judgement::Killed {
                by: vec![
                    "tests/test_pages.py::PageTests::test_partial[2]".into(),
                    "tests/test_totals.py::test_rounding".into()
                ],
                reason: None
            }
        );
        let skipped_only = ran(vec![case("test_full_pages", None, Outcome::Skipped)]);
        assert_eq!(
            judge_run(&skipped_only, OWN_LIMIT, Expected::EveryTestRun),
            Judgement::NotRun(NotRunReason::NoTestRan)
        );
        let collection = result(
            JobStatus::Completed { exit_code: 2 },
            ReportOutcome::Parsed(TestReport {
                cases: vec![],
                collection_errors: vec![CollectionError {
                    file: "tests/test_format.py".into(),
                    message: "NameError".into(),
                }],
                collection_reruns: Vec::new(),
            }),
        );
        assert_eq!(
            judge_run(&collection, OWN_LIMIT, Expected::EveryTestRun),
            Judgement::Killed {
                by: vec!["tests/test_format.py".into()],
                reason: None
            }
        );
    }

    #[test]
    fn a_build_failure_with_no_test_run_is_a_compile_error_and_a_failing_test_is_not() {
        let unbuilt = |cases: Vec<CaseResult>, status| {
            result(
                status,
                ReportOutcome::Parsed(TestReport {
                    cases,
                    collection_errors: vec![CollectionError {
                        file: "pager/lib".into(),
                        message: "error[E0277]: the trait bound `Book: Default` is not satisfied\n --> src/lib.rs:9:5".into(),
                    }],
                    collection_reruns: Vec::new(),
                }),
            )
        };
        let failed = JobStatus::Completed { exit_code: 101 };
        assert_eq!(
            compile_error(&unbuilt(vec![], failed.clone())).as_deref(),
            Some(
                "error[E0277]: the trait bound `Book: Default` is not satisfied at src/lib.rs:9:5"
            )
        );
        // A test ran: the build of that binary worked, whatever else failed.
        let with_a_case = unbuilt(vec![case("test_full_pages", None, Outcome::Failed)], failed);
        assert_eq!(compile_error(&with_a_case), None);
        assert_eq!(compile_error(&unbuilt(vec![], JobStatus::TimedOut)), None);
        assert_eq!(compile_error(&ran(vec![])), None);
    }

    #[test]
    fn a_proving_test_passes_only_when_every_matched_case_passed() {
        let case = |name: &str, outcome| CaseResult {
            file: "tests/test_pages.py".into(),
            suite: String::new(),
            name: name.into(),
            variant: None,
            outcome,
            message: None,
        };
        let report = TestReport {
            cases: vec![
                case("test_full_pages", Outcome::Passed),
                case("test_partial", Outcome::Passed),
                case("test_partial", Outcome::Failed),
            ],
            collection_errors: Vec::new(),
            collection_reruns: Vec::new(),
        };
        let tests: Vec<(String, TestSelector)> =
            ["test_full_pages", "test_partial", "test_missing"]
                .iter()
                .map(|n| (n.to_string(), TestSelector::Exact(n.to_string())))
                .collect();
        assert_eq!(
            passed_tests(&tests, &report)
                .into_iter()
                .collect::<Vec<_>>(),
            ["test_full_pages"]
        );
    }
}
