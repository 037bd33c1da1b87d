//! Manifest corpora: one interpreter process per `manifest.tsv` row, judged against the row's
//! expectation (see [`crate::manifest`]). The interpreter is the product; the corpus is tests.

use super::{ReportFormat, Runner, SuiteCases, split_path};
use crate::criteria::{Criterion, CriterionError};
use crate::manifest::ManifestJob;
use crate::suite_case::SuiteCase;

/// The manifest corpus runner: one interpreter process per `manifest.tsv` row.
pub struct Manifest;

impl Runner for Manifest {
    fn name(&self) -> &'static str {
        "manifest"
    }

    fn default_command(&self) -> &'static [&'static str] {
        &[]
    }

    fn is_test_file(&self, path: &str) -> bool {
        let (file_name, mut dirs) = split_path(path);
        file_name == "manifest.tsv"
            || dirs.any(|dir| {
                matches!(
                    dir,
                    "tests" | "test" | "corpus" | "conformance" | "testdata"
                )
            })
    }

    fn is_test_module(&self, path: &str) -> bool {
        split_path(path).0 == "manifest.tsv"
    }

    /// The worker appends each case's path to the interpreter, one process per case.
    fn command(&self, prefix: &[String], _files: &[String], _names: &[String]) -> Vec<String> {
        prefix.to_vec()
    }

    /// The runner's default holds no case; the engine fills it in.
    fn report_format(&self) -> ReportFormat {
        ReportFormat::ManifestCases(ManifestJob::default())
    }

    /// Cases are named by their paths in the corpus.
    fn parse_criteria(&self, texts: &[String]) -> Result<Vec<Criterion>, CriterionError> {
        crate::criteria::parse_case_path_criteria(texts)
    }

    fn runs_a_corpus(&self) -> bool {
        true
    }

    fn suite_cases(&self, _prefix: &[String]) -> SuiteCases {
        SuiteCases::CorpusRows
    }

    fn suite_command(&self, prefix: &[String], _cases: &[&SuiteCase]) -> Vec<String> {
        prefix.to_vec()
    }

    /// Each row runs in its own process with its own output.
    fn batches_by_default(&self) -> bool {
        true
    }

    fn suite_uncacheable(&self) -> Option<&'static str> {
        Some("manifest rows are judged from exit codes, which no pinned report can re-check")
    }
}
