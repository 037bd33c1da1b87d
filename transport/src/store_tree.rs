//! Trees from the object store: the fleet's [`TreeSource`]. Archives are streamed once per tree
//! id into a local cache, bounded by the worker's limits. Every time a job's tree is unpacked,
//! from a fresh download or from the cache, the git tree id is recomputed from the entries in
//! the same read that unpacks them and must be the job's, so neither an archive planted in the
//! store nor one planted or altered in the cache (a job can write the worker's disk) ever runs
//! as that tree. No file on disk says an archive is good.

use crate::archive::{ArchiveLimits, UnpackError, unpack_verified};
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

/// The fleet's [`TreeSource`]: job trees from the artifact store, their archives cached locally.
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
    /// Reads archives from `store` and caches them under `cache_dir`, with the default limits.
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

    /// Fetches `tree`'s archive into the cache and unpacks it into `dest`, verified; a tree
    /// another slot fetched meanwhile is used from the cache instead (verified all the same).
    async fn fetch_and_unpack(
        &self,
        tree: &TreeId,
        archive_path: &Path,
        dest: &Path,
    ) -> Result<(), TreeError> {
        let _guard = self.fetch_lock.lock().await;
        if std::fs::symlink_metadata(archive_path).is_ok() {
            // Another slot fetched it while this one waited.
            return self.unpack_cached(tree, archive_path, dest).await;
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
        let fetched = match self.fetch(tree, &fetching, &digest).await {
            Ok(()) => self.unpack(tree, &fetching, dest).await,
            Err(refused) => Err(refused),
        };
        if let Err(refused) = fetched {
            // Nothing refused stays on disk.
            let _ = tokio::fs::remove_file(&fetching).await;
            empty_quietly(dest).await;
            return Err(match refused {
                Unpacked::Refused(UnpackError::NotThisTree { found, .. }) => {
                    TreeError::NotThisTree {
                        tree: tree.to_string(),
                        found,
                    }
                }
                other => other.into_tree_error(tree, dest),
            });
        }
        std::fs::rename(&fetching, archive_path).map_err(|source| TreeError::Write {
            tree: tree.to_string(),
            path: archive_path.to_owned(),
            source,
        })?;
        Ok(())
    }

    /// Unpacks the cached archive at `archive_path` into `dest`, verified.
    async fn unpack_cached(
        &self,
        tree: &TreeId,
        archive_path: &Path,
        dest: &Path,
    ) -> Result<(), TreeError> {
        match self.unpack(tree, archive_path, dest).await {
            Ok(()) => Ok(()),
            Err(refused) => {
                empty_quietly(dest).await;
                Err(refused.into_tree_error(tree, dest))
            }
        }
    }

    /// Unpacks the archive at `path` into `dest` and recomputes its tree id in the same read;
    /// `path` must be a regular file (a link or FIFO planted there is refused, not followed).
    async fn unpack(&self, tree: &TreeId, path: &Path, dest: &Path) -> Result<(), Unpacked> {
        let (tree, path, dest) = (tree.clone(), path.to_owned(), dest.to_owned());
        let limits = self.limits;
        tokio::task::spawn_blocking(move || {
            let archive =
                crate::local_file::open_regular(&path).map_err(|source| Unpacked::Open {
                    path: path.clone(),
                    source,
                })?;
            unpack_verified(&archive, &dest, limits, &tree).map_err(Unpacked::Refused)
        })
        .await
        .map_err(|e| Unpacked::Join(e.to_string()))?
    }

    /// Streams `tree`'s archive from the store to `path`, at most the bytes an archive within
    /// the limits can be, and checks it is the one recorded (`digest`).
    async fn fetch(&self, tree: &TreeId, path: &Path, digest: &str) -> Result<(), Unpacked> {
        use futures::StreamExt as _;
        use tokio::io::AsyncWriteExt as _;
        let fail = |message: String| Unpacked::Tree(Self::fail(tree, message));
        let key = tree_archive_key(tree);
        let mut chunks = self
            .store
            .get_stream(&key)
            .await
            .map_err(|e| fail(crate::error_chain::error_chain(&e)))?
            .ok_or_else(|| fail(format!("its archive {key} is not in the store")))?;
        let write_err = |source| {
            Unpacked::Tree(TreeError::Write {
                tree: tree.to_string(),
                path: path.to_owned(),
                source,
            })
        };
        let mut file = tokio::fs::File::create(path).await.map_err(write_err)?;
        let most = self.limits.max_archive_bytes();
        let mut hasher = Sha256::new();
        let mut written = 0u64;
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|e| fail(crate::error_chain::error_chain(&e)))?;
            written = written.saturating_add(chunk.len() as u64);
            if written > most {
                return Err(fail(format!(
                    "its archive is over {most} bytes, more than a tree within worker.tree_max_bytes ({}) and worker.tree_max_entries ({}) can be",
                    self.limits.max_bytes, self.limits.max_entries
                )));
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
            return Err(fail(format!(
                "archive sha256 {actual} does not match the recorded {digest}"
            )));
        }
        Ok(())
    }
}

/// Why an archive could not be unpacked: its file would not open as a regular file, the
/// unpacker refused it, or the fetch failed.
enum Unpacked {
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    Refused(UnpackError),
    Tree(TreeError),
    Join(String),
}

impl Unpacked {
    fn into_tree_error(self, tree: &TreeId, dest: &Path) -> TreeError {
        match self {
            Unpacked::Open { path, source } => TreeError::Write {
                tree: tree.to_string(),
                path,
                source,
            },
            Unpacked::Refused(error) => refused(tree, dest, error),
            Unpacked::Tree(error) => error,
            Unpacked::Join(message) => StoreTreeSource::fail(tree, message),
        }
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

/// Removes everything inside `dir` (never following a link), leaving it empty for the next
/// attempt; what cannot be removed is left for the job's scratch clean-up.
async fn empty_quietly(dir: &Path) {
    let dir = dir.to_owned();
    let _ = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                std::fs::remove_dir_all(entry.path())?;
            } else {
                std::fs::remove_file(entry.path())?;
            }
        }
        Ok(())
    })
    .await;
}

#[async_trait]
impl TreeSource for StoreTreeSource {
    /// Unpacks `tree` from the cached archive, recomputing its git tree id from what it
    /// unpacks; nothing on disk vouches for an archive. A cached archive that is not `tree`
    /// (altered or planted on the worker's disk), or is not a regular file, is refused: the
    /// partly unpacked tree and the archive are removed and the archive is fetched again from
    /// the store, once, and verified the same way.
    async fn materialize(&self, tree: &TreeId, dest: &Path) -> Result<(), TreeError> {
        // The id names cache files: only a git object id may do that.
        if tree.as_str().is_empty() || !tree.as_str().bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Self::fail(tree, "not a git object id".into()));
        }
        let archive_path = self.cache_dir.join(format!("{tree}.tar"));
        // Markers of older workers vouched for an archive; nothing does now.
        for stale in ["tar.verified", "tar.sha256"] {
            let _ = std::fs::remove_file(self.cache_dir.join(format!("{tree}.{stale}")));
        }
        if std::fs::symlink_metadata(&archive_path).is_ok() {
            match self.unpack_cached(tree, &archive_path, dest).await {
                Ok(()) => {
                    if let Some(metrics) = &self.metrics {
                        metrics.tree_cache_hits.fetch_add(1, Ordering::Relaxed);
                    }
                    return Ok(());
                }
                Err(refused) => {
                    tracing::warn!(%tree, path = %archive_path.display(), error = %crate::error_chain::error_chain(&refused), "the cached tree archive is not its tree; removed it and fetching it again");
                    remove_quietly(&archive_path);
                }
            }
        }
        self.fetch_and_unpack(tree, &archive_path, dest).await
    }
}

/// Removes a file or link at `path` (a directory there too), never following a link.
fn remove_quietly(path: &Path) {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {
            let _ = std::fs::remove_dir_all(path);
        }
        Ok(_) => {
            let _ = std::fs::remove_file(path);
        }
        Err(_) => {}
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
    Replaced {
        /// The digest the store held, hex sha256.
        stored: String,
    },
}

/// An uploaded tree: its archive's sha256, and what the store held before.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadedTree {
    /// The archive's sha256, hex.
    pub sha256: String,
    /// Whether it was already there, sent, or replaced a different one.
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
