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

#[derive(Debug, thiserror::Error)]
pub enum OffloadError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "{key} is missing from the artifact store (hint: the CLI, coordinator and workers must share one --store)"
    )]
    Missing { key: String },
    #[error(
        "{key} in the artifact store has sha256 {found}, not the {expected} it was stored with; refusing it"
    )]
    Altered {
        key: String,
        expected: String,
        found: String,
    },
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error(
        "the result of job {job_id} is stored at {found}, not at its own key {expected}; refusing it"
    )]
    StoredElsewhere {
        job_id: String,
        found: String,
        expected: String,
    },
    #[error(
        "the stored result {key} holds job {found_job} (index {found_index}), not the {expected_job} (index {expected_index}) its message names; refusing it"
    )]
    WrongResult {
        key: String,
        expected_job: String,
        expected_index: u32,
        found_job: String,
        found_index: u32,
    },
}

/// The largest body sent inline to a server whose `max_payload` is `max_payload`.
pub fn inline_limit(max_payload: usize) -> usize {
    max_payload.saturating_sub(HEADROOM)
}

/// The largest body sent inline over `client`'s connection.
pub fn client_limit(client: &async_nats::Client) -> usize {
    inline_limit(client.server_info().max_payload)
}

pub async fn put(
    store: &dyn ArtifactStore,
    name: &str,
    key: &str,
    body: Vec<u8>,
) -> Result<ArtifactRef, OffloadError> {
    Ok(store.put_bytes(name, key, Bytes::from(body)).await?)
}

/// The body `blob` names, checked against its sha256.
pub async fn get(store: &dyn ArtifactStore, blob: &ArtifactRef) -> Result<Bytes, OffloadError> {
    let body = store
        .get(&blob.key)
        .await?
        .ok_or_else(|| OffloadError::Missing {
            key: blob.key.clone(),
        })?;
    let found = hex::encode(Sha256::digest(&body));
    if found != blob.sha256 {
        return Err(OffloadError::Altered {
            key: blob.key.clone(),
            expected: blob.sha256.clone(),
            found,
        });
    }
    Ok(body)
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
    let body = get(store, &blob).await?;
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
) -> Result<JobResult, OffloadError> {
    let message: ResultMessage = wire::decode("job result", bytes)?;
    resolve_result(store, proof_id, message).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ObjectArtifactStore;

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
        assert_eq!(&get(&store, &blob).await.unwrap()[..], b"jobs");
        store
            .put_bytes("submission", &blob.key, Bytes::from_static(b"other"))
            .await
            .unwrap();
        let err = get(&store, &blob).await.unwrap_err();
        assert!(matches!(err, OffloadError::Altered { .. }), "{err}");
        let gone = ArtifactRef {
            key: "proofs/p-2/submission.bin".into(),
            ..blob
        };
        assert!(matches!(
            get(&store, &gone).await.unwrap_err(),
            OffloadError::Missing { .. }
        ));
    }
}
