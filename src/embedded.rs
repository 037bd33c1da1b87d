//! Embedded mode's parts, shared by every command that runs jobs in this process: the artifact
//! store, the sandbox, and a job context with the repository as tree source.

use crate::exit::{Failure, ResultExt as _};
use crate::sandbox::SandboxChoice;
use anyhow::Context as _;
use assay_common::sandbox::SandboxEvidence;
use assay_engine::proof;
use assay_engine::result_cache::{CacheMode, CacheUnavailable, ResultCache, SigningKey};
use assay_transport::store::{ArtifactStore, ObjectArtifactStore};
use assay_transport::tree::GitTreeSource;
use assay_worker::job_context::JobContext;
use assay_worker::reused_trees::ReusedTrees;
use assay_worker::sandbox::process::ProcessSandbox;
use assay_worker::sandbox::warm::WarmPytest;
use assay_worker::sandbox::{self, Sandbox, confine};
use std::path::Path;
use std::sync::Arc;

pub fn open_store(url: &str) -> Result<Arc<dyn ArtifactStore>, Failure> {
    if let Some(root) = url.strip_prefix("file://") {
        confine::hide_from_guests(Path::new(root));
    }
    Ok(Arc::new(
        ObjectArtifactStore::open(url).map_err(|e| Failure::usage(e.into()))?,
    ))
}

/// An embedded run's result cache over `store` in `mode`, its entries signed with this
/// user's key; or why the run may not use one: the code under test runs unconfined (`sandbox`
/// says so; it could write the store and forge entries, which is also said on stderr unless
/// `quiet`), or no key can be had.
pub fn result_cache(
    store: Arc<dyn ArtifactStore>,
    mode: CacheMode,
    sandbox: &SandboxEvidence,
    quiet: bool,
) -> Result<ResultCache, CacheUnavailable> {
    if let Some(why) = sandbox.unconfined() {
        if !quiet {
            errln!(
                "[sandbox] warning: the code under test runs unconfined ({why}): it can reach this machine's files and network"
            );
        }
        return Err(CacheUnavailable::Unconfined);
    }
    if mode == CacheMode::Off {
        return Ok(ResultCache::off(store));
    }
    let path = SigningKey::user_key_path()?;
    if let Some(dir) = path.parent() {
        confine::hide_from_guests(dir);
    }
    let key = SigningKey::load_or_create(&path)?;
    Ok(ResultCache::new(store, mode, Arc::new(key)))
}

/// The sandbox `choice` names, built as a fleet worker builds it: a docker sandbox checks its
/// image and reaps what killed runs left behind. Failing that is an infrastructure failure.
pub async fn open_sandbox(
    choice: &SandboxChoice,
    jobs: usize,
) -> Result<Arc<dyn Sandbox>, Failure> {
    sandbox::open(
        choice.kind,
        &choice.docker,
        proof::embedded_worker_id().as_str(),
        None,
        jobs,
    )
    .await
    .map_err(|e| Failure::infrastructure(e.into()))
}

/// A job context with the process sandbox for `jobs` jobs at once; see [`job_context_in`].
pub fn job_context(
    repo: &Path,
    store: Arc<dyn ArtifactStore>,
    pass_env: &[String],
    scratch_prefix: &str,
    jobs: usize,
) -> Result<(JobContext, tempfile::TempDir), Failure> {
    job_context_in(
        Arc::new(WarmPytest::new(ProcessSandbox::default(), jobs)),
        repo,
        store,
        pass_env,
        scratch_prefix,
        jobs,
    )
}

/// Every scratch directory this process made, removed again at its very end
/// ([`remove_leftover_scratch`]).
static SCRATCH_MADE: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Removes what is left of this process's scratch directories. A signal drops the command
/// while a job's blocking work (a tree being written) may still run: it can recreate a path
/// inside a scratch directory after the directory's own removal. Called once the runtime, and
/// so every blocking task, has finished; a directory already removed is left as it is.
pub fn remove_leftover_scratch() {
    let made = match SCRATCH_MADE.lock() {
        Ok(mut made) => std::mem::take(&mut *made),
        Err(_) => return,
    };
    for dir in made {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// A job context whose scratch directories live under the returned temporary directory;
/// keep it alive until the jobs are done. Mutant jobs' trees are reused (reset) there, about
/// two per slot.
pub fn job_context_in(
    sandbox: Arc<dyn Sandbox>,
    repo: &Path,
    store: Arc<dyn ArtifactStore>,
    pass_env: &[String],
    scratch_prefix: &str,
    slots: usize,
) -> Result<(JobContext, tempfile::TempDir), Failure> {
    let scratch = tempfile::Builder::new()
        .prefix(scratch_prefix)
        .tempdir()
        .context("failed to create a scratch directory")
        .infrastructure()?;
    if let Ok(mut made) = SCRATCH_MADE.lock() {
        made.push(scratch.path().to_owned());
    }
    let ctx = JobContext {
        worker_id: proof::embedded_worker_id(),
        sandbox,
        trees: Arc::new(ReusedTrees::new(
            Arc::new(GitTreeSource::new(repo)),
            // No job's scratch directory is named with a leading dot.
            scratch.path().join(".trees"),
            slots,
        )),
        store,
        scratch_root: scratch.path().to_owned(),
        pass_env: pass_env.to_vec(),
        output_cap_bytes: assay_common::service_config::DEFAULT_OUTPUT_CAP_BYTES,
        dependencies: None,
    };
    Ok((ctx, scratch))
}
