//! One fleet on 127.0.0.1 for every fleet test: a JetStream `nats-server`, an artifact store (a
//! directory, or an S3-protocol server), and the coordinators and workers a test asks for, in
//! this process (through their `serve` functions) or as `assay` processes. Anything it started
//! stops when it drops; a server, a coordinator or a worker can be killed and started again in
//! the middle of a test.

use crate::servers::{ServerGuard, s3_env, s3_options, start_s3, wait_for_port};
use assay_common::WorkerId;
use assay_common::service_config::{SandboxKind, ServiceConfig};
use assay_coordinator::CoordinatorConfig;
use assay_worker::service::{JobRunner, WorkerConfig, WorkerParts};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the fleet keeps trees, results and evidence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// A `file://` directory in the sandbox's temp dir.
    File,
    /// An S3-protocol server (`moto_server`) with one bucket.
    S3,
}

const BUCKET: &str = "assay-fleet";

/// The fleet's servers and the services started on them.
pub struct ClusterSandbox {
    nats: Option<Child>,
    nats_port: u16,
    /// Lines added to the NATS server's configuration (a smaller `max_payload`, say).
    nats_config: String,
    s3: Option<ServerGuard>,
    dir: tempfile::TempDir,
}

impl ClusterSandbox {
    /// nats-server (JetStream) on a free port, and the store.
    pub fn start(store: StoreKind) -> Self {
        Self::start_with_nats_config(store, "")
    }

    /// [`Self::start`], with `nats_config` added to the server's configuration.
    pub fn start_with_nats_config(store: StoreKind, nats_config: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let s3 = (store == StoreKind::S3).then(|| start_s3(BUCKET));
        let mut sandbox = Self {
            nats: None,
            nats_port: crate::servers::free_port(),
            nats_config: nats_config.to_owned(),
            s3,
            dir,
        };
        sandbox.restart_nats();
        sandbox
    }

    /// A fleet whose store is a directory.
    pub fn with_file_store() -> Self {
        Self::start(StoreKind::File)
    }

    pub fn nats_url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.nats_port)
    }

    pub fn nats_port(&self) -> u16 {
        self.nats_port
    }

    /// The sandbox's own directory: logs, scratch and tree caches live here.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn store_url(&self) -> String {
        match &self.s3 {
            Some(_) => format!("s3://{BUCKET}"),
            None => format!("file://{}", self.dir.path().join("store").display()),
        }
    }

    /// The S3 server's port, when the store is one.
    pub fn s3_port(&self) -> Option<u16> {
        self.s3.as_ref().map(|s3| s3.port)
    }

    /// The store's options for the library (`aws_*`; none for a directory).
    pub fn store_options(&self) -> Vec<(String, String)> {
        self.s3_port().map(s3_options).unwrap_or_default()
    }

    /// The store opened as the services open it.
    pub fn open_store(&self) -> assay_transport::store::ObjectArtifactStore {
        let options = self.store_options();
        let options: Vec<(&str, &str)> = options
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assay_transport::store::ObjectArtifactStore::open_with_options(&self.store_url(), &options)
            .expect("the sandbox's store opens")
    }

    /// What an `assay` service or CLI process needs to reach this fleet: the NATS URL, the
    /// store and, for S3, its `AWS_*` settings.
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env = self.s3_port().map(s3_env).unwrap_or_default();
        env.push(("ASSAY_NATS_URL".into(), self.nats_url()));
        env.push(("ASSAY_STORE".into(), self.store_url()));
        env
    }

    /// Stops the NATS server now (an outage); [`Self::restart_nats`] brings it back.
    pub fn kill_nats(&mut self) {
        if let Some(mut child) = self.nats.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the NATS server again on the same port and JetStream store, after
    /// [`Self::kill_nats`] (or at the start).
    pub fn restart_nats(&mut self) {
        self.kill_nats();
        let file = self.path("nats.conf");
        let config = format!(
            "listen: \"127.0.0.1:{}\"\njetstream {{\n  store_dir: \"{}\"\n}}\n{}\n",
            self.nats_port,
            self.path("jetstream").display(),
            self.nats_config
        );
        std::fs::write(&file, config).expect("write nats.conf");
        let child = Command::new("nats-server")
            .arg("-c")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server on PATH");
        self.nats = Some(child);
        wait_for_port(self.nats_port, "nats-server");
    }

    pub async fn client(&self) -> async_nats::Client {
        async_nats::connect(self.nats_url())
            .await
            .expect("the sandbox's NATS server answers")
    }

    /// A service configuration for this fleet under `prefix`: process sandbox, one slot, no
    /// probe listener, `name`'s tree cache in the sandbox's directory.
    pub fn service_config(&self, prefix: &str, name: &str) -> ServiceConfig {
        let mut config = ServiceConfig::default();
        config.nats.url = self.nats_url();
        config.nats.subject_prefix = prefix.into();
        config.store.url = self.store_url();
        config.http.listen = Some(String::new());
        config.worker.sandbox = SandboxKind::Process;
        config.worker.slots = 1;
        config.worker.tree_cache_dir = self.path(&format!("{name}-cache")).display().to_string();
        config
    }

    /// A coordinator in this process under `prefix`.
    pub fn coordinator(&self, prefix: &str) -> InProcess {
        let mut config = CoordinatorConfig::new(self.service_config(prefix, "coordinator"));
        config.s3_options = self.store_options();
        self.coordinator_with(config)
    }

    pub fn coordinator_with(&self, config: CoordinatorConfig) -> InProcess {
        InProcess::spawn(move |stop| async move {
            assay_coordinator::serve(config, stop)
                .await
                .expect("the coordinator serves");
        })
    }

    /// A worker's configuration under `prefix`, named `name`, its scratch in the sandbox.
    pub fn worker_config(&self, prefix: &str, name: &str) -> WorkerConfig {
        let mut config = WorkerConfig::new(self.service_config(prefix, name));
        config.worker_id = WorkerId(name.into());
        config.scratch_root = Some(self.path(&format!("{name}-scratch")));
        config.s3_options = self.store_options();
        config
    }

    /// A worker in this process that runs its jobs for real.
    pub fn worker(&self, config: WorkerConfig) -> InProcess {
        InProcess::spawn(move |stop| async move {
            assay_worker::serve(config, stop)
                .await
                .expect("the worker serves");
        })
    }

    /// A worker in this process whose jobs `runner` answers.
    pub fn worker_with(&self, config: WorkerConfig, runner: Arc<dyn JobRunner>) -> InProcess {
        let parts = WorkerParts {
            runner,
            store: Arc::new(self.open_store()),
            metrics: Default::default(),
        };
        InProcess::spawn(move |stop| async move {
            assay_worker::service::serve_with(config, parts, stop)
                .await
                .expect("the worker serves");
        })
    }

    /// `binary` (the `assay` executable) run with `args` and this fleet's [`Self::env`] plus
    /// `env`, its stderr in `{name}.log`; started once its log says `ready`.
    pub fn process(
        &self,
        binary: &Path,
        name: &str,
        args: &[&str],
        env: &[(String, String)],
        ready: &str,
    ) -> FleetProcess {
        let mut all = self.env();
        all.extend(env.iter().cloned());
        let mut process = FleetProcess {
            child: None,
            binary: binary.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: all,
            log: self.path(&format!("{name}.log")),
            ready: ready.to_owned(),
        };
        process.restart();
        process
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for ClusterSandbox {
    fn drop(&mut self) {
        self.kill_nats();
    }
}

/// A coordinator or worker running in this process: [`InProcess::stop`] shuts it down
/// gracefully; dropped, it is aborted.
pub struct InProcess {
    handle: Option<tokio::task::JoinHandle<()>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl InProcess {
    /// Runs `serve(shutdown)` as a task; `shutdown` resolves when the service is stopped.
    pub fn spawn<F, Fut>(serve: F) -> Self
    where
        F: FnOnce(std::pin::Pin<Box<dyn Future<Output = ()> + Send>>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let shutdown = Box::pin(async move {
            let _ = rx.await;
        });
        Self {
            handle: Some(tokio::spawn(serve(shutdown))),
            stop: Some(stop),
        }
    }

    /// Shuts the service down gracefully and waits for it.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(handle) = self.handle.take() {
            let _ = handle.await;
        }
    }

    /// Kills the service at once, as a crash would: nothing of it runs on.
    pub async fn kill(mut self) {
        if let Some(handle) = self.handle.take() {
            handle.abort();
            let _ = handle.await;
        }
    }

    /// Whether the service has ended (a panic in it included).
    pub fn is_finished(&self) -> bool {
        self.handle.as_ref().is_none_or(|h| h.is_finished())
    }

    /// Waits for the service to end on its own, and hands back how it ended.
    pub async fn join(mut self) -> Result<(), tokio::task::JoinError> {
        match self.handle.take() {
            Some(handle) => handle.await,
            None => Ok(()),
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(handle) = &self.handle {
            handle.abort();
        }
    }
}

/// A fleet service as an `assay` process, killed when the test ends; kill and restart it to
/// play a crash and a new start.
pub struct FleetProcess {
    child: Option<Child>,
    binary: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    log: PathBuf,
    ready: String,
}

impl FleetProcess {
    /// Everything the process has logged since it was last started.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
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
        let child = Command::new(&self.binary)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("ASSAY_LOG", "info")
            .env("ASSAY_HTTP_LISTEN", "")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&self.log).expect("service log"))
            .spawn()
            .expect("the assay binary starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.log().contains(&self.ready) {
            assert!(
                Instant::now() < deadline,
                "assay {:?} did not log {:?}:\n{}",
                self.args,
                self.ready,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for FleetProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
