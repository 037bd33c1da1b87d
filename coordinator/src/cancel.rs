//! Cancel: a running proof's status set, its gate closed and its queued jobs purged.

use crate::Shared;
use crate::progress::publish_progress;
use crate::proof::set_status;
use assay_common::fleet::{
    CancelReply, CancelRequest, ProgressEvent, ProofRecord, ProofStatus, keys,
};
use assay_common::wire;

pub(super) async fn cancel_proof(shared: &Shared, payload: &[u8]) -> CancelReply {
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
