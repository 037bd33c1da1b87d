//! The served-result decorator: results the cache answered recorded in the proofs bucket.

use crate::lease::{Fence, FenceError};
use assay_common::ProofId;
use assay_common::fleet::{ResultMessage, keys};
use assay_common::job::JobResult;
use assay_common::wire::{self, WireError};
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
            // The result stands either way: only `assay status`'s count would miss it.
            if let Err(error) = self.record(&result, hit.key).await {
                tracing::info!(proof_id = %self.proof_id, job_id = %result.job_id, error = %error_chain(&error), "a result served from the cache is not recorded in the proofs bucket");
            }
        }
        Some(result)
    }

    fn served_from_cache(&self, job_id: &assay_common::JobId) -> bool {
        self.caching.served_from_cache(job_id)
    }
}

/// Why a served result is not recorded in the proofs bucket.
#[derive(Debug, thiserror::Error)]
enum NotRecorded {
    #[error(transparent)]
    Encode(#[from] WireError),
    /// The fenced write of `key` failed.
    #[error("{key} was not written")]
    Write { key: String, source: FenceError },
}

impl RecordServed<'_> {
    /// Records `result` at its job's result key, then marks it served by the cache entry `key`.
    async fn record(&self, result: &JobResult, key: String) -> Result<(), NotRecorded> {
        let message = ResultMessage::Inline(Box::new(result.clone()));
        let bytes = wire::encode("job result", &message)?;
        self.create(keys::result(&self.proof_id, result.index), bytes)
            .await?;
        self.create(keys::cached(&self.proof_id, result.index), key.into_bytes())
            .await
    }

    async fn create(&self, key: String, value: Vec<u8>) -> Result<(), NotRecorded> {
        match self.fence.create(&key, value.into()).await {
            Ok(_) => Ok(()),
            // A resumed proof recorded it before.
            Err(FenceError::Exists { .. }) => Ok(()),
            Err(source) => Err(NotRecorded::Write { key, source }),
        }
    }
}
