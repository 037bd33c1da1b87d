//! A finished suite run decided: each case's outcome and lane, quarantine excusal, the totals,
//! the selection audit, the run's status and exit lane, and what it records in history. An
//! embedded run and a fleet run (`assay test --cluster`) come through here alike; the CLI only
//! prints and writes what this returns.

use super::StopReason;
use super::audit::{self, JobSelection, SelectionAudit};
use super::driven::Driven;
use super::history::{CaseList, History, RunRecord, RunSummary};
use super::ledger::Ledger;
use super::runners::SuiteRunner;
use super::shard;
use super::split::{self, CaseShare};
use assay_common::ProofId;
use assay_common::job::{JobKind, JobResult, JobSpec, JobStatus, Side};
use assay_common::report::summary::{self, SuiteStatus};
use assay_common::suite::{
    CaseOutcome, CaseReport, Lane, SuiteCase, SuiteJobReport, SuiteTotals, derive_outcome,
};
use assay_transport::store::{ArtifactStore, read_named};

/// One case's outcome as its job's result gives it, with the ledger's excusal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaseVerdict<'a> {
    /// The case judged.
    pub case: &'a SuiteCase,
    /// What the case did: passed, failed, errored, skipped, …
    pub outcome: CaseOutcome,
    /// Whose failure it is: the test's (guest) or the infrastructure's.
    pub lane: Lane,
    /// Whether the ledger excuses this failure.
    pub quarantined: bool,
}

/// What a finished job says about one of its cases.
pub fn verdict<'a>(
    case: &'a SuiteCase,
    result: &JobResult,
    ledger: &Ledger,
    today: &str,
) -> CaseVerdict<'a> {
    let derived = derive_outcome(case, result);
    CaseVerdict {
        case,
        quarantined: excused(derived.outcome, derived.lane, ledger, &case.id, today),
        outcome: derived.outcome,
        lane: derived.lane,
    }
}

/// Does the ledger excuse this outcome? Only a failure or error in the guest lane of a case
/// with an unexpired entry; an infrastructure failure is never the test's.
pub fn excused(outcome: CaseOutcome, lane: Lane, ledger: &Ledger, id: &str, today: &str) -> bool {
    matches!(outcome, CaseOutcome::Failed | CaseOutcome::Error)
        && lane == Lane::Guest
        && ledger.excuses(id, today)
}

/// Counts of a run as history records them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunCounts {
    /// Cases counted.
    pub total: u64,
    /// Cases that passed.
    pub passed: u64,
    /// Cases that failed or errored.
    pub failed: u64,
    /// Cases skipped.
    pub skipped: u64,
}

pub use assay_common::suite::Ending;

/// A suite run decided.
#[derive(Clone, Debug)]
pub struct SuiteOutcome {
    /// Every selected case, in plan order.
    pub cases: Vec<CaseReport>,
    /// Every job that returned a result, in plan order.
    pub jobs: Vec<SuiteJobReport>,
    /// The report's counts, by outcome and lane.
    pub totals: SuiteTotals,
    /// The selection audit: collected, selected and executed cases, and outliers.
    pub selection: SelectionAudit,
    /// The status history records; `error` for an aborted run.
    pub status: SuiteStatus,
    /// Why, when the status alone does not say.
    pub status_detail: Option<String>,
    /// The counts history records (for a command run, its own summary line's when it prints
    /// one).
    pub counts: RunCounts,
    /// The suite's coverage, when the run was one job whose output names it.
    pub coverage_pct: Option<f64>,
    /// Failed and errored guest-lane cases the ledger does not excuse.
    pub guest_failures: u64,
    /// Why admission stopped early, if it did.
    pub stopped: Option<StopReason>,
    /// What each case costs a batch (see [`shard::batch_costs`]), by case in plan order.
    pub costs: Vec<Option<f64>>,
    /// Problems that leave the result standing (a batch whose output could not be split).
    pub warnings: Vec<String>,
}

impl SuiteOutcome {
    /// Whether the run passed, failed or was aborted.
    pub fn ending(&self) -> Ending {
        ending(self.stopped.is_some(), self.status)
    }

    /// A scope gate of the audit (read-set closure, inventory) failed: the run fails as a
    /// containment violation does, whatever its cases did, unless it was aborted.
    pub fn fail_audit(&mut self) {
        if self.status == SuiteStatus::Passing {
            self.status = SuiteStatus::Failing;
        }
    }

    /// What this run contributes to history.
    pub fn summary(&self, run_id: &str, timestamp: String, duration_s: f64) -> RunSummary {
        RunSummary {
            timestamp,
            run_id: run_id.to_owned(),
            total: self.counts.total,
            passed: self.counts.passed,
            failed: self.counts.failed,
            skipped: self.counts.skipped,
            coverage_pct: self.coverage_pct,
            duration_s: Some(duration_s),
            status: self.status,
            status_detail: self.status_detail.clone(),
            cached: self.cases.iter().filter(|c| c.cached.is_some()).count() as u64,
            failed_cases: self
                .cases
                .iter()
                .filter(|c| matches!(c.outcome, CaseOutcome::Failed | CaseOutcome::Error))
                .filter(|c| c.lane == Lane::Guest && !c.quarantined)
                .map(|c| c.display.clone())
                .collect(),
        }
    }

    /// Records the run in `history`: each guest-lane case's cost (or own time) for the next
    /// run's balance, the cases it collected when the next run can be batched from them, and
    /// the run with its deltas and alerts.
    pub fn record(
        &self,
        history: &mut History,
        summary: RunSummary,
        coverage_threshold: f64,
        cases: Option<CaseList>,
    ) -> RunRecord {
        record_durations(history, &self.cases, &self.costs);
        if let Some(cases) = cases {
            history.cases = Some(cases);
        }
        history.record(summary, coverage_threshold).clone()
    }
}

/// Each guest-lane case's batch cost, else its own time, into history's durations. A case
/// the cache answered ran in no batch of this run: its recorded duration stays.
pub fn record_durations(history: &mut History, cases: &[CaseReport], costs: &[Option<f64>]) {
    for (case, cost) in cases.iter().zip(costs) {
        if let Some(d) = cost.or(case.duration_s)
            && case.lane == Lane::Guest
            && case.cached.is_none()
        {
            history.durations.insert(case.reference.clone(), d);
        }
    }
}

/// The exit lane: an aborted run is aborted whatever its cases did; otherwise a passing status
/// passes.
pub fn ending(aborted: bool, status: SuiteStatus) -> Ending {
    if aborted {
        Ending::Aborted
    } else if status == SuiteStatus::Passing {
        Ending::Passed
    } else {
        Ending::Failed
    }
}

/// The totals of a report's cases: a quarantined case counts only as quarantined.
pub fn totals(cases: &[CaseReport]) -> SuiteTotals {
    let mut totals = SuiteTotals {
        total: cases.len() as u64,
        ..SuiteTotals::default()
    };
    for case in cases {
        if case.quarantined {
            totals.quarantined += 1;
            continue;
        }
        match case.outcome {
            CaseOutcome::Passed => totals.passed += 1,
            CaseOutcome::Failed => totals.failed += 1,
            CaseOutcome::Skipped => totals.skipped += 1,
            CaseOutcome::Error => totals.error += 1,
            CaseOutcome::NotRun => totals.not_run += 1,
        }
    }
    totals
}

/// Failures that count: failed cases and guest-lane errors the ledger does not excuse.
pub fn guest_failures(totals: &SuiteTotals, cases: &[CaseReport]) -> u64 {
    totals.failed
        + cases
            .iter()
            .filter(|c| c.outcome == CaseOutcome::Error && c.lane == Lane::Guest && !c.quarantined)
            .count() as u64
}

/// The run's status and counts for history. `single` is the run's one job with its output,
/// when it was one job: a command run's status is its exit status, and its counts are its
/// summary line's when it prints one.
pub fn status(
    stopped: Option<&StopReason>,
    runner: SuiteRunner,
    single: Option<(&JobResult, &str)>,
    timeout_secs: u64,
    guest_failures: u64,
    contained: bool,
    counts: RunCounts,
) -> (SuiteStatus, Option<String>, RunCounts) {
    if let Some(stopped) = stopped {
        return (SuiteStatus::Error, Some(stopped.to_string()), counts);
    }
    if let (true, Some((result, text))) = (runner.runner().counts_from_output(), single) {
        let counts = summary::parse_counts(text).map_or(counts, |found| RunCounts {
            total: found.total,
            passed: found.passed,
            failed: found.failed,
            skipped: found.skipped,
        });
        let exit_code = match result.status {
            JobStatus::Completed { exit_code } => Some(exit_code),
            _ => None,
        };
        let (status, detail) = summary::status_of(exit_code, timeout_secs);
        return (status, detail, counts);
    }
    if guest_failures > 0 || !contained {
        (SuiteStatus::Failing, None, counts)
    } else {
        (SuiteStatus::Passing, None, counts)
    }
}

/// A case's report from its job's result (`job` is `None` for a case never admitted).
pub fn case_report(
    case: &SuiteCase,
    job: Option<(u32, &JobResult)>,
    share: Option<CaseShare>,
    batch_size: usize,
    stopped: Option<&StopReason>,
    ledger: &Ledger,
    today: &str,
) -> CaseReport {
    let Some((index, result)) = job else {
        return CaseReport {
            reference: case.reference(),
            display: case.display(),
            outcome: CaseOutcome::NotRun,
            lane: Lane::Infrastructure,
            quarantined: false,
            order_dependent: false,
            message: stopped.map(|s| format!("never admitted: {s}")),
            duration_s: None,
            job: None,
            artifacts: Vec::new(),
            cached: None,
        };
    };
    let derived = derive_outcome(case, result);
    CaseReport {
        reference: case.reference(),
        display: case.display(),
        outcome: derived.outcome,
        lane: derived.lane,
        quarantined: excused(derived.outcome, derived.lane, ledger, &case.id, today),
        order_dependent: false,
        message: derived.message,
        duration_s: Some(
            share
                .as_ref()
                .and_then(|s| s.seconds)
                .unwrap_or(result.duration_ms as f64 / 1000.0 / batch_size.max(1) as f64),
        ),
        job: Some(index),
        artifacts: match share {
            Some(share) => share.artifacts,
            None => case.own_artifacts(&result.artifacts),
        },
        cached: None,
    }
}

/// What [`conclude`] needs besides the run itself.
pub struct ConcludeRequest<'a> {
    /// The run's id.
    pub run_id: &'a ProofId,
    /// The suite's runner.
    pub runner: SuiteRunner,
    /// Each job's wall-clock limit, in seconds, for the report.
    pub timeout_secs: u64,
    /// The quarantine ledger that excuses failures.
    pub ledger: &'a Ledger,
    /// `YYYY-MM-DD`, for the ledger's expiries.
    pub today: &'a str,
}

/// Decides a finished run: splits each pytest batch's output back into its cases (stored in
/// `store`), derives every case's outcome and lane, applies the ledger, counts, audits the
/// selection and decides the status.
pub async fn conclude(
    request: &ConcludeRequest<'_>,
    driven: &Driven,
    store: &dyn ArtifactStore,
) -> SuiteOutcome {
    let cases = &driven.cases;
    let stopped = driven.run.stopped.as_ref();
    let mut warnings = Vec::new();
    let mut reports: Vec<Option<CaseReport>> = vec![None; cases.len()];
    let mut costs: Vec<Option<f64>> = vec![None; cases.len()];
    let mut selections = Vec::new();
    let mut jobs = Vec::new();
    for (spec, members) in driven.plan.iter().zip(&driven.shards) {
        let result = driven
            .run
            .results
            .get(spec.index as usize)
            .and_then(Option::as_ref);
        let member_cases: Vec<&SuiteCase> = members.iter().map(|&i| &cases[i]).collect();
        if let Some(result) = result {
            selections.push(JobSelection::from_report(
                request.runner,
                spec.index,
                &member_cases,
                result.report.parsed(),
            ));
            jobs.push(SuiteJobReport {
                index: spec.index,
                job_id: spec.job_id.to_string(),
                cases: member_cases.iter().map(|c| c.reference()).collect(),
                status: result.status.label().into(),
                duration_s: result.duration_ms as f64 / 1000.0,
                artifacts: result.artifacts.clone(),
            });
        }
        // A pytest job's report says what each of its cases printed and how long it took; the
        // session's own output stays the job's.
        let shares = match result {
            Some(result) if request.runner.runner().reports_output_per_case() => {
                let prefix = format!("proofs/{}/jobs/{:04}", request.run_id, spec.index);
                split::split_pytest_batch(store, &prefix, &member_cases, result)
                    .await
                    .unwrap_or_else(|e| {
                        warnings.push(format!(
                            "job {} keeps one output for its cases: {:#}",
                            spec.index,
                            assay_common::error_chain::error_chain(&e)
                        ));
                        vec![None; members.len()]
                    })
            }
            _ => vec![None; members.len()],
        };
        if let Some(result) = result {
            let own: Vec<Option<f64>> = shares
                .iter()
                .map(|s| s.as_ref().and_then(|s| s.seconds))
                .collect();
            let job_s = result.duration_ms as f64 / 1000.0;
            let startup_s = driven.startup_s.unwrap_or(0.0);
            for (&i, cost) in members
                .iter()
                .zip(shard::batch_costs(job_s, startup_s, &own))
            {
                costs[i] = cost;
            }
        }
        for (&i, share) in members.iter().zip(shares) {
            reports[i] = Some(case_report(
                &cases[i],
                result.map(|r| (spec.index, r)),
                share,
                members.len(),
                stopped,
                request.ledger,
                request.today,
            ));
        }
    }
    // The cache's answers ran in no job of this run: no cost, no selection of theirs.
    for (&i, answered) in &driven.answers.reports {
        if let Some(slot) = reports.get_mut(i) {
            *slot = Some(answered.clone());
        }
    }
    // A case no job held (admission stopped before its round) was never admitted.
    let cases_reports: Vec<CaseReport> = reports
        .into_iter()
        .zip(cases)
        .map(|(report, case)| {
            report.unwrap_or_else(|| {
                case_report(case, None, None, 1, stopped, request.ledger, request.today)
            })
        })
        .collect();
    let totals = totals(&cases_reports);
    let collected: Vec<String> = driven.collected.iter().map(|c| c.id.clone()).collect();
    let selection = audit::audit(&collected, &selections);
    let guest_failures = guest_failures(&totals, &cases_reports);
    // A run that is one job has one output: its summary line and coverage are the suite's.
    // Per-case percentages cannot be combined into suite coverage, so they are not recorded.
    let single = match driven.run.results.as_slice() {
        [Some(result)] if driven.answers.reports.is_empty() => {
            Some((result, job_output(store, result, &mut warnings).await))
        }
        _ => None,
    };
    let coverage_pct = single.as_ref().and_then(|(_, text)| coverage_of(text));
    let (status, status_detail, counts) = status(
        stopped,
        request.runner,
        single.as_ref().map(|(r, t)| (*r, t.as_str())),
        request.timeout_secs,
        guest_failures,
        selection.contained,
        RunCounts {
            total: totals.total,
            passed: totals.passed,
            failed: guest_failures,
            skipped: totals.skipped,
        },
    );
    SuiteOutcome {
        cases: cases_reports,
        jobs,
        totals,
        selection,
        status,
        status_detail,
        counts,
        coverage_pct,
        guest_failures,
        stopped: stopped.cloned(),
        costs,
        warnings,
    }
}

/// A run's coverage figure from its output, to one decimal as history keeps it.
pub fn coverage_of(output: &str) -> Option<f64> {
    summary::parse_coverage(output).map(|c| (c * 10.0).round() / 10.0)
}

/// A finished job's stdout then stderr, as stored; an unreadable artifact reads as empty, with
/// a warning.
pub async fn job_output(
    store: &dyn ArtifactStore,
    result: &JobResult,
    warnings: &mut Vec<String>,
) -> String {
    let mut text = String::new();
    for name in ["stdout", "stderr"] {
        match read_named(store, result, name).await {
            Ok(Some(bytes)) => text.push_str(&String::from_utf8_lossy(&bytes)),
            Ok(None) => {}
            Err(e) => warnings.push(assay_common::error_chain::error_chain(&e)),
        }
    }
    text
}

/// Records a finished proof's suite jobs (base-suite, then candidate-suite, by plan index) in
/// `history`: the base-suite as a baseline compared with nothing (it runs the code before the
/// change), the candidate-suite compared with it as usual. Returns the candidate entries, whose
/// alerts name what the change broke.
pub async fn record_proof_suites(
    history: &mut History,
    proof_id: &str,
    timestamp: &str,
    jobs: &[JobSpec],
    results: &[JobResult],
    store: &dyn ArtifactStore,
    warnings: &mut Vec<String>,
) -> Vec<RunRecord> {
    // By plan index: a fleet proof hands over only the results its progress carried.
    let mut suite_jobs: Vec<(&JobSpec, &JobResult)> = results
        .iter()
        .filter_map(|result| Some((jobs.get(result.index as usize)?, result)))
        .filter(|(spec, _)| spec.kind == JobKind::Suite)
        .collect();
    suite_jobs.sort_by_key(|(spec, _)| spec.index);
    let mut recorded = Vec::new();
    for (spec, result) in suite_jobs {
        let coverage = coverage_of(&job_output(store, result, warnings).await);
        let run = RunSummary::of_job(
            format!("{proof_id}-{}", spec.kind.label(spec.side)),
            timestamp.to_owned(),
            result,
            coverage,
        );
        if spec.side == Side::Base {
            history.record_baseline(run);
        } else {
            recorded.push(
                history
                    .record(run, super::history::DEFAULT_COVERAGE_DROP_THRESHOLD)
                    .clone(),
            );
        }
    }
    recorded
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_common::JobId;
    use assay_common::outcome::{CaseResult, Outcome, ReportOutcome, TestReport};
    use assay_common::runner::RunnerKind;

    fn case(name: &str) -> SuiteCase {
        SuiteCase::test(&format!("t.py::{name}"), "t.py", "", name)
    }

    fn result(status: JobStatus, cases: &[(&str, Outcome)]) -> JobResult {
        let run = ProofId("t-1".into());
        JobResult {
            job_id: JobId::for_index(&run, 0),
            index: 0,
            status,
            report: ReportOutcome::Parsed(TestReport {
                cases: cases
                    .iter()
                    .map(|(name, outcome)| CaseResult {
                        file: "t.py".into(),
                        suite: "t".into(),
                        name: (*name).into(),
                        variant: None,
                        outcome: *outcome,
                        message: None,
                    })
                    .collect(),
                collection_errors: Vec::new(),
                collection_reruns: Vec::new(),
            }),
            artifacts: Vec::new(),
            duration_ms: 2000,
            worker: "w".into(),
            sandbox: None,
        }
    }

    fn ledger(test: &str, expires: &str) -> Ledger {
        let text = format!(
            "[[quarantine]]\ntest = \"{test}\"\nreason = \"flaky\"\nadded = \"2026-01-01\"\nexpires = \"{expires}\"\n"
        );
        super::super::ledger::parse(text.as_bytes(), "q.toml", "HEAD").unwrap()
    }

    #[test]
    fn the_ledger_excuses_only_unexpired_guest_failures() {
        let ledger = ledger("t.py::test_a", "2026-06-01");
        let excuse = |outcome, lane, today| excused(outcome, lane, &ledger, "t.py::test_a", today);
        assert!(excuse(CaseOutcome::Failed, Lane::Guest, "2026-05-31"));
        assert!(excuse(CaseOutcome::Error, Lane::Guest, "2026-06-01"));
        assert!(
            !excuse(CaseOutcome::Failed, Lane::Guest, "2026-06-02"),
            "expired"
        );
        assert!(!excuse(
            CaseOutcome::Error,
            Lane::Infrastructure,
            "2026-05-31"
        ));
        assert!(!excuse(CaseOutcome::Passed, Lane::Guest, "2026-05-31"));
        assert!(!excused(
            CaseOutcome::Failed,
            Lane::Guest,
            &ledger,
            "t.py::test_b",
            "2026-05-31"
        ));
    }

    #[test]
    fn case_reports_count_once_and_quarantine_is_a_column_of_its_own() {
        let ledger = ledger("t.py::test_b", "2099-01-01");
        let ran = result(
            JobStatus::Completed { exit_code: 1 },
            &[("test_a", Outcome::Passed), ("test_b", Outcome::Failed)],
        );
        let stop = StopReason::Halted("maintenance".into());
        let (a, b, c, d) = (
            case("test_a"),
            case("test_b"),
            case("test_c"),
            case("test_d"),
        );
        let reports = vec![
            case_report(&a, Some((0, &ran)), None, 4, None, &ledger, "2026-06-01"),
            case_report(&b, Some((0, &ran)), None, 4, None, &ledger, "2026-06-01"),
            // Not in the report: an error in the guest lane.
            case_report(&c, Some((0, &ran)), None, 4, None, &ledger, "2026-06-01"),
            case_report(&d, None, None, 1, Some(&stop), &ledger, "2026-06-01"),
        ];
        assert_eq!(reports[0].duration_s, Some(0.5), "the batch's time shared");
        assert!(reports[1].quarantined);
        assert_eq!(reports[2].outcome, CaseOutcome::Error);
        assert_eq!(
            (reports[3].outcome, reports[3].lane),
            (CaseOutcome::NotRun, Lane::Infrastructure)
        );
        assert_eq!(
            reports[3].message.as_deref(),
            Some("never admitted: halted: maintenance")
        );
        let totals = totals(&reports);
        assert_eq!(
            totals,
            SuiteTotals {
                total: 4,
                passed: 1,
                failed: 0,
                skipped: 0,
                error: 1,
                not_run: 1,
                quarantined: 1,
            }
        );
        assert_eq!(guest_failures(&totals, &reports), 1);
    }

    #[test]
    fn status_follows_failures_the_audit_a_stop_and_a_command_s_exit() {
        let counts = RunCounts {
            total: 3,
            passed: 3,
            ..RunCounts::default()
        };
        let pytest = SuiteRunner::Kind(RunnerKind::Pytest);
        let status_of =
            |failures, contained| status(None, pytest, None, 60, failures, contained, counts);
        assert_eq!(status_of(0, true).0, SuiteStatus::Passing);
        assert_eq!(status_of(1, true).0, SuiteStatus::Failing);
        assert_eq!(
            status_of(0, false).0,
            SuiteStatus::Failing,
            "an audit violation fails"
        );
        let stop = StopReason::Infrastructure {
            job: 2,
            message: "sandbox".into(),
        };
        let (stopped, detail, _) = status(Some(&stop), pytest, None, 60, 0, true, counts);
        assert_eq!(stopped, SuiteStatus::Error);
        assert_eq!(
            detail.as_deref(),
            Some("infrastructure failure in job 2: sandbox")
        );
        assert_eq!(ending(true, SuiteStatus::Passing), Ending::Aborted);
        assert_eq!(ending(false, SuiteStatus::Passing), Ending::Passed);
        assert_eq!(ending(false, SuiteStatus::Error), Ending::Failed);
        // A command's exit status decides, and its summary line gives the counts.
        let failed = result(JobStatus::Completed { exit_code: 1 }, &[]);
        let (s, _, c) = status(
            None,
            SuiteRunner::Command,
            Some((&failed, "== 2 failed, 5 passed in 0.1s ==")),
            60,
            0,
            true,
            counts,
        );
        assert_eq!(s, SuiteStatus::Failing);
        assert_eq!((c.total, c.passed, c.failed), (7, 5, 2));
        let missing = result(JobStatus::Completed { exit_code: 127 }, &[]);
        let (s, detail, _) = status(
            None,
            SuiteRunner::Command,
            Some((&missing, "")),
            60,
            0,
            true,
            counts,
        );
        assert_eq!(s, SuiteStatus::Error);
        assert!(detail.is_some_and(|d| d.contains("not found")));
    }

    #[test]
    fn history_keeps_guest_costs_and_the_collected_cases() {
        let ledger = Ledger::default();
        let ran = result(
            JobStatus::Completed { exit_code: 0 },
            &[("test_a", Outcome::Passed)],
        );
        let infra = result(
            JobStatus::Infrastructure {
                message: "gone".into(),
                cause: assay_common::fault::InfraCause::WorkerLost,
            },
            &[],
        );
        let (a, b) = (case("test_a"), case("test_b"));
        let reports = vec![
            case_report(&a, Some((0, &ran)), None, 1, None, &ledger, "2026-06-01"),
            case_report(&b, Some((1, &infra)), None, 1, None, &ledger, "2026-06-01"),
        ];
        let mut history = History::new("/r", "main");
        record_durations(&mut history, &reports, &[Some(0.25), Some(9.0)]);
        assert_eq!(
            history.durations.into_iter().collect::<Vec<_>>(),
            [(a.reference(), 0.25)],
            "an infrastructure failure's time says nothing of the case"
        );
    }
}
