//! Trees from the object store: the fleet's [`TreeSource`]. Archives are fetched once per tree
//! id into a local cache, and their sha256 is checked against the digest the CLI recorded every
//! time a job uses them, so a corrupted cache or a truncated upload never runs as a test.

use crate::archive::{ArchiveLimits, unpack_archive};
use crate::metrics::Metrics;
use crate::store::ArtifactStore;
use crate::tree::{TreeError, TreeSource};
use assay_common::TreeId;
use assay_common::fleet::{tree_archive_key, tree_digest_key};
use async_trait::async_trait;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct StoreTreeSource {
    store: Arc<dyn ArtifactStore>,
    cache_dir: PathBuf,
    downloads: AtomicU64,
    metrics: Option<Arc<Metrics>>,
    // One download at a time, so slots asking for the same new tree fetch it once.
    fetch_lock: tokio::sync::Mutex<()>,
    limits: ArchiveLimits,
}

impl StoreTreeSource {
    pub fn new(store: Arc<dyn ArtifactStore>, cache_dir: impl Into<PathBuf>) -> Self {
        Self {
            store,
            cache_dir: cache_dir.into(),
            downloads: AtomicU64::new(0),
            metrics: None,
            fetch_lock: tokio::sync::Mutex::new(()),
            limits: ArchiveLimits::default(),
        }
    }

    /// Refuses archives past `limits` (the defaults otherwise).
    pub fn with_limits(mut self, limits: ArchiveLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Counts cache hits and misses in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Archives fetched from the store since start; a cached tree is never fetched again.
    pub fn downloads(&self) -> u64 {
        self.downloads.load(Ordering::Relaxed)
    }

    fn fail(tree: &TreeId, message: String) -> TreeError {
        TreeError::Other {
            tree: tree.to_string(),
            message,
        }
    }

    async fn cached_archive(&self, tree: &TreeId) -> Result<(PathBuf, String), TreeError> {
        let archive_path = self.cache_dir.join(format!("{tree}.tar"));
        let digest_path = self.cache_dir.join(format!("{tree}.tar.sha256"));
        let _guard = self.fetch_lock.lock().await;
        if let Ok(digest) = tokio::fs::read_to_string(&digest_path).await
            && archive_path.is_file()
        {
            if let Some(metrics) = &self.metrics {
                metrics.tree_cache_hits.fetch_add(1, Ordering::Relaxed);
            }
            return Ok((archive_path, digest.trim().to_owned()));
        }
        let digest = self
            .store
            .get(&tree_digest_key(tree))
            .await
            .map_err(|e| Self::fail(tree, crate::error_chain::error_chain(&e)))?
            .ok_or_else(|| {
                Self::fail(
                    tree,
                    format!(
                        "its archive digest {} is not in the store {} (hint: the CLI uploads trees before submitting; check both use the same store)",
                        tree_digest_key(tree),
                        self.store.url()
                    ),
                )
            })?;
        let digest = String::from_utf8_lossy(&digest).trim().to_owned();
        let bytes = self
            .store
            .get(&tree_archive_key(tree))
            .await
            .map_err(|e| Self::fail(tree, crate::error_chain::error_chain(&e)))?
            .ok_or_else(|| {
                Self::fail(
                    tree,
                    format!("its archive {} is not in the store", tree_archive_key(tree)),
                )
            })?;
        // An archive's own size is bounded too: its files, plus a header and padding each.
        let most = self
            .limits
            .max_bytes
            .saturating_add(self.limits.max_entries.saturating_mul(1024))
            .saturating_add(10 * 1024);
        if bytes.len() as u64 > most {
            return Err(Self::fail(
                tree,
                format!(
                    "its archive is {} bytes, more than a tree within worker.tree_max_bytes ({}) and worker.tree_max_entries ({}) can be",
                    bytes.len(),
                    self.limits.max_bytes,
                    self.limits.max_entries
                ),
            ));
        }
        self.downloads.fetch_add(1, Ordering::Relaxed);
        if let Some(metrics) = &self.metrics {
            metrics.tree_cache_misses.fetch_add(1, Ordering::Relaxed);
        }
        verify(tree, &bytes, &digest)?;
        let write = |path: &Path, data: &[u8]| {
            let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
            std::fs::write(&tmp, data)
                .and_then(|()| std::fs::rename(&tmp, path))
                .map_err(|source| TreeError::Write {
                    tree: tree.to_string(),
                    path: path.to_owned(),
                    source,
                })
        };
        std::fs::create_dir_all(&self.cache_dir).map_err(|source| TreeError::Write {
            tree: tree.to_string(),
            path: self.cache_dir.clone(),
            source,
        })?;
        // The archive lands before its digest: a digest on disk means a complete archive.
        write(&archive_path, &bytes)?;
        write(&digest_path, digest.as_bytes())?;
        Ok((archive_path, digest))
    }
}

fn verify(tree: &TreeId, bytes: &[u8], digest: &str) -> Result<(), TreeError> {
    let actual = hex::encode(Sha256::digest(bytes));
    if actual == digest {
        Ok(())
    } else {
        Err(StoreTreeSource::fail(
            tree,
            format!("archive sha256 {actual} does not match the recorded {digest}"),
        ))
    }
}

#[async_trait]
impl TreeSource for StoreTreeSource {
    async fn materialize(&self, tree: &TreeId, dest: &Path) -> Result<(), TreeError> {
        // The id names cache files: only a git object id may do that.
        if tree.as_str().is_empty() || !tree.as_str().bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Self::fail(tree, "not a git object id".into()));
        }
        let (archive_path, digest) = self.cached_archive(tree).await?;
        let tree = tree.clone();
        let dest = dest.to_owned();
        let limits = self.limits;
        tokio::task::spawn_blocking(move || {
            let bytes = std::fs::read(&archive_path).map_err(|source| TreeError::Write {
                tree: tree.to_string(),
                path: archive_path.clone(),
                source,
            })?;
            verify(&tree, &bytes, &digest)?;
            unpack_archive(&bytes, &dest, limits).map_err(|e| match e {
                crate::archive::UnpackError::Io(source) => TreeError::Write {
                    tree: tree.to_string(),
                    path: dest.clone(),
                    source,
                },
                refused => TreeError::Other {
                    tree: tree.to_string(),
                    message: format!("refusing its archive: {refused}"),
                },
            })
        })
        .await
        .map_err(|e| TreeError::Other {
            tree: String::new(),
            message: e.to_string(),
        })?
    }
}

/// Uploads `tree`'s archive and digest unless the store has them; returns the sha256.
pub async fn upload_tree(
    store: &dyn ArtifactStore,
    repo: &Path,
    tree: &TreeId,
) -> Result<String, TreeError> {
    if let Some(digest) =
        store
            .get(&tree_digest_key(tree))
            .await
            .map_err(|source| TreeError::Upload {
                tree: tree.to_string(),
                source: Box::new(source),
            })?
    {
        return Ok(String::from_utf8_lossy(&digest).trim().to_owned());
    }
    let repo = repo.to_owned();
    let id = tree.clone();
    let bytes = tokio::task::spawn_blocking(move || crate::archive::build_tree_archive(&repo, &id))
        .await
        .map_err(|e| StoreTreeSource::fail(tree, e.to_string()))??;
    let archive = store
        .put_bytes("tree", &tree_archive_key(tree), bytes.into())
        .await
        .map_err(|source| TreeError::Upload {
            tree: tree.to_string(),
            source: Box::new(source),
        })?;
    store
        .put_bytes(
            "tree digest",
            &tree_digest_key(tree),
            archive.sha256.clone().into(),
        )
        .await
        .map_err(|source| TreeError::Upload {
            tree: tree.to_string(),
            source: Box::new(source),
        })?;
    Ok(archive.sha256)
}
