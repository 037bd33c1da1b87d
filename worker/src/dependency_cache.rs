//! A worker's unpacked dependency archives (see `assay_common::dependency_archive`): each one
//! fetched from the store once, checked against the sha256 its job names, unpacked
//! ([`assay_transport::dependency_archive::unpack`]) into a private directory and moved into
//! place whole, so a directory in the cache is always complete. Jobs of the same archive run
//! concurrently on one worker, and workers may share the directory: whoever moves first wins,
//! the others use what is there. Nothing here is ever written again; clearing it is removing
//! the directory (docs/operations.md, "Dependency archives").

use assay_common::dependency_archive::{DependencyArchive, DependencyKind};
use assay_transport::archive::ArchiveLimits;
use assay_transport::dependency_archive::UnpackError;
use assay_transport::store::{ArtifactStore, StoreError};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Why a job's dependency archive could not be put in place for its build.
#[derive(Debug, thiserror::Error)]
pub enum DependencyCacheError {
    /// The store failed to hand the archive over.
    #[error("failed to fetch the dependency archive {key}")]
    Fetch {
        /// The archive's key in the store.
        key: String,
        /// The underlying error.
        #[source]
        source: Box<StoreError>,
    },
    /// The store has no archive at the key the job names.
    #[error("the dependency archive {key} is missing from the store")]
    Missing {
        /// The archive's key in the store.
        key: String,
    },
    /// The archive's sha256 is not the one the job names.
    #[error(
        "the dependency archive {key} does not match the sha256 its job names ({expected}; read {actual}): refused"
    )]
    Altered {
        /// The archive's key in the store.
        key: String,
        /// The sha256 the job names, hex.
        expected: String,
        /// The sha256 of the bytes read, hex.
        actual: String,
    },
    /// The stored archive is bigger than the worker allows.
    #[error("the dependency archive {key} is {found} bytes, more than the {limit} allowed")]
    TooBig {
        /// The archive's key in the store.
        key: String,
        /// The archive's size, in bytes.
        found: u64,
        /// The most bytes allowed.
        limit: u64,
    },
    /// The archive was refused or failed while unpacking.
    #[error("the dependency archive {key} cannot be unpacked into {dir}")]
    Unpack {
        /// The archive's key in the store.
        key: String,
        /// The directory it was being unpacked into.
        dir: PathBuf,
        /// The underlying error.
        #[source]
        source: UnpackError,
    },
    /// The cache's directories could not be made or read.
    #[error("failed to prepare the dependency cache at {path}")]
    Io {
        /// The directory or file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The tree's cargo config declares its own sources.
    #[error(
        "the tree's {path} declares cargo sources, which would override the dependency archive the job names (hint: a project that vendors its own dependencies needs no archive: pin them in the tree)"
    )]
    TreeSources {
        /// The config file's path in the tree.
        path: String,
    },
    /// The tree's cargo config is not a regular file (a symlink, a directory).
    #[error("the tree's {path} is not a regular file: refused for a job with a dependency archive")]
    TreeConfigNotAFile {
        /// The config file's path in the tree.
        path: String,
    },
    /// The job names an archive but this worker has no dependency cache.
    #[error("this worker keeps no dependency archives, and the job names one")]
    NoCache,
}

/// The unpacked archives under one directory, each in a directory of its own named
/// [`DependencyArchive::cache_name`].
pub struct DependencyCache {
    root: PathBuf,
    limits: ArchiveLimits,
    /// One lock per archive, so this worker's slots fetch each archive once.
    fetching: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl DependencyCache {
    /// A cache under `root` whose archives may unpack to no more than `limits` (the worker's
    /// tree limits).
    pub fn new(root: PathBuf, limits: ArchiveLimits) -> Self {
        Self {
            root,
            limits,
            fetching: Mutex::new(HashMap::new()),
        }
    }

    /// The directory the unpacked archives are under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory holding `archive`'s sources unpacked, fetched from `store` first when
    /// this cache does not hold it.
    pub async fn vendored(
        &self,
        store: &dyn ArtifactStore,
        archive: &DependencyArchive,
    ) -> Result<PathBuf, DependencyCacheError> {
        let dir = self.root.join(archive.cache_name());
        if dir.is_dir() {
            return Ok(dir);
        }
        let lock = {
            let mut fetching = self.fetching.lock().unwrap_or_else(|p| p.into_inner());
            fetching.entry(archive.cache_name()).or_default().clone()
        };
        let _held = lock.lock().await;
        if dir.is_dir() {
            return Ok(dir);
        }
        let key = archive.key();
        let limit = self.limits.max_archive_bytes();
        if archive.bytes > limit {
            return Err(DependencyCacheError::TooBig {
                key,
                found: archive.bytes,
                limit,
            });
        }
        let bytes = fetch(store, &key, archive).await?;
        let root = self.root.clone();
        let limits = self.limits;
        let target = dir.clone();
        tokio::task::spawn_blocking(move || place(&bytes, &root, &target, &key, limits))
            .await
            .map_err(|e| DependencyCacheError::Io {
                path: dir.clone(),
                source: std::io::Error::other(e.to_string()),
            })??;
        Ok(dir)
    }
}

/// The archive's bytes, read from `store` no further than the size the job names, and
/// refused unless they hash to the sha256 it names.
async fn fetch(
    store: &dyn ArtifactStore,
    key: &str,
    archive: &DependencyArchive,
) -> Result<Vec<u8>, DependencyCacheError> {
    use futures::StreamExt as _;
    use sha2::{Digest, Sha256};
    let failed = |source| DependencyCacheError::Fetch {
        key: key.to_owned(),
        source: Box::new(source),
    };
    let mut stream = store
        .get_stream(key)
        .await
        .map_err(failed)?
        .ok_or_else(|| DependencyCacheError::Missing {
            key: key.to_owned(),
        })?;
    let mut bytes = Vec::new();
    let mut hasher = Sha256::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(failed)?;
        let found = (bytes.len() + chunk.len()) as u64;
        if found > archive.bytes {
            return Err(DependencyCacheError::TooBig {
                key: key.to_owned(),
                found,
                limit: archive.bytes,
            });
        }
        hasher.update(&chunk);
        bytes.extend_from_slice(&chunk);
    }
    let actual = hex::encode(hasher.finalize());
    if actual != archive.sha256.as_str() {
        return Err(DependencyCacheError::Altered {
            key: key.to_owned(),
            expected: archive.sha256.to_string(),
            actual,
        });
    }
    Ok(bytes)
}

/// What a job with a dependency archive is given: the environment that makes its toolchain
/// build from the unpacked archive (a cargo home of its own whose configuration replaces the
/// registry with it; a Go module cache), and that directory, bound read-only.
pub struct JobDependencies {
    /// The variables to set, over the job's own: `CARGO_HOME` (in the job's private
    /// directory), or `GOMODCACHE` and what keeps `go` off the network.
    pub env: Vec<(String, String)>,
    /// The unpacked archive on the worker's disk.
    pub sources: PathBuf,
}

/// Cargo's configuration files a tree holds at its root, which cargo, run there, reads before
/// (and over) the job's cargo home.
const TREE_CONFIGS: [&str; 2] = [".cargo/config.toml", ".cargo/config"];

/// Prepares a job on `archive`: for cargo, refuses a tree whose own cargo configuration
/// declares sources (it would take precedence over the job's); fetches the archive into
/// `cache`; and names it where `sandbox` shows it, for cargo in a cargo home written under
/// `private`.
pub async fn for_job(
    cache: Option<&DependencyCache>,
    store: &dyn ArtifactStore,
    sandbox: &dyn crate::sandbox::Sandbox,
    archive: &DependencyArchive,
    tree_dir: &Path,
    private: &Path,
) -> Result<JobDependencies, DependencyCacheError> {
    let git = match archive.kind {
        DependencyKind::Cargo => {
            for config in TREE_CONFIGS {
                refuse_tree_sources(&tree_dir.join(config), config)?;
            }
            git_sources_of(tree_dir)?
        }
        DependencyKind::Go => Vec::new(),
    };
    let cache = cache.ok_or(DependencyCacheError::NoCache)?;
    let sources = cache.vendored(store, archive).await?;
    let guest = sandbox.vendored_path(&sources);
    let env = match archive.kind {
        DependencyKind::Cargo => cargo_home(private, &guest, &git).await?,
        DependencyKind::Go => go_env(&guest),
    };
    Ok(JobDependencies { env, sources })
}

/// Writes the job's cargo home under `private`, its configuration naming the archive at
/// `guest`, and returns the variable that names it.
async fn cargo_home(
    private: &Path,
    guest: &str,
    git: &[assay_common::dependency_archive::GitSource],
) -> Result<Vec<(String, String)>, DependencyCacheError> {
    let cargo_home = private.join("cargo-home");
    let config = assay_common::dependency_archive::cargo_config(guest, git);
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| DependencyCacheError::Io { path, source }
    };
    tokio::fs::create_dir_all(&cargo_home)
        .await
        .map_err(io(&cargo_home))?;
    let config_path = cargo_home.join("config.toml");
    tokio::fs::write(&config_path, config)
        .await
        .map_err(io(&config_path))?;
    Ok(vec![(
        "CARGO_HOME".to_owned(),
        cargo_home.to_string_lossy().into_owned(),
    )])
}

/// A Go job's module cache: the archive at `guest`, read-only (it holds the extracted
/// modules, so `go` writes nothing there), and no proxy, checksum database or toolchain
/// download to reach for.
fn go_env(guest: &str) -> Vec<(String, String)> {
    [
        ("GOMODCACHE", guest),
        ("GOPROXY", "off"),
        ("GOFLAGS", "-mod=mod"),
        ("GOSUMDB", "off"),
        ("GOTOOLCHAIN", "local"),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value.to_owned()))
    .collect()
}

/// The git sources the tree's `Cargo.lock` names, which the archive holds vendored (none when
/// the tree has no lockfile at its root; one that is not a regular file is never followed).
fn git_sources_of(
    tree_dir: &Path,
) -> Result<Vec<assay_common::dependency_archive::GitSource>, DependencyCacheError> {
    let lockfile = tree_dir.join("Cargo.lock");
    match std::fs::symlink_metadata(&lockfile) {
        Ok(meta) if meta.is_file() => {}
        _ => return Ok(Vec::new()),
    }
    let text = std::fs::read_to_string(&lockfile).map_err(|source| DependencyCacheError::Io {
        path: lockfile.clone(),
        source,
    })?;
    Ok(assay_common::dependency_archive::git_sources(&text))
}

/// Refuses the tree's cargo configuration at `path` (named `name` in the tree) when it
/// declares `[source]` tables, or is anything but a regular file (never followed).
fn refuse_tree_sources(path: &Path, name: &str) -> Result<(), DependencyCacheError> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    if !meta.is_file() {
        return Err(DependencyCacheError::TreeConfigNotAFile {
            path: name.to_owned(),
        });
    }
    let text = std::fs::read_to_string(path).map_err(|source| DependencyCacheError::Io {
        path: path.to_owned(),
        source,
    })?;
    // What cargo cannot parse, cargo refuses itself; a dotted key (`source.x.directory = …`)
    // is a table all the same once parsed.
    let declares = text
        .parse::<toml::Table>()
        .map(|table| table.contains_key("source"))
        .unwrap_or(false);
    match declares {
        true => Err(DependencyCacheError::TreeSources {
            path: name.to_owned(),
        }),
        false => Ok(()),
    }
}

/// Unpacks `bytes` beside `target` and moves the result into place; another worker that
/// moved its copy first wins.
fn place(
    bytes: &[u8],
    root: &Path,
    target: &Path,
    key: &str,
    limits: ArchiveLimits,
) -> Result<(), DependencyCacheError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| DependencyCacheError::Io { path, source }
    };
    std::fs::create_dir_all(root).map_err(io(root))?;
    let staging = tempfile::Builder::new()
        .prefix(".unpacking-")
        .tempdir_in(root)
        .map_err(io(root))?;
    let unpacked = staging.path().join("sources");
    assay_transport::dependency_archive::unpack(bytes, &unpacked, limits).map_err(|source| {
        DependencyCacheError::Unpack {
            key: key.to_owned(),
            dir: unpacked.clone(),
            source,
        }
    })?;
    match std::fs::rename(&unpacked, target) {
        Ok(()) => Ok(()),
        Err(_) if target.is_dir() => Ok(()),
        Err(source) => Err(DependencyCacheError::Io {
            path: target.to_owned(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_common::dependency_archive::Sha256Hex;
    use assay_transport::store::ObjectArtifactStore;
    use sha2::{Digest, Sha256};

    fn packed() -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("lru-0.12.5/src")).unwrap();
        std::fs::write(dir.path().join("lru-0.12.5/src/lib.rs"), "// lru\n").unwrap();
        assay_transport::dependency_archive::pack(dir.path()).unwrap()
    }

    fn named(bytes: &[u8]) -> DependencyArchive {
        DependencyArchive {
            lockfile_sha256: Sha256Hex::parse(&"c".repeat(64)).unwrap(),
            sha256: Sha256Hex::parse(&hex::encode(Sha256::digest(bytes))).unwrap(),
            bytes: bytes.len() as u64,
            kind: DependencyKind::Cargo,
        }
    }

    /// A memory store holding the packed archive, and its name.
    async fn stored_archive() -> (ObjectArtifactStore, DependencyArchive) {
        let store = ObjectArtifactStore::open("memory://").unwrap();
        let bytes = packed();
        let archive = named(&bytes);
        store
            .put_bytes("dependencies", &archive.key(), bytes.into())
            .await
            .unwrap();
        (store, archive)
    }

    #[tokio::test]
    async fn concurrent_jobs_of_one_archive_fetch_it_once_and_share_the_directory() {
        let (store, archive) = stored_archive().await;
        let root = tempfile::tempdir().unwrap();
        let cache = DependencyCache::new(root.path().join("deps"), ArchiveLimits::default());
        let (a, b) = tokio::join!(
            cache.vendored(&store, &archive),
            cache.vendored(&store, &archive)
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(a, b);
        assert_eq!(
            std::fs::read_to_string(a.join("lru-0.12.5/src/lib.rs")).unwrap(),
            "// lru\n"
        );
        // Gone from the store, it is still served from the worker's disk.
        store.delete(&archive.key()).await.unwrap();
        assert_eq!(cache.vendored(&store, &archive).await.unwrap(), a);
        let entries: Vec<_> = std::fs::read_dir(root.path().join("deps"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            entries,
            vec![std::ffi::OsString::from(archive.cache_name())]
        );
    }

    #[tokio::test]
    async fn a_tree_whose_cargo_configuration_declares_sources_is_refused() {
        let (store, archive) = stored_archive().await;
        let dir = tempfile::tempdir().unwrap();
        let cache = DependencyCache::new(dir.path().join("deps"), ArchiveLimits::default());
        let sandbox = crate::sandbox::process::ProcessSandbox { network: false };
        let job = |config: &str, text: Option<&str>| {
            let tree = tempfile::tempdir_in(dir.path()).unwrap();
            let private = tempfile::tempdir_in(dir.path()).unwrap();
            let path = tree.path().join(config);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            match text {
                Some(text) => std::fs::write(&path, text).unwrap(),
                None => std::os::unix::fs::symlink("/etc/hostname", &path).unwrap(),
            }
            (tree, private)
        };
        for (config, text) in [
            (
                ".cargo/config.toml",
                Some(
                    "[source.crates-io]\nreplace-with = \"mine\"\n[source.mine]\ndirectory = \"vendor\"\n",
                ),
            ),
            (
                ".cargo/config",
                Some("source.assay-vendored.directory = \"/elsewhere\"\n"),
            ),
            (".cargo/config.toml", None),
        ] {
            let (tree, private) = job(config, text);
            let refused = for_job(
                Some(&cache),
                &store,
                &sandbox,
                &archive,
                tree.path(),
                private.path(),
            )
            .await;
            assert!(
                matches!(
                    refused,
                    Err(DependencyCacheError::TreeSources { .. }
                        | DependencyCacheError::TreeConfigNotAFile { .. })
                ),
                "{config} {text:?}: {:?}",
                refused.map(|given| given.env)
            );
            assert!(!private.path().join("cargo-home").exists());
        }
        // Other settings of the tree's own stay the tree's business.
        let (tree, private) = job(
            ".cargo/config.toml",
            Some("[build]\nrustflags = [\"-Dwarnings\"]\n"),
        );
        let given = for_job(
            Some(&cache),
            &store,
            &sandbox,
            &archive,
            tree.path(),
            private.path(),
        )
        .await
        .unwrap();
        let cargo_home = &given.env[0].1;
        let config = std::fs::read_to_string(Path::new(cargo_home).join("config.toml")).unwrap();
        assert!(
            config.contains(&format!("directory = \"{}\"", given.sources.display())),
            "{config}"
        );
    }

    #[tokio::test]
    async fn a_go_job_reads_the_unpacked_archive_as_its_module_cache_with_no_proxy() {
        let store = ObjectArtifactStore::open("memory://").unwrap();
        let bytes = packed();
        let archive = DependencyArchive {
            kind: DependencyKind::Go,
            ..named(&bytes)
        };
        store
            .put_bytes("dependencies", &archive.key(), bytes.clone().into())
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cache = DependencyCache::new(dir.path().join("deps"), ArchiveLimits::default());
        let sandbox = crate::sandbox::process::ProcessSandbox { network: false };
        let (tree, private) = (dir.path().join("tree"), dir.path().join("private"));
        std::fs::create_dir_all(&tree).unwrap();
        let given = for_job(Some(&cache), &store, &sandbox, &archive, &tree, &private)
            .await
            .unwrap();
        assert!(given.sources.ends_with(archive.cache_name()));
        assert!(archive.key().starts_with("dependencies/go/"));
        let sources = given.sources.display().to_string();
        for (key, value) in [
            ("GOMODCACHE", sources.as_str()),
            ("GOPROXY", "off"),
            ("GOFLAGS", "-mod=mod"),
            ("GOSUMDB", "off"),
        ] {
            assert!(
                given.env.contains(&(key.to_owned(), value.to_owned())),
                "{:?}",
                given.env
            );
        }
        // No cargo home is written for it.
        assert!(!private.join("cargo-home").exists());
    }

    #[tokio::test]
    async fn an_archive_whose_bytes_are_not_the_ones_the_job_names_is_refused() {
        let store = ObjectArtifactStore::open("memory://").unwrap();
        let bytes = packed();
        let archive = named(&bytes);
        let mut altered = bytes.clone();
        altered[600] ^= 1;
        store
            .put_bytes("dependencies", &archive.key(), altered.into())
            .await
            .unwrap();
        let root = tempfile::tempdir().unwrap();
        let cache = DependencyCache::new(root.path().to_owned(), ArchiveLimits::default());
        let refused = cache.vendored(&store, &archive).await;
        assert!(
            matches!(&refused, Err(DependencyCacheError::Altered { .. })),
            "{refused:?}"
        );
        assert!(!root.path().join(archive.cache_name()).exists());
        // Bytes past the size the job names are not read, whatever they hash to.
        let mut longer = bytes.clone();
        longer.extend_from_slice(&[0; 512]);
        store
            .put_bytes("dependencies", &archive.key(), longer.into())
            .await
            .unwrap();
        let refused = cache.vendored(&store, &archive).await;
        assert!(
            matches!(&refused, Err(DependencyCacheError::TooBig { .. })),
            "{refused:?}"
        );
        assert!(!root.path().join(archive.cache_name()).exists());
        let huge = DependencyArchive {
            bytes: u64::MAX,
            ..archive
        };
        assert!(matches!(
            cache.vendored(&store, &huge).await,
            Err(DependencyCacheError::TooBig { .. })
        ));
    }
}
