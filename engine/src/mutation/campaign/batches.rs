//! Several switched mutants in one job, and one process where the runner can isolate them
//! there ([`Runner::mutant_batch_command`]): a mutant's run costs its tests and the loading of
//! its files, not a process start and a job of its own. Each member keeps its own limit (the
//! batch stops a member there and goes on with the next), its own verdict, judged as a run of
//! its own would be, and its own confirmation of a kill. A member the batch does not settle
//! (its tests ended the process, a test file failed to load, the batch never ran) runs alone
//! afterwards, as it would have without batches.
//!
//! [`Runner::mutant_batch_command`]: assay_common::runner::Runner::mutant_batch_command

use super::*;
use crate::mutation::mutants::NotRunReason;
use crate::mutation::mutants::javascript::schema::SWITCH_VARIABLE;
use assay_common::outcome::{Outcome, ReportOutcome};
use assay_common::report::mutant_batch::{self, MemberRun};
use assay_transport::store::read_named;
use std::sync::Mutex;

/// The most mutants one job runs: their files load before the first one's tests, so a batch
/// holds that many module graphs at once.
const MAX_MEMBERS: usize = 12;

/// One batch's job and its members, by their positions in the work.
struct Batch {
    spec: JobSpec,
    members: Vec<usize>,
}

/// The batches' verdicts, by position in the work, and the runs behind them for the cache.
pub(super) struct Batched {
    pub(super) judged: BTreeMap<usize, Judged>,
    pub(super) runs: BTreeMap<JobId, JobResult>,
    /// How many batches ran.
    pub(super) batches: usize,
}

impl Campaign<'_> {
    /// Runs the work the runner can batch in batches, in the work's order, and judges every
    /// member a batch settles, telling `on_judged` with its position in the work. What no
    /// batch settled is absent from the answer. `planned_mutants`: the plan's mutants, whose
    /// confirming runs' job indices the batches' must not take.
    pub(super) async fn run_batches(
        &self,
        (work, planned_mutants): (&[Work], usize),
        prefix: &[String],
        baseline_time: Duration,
        (stores, compiled): (bool, bool),
        on_judged: impl Fn(usize, &JobResult, &Judged) + Send + Sync,
    ) -> Result<Batched, MutateError> {
        let batches = self.batches(work, prefix, planned_mutants);
        let mut batched = Batched {
            judged: BTreeMap::new(),
            runs: BTreeMap::new(),
            batches: 0,
        };
        if batches.is_empty() {
            return Ok(batched);
        }
        let specs: Vec<JobSpec> = batches.iter().map(|b| b.spec.clone()).collect();
        let of_batch: BTreeMap<&JobId, &Batch> =
            batches.iter().map(|b| (&b.spec.job_id, b)).collect();
        let costs: BTreeMap<JobId, Cost> = work
            .iter()
            .map(|w| (w.spec.job_id.clone(), w.cost))
            .collect();
        // Each member's limit, as a run of its own would have it, set when its batch starts.
        let limits: Mutex<BTreeMap<JobId, Vec<MutantTimeout>>> = Mutex::default();
        let runner = self.request.runner.runner();
        let (results, mut finished) = tokio::sync::mpsc::unbounded_channel::<JobResult>();
        let (of_batch, costs, limits, specs) = (&of_batch, &costs, &limits, &specs);
        let dispatched = async move {
            let admit = |spec: &mut JobSpec| {
                let batch = of_batch.get(&spec.job_id).ok_or(NotRunReason::NoResult)?;
                let mut timeouts = Vec::with_capacity(batch.members.len());
                let mut members = Vec::with_capacity(batch.members.len());
                for &position in &batch.members {
                    let w = &work[position];
                    let timeout = self.admit(&mut w.spec.clone(), costs, baseline_time)?;
                    let mut member = w.batch.clone().ok_or(NotRunReason::NoResult)?;
                    member.limit_ms = u64::try_from(timeout.limit.as_millis()).unwrap_or(u64::MAX);
                    timeouts.push(timeout);
                    members.push(member);
                }
                spec.command = runner
                    .mutant_batch_command(prefix, &members)
                    .ok_or(NotRunReason::NoResult)?;
                // Every member to its limit, and each restart of the batch's process.
                let total = timeouts
                    .iter()
                    .fold(Duration::ZERO, |sum, t| sum.saturating_add(t.limit))
                    .saturating_add(Duration::from_secs(2 * timeouts.len() as u64 + 5));
                spec.timeout_secs = total.as_secs().max(1);
                spec.forked_timeout_secs = None;
                if let Ok(mut limits) = limits.lock() {
                    limits.insert(spec.job_id.clone(), timeouts.clone());
                }
                // The batch's own limit is the sum: it is never a member's verdict.
                timeouts.first().copied().ok_or(NotRunReason::NoResult)
            };
            let ran = run_mutants(
                self.queue,
                specs,
                self.request.slots,
                Some(self.deadline()),
                admit,
                move |result, _| {
                    let _ = results.send(result.clone());
                },
                |_| (),
                |_, _, _| {},
            )
            .await;
            ran.map(|_| ())
        };
        let settled = async {
            while let Some(result) = finished.recv().await {
                let Some(batch) = of_batch.get(&result.job_id) else {
                    continue;
                };
                batched.batches += 1;
                let timeouts = limits
                    .lock()
                    .ok()
                    .and_then(|mut l| l.remove(&result.job_id))
                    .unwrap_or_default();
                for (member, run) in self.settle(batch, work, &result).await {
                    let (Some(&position), Some(timeout)) =
                        (batch.members.get(member), timeouts.get(member))
                    else {
                        continue;
                    };
                    let judged = judge(&run, *timeout, compiled);
                    on_judged(position, &run, &judged);
                    if stores {
                        batched.runs.insert(run.job_id.clone(), run);
                    }
                    batched.judged.insert(position, judged);
                }
            }
        };
        let (ran, ()) = tokio::join!(dispatched, settled);
        ran.map_err(MutateError::Stopped)?;
        Ok(batched)
    }

    /// The work's batchable runs in batches of consecutive positions, each batch a job of the
    /// first member's (its tree, its environment), the switch at 0 outside the members.
    fn batches(&self, work: &[Work], prefix: &[String], planned_mutants: usize) -> Vec<Batch> {
        let runner = self.request.runner.runner();
        if runner.mutant_batch_command(prefix, &[]).is_none() {
            return Vec::new();
        }
        let batchable: Vec<usize> = (0..work.len())
            .filter(|&p| work[p].batch.is_some())
            .collect();
        // Enough batches to keep every slot busy to the end, none past the most members, and
        // two at least: one mutant a process is what running alone already is.
        if batchable.len() < 2 {
            return Vec::new();
        }
        let slots = self.request.slots.max(1);
        let size = batchable.len().div_ceil(slots * 3).clamp(2, MAX_MEMBERS);
        // After every first run's index and every confirming run's (a first run's plus the
        // plan's mutants).
        let first_free =
            work.iter().map(|w| w.spec.index).max().unwrap_or(0) as usize + planned_mutants + 1;
        batchable
            .chunks(size)
            .enumerate()
            .map(|(n, members)| {
                let mut spec = work[members[0]].spec.clone();
                let index = first_free + n;
                spec.index = index as u32;
                spec.job_id = JobId::for_index(&self.request.run_id, index);
                for (name, value) in &mut spec.env {
                    if name == SWITCH_VARIABLE {
                        *value = "0".into();
                    }
                }
                Batch {
                    spec,
                    members: members.to_vec(),
                }
            })
            .collect()
    }

    /// Each member of `batch` its report settles, as the result of a run of its own: the
    /// member's place in the batch and that result. A batch whose report cannot be read
    /// settles none.
    async fn settle(
        &self,
        batch: &Batch,
        work: &[Work],
        result: &JobResult,
    ) -> Vec<(usize, JobResult)> {
        let bytes = match read_named(self.store, result, "report").await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Vec::new(),
            Err(e) => {
                tracing::warn!(job_id = %result.job_id, "a batch's report cannot be read: {}", error_chain(&e));
                return Vec::new();
            }
        };
        let numbers: Vec<u32> = batch
            .members
            .iter()
            .filter_map(|&p| work[p].batch.as_ref().map(|b| b.mutant))
            .collect();
        let runs = mutant_batch::read(&bytes, &numbers);
        let mut settled = Vec::new();
        for (member, &position) in batch.members.iter().enumerate() {
            let w = &work[position];
            let Some(run) = w.batch.as_ref().and_then(|b| runs.get(&b.mutant)) else {
                continue;
            };
            let (status, report, ms) = match run {
                // A document that does not parse is no verdict of the batch's: alone, the
                // mutant's run says what it says.
                MemberRun::Ran { report, .. } if report.parsed().is_none() => {
                    tracing::debug!(
                        mutant = w.at + 1,
                        "runs alone: {}",
                        report.problem().unwrap_or_default()
                    );
                    continue;
                }
                MemberRun::Ran { report, ms } => {
                    let failed = report.parsed().is_some_and(|r| {
                        r.cases
                            .iter()
                            .any(|c| matches!(c.outcome, Outcome::Failed | Outcome::Error))
                    });
                    let exit_code = i32::from(failed);
                    (JobStatus::Completed { exit_code }, report.clone(), *ms)
                }
                MemberRun::TimedOut { ms } => (JobStatus::TimedOut, ReportOutcome::Missing, *ms),
                MemberRun::Unsettled(why) => {
                    tracing::debug!(mutant = w.at + 1, "runs alone: {why}");
                    continue;
                }
            };
            settled.push((
                member,
                JobResult {
                    job_id: w.spec.job_id.clone(),
                    index: w.spec.index,
                    status,
                    report,
                    artifacts: result.artifacts.clone(),
                    duration_ms: ms,
                    worker: result.worker.clone(),
                    sandbox: result.sandbox.clone(),
                },
            ));
        }
        settled
    }
}
