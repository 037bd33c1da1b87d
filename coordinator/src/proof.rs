//! The proof loop: one task per proof that rebuilds the engine's view of it, runs it over its
//! [`NatsJobQueue`] (behind the result cache when it is on), and writes its evidence and status.
//! Every write goes through the leader's fence; the verdict is written once (a fenced create),
//! and a proof resumed after its verdict was written is only marked finished.

use crate::lease::FenceError;
use crate::nats_queue::{NatsJobQueue, ProofStores, PublishGate};
use crate::progress::{NatsProgress, publish_progress};
use crate::served::RecordServed;
use crate::{ActiveProof, Shared, Tasks, spawn_task};
use assay_common::ProofId;
use assay_common::evidence::CoordinatorEvidence;
use assay_common::fleet::{
    ChangedFileWire, ProgressEvent, ProofRecord, ProofStatus, ProofSubmission, RevisionWire,
    Submission, evidence_key, keys,
};
use assay_common::job::JobResult;
use assay_common::wire;
use assay_engine::proof::{self, PreparedProof, ProofRequest};
use assay_engine::result_cache::{CacheMode, CachingQueue, ResultCache};
use assay_engine::source::{CandidateSpec, Change, ChangedFile, Revision};
use assay_transport::error_chain::error_chain;
use assay_transport::offload;
use assay_transport::queue::JobQueue;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;
use tracing::Instrument;

pub(super) fn proof_span(proof_id: &ProofId) -> tracing::Span {
    tracing::info_span!("proof", proof_id = %proof_id)
}

/// `resumed`: the proof ran under an earlier coordinator, so some jobs may have results.
pub(super) fn start_proof(
    shared: &Shared,
    record: ProofRecord,
    resumed: bool,
    span: tracing::Span,
    tasks: &Tasks,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let gate = PublishGate::default();
    let proof_id = record.submission.id().clone();
    if let Ok(mut active) = shared.active.lock() {
        active.insert(
            proof_id.clone(),
            ActiveProof {
                results: tx,
                gate: gate.clone(),
                // The mutation check's jobs follow the proving jobs in plan order.
                job_count: record.job_count.saturating_add(record.mutation_job_count),
                claimed: Default::default(),
            },
        );
    }
    let shared = shared.clone();
    spawn_task(
        tasks,
        async move {
            let (mut resumed, mut rx) = (resumed, rx);
            // A run cut short by the fleet (a job not published while a NATS server was
            // lost) is driven again from its recorded results, in this leadership, with the
            // proof still registered: a result that arrives meanwhile is recorded in KV and
            // found there, never taken for a stray and dropped.
            while drive(&shared, record.clone(), resumed, gate.clone(), rx).await
                == Ended::Interrupted
                && shared.fence.holds()
                && !*gate.lock().await
            {
                tracing::warn!(proof_id = %proof_id, "proof interrupted by a fleet error; driving it again from its recorded results");
                tokio::time::sleep(assay_common::fault::FLEET_RETRY_PAUSE).await;
                let (tx, next) = mpsc::unbounded_channel();
                let registered = shared.active.lock().ok().and_then(|mut active| {
                    active.get_mut(&proof_id).map(|proof| proof.results = tx)
                });
                if registered.is_none() {
                    break;
                }
                (resumed, rx) = (true, next);
            }
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
            allow_test_only: submission.allow_test_only,
            mutation_budget: submission
                .mutation
                .as_ref()
                .map(|m| Duration::from_secs(m.budget_secs)),
            diff_coverage: !submission.diff_hunks.is_empty(),
            trust_harness_change: submission.harness.trusted,
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
        lockfiles: Default::default(),
        rust_toolchains: Vec::new(),
        diff_hunks: submission.diff_hunks.clone(),
        diff_sources: submission.diff_sources.clone(),
        harness: submission.harness.clone(),
    }
}

/// How a proof's run ended: done (a verdict, or nothing more this coordinator can do), or
/// interrupted before all its results by an error of the fleet, which may be run again.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Ended {
    Done,
    Interrupted,
}

pub(super) async fn drive(
    shared: &Shared,
    record: ProofRecord,
    resumed: bool,
    gate: PublishGate,
    applied: mpsc::UnboundedReceiver<JobResult>,
) -> Ended {
    match &record.submission {
        Submission::Proof(kept) => drive_proof(shared, &record, kept, resumed, gate, applied).await,
        Submission::Jobs(jobs) => {
            crate::job_run::drive_jobs(shared, &record, jobs, resumed, gate, applied).await
        }
    }
}

/// The queue of one run's jobs on the fleet, fed its applied results.
pub(super) fn run_queue(
    shared: &Shared,
    gate: PublishGate,
    applied: mpsc::UnboundedReceiver<JobResult>,
    resumed: bool,
) -> NatsJobQueue {
    NatsJobQueue::new(
        shared.js.clone(),
        ProofStores {
            fence: shared.fence.clone(),
            store: shared.store.clone(),
            result_cap: shared.result_cap,
        },
        shared.subjects.clone(),
        shared.admitter.clone(),
        gate,
        applied,
        resumed,
    )
}

/// The engine's progress for one run, published on its progress subject by a task that ends
/// once the returned sink is dropped (await it then, so no event is lost).
pub(super) fn run_progress(
    shared: &Shared,
    proof_id: &ProofId,
) -> (NatsProgress, tokio::task::JoinHandle<()>) {
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
    (NatsProgress { events: events_tx }, publisher)
}

async fn drive_proof(
    shared: &Shared,
    record: &ProofRecord,
    kept: &ProofSubmission,
    resumed: bool,
    gate: PublishGate,
    applied: mpsc::UnboundedReceiver<JobResult>,
) -> Ended {
    let proof_id = kept.proof_id.clone();
    // An earlier leader may have written the verdict and died before marking the proof
    // finished: the verdict stands, nothing runs again.
    if resumed && let Some(finished) = written_verdict(shared, &proof_id).await {
        set_status(shared, record, ProofStatus::Finished).await;
        tracing::info!(proof_id = %proof_id, "proof's verdict was written by an earlier leader");
        publish_progress(shared, &proof_id, &finished).await;
        return Ended::Done;
    }
    let drivers = record_driver(shared, &proof_id, resumed).await;
    let submission = match &record.stored {
        Some(blob) => match stored_submission(shared, blob).await {
            Ok(submission) => submission,
            Err(e) => {
                tracing::error!(proof_id = %proof_id, error = %error_chain(&e), "cannot run a proof whose submission is unreadable; it stays unfinished");
                return Ended::Done;
            }
        },
        None => kept.clone(),
    };
    let prepared = prepared_from(&submission);
    let budget = kept.jobs_budget.clamp(1, shared.max_jobs_per_proof) as usize;
    let queue = run_queue(shared, gate, applied, resumed);
    let (progress, publisher) = run_progress(shared, &proof_id);
    // The record is read back from KV: a time past what `SystemTime` holds is no time.
    let started = UNIX_EPOCH
        .checked_add(Duration::from_secs(record.submitted_at))
        .unwrap_or(UNIX_EPOCH);
    // A proof resumed under this coordinator began under an earlier one: its clock starts at
    // the submission, so the evidence's duration and start times count from there, not from
    // the take-over (to the second: the record keeps whole seconds).
    let clock = match resumed {
        true => SystemTime::now()
            .duration_since(started)
            .ok()
            .and_then(|elapsed| Instant::now().checked_sub(elapsed))
            .unwrap_or_else(Instant::now),
        false => Instant::now(),
    };
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
        fence: shared.fence.clone(),
        proof_id: proof_id.clone(),
    });
    let jobs: &dyn JobQueue = match &recording {
        Some(recording) => recording,
        None => &queue,
    };
    // Every job on a pinned tree names that tree's dependency archive, the mutation check's
    // and diff coverage's as much as the planned ones.
    let jobs = assay_engine::vendored::WithDependencies::new(jobs, &submission.dependencies);
    let outcome = proof::run_proof(
        &prepared,
        &jobs,
        &*shared.store,
        budget,
        &progress,
        started,
        clock,
    )
    .await;
    drop(progress);
    let _ = publisher.await;
    let evidence = match outcome {
        Ok(mut run) => {
            run.evidence.coordinators = drivers;
            // A cache entry is written only by the leader: a deposed one's results are the
            // same (they are the KV's), but its successor writes them.
            if let Some(caching) = caching.as_ref().filter(|_| shared.fence.holds()) {
                cache_results(&proof_id, caching, &mut run).await;
            }
            run.evidence
        }
        Err(e) => {
            // Cancelling closes the proof's result channel; anything else is logged.
            tracing::info!(proof_id = %proof_id, error = %e, "proof stopped before all results");
            return Ended::Interrupted;
        }
    };
    let json = match serde_json::to_vec_pretty(&evidence) {
        Ok(json) => json,
        Err(e) => {
            tracing::error!(proof_id = %proof_id, error = %e, "failed to encode evidence");
            return Ended::Done;
        }
    };
    if !shared.fence.holds() {
        tracing::warn!(proof_id = %proof_id, "not writing the verdict: this coordinator lost the lease; its successor will");
        return Ended::Done;
    }
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
    set_status(shared, record, ProofStatus::Finished).await;
    tracing::info!(proof_id = %proof_id, verdict = ?evidence.verdict, "proof finished");
    publish_progress(shared, &proof_id, &finished).await;
    Ended::Done
}

/// Marks the jobs the cache answered in the evidence, as embedded mode does, and stores the
/// proof's trusted results, signed.
pub(super) async fn cache_results(
    proof_id: &ProofId,
    caching: &CachingQueue<'_>,
    run: &mut proof::ProofRun,
) {
    // Refused entries were logged, with why, when they were looked up.
    let settled = caching
        .settle(&mut run.evidence, &run.results, &run.finished_at_ms)
        .await;
    match settled.stored {
        Ok(stored) => tracing::info!(
            proof_id = %proof_id,
            served = settled.served,
            jobs = run.results.len(),
            stored,
            "result cache: {} of {} jobs answered from the cache, {stored} results stored",
            settled.served,
            run.results.len()
        ),
        Err(e) => {
            tracing::warn!(proof_id = %proof_id, error = %error_chain(&e), "results not stored in the cache");
        }
    }
}

/// Puts the evidence in the KV bucket, or, when it is too big for a KV value, its reference
/// to the stored copy; returns the progress event that tells the CLI where it is.
pub(super) async fn record_evidence(
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
                        .fence
                        .create(&keys::evidence_ref(proof_id), bytes.into())
                        .await,
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
            let create = shared
                .fence
                .create(&keys::evidence(proof_id), json.into())
                .await;
            (create, event)
        }
    };
    match outcome.0 {
        Ok(_) => outcome.1,
        // Written once: the verdict an earlier leader wrote is the proof's.
        Err(FenceError::Exists { .. }) => {
            written_verdict(shared, proof_id).await.unwrap_or(outcome.1)
        }
        Err(e) => {
            tracing::error!(proof_id = %proof_id, error = %error_chain(&e), "failed to record evidence");
            outcome.1
        }
    }
}

/// The verdict already written for `proof_id`, as the event that tells the CLI where it is.
async fn written_verdict(shared: &Shared, proof_id: &ProofId) -> Option<ProgressEvent> {
    if let Ok(Some(json)) = shared.fence.read(&keys::evidence(proof_id)).await {
        return Some(ProgressEvent::Finished {
            evidence_json: String::from_utf8_lossy(&json).into_owned(),
        });
    }
    let bytes = shared
        .fence
        .read(&keys::evidence_ref(proof_id))
        .await
        .ok()??;
    let evidence = wire::decode("evidence reference", &bytes).ok()?;
    Some(ProgressEvent::FinishedStored { evidence })
}

/// Adds this leadership to the coordinators that drove `proof_id` (kept at
/// [`keys::drivers`]), and returns them all, for the evidence.
async fn record_driver(
    shared: &Shared,
    proof_id: &ProofId,
    resumed: bool,
) -> Vec<CoordinatorEvidence> {
    let key = keys::drivers(proof_id);
    let mut drivers: Vec<CoordinatorEvidence> = match shared.fence.read(&key).await {
        Ok(Some(bytes)) => serde_json::from_slice(&bytes).unwrap_or_default(),
        _ => Vec::new(),
    };
    let epoch = shared.fence.epoch();
    if !drivers.iter().any(|d| d.epoch == epoch) {
        drivers.push(CoordinatorEvidence {
            coordinator: shared.fence.holder.to_string(),
            epoch,
            resumed,
        });
    }
    match serde_json::to_vec(&drivers) {
        Ok(json) => {
            if let Err(e) = shared.fence.put(&key, json.into()).await {
                tracing::warn!(proof_id = %proof_id, error = %error_chain(&e), "failed to record this coordinator among the proof's drivers");
            }
        }
        Err(e) => {
            tracing::warn!(proof_id = %proof_id, error = %e, "failed to encode the proof's drivers")
        }
    }
    drivers
}

pub(super) async fn set_status(shared: &Shared, record: &ProofRecord, status: ProofStatus) {
    let mut record = record.clone();
    record.status = status;
    let proof_id = record.submission.id();
    match wire::encode("proof record", &record) {
        Ok(bytes) => {
            if let Err(e) = shared
                .fence
                .put(&keys::record(proof_id), bytes.into())
                .await
            {
                tracing::error!(proof_id = %proof_id, error = %error_chain(&e), "failed to update proof status");
            }
        }
        Err(e) => {
            tracing::error!(proof_id = %proof_id, error = %e, "failed to encode proof record")
        }
    }
}

/// Why a submission passed through the store cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("failed to read the submission stored at {key}")]
pub(super) struct StoredSubmissionError {
    key: String,
    #[source]
    source: offload::OffloadError,
}

/// A submission passed through the store, checked against its sha256.
pub(super) async fn stored_submission(
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
