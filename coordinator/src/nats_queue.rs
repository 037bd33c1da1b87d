//! The fleet's [`JobQueue`] for one proof: `submit` publishes to the JetStream work queue with
//! the job id as message id (so a resumed coordinator's republish is de-duplicated), and
//! `next_result` yields what the results dispatcher has applied for this proof. On resume, a
//! job whose result is already in the proof's KV state is answered from there, not re-run.

use crate::queue::{JobQueue, QueueError};
use assay_common::fleet::{Subjects, keys};
use assay_common::job::{JobResult, JobSpec};
use assay_common::wire;
use async_nats::jetstream::{self, kv};
use async_trait::async_trait;
use std::collections::VecDeque;
use tokio::sync::{Mutex, mpsc};

pub struct NatsJobQueue {
    js: jetstream::Context,
    proofs: kv::Store,
    subjects: Subjects,
    applied: Mutex<mpsc::UnboundedReceiver<JobResult>>,
    recovered: Mutex<VecDeque<JobResult>>,
}

impl NatsJobQueue {
    /// `applied` carries this proof's results, each once, from the results dispatcher.
    pub fn new(
        js: jetstream::Context,
        proofs: kv::Store,
        subjects: Subjects,
        applied: mpsc::UnboundedReceiver<JobResult>,
    ) -> Self {
        Self {
            js,
            proofs,
            subjects,
            applied: Mutex::new(applied),
            recovered: Mutex::new(VecDeque::new()),
        }
    }
}

#[async_trait]
impl JobQueue for NatsJobQueue {
    async fn submit(&self, job: JobSpec) -> Result<(), QueueError> {
        let submit_err = |message: String| QueueError::Submit {
            job_id: job.job_id.to_string(),
            message,
        };
        let stored = self
            .proofs
            .get(keys::result(&job.proof_id, job.index))
            .await
            .map_err(|e| submit_err(format!("failed to read proof state: {e}")))?;
        if let Some(bytes) = stored {
            let result: JobResult =
                wire::decode("job result", &bytes).map_err(|e| submit_err(e.to_string()))?;
            self.recovered.lock().await.push_back(result);
            return Ok(());
        }
        let payload = wire::encode("job", &job).map_err(|e| submit_err(e.to_string()))?;
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", job.job_id.as_str());
        // Called inside the proof's span: the job's worker continues its trace.
        assay_worker::trace_context::inject(&mut headers);
        self.js
            .publish_with_headers(self.subjects.jobs(&job.proof_id), headers, payload.into())
            .await
            .map_err(|e| submit_err(e.to_string()))?
            .await
            .map_err(|e| submit_err(e.to_string()))?;
        Ok(())
    }

    async fn next_result(&self) -> Option<JobResult> {
        if let Some(result) = self.recovered.lock().await.pop_front() {
            return Some(result);
        }
        self.applied.lock().await.recv().await
    }
}
