//! The fleet-wide halt: while it is set, no new job is admitted anywhere; running jobs finish.
//! Embedded mode keeps it as a file in the state directory; the fleet keeps the same reason
//! under a KV key and honours it the same way, through [`AdmissionGate`].

use std::path::{Path, PathBuf};

/// Asked before each job is admitted: `Some(reason)` stops admission.
pub trait AdmissionGate: Send + Sync {
    /// Why admission must stop now; `None`: admit.
    fn stop_reason(&self) -> Option<String>;
}

/// Why a halt could not be set or lifted.
#[derive(Debug, thiserror::Error)]
pub enum HaltError {
    /// The halt file or its directory could not be written, or the file removed.
    #[error("failed to {action} the halt file {path}")]
    Io {
        /// What was being done (`write`, `remove`, `create the directory of`).
        action: &'static str,
        /// The halt file.
        path: PathBuf,
        /// The I/O failure.
        #[source]
        source: std::io::Error,
    },
    /// `assay halt` without a reason.
    #[error("a halt needs a reason (hint: assay halt --reason \"deploy freeze\")")]
    NoReason,
}

/// The halt file of a state directory.
#[derive(Clone, Debug)]
pub struct HaltFile {
    path: PathBuf,
}

impl HaltFile {
    /// The halt file of the state directory `state_dir`.
    pub fn in_state_dir(state_dir: &Path) -> Self {
        Self {
            path: state_dir.join("halt"),
        }
    }

    /// Where the halt file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The reason, if halted. An unreadable halt file still halts: failing open would admit.
    pub fn reason(&self) -> Option<String> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => Some(text.trim().to_owned()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => Some(format!(
                "halt file {} is unreadable: {e}",
                self.path.display()
            )),
        }
    }

    /// Halts every run that reads this file, saying `reason`.
    pub fn set(&self, reason: &str) -> Result<(), HaltError> {
        if reason.trim().is_empty() {
            return Err(HaltError::NoReason);
        }
        let io = |action| {
            let path = self.path.clone();
            move |source| HaltError::Io {
                action,
                path,
                source,
            }
        };
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(io("create the directory of"))?;
        }
        std::fs::write(&self.path, format!("{}\n", reason.trim())).map_err(io("write"))
    }

    /// Clears the halt; `false` when none was set.
    pub fn clear(&self) -> Result<bool, HaltError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(HaltError::Io {
                action: "remove",
                path: self.path.clone(),
                source,
            }),
        }
    }
}

impl AdmissionGate for HaltFile {
    fn stop_reason(&self) -> Option<String> {
        self.reason()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_halt_is_set_read_and_cleared_through_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let halt = HaltFile::in_state_dir(&dir.path().join("state"));
        assert_eq!(halt.stop_reason(), None);
        halt.set("  invoice database migration  ").unwrap();
        assert_eq!(
            halt.stop_reason().as_deref(),
            Some("invoice database migration")
        );
        assert!(halt.clear().unwrap());
        assert!(!halt.clear().unwrap());
        assert_eq!(halt.stop_reason(), None);
        assert!(matches!(halt.set(" "), Err(HaltError::NoReason)));
    }
}
