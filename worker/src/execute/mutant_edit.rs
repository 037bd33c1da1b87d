//! A mutant's byte-range edit applied to the job's materialized tree, never through a link
//! out of it, and the edited module's stale compiled copies removed.

use crate::guest_file::{self, Placement};
use assay_common::job::ByteEdit;
use assay_common::tree_path::TreePath;
use std::path::{Path, PathBuf};

/// Why a mutant's edit could not be applied to the materialized tree.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// The edited path leads outside the tree or is not a regular file.
    #[error("refusing mutant edit of {path}: {why}")]
    Outside {
        /// The file the mutant edits, in the tree.
        path: TreePath,
        /// What is wrong with it.
        why: String,
    },
    /// The file to edit could not be read.
    #[error("failed to read {path} for a mutant")]
    Read {
        /// The file the mutant edits, in the tree.
        path: TreePath,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The edit's byte range is not inside the file.
    #[error("mutant edit {start}..{end} is outside {path} ({len} bytes)")]
    OutOfRange {
        /// The file the mutant edits, in the tree.
        path: TreePath,
        /// The edit's first byte.
        start: usize,
        /// The byte past the edit's last.
        end: usize,
        /// The file's size, in bytes.
        len: usize,
    },
    /// The edited file could not be written.
    #[error("failed to write mutant of {path}")]
    Write {
        /// The file the mutant edits, in the tree.
        path: TreePath,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A directory could not be listed to find the file's stale bytecode.
    #[error("failed to list {dir}")]
    ListBytecode {
        /// The directory listed.
        dir: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Stale bytecode of the edited file could not be removed.
    #[error("failed to remove stale bytecode {path}")]
    RemoveBytecode {
        /// The bytecode file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Applies a mutant's byte-range edit to the materialized tree. The path was confined when the
/// job was decoded; a committed link (`pager.py -> /etc/hosts`, or a linked directory) must not
/// lead the write out of the tree either, so neither the directory nor the file may resolve
/// elsewhere.
/// Returns the file's bytes before the edit.
pub(super) fn apply_edit(tree_dir: &Path, edit: &ByteEdit) -> Result<Vec<u8>, EditError> {
    use std::io::{Read, Write};
    use std::os::unix::fs::OpenOptionsExt;
    let path = tree_dir.join(edit.path.as_str());
    if let Placement::Outside(why) = guest_file::placement(&path, tree_dir) {
        return Err(EditError::Outside {
            path: edit.path.clone(),
            why,
        });
    }
    let open = |write: bool| {
        std::fs::OpenOptions::new()
            .read(!write)
            .write(write)
            .truncate(write)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
    };
    let mut bytes = Vec::new();
    open(false)
        .and_then(|mut file| file.read_to_end(&mut bytes))
        .map_err(|source| EditError::Read {
            path: edit.path.clone(),
            source,
        })?;
    if edit.start > edit.end || edit.end > bytes.len() {
        return Err(EditError::OutOfRange {
            path: edit.path.clone(),
            start: edit.start,
            end: edit.end,
            len: bytes.len(),
        });
    }
    let original = bytes.clone();
    bytes.splice(edit.start..edit.end, edit.replacement.bytes());
    open(true)
        .and_then(|mut file| file.write_all(&bytes))
        .map_err(|source| EditError::Write {
            path: edit.path.clone(),
            source,
        })?;
    remove_cached_bytecode(&path)?;
    Ok(original)
}

/// Removes the edited module's compiled copies (`__pycache__/STEM.*.pyc`, committed or not):
/// a cached compile of the original, checked by size and time only, must never run instead.
fn remove_cached_bytecode(source: &Path) -> Result<(), EditError> {
    let (Some(dir), Some(stem)) = (source.parent(), source.file_stem()) else {
        return Ok(());
    };
    let prefix = format!("{}.", stem.to_string_lossy());
    let cache = dir.join("__pycache__");
    let entries = match std::fs::read_dir(&cache) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(EditError::ListBytecode { dir: cache, source }),
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&prefix) && name.ends_with(".pyc") {
            std::fs::remove_file(entry.path()).map_err(|source| EditError::RemoveBytecode {
                path: entry.path(),
                source,
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_transport::error_chain::error_chain;

    #[test]
    fn an_edit_removes_the_modules_cached_bytecode_and_nothing_else() {
        let tree = tempfile::tempdir().unwrap();
        let package = tree.path().join("pager");
        let cache = package.join("__pycache__");
        std::fs::create_dir_all(&cache).unwrap();
        std::fs::write(package.join("__init__.py"), "LIMIT = 10\n").unwrap();
        for name in [
            "__init__.cpython-311.pyc",
            "__init__.cpython-312.opt-1.pyc",
            "bounds.cpython-311.pyc",
        ] {
            std::fs::write(cache.join(name), b"stale").unwrap();
        }
        let edit = ByteEdit {
            path: assay_common::tree_path::TreePath::new("pager/__init__.py").unwrap(),
            start: 8,
            end: 10,
            replacement: "11".into(),
        };
        apply_edit(tree.path(), &edit).unwrap();
        assert_eq!(
            std::fs::read_to_string(package.join("__init__.py")).unwrap(),
            "LIMIT = 11\n"
        );
        let left: Vec<String> = std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, ["bounds.cpython-311.pyc"]);
    }

    #[test]
    fn an_edit_through_a_committed_link_or_past_the_end_is_refused_and_named() {
        let tree = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let hosts = outside.path().join("hosts");
        std::fs::write(&hosts, "127.0.0.1 localhost\n").unwrap();
        std::os::unix::fs::symlink(&hosts, tree.path().join("pager.py")).unwrap();
        std::os::unix::fs::symlink(outside.path(), tree.path().join("vendor")).unwrap();
        std::fs::write(tree.path().join("bounds.py"), "LIMIT = 10\n").unwrap();
        let edit = |path: &str, start, end| ByteEdit {
            path: TreePath::new(path).unwrap(),
            start,
            end,
            replacement: "11".into(),
        };

        let linked_file = apply_edit(tree.path(), &edit("pager.py", 0, 3)).unwrap_err();
        assert!(
            matches!(&linked_file, EditError::Read { path, .. } if path.as_str() == "pager.py"),
            "{linked_file:?}"
        );
        let linked_dir = apply_edit(tree.path(), &edit("vendor/hosts", 0, 3)).unwrap_err();
        assert!(
            matches!(&linked_dir, EditError::Outside { path, .. } if path.as_str() == "vendor/hosts"),
            "{linked_dir:?}"
        );
        assert_eq!(
            std::fs::read_to_string(&hosts).unwrap(),
            "127.0.0.1 localhost\n"
        );

        let past_the_end = apply_edit(tree.path(), &edit("bounds.py", 8, 40)).unwrap_err();
        assert_eq!(
            error_chain(&past_the_end),
            "mutant edit 8..40 is outside bounds.py (11 bytes)"
        );
        assert_eq!(
            std::fs::read_to_string(tree.path().join("bounds.py")).unwrap(),
            "LIMIT = 10\n"
        );
    }
}
