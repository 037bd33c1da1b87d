//! Reading a file the guest wrote (its report) without trusting the guest: the worker must
//! never be handed a host file through a link the test planted, block on a FIFO, or load an
//! unbounded file into memory.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Larger than any real test report; a bigger file is a run gone wrong, not evidence.
pub const MAX_REPORT_BYTES: u64 = 64 * 1024 * 1024;

/// What reading a file the guest wrote found, without following its links out of the tree.
#[derive(Debug, PartialEq, Eq)]
pub enum GuestFile {
    /// The guest wrote nothing there.
    Absent,
    /// The file's contents.
    Bytes(Vec<u8>),
    /// Something is there, but reading it would not read the guest's own file; says why.
    Refused(String),
}

/// Where a path's directory lies once links are resolved.
#[derive(Debug, PartialEq, Eq)]
pub enum Placement {
    /// The directory, links resolved, is inside `root`.
    Inside,
    /// The directory does not exist: there is nothing to read or remove.
    Missing,
    /// Says where it leads.
    Outside(String),
}

/// Whether `path`'s directory, links resolved, stays inside `root`.
pub fn placement(path: &Path, root: &Path) -> Placement {
    let Some(parent) = path.parent() else {
        return Placement::Outside("it has no directory".into());
    };
    let (Ok(parent), Ok(root)) = (parent.canonicalize(), root.canonicalize()) else {
        return Placement::Missing;
    };
    if parent.starts_with(&root) {
        Placement::Inside
    } else {
        Placement::Outside(format!(
            "its directory resolves to {}, outside the job's directory",
            parent.display()
        ))
    }
}

/// Reads the regular file at `path`, confined to `root`, following no link at its last
/// component. I/O errors other than absence are the worker's problem and are returned.
pub fn read(path: &Path, root: &Path) -> std::io::Result<GuestFile> {
    match placement(path, root) {
        Placement::Inside => {}
        Placement::Missing => return Ok(GuestFile::Absent),
        Placement::Outside(why) => return Ok(GuestFile::Refused(why)),
    }
    let opened = std::fs::OpenOptions::new()
        .read(true)
        // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(GuestFile::Absent),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Ok(GuestFile::Refused("it is a symbolic link".into()));
        }
        Err(e) => return Err(e),
    };
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Ok(GuestFile::Refused("it is not a regular file".into()));
    }
    if metadata.len() > MAX_REPORT_BYTES {
        return Ok(GuestFile::Refused(format!(
            "it has {} bytes, more than the {MAX_REPORT_BYTES} a report may have",
            metadata.len()
        )));
    }
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    // The cap holds even if the file grows after the check.
    file.take(MAX_REPORT_BYTES).read_to_end(&mut bytes)?;
    Ok(GuestFile::Bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_report_inside_its_directory_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("report.xml");
        std::fs::write(&report, "<testsuite/>").unwrap();
        assert_eq!(
            read(&report, dir.path()).unwrap(),
            GuestFile::Bytes(b"<testsuite/>".to_vec())
        );
        assert_eq!(
            read(&dir.path().join("none.xml"), dir.path()).unwrap(),
            GuestFile::Absent
        );
        assert_eq!(
            read(&dir.path().join("no/such/dir/r.xml"), dir.path()).unwrap(),
            GuestFile::Absent
        );
    }

    #[test]
    fn links_out_of_the_directory_and_fifos_are_refused() {
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("credentials");
        std::fs::write(&secret, "token").unwrap();
        let dir = tempfile::tempdir().unwrap();

        let linked = dir.path().join("report.xml");
        std::os::unix::fs::symlink(&secret, &linked).unwrap();
        assert!(
            matches!(read(&linked, dir.path()).unwrap(), GuestFile::Refused(why) if why.contains("symbolic link"))
        );

        std::os::unix::fs::symlink(outside.path(), dir.path().join("reports")).unwrap();
        let through = dir.path().join("reports/credentials");
        assert!(
            matches!(read(&through, dir.path()).unwrap(), GuestFile::Refused(why) if why.contains("outside"))
        );
        assert!(matches!(
            placement(&through, dir.path()),
            Placement::Outside(_)
        ));
        assert_eq!(placement(&linked, dir.path()), Placement::Inside);

        let fifo = dir.path().join("fifo.xml");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        assert!(
            matches!(read(&fifo, dir.path()).unwrap(), GuestFile::Refused(why) if why.contains("regular"))
        );
    }
}
