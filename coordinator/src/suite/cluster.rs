//! `assay test --cluster`: a suite's jobs through a running fleet. Each job travels to the
//! coordinator as a one-job submission, so admission (the `--jobs` budget and the halt) stays
//! with the suite run, exactly as embedded; its result comes back on the submission's progress
//! subject, or from its KV result key when that message was missed. The fleet-wide halt is a key
//! in the proofs bucket, watched so the admission gate reads it without a round trip.

use super::halt::AdmissionGate;
use crate::queue::{JobQueue, QueueError};
use assay_common::fleet::{
    ProgressEvent, ProofSubmission, RevisionWire, Subjects, SubmitReply, SubmitRequest, keys,
};
use assay_common::job::{JobResult, JobSpec};
use assay_common::runner::RunnerKind;
use assay_common::{JobId, ProofId, WorkerId, wire};
use assay_worker::nats::FleetError;
use async_nats::jetstream::kv;
use async_trait::async_trait;
use futures::StreamExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// The key of the fleet-wide halt in the proofs bucket; its value is the reason.
pub const HALT_KEY: &str = "fleet.halt";

/// A suite's jobs as one-job fleet submissions.
pub struct ClusterQueue {
    client: async_nats::Client,
    subjects: Subjects,
    proofs: kv::Store,
    repository: String,
    runner: RunnerKind,
    results_tx: mpsc::UnboundedSender<JobResult>,
    results_rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<JobResult>>,
    waiters: Mutex<tokio::task::JoinSet<()>>,
}

impl ClusterQueue {
    /// `runner` labels the submissions for `assay status`; the jobs carry their own commands.
    pub fn new(
        client: async_nats::Client,
        subjects: Subjects,
        proofs: kv::Store,
        repository: String,
        runner: RunnerKind,
    ) -> Self {
        let (results_tx, results_rx) = mpsc::unbounded_channel();
        Self {
            client,
            subjects,
            proofs,
            repository,
            runner,
            results_tx,
            results_rx: tokio::sync::Mutex::new(results_rx),
            waiters: Mutex::new(tokio::task::JoinSet::new()),
        }
    }

    fn submission(&self, id: &ProofId, job: JobSpec) -> ProofSubmission {
        let revision = RevisionWire {
            requested: "suite".into(),
            commit: None,
            tree: job.tree.clone(),
        };
        ProofSubmission {
            proof_id: id.clone(),
            repository: self.repository.clone(),
            runner: self.runner,
            criteria: Vec::new(),
            base: revision.clone(),
            candidate: revision,
            base_tree: job.tree.clone(),
            changed: Vec::new(),
            changed_test_files: Vec::new(),
            jobs: vec![job],
            refused_files: Vec::new(),
            jobs_budget: 1,
        }
    }
}

/// Waits for the one result of submission `id`: from progress, else from its KV key.
async fn await_result(
    mut events: async_nats::Subscriber,
    proofs: kv::Store,
    id: ProofId,
) -> Result<JobResult, String> {
    let mut poll = tokio::time::interval(Duration::from_secs(2));
    loop {
        tokio::select! {
            event = events.next() => {
                let Some(event) = event else {
                    return Err("the progress subscription closed".into());
                };
                match wire::decode::<ProgressEvent>("progress", &event.payload) {
                    Ok(ProgressEvent::JobFinished { result, .. }) => return Ok(result),
                    Ok(ProgressEvent::Cancelled) => return Err("the job was cancelled".into()),
                    Ok(ProgressEvent::Finished { .. } | ProgressEvent::FinishedStored { .. } | ProgressEvent::Halted { .. } | ProgressEvent::Resumed) => {}
                    Err(e) => tracing::warn!(error = %e, "ignoring an unreadable progress message"),
                }
            }
            _ = poll.tick() => {
                if let Ok(Some(bytes)) = proofs.get(keys::result(&id, 0)).await {
                    return wire::decode("job result", &bytes).map_err(|e| e.to_string());
                }
            }
        }
    }
}

#[async_trait]
impl JobQueue for ClusterQueue {
    async fn submit(&self, job: JobSpec) -> Result<(), QueueError> {
        let job_id = job.job_id.to_string();
        let submit_err = |message: String| QueueError::Submit {
            job_id: job_id.clone(),
            message,
        };
        let id = ProofId(format!("{}-{:04}", job.proof_id, job.index));
        let mut inner = job.clone();
        inner.proof_id = id.clone();
        inner.job_id = JobId::for_index(&id, 0);
        inner.index = 0;
        let events = self
            .client
            .subscribe(self.subjects.progress(&id))
            .await
            .map_err(|e| submit_err(e.to_string()))?;
        let request = SubmitRequest::Inline(Box::new(self.submission(&id, inner)));
        let payload =
            wire::encode("submit request", &request).map_err(|e| submit_err(e.to_string()))?;
        let reply = tokio::time::timeout(
            Duration::from_secs(30),
            self.client.request(self.subjects.submit(), payload.into()),
        )
        .await
        .map_err(|_| {
            submit_err(
                "no reply within 30 s (hint: is `assay coordinator` running on this NATS server and prefix?)"
                    .into(),
            )
        })?
        .map_err(|e| submit_err(e.to_string()))?;
        match wire::decode::<SubmitReply>("submit reply", &reply.payload)
            .map_err(|e| submit_err(e.to_string()))?
        {
            SubmitReply::Accepted { .. } => {}
            SubmitReply::Refused { message } => return Err(submit_err(message)),
        }
        let (proofs, tx) = (self.proofs.clone(), self.results_tx.clone());
        let waiter = async move {
            let mut result = match await_result(events, proofs, id).await {
                Ok(result) => result,
                Err(message) => JobResult::infrastructure(&job, WorkerId("fleet".into()), message),
            };
            // Back to the suite's own numbering, so results reassemble by plan index.
            result.index = job.index;
            result.job_id = job.job_id.clone();
            let _ = tx.send(result);
        };
        self.waiters
            .lock()
            .map_err(|_| QueueError::Other {
                message: "the result waiters are poisoned".into(),
            })?
            .spawn(waiter);
        Ok(())
    }

    async fn next_result(&self) -> Option<JobResult> {
        self.results_rx.lock().await.recv().await
    }
}

/// The fleet-wide halt as an [`AdmissionGate`], kept current by a watch on its key.
pub struct FleetHalt {
    reason: Arc<Mutex<Option<String>>>,
    watcher: tokio::task::JoinHandle<()>,
}

impl FleetHalt {
    pub async fn watch(proofs: kv::Store) -> Result<Self, FleetError> {
        let mut watch = proofs
            .watch(HALT_KEY)
            .await
            .map_err(|e| FleetError::jetstream(format!("watch the halt key {HALT_KEY}"), e))?;
        let reason = Arc::new(Mutex::new(read_halt(&proofs).await?));
        let shared = reason.clone();
        let watcher = tokio::spawn(async move {
            while let Some(Ok(entry)) = watch.next().await {
                let value = match entry.operation {
                    kv::Operation::Put => Some(String::from_utf8_lossy(&entry.value).into_owned()),
                    kv::Operation::Delete | kv::Operation::Purge => None,
                };
                if let Ok(mut reason) = shared.lock() {
                    *reason = value;
                }
            }
        });
        Ok(Self { reason, watcher })
    }
}

impl Drop for FleetHalt {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

impl AdmissionGate for FleetHalt {
    fn stop_reason(&self) -> Option<String> {
        // A poisoned lock still halts: failing open would admit.
        self.reason.lock().map_or_else(
            |_| Some("the halt state is unreadable".into()),
            |r| r.clone(),
        )
    }
}

async fn read_halt(proofs: &kv::Store) -> Result<Option<String>, FleetError> {
    let value = proofs
        .get(HALT_KEY)
        .await
        .map_err(|e| FleetError::jetstream(format!("read the halt key {HALT_KEY}"), e))?;
    Ok(value.map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
}

/// Sets the fleet-wide halt.
pub async fn set_halt(proofs: &kv::Store, reason: &str) -> Result<(), FleetError> {
    proofs
        .put(HALT_KEY, reason.trim().to_owned().into_bytes().into())
        .await
        .map_err(|e| FleetError::jetstream(format!("write the halt key {HALT_KEY}"), e))?;
    Ok(())
}

/// Lifts the fleet-wide halt; `false` when none was set.
pub async fn clear_halt(proofs: &kv::Store) -> Result<bool, FleetError> {
    let was_set = read_halt(proofs).await?.is_some();
    if was_set {
        proofs
            .delete(HALT_KEY)
            .await
            .map_err(|e| FleetError::jetstream(format!("delete the halt key {HALT_KEY}"), e))?;
    }
    Ok(was_set)
}
