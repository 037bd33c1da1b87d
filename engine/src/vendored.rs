//! A project's dependencies made to travel with its trees to a fleet. For a cargo project
//! (a Go module's: [`crate::go_modules`]), on the submitting side, after [`crate::dependencies`] pinned and fetched them, the host's cargo vendors the
//! packages each tree's `Cargo.lock` names (`cargo vendor --locked --offline`, on the same
//! stripped checkout, so neither a build script nor the tree's configuration runs), the result
//! is packed ([`assay_transport::dependency_archive`]) and stored once per lockfile and
//! archive; every job on that tree then names the archive ([`WithDependencies`]), and the
//! worker builds from it with nothing of its own cargo caches.

use crate::dependencies::{self, DependencyError};
use assay_common::TreeId;
use assay_common::dependency_archive::{DependencyArchive, DependencyKind, Sha256Hex};
use assay_common::job::{JobResult, JobSpec};
use assay_transport::queue::{JobQueue, QueueError};
use assay_transport::store::{ArtifactStore, StoreError};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::Path;

/// A tree's dependencies, vendored and packed.
pub struct Vendored {
    /// The archive's description: its key, sha256 and the lockfile it was vendored from.
    pub archive: DependencyArchive,
    /// The packed archive itself.
    pub bytes: Vec<u8>,
}

impl Vendored {
    /// `dir`, where `tree`'s dependencies of `kind` were gathered, packed as the tree's
    /// archive, keyed by the digest of the lockfile they were gathered from.
    pub(crate) fn pack(
        dir: &Path,
        tree: &TreeId,
        kind: DependencyKind,
        lockfile_sha256: Sha256Hex,
    ) -> Result<Self, VendorError> {
        let bytes =
            assay_transport::dependency_archive::pack(dir).map_err(|source| VendorError::Pack {
                tree: tree.clone(),
                source,
            })?;
        Ok(Self {
            archive: DependencyArchive {
                lockfile_sha256,
                sha256: digest(&bytes),
                bytes: bytes.len() as u64,
                kind,
            },
            bytes,
        })
    }
}

/// Why a tree's dependencies could not be vendored or stored.
#[derive(Debug, thiserror::Error)]
pub enum VendorError {
    /// cargo could not pin or fetch the tree's crates.
    #[error(transparent)]
    Cargo(#[from] DependencyError),
    /// go could not read or vendor the tree's modules.
    #[error(transparent)]
    Go(#[from] crate::go_modules::GoModulesError),
    /// The tree's lockfile could not be read.
    #[error("failed to read the {lockfile} of tree {tree}")]
    Lockfile {
        /// The lockfile's name (`Cargo.lock`, `go.sum`).
        lockfile: &'static str,
        /// The tree it was read from.
        tree: TreeId,
        /// The read's failure.
        #[source]
        source: Box<crate::source::SourceError>,
    },
    /// The vendored directory could not be packed into an archive.
    #[error("failed to pack the dependencies vendored for tree {tree}")]
    Pack {
        /// The tree whose dependencies were vendored.
        tree: TreeId,
        /// The packer's failure.
        #[source]
        source: assay_transport::dependency_archive::PackError,
    },
    /// The archive could not be put in the artifact store.
    #[error("failed to store the dependency archive {key}")]
    Store {
        /// The archive's store key.
        key: String,
        /// The store's failure.
        #[source]
        source: Box<StoreError>,
    },
    /// The blocking task that vendored the tree panicked or was cancelled.
    #[error("vendoring the dependencies of tree {tree} stopped: {message}")]
    Task {
        /// The tree being vendored.
        tree: TreeId,
        /// What the task's join said.
        message: String,
    },
}

/// The sha256 of `tree`'s lockfile of `kind` (`Cargo.lock`, `go.sum`), when it has one.
pub fn lockfile_sha256(
    repo: &Path,
    tree: &TreeId,
    kind: DependencyKind,
) -> Result<Option<Sha256Hex>, VendorError> {
    let lockfile = crate::source::read_file(repo, tree, kind.lockfile()).map_err(|source| {
        VendorError::Lockfile {
            lockfile: kind.lockfile(),
            tree: tree.clone(),
            source: Box::new(source),
        }
    })?;
    Ok(lockfile.map(|bytes| digest(&bytes)))
}

pub(crate) fn digest(bytes: &[u8]) -> Sha256Hex {
    // A sha256 in lowercase hex always parses.
    Sha256Hex::parse(&hex::encode(Sha256::digest(bytes)))
        .unwrap_or_else(|_| unreachable!("a sha256 digest is 64 hex digits"))
}

/// Vendors the packages `tree`'s `Cargo.lock` names from the host's cargo caches (which
/// [`dependencies::pin_cargo`] filled) and packs them. `None` when the tree has no lockfile,
/// or when its lockfile names another registry than the default one: the jobs then read the
/// worker's own caches, as before.
pub fn vendor_cargo(repo: &Path, tree: &TreeId) -> Result<Option<Vendored>, VendorError> {
    let Some(lockfile_sha256) = lockfile_sha256(repo, tree, DependencyKind::Cargo)? else {
        return Ok(None);
    };
    let (scratch, copy) = dependencies::stripped_checkout(repo, tree)?;
    let lockfile = copy.join("Cargo.lock");
    let locked = std::fs::read_to_string(&lockfile).map_err(|source| DependencyError::Io {
        tree: tree.clone(),
        path: lockfile.clone(),
        source,
    })?;
    if let Some(other) = other_source(&locked) {
        tracing::warn!(%tree, source = other, "not vendored for the fleet: a dependency comes from another registry; the workers' own cargo caches serve this tree");
        return Ok(None);
    }
    let vendor = scratch.path().join("vendor");
    let vendor_arg = vendor.to_string_lossy();
    let args = ["--offline", "--versioned-dirs", &vendor_arg];
    let locked_args = [&["--locked"], &args[..]].concat();
    if dependencies::cargo(&copy, tree, "vendor", &locked_args).is_err() {
        // As pinning does: a lockfile cargo would have to update is the repository's to fix.
        dependencies::cargo(&copy, tree, "vendor", &args)?;
    }
    if !vendor.is_dir() {
        // No dependency at all: an empty archive, so the job still reads nothing of the host.
        std::fs::create_dir(&vendor).map_err(|source| DependencyError::Io {
            tree: tree.clone(),
            path: vendor.clone(),
            source,
        })?;
    }
    Vendored::pack(&vendor, tree, DependencyKind::Cargo, lockfile_sha256).map(Some)
}

/// The registry's sources as a lockfile names them (the git index, the sparse one).
const REGISTRY_SOURCES: [&str; 2] = [
    "registry+https://github.com/rust-lang/crates.io-index",
    "sparse+https://index.crates.io/",
];

/// A package source `lockfile` (a `Cargo.lock`'s text) names other than the registry and git
/// repositories: another registry, whose packages the job's configuration does not replace.
fn other_source(lockfile: &str) -> Option<String> {
    lockfile
        .lines()
        .filter_map(|line| line.trim().strip_prefix("source = \""))
        .map(|rest| rest.trim_end_matches('"'))
        .find(|source| !REGISTRY_SOURCES.contains(source) && !source.starts_with("git+"))
        .map(str::to_owned)
}

/// Collects the dependencies of `kind` of `tree`: vendored (cargo) or downloaded (Go).
fn collect(
    repo: &Path,
    tree: &TreeId,
    kind: DependencyKind,
) -> Result<Option<Vendored>, VendorError> {
    match kind {
        DependencyKind::Cargo => vendor_cargo(repo, tree),
        DependencyKind::Go => crate::go_modules::collect(repo, tree),
    }
}

/// [`collect`] on a blocking thread.
async fn collect_blocking(
    repo: &Path,
    tree: &TreeId,
    kind: DependencyKind,
) -> Result<Option<Vendored>, VendorError> {
    let (at, of) = (repo.to_owned(), tree.clone());
    tokio::task::spawn_blocking(move || collect(&at, &of, kind))
        .await
        .map_err(|e| VendorError::Task {
            tree: tree.clone(),
            message: e.to_string(),
        })?
}

/// Collects and stores the dependencies of `kind` of each of `trees` (once per distinct
/// lockfile), skipping an upload the store already holds; returns the archive each tree's
/// jobs name.
pub async fn store_archives(
    store: &dyn ArtifactStore,
    repo: &Path,
    trees: &[TreeId],
    kind: DependencyKind,
) -> Result<Vec<(TreeId, DependencyArchive)>, VendorError> {
    let mut by_lockfile: HashMap<Sha256Hex, Option<DependencyArchive>> = HashMap::new();
    let mut archives = Vec::new();
    // Stored once every tree is collected: a tree refused (a `replace` leading out of it)
    // leaves nothing in the store for the proof it stops.
    let mut pending: Vec<Vendored> = Vec::new();
    for tree in trees {
        // A Go archive is made from the tree's go.mod as much as its go.sum, and its
        // replacements are checked against the tree's own files: every tree is collected (in
        // milliseconds, from the host's module cache), and equal bytes are stored once.
        let lockfile = match kind {
            DependencyKind::Cargo => match lockfile_sha256(repo, tree, kind)? {
                Some(lockfile) => Some(lockfile),
                None => continue,
            },
            DependencyKind::Go => None,
        };
        let archive = match lockfile.as_ref().and_then(|l| by_lockfile.get(l)) {
            Some(archive) => archive.clone(),
            None => {
                let vendored = collect_blocking(repo, tree, kind).await?;
                let archive = vendored.as_ref().map(|v| v.archive.clone());
                pending.extend(vendored);
                if let Some(lockfile) = lockfile {
                    by_lockfile.insert(lockfile, archive.clone());
                }
                archive
            }
        };
        if let Some(archive) = archive {
            archives.push((tree.clone(), archive));
        }
    }
    for vendored in &pending {
        upload(store, vendored).await?;
    }
    Ok(archives)
}

/// Stores `vendored` under its key unless the store holds it already.
async fn upload(store: &dyn ArtifactStore, vendored: &Vendored) -> Result<(), VendorError> {
    let key = vendored.archive.key();
    let failed = |source| VendorError::Store {
        key: key.clone(),
        source: Box::new(source),
    };
    // A listing is of a directory: the lockfile's holds each archive made for it.
    let directory = format!(
        "{}{}",
        vendored.archive.kind.key_prefix(),
        vendored.archive.lockfile_sha256
    );
    let stored = store.list(&directory).await.map_err(failed)?;
    if stored
        .iter()
        .any(|o| o.key == key && o.bytes == vendored.archive.bytes)
    {
        tracing::info!(%key, bytes = vendored.archive.bytes, "dependency archive already stored");
        return Ok(());
    }
    let started = std::time::Instant::now();
    store
        .put_bytes("dependencies", &key, vendored.bytes.clone().into())
        .await
        .map_err(failed)?;
    tracing::info!(
        %key,
        bytes = vendored.archive.bytes,
        upload_ms = started.elapsed().as_millis() as u64,
        "dependency archive stored"
    );
    Ok(())
}

/// A queue that names, in every job on one of its trees, that tree's dependency archive, so
/// every job of a proof (the planned ones and those its mutation check and diff coverage add)
/// builds from the archive.
pub struct WithDependencies<'q> {
    inner: &'q dyn JobQueue,
    archives: HashMap<TreeId, DependencyArchive>,
    /// The archive of a job on any other tree.
    otherwise: Option<DependencyArchive>,
}

impl<'q> WithDependencies<'q> {
    /// Wraps `inner`, naming in each job the archive of the job's tree, from `archives`.
    pub fn new(inner: &'q dyn JobQueue, archives: &[(TreeId, DependencyArchive)]) -> Self {
        Self {
            inner,
            archives: archives.iter().cloned().collect(),
            otherwise: None,
        }
    }

    /// Names `archive` in every job: a run on one tree (`assay mutate`), whose jobs run on it
    /// or on trees written from it with its `Cargo.lock` (a mutant schema's).
    pub fn every_job(inner: &'q dyn JobQueue, archive: Option<DependencyArchive>) -> Self {
        Self {
            inner,
            archives: HashMap::new(),
            otherwise: archive,
        }
    }
}

#[async_trait::async_trait]
impl JobQueue for WithDependencies<'_> {
    async fn submit(&self, mut job: JobSpec) -> Result<(), QueueError> {
        if job.dependencies.is_none() {
            job.dependencies = self
                .archives
                .get(&job.tree)
                .or(self.otherwise.as_ref())
                .cloned();
        }
        self.inner.submit(job).await
    }

    async fn next_result(&self) -> Option<JobResult> {
        self.inner.next_result().await
    }

    fn served_from_cache(&self, job_id: &assay_common::JobId) -> bool {
        self.inner.served_from_cache(job_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_and_git_repositories_are_vendored_for_a_fleet_and_no_other_registry() {
        let registry = "[[package]]\nname = \"lru\"\nversion = \"0.12.5\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n\n[[package]]\nname = \"pager\"\nversion = \"0.1.0\"\n";
        assert_eq!(other_source(registry), None);
        let sparse = registry.replace(
            "registry+https://github.com/rust-lang/crates.io-index",
            "sparse+https://index.crates.io/",
        );
        assert_eq!(other_source(&sparse), None);
        let git = format!(
            "{registry}\n[[package]]\nname = \"x\"\nversion = \"1.0.0\"\nsource = \"git+https://example.invalid/x?rev=1#abc\"\n"
        );
        assert_eq!(other_source(&git), None);
        let elsewhere = registry.replace(
            "registry+https://github.com/rust-lang/crates.io-index",
            "registry+https://registry.example.invalid/index",
        );
        assert_eq!(
            other_source(&elsewhere).as_deref(),
            Some("registry+https://registry.example.invalid/index")
        );
    }
}
