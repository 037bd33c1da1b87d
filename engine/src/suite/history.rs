//! Suite history per repository and branch: every run's counts, coverage and status, the last
//! 50 kept, and alerts for new failures or a coverage drop against the last run that did not
//! end in error. A corrupt file is treated as a first run and rewritten, never a crash.

use assay_common::TreeId;
use assay_common::job::{JobResult, JobStatus};
use assay_common::outcome::{Outcome, ReportOutcome};
use assay_common::report::summary::SuiteStatus;
pub use assay_common::suite_history::{Alert, RunRecord};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The history file's schema; a file of another is not read.
pub const SCHEMA: &str = "assay.history/v1";
/// Runs a history file keeps; older ones are dropped.
pub const KEEP_RUNS: usize = 50;
/// Coverage drop, in percentage points, that raises an alert unless configured otherwise.
pub const DEFAULT_COVERAGE_DROP_THRESHOLD: f64 = 5.0;

/// One branch's suite history: its recent runs and what the next run plans with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct History {
    /// The file's schema, [`SCHEMA`].
    pub schema: String,
    /// The repository's name.
    pub repository: String,
    /// The branch the runs are of.
    pub branch: String,
    /// Runs recorded since the file began, including dropped ones.
    pub run_count: u64,
    /// The last [`KEEP_RUNS`] runs, oldest first.
    pub runs: Vec<RunRecord>,
    /// Last observed duration in seconds per case ref, for sharding the next run.
    pub durations: BTreeMap<String, f64>,
    /// The cases the last pytest run collected, so the next run can batch them at once; its
    /// batches collect the suite themselves and name what was added or removed since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cases: Option<CaseList>,
}

/// A suite's collected cases as one run saw them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseList {
    /// The runner's command prefix they were collected with; another command may collect
    /// other cases, so its runs do not use them.
    pub command: Vec<String>,
    /// Node ids in collection order.
    pub ids: Vec<String>,
    /// A runner session's start-up and collection, in seconds: what each batch pays before its
    /// first test (see [`crate::suite::shard::batch_costs`]).
    pub startup_s: Option<f64>,
    /// The tree they were collected from: only a run of that tree may answer every case from
    /// the result cache without a batch collecting them. Absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree: Option<TreeId>,
}

/// What a finished run contributes to history.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    /// When the run started, as the report writes it.
    pub timestamp: String,
    /// The run's id.
    pub run_id: String,
    /// Cases selected.
    pub total: u64,
    /// Cases that passed.
    pub passed: u64,
    /// Cases that failed or errored.
    pub failed: u64,
    /// Cases skipped.
    pub skipped: u64,
    /// Line coverage, in percent, when measured.
    pub coverage_pct: Option<f64>,
    /// The run's wall-clock time, in seconds.
    pub duration_s: Option<f64>,
    /// How the run ended.
    pub status: SuiteStatus,
    /// Why, when the status alone does not say.
    pub status_detail: Option<String>,
    /// Cases answered from the result cache.
    pub cached: u64,
    /// The failed cases' refs.
    pub failed_cases: Vec<String>,
}

impl RunSummary {
    /// What one suite job of a proof contributes: counts from its parsed report, `failing`
    /// when a test failed or errored, `error` when the job ended without a report to trust.
    pub fn of_job(
        run_id: String,
        timestamp: String,
        result: &JobResult,
        coverage_pct: Option<f64>,
    ) -> Self {
        let mut run = Self {
            timestamp,
            run_id,
            total: 0,
            passed: 0,
            failed: 0,
            skipped: 0,
            coverage_pct,
            duration_s: Some(result.duration_ms as f64 / 1000.0),
            status: SuiteStatus::Error,
            status_detail: None,
            cached: 0,
            failed_cases: Vec::new(),
        };
        let report = match (&result.status, &result.report) {
            (JobStatus::Completed { .. }, ReportOutcome::Parsed(report)) => report,
            (JobStatus::Completed { exit_code }, unusable) => {
                let problem = unusable.problem().unwrap_or_default();
                run.status_detail = Some(format!("exit {exit_code}: {problem}"));
                return run;
            }
            (JobStatus::Infrastructure { message, .. }, _) => {
                run.status_detail = Some(format!("infrastructure: {message}"));
                return run;
            }
            (status, _) => {
                run.status_detail = Some(status.label().to_owned());
                return run;
            }
        };
        run.total = report.cases.len() as u64;
        for case in &report.cases {
            match case.outcome {
                Outcome::Passed => run.passed += 1,
                Outcome::Skipped => run.skipped += 1,
                Outcome::Failed | Outcome::Error => {
                    run.failed += 1;
                    run.failed_cases.push(case.identity());
                }
            }
        }
        run.failed_cases
            .extend(report.collection_errors.iter().map(|e| e.file.clone()));
        run.status = if run.failed_cases.is_empty() {
            SuiteStatus::Passing
        } else {
            SuiteStatus::Failing
        };
        run
    }
}

impl History {
    /// An empty history of `branch` of `repository`.
    pub fn new(repository: &str, branch: &str) -> Self {
        Self {
            schema: SCHEMA.into(),
            repository: repository.into(),
            branch: branch.into(),
            run_count: 0,
            runs: Vec::new(),
            durations: BTreeMap::new(),
            cases: None,
        }
    }

    /// The run later runs are compared against.
    pub fn last_comparable(&self) -> Option<&RunRecord> {
        self.runs
            .iter()
            .rev()
            .find(|r| r.status != SuiteStatus::Error)
    }

    /// Appends a run, computing its deltas and alerts, and keeps the last [`KEEP_RUNS`].
    pub fn record(&mut self, run: RunSummary, coverage_threshold: f64) -> &RunRecord {
        let previous = match run.status {
            // An errored run says nothing about regressions, and is no baseline either.
            SuiteStatus::Error => None,
            _ => self.last_comparable().cloned(),
        };
        self.append(run, previous.as_ref(), coverage_threshold)
    }

    /// Appends a run that the next run is compared against but that is not compared itself: a
    /// proof's base-suite runs the code before the change, so a failure the change fixes is
    /// no regression of the branch, whatever the last run showed.
    pub fn record_baseline(&mut self, run: RunSummary) -> &RunRecord {
        self.append(run, None, 0.0)
    }

    fn append(
        &mut self,
        run: RunSummary,
        previous: Option<&RunRecord>,
        coverage_threshold: f64,
    ) -> &RunRecord {
        let mut record = RunRecord {
            timestamp: run.timestamp,
            run_id: run.run_id,
            total: run.total,
            passed: run.passed,
            failed: run.failed,
            skipped: run.skipped,
            coverage_pct: run.coverage_pct,
            duration_s: run.duration_s,
            cached: run.cached,
            status: run.status,
            status_detail: run.status_detail,
            new_failures: 0,
            coverage_drop: 0.0,
            failed_cases: run.failed_cases,
            newly_failing: Vec::new(),
            alerts: Vec::new(),
        };
        if let Some(previous) = previous {
            record.new_failures = record.failed.saturating_sub(previous.failed);
            let before: BTreeSet<&String> = previous.failed_cases.iter().collect();
            record.newly_failing = record
                .failed_cases
                .iter()
                .filter(|c| !before.contains(c))
                .cloned()
                .collect();
            if let (Some(was), Some(now)) = (previous.coverage_pct, record.coverage_pct) {
                record.coverage_drop = round1((was - now).max(0.0));
            }
            let regressions = record.new_failures.max(record.newly_failing.len() as u64);
            if regressions > 0 {
                let mut detail = format!(
                    "{regressions} new failure{} (was {}, now {})",
                    if regressions == 1 { "" } else { "s" },
                    previous.failed,
                    record.failed
                );
                if !record.newly_failing.is_empty() {
                    detail.push_str(&format!(": {}", record.newly_failing.join(", ")));
                }
                record.alerts.push(Alert {
                    severity: "warning".into(),
                    kind: "regression".into(),
                    detail,
                });
            }
            if record.coverage_drop > coverage_threshold {
                record.alerts.push(Alert {
                    severity: "warning".into(),
                    kind: "coverage_drop".into(),
                    detail: format!(
                        "coverage dropped {:.1} points ({:.1}% -> {:.1}%)",
                        record.coverage_drop,
                        previous.coverage_pct.unwrap_or_default(),
                        record.coverage_pct.unwrap_or_default()
                    ),
                });
            }
        }
        self.run_count += 1;
        self.runs.push(record);
        if self.runs.len() > KEEP_RUNS {
            let excess = self.runs.len() - KEEP_RUNS;
            self.runs.drain(..excess);
        }
        &self.runs[self.runs.len() - 1]
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// One line per run: `Tests: 142/145 passed, 0 skipped (87.3% coverage) | Status: failing |
/// vs previous: 3 new failures, coverage down 1.2 points | Alerts: [warning] regression — 3
/// new failures`.
pub fn trend_line(run: &RunRecord, previous: Option<&RunRecord>) -> String {
    let coverage = run.coverage_pct.map_or_else(
        || "(coverage: n/a)".to_owned(),
        |c| format!("({c:.1}% coverage)"),
    );
    let tests = if run.total == 0 && run.status != SuiteStatus::Error {
        "Tests: 0 found (check the test command's output)".to_owned()
    } else {
        let cached = match run.cached {
            0 => String::new(),
            n => format!(" ({n} from the cache)"),
        };
        format!(
            "Tests: {}/{} passed{cached}, {} skipped {coverage}",
            run.passed, run.total, run.skipped
        )
    };
    let delta = match previous {
        None => "first run / no comparison available".to_owned(),
        Some(prev) => {
            let mut text = failures_delta(prev.failed, run.failed);
            if let (Some(now), Some(was)) = (run.coverage_pct, prev.coverage_pct) {
                text.push_str(", ");
                text.push_str(&coverage_delta(was, now));
            }
            text
        }
    };
    let alerts = if run.alerts.is_empty() {
        "none".to_owned()
    } else {
        run.alerts
            .iter()
            .map(|a| format!("[{}] {} — {}", a.severity, a.kind, a.detail))
            .collect::<Vec<_>>()
            .join("; ")
    };
    format!(
        "{tests} | Status: {} | vs previous: {delta} | Alerts: {alerts}",
        run.status.label()
    )
}

/// How the failure count moved, in words: a signed count (`-616 failed`) reads as 616
/// failures at a glance.
fn failures_delta(was: u64, now: u64) -> String {
    let plural = |n: u64| if n == 1 { "failure" } else { "failures" };
    match now.cmp(&was) {
        std::cmp::Ordering::Greater => format!("{} new {}", now - was, plural(now - was)),
        std::cmp::Ordering::Less => format!("{} fewer {}", was - now, plural(was - now)),
        std::cmp::Ordering::Equal => "failures unchanged".to_owned(),
    }
}

/// How coverage moved, in points (a percentage of a percentage would be ambiguous).
fn coverage_delta(was: f64, now: f64) -> String {
    let points = round1(now - was);
    let unit = |p: f64| if p == 1.0 { "point" } else { "points" };
    if points > 0.0 {
        format!("coverage up {points:.1} {}", unit(points))
    } else if points < 0.0 {
        format!("coverage down {:.1} {}", -points, unit(-points))
    } else {
        "coverage unchanged".to_owned()
    }
}

/// Why a suite history could not be saved.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The history file could not be written.
    #[error("failed to write suite history {path}")]
    Write {
        /// The history file.
        path: PathBuf,
        /// The write's failure.
        #[source]
        source: std::io::Error,
    },
    /// The history could not be encoded as JSON.
    #[error("failed to encode suite history")]
    Encode(#[source] serde_json::Error),
}

/// `STATE/history/NAME-HASH/BRANCH.json`: readable names, a hash so two checkouts of
/// projects with the same directory name never share a file.
pub fn history_path(state_dir: &Path, repository: &str, branch: &str) -> PathBuf {
    let name = repository
        .rsplit('/')
        .find(|p| !p.is_empty())
        .unwrap_or("repo");
    state_dir
        .join("history")
        .join(format!(
            "{}-{:016x}",
            file_safe(name),
            fnv1a(repository.as_bytes())
        ))
        .join(format!("{}.json", file_safe(branch)))
}

fn file_safe(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Loads history; a missing file is a first run, and so is a corrupt one (reported in the
/// second value so the caller can say so).
pub fn load(path: &Path, repository: &str, branch: &str) -> (History, Option<String>) {
    let fresh = || History::new(repository, branch);
    match std::fs::read(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (fresh(), None),
        Err(e) => (fresh(), Some(format!("unreadable: {e}"))),
        Ok(bytes) => match serde_json::from_slice::<History>(&bytes) {
            Ok(history) if history.schema == SCHEMA => (history, None),
            Ok(history) => (
                fresh(),
                Some(format!("unknown schema {:?}", history.schema)),
            ),
            Err(e) => (fresh(), Some(format!("corrupt: {e}"))),
        },
    }
}

/// Writes via a sibling and a rename, so a reader never sees half a file.
pub fn save(path: &Path, history: &History) -> Result<(), HistoryError> {
    let bytes = serde_json::to_vec_pretty(history).map_err(HistoryError::Encode)?;
    let write = |p: &Path, f: &dyn Fn() -> std::io::Result<()>| {
        f().map_err(|source| HistoryError::Write {
            path: p.to_owned(),
            source,
        })
    };
    if let Some(dir) = path.parent() {
        write(dir, &|| std::fs::create_dir_all(dir))?;
    }
    let tmp = path.with_extension("json.tmp");
    write(&tmp, &|| std::fs::write(&tmp, &bytes))?;
    write(path, &|| std::fs::rename(&tmp, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(failed: &[&str], total: u64, coverage: Option<f64>, status: SuiteStatus) -> RunSummary {
        RunSummary {
            timestamp: "2026-11-29T10:00:00Z".into(),
            run_id: "t-1".into(),
            total,
            passed: total - failed.len() as u64,
            failed: failed.len() as u64,
            skipped: 0,
            coverage_pct: coverage,
            duration_s: None,
            status,
            status_detail: None,
            cached: 0,
            failed_cases: failed.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_run_recorded_before_durations_were_kept_still_loads() {
        let old = serde_json::json!({
            "timestamp": "2026-11-29T10:00:00Z", "run_id": "t-1", "total": 2, "passed": 2,
            "failed": 0, "skipped": 0, "coverage_pct": null, "status": "passing",
            "status_detail": null, "new_failures": 0, "coverage_drop": 0.0, "failed_cases": [],
            "newly_failing": [], "alerts": []
        });
        let run: RunRecord = serde_json::from_value(old.clone()).expect("an older run reads");
        assert_eq!(run.duration_s, None);
        assert_eq!(serde_json::to_value(&run).unwrap(), old);
    }

    #[test]
    fn a_proofs_base_suite_is_a_baseline_not_a_regression_of_the_last_candidate() {
        let mut history = History::new("/srv/pricing", "fix-discount");
        for _ in 0..2 {
            let base =
                history.record_baseline(run(&["test_discount"], 2, None, SuiteStatus::Failing));
            assert!(
                base.alerts.is_empty() && base.newly_failing.is_empty(),
                "{base:?}"
            );
            let candidate = history.record(run(&[], 2, None, SuiteStatus::Passing), 5.0);
            assert!(candidate.alerts.is_empty(), "{candidate:?}");
        }
        // A candidate that breaks what its base passed is still a regression.
        history.record_baseline(run(&[], 2, None, SuiteStatus::Passing));
        let broken = history.record(
            run(&["test_full_price"], 2, None, SuiteStatus::Failing),
            5.0,
        );
        assert_eq!(broken.alerts.len(), 1, "{broken:?}");
        assert_eq!(broken.newly_failing.len(), 1);
    }

    #[test]
    fn new_failures_and_coverage_drops_raise_alerts_against_the_last_comparable_run() {
        use SuiteStatus::*;
        let mut history = History::new("/src/invoice", "main");
        assert!(
            history
                .record(run(&[], 10, Some(90.0), Passing), 5.0)
                .alerts
                .is_empty()
        );
        // An errored run neither alerts nor becomes the baseline.
        assert!(
            history
                .record(run(&[], 0, None, Error), 5.0)
                .alerts
                .is_empty()
        );
        let third = history
            .record(run(&["tax", "total"], 10, Some(84.0), Failing), 5.0)
            .clone();
        assert_eq!(third.new_failures, 2);
        assert_eq!(third.coverage_drop, 6.0);
        let kinds: Vec<&str> = third.alerts.iter().map(|a| a.kind.as_str()).collect();
        assert_eq!(kinds, ["regression", "coverage_drop"]);
        assert_eq!(
            third.alerts[0].detail,
            "2 new failures (was 0, now 2): tax, total"
        );
        // The same failures again: nothing new, a small drop under the threshold.
        let fourth = history
            .record(run(&["tax", "total"], 10, Some(82.0), Failing), 5.0)
            .clone();
        assert_eq!((fourth.new_failures, fourth.coverage_drop), (0, 2.0));
        assert!(fourth.alerts.is_empty());
        // One fixed, another broken: the count stays, the name is new.
        let fifth = history
            .record(run(&["tax", "round"], 10, Some(82.0), Failing), 5.0)
            .clone();
        assert_eq!(fifth.newly_failing, ["round"]);
        assert_eq!(fifth.alerts.len(), 1);
    }

    #[test]
    fn history_keeps_the_last_fifty_runs() {
        let mut history = History::new("/src/invoice", "main");
        for i in 0..55 {
            let mut r = run(&[], 3, None, SuiteStatus::Passing);
            r.run_id = format!("t-{i}");
            history.record(r, 5.0);
        }
        assert_eq!(history.runs.len(), KEEP_RUNS);
        assert_eq!(history.runs[0].run_id, "t-5");
        assert_eq!(history.run_count, 55);
    }

    #[test]
    fn a_corrupt_history_file_starts_over_and_is_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = history_path(dir.path(), "/src/invoice", "feature/tax");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"{ not json").unwrap();
        let (mut history, problem) = load(&path, "/src/invoice", "feature/tax");
        assert!(problem.unwrap().starts_with("corrupt"));
        history.record(run(&[], 2, None, SuiteStatus::Passing), 5.0);
        save(&path, &history).unwrap();
        let (again, problem) = load(&path, "/src/invoice", "feature/tax");
        assert_eq!(problem, None);
        assert_eq!(again.runs.len(), 1);
        assert!(path.to_string_lossy().ends_with("feature_tax.json"));
    }

    #[test]
    fn the_trend_line_reads_like_the_tracker_summary() {
        let mut history = History::new("/src/invoice", "main");
        history.record(run(&[], 145, Some(88.5), SuiteStatus::Passing), 5.0);
        history.record(
            run(&["a", "b", "c"], 145, Some(87.3), SuiteStatus::Failing),
            5.0,
        );
        let line = trend_line(&history.runs[1], Some(&history.runs[0]));
        assert_eq!(
            line,
            "Tests: 142/145 passed, 0 skipped (87.3% coverage) | Status: failing | vs previous: 3 new failures, coverage down 1.2 points | Alerts: [warning] regression — 3 new failures (was 0, now 3): a, b, c"
        );
        assert!(trend_line(&history.runs[0], None).contains("first run"));
    }

    #[test]
    fn the_delta_says_what_changed_in_words() {
        /// (failed before, failed now, coverage before, coverage now, the delta)
        type Row<'a> = (u64, u64, Option<f64>, Option<f64>, &'a str);
        let table: &[Row<'_>] = &[
            (616, 0, None, None, "616 fewer failures"),
            (0, 47, None, None, "47 new failures"),
            (2, 3, None, None, "1 new failure"),
            (3, 2, None, None, "1 fewer failure"),
            (5, 5, None, None, "failures unchanged"),
            (
                0,
                0,
                Some(80.0),
                Some(81.0),
                "failures unchanged, coverage up 1.0 point",
            ),
            (
                1,
                0,
                Some(88.5),
                Some(87.3),
                "1 fewer failure, coverage down 1.2 points",
            ),
            (
                1,
                1,
                Some(50.0),
                Some(50.0),
                "failures unchanged, coverage unchanged",
            ),
        ];
        for &(was, now, was_cov, now_cov, want) in table {
            let record = |failed: u64, coverage| RunRecord {
                timestamp: "2026-11-29T10:00:00Z".into(),
                run_id: "t-1".into(),
                total: 700,
                passed: 700 - failed,
                failed,
                skipped: 0,
                coverage_pct: coverage,
                duration_s: None,
                status: SuiteStatus::Failing,
                status_detail: None,
                cached: 0,
                new_failures: 0,
                coverage_drop: 0.0,
                failed_cases: Vec::new(),
                newly_failing: Vec::new(),
                alerts: Vec::new(),
            };
            let line = trend_line(&record(now, now_cov), Some(&record(was, was_cov)));
            assert!(
                line.contains(&format!("| vs previous: {want} |")),
                "{was} -> {now}: {line}"
            );
        }
    }

    #[test]
    fn a_proof_suite_job_counts_its_report_and_an_unusable_one_is_an_error() {
        use assay_common::WorkerId;
        use assay_common::outcome::{CaseResult, TestReport};
        let case = |name: &str, outcome| CaseResult {
            file: "tests/test_pages.py".into(),
            suite: "tests.test_pages".into(),
            name: name.into(),
            variant: None,
            outcome,
            message: None,
        };
        let job = |status, report| JobResult {
            job_id: "p-1/0003".into(),
            index: 3,
            status,
            report,
            artifacts: vec![],
            duration_ms: 40,
            worker: WorkerId("embedded-1".into()),
            sandbox: None,
        };
        let done = JobStatus::Completed { exit_code: 1 };
        let report = ReportOutcome::Parsed(TestReport {
            cases: vec![
                case("test_full_pages", Outcome::Passed),
                case("test_partial_last_page", Outcome::Failed),
                case("test_huge_totals", Outcome::Skipped),
            ],
            collection_errors: vec![],
            collection_reruns: Vec::new(),
        });
        let stamp = || "2026-11-29T10:00:00Z".to_owned();
        let run = RunSummary::of_job(
            "p-1-candidate-suite".into(),
            stamp(),
            &job(done.clone(), report),
            Some(91.5),
        );
        assert_eq!(
            (run.total, run.passed, run.failed, run.skipped),
            (3, 1, 1, 1)
        );
        assert_eq!(run.status, SuiteStatus::Failing);
        assert_eq!(run.coverage_pct, Some(91.5));
        assert_eq!(
            run.failed_cases,
            ["tests/test_pages.py::tests.test_pages::test_partial_last_page"]
        );
        let missing = RunSummary::of_job(
            "p-1-base-suite".into(),
            stamp(),
            &job(done, ReportOutcome::Missing),
            None,
        );
        assert_eq!((missing.status, missing.total), (SuiteStatus::Error, 0));
        assert!(
            missing
                .status_detail
                .unwrap_or_default()
                .contains("no report")
        );
        let timed_out = RunSummary::of_job(
            "p-1-base-suite".into(),
            stamp(),
            &job(JobStatus::TimedOut, ReportOutcome::Missing),
            None,
        );
        assert_eq!(timed_out.status_detail.as_deref(), Some("timed_out"));
    }
}
