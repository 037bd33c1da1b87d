//! Messages too big for one NATS message (the server's `max_payload`, 1 MiB by default): the
//! submission of a proof of thousands of jobs, or its evidence. Such a body goes to the
//! artifact store and the message carries its key and sha256 instead; the reader checks the
//! hash, so a body replaced in the store is refused, never misread.

use assay_common::job::ArtifactRef;
use assay_transport::store::{ArtifactStore, StoreError};
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

#[cfg(test)]
mod tests {
    use super::*;
    use assay_transport::store::ObjectArtifactStore;

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
