//! The fleet-wide halt as this coordinator sees it: read from its KV key, handed to the
//! admitter, and told to each running proof's CLI.

use crate::Shared;
use crate::fleet_halt::read_halt;
use crate::progress::publish_progress;
use assay_common::ProofId;
use assay_common::fleet::ProgressEvent;

pub(super) fn current_halt(shared: &Shared) -> Option<String> {
    // A poisoned lock still halts: failing open would admit.
    shared.halt.lock().map_or_else(
        |_| Some("the halt state is unreadable".into()),
        |r| r.clone(),
    )
}

/// Reads the halt key and acts on its current value (a halt, its end, or no change).
pub(super) async fn recheck_halt(shared: &Shared) {
    match read_halt(&shared.proofs).await {
        Ok(reason) => halt_changed(shared, reason).await,
        Err(e) => tracing::warn!(error = %e, "failed to read the halt key"),
    }
}

/// The fleet-wide halt was set or lifted: admission stops or goes on for every proof, and
/// each running proof's CLI hears of it.
pub(super) async fn halt_changed(shared: &Shared, reason: Option<String>) {
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
