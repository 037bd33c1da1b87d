//! The fleet-wide halt of `assay test --cluster` (whose jobs travel through
//! [`crate::cluster_queue::ClusterQueue`]): a key in the proofs bucket, watched so the admission
//! gate reads it without a round trip.

use assay_engine::suite::halt::AdmissionGate;
use assay_transport::nats::FleetError;
use async_nats::jetstream::kv;
use futures::StreamExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The key of the fleet-wide halt in the proofs bucket; its value is the reason.
pub const HALT_KEY: &str = assay_common::fleet::keys::HALT;

/// The fleet-wide halt as an [`AdmissionGate`], kept current by a watch on its key.
pub struct FleetHalt {
    reason: Arc<Mutex<Option<String>>>,
    watcher: tokio::task::JoinHandle<()>,
}

/// How often a halt watcher reads the halt key's current value even when its watch said
/// nothing: a watch whose consumer was disturbed (a delivery it did not ask for, a lost
/// connection) may miss a change, and the key is what counts.
pub const HALT_RECHECK: Duration = Duration::from_secs(2);

impl FleetHalt {
    /// Reads the halt key and keeps watching it, so the gate follows every change.
    pub async fn watch(proofs: kv::Store) -> Result<Self, FleetError> {
        let mut watch = proofs
            .watch(HALT_KEY)
            .await
            .map_err(|e| FleetError::jetstream(format!("watch the halt key {HALT_KEY}"), e))?;
        let reason = Arc::new(Mutex::new(read_halt(&proofs).await?));
        let shared = reason.clone();
        let watcher = tokio::spawn(async move {
            let mut recheck = tokio::time::interval(HALT_RECHECK);
            loop {
                tokio::select! {
                    entry = watch.next() => match entry {
                        Some(Ok(entry)) if !is_halt_entry(&proofs, &entry) => continue,
                        Some(Ok(_)) => {}
                        Some(Err(e)) => {
                            tracing::warn!(error = %e, "failed to read a change of the halt key");
                        }
                        None => {
                            // The watch ended: the recheck alone keeps the gate current.
                            recheck.tick().await;
                        }
                    },
                    _ = recheck.tick() => {}
                }
                // Whatever the watch said, the gate is the key's current value.
                match read_halt(&proofs).await {
                    Ok(value) => {
                        if let Ok(mut reason) = shared.lock() {
                            *reason = value;
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "failed to read the halt key"),
                }
            }
        });
        Ok(Self { reason, watcher })
    }
}

impl Drop for FleetHalt {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

impl AdmissionGate for FleetHalt {
    fn stop_reason(&self) -> Option<String> {
        // A poisoned lock still halts: failing open would admit.
        self.reason.lock().map_or_else(
            |_| Some("the halt state is unreadable".into()),
            |r| r.clone(),
        )
    }
}

/// Whether `entry`, delivered to a watch of the halt key of `proofs`, is a change of that key:
/// exactly the halt key of this bucket, a put (a halt) or a delete or purge (a resume).
/// Anything else is ignored with a warning: the watch's inbox can receive deliveries it did
/// not ask for (a push consumer someone else made on the bucket's stream may deliver there),
/// and those must not halt or resume anything.
pub fn is_halt_entry(proofs: &kv::Store, entry: &kv::Entry) -> bool {
    let ours = entry.key == HALT_KEY && entry.bucket == proofs.name;
    if !ours {
        tracing::warn!(
            key = %entry.key,
            bucket = %entry.bucket,
            revision = entry.revision,
            "ignoring a delivery to the halt watch that is not the halt key of the proofs bucket (a consumer the watch did not create may deliver to its inbox)"
        );
    }
    ours
}

/// The halt key's current value: the reason of a halt, or `None` when none is set. A halt
/// written without a reason still halts (failing open would admit), with a reason saying so.
pub async fn read_halt(proofs: &kv::Store) -> Result<Option<String>, FleetError> {
    let value = proofs
        .get(HALT_KEY)
        .await
        .map_err(|e| FleetError::jetstream(format!("read the halt key {HALT_KEY}"), e))?;
    Ok(value.map(|bytes| {
        let reason = String::from_utf8_lossy(&bytes).trim().to_owned();
        if reason.is_empty() {
            "halted without a reason".to_owned()
        } else {
            reason
        }
    }))
}

/// Said with a failed write of the halt key: the shipped NATS permissions give that write to
/// the operator's and the coordinator's users only.
const NEEDS_WRITE: &str = " (a halt writes the proofs bucket's halt key: under the fleet's NATS permissions only the operator's and the coordinator's users may, so run halt and resume with the operator's credentials)";

/// Sets the fleet-wide halt.
pub async fn set_halt(proofs: &kv::Store, reason: &str) -> Result<(), FleetError> {
    proofs
        .put(HALT_KEY, reason.trim().to_owned().into_bytes().into())
        .await
        .map_err(|e| {
            FleetError::jetstream(format!("write the halt key {HALT_KEY}{NEEDS_WRITE}"), e)
        })?;
    Ok(())
}

/// Lifts the fleet-wide halt; `false` when none was set. The key is deleted even then: the
/// delete is a change every halt watcher hears of and answers by reading the key again, so a
/// watcher that believes in a halt the key does not hold (one it was told of by a delivery it
/// did not ask for) lifts it too.
pub async fn clear_halt(proofs: &kv::Store) -> Result<bool, FleetError> {
    let was_set = read_halt(proofs).await?.is_some();
    proofs.delete(HALT_KEY).await.map_err(|e| {
        FleetError::jetstream(format!("delete the halt key {HALT_KEY}{NEEDS_WRITE}"), e)
    })?;
    Ok(was_set)
}
