//! What a worker hands every job it runs (its sandbox, trees, store and limits), and how a
//! job's output streams reach the store. Shared by a plain job (`execute`) and the rows of a
//! manifest job (`manifest_job`).

use crate::sandbox::Sandbox;
use assay_common::WorkerId;
use assay_common::job::ArtifactRef;
use assay_transport::store::{ArtifactStore, StoreError};
use assay_transport::tree::TreeSource;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a worker needs to run jobs, shared by all its slots.
#[derive(Clone)]
pub struct JobContext {
    /// This worker's id, recorded in each result.
    pub worker_id: WorkerId,
    /// Where commands run: Docker or processes.
    pub sandbox: Arc<dyn Sandbox>,
    /// Where jobs' trees come from.
    pub trees: Arc<dyn TreeSource>,
    /// Where logs, reports and artifacts go.
    pub store: Arc<dyn ArtifactStore>,
    /// Parent of the per-job scratch directories.
    pub scratch_root: PathBuf,
    /// Extra variable names passed through from the worker's environment.
    pub pass_env: Vec<String>,
    /// The most of a job's stdout, and of its stderr, stored; the rest is dropped and
    /// counted in the artifact's `dropped_bytes` (`worker.output_cap_bytes`).
    pub output_cap_bytes: u64,
    /// The unpacked dependency archives jobs name (a fleet worker's); `None` where no job
    /// names one (embedded mode gives the host's cargo caches).
    pub dependencies: Option<Arc<crate::dependency_cache::DependencyCache>>,
}

/// One of a job's output streams could not be stored.
#[derive(Debug, thiserror::Error)]
#[error("failed to store the job's {name} output")]
pub struct OutputError {
    /// Which stream: `stdout` or `stderr`.
    pub name: String,
    /// The store's error.
    #[source]
    pub source: StoreError,
}

/// Stores one of a job's output streams, streamed and cut at the worker's cap; a cut is
/// logged and recorded in the artifact's `dropped_bytes`.
pub(crate) async fn store_output(
    ctx: &JobContext,
    name: &str,
    key: &str,
    path: &Path,
) -> Result<ArtifactRef, OutputError> {
    let artifact = ctx
        .store
        .put_file_capped(name, key, path, ctx.output_cap_bytes)
        .await
        .map_err(|source| OutputError {
            name: name.to_owned(),
            source,
        })?;
    if artifact.dropped_bytes > 0 {
        tracing::warn!(
            artifact = name,
            stored_bytes = artifact.bytes,
            dropped_bytes = artifact.dropped_bytes,
            "job output over the worker's output_cap_bytes: the rest was dropped"
        );
    }
    Ok(artifact)
}
