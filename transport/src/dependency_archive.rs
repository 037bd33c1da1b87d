//! Dependency archives: the directory `cargo vendor` writes, as a deterministic, uncompressed
//! tar (sorted entries, zero mtimes, fixed owners and modes), so the same vendored sources
//! always make the same bytes; and their unpacking on a worker, which takes nothing but plain
//! files and directories inside the destination. The archive comes from the store, which a
//! worker does not trust: docs/FORMATS.md and SECURITY.md ("Dependency archives").

use crate::archive::{ArchiveLimits, header};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Component, Path, PathBuf};

/// Why a dependency directory could not be packed.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    /// A file or directory under it could not be read.
    #[error("failed to read {path} to pack it")]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// It holds a symlink, socket or device, which the archive does not carry.
    #[error("{path} is neither a file nor a directory; a dependency archive holds only those")]
    NotPlain {
        /// The offending entry.
        path: PathBuf,
    },
}

/// Why a dependency archive was refused or could not be unpacked.
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    /// The archive holds more entries than allowed.
    #[error("the dependency archive holds more than {limit} entries")]
    TooManyEntries {
        /// The most entries allowed.
        limit: u64,
    },
    /// Its entries add up to more bytes than allowed.
    #[error("the dependency archive unpacks to more than {limit} bytes (entry {path})")]
    TooBig {
        /// The most bytes allowed.
        limit: u64,
        /// The entry that went over the limit.
        path: String,
    },
    /// An entry that could escape the directory or is not a plain file or directory.
    #[error("entry {path} of the dependency archive is refused: {why}")]
    Refused {
        /// The entry's path as the archive names it.
        path: String,
        /// Why it is refused.
        why: &'static str,
    },
    /// Writing an entry to disk failed.
    #[error("failed to unpack entry {path} of the dependency archive")]
    Write {
        /// The entry being written.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Reading the archive's stream failed.
    #[error("failed to read the dependency archive")]
    Read(#[source] std::io::Error),
}

/// Packs the directory `root` (what `cargo vendor` wrote): its files and directories, in byte
/// order of their names, each file `0644` or, when anyone may execute it, `0755`.
pub fn pack(root: &Path) -> Result<Vec<u8>, PackError> {
    let mut builder = tar::Builder::new(Vec::new());
    append_dir(&mut builder, root, Path::new(""))?;
    builder.into_inner().map_err(|source| PackError::Read {
        path: root.to_owned(),
        source,
    })
}

fn append_dir(
    builder: &mut tar::Builder<Vec<u8>>,
    root: &Path,
    relative: &Path,
) -> Result<(), PackError> {
    let dir = root.join(relative);
    let read = |path: &Path| {
        let path = path.to_owned();
        move |source| PackError::Read { path, source }
    };
    let mut entries = std::fs::read_dir(&dir)
        .map_err(read(&dir))?
        .map(|entry| entry.map(|e| e.file_name()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(read(&dir))?;
    entries.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    for name in entries {
        let inner = relative.join(&name);
        let path = root.join(&inner);
        let meta = std::fs::symlink_metadata(&path).map_err(read(&path))?;
        if meta.is_dir() {
            let mut header = header(tar::EntryType::Directory, 0o755, 0);
            builder
                .append_data(&mut header, &inner, std::io::empty())
                .map_err(read(&path))?;
            append_dir(builder, root, &inner)?;
        } else if meta.is_file() {
            let mode = match meta.permissions().mode() & 0o111 {
                0 => 0o644,
                _ => 0o755,
            };
            let file = std::fs::File::open(&path).map_err(read(&path))?;
            let mut header = header(tar::EntryType::Regular, mode, meta.len());
            builder
                .append_data(&mut header, &inner, file.take(meta.len()))
                .map_err(read(&path))?;
        } else {
            return Err(PackError::NotPlain { path });
        }
    }
    Ok(())
}

/// Unpacks `archive` into `dest`, a directory this call creates (its parent must exist, and
/// `dest` must not). Only plain files and directories at relative paths of plain names are
/// taken; links, devices, absolute paths, `..`, a file given twice and anything past
/// `limits` are refused, and nothing is followed: the archive creates no link to follow.
pub fn unpack(archive: &[u8], dest: &Path, limits: ArchiveLimits) -> Result<(), UnpackError> {
    let write = |path: &str| {
        let path = path.to_owned();
        move |source| UnpackError::Write { path, source }
    };
    std::fs::create_dir(dest).map_err(write("."))?;
    let mut entries = 0u64;
    let mut total = 0u64;
    let mut tar = tar::Archive::new(archive);
    for entry in tar.entries().map_err(UnpackError::Read)? {
        let mut entry = entry.map_err(UnpackError::Read)?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        entries += 1;
        if entries > limits.max_entries {
            return Err(UnpackError::TooManyEntries {
                limit: limits.max_entries,
            });
        }
        let relative = confined(&entry.path_bytes()).ok_or_else(|| UnpackError::Refused {
            path: name.clone(),
            why: "not a relative path of plain names",
        })?;
        let target = dest.join(&relative);
        match entry.header().entry_type() {
            tar::EntryType::Directory => {
                std::fs::create_dir_all(&target).map_err(write(&name))?;
            }
            tar::EntryType::Regular => {
                let size = entry.header().size().map_err(UnpackError::Read)?;
                total = total.saturating_add(size);
                if total > limits.max_bytes {
                    return Err(UnpackError::TooBig {
                        limit: limits.max_bytes,
                        path: name,
                    });
                }
                let executable = entry.header().mode().map_err(UnpackError::Read)? & 0o111 != 0;
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent).map_err(write(&name))?;
                }
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(if executable { 0o555 } else { 0o444 })
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&target)
                    .map_err(write(&name))?;
                let copied =
                    std::io::copy(&mut (&mut entry).take(size), &mut file).map_err(write(&name))?;
                if copied != size {
                    return Err(UnpackError::Refused {
                        path: name,
                        why: "shorter than its header declares",
                    });
                }
                file.flush().map_err(write(&name))?;
            }
            tar::EntryType::Symlink | tar::EntryType::Link => {
                return Err(UnpackError::Refused {
                    path: name,
                    why: "a link (a dependency archive holds files and directories only)",
                });
            }
            _ => {
                return Err(UnpackError::Refused {
                    path: name,
                    why: "neither a file nor a directory (a device, a FIFO, an extension)",
                });
            }
        }
    }
    Ok(())
}

/// `path` as a relative path of plain names, or `None`.
fn confined(path: &[u8]) -> Option<PathBuf> {
    let path = Path::new(std::ffi::OsStr::from_bytes(path));
    let mut confined = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => confined.push(name),
            Component::CurDir if confined.as_os_str().is_empty() => {}
            _ => return None,
        }
    }
    (!confined.as_os_str().is_empty()).then_some(confined)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vendored(dir: &Path) {
        std::fs::create_dir_all(dir.join("lru/src")).unwrap();
        std::fs::create_dir_all(dir.join("hashbrown/src/raw")).unwrap();
        std::fs::write(dir.join("lru/Cargo.toml"), "[package]\nname = \"lru\"\n").unwrap();
        std::fs::write(dir.join("lru/src/lib.rs"), "pub fn cap() {}\n").unwrap();
        std::fs::write(dir.join("lru/.cargo-checksum.json"), "{}").unwrap();
        std::fs::write(dir.join("hashbrown/src/raw/mod.rs"), "// raw\n").unwrap();
        let script = dir.join("hashbrown/build.sh");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o700)).unwrap();
    }

    /// A one-entry archive with `kind`, `path` and `link`, written byte by byte, so the tar
    /// crate's own path checks cannot stop a hostile name from being built.
    fn hostile(kind: tar::EntryType, path: &[u8], link: &[u8], body: &[u8]) -> Vec<u8> {
        let mut header = tar::Header::new_old();
        header.as_old_mut().name[..path.len()].copy_from_slice(path);
        header.as_old_mut().linkname[..link.len()].copy_from_slice(link);
        header.set_entry_type(kind);
        header.set_mode(0o644);
        header.set_size(body.len() as u64);
        header.set_cksum();
        let mut bytes = header.as_bytes().to_vec();
        bytes.extend_from_slice(body);
        bytes.resize(bytes.len().div_ceil(512) * 512 + 1024, 0);
        bytes
    }

    #[test]
    fn the_same_sources_pack_to_the_same_bytes_whatever_their_times_and_order() {
        let first = tempfile::tempdir().unwrap();
        let second = tempfile::tempdir().unwrap();
        vendored(first.path());
        // Written in another order, an hour later as far as the files say.
        std::fs::create_dir_all(second.path().join("hashbrown/src/raw")).unwrap();
        vendored(second.path());
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(second.path().join("lru/src/lib.rs"))
            .unwrap()
            .set_modified(later)
            .unwrap();
        let packed = pack(first.path()).unwrap();
        assert_eq!(packed, pack(second.path()).unwrap());
        let names: Vec<String> = tar::Archive::new(&packed[..])
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert_eq!(names[0], "hashbrown");
        assert!(
            names.iter().position(|n| n == "lru/.cargo-checksum.json")
                < names.iter().position(|n| n == "lru/Cargo.toml")
        );
        let dest = first.path().join("unpacked");
        unpack(&packed, &dest, ArchiveLimits::default()).unwrap();
        assert_eq!(
            std::fs::read_to_string(dest.join("lru/src/lib.rs")).unwrap(),
            "pub fn cap() {}\n"
        );
        let mode = |p: &str| {
            std::fs::metadata(dest.join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("hashbrown/build.sh"), 0o555);
        assert_eq!(mode("lru/Cargo.toml"), 0o444);
    }

    #[test]
    fn a_link_in_the_sources_is_refused_when_packing() {
        let dir = tempfile::tempdir().unwrap();
        vendored(dir.path());
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("lru/src/passwd")).unwrap();
        assert!(matches!(
            pack(dir.path()),
            Err(PackError::NotPlain { path }) if path.ends_with("lru/src/passwd")
        ));
    }

    #[test]
    fn hostile_entries_are_refused_and_nothing_lands_outside() {
        let dir = tempfile::tempdir().unwrap();
        let absolute = dir.path().join("planted-by-absolute-path");
        let cases: Vec<(&str, Vec<u8>)> = vec![
            (
                "absolute path",
                hostile(
                    tar::EntryType::Regular,
                    absolute.as_os_str().as_bytes(),
                    b"",
                    b"x",
                ),
            ),
            (
                "parent directory",
                hostile(tar::EntryType::Regular, b"lru/../../planted", b"", b"x"),
            ),
            (
                "symlink out",
                hostile(tar::EntryType::Symlink, b"lru", b"/etc", b""),
            ),
            (
                "hard link out",
                hostile(tar::EntryType::Link, b"lru/passwd", b"/etc/passwd", b""),
            ),
            (
                "device",
                hostile(tar::EntryType::Char, b"lru/tty", b"", b""),
            ),
            ("fifo", hostile(tar::EntryType::Fifo, b"lru/fifo", b"", b"")),
        ];
        for (i, (what, archive)) in cases.iter().enumerate() {
            let dest = dir.path().join(format!("case-{i}"));
            let refused = unpack(archive, &dest, ArchiveLimits::default());
            assert!(
                matches!(refused, Err(UnpackError::Refused { .. })),
                "{what}: {refused:?}"
            );
        }
        assert!(!dir.path().join("planted").exists());
        assert!(!absolute.exists());
    }

    #[test]
    fn an_archive_past_its_limits_or_giving_a_file_twice_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        vendored(dir.path());
        let packed = pack(dir.path()).unwrap();
        let few = ArchiveLimits {
            max_bytes: u64::MAX,
            max_entries: 3,
        };
        assert!(matches!(
            unpack(&packed, &dir.path().join("a"), few),
            Err(UnpackError::TooManyEntries { limit: 3 })
        ));
        let small = ArchiveLimits {
            max_bytes: 10,
            max_entries: 100,
        };
        assert!(matches!(
            unpack(&packed, &dir.path().join("b"), small),
            Err(UnpackError::TooBig { limit: 10, .. })
        ));
        let mut twice = hostile(tar::EntryType::Regular, b"lru/lib.rs", b"", b"one");
        twice.truncate(1024);
        twice.extend(hostile(tar::EntryType::Regular, b"lru/lib.rs", b"", b"two"));
        assert!(matches!(
            unpack(&twice, &dir.path().join("c"), ArchiveLimits::default()),
            Err(UnpackError::Write { .. })
        ));
    }
}
