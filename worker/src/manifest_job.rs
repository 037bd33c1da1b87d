//! Runs a manifest job: the interpreter once per case, each in its own sandboxed process with
//! its own stdout and stderr, judged against the case's expectation. The cases share the job's
//! timeout; a job cut short by it reports nothing, since the cases it never ran are not failures.

use crate::job_context::{JobContext, OutputError};
use crate::sandbox::{SandboxError, SandboxExit, SandboxRun};
use assay_common::JobId;
use assay_common::job::{ArtifactRef, JobSpec, JobStatus};
use assay_common::manifest::{self, ManifestJob};
use assay_common::outcome::ReportOutcome;
use assay_common::tree_path::TreePath;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Why a manifest job stopped short of a result; the job lands in the infrastructure lane.
#[derive(Debug, thiserror::Error)]
pub enum CasesError {
    /// The sandbox failed to run a case (not a failing case).
    #[error("the sandbox did not run case {case} of job {job}")]
    Sandbox {
        /// The job being run.
        job: JobId,
        /// The case, by its path in the tree.
        case: TreePath,
        /// The underlying error.
        #[source]
        source: SandboxError,
    },
    /// A case's output could not be stored.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// A case's captured output could not be read back.
    #[error("failed to read the output of case {case} from {path}")]
    ReadOutput {
        /// The case, by its path in the tree.
        case: TreePath,
        /// The file its output was captured in.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl CasesError {
    /// What failed, for the job's result and the fault policy.
    pub fn cause(&self) -> assay_common::fault::InfraCause {
        use assay_common::fault::InfraCause;
        match self {
            Self::Sandbox { source, .. } => source.cause(),
            Self::Output(_) => InfraCause::StoreUnavailable,
            Self::ReadOutput { .. } => InfraCause::Workspace,
        }
    }
}

/// What running the cases produced: the job's status, its report and each case's logs.
pub(crate) struct CasesRun {
    pub status: JobStatus,
    pub report: ReportOutcome,
    pub artifacts: Vec<ArtifactRef>,
}

/// The job's folders: `tree` and `private` are the guest's (a container mounts them), `logs`
/// is the worker's alone, so a case cannot rewrite its own or another case's output.
pub(crate) struct CaseDirs<'a> {
    /// The proof's directory, which holds the job's (see `SandboxRun::proof_dir`).
    pub proof: &'a Path,
    pub tree: &'a Path,
    pub private: &'a Path,
    pub logs: &'a Path,
}

pub(crate) async fn run_cases(
    job: &JobSpec,
    cases: &ManifestJob,
    ctx: &JobContext,
    dirs: CaseDirs<'_>,
    env: Vec<(String, String)>,
) -> Result<CasesRun, CasesError> {
    // A timeout past what an `Instant` can hold (`u64::MAX` seconds) is no deadline at all.
    let deadline = Instant::now().checked_add(Duration::from_secs(job.timeout_secs.max(1)));
    let prefix = format!("proofs/{}/jobs/{:04}/cases", job.proof_id, job.index);
    let mut results = Vec::with_capacity(cases.cases.len());
    let mut artifacts = Vec::new();
    // The job's exit code is the first case's non-zero exit, if any: informational only, since
    // an `error` row exits non-zero when it passes.
    let mut first_nonzero = 0;
    for (number, case) in cases.cases.iter().enumerate() {
        let left = match deadline {
            Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                Some(left) => left,
                None => return Ok(timed_out(artifacts)),
            },
            None => Duration::MAX,
        };
        let mut command = job.command.clone();
        command.push(cases.run_path(case));
        let run = SandboxRun {
            proof_id: job.proof_id.to_string(),
            job_id: job.job_id.to_string(),
            tree_dir: dirs.tree.to_path_buf(),
            scratch_dir: dirs.private.to_path_buf(),
            proof_dir: dirs.proof.to_path_buf(),
            command,
            env: env.clone(),
            stdout_path: dirs.logs.join(format!("case-{number:04}.stdout.log")),
            stderr_path: dirs.logs.join(format!("case-{number:04}.stderr.log")),
            timeout: left,
            forked_timeout: None,
            network: false,
            vendored: None,
        };
        let exit = ctx
            .sandbox
            .run(&run)
            .await
            .map_err(|source| CasesError::Sandbox {
                job: job.job_id.clone(),
                case: case.path.clone(),
                source,
            })?;
        for (stream, path) in [("stdout", &run.stdout_path), ("stderr", &run.stderr_path)] {
            let key = format!("{prefix}/{number:04}/{stream}.log");
            let name = format!("{}:{stream}", case.path);
            artifacts.push(crate::job_context::store_output(ctx, &name, &key, path).await?);
        }
        let exit_code = match exit {
            SandboxExit::Exited(code) => Some(code),
            SandboxExit::Signalled(_) => None,
            SandboxExit::TimedOut => return Ok(timed_out(artifacts)),
        };
        if first_nonzero == 0 {
            first_nonzero = exit_code.unwrap_or(-1);
        }
        // Judged on what was stored: the output up to the cap, never more in memory.
        let stdout = read_capped(&run.stdout_path, ctx.output_cap_bytes)
            .await
            .map_err(|source| CasesError::ReadOutput {
                case: case.path.clone(),
                path: run.stdout_path.clone(),
                source,
            })?;
        results.push(manifest::case_result(
            &cases.manifest_path(),
            case,
            exit_code,
            &stdout,
        ));
    }
    Ok(CasesRun {
        status: JobStatus::Completed {
            exit_code: first_nonzero,
        },
        report: manifest::job_report(results),
        artifacts,
    })
}

async fn read_capped(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt as _;
    let mut bytes = Vec::new();
    tokio::fs::File::open(path)
        .await?
        .take(cap)
        .read_to_end(&mut bytes)
        .await?;
    Ok(bytes)
}

fn timed_out(artifacts: Vec<ArtifactRef>) -> CasesRun {
    CasesRun {
        status: JobStatus::TimedOut,
        report: ReportOutcome::Inconsistent("the run was killed at its timeout".into()),
        artifacts,
    }
}
