//! Who may write the result cache: entries signed with HMAC-SHA256 under a key that only
//! the writer holds (a fleet's coordinator, or an embedded run's user), checked in constant
//! time before an entry is served.

use serde::Serialize;
use sha2::{Digest, Sha256};
use std::path::Path;

/// Why the cache's signing key cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum SigningKeyError {
    /// The key file did not exist and could not be written.
    #[error("failed to create the cache signing key {path}")]
    Create {
        /// The signing key's file.
        path: std::path::PathBuf,
        /// The write's failure.
        #[source]
        source: std::io::Error,
    },
    /// Neither `HOME` nor `ASSAY_CACHE_KEY_FILE` says where this user's key lives.
    #[error("no place for this user's cache signing key (hint: set HOME or ASSAY_CACHE_KEY_FILE)")]
    NoHome,
    /// The key file could not be read.
    #[error("failed to read the cache signing key {path}")]
    Read {
        /// The signing key's file.
        path: std::path::PathBuf,
        /// The read's failure.
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the cache signing key {path} holds {found} bytes (hint: at least {MIN_KEY_BYTES} random bytes, e.g. `head -c 32 /dev/urandom > key`)"
    )]
    /// The key file holds fewer than [`MIN_KEY_BYTES`] bytes.
    Short {
        /// The signing key's file.
        path: std::path::PathBuf,
        /// How many bytes it holds.
        found: usize,
    },
}

/// The shortest signing key accepted: RFC 2104 asks for no less than the hash's output.
pub const MIN_KEY_BYTES: usize = 32;

/// HMAC-SHA256 (RFC 2104) of `message` under `key`.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let inner = Sha256::new()
        .chain_update(block.map(|b| b ^ 0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(block.map(|b| b ^ 0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// The secret cache entries are signed with: a fleet coordinator's (only it holds it, so an
/// entry a submitter wrote into the store never verifies) or one user's for embedded runs
/// (the confined guest cannot read it, so an entry the code under test wrote never verifies).
pub struct SigningKey(pub(super) Vec<u8>);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(..)")
    }
}

impl SigningKey {
    /// Reads the key from `path`; a trailing newline is not part of it.
    pub fn from_file(path: &Path) -> Result<Self, SigningKeyError> {
        let bytes = std::fs::read(path).map_err(|source| SigningKeyError::Read {
            path: path.to_owned(),
            source,
        })?;
        let trimmed = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
        if trimmed.len() < MIN_KEY_BYTES {
            return Err(SigningKeyError::Short {
                path: path.to_owned(),
                found: trimmed.len(),
            });
        }
        Ok(Self(trimmed.to_vec()))
    }

    /// Where this user's key lives: `ASSAY_CACHE_KEY_FILE`, else `cache.key` in the state
    /// directory (`$XDG_STATE_HOME/assay`, `~/.local/state/assay`), outside the cache and the
    /// store so that sharing or deleting those never shares or loses it.
    pub fn user_key_path() -> Result<std::path::PathBuf, SigningKeyError> {
        let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        if let Some(path) = set("ASSAY_CACHE_KEY_FILE") {
            return Ok(path.into());
        }
        let state = set("XDG_STATE_HOME")
            .map(std::path::PathBuf::from)
            .or_else(|| set("HOME").map(|home| Path::new(&home).join(".local/state")))
            .ok_or(SigningKeyError::NoHome)?;
        Ok(state.join("assay").join("cache.key"))
    }

    /// The key at `path` (this user's is at [`SigningKey::user_key_path`]), made on first use:
    /// 32 bytes from the kernel's random source, readable by the user alone.
    pub fn load_or_create(path: &Path) -> Result<Self, SigningKeyError> {
        match Self::from_file(path) {
            Err(SigningKeyError::Read { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Self::create(path)?;
                Self::from_file(path)
            }
            other => other,
        }
    }

    fn create(path: &Path) -> Result<(), SigningKeyError> {
        use std::io::{Read as _, Write as _};
        use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
        let failed = |source| SigningKeyError::Create {
            path: path.to_owned(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(failed)?;
        }
        let mut key = [0u8; MIN_KEY_BYTES];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut random| random.read_exact(&mut key))
            .map_err(failed)?;
        // Written whole under a temporary name, then linked in: two runs starting at once
        // end with one key, and neither reads a half-written one.
        let temporary = path.with_extension(format!("tmp-{}", std::process::id()));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)
            .and_then(|mut file| file.write_all(&key).and_then(|()| file.sync_all()))
            .map_err(failed)?;
        let linked = std::fs::hard_link(&temporary, path);
        let _ = std::fs::remove_file(&temporary);
        match linked {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(failed(e)),
            _ => Ok(()),
        }
    }

    /// The signature of `entry` (hex), over everything but its `signature` field.
    pub fn sign<E: Signed>(&self, entry: &E) -> String {
        hex::encode(hmac_sha256(&self.0, &signed_bytes(entry)))
    }

    /// Whether `entry` carries this key's signature, compared in constant time.
    pub(super) fn verifies<E: Signed>(&self, entry: &E) -> bool {
        let Some(claimed) = entry.signature().and_then(|s| hex::decode(s).ok()) else {
            return false;
        };
        let expected = hmac_sha256(&self.0, &signed_bytes(entry));
        claimed.len() == expected.len()
            && claimed
                .iter()
                .zip(expected.iter())
                .fold(0u8, |diff, (a, b)| diff | (a ^ b))
                == 0
    }
}

/// A cache entry that carries a signature of everything else in it.
pub trait Signed: Serialize + serde::de::DeserializeOwned + Clone {
    /// The schema this build writes and reads; an entry of another is never served.
    const SCHEMA: &'static str;
    /// The schema the entry says it was written with.
    fn schema(&self) -> &str;
    /// The key the entry says it answers, which must be the key it is stored under.
    fn key(&self) -> &str;
    /// The entry's signature, hex; `None` when unsigned.
    fn signature(&self) -> Option<&str>;
    /// Replaces the entry's signature (`None` while signing the rest).
    fn set_signature(&mut self, signature: Option<String>);
}

/// Implements [`Signed`] for an entry type with `schema`, `key` and `signature` fields, whose
/// schema constant is `$schema`.
macro_rules! signed_entry {
    ($entry:ty, $schema:expr) => {
        impl $crate::result_cache::Signed for $entry {
            const SCHEMA: &'static str = $schema;
            fn schema(&self) -> &str {
                &self.schema
            }
            fn key(&self) -> &str {
                &self.key
            }
            fn signature(&self) -> Option<&str> {
                self.signature.as_deref()
            }
            fn set_signature(&mut self, signature: Option<String>) {
                self.signature = signature;
            }
        }
    };
}
pub(crate) use signed_entry;

/// What a signature covers: the entry's JSON without its signature, as this build encodes it,
/// so whatever a lookup uses is what was signed.
fn signed_bytes<E: Signed>(entry: &E) -> Vec<u8> {
    let mut unsigned = entry.clone();
    unsigned.set_signature(None);
    // Serializing plain data cannot fail; an empty input would verify nothing forged.
    serde_json::to_vec(&unsigned).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_sha256_matches_rfc_4231() {
        // Test cases 1, 2 and 6 (a key longer than the block is hashed first).
        let cases: [(Vec<u8>, &[u8], &str); 3] = [
            (
                vec![0x0b; 20],
                b"Hi There",
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
            ),
            (
                b"Jefe".to_vec(),
                b"what do ya want for nothing?",
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            ),
            (
                vec![0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First",
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
            ),
        ];
        for (key, message, expected) in cases {
            assert_eq!(hex::encode(hmac_sha256(&key, message)), expected);
        }
    }
}
