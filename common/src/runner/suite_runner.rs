//! The runner of a suite as `assay test` knows it: one of the proof engine's runners, or a bare
//! command ([`Command`]), a runner like the others whose one case is the whole command, judged
//! by its exit status.

use super::{ReportFormat, Runner, RunnerKind, SuiteCases};
use crate::suite_case::{CaseScope, SuiteCase};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// A runner as `assay test` knows it: one of the proof engine's, or a bare command. Written
/// as its name (`pytest`, `command`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SuiteRunner {
    /// One of the proof engine's runners (`pytest`, `cargo`).
    Kind(RunnerKind),
    /// `--runner command`: one case judged by its exit status; counts and coverage come from
    /// its output through the summary patterns.
    Command,
}

impl fmt::Display for SuiteRunner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Kind(kind) => kind.fmt(f),
            Self::Command => f.write_str("command"),
        }
    }
}

impl FromStr for SuiteRunner {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "command" {
            return Ok(Self::Command);
        }
        s.parse::<RunnerKind>()
            .map(Self::Kind)
            .map_err(|e| format!("{e}, or command"))
    }
}

impl Serialize for SuiteRunner {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SuiteRunner {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

impl SuiteRunner {
    /// This runner's conventions.
    pub fn runner(self) -> &'static dyn Runner {
        match self {
            Self::Kind(kind) => kind.runner(),
            Self::Command => &Command,
        }
    }

    /// Whether the suite's jobs write the report configured with the command
    /// (`--test-report`), not the runner's own.
    pub fn takes_a_report_option(self) -> bool {
        self.runner().report_is_configured()
    }
}

/// `--runner command`: one case, the whole command, judged by its exit status; counts and
/// coverage come from its output through the summary patterns.
pub struct Command;

impl Runner for Command {
    fn name(&self) -> &'static str {
        "command"
    }

    fn default_command(&self) -> &'static [&'static str] {
        &[]
    }

    fn is_test_file(&self, _path: &str) -> bool {
        false
    }

    fn is_test_module(&self, _path: &str) -> bool {
        false
    }

    fn command(&self, prefix: &[String], _files: &[String], _names: &[String]) -> Vec<String> {
        prefix.to_vec()
    }

    /// Nothing is parsed: the scratch report stays absent and the exit status judges.
    fn report_format(&self) -> ReportFormat {
        ReportFormat::JunitXml
    }

    fn suite_cases(&self, _prefix: &[String]) -> SuiteCases {
        SuiteCases::WholeCommand(CaseScope::ExitStatus)
    }

    fn suite_command(&self, prefix: &[String], _cases: &[&SuiteCase]) -> Vec<String> {
        prefix.to_vec()
    }

    fn suite_uncacheable(&self) -> Option<&'static str> {
        Some("its one case is the whole command, judged by its exit status")
    }

    fn counts_from_output(&self) -> bool {
        true
    }
}
