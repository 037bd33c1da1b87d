//! Tree materialization: writes a git tree, by object id, into a fresh directory. Embedded mode
//! reads objects from the repository; the fleet reads archives from the store (see `source`
//! implementations added beside this trait).

use assay_common::TreeId;
use async_trait::async_trait;
use std::path::{Path, PathBuf};

/// Why a job's tree could not be written into its directory, or uploaded.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// The local repository could not be opened.
    #[error("failed to open repository {path}")]
    OpenRepo {
        /// The repository's path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: git2::Error,
    },
    /// The repository has no tree with that id.
    #[error("tree {tree} is not in the repository")]
    MissingTree {
        /// The id of the tree being materialized, hex.
        tree: String,
        /// The underlying error.
        #[source]
        source: git2::Error,
    },
    /// A file or directory of the tree could not be written.
    #[error("failed to write {path} while materializing tree {tree}")]
    Write {
        /// The id of the tree being materialized, hex.
        tree: String,
        /// The file or directory being written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A git object of the tree could not be read.
    #[error("failed to read {what} of tree {tree}")]
    Read {
        /// The id of the tree being materialized, hex.
        tree: String,
        /// The entry being read, by its path in the tree.
        what: String,
        /// The underlying error.
        #[source]
        source: git2::Error,
    },
    /// The stored archive's entries hash to another tree: it was tampered with.
    #[error(
        "the archive stored for tree {tree} does not hold tree {tree}: its entries make tree {found}, so the store may have been tampered with (hint: uploading tree {tree} again from a repository that has it replaces the archive)"
    )]
    NotThisTree {
        /// The id of the tree being materialized, hex.
        tree: String,
        /// The tree id the entries hash to.
        found: String,
    },
    /// The tree nests directories deeper than the walk allows.
    #[error(
        "tree {tree} nests directories more than {MAX_TREE_DEPTH} deep at {path} (hint: no project needs that; a tree this deep is refused rather than walked)"
    )]
    TooDeep {
        /// The id of the tree being materialized, hex.
        tree: String,
        /// The directory past the limit, inside the tree.
        path: String,
    },
    /// Any other failure, said in words (an entry of an unknown kind, a refused archive).
    #[error("tree {tree} could not be materialized: {message}")]
    Other {
        /// The id of the tree being materialized, hex.
        tree: String,
        /// What failed.
        message: String,
    },
    /// The tree's archive could not be stored.
    #[error("failed to upload tree {tree} to the store")]
    Upload {
        /// The id of the tree being uploaded, hex.
        tree: String,
        /// The underlying error.
        #[source]
        source: Box<crate::store::StoreError>,
    },
}

/// Where a job's tree comes from: the local repository or the artifact store.
#[async_trait]
pub trait TreeSource: Send + Sync {
    /// Writes the tree's files into `dest` (an empty directory).
    async fn materialize(&self, tree: &TreeId, dest: &Path) -> Result<(), TreeError>;

    /// Hands back `dir`, which `materialize` filled with `tree` and a finished job used; a
    /// source that reuses directories may take it. By default it stays where it is (its job's
    /// scratch directory is removed with it).
    async fn release(&self, _tree: &TreeId, _dir: &Path) {}
}

/// Reads trees straight from a local repository's object database.
#[derive(Clone, Debug)]
pub struct GitTreeSource {
    repo_path: PathBuf,
}

impl GitTreeSource {
    /// Trees from the repository at `repo_path`.
    pub fn new(repo_path: impl Into<PathBuf>) -> Self {
        Self {
            repo_path: repo_path.into(),
        }
    }
}

#[async_trait]
impl TreeSource for GitTreeSource {
    async fn materialize(&self, tree: &TreeId, dest: &Path) -> Result<(), TreeError> {
        let repo_path = self.repo_path.clone();
        let tree = tree.clone();
        let dest = dest.to_owned();
        tokio::task::spawn_blocking(move || write_tree(&repo_path, &tree, &dest))
            .await
            .map_err(|e| TreeError::Other {
                tree: String::new(),
                message: e.to_string(),
            })?
    }
}

/// Writes every blob of `tree` under `dest`, keeping executable bits and symlinks.
pub fn write_tree(repo_path: &Path, tree: &TreeId, dest: &Path) -> Result<(), TreeError> {
    let repo = git2::Repository::open(repo_path).map_err(|source| TreeError::OpenRepo {
        path: repo_path.to_owned(),
        source,
    })?;
    let oid = git2::Oid::from_str(tree.as_str()).map_err(|source| TreeError::MissingTree {
        tree: tree.to_string(),
        source,
    })?;
    let git_tree = repo
        .find_tree(oid)
        .map_err(|source| TreeError::MissingTree {
            tree: tree.to_string(),
            source,
        })?;
    write_subtree(&repo, tree, &git_tree, dest, 0)
}

/// How deep a tree's directories may nest. A commit can hold trees nested as deep as its
/// author likes (git's plumbing builds them without a file system), and each level is a call
/// deeper while a tree is written or archived: past this, the tree is refused.
pub const MAX_TREE_DEPTH: usize = 512;

fn write_subtree(
    repo: &git2::Repository,
    tree_id: &TreeId,
    tree: &git2::Tree<'_>,
    dir: &Path,
    depth: usize,
) -> Result<(), TreeError> {
    if depth > MAX_TREE_DEPTH {
        return Err(TreeError::TooDeep {
            tree: tree_id.to_string(),
            path: dir.display().to_string(),
        });
    }
    let write_err = |path: &Path, source| TreeError::Write {
        tree: tree_id.to_string(),
        path: path.to_owned(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(|e| write_err(dir, e))?;
    for entry in tree.iter() {
        let Some(name) = entry.name() else {
            continue;
        };
        let path = dir.join(name);
        let read_err = |source| TreeError::Read {
            tree: tree_id.to_string(),
            what: path.display().to_string(),
            source,
        };
        match entry.kind() {
            Some(git2::ObjectType::Tree) => {
                let sub = repo.find_tree(entry.id()).map_err(read_err)?;
                write_subtree(repo, tree_id, &sub, &path, depth + 1)?;
            }
            Some(git2::ObjectType::Blob) => {
                let blob = repo.find_blob(entry.id()).map_err(read_err)?;
                if entry.filemode() == 0o120000 {
                    let target = String::from_utf8_lossy(blob.content()).into_owned();
                    std::os::unix::fs::symlink(target, &path).map_err(|e| write_err(&path, e))?;
                } else {
                    std::fs::write(&path, blob.content()).map_err(|e| write_err(&path, e))?;
                    if entry.filemode() == 0o100755 {
                        use std::os::unix::fs::PermissionsExt;
                        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                            .map_err(|e| write_err(&path, e))?;
                    }
                }
            }
            // Submodules (commits) are not part of the tree's content.
            _ => {}
        }
    }
    Ok(())
}
