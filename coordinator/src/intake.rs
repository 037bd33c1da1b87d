//! Intake: a submission decoded, its stored copy read and checked, its record created, its
//! proof started; and, at start, the unfinished proofs of an earlier coordinator resumed.

use crate::halt::current_halt;
use crate::lease::FenceError;
use crate::progress::publish_progress;
use crate::proof::{proof_span, start_proof, stored_submission};
use crate::{ServiceError, Shared, Tasks};
use assay_common::TreeId;
use assay_common::fleet::{
    JobSubmission, MAX_SUBMITTED_JOBS, MAX_SUBMITTED_TREES, ProgressEvent, ProofRecord,
    ProofStatus, ProofSubmission, Submission, SubmitReply, SubmitRequest, keys, tree_digest_key,
};
use assay_common::job::JobSpec;
use assay_common::wire;
use assay_common::{JobId, ProofId};
use assay_transport::error_chain::error_chain;
use assay_transport::nats::FleetError;
use assay_transport::store::ArtifactStore;
use assay_transport::trace_context;
use futures::StreamExt;
use std::time::{SystemTime, UNIX_EPOCH};

pub(super) async fn accept(
    shared: &Shared,
    request: &async_nats::Message,
    tasks: &Tasks,
) -> SubmitReply {
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
        SubmitRequest::Inline(submission) => (Submission::Proof(submission), None),
        SubmitRequest::Jobs(jobs) => (Submission::Jobs(*jobs), None),
        SubmitRequest::Stored {
            proof_id,
            submission,
        } => match stored_submission(shared, &submission).await {
            Ok(full) if full.proof_id == proof_id => {
                (Submission::Proof(Box::new(full)), Some(submission))
            }
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
    let checked = match &submission {
        Submission::Proof(proof) => check_submission(proof, stored.as_ref()),
        Submission::Jobs(jobs) => check_job_submission(jobs, shared.store.as_ref()).await,
    };
    if let Err(e) = checked {
        tracing::warn!(proof_id = %submission.id(), error = %e, "refusing a submission");
        return SubmitReply::Refused {
            message: e.to_string(),
        };
    }
    let proof_id = submission.id().clone();
    let job_count = submission.jobs().len() as u32;
    let (submission, mutation_job_count) = match submission {
        Submission::Proof(proof) => {
            let (proof, after) = proof_record_parts(*proof, stored.is_some());
            (Submission::Proof(Box::new(proof)), after)
        }
        jobs @ Submission::Jobs(_) => (jobs, 0),
    };
    let record = ProofRecord {
        submission,
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
    match shared
        .fence
        .create(&keys::record(&proof_id), bytes.into())
        .await
    {
        Ok(_) => {}
        // The same submission again: a CLI whose request went unanswered (its coordinator
        // died, or a NATS server was lost, before the reply) sends it again. The proof is
        // already recorded, so a leader drives it; the CLI follows it as if first accepted.
        Err(FenceError::Exists { .. }) if same_submission(shared, &record).await => {
            tracing::info!(proof_id = %proof_id, "a submission sent again is the proof already accepted");
            return SubmitReply::Accepted { proof_id };
        }
        Err(e) => {
            return SubmitReply::Refused {
                message: format!("failed to record proof {proof_id}: {}", error_chain(&e)),
            };
        }
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

/// A proof as its record keeps it, and the count of its jobs after the plan: the diff
/// coverage run, then the mutation check's. A record names a stored submission rather than
/// repeat it (`stored`): a KV value has the same limit as a message.
fn proof_record_parts(submission: ProofSubmission, stored: bool) -> (ProofSubmission, u32) {
    let diff_coverage_jobs = u32::from(!submission.diff_hunks.is_empty());
    let after = submission
        .mutation
        .as_ref()
        .map_or(0, |m| {
            u32::try_from(assay_engine::mutation::check::job_count(m)).unwrap_or(u32::MAX)
        })
        .saturating_add(diff_coverage_jobs);
    let kept = if stored {
        ProofSubmission {
            jobs: Vec::new(),
            mutation: None,
            ..submission
        }
    } else {
        submission
    };
    (kept, after)
}

pub(super) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// Whether the proof already recorded under `record`'s id holds the very same submission.
async fn same_submission(shared: &Shared, record: &ProofRecord) -> bool {
    let key = keys::record(record.submission.id());
    match shared.fence.read(&key).await {
        Ok(Some(bytes)) => wire::decode::<ProofRecord>("proof record", &bytes)
            .is_ok_and(|held| held.submission == record.submission && held.stored == record.stored),
        _ => false,
    }
}

/// Why a submission is refused before it is recorded.
#[derive(Debug, thiserror::Error)]
pub(super) enum SubmissionError {
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
    #[error("job submission {0} has no jobs")]
    NoJobs(ProofId),
    #[error(
        "job submission {run_id} has {jobs} jobs, over the {MAX_SUBMITTED_JOBS} one submission may carry"
    )]
    TooManySubmittedJobs { run_id: ProofId, jobs: usize },
    #[error(
        "job submission {run_id} names {trees} trees, over the {MAX_SUBMITTED_TREES} one submission may name"
    )]
    TooManyTrees { run_id: ProofId, trees: usize },
    #[error(
        "job {job_id} of job submission {run_id} runs on tree {tree}, which the submission does not declare"
    )]
    UndeclaredTree {
        run_id: ProofId,
        job_id: JobId,
        tree: TreeId,
    },
    #[error(
        "job submission {run_id} names tree {tree}, which is not in the artifact store {store} (hint: the CLI uploads trees before submitting; check both use the same store)"
    )]
    UnknownTree {
        run_id: ProofId,
        tree: TreeId,
        /// The coordinator's store, for a submitter that uploaded to another.
        store: String,
    },
    #[error("job submission {run_id}: tree {tree} could not be looked up in the artifact store")]
    TreeUnreadable {
        run_id: ProofId,
        tree: TreeId,
        #[source]
        source: Box<assay_transport::store::StoreError>,
    },
    #[error("job {job_id} of {proof_id} appears twice (again at position {position})")]
    DuplicateJob {
        proof_id: ProofId,
        job_id: JobId,
        position: usize,
    },
    #[error("proof {proof_id}'s mutation check: {source}")]
    Mutation {
        proof_id: ProofId,
        source: assay_common::mutation_plan::SchemaSourceError,
    },
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
    #[error(
        "job {job_id} of proof {proof_id} carries {bytes} bytes of edits, over the {max} a job may carry",
        max = assay_common::mutation_plan::MAX_SCHEMA_SOURCES_BYTES
    )]
    EditsTooLarge {
        proof_id: ProofId,
        job_id: JobId,
        bytes: usize,
    },
}

/// What a proof must hold before it is recorded: an id safe in subjects and keys, its stored
/// copy at its own key, jobs that are this proof's in plan order, and a mutation check whose
/// schema sources are bounded.
pub(super) fn check_submission(
    submission: &ProofSubmission,
    stored: Option<&assay_common::job::ArtifactRef>,
) -> Result<(), SubmissionError> {
    let proof_id = &submission.proof_id;
    check_id(proof_id)?;
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
    check_jobs(proof_id, &submission.jobs)?;
    if let Some(setup) = &submission.mutation {
        setup
            .check_schema_sources()
            .map_err(|source| SubmissionError::Mutation {
                proof_id: proof_id.clone(),
                source,
            })?;
    }
    Ok(())
}

/// What a job submission must hold before it is recorded: an id safe in subjects and keys,
/// between one and [`MAX_SUBMITTED_JOBS`] jobs in plan order, and only trees it declares, each
/// of which is in the store (a job on a tree no worker can fetch is refused here, not run).
pub(super) async fn check_job_submission(
    submission: &JobSubmission,
    store: &dyn ArtifactStore,
) -> Result<(), SubmissionError> {
    let run_id = &submission.run_id;
    check_id(run_id)?;
    if submission.jobs.is_empty() {
        return Err(SubmissionError::NoJobs(run_id.clone()));
    }
    if submission.jobs.len() > MAX_SUBMITTED_JOBS {
        return Err(SubmissionError::TooManySubmittedJobs {
            run_id: run_id.clone(),
            jobs: submission.jobs.len(),
        });
    }
    if submission.trees.len() > MAX_SUBMITTED_TREES {
        return Err(SubmissionError::TooManyTrees {
            run_id: run_id.clone(),
            trees: submission.trees.len(),
        });
    }
    check_jobs(run_id, &submission.jobs)?;
    if let Some(job) = submission
        .jobs
        .iter()
        .find(|job| !submission.trees.contains(&job.tree))
    {
        return Err(SubmissionError::UndeclaredTree {
            run_id: run_id.clone(),
            job_id: job.job_id.clone(),
            tree: job.tree.clone(),
        });
    }
    for tree in &submission.trees {
        match store.get(&tree_digest_key(tree)).await {
            Ok(Some(_)) => {}
            Ok(None) => {
                return Err(SubmissionError::UnknownTree {
                    run_id: run_id.clone(),
                    tree: tree.clone(),
                    store: store.url().to_owned(),
                });
            }
            Err(source) => {
                return Err(SubmissionError::TreeUnreadable {
                    run_id: run_id.clone(),
                    tree: tree.clone(),
                    source: Box::new(source),
                });
            }
        }
    }
    Ok(())
}

fn check_id(proof_id: &ProofId) -> Result<(), SubmissionError> {
    if proof_id.is_well_formed() {
        Ok(())
    } else {
        Err(SubmissionError::ProofId(proof_id.to_string()))
    }
}

/// Jobs that are `proof_id`'s, each once, numbered in plan order, with bounded edits. A job
/// naming another proof (or another job's id) would let its result take a slot of a run it
/// does not belong to.
fn check_jobs(proof_id: &ProofId, jobs: &[JobSpec]) -> Result<(), SubmissionError> {
    if u32::try_from(jobs.len()).is_err() {
        return Err(SubmissionError::TooManyJobs(proof_id.clone()));
    }
    let mut seen = std::collections::HashSet::with_capacity(jobs.len());
    for (position, job) in jobs.iter().enumerate() {
        if job.proof_id != *proof_id {
            return Err(SubmissionError::ForeignJob {
                proof_id: proof_id.clone(),
                job_id: job.job_id.clone(),
                other: job.proof_id.clone(),
            });
        }
        if !seen.insert(&job.job_id) {
            return Err(SubmissionError::DuplicateJob {
                proof_id: proof_id.clone(),
                job_id: job.job_id.clone(),
                position,
            });
        }
        // Edits are applied, and a mutant's parsed, on the worker: bounded as schema sources
        // are, before anything reads them.
        let edits: usize = job
            .rewrites
            .iter()
            .chain(&job.edit)
            .map(|edit| edit.replacement.len())
            .sum();
        if edits > assay_common::mutation_plan::MAX_SCHEMA_SOURCES_BYTES {
            return Err(SubmissionError::EditsTooLarge {
                proof_id: proof_id.clone(),
                job_id: job.job_id.clone(),
                bytes: edits,
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

pub(super) async fn resume_unfinished(shared: &Shared, tasks: &Tasks) -> Result<(), ServiceError> {
    let mut keys = match shared.proofs.keys().await {
        Ok(keys) => keys,
        Err(e) => return Err(FleetError::request("list proofs", e).into()),
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
                let span = proof_span(record.submission.id());
                span.in_scope(|| tracing::info!("resuming proof"));
                start_proof(shared, record, true, span, tasks);
            }
            Ok(_) => {}
            Err(e) => tracing::error!(key, error = %e, "cannot read a stored proof; leaving it"),
        }
    }
    Ok(())
}
