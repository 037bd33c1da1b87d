//! Tree archives: a git tree as a deterministic, uncompressed tar, so the fleet can ship sources
//! through the object store content-addressed by tree id. Deterministic (sorted git order, zero
//! mtimes, fixed owners) so the same tree always yields the same bytes and the same sha256.

use crate::tree::TreeError;
use assay_common::TreeId;
use std::path::Path;

/// Builds the tar of `tree` from the repository's object database.
pub fn build_tree_archive(repo_path: &Path, tree: &TreeId) -> Result<Vec<u8>, TreeError> {
    let repo = git2::Repository::open(repo_path).map_err(|source| TreeError::OpenRepo {
        path: repo_path.to_owned(),
        source,
    })?;
    let missing = |source| TreeError::MissingTree {
        tree: tree.to_string(),
        source,
    };
    let oid = git2::Oid::from_str(tree.as_str()).map_err(missing)?;
    let git_tree = repo.find_tree(oid).map_err(missing)?;
    let mut builder = tar::Builder::new(Vec::new());
    append_tree(&repo, tree, &git_tree, "", &mut builder)?;
    builder.into_inner().map_err(|source| TreeError::Write {
        tree: tree.to_string(),
        path: "archive".into(),
        source,
    })
}

fn append_tree(
    repo: &git2::Repository,
    tree_id: &TreeId,
    tree: &git2::Tree<'_>,
    prefix: &str,
    builder: &mut tar::Builder<Vec<u8>>,
) -> Result<(), TreeError> {
    for entry in tree.iter() {
        let Some(name) = entry.name() else {
            continue;
        };
        let path = format!("{prefix}{name}");
        let read_err = |source| TreeError::Read {
            tree: tree_id.to_string(),
            what: path.clone(),
            source,
        };
        let write_err = |source| TreeError::Write {
            tree: tree_id.to_string(),
            path: path.clone().into(),
            source,
        };
        match entry.kind() {
            Some(git2::ObjectType::Tree) => {
                let sub = repo.find_tree(entry.id()).map_err(read_err)?;
                append_tree(repo, tree_id, &sub, &format!("{path}/"), builder)?;
            }
            Some(git2::ObjectType::Blob) => {
                let blob = repo.find_blob(entry.id()).map_err(read_err)?;
                let mut header = tar::Header::new_gnu();
                header.set_mtime(0);
                header.set_uid(0);
                header.set_gid(0);
                if entry.filemode() == 0o120000 {
                    let target = String::from_utf8_lossy(blob.content()).into_owned();
                    header.set_entry_type(tar::EntryType::Symlink);
                    header.set_mode(0o777);
                    header.set_size(0);
                    builder
                        .append_link(&mut header, &path, target)
                        .map_err(write_err)?;
                } else {
                    header.set_entry_type(tar::EntryType::Regular);
                    header.set_mode(if entry.filemode() == 0o100755 {
                        0o755
                    } else {
                        0o644
                    });
                    header.set_size(blob.content().len() as u64);
                    builder
                        .append_data(&mut header, &path, blob.content())
                        .map_err(write_err)?;
                }
            }
            // Submodules (commits) are not part of the tree's content.
            _ => {}
        }
    }
    Ok(())
}

/// How much a tree archive may unpack to; the worker's `tree_max_bytes` and
/// `tree_max_entries`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArchiveLimits {
    /// The sum of the sizes its entries declare.
    pub max_bytes: u64,
    /// Files, directories and links.
    pub max_entries: u64,
}

impl Default for ArchiveLimits {
    fn default() -> Self {
        Self {
            max_bytes: assay_common::service_config::DEFAULT_TREE_MAX_BYTES,
            max_entries: assay_common::service_config::DEFAULT_TREE_MAX_ENTRIES,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error(
        "the archive holds more than {limit} entries (hint: raise worker.tree_max_entries if the tree really has that many files)"
    )]
    TooManyEntries { limit: u64 },
    #[error(
        "the archive unpacks to more than {limit} bytes (entry {path} declares {declared}; hint: raise worker.tree_max_bytes if the tree really is that big)"
    )]
    TooBig {
        limit: u64,
        path: String,
        declared: u64,
    },
    #[error("failed to unpack the archive")]
    Io(#[from] std::io::Error),
}

/// Unpacks an archive into `dest`; entries escaping `dest` are refused by `tar` itself. The
/// archive is first read through, without writing, against `limits` (entries, and the sizes
/// they declare), so a hostile archive is refused before anything is written. Modes keep only
/// their permission bits: no setuid, setgid or sticky bit is ever restored.
pub fn unpack_archive(bytes: &[u8], dest: &Path, limits: ArchiveLimits) -> Result<(), UnpackError> {
    let mut entries = 0u64;
    let mut total = 0u64;
    let mut archive = tar::Archive::new(bytes);
    for entry in archive.entries()? {
        let entry = entry?;
        entries += 1;
        if entries > limits.max_entries {
            return Err(UnpackError::TooManyEntries {
                limit: limits.max_entries,
            });
        }
        let declared = entry.header().size()?;
        total = total.saturating_add(declared);
        if total > limits.max_bytes {
            return Err(UnpackError::TooBig {
                limit: limits.max_bytes,
                path: String::from_utf8_lossy(&entry.path_bytes()).into_owned(),
                declared,
            });
        }
    }
    let mut archive = tar::Archive::new(bytes);
    // Not preserved: a mode is cut to its rwx bits (tar's rule), and the mask drops the
    // special bits whatever that rule becomes.
    archive.set_preserve_permissions(false);
    archive.set_mask(0o7000);
    archive.set_preserve_mtime(false);
    archive.set_unpack_xattrs(false);
    archive.unpack(dest)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_tree_archives_to_the_same_bytes_and_unpacks_with_modes() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        std::fs::create_dir_all(dir.path().join("pager")).unwrap();
        std::fs::write(dir.path().join("pager/pages.py"), "PAGE = 20\n").unwrap();
        std::fs::write(dir.path().join("run.sh"), "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            dir.path().join("run.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let mut index = repo.index().unwrap();
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        let tree = TreeId(index.write_tree().unwrap().to_string());
        let first = build_tree_archive(dir.path(), &tree).unwrap();
        let second = build_tree_archive(dir.path(), &tree).unwrap();
        assert_eq!(first, second);
        let out = tempfile::tempdir().unwrap();
        unpack_archive(&first, out.path(), ArchiveLimits::default()).unwrap();
        assert_eq!(
            std::fs::read_to_string(out.path().join("pager/pages.py")).unwrap(),
            "PAGE = 20\n"
        );
        let mode = std::fs::metadata(out.path().join("run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111);
    }
}
