//! The process sandbox: a child process in its own process group with a clean environment and
//! private output files, confined to its tree and scratch directory (see [`super::confine`]). The child is the job's reaper (see [`super::reaper`]): every process
//! the command starts, whether it leaves the group or its parent, dies when the job ends, at
//! the timeout, or when the job is dropped.

use super::confine::{Launch, SETUP_ATTEMPTS, setup_pause};
use super::{Sandbox, SandboxError, SandboxExit, SandboxRun};
use assay_common::sandbox::SandboxEvidence;
use async_trait::async_trait;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

/// How long a reaper asked to stop may take to sweep before its group is killed outright.
const SWEEP_GRACE: Duration = Duration::from_secs(5);

/// Runs each job as a local process group, confined by bubblewrap where the host has it.
#[derive(Clone, Debug, Default)]
pub struct ProcessSandbox {
    /// Every job gets the host's network, not a loopback of its own.
    pub network: bool,
}

/// Kills the process group when dropped: covers timeouts, cancellation, panics and stragglers
/// alike (the warm runner's forked children use it too).
pub(super) struct GroupGuard(pub(super) Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            // SAFETY: kill(2) with a negative pid signals a process group; no memory is touched.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }
}

#[async_trait]
impl Sandbox for ProcessSandbox {
    fn name(&self) -> &'static str {
        "process"
    }

    fn evidence(&self) -> SandboxEvidence {
        SandboxEvidence {
            kind: self.name().to_owned(),
            container: None,
            confinement: Some(super::confine::evidence()),
        }
    }

    async fn run(&self, run: &SandboxRun) -> Result<SandboxExit, SandboxError> {
        let launch = confined_command(run, &[&run.tree_dir, &run.scratch_dir], self.network)?;
        let mut attempt = 1;
        loop {
            let mut started = StartSignal::new().map_err(|source| SandboxError::Io {
                job_id: run.job_id.clone(),
                source,
            })?;
            let announced = launch.announcing_start(started.write_fd());
            let exit = run_once(run, announced.as_ref().unwrap_or(&launch), &mut started).await?;
            if exit == SandboxExit::TimedOut || announced.is_none() || started.arrived() {
                return Ok(exit);
            }
            // bubblewrap failed before the guest ran: nothing of the job happened, so it is
            // started again; its own words are in the stderr file.
            let words =
                crate::stderr_tail::tail(&std::fs::read(&run.stderr_path).unwrap_or_default());
            if attempt == SETUP_ATTEMPTS {
                return Err(SandboxError::Backend {
                    job_id: run.job_id.clone(),
                    message: format!(
                        "bubblewrap could not build the sandbox in {SETUP_ATTEMPTS} attempts: {words}"
                    ),
                });
            }
            tracing::warn!(job = %run.job_id, attempt, %words, "bubblewrap could not build the sandbox; starting the job again");
            tokio::time::sleep(setup_pause(attempt)).await;
            attempt += 1;
        }
    }
}

/// A pipe the confined guest's start is announced on (see [`Launch::announcing_start`]).
struct StartSignal {
    read: OwnedFd,
    write: Option<OwnedFd>,
}

impl StartSignal {
    fn new() -> std::io::Result<Self> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2(2) fills the two-element array it is given.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just opened and are owned here alone.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(Self {
            read,
            write: Some(write),
        })
    }

    fn write_fd(&self) -> RawFd {
        self.write.as_ref().map_or(-1, |fd| fd.as_raw_fd())
    }

    /// Closes this process's write end, once the command holds its own.
    fn spawned(&mut self) {
        self.write = None;
    }

    /// Whether the announcement was written: read once the command has exited.
    fn arrived(&self) -> bool {
        let mut byte = 0u8;
        // SAFETY: a one-byte read into a byte on the stack, from a descriptor owned here.
        unsafe { libc::read(self.read.as_raw_fd(), (&raw mut byte).cast(), 1) == 1 }
    }
}

/// Runs `launch` once, as the job's reaper's command, to its end or the job's timeout.
async fn run_once(
    run: &SandboxRun,
    launch: &Launch,
    started: &mut StartSignal,
) -> Result<SandboxExit, SandboxError> {
    let program = launch.argv.first().ok_or(SandboxError::EmptyCommand)?;
    let io_error = |source| SandboxError::Io {
        job_id: run.job_id.clone(),
        source,
    };
    harden_worker();
    let stdout = File::create(&run.stdout_path).map_err(io_error)?;
    let stderr = File::create(&run.stderr_path).map_err(io_error)?;
    let mut command = Command::from(launch.command().ok_or(SandboxError::EmptyCommand)?);
    command
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0);
    let announce = started.write_fd();
    // SAFETY: `become_reaper` makes only async-signal-safe calls (its module says why), and
    // close_range(2) and fcntl(2) are system calls on this process's descriptors.
    unsafe {
        command.pre_exec(move || {
            super::reaper::become_reaper()?;
            // The command inherits its standard streams and the announcement pipe, nothing
            // else: not a descriptor this process itself inherited (a pipe to whoever started
            // the worker) and left open across exec.
            libc::syscall(
                libc::SYS_close_range,
                3,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            );
            if announce >= 0 {
                libc::fcntl(announce, libc::F_SETFD, 0);
            }
            Ok(())
        });
    }
    let spawned = command.spawn();
    // Closed here at once: the announcement then reads as written or never written.
    started.spawned();
    let child = spawned.map_err(|source| SandboxError::Spawn {
        program: program.clone(),
        job_id: run.job_id.clone(),
        hint: if source.kind() == std::io::ErrorKind::NotFound {
            " (hint: install it, or pass --test-command with a program on PATH)"
        } else {
            ""
        },
        source,
    })?;
    let pgid = child.id().map(|pid| pid as i32);
    let mut reaper = Reaper {
        child: Some(child),
        pgid,
    };
    let exit = match tokio::time::timeout(run.timeout, reaper.wait()).await {
        Err(_elapsed) => {
            reaper.stop().await;
            return Ok(SandboxExit::TimedOut);
        }
        Ok(status) => status.map_err(io_error)?,
    };
    // The reaper swept the job's processes before it exited; the group is killed too, in
    // case the command killed its reaper first.
    drop(GroupGuard(pgid));
    Ok(match (exit.code(), exit.signal()) {
        // bubblewrap exits 128 + N when its command died of signal N, as a shell reports it.
        (Some(code @ 129..=192), _) if launch.confined => SandboxExit::Signalled(code - 128),
        (Some(code), _) => SandboxExit::Exited(code),
        (None, Some(signal)) => SandboxExit::Signalled(signal),
        (None, None) => SandboxExit::Exited(-1),
    })
}

/// How to start `run`'s command, confined to `writable` when this host can confine it (see
/// [`super::confine`]); as it is otherwise, which the sandbox's evidence then says.
pub(super) fn confined_command(
    run: &SandboxRun,
    writable: &[&std::path::Path],
    network: bool,
) -> Result<Launch, SandboxError> {
    let program = run.command.first().ok_or(SandboxError::EmptyCommand)?;
    let Ok(confiner) = super::confine::confiner() else {
        return Ok(Launch::unconfined(&run.command, &run.env, &run.tree_dir));
    };
    let path_env = run
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str());
    // Confined, a missing program is bubblewrap's failure to exec, not a spawn error: say it
    // the way an unconfined run would.
    let found = if program.contains('/') {
        run.tree_dir.join(program).exists()
    } else {
        path_env
            .is_some_and(|path| std::env::split_paths(path).any(|dir| dir.join(program).is_file()))
    };
    if !found {
        return Err(SandboxError::Spawn {
            program: program.clone(),
            job_id: run.job_id.clone(),
            hint: " (hint: install it, or pass --test-command with a program on PATH)",
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
    }
    confiner
        .launch(
            &super::confine::Grant {
                writable,
                cwd: &run.tree_dir,
                network: network || run.network,
                program,
                path_env,
                env: &run.env,
                vendored: run.vendored.as_deref(),
            },
            &run.command,
        )
        .map_err(|source| SandboxError::Toolchain {
            job_id: run.job_id.clone(),
            source,
        })
}

/// Makes this process non-dumpable, so a job running as the same user cannot read its
/// environment (`/proc/PID/environ`: store credentials, NATS credentials), its memory, or
/// attach to it; the jobs' reapers, forks of it, inherit the mark. Idempotent.
pub fn harden_worker() {
    // SAFETY: prctl(2) on this process's own flag.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}

/// The job's reaper while it runs. Dropped before it exits (a cancelled job, a panic), it is
/// asked to stop all the same, from a task of its own.
struct Reaper {
    child: Option<Child>,
    pgid: Option<i32>,
}

impl Reaper {
    /// Waits for the reaper to exit, as it does once the command has and the sweep is done.
    async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        let Some(child) = self.child.as_mut() else {
            return Err(std::io::Error::other(
                "the job's reaper was already waited for",
            ));
        };
        let status = child.wait().await?;
        self.child = None;
        Ok(status)
    }

    /// Asks the reaper to kill the job's processes and waits for it; kills the whole group if
    /// it has not finished within [`SWEEP_GRACE`] (or was killed by the job).
    async fn stop(&mut self) {
        if let Some(child) = self.child.take() {
            stop_reaper(child, self.pgid).await;
        }
    }
}

async fn stop_reaper(mut child: Child, pgid: Option<i32>) {
    if let Some(pid) = pgid {
        // SAFETY: kill(2) signals the reaper, which this process has not reaped yet.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    // While the reaper is not reaped its pid, and so its group id, cannot be reused.
    if tokio::time::timeout(SWEEP_GRACE, child.wait())
        .await
        .is_err()
    {
        drop(GroupGuard(pgid));
        let _ = child.wait().await;
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        let Some(child) = self.child.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(stop_reaper(child, self.pgid));
            }
            Err(_) => drop(GroupGuard(self.pgid)),
        }
    }
}
