//! Source trees from git (git2), never written to the user's working tree or index: resolves
//! the base and candidate, lists what the change touches, and builds the base tree (base plus
//! the change's test files) as a tree object in the repository's object database. Writing
//! objects changes nothing `git status` shows; they are unreferenced and git's gc removes them
//! in time. The one reader of the work tree is [`worktree_tree`] (`--worktree`), which hashes
//! its files into such objects through an index held in memory, never saved.

use assay_common::TreeId;
use globset::GlobSet;
use std::path::{Path, PathBuf};

/// A patch as its errors name it: `from standard input` for `-`.
fn patch_name(path: &Path) -> String {
    match path.as_os_str() == "-" {
        true => "from standard input".to_owned(),
        false => path.display().to_string(),
    }
}

/// Why a tree, revision, patch or file could not be had from the repository.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The directory is not a git repository.
    #[error("{path} is not a git repository (hint: pass -C with the repository's directory)")]
    NotARepo {
        /// The directory given as the repository.
        path: PathBuf,
        /// git's failure to open it.
        #[source]
        source: git2::Error,
    },
    /// A revision does not name a commit in the repository.
    #[error("unknown revision {rev:?} in {repo} (hint: check `git rev-parse {rev}`)")]
    UnknownRevision {
        /// The revision as the user gave it.
        rev: String,
        /// The repository it was looked up in.
        repo: PathBuf,
        /// git's failure to resolve it.
        #[source]
        source: git2::Error,
    },
    /// The patch file could not be read.
    #[error("failed to read patch {}", patch_name(path))]
    ReadPatch {
        /// The patch file given.
        path: PathBuf,
        /// The read's failure.
        #[source]
        source: std::io::Error,
    },
    /// The patch does not apply cleanly to the base.
    #[error("patch {} does not apply to {base}", patch_name(path))]
    PatchApply {
        /// The patch file given (`-` for standard input).
        path: PathBuf,
        /// The base revision it was applied to.
        base: String,
        /// git's failure to apply it.
        #[source]
        source: git2::Error,
    },
    /// A changed file's path could escape a worker's tree (absolute, `..`, …).
    #[error("changed file {path:?} cannot be named to a worker")]
    PathNotConfined {
        /// The changed file's path as git names it.
        path: String,
        /// Why the path is refused.
        #[source]
        source: assay_common::tree_path::TreePathError,
    },
    /// `--worktree` on a bare repository, which has no work tree.
    #[error("{path} is a bare repository; it has no work tree to prove (hint: prove a revision)")]
    Bare {
        /// The repository's directory.
        path: PathBuf,
    },
    /// Any other git operation failed.
    #[error("git operation failed: {what}")]
    Git {
        /// What was being done (e.g. `diff base..candidate`).
        what: String,
        /// git's failure.
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
    /// The revision as asked for: a rev, `work tree`, or `BASE + PATCH`.
    pub requested: String,
    /// The commit it resolved to; `None` for a tree no commit holds (a patch, the work tree).
    pub commit: Option<String>,
    /// The side's tree.
    pub tree: TreeId,
}

/// A file the change touches, by path on the candidate (or the base, when deleted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangedFile {
    /// The file's repository-relative path.
    pub path: String,
    /// Whether the change deletes the file.
    pub deleted: bool,
}

/// The resolved change: its two revisions, the files it touches, and the base tree with the
/// change's test files overlaid.
#[derive(Clone, Debug)]
pub struct Change {
    /// The base side as resolved.
    pub base: Revision,
    /// The candidate side as resolved.
    pub candidate: Revision,
    /// Every file the change touches.
    pub changed: Vec<ChangedFile>,
    /// The changed files the classifier calls tests.
    pub changed_test_files: Vec<ChangedFile>,
    /// The base's tree with the change's test files overlaid: where the new tests run on the base.
    pub base_tree: TreeId,
}

/// How the candidate is given.
#[derive(Clone, Debug)]
pub enum CandidateSpec {
    /// A revision of the repository (a commit, branch or tag).
    Revision(String),
    /// A patch file, applied to the base.
    Patch(PathBuf),
    /// A patch read from standard input (`--patch -`), applied to the base.
    PatchText(Vec<u8>),
    /// The work tree as it is: tracked files with their uncommitted edits, and untracked files
    /// that are not ignored (`--worktree`).
    WorkTree,
}

/// What the work tree holds that HEAD does not, as `git status --porcelain` names it
/// (`M pager.py`, `?? tests/test_new.py`): changes to tracked files, staged or not, and
/// untracked files that are not ignored. `assay.toml` is left out: Assay reads it from the work
/// tree as configuration whichever tree it proves.
pub fn uncommitted_changes(repo_path: &Path) -> Result<Vec<String>, SourceError> {
    let repo = open(repo_path)?;
    if repo.is_bare() {
        return Ok(Vec::new());
    }
    let mut options = git2::StatusOptions::new();
    options
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false)
        .exclude_submodules(true);
    let statuses = repo
        .statuses(Some(&mut options))
        .map_err(git("read the work tree's status"))?;
    let mut changes = Vec::new();
    for entry in statuses.iter() {
        let Some(path) = entry.path() else { continue };
        if path == "assay.toml" {
            continue;
        }
        let status = entry.status();
        let mark = if status.contains(git2::Status::WT_NEW) {
            "??"
        } else if status.intersects(git2::Status::WT_DELETED | git2::Status::INDEX_DELETED) {
            "D"
        } else if status.intersects(git2::Status::INDEX_NEW) {
            "A"
        } else {
            "M"
        };
        changes.push(format!("{mark} {path}"));
    }
    Ok(changes)
}

/// The work tree as a git tree object: every tracked file as it is on disk (deleted ones
/// left out) and every untracked file that is not ignored, with git's own filters and modes,
/// as `git add -A && git write-tree` would record it. The repository's index is loaded into
/// memory, updated there and never written back, so `.git/index` and the files are untouched.
pub fn worktree_tree(repo_path: &Path) -> Result<TreeId, SourceError> {
    let repo = open(repo_path)?;
    if repo.is_bare() {
        return Err(SourceError::Bare {
            path: repo_path.to_owned(),
        });
    }
    // The in-memory copy of the index: libgit2 writes it back only on `Index::write`, which is
    // never called here.
    let mut index = repo.index().map_err(git("read the index"))?;
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .map_err(git("hash the work tree's files"))?;
    index
        .update_all(["*"], None)
        .map_err(git("leave out the work tree's deleted files"))?;
    let oid = index
        .write_tree_to(&repo)
        .map_err(git("write the work tree's tree"))?;
    Ok(TreeId(oid.to_string()))
}

/// Opens the git repository at `repo`.
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
            apply_patch(&repo, &base_tree, base, path, &bytes)?
        }
        CandidateSpec::PatchText(bytes) => {
            apply_patch(&repo, &base_tree, base, Path::new("-"), bytes)?
        }
        CandidateSpec::WorkTree => {
            let id = worktree_tree(repo_path)?;
            let oid = git2::Oid::from_str(id.as_str()).map_err(git("parse a tree id"))?;
            let tree = repo
                .find_tree(oid)
                .map_err(git("read the work tree's tree"))?;
            (
                Revision {
                    requested: "work tree".into(),
                    commit: None,
                    tree: id,
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

/// The base with `patch` applied, as a tree in the object database; `path` names the patch
/// (`-` for standard input).
fn apply_patch<'r>(
    repo: &'r git2::Repository,
    base_tree: &git2::Tree<'_>,
    base: &str,
    path: &Path,
    patch: &[u8],
) -> Result<(Revision, git2::Tree<'r>), SourceError> {
    let patch_err = |source| SourceError::PatchApply {
        path: path.to_owned(),
        base: base.to_owned(),
        source,
    };
    let diff = git2::Diff::from_buffer(patch).map_err(patch_err)?;
    let mut index = repo
        .apply_to_tree(base_tree, &diff, None)
        .map_err(patch_err)?;
    let oid = index
        .write_tree_to(repo)
        .map_err(git("write the patched tree"))?;
    let tree = repo.find_tree(oid).map_err(git("read the patched tree"))?;
    let shown = if path == Path::new("-") {
        "standard input".to_owned()
    } else {
        path.display().to_string()
    };
    Ok((
        Revision {
            requested: format!("{base} + {shown}"),
            commit: None,
            tree: TreeId(oid.to_string()),
        },
        tree,
    ))
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

/// `tree` with `files` (repository-relative paths) given new contents, written into the
/// repository's object database as a tree of its own (its blobs and trees are loose objects no
/// ref names; git's gc removes them). A file `tree` has keeps its mode; a new one is a plain
/// file (a generated `Cargo.lock`).
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
            .map_or(i32::from(git2::FileMode::Blob), |entry| entry.filemode());
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

/// Every file path in a tree (for runner detection and suite planning).
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
