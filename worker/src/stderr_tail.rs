//! Why a job left no report, in words a user can act on: the last lines of its stderr, and
//! whether they say the toolchain could not run the command at all (a program or a toolchain
//! missing, dependencies the sandbox cannot reach), which is the infrastructure's failure and
//! never the code under test's. Its first bytes too, where the go command prints the
//! compiler's errors that a Go report lacks.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// How many of the last non-empty lines are quoted.
const LINES: usize = 8;
/// How much of the end of the file is read: enough for [`LINES`] lines of a compiler.
const READ: u64 = 16 * 1024;
/// A quoted line longer than this is cut (a minified bundle's line, a guest's flood).
const LINE_CHARS: usize = 300;

/// The last lines of the stderr the worker captured at `path` (empty if there is none). The
/// file is the worker's own (the guest writes into it but cannot replace it); it is opened
/// without following a link all the same.
pub fn read(path: &Path) -> String {
    let Some(mut file) = open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if file
        .seek(SeekFrom::Start(len.saturating_sub(READ)))
        .is_err()
    {
        return String::new();
    }
    let mut bytes = Vec::new();
    if file.take(READ).read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    tail(&bytes)
}

/// The first `limit` bytes of the stderr the worker captured at `path` (empty if there is
/// none), opened as [`read`] opens it.
pub fn head(path: &Path, limit: u64) -> Vec<u8> {
    let Some(file) = open(path) else {
        return Vec::new();
    };
    let mut bytes = Vec::new();
    match file.take(limit).read_to_end(&mut bytes) {
        Ok(_) => bytes,
        Err(_) => Vec::new(),
    }
}

fn open(path: &Path) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()
}

/// The last [`LINES`] non-empty lines of `stderr`, each cut at [`LINE_CHARS`], without the
/// terminal's colour codes.
pub fn tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<String> = text
        .lines()
        .map(assay_common::report::printable)
        .map(|l| l.trim_end().to_owned())
        .filter(|l| !l.trim().is_empty())
        .collect();
    lines[lines.len().saturating_sub(LINES)..]
        .iter()
        .map(|l| match l.char_indices().nth(LINE_CHARS) {
            Some((cut, _)) => format!("{}…", &l[..cut]),
            None => l.clone(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether a command that exited `exit_code` with stderr ending in `tail` never got to run the
/// code under test because its toolchain could not: the shell's "not found" codes, the
/// confining tool failing to start the program, rustup without a toolchain, cargo without a
/// subcommand or reaching for the network it is denied, Go's module lookup off, a Python
/// without its test runner. Only ever asked of a run that left no report, so a test that
/// prints such a line and still reports is judged by its report.
pub fn toolchain_failure(exit_code: i32, tail: &str) -> bool {
    const SIGNS: [&str; 11] = [
        "bwrap: execvp",
        "rustup could not choose a version",
        "error: no such command:",
        "is not installed (hint",
        "toolchain is not installed",
        "attempting to make an HTTP request, but --offline was specified",
        "you're using offline mode",
        "Could not resolve host",
        "module lookup disabled by GOPROXY=off",
        "No module named pytest",
        "command not found",
    ];
    matches!(exit_code, 126 | 127) || SIGNS.iter().any(|sign| tail.contains(sign))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_lines_without_colour_or_blank_lines() {
        let mut stderr = String::new();
        for i in 0..20 {
            stderr.push_str(&format!("\u{1b}[1;31mline {i}\u{1b}[0m\n\n"));
        }
        let tail = tail(stderr.as_bytes());
        assert_eq!(tail.lines().count(), LINES);
        assert!(tail.starts_with("line 12\n"), "{tail}");
        assert!(tail.ends_with("line 19"), "{tail}");
        let long = "x".repeat(1000);
        assert_eq!(super::tail(long.as_bytes()).chars().count(), LINE_CHARS + 1);
    }

    #[test]
    fn a_missing_toolchain_is_told_from_a_failing_build() {
        for (exit, stderr) in [
            (
                1,
                "error: rustup could not choose a version of cargo to run, because one wasn't specified explicitly, and no default is configured.",
            ),
            (1, "bwrap: execvp cargo: No such file or directory"),
            (
                101,
                "error: failed to get `strsim` as a dependency of package `pager v0.1.0`\n\nCaused by:\n  attempting to make an HTTP request, but --offline was specified",
            ),
            (
                1,
                "app.go:3:8: example.com/greet@v1.0.0: module lookup disabled by GOPROXY=off",
            ),
            (1, "/usr/bin/python3: No module named pytest"),
            (127, "sh: 1: nextest: not found"),
        ] {
            assert!(toolchain_failure(exit, stderr), "{stderr}");
        }
        for (exit, stderr) in [
            (
                101,
                "error[E0308]: mismatched types\n --> src/lib.rs:2:5\nerror: could not compile `pager` (lib test) due to 1 previous error",
            ),
            (1, "FAIL\texample.com/app [build failed]"),
        ] {
            assert!(!toolchain_failure(exit, stderr), "{stderr}");
        }
    }

    #[test]
    fn reading_a_large_file_reads_only_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stderr.log");
        let mut text = "noise\n".repeat(100_000);
        text.push_str("error: could not compile `pager`\n");
        std::fs::write(&path, text).unwrap();
        assert!(read(&path).ends_with("error: could not compile `pager`"));
        assert_eq!(read(&dir.path().join("absent")), "");
        assert_eq!(head(&path, 12), b"noise\nnoise\n");
        assert!(head(&dir.path().join("absent"), 12).is_empty());
    }
}
