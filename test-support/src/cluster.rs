//! One fleet on 127.0.0.1 for every fleet test: a JetStream `nats-server`, an artifact store (a
//! directory, or an S3-protocol server), and the coordinators and workers a test asks for, in
//! this process (through their `serve` functions) or as `assay` processes. Anything it started
//! stops when it drops; a server, a coordinator or a worker can be killed and started again in
//! the middle of a test. `messages` builds what tests send and expect.

use crate::servers::{
    ServerGuard, s3_env, s3_options, start_nats_cluster, start_s3, wait_for_port,
};
use assay_common::WorkerId;
use assay_common::fleet::Subjects;
use assay_common::service_config::{SandboxKind, ServiceConfig};
use assay_coordinator::CoordinatorConfig;
use assay_transport::nats::QueueTuning;
use assay_transport::store::ArtifactStore;
use assay_worker::service::{JobRunner, WorkerConfig, WorkerParts};
use async_nats::jetstream::consumer::{self, PullConsumer};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub mod messages;
mod process;
pub use process::{FleetProcess, ProcessSpec};
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

const BUCKET: &str = "assay-artifacts";

/// What a NATS server is started with beyond JetStream on its port.
#[derive(Clone, Debug, Default)]
pub struct NatsSetup {
    /// Lines added to its configuration (a smaller `max_payload`, TLS, an `include`).
    pub config: String,
    /// Its environment (the secrets its configuration names as `$VARIABLE`s).
    pub env: Vec<(String, String)>,
    /// Files written beside its configuration, by name (what it `include`s).
    pub files: Vec<(String, String)>,
}

/// The fleet's servers and the services started on them.
pub struct ClusterSandbox {
    /// The one NATS server, when the fleet is not on a cluster (restartable in place).
    nats: Option<Child>,
    nats_port: u16,
    /// A JetStream cluster's servers, when the fleet is on one.
    cluster: Vec<ServerGuard>,
    /// What the NATS server is started with beyond JetStream on its port.
    nats_setup: NatsSetup,
    /// The queue tuning every coordinator and worker started here gets.
    tuning: QueueTuning,
    s3: Option<ServerGuard>,
    dir: tempfile::TempDir,
}

impl ClusterSandbox {
    /// nats-server (JetStream) on a free port, and the store.
    pub fn start(store: StoreKind) -> Self {
        Self::start_with_nats(store, NatsSetup::default())
    }

    /// [`Self::start`], the NATS server set up with `nats` too.
    pub fn start_with_nats(store: StoreKind, nats: NatsSetup) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let s3 = (store == StoreKind::S3).then(|| start_s3(BUCKET));
        let mut sandbox = Self {
            nats: None,
            nats_port: crate::servers::free_port(),
            cluster: Vec::new(),
            nats_setup: nats,
            tuning: QueueTuning::default(),
            s3,
            dir,
        };
        sandbox.restart_nats();
        sandbox
    }

    /// A fleet on a JetStream cluster of `nodes` servers (every stream and the bucket on all of
    /// them), its store a directory; [`Self::kill_cluster_node`] plays the loss of one.
    pub fn clustered(nodes: usize) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let cluster = start_nats_cluster(nodes);
        Self {
            nats: None,
            nats_port: cluster[0].port,
            cluster,
            nats_setup: NatsSetup::default(),
            tuning: QueueTuning::default(),
            s3: None,
            dir,
        }
    }

    /// Stops server `node` of the cluster now.
    pub fn kill_cluster_node(&mut self, node: usize) {
        self.cluster[node].kill();
    }

    /// How many servers hold each stream and the bucket: the cluster's size, or 1.
    pub fn replicas(&self) -> usize {
        self.cluster.len().max(1)
    }

    /// Every coordinator and worker started from now on gets `tuning` (short ack waits, say).
    pub fn with_tuning(mut self, tuning: QueueTuning) -> Self {
        self.tuning = tuning;
        self
    }

    /// A fleet whose store is a directory.
    pub fn with_file_store() -> Self {
        Self::start(StoreKind::File)
    }

    /// The server's URL; on a cluster, every server's, the first one first, comma-separated.
    pub fn nats_url(&self) -> String {
        if self.cluster.is_empty() {
            return format!("nats://127.0.0.1:{}", self.nats_port);
        }
        self.cluster
            .iter()
            .map(|server| format!("nats://127.0.0.1:{}", server.port))
            .collect::<Vec<_>>()
            .join(",")
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
            None => format!("file://{}", self.path("store").display()),
        }
    }

    /// The store's directory, when it is one (not S3).
    pub fn store_path(&self) -> Option<PathBuf> {
        self.s3.is_none().then(|| self.path("store"))
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
    pub fn store(&self) -> Arc<dyn ArtifactStore> {
        Arc::new(
            assay_transport::store::open_store(&self.store_url(), &self.store_options())
                .expect("the sandbox's store opens"),
        )
    }

    /// What an `assay` service or CLI process needs to reach this fleet: the NATS URL, the
    /// store and, for S3, its `AWS_*` settings.
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env = self.s3_port().map(s3_env).unwrap_or_default();
        env.push(("ASSAY_NATS_URL".into(), self.nats_url()));
        env.push(("ASSAY_STORE".into(), self.store_url()));
        env
    }

    /// Stops the S3 server now (the store lost mid-run).
    pub fn kill_store(&mut self) {
        if let Some(s3) = &mut self.s3 {
            s3.kill();
        }
    }

    /// Stops the NATS server now (an outage); [`Self::restart_nats`] brings it back.
    pub fn kill_nats(&mut self) {
        for server in &mut self.cluster {
            server.kill();
        }
        if let Some(mut child) = self.nats.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the NATS server again on the same port and JetStream store, after
    /// [`Self::kill_nats`] (or at the start). Not on a cluster.
    pub fn restart_nats(&mut self) {
        assert!(self.cluster.is_empty(), "a cluster is not restarted");
        self.kill_nats();
        let file = self.path("nats.conf");
        let config = format!(
            "listen: \"127.0.0.1:{}\"\njetstream {{\n  store_dir: \"{}\"\n}}\n{}\n",
            self.nats_port,
            self.path("jetstream").display(),
            self.nats_setup.config
        );
        std::fs::write(&file, config).expect("write nats.conf");
        for (name, text) in &self.nats_setup.files {
            std::fs::write(self.path(name), text).expect("write a file of the NATS server's");
        }
        let child = Command::new("nats-server")
            .arg("-c")
            .arg(&file)
            .envs(self.nats_setup.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server on PATH");
        self.nats = Some(child);
        wait_for_port(self.nats_port, "nats-server");
    }

    pub async fn client(&self) -> async_nats::Client {
        let urls: Vec<String> = self.nats_url().split(',').map(str::to_owned).collect();
        async_nats::connect(urls)
            .await
            .expect("the sandbox's NATS server answers")
    }

    /// A service configuration for this fleet under `prefix`: process sandbox, one slot, no
    /// probe listener, `name`'s tree cache in the sandbox's directory.
    pub fn service_config(&self, prefix: &str, name: &str) -> ServiceConfig {
        let mut config = ServiceConfig::default();
        config.nats.url = self.nats_url();
        config.nats.replicas = self.replicas();
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
        config.tuning = self.tuning;
        self.coordinator_with(config)
    }

    pub fn coordinator_with(&self, config: CoordinatorConfig) -> InProcess {
        InProcess::spawn(move |stop| async move { assay_coordinator::serve(config, stop).await })
    }

    /// A worker's configuration under `prefix`, named `name`, its scratch in the sandbox.
    pub fn worker_config(&self, prefix: &str, name: &str) -> WorkerConfig {
        let mut config = WorkerConfig::new(self.service_config(prefix, name));
        config.worker_id = WorkerId(name.into());
        config.scratch_root = Some(self.path(&format!("{name}-scratch")));
        config.s3_options = self.store_options();
        config.tuning = self.tuning;
        config
    }

    /// A worker in this process that runs its jobs for real.
    pub fn worker(&self, config: WorkerConfig) -> InProcess {
        InProcess::spawn(move |stop| async move { assay_worker::serve(config, stop).await })
    }

    /// A worker in this process whose jobs `runner` answers.
    pub fn worker_with(&self, config: WorkerConfig, runner: Arc<dyn JobRunner>) -> InProcess {
        let parts = WorkerParts {
            runner,
            store: self.store(),
            metrics: Default::default(),
        };
        InProcess::spawn(move |stop| async move {
            assay_worker::service::serve_with(config, parts, stop).await
        })
    }

    /// `binary` (the `assay` executable, or a test binary playing a service) with `args`,
    /// this fleet's [`Self::env`], its probes on a free port and its stderr in `{name}.log`:
    /// add to it, then [`ProcessSpec::start`] it.
    pub fn process(&self, binary: &Path, name: &str, args: &[&str]) -> ProcessSpec {
        self.bare_process(binary, name, args).envs(self.env())
    }

    /// [`Self::process`] without the fleet's environment: its arguments say where the fleet is.
    pub fn bare_process(&self, binary: &Path, name: &str, args: &[&str]) -> ProcessSpec {
        ProcessSpec::new(binary, args, self.path(&format!("{name}.log")))
    }

    /// Waits until `prefix`'s fleet topology exists: the jobs stream and the workers'
    /// consumer, the results stream and the proofs bucket.
    pub async fn wait_for_topology(&self, client: &async_nats::Client, prefix: &str) {
        let js = async_nats::jetstream::new(client.clone());
        let subjects = Subjects::new(prefix);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(stream) = js.get_stream(subjects.jobs_stream()).await
                && stream
                    .get_consumer::<consumer::pull::Config>(&subjects.workers_consumer())
                    .await
                    .is_ok()
                && js.get_key_value(subjects.proofs_bucket()).await.is_ok()
                && js.get_stream(subjects.results_stream()).await.is_ok()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the fleet topology never appeared"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The workers' consumer of `prefix`'s jobs, as the server counts it now.
    pub async fn jobs_consumer_info(
        &self,
        client: &async_nats::Client,
        prefix: &str,
    ) -> consumer::Info {
        let js = async_nats::jetstream::new(client.clone());
        let subjects = Subjects::new(prefix);
        let mut consumer: PullConsumer = js
            .get_stream(subjects.jobs_stream())
            .await
            .expect("the jobs stream")
            .get_consumer(&subjects.workers_consumer())
            .await
            .expect("the workers' consumer");
        consumer.info().await.expect("the consumer's info").clone()
    }

    /// Waits until at least `n` of `prefix`'s jobs are delivered and not acknowledged.
    pub async fn wait_for_ack_pending(&self, client: &async_nats::Client, prefix: &str, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self
            .jobs_consumer_info(client, prefix)
            .await
            .num_ack_pending
            < n
        {
            assert!(Instant::now() < deadline, "no job was taken");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until at least `n` of `prefix`'s jobs wait in the queue, undelivered.
    pub async fn wait_for_pending(&self, client: &async_nats::Client, prefix: &str, n: u64) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.jobs_consumer_info(client, prefix).await.num_pending < n {
            assert!(Instant::now() < deadline, "jobs never reached the queue");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
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

/// How an in-process service ended other than cleanly.
#[derive(Debug, thiserror::Error)]
pub enum ServiceEnded {
    /// `serve` returned its own error.
    #[error("the service failed: {0}")]
    Failed(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Its task panicked or was aborted.
    #[error("the service's task did not finish: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// A coordinator or worker running in this process: [`InProcess::stop`] shuts it down
/// gracefully; dropped, it is aborted.
pub struct InProcess {
    handle: Option<tokio::task::JoinHandle<Result<(), ServiceEnded>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

/// What an in-process service waits on to stop.
pub type Shutdown = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

impl InProcess {
    /// Runs `serve(shutdown)` as a task; `shutdown` resolves when the service is stopped.
    pub fn spawn<F, Fut, E>(serve: F) -> Self
    where
        F: FnOnce(Shutdown) -> Fut,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let shutdown: Shutdown = Box::pin(async move {
            let _ = rx.await;
        });
        let served = serve(shutdown);
        Self {
            handle: Some(tokio::spawn(async move {
                served.await.map_err(|e| ServiceEnded::Failed(Box::new(e)))
            })),
            stop: Some(stop),
        }
    }

    /// Shuts the service down gracefully and waits for it.
    pub async fn stop(self) {
        let _ = self.ended().await;
    }

    /// Shuts the service down gracefully and says how it ended: its own error, or a panic.
    pub async fn ended(mut self) -> Result<(), ServiceEnded> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.handle.take() {
            Some(handle) => handle.await?,
            None => Ok(()),
        }
    }

    /// Kills the service at once, as a crash would: nothing of it runs on.
    pub async fn kill(mut self) {
        if let Some(handle) = self.handle.take() {
            handle.abort();
            let _ = handle.await;
        }
    }

    /// Whether the service has ended (an error or a panic in it included).
    pub fn is_finished(&self) -> bool {
        self.handle.as_ref().is_none_or(|h| h.is_finished())
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(handle) = &self.handle {
            handle.abort();
        }
    }
}
