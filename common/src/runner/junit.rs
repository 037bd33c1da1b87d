//! The generic JUnit runner: an explicit command, unchanged, that writes one JUnit XML file
//! inside the tree (`--test-report junit:RELATIVE/PATH.xml`).

use super::{ReportFormat, Runner, SuiteCases, split_path};
use crate::suite_case::{CaseScope, SuiteCase};

/// The generic runner: an explicit command that writes one JUnit XML file.
pub struct Junit;

impl Runner for Junit {
    fn name(&self) -> &'static str {
        "junit"
    }

    /// Its report is wherever the command writes it (`--test-report junit:PATH`).
    fn report_is_configured(&self) -> bool {
        true
    }

    fn default_command(&self) -> &'static [&'static str] {
        &[]
    }

    /// A JUnit project's layout is the build tool's.
    fn is_test_file(&self, path: &str) -> bool {
        let (file_name, mut dirs) = split_path(path);
        let in_test_dir = dirs.any(|dir| matches!(dir, "test" | "tests" | "spec"));
        in_test_dir || file_name.ends_with("_spec.rb")
    }

    fn is_test_module(&self, _path: &str) -> bool {
        false
    }

    /// An explicit command has no portable selector: it runs as configured.
    fn command(&self, prefix: &[String], _files: &[String], _names: &[String]) -> Vec<String> {
        prefix.to_vec()
    }

    fn report_format(&self) -> ReportFormat {
        ReportFormat::JunitXml
    }

    fn suite_cases(&self, _prefix: &[String]) -> SuiteCases {
        SuiteCases::WholeCommand(CaseScope::Report)
    }

    fn suite_command(&self, prefix: &[String], _cases: &[&SuiteCase]) -> Vec<String> {
        prefix.to_vec()
    }

    fn suite_uncacheable(&self) -> Option<&'static str> {
        Some("its one case is the whole command, judged by its exit status")
    }
}
