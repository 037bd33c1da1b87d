//! Vitest 4 with its JSON reporter at `{report}`, selection with `-t`.

use super::node::{files_of, is_js_test_file, is_js_test_name, name_pattern};
use super::{ReportFormat, Runner, SuiteCases, TreeFiles, split_path};
use crate::suite_case::SuiteCase;

/// The Vitest runner: its JSON reporter, selection with `-t`.
pub struct Vitest;

impl Runner for Vitest {
    fn name(&self) -> &'static str {
        "vitest"
    }

    fn default_command(&self) -> &'static [&'static str] {
        // `--no`: never install; `--offline`: never ask a registry, which a sandbox without a
        // network would wait on until the job's timeout.
        &["npx", "--no", "--offline", "vitest"]
    }

    fn is_test_file(&self, path: &str) -> bool {
        is_js_test_file(path)
    }

    fn is_test_module(&self, path: &str) -> bool {
        is_js_test_name(split_path(path).0)
    }

    fn command(&self, prefix: &[String], files: &[String], names: &[String]) -> Vec<String> {
        let mut argv = prefix.to_vec();
        argv.extend(["run", "--reporter=json", "--outputFile={report}"].map(String::from));
        if !names.is_empty() {
            argv.push("-t".into());
            argv.push(name_pattern(names));
        }
        argv.extend(files.iter().cloned());
        argv
    }
    /// Its tests are named by sentences: `test: "partial last page is counted"`.
    fn names_tests_by_sentences(&self) -> bool {
        true
    }

    fn report_format(&self) -> ReportFormat {
        ReportFormat::VitestJson
    }

    /// A `package.json` that mentions Vitest.
    fn detect(&self, tree: &mut TreeFiles<'_>) -> bool {
        tree.has("package.json") && tree.mentions("package.json", "vitest")
    }

    fn suite_unsupported(&self) -> Option<&'static str> {
        Some(
            "Vitest has no listing that names the cases its JSON report attributes \
             (hint: --runner command --test-command \"npx vitest run\")",
        )
    }

    fn suite_cases(&self, _prefix: &[String]) -> SuiteCases {
        SuiteCases::TestModules
    }

    fn suite_command(&self, prefix: &[String], cases: &[&SuiteCase]) -> Vec<String> {
        self.command(prefix, &files_of(cases), &[])
    }
}
