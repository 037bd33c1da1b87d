//! The leader lease and its fence: of several coordinators, the one holding the lease drives
//! every proof; the others wait to take over. Active/standby rather than proofs partitioned
//! between coordinators: one driver per proof keeps "a result applied once, a verdict written
//! once" a property of one process, and a standby costs only its idle memory.
//!
//! The lease is the KV key [`keys::LEASE`], renewed by compare-and-set on its revision every
//! quarter of its time to live; a standby that sees the same revision for a whole time to live
//! takes it by compare-and-set. The winner then writes [`keys::EPOCH`], and every write it makes
//! to the proofs bucket afterwards is a publish that the server applies only while that key's
//! last sequence is still the one it wrote (`Nats-Expected-Last-Subject-Sequence` on the
//! epoch's subject). A coordinator that was paused past its lease and wakes up therefore writes
//! nothing: it sees its local deadline passed, and had it not, the server refuses the write.
//! A leader whose lease lapsed because the bucket could not be written (a NATS server lost)
//! takes it back at once, by compare-and-set, when no standby has taken it meanwhile.

use assay_common::fleet::keys;
use async_nats::jetstream::{self, context::PublishErrorKind, kv};
use bytes::Bytes;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Why a fenced write did not happen.
#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    /// The lease was lost or a later epoch began: another coordinator may lead.
    #[error("this coordinator no longer holds the leader lease (epoch {epoch}); not writing {key}")]
    Deposed {
        /// The epoch this coordinator led in.
        epoch: u64,
        /// The key it was to write.
        key: String,
    },
    /// A create found the key already written.
    #[error("{key} is already written")]
    Exists {
        /// The key found written.
        key: String,
    },
    /// The proofs bucket failed the read or write.
    #[error("failed to write {key} to the proofs bucket")]
    Nats {
        /// The key being read or written.
        key: String,
        /// The bucket's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// What the leader holds: the lease key's current revision and until when it may act on it.
struct Held {
    revision: u64,
    /// Past this instant (a monotonic clock, which goes on while the process is stopped) the
    /// lease may have passed to a standby: the holder writes nothing more.
    valid_until: Instant,
    lost: bool,
}

/// The leader's claim, shared by its writes and its renewal.
#[derive(Clone)]
pub struct Fence {
    js: jetstream::Context,
    proofs: kv::Store,
    ttl: Duration,
    epoch: u64,
    held: Arc<Mutex<Held>>,
    /// Who holds it: the coordinator's name, written in the lease and the epoch.
    pub holder: Arc<str>,
}

/// The server's code for a write refused because another write expecting the same subject's
/// sequence is still in process (`JSStreamWrongLastSequenceConstantErr`): a collision, not a
/// change of epoch (that is 10071, `PublishErrorKind::WrongLastSequence`).
const EXPECTATION_IN_PROCESS: u64 = 10164;

/// Collisions a fenced write waits out before it fails (a few ms each; a result's write then
/// comes back by redelivery).
const IN_PROCESS_RETRIES: u32 = 200;

fn is_expectation_in_process(error: &jetstream::context::PublishError) -> bool {
    std::error::Error::source(error)
        .and_then(|source| source.downcast_ref::<jetstream::Error>())
        .is_some_and(|error| error.error_code().0 == EXPECTATION_IN_PROCESS)
}

/// How often a standby looks at the lease.
fn poll_interval(ttl: Duration) -> Duration {
    (ttl / 10).clamp(Duration::from_millis(50), Duration::from_millis(500))
}

/// The time a holder allows itself: a quarter of the lease short of its end, so a write sent
/// just before the deadline lands before any standby can have taken over.
fn usable(ttl: Duration) -> Duration {
    ttl - ttl / 4
}

impl Fence {
    /// Waits until this coordinator holds the lease, then opens its epoch.
    pub async fn acquire(
        js: jetstream::Context,
        proofs: kv::Store,
        holder: &str,
        ttl: Duration,
    ) -> Result<Self, FenceError> {
        let value = Bytes::from(holder.to_owned());
        let mut seen: Option<(u64, Instant)> = None;
        let mut announced = false;
        let (revision, sent) = loop {
            let sent = Instant::now();
            let attempt = match proofs.entry(keys::LEASE).await {
                Ok(None) => proofs.create(keys::LEASE, value.clone()).await.ok(),
                // Released by a leader that stopped: free at once. Or still this coordinator's,
                // lapsed while the proofs bucket could not be written (a NATS server lost, the
                // bucket's stream electing its leader): no one has taken it since, so it is
                // taken back at once by compare-and-set on that revision, as a renewal would
                // be, rather than after a whole time to live with no leader.
                Ok(Some(entry))
                    if entry.value.is_empty()
                        || entry.operation != kv::Operation::Put
                        || entry.value == value =>
                {
                    proofs
                        .update(keys::LEASE, value.clone(), entry.revision)
                        .await
                        .ok()
                }
                Ok(Some(entry)) => match seen {
                    Some((revision, since))
                        if revision == entry.revision && since.elapsed() >= ttl =>
                    {
                        proofs
                            .update(keys::LEASE, value.clone(), entry.revision)
                            .await
                            .ok()
                    }
                    Some((revision, _)) if revision == entry.revision => None,
                    _ => {
                        if !announced {
                            tracing::info!(leader = %String::from_utf8_lossy(&entry.value), "standing by: another coordinator holds the lease");
                            announced = true;
                        }
                        seen = Some((entry.revision, Instant::now()));
                        None
                    }
                },
                Err(e) => {
                    tracing::warn!(error = %e, "failed to read the leader lease");
                    None
                }
            };
            if let Some(revision) = attempt {
                break (revision, sent);
            }
            tokio::time::sleep(poll_interval(ttl)).await;
        };
        let epoch = proofs
            .put(keys::EPOCH, value)
            .await
            .map_err(|e| FenceError::Nats {
                key: keys::EPOCH.into(),
                source: e.into(),
            })?;
        Ok(Self {
            js,
            proofs,
            ttl,
            epoch,
            held: Arc::new(Mutex::new(Held {
                revision,
                valid_until: sent + usable(ttl),
                lost: false,
            })),
            holder: holder.into(),
        })
    }

    /// The number of this leadership: it grows each time a coordinator takes the lease.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether this coordinator may still act as the leader.
    pub fn holds(&self) -> bool {
        self.held
            .lock()
            .map(|held| !held.lost && Instant::now() < held.valid_until)
            .unwrap_or(false)
    }

    fn lose(&self) {
        if let Ok(mut held) = self.held.lock() {
            held.lost = true;
        }
    }

    /// Renews the lease until it is lost, then returns: the caller steps down. A renewal that
    /// comes after the local deadline (the process was stopped, or NATS was away too long) is
    /// not attempted: a standby may hold the lease by then.
    pub async fn keep(&self) {
        let value = Bytes::from(self.holder.to_string());
        loop {
            tokio::time::sleep(self.ttl / 4).await;
            let Some(revision) = self
                .held
                .lock()
                .ok()
                .filter(|held| !held.lost && Instant::now() < held.valid_until)
                .map(|held| held.revision)
            else {
                break;
            };
            let sent = Instant::now();
            match self
                .proofs
                .update(keys::LEASE, value.clone(), revision)
                .await
            {
                Ok(revision) => {
                    if let Ok(mut held) = self.held.lock() {
                        held.revision = revision;
                        held.valid_until = sent + usable(self.ttl);
                    }
                }
                Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => break,
                // NATS away for a moment: tried again next time, while the deadline holds.
                Err(e) => tracing::warn!(error = %e, "failed to renew the leader lease"),
            }
        }
        self.lose();
        tracing::warn!(epoch = self.epoch, "leader lease lost: stepping down");
    }

    /// Gives the lease up (a stopping leader), so a standby takes over without waiting for it
    /// to run out.
    pub async fn release(&self) {
        self.lose();
        let revision = self.held.lock().map(|held| held.revision).ok();
        if let Some(revision) = revision
            && let Err(e) = self
                .proofs
                .update(keys::LEASE, Bytes::new(), revision)
                .await
        {
            tracing::info!(error = %e, "leader lease not released; it runs out instead");
        }
    }

    /// Writes `value` at `key` only while this coordinator's epoch is the current one.
    pub async fn put(&self, key: &str, value: Bytes) -> Result<u64, FenceError> {
        let deposed = || FenceError::Deposed {
            epoch: self.epoch,
            key: key.to_owned(),
        };
        if !self.holds() {
            return Err(deposed());
        }
        let prefix = self
            .proofs
            .put_prefix
            .as_ref()
            .unwrap_or(&self.proofs.prefix);
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(
            "Nats-Expected-Last-Subject-Sequence",
            self.epoch.to_string().as_str(),
        );
        headers.insert(
            "Nats-Expected-Last-Subject-Sequence-Subject",
            format!("{prefix}{}", keys::EPOCH).as_str(),
        );
        let failed = |source: Box<dyn std::error::Error + Send + Sync>| FenceError::Nats {
            key: key.to_owned(),
            source,
        };
        let mut attempt = 0u32;
        loop {
            let ack = self
                .js
                .publish_with_headers(format!("{prefix}{key}"), headers.clone(), value.clone())
                .await
                .map_err(|e| failed(e.into()))?
                .await;
            match ack {
                Ok(ack) => return Ok(ack.sequence),
                Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => {
                    self.lose();
                    return Err(deposed());
                }
                // It has been observed that a clustered stream refuses a write whose expected
                // sequence names a subject another write that expects it is still being
                // proposed for: every fenced write names the epoch, so concurrent ones collide.
                // The epoch has not changed; the write is sent again once the other is in.
                Err(e) if is_expectation_in_process(&e) && attempt < IN_PROCESS_RETRIES => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(u64::from(attempt.min(20)))).await;
                    if !self.holds() {
                        return Err(deposed());
                    }
                }
                Err(e) => return Err(failed(e.into())),
            }
        }
    }

    /// Writes `value` at `key` unless the key holds a value already, only while this
    /// coordinator's epoch is current. The read goes to the stream's leader, so it sees every
    /// write an earlier epoch made; two writers of one key within an epoch are kept apart by
    /// the caller (a result's index is claimed before it is written).
    pub async fn create(&self, key: &str, value: Bytes) -> Result<u64, FenceError> {
        if self.read(key).await?.is_some() {
            return Err(FenceError::Exists {
                key: key.to_owned(),
            });
        }
        self.put(key, value).await
    }

    /// The value at `key`, read from the stream's leader (not a replica that may lag).
    pub async fn read(&self, key: &str) -> Result<Option<Bytes>, FenceError> {
        let prefix = &self.proofs.prefix;
        match self
            .proofs
            .stream
            .get_last_raw_message_by_subject(&format!("{prefix}{key}"))
            .await
        {
            Ok(message) => {
                let removed = message
                    .headers
                    .get("KV-Operation")
                    .is_some_and(|op| matches!(op.as_str(), "DEL" | "PURGE"));
                Ok((!removed).then_some(message.payload))
            }
            Err(e) if e.kind() == jetstream::stream::LastRawMessageErrorKind::NoMessageFound => {
                Ok(None)
            }
            Err(e) => Err(FenceError::Nats {
                key: key.to_owned(),
                source: e.into(),
            }),
        }
    }
}
