//! The documented exit codes, and the one place errors are mapped to them.

use crate::console;
use assay_common::evidence::Evidence;
use assay_common::verdict::Verdict;

/// An error on its way out of the binary, with the exit code it maps to.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub error: anyhow::Error,
}

pub const USAGE: u8 = 2;
pub const INFRASTRUCTURE: u8 = 3;
pub const INTERNAL: u8 = 70;
/// Ctrl-C (SIGINT) stopped the command: 128 + 2, as shells report it.
pub const INTERRUPTED: u8 = 130;
/// SIGTERM (a CI cancel) stopped the command, cleaned up as for SIGINT: 128 + 15.
pub const TERMINATED: u8 = 143;

impl Failure {
    pub fn usage(error: anyhow::Error) -> Self {
        Self { code: USAGE, error }
    }
    pub fn infrastructure(error: anyhow::Error) -> Self {
        Self {
            code: INFRASTRUCTURE,
            error,
        }
    }
    pub fn internal(error: anyhow::Error) -> Self {
        Self {
            code: INTERNAL,
            error,
        }
    }
}

/// The error and its causes on one line; a cause its parent already quotes is not repeated, and
/// libgit2's classification (`; class=Reference (4); code=NotFound (-3)`), which tells a
/// reader nothing, is left off.
pub fn one_line(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let mut cause = cause.to_string();
        if let Some(noise) = cause.find("; class=") {
            cause.truncate(noise);
        }
        if text.contains(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}

/// Classifies an `anyhow` result by the exit code its error maps to.
pub trait ResultExt<T> {
    fn usage(self) -> Result<T, Failure>;
    fn infrastructure(self) -> Result<T, Failure>;
    fn internal(self) -> Result<T, Failure>;
}

impl<T> ResultExt<T> for anyhow::Result<T> {
    fn usage(self) -> Result<T, Failure> {
        self.map_err(Failure::usage)
    }
    fn infrastructure(self) -> Result<T, Failure> {
        self.map_err(Failure::infrastructure)
    }
    fn internal(self) -> Result<T, Failure> {
        self.map_err(Failure::internal)
    }
}

/// 0 proven, 1 refuted, 3 when infrastructure kept a verdict from being reached, else 4.
pub fn of_proof(evidence: &Evidence) -> u8 {
    match evidence.verdict {
        Verdict::Proven => 0,
        Verdict::Refuted => 1,
        Verdict::Unverified | Verdict::Unstable => {
            if let Some(failure) = console::infrastructure_failure(evidence) {
                errln!("error: infrastructure failure: {failure}");
                3
            } else {
                4
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libgit2s_class_and_code_are_left_off_the_error_line() {
        let missing = tempfile::tempdir().expect("temp dir").path().join("pager");
        let Err(source) = git2::Repository::open(&missing) else {
            panic!("a repository at {}", missing.display());
        };
        assert!(source.to_string().contains("; class="), "{source}");
        let error = anyhow::Error::new(source).context("failed to open the repository");
        let line = one_line(&error);
        assert!(
            line.starts_with("failed to open the repository: "),
            "{line}"
        );
        assert!(
            !line.contains("class=") && !line.contains("code="),
            "{line}"
        );
    }
}
