//! The selection audit: what a suite run collected, selected and executed, recorded
//! separately, and the containment executed ⊆ selected ⊆ collected checked with every outlier
//! named. Executed ids come from the runner's structured report (its call phase), never from
//! the plan, so a harness that runs something it was not asked to is caught.

use super::runners::SuiteRunner;
use assay_common::outcome::{CaseResult, Outcome, TestReport};
use assay_common::suite::SuiteCase;
use serde::Serialize;
use std::collections::BTreeSet;

pub use assay_common::suite_audit::{AuditReport, Outlier, SelectionAudit};

/// What one job was asked to run and what its report says ran.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JobSelection {
    /// The job's plan index.
    pub job: u32,
    /// The cases the job was asked to run, by native id.
    pub selected: Vec<String>,
    /// The cases its report says ran.
    pub executed: Vec<String>,
    /// The cases its report says were skipped.
    pub skipped: Vec<String>,
}

impl JobSelection {
    /// Maps a job's report onto its selected cases: a reported test owned by a selected case
    /// counts as that case; anything else is an outlier, named by the runner's own id.
    pub fn from_report(
        runner: SuiteRunner,
        job: u32,
        selected: &[&SuiteCase],
        report: Option<&TestReport>,
    ) -> Self {
        let mut executed = BTreeSet::new();
        let mut skipped = BTreeSet::new();
        for result in report.map_or(&[][..], |r| &r.cases) {
            let id = selected
                .iter()
                .find(|c| c.owns(result))
                .map_or_else(|| native_id(runner, result), |c| c.id.clone());
            if result.outcome == Outcome::Skipped {
                skipped.insert(id.clone());
            }
            executed.insert(id);
        }
        // A case with one skipped and one run variant ran.
        Self {
            job,
            selected: selected.iter().map(|c| c.id.clone()).collect(),
            executed: executed.into_iter().collect(),
            skipped: skipped.into_iter().collect(),
        }
    }
}

/// A reported result as its runner names a test (see
/// [`assay_common::runner::Runner::native_id`]): a pytest node id, a unittest dotted id, a Go
/// `IMPORT/PATH.TestName`, else the report's identity.
pub fn native_id(runner: SuiteRunner, result: &CaseResult) -> String {
    runner.runner().native_id(result)
}

/// Checks executed ⊆ selected ⊆ collected over every job and names the outliers.
pub fn audit(collected: &[String], jobs: &[JobSelection]) -> SelectionAudit {
    let collected_set: BTreeSet<&str> = collected.iter().map(String::as_str).collect();
    let mut selected_not_collected = Vec::new();
    let mut executed_not_selected = Vec::new();
    let (mut selected, mut executed, mut skipped) = (0, 0, 0);
    for job in jobs {
        let mine: BTreeSet<&str> = job.selected.iter().map(String::as_str).collect();
        selected += job.selected.len();
        executed += job.executed.len();
        skipped += job.skipped.len();
        for id in &job.selected {
            if !collected_set.contains(id.as_str()) {
                selected_not_collected.push(Outlier {
                    job: job.job,
                    id: id.clone(),
                });
            }
        }
        for id in &job.executed {
            if !mine.contains(id.as_str()) {
                executed_not_selected.push(Outlier {
                    job: job.job,
                    id: id.clone(),
                });
            }
        }
    }
    SelectionAudit {
        collected: collected.len(),
        selected,
        executed,
        skipped,
        contained: selected_not_collected.is_empty() && executed_not_selected.is_empty(),
        selected_not_collected,
        executed_not_selected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_common::outcome::CaseResult;
    use assay_common::runner::RunnerKind;
    use assay_common::suite::parse_pytest_collection;

    const PYTEST: SuiteRunner = SuiteRunner::Kind(RunnerKind::Pytest);

    #[test]
    fn outliers_are_named_as_their_runner_names_tests() {
        let result = |file: &str, suite: &str, name: &str, variant: Option<&str>| CaseResult {
            file: file.into(),
            suite: suite.into(),
            name: name.into(),
            variant: variant.map(Into::into),
            outcome: Outcome::Passed,
            message: None,
        };
        let table = [
            (
                result(
                    "tests.test_pricing",
                    "tests.test_pricing",
                    "test_phantom_refund",
                    None,
                ),
                "tests/test_pricing.py::test_phantom_refund",
            ),
            (
                result(
                    "tests/test_pricing.py",
                    "tests.test_pricing.TestRefund",
                    "test_x",
                    Some("2"),
                ),
                "tests/test_pricing.py::TestRefund::test_x[2]",
            ),
            (
                result(
                    "",
                    "tests.test_pricing.TestRefund.TestNested",
                    "test_y",
                    None,
                ),
                "tests/test_pricing.py::TestRefund::TestNested::test_y",
            ),
            (
                result("test_top.py", "test_top", "test_z", None),
                "test_top.py::test_z",
            ),
        ];
        for (reported, want) in table {
            assert_eq!(native_id(PYTEST, &reported), want, "{reported:?}");
        }
        let unittest = SuiteRunner::Kind(RunnerKind::Unittest);
        assert_eq!(
            native_id(
                unittest,
                &result(
                    "tests/test_ledger.py",
                    "tests.test_ledger.LedgerTests",
                    "test_balance",
                    None
                )
            ),
            "tests.test_ledger.LedgerTests.test_balance"
        );
        let go = SuiteRunner::Kind(RunnerKind::Go);
        assert_eq!(
            native_id(
                go,
                &result("example.com/ledger/cache", "", "TestExpiry/fresh", None)
            ),
            "example.com/ledger/cache.TestExpiry/fresh"
        );
    }

    fn reported(name: &str, outcome: Outcome) -> CaseResult {
        CaseResult {
            file: "tests/test_invoice.py".into(),
            suite: "tests.test_invoice".into(),
            name: name.into(),
            variant: None,
            outcome,
            message: None,
        }
    }

    #[test]
    fn a_contained_run_names_no_outliers_and_counts_skips_apart() {
        let cases = parse_pytest_collection(
            "tests/test_invoice.py::test_total\ntests/test_invoice.py::test_tax\n\n",
        );
        let collected: Vec<String> = cases.iter().map(|c| c.id.clone()).collect();
        let report = TestReport {
            cases: vec![
                reported("test_total", Outcome::Passed),
                reported("test_tax", Outcome::Skipped),
            ],
            collection_errors: vec![],
            collection_reruns: Vec::new(),
        };
        let job = JobSelection::from_report(PYTEST, 0, &[&cases[0], &cases[1]], Some(&report));
        let result = audit(&collected, &[job]);
        assert!(result.contained);
        assert_eq!(
            (
                result.collected,
                result.selected,
                result.executed,
                result.skipped
            ),
            (2, 2, 2, 1)
        );
    }

    #[test]
    fn every_outlier_is_named_with_its_job() {
        let cases = parse_pytest_collection(
            "tests/test_invoice.py::test_total\ntests/test_invoice.py::test_tax\n\n",
        );
        let collected = vec![cases[0].id.clone()];
        let report = TestReport {
            cases: vec![
                reported("test_total", Outcome::Passed),
                reported("test_discount", Outcome::Passed),
            ],
            collection_errors: vec![],
            collection_reruns: Vec::new(),
        };
        let first = JobSelection::from_report(PYTEST, 0, &[&cases[0]], Some(&report));
        let second = JobSelection {
            job: 1,
            selected: vec![cases[1].id.clone()],
            ..JobSelection::default()
        };
        let result = audit(&collected, &[first, second]);
        assert!(!result.contained);
        assert_eq!(
            result.executed_not_selected,
            [Outlier {
                job: 0,
                id: "tests/test_invoice.py::test_discount".into()
            }]
        );
        assert_eq!(
            result.selected_not_collected,
            [Outlier {
                job: 1,
                id: "tests/test_invoice.py::test_tax".into()
            }]
        );
    }
}
