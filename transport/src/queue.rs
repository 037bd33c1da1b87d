//! The job queue as the coordinator sees it: submit jobs, receive results. Embedded mode uses
//! the worker's in-process queue, whose tasks run jobs in the CLI's process; the fleet's queue
//! is NATS JetStream. The engine cannot tell them apart.

use assay_common::job::{JobResult, JobSpec};
use async_trait::async_trait;

/// Any cause a queue passes on: a NATS, store or codec error, kept with its own chain.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("failed to submit job {job_id}: {step}")]
    Submit {
        job_id: String,
        /// What the queue was doing ("publishing the job", "reading the proof's state").
        step: &'static str,
        #[source]
        source: Cause,
    },
    #[error("the coordinator refused job {job_id}: {reason}")]
    Refused { job_id: String, reason: String },
    #[error(
        "no reply from the coordinator within {secs} s to job {job_id} (hint: is `assay coordinator` running on this NATS server and prefix?)"
    )]
    NoReply { job_id: String, secs: u64 },
    #[error("job {job_id} was not submitted: the proof was cancelled")]
    Cancelled { job_id: String },
    #[error("job {job_id} was not submitted: the in-process workers have stopped")]
    WorkersStopped { job_id: String },
    #[error("the result stream closed with {outstanding} jobs outstanding")]
    Closed { outstanding: usize },
    #[error("the queue's result waiters are poisoned by an earlier panic")]
    Poisoned,
}

impl QueueError {
    /// Submitting `job_id` failed at `step` ("publishing the job").
    pub fn submit_step(job_id: &str, step: &'static str, source: Cause) -> Self {
        QueueError::Submit {
            job_id: job_id.to_owned(),
            step,
            source,
        }
    }
}

#[async_trait]
pub trait JobQueue: Send + Sync {
    async fn submit(&self, job: JobSpec) -> Result<(), QueueError>;
    /// The next result of any submitted job, in completion order; `None` when no more can come.
    async fn next_result(&self) -> Option<JobResult>;
}
