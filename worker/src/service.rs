//! The worker service: pulls jobs from the shared JetStream consumer, runs up to `slots` at once
//! with progress acks while they run, publishes each result, and only then acknowledges the job.
//! A job that reaches the delivery cap (the fault policy's, `assay_common::fault`) is answered
//! in the infrastructure lane without running.
//! On shutdown it stops pulling, gives running jobs the grace period, then hands back (NAKs)
//! the ones still running so another worker takes them at once.

use crate::dependency_cache::DependencyCache;
use crate::execute::run_job;
use crate::job_context::JobContext;
use crate::sandbox::docker::{DockerConfig, DockerSetupError};
use crate::sandbox::{self, Sandbox};
use crate::scratch_life::ScratchLife;
use assay_common::fault::{self, InfraCause};
use assay_common::fleet::Subjects;
use assay_common::job::{JobResult, JobSpec};
use assay_common::service_config::{ConfigError, Role, ServiceConfig};
use assay_common::wire;
use assay_common::{JobId, WorkerId};
use assay_transport::error_chain::error_chain;
use assay_transport::health::{self, Probes};
use assay_transport::metrics::Metrics;
use assay_transport::nats::{self, FleetError, QueueTuning};
use assay_transport::offload::{self, OffloadError};
use assay_transport::store::{ArtifactStore, StoreError, open_store};
use assay_transport::store_tree::StoreTreeSource;
use assay_transport::trace_context;
use async_nats::jetstream::{self, AckKind};
use async_trait::async_trait;
use futures::StreamExt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tracing::Instrument;

/// Why the worker cannot start. Not one type with the coordinator's `ServiceError`, which
/// says why: each has arms the other never meets.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The worker's configuration (environment, flags) is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Connecting to NATS, or opening the fleet's streams, failed.
    #[error(transparent)]
    Fleet(#[from] FleetError),
    /// The artifact store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The Docker sandbox could not be set up.
    #[error(transparent)]
    Docker(#[from] DockerSetupError),
    /// The scratch directory could not be made or locked.
    #[error(transparent)]
    Scratch(#[from] crate::scratch_life::ScratchError),
    /// The health and metrics endpoint could not listen.
    #[error(transparent)]
    Probes(#[from] health::ListenError),
}

/// Why a job's result did not reach the results stream; the job is handed back.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The result could not be encoded, or its offloaded body stored.
    #[error("failed to encode the result of job {job}")]
    Encode {
        /// The job whose result it is.
        job: JobId,
        /// The underlying error.
        #[source]
        source: OffloadError,
    },
    /// JetStream did not accept the result.
    #[error("failed to publish the result of job {job} on {subject}")]
    Publish {
        /// The job whose result it is.
        job: JobId,
        /// The subject it was published on.
        subject: String,
        /// The underlying error.
        #[source]
        source: jetstream::context::PublishError,
    },
}

/// The directory of `worker.tree_cache_dir` that holds the unpacked dependency archives.
pub const DEPENDENCY_CACHE: &str = "dependencies";

/// Everything a worker runs with; `service` is the validated file/env/flags layering.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// The validated settings: NATS, store, probes and each role's tables.
    pub service: ServiceConfig,
    /// Sizes and timings of the job queue's stream and consumer.
    pub tuning: QueueTuning,
    /// This worker's id, in its results and its containers' labels.
    pub worker_id: WorkerId,
    /// Parent of job scratch directories [default: the system temp dir].
    pub scratch_root: Option<PathBuf>,
    /// Variable names passed from the worker's environment to every job.
    pub pass_env: Vec<String>,
    /// S3 options over the `AWS_*` environment (tests point at a local server this way).
    pub s3_options: Vec<(String, String)>,
}

impl WorkerConfig {
    /// A configuration with default tuning and a worker id of the host name and process id.
    pub fn new(service: ServiceConfig) -> Self {
        Self {
            service,
            tuning: QueueTuning::default(),
            worker_id: default_worker_id(),
            scratch_root: None,
            pass_env: Vec::new(),
            s3_options: Vec::new(),
        }
    }
}

/// `{hostname}-{pid}`: unique across a fleet, readable in evidence.
pub fn default_worker_id() -> WorkerId {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".into());
    WorkerId(format!("{host}-{}", std::process::id()))
}

/// Masks from every confined job what is the worker's own: other jobs' directories, the tree
/// cache, a local store, and each credential file. A job's own directories are bound back.
fn hide_own_paths(service: &assay_common::service_config::ServiceConfig, scratch_root: &Path) {
    use crate::sandbox::confine::hide_from_guests;
    let nats = &service.nats;
    let files = [
        &nats.credentials_file,
        &nats.nkey_seed_file,
        &nats.password_file,
        &nats.token_file,
        &nats.tls_key_file,
        &service.cache.key_file,
        &service.worker.tree_cache_dir,
    ];
    for path in files.into_iter().filter(|p| !p.is_empty()) {
        hide_from_guests(Path::new(path));
    }
    if let Some(root) = service.store.url.strip_prefix("file://") {
        hide_from_guests(Path::new(root));
    }
    hide_from_guests(scratch_root);
    if service.worker.sandbox == assay_common::service_config::SandboxKind::Process
        && let Err(why) = crate::sandbox::confine::confiner()
    {
        tracing::warn!(%why, "jobs run unconfined in the process sandbox: they can reach this host's files and network; the fleet's cache stores none of their results");
    }
}

/// The sandbox the configuration selects, built the way embedded mode builds it.
pub async fn sandbox_for(
    worker: &assay_common::service_config::WorkerSection,
    worker_id: &WorkerId,
    metrics: Arc<Metrics>,
) -> Result<Arc<dyn Sandbox>, ServiceError> {
    let docker = DockerConfig {
        image: worker.image.clone(),
        memory_mb: worker.memory_mb,
        cpus: worker.cpus,
        pids: i64::try_from(worker.pids).unwrap_or(i64::MAX),
        network_default: false,
    };
    let slots = worker.slots as usize;
    Ok(sandbox::open(
        worker.sandbox,
        &docker,
        worker_id.as_str(),
        Some(metrics),
        slots,
    )
    .await?)
}

/// What a worker does with a job it pulled: [`run_job`] in a sandbox, or (in the dispatch
/// benchmark) nothing at all, so the queue's own cost can be measured.
#[async_trait]
pub trait JobRunner: Send + Sync {
    /// Runs the job and returns its result; failures are results too, never errors.
    async fn run(&self, spec: &JobSpec) -> JobResult;
}

#[async_trait]
impl JobRunner for JobContext {
    async fn run(&self, spec: &JobSpec) -> JobResult {
        run_job(spec, self).await
    }
}

/// Runs the worker until `shutdown` resolves; then takes no new job, lets running ones finish
/// within `worker.shutdown_grace_secs` and hands back the rest.
pub async fn serve(
    config: WorkerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServiceError> {
    let service = &config.service;
    service.validate()?;
    // Before any job runs: no process of the worker's user reads its credentials from /proc.
    crate::sandbox::process::harden_worker();
    let metrics = Arc::new(Metrics::default());
    let sandbox = sandbox_for(&service.worker, &config.worker_id, metrics.clone()).await?;
    let store = Arc::new(open_store(&service.store.url, &config.s3_options)?);
    let scratch_root = config
        .scratch_root
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("assay-worker"));
    // Whatever a worker killed on this root left (SIGKILL, a crash) goes before any job runs.
    let (life, swept) = ScratchLife::begin(&scratch_root)?;
    if !swept.lives.is_empty() {
        tracing::info!(root = %scratch_root.display(), lives = ?swept.lives, "removed the scratch of workers that ended without cleaning up");
    }
    for (name, why) in &swept.failed {
        tracing::warn!(root = %scratch_root.display(), %name, %why, "could not remove a dead worker's scratch");
    }
    hide_own_paths(service, &scratch_root);
    let limits = assay_transport::archive::ArchiveLimits {
        max_bytes: service.worker.tree_max_bytes,
        max_entries: service.worker.tree_max_entries,
    };
    let ctx = JobContext {
        worker_id: config.worker_id.clone(),
        sandbox,
        trees: Arc::new(
            StoreTreeSource::new(store.clone(), &service.worker.tree_cache_dir)
                .with_metrics(metrics.clone())
                .with_limits(limits),
        ),
        store: store.clone(),
        scratch_root: life.dir().to_owned(),
        pass_env: config.pass_env.clone(),
        output_cap_bytes: service.worker.output_cap_bytes,
        // Beside the trees, under the same mask (see `hide_own_paths`).
        dependencies: Some(Arc::new(DependencyCache::new(
            Path::new(&service.worker.tree_cache_dir).join(DEPENDENCY_CACHE),
            limits,
        ))),
    };
    let parts = WorkerParts {
        runner: Arc::new(ctx),
        store,
        metrics,
    };
    // The store's client holds its credentials now, and the configuration is read: a job has
    // no business finding them in /proc/<worker>/environ (variables passed to jobs excepted).
    let passed = config.pass_env.clone();
    match crate::secrets::scrub_environment(|name| {
        crate::secrets::is_secret_name(name) && !passed.iter().any(|p| p == name)
    }) {
        Ok(names) if !names.is_empty() => {
            tracing::info!(names = ?names, "secrets removed from the worker's environment")
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(error = %e, "could not remove secrets from the worker's environment")
        }
    }
    let served = serve_validated(config, parts, shutdown).await;
    // Its jobs are over (finished or handed back): this life's scratch goes with it.
    drop(life);
    served
}

/// What [`serve_with`] runs jobs with: the runner, the store its probes check, and the metrics
/// its `/metrics` renders (shared with the sandbox and the tree cache that record into them).
pub struct WorkerParts {
    /// What runs each pulled job.
    pub runner: Arc<dyn JobRunner>,
    /// The artifact store the readiness probe checks.
    pub store: Arc<dyn ArtifactStore>,
    /// The counters `/metrics` renders.
    pub metrics: Arc<Metrics>,
}

/// [`serve`] with the jobs run by `parts.runner`.
pub async fn serve_with(
    config: WorkerConfig,
    parts: WorkerParts,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServiceError> {
    config.service.validate()?;
    serve_validated(config, parts, shutdown).await
}

async fn serve_validated(
    config: WorkerConfig,
    parts: WorkerParts,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServiceError> {
    let service = &config.service;
    let WorkerParts {
        runner,
        store,
        metrics,
    } = parts;
    let subjects = Subjects::new(&service.nats.subject_prefix);
    let client = nats::connect(&service.nats, assay_common::nats_permissions::Role::Worker).await?;
    let js = jetstream::new(client.clone());
    // A result bigger than this goes through the store (see `offload`).
    let result_limit = offload::client_limit(&client);
    nats::results_stream(
        &js,
        &subjects,
        &config.tuning,
        nats::Placement::of(&service.nats),
    )
    .await?;
    let consumer = nats::workers_consumer(
        &js,
        &subjects,
        &config.tuning,
        nats::Placement::of(&service.nats),
    )
    .await?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    if let Some(listen) = service.http_listen(Role::Worker) {
        let mut stop = stop_rx.clone();
        health::spawn(
            &listen,
            Probes {
                client: client.clone(),
                store: store.clone(),
                subjects: subjects.clone(),
            },
            metrics.clone(),
            async move {
                let _ = stop.wait_for(|s| *s).await;
            },
        )
        .await?;
    }
    tracing::info!(worker_id = %config.worker_id, slots = service.worker.slots, "worker started");
    let slots = Arc::new(Semaphore::new(service.worker.slots as usize));
    let (hand_back_tx, hand_back) = tokio::sync::watch::channel(false);
    let mut running = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        while running.try_join_next().is_some() {}
        let permit = tokio::select! {
            () = &mut shutdown => break,
            permit = slots.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let fetched = tokio::select! {
            () = &mut shutdown => break,
            batch = consumer.batch().max_messages(1).expires(Duration::from_secs(5)).messages() => batch,
        };
        let mut batch = match fetched {
            Ok(batch) => batch,
            Err(e) => {
                tracing::warn!(error = %e, "failed to fetch jobs; retrying");
                tokio::time::sleep(fault::FLEET_RETRY_PAUSE).await;
                continue;
            }
        };
        let message = tokio::select! {
            () = &mut shutdown => break,
            message = batch.next() => message,
        };
        match message {
            None => {}
            Some(Err(e)) => tracing::debug!(error = %e, "empty or failed pull"),
            Some(Ok(message)) => {
                let job = JobRun {
                    js: js.clone(),
                    subjects: subjects.clone(),
                    tuning: config.tuning,
                    worker_id: config.worker_id.clone(),
                    runner: runner.clone(),
                    metrics: metrics.clone(),
                    hand_back: hand_back.clone(),
                    store: store.clone(),
                    result_limit,
                };
                running.spawn(async move {
                    job.handle(message).await;
                    drop(permit);
                });
            }
        }
    }
    let grace = Duration::from_secs(service.worker.shutdown_grace_secs);
    tracing::info!(
        running = running.len(),
        grace_secs = grace.as_secs(),
        "worker stopping; finishing running jobs"
    );
    let finished = async { while running.join_next().await.is_some() {} };
    if tokio::time::timeout(grace, finished).await.is_err() {
        tracing::warn!(
            running = running.len(),
            "shutdown grace is over; handing running jobs back"
        );
        let _ = hand_back_tx.send(true);
        while running.join_next().await.is_some() {}
    }
    // Hand-backs are plain publishes: make sure they left before the process does.
    if let Err(e) = client.flush().await {
        tracing::warn!(error = %e, "failed to flush the last acknowledgements");
    }
    let _ = stop_tx.send(true);
    Ok(())
}

struct JobRun {
    js: jetstream::Context,
    subjects: Subjects,
    tuning: QueueTuning,
    worker_id: WorkerId,
    runner: Arc<dyn JobRunner>,
    metrics: Arc<Metrics>,
    /// Turns true when the shutdown grace is over: stop the job and hand it back.
    hand_back: tokio::sync::watch::Receiver<bool>,
    /// Where a result too big for one message goes.
    store: Arc<dyn ArtifactStore>,
    result_limit: usize,
}

impl JobRun {
    async fn handle(self, message: jetstream::Message) {
        let delivered = message.info().map(|i| i.delivered).unwrap_or(1);
        let spec: JobSpec = match wire::decode("job", &message.payload) {
            Ok(spec) => spec,
            Err(e) => {
                // Redelivering bytes this build cannot read would only loop; the coordinator
                // that sent them sees no result and reports the proof as stuck.
                tracing::error!(subject = %message.subject, error = %e, "refusing a job this worker cannot read");
                let _ = message.ack_with(AckKind::Term).await;
                return;
            }
        };
        // The delivery continues the trace of the proof that published the job.
        let span = tracing::info_span!("job delivery", proof_id = %spec.proof_id, job_id = %spec.job_id, worker_id = %self.worker_id, delivered);
        trace_context::set_parent(&span, message.headers.as_ref());
        if delivered > 1 {
            self.metrics.redeliveries.fetch_add(1, Ordering::Relaxed);
        }
        async {
            let result = if delivered > self.tuning.max_deliver {
                tracing::warn!("delivery cap reached; recording the job in the infrastructure lane");
                JobResult::infrastructure(
                    &spec,
                    self.worker_id.clone(),
                    InfraCause::WorkerLost,
                    format!(
                        "job {} was delivered {} times without a result (delivery cap {}): the workers running it died or lost their connection",
                        spec.job_id,
                        delivered - 1,
                        self.tuning.max_deliver
                    ),
                )
            } else {
                let _in_flight = self.metrics.in_flight();
                let run = self.runner.run(&spec);
                tokio::pin!(run);
                // The first progress ack is one period away. (Consuming an interval's
                // immediate first tick instead costs up to a millisecond of timer rounding per
                // job, a third of a no-op job's dispatch time.)
                let period = self.tuning.heartbeat();
                let mut heartbeat =
                    tokio::time::interval_at(tokio::time::Instant::now() + period, period);
                let mut hand_back = self.hand_back.clone();
                let finished = loop {
                    tokio::select! {
                        result = &mut run => break Some(result),
                        true = async { hand_back.wait_for(|h| *h).await.is_ok() } => break None,
                        _ = heartbeat.tick() => {
                            if let Err(e) = message.ack_with(AckKind::Progress).await {
                                tracing::warn!(error = %e, "failed to send a progress ack");
                            }
                        }
                    }
                };
                let Some(result) = finished else {
                    // Dropping the run stops its sandbox; the job goes to another worker now
                    // rather than after ack_wait.
                    tracing::warn!("handing a running job back at shutdown");
                    if let Err(e) = message.ack_with(AckKind::Nak(None)).await {
                        tracing::warn!(error = %e, "failed to hand a job back; it is redelivered after ack_wait");
                    }
                    return;
                };
                result
            };
            self.metrics.job_finished(spec.kind, &result);
            match self.publish_until_stored(&spec, &result, &message).await {
                Ok(()) => {
                    // The result is stored before this ack, and results apply once per job id:
                    // a lost ack only means a redelivery whose second result is dropped, so no
                    // round trip waits for the server to confirm it.
                    if let Err(e) = message.ack().await {
                        tracing::warn!(error = %e, "failed to acknowledge a finished job; it may run again and its second result will be dropped");
                    }
                }
                Err(e) => {
                    tracing::error!(error = %error_chain(&e), "failed to publish a result; handing the job back");
                    let _ = message.ack_with(AckKind::Nak(None)).await;
                }
            }
        }
        .instrument(span)
        .await;
    }

    /// Publishes `result`, and while the stream cannot take it (a NATS server lost, its
    /// stream electing a new leader) tries again as the fault policy says for
    /// [`InfraCause::BusUnavailable`], holding the job with progress acks. Handing the job
    /// back at once would spend one delivery per attempt, and a job past its delivery cap
    /// leaves the queue with no result. The result's message id makes a second copy a
    /// duplicate the server drops. Gives up when the policy does, or at shutdown.
    async fn publish_until_stored(
        &self,
        spec: &JobSpec,
        result: &JobResult,
        message: &jetstream::Message,
    ) -> Result<(), PublishError> {
        let retry = InfraCause::BusUnavailable.retry();
        let started = tokio::time::Instant::now();
        let mut next = 2;
        loop {
            let error = match self.publish(spec, result).await {
                Ok(()) => return Ok(()),
                Err(error) => error,
            };
            let pause = match retry.pause_before(next, started.elapsed()) {
                Some(pause) if !*self.hand_back.borrow() => pause,
                _ => return Err(error),
            };
            tracing::warn!(error = %error_chain(&error), pause_ms = pause.as_millis() as u64, "failed to publish a result; trying again");
            if let Err(e) = message.ack_with(AckKind::Progress).await {
                tracing::debug!(error = %e, "failed to send a progress ack while publishing");
            }
            tokio::time::sleep(pause).await;
            next += 1;
        }
    }

    async fn publish(&self, spec: &JobSpec, result: &JobResult) -> Result<(), PublishError> {
        let payload = offload::encode_result(
            self.store.as_ref(),
            &spec.proof_id,
            result,
            self.result_limit,
        )
        .await
        .map_err(|source| PublishError::Encode {
            job: spec.job_id.clone(),
            source,
        })?;
        let mut headers = async_nats::HeaderMap::new();
        // The server drops a second result for the same job inside its duplicate window.
        headers.insert("Nats-Msg-Id", spec.job_id.as_str());
        trace_context::inject(&mut headers);
        let subject = self.subjects.results(&spec.proof_id);
        let failed = |source| PublishError::Publish {
            job: spec.job_id.clone(),
            subject: subject.clone(),
            source,
        };
        self.js
            .publish_with_headers(subject.clone(), headers, payload.into())
            .await
            .map_err(failed)?
            .await
            .map_err(failed)?;
        Ok(())
    }
}
