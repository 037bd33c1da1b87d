//! The job queue as the coordinator sees it: submit jobs, receive results. Embedded mode uses
//! the worker's in-process queue, whose tasks run jobs in the CLI's process; the fleet's queue
//! is NATS JetStream. The engine cannot tell them apart.

use assay_common::job::{JobResult, JobSpec};
use async_trait::async_trait;

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("failed to submit job {job_id}: {message}")]
    Submit { job_id: String, message: String },
    #[error("the result stream closed with {outstanding} jobs outstanding")]
    Closed { outstanding: usize },
    #[error("queue failure: {message}")]
    Other { message: String },
}

#[async_trait]
pub trait JobQueue: Send + Sync {
    async fn submit(&self, job: JobSpec) -> Result<(), QueueError>;
    /// The next result of any submitted job, in completion order; `None` when no more can come.
    async fn next_result(&self) -> Option<JobResult>;
}
