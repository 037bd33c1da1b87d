//! Sandboxes run one job's command in isolation. The process sandbox (embedded mode) and the
//! Docker sandbox (the fleet) implement the same small trait and pass the same suite.

pub mod confine;
pub mod docker;
mod hot_swap;
pub mod process;
mod reaper;
pub mod toolchain_layouts;
pub mod warm;

use assay_common::sandbox::SandboxEvidence;
use assay_common::service_config::SandboxKind;
use assay_transport::metrics::Metrics;
use async_trait::async_trait;
use docker::{DockerConfig, DockerSandbox, DockerSetupError};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Everything a sandbox needs to run one command. Paths are on the worker's filesystem; a
/// sandbox that runs elsewhere (a container) maps them in.
#[derive(Clone, Debug)]
pub struct SandboxRun {
    /// Labels for logs and leftovers (container labels, process names).
    pub proof_id: String,
    /// The job the command runs for.
    pub job_id: String,
    /// The job's private scratch copy of its tree; the command's working directory.
    pub tree_dir: PathBuf,
    /// A private directory outside the tree for the report, the adapter and temp files.
    pub scratch_dir: PathBuf,
    /// The directory of this proof's job directories on this worker, `tree_dir` and
    /// `scratch_dir` among them: what a warm server of the proof may write (see [`warm`]).
    pub proof_dir: PathBuf,
    /// argv with `{report}`, `{adapter}` and `{node_reporter}` already replaced.
    pub command: Vec<String>,
    /// The complete environment: nothing is inherited beyond it.
    pub env: Vec<(String, String)>,
    /// The file the command's stdout is written to.
    pub stdout_path: PathBuf,
    /// The file the command's stderr is written to.
    pub stderr_path: PathBuf,
    /// How long the command may run before it is killed.
    pub timeout: Duration,
    /// The limit when the warm runner runs the job in a fork of a collected session (see
    /// `JobSpec::forked_timeout_secs`); `timeout` still bounds it.
    pub forked_timeout: Option<Duration>,
    /// Allow network access (only when the plan asks).
    pub network: bool,
    /// The unpacked dependency archive the job builds from (see `dependency_cache`), given to
    /// the guest read-only where [`Sandbox::vendored_path`] says; the job's `CARGO_HOME`
    /// names it, and the host's cargo caches are not given at all.
    pub vendored: Option<PathBuf>,
}

/// How the command ended. A non-zero exit is the guest's outcome, not a sandbox error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SandboxExit {
    /// The command exited with this code.
    Exited(i32),
    /// Killed by a signal the sandbox did not send (e.g. the kernel's OOM killer).
    Signalled(i32),
    /// Killed by the sandbox at its timeout.
    TimedOut,
}

/// Why the sandbox could not run a command; the job lands in the infrastructure lane.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The command (or the tool that confines it) could not be started.
    #[error("failed to start {program:?} for job {job_id}: {source}{hint}")]
    Spawn {
        /// The program started.
        program: String,
        /// The job the command runs for.
        job_id: String,
        /// What to check, appended to the message (may be empty).
        hint: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The command's output files could not be made.
    #[error("failed to prepare output files for job {job_id}")]
    Io {
        /// The job the command runs for.
        job_id: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The sandbox itself (the docker engine, say) failed.
    #[error("sandbox backend failed for job {job_id}: {message}")]
    Backend {
        /// The job the command runs for.
        job_id: String,
        /// What failed.
        message: String,
    },
    /// The warm pytest runner failed to run the job.
    #[error("the warm pytest runner failed for job {job_id}")]
    Warm {
        /// The job the command runs for.
        job_id: String,
        /// The underlying error.
        #[source]
        source: warm::WarmError,
    },
    /// The job's toolchain cannot be exposed inside the sandbox.
    #[error("the toolchain of job {job_id} cannot be given to its sandbox")]
    Toolchain {
        /// The job the command runs for.
        job_id: String,
        /// The underlying error.
        #[source]
        source: toolchain_layouts::ToolchainError,
    },
    /// The job names no command at all.
    #[error("the job's command is empty")]
    EmptyCommand,
}

impl SandboxError {
    /// What failed, for the job's result and the fault policy.
    pub fn cause(&self) -> assay_common::fault::InfraCause {
        use assay_common::fault::InfraCause;
        match self {
            Self::Toolchain { .. } => InfraCause::ToolchainMissing,
            Self::Io { .. } => InfraCause::Workspace,
            Self::Spawn { .. } | Self::Backend { .. } | Self::Warm { .. } | Self::EmptyCommand => {
                InfraCause::SandboxStart
            }
        }
    }
}

/// Where a job's command runs: a container, or a local process (confined by bubblewrap).
#[async_trait]
pub trait Sandbox: Send + Sync {
    /// A short name for reports (`process`, `docker`).
    fn name(&self) -> &'static str;

    /// What the evidence records about this sandbox: its kind, and for a container the image
    /// it really ran and its limits.
    fn evidence(&self) -> SandboxEvidence;

    /// Runs the command to its end or its timeout. Cleans up everything it started on every
    /// path, including when the returned future is dropped.
    async fn run(&self, run: &SandboxRun) -> Result<SandboxExit, SandboxError>;

    /// How the guest sees `host_path`, a path under the job's `tree` or `scratch` directory,
    /// for a file Assay writes that names such a path in its contents (the commands and
    /// environment are mapped by the sandbox itself): the same path unless the sandbox mounts
    /// those directories elsewhere.
    fn guest_path(&self, _tree: &Path, _scratch: &Path, host_path: &str) -> String {
        host_path.to_owned()
    }

    /// Where the guest sees `host_dir`, a job's unpacked dependency archive
    /// ([`SandboxRun::vendored`]): the same path unless the sandbox mounts it elsewhere.
    fn vendored_path(&self, host_dir: &Path) -> String {
        host_dir.to_string_lossy().into_owned()
    }

    /// Prepares for the jobs that will follow `run` on its tree (id `tree`), which will run
    /// `next` ([`assay_common::job::JobSpec::next_command`]); called before `run`'s command
    /// starts. A hint: a sandbox that cannot use it does nothing, and no result depends on it.
    async fn prepare_next(&self, _run: &SandboxRun, _next: &[String], _tree: &str) {}

    /// Runs a mutant job's command: the same contract as [`Sandbox::run`], for a sandbox that
    /// can run the many near-identical runs of a mutation run faster (see [`warm`]).
    async fn run_mutant(&self, run: &SandboxRun) -> Result<SandboxExit, SandboxError> {
        self.run(run).await
    }

    /// Runs a mutant job whose tree is `source`'s tree with one file changed: the same
    /// contract as [`Sandbox::run_mutant`], for a sandbox that can apply the change to a
    /// process that already collected the unmutated tree (see [`warm`]).
    async fn run_mutant_of(
        &self,
        run: &SandboxRun,
        _source: &MutantSource<'_>,
    ) -> Result<SandboxExit, SandboxError> {
        self.run_mutant(run).await
    }
}

/// What a mutant job changed: the unmutated tree's id, the mutated file (relative to the tree)
/// and that file's bytes before the change. The job's tree holds the mutated file.
#[derive(Clone, Copy, Debug)]
pub struct MutantSource<'a> {
    /// The unmutated tree's id, hex.
    pub tree: &'a str,
    /// The mutated file, relative to the tree.
    pub path: &'a str,
    /// The file's bytes before the mutant changed them.
    pub original: &'a [u8],
}

/// The sandbox a worker or an embedded proof runs its jobs in. A Docker sandbox checks its
/// image and removes the containers that dead owners left behind before any job runs.
/// `metrics`, for a service, records container start latency. `slots` is how many jobs run at
/// once (the process sandbox's warm runner starts up to that many servers ahead).
pub async fn open(
    kind: SandboxKind,
    docker: &DockerConfig,
    worker_id: &str,
    metrics: Option<Arc<Metrics>>,
    slots: usize,
) -> Result<Arc<dyn Sandbox>, DockerSetupError> {
    match kind {
        SandboxKind::Process => Ok(Arc::new(
            warm::WarmPytest::new(
                process::ProcessSandbox {
                    network: docker.network_default,
                },
                slots,
            )
            .with_network(docker.network_default),
        )),
        SandboxKind::Docker => {
            let mut sandbox = DockerSandbox::connect(docker.clone(), worker_id).await?;
            if let Some(metrics) = metrics {
                sandbox = sandbox.with_metrics(metrics);
            }
            sandbox.check_image().await?;
            sandbox.check_limits().await?;
            let reaped = sandbox.reap_leftovers().await?;
            if reaped > 0 {
                tracing::warn!(reaped, "removed containers left behind by runs that died");
            }
            Ok(Arc::new(sandbox))
        }
    }
}

/// The environment a job starts from: PATH and the locale, nothing else unless configured.
pub fn clean_env(pass_env: &[String]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(key, _)| {
            key == "PATH"
                || key == "LANG"
                || key.starts_with("LC_")
                || pass_env.iter().any(|p| p == key)
        })
        .collect();
    env.sort();
    env
}
