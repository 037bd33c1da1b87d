//! The Docker sandbox: each job runs in a fresh, locked-down container (the fleet's isolation,
//! SPEC §8) created through the engine's API, and the container is removed on every path.
//!
//! The job's tree is bind-mounted at `/work/tree` (the working directory) and its scratch
//! directory at `/work/scratch`; host paths in the command and environment are rewritten to
//! those fixed paths, so the guest never sees the worker's filesystem layout. A bind mount of
//! the worker's per-job copy was measured against uploading a tar into the container and is
//! several times cheaper (docs/docker.md has the figures); a tar upload also cannot land on a
//! read-only root without an extra volume per job.

use super::{Sandbox, SandboxError, SandboxExit, SandboxRun};
use assay_common::sandbox::{ContainerEvidence, SandboxEvidence};
use assay_transport::metrics::Metrics;
use async_trait::async_trait;
use bollard::Docker;
use bollard::container::LogOutput;
use bollard::errors::Error as EngineError;
use bollard::models::{ContainerCreateBody, HostConfig, HostConfigLogConfig, Mount, MountType};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, KillContainerOptionsBuilder,
    ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
};
use futures::StreamExt;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

/// Where the job's tree appears inside the container; also its working directory.
pub const TREE_MOUNT: &str = "/work/tree";
/// Where the job's scratch directory (report, adapter) appears inside the container.
pub const SCRATCH_MOUNT: &str = "/work/scratch";
/// Where a job's unpacked dependency archive appears inside the container, read-only.
pub const VENDORED_MOUNT: &str = "/work/vendored";
/// Where the engine's client looks when `DOCKER_HOST` names no unix socket.
const DEFAULT_SOCKET: &str = "unix:///var/run/docker.sock";
/// The unprivileged user the runner image defines (deploy/build-images.sh).
pub const RUNNER_UID: u32 = 10001;

const LABEL_PROOF: &str = "assay.proof_id";
const LABEL_JOB: &str = "assay.job_id";
const LABEL_WORKER: &str = "assay.worker_id";
/// The host (UTS name) the owning process runs on, so leftovers are judged only where their
/// owner's process id means something.
const LABEL_HOST: &str = "assay.host";
const IMAGE_HINT: &str = " (hint: build the runner image with deploy/build-images.sh --runner-only, or name an image the engine has)";
const ENGINE_HINT: &str = " (hint: start the docker engine, or set DOCKER_HOST=unix:///PATH/docker.sock and check the socket's permissions)";

/// How the containers of this worker are shaped. Limits apply per job.
#[derive(Clone, Debug, PartialEq)]
pub struct DockerConfig {
    /// The runner image every job runs in.
    pub image: String,
    /// Each container's memory limit, in MiB.
    pub memory_mb: u64,
    /// Each container's CPU limit, in cores.
    pub cpus: f64,
    /// Each container's process limit.
    pub pids: i64,
    /// Network for every job, even when the plan does not ask for it.
    pub network_default: bool,
}

impl Default for DockerConfig {
    fn default() -> Self {
        DockerConfig {
            image: "assay-runner-python:latest".to_owned(),
            memory_mb: 2048,
            cpus: 1.0,
            pids: 256,
            network_default: false,
        }
    }
}

/// Failures to set the sandbox up, before any job runs.
#[derive(Debug, thiserror::Error)]
pub enum DockerSetupError {
    // The cause sits before the hint so the one line a user sees ends with what to do.
    /// The docker engine did not answer on its socket.
    #[error("cannot reach the docker engine at {socket}: {cause}{ENGINE_HINT}")]
    Unreachable {
        /// The engine's address.
        socket: String,
        /// The engine's error.
        cause: EngineError,
    },
    /// The engine has no such image.
    #[error("image {image} is not present on the docker engine{IMAGE_HINT}")]
    ImageMissing {
        /// The image named in the configuration.
        image: String,
    },
    /// The engine failed to describe the image.
    #[error("failed to inspect image {image}")]
    InspectImage {
        /// The image named in the configuration.
        image: String,
        /// The engine's error.
        #[source]
        source: EngineError,
    },
    /// A configured limit is more than the engine has.
    #[error(
        "{what} {value} is more than the docker engine offers ({available}) (hint: lower it in the [sandbox] table or its flag)"
    )]
    Limit {
        /// Which limit, e.g. `cpus`.
        what: &'static str,
        /// The configured value.
        value: String,
        /// What the engine offers.
        available: String,
    },
    /// The engine failed to say what it has.
    #[error("failed to ask the docker engine for its resources")]
    Info {
        /// The engine's error.
        #[source]
        source: EngineError,
    },
    /// This worker's leftover containers could not be listed or removed.
    #[error("failed to list or remove leftover containers of worker {worker_id}")]
    Reap {
        /// The worker whose containers they are.
        worker_id: String,
        /// The engine's error.
        #[source]
        source: EngineError,
    },
}

/// Runs each job in a fresh container of the runner image, limited per [`DockerConfig`].
#[derive(Clone, Debug)]
pub struct DockerSandbox {
    docker: Docker,
    config: DockerConfig,
    worker_id: String,
    host: String,
    /// Filled by `check_image`: what the image name resolved to on the engine.
    image: OnceLock<ImageIdentity>,
    metrics: Option<Arc<Metrics>>,
}

#[derive(Clone, Debug)]
struct ImageIdentity {
    id: String,
    repo_digests: Vec<String>,
}

impl DockerSandbox {
    /// Connects to the local engine (`DOCKER_HOST=unix://…` or `/var/run/docker.sock`) and
    /// agrees on an API version the engine speaks, so older engines work too.
    pub async fn connect(
        config: DockerConfig,
        worker_id: impl Into<String>,
    ) -> Result<Self, DockerSetupError> {
        let socket = std::env::var("DOCKER_HOST")
            .ok()
            .filter(|host| host.starts_with("unix://"))
            .unwrap_or_else(|| DEFAULT_SOCKET.to_owned());
        let unreachable = |cause| DockerSetupError::Unreachable {
            socket: socket.clone(),
            cause,
        };
        let docker = Docker::connect_with_unix_defaults()
            .map_err(unreachable)?
            .negotiate_version()
            .await
            .map_err(unreachable)?;
        Ok(DockerSandbox {
            docker,
            config,
            worker_id: worker_id.into(),
            host: host_name(),
            image: OnceLock::new(),
            metrics: None,
        })
    }

    /// Records each container's start latency in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The image and limits its containers get.
    pub fn config(&self) -> &DockerConfig {
        &self.config
    }

    /// Fails fast at worker start when the runner image was never built, and pins what the
    /// image's name resolves to for the evidence.
    pub async fn check_image(&self) -> Result<(), DockerSetupError> {
        match self.docker.inspect_image(&self.config.image).await {
            Ok(inspect) => {
                let _ = self.image.set(ImageIdentity {
                    id: inspect.id.unwrap_or_default(),
                    repo_digests: inspect.repo_digests.unwrap_or_default(),
                });
                Ok(())
            }
            Err(EngineError::DockerResponseServerError {
                status_code: 404, ..
            }) => Err(DockerSetupError::ImageMissing {
                image: self.config.image.clone(),
            }),
            Err(source) => Err(DockerSetupError::InspectImage {
                image: self.config.image.clone(),
                source,
            }),
        }
    }

    /// Refuses limits the engine cannot grant (it would refuse every container), before any
    /// job is taken.
    pub async fn check_limits(&self) -> Result<(), DockerSetupError> {
        let info = self
            .docker
            .info()
            .await
            .map_err(|source| DockerSetupError::Info { source })?;
        if let Some(ncpu) = info.ncpu
            && self.config.cpus > ncpu as f64
        {
            return Err(DockerSetupError::Limit {
                what: "cpus",
                value: self.config.cpus.to_string(),
                available: format!("{ncpu} CPUs"),
            });
        }
        Ok(())
    }

    /// Removes the containers that owners which died before their own cleanup ran left
    /// behind: those labelled with this worker's id (a previous life of this worker), and
    /// those whose owner on this host was a process `…-PID` that no longer exists (an
    /// embedded proof killed outright). Returns how many.
    pub async fn reap_leftovers(&self) -> Result<usize, DockerSetupError> {
        let reap_error = |source| DockerSetupError::Reap {
            worker_id: self.worker_id.clone(),
            source,
        };
        let filters = HashMap::from([("label", vec![LABEL_WORKER.to_owned()])]);
        let options = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        let containers = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(reap_error)?;
        let mut reaped = 0;
        for container in containers {
            let labels = container.labels.unwrap_or_default();
            let owner = labels.get(LABEL_WORKER).map_or("", String::as_str);
            let same_host = labels.get(LABEL_HOST) == Some(&self.host);
            let abandoned = owner == self.worker_id || (same_host && owner_process_is_gone(owner));
            let Some(id) = container.id.filter(|_| abandoned) else {
                continue;
            };
            // Gone already (another cleanup path got there first) counts as removed.
            remove(&self.docker, &id, Duration::ZERO)
                .await
                .map_err(reap_error)?;
            reaped += 1;
        }
        Ok(reaped)
    }

    fn backend_error(
        &self,
        run: &SandboxRun,
        operation: &str,
        error: &EngineError,
    ) -> SandboxError {
        let hint = match error {
            EngineError::DockerResponseServerError {
                status_code: 404,
                message,
            } if message.contains("image") => IMAGE_HINT,
            EngineError::HyperLegacyError { .. }
            | EngineError::IOError { .. }
            | EngineError::SocketNotFoundError(_) => ENGINE_HINT,
            _ => "",
        };
        SandboxError::Backend {
            job_id: run.job_id.clone(),
            message: format!(
                "failed to {operation} (image {}): {error}{hint}",
                self.config.image
            ),
        }
    }

    fn container_body(&self, run: &SandboxRun, user: String) -> ContainerCreateBody {
        let paths = PathMap::new(&run.tree_dir, &run.scratch_dir);
        let env = run
            .env
            .iter()
            // The host's PATH describes the host's filesystem; the image's own PATH applies.
            .filter(|(key, _)| key != "PATH")
            .map(|(key, value)| format!("{key}={}", paths.rewrite(value)))
            .collect();
        let cmd = run.command.iter().map(|arg| paths.rewrite(arg)).collect();
        let labels = HashMap::from([
            (LABEL_PROOF.to_owned(), run.proof_id.clone()),
            (LABEL_JOB.to_owned(), run.job_id.clone()),
            (LABEL_WORKER.to_owned(), self.worker_id.clone()),
            (LABEL_HOST.to_owned(), self.host.clone()),
        ]);
        let bind = |source: &Path, target: &str, read_only: bool| Mount {
            source: Some(source.to_string_lossy().into_owned()),
            target: Some(target.to_owned()),
            typ: Some(MountType::BIND),
            read_only: Some(read_only),
            ..Default::default()
        };
        let network = run.network || self.config.network_default;
        let memory =
            i64::try_from(self.config.memory_mb.saturating_mul(1024 * 1024)).unwrap_or(i64::MAX);
        let host_config = HostConfig {
            mounts: Some(
                [
                    Some(bind(&run.tree_dir, TREE_MOUNT, false)),
                    Some(bind(&run.scratch_dir, SCRATCH_MOUNT, false)),
                    run.vendored
                        .as_deref()
                        .map(|dir| bind(dir, VENDORED_MOUNT, true)),
                ]
                .into_iter()
                .flatten()
                .collect(),
            ),
            readonly_rootfs: Some(true),
            tmpfs: Some(HashMap::from([(
                "/tmp".to_owned(),
                "rw,nosuid,nodev,mode=1777".to_owned(),
            )])),
            cap_drop: Some(vec!["ALL".to_owned()]),
            security_opt: Some(vec!["no-new-privileges".to_owned()]),
            init: Some(true),
            memory: Some(memory),
            // Equal to the memory limit: no swap, so the limit is the limit.
            memory_swap: Some(memory),
            nano_cpus: Some((self.config.cpus * 1e9) as i64),
            pids_limit: Some(self.config.pids),
            network_mode: Some(if network { "bridge" } else { "none" }.to_owned()),
            // Output is streamed to the job's own files through attach; the engine keeps no copy.
            log_config: Some(HostConfigLogConfig {
                typ: Some("none".to_owned()),
                config: None,
            }),
            ..Default::default()
        };
        ContainerCreateBody {
            image: Some(self.config.image.clone()),
            cmd: Some(cmd),
            // An image may set one; the job's argv is the whole command.
            entrypoint: Some(Vec::new()),
            env: Some(env),
            user: Some(user),
            working_dir: Some(TREE_MOUNT.to_owned()),
            labels: Some(labels),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            attach_stdin: Some(false),
            open_stdin: Some(false),
            tty: Some(false),
            network_disabled: Some(!network),
            host_config: Some(host_config),
            ..Default::default()
        }
    }
}

#[async_trait]
impl Sandbox for DockerSandbox {
    fn name(&self) -> &'static str {
        "docker"
    }

    fn guest_path(&self, tree: &Path, scratch: &Path, host_path: &str) -> String {
        PathMap::new(tree, scratch).rewrite(host_path)
    }

    fn vendored_path(&self, _host_dir: &Path) -> String {
        VENDORED_MOUNT.to_owned()
    }

    fn evidence(&self) -> SandboxEvidence {
        let image = self.image.get();
        SandboxEvidence {
            kind: self.name().to_owned(),
            container: Some(ContainerEvidence {
                image: self.config.image.clone(),
                image_id: image.map(|i| i.id.clone()).unwrap_or_default(),
                repo_digests: image.map(|i| i.repo_digests.clone()).unwrap_or_default(),
                memory_mb: self.config.memory_mb,
                cpus: self.config.cpus,
                pids: self.config.pids,
                network: if self.config.network_default {
                    "bridge"
                } else {
                    "none"
                }
                .to_owned(),
            }),
            confinement: None,
        }
    }

    #[tracing::instrument(skip_all, fields(proof_id = %run.proof_id, job_id = %run.job_id, worker_id = %self.worker_id))]
    async fn run(&self, run: &SandboxRun) -> Result<SandboxExit, SandboxError> {
        if run.command.is_empty() {
            return Err(SandboxError::EmptyCommand);
        }
        let io_error = |source| SandboxError::Io {
            job_id: run.job_id.clone(),
            source,
        };
        let stdout = tokio::fs::File::create(&run.stdout_path)
            .await
            .map_err(io_error)?;
        let stderr = tokio::fs::File::create(&run.stderr_path)
            .await
            .map_err(io_error)?;
        let user = {
            let (tree, scratch) = (run.tree_dir.clone(), run.scratch_dir.clone());
            tokio::task::spawn_blocking(move || grant_guest_access(&tree, &scratch))
                .await
                .map_err(|join| io_error(std::io::Error::other(join)))?
                .map_err(io_error)?
        };

        let creating = Instant::now();
        // Named before it exists, and guarded from then on: a job dropped while the engine is
        // still creating its container (a cancel, a Ctrl-C) removes it by that name.
        let mut container = ContainerGuard::new(self.docker.clone(), container_name(&run.job_id));
        let id = container.id().to_owned();
        let options = CreateContainerOptionsBuilder::default().name(&id).build();
        let created = self
            .docker
            .create_container(Some(options), self.container_body(run, user))
            .await;
        container.created();
        created.map_err(|e| self.backend_error(run, "create the job's container", &e))?;

        let attach = AttachContainerOptionsBuilder::default()
            .stdout(true)
            .stderr(true)
            .stream(true)
            .build();
        let attached = self
            .docker
            .attach_container(&id, Some(attach))
            .await
            .map_err(|e| self.backend_error(run, "attach to the job's container", &e))?;
        // The pump runs on its own task: it must keep draining while we wait, and it ends by
        // itself when the container stops (or is removed), whichever path we take.
        let pump = tokio::spawn(pump_output(attached.output, stdout, stderr));
        self.docker
            .start_container(&id, None)
            .await
            .map_err(|e| self.backend_error(run, "start the job's container", &e))?;
        if let Some(metrics) = &self.metrics {
            metrics.container_start.observe(creating.elapsed());
        }

        let waited = tokio::time::timeout(run.timeout, wait_exit_code(&self.docker, &id)).await;
        let exit = match waited {
            Err(_elapsed) => {
                let kill = KillContainerOptionsBuilder::default()
                    .signal("SIGKILL")
                    .build();
                // Already stopped in the meantime is fine: removal below settles it either way.
                let _ = self.docker.kill_container(&id, Some(kill)).await;
                SandboxExit::TimedOut
            }
            Ok(Err(e)) => return Err(self.backend_error(run, "wait for the job's container", &e)),
            Ok(Ok(code)) => exit_from_code(code),
        };
        // Output written before the exit must reach the files before the caller reads them.
        let pumped = tokio::time::timeout(Duration::from_secs(10), pump).await;
        match pumped {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(source))) => return Err(io_error(source)),
            Ok(Err(join)) => return Err(io_error(std::io::Error::other(join))),
            Err(_elapsed) => {
                tracing::warn!(container = %id, "output stream did not end after the container stopped")
            }
        }
        container
            .remove()
            .await
            .map_err(|e| self.backend_error(run, "remove the job's container", &e))?;
        Ok(exit)
    }
}

/// This process's host name (its UTS namespace's, which is what a `…-PID` owner id is
/// relative to).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_default()
}

/// True when `owner` ends in `-PID` and no process with that id exists here. A process we
/// may not signal (EPERM) exists; so does this one.
fn owner_process_is_gone(owner: &str) -> bool {
    let Some(pid) = owner
        .rsplit_once('-')
        .and_then(|(_, pid)| pid.parse::<libc::pid_t>().ok())
        .filter(|pid| *pid > 0)
    else {
        return false;
    };
    if pid as u32 == std::process::id() {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let status = unsafe { libc::kill(pid, 0) };
    status == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// Docker reports a guest killed by signal N (through its init) as exit code 128+N, the shell
/// convention; the kernel's OOM killer shows up as 137 = SIGKILL.
fn exit_from_code(code: i64) -> SandboxExit {
    match code {
        129..=192 => SandboxExit::Signalled((code - 128) as i32),
        _ => SandboxExit::Exited(i32::try_from(code).unwrap_or(i32::MAX)),
    }
}

/// The container's exit code. The client library reports a non-zero exit as an error value;
/// it is the guest's outcome, and is turned back into a code here so it is never mistaken for
/// an engine failure.
async fn wait_exit_code(docker: &Docker, id: &str) -> Result<i64, EngineError> {
    let mut stream = docker.wait_container(id, None);
    match stream.next().await {
        Some(Ok(response)) => Ok(response.status_code),
        Some(Err(EngineError::DockerContainerWaitError { code, .. })) => Ok(code),
        Some(Err(error)) => Err(error),
        None => Err(EngineError::DockerStreamError {
            error: format!("wait stream for container {id} ended without an exit code"),
        }),
    }
}

async fn pump_output(
    mut output: std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<LogOutput, EngineError>> + Send>,
    >,
    mut stdout: tokio::fs::File,
    mut stderr: tokio::fs::File,
) -> std::io::Result<()> {
    while let Some(chunk) = output.next().await {
        match chunk {
            Ok(LogOutput::StdOut { message }) => stdout.write_all(&message).await?,
            Ok(LogOutput::StdErr { message }) => stderr.write_all(&message).await?,
            Ok(_) => {}
            // The stream breaks when the container is killed and removed: what arrived is kept.
            Err(_) => break,
        }
    }
    stdout.flush().await?;
    stderr.flush().await?;
    Ok(())
}

/// Lets the guest user write the job's tree and scratch directory, and returns the user to run
/// as. A root worker hands the files to the runner image's user; an unprivileged worker runs
/// the guest as itself, which is non-root already and owns the files.
fn grant_guest_access(tree: &Path, scratch: &Path) -> std::io::Result<String> {
    // SAFETY: geteuid/getegid read the process's credentials and cannot fail.
    let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if euid != 0 {
        return Ok(format!("{euid}:{egid}"));
    }
    for root in [tree, scratch] {
        chown_tree(root, RUNNER_UID)?;
    }
    Ok(format!("{RUNNER_UID}:{RUNNER_UID}"))
}

fn chown_tree(root: &Path, uid: u32) -> std::io::Result<()> {
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        std::os::unix::fs::lchown(&path, Some(uid), Some(uid))?;
        if std::fs::symlink_metadata(&path)?.is_dir() {
            for entry in std::fs::read_dir(&path)? {
                pending.push(entry?.path());
            }
        }
    }
    Ok(())
}

/// Rewrites the job's host paths to their mount points, longest first so a scratch directory
/// inside the tree (or the reverse) maps to the right mount.
struct PathMap {
    pairs: Vec<(String, &'static str)>,
}

impl PathMap {
    fn new(tree: &Path, scratch: &Path) -> Self {
        let mut pairs = vec![
            (tree.to_string_lossy().into_owned(), TREE_MOUNT),
            (scratch.to_string_lossy().into_owned(), SCRATCH_MOUNT),
        ];
        pairs.retain(|(host, _)| !host.is_empty() && host != "/");
        pairs.sort_by_key(|(host, _)| std::cmp::Reverse(host.len()));
        PathMap { pairs }
    }

    /// Replaces a host path only where it is a whole path or a path prefix: `/jobs/1` in
    /// `/jobs/1/report.xml` or `--junitxml=/jobs/1/r.xml`, never in `/jobs/10`.
    fn rewrite(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        'scan: while !rest.is_empty() {
            for (host, mount) in &self.pairs {
                if let Some(after) = rest.strip_prefix(host.as_str()) {
                    let boundary = after
                        .chars()
                        .next()
                        .is_none_or(|c| c == '/' || !is_path_char(c));
                    let starts_path = out.chars().last().is_none_or(|c| !is_path_char(c));
                    if boundary && starts_path {
                        out.push_str(mount);
                        rest = after;
                        continue 'scan;
                    }
                }
            }
            let mut chars = rest.chars();
            if let Some(c) = chars.next() {
                out.push(c);
            }
            rest = chars.as_str();
        }
        out
    }
}

fn is_path_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | '~' | '+' | '@')
}

/// Removes a container; one that does not exist (never created, or already gone) is fine. For
/// `creating`, a missing container is looked for again: the engine may still be creating one
/// whose create request was abandoned.
async fn remove(docker: &Docker, id: &str, creating: Duration) -> Result<(), EngineError> {
    let options = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    let deadline = Instant::now() + creating;
    loop {
        match docker.remove_container(id, Some(options.clone())).await {
            Err(EngineError::DockerResponseServerError {
                status_code: 404, ..
            }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(EngineError::DockerResponseServerError {
                status_code: 404, ..
            }) => return Ok(()),
            other => return other,
        }
    }
}

/// A name no other container has: the job id (as Docker allows it), this process and a count.
fn container_name(job_id: &str) -> String {
    static CREATED: AtomicUsize = AtomicUsize::new(0);
    let job: String = job_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!(
        "assay-{job}-{}-{}",
        std::process::id(),
        CREATED.fetch_add(1, Ordering::Relaxed)
    )
}

/// Containers this process created and has not removed yet (running, or being removed).
static LIVE_CONTAINERS: AtomicUsize = AtomicUsize::new(0);
static CONTAINER_REMOVED: tokio::sync::Notify = tokio::sync::Notify::const_new();

fn container_gone() {
    LIVE_CONTAINERS.fetch_sub(1, Ordering::SeqCst);
    CONTAINER_REMOVED.notify_waiters();
}

/// Waits, at most `limit`, until every container this process created is removed; false when
/// some remain. An interrupted CLI calls this after dropping its jobs: their containers are
/// removed on spawned tasks, which must finish before the runtime goes away.
pub async fn wait_for_removals(limit: Duration) -> bool {
    let all_removed = async {
        loop {
            let removed = CONTAINER_REMOVED.notified();
            tokio::pin!(removed);
            removed.as_mut().enable();
            if LIVE_CONTAINERS.load(Ordering::SeqCst) == 0 {
                return;
            }
            removed.await;
        }
    };
    tokio::time::timeout(limit, all_removed).await.is_ok()
}

/// Owns a created container until it is removed. Dropped while armed (timeout in the caller,
/// a cancelled future, a panic), it removes the container on a spawned task; a crash of the
/// whole worker is covered by `reap_leftovers` at the next start.
struct ContainerGuard {
    docker: Docker,
    id: String,
    armed: bool,
    /// The create request was sent and has not answered: the engine may still be creating the
    /// container, so a removal that finds none must look again.
    creating: bool,
}

/// How long a dropped job's removal keeps looking for a container still being created.
const CREATION_GRACE: Duration = Duration::from_secs(5);

impl ContainerGuard {
    fn new(docker: Docker, id: String) -> Self {
        LIVE_CONTAINERS.fetch_add(1, Ordering::SeqCst);
        ContainerGuard {
            docker,
            id,
            armed: true,
            creating: true,
        }
    }

    /// The engine answered the create request (either way).
    fn created(&mut self) {
        self.creating = false;
    }

    fn id(&self) -> &str {
        &self.id
    }

    async fn remove(&mut self) -> Result<(), EngineError> {
        let removed = remove(&self.docker, &self.id, Duration::ZERO).await;
        // Disarmed only now: dropped during the removal, the guard removes it again.
        self.armed = false;
        container_gone();
        removed
    }
}

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (docker, id) = (self.docker.clone(), std::mem::take(&mut self.id));
        // A create request still unanswered: the engine may yet create the container.
        let creating = if self.creating {
            CREATION_GRACE
        } else {
            Duration::ZERO
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if let Err(error) = remove(&docker, &id, creating).await {
                        tracing::warn!(container = %id, %error, "failed to remove a dropped job's container");
                    }
                    container_gone();
                });
            }
            Err(_) => {
                container_gone();
                tracing::warn!(container = %id, "no runtime to remove a dropped job's container; it is reaped at the next start")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> PathMap {
        PathMap::new(Path::new("/var/jobs/7/tree"), Path::new("/var/jobs/7"))
    }

    #[test]
    fn host_paths_in_arguments_become_mount_paths() {
        let map = map();
        assert_eq!(
            map.rewrite("/var/jobs/7/report.xml"),
            "/work/scratch/report.xml"
        );
        assert_eq!(
            map.rewrite("--junitxml=/var/jobs/7/report.xml"),
            "--junitxml=/work/scratch/report.xml"
        );
        assert_eq!(map.rewrite("/var/jobs/7/tree"), "/work/tree");
        assert_eq!(
            map.rewrite("/var/jobs/7/tree/tests/x.py"),
            "/work/tree/tests/x.py"
        );
        assert_eq!(
            map.rewrite("/var/jobs/7/tree:/var/jobs/7/lib"),
            "/work/tree:/work/scratch/lib"
        );
    }

    #[test]
    fn paths_that_only_share_a_prefix_are_left_alone() {
        let map = map();
        assert_eq!(
            map.rewrite("/var/jobs/70/report.xml"),
            "/var/jobs/70/report.xml"
        );
        assert_eq!(map.rewrite("/other/var/jobs/7"), "/other/var/jobs/7");
        assert_eq!(map.rewrite("test_invoice_totals"), "test_invoice_totals");
    }

    #[test]
    fn signal_exit_codes_map_to_signals_and_others_to_exits() {
        assert_eq!(exit_from_code(0), SandboxExit::Exited(0));
        assert_eq!(exit_from_code(1), SandboxExit::Exited(1));
        assert_eq!(exit_from_code(128), SandboxExit::Exited(128));
        assert_eq!(exit_from_code(137), SandboxExit::Signalled(9));
        assert_eq!(exit_from_code(143), SandboxExit::Signalled(15));
    }
}
