//! Applying results: each result checked against its proof's plan, resolved from the store when
//! offloaded, recorded once per job id (a fenced create: only by the leader, only where no
//! result is yet) and handed to the proof.

use crate::lease::FenceError;
use crate::{Claim, Shared};
use assay_common::JobId;
use assay_common::fault;
use assay_common::fleet::{ResultMessage, keys};
use assay_common::wire;
use assay_transport::error_chain::error_chain;
use assay_transport::offload;
use async_nats::jetstream;
use std::sync::atomic::Ordering;

/// Applies one result: the first for its job id is stored and handed to the proof; any later
/// one (redelivery, a presumed-dead worker finishing after all) is dropped and logged.
pub(super) async fn apply_result(shared: &Shared, message: jetstream::Message) {
    // A coordinator past its lease leaves every result, unacknowledged, to its successor: even
    // a result it would drop may belong to a proof the successor drives.
    if !shared.fence.holds() {
        return;
    }
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
    // One writer per result key in this leadership. A second delivery while the first is
    // still being written is left unacknowledged: it may be the same stream message delivered
    // again (its ack wait ran out while a NATS server was lost), and acking it would remove the
    // message the first write may yet fail to record. Once a result is written, any other
    // delivery is a duplicate.
    match shared.claim(&proof_id, result.index) {
        Claim::Taken => {}
        Claim::InProgress => return,
        Claim::Written => {
            shared
                .metrics
                .results_dropped
                .fetch_add(1, Ordering::Relaxed);
            tracing::info!(proof_id = %proof_id, job_id = %result.job_id, "dropping a duplicate result");
            let _ = message.ack().await;
            return;
        }
    }
    // The message as it came, inline or naming the stored result: either fits a KV value.
    match shared
        .fence
        .create(
            &keys::result(&proof_id, result.index),
            message.payload.clone(),
        )
        .await
    {
        Ok(_) => {
            shared.written(&proof_id, result.index);
            shared
                .metrics
                .results_applied
                .fetch_add(1, Ordering::Relaxed);
            let _ = sender.send(result);
        }
        Err(FenceError::Exists { .. }) => {
            shared.written(&proof_id, result.index);
            shared
                .metrics
                .results_dropped
                .fetch_add(1, Ordering::Relaxed);
            tracing::info!(proof_id = %proof_id, job_id = %result.job_id, "dropping a duplicate result");
        }
        Err(e) => {
            // Handed back: the stream delivers it again soon, to this leader or its
            // successor, and the create is tried again (without the hand-back, after the ack
            // wait).
            shared.release(&proof_id, result.index);
            tracing::warn!(proof_id = %proof_id, error = %error_chain(&e), "failed to record a result; it will be redelivered");
            let again = jetstream::AckKind::Nak(Some(fault::RESULT_RECORD_RETRY));
            if let Err(e) = message.ack_with(again).await {
                tracing::debug!(error = %e, "failed to hand a result back; it comes again after the ack wait");
            }
            return;
        }
    }
    if let Err(e) = message.ack().await {
        tracing::warn!(error = %e, "failed to acknowledge a result");
    }
}
