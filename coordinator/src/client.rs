//! The fleet client the CLI uses: uploads the trees a prepared proof needs, submits it by
//! request/reply, and follows its progress until the evidence arrives. The verdict is only ever
//! read from the proofs KV bucket (or the stored copy it names, checked against its sha256),
//! which only the coordinator may write: a finished progress event merely wakes the client to
//! read it, and the bucket is also polled, so a missed message (a coordinator restart) never
//! leaves the CLI waiting for nothing.

use assay_common::dependency_archive::DependencyArchive;
use assay_common::evidence::Evidence;
use assay_common::fleet::{
    CancelReply, CancelRequest, ChangedFileWire, ProgressEvent, ProofRecord, ProofSubmission,
    RevisionWire, Subjects, SubmitReply, SubmitRequest, keys, submission_key,
};
use assay_common::job::ArtifactRef;
use assay_common::job::JobResult;
use assay_common::wire;
use assay_common::{ProofId, TreeId};
use assay_engine::proof::PreparedProof;
use assay_transport::error_chain::error_chain;
use assay_transport::nats::{self, FleetError};
use assay_transport::offload::{self, OffloadError};
use assay_transport::store::ArtifactStore;
use assay_transport::store_tree::upload_tree;
use assay_transport::trace_context;
use futures::StreamExt;
use std::time::Duration;

/// Why submitting, following, reading or cancelling a proof failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Connecting to NATS or to its streams and buckets failed.
    #[error(transparent)]
    Fleet(#[from] FleetError),
    /// A tree or dependency archive could not be put in the artifact store.
    #[error("{message} (hint: check --store or ASSAY_STORE and the AWS_* settings)")]
    Upload {
        /// What failed, with the key.
        message: String,
    },
    /// A submit or cancel request got no usable reply.
    #[error(
        "failed to submit proof {proof_id}: {message} (hint: is `assay coordinator` running on this NATS server and prefix?)"
    )]
    Submit {
        /// The proof sent.
        proof_id: String,
        /// Why the request failed.
        message: String,
    },
    /// The coordinator answered the submission with a refusal.
    #[error("the coordinator refused proof {proof_id}: {message}")]
    Refused {
        /// The proof refused.
        proof_id: String,
        /// The coordinator's reason.
        message: String,
    },
    /// A proof's record or evidence could not be read or decoded.
    #[error("failed to read proof {proof_id}: {message}")]
    Read {
        /// The proof being read.
        proof_id: String,
        /// What failed.
        message: String,
    },
    /// The proofs bucket did not answer (a NATS server lost mid-request, a leader election):
    /// asking again may succeed.
    #[error("failed to read proof {proof_id} from the proofs bucket: {message}")]
    Unanswered {
        /// The proof being read.
        proof_id: String,
        /// The bucket's error.
        message: String,
    },
    /// A value too big for KV (submission or evidence) could not be moved through the store.
    #[error("failed to move proof {proof_id}'s {what} through the artifact store: {source}")]
    Offload {
        /// The proof whose value it is.
        proof_id: String,
        /// Which value: e.g. "submission" or "evidence".
        what: &'static str,
        /// Why the store step failed.
        #[source]
        source: Box<OffloadError>,
    },
    /// The proof was cancelled while the client waited for it.
    #[error("proof {proof_id} was cancelled")]
    Cancelled {
        /// The cancelled proof.
        proof_id: String,
    },
}

/// What the CLI learns while a proof runs.
pub trait FleetProgress: Send {
    /// A job's result arrived: `done` of `total` jobs have results now; `cached`: the fleet's
    /// result cache answered it, no worker ran it.
    fn job_finished(&mut self, done: u32, total: u32, result: &JobResult, cached: bool);
    /// The fleet-wide halt holds this proof's remaining jobs back.
    fn halted(&mut self, reason: &str);
    /// The halt was lifted: the proof's jobs run again.
    fn resumed(&mut self);
}

/// The submission for a prepared proof.
pub fn submission(prepared: &PreparedProof, jobs_budget: u32) -> ProofSubmission {
    let revision = |r: &assay_engine::source::Revision| RevisionWire {
        requested: r.requested.clone(),
        commit: r.commit.clone(),
        tree: r.tree.clone(),
    };
    // `source::list_changes` refused every path that is not confined, so none is dropped here.
    let files = |files: &[assay_engine::source::ChangedFile]| {
        files
            .iter()
            .filter_map(|f| {
                let path = assay_common::tree_path::TreePath::new(&f.path).ok()?;
                Some(ChangedFileWire {
                    path,
                    deleted: f.deleted,
                })
            })
            .collect()
    };
    ProofSubmission {
        proof_id: prepared.request.proof_id.clone(),
        repository: prepared.request.repo.display().to_string(),
        runner: prepared.runner,
        criteria: prepared.request.criteria.clone(),
        base: revision(&prepared.change.base),
        candidate: revision(&prepared.change.candidate),
        base_tree: prepared.change.base_tree.clone(),
        changed: files(&prepared.change.changed),
        changed_test_files: files(&prepared.change.changed_test_files),
        jobs: prepared.jobs.clone(),
        refused_files: prepared.refused_files.clone(),
        jobs_budget,
        test_command: prepared.request.test_command.clone(),
        timeout_secs: prepared.request.timeout_secs,
        mutation: prepared.mutation.clone(),
        cache: Default::default(),
        diff_hunks: prepared.diff_hunks.clone(),
        diff_sources: prepared.diff_sources.clone(),
        harness: prepared.harness.clone(),
        allow_test_only: prepared.request.allow_test_only,
        dependencies: Vec::new(),
    }
}

/// Uploads every tree the proof's jobs run on (each once, skipped when the store's digest is
/// that of the archive built here, replacing a stored archive that differs).
pub async fn upload_trees(
    store: &dyn ArtifactStore,
    prepared: &PreparedProof,
) -> Result<(), ClientError> {
    let mut trees: Vec<_> = prepared.jobs.iter().map(|j| j.tree.clone()).collect();
    trees.sort();
    trees.dedup();
    for tree in trees {
        upload_tree(store, &prepared.request.repo, &tree)
            .await
            .map_err(|e| ClientError::Upload {
                message: assay_transport::error_chain::error_chain(&e),
            })?;
    }
    Ok(())
}

/// For a runner whose dependencies travel as an archive (cargo, Go), collects the dependencies
/// of every tree the proof's jobs run on, and of the candidate's (its mutants), and stores
/// each archive once (see [`assay_engine::vendored`]): what the submission's `dependencies`
/// names, so the workers build offline from it.
pub async fn upload_dependencies(
    store: &dyn ArtifactStore,
    prepared: &PreparedProof,
) -> Result<Vec<(TreeId, DependencyArchive)>, ClientError> {
    let Some(kind) = prepared.runner.runner().dependency_archive() else {
        return Ok(Vec::new());
    };
    let mut trees: Vec<TreeId> = prepared.jobs.iter().map(|j| j.tree.clone()).collect();
    trees.push(prepared.change.candidate.tree.clone());
    trees.sort();
    trees.dedup();
    assay_engine::vendored::store_archives(store, &prepared.request.repo, &trees, kind)
        .await
        .map_err(|e| ClientError::Upload {
            message: assay_transport::error_chain::error_chain(&e),
        })
}

/// Submits `submission` and waits for its evidence, in a `prove` span whose trace the
/// coordinator and workers continue. A submission or evidence bigger than one NATS message goes
/// through `store` (see [`offload`]).
#[tracing::instrument(name = "prove", skip_all, fields(proof_id = %submission.proof_id))]
pub async fn submit_and_wait(
    client: &async_nats::Client,
    subjects: &Subjects,
    store: &dyn ArtifactStore,
    submission: &ProofSubmission,
    progress: &mut dyn FleetProgress,
) -> Result<Evidence, ClientError> {
    let proof_id = submission.proof_id.clone();
    let submit_err = |message: String| ClientError::Submit {
        proof_id: proof_id.to_string(),
        message,
    };
    let mut events = client
        .subscribe(subjects.progress(&proof_id))
        .await
        .map_err(|e| submit_err(e.to_string()))?;
    let payload = submit_request(client, store, submission).await?;
    let mut headers = async_nats::HeaderMap::new();
    trace_context::inject(&mut headers);
    let reply = request_submit(client, subjects, headers, payload.into())
        .await
        .map_err(|e| submit_err(error_chain(&e)))?;
    match wire::decode::<SubmitReply>("submit reply", &reply.payload)
        .map_err(|e| submit_err(e.to_string()))?
    {
        SubmitReply::Accepted { .. } => {}
        SubmitReply::Refused { message } => {
            return Err(ClientError::Refused {
                proof_id: proof_id.to_string(),
                message,
            });
        }
    }
    let js = async_nats::jetstream::new(client.clone());
    let proofs = nats::proofs_bucket(&js, subjects, nats::Placement::SINGLE).await?;
    let read = || async {
        match stored_evidence(&proofs, Some(store), &proof_id).await {
            // A NATS server lost mid-read: the next look reads again.
            Err(e) if e.is_transient() => {
                tracing::warn!(proof_id = %proof_id, error = %e, "failed to read the evidence; reading again");
                Ok(None)
            }
            other => other,
        }
    };
    // A coordinator that takes the proof over publishes again the results it found applied:
    // each job is said once.
    let mut said = std::collections::HashSet::new();
    follow(
        &mut events,
        |event| match event {
            ProgressEvent::JobFinished {
                done,
                total,
                result,
                cached,
            } => {
                if said.insert(result.index) {
                    progress.job_finished(done, total, &result, cached);
                }
                Step::Ignore
            }
            // A finished event only wakes the CLI: the verdict is read from the proofs bucket,
            // which only the coordinator may write, never from the message, which anyone who
            // may publish on the progress subject could have sent.
            ProgressEvent::Finished { .. } | ProgressEvent::FinishedStored { .. } => Step::Look,
            // A job submission's end: never on a proof's subject but by a forger, so it wakes
            // the CLI to read the bucket, as a finished event does.
            ProgressEvent::JobsFinished { .. } => Step::Look,
            ProgressEvent::Cancelled => Step::Stop(ClientError::Cancelled {
                proof_id: proof_id.to_string(),
            }),
            ProgressEvent::Halted { reason } => {
                progress.halted(&reason);
                Step::Ignore
            }
            ProgressEvent::Resumed => {
                progress.resumed();
                Step::Ignore
            }
        },
        read,
        || submit_err("the progress subscription closed".into()),
    )
    .await
}

/// What a follower does with one progress event.
pub(crate) enum Step<E> {
    /// Read the record now: the event says it may be there.
    Look,
    Ignore,
    Stop(E),
}

/// Follows a submission's progress until `read` finds what it waits for in the proofs bucket,
/// which only the coordinator writes: an event only says when to look (`on_event`), and the
/// bucket is read every 2 s regardless, so neither a lost nor a forged event decides anything.
/// When the subscription closes, the bucket is read once more before `closed`.
pub(crate) async fn follow<T, E, R>(
    events: &mut async_nats::Subscriber,
    mut on_event: impl FnMut(ProgressEvent) -> Step<E>,
    read: impl Fn() -> R,
    closed: impl FnOnce() -> E,
) -> Result<T, E>
where
    R: std::future::Future<Output = Result<Option<T>, E>>,
{
    let mut poll = tokio::time::interval(Duration::from_secs(2));
    loop {
        let look = tokio::select! {
            event = events.next() => {
                let Some(event) = event else { break };
                match wire::decode::<ProgressEvent>("progress", &event.payload) {
                    Ok(event) => match on_event(event) {
                        Step::Look => true,
                        Step::Ignore => false,
                        Step::Stop(e) => return Err(e),
                    },
                    Err(e) => {
                        tracing::warn!(error = %e, "ignoring an unreadable progress message");
                        false
                    }
                }
            }
            _ = poll.tick() => true,
        };
        if look && let Some(found) = read().await? {
            return Ok(found);
        }
    }
    read().await?.ok_or_else(closed)
}

/// Why a submit request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum SubmitRequestError {
    /// Requests went unanswered for this many seconds.
    #[error("no reply within {0} s")]
    NoReply(u64),
    /// NATS said no coordinator listened, for this many seconds.
    #[error("no coordinator answered for {0} s (it may be restarting)")]
    NoCoordinator(u64),
    /// The request failed in another way NATS reports.
    #[error(transparent)]
    Request(#[from] async_nats::RequestError),
}

/// Sends a submit request, waiting out a coordinator restart: while no coordinator listens
/// (NATS answers "no responders", so nobody received the request and sending it again is
/// safe), or a request goes unanswered (a coordinator died, or a NATS server was lost, before
/// it replied: a coordinator takes the same submission again as the proof it accepted), it is
/// sent again every second for up to 30 s.
pub async fn request_submit(
    client: &async_nats::Client,
    subjects: &Subjects,
    headers: async_nats::HeaderMap,
    payload: bytes::Bytes,
) -> Result<async_nats::Message, SubmitRequestError> {
    const PATIENCE: Duration = Duration::from_secs(30);
    let started = tokio::time::Instant::now();
    loop {
        let reply = tokio::time::timeout(
            PATIENCE,
            client.request_with_headers(subjects.submit(), headers.clone(), payload.clone()),
        )
        .await
        .map_err(|_| SubmitRequestError::NoReply(PATIENCE.as_secs()))?;
        match reply {
            Err(e)
                if matches!(
                    e.kind(),
                    async_nats::RequestErrorKind::NoResponders
                        | async_nats::RequestErrorKind::TimedOut
                ) =>
            {
                if started.elapsed() >= PATIENCE {
                    return Err(SubmitRequestError::NoCoordinator(PATIENCE.as_secs()));
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            other => return Ok(other?),
        }
    }
}

/// The encoded submit request: the submission itself when it fits in one message, else a
/// reference to it in the store.
async fn submit_request(
    client: &async_nats::Client,
    store: &dyn ArtifactStore,
    submission: &ProofSubmission,
) -> Result<Vec<u8>, ClientError> {
    let proof_id = &submission.proof_id;
    let encode_err = |e: wire::WireError| ClientError::Submit {
        proof_id: proof_id.to_string(),
        message: e.to_string(),
    };
    let inline = wire::encode(
        "submit request",
        &SubmitRequest::Inline(Box::new(submission.clone())),
    )
    .map_err(encode_err)?;
    if inline.len() <= offload::client_limit(client) {
        return Ok(inline);
    }
    let body = wire::encode("proof submission", submission).map_err(encode_err)?;
    tracing::info!(proof_id = %proof_id, bytes = body.len(), "submission exceeds one message; passing it through the store");
    let stored = offload::put(store, "submission", &submission_key(proof_id), body)
        .await
        .map_err(|source| ClientError::Offload {
            proof_id: proof_id.to_string(),
            what: "submission",
            source: Box::new(source),
        })?;
    wire::encode(
        "submit request",
        &SubmitRequest::Stored {
            proof_id: proof_id.clone(),
            submission: stored,
        },
    )
    .map_err(encode_err)
}

async fn stored_report(
    store: &dyn ArtifactStore,
    proof_id: &ProofId,
    blob: &ArtifactRef,
) -> Result<Evidence, ClientError> {
    let bytes = offload::get(store, blob, offload::ReadCap::evidence())
        .await
        .map_err(|source| ClientError::Offload {
            proof_id: proof_id.to_string(),
            what: "evidence",
            source: Box::new(source),
        })?;
    parse_evidence(proof_id, &bytes)
}

impl ClientError {
    /// Whether asking again may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Unanswered { .. })
    }
}

fn parse_evidence(proof_id: &ProofId, bytes: &[u8]) -> Result<Evidence, ClientError> {
    serde_json::from_slice(bytes).map_err(|e| ClientError::Read {
        proof_id: proof_id.to_string(),
        message: format!("invalid evidence: {e}"),
    })
}

/// A finished proof's evidence: from the KV bucket, or from `store` when it was too big for a
/// KV value (without a store, such evidence is an error that says which flag to add).
pub async fn stored_evidence(
    proofs: &async_nats::jetstream::kv::Store,
    store: Option<&dyn ArtifactStore>,
    proof_id: &ProofId,
) -> Result<Option<Evidence>, ClientError> {
    let read_err = |message: String| ClientError::Read {
        proof_id: proof_id.to_string(),
        message,
    };
    let unanswered = |message: String| ClientError::Unanswered {
        proof_id: proof_id.to_string(),
        message,
    };
    match proofs.get(keys::evidence(proof_id)).await {
        Ok(Some(bytes)) => return parse_evidence(proof_id, &bytes).map(Some),
        Ok(None) => {}
        Err(e) => return Err(unanswered(e.to_string())),
    }
    let blob = match proofs.get(keys::evidence_ref(proof_id)).await {
        Ok(Some(bytes)) => wire::decode::<ArtifactRef>("evidence reference", &bytes)
            .map_err(|e| read_err(e.to_string()))?,
        Ok(None) => return Ok(None),
        Err(e) => return Err(unanswered(e.to_string())),
    };
    let Some(store) = store else {
        return Err(read_err(format!(
            "its evidence is in the artifact store at {} (hint: pass --store or set ASSAY_STORE)",
            blob.key
        )));
    };
    stored_report(store, proof_id, &blob).await.map(Some)
}

/// How far a proof has come: results of its own jobs, then of its mutation check's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// The proof's own jobs that have results.
    pub jobs_done: usize,
    /// The mutation check's jobs that have results.
    pub mutation_done: usize,
    /// Of `jobs_done`, those the fleet's result cache answered.
    pub from_cache: usize,
}

/// A proof's record and how many of its jobs have results, for `assay status`.
pub async fn status(
    proofs: &async_nats::jetstream::kv::Store,
) -> Result<Vec<(ProofRecord, Progress)>, ClientError> {
    let read_err = |message: String| ClientError::Read {
        proof_id: "*".into(),
        message,
    };
    let mut keys_stream = proofs.keys().await.map_err(|e| read_err(e.to_string()))?;
    let mut all_keys = Vec::new();
    while let Some(key) = keys_stream.next().await {
        if let Ok(key) = key {
            all_keys.push(key);
        }
    }
    let mut out = Vec::new();
    for key in &all_keys {
        let Some(proof_id) = keys::proof_of_record(key) else {
            continue;
        };
        let Ok(Some(bytes)) = proofs.get(key).await else {
            continue;
        };
        let record: ProofRecord =
            wire::decode("proof record", &bytes).map_err(|e| read_err(e.to_string()))?;
        let prefix = format!("{proof_id}.result.");
        let cached = format!("{proof_id}.cached.");
        let mut progress = Progress {
            from_cache: all_keys.iter().filter(|k| k.starts_with(&cached)).count(),
            ..Progress::default()
        };
        for index in all_keys
            .iter()
            .filter_map(|k| k.strip_prefix(&prefix)?.parse::<u32>().ok())
        {
            if index < record.job_count {
                progress.jobs_done += 1;
            } else {
                progress.mutation_done += 1;
            }
        }
        out.push((record, progress));
    }
    out.sort_by_key(|(r, _)| r.submitted_at);
    Ok(out)
}

/// Asks the coordinator to cancel `proof_id` and returns its answer (within 10 s).
pub async fn cancel(
    client: &async_nats::Client,
    subjects: &Subjects,
    proof_id: &ProofId,
) -> Result<CancelReply, ClientError> {
    let err = |message: String| ClientError::Submit {
        proof_id: proof_id.to_string(),
        message,
    };
    let payload = wire::encode(
        "cancel request",
        &CancelRequest {
            proof_id: proof_id.clone(),
        },
    )
    .map_err(|e| err(e.to_string()))?;
    let reply = tokio::time::timeout(
        Duration::from_secs(10),
        client.request(subjects.cancel(), payload.into()),
    )
    .await
    .map_err(|_| err("no reply within 10 s".into()))?
    .map_err(|e| err(e.to_string()))?;
    wire::decode("cancel reply", &reply.payload).map_err(|e| err(e.to_string()))
}
