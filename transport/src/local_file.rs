//! Opening a local file that someone else may have placed: a regular file only, never through
//! a final symlink, and never blocking (a FIFO or a device at the path is refused, not opened
//! for a read that waits forever).

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::Path;

/// What was found at a path instead of a regular file.
pub fn kind_of(file_type: std::fs::FileType) -> &'static str {
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_symlink() {
        "a symlink"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() || file_type.is_block_device() {
        "a device"
    } else if file_type.is_file() {
        "a regular file"
    } else {
        "an unknown kind of file"
    }
}

/// Opens `path` for reading if it is a regular file: `O_NOFOLLOW` (a symlink there fails) and
/// `O_NONBLOCK` (a FIFO opens at once instead of waiting for a writer), then `fstat` on the
/// opened descriptor, so what is checked is what is read. Anything else is an
/// [`io::ErrorKind::InvalidInput`] error saying what it is.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is a symlink, not a regular file", path.display()),
                )
            } else {
                e
            }
        })?;
    let file_type = file.metadata()?.file_type();
    if !file_type.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is {}, not a regular file",
                path.display(),
                kind_of(file_type)
            ),
        ));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_regular_file_opens_and_a_fifo_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ok.bin");
        std::fs::write(&file, b"ok").unwrap();
        assert!(open_regular(&file).is_ok());
        let fifo = dir.path().join("queue");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let err = open_regular(&fifo).unwrap_err();
        assert!(err.to_string().contains("is a FIFO"), "{err}");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let err = open_regular(&link).unwrap_err();
        assert!(err.to_string().contains("is a symlink"), "{err}");
        let err = open_regular(dir.path()).unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
        let err = open_regular(Path::new("/dev/null")).unwrap_err();
        assert!(err.to_string().contains("is a device"), "{err}");
    }
}
