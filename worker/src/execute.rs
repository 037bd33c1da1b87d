//! Runs one job end to end on this worker: a fresh scratch copy of the tree, the command in a
//! sandbox with private output files, the structured report read fresh and parsed, artifacts
//! uploaded with their sha256, and the scratch directory removed on every path.

use crate::sandbox::{Sandbox, SandboxExit, SandboxRun, clean_env};
use crate::store::ArtifactStore;
use crate::tree::TreeSource;
use assay_common::WorkerId;
use assay_common::job::{ArtifactRef, ByteEdit, JobResult, JobSpec, JobStatus};
use assay_common::outcome::ReportOutcome;
use assay_common::report;
use assay_common::runner::ReportLocation;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{Instrument, info_span};

/// The unittest adapter Assay ships; written into each job's scratch directory.
pub const UNITTEST_ADAPTER: &str = include_str!("adapters/unittest_adapter.py");

/// What a worker needs to run jobs, shared by all its slots.
#[derive(Clone)]
pub struct JobContext {
    pub worker_id: WorkerId,
    pub sandbox: Arc<dyn Sandbox>,
    pub trees: Arc<dyn TreeSource>,
    pub store: Arc<dyn ArtifactStore>,
    /// Parent of the per-job scratch directories.
    pub scratch_root: PathBuf,
    /// Extra variable names passed through from the worker's environment.
    pub pass_env: Vec<String>,
}

/// Runs `job` and always returns a result: failures to run it land in the infrastructure lane.
pub async fn run_job(job: &JobSpec, ctx: &JobContext) -> JobResult {
    let span = info_span!("job", proof_id = %job.proof_id, job_id = %job.job_id, worker_id = %ctx.worker_id, kind = ?job.kind);
    async {
        let started = Instant::now();
        let scratch = ctx
            .scratch_root
            .join(format!("{}-{:04}", sanitize(job.proof_id.as_str()), job.index));
        let outcome = run_in(job, ctx, &scratch).await;
        if let Err(e) = tokio::fs::remove_dir_all(&scratch).await
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(error = %e, path = %scratch.display(), "failed to remove job scratch directory");
        }
        let mut result = match outcome {
            Ok(result) => result,
            Err(message) => JobResult::infrastructure(job, ctx.worker_id.clone(), message),
        };
        result.duration_ms = started.elapsed().as_millis() as u64;
        tracing::info!(status = result.status.label(), duration_ms = result.duration_ms, "job finished");
        result
    }
    .instrument(span)
    .await
}

async fn run_in(job: &JobSpec, ctx: &JobContext, scratch: &Path) -> Result<JobResult, String> {
    let tree_dir = scratch.join("tree");
    let private = scratch.join("private");
    let _ = tokio::fs::remove_dir_all(scratch).await;
    for dir in [
        &tree_dir,
        &private,
        &private.join("home"),
        &private.join("tmp"),
    ] {
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|e| format!("failed to create scratch directory {}: {e}", dir.display()))?;
    }
    ctx.trees
        .materialize(&job.tree, &tree_dir)
        .await
        .map_err(|e| error_chain(&e))?;
    if let Some(edit) = &job.edit {
        apply_edit(&tree_dir, edit)?;
    }
    let report_path = match job.report.location() {
        ReportLocation::Scratch => private.join("report"),
        ReportLocation::Stdout => private.join("stdout.log"),
        ReportLocation::Tree(path) => tree_dir.join(path.as_str()),
    };
    // A report inside the tree may have been committed: it must never pass for this run's.
    if let Err(e) = tokio::fs::remove_file(&report_path).await
        && e.kind() != std::io::ErrorKind::NotFound
    {
        return Err(format!(
            "failed to remove stale report {}: {e}",
            report_path.display()
        ));
    }
    let adapter_path = private.join("unittest_adapter.py");
    tokio::fs::write(&adapter_path, UNITTEST_ADAPTER)
        .await
        .map_err(|e| format!("failed to write the unittest adapter: {e}"))?;
    // The report path is private and fresh, so no earlier run's report can be read as this one's.
    let command: Vec<String> = job
        .command
        .iter()
        .map(|arg| {
            arg.replace("{report}", &report_path.to_string_lossy())
                .replace("{adapter}", &adapter_path.to_string_lossy())
        })
        .collect();
    let mut env = clean_env(&ctx.pass_env);
    // A private HOME and TMPDIR unless the user passed their own through (e.g. a warm GOCACHE).
    for (key, value) in [
        ("HOME", private.join("home")),
        ("TMPDIR", private.join("tmp")),
    ] {
        if !env.iter().any(|(k, _)| k == key) {
            env.push((key.to_owned(), value.to_string_lossy().into_owned()));
        }
    }
    env.push(("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned()));
    env.extend(job.env.iter().cloned());
    let run = SandboxRun {
        proof_id: job.proof_id.to_string(),
        job_id: job.job_id.to_string(),
        tree_dir: tree_dir.clone(),
        scratch_dir: private.clone(),
        command,
        env,
        stdout_path: private.join("stdout.log"),
        stderr_path: private.join("stderr.log"),
        timeout: Duration::from_secs(job.timeout_secs.max(1)),
        network: false,
    };
    let exit = ctx
        .sandbox
        .run(&run)
        .instrument(info_span!("sandbox", sandbox = ctx.sandbox.name()))
        .await
        .map_err(|e| error_chain(&e))?;
    let status = match exit {
        SandboxExit::Exited(code) => JobStatus::Completed { exit_code: code },
        SandboxExit::Signalled(signal) => JobStatus::Completed {
            exit_code: 128 + signal,
        },
        SandboxExit::TimedOut => JobStatus::TimedOut,
    };
    let report_bytes = match tokio::fs::read(&report_path).await {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(format!(
                "failed to read report {}: {e}",
                report_path.display()
            ));
        }
    };
    let report = match status {
        // A killed run's report, if any, describes part of a run at best.
        JobStatus::TimedOut => {
            ReportOutcome::Inconsistent("the run was killed at its timeout".into())
        }
        _ => report::parse_in_tree(
            &job.report,
            report_bytes.as_deref(),
            &tree_dir.to_string_lossy(),
        ),
    };
    let prefix = format!("proofs/{}/jobs/{:04}", job.proof_id, job.index);
    let mut artifacts: Vec<ArtifactRef> = Vec::new();
    for (name, path) in [("stdout", &run.stdout_path), ("stderr", &run.stderr_path)] {
        let key = format!("{prefix}/{name}.log");
        artifacts.push(
            ctx.store
                .put_file(name, &key, path)
                .await
                .map_err(|e| error_chain(&e))?,
        );
    }
    if let Some(bytes) = report_bytes.filter(|_| job.report.location() != ReportLocation::Stdout) {
        let key = format!("{prefix}/report");
        artifacts.push(
            ctx.store
                .put_bytes("report", &key, bytes.into())
                .await
                .map_err(|e| error_chain(&e))?,
        );
    }
    Ok(JobResult {
        job_id: job.job_id.clone(),
        index: job.index,
        status,
        report,
        artifacts,
        duration_ms: 0,
        worker: ctx.worker_id.clone(),
    })
}

/// Applies a mutant's byte-range edit to the materialized tree.
fn apply_edit(tree_dir: &Path, edit: &ByteEdit) -> Result<(), String> {
    let path = tree_dir.join(&edit.path);
    let mut bytes = std::fs::read(&path)
        .map_err(|e| format!("failed to read {} for a mutant: {e}", edit.path))?;
    if edit.start > edit.end || edit.end > bytes.len() {
        return Err(format!(
            "mutant edit {}..{} is outside {} ({} bytes)",
            edit.start,
            edit.end,
            edit.path,
            bytes.len()
        ));
    }
    bytes.splice(edit.start..edit.end, edit.replacement.bytes());
    std::fs::write(&path, bytes)
        .map_err(|e| format!("failed to write mutant of {}: {e}", edit.path))
}

fn sanitize(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// An error and its causes on one line, for results that cross the wire as text.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
