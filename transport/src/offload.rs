//! Messages too big for one NATS message (the server's `max_payload`, 1 MiB by default): the
//! submission of a proof of thousands of jobs, its evidence, or a job's result with a report of
//! thousands of cases. Such a body goes to the
//! artifact store and the message carries its key and sha256 instead; the reader checks the
//! hash, so a body replaced in the store is refused, never misread.

use crate::store::{ArtifactStore, StoreError};
use assay_common::ProofId;
use assay_common::fleet::{ResultMessage, result_key};
use assay_common::job::{ArtifactRef, JobResult};
use assay_common::wire::{self, WireError};
use bytes::Bytes;
use sha2::{Digest, Sha256};

/// Room left under the server's limit for the envelope, headers and the rest of a record.
const HEADROOM: usize = 16 * 1024;

/// Why a body moved through the artifact store could not be stored or was refused on reading.
#[derive(Debug, thiserror::Error)]
pub enum OffloadError {
    /// The store failed the put or get.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The stored body is bigger than the reader's cap.
    #[error(
        "{key} in the artifact store is {size}, past the cap of {cap} bytes; refusing it (hint: {hint})"
    )]
    TooBig {
        /// The body's key in the store.
        key: String,
        /// `N bytes` as the store or the message declared it, or `more than N bytes` as counted.
        size: String,
        /// The most bytes the reader takes.
        cap: u64,
        /// The setting to raise.
        hint: &'static str,
    },
    /// No body at the key the message names.
    #[error(
        "{key} is missing from the artifact store (hint: the CLI, coordinator and workers must share one --store)"
    )]
    Missing {
        /// The key looked up.
        key: String,
    },
    /// The body's sha256 is not the one recorded when it was stored.
    #[error(
        "{key} in the artifact store has sha256 {found}, not the {expected} it was stored with; refusing it"
    )]
    Altered {
        /// The body's key in the store.
        key: String,
        /// The recorded sha256, hex.
        expected: String,
        /// The sha256 of the bytes read, hex.
        found: String,
    },
    /// The body did not decode as the message it should hold.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// A result message points at another key than its job's own.
    #[error(
        "the result of job {job_id} is stored at {found}, not at its own key {expected}; refusing it"
    )]
    StoredElsewhere {
        /// The job the message names.
        job_id: String,
        /// The key the message points at.
        found: String,
        /// The job's own result key.
        expected: String,
    },
    /// The stored result is another job's than the message names.
    #[error(
        "the stored result {key} holds job {found_job} (index {found_index}), not the {expected_job} (index {expected_index}) its message names; refusing it"
    )]
    WrongResult {
        /// The result's key in the store.
        key: String,
        /// The job id the message names.
        expected_job: String,
        /// The job index the message names.
        expected_index: u32,
        /// The job id the stored result holds.
        found_job: String,
        /// The job index the stored result holds.
        found_index: u32,
    },
}

/// The largest body sent inline to a server whose `max_payload` is `max_payload`.
pub fn inline_limit(max_payload: usize) -> usize {
    max_payload.saturating_sub(HEADROOM)
}

/// The largest body sent inline over `client`'s connection.
#[cfg(feature = "nats")]
pub fn client_limit(client: &async_nats::Client) -> usize {
    inline_limit(client.server_info().max_payload)
}

/// Stores `body` at `key` (named `name` in its reference) and returns where it is.
pub async fn put(
    store: &dyn ArtifactStore,
    name: &str,
    key: &str,
    body: Vec<u8>,
) -> Result<ArtifactRef, OffloadError> {
    Ok(store.put_bytes(name, key, Bytes::from(body)).await?)
}

/// The most bytes of a stored body a reader takes, and what to raise when that is too few.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadCap {
    /// The most bytes read.
    pub bytes: u64,
    /// The setting that raises it, named in the refusal.
    pub hint: &'static str,
}

impl ReadCap {
    /// Stored submissions, at most `bytes` (`coordinator.max_submission_bytes`).
    pub const fn submissions(bytes: u64) -> Self {
        Self {
            bytes,
            hint: "raise coordinator.max_submission_bytes (ASSAY_MAX_SUBMISSION_BYTES) if proofs this big are expected",
        }
    }

    /// Stored job results, at most `bytes` (`coordinator.max_result_bytes`).
    pub const fn results(bytes: u64) -> Self {
        Self {
            bytes,
            hint: "raise coordinator.max_result_bytes (ASSAY_MAX_RESULT_BYTES) if results this big are expected",
        }
    }

    /// A proof's stored evidence as the CLI reads it: [`EVIDENCE_CAP_BYTES`].
    pub const fn evidence() -> Self {
        Self {
            bytes: EVIDENCE_CAP_BYTES,
            hint: "evidence is read up to a fixed 256 MiB; a bigger one is not the coordinator's",
        }
    }
}

/// The most a proof's stored evidence may be when the CLI reads it.
pub const EVIDENCE_CAP_BYTES: u64 = 256 * 1024 * 1024;

/// The body `blob` names, checked against its sha256, read a chunk at a time through the
/// digest and refused as soon as it is past `cap`: before reading when the message's or the
/// store's size says so, else once more than `cap` bytes have arrived (a size can lie). At
/// most `cap` bytes are held.
pub async fn get(
    store: &dyn ArtifactStore,
    blob: &ArtifactRef,
    cap: ReadCap,
) -> Result<Bytes, OffloadError> {
    use futures::StreamExt as _;
    let too_big = |size: String| OffloadError::TooBig {
        key: blob.key.clone(),
        size,
        cap: cap.bytes,
        hint: cap.hint,
    };
    if blob.bytes > cap.bytes {
        return Err(too_big(format!(
            "{} bytes as its message declares",
            blob.bytes
        )));
    }
    let (size, mut chunks) =
        store
            .get_stream_sized(&blob.key)
            .await?
            .ok_or_else(|| OffloadError::Missing {
                key: blob.key.clone(),
            })?;
    if let Some(size) = size
        && size > cap.bytes
    {
        return Err(too_big(format!("{size} bytes")));
    }
    let mut body = bytes::BytesMut::with_capacity(size.unwrap_or(0).min(cap.bytes) as usize);
    let mut hasher = Sha256::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        if (body.len() + chunk.len()) as u64 > cap.bytes {
            return Err(too_big(format!("more than {} bytes as read", cap.bytes)));
        }
        hasher.update(&chunk);
        body.extend_from_slice(&chunk);
    }
    let found = hex::encode(hasher.finalize());
    if found != blob.sha256 {
        return Err(OffloadError::Altered {
            key: blob.key.clone(),
            expected: blob.sha256.clone(),
            found,
        });
    }
    Ok(body.freeze())
}

/// `result` as its wire message: inline when it fits in `limit` bytes (see [`inline_limit`]),
/// else stored at its [`result_key`] and named by key and sha256.
pub async fn encode_result(
    store: &dyn ArtifactStore,
    proof_id: &ProofId,
    result: &JobResult,
    limit: usize,
) -> Result<Vec<u8>, OffloadError> {
    let inline = wire::encode(
        "job result",
        &ResultMessage::Inline(Box::new(result.clone())),
    )?;
    if inline.len() <= limit {
        return Ok(inline);
    }
    let body = wire::encode("job result", result)?;
    let blob = put(store, "result", &result_key(proof_id, result.index), body).await?;
    tracing::info!(job_id = %result.job_id, bytes = blob.bytes, key = %blob.key, "result too big for one message; it went through the store");
    Ok(wire::encode(
        "job result",
        &ResultMessage::Stored {
            job_id: result.job_id.clone(),
            index: result.index,
            result: blob,
        },
    )?)
}

/// The result a [`ResultMessage`] carries or names; a stored one must be at its own job's key
/// of `proof_id`, match its sha256, and be the job the message names.
pub async fn resolve_result(
    store: &dyn ArtifactStore,
    proof_id: &ProofId,
    message: ResultMessage,
    cap: ReadCap,
) -> Result<JobResult, OffloadError> {
    let (job_id, index, blob) = match message {
        ResultMessage::Inline(result) => return Ok(*result),
        ResultMessage::Stored {
            job_id,
            index,
            result,
        } => (job_id, index, result),
    };
    let own = result_key(proof_id, index);
    if blob.key != own {
        return Err(OffloadError::StoredElsewhere {
            job_id: job_id.to_string(),
            found: blob.key,
            expected: own,
        });
    }
    let body = get(store, &blob, cap).await?;
    let result: JobResult = wire::decode("job result", &body)?;
    if result.job_id != job_id || result.index != index {
        return Err(OffloadError::WrongResult {
            key: blob.key,
            expected_job: job_id.to_string(),
            expected_index: index,
            found_job: result.job_id.to_string(),
            found_index: result.index,
        });
    }
    Ok(result)
}

/// Decodes a result's wire message (the results subject, a KV result key) and resolves it.
pub async fn decode_result(
    store: &dyn ArtifactStore,
    proof_id: &ProofId,
    bytes: &[u8],
    cap: ReadCap,
) -> Result<JobResult, OffloadError> {
    let message: ResultMessage = wire::decode("job result", bytes)?;
    resolve_result(store, proof_id, message, cap).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ObjectArtifactStore;

    const CAP: ReadCap = ReadCap::submissions(1024);

    #[test]
    fn the_inline_limit_leaves_headroom_under_the_server_limit() {
        assert_eq!(inline_limit(1024 * 1024), 1024 * 1024 - HEADROOM);
        assert_eq!(inline_limit(100), 0);
    }

    #[tokio::test]
    async fn a_body_round_trips_and_an_altered_one_is_refused() {
        let store = ObjectArtifactStore::open("memory://").unwrap();
        let blob = put(
            &store,
            "submission",
            "proofs/p-1/submission.bin",
            b"jobs".to_vec(),
        )
        .await
        .unwrap();
        assert_eq!(&get(&store, &blob, CAP).await.unwrap()[..], b"jobs");
        store
            .put_bytes("submission", &blob.key, Bytes::from_static(b"other"))
            .await
            .unwrap();
        let err = get(&store, &blob, CAP).await.unwrap_err();
        assert!(matches!(err, OffloadError::Altered { .. }), "{err}");
        let gone = ArtifactRef {
            key: "proofs/p-2/submission.bin".into(),
            ..blob
        };
        assert!(matches!(
            get(&store, &gone, CAP).await.unwrap_err(),
            OffloadError::Missing { .. }
        ));
    }

    /// A store that does not say an object's size before sending it (as some do not), over a
    /// real file store, counting the bytes it hands out.
    struct Unsized {
        inner: ObjectArtifactStore,
        sent: std::sync::Arc<std::sync::atomic::AtomicU64>,
    }

    #[async_trait::async_trait]
    impl ArtifactStore for Unsized {
        fn url(&self) -> &str {
            self.inner.url()
        }
        async fn put_bytes(
            &self,
            name: &str,
            key: &str,
            bytes: Bytes,
        ) -> Result<ArtifactRef, StoreError> {
            self.inner.put_bytes(name, key, bytes).await
        }
        async fn get(&self, key: &str) -> Result<Option<Bytes>, StoreError> {
            self.inner.get(key).await
        }
        async fn get_stream(
            &self,
            key: &str,
        ) -> Result<Option<crate::store::ByteStream>, StoreError> {
            use futures::StreamExt as _;
            let sent = self.sent.clone();
            Ok(self.inner.get_stream(key).await?.map(|stream| {
                stream
                    .inspect(move |chunk| {
                        if let Ok(chunk) = chunk {
                            sent.fetch_add(
                                chunk.len() as u64,
                                std::sync::atomic::Ordering::Relaxed,
                            );
                        }
                    })
                    .boxed()
            }))
        }
        async fn list(&self, prefix: &str) -> Result<Vec<crate::store::StoredObject>, StoreError> {
            self.inner.list(prefix).await
        }
        async fn delete(&self, key: &str) -> Result<(), StoreError> {
            self.inner.delete(key).await
        }
    }

    #[tokio::test]
    async fn a_body_of_unknown_size_is_read_only_up_to_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        let store = Unsized {
            inner: ObjectArtifactStore::open(&format!("file://{}", root.display())).unwrap(),
            sent: Default::default(),
        };
        let key = "proofs/p-1/submission.bin";
        std::fs::create_dir_all(root.join("proofs/p-1")).unwrap();
        // 200 MB, sparse; the message understates it.
        std::fs::File::create(root.join(key))
            .unwrap()
            .set_len(200 << 20)
            .unwrap();
        let blob = ArtifactRef {
            name: "submission".into(),
            key: key.into(),
            sha256: "0".repeat(64),
            bytes: 10,
            dropped_bytes: 0,
        };
        let cap = ReadCap::submissions(64 << 20);
        let err = get(&store, &blob, cap).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("more than 67108864 bytes as read, past the cap of 67108864 bytes"),
            "{err}"
        );
        assert!(
            err.to_string().contains("ASSAY_MAX_SUBMISSION_BYTES"),
            "{err}"
        );
        let sent = store.sent.load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            sent <= (64 << 20) + (1 << 20),
            "read {sent} bytes of 200 MB under a 64 MiB cap"
        );
        // A declared size over the cap is refused before the store is asked.
        let declared = ArtifactRef {
            bytes: 65 << 20,
            ..blob
        };
        store.sent.store(0, std::sync::atomic::Ordering::Relaxed);
        let err = get(&store, &declared, cap).await.unwrap_err();
        assert!(err.to_string().contains("as its message declares"), "{err}");
        assert_eq!(store.sent.load(std::sync::atomic::Ordering::Relaxed), 0);
    }
}
