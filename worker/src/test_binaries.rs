//! Prebuilt test executables on the worker (see [`assay_common::test_binaries`]): a build
//! job's executables packed and stored, and a run job's archive fetched, checked and unpacked.
//! The build ran the guest's code (build scripts, proc macros), so every path its output names
//! is confined to the job's tree before a byte is read, and the archive is read back only
//! through its recorded sha256, so nothing planted in the store or on this disk runs as it.

use crate::guest_file::{self, GuestFile};
use crate::job_context::JobContext;
use assay_common::job::ArtifactRef;
use assay_common::test_binaries::{
    self, ARTIFACT, Binary, BuiltMessage, DOC_TESTS_DIR, DOC_TESTS_EXPECTED, Index, IndexError,
    Selection, check_file, check_package_dir, doc_test_expectations,
};
use assay_transport::store::{ArtifactError, StoreError, read_artifact};
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// All of a build's test executables together; a bigger build is refused, not stored.
pub const MAX_ARCHIVE_BYTES: u64 = 1024 * 1024 * 1024;

/// Why a build's test executables could not be collected, stored, or put back in a tree.
#[derive(Debug, thiserror::Error)]
pub enum TestBinariesError {
    /// The build's JSON messages could not be read; says why.
    #[error("the build's stdout could not be read: {0}")]
    Stdout(String),
    /// The build produced no test executable.
    #[error(
        "the build reported no test executable (hint: the command must be `cargo test --no-run --message-format=json`)"
    )]
    NoneBuilt,
    /// A test executable lies outside the tree.
    #[error(
        "test executable {path} lies outside the job's tree (hint: a target-dir outside the repository cannot travel to the workers)"
    )]
    Outside {
        /// The executable, as the build named it.
        path: String,
    },
    /// A test executable is missing, or reading it would leave the tree.
    #[error("test executable {path} was refused: {why}")]
    Refused {
        /// The executable, as the build named it.
        path: String,
        /// What is wrong with it.
        why: String,
    },
    /// A test executable could not be read.
    #[error("failed to read test executable {path}")]
    Read {
        /// The executable's path on the worker.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The executables together exceed [`MAX_ARCHIVE_BYTES`].
    #[error("the test executables exceed {MAX_ARCHIVE_BYTES} bytes")]
    TooLarge,
    /// The archive's index could not be written or read.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// The archive could not be packed or unpacked.
    #[error("failed to pack or unpack the test executables")]
    Archive(#[source] std::io::Error),
    /// The archive could not be stored.
    #[error("failed to store the test executables")]
    Store(#[source] StoreError),
    /// The archive could not be fetched, or failed its sha256.
    #[error("failed to fetch the test executables")]
    Fetch(#[source] Box<ArtifactError>),
    /// The archive holds an entry other than the index and the executables; names it.
    #[error("the archive holds an entry that is not the index or an executable: {0:?}")]
    Entry(String),
    /// The index names an executable the archive does not hold; names it.
    #[error("the index names {0}, which the archive does not hold")]
    Missing(String),
}

impl TestBinariesError {
    /// What failed, for the job's result and the fault policy.
    pub fn cause(&self) -> assay_common::fault::InfraCause {
        use assay_common::fault::InfraCause;
        match self {
            Self::Store(_) | Self::Fetch(_) => InfraCause::StoreUnavailable,
            _ => InfraCause::PrebuiltBinaries,
        }
    }
}

/// Packs the test executables the build's `stdout` names and stores them under `key`. The
/// guest sees its tree at `guest_root` (the sandbox's mount), which `tree_dir` is on the host.
pub async fn keep(
    ctx: &JobContext,
    stdout_path: &Path,
    logs: &Path,
    tree_dir: &Path,
    guest_root: &str,
    key: &str,
) -> Result<ArtifactRef, TestBinariesError> {
    let (stdout_path, logs, tree_dir) =
        (stdout_path.to_owned(), logs.to_owned(), tree_dir.to_owned());
    let guest_root = guest_root.trim_end_matches('/').to_owned();
    let archive =
        tokio::task::spawn_blocking(move || pack(&stdout_path, &logs, &tree_dir, &guest_root))
            .await
            .map_err(|e| TestBinariesError::Archive(std::io::Error::other(e)))??;
    ctx.store
        .put_bytes(ARTIFACT, key, archive.into())
        .await
        .map_err(TestBinariesError::Store)
}

fn relative<'p>(guest_root: &str, path: &'p str) -> Option<&'p str> {
    path.strip_prefix(guest_root)?.strip_prefix('/')
}

fn pack(
    stdout_path: &Path,
    logs: &Path,
    tree_dir: &Path,
    guest_root: &str,
) -> Result<Vec<u8>, TestBinariesError> {
    let stdout = match guest_file::read(stdout_path, logs) {
        Ok(GuestFile::Bytes(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
        Ok(GuestFile::Absent) => String::new(),
        Ok(GuestFile::Refused(why)) => return Err(TestBinariesError::Stdout(why)),
        Err(e) => return Err(TestBinariesError::Stdout(e.to_string())),
    };
    let built = test_binaries::built(&stdout);
    if built.is_empty() {
        return Err(TestBinariesError::NoneBuilt);
    }
    let mut builder = tar::Builder::new(Vec::new());
    let mut binaries = Vec::new();
    let mut total = 0u64;
    for item in built {
        let outside = || TestBinariesError::Outside {
            path: item.executable.clone(),
        };
        let path = relative(guest_root, &item.executable).ok_or_else(outside)?;
        let file = path.rsplit('/').next().unwrap_or(path).to_owned();
        check_file(&file)?;
        // Cargo names the package's manifest; a Go build names `DIR/go-package`.
        let package_dir = ["Cargo.toml", "go-package"]
            .iter()
            .find_map(|name| {
                relative(guest_root, &item.manifest_path)
                    .and_then(|manifest| manifest.strip_suffix(name))
                    .map(|dir| dir.trim_end_matches('/').to_owned())
                    .or_else(|| {
                        (item.manifest_path == format!("{guest_root}/{name}")).then(String::new)
                    })
            })
            .ok_or_else(outside)?;
        check_package_dir(&package_dir)?;
        if binaries.iter().any(|b: &Binary| b.file == file) {
            continue;
        }
        let host = tree_dir.join(path);
        let bytes = match guest_file::read(&host, tree_dir) {
            Ok(GuestFile::Bytes(bytes)) => bytes,
            Ok(GuestFile::Absent) => {
                return Err(TestBinariesError::Refused {
                    path: item.executable,
                    why: "it is not there".into(),
                });
            }
            Ok(GuestFile::Refused(why)) => {
                return Err(TestBinariesError::Refused {
                    path: item.executable,
                    why,
                });
            }
            Err(source) => return Err(TestBinariesError::Read { path: host, source }),
        };
        total += bytes.len() as u64;
        if total > MAX_ARCHIVE_BYTES {
            return Err(TestBinariesError::TooLarge);
        }
        append(&mut builder, &format!("bin/{file}"), &bytes, 0o755)?;
        binaries.push(Binary {
            file,
            package_dir,
            message: item.message,
        });
    }
    let mut index = Index::new(binaries);
    pack_doc_tests(&mut builder, &mut index, tree_dir, &mut total)?;
    let index = serde_json::to_vec(&index)
        .map_err(|e| TestBinariesError::Archive(std::io::Error::other(e)))?;
    append(&mut builder, "index.json", &index, 0o644)?;
    builder.into_inner().map_err(TestBinariesError::Archive)
}

/// The library's persisted doc tests, when the build has exactly one library (their
/// directory names say no crate, so a workspace's would be told apart by guesswork: there
/// they are left out, as `cargo test` with a selection leaves them out).
fn pack_doc_tests(
    builder: &mut tar::Builder<Vec<u8>>,
    index: &mut Index,
    tree_dir: &Path,
    total: &mut u64,
) -> Result<(), TestBinariesError> {
    let libraries: Vec<&Binary> = index
        .binaries
        .iter()
        .filter(|b| {
            BuiltMessage::parse(&b.message).is_ok_and(|m| m.target.kind.iter().any(|k| k == "lib"))
        })
        .collect();
    let [library] = libraries.as_slice() else {
        return Ok(());
    };
    let krate = BuiltMessage::parse(&library.message)
        .map(|m| m.target.name)
        .unwrap_or_default();
    if check_file(&krate).is_err() {
        return Ok(());
    }
    let dir = tree_dir.join(DOC_TESTS_DIR);
    let expected = match guest_file::read(&dir.join(DOC_TESTS_EXPECTED), tree_dir) {
        Ok(GuestFile::Bytes(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
        _ => return Ok(()),
    };
    let mut kept = Vec::new();
    for doc in doc_test_expectations(&expected) {
        let path = dir.join(&doc.name).join("rust_out");
        let Ok(GuestFile::Bytes(bytes)) = guest_file::read(&path, tree_dir) else {
            continue;
        };
        *total += bytes.len() as u64;
        if *total > MAX_ARCHIVE_BYTES {
            return Err(TestBinariesError::TooLarge);
        }
        append(builder, &format!("doc/{}", doc.name), &bytes, 0o755)?;
        kept.push(doc);
    }
    index.doc_dir = library.package_dir.clone();
    index.doc_crate = krate;
    index.doc_tests = kept;
    Ok(())
}

fn append(
    builder: &mut tar::Builder<Vec<u8>>,
    name: &str,
    bytes: &[u8],
    mode: u32,
) -> Result<(), TestBinariesError> {
    let mut header = tar::Header::new_gnu();
    header.set_size(bytes.len() as u64);
    header.set_mode(mode);
    header.set_entry_type(tar::EntryType::Regular);
    builder
        .append_data(&mut header, name, bytes)
        .map_err(TestBinariesError::Archive)
}

/// Fetches `artifact` (its sha256 checked), unpacks it into `dir` and writes the script that
/// runs it, or only what `only` selects; returns the script's path.
pub async fn unpack(
    ctx: &JobContext,
    artifact: &ArtifactRef,
    only: Option<&Selection>,
    dir: &Path,
) -> Result<PathBuf, TestBinariesError> {
    if artifact.bytes > MAX_ARCHIVE_BYTES {
        return Err(TestBinariesError::TooLarge);
    }
    if let Some(selection) = only {
        selection.check()?;
    }
    let bytes = fetch(ctx, artifact).await?;
    let dir = dir.to_owned();
    let only = only.cloned();
    tokio::task::spawn_blocking(move || unpack_into(&bytes, only.as_ref(), &dir))
        .await
        .map_err(|e| TestBinariesError::Archive(std::io::Error::other(e)))?
}

/// The archive last fetched, by its sha256: every mutant of a run asks for the same one, and
/// bytes in this process's memory are out of every guest's reach (a copy on disk would not be).
static LAST_FETCHED: std::sync::Mutex<Option<(String, bytes::Bytes)>> = std::sync::Mutex::new(None);

async fn fetch(
    ctx: &JobContext,
    artifact: &ArtifactRef,
) -> Result<bytes::Bytes, TestBinariesError> {
    let sha256 = artifact.sha256.to_ascii_lowercase();
    if let Ok(last) = LAST_FETCHED.lock()
        && let Some((known, bytes)) = last.as_ref()
        && *known == sha256
    {
        return Ok(bytes.clone());
    }
    let bytes = read_artifact(ctx.store.as_ref(), artifact)
        .await
        .map_err(|e| TestBinariesError::Fetch(Box::new(e)))?;
    if let Ok(mut last) = LAST_FETCHED.lock() {
        *last = Some((sha256, bytes.clone()));
    }
    Ok(bytes)
}

fn unpack_into(
    archive: &[u8],
    only: Option<&Selection>,
    dir: &Path,
) -> Result<PathBuf, TestBinariesError> {
    let io = TestBinariesError::Archive;
    std::fs::create_dir_all(dir.join("bin")).map_err(io)?;
    std::fs::create_dir_all(dir.join("doc")).map_err(io)?;
    let mut index = None;
    let mut files = Vec::new();
    let mut docs = Vec::new();
    let mut total = 0u64;
    for entry in tar::Archive::new(archive).entries().map_err(io)? {
        let mut entry = entry.map_err(io)?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        if entry.header().entry_type() != tar::EntryType::Regular {
            return Err(TestBinariesError::Entry(name));
        }
        total += entry.size();
        if total > MAX_ARCHIVE_BYTES {
            return Err(TestBinariesError::TooLarge);
        }
        let mut bytes = Vec::with_capacity(entry.size() as usize);
        entry.read_to_end(&mut bytes).map_err(io)?;
        if name == "index.json" {
            index = Some(Index::read(&bytes)?);
            continue;
        }
        let (kind, file) = name
            .split_once('/')
            .filter(|(kind, file)| matches!(*kind, "bin" | "doc") && check_file(file).is_ok())
            .ok_or_else(|| TestBinariesError::Entry(name.clone()))?;
        let path = dir.join(kind).join(file);
        std::fs::write(&path, &bytes).map_err(io)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).map_err(io)?;
        match kind {
            "bin" => files.push(file.to_owned()),
            _ => docs.push(file.to_owned()),
        }
    }
    let index = index.ok_or_else(|| TestBinariesError::Missing("index.json".into()))?;
    if let Some(binary) = index.binaries.iter().find(|b| !files.contains(&b.file)) {
        return Err(TestBinariesError::Missing(binary.file.clone()));
    }
    if let Some(doc) = index.doc_tests.iter().find(|d| !docs.contains(&d.name)) {
        return Err(TestBinariesError::Missing(doc.name.clone()));
    }
    let script = dir.join("run.sh");
    std::fs::write(&script, test_binaries::script(&index, only)).map_err(io)?;
    Ok(script)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_archive_with_a_path_outside_bin_is_refused() {
        // The tar crate will not write `..` itself: the name goes into the header by hand.
        let mut header = tar::Header::new_old();
        let name = b"bin/../../evil";
        header.as_old_mut().name[..name.len()].copy_from_slice(name);
        header.set_size(1);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_cksum();
        let mut builder = tar::Builder::new(Vec::new());
        builder.append(&header, &b"x"[..]).unwrap();
        let archive = builder.into_inner().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let err = unpack_into(&archive, None, dir.path()).unwrap_err();
        assert!(matches!(err, TestBinariesError::Entry(name) if name == "bin/../../evil"));
    }

    #[test]
    fn an_index_naming_a_binary_the_archive_lacks_is_refused() {
        let mut builder = tar::Builder::new(Vec::new());
        let index = Index::new(vec![Binary {
            file: "pager-1".into(),
            package_dir: String::new(),
            message: r#"{"executable":"pager-1"}"#.into(),
        }]);
        append(
            &mut builder,
            "index.json",
            &serde_json::to_vec(&index).unwrap(),
            0o644,
        )
        .unwrap();
        let archive = builder.into_inner().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let err = unpack_into(&archive, None, dir.path()).unwrap_err();
        assert!(matches!(err, TestBinariesError::Missing(file) if file == "pager-1"));
    }

    #[test]
    fn a_build_naming_an_executable_outside_the_tree_keeps_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (tree, logs) = (dir.path().join("tree"), dir.path().join("logs"));
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::create_dir_all(&logs).unwrap();
        let line = r#"{"reason":"compiler-artifact","package_id":"p","manifest_path":"/work/tree/Cargo.toml","target":{"kind":["lib"],"name":"p"},"profile":{"test":true},"executable":"/etc/passwd"}"#;
        std::fs::write(logs.join("stdout.log"), line).unwrap();
        let err = pack(&logs.join("stdout.log"), &logs, &tree, "/work/tree").unwrap_err();
        assert!(matches!(err, TestBinariesError::Outside { path } if path == "/etc/passwd"));
        // A link inside the tree to a host file is refused too.
        std::fs::create_dir_all(tree.join("target")).unwrap();
        std::os::unix::fs::symlink("/etc", tree.join("target/debug")).unwrap();
        let line = line.replace("/etc/passwd", "/work/tree/target/debug/passwd");
        std::fs::write(logs.join("stdout.log"), line).unwrap();
        let err = pack(&logs.join("stdout.log"), &logs, &tree, "/work/tree").unwrap_err();
        assert!(matches!(err, TestBinariesError::Refused { .. }), "{err}");
    }
}
