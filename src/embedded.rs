//! Embedded mode's parts, shared by every command that runs jobs in this process: the artifact
//! store and a job context with the process sandbox and the repository as tree source.

use crate::exit::{Failure, ResultExt as _};
use anyhow::Context as _;
use assay_coordinator::engine;
use assay_worker::execute::JobContext;
use assay_worker::sandbox::process::ProcessSandbox;
use assay_worker::sandbox::warm::WarmPytest;
use assay_worker::store::{ArtifactStore, ObjectArtifactStore};
use assay_worker::tree::GitTreeSource;
use std::path::Path;
use std::sync::Arc;

pub fn open_store(url: &str) -> Result<Arc<dyn ArtifactStore>, Failure> {
    Ok(Arc::new(
        ObjectArtifactStore::open(url).map_err(|e| Failure::usage(e.into()))?,
    ))
}

/// A job context whose scratch directories live under the returned temporary directory;
/// keep it alive until the jobs are done.
pub fn job_context(
    repo: &Path,
    store: Arc<dyn ArtifactStore>,
    pass_env: &[String],
    scratch_prefix: &str,
) -> Result<(JobContext, tempfile::TempDir), Failure> {
    let scratch = tempfile::Builder::new()
        .prefix(scratch_prefix)
        .tempdir()
        .context("failed to create a scratch directory")
        .infrastructure()?;
    let ctx = JobContext {
        worker_id: engine::embedded_worker_id(),
        sandbox: Arc::new(WarmPytest::new(ProcessSandbox)),
        trees: Arc::new(GitTreeSource::new(repo)),
        store,
        scratch_root: scratch.path().to_owned(),
        pass_env: pass_env.to_vec(),
    };
    Ok((ctx, scratch))
}
