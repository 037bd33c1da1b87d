//! Source trees from git (git2), never from the user's working tree or index: resolves the
//! base and candidate, lists what the change touches, and builds the base tree (base plus the
//! change's test files) as a tree object in the repository's object database. Writing objects
//! changes nothing `git status` shows; they are unreferenced and git's gc removes them in time.

use assay_common::TreeId;
use globset::GlobSet;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{path} is not a git repository (hint: pass -C with the repository's directory)")]
    NotARepo {
        path: PathBuf,
        #[source]
        source: git2::Error,
    },
    #[error("unknown revision {rev:?} in {repo} (hint: check `git rev-parse {rev}`)")]
    UnknownRevision {
        rev: String,
        repo: PathBuf,
        #[source]
        source: git2::Error,
    },
    #[error("failed to read patch {path}")]
    ReadPatch {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("patch {path} does not apply to {base}")]
    PatchApply {
        path: PathBuf,
        base: String,
        #[source]
        source: git2::Error,
    },
    #[error("changed file {path:?} cannot be named to a worker")]
    PathNotConfined {
        path: String,
        #[source]
        source: assay_common::tree_path::TreePathError,
    },
    #[error("git operation failed: {what}")]
    Git {
        what: String,
        #[source]
        source: git2::Error,
    },
}

fn git(what: impl Into<String>) -> impl FnOnce(git2::Error) -> SourceError {
    let what = what.into();
    move |source| SourceError::Git { what, source }
}

/// One side of the change as resolved.
#[derive(Clone, Debug)]
pub struct Revision {
    pub requested: String,
    pub commit: Option<String>,
    pub tree: TreeId,
}

/// A file the change touches, by path on the candidate (or the base, when deleted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangedFile {
    pub path: String,
    pub deleted: bool,
}

/// The resolved change: its two revisions, the files it touches, and the base tree with the
/// change's test files overlaid.
#[derive(Clone, Debug)]
pub struct Change {
    pub base: Revision,
    pub candidate: Revision,
    pub changed: Vec<ChangedFile>,
    pub changed_test_files: Vec<ChangedFile>,
    pub base_tree: TreeId,
}

/// How the candidate is given.
#[derive(Clone, Debug)]
pub enum CandidateSpec {
    Revision(String),
    Patch(PathBuf),
}

pub fn open(repo: &Path) -> Result<git2::Repository, SourceError> {
    git2::Repository::open(repo).map_err(|source| SourceError::NotARepo {
        path: repo.to_owned(),
        source,
    })
}

/// The tree of revision `rev`.
pub fn tree_of(repo_path: &Path, rev: &str) -> Result<TreeId, SourceError> {
    let repo = open(repo_path)?;
    let commit = repo
        .revparse_single(rev)
        .and_then(|object| object.peel_to_commit())
        .map_err(|source| SourceError::UnknownRevision {
            rev: rev.to_owned(),
            repo: repo_path.to_owned(),
            source,
        })?;
    let tree = commit.tree().map_err(git("read the tree"))?;
    Ok(TreeId(tree.id().to_string()))
}

/// Resolves the change and builds its trees; `is_test_file` classifies paths.
pub fn resolve_change(
    repo_path: &Path,
    base: &str,
    candidate: &CandidateSpec,
    is_test_file: &dyn Fn(&str) -> bool,
) -> Result<Change, SourceError> {
    let repo = open(repo_path)?;
    let resolve = |rev: &str| -> Result<git2::Commit<'_>, SourceError> {
        repo.revparse_single(rev)
            .and_then(|object| object.peel_to_commit())
            .map_err(|source| SourceError::UnknownRevision {
                rev: rev.to_owned(),
                repo: repo_path.to_owned(),
                source,
            })
    };
    let base_commit = resolve(base)?;
    let base_tree = base_commit.tree().map_err(git("read the base tree"))?;
    let (candidate_rev, candidate_tree) = match candidate {
        CandidateSpec::Revision(rev) => {
            let commit = resolve(rev)?;
            let tree = commit.tree().map_err(git("read the candidate tree"))?;
            (
                Revision {
                    requested: rev.clone(),
                    commit: Some(commit.id().to_string()),
                    tree: TreeId(tree.id().to_string()),
                },
                tree,
            )
        }
        CandidateSpec::Patch(path) => {
            let bytes = std::fs::read(path).map_err(|source| SourceError::ReadPatch {
                path: path.clone(),
                source,
            })?;
            let patch_err = |source| SourceError::PatchApply {
                path: path.clone(),
                base: base.to_owned(),
                source,
            };
            let diff = git2::Diff::from_buffer(&bytes).map_err(patch_err)?;
            let mut index = repo
                .apply_to_tree(&base_tree, &diff, None)
                .map_err(patch_err)?;
            let oid = index
                .write_tree_to(&repo)
                .map_err(git("write the patched tree"))?;
            let tree = repo.find_tree(oid).map_err(git("read the patched tree"))?;
            (
                Revision {
                    requested: format!("{base} + {}", path.display()),
                    commit: None,
                    tree: TreeId(oid.to_string()),
                },
                tree,
            )
        }
    };
    let diff = repo
        .diff_tree_to_tree(Some(&base_tree), Some(&candidate_tree), None)
        .map_err(git("diff base..candidate"))?;
    let mut changed = Vec::new();
    for delta in diff.deltas() {
        let deleted = delta.status() == git2::Delta::Deleted;
        let file = if deleted {
            delta.old_file()
        } else {
            delta.new_file()
        };
        if let Some(path) = file.path().and_then(Path::to_str) {
            changed.push(ChangedFile {
                path: path.to_owned(),
                deleted,
            });
        }
        // A rename deletes the old path on the base too.
        if delta.status() == git2::Delta::Renamed
            && let Some(old) = delta.old_file().path().and_then(Path::to_str)
        {
            changed.push(ChangedFile {
                path: old.to_owned(),
                deleted: true,
            });
        }
    }
    // Every changed path travels to the fleet as a confined `TreePath`: refuse one that is not
    // here, with its name, rather than have a worker refuse the job later.
    if let Some((path, source)) = changed.iter().find_map(|f| {
        assay_common::tree_path::TreePath::new(&f.path)
            .err()
            .map(|e| (f.path.clone(), e))
    }) {
        return Err(SourceError::PathNotConfined { path, source });
    }
    changed.sort_by(|a, b| a.path.cmp(&b.path));
    let changed_test_files: Vec<ChangedFile> = changed
        .iter()
        .filter(|f| is_test_file(&f.path))
        .cloned()
        .collect();
    let overlaid = overlay_tests(&repo, &base_tree, &candidate_tree, &changed_test_files)?;
    Ok(Change {
        base: Revision {
            requested: base.to_owned(),
            commit: Some(base_commit.id().to_string()),
            tree: TreeId(base_tree.id().to_string()),
        },
        candidate: candidate_rev,
        changed,
        changed_test_files,
        base_tree: overlaid,
    })
}

/// The base tree with the candidate's versions of `test_files` (deleted ones removed).
fn overlay_tests(
    repo: &git2::Repository,
    base_tree: &git2::Tree<'_>,
    candidate_tree: &git2::Tree<'_>,
    test_files: &[ChangedFile],
) -> Result<TreeId, SourceError> {
    if test_files.is_empty() {
        return Ok(TreeId(base_tree.id().to_string()));
    }
    let mut index = git2::Index::new().map_err(git("create an in-memory index"))?;
    index
        .read_tree(base_tree)
        .map_err(git("read the base tree into an index"))?;
    for file in test_files {
        let path = Path::new(&file.path);
        match candidate_tree.get_path(path) {
            Ok(entry) if !file.deleted => {
                let blob = repo
                    .find_blob(entry.id())
                    .map_err(git(format!("read {}", file.path)))?;
                let mut index_entry = git2::IndexEntry {
                    ctime: git2::IndexTime::new(0, 0),
                    mtime: git2::IndexTime::new(0, 0),
                    dev: 0,
                    ino: 0,
                    mode: entry.filemode() as u32,
                    uid: 0,
                    gid: 0,
                    file_size: blob.size() as u32,
                    id: entry.id(),
                    flags: 0,
                    flags_extended: 0,
                    path: file.path.as_bytes().to_vec(),
                };
                index_entry.flags = (file.path.len().min(0xfff)) as u16;
                index
                    .add(&index_entry)
                    .map_err(git(format!("overlay {}", file.path)))?;
            }
            _ => {
                let _ = index.remove_path(path);
            }
        }
    }
    let oid = index
        .write_tree_to(repo)
        .map_err(git("write the base tree with the change's tests"))?;
    Ok(TreeId(oid.to_string()))
}

/// A path classifier: the runner's conventions plus configured globs.
pub fn test_file_classifier(
    runner_convention: impl Fn(&str) -> bool + 'static,
    globs: GlobSet,
) -> impl Fn(&str) -> bool {
    move |path| runner_convention(path) || globs.is_match(path)
}

/// Reads a file of a tree, for runner detection and checks; `None` if absent.
pub fn read_file(
    repo_path: &Path,
    tree: &TreeId,
    path: &str,
) -> Result<Option<Vec<u8>>, SourceError> {
    let repo = open(repo_path)?;
    let oid = git2::Oid::from_str(tree.as_str()).map_err(git("parse a tree id"))?;
    let tree = repo
        .find_tree(oid)
        .map_err(git(format!("find tree {oid}")))?;
    let Ok(entry) = tree.get_path(Path::new(path)) else {
        return Ok(None);
    };
    let blob = repo
        .find_blob(entry.id())
        .map_err(git(format!("read {path}")))?;
    Ok(Some(blob.content().to_vec()))
}

/// The names of the entries of directory `dir` (`""` for the root) of a tree; none when it has
/// no such directory.
pub fn entry_names(repo_path: &Path, tree: &TreeId, dir: &str) -> Result<Vec<String>, SourceError> {
    let repo = open(repo_path)?;
    let oid = git2::Oid::from_str(tree.as_str()).map_err(git("parse a tree id"))?;
    let root = repo
        .find_tree(oid)
        .map_err(git(format!("find tree {oid}")))?;
    let names = |tree: &git2::Tree<'_>| -> Vec<String> {
        tree.iter()
            .filter_map(|entry| entry.name().map(str::to_owned))
            .collect()
    };
    if dir.is_empty() {
        return Ok(names(&root));
    }
    let Ok(entry) = root.get_path(Path::new(dir)) else {
        return Ok(Vec::new());
    };
    match repo.find_tree(entry.id()) {
        Ok(sub) => Ok(names(&sub)),
        Err(_) => Ok(Vec::new()),
    }
}

/// Reads several files of one tree with the repository opened once; `None` for an absent one.
pub fn read_files(
    repo_path: &Path,
    tree: &TreeId,
    paths: &[&str],
) -> Result<Vec<Option<Vec<u8>>>, SourceError> {
    let repo = open(repo_path)?;
    let oid = git2::Oid::from_str(tree.as_str()).map_err(git("parse a tree id"))?;
    let tree = repo
        .find_tree(oid)
        .map_err(git(format!("find tree {oid}")))?;
    paths
        .iter()
        .map(|path| {
            let Ok(entry) = tree.get_path(Path::new(path)) else {
                return Ok(None);
            };
            if entry.kind() != Some(git2::ObjectType::Blob) {
                return Ok(None);
            }
            let blob = repo
                .find_blob(entry.id())
                .map_err(git(format!("read {path}")))?;
            Ok(Some(blob.content().to_vec()))
        })
        .collect()
}

/// Every path the diff base..candidate touches, on either side (a rename names both), for the
/// selection audit's read-set closure.
pub fn changed_paths(
    repo_path: &Path,
    base: &TreeId,
    candidate: &TreeId,
) -> Result<std::collections::BTreeSet<String>, SourceError> {
    let repo = open(repo_path)?;
    let tree = |id: &TreeId| -> Result<git2::Tree<'_>, SourceError> {
        let oid = git2::Oid::from_str(id.as_str()).map_err(git("parse a tree id"))?;
        repo.find_tree(oid).map_err(git(format!("find tree {oid}")))
    };
    let (base_tree, candidate_tree) = (tree(base)?, tree(candidate)?);
    let diff = repo
        .diff_tree_to_tree(Some(&base_tree), Some(&candidate_tree), None)
        .map_err(git("diff base..candidate for changed paths"))?;
    let mut paths = std::collections::BTreeSet::new();
    for delta in diff.deltas() {
        for file in [delta.old_file(), delta.new_file()] {
            if let Some(path) = file.path().and_then(Path::to_str) {
                paths.insert(path.to_owned());
            }
        }
    }
    Ok(paths)
}

/// Every file path in a tree (for runner detection and suite planning).
/// `tree` with `files` (repository-relative paths, each already in `tree`) replaced by new
/// contents, written into the repository's object database as a tree of its own (its blobs and
/// trees are loose objects no ref names; git's gc removes them). Each file keeps its mode.
pub fn tree_with_files(
    repo_path: &Path,
    tree: &TreeId,
    files: &[(&str, &[u8])],
) -> Result<TreeId, SourceError> {
    let repo = open(repo_path)?;
    let oid = git2::Oid::from_str(tree.as_str()).map_err(git("parse a tree id"))?;
    let base = repo
        .find_tree(oid)
        .map_err(git(format!("find tree {oid}")))?;
    let mut update = git2::build::TreeUpdateBuilder::new();
    for (path, bytes) in files {
        let mode = base
            .get_path(Path::new(path))
            .map_err(git(format!("find {path} in tree {oid}")))?
            .filemode();
        let blob = repo
            .blob(bytes)
            .map_err(git(format!("write the blob of {path}")))?;
        let mode = if mode == i32::from(git2::FileMode::BlobExecutable) {
            git2::FileMode::BlobExecutable
        } else {
            git2::FileMode::Blob
        };
        update.upsert(*path, blob, mode);
    }
    let written = update
        .create_updated(&repo, &base)
        .map_err(git(format!("write a tree from {oid}")))?;
    Ok(TreeId(written.to_string()))
}

/// `tree` with each of `paths` as `base` has it (the base's blob and mode, or no file where the
/// base has none) and each of `rewritten` given new contents (keeping its mode in `tree`). The
/// differential run's tree: the candidate with the change's harness put back (see
/// `crate::harness`).
pub fn tree_reverting(
    repo_path: &Path,
    tree: &TreeId,
    base: &TreeId,
    paths: &[String],
    rewritten: &[(String, Vec<u8>)],
) -> Result<TreeId, SourceError> {
    let repo = open(repo_path)?;
    let find = |id: &TreeId| -> Result<git2::Tree<'_>, SourceError> {
        let oid = git2::Oid::from_str(id.as_str()).map_err(git("parse a tree id"))?;
        repo.find_tree(oid).map_err(git(format!("find tree {oid}")))
    };
    let (target, base_tree) = (find(tree)?, find(base)?);
    let mut update = git2::build::TreeUpdateBuilder::new();
    for path in paths {
        match base_tree.get_path(Path::new(path)) {
            Ok(entry) if entry.kind() == Some(git2::ObjectType::Blob) => {
                let mode = if entry.filemode() == i32::from(git2::FileMode::BlobExecutable) {
                    git2::FileMode::BlobExecutable
                } else if entry.filemode() == i32::from(git2::FileMode::Link) {
                    git2::FileMode::Link
                } else {
                    git2::FileMode::Blob
                };
                update.upsert(path.as_str(), entry.id(), mode);
            }
            _ => {
                update.remove(path.as_str());
            }
        }
    }
    for (path, bytes) in rewritten {
        let executable = target
            .get_path(Path::new(path))
            .is_ok_and(|e| e.filemode() == i32::from(git2::FileMode::BlobExecutable));
        let blob = repo
            .blob(bytes)
            .map_err(git(format!("write the blob of {path}")))?;
        let mode = match executable {
            true => git2::FileMode::BlobExecutable,
            false => git2::FileMode::Blob,
        };
        update.upsert(path.as_str(), blob, mode);
    }
    let written = update.create_updated(&repo, &target).map_err(git(format!(
        "write tree {tree} with {} put back as on the base",
        paths.join(", ")
    )))?;
    Ok(TreeId(written.to_string()))
}

pub fn list_files(repo_path: &Path, tree: &TreeId) -> Result<Vec<String>, SourceError> {
    let repo = open(repo_path)?;
    let oid = git2::Oid::from_str(tree.as_str()).map_err(git("parse a tree id"))?;
    let tree = repo
        .find_tree(oid)
        .map_err(git(format!("find tree {oid}")))?;
    let mut files = Vec::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        if entry.kind() == Some(git2::ObjectType::Blob)
            && let Some(name) = entry.name()
        {
            files.push(format!("{dir}{name}"));
        }
        git2::TreeWalkResult::Ok
    })
    .map_err(git("walk a tree"))?;
    Ok(files)
}
