//! The artifact store: logs, reports, sources and evidence, addressed by key, each recorded
//! with its sha256. One trait; the backend is any `object_store` (local directory, memory, and
//! the cloud stores when their features are enabled).

use assay_common::fault;
use assay_common::job::{ArtifactRef, JobResult};
use async_trait::async_trait;
use bytes::Bytes;
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, PutPayload, WriteMultipart};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Artifacts above this size are uploaded in parts.
pub const MULTIPART_THRESHOLD: usize = 8 * 1024 * 1024;
/// S3's minimum part size is 5 MiB (except the last).
const MULTIPART_PART_SIZE: usize = 5 * 1024 * 1024;

/// `path`'s read failing while storing it at `key`.
fn local_read_error(path: &Path, key: &str, source: std::io::Error) -> StoreError {
    StoreError::ReadLocal {
        path: path.to_owned(),
        key: key.to_owned(),
        source,
    }
}

/// The local file to store at `key`, opened, with its length.
async fn open_local(path: &Path, key: &str) -> Result<(tokio::fs::File, u64), StoreError> {
    let file = tokio::fs::File::open(path)
        .await
        .map_err(|e| local_read_error(path, key, e))?;
    let length = file
        .metadata()
        .await
        .map_err(|e| local_read_error(path, key, e))?
        .len();
    Ok((file, length))
}

/// Why the artifact store could not be opened, or an object put, read, listed or deleted.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store URL has a scheme Assay does not serve.
    #[error(
        "store URL {url:?} is not supported (hint: use file:///ABSOLUTE/DIR, s3://BUCKET or memory://)"
    )]
    UnsupportedUrl {
        /// The store URL as given.
        url: String,
    },
    /// The store the URL names could not be opened.
    #[error("failed to open store {url}")]
    Open {
        /// The store URL as given.
        url: String,
        /// The underlying error.
        #[source]
        source: object_store::Error,
    },
    /// A file store's directory could not be made.
    #[error("failed to create store directory {path}")]
    CreateDir {
        /// The directory it tried to make.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A local file to upload could not be read.
    #[error("failed to read {path} for upload to {key}")]
    ReadLocal {
        /// The local file to upload.
        path: PathBuf,
        /// The key it was to be stored at.
        key: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The store refused or failed an upload.
    #[error("failed to upload artifact {key}")]
    Put {
        /// The object's key in the store.
        key: String,
        /// The underlying error.
        #[source]
        source: object_store::Error,
    },
    /// The store failed a read (a missing object is `None`, not this).
    #[error("failed to fetch artifact {key}")]
    Get {
        /// The object's key in the store.
        key: String,
        /// The underlying error.
        #[source]
        source: object_store::Error,
    },
    /// The store failed a listing.
    #[error("failed to list the store under {prefix}")]
    List {
        /// The key prefix listed.
        prefix: String,
        /// The underlying error.
        #[source]
        source: object_store::Error,
    },
    /// The store failed a delete.
    #[error("failed to delete artifact {key}")]
    Delete {
        /// The object's key in the store.
        key: String,
        /// The underlying error.
        #[source]
        source: object_store::Error,
    },
    /// A file store's object could not be read from its file.
    #[error("failed to read artifact {key} at {path}")]
    ReadStored {
        /// The object's key in the store.
        key: String,
        /// The file that holds the object.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file store's key holds something other than a regular file.
    #[error(
        "refusing to read artifact {key}: a file store serves regular files only (hint: whoever can write the store put something else at {path}; delete it)"
    )]
    NotRegular {
        /// The object's key in the store.
        key: String,
        /// The file that holds the object.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The S3 bucket the store URL names does not exist: every read of it would otherwise
    /// look like a missing object.
    #[error(
        "failed to read artifact {key}: the bucket {bucket} of store {url} does not exist (hint: create the bucket, or give the store URL of one that exists)"
    )]
    NoSuchBucket {
        /// The object's key in the store.
        key: String,
        /// The bucket the URL names.
        bucket: String,
        /// The store URL as given.
        url: String,
    },
    /// A file store's key leads, through a symlink, outside the store's directory.
    #[error(
        "refusing to read artifact {key}: {path} leads to {target}, outside the store's directory {root} (hint: whoever can write the store linked it there; delete it)"
    )]
    OutsideRoot {
        /// The object's key in the store.
        key: String,
        /// The file that holds the object.
        path: PathBuf,
        /// Where the path leads, canonical.
        target: PathBuf,
        /// The store's directory.
        root: PathBuf,
    },
}

impl StoreError {
    /// Whether the store refused what is at the key (not a regular file, or outside the store)
    /// rather than failing to answer: asking again gives the same answer.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            StoreError::NotRegular { .. } | StoreError::OutsideRoot { .. }
        )
    }
}

/// An object's bytes, a chunk at a time.
pub type ByteStream = futures::stream::BoxStream<'static, Result<Bytes, StoreError>>;

/// One stored object, as a listing shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredObject {
    /// The object's key in the store.
    pub key: String,
    /// Its size, in bytes.
    pub bytes: u64,
    /// Seconds since the epoch of its last write.
    pub modified_secs: i64,
}

/// Where artifacts, trees and offloaded bodies are kept: a directory, S3 or memory.
#[async_trait]
pub trait ArtifactStore: Send + Sync {
    /// Where the store lives, for humans (`file:///…`).
    fn url(&self) -> &str;
    /// Stores `bytes` at `key` and returns its reference (`name`, key, size and sha256).
    async fn put_bytes(
        &self,
        name: &str,
        key: &str,
        bytes: Bytes,
    ) -> Result<ArtifactRef, StoreError>;
    /// The object's bytes, whole; `None` when it is not there.
    async fn get(&self, key: &str) -> Result<Option<Bytes>, StoreError>;
    /// The object's bytes as they arrive, so a reader can bound what it takes and never hold
    /// the object whole; `None` when it is not there.
    async fn get_stream(&self, key: &str) -> Result<Option<ByteStream>, StoreError>;
    /// Like [`ArtifactStore::get_stream`], with the object's size when the store says it
    /// before sending it (its metadata), so a reader can refuse a big object unread. A size is
    /// the store's word: a reader still counts what arrives.
    async fn get_stream_sized(
        &self,
        key: &str,
    ) -> Result<Option<(Option<u64>, ByteStream)>, StoreError> {
        Ok(self.get_stream(key).await?.map(|stream| (None, stream)))
    }
    /// Every object whose key starts with the `prefix` directory (`cache/v1`).
    async fn list(&self, prefix: &str) -> Result<Vec<StoredObject>, StoreError>;
    /// Removes an object; removing one that is not there is not an error.
    async fn delete(&self, key: &str) -> Result<(), StoreError>;

    /// Uploads the file at `path` whole; see [`ArtifactStore::put_file_capped`].
    async fn put_file(
        &self,
        name: &str,
        key: &str,
        path: &Path,
    ) -> Result<ArtifactRef, StoreError> {
        self.put_file_capped(name, key, path, u64::MAX).await
    }

    /// Uploads at most the first `cap` bytes of the file at `path`; the artifact's
    /// `dropped_bytes` says how many more the file had. This default holds what it uploads in
    /// memory (at most `cap`); [`ObjectArtifactStore`] streams it in parts instead.
    async fn put_file_capped(
        &self,
        name: &str,
        key: &str,
        path: &Path,
        cap: u64,
    ) -> Result<ArtifactRef, StoreError> {
        let (file, length) = open_local(path, key).await?;
        put_in_memory(self, (name, key, path), file, length, cap).await
    }
}

/// Stores at most the first `limit` bytes of `file` (opened at `path`, `length` bytes then)
/// at `key` as one object, read into memory first; the artifact's `dropped_bytes` says how many
/// of the `length` it left out. What a store does with a file small enough to hold whole.
async fn put_in_memory<S: ArtifactStore + ?Sized>(
    store: &S,
    (name, key, path): (&str, &str, &Path),
    file: tokio::fs::File,
    length: u64,
    limit: u64,
) -> Result<ArtifactRef, StoreError> {
    use tokio::io::AsyncReadExt as _;
    let mut bytes = Vec::with_capacity(usize::try_from(limit.min(length)).unwrap_or(0));
    file.take(limit)
        .read_to_end(&mut bytes)
        .await
        .map_err(|source| local_read_error(path, key, source))?;
    let mut artifact = store.put_bytes(name, key, Bytes::from(bytes)).await?;
    artifact.dropped_bytes = length.saturating_sub(artifact.bytes);
    Ok(artifact)
}

/// Retries for S3 requests: the fault policy's for an unavailable store
/// (`assay_common::fault`, `InfraCause::StoreUnavailable`).
fn s3_retry() -> object_store::RetryConfig {
    object_store::RetryConfig {
        backoff: object_store::BackoffConfig {
            init_backoff: fault::STORE_BACKOFF.first,
            max_backoff: fault::STORE_BACKOFF.max,
            base: 2.0,
        },
        max_retries: fault::STORE_RETRIES as usize,
        retry_timeout: fault::STORE_RETRY_LIMIT,
    }
}

/// An [`ArtifactStore`] over any `object_store` backend.
pub struct ObjectArtifactStore {
    url: String,
    inner: Arc<dyn ObjectStore>,
    /// An `s3://` store's bucket, to tell a missing bucket from a missing object.
    bucket: Option<String>,
    /// A `file://` store's directory, read by this type itself (see [`LocalReads`]).
    local: Option<LocalReads>,
}

/// A `file://` store's reads. `object_store`'s local backend follows symlinks (out of the
/// store's directory too) and opens FIFOs and devices, whose reads block a thread until
/// someone writes; whoever can write the store could plant either at a key. So reads open
/// only a regular file inside the store's directory, without blocking.
struct LocalReads {
    fs: Arc<object_store::local::LocalFileSystem>,
    /// The store's directory, canonical.
    root: PathBuf,
}

/// Bytes read from a local file per chunk of a stream.
const LOCAL_CHUNK: usize = 256 * 1024;

impl LocalReads {
    /// The regular file at `key`, opened, with its length; `None` when nothing is there.
    fn open(&self, key: &str) -> Result<Option<(std::fs::File, u64, PathBuf)>, StoreError> {
        let path = self
            .fs
            .path_to_filesystem(&StorePath::from(key))
            .map_err(|source| StoreError::Get {
                key: key.to_owned(),
                source,
            })?;
        let io_err = |path: &Path| {
            let path = path.to_owned();
            move |source| StoreError::ReadStored {
                key: key.to_owned(),
                path,
                source,
            }
        };
        match std::fs::symlink_metadata(&path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path)(e)),
        }
        // Where the key really leads, through any link on the way.
        let target = std::fs::canonicalize(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                StoreError::NotRegular {
                    key: key.to_owned(),
                    path: path.clone(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!("{} is a symlink leading nowhere", path.display()),
                    ),
                }
            } else {
                io_err(&path)(e)
            }
        })?;
        if !target.starts_with(&self.root) {
            return Err(StoreError::OutsideRoot {
                key: key.to_owned(),
                path,
                target,
                root: self.root.clone(),
            });
        }
        let file = crate::local_file::open_regular(&target).map_err(|source| {
            if source.kind() == std::io::ErrorKind::InvalidInput {
                StoreError::NotRegular {
                    key: key.to_owned(),
                    path: path.clone(),
                    source,
                }
            } else {
                io_err(&target)(source)
            }
        })?;
        let length = file.metadata().map_err(io_err(&target))?.len();
        Ok(Some((file, length, target)))
    }

    /// [`Self::open`] off the async threads (a file system can be slow, never blocking).
    async fn open_async(
        &self,
        key: &str,
    ) -> Result<Option<(std::fs::File, u64, PathBuf)>, StoreError> {
        let reads = LocalReads {
            fs: self.fs.clone(),
            root: self.root.clone(),
        };
        let owned = key.to_owned();
        tokio::task::spawn_blocking(move || reads.open(&owned))
            .await
            .map_err(|e| StoreError::ReadStored {
                key: key.to_owned(),
                path: self.root.clone(),
                source: std::io::Error::other(e.to_string()),
            })?
    }
}

/// `file`'s bytes a chunk at a time.
fn file_stream(file: std::fs::File, key: &str, path: PathBuf) -> ByteStream {
    use futures::StreamExt as _;
    use tokio::io::AsyncReadExt as _;
    let file = tokio::fs::File::from_std(file);
    let state = (file, key.to_owned(), path);
    futures::stream::try_unfold(state, |(mut file, key, path)| async move {
        let mut chunk = vec![0u8; LOCAL_CHUNK];
        let read = file
            .read(&mut chunk)
            .await
            .map_err(|source| StoreError::ReadStored {
                key: key.clone(),
                path: path.clone(),
                source,
            })?;
        if read == 0 {
            return Ok(None);
        }
        chunk.truncate(read);
        Ok(Some((Bytes::from(chunk), (file, key, path))))
    })
    .boxed()
}

impl ObjectArtifactStore {
    /// A store over `inner`, reported as `url`.
    pub fn new(url: String, inner: Arc<dyn ObjectStore>) -> Self {
        Self {
            url,
            inner,
            bucket: None,
            local: None,
        }
    }

    /// `error`, a read's not-found answer, as [`StoreError::NoSuchBucket`] when S3 said the
    /// bucket itself is missing (`NoSuchBucket`, also a 404); `None` for a missing object.
    fn missing_bucket(&self, key: &str, error: &object_store::Error) -> Option<StoreError> {
        let bucket = self.bucket.as_ref()?;
        // The S3 error code is only in the response body, which object_store keeps in the
        // text of the error it wraps, not in a type it exports.
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
        while let Some(error) = cause {
            if error.to_string().contains("<Code>NoSuchBucket</Code>") {
                return Some(StoreError::NoSuchBucket {
                    key: key.to_owned(),
                    bucket: bucket.clone(),
                    url: self.url.clone(),
                });
            }
            cause = error.source();
        }
        None
    }

    /// Opens `file:///dir` (created if absent), `memory://`, or `s3://bucket` configured by
    /// the standard `AWS_*` variables (endpoint, region, credentials, allow-http).
    pub fn open(url: &str) -> Result<Self, StoreError> {
        Self::open_with_options(url, &[])
    }

    /// Like [`Self::open`], with S3 options (`aws_endpoint`, `aws_allow_http`, …) applied over
    /// the environment's.
    pub fn open_with_options(url: &str, s3_options: &[(&str, &str)]) -> Result<Self, StoreError> {
        if let Some(bucket) = url.strip_prefix("s3://") {
            let bucket = bucket.trim_end_matches('/');
            if bucket.is_empty() || bucket.contains('/') {
                return Err(StoreError::UnsupportedUrl {
                    url: url.to_owned(),
                });
            }
            let mut builder =
                object_store::aws::AmazonS3Builder::from_env().with_bucket_name(bucket);
            for (key, value) in s3_options {
                let key = key
                    .parse::<object_store::aws::AmazonS3ConfigKey>()
                    .map_err(|source| StoreError::Open {
                        url: url.to_owned(),
                        source,
                    })?;
                builder = builder.with_config(key, *value);
            }
            let s3 = builder
                .with_retry(s3_retry())
                .build()
                .map_err(|source| StoreError::Open {
                    url: url.to_owned(),
                    source,
                })?;
            let mut store = Self::new(url.to_owned(), Arc::new(s3));
            store.bucket = Some(bucket.to_owned());
            return Ok(store);
        }
        if url == "memory://" || url == "memory:///" {
            return Ok(Self::new(
                url.to_owned(),
                Arc::new(object_store::memory::InMemory::new()),
            ));
        }
        if let Some(dir) = url.strip_prefix("file://") {
            let dir = Path::new(dir);
            if !dir.is_absolute() {
                return Err(StoreError::UnsupportedUrl {
                    url: url.to_owned(),
                });
            }
            std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                path: dir.to_owned(),
                source,
            })?;
            let local = Arc::new(
                object_store::local::LocalFileSystem::new_with_prefix(dir).map_err(|source| {
                    StoreError::Open {
                        url: url.to_owned(),
                        source,
                    }
                })?,
            );
            let root = std::fs::canonicalize(dir).map_err(|source| StoreError::CreateDir {
                path: dir.to_owned(),
                source,
            })?;
            let mut store = Self::new(url.to_owned(), local.clone());
            store.local = Some(LocalReads { fs: local, root });
            return Ok(store);
        }
        Err(StoreError::UnsupportedUrl {
            url: url.to_owned(),
        })
    }
}

#[async_trait]
impl ArtifactStore for ObjectArtifactStore {
    fn url(&self) -> &str {
        &self.url
    }

    async fn put_bytes(
        &self,
        name: &str,
        key: &str,
        bytes: Bytes,
    ) -> Result<ArtifactRef, StoreError> {
        let sha256 = hex::encode(Sha256::digest(&bytes));
        let size = bytes.len() as u64;
        let put_err = |source| StoreError::Put {
            key: key.to_owned(),
            source,
        };
        let path = StorePath::from(key);
        if bytes.len() > MULTIPART_THRESHOLD {
            // Large logs go in parts: S3 caps a single PUT and retries a whole body on failure.
            let upload = self.inner.put_multipart(&path).await.map_err(put_err)?;
            let mut writer = WriteMultipart::new_with_chunk_size(upload, MULTIPART_PART_SIZE);
            writer.put(bytes);
            writer.finish().await.map_err(put_err)?;
        } else {
            self.inner
                .put(&path, PutPayload::from_bytes(bytes))
                .await
                .map_err(put_err)?;
        }
        Ok(ArtifactRef {
            name: name.to_owned(),
            key: key.to_owned(),
            sha256,
            bytes: size,
            dropped_bytes: 0,
        })
    }

    /// Streams the file's first `cap` bytes: a part at a time in parts (at most two parts in
    /// memory), or in one request when it is small, so a job's huge log never sits whole in
    /// the worker's memory.
    async fn put_file_capped(
        &self,
        name: &str,
        key: &str,
        path: &Path,
        cap: u64,
    ) -> Result<ArtifactRef, StoreError> {
        use tokio::io::AsyncReadExt as _;
        let read_err = |source| local_read_error(path, key, source);
        let (file, length) = open_local(path, key).await?;
        let stored = length.min(cap);
        if stored <= MULTIPART_THRESHOLD as u64 {
            return put_in_memory(self, (name, key, path), file, length, stored).await;
        }
        let put_err = |source| StoreError::Put {
            key: key.to_owned(),
            source,
        };
        let upload = self
            .inner
            .put_multipart(&StorePath::from(key))
            .await
            .map_err(put_err)?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, MULTIPART_PART_SIZE);
        let mut hasher = Sha256::new();
        let mut reader = file.take(stored);
        let mut sent = 0u64;
        loop {
            let mut chunk = vec![0u8; MULTIPART_PART_SIZE];
            let mut filled = 0;
            while filled < chunk.len() {
                match reader.read(&mut chunk[filled..]).await {
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(source) => {
                        writer.abort().await.ok();
                        return Err(read_err(source));
                    }
                }
            }
            if filled == 0 {
                break;
            }
            chunk.truncate(filled);
            hasher.update(&chunk);
            sent += filled as u64;
            // Waits while parts are in flight, so memory stays at a few parts.
            if let Err(source) = writer.wait_for_capacity(1).await {
                writer.abort().await.ok();
                return Err(put_err(source));
            }
            writer.put(Bytes::from(chunk));
        }
        writer.finish().await.map_err(put_err)?;
        Ok(ArtifactRef {
            name: name.to_owned(),
            key: key.to_owned(),
            sha256: hex::encode(hasher.finalize()),
            bytes: sent,
            dropped_bytes: length.saturating_sub(sent),
        })
    }

    async fn get(&self, key: &str) -> Result<Option<Bytes>, StoreError> {
        if let Some(local) = &self.local {
            let Some((file, _, path)) = local.open_async(key).await? else {
                return Ok(None);
            };
            let read = tokio::task::spawn_blocking(move || {
                use std::io::Read as _;
                let mut bytes = Vec::new();
                let mut file = file;
                file.read_to_end(&mut bytes).map(|_| bytes)
            })
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(|read| read);
            return read
                .map(|bytes| Some(Bytes::from(bytes)))
                .map_err(|source| StoreError::ReadStored {
                    key: key.to_owned(),
                    path,
                    source,
                });
        }
        match self.inner.get(&StorePath::from(key)).await {
            Ok(result) => result
                .bytes()
                .await
                .map(Some)
                .map_err(|source| StoreError::Get {
                    key: key.to_owned(),
                    source,
                }),
            Err(e @ object_store::Error::NotFound { .. }) => match self.missing_bucket(key, &e) {
                Some(missing) => Err(missing),
                None => Ok(None),
            },
            Err(source) => Err(StoreError::Get {
                key: key.to_owned(),
                source,
            }),
        }
    }

    async fn get_stream(&self, key: &str) -> Result<Option<ByteStream>, StoreError> {
        Ok(self.get_stream_sized(key).await?.map(|(_, stream)| stream))
    }

    async fn get_stream_sized(
        &self,
        key: &str,
    ) -> Result<Option<(Option<u64>, ByteStream)>, StoreError> {
        use futures::StreamExt as _;
        if let Some(local) = &self.local {
            return Ok(local
                .open_async(key)
                .await?
                .map(|(file, length, path)| (Some(length), file_stream(file, key, path))));
        }
        match self.inner.get(&StorePath::from(key)).await {
            Ok(result) => {
                let size = result.meta.size;
                let key = key.to_owned();
                Ok(Some((
                    Some(size),
                    result
                        .into_stream()
                        .map(move |chunk| {
                            chunk.map_err(|source| StoreError::Get {
                                key: key.clone(),
                                source,
                            })
                        })
                        .boxed(),
                )))
            }
            Err(e @ object_store::Error::NotFound { .. }) => match self.missing_bucket(key, &e) {
                Some(missing) => Err(missing),
                None => Ok(None),
            },
            Err(source) => Err(StoreError::Get {
                key: key.to_owned(),
                source,
            }),
        }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<StoredObject>, StoreError> {
        use futures::TryStreamExt as _;
        let list_err = |source| StoreError::List {
            prefix: prefix.to_owned(),
            source,
        };
        let objects: Vec<object_store::ObjectMeta> = self
            .inner
            .list(Some(&StorePath::from(prefix)))
            .try_collect()
            .await
            .map_err(list_err)?;
        Ok(objects
            .into_iter()
            .map(|meta| StoredObject {
                key: meta.location.to_string(),
                bytes: meta.size,
                modified_secs: meta.last_modified.timestamp(),
            })
            .collect())
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        match self.inner.delete(&StorePath::from(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(source) => Err(StoreError::Delete {
                key: key.to_owned(),
                source,
            }),
        }
    }
}

/// Why an artifact a result names could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// No object at the key the result names.
    #[error("artifact {name} ({key}) is missing from the store")]
    Missing {
        /// The artifact's name in the result (e.g. `report`, `stdout`).
        name: String,
        /// The artifact's key in the store.
        key: String,
    },
    /// The object's sha256 is not the one the result recorded.
    #[error(
        "artifact {name} ({key}) does not match its recorded sha256 {expected} (read {actual}): the stored copy was altered or truncated"
    )]
    Altered {
        /// The artifact's name in the result (e.g. `report`, `stdout`).
        name: String,
        /// The artifact's key in the store.
        key: String,
        /// The sha256 the result recorded, hex.
        expected: String,
        /// The sha256 of the bytes read, hex.
        actual: String,
    },
    /// The store failed the read.
    #[error("failed to read artifact {name} ({key})")]
    Store {
        /// The artifact's name in the result (e.g. `report`, `stdout`).
        name: String,
        /// The artifact's key in the store.
        key: String,
        /// The store's error.
        #[source]
        source: StoreError,
    },
}

/// Reads an artifact back and checks it against the sha256 recorded when it was written: the
/// one way results' logs, reports and coverage maps are read, so bytes altered in the store
/// are an error, never evidence.
pub async fn read_artifact(
    store: &dyn ArtifactStore,
    artifact: &ArtifactRef,
) -> Result<Bytes, ArtifactError> {
    let bytes = store
        .get(&artifact.key)
        .await
        .map_err(|source| ArtifactError::Store {
            name: artifact.name.clone(),
            key: artifact.key.clone(),
            source,
        })?
        .ok_or_else(|| ArtifactError::Missing {
            name: artifact.name.clone(),
            key: artifact.key.clone(),
        })?;
    let actual = hex::encode(Sha256::digest(&bytes));
    if !actual.eq_ignore_ascii_case(&artifact.sha256) {
        return Err(ArtifactError::Altered {
            name: artifact.name.clone(),
            key: artifact.key.clone(),
            expected: artifact.sha256.clone(),
            actual,
        });
    }
    Ok(bytes)
}

/// The artifact named `name` (`report`, `stdout`, `stderr`) of a result, read and checked as
/// [`read_artifact`] does; `None` when the result names no such artifact.
pub async fn read_named(
    store: &dyn ArtifactStore,
    result: &JobResult,
    name: &str,
) -> Result<Option<Bytes>, ArtifactError> {
    match result.artifacts.iter().find(|a| a.name == name) {
        Some(artifact) => read_artifact(store, artifact).await.map(Some),
        None => Ok(None),
    }
}

/// Opens the store at `url` with the S3 options a service configuration lists.
pub fn open_store(
    url: &str,
    s3_options: &[(String, String)],
) -> Result<ObjectArtifactStore, StoreError> {
    let options: Vec<(&str, &str)> = s3_options
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    ObjectArtifactStore::open_with_options(url, &options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_large_artifact_goes_in_parts_and_keeps_its_sha256() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        let store = ObjectArtifactStore::open(&url).unwrap();
        let log: Vec<u8> = (0..MULTIPART_THRESHOLD + 3_000_000)
            .map(|i| b"invoice 42 settled\n"[i % 19])
            .collect();
        let artifact = store
            .put_bytes(
                "stdout",
                "proofs/p-2/jobs/0001/stdout.log",
                log.clone().into(),
            )
            .await
            .unwrap();
        assert_eq!(artifact.sha256, hex::encode(Sha256::digest(&log)));
        let back = store
            .get("proofs/p-2/jobs/0001/stdout.log")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(back.len(), log.len());
        assert_eq!(hex::encode(Sha256::digest(&back)), artifact.sha256);
    }

    #[tokio::test]
    async fn a_capped_file_stores_its_first_bytes_and_counts_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            ObjectArtifactStore::open(&format!("file://{}", dir.path().join("store").display()))
                .unwrap();
        let log: Vec<u8> = (0..MULTIPART_THRESHOLD * 2)
            .map(|i| b"invoice 42 settled\n"[i % 19])
            .collect();
        let path = dir.path().join("stdout.log");
        std::fs::write(&path, &log).unwrap();
        for cap in [
            100,
            MULTIPART_THRESHOLD as u64 + 12_345,
            u64::MAX,
            log.len() as u64,
        ] {
            let artifact = store
                .put_file_capped("stdout", "runs/p1/stdout.log", &path, cap)
                .await
                .unwrap();
            let kept = &log[..log.len().min(cap as usize)];
            assert_eq!(artifact.bytes, kept.len() as u64, "cap {cap}");
            assert_eq!(artifact.dropped_bytes, (log.len() - kept.len()) as u64);
            assert_eq!(artifact.sha256, hex::encode(Sha256::digest(kept)));
            assert_eq!(read_artifact(&store, &artifact).await.unwrap(), kept);
        }
    }

    async fn round_trip(store: &dyn ArtifactStore) {
        let artifact = store
            .put_bytes(
                "stdout",
                "proofs/p-1/jobs/0000/stdout.log",
                Bytes::from_static(b"3 passed\n"),
            )
            .await
            .unwrap();
        assert_eq!(artifact.bytes, 9);
        assert_eq!(artifact.sha256, hex::encode(Sha256::digest(b"3 passed\n")),);
        let back = store.get("proofs/p-1/jobs/0000/stdout.log").await.unwrap();
        assert_eq!(back.as_deref(), Some(&b"3 passed\n"[..]));
        assert_eq!(store.get("proofs/p-1/absent").await.unwrap(), None);
    }

    #[tokio::test]
    async fn local_directory_store_round_trips_and_pins_sha256() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().join("store").display());
        let store = ObjectArtifactStore::open(&url).unwrap();
        round_trip(&store).await;
        assert!(
            dir.path()
                .join("store/proofs/p-1/jobs/0000/stdout.log")
                .is_file()
        );
    }

    #[tokio::test]
    async fn memory_store_round_trips() {
        round_trip(&ObjectArtifactStore::open("memory://").unwrap()).await;
    }

    #[test]
    fn relative_and_unknown_urls_are_refused_with_a_hint() {
        for url in ["file://relative/dir", "ftp://host/x"] {
            let err = ObjectArtifactStore::open(url).err().unwrap();
            assert!(err.to_string().contains("hint"), "{err}");
        }
    }

    #[tokio::test]
    async fn a_file_store_reads_only_regular_files_inside_its_directory_and_never_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        let store = ObjectArtifactStore::open(&format!("file://{}", root.display())).unwrap();
        store
            .put_bytes("report", "runs/p1/report.xml", Bytes::from_static(b"<ok/>"))
            .await
            .unwrap();
        std::fs::write(dir.path().join("secret.txt"), b"outside").unwrap();
        let runs = root.join("runs/p1");
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), runs.join("out.txt")).unwrap();
        std::os::unix::fs::symlink("report.xml", runs.join("alias.xml")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", runs.join("zero")).unwrap();
        std::os::unix::fs::symlink(dir.path(), root.join("up")).unwrap();
        std::os::unix::fs::symlink(runs.join("gone"), runs.join("dangling")).unwrap();
        std::fs::create_dir_all(runs.join("dir")).unwrap();
        let fifo = runs.join("queue");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let refused = [
            ("runs/p1/out.txt", "outside the store's directory"),
            ("runs/p1/zero", "outside the store's directory"),
            ("up/secret.txt", "outside the store's directory"),
            ("runs/p1/dangling", "a symlink leading nowhere"),
            ("runs/p1/dir", "is a directory"),
            ("runs/p1/queue", "is a FIFO"),
        ];
        for (key, why) in refused {
            let started = std::time::Instant::now();
            for err in [
                store.get(key).await.unwrap_err(),
                store.get_stream(key).await.err().unwrap(),
            ] {
                assert!(err.is_refusal(), "{key}: {err:?}");
                let text = crate::error_chain::error_chain(&err);
                assert!(text.contains(why), "{key}: {text}");
                assert!(text.contains(key), "{key}: {text}");
            }
            assert!(started.elapsed() < Duration::from_secs(2), "{key} blocked");
        }
        // A link inside the store is read, and a missing key is not an error.
        assert_eq!(
            store.get("runs/p1/alias.xml").await.unwrap().as_deref(),
            Some(&b"<ok/>"[..])
        );
        assert_eq!(store.get("runs/p1/absent").await.unwrap(), None);
        let (size, _) = store
            .get_stream_sized("runs/p1/report.xml")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(size, Some(5));
    }

    #[tokio::test]
    async fn an_artifact_altered_in_the_store_is_refused_on_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = ObjectArtifactStore::open(&format!("file://{}", dir.path().display())).unwrap();
        let artifact = store
            .put_bytes(
                "report",
                "runs/p1/report.xml",
                Bytes::from_static(b"<testsuite/>"),
            )
            .await
            .unwrap();
        assert_eq!(
            read_artifact(&store, &artifact).await.unwrap(),
            Bytes::from_static(b"<testsuite/>")
        );
        // Someone with write access to the bucket swaps the report for a passing one.
        std::fs::write(
            dir.path().join("runs/p1/report.xml"),
            b"<testsuite tests=\"1\"/>",
        )
        .unwrap();
        let error = read_artifact(&store, &artifact).await.unwrap_err();
        assert!(matches!(error, ArtifactError::Altered { .. }), "{error}");
        assert!(error.to_string().contains("runs/p1/report.xml"), "{error}");
        std::fs::remove_file(dir.path().join("runs/p1/report.xml")).unwrap();
        let error = read_artifact(&store, &artifact).await.unwrap_err();
        assert!(matches!(error, ArtifactError::Missing { .. }), "{error}");
    }
}
