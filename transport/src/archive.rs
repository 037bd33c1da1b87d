//! Tree archives: a git tree as a deterministic, uncompressed tar, so the fleet can ship sources
//! through the object store content-addressed by tree id. Deterministic (sorted git order, zero
//! mtimes, fixed owners) so the same tree always yields the same bytes and the same sha256, and
//! complete (gitlinks, names as git stores their bytes, empty subtrees), so a worker can
//! recompute the git tree id from an archive and refuse one that holds another tree.
//! `docs/FORMATS.md` describes the entries.

use crate::tree::TreeError;
use assay_common::TreeId;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

/// The tar type flag of a gitlink (a submodule's commit): a vendor extension (POSIX leaves
/// `A`–`Z` to those), its link name the commit id in hex. The unpacker creates nothing for it.
pub const GITLINK_TYPE: u8 = b'G';
/// Blobs up to this size are hashed in memory; bigger ones through a spill file, so verifying
/// an archive never holds a big file whole.
const BLOB_IN_MEMORY: u64 = 8 * 1024 * 1024;

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
    append_tree(&repo, tree, &git_tree, b"", &mut builder, 0)?;
    builder.into_inner().map_err(|source| TreeError::Write {
        tree: tree.to_string(),
        path: "archive".into(),
        source,
    })
}

/// A tar header with nothing of the host in it (no owner, no time), so equal inputs pack to
/// equal bytes.
pub(crate) fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_size(size);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header
}

/// Writes `target` into the header's link name as git stores it: byte for byte, through a GNU
/// long-link entry when it does not fit (`Builder::append_link` would normalize it as a path).
fn set_raw_link(
    builder: &mut tar::Builder<Vec<u8>>,
    header: &mut tar::Header,
    target: &[u8],
) -> std::io::Result<()> {
    let slot = &mut header.as_old_mut().linkname;
    if target.len() < slot.len() {
        slot[..target.len()].copy_from_slice(target);
        return Ok(());
    }
    let mut long = self::header(tar::EntryType::GNULongLink, 0o644, target.len() as u64 + 1);
    long.as_gnu_mut()
        .map(|gnu| gnu.name[..13].copy_from_slice(b"././@LongLink"))
        .ok_or_else(|| std::io::Error::other("not a GNU header"))?;
    long.set_cksum();
    builder.append(&long, target.chain(&b"\0"[..]))
}

fn append_tree(
    repo: &git2::Repository,
    tree_id: &TreeId,
    tree: &git2::Tree<'_>,
    prefix: &[u8],
    builder: &mut tar::Builder<Vec<u8>>,
    depth: usize,
) -> Result<(), TreeError> {
    if depth > crate::tree::MAX_TREE_DEPTH {
        return Err(TreeError::TooDeep {
            tree: tree_id.to_string(),
            path: String::from_utf8_lossy(prefix).into_owned(),
        });
    }
    for entry in tree.iter() {
        let mut bytes = prefix.to_vec();
        bytes.extend_from_slice(entry.name_bytes());
        let path = Path::new(OsStr::from_bytes(&bytes));
        let read_err = |source| TreeError::Read {
            tree: tree_id.to_string(),
            what: path.display().to_string(),
            source,
        };
        let write_err = |source| TreeError::Write {
            tree: tree_id.to_string(),
            path: path.to_owned(),
            source,
        };
        match entry.kind() {
            Some(git2::ObjectType::Tree) => {
                let sub = repo.find_tree(entry.id()).map_err(read_err)?;
                if sub.is_empty() {
                    // Git can hold an empty subtree; a directory entry keeps it in the id.
                    let mut dir = header(tar::EntryType::Directory, 0o755, 0);
                    builder
                        .append_data(&mut dir, path, std::io::empty())
                        .map_err(write_err)?;
                } else {
                    bytes.push(b'/');
                    append_tree(repo, tree_id, &sub, &bytes, builder, depth + 1)?;
                }
            }
            Some(git2::ObjectType::Blob) => {
                let blob = repo.find_blob(entry.id()).map_err(read_err)?;
                if entry.filemode() == 0o120000 {
                    let mut link = header(tar::EntryType::Symlink, 0o777, 0);
                    set_raw_link(builder, &mut link, blob.content()).map_err(write_err)?;
                    builder
                        .append_data(&mut link, path, std::io::empty())
                        .map_err(write_err)?;
                } else {
                    let mode = if entry.filemode() == 0o100755 {
                        0o755
                    } else {
                        0o644
                    };
                    let mut file =
                        header(tar::EntryType::Regular, mode, blob.content().len() as u64);
                    builder
                        .append_data(&mut file, path, blob.content())
                        .map_err(write_err)?;
                }
            }
            Some(git2::ObjectType::Commit) => {
                let mut link = header(tar::EntryType::new(GITLINK_TYPE), 0o644, 0);
                set_raw_link(builder, &mut link, entry.id().to_string().as_bytes())
                    .map_err(write_err)?;
                builder
                    .append_data(&mut link, path, std::io::empty())
                    .map_err(write_err)?;
            }
            _ => {
                return Err(TreeError::Other {
                    tree: tree_id.to_string(),
                    message: format!(
                        "entry {} is neither a file, a tree nor a gitlink",
                        path.display()
                    ),
                });
            }
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

impl ArchiveLimits {
    /// The most bytes an archive within the limits can be: its files, a header and padding of
    /// under 1 KiB each, and the end blocks. Paths or link targets past 512 bytes take more
    /// (a long-name entry), which the slack of entries below the limit covers in practice.
    pub fn max_archive_bytes(&self) -> u64 {
        self.max_bytes
            .saturating_add(self.max_entries.saturating_mul(1024))
            .saturating_add(10 * 1024)
    }
}

impl Default for ArchiveLimits {
    fn default() -> Self {
        Self {
            max_bytes: assay_common::service_config::DEFAULT_TREE_MAX_BYTES,
            max_entries: assay_common::service_config::DEFAULT_TREE_MAX_ENTRIES,
        }
    }
}

/// Why a tree archive was refused or could not be unpacked.
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    /// The archive holds more entries than the worker allows.
    #[error(
        "the archive holds more than {limit} entries (hint: raise worker.tree_max_entries if the tree really has that many files)"
    )]
    TooManyEntries {
        /// The most entries allowed.
        limit: u64,
    },
    /// The entries' declared sizes add up to more bytes than the worker allows.
    #[error(
        "the archive unpacks to more than {limit} bytes (entry {path} declares {declared}; hint: raise worker.tree_max_bytes if the tree really is that big)"
    )]
    TooBig {
        /// The most bytes allowed.
        limit: u64,
        /// The entry that went over the limit.
        path: String,
        /// That entry's declared size, in bytes.
        declared: u64,
    },
    /// An entry a git tree cannot hold: a traversing path, a device, a hard link...
    #[error("entry {path} is not one a tree archive holds: {why}")]
    NotATreeEntry {
        /// The entry's path as the archive names it.
        path: String,
        /// What is wrong with it.
        why: String,
    },
    /// Git could not hash an entry while the tree id was recomputed.
    #[error("failed to hash entry {path}")]
    Hash {
        /// The entry being hashed.
        path: String,
        /// Git's error.
        #[source]
        source: git2::Error,
    },
    /// The unpacked entries hash to another tree id than the one asked for.
    #[error(
        "the archive holds tree {found}, not tree {expected}: its entries were changed since it was built"
    )]
    NotThisTree {
        /// The tree id the job named.
        expected: String,
        /// The tree id the entries hash to.
        found: String,
    },
    /// An entry held fewer bytes than its header declared (a truncated archive).
    #[error("entry {path} declares {declared} bytes but {read} were unpacked")]
    ShortEntry {
        /// The truncated entry.
        path: String,
        /// The size its header declared, in bytes.
        declared: u64,
        /// The bytes actually there.
        read: u64,
    },
    /// Reading the archive or writing an entry to disk failed.
    #[error("failed to read or unpack the archive")]
    Io(#[from] std::io::Error),
}

/// What one tar entry is in git's terms.
enum Kind {
    File { executable: bool },
    Symlink,
    Gitlink,
    Directory,
}

/// Counts an entry against `limits` and says what it is, refusing anything a tree archive
/// never holds (hard links, devices, FIFOs, special mode bits).
struct Budget {
    limits: ArchiveLimits,
    entries: u64,
    total: u64,
}

impl Budget {
    fn new(limits: ArchiveLimits) -> Self {
        Self {
            limits,
            entries: 0,
            total: 0,
        }
    }

    fn admit<R: Read>(&mut self, entry: &tar::Entry<'_, R>) -> Result<Kind, UnpackError> {
        self.entries += 1;
        if self.entries > self.limits.max_entries {
            return Err(UnpackError::TooManyEntries {
                limit: self.limits.max_entries,
            });
        }
        let header = entry.header();
        let path = || String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let declared = header.size()?;
        self.total = self.total.saturating_add(declared);
        if self.total > self.limits.max_bytes {
            return Err(UnpackError::TooBig {
                limit: self.limits.max_bytes,
                path: path(),
                declared,
            });
        }
        let mode = header.mode()?;
        let refuse = |why: String| UnpackError::NotATreeEntry { path: path(), why };
        let kind = header.entry_type();
        let kind = match kind {
            tar::EntryType::Regular if mode == 0o644 => Kind::File { executable: false },
            tar::EntryType::Regular if mode == 0o755 => Kind::File { executable: true },
            tar::EntryType::Regular => return Err(refuse(format!("a file of mode {mode:o}"))),
            tar::EntryType::Symlink => Kind::Symlink,
            tar::EntryType::Directory if mode == 0o755 => Kind::Directory,
            tar::EntryType::Directory => {
                return Err(refuse(format!("a directory of mode {mode:o}")));
            }
            other if other.as_byte() == GITLINK_TYPE => Kind::Gitlink,
            other => {
                return Err(refuse(format!(
                    "tar type {:?}",
                    char::from(other.as_byte())
                )));
            }
        };
        if !matches!(kind, Kind::File { .. }) && declared != 0 {
            return Err(refuse(format!(
                "a link or directory declaring {declared} bytes"
            )));
        }
        Ok(kind)
    }
}

/// A directory of the tree being rebuilt from an archive, by entry name.
#[derive(Default)]
struct Dir(BTreeMap<Vec<u8>, Node>);

enum Node {
    Blob { mode: &'static [u8], id: git2::Oid },
    Gitlink(git2::Oid),
    Dir(Dir),
}

impl Dir {
    /// Places `node` at `path` (`a/b/c`), creating the directories above it.
    fn insert(&mut self, path: &[u8], node: Node) -> Result<(), UnpackError> {
        let refuse = |why: &str| UnpackError::NotATreeEntry {
            path: String::from_utf8_lossy(path).into_owned(),
            why: why.to_owned(),
        };
        let trimmed = path.strip_suffix(b"/").unwrap_or(path);
        let mut names: Vec<&[u8]> = trimmed.split(|b| *b == b'/').collect();
        if names
            .iter()
            .any(|n| n.is_empty() || *n == b"." || *n == b"..")
        {
            return Err(refuse("a path git cannot hold"));
        }
        let Some(leaf) = names.pop() else {
            return Err(refuse("an empty path"));
        };
        let mut dir = self;
        for name in names {
            let next = dir
                .0
                .entry(name.to_vec())
                .or_insert_with(|| Node::Dir(Dir::default()));
            dir = match next {
                Node::Dir(sub) => sub,
                _ => return Err(refuse("a path under a file")),
            };
        }
        match (dir.0.get(leaf), &node) {
            (None, _) => {
                dir.0.insert(leaf.to_vec(), node);
                Ok(())
            }
            (Some(Node::Dir(_)), Node::Dir(_)) => Ok(()),
            (Some(_), _) => Err(refuse("a path the archive holds twice")),
        }
    }

    /// The git tree id: entries `<mode> <name>\0<id>` in git's order, where a directory sorts
    /// as if its name ended in `/`.
    fn id(&self) -> Result<git2::Oid, git2::Error> {
        let mut items = Vec::with_capacity(self.0.len());
        for (name, node) in &self.0 {
            let (key, mode, id) = match node {
                Node::Dir(sub) => ([name.as_slice(), b"/"].concat(), &b"40000"[..], sub.id()?),
                Node::Blob { mode, id } => (name.clone(), *mode, *id),
                Node::Gitlink(id) => (name.clone(), &b"160000"[..], *id),
            };
            items.push((key, mode, name, id));
        }
        items.sort_by(|a, b| a.0.cmp(&b.0));
        let mut content = Vec::new();
        for (_, mode, name, id) in items {
            content.extend_from_slice(mode);
            content.push(b' ');
            content.extend_from_slice(name);
            content.push(0);
            content.extend_from_slice(id.as_bytes());
        }
        git2::Oid::hash_object(git2::ObjectType::Tree, &content)
    }
}

/// The git tree id of the tree `archive` holds, computed as git would from its entries (blob
/// ids from their content), within `limits`. A blob bigger than 8 MiB is hashed through the
/// file `spill`, which is removed afterwards.
pub fn archive_tree_id(
    archive: &Path,
    limits: ArchiveLimits,
    spill: &Path,
) -> Result<git2::Oid, UnpackError> {
    let mut budget = Budget::new(limits);
    let mut root = Dir::default();
    let mut tar = tar::Archive::new(std::fs::File::open(archive)?);
    for entry in tar.entries()? {
        let mut entry = entry?;
        let kind = budget.admit(&entry)?;
        let path = entry.path_bytes().into_owned();
        let hash_err = |source| UnpackError::Hash {
            path: String::from_utf8_lossy(&path).into_owned(),
            source,
        };
        let node = match kind {
            Kind::Directory => Node::Dir(Dir::default()),
            Kind::Symlink => symlink_node(&entry).map_err(hash_err)?,
            Kind::Gitlink => gitlink_node(&entry).map_err(hash_err)?,
            Kind::File { executable } => {
                let size = entry.header().size()?;
                let id = if size <= BLOB_IN_MEMORY {
                    let mut content = Vec::with_capacity(size as usize);
                    entry.read_to_end(&mut content)?;
                    git2::Oid::hash_object(git2::ObjectType::Blob, &content)
                } else {
                    let mut file = std::fs::File::create(spill)?;
                    let copied = std::io::copy(&mut entry, &mut file);
                    let id = copied.map(|_| git2::Oid::hash_file(git2::ObjectType::Blob, spill));
                    std::fs::remove_file(spill)?;
                    id?
                }
                .map_err(hash_err)?;
                let mode: &'static [u8] = if executable { b"100755" } else { b"100644" };
                Node::Blob { mode, id }
            }
        };
        root.insert(&path, node)?;
    }
    root.id().map_err(|source| UnpackError::Hash {
        path: "/".into(),
        source,
    })
}

/// The link name an entry declares: a symlink's target, a gitlink's commit.
fn link_name<R: Read>(entry: &tar::Entry<'_, R>) -> Vec<u8> {
    entry
        .link_name_bytes()
        .map(|l| l.into_owned())
        .unwrap_or_default()
}

/// A symlink entry's node in git's tree: a blob of its target.
fn symlink_node<R: Read>(entry: &tar::Entry<'_, R>) -> Result<Node, git2::Error> {
    Ok(Node::Blob {
        mode: b"120000",
        id: git2::Oid::hash_object(git2::ObjectType::Blob, &link_name(entry))?,
    })
}

/// A gitlink entry's node in git's tree: the commit its link name gives.
fn gitlink_node<R: Read>(entry: &tar::Entry<'_, R>) -> Result<Node, git2::Error> {
    let commit = String::from_utf8_lossy(&link_name(entry)).into_owned();
    Ok(Node::Gitlink(git2::Oid::from_str(&commit)?))
}

/// What the unpacker is capturing of the entry being unpacked: its bytes, when it is a blob
/// small enough to hash in memory, and how many there were.
#[derive(Default)]
struct Capture {
    armed: bool,
    keep: bool,
    bytes: Vec<u8>,
    count: u64,
}

/// The archive's reader, copying what `tar` reads of an entry's data into the [`Capture`]
/// while it is armed. `tar` reads straight from this reader (it buffers nothing), so the
/// bytes read between arming and disarming are exactly the entry's data.
struct Tee<R> {
    inner: R,
    capture: std::rc::Rc<std::cell::RefCell<Capture>>,
}

impl<R: Read> Read for Tee<R> {
    fn read(&mut self, into: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(into)?;
        let mut capture = self.capture.borrow_mut();
        if capture.armed {
            capture.count += n as u64;
            if capture.keep {
                capture.bytes.extend_from_slice(&into[..n]);
            }
        }
        Ok(n)
    }
}

/// Unpacks the archive open as `archive` into `dest`, and in the same read recomputes the git
/// tree id from what it unpacks (as [`archive_tree_id`] does):
/// an archive that is not `expected` is refused with [`UnpackError::NotThisTree`] once read
/// through. On any error `dest` may hold part of the archive; the caller empties it. The
/// limits are checked first from the entries' headers alone (seeking past their data), so a
/// hostile archive is refused before anything is written, and again while unpacking, so an
/// archive changed between the two reads is bounded all the same. Entries escaping `dest` are
/// refused by `tar` itself, gitlinks create nothing, and modes keep only their permission
/// bits: no setuid, setgid or sticky bit is ever restored.
pub fn unpack_verified(
    archive: &std::fs::File,
    dest: &Path,
    limits: ArchiveLimits,
    expected: &TreeId,
) -> Result<(), UnpackError> {
    use std::io::{Seek as _, SeekFrom};
    let mut headers = Budget::new(limits);
    let mut reader = archive;
    reader.seek(SeekFrom::Start(0))?;
    for entry in tar::Archive::new(reader).entries_with_seek()? {
        headers.admit(&entry?)?;
    }
    reader.seek(SeekFrom::Start(0))?;
    let capture = std::rc::Rc::new(std::cell::RefCell::new(Capture::default()));
    let tee = Tee {
        inner: std::io::BufReader::with_capacity(256 * 1024, reader),
        capture: capture.clone(),
    };
    let mut tar = tar::Archive::new(tee);
    tar.set_preserve_permissions(false);
    tar.set_mask(0o7000);
    tar.set_preserve_mtime(false);
    tar.set_unpack_xattrs(false);
    let mut budget = Budget::new(limits);
    let mut root = Dir::default();
    let mut directories = Vec::new();
    for entry in tar.entries()? {
        let mut entry = entry?;
        let kind = budget.admit(&entry)?;
        let path = entry.path_bytes().into_owned();
        let lossy = || String::from_utf8_lossy(&path).into_owned();
        let hash_err = |source| UnpackError::Hash {
            path: lossy(),
            source,
        };
        match kind {
            Kind::Directory => {
                root.insert(&path, Node::Dir(Dir::default()))?;
                directories.push(entry);
            }
            Kind::Gitlink => {
                let node = gitlink_node(&entry).map_err(hash_err)?;
                root.insert(&path, node)?;
            }
            Kind::Symlink => {
                let node = symlink_node(&entry).map_err(hash_err)?;
                if !entry.unpack_in(dest)? {
                    return Err(skipped(lossy()));
                }
                root.insert(&path, node)?;
            }
            Kind::File { executable } => {
                let declared = entry.header().size()?;
                let keep = declared <= BLOB_IN_MEMORY;
                *capture.borrow_mut() = Capture {
                    armed: true,
                    keep,
                    bytes: Vec::with_capacity(if keep { declared as usize } else { 0 }),
                    count: 0,
                };
                let unpacked = entry.unpack_in(dest);
                let taken = std::mem::take(&mut *capture.borrow_mut());
                if !unpacked? {
                    return Err(skipped(lossy()));
                }
                if taken.count != declared {
                    // `tar` skipped it (a path it will not write) or the file ended early.
                    return Err(UnpackError::ShortEntry {
                        path: lossy(),
                        declared,
                        read: taken.count,
                    });
                }
                let id = if keep {
                    git2::Oid::hash_object(git2::ObjectType::Blob, &taken.bytes)
                } else {
                    // Too big to hold: hashed from the file just written, which nobody else
                    // can have touched (the tree is not handed out until it is verified).
                    let written = dest.join(OsStr::from_bytes(&path));
                    git2::Oid::hash_file(git2::ObjectType::Blob, written)
                }
                .map_err(hash_err)?;
                let mode: &'static [u8] = if executable { b"100755" } else { b"100644" };
                root.insert(&path, Node::Blob { mode, id })?;
            }
        }
    }
    let found = root.id().map_err(|source| UnpackError::Hash {
        path: "/".into(),
        source,
    })?;
    if !found.to_string().eq_ignore_ascii_case(expected.as_str()) {
        return Err(UnpackError::NotThisTree {
            expected: expected.to_string(),
            found: found.to_string(),
        });
    }
    for mut directory in directories {
        if !directory.unpack_in(dest)? {
            let path = String::from_utf8_lossy(&directory.path_bytes()).into_owned();
            return Err(skipped(path));
        }
    }
    Ok(())
}

/// An entry `tar` declined to write (a path it will not place under the destination).
fn skipped(path: String) -> UnpackError {
    UnpackError::NotATreeEntry {
        path,
        why: "a path that cannot be unpacked inside the tree".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(repo: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(["-c", "user.name=Ada", "-c", "user.email=ada@invoices.test"])
            .args(args)
            .current_dir(repo)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    fn write(repo: &Path, path: &str, text: &[u8]) {
        let path = repo.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// The archive of `tree` written to a file, and the tree id recomputed from it.
    fn recomputed(repo: &Path, tree: &TreeId) -> (tempfile::TempDir, std::path::PathBuf, String) {
        let bytes = build_tree_archive(repo, tree).unwrap();
        let out = tempfile::tempdir().unwrap();
        let archive = out.path().join("tree.tar");
        std::fs::write(&archive, bytes).unwrap();
        let id = archive_tree_id(
            &archive,
            ArchiveLimits::default(),
            &out.path().join("spill"),
        )
        .unwrap();
        assert!(
            !out.path().join("spill").exists(),
            "the spill file is removed"
        );
        (out, archive, id.to_string())
    }

    /// A repository of the shapes whose ids are easy to get wrong: nested directories, an
    /// executable, symlinks (one past the 100-byte tar field), a submodule, a name with a space
    /// and one that is not UTF-8, names that sort differently as files and as directories, a
    /// blob past the in-memory bound, and an empty subtree.
    fn awkward_repo(dir: &Path) -> TreeId {
        git(dir, &["init", "-q", "-b", "main"]);
        write(dir, "invoices/tax/rates.py", b"VAT = 0.2\n");
        write(dir, "invoices/__init__.py", b"");
        write(dir, "run tests.sh", b"#!/bin/sh\npytest\n");
        write(dir, "a.b", b"dotted\n");
        write(dir, "a/inner.py", b"INNER = 1\n");
        write(dir, "a0", b"zero\n");
        let big: Vec<u8> = (0..BLOB_IN_MEMORY + 4096)
            .map(|i| (i % 251) as u8)
            .collect();
        write(dir, "fixtures/ledger.bin", &big);
        let latin1 = OsStr::from_bytes(b"caf\xe9.txt");
        std::fs::write(dir.join(latin1), b"menu\n").unwrap();
        std::os::unix::fs::symlink("invoices/tax/rates.py", dir.join("rates.py")).unwrap();
        let far = format!("{}/target.py", "deep/".repeat(30));
        std::os::unix::fs::symlink(&far, dir.join("far.py")).unwrap();
        git(dir, &["add", "."]);
        git(dir, &["update-index", "--chmod=+x", "run tests.sh"]);
        let commit = "5c0e41d2a9b7c3e1f0a4d8b6e2c9f7a1b3d5e7f9";
        git(
            dir,
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{commit},vendor/lib"),
            ],
        );
        let tree = git(dir, &["write-tree"]);
        // Git's own commands never write an empty subtree; libgit2 can.
        let repo = git2::Repository::open(dir).unwrap();
        let empty = repo.treebuilder(None).unwrap().write().unwrap();
        let root = repo.find_tree(git2::Oid::from_str(&tree).unwrap()).unwrap();
        let mut builder = repo.treebuilder(Some(&root)).unwrap();
        builder.insert("placeholder", empty, 0o040000).unwrap();
        TreeId(builder.write().unwrap().to_string())
    }

    #[test]
    fn the_tree_id_recomputed_from_an_archive_is_gits() {
        let dir = tempfile::tempdir().unwrap();
        let tree = awkward_repo(dir.path());
        let listing = git(dir.path(), &["ls-tree", "-r", "-t", tree.as_str()]);
        for shape in [
            "160000 commit",
            "120000 blob",
            "100755 blob",
            "040000 tree",
            "a.b",
            "a0",
        ] {
            assert!(listing.contains(shape), "{shape} in {listing}");
        }
        let (_out, _archive, id) = recomputed(dir.path(), &tree);
        assert_eq!(id, tree.as_str());
    }

    #[test]
    fn an_empty_tree_is_an_empty_archive_with_gits_empty_tree_id() {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q"]);
        let tree = TreeId(git(dir.path(), &["write-tree"]));
        assert_eq!(tree.as_str(), "4b825dc642cb6eb9a060e54bf8d69288fbee4904");
        let (_out, _archive, id) = recomputed(dir.path(), &tree);
        assert_eq!(id, tree.as_str());
    }

    #[test]
    fn an_archive_unpacks_with_modes_links_and_names_and_nothing_for_a_submodule() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let tree = awkward_repo(dir.path());
        let first = build_tree_archive(dir.path(), &tree).unwrap();
        assert_eq!(
            first,
            build_tree_archive(dir.path(), &tree).unwrap(),
            "deterministic"
        );
        let (_out, archive, _) = recomputed(dir.path(), &tree);
        let dest = tempfile::tempdir().unwrap();
        let file = std::fs::File::open(&archive).unwrap();
        unpack_verified(&file, dest.path(), ArchiveLimits::default(), &tree).unwrap();
        let read = |path: &str| std::fs::read(dest.path().join(path)).unwrap();
        assert_eq!(read("invoices/tax/rates.py"), b"VAT = 0.2\n");
        assert_eq!(read("rates.py"), b"VAT = 0.2\n", "the symlink resolves");
        assert_eq!(
            std::fs::read_link(dest.path().join("far.py")).unwrap(),
            Path::new(&format!("{}/target.py", "deep/".repeat(30)))
        );
        assert_eq!(
            std::fs::read(dest.path().join(OsStr::from_bytes(b"caf\xe9.txt"))).unwrap(),
            b"menu\n"
        );
        let mode = |path: &str| {
            std::fs::metadata(dest.path().join(path))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("run tests.sh"), 0o755);
        assert_eq!(mode("a0"), 0o644);
        assert!(
            dest.path().join("placeholder").is_dir(),
            "the empty subtree"
        );
        assert!(
            !dest.path().join("vendor").exists(),
            "a submodule creates nothing"
        );
    }

    #[test]
    fn unpacking_verified_recomputes_the_tree_id_in_the_same_read_and_refuses_another_tree() {
        let dir = tempfile::tempdir().unwrap();
        let tree = awkward_repo(dir.path());
        let (_out, archive, _) = recomputed(dir.path(), &tree);
        let file = std::fs::File::open(&archive).unwrap();
        let dest = tempfile::tempdir().unwrap();
        unpack_verified(&file, dest.path(), ArchiveLimits::default(), &tree).unwrap();
        assert_eq!(
            std::fs::read(dest.path().join("invoices/tax/rates.py")).unwrap(),
            b"VAT = 0.2\n"
        );
        assert_eq!(
            std::fs::metadata(dest.path().join("fixtures/ledger.bin"))
                .unwrap()
                .len(),
            BLOB_IN_MEMORY + 4096,
            "the blob past the in-memory bound"
        );
        assert!(dest.path().join("placeholder").is_dir());
        let other = TreeId("4b825dc642cb6eb9a060e54bf8d69288fbee4904".into());
        let again = tempfile::tempdir().unwrap();
        let err =
            unpack_verified(&file, again.path(), ArchiveLimits::default(), &other).unwrap_err();
        assert!(
            matches!(&err, UnpackError::NotThisTree { found, .. } if found == tree.as_str()),
            "{err}"
        );
        assert!(err.to_string().contains(other.as_str()), "{err}");
    }

    #[test]
    fn entries_git_cannot_hold_are_refused_before_anything_is_written() {
        let out = tempfile::tempdir().unwrap();
        let cases: [(&str, tar::EntryType, u32, &str); 4] = [
            (
                "bin/escalate",
                tar::EntryType::Regular,
                0o4755,
                "a file of mode 4755",
            ),
            (
                "pager.py",
                tar::EntryType::Regular,
                0o000,
                "a file of mode 0",
            ),
            ("dev/console", tar::EntryType::Char, 0o644, "tar type '3'"),
            ("queue", tar::EntryType::Fifo, 0o644, "tar type '6'"),
        ];
        for (path, kind, mode, why) in cases {
            let mut builder = tar::Builder::new(Vec::new());
            let mut honest = header(tar::EntryType::Regular, 0o644, 3);
            builder
                .append_data(&mut honest, "ok.py", &b"X=1"[..])
                .unwrap();
            let mut entry = header(kind, mode, 0);
            builder
                .append_data(&mut entry, path, std::io::empty())
                .unwrap();
            let archive = out.path().join("hostile.tar");
            std::fs::write(&archive, builder.into_inner().unwrap()).unwrap();
            let dest = out.path().join("dest");
            let file = std::fs::File::open(&archive).unwrap();
            let any_tree = TreeId("4b825dc642cb6eb9a060e54bf8d69288fbee4904".into());
            let err =
                unpack_verified(&file, &dest, ArchiveLimits::default(), &any_tree).unwrap_err();
            assert!(err.to_string().contains(why), "{path}: {err}");
            assert!(err.to_string().contains(path), "{path}: {err}");
            assert!(!dest.exists(), "nothing was written for {path}");
            let err = archive_tree_id(
                &archive,
                ArchiveLimits::default(),
                &out.path().join("spill"),
            )
            .unwrap_err();
            assert!(err.to_string().contains(why), "{path}: {err}");
            std::fs::create_dir_all(&dest).unwrap();
            let file = std::fs::File::open(&archive).unwrap();
            let any = TreeId("4b825dc642cb6eb9a060e54bf8d69288fbee4904".into());
            let err = unpack_verified(&file, &dest, ArchiveLimits::default(), &any).unwrap_err();
            assert!(err.to_string().contains(why), "{path}: {err}");
            assert_eq!(std::fs::read_dir(&dest).unwrap().count(), 0, "{path}");
            std::fs::remove_dir(&dest).unwrap();
        }
    }

    #[test]
    fn an_archive_holding_a_path_twice_or_under_a_file_has_no_tree_id() {
        let out = tempfile::tempdir().unwrap();
        for (second, why) in [("pager.py", "twice"), ("pager.py/x.py", "under a file")] {
            let mut builder = tar::Builder::new(Vec::new());
            for path in ["pager.py", second] {
                let mut file = header(tar::EntryType::Regular, 0o644, 3);
                builder.append_data(&mut file, path, &b"X=1"[..]).unwrap();
            }
            let archive = out.path().join("hostile.tar");
            std::fs::write(&archive, builder.into_inner().unwrap()).unwrap();
            let err = archive_tree_id(
                &archive,
                ArchiveLimits::default(),
                &out.path().join("spill"),
            )
            .unwrap_err();
            assert!(err.to_string().contains(why), "{err}");
        }
    }
}
