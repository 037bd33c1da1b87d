//! A warm interpreter for mutant jobs: their command is `PYTHON -m pytest …`, run hundreds of
//! times on near-identical trees, and Python plus pytest start-up dominates each run. This
//! wrapper keeps idle `adapters/warm_pytest.py` servers (pytest imported, nothing of the
//! project) and runs such a command as a fork of one: the child takes the job's tree, its
//! environment and output files, and runs exactly what `python -m pytest` runs; the product
//! code is loaded from source in every child. `PYTHON -c CODE …` (the coverage baseline, the
//! kill re-run plugin) runs the same way. Anything else goes to the wrapped sandbox.
//!
//! Whenever a job takes the last idle server of its kind and fewer servers of that kind were
//! started than there are slots, a spare starts in the background, so the next job (the second
//! slot's first mutant, right after the baseline) finds one ready instead of paying the
//! start-up itself. (A server that dies is replaced on demand, not by a spare.)
//!
//! A server is keyed by the interpreter and the environment it started with (minus the
//! per-job HOME and TMPDIR), so start-up settings such as PYTHONPATH always match the job's.
//! The child is in its own process group, killed at the timeout or when the job is dropped,
//! like the process sandbox's.

use super::process::GroupGuard;
use super::{Sandbox, SandboxError, SandboxExit, SandboxRun};
use assay_common::evidence::SandboxEvidence;
use assay_common::runner::python_m_pytest;
use async_trait::async_trait;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The server script, shipped with the binary.
pub const WARM_PYTEST: &str = include_str!("../adapters/warm_pytest.py");

/// Variables that differ per job but do not shape the interpreter's start-up.
const PER_JOB_ENV: [&str; 2] = ["HOME", "TMPDIR"];

/// How long a server may take to report the status of a child it was told is killed.
const REAP_GRACE: Duration = Duration::from_secs(5);

type Key = (String, Vec<(String, String)>);

struct Server {
    key: Key,
    _process: Child,
    requests: ChildStdin,
    answers: Lines<BufReader<ChildStdout>>,
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    ready: bool,
    pid: Option<i32>,
    exit: Option<i32>,
}

impl Server {
    async fn start(key: Key, env: &[(String, String)]) -> Option<Server> {
        let mut process = Command::new(&key.0)
            .args(["-c", WARM_PYTEST])
            .current_dir("/")
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .ok()?;
        let requests = process.stdin.take()?;
        let answers = BufReader::new(process.stdout.take()?).lines();
        let mut server = Server {
            key,
            _process: process,
            requests,
            answers,
        };
        // A server that cannot import pytest says so by closing: the job then runs as-is and
        // fails the way a fresh `python -m pytest` fails.
        server.answer().await.filter(|a| a.ready).map(|_| server)
    }

    async fn answer(&mut self) -> Option<Answer> {
        let line = self.answers.next_line().await.ok()??;
        serde_json::from_str(&line).ok()
    }
}

/// Idle servers, and how many servers of each kind were started (or are starting).
#[derive(Default)]
struct Pool {
    idle: Vec<Server>,
    started: BTreeMap<Key, usize>,
}

/// Wraps a sandbox: mutant `python -m pytest` runs fork a warm server, the rest pass through.
pub struct WarmPytest<S> {
    inner: S,
    pool: Arc<Mutex<Pool>>,
    /// Jobs that may run at once: the most servers of one kind worth starting ahead.
    slots: usize,
}

impl<S: Sandbox> WarmPytest<S> {
    pub fn new(inner: S, slots: usize) -> Self {
        Self {
            inner,
            pool: Arc::default(),
            slots,
        }
    }

    /// An idle server of this kind, if any; when that leaves none idle and the slots allow
    /// another, a spare starts. A caller given none starts one itself.
    fn take_idle(&self, key: &Key, env: &[(String, String)]) -> Option<Server> {
        let mut guard = self.pool.lock().ok()?;
        let pool = &mut *guard;
        let taken = pool
            .idle
            .iter()
            .position(|s| &s.key == key)
            .map(|at| pool.idle.swap_remove(at));
        let started = pool.started.entry(key.clone()).or_default();
        if taken.is_none() {
            *started += 1; // the caller starts one
        }
        let none_left = !pool.idle.iter().any(|s| &s.key == key);
        if none_left && *started < self.slots {
            *started += 1;
            let (pool, key, env) = (self.pool.clone(), key.clone(), env.to_vec());
            tokio::spawn(async move {
                let spare = Server::start(key, &env).await;
                if let Ok(mut pool) = pool.lock() {
                    pool.idle.extend(spare);
                }
            });
        }
        taken
    }

    fn put_idle(&self, server: Server) {
        if let Ok(mut pool) = self.pool.lock() {
            pool.idle.push(server);
        }
    }

    /// Runs `run` in a fork of `server`; the server comes back when it is still usable.
    async fn run_forked(
        &self,
        mut server: Server,
        run: &SandboxRun,
        warm: &WarmCommand<'_>,
    ) -> Result<SandboxExit, SandboxError> {
        let io_error = |source| SandboxError::Io {
            job_id: run.job_id.clone(),
            source,
        };
        File::create(&run.stdout_path).map_err(io_error)?;
        File::create(&run.stderr_path).map_err(io_error)?;
        let backend = |message: &str| SandboxError::Backend {
            job_id: run.job_id.clone(),
            message: format!("warm pytest runner: {message}"),
        };
        let mut request = serde_json::json!({
            "cwd": run.tree_dir,
            "args": warm.args,
            "env": run.env.iter().cloned().collect::<BTreeMap<String, String>>(),
            "stdout": run.stdout_path,
            "stderr": run.stderr_path,
        });
        if let Some(code) = warm.code {
            request["code"] = code.into();
        }
        let mut line = request.to_string();
        line.push('\n');
        server
            .requests
            .write_all(line.as_bytes())
            .await
            .map_err(|e| backend(&format!("failed to send the job: {e}")))?;
        let pid = server
            .answer()
            .await
            .and_then(|a| a.pid)
            .ok_or_else(|| backend("the server stopped before forking"))?;
        let mut group = GroupGuard(Some(pid));
        let status = match tokio::time::timeout(run.timeout, server.answer()).await {
            Err(_elapsed) => {
                drop(group);
                // The server reaps the killed child; if it does not say so, it is discarded.
                if let Ok(Some(answer)) = tokio::time::timeout(REAP_GRACE, server.answer()).await
                    && answer.exit.is_some()
                {
                    self.put_idle(server);
                }
                return Ok(SandboxExit::TimedOut);
            }
            Ok(answer) => answer
                .and_then(|a| a.exit)
                .ok_or_else(|| backend("the server stopped while the job ran"))?,
        };
        // The child exited; stragglers it left in its group are killed now.
        drop(std::mem::replace(&mut group, GroupGuard(None)));
        self.put_idle(server);
        Ok(if status < 0 {
            SandboxExit::Signalled(-status)
        } else {
            SandboxExit::Exited(status)
        })
    }
}

/// A command a warm server can run: `PYTHON -m pytest ARGS…` or `PYTHON -c CODE ARGS…`.
struct WarmCommand<'a> {
    python: &'a String,
    code: Option<&'a str>,
    args: &'a [String],
}

fn warm_command(command: &[String]) -> Option<WarmCommand<'_>> {
    if let Some((python, args)) = python_m_pytest(command) {
        return Some(WarmCommand {
            python,
            code: None,
            args,
        });
    }
    match command {
        [python, c, code, args @ ..] if c == "-c" => Some(WarmCommand {
            python,
            code: Some(code),
            args,
        }),
        _ => None,
    }
}

#[async_trait]
impl<S: Sandbox> Sandbox for WarmPytest<S> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn evidence(&self) -> SandboxEvidence {
        self.inner.evidence()
    }

    async fn run(&self, run: &SandboxRun) -> Result<SandboxExit, SandboxError> {
        self.inner.run(run).await
    }

    async fn run_mutant(&self, run: &SandboxRun) -> Result<SandboxExit, SandboxError> {
        let Some(warm) = warm_command(&run.command) else {
            return self.inner.run(run).await;
        };
        let startup_env: Vec<(String, String)> = run
            .env
            .iter()
            .filter(|(k, _)| !PER_JOB_ENV.contains(&k.as_str()))
            .cloned()
            .collect();
        let key = (warm.python.clone(), startup_env);
        let server = match self.take_idle(&key, &run.env) {
            Some(server) => Some(server),
            None => Server::start(key, &run.env).await,
        };
        match server {
            Some(server) => self.run_forked(server, run, &warm).await,
            None => self.inner.run(run).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_python_dash_m_pytest_and_dash_c_run_warm() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let command = argv(&["python3", "-m", "pytest", "-x", "tests/test_pager.py"]);
        let warm = warm_command(&command).expect("a pytest command");
        assert_eq!(warm.python, "python3");
        assert_eq!(warm.code, None);
        assert_eq!(warm.args, &command[3..]);
        let command = argv(&["python3", "-c", "import sys", "report.json", "-q"]);
        let warm = warm_command(&command).expect("a -c command");
        assert_eq!(warm.code, Some("import sys"));
        assert_eq!(warm.args, &command[3..]);
        assert!(warm_command(&argv(&["python3", "-m", "unittest"])).is_none());
        assert!(warm_command(&argv(&["uv", "run", "pytest"])).is_none());
        assert!(warm_command(&argv(&["python3", "-m"])).is_none());
        assert!(warm_command(&argv(&["python3", "-c"])).is_none());
    }
}
