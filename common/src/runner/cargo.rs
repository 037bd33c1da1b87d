//! Rust through cargo: `cargo nextest run` with its JUnit report where cargo-nextest is
//! installed, `cargo test` with libtest's own output otherwise (see [`crate::report::libtest`]
//! for both). Tests are named as cargo names them, `tests::counts_pages`, and attributed to
//! their test binary (`pager`, `pager::api`); selection is libtest's `--exact`, which takes
//! names as plain strings, so no name needs quoting.

use super::{ReportFormat, Runner, SuiteCases, TreeFiles, split_path, strings};
use crate::criteria::{Criterion, CriterionError};
use crate::suite_case::SuiteCase;

/// The cargo runner: cargo-nextest where installed, `cargo test` otherwise.
pub struct Cargo;

/// The nextest profile Assay defines in its tool config (`{nextest_config}`): no retries, no
/// fail-fast, and the JUnit report at the job's private `{report}` path.
pub const NEXTEST_PROFILE: &str = "assay";

/// The tool config the worker writes for `{nextest_config}`, with the JUnit report at
/// `report_path`. A repository's own `.config/nextest.toml` may redefine the profile; a report
/// it sends elsewhere is then missing, which names no pass.
pub fn nextest_config(report_path: &str) -> String {
    let quoted: String = report_path
        .chars()
        .flat_map(|c| match c {
            '"' => vec!['\\', '"'],
            '\\' => vec!['\\', '\\'],
            c => vec![c],
        })
        .collect();
    format!(
        "[profile.{NEXTEST_PROFILE}]\nretries = 0\nfail-fast = false\n\n[profile.{NEXTEST_PROFILE}.junit]\npath = \"{quoted}\"\n"
    )
}

/// Whether `prefix` runs cargo-nextest (`cargo nextest run`) rather than `cargo test`.
pub fn runs_nextest(prefix: &[String]) -> bool {
    prefix.iter().any(|word| word == "nextest")
}

impl Runner for Cargo {
    fn name(&self) -> &'static str {
        "cargo"
    }

    fn language(&self) -> Option<super::SourceLanguage> {
        Some(super::SourceLanguage::Rust)
    }

    /// Jobs build offline: the host pins and fetches the dependencies first.
    fn pins_dependencies_on_host(&self) -> bool {
        true
    }

    fn dependency_archive(&self) -> Option<crate::dependency_archive::DependencyKind> {
        Some(crate::dependency_archive::DependencyKind::Cargo)
    }

    fn default_command(&self) -> &'static [&'static str] {
        &["cargo", "test"]
    }

    /// `cargo llvm-cov` where the tests run; where it is not installed the coverage run says
    /// so and nothing is measured.
    fn coverage(&self) -> Option<super::CoverageTool> {
        Some(super::CoverageTool::CargoLlvmCov)
    }

    fn default_command_where(&self, installed: &dyn Fn(&str) -> bool) -> Vec<String> {
        if installed("cargo-nextest") {
            strings(&["cargo", "nextest", "run"])
        } else {
            strings(self.default_command())
        }
    }

    /// Integration tests, benches and examples (`tests/`, `benches/`, `examples/` of any
    /// member) and their fixtures. Unit tests live inside product files, so a change to them
    /// is a product change the base tree does not take.
    fn is_test_file(&self, path: &str) -> bool {
        let (_, mut dirs) = split_path(path);
        dirs.any(|dir| matches!(dir, "tests" | "benches" | "testdata"))
    }

    /// An integration test crate: `tests/NAME.rs` or `tests/NAME/main.rs`.
    fn is_test_module(&self, path: &str) -> bool {
        let parts: Vec<&str> = path.split('/').collect();
        match parts.as_slice() {
            [.., "tests", file] => file.ends_with(".rs"),
            [.., "tests", _, "main.rs"] => true,
            _ => false,
        }
    }

    /// The whole workspace runs (`files` do not narrow it: a unit test's file is a product
    /// file), narrowed to `names` by libtest's `--exact`, which every binary and the doc tests
    /// receive.
    fn command(&self, prefix: &[String], _files: &[String], names: &[String]) -> Vec<String> {
        let mut argv = prefix.to_vec();
        argv.push("--no-fail-fast".into());
        if runs_nextest(prefix) {
            argv.extend(
                [
                    "--retries",
                    "0",
                    "--tool-config-file",
                    "assay:{nextest_config}",
                    "--profile",
                    NEXTEST_PROFILE,
                    // Cargo's messages on stdout say what failed when a build leaves no report.
                    "--cargo-message-format",
                    "json",
                ]
                .map(String::from),
            );
        } else {
            argv.push("--message-format=json".into());
        }
        if !names.is_empty() {
            argv.extend(["--", "--exact"].map(String::from));
            argv.extend(names.iter().cloned());
        }
        argv
    }

    fn report_format(&self) -> ReportFormat {
        ReportFormat::CargoTestOutput
    }

    fn report_format_for(&self, prefix: &[String]) -> ReportFormat {
        if runs_nextest(prefix) {
            ReportFormat::NextestJunit
        } else {
            ReportFormat::CargoTestOutput
        }
    }

    /// Rust test paths (`tests::counts_pages`) are names, not qualified selectors.
    fn parse_criteria(&self, texts: &[String]) -> Result<Vec<Criterion>, CriterionError> {
        crate::criteria::parse_rust_path_criteria(texts)
    }

    /// A `Cargo.toml` at the root.
    fn detect(&self, tree: &mut TreeFiles<'_>) -> bool {
        tree.has("Cargo.toml")
    }

    /// `cargo test -- --list` prints names without their binaries, so cases cannot be listed
    /// apart; the suite is one case, judged by the report.
    fn suite_cases(&self, _prefix: &[String]) -> SuiteCases {
        SuiteCases::WholeCommand(crate::suite_case::CaseScope::Report)
    }

    fn suite_command(&self, prefix: &[String], _cases: &[&SuiteCase]) -> Vec<String> {
        self.command(prefix, &[], &[])
    }

    fn suite_uncacheable(&self) -> Option<&'static str> {
        Some("its one case is the whole workspace's run")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libtest_runs_the_workspace_with_exact_names_unquoted() {
        let names = strings(&["tests::counts_pages", "pages_(a|b)*"]);
        assert_eq!(
            Cargo.command(&strings(&["cargo", "test"]), &[], &names),
            strings(&[
                "cargo",
                "test",
                "--no-fail-fast",
                "--message-format=json",
                "--",
                "--exact",
                "tests::counts_pages",
                "pages_(a|b)*"
            ])
        );
        assert_eq!(
            Cargo.report_format_for(&strings(&["cargo", "test"])),
            ReportFormat::CargoTestOutput
        );
    }

    #[test]
    fn nextest_writes_junit_through_assays_profile() {
        let prefix = Cargo.default_command_where(&|program| program == "cargo-nextest");
        assert_eq!(prefix, strings(&["cargo", "nextest", "run"]));
        let argv = Cargo.command(&prefix, &[], &strings(&["tests::a"]));
        assert!(
            argv.contains(&"assay:{nextest_config}".to_string()),
            "{argv:?}"
        );
        assert_eq!(
            argv[argv.len() - 3..],
            strings(&["--", "--exact", "tests::a"])
        );
        assert_eq!(Cargo.report_format_for(&prefix), ReportFormat::NextestJunit);
        assert_eq!(
            Cargo.default_command_where(&|_| false),
            strings(&["cargo", "test"])
        );
        assert_eq!(
            nextest_config("/s/pri\"v\\ate/report"),
            "[profile.assay]\nretries = 0\nfail-fast = false\n\n[profile.assay.junit]\npath = \"/s/pri\\\"v\\\\ate/report\"\n"
        );
    }

    #[test]
    fn integration_tests_are_test_files_and_unit_tests_live_in_the_product() {
        assert!(Cargo.is_test_file("tests/api.rs"));
        assert!(Cargo.is_test_file("crates/pager/tests/fixtures/page.json"));
        assert!(Cargo.is_test_module("crates/pager/tests/api.rs"));
        assert!(Cargo.is_test_module("tests/api/main.rs"));
        assert!(!Cargo.is_test_module("tests/fixtures/page.json"));
        assert!(!Cargo.is_test_file("src/lib.rs"));
    }
}
