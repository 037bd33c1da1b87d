//! unittest through the adapter Assay ships (`{adapter}`), which writes `assay.unittest/v1`
//! with import errors as collection errors, and lists cases as `assay.unittest.cases/v1`.

use super::SourceLanguage;
use super::pytest::is_python_test_file;
use super::{ListingFormat, ReportFormat, Runner, SuiteCases, split_path};
use crate::outcome::CaseResult;
use crate::suite_case::SuiteCase;

/// The unittest runner, through the adapter Assay ships.
pub struct Unittest;

impl Runner for Unittest {
    fn name(&self) -> &'static str {
        "unittest"
    }

    fn default_command(&self) -> &'static [&'static str] {
        &["python3"]
    }

    fn is_test_file(&self, path: &str) -> bool {
        is_python_test_file(path)
    }

    fn is_test_module(&self, path: &str) -> bool {
        let (file_name, _) = split_path(path);
        file_name.ends_with(".py") && file_name.starts_with("test")
    }

    fn command(&self, prefix: &[String], files: &[String], names: &[String]) -> Vec<String> {
        let mut argv = prefix.to_vec();
        argv.extend(["{adapter}", "--report", "{report}"].map(String::from));
        for name in names {
            argv.push("--name".into());
            argv.push(name.clone());
        }
        argv.extend(files.iter().cloned());
        argv
    }

    fn report_format(&self) -> ReportFormat {
        ReportFormat::UnittestJson
    }

    /// The adapter selects by name prefix.
    fn selects_by_prefix(&self) -> bool {
        true
    }

    /// The fallback needs nothing installed but Python, so it claims every tree.
    fn detect(&self, _tree: &mut super::TreeFiles<'_>) -> bool {
        true
    }

    fn suite_cases(&self, prefix: &[String]) -> SuiteCases {
        let mut command = prefix.to_vec();
        command.extend(["{adapter}", "--collect", "--report", "{report}"].map(String::from));
        SuiteCases::Listed {
            command,
            format: ListingFormat::UnittestCases,
        }
    }

    /// A module's tests share class attributes, `setUpClass` and module state, which
    /// `python -m unittest` keeps in one process: one process per test changes the outcome of
    /// an order-dependent suite (a test that reads what an earlier one set) and costs a Python
    /// start-up per test. So cases run in batches, a module's cases in one session in their
    /// order; the batch's output is then shared by its cases.
    fn batches_by_default(&self) -> bool {
        true
    }

    fn session_group(&self, case: &SuiteCase) -> Option<String> {
        Some(case.file.clone())
    }

    /// The adapter's `--partition`: each batch discovers the suite, runs its part's modules
    /// and records the whole collection in its report's `collected`.
    fn partition_command(
        &self,
        prefix: &[String],
        part: usize,
        parts: usize,
    ) -> Option<Vec<String>> {
        let mut argv = prefix.to_vec();
        argv.extend(["{adapter}", "--report", "{report}", "--partition"].map(String::from));
        argv.extend([part.to_string(), parts.max(1).to_string()]);
        Some(argv)
    }

    /// The dotted id unittest prints (`tests.test_pages.PageTests.test_full_pages`).
    fn native_id(&self, result: &CaseResult) -> String {
        if result.suite.is_empty() {
            return result.identity();
        }
        let variant = result
            .variant
            .as_ref()
            .map_or_else(String::new, |v| format!("[{v}]"));
        format!("{}.{}{variant}", result.suite, result.name)
    }

    fn language(&self) -> Option<SourceLanguage> {
        Some(SourceLanguage::Python)
    }

    fn shares_a_process_across_cases(&self) -> bool {
        true
    }

    /// A module's cases share one session, so a module is partitioned whole.
    fn partition_key<'a>(&self, case: &'a SuiteCase) -> &'a str {
        &case.file
    }

    fn suite_command(&self, prefix: &[String], cases: &[&SuiteCase]) -> Vec<String> {
        let mut argv = prefix.to_vec();
        argv.extend(["{adapter}", "--report", "{report}"].map(String::from));
        for case in cases {
            argv.push("--id".into());
            argv.push(case.id.clone());
        }
        argv
    }
}
