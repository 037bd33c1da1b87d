//! A fleet service as a process of its own (`assay coordinator`, `assay worker`, or a test
//! binary playing one): started from a [`ProcessSpec`], killed when the test ends, and killed,
//! terminated or started again in the middle of one.

use crate::servers::{free_port, http_get, metric, metric_sum};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How to start a service process; [`ProcessSpec::start`] starts it.
#[derive(Clone, Debug)]
pub struct ProcessSpec {
    binary: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    log: PathBuf,
    ready: String,
    /// Where its probes listen: set on a free port, or the service's own default.
    http_port: u16,
    http_default: bool,
}

impl ProcessSpec {
    pub(super) fn new(binary: &Path, args: &[&str], log: PathBuf) -> Self {
        Self {
            binary: binary.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: Vec::new(),
            log,
            ready: String::new(),
            http_port: free_port(),
            http_default: false,
        }
    }

    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn envs(mut self, env: impl IntoIterator<Item = (String, String)>) -> Self {
        self.env.extend(env);
        self
    }

    /// Started means its log says `ready` (otherwise it is taken as started at once).
    pub fn ready(mut self, text: &str) -> Self {
        self.ready = text.to_owned();
        self
    }

    /// Leaves the probe address to the service's own default, `port`.
    pub fn probes_on_default(mut self, port: u16) -> Self {
        self.http_port = port;
        self.http_default = true;
        self
    }

    pub fn start(self) -> FleetProcess {
        let mut process = FleetProcess {
            child: None,
            spec: self,
        };
        process.restart();
        process
    }
}

/// A running service process, killed when it drops.
pub struct FleetProcess {
    child: Option<Child>,
    spec: ProcessSpec,
}

impl FleetProcess {
    /// The running process's id (for a signal: a pause, a kill without warning).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The port its probes (`/healthz`, `/metrics`) listen on.
    pub fn http_port(&self) -> u16 {
        self.spec.http_port
    }

    /// Everything the process has logged since it was last started.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.spec.log).unwrap_or_default()
    }

    /// Waits until the log says `text`.
    pub fn wait_for_log(&self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.log().contains(text) {
            assert!(
                Instant::now() < deadline,
                "{:?} did not log {text:?}:\n{}",
                self.spec.args,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A counter from its `/metrics`.
    pub fn metric(&self, name: &str) -> Option<u64> {
        metric(&http_get(self.spec.http_port, "/metrics")?, name)
    }

    /// A counter's sum over its labels, from its `/metrics`.
    pub fn metric_sum(&self, name: &str) -> Option<u64> {
        metric_sum(&http_get(self.spec.http_port, "/metrics")?, name)
    }

    /// Its own temporary directory (`TMPDIR`), kept across restarts: a worker's default
    /// scratch root, `assay-worker/`, is in it.
    pub fn temp_dir(&self) -> PathBuf {
        self.spec.log.with_extension("tmp")
    }

    /// SIGTERM, then its exit code once it has exited.
    pub fn terminate(mut self) -> Option<i32> {
        let mut child = self.child.take().expect("the process runs");
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().expect("the process's status") {
                return status.code();
            }
            assert!(Instant::now() < deadline, "the service ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the process again (killing it first if it runs), and waits until it is ready.
    pub fn restart(&mut self) {
        self.kill();
        let spec = &self.spec;
        // Its own temporary directory inside the sandbox's: what a killed service leaves there
        // (a worker's job and warm-session directories under `assay-worker/`) goes with the
        // test, never into the machine's `/tmp`. A spec's own `TMPDIR` wins.
        let tmp = self.temp_dir();
        std::fs::create_dir_all(&tmp).expect("the service's temporary directory");
        let mut command = Command::new(&spec.binary);
        command
            .args(&spec.args)
            .env("TMPDIR", &tmp)
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .env("ASSAY_LOG", "info");
        if !spec.http_default {
            command.env("ASSAY_HTTP_LISTEN", format!("127.0.0.1:{}", spec.http_port));
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&spec.log).expect("service log"))
            .spawn()
            .expect("the service process starts");
        self.child = Some(child);
        if !spec.ready.is_empty() {
            self.wait_for_log(&spec.ready.clone());
        }
    }
}

impl Drop for FleetProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
