//! The fleet's [`JobQueue`] for one proof: `submit` publishes to the JetStream work queue with
//! the job id as message id (so a resumed coordinator's republish is de-duplicated), and
//! `next_result` yields what the results dispatcher has applied for this proof. On resume, a
//! job whose result is already in the proof's KV state is answered from there, not re-run.
//! Every publish first waits for the proof's turn from the [`Admitter`], and happens under the
//! proof's gate, so once a cancel has closed the gate no job of the proof reaches the queue,
//! and only while this coordinator holds the leader lease.

use crate::admitter::Admitter;
use crate::lease::Fence;
use assay_common::fleet::{Subjects, keys};
use assay_common::job::{JobResult, JobSpec};
use assay_common::wire;
use assay_transport::queue::{Cause, JobQueue, QueueError};
use assay_transport::store::ArtifactStore;
use async_nats::jetstream;
use async_trait::async_trait;
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::{Mutex, mpsc};

/// Closed (`true`) when the proof is cancelled; held across each publish.
pub type PublishGate = Arc<Mutex<bool>>;

/// One proof's [`JobQueue`] over JetStream: publishes its jobs
/// (admitted one by one, fenced by the lease) and yields its applied results.
pub struct NatsJobQueue {
    js: jetstream::Context,
    fence: Fence,
    /// Where results too big for a KV value are (see `offload`).
    store: Arc<dyn ArtifactStore>,
    result_cap: assay_transport::offload::ReadCap,
    subjects: Subjects,
    admitter: Admitter,
    gate: PublishGate,
    applied: Mutex<mpsc::UnboundedReceiver<JobResult>>,
    recovered: Mutex<VecDeque<JobResult>>,
    /// Only a resumed proof can have stored results; a new one skips the lookup per job.
    resumed: bool,
}

/// Where a proof's state is: the proofs bucket, and the artifact store for results too big
/// for a KV value.
pub struct ProofStores {
    /// The proofs bucket, read and written as the leader.
    pub fence: Fence,
    /// Where results too big for a KV value are kept.
    pub store: Arc<dyn ArtifactStore>,
    /// The most of a stored result read back.
    pub result_cap: assay_transport::offload::ReadCap,
}

impl NatsJobQueue {
    /// `applied` carries this proof's results, each once, from the results dispatcher.
    pub fn new(
        js: jetstream::Context,
        ProofStores {
            fence,
            store,
            result_cap,
        }: ProofStores,
        subjects: Subjects,
        admitter: Admitter,
        gate: PublishGate,
        applied: mpsc::UnboundedReceiver<JobResult>,
        resumed: bool,
    ) -> Self {
        Self {
            js,
            fence,
            store,
            result_cap,
            subjects,
            admitter,
            gate,
            applied: Mutex::new(applied),
            recovered: Mutex::new(VecDeque::new()),
            resumed,
        }
    }
}

#[async_trait]
impl JobQueue for NatsJobQueue {
    async fn submit(&self, job: JobSpec) -> Result<(), QueueError> {
        let job_id = job.job_id.to_string();
        let failed = |step, source: Cause| QueueError::submit_step(&job_id, step, source);
        if self.resumed {
            // Read from the stream's leader: a replica that lags could miss a result the
            // previous leader recorded, and the job would run again.
            let stored = self
                .fence
                .read(&keys::result(&job.proof_id, job.index))
                .await
                .map_err(|e| failed("reading the proof's state", e.into()))?;
            if let Some(bytes) = stored {
                let result = assay_transport::offload::decode_result(
                    self.store.as_ref(),
                    &job.proof_id,
                    &bytes,
                    self.result_cap,
                )
                .await
                .map_err(|e| failed("reading its recorded result", e.into()))?;
                self.recovered.lock().await.push_back(result);
                return Ok(());
            }
        }
        let payload =
            wire::encode("job", &job).map_err(|e| failed("encoding the job", e.into()))?;
        self.admitter
            .admit(&job.proof_id)
            .await
            .map_err(|e| failed("waiting for the proof's turn", e.into()))?;
        let cancelled = self.gate.lock().await;
        // A deposed leader queues nothing more: its successor resumes the proof.
        if *cancelled || !self.fence.holds() {
            return Err(QueueError::Cancelled { job_id });
        }
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", job.job_id.as_str());
        // Called inside the proof's span: the job's worker continues its trace.
        assay_transport::trace_context::inject(&mut headers);
        self.js
            .publish_with_headers(self.subjects.jobs(&job.proof_id), headers, payload.into())
            .await
            .map_err(|e| failed("publishing the job", e.into()))?
            .await
            .map_err(|e| failed("confirming the job's publication", e.into()))?;
        drop(cancelled);
        Ok(())
    }

    async fn next_result(&self) -> Option<JobResult> {
        if let Some(result) = self.recovered.lock().await.pop_front() {
            return Some(result);
        }
        self.applied.lock().await.recv().await
    }
}
