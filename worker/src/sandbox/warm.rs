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
//!
//! Servers host guest code (a conftest runs in them), so each is confined like a process
//! sandbox's job (see [`super::confine`]) and belongs to one proof: it may write that proof's
//! directory on this worker (its jobs' trees, scratch and logs, its session trees, its
//! rewritten test modules) and nothing else, and it never serves another proof's jobs.
//!
//! Hot swap: a mutant job of `PYTHON -m pytest` (or `-c`) runs, when it can, in a fork of a
//! *session server* instead: a server that ran pytest's configuration and full collection once
//! on an unmutated copy of the job's tree and serves forks from the end of
//! `pytest_collection_modifyitems`. The child replaces the code of the mutated module's changed
//! functions in the live function objects (or, for a module-level mutant, runs the module's
//! mutated top-level code again and patches the live module's plain data) and runs only the
//! job's node ids, or every collected item when the command names none. A session server is
//! keyed like a warm server plus the tree id and the options (the command without its node
//! ids and report path). Whether a mutant can be swapped is the
//! server's call (`adapters/warm_pytest.py`); when it cannot, or no session server can be had
//! for the tree, the job runs as above. `ASSAY_MUTATE_HOT_SWAP=0` turns hot swap off.
//!
//! Warm-up: a mutation run's baseline names the command its mutants will run
//! (`JobSpec::next_command`). Before the baseline starts, its pristine tree is copied and, in
//! the background, session servers of that command are started one after another, up to the
//! slots, while the baseline runs on another core. A mutant job whose key is warming waits
//! for those servers instead of collecting again.

mod command;
mod server;

pub use server::{WARM_PYTEST, WarmError};

use super::hot_swap;
use super::{MutantSource, Sandbox, SandboxError, SandboxExit, SandboxRun};
use assay_common::sandbox::SandboxEvidence;
use assay_transport::error_chain::error_chain;
use async_trait::async_trait;
use command::{WarmCommand, warm_command};
use server::{
    Answer, Job, Key, REAP_GRACE, Request, Rewrites, Server, SessionKey, SessionStart, startup_env,
};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

/// Idle servers, and how many servers of each kind were started (or are starting).
#[derive(Default)]
struct Pool {
    idle: Vec<Server>,
    started: BTreeMap<Key, usize>,
    /// Session keys whose server could not collect: their jobs run the usual way.
    broken: BTreeSet<Key>,
    /// The unmutated trees of session keys, while a server of the key holds them.
    trees: BTreeMap<Key, Weak<tempfile::TempDir>>,
    /// Each proof's rewritten test modules, while a server of the proof holds them.
    rewrites: BTreeMap<PathBuf, Weak<tempfile::TempDir>>,
    /// Session keys whose servers a warm-up is starting: told each time one is parked, and
    /// closed when the warm-up ends.
    warming: BTreeMap<Key, tokio::sync::watch::Receiver<()>>,
}

/// Wraps a sandbox: mutant `python -m pytest` runs fork a warm server, the rest pass through.
pub struct WarmPytest<S> {
    inner: S,
    pool: Arc<Mutex<Pool>>,
    /// Jobs that may run at once: the most servers of one kind worth starting ahead.
    slots: usize,
    hot_swap: bool,
    /// Jobs get the host's network (`--network bridge`), not a loopback of their own.
    network: bool,
}

/// How the last job of a hot-swap attempt ended.
enum Swapped {
    Ran(SandboxExit),
    /// The job runs the usual way, for this reason.
    Fallback(String),
}

impl<S: Sandbox> WarmPytest<S> {
    /// Hot swap is on unless `ASSAY_MUTATE_HOT_SWAP` is `0`, `false` or `off`.
    pub fn new(inner: S, slots: usize) -> Self {
        let off = std::env::var("ASSAY_MUTATE_HOT_SWAP").is_ok_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "0" | "false" | "off"
            )
        });
        Self {
            inner,
            pool: Arc::default(),
            slots,
            hot_swap: !off,
            network: false,
        }
    }

    /// Gives the servers, and so the jobs they run, the host's network.
    pub fn with_network(mut self, on: bool) -> Self {
        self.network = on;
        self
    }

    /// The servers' key for `run`'s interpreter, start-up environment and proof.
    fn key(&self, run: &SandboxRun, python: &str, session: Option<SessionKey>) -> Key {
        Key {
            python: python.to_owned(),
            env: startup_env(run),
            proof_dir: run.proof_dir.clone(),
            network: self.network || run.network,
            session,
        }
    }

    /// The session servers' key for `command` on tree `tree`, with the command split into its
    /// options and node ids; why none when it is no pytest command a session can serve.
    fn session_key(
        &self,
        run: &SandboxRun,
        command: &[String],
        tree: &str,
    ) -> Result<(Key, hot_swap::Split), &'static str> {
        let warm = warm_command(command).ok_or("not a pytest command")?;
        let split = hot_swap::split(warm.args).ok_or("an option of the command lacks its value")?;
        let key = self.key(
            run,
            warm.python,
            Some(SessionKey {
                tree: tree.to_owned(),
                code: warm.code.map(str::to_owned),
                options: split.options.clone(),
            }),
        );
        Ok((key, split))
    }

    /// How many idle servers of a class the pool keeps (see [`Pool::park`]).
    fn idle_limit(&self) -> usize {
        2 * self.slots.max(1)
    }

    /// The proof's shared directory of rewritten test modules (see [`Pool::rewrites`]).
    fn rewrites(&self, proof_dir: &std::path::Path) -> Option<Rewrites> {
        self.pool.lock().ok()?.rewrites(proof_dir)
    }

    /// Turns hot swap on or off whatever the environment says.
    pub fn with_hot_swap(mut self, on: bool) -> Self {
        self.hot_swap = on;
        self
    }

    /// An idle server of this kind, if any; when that leaves none idle and the slots allow
    /// another, a spare starts. A caller given none starts one itself.
    fn take_idle(
        &self,
        key: &Key,
        env: &[(String, String)],
        session: Option<&SessionStart>,
    ) -> Option<Server> {
        let mut guard = self.pool.lock().ok()?;
        let pool = &mut *guard;
        let taken = pool.take_parked(key);
        let started = pool.started.entry(key.clone()).or_default();
        if taken.is_none() {
            *started += 1; // the caller starts one
        }
        let none_left = !pool.idle.iter().any(|s| &s.key == key);
        if none_left && *started < self.slots {
            *started += 1;
            let session = session.cloned();
            let rewrites = session
                .as_ref()
                .map(|start| start.rewrites.clone())
                .or_else(|| pool.rewrites(&key.proof_dir));
            let (pool, key, env) = (self.pool.clone(), key.clone(), env.to_vec());
            let limit = self.idle_limit();
            tokio::spawn(async move {
                match (session, rewrites) {
                    (_, None) => {}
                    (None, Some(rewrites)) => {
                        let spare = Server::start(key, &env, rewrites).await;
                        if let (Some(spare), Ok(mut pool)) = (spare, pool.lock()) {
                            pool.park(spare, limit);
                        }
                    }
                    (Some(start), Some(_)) => {
                        start_parked(&pool, key, start, limit).await;
                    }
                }
            });
        }
        taken
    }

    fn put_idle(&self, server: Server) {
        if let Ok(mut pool) = self.pool.lock() {
            pool.park(server, self.idle_limit());
        }
    }

    /// The pristine unmutated tree of a session key, which its servers copy theirs from: the
    /// one they hold, or a new copy of the job's tree with the mutated file's original bytes.
    async fn unmutated_tree(
        &self,
        key: &Key,
        run: &SandboxRun,
        source: &MutantSource<'_>,
    ) -> Result<Arc<tempfile::TempDir>, WarmError> {
        let known = self
            .pool
            .lock()
            .ok()
            .and_then(|pool| pool.trees.get(key).and_then(Weak::upgrade));
        if let Some(tree) = known {
            return Ok(tree);
        }
        let (path, original) = (source.path.to_owned(), source.original.to_vec());
        self.keep_tree(key, run, move |from, to| {
            hot_swap::unmutated_copy(from, to, &path, &original)
        })
        .await
    }

    /// Copies `run`'s tree by `copy` into a new directory of its proof's, kept as `key`'s
    /// pristine tree while a server of the key holds it.
    async fn keep_tree(
        &self,
        key: &Key,
        run: &SandboxRun,
        copy: impl FnOnce(&std::path::Path, &std::path::Path) -> std::io::Result<()> + Send + 'static,
    ) -> Result<Arc<tempfile::TempDir>, WarmError> {
        let (from, proof_dir) = (run.tree_dir.clone(), run.proof_dir.clone());
        let tree = tokio::task::spawn_blocking(move || {
            let dir = tempfile::Builder::new()
                .prefix(".unmutated-")
                .tempdir_in(&proof_dir)?;
            copy(&from, &dir.path().join("tree"))?;
            Ok::<_, std::io::Error>(dir)
        })
        .await
        .map_err(std::io::Error::other)
        .and_then(|copied| copied)
        .map_err(|source| WarmError::CopyTree {
            from: run.tree_dir.clone(),
            source,
        })?;
        let tree = Arc::new(tree);
        if let Ok(mut pool) = self.pool.lock() {
            pool.trees.insert(key.clone(), Arc::downgrade(&tree));
        }
        Ok(tree)
    }

    /// Runs a mutant job in a fork of a session server of its tree, if the job and the mutant
    /// allow it.
    async fn hot_swap(
        &self,
        run: &SandboxRun,
        source: &MutantSource<'_>,
    ) -> Result<Swapped, SandboxError> {
        let fallback = |why: &str| Ok(Swapped::Fallback(why.to_owned()));
        let (key, split) = match self.session_key(run, &run.command, source.tree) {
            Ok(keyed) => keyed,
            Err(why) => return fallback(why),
        };
        if self
            .pool
            .lock()
            .is_ok_and(|pool| pool.broken.contains(&key))
        {
            return fallback("no session server for this tree");
        }
        let tree = match self.unmutated_tree(&key, run, source).await {
            Ok(tree) => tree,
            Err(why) => return fallback(&error_chain(&why)),
        };
        let Some(rewrites) = self.rewrites(&run.proof_dir) else {
            return fallback("no directory for rewritten test modules");
        };
        let start = SessionStart {
            tree,
            env: run.env.clone(),
            rewrites,
        };
        let warmed = match self.warmed(&key, run.timeout).await {
            Some(server) => Some(server),
            None => self.take_idle(&key, &run.env, Some(&start)),
        };
        let server = match warmed {
            Some(server) => server,
            None => match Server::start_session(key.clone(), start).await {
                Ok(server) => server,
                Err(why) => {
                    if let Ok(mut pool) = self.pool.lock() {
                        pool.broken.insert(key);
                    }
                    return fallback(&format!("no session server: {}", error_chain(&why)));
                }
            },
        };
        let request = Job {
            stdout: Some(&run.stdout_path),
            stderr: Some(&run.stderr_path),
            module: Some(source.path),
            select: Some(&split.select),
            junitxml: split.junitxml.as_deref(),
            ..Job::new(&run.tree_dir, &run.env)
        };
        self.run_request(server, run, request).await
    }

    /// Starts session servers of `next`, the command the jobs after `run` will run on its tree
    /// `tree`, in the background: one after another, up to the slots (see the module's
    /// warm-up). Copies `run`'s tree first, so call it before `run`'s command starts.
    async fn warm_up(&self, run: &SandboxRun, next: &[String], tree: &str) {
        // A command that names tests is no session's: the hint is the mutants' without any.
        let Some(key) = self
            .session_key(run, next, tree)
            .ok()
            .filter(|(_, split)| split.select.is_empty())
            .map(|(key, _)| key)
        else {
            return;
        };
        let servers = self.slots.max(1);
        let (told, ready) = tokio::sync::watch::channel(());
        {
            // Checked and reserved at once: a key some job already serves is not warmed again.
            let Ok(mut pool) = self.pool.lock() else {
                return;
            };
            if pool.broken.contains(&key) {
                return;
            }
            let started = pool.started.entry(key.clone()).or_default();
            if *started > 0 {
                return;
            }
            *started += servers;
            pool.warming.insert(key.clone(), ready);
        }
        let start = match self.rewrites(&run.proof_dir) {
            Some(rewrites) => self
                .keep_tree(&key, run, hot_swap::copy_tree)
                .await
                .map(|tree| SessionStart {
                    tree,
                    env: run.env.clone(),
                    rewrites,
                })
                .map_err(|why| error_chain(&why)),
            None => Err("no directory for rewritten test modules".into()),
        };
        let (pool, limit) = (self.pool.clone(), self.idle_limit());
        tokio::spawn(async move {
            let mut left = servers;
            match start {
                Ok(start) => {
                    while left > 0 && start_parked(&pool, key.clone(), start.clone(), limit).await {
                        left -= 1;
                        let _ = told.send(());
                    }
                }
                Err(why) => tracing::debug!(%why, "no warm-up: the tree was not copied"),
            }
            if let Ok(mut pool) = pool.lock() {
                if let Some(n) = pool.started.get_mut(&key) {
                    *n = n.saturating_sub(left);
                }
                pool.warming.remove(&key);
            }
            // Dropping `told` wakes every job still waiting: they go the usual way.
        });
    }

    /// A session server of `key` that a warm-up started: an idle one, or the next one it
    /// parks, waited for while it starts (within `limit`). `None` when no warm-up of the key
    /// is running, or it ended with none left.
    async fn warmed(&self, key: &Key, limit: std::time::Duration) -> Option<Server> {
        let mut ready = self.pool.lock().ok()?.warming.get(key)?.clone();
        let wait = async {
            loop {
                if let Some(server) = self.pool.lock().ok()?.take_parked(key) {
                    return Some(server);
                }
                ready.changed().await.ok()?;
            }
        };
        tokio::time::timeout(limit, wait).await.ok().flatten()
    }

    /// Parks `server` for the next job, or, when it retired, drops it and sends every later
    /// job of its key the usual way: its tests write into the tree, so a new session server
    /// would be spoiled by the first mutant again.
    fn keep_unless_retired(&self, server: Server, retire: bool) {
        if !retire {
            return self.put_idle(server);
        }
        tracing::debug!(python = %server.key.python, "session server retired: its tests changed the session tree");
        if let Ok(mut pool) = self.pool.lock() {
            if let Some(started) = pool.started.get_mut(&server.key) {
                *started = started.saturating_sub(1);
            }
            pool.broken.insert(server.key.clone());
        }
    }

    /// Runs mutant job `run` in a fork of `server`, narrowed (its test files named once, its
    /// node ids kept in the session); the server comes back when it is still usable.
    async fn run_forked(
        &self,
        server: Server,
        run: &SandboxRun,
        warm: &WarmCommand<'_>,
    ) -> Result<SandboxExit, SandboxError> {
        let request = Job {
            args: Some(warm.args),
            code: warm.code,
            stdout: Some(&run.stdout_path),
            stderr: Some(&run.stderr_path),
            narrow: true,
            ..Job::new(&run.tree_dir, &run.env)
        };
        match self.run_request(server, run, request).await? {
            Swapped::Ran(exit) => Ok(exit),
            Swapped::Fallback(why) => Err(SandboxError::Backend {
                job_id: run.job_id.clone(),
                message: format!("warm pytest runner: {why}"),
            }),
        }
    }

    /// Sends one job to `server` and follows its fork to the end. A session server may answer
    /// that the job is not for it (a fallback); the server then stays usable.
    async fn run_request(
        &self,
        mut server: Server,
        run: &SandboxRun,
        mut request: Job<'_>,
    ) -> Result<Swapped, SandboxError> {
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
        // A fork of a session server (collected already) pays no start-up or collection, so
        // the tighter limit applies when given; a fork of a plain warm server still collects.
        let limit = match (&server.key.session, run.forked_timeout) {
            (Some(_), Some(forked)) => forked.min(run.timeout),
            _ => run.timeout,
        };
        request.limit_ms = Some(u64::try_from(limit.as_millis()).unwrap_or(u64::MAX));
        server
            .send(&Request::Job(request))
            .await
            .map_err(|source| SandboxError::Warm {
                job_id: run.job_id.clone(),
                source,
            })?;
        let first = server.answer().await;
        let pid = match first {
            Some(Answer {
                fallback: Some(why),
                retire,
                ..
            }) => {
                self.keep_unless_retired(server, retire);
                return Ok(Swapped::Fallback(why));
            }
            Some(Answer {
                pid: Some(pid),
                again,
                ..
            }) => {
                if again {
                    tracing::debug!(job_id = %run.job_id, "hot swap: the mutated module's top-level code runs again");
                }
                pid
            }
            _ if server.key.session.is_some() => {
                return Ok(Swapped::Fallback("the session server stopped".into()));
            }
            _ => return Err(backend("the server stopped before forking")),
        };
        // The server enforces the limit and kills the fork's group itself: in the sandbox's
        // PID namespace `pid` is not a host process number, and signalling it from here could
        // reach an unrelated host process group. A server that does not answer within the
        // grace after the limit is discarded (dropping it kills its sandbox).
        tracing::trace!(job_id = %run.job_id, pid, ?limit, "forked");
        let answer = match tokio::time::timeout(limit + REAP_GRACE, server.answer()).await {
            Err(_elapsed) => return Ok(Swapped::Ran(SandboxExit::TimedOut)),
            Ok(answer) => answer.ok_or_else(|| backend("the server stopped while the job ran"))?,
        };
        if answer.timed_out {
            self.keep_unless_retired(server, answer.retire);
            return Ok(Swapped::Ran(SandboxExit::TimedOut));
        }
        if let Some(why) = answer.fallback {
            // A module-level mutant the child found it could not patch (it ran no test), or
            // a fork that changed the session's tree (its result is not trusted).
            self.keep_unless_retired(server, answer.retire);
            return Ok(Swapped::Fallback(why));
        }
        let status = answer
            .exit
            .ok_or_else(|| backend("the server stopped while the job ran"))?;
        self.put_idle(server);
        Ok(Swapped::Ran(if status < 0 {
            SandboxExit::Signalled(-status)
        } else {
            SandboxExit::Exited(status)
        }))
    }
}

/// Starts a session server of `key` and parks it in `pool` (keeping `limit` idle); whether one
/// was parked. A key whose session cannot be had is marked broken: its jobs go the usual way.
async fn start_parked(pool: &Mutex<Pool>, key: Key, start: SessionStart, limit: usize) -> bool {
    match Server::start_session(key.clone(), start).await {
        Ok(server) => {
            if let Ok(mut pool) = pool.lock() {
                pool.park(server, limit);
            }
            true
        }
        Err(why) => {
            tracing::debug!(why = %error_chain(&why), "no session server for hot swap");
            if let Ok(mut pool) = pool.lock() {
                pool.broken.insert(key);
            }
            false
        }
    }
}

impl Pool {
    /// An idle server of `key`, if any.
    fn take_parked(&mut self, key: &Key) -> Option<Server> {
        let at = self.idle.iter().position(|s| &s.key == key)?;
        Some(self.idle.swap_remove(at))
    }

    /// The proof's shared directory of rewritten test modules, made on first use.
    fn rewrites(&mut self, proof_dir: &std::path::Path) -> Option<Rewrites> {
        if let Some(known) = self.rewrites.get(proof_dir).and_then(Weak::upgrade) {
            return Some(known);
        }
        let made = tempfile::Builder::new()
            .prefix(".rewrites-")
            .tempdir_in(proof_dir)
            .map_err(|why| tracing::debug!(%why, "no directory for rewritten test modules"))
            .ok()
            .map(Arc::new)?;
        self.rewrites.retain(|_, dir| dir.strong_count() > 0);
        self.rewrites
            .insert(proof_dir.to_owned(), Arc::downgrade(&made));
        Some(made)
    }

    /// Makes `server` idle. Session servers are kept to `limit`: the one idle longest goes
    /// first (a worker moves on to other trees; their servers must not pile up).
    fn park(&mut self, mut server: Server, limit: usize) {
        server.idle_since = Instant::now();
        let session = server.key.session.is_some();
        self.idle.push(server);
        // Plain servers are kept to `limit` too: they belong to one proof each, and a worker
        // moves on to other proofs.
        let same_class = |s: &Server| s.key.session.is_some() == session;
        while self.idle.iter().filter(|s| same_class(s)).count() > limit {
            let Some(oldest) = self
                .idle
                .iter()
                .enumerate()
                .filter(|(_, s)| same_class(s))
                .min_by_key(|(_, s)| s.idle_since)
                .map(|(at, _)| at)
            else {
                break;
            };
            let gone = self.idle.swap_remove(oldest);
            if let Some(started) = self.started.get_mut(&gone.key) {
                *started = started.saturating_sub(1);
            }
        }
        self.trees.retain(|_, tree| tree.strong_count() > 0);
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

    async fn prepare_next(&self, run: &SandboxRun, next: &[String], tree: &str) {
        if self.hot_swap {
            self.warm_up(run, next, tree).await;
        }
    }

    async fn run_mutant(&self, run: &SandboxRun) -> Result<SandboxExit, SandboxError> {
        let Some(warm) = warm_command(&run.command) else {
            return self.inner.run(run).await;
        };
        let key = self.key(run, warm.python, None);
        let server = match self.take_idle(&key, &run.env, None) {
            Some(server) => Some(server),
            None => match self.rewrites(&run.proof_dir) {
                Some(rewrites) => Server::start(key, &run.env, rewrites).await,
                None => None,
            },
        };
        match server {
            Some(server) => self.run_forked(server, run, &warm).await,
            None => self.inner.run(run).await,
        }
    }

    async fn run_mutant_of(
        &self,
        run: &SandboxRun,
        source: &MutantSource<'_>,
    ) -> Result<SandboxExit, SandboxError> {
        if self.hot_swap {
            match self.hot_swap(run, source).await? {
                Swapped::Ran(exit) => {
                    tracing::debug!(job_id = %run.job_id, path = source.path, "hot swap: ran in a fork of the collected session");
                    return Ok(exit);
                }
                Swapped::Fallback(why) => {
                    tracing::debug!(job_id = %run.job_id, path = source.path, %why, "hot swap not possible: a fresh session");
                }
            }
        }
        self.run_mutant(run).await
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
        let venv = argv(&["/work/venv/bin/python", "-c", "import sys", "report.json"]);
        assert_eq!(
            warm_command(&venv).expect("a venv's python").python,
            &venv[0]
        );
        assert!(warm_command(&argv(&["python3.11", "-c", "pass"])).is_some());
        assert!(warm_command(&argv(&["pypy3", "-c", "pass"])).is_some());
        // A shell's `-c` is not Python's: a schema build never starts a session server.
        for shell in [
            argv(&["sh", "-c", "cargo test --no-run \"$@\"", "assay-build"]),
            argv(&["bash", "-c", "exit 0"]),
            argv(&["pythonista", "-c", "pass"]),
        ] {
            assert!(warm_command(&shell).is_none(), "{shell:?}");
        }
    }
}
