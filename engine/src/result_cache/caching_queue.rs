//! The cache in front of a job queue: cacheable jobs answered from it, the rest sent on.

use super::{CacheError, CacheHit, CacheMode, Lookup, ResultCache, RunContext, cache_key};
use assay_common::JobId;
use assay_common::evidence::Evidence;
use assay_common::job::{JobKind, JobResult, JobSpec};
use assay_common::runner::ReportFormat;
use assay_transport::queue::{JobQueue, QueueError};
use async_trait::async_trait;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

/// A [`JobQueue`] that answers cacheable jobs from the cache and sends the rest on to `inner`.
/// It remembers each job's key (for [`ResultCache::store_trusted`]) and which were served.
pub struct CachingQueue<'a> {
    inner: &'a dyn JobQueue,
    cache: ResultCache,
    context: RunContext,
    ready: tokio::sync::Mutex<VecDeque<JobResult>>,
    keyed: Mutex<BTreeMap<JobId, String>>,
    served: Mutex<BTreeMap<JobId, CacheHit>>,
    rejected: Mutex<Vec<(String, String)>>,
}

impl<'a> CachingQueue<'a> {
    /// Wraps `inner`, looking each job up in `cache` under keys made with `context`.
    pub fn new(inner: &'a dyn JobQueue, cache: ResultCache, context: RunContext) -> Self {
        Self {
            inner,
            cache,
            context,
            ready: tokio::sync::Mutex::default(),
            keyed: Mutex::default(),
            served: Mutex::default(),
            rejected: Mutex::default(),
        }
    }

    /// Each keyed job's cache key, by job id.
    pub fn keyed(&self) -> BTreeMap<JobId, String> {
        self.keyed.lock().map(|k| k.clone()).unwrap_or_default()
    }

    /// The jobs answered from the cache.
    pub fn served(&self) -> BTreeMap<JobId, CacheHit> {
        self.served.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The entry that answered `job_id`, if the cache did.
    pub fn hit(&self, job_id: &JobId) -> Option<CacheHit> {
        self.served.lock().ok()?.get(job_id).cloned()
    }

    /// Entries found but refused, with why: `(key, why)`.
    pub fn rejected(&self) -> Vec<(String, String)> {
        self.rejected.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The cache the queue answers from.
    pub fn cache(&self) -> &ResultCache {
        &self.cache
    }

    /// A finished proof's cache bookkeeping, the same embedded and on a fleet: marks in
    /// `evidence` the jobs the cache answered, then stores the run's trusted results.
    pub async fn settle(
        &self,
        evidence: &mut Evidence,
        results: &[JobResult],
        finished_at_ms: &[u64],
    ) -> Settled {
        let served = self.served();
        CacheHit::mark(evidence, &served, finished_at_ms);
        let stored = self
            .cache
            .store_trusted(&self.keyed(), &served, results, evidence)
            .await;
        Settled {
            served: served.len(),
            stored,
        }
    }
}

/// What [`CachingQueue::settle`] did: how many jobs the cache answered, and how many results
/// it stored (or why it stored none).
#[derive(Debug)]
pub struct Settled {
    /// Jobs the cache answered.
    pub served: usize,
    /// Results written to the cache, or why none could be.
    pub stored: Result<usize, CacheError>,
}

/// Which jobs may be answered from the cache: a proof's own test runs. Mutants are report-only
/// and their kills unconfirmed; manifest cases are judged, not parsed, so their results
/// cannot be re-checked against a pinned report.
fn cacheable(spec: &JobSpec) -> bool {
    matches!(
        spec.kind,
        JobKind::Targeted | JobKind::Suite | JobKind::Stability | JobKind::HarnessCheck
    ) && !matches!(spec.report, ReportFormat::ManifestCases(_))
}

#[async_trait]
impl JobQueue for CachingQueue<'_> {
    async fn submit(&self, job: JobSpec) -> Result<(), QueueError> {
        if self.cache.mode == CacheMode::Off || !cacheable(&job) {
            return self.inner.submit(job).await;
        }
        let key = cache_key(&job, &self.context);
        if let Ok(mut keyed) = self.keyed.lock() {
            keyed.insert(job.job_id.clone(), key.clone());
        }
        match self.cache.lookup(&key, &job).await {
            Lookup::Hit(entry) => {
                let mut result = entry.result;
                result.job_id = job.job_id.clone();
                result.index = job.index;
                if let Ok(mut served) = self.served.lock() {
                    served.insert(
                        job.job_id.clone(),
                        CacheHit {
                            key,
                            produced_by: entry.produced_by,
                        },
                    );
                }
                self.ready.lock().await.push_back(result);
                Ok(())
            }
            Lookup::Rejected { key, why } => {
                // A coordinator's log is where a fleet reports it; the CLI, whose logs show
                // warnings only, reports `rejected` in one summary line of its own.
                tracing::info!(key, %why, "refusing a cache entry that failed its checks");
                if let Ok(mut rejected) = self.rejected.lock() {
                    rejected.push((key, why.to_string()));
                }
                self.inner.submit(job).await
            }
            Lookup::Miss => self.inner.submit(job).await,
        }
    }

    async fn next_result(&self) -> Option<JobResult> {
        if let Some(result) = self.ready.lock().await.pop_front() {
            return Some(result);
        }
        self.inner.next_result().await
    }

    fn served_from_cache(&self, job_id: &JobId) -> bool {
        // Marked before the result is queued, so it holds by the time the result is read.
        self.hit(job_id).is_some() || self.inner.served_from_cache(job_id)
    }
}
