//! Go: `go test -json` on stdout, selection with `-run` by test path, listing with
//! `go test -list`. Selection may run more than was named, never less; the report decides.

use super::{ListingFormat, ReportFormat, Runner, SuiteCases, TreeFiles, split_path};
use crate::suite_case::SuiteCase;
use std::collections::BTreeSet;

/// The Go runner: `go test -json`, selection with `-run`.
pub struct Go;

impl Runner for Go {
    fn name(&self) -> &'static str {
        "go"
    }

    fn default_command(&self) -> &'static [&'static str] {
        &["go", "test"]
    }

    fn dependency_archive(&self) -> Option<crate::dependency_archive::DependencyKind> {
        Some(crate::dependency_archive::DependencyKind::Go)
    }

    /// `go test -json` names a result's package where other runners name a file.
    fn native_id(&self, result: &crate::outcome::CaseResult) -> String {
        format!("{}.{}", result.file, result.name)
    }

    fn language(&self) -> Option<super::SourceLanguage> {
        Some(super::SourceLanguage::Go)
    }

    fn coverage(&self) -> Option<super::CoverageTool> {
        Some(super::CoverageTool::GoCoverProfile)
    }

    /// Its command names packages, not tests.
    fn reruns_named_tests(&self) -> bool {
        false
    }

    fn reports_tests_by_package(&self) -> bool {
        true
    }

    /// Go's own conventions: `_test.go` files and `testdata/` directories.
    fn is_test_file(&self, path: &str) -> bool {
        let (file_name, mut dirs) = split_path(path);
        file_name.ends_with("_test.go") || dirs.any(|dir| dir == "testdata")
    }

    fn is_test_module(&self, path: &str) -> bool {
        path.ends_with("_test.go")
    }

    fn command(&self, prefix: &[String], files: &[String], names: &[String]) -> Vec<String> {
        let mut argv = run_prefix(prefix);
        if let Some(pattern) = run_pattern(names) {
            argv.push("-run".into());
            argv.push(pattern);
        }
        argv.extend(packages(files));
        argv
    }

    fn report_format(&self) -> ReportFormat {
        ReportFormat::GoTestJson
    }

    fn detect(&self, tree: &mut TreeFiles<'_>) -> bool {
        tree.has("go.mod")
    }

    fn suite_cases(&self, prefix: &[String]) -> SuiteCases {
        let mut command = prefix.to_vec();
        command.extend(["-list", ".", "-vet=off", "./..."].map(String::from));
        SuiteCases::Listed {
            command,
            format: ListingFormat::GoTestList,
        }
    }

    /// The cases' packages, as the listing placed them, narrowed to their names.
    fn suite_command(&self, prefix: &[String], cases: &[&SuiteCase]) -> Vec<String> {
        let mut argv = run_prefix(prefix);
        let names: Vec<String> = cases.iter().map(|c| c.name.clone()).collect();
        if let Some(pattern) = run_pattern(&names) {
            argv.extend(["-run".into(), pattern]);
        }
        let mut packages: Vec<String> = Vec::new();
        for package in cases.iter().filter_map(|c| c.package.clone()) {
            if !packages.contains(&package) {
                packages.push(package);
            }
        }
        argv.extend(packages);
        argv
    }

    /// One `go test` run selects within the packages it names; a case of another package
    /// would bring all of that package's matching tests.
    fn may_share_a_job(&self, a: &SuiteCase, b: &SuiteCase) -> bool {
        a.package == b.package
    }
}

/// `-count=1`: a cached result is not a fresh execution. `-vet=off`: a vet finding is neither
/// a pass nor a failure of the named tests, and would hide them.
fn run_prefix(prefix: &[String]) -> Vec<String> {
    let mut argv = prefix.to_vec();
    argv.extend(["-json", "-count=1", "-vet=off"].map(String::from));
    argv
}

/// `go test` takes packages, not files: each test file's directory, as `./dir` (`.` for the
/// module root), deduplicated in first-seen order. No files means every package (`./...`).
pub fn packages(files: &[String]) -> Vec<String> {
    if files.is_empty() {
        return vec!["./...".into()];
    }
    let mut seen = BTreeSet::new();
    let mut packages = Vec::new();
    for file in files {
        let package = match file.rsplit_once('/') {
            Some((dir, _)) => format!("./{dir}"),
            None => ".".into(),
        };
        if seen.insert(package.clone()) {
            packages.push(package);
        }
    }
    packages
}

/// The `-run` pattern for `names` (`TestA`, `TestA/expired`), or `None` to run everything.
///
/// Go splits `-run` on a top-level `|` first and on `/` second, so `^TestA$/^x$|^y$` means
/// "(TestA/x) or (y)". Each level is therefore one group, `^(TestA|TestB)$/^(x|y)$`, whose `|`
/// sits inside parentheses where Go does not split. Level `k` lists every name's `k`-th element,
/// and only as many levels are given as the shallowest name has: a bare function name must run
/// all of its subtests. This over-selects (a cross product) but never drops a named test.
pub fn run_pattern(names: &[String]) -> Option<String> {
    let paths: Vec<Vec<&str>> = names
        .iter()
        .filter(|n| !n.is_empty())
        .map(|n| n.split('/').collect())
        .collect();
    let depth = paths.iter().map(Vec::len).min()?;
    let levels: Vec<String> = (0..depth)
        .map(|level| {
            let mut elements: Vec<&str> = Vec::new();
            for path in &paths {
                if !elements.contains(&path[level]) {
                    elements.push(path[level]);
                }
            }
            let alternatives: Vec<String> = elements.iter().map(|e| quote_meta(e)).collect();
            format!("^({})$", alternatives.join("|"))
        })
        .collect();
    Some(levels.join("/"))
}

/// Go's `regexp.QuoteMeta`.
fn quote_meta(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len());
    for c in text.chars() {
        if r"\.+*?()|[]{}^$".contains(c) {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn functions_are_anchored_alternatives() {
        assert_eq!(
            run_pattern(&names(&["TestA", "TestB"])).as_deref(),
            Some("^(TestA|TestB)$")
        );
        assert_eq!(run_pattern(&[]), None);
    }

    #[test]
    fn subtests_add_a_level_per_path_element() {
        assert_eq!(
            run_pattern(&names(&["TestA/expired"])).as_deref(),
            Some("^(TestA)$/^(expired)$")
        );
        assert_eq!(
            run_pattern(&names(&["TestA/expired", "TestA/at_the_limit"])).as_deref(),
            Some("^(TestA)$/^(expired|at_the_limit)$")
        );
    }

    #[test]
    fn a_bare_function_keeps_every_subtest_selected() {
        assert_eq!(
            run_pattern(&names(&["TestA/expired", "TestB"])).as_deref(),
            Some("^(TestA|TestB)$")
        );
    }

    #[test]
    fn regexp_metacharacters_in_subtest_names_are_quoted() {
        assert_eq!(
            run_pattern(&names(&["TestParse/a+b_(x)"])).as_deref(),
            Some(r"^(TestParse)$/^(a\+b_\(x\))$")
        );
    }

    #[test]
    fn packages_are_test_file_directories() {
        assert_eq!(
            packages(&names(&[
                "cache/a_test.go",
                "cache/b_test.go",
                "main_test.go"
            ])),
            names(&["./cache", "."])
        );
        assert_eq!(packages(&[]), names(&["./..."]));
    }
}
