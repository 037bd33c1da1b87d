//! The fleet-wide halt of `assay test --cluster` (whose jobs travel through
//! [`crate::cluster_queue::ClusterQueue`]): a key in the proofs bucket, watched so the admission
//! gate reads it without a round trip.

use super::halt::AdmissionGate;
use assay_transport::nats::FleetError;
use async_nats::jetstream::kv;
use futures::StreamExt;
use std::sync::{Arc, Mutex};

/// The key of the fleet-wide halt in the proofs bucket; its value is the reason.
pub const HALT_KEY: &str = assay_common::fleet::keys::HALT;

/// The fleet-wide halt as an [`AdmissionGate`], kept current by a watch on its key.
pub struct FleetHalt {
    reason: Arc<Mutex<Option<String>>>,
    watcher: tokio::task::JoinHandle<()>,
}

impl FleetHalt {
    pub async fn watch(proofs: kv::Store) -> Result<Self, FleetError> {
        let mut watch = proofs
            .watch(HALT_KEY)
            .await
            .map_err(|e| FleetError::jetstream(format!("watch the halt key {HALT_KEY}"), e))?;
        let reason = Arc::new(Mutex::new(read_halt(&proofs).await?));
        let shared = reason.clone();
        let watcher = tokio::spawn(async move {
            while let Some(Ok(entry)) = watch.next().await {
                let value = match entry.operation {
                    kv::Operation::Put => Some(String::from_utf8_lossy(&entry.value).into_owned()),
                    kv::Operation::Delete | kv::Operation::Purge => None,
                };
                if let Ok(mut reason) = shared.lock() {
                    *reason = value;
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

async fn read_halt(proofs: &kv::Store) -> Result<Option<String>, FleetError> {
    let value = proofs
        .get(HALT_KEY)
        .await
        .map_err(|e| FleetError::jetstream(format!("read the halt key {HALT_KEY}"), e))?;
    Ok(value.map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
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

/// Lifts the fleet-wide halt; `false` when none was set.
pub async fn clear_halt(proofs: &kv::Store) -> Result<bool, FleetError> {
    let was_set = read_halt(proofs).await?.is_some();
    if was_set {
        proofs.delete(HALT_KEY).await.map_err(|e| {
            FleetError::jetstream(format!("delete the halt key {HALT_KEY}{NEEDS_WRITE}"), e)
        })?;
    }
    Ok(was_set)
}
