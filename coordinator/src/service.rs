//! The coordinator service: accepts proofs by request/reply, drives each through the engine's
//! `run_jobs` over a [`NatsJobQueue`], applies every result once (a KV create per job id),
//! concludes with the same verdict code as embedded mode, and keeps each proof's state in the
//! fleet's proofs bucket (`ASSAY_PROOFS` under the default prefix) so a restarted coordinator
//! resumes it.

use crate::admitter::Admitter;
use crate::cache::{CacheHit, CacheMode, CachingQueue, ResultCache, RunContext, SigningKey};
use crate::engine::{self, PreparedProof, ProgressSink, ProofEvent, ProofRequest};
use crate::nats_queue::{NatsJobQueue, ProofStores, PublishGate};
use crate::source::{CandidateSpec, Change, ChangedFile, Revision};
use crate::suite::cluster::{HALT_KEY, HALT_RECHECK, is_halt_entry, read_halt};
use assay_common::fleet::{
    CancelReply, CancelRequest, ChangedFileWire, ProgressEvent, ProofRecord, ProofStatus,
    ProofSubmission, ResultMessage, RevisionWire, Subjects, SubmitReply, SubmitRequest,
    evidence_key, keys,
};
use assay_common::job::JobResult;
use assay_common::service_config::{ConfigError, Role, ServiceConfig};
use assay_common::wire;
use assay_common::{JobId, ProofId};
use assay_transport::error_chain::error_chain;
use assay_transport::health::{self, Probes};
use assay_transport::metrics::Metrics;
use assay_transport::nats::{self, FleetError, QueueTuning};
use assay_transport::offload;
use assay_transport::queue::{JobQueue, QueueError};
use assay_transport::store::{ArtifactStore, StoreError};
use assay_transport::trace_context;
use async_nats::jetstream::{self, kv};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;
use tracing::Instrument;

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Fleet(#[from] FleetError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    CacheKey(#[from] crate::cache::SigningKeyError),
    #[error("failed to serve probes on {listen}")]
    Http {
        listen: String,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Clone, Debug)]
pub struct CoordinatorConfig {
    pub service: ServiceConfig,
    pub tuning: QueueTuning,
    pub s3_options: Vec<(String, String)>,
}

impl CoordinatorConfig {
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

/// Runs the coordinator until `shutdown`. Proofs in flight stay in the KV bucket and resume on
/// the next start.
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
    let jobs = nats::workers_consumer(&js, &subjects, &config.tuning).await?;
    let results = nats::coordinator_consumer(&js, &subjects, &config.tuning).await?;
    let proofs = nats::proofs_bucket(&js, &subjects).await?;
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
    let shared = Shared {
        client: client.clone(),
        js,
        proofs,
        subjects: subjects.clone(),
        store,
        max_jobs_per_proof: service.coordinator.max_jobs_per_proof,
        submission_cap: offload::ReadCap::submissions(service.coordinator.max_submission_bytes),
        result_cap: offload::ReadCap::results(service.coordinator.max_result_bytes),
        active: Arc::default(),
        admitter: Admitter::spawn(jobs, config.tuning.lookahead),
        metrics: metrics.clone(),
        halt: Arc::default(),
        cache,
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    if let Some(listen) = service.http_listen(Role::Coordinator) {
        let mut stop = stop_rx.clone();
        let probes = Probes {
            client: client.clone(),
            store: shared.store.clone(),
            subjects: subjects.clone(),
        };
        health::spawn(&listen, probes, metrics, async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await
        .map_err(|source| ServiceError::Http { listen, source })?;
    }
    // With history: the halt's current value first, so a halt set while no coordinator ran
    // holds from the start.
    let mut halt = shared
        .proofs
        .watch_with_history(HALT_KEY)
        .await
        .map_err(|e| FleetError::jetstream(format!("watch the halt key {HALT_KEY}"), e))?;
    let tasks: Tasks = Arc::default();
    // Register unfinished proofs before applying results, so none is taken for a stray.
    resume_unfinished(&shared, &tasks).await?;
    let submit = client
        .subscribe(subjects.submit())
        .await
        .map_err(|e| FleetError::jetstream(format!("subscribe to {}", subjects.submit()), e))?;
    let cancel = client
        .subscribe(subjects.cancel())
        .await
        .map_err(|e| FleetError::jetstream(format!("subscribe to {}", subjects.cancel()), e))?;
    let mut results = results
        .messages()
        .await
        .map_err(|e| FleetError::jetstream("pull results", e))?;
    tracing::info!("coordinator started");
    tokio::pin!(shutdown);
    let mut submit = submit;
    let mut cancel = cancel;
    // Results are recorded concurrently: each is one KV round trip, and applying them one at a
    // time would cap the fleet at one result per round trip. Order does not matter here (the
    // engine puts results in plan order; the KV create applies each job's result once).
    let mut applying = FuturesUnordered::new();
    // Finished tasks are collected now and then (the set is shared, so no arm awaits it).
    let mut reap = tokio::time::interval(Duration::from_secs(1));
    // The halt key is read now and then too, so neither a halt nor its end is missed when the
    // watch's consumer was disturbed.
    let mut halt_recheck = tokio::time::interval(HALT_RECHECK);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
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
            Some(message) = results.next(), if applying.len() < RESULTS_APPLIED_AT_ONCE => match message {
                Ok(message) => applying.push(apply_result(&shared, message)),
                Err(e) => tracing::warn!(error = %e, "failed to pull a result"),
            },
            Some(()) = applying.next(), if !applying.is_empty() => {}
            // A change of the halt key is a prompt to read it: what a watch delivers is not
            // taken for the halt's state, since its inbox may receive deliveries it never
            // asked for; an entry for another key does not even prompt.
            Some(entry) = halt.next() => match entry {
                Ok(entry) if !is_halt_entry(&shared.proofs, &entry) => {}
                Ok(_) => recheck_halt(&shared).await,
                Err(e) => {
                    tracing::warn!(error = %e, "failed to read a change of the halt key");
                    recheck_halt(&shared).await;
                }
            },
            _ = halt_recheck.tick() => recheck_halt(&shared).await,
            _ = reap.tick() => {
                if let Ok(mut tasks) = tasks.lock() {
                    while tasks.try_join_next().is_some() {}
                }
            }
        }
    }
    // Results being recorded finish (each is one round trip), so none is redelivered for nothing.
    while applying.next().await.is_some() {}
    if let Ok(mut tasks) = tasks.lock() {
        tasks.abort_all();
    }
    let _ = stop_tx.send(true);
    Ok(())
}

/// Results being recorded at once; beyond it the results stream waits (its consumer's ack
/// window is far larger).
const RESULTS_APPLIED_AT_ONCE: usize = 64;

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

async fn accept(shared: &Shared, request: &async_nats::Message, tasks: &Tasks) -> SubmitReply {
    let submit: SubmitRequest = match wire::decode("submit request", &request.payload) {
        Ok(request) => request,
        Err(e) => {
            tracing::warn!(error = %e, "refusing a submission");
            return SubmitReply::Refused {
                message: e.to_string(),
            };
        }
    };
    let (submission, stored) = match submit {
        SubmitRequest::Inline(submission) => (*submission, None),
        SubmitRequest::Stored {
            proof_id,
            submission,
        } => match stored_submission(shared, &submission).await {
            Ok(full) if full.proof_id == proof_id => (full, Some(submission)),
            Ok(full) => {
                return SubmitReply::Refused {
                    message: format!(
                        "{} holds proof {}, not {proof_id}",
                        submission.key, full.proof_id
                    ),
                };
            }
            Err(e) => {
                return SubmitReply::Refused {
                    message: error_chain(&e),
                };
            }
        },
    };
    if let Err(e) = check_submission(&submission, stored.as_ref()) {
        tracing::warn!(proof_id = %submission.proof_id, error = %e, "refusing a submission");
        return SubmitReply::Refused {
            message: e.to_string(),
        };
    }
    let proof_id = submission.proof_id.clone();
    let job_count = submission.jobs.len() as u32;
    let mutation_job_count = submission
        .mutation
        .as_ref()
        .filter(|m| !m.plan.mutants.is_empty())
        .map_or(0, |m| {
            u32::try_from(m.plan.mutants.len())
                .unwrap_or(u32::MAX)
                .saturating_add(1)
        });
    // A record names a stored submission rather than repeat it: a KV value has the same limit.
    let kept = match stored {
        Some(_) => ProofSubmission {
            jobs: Vec::new(),
            mutation: None,
            ..submission
        },
        None => submission,
    };
    let record = ProofRecord {
        submission: kept,
        stored,
        job_count,
        mutation_job_count,
        status: ProofStatus::Running,
        submitted_at: now_secs(),
    };
    let bytes = match wire::encode("proof record", &record) {
        Ok(bytes) => bytes,
        Err(e) => {
            return SubmitReply::Refused {
                message: e.to_string(),
            };
        }
    };
    if let Err(e) = shared
        .proofs
        .create(keys::record(&proof_id), bytes.into())
        .await
    {
        return SubmitReply::Refused {
            message: format!("failed to record proof {proof_id}: {e}"),
        };
    }
    // The proof's span continues the submitting CLI's trace.
    let span = proof_span(&proof_id);
    trace_context::set_parent(&span, request.headers.as_ref());
    span.in_scope(|| tracing::info!(jobs = record.job_count, "proof accepted"));
    start_proof(shared, record, false, span, tasks);
    if let Some(reason) = current_halt(shared) {
        publish_progress(shared, &proof_id, &ProgressEvent::Halted { reason }).await;
    }
    SubmitReply::Accepted { proof_id }
}

/// Why a submission is refused before it is recorded.
#[derive(Debug, thiserror::Error)]
enum SubmissionError {
    #[error(
        "proof id {0:?} is not well formed (hint: letters, digits, `-` and `_`, at most {max} of them)",
        max = assay_common::ids::MAX_PROOF_ID_LEN
    )]
    ProofId(String),
    #[error("proof {proof_id}'s stored submission is at {found}, not at its own key {expected}")]
    StoredElsewhere {
        proof_id: ProofId,
        found: String,
        expected: String,
    },
    #[error("proof {0} has more jobs than a plan index can number")]
    TooManyJobs(ProofId),
    #[error("job {job_id} of proof {proof_id} names another proof, {other}")]
    ForeignJob {
        proof_id: ProofId,
        job_id: JobId,
        other: ProofId,
    },
    #[error(
        "job {job_id} (index {index}) of proof {proof_id} is out of plan order: job {position} must be {expected}"
    )]
    OutOfOrder {
        proof_id: ProofId,
        job_id: JobId,
        index: u32,
        position: usize,
        expected: JobId,
    },
}

/// What a submission must hold before it is recorded: an id safe in subjects and keys, and jobs
/// that are this proof's, numbered in plan order. A job naming another proof (or another job's
/// id) would let its result take a slot of a proof it does not belong to.
fn check_submission(
    submission: &ProofSubmission,
    stored: Option<&assay_common::job::ArtifactRef>,
) -> Result<(), SubmissionError> {
    let proof_id = &submission.proof_id;
    if !proof_id.is_well_formed() {
        return Err(SubmissionError::ProofId(proof_id.to_string()));
    }
    let expected = assay_common::fleet::submission_key(proof_id);
    if let Some(blob) = stored
        && blob.key != expected
    {
        return Err(SubmissionError::StoredElsewhere {
            proof_id: proof_id.clone(),
            found: blob.key.clone(),
            expected,
        });
    }
    if u32::try_from(submission.jobs.len()).is_err() {
        return Err(SubmissionError::TooManyJobs(proof_id.clone()));
    }
    for (position, job) in submission.jobs.iter().enumerate() {
        if job.proof_id != *proof_id {
            return Err(SubmissionError::ForeignJob {
                proof_id: proof_id.clone(),
                job_id: job.job_id.clone(),
                other: job.proof_id.clone(),
            });
        }
        let expected = JobId::for_index(proof_id, position);
        if job.index as usize != position || job.job_id != expected {
            return Err(SubmissionError::OutOfOrder {
                proof_id: proof_id.clone(),
                job_id: job.job_id.clone(),
                index: job.index,
                position,
                expected,
            });
        }
    }
    Ok(())
}

fn current_halt(shared: &Shared) -> Option<String> {
    // A poisoned lock still halts: failing open would admit.
    shared.halt.lock().map_or_else(
        |_| Some("the halt state is unreadable".into()),
        |r| r.clone(),
    )
}

/// Reads the halt key and acts on its current value (a halt, its end, or no change).
async fn recheck_halt(shared: &Shared) {
    match read_halt(&shared.proofs).await {
        Ok(reason) => halt_changed(shared, reason).await,
        Err(e) => tracing::warn!(error = %e, "failed to read the halt key"),
    }
}

/// The fleet-wide halt was set or lifted: admission stops or goes on for every proof, and
/// each running proof's CLI hears of it.
async fn halt_changed(shared: &Shared, reason: Option<String>) {
    if let Ok(mut halt) = shared.halt.lock() {
        if *halt == reason {
            return;
        }
        halt.clone_from(&reason);
    }
    shared.admitter.set_halted(reason.is_some());
    let event = match reason {
        Some(reason) => {
            tracing::info!(reason, "fleet halted: admitting no job");
            ProgressEvent::Halted { reason }
        }
        None => {
            tracing::info!("fleet halt lifted: admission goes on");
            ProgressEvent::Resumed
        }
    };
    let proofs: Vec<ProofId> = shared
        .active
        .lock()
        .map(|active| active.keys().cloned().collect())
        .unwrap_or_default();
    for proof_id in proofs {
        publish_progress(shared, &proof_id, &event).await;
    }
}

/// Why a submission passed through the store cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("failed to read the submission stored at {key}")]
struct StoredSubmissionError {
    key: String,
    #[source]
    source: offload::OffloadError,
}

/// A submission passed through the store, checked against its sha256.
async fn stored_submission(
    shared: &Shared,
    blob: &assay_common::job::ArtifactRef,
) -> Result<ProofSubmission, StoredSubmissionError> {
    let failed = |source| StoredSubmissionError {
        key: blob.key.clone(),
        source,
    };
    let bytes = offload::get(shared.store.as_ref(), blob, shared.submission_cap)
        .await
        .map_err(failed)?;
    wire::decode("proof submission", &bytes).map_err(|e| failed(e.into()))
}

async fn resume_unfinished(shared: &Shared, tasks: &Tasks) -> Result<(), ServiceError> {
    let mut keys = match shared.proofs.keys().await {
        Ok(keys) => keys,
        Err(e) => return Err(FleetError::jetstream("list proofs", e).into()),
    };
    let mut records = Vec::new();
    while let Some(key) = keys.next().await {
        let Ok(key) = key else { continue };
        if keys::proof_of_record(&key).is_some() {
            records.push(key);
        }
    }
    for key in records {
        let Ok(Some(bytes)) = shared.proofs.get(&key).await else {
            continue;
        };
        match wire::decode::<ProofRecord>("proof record", &bytes) {
            Ok(record) if record.status == ProofStatus::Running => {
                // The submitting CLI's trace is gone with the old process: a new trace starts.
                let span = proof_span(&record.submission.proof_id);
                span.in_scope(|| tracing::info!("resuming proof"));
                start_proof(shared, record, true, span, tasks);
            }
            Ok(_) => {}
            Err(e) => tracing::error!(key, error = %e, "cannot read a stored proof; leaving it"),
        }
    }
    Ok(())
}

fn proof_span(proof_id: &ProofId) -> tracing::Span {
    tracing::info_span!("proof", proof_id = %proof_id)
}

/// `resumed`: the proof ran under an earlier coordinator, so some jobs may have results.
fn start_proof(
    shared: &Shared,
    record: ProofRecord,
    resumed: bool,
    span: tracing::Span,
    tasks: &Tasks,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let gate = PublishGate::default();
    let proof_id = record.submission.proof_id.clone();
    if let Ok(mut active) = shared.active.lock() {
        active.insert(
            proof_id.clone(),
            ActiveProof {
                results: tx,
                gate: gate.clone(),
                // The mutation check's jobs follow the proving jobs in plan order.
                job_count: record.job_count.saturating_add(record.mutation_job_count),
            },
        );
    }
    let shared = shared.clone();
    spawn_task(
        tasks,
        async move {
            drive(&shared, record, resumed, gate, rx).await;
            if let Ok(mut active) = shared.active.lock() {
                active.remove(&proof_id);
            }
            shared.admitter.remove(&proof_id);
        }
        .instrument(span),
    );
}

/// Rebuilds the engine's view of a proof from what the CLI submitted.
pub fn prepared_from(submission: &ProofSubmission) -> PreparedProof {
    let revision = |r: &RevisionWire| Revision {
        requested: r.requested.clone(),
        commit: r.commit.clone(),
        tree: r.tree.clone(),
    };
    let files = |files: &[ChangedFileWire]| -> Vec<ChangedFile> {
        files
            .iter()
            .map(|f| ChangedFile {
                path: f.path.to_string(),
                deleted: f.deleted,
            })
            .collect()
    };
    PreparedProof {
        request: ProofRequest {
            proof_id: submission.proof_id.clone(),
            repo: submission.repository.clone().into(),
            base: submission.base.requested.clone(),
            candidate: CandidateSpec::Revision(submission.candidate.requested.clone()),
            criteria: submission.criteria.clone(),
            runner: Some(submission.runner),
            test_command: submission.test_command.clone(),
            local_tools: false,
            test_report: None,
            test_globs: Vec::new(),
            repeats: 1,
            timeout_secs: submission.timeout_secs,
            mutation_budget: submission
                .mutation
                .as_ref()
                .map(|m| Duration::from_secs(m.budget_secs)),
        },
        change: Change {
            base: revision(&submission.base),
            candidate: revision(&submission.candidate),
            changed: files(&submission.changed),
            changed_test_files: files(&submission.changed_test_files),
            base_tree: submission.base_tree.clone(),
        },
        runner: submission.runner,
        jobs: submission.jobs.clone(),
        refused_files: submission.refused_files.clone(),
        mutation: submission.mutation.clone(),
    }
}

/// Publishes progress for the CLI; a sync sink feeding an async publisher.
struct NatsProgress {
    events: mpsc::UnboundedSender<ProgressEvent>,
}

impl ProgressSink for NatsProgress {
    fn event(&self, event: ProofEvent<'_>) {
        if let ProofEvent::JobFinished {
            done,
            total,
            result,
            ..
        } = event
        {
            let _ = self.events.send(ProgressEvent::JobFinished {
                done: done as u32,
                total: total as u32,
                result: Box::new(result.clone()),
            });
        }
    }
}

async fn publish_progress(shared: &Shared, proof_id: &ProofId, event: &ProgressEvent) {
    match wire::encode("progress", event) {
        Ok(bytes) => {
            if let Err(e) = shared
                .client
                .publish(shared.subjects.progress(proof_id), bytes.into())
                .await
            {
                tracing::warn!(proof_id = %proof_id, error = %e, "failed to publish progress");
            }
        }
        Err(e) => tracing::warn!(proof_id = %proof_id, error = %e, "failed to encode progress"),
    }
}

async fn drive(
    shared: &Shared,
    record: ProofRecord,
    resumed: bool,
    gate: PublishGate,
    applied: mpsc::UnboundedReceiver<JobResult>,
) {
    let proof_id = record.submission.proof_id.clone();
    let submission = match &record.stored {
        Some(blob) => match stored_submission(shared, blob).await {
            Ok(submission) => submission,
            Err(e) => {
                tracing::error!(proof_id = %proof_id, error = %error_chain(&e), "cannot run a proof whose submission is unreadable; it stays unfinished");
                return;
            }
        },
        None => record.submission.clone(),
    };
    let prepared = prepared_from(&submission);
    let budget = record
        .submission
        .jobs_budget
        .clamp(1, shared.max_jobs_per_proof) as usize;
    let queue = NatsJobQueue::new(
        shared.js.clone(),
        ProofStores {
            proofs: shared.proofs.clone(),
            store: shared.store.clone(),
            result_cap: shared.result_cap,
        },
        shared.subjects.clone(),
        shared.admitter.clone(),
        gate,
        applied,
        resumed,
    );
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    let publisher = {
        let shared = shared.clone();
        let proof_id = proof_id.clone();
        tokio::spawn(async move {
            while let Some(event) = events_rx.recv().await {
                publish_progress(&shared, &proof_id, &event).await;
            }
        })
    };
    let progress = NatsProgress { events: events_tx };
    // The record is read back from KV: a time past what `SystemTime` holds is no time.
    let started = UNIX_EPOCH
        .checked_add(Duration::from_secs(record.submitted_at))
        .unwrap_or(UNIX_EPOCH);
    let clock = Instant::now();
    let caching = shared
        .cache
        .as_ref()
        .filter(|_| submission.cache != CacheMode::Off)
        .map(|fleet| {
            let cache = ResultCache::signed(
                shared.store.clone(),
                submission.cache,
                fleet.key.clone(),
                fleet.context.sandbox.clone(),
            );
            CachingQueue::new(&queue, cache, fleet.context.clone())
        });
    let recording = caching.as_ref().map(|caching| RecordServed {
        caching,
        proofs: shared.proofs.clone(),
        proof_id: proof_id.clone(),
    });
    let jobs: &dyn JobQueue = match &recording {
        Some(recording) => recording,
        None => &queue,
    };
    let outcome = engine::run_proof(&prepared, jobs, budget, &progress, started, clock).await;
    drop(progress);
    let _ = publisher.await;
    let evidence = match outcome {
        Ok(mut run) => {
            if let Some(caching) = &caching {
                cache_results(&proof_id, caching, &mut run).await;
            }
            run.evidence
        }
        Err(e) => {
            // Cancelling closes the proof's result channel; anything else is logged.
            tracing::info!(proof_id = %proof_id, error = %e, "proof stopped before all results");
            return;
        }
    };
    let json = match serde_json::to_vec_pretty(&evidence) {
        Ok(json) => json,
        Err(e) => {
            tracing::error!(proof_id = %proof_id, error = %e, "failed to encode evidence");
            return;
        }
    };
    let stored = match offload::put(
        shared.store.as_ref(),
        "evidence",
        &evidence_key(&proof_id),
        json.clone(),
    )
    .await
    {
        Ok(stored) => Some(stored),
        Err(e) => {
            tracing::warn!(proof_id = %proof_id, error = %error_chain(&e), "failed to store evidence");
            None
        }
    };
    let finished = record_evidence(shared, &proof_id, json, stored).await;
    set_status(shared, &record, ProofStatus::Finished).await;
    tracing::info!(proof_id = %proof_id, verdict = ?evidence.verdict, "proof finished");
    publish_progress(shared, &proof_id, &finished).await;
}

/// The proof's queue behind the cache: each result the cache served is recorded at its job's
/// KV result key as a worker's would be, so `assay status` counts it and a resumed proof finds
/// it there, and marked served (`keys::cached`) for `assay status` to say so.
struct RecordServed<'a> {
    caching: &'a CachingQueue<'a>,
    proofs: kv::Store,
    proof_id: ProofId,
}

#[async_trait::async_trait]
impl JobQueue for RecordServed<'_> {
    async fn submit(&self, job: assay_common::job::JobSpec) -> Result<(), QueueError> {
        self.caching.submit(job).await
    }

    async fn next_result(&self) -> Option<JobResult> {
        let result = self.caching.next_result().await?;
        if let Some(hit) = self.caching.hit(&result.job_id) {
            let message = ResultMessage::Inline(Box::new(result.clone()));
            let recorded = match wire::encode("job result", &message) {
                Ok(bytes) => {
                    let index = result.index;
                    match self
                        .create(keys::result(&self.proof_id, index), bytes)
                        .await
                    {
                        Ok(()) => {
                            self.create(keys::cached(&self.proof_id, index), hit.key.into_bytes())
                                .await
                        }
                        Err(e) => Err(e),
                    }
                }
                Err(e) => Err(e.to_string()),
            };
            // The result stands either way: only `assay status`'s count would miss it.
            if let Err(error) = recorded {
                tracing::info!(proof_id = %self.proof_id, job_id = %result.job_id, error, "a result served from the cache is not recorded in the proofs bucket");
            }
        }
        Some(result)
    }
}

impl RecordServed<'_> {
    async fn create(&self, key: String, value: Vec<u8>) -> Result<(), String> {
        match self.proofs.create(key, value.into()).await {
            Ok(_) => Ok(()),
            // A resumed proof recorded it before.
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Marks the jobs the cache answered in the evidence, as embedded mode does, and stores the
/// proof's trusted results, signed.
async fn cache_results(proof_id: &ProofId, caching: &CachingQueue<'_>, run: &mut engine::ProofRun) {
    let served = caching.served();
    // Refused entries were logged, with why, when they were looked up.
    CacheHit::mark(&mut run.evidence, &served, &run.finished_at_ms);
    match caching
        .cache()
        .store_trusted(&caching.keyed(), &served, &run.results, &run.evidence)
        .await
    {
        Ok(stored) => tracing::info!(
            proof_id = %proof_id,
            served = served.len(),
            jobs = run.results.len(),
            stored,
            "result cache: {} of {} jobs answered from the cache, {stored} results stored",
            served.len(),
            run.results.len()
        ),
        Err(e) => {
            tracing::warn!(proof_id = %proof_id, error = %error_chain(&e), "results not stored in the cache");
        }
    }
}

/// Puts the evidence in the KV bucket, or, when it is too big for a KV value, its reference
/// to the stored copy; returns the progress event that tells the CLI where it is.
async fn record_evidence(
    shared: &Shared,
    proof_id: &ProofId,
    json: Vec<u8>,
    stored: Option<assay_common::job::ArtifactRef>,
) -> ProgressEvent {
    let outcome = match stored {
        Some(blob) if json.len() > offload::client_limit(&shared.client) => {
            let event = ProgressEvent::FinishedStored {
                evidence: blob.clone(),
            };
            match wire::encode("evidence reference", &blob) {
                Ok(bytes) => (
                    shared
                        .proofs
                        .put(keys::evidence_ref(proof_id), bytes.into())
                        .await
                        .map(|_| ()),
                    event,
                ),
                Err(e) => {
                    tracing::error!(proof_id = %proof_id, error = %e, "failed to encode the evidence reference");
                    return event;
                }
            }
        }
        _ => {
            let event = ProgressEvent::Finished {
                evidence_json: String::from_utf8_lossy(&json).into_owned(),
            };
            let put = shared
                .proofs
                .put(keys::evidence(proof_id), json.into())
                .await;
            (put.map(|_| ()), event)
        }
    };
    if let Err(e) = outcome.0 {
        tracing::error!(proof_id = %proof_id, error = %e, "failed to record evidence");
    }
    outcome.1
}

async fn set_status(shared: &Shared, record: &ProofRecord, status: ProofStatus) {
    let mut record = record.clone();
    record.status = status;
    let proof_id = &record.submission.proof_id;
    match wire::encode("proof record", &record) {
        Ok(bytes) => {
            if let Err(e) = shared
                .proofs
                .put(keys::record(proof_id), bytes.into())
                .await
            {
                tracing::error!(proof_id = %proof_id, error = %e, "failed to update proof status");
            }
        }
        Err(e) => {
            tracing::error!(proof_id = %proof_id, error = %e, "failed to encode proof record")
        }
    }
}

/// Applies one result: the first for its job id is stored and handed to the proof; any later
/// one (redelivery, a presumed-dead worker finishing after all) is dropped and logged.
async fn apply_result(shared: &Shared, message: jetstream::Message) {
    let envelope: ResultMessage = match wire::decode("job result", &message.payload) {
        Ok(envelope) => envelope,
        Err(e) => {
            tracing::error!(subject = %message.subject, error = %e, "refusing a result this coordinator cannot read");
            let _ = message.ack_with(jetstream::AckKind::Term).await;
            return;
        }
    };
    // Whatever becomes of it, a result means a worker slot is free for the next admission.
    shared.admitter.slot_freed();
    let Some(proof_id) = shared.subjects.proof_of(&message.subject) else {
        let _ = message.ack().await;
        return;
    };
    let (job_id, index) = match &envelope {
        ResultMessage::Inline(result) => (result.job_id.clone(), result.index),
        ResultMessage::Stored { job_id, index, .. } => (job_id.clone(), *index),
    };
    let active = shared.active.lock().ok().and_then(|active| {
        active
            .get(&proof_id)
            .map(|a| (a.results.clone(), a.job_count))
    });
    // Checked before the create: a result that takes a key it does not own would make the
    // real one a "duplicate" and leave the proof running forever, restarts included.
    if let Some((_, job_count)) = active
        && (index >= job_count || job_id != JobId::for_index(&proof_id, index as usize))
    {
        shared
            .metrics
            .results_dropped
            .fetch_add(1, Ordering::Relaxed);
        tracing::warn!(proof_id = %proof_id, job_id = %job_id, index, "refusing a result that names no job of this proof at its index");
        let _ = message.ack_with(jetstream::AckKind::Term).await;
        return;
    }
    // A stored result is read (at its own key, checked against its sha256) before it is
    // recorded, so a result key never names a blob that is not that job's result.
    let result = if active.is_some() {
        match offload::resolve_result(
            shared.store.as_ref(),
            &proof_id,
            envelope,
            shared.result_cap,
        )
        .await
        {
            Ok(result) => result,
            Err(e @ (offload::OffloadError::Missing { .. } | offload::OffloadError::Store(_)))
                if !matches!(&e, offload::OffloadError::Store(store) if store.is_refusal()) =>
            {
                // Perhaps a store blip: the stream redelivers it.
                tracing::warn!(proof_id = %proof_id, job_id = %job_id, error = %error_chain(&e), "failed to read a stored result; it will be redelivered");
                return;
            }
            Err(e) => {
                shared
                    .metrics
                    .results_dropped
                    .fetch_add(1, Ordering::Relaxed);
                tracing::warn!(proof_id = %proof_id, job_id = %job_id, error = %e, "refusing a stored result");
                let _ = message.ack_with(jetstream::AckKind::Term).await;
                return;
            }
        }
    } else {
        match envelope {
            ResultMessage::Inline(result) => *result,
            ResultMessage::Stored { .. } => {
                let _ = message.ack().await;
                return;
            }
        }
    };
    let sender = active.map(|(sender, _)| sender);
    let Some(sender) = sender else {
        shared
            .metrics
            .results_dropped
            .fetch_add(1, Ordering::Relaxed);
        tracing::info!(proof_id = %proof_id, job_id = %result.job_id, "dropping a late result for a proof that is finished, cancelled or unknown");
        let _ = message.ack().await;
        return;
    };
    // The message as it came, inline or naming the stored result: either fits a KV value.
    match shared
        .proofs
        .create(
            keys::result(&proof_id, result.index),
            message.payload.clone(),
        )
        .await
    {
        Ok(_) => {
            shared
                .metrics
                .results_applied
                .fetch_add(1, Ordering::Relaxed);
            let _ = sender.send(result);
        }
        Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
            shared
                .metrics
                .results_dropped
                .fetch_add(1, Ordering::Relaxed);
            tracing::info!(proof_id = %proof_id, job_id = %result.job_id, "dropping a duplicate result");
        }
        Err(e) => {
            // Not acked: the stream redelivers it and the create is tried again.
            tracing::warn!(proof_id = %proof_id, error = %e, "failed to record a result; it will be redelivered");
            return;
        }
    }
    if let Err(e) = message.ack().await {
        tracing::warn!(error = %e, "failed to acknowledge a result");
    }
}

async fn cancel_proof(shared: &Shared, payload: &[u8]) -> CancelReply {
    let Ok(request) = wire::decode::<CancelRequest>("cancel request", payload) else {
        return CancelReply::NotRunning { status: None };
    };
    let proof_id = request.proof_id;
    let record = match shared.proofs.get(keys::record(&proof_id)).await {
        Ok(Some(bytes)) => wire::decode::<ProofRecord>("proof record", &bytes).ok(),
        _ => None,
    };
    let Some(record) = record else {
        return CancelReply::NotRunning { status: None };
    };
    if record.status != ProofStatus::Running {
        return CancelReply::NotRunning {
            status: Some(record.status),
        };
    }
    set_status(shared, &record, ProofStatus::Cancelled).await;
    // Closing the channel ends the proof's run_jobs; closing the gate (after any publish in
    // progress) keeps it from queueing more, so the purge below leaves none of its jobs.
    let active = shared
        .active
        .lock()
        .ok()
        .and_then(|mut active| active.remove(&proof_id));
    if let Some(active) = active {
        *active.gate.lock().await = true;
    }
    shared.admitter.remove(&proof_id);
    if let Ok(stream) = shared.js.get_stream(shared.subjects.jobs_stream()).await
        && let Err(e) = stream.purge().filter(shared.subjects.jobs(&proof_id)).await
    {
        tracing::warn!(proof_id = %proof_id, error = %e, "failed to purge a cancelled proof's jobs");
    }
    publish_progress(shared, &proof_id, &ProgressEvent::Cancelled).await;
    tracing::info!(proof_id = %proof_id, "proof cancelled");
    CancelReply::Cancelled
}
