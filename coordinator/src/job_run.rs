//! A job submission's run: its jobs published in plan order over the run's [`NatsJobQueue`],
//! each result recorded at its KV result key (by `results`, as a proof's are), then the run
//! marked finished. Nothing is concluded and no evidence is written: the submitter (a suite or
//! a mutation campaign) reads the results and decides.
//!
//! [`NatsJobQueue`]: crate::nats_queue::NatsJobQueue

use crate::Shared;
use crate::nats_queue::PublishGate;
use crate::progress::publish_progress;
use crate::proof::{Ended, run_progress, run_queue, set_status};
use assay_common::fleet::{JobSubmission, ProgressEvent, ProofRecord, ProofStatus};
use assay_common::job::JobResult;
use std::time::Instant;
use tokio::sync::mpsc;

pub(super) async fn drive_jobs(
    shared: &Shared,
    record: &ProofRecord,
    submission: &JobSubmission,
    resumed: bool,
    gate: PublishGate,
    applied: mpsc::UnboundedReceiver<JobResult>,
) -> Ended {
    let run_id = &submission.run_id;
    let budget = submission.jobs_budget.clamp(1, shared.max_jobs_per_proof) as usize;
    let queue = run_queue(shared, gate, applied, resumed);
    let (progress, publisher) = run_progress(shared, run_id);
    let outcome =
        assay_engine::proof::run_jobs(&submission.jobs, &queue, budget, &progress, Instant::now())
            .await;
    drop(progress);
    let _ = publisher.await;
    if let Err(e) = outcome {
        // Cancelling closes the run's result channel; anything else is logged.
        tracing::info!(run_id = %run_id, error = %e, "job submission stopped before all results");
        return Ended::Interrupted;
    }
    if !shared.fence.holds() {
        tracing::warn!(run_id = %run_id, "not marking the job submission finished: this coordinator lost the lease; its successor will");
        return Ended::Done;
    }
    set_status(shared, record, ProofStatus::Finished).await;
    tracing::info!(run_id = %run_id, jobs = submission.jobs.len(), "job submission finished");
    let jobs = record.job_count;
    publish_progress(shared, run_id, &ProgressEvent::JobsFinished { jobs }).await;
    Ended::Done
}
