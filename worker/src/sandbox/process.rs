//! The process sandbox: a child process in its own process group with a clean environment and
//! private output files. At the timeout (or when dropped) the whole group is killed, so a test
//! that forks cannot outlive its job.

use super::{Sandbox, SandboxError, SandboxExit, SandboxRun};
use assay_common::evidence::SandboxEvidence;
use async_trait::async_trait;
use std::fs::File;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use tokio::process::Command;

#[derive(Clone, Debug, Default)]
pub struct ProcessSandbox;

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
        }
    }

    async fn run(&self, run: &SandboxRun) -> Result<SandboxExit, SandboxError> {
        let (program, args) = run
            .command
            .split_first()
            .ok_or(SandboxError::EmptyCommand)?;
        let io_error = |source| SandboxError::Io {
            job_id: run.job_id.clone(),
            source,
        };
        let stdout = File::create(&run.stdout_path).map_err(io_error)?;
        let stderr = File::create(&run.stderr_path).map_err(io_error)?;
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(&run.tree_dir)
            .env_clear()
            .envs(run.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|source| SandboxError::Spawn {
            program: program.clone(),
            job_id: run.job_id.clone(),
            hint: if source.kind() == std::io::ErrorKind::NotFound {
                " (hint: install it, or pass --test-command with a program on PATH)"
            } else {
                ""
            },
            source,
        })?;
        let mut group = GroupGuard(child.id().map(|pid| pid as i32));
        let waited = tokio::time::timeout(run.timeout, child.wait()).await;
        let exit = match waited {
            Err(_elapsed) => {
                drop(group);
                let _ = child.wait().await;
                return Ok(SandboxExit::TimedOut);
            }
            Ok(status) => status.map_err(io_error)?,
        };
        // The leader exited; stragglers it forked into the group are killed now.
        drop(std::mem::replace(&mut group, GroupGuard(None)));
        Ok(match (exit.code(), exit.signal()) {
            (Some(code), _) => SandboxExit::Exited(code),
            (None, Some(signal)) => SandboxExit::Signalled(signal),
            (None, None) => SandboxExit::Exited(-1),
        })
    }
}
