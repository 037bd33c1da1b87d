//! The job queue of embedded mode: `slots` tasks in this process take jobs from a channel and
//! run them with [`run_job`], as a fleet worker would, and hand back their results.

use crate::execute::run_job;
use crate::job_context::JobContext;
use assay_common::job::{JobResult, JobSpec};
use assay_transport::queue::{JobQueue, QueueError};
use async_trait::async_trait;
use tokio::task::JoinSet;

/// Jobs run by `slots` tasks in this process. Dropping the queue aborts running jobs, and each
/// sandbox cleans up after itself when its future is dropped.
pub struct InProcessQueue {
    jobs: async_channel::Sender<JobSpec>,
    results: async_channel::Receiver<JobResult>,
    _workers: JoinSet<()>,
}

impl InProcessQueue {
    /// Starts `slots` workers (at least one) on `ctx`, each running one job at a time.
    pub fn start(ctx: JobContext, slots: usize) -> Self {
        let (job_tx, job_rx) = async_channel::unbounded::<JobSpec>();
        let (result_tx, result_rx) = async_channel::unbounded::<JobResult>();
        let mut workers = JoinSet::new();
        for _ in 0..slots.max(1) {
            let job_rx = job_rx.clone();
            let result_tx = result_tx.clone();
            let ctx = ctx.clone();
            workers.spawn(async move {
                while let Ok(job) = job_rx.recv().await {
                    let result = run_job(&job, &ctx).await;
                    if result_tx.send(result).await.is_err() {
                        break;
                    }
                }
            });
        }
        Self {
            jobs: job_tx,
            results: result_rx,
            _workers: workers,
        }
    }
}

#[async_trait]
impl JobQueue for InProcessQueue {
    async fn submit(&self, job: JobSpec) -> Result<(), QueueError> {
        let job_id = job.job_id.to_string();
        self.jobs
            .send(job)
            .await
            .map_err(|_| QueueError::WorkersStopped { job_id })
    }

    async fn next_result(&self) -> Option<JobResult> {
        self.results.recv().await.ok()
    }
}
