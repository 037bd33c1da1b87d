//! Assay's coordinator: accepts proofs by request/reply, drives each through the engine's
//! `run_jobs` over a [`NatsJobQueue`](nats_queue::NatsJobQueue), applies every result once (a
//! KV create per job id), concludes with the same verdict code as embedded mode, and keeps each
//! proof's state in the fleet's proofs bucket (`ASSAY_PROOFS` under the default prefix) so a
//! restarted coordinator resumes it. [`serve`] runs it.
//!
//! This file holds the service's loop and the state its tasks share; each thing the loop does
//! is a module of its own: `intake` (submissions, resume), `lease` (the leader lease and the
//! fence), `proof` (one proof's run), `job_run` (one job submission's run), `results` (applying results), `cancel`, `halt`,
//! `progress` (events for the CLI) and `served` (results the cache answered, recorded in KV).
//! The bus side: `nats_queue` (the `JobQueue` over JetStream) and `admitter` (the admission
//! loop). The coordinator's clients: `client` (submit and follow a proof), `cluster_queue`
//! (the job submissions of `assay test` and `assay mutate`) and `fleet_halt` (the halt key).

pub mod admitter;
mod cancel;
pub mod client;
pub mod cluster_queue;
pub mod fleet_halt;
mod halt;
mod intake;
mod job_run;
pub mod lease;
pub mod nats_queue;
mod progress;
mod proof;
mod results;
mod served;

pub use proof::prepared_from;

use cancel::cancel_proof;
use halt::recheck_halt;
use intake::{accept, resume_unfinished};
use lease::Fence;
pub use lease::FenceError;
use results::apply_result;

use crate::admitter::Admitter;
use crate::fleet_halt::{HALT_KEY, HALT_RECHECK, is_halt_entry};
use crate::nats_queue::PublishGate;
use assay_common::ProofId;
use assay_common::fault;
use assay_common::fleet::Subjects;
use assay_common::job::JobResult;
use assay_common::service_config::{ConfigError, Role, ServiceConfig};
use assay_common::wire;
use assay_engine::result_cache::{RunContext, SigningKey};
use assay_transport::error_chain::error_chain;
use assay_transport::health::{self, Probes};
use assay_transport::metrics::Metrics;
use assay_transport::nats::{self, FleetError, QueueTuning};
use assay_transport::offload;
use assay_transport::store::{ArtifactStore, StoreError};
use async_nats::jetstream::{self, kv};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// Why the coordinator cannot start or lead. Not one type with the worker's `ServiceError`:
/// four arms are alike (configuration, NATS, store, probes), but only the coordinator signs
/// cache entries (`CacheKey`, an engine type the worker does not link) and leads
/// (`SetupTimedOut`), and only the worker starts Docker and prepares its directories.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The service's configuration (environment, flags) is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Connecting to NATS, or making its streams and buckets, failed.
    #[error(transparent)]
    Fleet(#[from] FleetError),
    /// The artifact store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The result cache's signing key could not be read, made or is too short.
    #[error(transparent)]
    CacheKey(#[from] assay_engine::result_cache::SigningKeyError),
    /// The health and metrics endpoint could not listen.
    #[error(transparent)]
    Probes(#[from] health::ListenError),
    /// A step of taking up the lead outlasted the fault policy's limit
    /// ([`fault::leader_setup_limit`]); the lead is given up at once.
    #[error(
        "taking up the lead: {step} did not finish within {limit_ms} ms of taking the lease (three quarters of lease_ttl_ms; a NATS server lost, or a stream electing its leader){last}; giving the lead up so another coordinator takes it"
    )]
    SetupTimedOut {
        /// The step that ran out of time, e.g. "creating the results consumer".
        step: &'static str,
        /// The limit it outlasted, in milliseconds.
        limit_ms: u128,
        /// How the last try failed, when it did before the deadline.
        last: String,
    },
}

/// What [`serve`] needs to run a coordinator.
#[derive(Clone, Debug)]
pub struct CoordinatorConfig {
    /// The validated settings: NATS, store, probes and each role's tables.
    pub service: ServiceConfig,
    /// Sizes and timings of the job queue's stream and consumer.
    pub tuning: QueueTuning,
    /// Extra options for an S3 artifact store, as key and value pairs.
    pub s3_options: Vec<(String, String)>,
}

impl CoordinatorConfig {
    /// A configuration with the default queue tuning and no S3 options.
    pub fn new(service: ServiceConfig) -> Self {
        Self {
            service,
            tuning: QueueTuning::default(),
            s3_options: Vec::new(),
        }
    }
}

/// A proof this coordinator is driving: where its applied results go, and its publish gate.
struct ActiveProof {
    results: mpsc::UnboundedSender<JobResult>,
    gate: PublishGate,
    /// Jobs in the plan, the mutation check's included: a result must name one of them (index
    /// below this, and that index's job id) before it may take a result key.
    job_count: u32,
    /// Indexes whose result this leadership is writing (`false`) or has written (`true`).
    claimed: HashMap<u32, bool>,
}

type Active = Arc<Mutex<HashMap<ProofId, ActiveProof>>>;

/// The coordinator's tasks: proofs being driven, submissions being accepted and cancels being
/// carried out. Shared, so a submission accepted off the main loop starts its proof here too;
/// all are aborted at shutdown.
type Tasks = Arc<Mutex<tokio::task::JoinSet<()>>>;

fn spawn_task(tasks: &Tasks, task: impl Future<Output = ()> + Send + 'static) {
    if let Ok(mut tasks) = tasks.lock() {
        tasks.spawn(task);
    }
}

#[derive(Clone)]
struct Shared {
    client: async_nats::Client,
    js: jetstream::Context,
    proofs: kv::Store,
    subjects: Subjects,
    store: Arc<dyn ArtifactStore>,
    max_jobs_per_proof: u32,
    /// How much of a stored submission, and of a stored result, is read at most.
    submission_cap: offload::ReadCap,
    result_cap: offload::ReadCap,
    active: Active,
    admitter: Admitter,
    metrics: Arc<Metrics>,
    /// The fleet-wide halt's reason while it is set.
    halt: Arc<Mutex<Option<String>>>,
    /// The result cache, when `[cache]` declares the workers' sandbox and a signing key.
    cache: Option<FleetCache>,
    /// This leadership's claim: every write to the proofs bucket goes through it.
    fence: Fence,
}

impl Shared {
    /// Takes `index` of `proof_id` for one result write, unless a write of it is under way
    /// or done (or the proof is not active: then it is in progress elsewhere, for all this
    /// knows).
    fn claim(&self, proof_id: &ProofId, index: u32) -> Claim {
        let Ok(mut active) = self.active.lock() else {
            return Claim::InProgress;
        };
        let Some(proof) = active.get_mut(proof_id) else {
            return Claim::InProgress;
        };
        match proof.claimed.get(&index) {
            Some(true) => Claim::Written,
            Some(false) => Claim::InProgress,
            None => {
                proof.claimed.insert(index, false);
                Claim::Taken
            }
        }
    }

    /// Marks `index` of `proof_id` recorded in KV.
    fn written(&self, proof_id: &ProofId, index: u32) {
        if let Ok(mut active) = self.active.lock()
            && let Some(proof) = active.get_mut(proof_id)
        {
            proof.claimed.insert(index, true);
        }
    }

    /// Gives `index` back after a write that did not happen.
    fn release(&self, proof_id: &ProofId, index: u32) {
        if let Ok(mut active) = self.active.lock()
            && let Some(active) = active.get_mut(proof_id)
        {
            active.claimed.remove(&index);
        }
    }
}

/// What a result's delivery may do about its job's index.
enum Claim {
    /// Write it: this delivery holds the index.
    Taken,
    /// Another delivery is writing it: leave this one to come back.
    InProgress,
    /// It is recorded: this one is a duplicate.
    Written,
}

#[derive(Clone)]
struct FleetCache {
    key: Arc<SigningKey>,
    context: RunContext,
}

/// The fleet's cache from `[cache]`, or why it is off.
fn fleet_cache(
    section: &assay_common::service_config::CacheSection,
) -> Result<Result<FleetCache, &'static str>, ServiceError> {
    let Some(sandbox) = &section.sandbox else {
        return Ok(Err(
            "no [cache] sandbox is declared, and a key needs the sandbox jobs run in",
        ));
    };
    if section.key_file.is_empty() {
        return Ok(Err(
            "no [cache] key_file (ASSAY_CACHE_KEY_FILE) to sign entries with",
        ));
    }
    let key = SigningKey::from_file(std::path::Path::new(&section.key_file))?;
    Ok(Ok(FleetCache {
        key: Arc::new(key),
        context: RunContext::declared(sandbox.clone(), &section.env, &section.interpreter),
    }))
}

/// Runs the coordinator until `shutdown`. It stands by until it holds the leader lease, leads
/// until `shutdown` or until it loses the lease, then stands by again. Proofs in flight stay in
/// the KV bucket and resume under the next leader, this one or another.
pub async fn serve(
    config: CoordinatorConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServiceError> {
    let service = &config.service;
    service.validate()?;
    let subjects = Subjects::new(&service.nats.subject_prefix);
    let store: Arc<dyn ArtifactStore> = Arc::new(assay_transport::store::open_store(
        &service.store.url,
        &config.s3_options,
    )?);
    let client = nats::connect(
        &service.nats,
        assay_common::nats_permissions::Role::Coordinator,
    )
    .await?;
    let js = jetstream::new(client.clone());
    let placement = nats::Placement::of(&service.nats);
    let proofs = nats::proofs_bucket(&js, &subjects, placement).await?;
    let metrics = Arc::new(Metrics::default());
    let cache = match fleet_cache(&service.cache)? {
        Ok(cache) => {
            tracing::info!(sandbox = ?cache.context.sandbox, "result cache on: entries signed by this coordinator, keyed by the declared [cache] sandbox");
            Some(cache)
        }
        Err(why) => {
            tracing::info!("result cache off: {why}");
            None
        }
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    if let Some(listen) = service.http_listen(Role::Coordinator) {
        let mut stop = stop_rx.clone();
        let probes = Probes {
            client: client.clone(),
            store: store.clone(),
            subjects: subjects.clone(),
        };
        health::spawn(&listen, probes, metrics.clone(), async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await?;
    }
    let holder = coordinator_name();
    let ttl = Duration::from_millis(service.coordinator.lease_ttl_ms);
    tracing::info!(holder, "coordinator started");
    tokio::pin!(shutdown);
    let outcome = loop {
        let fence = tokio::select! {
            () = &mut shutdown => break Ok(()),
            fence = Fence::acquire(js.clone(), proofs.clone(), &holder, ttl) => match fence {
                Ok(fence) => fence,
                Err(e) => {
                    tracing::warn!(error = %error_chain(&e), "failed to open a leadership epoch");
                    continue;
                }
            },
        };
        tracing::info!(
            epoch = fence.epoch(),
            "leading: this coordinator holds the lease"
        );
        // Every step of taking up the lead ends by this deadline, or the lead is given up.
        let setup = SetupDeadline::from_now(fault::leader_setup_limit(ttl));
        let jobs = setup
            .retried("creating the workers' consumer", || {
                nats::workers_consumer(&js, &subjects, &config.tuning, placement)
            })
            .await;
        let shared = Shared {
            client: client.clone(),
            js: js.clone(),
            proofs: proofs.clone(),
            subjects: subjects.clone(),
            store: store.clone(),
            max_jobs_per_proof: service.coordinator.max_jobs_per_proof,
            submission_cap: offload::ReadCap::submissions(service.coordinator.max_submission_bytes),
            result_cap: offload::ReadCap::results(service.coordinator.max_result_bytes),
            active: Arc::default(),
            admitter: match jobs {
                Ok(jobs) => Admitter::spawn(jobs, config.tuning.lookahead),
                Err(e) => {
                    step_aside(&fence, error_chain(&e)).await;
                    continue;
                }
            },
            metrics: metrics.clone(),
            halt: Arc::default(),
            cache: cache.clone(),
            fence,
        };
        match lead(&shared, &config, setup, &mut shutdown).await {
            Ok(Term::Stopped) => break Ok(()),
            Ok(Term::Deposed) => {}
            // A NATS server lost while taking up the lead, say: another coordinator, or this
            // one, leads again at once.
            Err(e) => step_aside(&shared.fence, error_chain(&e)).await,
        }
    };
    let _ = stop_tx.send(true);
    outcome
}

/// Gives the lead up after a failure to take it up, so it passes at once.
async fn step_aside(fence: &Fence, error: String) {
    tracing::warn!(error, "failed to take up the lead; giving it up");
    fence.release().await;
    tokio::time::sleep(fault::STEP_ASIDE_PAUSE).await;
}

/// When taking up the lead must be done: each step is bounded by it, and one that is not done
/// by then fails naming itself.
#[derive(Clone, Copy)]
struct SetupDeadline {
    at: tokio::time::Instant,
    limit: Duration,
}

impl SetupDeadline {
    fn from_now(limit: Duration) -> Self {
        Self {
            at: tokio::time::Instant::now() + limit,
            limit,
        }
    }

    /// Runs `work` once, failing when it is not done by the deadline.
    async fn step<T, E: Into<ServiceError>>(
        self,
        step: &'static str,
        work: impl Future<Output = Result<T, E>>,
    ) -> Result<T, ServiceError> {
        match tokio::time::timeout_at(self.at, work).await {
            Ok(outcome) => outcome.map_err(Into::into),
            Err(_) => Err(self.timed_out(step, None)),
        }
    }

    /// Runs a step that may be repeated (a JetStream request) until it succeeds, each try
    /// bounded by the fault policy's [`fault::LEADER_SETUP_TRY`]: a request sent while a
    /// stream elects its leader gets no answer, and the next one, once it has a leader, does.
    async fn retried<T, E, F>(
        self,
        step: &'static str,
        mut work: impl FnMut() -> F,
    ) -> Result<T, ServiceError>
    where
        E: Into<ServiceError>,
        F: Future<Output = Result<T, E>>,
    {
        let mut last: Option<String> = None;
        loop {
            let now = tokio::time::Instant::now();
            if now >= self.at {
                return Err(self.timed_out(step, last));
            }
            let until = self.at.min(now + fault::LEADER_SETUP_TRY);
            match tokio::time::timeout_at(until, work()).await {
                Ok(Ok(done)) => return Ok(done),
                Ok(Err(e)) => last = Some(error_chain(&e.into())),
                Err(_) => {
                    last = Some(format!(
                        "no answer within {} ms",
                        fault::LEADER_SETUP_TRY.as_millis()
                    ))
                }
            }
            tokio::time::sleep_until(
                self.at
                    .min(tokio::time::Instant::now() + fault::LEADER_SETUP_RETRY_PAUSE),
            )
            .await;
        }
    }

    fn timed_out(self, step: &'static str, last: Option<String>) -> ServiceError {
        ServiceError::SetupTimedOut {
            step,
            limit_ms: self.limit.as_millis(),
            last: last.map_or_else(String::new, |last| format!("; last try: {last}")),
        }
    }
}

/// A pull of results with the fault policy's heartbeat, so a pull lost with its consumer's
/// leader is noticed within two heartbeats.
async fn pull_results(
    consumer: &jetstream::consumer::PullConsumer,
) -> Result<jetstream::consumer::pull::Stream, FleetError> {
    consumer
        .stream()
        .heartbeat(fault::RESULTS_PULL_HEARTBEAT)
        .messages()
        .await
        .map_err(|e| FleetError::request("pull results", e))
}

/// How a leadership ended.
enum Term {
    Stopped,
    Deposed,
}

/// A name for this coordinator in the lease and in the evidence: its host and process, and a
/// count for the coordinators one process runs (tests do).
fn coordinator_name() -> String {
    static STARTED: AtomicU32 = AtomicU32::new(0);
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .unwrap_or_else(|| "coordinator".into());
    let count = STARTED.fetch_add(1, AtomicOrdering::Relaxed);
    format!("{host}-{}-{count}", std::process::id())
}

/// Leads until `shutdown` or the loss of the lease: resumes the unfinished proofs, then takes
/// submissions, cancels and results.
async fn lead(
    shared: &Shared,
    config: &CoordinatorConfig,
    deadline: SetupDeadline,
    shutdown: &mut (impl Future<Output = ()> + Unpin),
) -> Result<Term, ServiceError> {
    let subjects = &shared.subjects;
    // Renewed from the start; losing it ends this leadership. A setup that cannot finish in
    // time (a NATS server lost meanwhile) gives the lease up instead of holding it renewed.
    let kept = shared.fence.keep();
    tokio::pin!(kept);
    let tasks: Tasks = Arc::default();
    let setup = async {
        let results = deadline
            .retried("creating the results consumer", || {
                nats::coordinator_consumer(
                    &shared.js,
                    subjects,
                    &config.tuning,
                    nats::Placement::of(&config.service.nats),
                )
            })
            .await?;
        // With history: the halt's current value first, so a halt set while no coordinator
        // ran holds from the start.
        let halt = deadline
            .retried("watching the halt key", || async move {
                shared
                    .proofs
                    .watch_with_history(HALT_KEY)
                    .await
                    .map_err(|e| FleetError::request(format!("watch the halt key {HALT_KEY}"), e))
            })
            .await?;
        // Register unfinished proofs before applying results, so none is taken for a stray.
        deadline
            .step(
                "resuming the unfinished proofs",
                resume_unfinished(shared, &tasks),
            )
            .await?;
        let subscribe = |subject: String| async move {
            shared
                .client
                .queue_subscribe(subject.clone(), LEADER_QUEUE.into())
                .await
                .map_err(|e| FleetError::nats(format!("subscribe to {subject}"), e))
        };
        let submit = deadline
            .step("subscribing to submissions", subscribe(subjects.submit()))
            .await?;
        let cancel = deadline
            .step("subscribing to cancels", subscribe(subjects.cancel()))
            .await?;
        let pulled = deadline
            .retried("pulling results", || pull_results(&results))
            .await?;
        Ok::<_, ServiceError>((results, pulled, halt, submit, cancel))
    };
    let started = tokio::select! {
        () = &mut kept => Ok(None),
        started = setup => started.map(Some),
    };
    let (consumer, mut results, mut halt, mut submit, mut cancel) = match started {
        Ok(Some(parts)) => parts,
        outcome => {
            if let Ok(mut tasks) = tasks.lock() {
                tasks.abort_all();
            }
            return outcome.map(|_| Term::Deposed);
        }
    };
    // Results are recorded concurrently: each is one KV round trip, and applying them one at a
    // time would cap the fleet at one result per round trip. Order does not matter here (the
    // engine puts results in plan order; the KV create applies each job's result once).
    let mut applying = FuturesUnordered::new();
    // Finished tasks are collected now and then (the set is shared, so no arm awaits it).
    let mut reap = tokio::time::interval(Duration::from_secs(1));
    // The halt key is read now and then too, so neither a halt nor its end is missed when the
    // watch's consumer was disturbed.
    let mut halt_recheck = tokio::time::interval(HALT_RECHECK);
    let term = loop {
        tokio::select! {
            () = &mut *shutdown => break Term::Stopped,
            () = &mut kept => break Term::Deposed,
            // Accepting reads a stored submission from the store and cancelling writes KV:
            // either may be slow, so each runs as a task of its own and the loop goes on
            // applying results and taking requests. A proof is registered (in `accept`)
            // before any of its jobs is published, so none of its results can come first.
            Some(request) = submit.next() => {
                let (shared, spawner) = (shared.clone(), tasks.clone());
                spawn_task(&tasks, async move {
                    let reply = accept(&shared, &request, &spawner).await;
                    if let (Some(to), Ok(bytes)) = (request.reply, wire::encode("submit reply", &reply)) {
                        let _ = shared.client.publish(to, bytes.into()).await;
                    }
                });
            }
            Some(request) = cancel.next() => {
                let shared = shared.clone();
                spawn_task(&tasks, async move {
                    let reply = cancel_proof(&shared, &request.payload).await;
                    if let (Some(to), Ok(bytes)) = (request.reply, wire::encode("cancel reply", &reply)) {
                        let _ = shared.client.publish(to, bytes.into()).await;
                    }
                });
            }
            message = results.next(), if applying.len() < RESULTS_APPLIED_AT_ONCE => match message {
                Some(Ok(message)) => applying.push(apply_result(shared, message)),
                // A pull whose consumer lost its leader (a NATS server lost) is never answered:
                // missed heartbeats say so, and a fresh pull reaches the consumer's new leader
                // instead of waiting for the lost one to expire.
                failed => {
                    match failed {
                        Some(Err(e)) => tracing::warn!(error = %e, "failed to pull results; pulling again"),
                        _ => tracing::warn!("the pull of results ended; pulling again"),
                    }
                    match pull_results(&consumer).await {
                        Ok(pulled) => results = pulled,
                        Err(e) => {
                            tracing::warn!(error = %error_chain(&e), "failed to pull results again; trying next time");
                            tokio::time::sleep(fault::LEADER_SETUP_RETRY_PAUSE).await;
                        }
                    }
                }
            },
            Some(()) = applying.next(), if !applying.is_empty() => {}
            // A change of the halt key is a prompt to read it: what a watch delivers is not
            // taken for the halt's state, since its inbox may receive deliveries it never
            // asked for; an entry for another key does not even prompt.
            Some(entry) = halt.next() => match entry {
                Ok(entry) if !is_halt_entry(&shared.proofs, &entry) => {}
                Ok(_) => recheck_halt(shared).await,
                Err(e) => {
                    tracing::warn!(error = %e, "failed to read a change of the halt key");
                    recheck_halt(shared).await;
                }
            },
            _ = halt_recheck.tick() => recheck_halt(shared).await,
            _ = reap.tick() => {
                if let Ok(mut tasks) = tasks.lock() {
                    while tasks.try_join_next().is_some() {}
                }
            }
        }
    };
    // Results being recorded finish (each is one round trip), so none is redelivered for
    // nothing; a deposed leader's would be refused by the fence, and its successor gets them.
    if matches!(term, Term::Stopped) {
        while applying.next().await.is_some() {}
    }
    if let Ok(mut tasks) = tasks.lock() {
        tasks.abort_all();
    }
    if matches!(term, Term::Stopped) {
        shared.fence.release().await;
    }
    Ok(term)
}

/// The queue group submissions and cancels are taken in: a coordinator that has just stepped
/// down and one that has just taken over may both be subscribed for a moment, and a request
/// must reach one of them, not both.
const LEADER_QUEUE: &str = "assay-leader";

/// Results being recorded at once; beyond it the results stream waits (its consumer's ack
/// window is far larger).
const RESULTS_APPLIED_AT_ONCE: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_setup_step_past_the_deadline_names_itself_and_gives_no_jetstream_hint() {
        let deadline = SetupDeadline::from_now(Duration::from_millis(200));
        let stuck = std::future::pending::<Result<(), ServiceError>>();
        let started = tokio::time::Instant::now();
        let error = deadline
            .step("creating the results consumer", stuck)
            .await
            .expect_err("a step that never ends times out");
        assert!(started.elapsed() < Duration::from_secs(2));
        let text = error.to_string();
        assert!(
            text.contains("creating the results consumer did not finish within 200 ms"),
            "{text}"
        );
        assert!(!text.contains("JetStream"), "{text}");
    }

    #[tokio::test]
    async fn the_steps_of_taking_up_the_lead_share_one_deadline() {
        let deadline = SetupDeadline::from_now(Duration::from_millis(300));
        let step = |millis| async move {
            tokio::time::sleep(Duration::from_millis(millis)).await;
            Ok::<_, ServiceError>(millis)
        };
        assert_eq!(
            deadline
                .step("watching the halt key", step(200))
                .await
                .expect("inside the deadline"),
            200
        );
        // On its own inside the limit, but not in what the first step left.
        let error = deadline
            .step("resuming the unfinished proofs", step(200))
            .await
            .expect_err("past the shared deadline");
        assert!(
            matches!(
                error,
                ServiceError::SetupTimedOut {
                    step: "resuming the unfinished proofs",
                    limit_ms: 300,
                    ..
                }
            ),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_retried_step_is_tried_again_until_it_succeeds_inside_the_deadline() {
        let deadline = SetupDeadline::from_now(Duration::from_secs(4));
        let tries = std::sync::atomic::AtomicU32::new(0);
        let done = deadline
            .retried("creating the results consumer", || async {
                match tries.fetch_add(1, AtomicOrdering::Relaxed) {
                    // A request the electing stream never answers, then one it refuses.
                    0 => std::future::pending().await,
                    1 => Err(FleetError::nats("create consumer", "no responders")),
                    n => Ok(n),
                }
            })
            .await
            .expect("the third try succeeds");
        assert_eq!(done, 2);
    }

    #[tokio::test]
    async fn a_retried_step_that_never_succeeds_says_how_its_last_try_failed() {
        let deadline = SetupDeadline::from_now(Duration::from_millis(600));
        let error = deadline
            .retried("watching the halt key", || async {
                Err::<(), _>(FleetError::nats(
                    "watch the halt key",
                    "no stream found for given subject",
                ))
            })
            .await
            .expect_err("never succeeds");
        let text = error.to_string();
        assert!(
            text.contains("watching the halt key did not finish within 600 ms"),
            "{text}"
        );
        assert!(
            text.contains("last try: failed to watch the halt key: no stream found"),
            "{text}"
        );
    }

    #[test]
    fn a_request_that_timed_out_is_not_blamed_on_a_missing_jetstream() {
        use async_nats::jetstream::stream::{ConsumerError, ConsumerErrorKind};
        let timed_out = FleetError::request(
            "create consumer assay-coordinator",
            ConsumerError::new(ConsumerErrorKind::TimedOut),
        );
        let text = timed_out.to_string();
        assert!(
            text.contains("create consumer assay-coordinator: no NATS server answered in time"),
            "{text}"
        );
        assert!(!text.contains("nats-server -js"), "{text}");
        let refused = FleetError::request(
            "create consumer assay-coordinator",
            ConsumerError::new(ConsumerErrorKind::Request),
        );
        assert!(refused.to_string().contains("nats-server -js"), "{refused}");
    }
}
