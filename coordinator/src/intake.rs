//! Intake: a submission decoded, its stored copy read and checked, its record created, its
//! proof started; and, at start, the unfinished proofs of an earlier coordinator resumed.

use crate::halt::current_halt;
use crate::lease::FenceError;
use crate::progress::publish_progress;
use crate::proof::{proof_span, start_proof, stored_submission};
use crate::{ServiceError, Shared, Tasks};
use assay_common::fleet::{
    ProgressEvent, ProofRecord, ProofStatus, ProofSubmission, SubmitReply, SubmitRequest, keys,
};
use assay_common::wire;
use assay_common::{JobId, ProofId};
use assay_transport::error_chain::error_chain;
use assay_transport::nats::FleetError;
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
    // The jobs after the plan: the diff coverage run, then the mutation check's.
    let diff_coverage_jobs = u32::from(!submission.diff_hunks.is_empty());
    let mutation_job_count = submission
        .mutation
        .as_ref()
        .map_or(0, |m| {
            u32::try_from(assay_engine::mutation::check::job_count(m)).unwrap_or(u32::MAX)
        })
        .saturating_add(diff_coverage_jobs);
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

pub(super) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// Whether the proof already recorded under `record`'s id holds the very same submission.
async fn same_submission(shared: &Shared, record: &ProofRecord) -> bool {
    let key = keys::record(&record.submission.proof_id);
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

/// What a submission must hold before it is recorded: an id safe in subjects and keys, and jobs
/// that are this proof's, numbered in plan order. A job naming another proof (or another job's
/// id) would let its result take a slot of a proof it does not belong to.
pub(super) fn check_submission(
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
