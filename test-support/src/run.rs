//! One run of a command under test: its exit code, output and the JSON document it wrote.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The result of one `assay` run.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub evidence: Option<serde_json::Value>,
}

impl Run {
    pub fn criterion(&self, id: &str) -> &serde_json::Value {
        let evidence = self.evidence.as_ref().expect("evidence written");
        evidence["criteria"]
            .as_array()
            .expect("criteria")
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("criterion {id} in {evidence:#}"))
    }

    pub fn verdict_of(&self, id: &str) -> String {
        self.criterion(id)["verdict"]
            .as_str()
            .expect("verdict")
            .to_owned()
    }

    pub fn explain(&self) -> String {
        format!(
            "exit {}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `command` to its end; `json` is the document it was asked to write, read when it
/// exists.
pub fn run(mut command: Command, json: Option<PathBuf>) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = command.output().expect("assay runs");
    let evidence = json.filter(|p| p.is_file()).map(|p| {
        serde_json::from_slice(&std::fs::read(p).expect("read evidence")).expect("evidence is JSON")
    });
    Run {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        evidence,
    }
}
