//! Progress for the submitting CLI: the engine's events published on the proof's subject.

use crate::Shared;
use assay_common::ProofId;
use assay_common::fleet::ProgressEvent;
use assay_common::wire;
use assay_engine::progress::{ProgressSink, ProofEvent};
use tokio::sync::mpsc;

/// Publishes progress for the CLI; a sync sink feeding an async publisher.
pub(super) struct NatsProgress {
    pub(super) events: mpsc::UnboundedSender<ProgressEvent>,
}

impl ProgressSink for NatsProgress {
    fn event(&self, event: ProofEvent<'_>) {
        if let ProofEvent::JobFinished {
            done,
            total,
            result,
            cached,
            ..
        } = event
        {
            let _ = self.events.send(ProgressEvent::JobFinished {
                done: done as u32,
                total: total as u32,
                result: Box::new(result.clone()),
                cached,
            });
        }
    }
}

pub(super) async fn publish_progress(shared: &Shared, proof_id: &ProofId, event: &ProgressEvent) {
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
