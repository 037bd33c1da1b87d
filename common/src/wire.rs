//! The wire codec: bincode inside a versioned envelope. bincode does not describe itself, so a
//! reader refuses any version it was not built for rather than misreading the bytes.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Bump on any change to a message type's shape.
pub const PROTOCOL_VERSION: u16 = 25;
const MAGIC: &[u8; 4] = b"ASY1";

/// Why a message could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The bytes do not start with Assay's envelope: not a message of ours.
    #[error("not an Assay message (bad magic bytes)")]
    BadMagic,
    /// The message was written by a build of another protocol version.
    #[error(
        "wire protocol version {found} is not supported (this build speaks {PROTOCOL_VERSION}; hint: run the same Assay version on coordinator, workers and CLI)"
    )]
    UnsupportedVersion {
        /// The protocol version the message carries.
        found: u16,
    },
    /// bincode could not serialise the message.
    #[error("failed to encode {what}")]
    Encode {
        /// The kind of message being encoded (`job`, `job result`).
        what: &'static str,
        /// bincode's reason.
        #[source]
        source: bincode::Error,
    },
    /// The envelope was right but its body is not the message expected.
    #[error("failed to decode {what}")]
    Decode {
        /// The kind of message being decoded (`job`, `job result`).
        what: &'static str,
        /// bincode's reason.
        #[source]
        source: bincode::Error,
    },
}

/// `message` in the envelope of this build's protocol version; `what` names it in errors.
pub fn encode<T: Serialize>(what: &'static str, message: &T) -> Result<Vec<u8>, WireError> {
    encode_with_version(what, message, PROTOCOL_VERSION)
}

/// Exposed for compatibility tests that play an older or newer peer.
pub fn encode_with_version<T: Serialize>(
    what: &'static str,
    message: &T,
    version: u16,
) -> Result<Vec<u8>, WireError> {
    let mut bytes = Vec::with_capacity(64);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&version.to_le_bytes());
    bincode::serialize_into(&mut bytes, message)
        .map_err(|source| WireError::Encode { what, source })?;
    Ok(bytes)
}

/// The message `bytes` carry, refused unless the envelope is ours and of this build's version.
pub fn decode<T: DeserializeOwned>(what: &'static str, bytes: &[u8]) -> Result<T, WireError> {
    if bytes.len() < 6 || &bytes[..4] != MAGIC {
        return Err(WireError::BadMagic);
    }
    let version = u16::from_le_bytes([bytes[4], bytes[5]]);
    if version != PROTOCOL_VERSION {
        return Err(WireError::UnsupportedVersion { found: version });
    }
    bincode::deserialize(&bytes[6..]).map_err(|source| WireError::Decode { what, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{JobId, WorkerId};
    use crate::job::{JobResult, JobStatus};
    use crate::outcome::ReportOutcome;

    fn sample() -> JobResult {
        JobResult {
            job_id: JobId("p-1/0003".into()),
            index: 3,
            status: JobStatus::Completed { exit_code: 1 },
            report: ReportOutcome::Parsed(crate::outcome::TestReport::default()),
            artifacts: vec![],
            duration_ms: 1200,
            worker: WorkerId("w-1".into()),
            sandbox: Some(crate::sandbox::SandboxEvidence {
                kind: "process".into(),
                container: None,
                confinement: Some(crate::sandbox::Confinement {
                    confined: true,
                    detail: "bubblewrap 0.8.0".into(),
                }),
            }),
        }
    }

    #[test]
    fn a_result_round_trips() {
        let bytes = encode("job result", &sample()).unwrap();
        let back: JobResult = decode("job result", &bytes).unwrap();
        assert_eq!(back, sample());
    }

    #[test]
    fn an_infrastructure_result_carries_its_cause() {
        let lost = JobResult {
            status: JobStatus::Infrastructure {
                message: "job p-1/0003 was delivered 5 times without a result".into(),
                cause: crate::fault::InfraCause::WorkerLost,
            },
            sandbox: None,
            ..sample()
        };
        let bytes = encode("job result", &lost).unwrap();
        assert_eq!(decode::<JobResult>("job result", &bytes).unwrap(), lost);
    }

    #[test]
    fn a_peer_from_before_dependency_archives_is_refused_by_its_version() {
        let bytes = encode_with_version("job result", &sample(), 18).unwrap();
        let err = decode::<JobResult>("job result", &bytes).unwrap_err();
        assert!(matches!(err, WireError::UnsupportedVersion { found: 18 }));
        assert!(err.to_string().contains("this build speaks 25"), "{err}");
    }

    #[test]
    fn a_peer_from_before_the_next_command_hint_is_refused_by_its_version() {
        let bytes = encode_with_version("job result", &sample(), 22).unwrap();
        let err = decode::<JobResult>("job result", &bytes).unwrap_err();
        assert!(matches!(err, WireError::UnsupportedVersion { found: 22 }));
    }

    #[test]
    fn a_peer_from_before_collection_reruns_is_refused_by_its_version() {
        let bytes = encode_with_version("job result", &sample(), 23).unwrap();
        let err = decode::<JobResult>("job result", &bytes).unwrap_err();
        assert!(matches!(err, WireError::UnsupportedVersion { found: 23 }));
    }

    #[test]
    fn a_progress_event_round_trips_whether_the_cache_answered_and_an_older_peer_is_refused() {
        for cached in [false, true] {
            let event = crate::fleet::ProgressEvent::JobFinished {
                done: 1,
                total: 4,
                result: Box::new(sample()),
                cached,
            };
            let bytes = encode("progress", &event).unwrap();
            assert_eq!(
                decode::<crate::fleet::ProgressEvent>("progress", &bytes).unwrap(),
                event
            );
        }
        let event = crate::fleet::ProgressEvent::Cancelled;
        let bytes = encode_with_version("progress", &event, 24).unwrap();
        let err = decode::<crate::fleet::ProgressEvent>("progress", &bytes).unwrap_err();
        assert!(matches!(err, WireError::UnsupportedVersion { found: 24 }));
    }

    #[test]
    fn a_peer_that_runs_go_archives_as_libtest_is_refused_by_its_version() {
        let bytes = encode_with_version("job result", &sample(), 21).unwrap();
        let err = decode::<JobResult>("job result", &bytes).unwrap_err();
        assert!(matches!(err, WireError::UnsupportedVersion { found: 21 }));
    }

    #[test]
    fn a_newer_peer_is_refused_not_misread() {
        let bytes = encode_with_version("job result", &sample(), PROTOCOL_VERSION + 1).unwrap();
        let err = decode::<JobResult>("job result", &bytes).unwrap_err();
        assert!(
            matches!(err, WireError::UnsupportedVersion { found } if found == PROTOCOL_VERSION + 1)
        );
        assert!(matches!(
            decode::<JobResult>("job result", b"{\"json\":1}"),
            Err(WireError::BadMagic)
        ));
    }
}
