//! Jobs through a running fleet, for `assay test --cluster` and `assay mutate --cluster`. Each
//! job travels to the coordinator as a one-job [`JobSubmission`] (no criteria, no revisions,
//! no evidence), so admission (the `--jobs` budget,
//! a suite's halt, a mutation run's time budget) stays with the CLI's run, exactly as embedded;
//! its result comes back on the submission's progress subject, or from its KV result key when
//! that message was missed.

use crate::client::{Step, follow};
use assay_common::fault::InfraCause;
use assay_common::fleet::{
    JobSubmission, ProgressEvent, Subjects, SubmitReply, SubmitRequest, keys,
};
use assay_common::job::{JobResult, JobSpec};
use assay_common::{JobId, ProofId, WorkerId, wire};
use assay_transport::error_chain::error_chain;
use assay_transport::queue::{Cause, JobQueue, QueueError};
use assay_transport::store::ArtifactStore;
use async_nats::jetstream::kv;
use async_trait::async_trait;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// A run's jobs as one-job fleet job submissions.
pub struct ClusterQueue {
    client: async_nats::Client,
    subjects: Subjects,
    proofs: kv::Store,
    /// Where results too big for a KV value are (see `offload`).
    store: Arc<dyn ArtifactStore>,
    repository: String,
    label: &'static str,
    results_tx: mpsc::UnboundedSender<JobResult>,
    results_rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<JobResult>>,
    waiters: Mutex<tokio::task::JoinSet<()>>,
}

impl ClusterQueue {
    /// `repository` and `label` (the kind of run, e.g. "suite" or "mutate") name the
    /// submissions in their records; the jobs carry their own commands.
    pub fn new(
        client: async_nats::Client,
        subjects: Subjects,
        proofs: kv::Store,
        store: Arc<dyn ArtifactStore>,
        repository: String,
        label: &'static str,
    ) -> Self {
        let (results_tx, results_rx) = mpsc::unbounded_channel();
        Self {
            client,
            subjects,
            proofs,
            store,
            repository,
            label,
            results_tx,
            results_rx: tokio::sync::Mutex::new(results_rx),
            waiters: Mutex::new(tokio::task::JoinSet::new()),
        }
    }

    fn submission(&self, id: &ProofId, job: JobSpec) -> JobSubmission {
        JobSubmission {
            run_id: id.clone(),
            repository: self.repository.clone(),
            label: self.label.into(),
            trees: vec![job.tree.clone()],
            jobs: vec![job],
            jobs_budget: 1,
        }
    }
}

/// Why a fleet job has no result.
#[derive(Debug, thiserror::Error)]
enum AwaitError {
    #[error("the progress subscription closed before the job's result was recorded")]
    SubscriptionClosed,
    #[error("the job was cancelled")]
    Cancelled,
    #[error("the job's recorded result cannot be read")]
    Undecodable(#[source] assay_transport::offload::OffloadError),
}

impl AwaitError {
    /// What failed, for the job's result and the fault policy.
    fn cause(&self) -> InfraCause {
        match self {
            Self::SubscriptionClosed => InfraCause::BusUnavailable,
            Self::Cancelled => InfraCause::Cancelled,
            Self::Undecodable(_) => InfraCause::StoreUnavailable,
        }
    }
}

/// Waits for the one result of submission `id`, read from its KV key, which only the
/// coordinator writes: a progress event only says when to look, so a forged event on the bus
/// cannot hand the run a result.
async fn await_result(
    mut events: async_nats::Subscriber,
    proofs: kv::Store,
    store: Arc<dyn ArtifactStore>,
    id: ProofId,
) -> Result<JobResult, AwaitError> {
    let read = || async {
        match proofs.get(keys::result(&id, 0)).await {
            Ok(Some(bytes)) => assay_transport::offload::decode_result(
                store.as_ref(),
                &id,
                &bytes,
                assay_transport::offload::ReadCap::results(
                    assay_common::service_config::DEFAULT_MAX_RESULT_BYTES,
                ),
            )
            .await
            .map(Some)
            .map_err(AwaitError::Undecodable),
            // Not recorded yet, or a read that failed: the next look reads again.
            _ => Ok(None),
        }
    };
    follow(
        &mut events,
        |event| match event {
            ProgressEvent::JobFinished { .. } | ProgressEvent::JobsFinished { .. } => Step::Look,
            ProgressEvent::Cancelled => Step::Stop(AwaitError::Cancelled),
            ProgressEvent::Finished { .. }
            | ProgressEvent::FinishedStored { .. }
            | ProgressEvent::Halted { .. }
            | ProgressEvent::Resumed => Step::Ignore,
        },
        read,
        || AwaitError::SubscriptionClosed,
    )
    .await
}

#[async_trait]
impl JobQueue for ClusterQueue {
    async fn submit(&self, job: JobSpec) -> Result<(), QueueError> {
        let job_id = job.job_id.to_string();
        let failed = |step, source: Cause| QueueError::submit_step(&job_id, step, source);
        let id = ProofId::for_one_job(&job.proof_id, job.index);
        let mut inner = job.clone();
        inner.proof_id = id.clone();
        inner.job_id = JobId::for_index(&id, 0);
        inner.index = 0;
        let events = self
            .client
            .subscribe(self.subjects.progress(&id))
            .await
            .map_err(|e| failed("subscribing to its progress", e.into()))?;
        // One job always fits one message: no need to offload it to the store.
        let request = SubmitRequest::Jobs(Box::new(self.submission(&id, inner)));
        let payload = wire::encode("submit request", &request)
            .map_err(|e| failed("encoding the submission", e.into()))?;
        let reply = crate::client::request_submit(
            &self.client,
            &self.subjects,
            async_nats::HeaderMap::new(),
            payload.into(),
        )
        .await
        .map_err(|e| match e {
            crate::client::SubmitRequestError::NoReply(secs)
            | crate::client::SubmitRequestError::NoCoordinator(secs) => QueueError::NoReply {
                job_id: job_id.clone(),
                secs,
            },
            other => failed("sending the submission", other.into()),
        })?;
        match wire::decode::<SubmitReply>("submit reply", &reply.payload)
            .map_err(|e| failed("decoding the coordinator's reply", e.into()))?
        {
            SubmitReply::Accepted { .. } => {}
            SubmitReply::Refused { message } => {
                return Err(QueueError::Refused {
                    job_id,
                    reason: message,
                });
            }
        }
        let (proofs, store, tx) = (
            self.proofs.clone(),
            self.store.clone(),
            self.results_tx.clone(),
        );
        let waiter = async move {
            let mut result = match await_result(events, proofs, store, id).await {
                Ok(result) => result,
                Err(e) => JobResult::infrastructure(
                    &job,
                    WorkerId("fleet".into()),
                    e.cause(),
                    error_chain(&e),
                ),
            };
            // Back to the run's own numbering, so results reassemble by plan index.
            result.index = job.index;
            result.job_id = job.job_id.clone();
            let _ = tx.send(result);
        };
        self.waiters
            .lock()
            .map_err(|_| QueueError::Poisoned)?
            .spawn(waiter);
        Ok(())
    }

    async fn next_result(&self) -> Option<JobResult> {
        self.results_rx.lock().await.recv().await
    }
}
