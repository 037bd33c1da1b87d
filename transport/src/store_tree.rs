//! Trees from the object store: the fleet's [`TreeSource`]. Archives are streamed once per tree
//! id into a local cache, bounded by the worker's limits; the git tree id is recomputed from
//! the archive's entries and must be the job's, so an archive planted in the store never runs
//! as that tree. The sha256 the archive had when verified is kept locally and checked every
//! time a job uses it, so a corrupted cache never runs either.

use crate::archive::{ArchiveLimits, UnpackError, unpack_archive};
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

    /// Archives fetched whole from the store since start (one refused mid-download is not
    /// counted); a cached tree is not fetched again unless its cached copy was altered.
    pub fn downloads(&self) -> u64 {
        self.downloads.load(Ordering::Relaxed)
    }

    fn fail(tree: &TreeId, message: String) -> TreeError {
        TreeError::Other {
            tree: tree.to_string(),
            message,
        }
    }

    /// The cached archive of `tree` and the sha256 it had when it was verified, fetching and
    /// verifying it first when the cache does not have it.
    async fn cached_archive(&self, tree: &TreeId) -> Result<(PathBuf, String), TreeError> {
        let archive_path = self.cache_dir.join(format!("{tree}.tar"));
        // Written only once the archive's tree id was checked: a cache of older workers (whose
        // `.tar.sha256` was the store's word) is never taken for a verified one.
        let verified_path = self.cache_dir.join(format!("{tree}.tar.verified"));
        let _guard = self.fetch_lock.lock().await;
        if let Ok(digest) = tokio::fs::read_to_string(&verified_path).await
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
        std::fs::create_dir_all(&self.cache_dir).map_err(|source| TreeError::Write {
            tree: tree.to_string(),
            path: self.cache_dir.clone(),
            source,
        })?;
        let fetching = self
            .cache_dir
            .join(format!("{tree}.tar.tmp-{}", std::process::id()));
        if let Err(refused) = self.fetch_verified(tree, &fetching, &digest).await {
            // Nothing refused stays on disk, so nothing refused can run later.
            let _ = tokio::fs::remove_file(&fetching).await;
            return Err(refused);
        }
        let write_err = |path: &Path| {
            let path = path.to_owned();
            move |source| TreeError::Write {
                tree: tree.to_string(),
                path,
                source,
            }
        };
        std::fs::rename(&fetching, &archive_path).map_err(write_err(&archive_path))?;
        // The archive lands before its digest: a digest on disk means a verified archive.
        let marker = verified_path.with_extension(format!("tmp-{}", std::process::id()));
        std::fs::write(&marker, digest.as_bytes())
            .and_then(|()| std::fs::rename(&marker, &verified_path))
            .map_err(write_err(&verified_path))?;
        Ok((archive_path, digest))
    }

    /// Streams `tree`'s archive from the store to `path`, at most the bytes an archive within
    /// the limits can be, and checks it is the one recorded (`digest`) and holds `tree`.
    async fn fetch_verified(
        &self,
        tree: &TreeId,
        path: &Path,
        digest: &str,
    ) -> Result<(), TreeError> {
        use futures::StreamExt as _;
        use tokio::io::AsyncWriteExt as _;
        let key = tree_archive_key(tree);
        let mut chunks = self
            .store
            .get_stream(&key)
            .await
            .map_err(|e| Self::fail(tree, crate::error_chain::error_chain(&e)))?
            .ok_or_else(|| Self::fail(tree, format!("its archive {key} is not in the store")))?;
        let write_err = |source| TreeError::Write {
            tree: tree.to_string(),
            path: path.to_owned(),
            source,
        };
        let mut file = tokio::fs::File::create(path).await.map_err(write_err)?;
        let most = self.limits.max_archive_bytes();
        let mut hasher = Sha256::new();
        let mut written = 0u64;
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|e| Self::fail(tree, crate::error_chain::error_chain(&e)))?;
            written = written.saturating_add(chunk.len() as u64);
            if written > most {
                return Err(Self::fail(
                    tree,
                    format!(
                        "its archive is over {most} bytes, more than a tree within worker.tree_max_bytes ({}) and worker.tree_max_entries ({}) can be",
                        self.limits.max_bytes, self.limits.max_entries
                    ),
                ));
            }
            hasher.update(&chunk);
            file.write_all(&chunk).await.map_err(write_err)?;
        }
        file.flush().await.map_err(write_err)?;
        drop(file);
        self.downloads.fetch_add(1, Ordering::Relaxed);
        if let Some(metrics) = &self.metrics {
            metrics.tree_cache_misses.fetch_add(1, Ordering::Relaxed);
        }
        let actual = hex::encode(hasher.finalize());
        if actual != digest {
            return Err(Self::fail(
                tree,
                format!("archive sha256 {actual} does not match the recorded {digest}"),
            ));
        }
        let archive = path.to_owned();
        let spill = path.with_extension(format!("spill-{}", std::process::id()));
        let limits = self.limits;
        let found = tokio::task::spawn_blocking(move || {
            crate::archive::archive_tree_id(&archive, limits, &spill)
        })
        .await
        .map_err(|e| Self::fail(tree, e.to_string()))?
        .map_err(|e| refused(tree, path, e))?;
        if !found.to_string().eq_ignore_ascii_case(tree.as_str()) {
            return Err(TreeError::NotThisTree {
                tree: tree.to_string(),
                found: found.to_string(),
            });
        }
        Ok(())
    }
}

/// An archive the unpacker refused, or an I/O failure at `path`, as the tree's error.
fn refused(tree: &TreeId, path: &Path, error: UnpackError) -> TreeError {
    match error {
        UnpackError::Io(source) => TreeError::Write {
            tree: tree.to_string(),
            path: path.to_owned(),
            source,
        },
        refused => TreeError::Other {
            tree: tree.to_string(),
            message: format!(
                "refusing its archive: {}",
                crate::error_chain::error_chain(&refused)
            ),
        },
    }
}

/// Checks the cached archive is still the one verified at fetch time (`digest`), a read
/// through the file without holding it.
fn verify_cached(tree: &TreeId, path: &Path, digest: &str) -> Result<(), TreeError> {
    let read_err = |source| TreeError::Write {
        tree: tree.to_string(),
        path: path.to_owned(),
        source,
    };
    let mut hasher = Sha256::new();
    let mut file = std::fs::File::open(path).map_err(read_err)?;
    std::io::copy(&mut file, &mut hasher).map_err(read_err)?;
    let actual = hex::encode(hasher.finalize());
    if actual == digest {
        Ok(())
    } else {
        Err(StoreTreeSource::fail(
            tree,
            format!(
                "cached archive {} has sha256 {actual}, not the {digest} it had when verified",
                path.display()
            ),
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
            if let Err(altered) = verify_cached(&tree, &archive_path, &digest) {
                // Forgotten, so the next job fetches and verifies the tree afresh.
                let _ = std::fs::remove_file(archive_path.with_extension("tar.verified"));
                return Err(altered);
            }
            unpack_archive(&archive_path, &dest, limits).map_err(|e| refused(&tree, &dest, e))
        })
        .await
        .map_err(|e| TreeError::Other {
            tree: String::new(),
            message: e.to_string(),
        })?
    }
}

/// What [`upload_tree`] found in the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TreeUpload {
    /// The store held this very archive; nothing was sent.
    Present,
    /// The store had no digest for the tree; the archive and its digest were sent.
    Uploaded,
    /// The store's digest was not this archive's (`stored`): a damaged or planted archive,
    /// now overwritten by this one.
    Replaced { stored: String },
}

/// An uploaded tree: its archive's sha256, and what the store held before.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadedTree {
    pub sha256: String,
    pub upload: TreeUpload,
}

/// Builds `tree`'s archive (the same bytes every time) and uploads it with its digest unless
/// the store's digest already is this archive's; a different one is overwritten.
pub async fn upload_tree(
    store: &dyn ArtifactStore,
    repo: &Path,
    tree: &TreeId,
) -> Result<UploadedTree, TreeError> {
    let upload_err = |source| TreeError::Upload {
        tree: tree.to_string(),
        source: Box::new(source),
    };
    let repo = repo.to_owned();
    let id = tree.clone();
    let bytes = tokio::task::spawn_blocking(move || crate::archive::build_tree_archive(&repo, &id))
        .await
        .map_err(|e| StoreTreeSource::fail(tree, e.to_string()))??;
    let sha256 = hex::encode(Sha256::digest(&bytes));
    let stored = store
        .get(&tree_digest_key(tree))
        .await
        .map_err(upload_err)?
        .map(|digest| String::from_utf8_lossy(&digest).trim().to_owned());
    if stored.as_deref() == Some(sha256.as_str()) {
        return Ok(UploadedTree {
            sha256,
            upload: TreeUpload::Present,
        });
    }
    store
        .put_bytes("tree", &tree_archive_key(tree), bytes.into())
        .await
        .map_err(upload_err)?;
    store
        .put_bytes("tree digest", &tree_digest_key(tree), sha256.clone().into())
        .await
        .map_err(upload_err)?;
    let upload = match stored {
        Some(stored) => {
            tracing::warn!(%tree, %stored, sha256 = %sha256, "the store's archive of this tree was not its archive; replaced it");
            TreeUpload::Replaced { stored }
        }
        None => TreeUpload::Uploaded,
    };
    Ok(UploadedTree { sha256, upload })
}
