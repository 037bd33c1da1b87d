//! The served-result decorator: results the cache answered recorded in the proofs bucket.

use crate::lease::{Fence, FenceError};
use assay_common::ProofId;
use assay_common::fleet::{ResultMessage, keys};
use assay_common::job::JobResult;
use assay_common::wire;
use assay_engine::result_cache::CachingQueue;
use assay_transport::error_chain::error_chain;
use assay_transport::queue::{JobQueue, QueueError};

/// The proof's queue behind the cache: each result the cache served is recorded at its job's
/// KV result key as a worker's would be, so `assay status` counts it and a resumed proof finds
/// it there, and marked served (`keys::cached`) for `assay status` to say so.
pub(super) struct RecordServed<'a> {
    pub(super) caching: &'a CachingQueue<'a>,
    pub(super) fence: Fence,
    pub(super) proof_id: ProofId,
}

#[async_trait::async_trait]
impl JobQueue for RecordServed<'_> {
    async fn submit(&self, job: assay_common::job::JobSpec) -> Result<(), QueueError> {
        self.caching.submit(job).await
    }

    async fn next_result(&self) -> Option<JobResult> {
        let result = self.caching.next_result().await?;
        if let Some(hit) = self.caching.hit(&result.job_id) {
            let message = ResultMessage::Inline(Box::new(result.clone()));
            let recorded = match wire::encode("job result", &message) {
                Ok(bytes) => {
                    let index = result.index;
                    match self
                        .create(keys::result(&self.proof_id, index), bytes)
                        .await
                    {
                        Ok(()) => {
                            self.create(keys::cached(&self.proof_id, index), hit.key.into_bytes())
                                .await
                        }
                        Err(e) => Err(e),
                    }
                }
                Err(e) => Err(e.to_string()),
            };
            // The result stands either way: only `assay status`'s count would miss it.
            if let Err(error) = recorded {
                tracing::info!(proof_id = %self.proof_id, job_id = %result.job_id, error, "a result served from the cache is not recorded in the proofs bucket");
            }
        }
        Some(result)
    }
}

impl RecordServed<'_> {
    async fn create(&self, key: String, value: Vec<u8>) -> Result<(), String> {
        match self.fence.create(&key, value.into()).await {
            Ok(_) => Ok(()),
            // A resumed proof recorded it before.
            Err(FenceError::Exists { .. }) => Ok(()),
            Err(e) => Err(error_chain(&e)),
        }
    }
}
