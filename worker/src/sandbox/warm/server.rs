//! One warm server: its key, its start (plain or as a session server on an unmutated tree),
//! its confined command line, and the line-per-message protocol it speaks.

use super::super::SandboxRun;
use super::super::confine::{self, Launch};
use super::super::hot_swap::{self, JUNIT_PLACEHOLDER};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The server script, shipped with the binary.
pub const WARM_PYTEST: &str = include_str!("../../adapters/warm_pytest.py");

/// Variables that differ per job but do not shape the interpreter's start-up.
pub(super) const PER_JOB_ENV: [&str; 2] = ["HOME", "TMPDIR"];

/// How long a server may take to report the status of a child it was told is killed.
pub(super) const REAP_GRACE: Duration = Duration::from_secs(5);

/// The longest a session server may take to configure and collect before it is given up.
pub(super) const SESSION_START_LIMIT: Duration = Duration::from_secs(300);

/// What makes two servers interchangeable: the interpreter and its start-up environment, and
/// for a session server the tree it collected and the options it collected with.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Key {
    pub(super) python: String,
    pub(super) env: Vec<(String, String)>,
    /// The proof's directory on this worker (`SandboxRun::proof_dir`): all the server may write.
    pub(super) proof_dir: PathBuf,
    /// The host's network instead of a loopback of its own.
    pub(super) network: bool,
    pub(super) session: Option<SessionKey>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct SessionKey {
    pub(super) tree: String,
    pub(super) code: Option<String>,
    pub(super) options: Vec<String>,
}

/// How a session server starts: the first job's environment and its unmutated tree.
#[derive(Clone)]
pub(super) struct SessionStart {
    pub(super) tree: Arc<tempfile::TempDir>,
    pub(super) env: Vec<(String, String)>,
    pub(super) rewrites: Rewrites,
}

/// The directory where one proof's servers and their forks share rewritten test modules
/// (`share_rewrites` in the script), inside the proof's directory: a guest of another proof
/// can neither read nor write it. Each server holds it, so it goes with the last of them.
pub(super) type Rewrites = Arc<tempfile::TempDir>;

pub(super) struct Server {
    pub(super) key: Key,
    pub(super) _process: Child,
    pub(super) requests: ChildStdin,
    pub(super) answers: Lines<BufReader<ChildStdout>>,
    /// A session server's own copy of the unmutated tree, which it collected and its forks
    /// import from; removed with the server (after the process, which is killed when dropped).
    pub(super) _tree: Option<tempfile::TempDir>,
    /// The pristine unmutated tree of its key, which no server runs in: every server of the
    /// key copies its own from it, so one server's collection (a module's import that writes
    /// beside `__file__`) never reaches another's forks. Removed with the last server.
    pub(super) _pristine: Option<Arc<tempfile::TempDir>>,
    pub(super) _rewrites: Rewrites,
    pub(super) idle_since: Instant,
}

/// Why a warm server could not be started, turned into a session server or sent a job.
#[derive(Debug, thiserror::Error)]
pub enum WarmError {
    /// A plain server was asked to collect a tree, which only a session server does.
    #[error("a server of {python} without a tree was asked to collect one")]
    NotSession {
        /// The Python interpreter the server runs on.
        python: String,
    },
    /// The server process did not start or never said it was ready.
    #[error("the warm server ({python}) did not start")]
    Start {
        /// The Python interpreter the server runs on.
        python: String,
    },
    /// A request could not be written to the server.
    #[error("failed to send a request to the warm server ({python})")]
    Send {
        /// The Python interpreter the server runs on.
        python: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The session server took too long to configure pytest and collect the tree.
    #[error("configuration and collection of {tree} took longer than {}s", limit.as_secs())]
    Collecting {
        /// The tree being collected.
        tree: PathBuf,
        /// How long collection may take.
        limit: Duration,
    },
    /// The session server exited while collecting the tree.
    #[error("the session server stopped while collecting {tree}")]
    StoppedCollecting {
        /// The tree being collected.
        tree: PathBuf,
    },
    /// The session server refused the tree it was asked to collect.
    #[error("the session server refused {tree}: {why}")]
    Refused {
        /// The tree being collected.
        tree: PathBuf,
        /// The server's reason.
        why: String,
    },
    /// The unmutated tree could not be copied for the session server.
    #[error("failed to copy the unmutated tree {from} for a session server")]
    CopyTree {
        /// The tree copied.
        from: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

#[derive(Deserialize)]
pub(super) struct Answer {
    #[serde(default)]
    pub(super) ready: bool,
    pub(super) pid: Option<i32>,
    pub(super) exit: Option<i32>,
    pub(super) session: Option<bool>,
    pub(super) why: Option<String>,
    pub(super) fallback: Option<String>,
    /// The fork runs the mutated module's top-level code again (a module-level mutant).
    #[serde(default)]
    pub(super) again: bool,
    /// A session server that ended with this answer: a test wrote into its tree, so no fork
    /// of any server of its key may be trusted again (see `tree_change` in the script).
    #[serde(default)]
    pub(super) retire: bool,
    /// The server killed the fork at the job's limit (`limit_ms` in the request).
    #[serde(default)]
    pub(super) timed_out: bool,
}

impl Server {
    pub(super) async fn start(
        key: Key,
        env: &[(String, String)],
        rewrites: Rewrites,
    ) -> Option<Server> {
        let launch = server_command(&key, env, &rewrites)?;
        let mut process = Command::from(launch.command()?)
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
            _tree: None,
            _pristine: None,
            _rewrites: rewrites,
            idle_since: Instant::now(),
        };
        // A server that cannot import pytest says so by closing: the job then runs as-is and
        // fails the way a fresh `python -m pytest` fails.
        server.answer().await.filter(|a| a.ready).map(|_| server)
    }

    /// A server of `key` (a session key), turned into a session server on `start.tree`.
    pub(super) async fn start_session(key: Key, start: SessionStart) -> Result<Server, WarmError> {
        let python = key.python.clone();
        let Some(session) = key.session.clone() else {
            return Err(WarmError::NotSession { python });
        };
        let pristine = start.tree.path().join("tree");
        let proof_dir = key.proof_dir.clone();
        let copied_from = pristine.clone();
        let own = tokio::task::spawn_blocking(move || {
            let dir = tempfile::Builder::new()
                .prefix(".session-")
                .tempdir_in(&proof_dir)?;
            hot_swap::copy_tree(&copied_from, &dir.path().join("tree"))?;
            Ok::<_, std::io::Error>(dir)
        })
        .await
        .map_err(std::io::Error::other)
        .and_then(|copied| copied)
        .map_err(|source| WarmError::CopyTree {
            from: pristine,
            source,
        })?;
        let mut server = Server::start(key, &start.env, start.rewrites.clone())
            .await
            .ok_or(WarmError::Start { python })?;
        let tree = own.path().join("tree");
        let report = own.path().join("session-report.xml");
        let options: Vec<String> = session
            .options
            .iter()
            .map(|o| {
                if o == JUNIT_PLACEHOLDER {
                    format!("--junitxml={}", report.display())
                } else {
                    o.clone()
                }
            })
            .collect();
        let session = Job {
            args: Some(&options),
            code: session.code.as_deref(),
            ..Job::new(&tree, &start.env)
        };
        server.send(&Request::Session { session }).await?;
        let answer = tokio::time::timeout(SESSION_START_LIMIT, server.answer())
            .await
            .map_err(|_| WarmError::Collecting {
                tree: tree.clone(),
                limit: SESSION_START_LIMIT,
            })?
            .ok_or_else(|| WarmError::StoppedCollecting { tree: tree.clone() })?;
        if answer.session != Some(true) {
            return Err(WarmError::Refused {
                tree,
                why: answer.why.unwrap_or_else(|| "no session".into()),
            });
        }
        server._tree = Some(own);
        server._pristine = Some(start.tree);
        Ok(server)
    }

    pub(super) async fn send(&mut self, request: &Request<'_>) -> Result<(), WarmError> {
        // Plain strings, paths and numbers: encoding cannot fail.
        let mut line = serde_json::to_string(request).unwrap_or_default();
        line.push('\n');
        self.requests
            .write_all(line.as_bytes())
            .await
            .map_err(|source| WarmError::Send {
                python: self.key.python.clone(),
                source,
            })
    }

    pub(super) async fn answer(&mut self) -> Option<Answer> {
        let line = self.answers.next_line().await.ok()??;
        serde_json::from_str(&line).ok()
    }
}

/// One line to a warm server, as `adapters/warm_pytest.py` reads it: a session to collect, or
/// a job to run in a fork.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(super) enum Request<'a> {
    /// Collect the tree once, as a session server.
    Session {
        /// What to collect, and how.
        session: Job<'a>,
    },
    /// Run one job in a fork.
    Job(Job<'a>),
}

/// A job (or a session's collection) for a warm server. Absent fields are absent from the
/// line, as the script tells a `python -c` job (with `code`) from a `python -m pytest` one.
#[derive(Debug, Serialize)]
pub(super) struct Job<'a> {
    /// The working directory: the job's tree.
    pub(super) cwd: &'a std::path::Path,
    /// pytest's arguments (or the `-c` program's), after the interpreter's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) args: Option<&'a [String]>,
    /// The program of a `python -c` job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) code: Option<&'a str>,
    /// The job's whole environment.
    pub(super) env: BTreeMap<&'a str, &'a str>,
    /// Where the fork's standard output goes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) stdout: Option<&'a std::path::Path>,
    /// Where the fork's standard error goes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) stderr: Option<&'a std::path::Path>,
    /// For a session server's fork: the mutated module, relative to the tree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) module: Option<&'a str>,
    /// For a session server's fork: the node ids to run (empty: every collected item).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) select: Option<&'a [String]>,
    /// For a session server's fork: the job's JUnit report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) junitxml: Option<&'a str>,
    /// How long the fork may run, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) limit_ms: Option<u64>,
    /// For a mutant's fresh session: name each test file once and keep the node ids in the
    /// session (`narrowed` in `adapters/warm_pytest.py`), which runs the same tests.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) narrow: bool,
}

impl<'a> Job<'a> {
    /// A job in `cwd` with the whole environment `env`, and nothing else yet.
    pub(super) fn new(cwd: &'a std::path::Path, env: &'a [(String, String)]) -> Self {
        Self {
            cwd,
            args: None,
            code: None,
            env: env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect(),
            stdout: None,
            stderr: None,
            module: None,
            select: None,
            junitxml: None,
            limit_ms: None,
            narrow: false,
        }
    }
}

/// The server's argv: the script, confined to the key's proof directory where this host can
/// confine it; none when its toolchain cannot be given to it (the job then runs as-is, and
/// says why).
pub(super) fn server_command(
    key: &Key,
    env: &[(String, String)],
    rewrites: &Rewrites,
) -> Option<Launch> {
    let command: Vec<String> = vec![
        key.python.clone(),
        "-c".into(),
        WARM_PYTEST.into(),
        rewrites.path().to_string_lossy().into_owned(),
    ];
    let root = std::path::Path::new("/");
    let Ok(confiner) = confine::confiner() else {
        return Some(Launch::unconfined(&command, env, root));
    };
    let path_env = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str());
    confiner
        .launch(
            &confine::Grant {
                writable: &[&key.proof_dir],
                cwd: root,
                network: key.network,
                program: &key.python,
                path_env,
                env,
                vendored: None,
            },
            &command,
        )
        .ok()
}

/// The job's environment minus what differs per job but does not shape start-up.
pub(super) fn startup_env(run: &SandboxRun) -> Vec<(String, String)> {
    run.env
        .iter()
        .filter(|(k, _)| !PER_JOB_ENV.contains(&k.as_str()))
        .cloned()
        .collect()
}
