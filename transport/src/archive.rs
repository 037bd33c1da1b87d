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

/// Unpacks an archive into `dest`; entries escaping `dest` are refused by `tar` itself.
pub fn unpack_archive(bytes: &[u8], dest: &Path) -> std::io::Result<()> {
    let mut archive = tar::Archive::new(bytes);
    archive.set_preserve_permissions(true);
    archive.set_preserve_mtime(false);
    archive.unpack(dest)
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
        unpack_archive(&first, out.path()).unwrap();
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
