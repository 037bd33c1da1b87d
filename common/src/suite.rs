//! The suite model of `assay test`: collected cases with stable opaque refs, what each case's
//! outcome was, and the two documents a suite run prints (`assay.cases/v1`, `assay.suite/v1`).
//! Pure: collection output comes in as bytes, outcomes are derived from parsed job results.

use crate::job::{ArtifactRef, JobResult, JobStatus};
use crate::json_field;
use crate::outcome::{CaseResult, Outcome, ReportOutcome};
pub use crate::runner::SuiteRunner;
use crate::suite_audit::AuditReport;
pub use crate::suite_case::{CaseScope, SuiteCase, case_ref, is_well_formed_ref};
use crate::suite_history::HistoryReport;
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

/// The `schema` of `--list-cases` output.
pub const CASES_SCHEMA: &str = "assay.cases/v1";
/// The `schema` of an `assay test` report.
pub const SUITE_SCHEMA: &str = "assay.test/v1";

/// Reads pytest's `--collect-only -q` output: one node id per line, then a blank line and a
/// count. Lines without `::` (headers, warnings) are not cases.
pub fn parse_pytest_collection(stdout: &str) -> Vec<SuiteCase> {
    let mut cases = Vec::new();
    for line in stdout.lines() {
        if line.trim().is_empty() {
            break;
        }
        if line.starts_with(' ') || !line.contains("::") {
            continue;
        }
        let id = line.trim_end().to_owned();
        let mut parts: Vec<&str> = id.split("::").collect();
        let file = parts.remove(0).to_owned();
        let last = parts.pop().unwrap_or_default();
        let (name, variant) = match last.split_once('[') {
            Some((name, rest)) if rest.ends_with(']') => {
                (name.to_owned(), Some(rest[..rest.len() - 1].to_owned()))
            }
            _ => (last.to_owned(), None),
        };
        cases.push(SuiteCase {
            variant,
            ..SuiteCase::test(&id, &file, &parts.join("::"), &name)
        });
    }
    cases
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UnittestCollection {
    schema: String,
    cases: Vec<UnittestCollected>,
    collection_errors: Vec<crate::outcome::CollectionError>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UnittestCollected {
    id: String,
    file: String,
    class: String,
    name: String,
}

/// A collection that could not be read, or that found broken test modules.
#[derive(Debug, thiserror::Error)]
pub enum CollectionProblem {
    /// The collection output could not be read (not JSON, another schema).
    #[error("the collection report is malformed: {0}")]
    Malformed(String),
    /// The collection found a test module it could not import.
    #[error("collection failed in {file}: {message}")]
    Broken {
        /// The broken module's file.
        file: String,
        /// The import error, as the adapter reported it.
        message: String,
    },
}

/// Reads the unittest adapter's `--collect` report (`assay.unittest.cases/v1`).
pub fn parse_unittest_collection(bytes: &[u8]) -> Result<Vec<SuiteCase>, CollectionProblem> {
    let report: UnittestCollection =
        serde_json::from_slice(bytes).map_err(|e| CollectionProblem::Malformed(e.to_string()))?;
    unittest_cases(report)
}

/// Reads the collection a unittest `--partition` batch recorded in its report
/// (`assay.unittest/v1`'s `collected`); `None` when the report has none.
pub fn parse_unittest_batch_collection(
    report: &[u8],
) -> Result<Option<Vec<SuiteCase>>, CollectionProblem> {
    #[derive(Deserialize)]
    struct Batch {
        #[serde(default)]
        collected: Option<UnittestCollection>,
    }
    let batch: Batch =
        serde_json::from_slice(report).map_err(|e| CollectionProblem::Malformed(e.to_string()))?;
    batch.collected.map(unittest_cases).transpose()
}

fn unittest_cases(report: UnittestCollection) -> Result<Vec<SuiteCase>, CollectionProblem> {
    if report.schema != "assay.unittest.cases/v1" {
        return Err(CollectionProblem::Malformed(format!(
            "schema {:?} is not \"assay.unittest.cases/v1\"",
            report.schema
        )));
    }
    if let Some(error) = report.collection_errors.into_iter().next() {
        return Err(CollectionProblem::Broken {
            file: error.file,
            message: error.message,
        });
    }
    Ok(report
        .cases
        .into_iter()
        .map(|c| SuiteCase::test(&c.id, &c.file, &c.class, &c.name))
        .collect())
}

/// Reads `go test -list . PACKAGES` output: each package's test names, then its `ok` line.
/// Benchmarks, examples and fuzz targets are not tests; packages without tests print `?`.
/// Returns `(import path, test name)` in the order printed.
pub fn parse_go_list(stdout: &str) -> Vec<(String, String)> {
    let mut listed = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    for line in stdout.lines() {
        let line = line.trim_end();
        if let Some(rest) = line.strip_prefix("ok") {
            if let Some(package) = rest.split_whitespace().next() {
                listed.extend(pending.drain(..).map(|name| (package.to_owned(), name)));
            }
            pending.clear();
        } else if line.starts_with("Test") && line.chars().all(|c| c.is_alphanumeric() || c == '_')
        {
            pending.push(line.to_owned());
        } else if !line.starts_with("Benchmark")
            && !line.starts_with("Example")
            && !line.starts_with("Fuzz")
        {
            // A package's failure or "no test files" ends its block.
            pending.clear();
        }
    }
    listed
}

/// One case's outcome in a suite report. `not_run` is neither a failure nor a skip: the case
/// was never admitted (an infrastructure abort or a halt came first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseOutcome {
    /// The case ran and passed.
    Passed,
    /// The case ran and failed.
    Failed,
    /// The case was skipped.
    Skipped,
    /// The case errored, timed out, or its report cannot be trusted.
    Error,
    /// The case was never admitted.
    NotRun,
}

impl CaseOutcome {
    /// The outcome as the report writes it (`not_run`).
    pub fn label(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
            Self::Skipped => "skipped",
            Self::Error => "error",
            Self::NotRun => "not_run",
        }
    }
}

/// Which lane a case's outcome belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    /// The code under test decided the outcome.
    Guest,
    /// The sandbox, the queue or a cancellation decided it: says nothing about the tests.
    Infrastructure,
}

/// A case's outcome as derived from its job's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedOutcome {
    /// The case's outcome.
    pub outcome: CaseOutcome,
    /// Whose outcome it is: the tests' or the infrastructure's.
    pub lane: Lane,
    /// Why, where the outcome has a message (a failure's, an error's).
    pub message: Option<String>,
}

/// What a job result says about one of its cases. Infrastructure failures stay in their own
/// lane; a report that cannot be trusted makes the case an error, never a pass.
pub fn derive_outcome(case: &SuiteCase, result: &JobResult) -> DerivedOutcome {
    let guest = |outcome, message: Option<String>| DerivedOutcome {
        outcome,
        lane: Lane::Guest,
        message,
    };
    match &result.status {
        JobStatus::Infrastructure { message, .. } => {
            return DerivedOutcome {
                outcome: CaseOutcome::Error,
                lane: Lane::Infrastructure,
                message: Some(message.clone()),
            };
        }
        JobStatus::Cancelled => {
            return DerivedOutcome {
                outcome: CaseOutcome::NotRun,
                lane: Lane::Infrastructure,
                message: Some("cancelled".into()),
            };
        }
        JobStatus::TimedOut => {
            return guest(CaseOutcome::Error, Some("timed out".into()));
        }
        JobStatus::Completed { exit_code } => {
            if case.scope == CaseScope::ExitStatus {
                return match exit_code {
                    0 => guest(CaseOutcome::Passed, None),
                    126 | 127 => guest(
                        CaseOutcome::Error,
                        Some(format!(
                            "exit {exit_code}: the test command was not found or is not executable"
                        )),
                    ),
                    code => guest(CaseOutcome::Failed, Some(format!("exit {code}"))),
                };
            }
        }
    }
    let report = match &result.report {
        ReportOutcome::Parsed(report) => report,
        other => return guest(CaseOutcome::Error, other.problem()),
    };
    let mine: Vec<&CaseResult> = report.cases.iter().filter(|r| case.owns(r)).collect();
    if mine.is_empty() {
        let why = report.collection_errors.first().map_or_else(
            || "the report does not name this case".to_owned(),
            |e| format!("collection failed in {}: {}", e.file, e.message),
        );
        return guest(CaseOutcome::Error, Some(why));
    }
    // One failing variant or subtest fails the case.
    let worst = |wanted: Outcome| mine.iter().find(|r| r.outcome == wanted);
    if let Some(r) = worst(Outcome::Failed) {
        return guest(CaseOutcome::Failed, r.message.clone());
    }
    if let Some(r) = worst(Outcome::Error) {
        return guest(CaseOutcome::Error, r.message.clone());
    }
    if mine.iter().all(|r| r.outcome == Outcome::Skipped) {
        return guest(CaseOutcome::Skipped, mine[0].message.clone());
    }
    guest(CaseOutcome::Passed, None)
}

/// `--list-cases` output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseListing {
    /// Always [`CASES_SCHEMA`].
    pub schema: String,
    /// Every collected case, in collection order.
    pub cases: Vec<ListedCase>,
}

/// One collected case in `--list-cases` output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedCase {
    /// The case's stable opaque ref, as `--case` takes it; `ref` in the document.
    #[serde(rename = "ref")]
    pub reference: String,
    /// The case as people read it (a pytest node id).
    pub display: String,
}

impl CaseListing {
    /// The listing of `cases`, in the order given.
    pub fn new<'a>(cases: impl IntoIterator<Item = &'a SuiteCase>) -> Self {
        Self {
            schema: CASES_SCHEMA.into(),
            cases: cases
                .into_iter()
                .map(|c| ListedCase {
                    reference: c.reference(),
                    display: c.display(),
                })
                .collect(),
        }
    }
}

/// How an `assay test` run ended, which is its exit lane and the report's `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// Every case passed or was skipped (quarantined failures do not count).
    Passed,
    /// Test failures or errors, a selection-audit violation, or a command whose status failed.
    Failed,
    /// An infrastructure failure or a halt stopped admission.
    #[serde(rename = "infrastructure_aborted")]
    Aborted,
}

impl Ending {
    /// As the report writes it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
            Self::Aborted => "infrastructure_aborted",
        }
    }
}

impl fmt::Display for Ending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// The `assay.test/v1` report of one `assay test` run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SuiteReport {
    /// [`SUITE_SCHEMA`]; a report of any other is refused when read.
    #[serde(deserialize_with = "suite_schema")]
    pub schema: String,
    /// The run's id, as its history record and cache entries name it.
    pub run_id: String,
    /// `passed`, `failed` or `infrastructure_aborted` (a halt counts as the latter).
    #[serde(deserialize_with = "status")]
    pub status: Ending,
    /// The repository tested, as given.
    pub repository: String,
    /// The branch the run's history is kept under.
    pub branch: String,
    /// The commit tested.
    pub revision: String,
    /// The runner that ran the suite.
    #[serde(deserialize_with = "runner")]
    pub runner: SuiteRunner,
    /// When the run started (RFC 3339, UTC).
    pub started_at: String,
    /// The run's wall time, in seconds.
    pub duration_s: f64,
    /// The cases counted by outcome.
    pub totals: SuiteTotals,
    /// Every case with its outcome, in plan order.
    pub cases: Vec<CaseReport>,
    /// Every job of the run, in plan order.
    pub jobs: Vec<SuiteJobReport>,
    /// Written with its keys sorted, as it always was (see [`crate::json_field`]).
    #[serde(serialize_with = "json_field::sorted", deserialize_with = "audit")]
    pub audit: AuditReport,
    /// Written with its keys sorted, as it always was (see [`crate::json_field`]).
    #[serde(serialize_with = "json_field::sorted", deserialize_with = "history")]
    pub history: HistoryReport,
    /// Why admission stopped early, if it did.
    pub stopped: Option<String>,
    /// The result cache's part in the run; absent in reports written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<SuiteCacheReport>,
}

fn suite_schema<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    json_field::schema(SUITE_SCHEMA, deserializer)
}

fn status<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Ending, D::Error> {
    json_field::named("status", deserializer)
}

fn runner<'de, D: Deserializer<'de>>(deserializer: D) -> Result<SuiteRunner, D::Error> {
    json_field::named("runner", deserializer)
}

fn audit<'de, D: Deserializer<'de>>(deserializer: D) -> Result<AuditReport, D::Error> {
    json_field::named("audit", deserializer)
}

fn history<'de, D: Deserializer<'de>>(deserializer: D) -> Result<HistoryReport, D::Error> {
    json_field::named("history", deserializer)
}

/// The cases of a run counted by outcome.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuiteTotals {
    /// Cases in all.
    pub total: u64,
    /// Cases that passed.
    pub passed: u64,
    /// Cases that failed (quarantined ones not included).
    pub failed: u64,
    /// Cases skipped.
    pub skipped: u64,
    /// Cases that errored (quarantined ones not included).
    pub error: u64,
    /// Cases never admitted.
    pub not_run: u64,
    /// Failed or errored cases listed in the quarantine ledger: reported, not counted.
    pub quarantined: u64,
}

/// One case of a suite report with its outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseReport {
    /// The case's stable opaque ref; `ref` in the document.
    #[serde(rename = "ref")]
    pub reference: String,
    /// The case as people read it (a pytest node id).
    pub display: String,
    /// How it ended.
    pub outcome: CaseOutcome,
    /// Whose outcome it is: the tests' or the infrastructure's.
    pub lane: Lane,
    /// It is listed in the quarantine ledger: reported, not counted.
    pub quarantined: bool,
    /// Why it ended so, where there is a message.
    pub message: Option<String>,
    /// Its wall time in seconds (its share of a batch's where it did not report its own);
    /// `None` when it never ran.
    pub duration_s: Option<f64>,
    /// The job that ran it; with one case per job its stdout/stderr are the case's own.
    pub job: Option<u32>,
    /// What the worker stored of its job's run (captured output).
    pub artifacts: Vec<ArtifactRef>,
    /// Set when the outcome came from the result cache: the entry and the run that produced
    /// it (its duration and artifacts are that run's; `job` is then `null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached: Option<CachedCase>,
    /// Failed when run apart from the cases before it, passed when the whole suite ran in one
    /// process in collection order: its outcome is the latter, its message says both.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub order_dependent: bool,
}

/// The cache entry a case's outcome came from (docs/FORMATS.md, "Suite cases").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedCase {
    /// The entry's key.
    pub entry: String,
    /// The `assay test` run that stored it, and its job that ran the case.
    pub run_id: String,
    /// The job of that run that ran the case.
    pub job_id: String,
}

/// What the result cache did in one `assay test` run (`cache` in the report).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuiteCacheReport {
    /// Cases answered from the cache.
    pub served: u64,
    /// Cases looked up: what `served` is out of.
    pub looked_up: u64,
    /// Entries written after the run.
    pub stored: u64,
    /// Entries found but refused, each with why; those cases ran.
    pub refused: Vec<RefusedEntry>,
    /// Why the cache was not used, when so.
    pub not_used: Option<String>,
    /// Why the passes could not be stored, when so.
    pub store_error: Option<String>,
    /// Why this run's passes were not stored although they could have been: a run whose
    /// selection audit found outliers is not trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withheld: Option<String>,
}

/// A cache entry found but refused, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedEntry {
    /// The entry's key.
    pub entry: String,
    /// Why it was refused, in words.
    pub why: String,
}

/// One job of a suite run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SuiteJobReport {
    /// The job's position in the plan.
    pub index: u32,
    /// The job's id (`{run_id}/{index:04}`).
    pub job_id: String,
    /// The refs of the cases it ran.
    pub cases: Vec<String>,
    /// How it ended (`completed`, `timed_out`, `infrastructure`, `cancelled`).
    pub status: String,
    /// Its wall time on the worker, in seconds.
    pub duration_s: f64,
    /// What the worker stored of its run (captured output).
    pub artifacts: Vec<ArtifactRef>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkerId;
    use crate::manifest::ManifestJob;
    use crate::outcome::TestReport;

    const COLLECTED: &str = "tests/test_pager.py::test_first_page\ntests/test_pager.py::test_page_size[10]\ntests/test_pager.py::TestCursor::test_next\n\n3 tests collected in 0.01s\n";

    #[test]
    fn pytest_collection_reads_node_ids_in_order() {
        let cases = parse_pytest_collection(COLLECTED);
        let ids: Vec<&str> = cases.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "tests/test_pager.py::test_first_page",
                "tests/test_pager.py::test_page_size[10]",
                "tests/test_pager.py::TestCursor::test_next"
            ]
        );
        assert_eq!(cases[1].name, "test_page_size");
        assert_eq!(cases[1].variant.as_deref(), Some("10"));
        assert_eq!(cases[2].class, "TestCursor");
        assert_eq!(
            cases[2].display(),
            "tests/test_pager.py::TestCursor::test_next"
        );
    }

    #[test]
    fn refs_are_stable_opaque_and_checkable() {
        let a = case_ref("tests/test_pager.py::test_first_page");
        assert_eq!(a, case_ref("tests/test_pager.py::test_first_page"));
        assert_ne!(a, case_ref("tests/test_pager.py::test_page_size[10]"));
        assert!(is_well_formed_ref(&a));
        for bad in [
            "",
            "v1.",
            "v2.0123456789abcdef",
            "v1.0123456789ABCDEF",
            "v1.0123",
        ] {
            assert!(!is_well_formed_ref(bad), "{bad}");
        }
    }

    #[test]
    fn unittest_collection_refuses_broken_modules() {
        let ok = br#"{"schema":"assay.unittest.cases/v1","cases":[{"id":"tests.test_invoice.InvoiceTests.test_total","file":"tests/test_invoice.py","class":"InvoiceTests","name":"test_total"}],"collection_errors":[]}"#;
        let cases = parse_unittest_collection(ok).unwrap();
        assert_eq!(
            cases[0].display(),
            "tests/test_invoice.py::InvoiceTests::test_total"
        );
        let broken = br#"{"schema":"assay.unittest.cases/v1","cases":[],"collection_errors":[{"file":"tests/test_tax.py","message":"ImportError: no module named tax"}]}"#;
        let err = parse_unittest_collection(broken).unwrap_err().to_string();
        assert!(err.contains("tests/test_tax.py"), "{err}");
    }

    /// A batch's report is the guest's: its `collected` is read as strictly as a listing, and
    /// anything else in its place is no collection at all.
    #[test]
    fn a_batch_collection_is_read_strictly_or_not_at_all() {
        let report = |collected: &str| {
            format!(
                r#"{{"schema":"assay.unittest/v1","complete":true,"total":0,"cases":[],"collection_errors":[]{collected}}}"#
            )
        };
        assert!(matches!(
            parse_unittest_batch_collection(report("").as_bytes()),
            Ok(None)
        ));
        let listed = r#","collected":{"schema":"assay.unittest.cases/v1","cases":[{"id":"tests.test_invoice.InvoiceTests.test_total","file":"tests/test_invoice.py","class":"InvoiceTests","name":"test_total"}],"collection_errors":[]}"#;
        let cases = parse_unittest_batch_collection(report(listed).as_bytes())
            .unwrap()
            .unwrap();
        assert_eq!(cases.len(), 1);
        for hostile in [
            r#","collected":{"schema":"assay.unittest.cases/v9","cases":[],"collection_errors":[]}"#,
            r#","collected":{"schema":"assay.unittest.cases/v1","cases":[{"id":1}],"collection_errors":[]}"#,
            r#","collected":{"schema":"assay.unittest.cases/v1","cases":[],"collection_errors":[],"extra":true}"#,
            r#","collected":"every test passed""#,
        ] {
            assert!(
                matches!(
                    parse_unittest_batch_collection(report(hostile).as_bytes()),
                    Err(CollectionProblem::Malformed(_))
                ),
                "{hostile}"
            );
        }
        let broken = r#","collected":{"schema":"assay.unittest.cases/v1","cases":[],"collection_errors":[{"file":"tests/test_tax.py","message":"No module named 'tax'"}]}"#;
        assert!(matches!(
            parse_unittest_batch_collection(report(broken).as_bytes()),
            Err(CollectionProblem::Broken { .. })
        ));
    }

    fn result(status: JobStatus, cases: Vec<CaseResult>) -> JobResult {
        JobResult {
            job_id: "t-1/0000".into(),
            index: 0,
            status,
            report: ReportOutcome::Parsed(TestReport {
                cases,
                collection_errors: vec![],
                collection_reruns: Vec::new(),
            }),
            artifacts: vec![],
            duration_ms: 5,
            worker: WorkerId("w".into()),
            sandbox: None,
        }
    }

    fn reported(suite: &str, name: &str, variant: Option<&str>, outcome: Outcome) -> CaseResult {
        CaseResult {
            file: "tests/test_pager.py".into(),
            suite: suite.into(),
            name: name.into(),
            variant: variant.map(String::from),
            outcome,
            message: None,
        }
    }

    #[test]
    fn outcomes_follow_the_report_and_keep_lanes_apart() {
        let cases = parse_pytest_collection(COLLECTED);
        let done = JobStatus::Completed { exit_code: 1 };
        let r = result(
            done.clone(),
            vec![
                reported("tests.test_pager", "test_first_page", None, Outcome::Passed),
                reported(
                    "tests.test_pager",
                    "test_page_size",
                    Some("10"),
                    Outcome::Failed,
                ),
                reported(
                    "tests.test_pager.TestCursor",
                    "test_next",
                    None,
                    Outcome::Skipped,
                ),
            ],
        );
        let outcomes: Vec<CaseOutcome> = cases
            .iter()
            .map(|c| derive_outcome(c, &r).outcome)
            .collect();
        assert_eq!(
            outcomes,
            [
                CaseOutcome::Passed,
                CaseOutcome::Failed,
                CaseOutcome::Skipped
            ]
        );
        let unreported = result(done, vec![]);
        assert_eq!(
            derive_outcome(&cases[0], &unreported).outcome,
            CaseOutcome::Error
        );
        let infra = result(
            JobStatus::Infrastructure {
                message: "tree unavailable".into(),
                cause: crate::fault::InfraCause::TreeFetch,
            },
            vec![],
        );
        let derived = derive_outcome(&cases[0], &infra);
        assert_eq!(derived.lane, Lane::Infrastructure);
        assert_eq!(derived.outcome, CaseOutcome::Error);
    }

    const GO_LIST: &str = "TestExpiry\nTestEvict\nBenchmarkGet\nExampleCache\nok  \texample.com/ledger/cache\t0.004s\n?   \texample.com/ledger/cmd\t[no test files]\nTestBalance\nok  \texample.com/ledger\t0.002s\n";

    #[test]
    fn go_listing_keeps_tests_per_package_in_printed_order() {
        let listed = parse_go_list(GO_LIST);
        let pairs: Vec<(&str, &str)> = listed
            .iter()
            .map(|(p, n)| (p.as_str(), n.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("example.com/ledger/cache", "TestExpiry"),
                ("example.com/ledger/cache", "TestEvict"),
                ("example.com/ledger", "TestBalance"),
            ]
        );
        let broken = "TestA\nFAIL\texample.com/ledger/tax [build failed]\n";
        assert!(parse_go_list(broken).is_empty());
    }

    #[test]
    fn scopes_decide_which_results_a_case_owns() {
        let mut go = SuiteCase::test(
            "example.com/ledger/cache.TestExpiry",
            "cache/cache_test.go",
            "",
            "TestExpiry",
        );
        go.package = Some("example.com/ledger/cache".into());
        let result = |file: &str, name: &str| CaseResult {
            file: file.into(),
            suite: String::new(),
            name: name.into(),
            variant: None,
            outcome: Outcome::Passed,
            message: None,
        };
        assert!(go.owns(&result("example.com/ledger/cache", "TestExpiry/expired")));
        assert!(go.owns(&result("example.com/ledger/cache", "TestExpiry")));
        assert!(!go.owns(&result("example.com/ledger/cache", "TestExpiryLate")));
        assert!(!go.owns(&result("example.com/ledger", "TestExpiry")));
        // A class owns its own results only, not those of a class whose name ends like it.
        let last = parse_pytest_collection("tests/test_more.py::LastTests::test_basic\n");
        let reported = |suite: &str| CaseResult {
            file: "tests/test_more.py".into(),
            suite: suite.into(),
            ..result("tests/test_more.py", "test_basic")
        };
        assert!(last[0].owns(&reported("tests.test_more.LastTests")));
        assert!(last[0].owns(&reported("LastTests")));
        assert!(!last[0].owns(&reported("tests.test_more.RepeatLastTests")));
        let nested = parse_pytest_collection("tests/test_more.py::Outer::LastTests::test_basic\n");
        assert!(nested[0].owns(&reported("tests.test_more.Outer.LastTests")));
        assert!(!nested[0].owns(&reported("tests.test_more.RepeatOuter.LastTests")));
        let file = SuiteCase::whole_file("test/invoice.test.js");
        assert!(file.owns(&result("test/invoice.test.js", "adds tax")));
        assert!(!file.owns(&result("test/pager.test.js", "adds tax")));
        assert_eq!(file.display(), "test/invoice.test.js");
        let command = SuiteCase::whole_command("make check", CaseScope::Report);
        assert!(command.owns(&result("anything", "at all")));
        assert_eq!(command.display(), "make check");
    }

    #[test]
    fn a_manifest_row_owns_its_result_and_its_own_outputs() {
        let rows = crate::manifest::parse_manifest(
            "integer/halve.inv\tinteger\t4\nhalve.inv\tinteger\t4\n",
        )
        .unwrap();
        let corpus = ManifestJob {
            corpus: crate::tree_path::TreeDir::new("corpus").unwrap(),
            cases: rows.clone(),
        };
        let nested = SuiteCase::manifest_row(&corpus, &rows[0]);
        assert_eq!(nested.display(), "corpus/integer/halve.inv");
        let reported = |file: &str, name: &str| CaseResult {
            file: file.into(),
            suite: String::new(),
            name: name.into(),
            variant: None,
            outcome: Outcome::Failed,
            message: None,
        };
        assert!(nested.owns(&reported("corpus/manifest.tsv", "integer/halve.inv")));
        assert!(!nested.owns(&reported("corpus/manifest.tsv", "halve.inv")));
        assert!(!nested.owns(&reported("other/manifest.tsv", "integer/halve.inv")));
        let at_root = ManifestJob {
            corpus: crate::tree_path::TreeDir::root(),
            cases: rows.clone(),
        };
        let top = SuiteCase::manifest_row(&at_root, &rows[1]);
        assert!(top.owns(&reported("manifest.tsv", "halve.inv")));
        assert!(!top.owns(&reported("corpus/manifest.tsv", "halve.inv")));
        let artifact = |name: &str| ArtifactRef {
            name: name.into(),
            key: format!("proofs/t-1/jobs/0000/{name}"),
            sha256: String::new(),
            bytes: 0,
            dropped_bytes: 0,
        };
        let job = [
            artifact("integer/halve.inv:stdout"),
            artifact("integer/halve.inv:stderr"),
            artifact("integer/halve.inv.bak:stdout"),
        ];
        let own: Vec<String> = nested
            .own_artifacts(&job)
            .into_iter()
            .map(|a| a.name)
            .collect();
        assert_eq!(
            own,
            ["integer/halve.inv:stdout", "integer/halve.inv:stderr"]
        );
    }

    #[test]
    fn a_command_case_is_judged_by_its_exit_status() {
        let case = SuiteCase::whole_command("./ci/check.sh", CaseScope::ExitStatus);
        let judged = |status: JobStatus| {
            let mut r = result(status, vec![]);
            r.report = ReportOutcome::Missing;
            derive_outcome(&case, &r)
        };
        let done = |code| JobStatus::Completed { exit_code: code };
        assert_eq!(judged(done(0)).outcome, CaseOutcome::Passed);
        assert_eq!(judged(done(1)).outcome, CaseOutcome::Failed);
        for code in [126, 127] {
            let derived = judged(done(code));
            assert_eq!(derived.outcome, CaseOutcome::Error);
            assert!(
                derived
                    .message
                    .unwrap_or_default()
                    .contains("not found or is not executable")
            );
        }
        assert_eq!(judged(JobStatus::TimedOut).outcome, CaseOutcome::Error);
    }
}
