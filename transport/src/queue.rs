//! The job queue as the coordinator sees it: submit jobs, receive results. Embedded mode uses
//! the worker's in-process queue, whose tasks run jobs in the CLI's process; the fleet's queue
//! is NATS JetStream. The engine cannot tell them apart.

use assay_common::JobId;
use assay_common::job::{JobResult, JobSpec};
use async_trait::async_trait;

/// Any cause a queue passes on: a NATS, store or codec error, kept with its own chain.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Why a job could not be submitted or its results stopped coming.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// A step of submitting the job failed.
    #[error("failed to submit job {job_id}: {step}")]
    Submit {
        /// The job being submitted.
        job_id: String,
        /// What the queue was doing ("publishing the job", "reading the proof's state").
        step: &'static str,
        /// The error that step met.
        #[source]
        source: Cause,
    },
    /// The coordinator answered the job's submission with a refusal.
    #[error("the coordinator refused job {job_id}: {reason}")]
    Refused {
        /// The refused job.
        job_id: String,
        /// The coordinator's reason.
        reason: String,
    },
    /// The coordinator did not answer the job's submission in time.
    #[error(
        "no reply from the coordinator within {secs} s to job {job_id} (hint: is `assay coordinator` running on this NATS server and prefix?)"
    )]
    NoReply {
        /// The job sent.
        job_id: String,
        /// How long it waited, in seconds.
        secs: u64,
    },
    /// The proof was cancelled before the job went out.
    #[error("job {job_id} was not submitted: the proof was cancelled")]
    Cancelled {
        /// The job held back.
        job_id: String,
    },
    /// Embedded mode's workers are gone, so nothing would run the job.
    #[error("job {job_id} was not submitted: the in-process workers have stopped")]
    WorkersStopped {
        /// The job held back.
        job_id: String,
    },
    /// The results ended while jobs still had none.
    #[error("the result stream closed with {outstanding} jobs outstanding")]
    Closed {
        /// Jobs submitted that got no result.
        outstanding: usize,
    },
    /// A thread panicked holding the result waiters' lock.
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

/// Where a proof's jobs go and their results come from: in-process workers or the fleet.
#[async_trait]
pub trait JobQueue: Send + Sync {
    /// Puts one job in the queue; it returns once the job is accepted, not run.
    async fn submit(&self, job: JobSpec) -> Result<(), QueueError>;
    /// The next result of any submitted job, in completion order; `None` when no more can come.
    async fn next_result(&self) -> Option<JobResult>;
    /// Whether the result of `job_id` was answered by a result cache in front of the queue
    /// instead of a run, so a reporter can say so. Only such a cache answers `true`; a queue
    /// that wraps another passes the question on.
    fn served_from_cache(&self, _job_id: &JobId) -> bool {
        false
    }
}
