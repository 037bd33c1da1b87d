//! `go test -json` event streams (test2json), read from the job's captured stdout. Tests and
//! subtests are identified by path; build failures are collection errors of their package,
//! never test failures, each with the compiler's first error for it where the run gives one:
//! in Go 1.24+'s `build-output` events, or before that on the job's stderr
//! ([`name_compiler_errors`]).

use crate::outcome::{CaseResult, CollectionError, Outcome, ReportOutcome, TestReport};
use crate::report::truncate;
use serde::Deserialize;
use std::collections::{BTreeSet, HashMap};

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Event {
    #[serde(default)]
    action: String,
    #[serde(default)]
    package: String,
    #[serde(default)]
    test: Option<String>,
    #[serde(default)]
    output: Option<String>,
    /// Go 1.24+: `build-output` / `build-fail` events name the package being built here.
    #[serde(default)]
    import_path: Option<String>,
    /// Go 1.24+: a package-level `fail` caused by a build failure names it here.
    #[serde(default)]
    failed_build: Option<String>,
}

struct OpenTest {
    package: String,
    path: String,
    output: Vec<String>,
}

/// What a re-run's package name ends with (` [assay-rerun]`, as Go writes ` [pkg.test]`): no
/// import path holds a space, so no package of a `go test` run is read as a re-run.
pub const RERUN_PACKAGE_SUFFIX: &str = " [assay-rerun]";

/// A build failure's message while no compiler error is known for its package.
pub const BUILD_FAILED: &str = "build failed";

/// How much of the start of a run's stderr is searched for compiler errors: the go command
/// prints them there before any package's `FAIL`, and test output goes to stdout under
/// `-json`, so the head holds them unless the guest floods it.
pub const STDERR_HEAD: usize = 64 * 1024;

/// A quoted compiler error longer than this is cut (a guest's flood, a generated file).
const ERROR_CHARS: usize = 300;

/// The outcome of a `go test -json` stream.
pub fn parse(bytes: &[u8]) -> ReportOutcome {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return ReportOutcome::Malformed("the go test output is not UTF-8".into());
    };
    if text.trim().is_empty() {
        return ReportOutcome::Missing;
    }
    let mut report = TestReport::default();
    let mut build_failed: BTreeSet<String> = BTreeSet::new();
    let mut open: HashMap<(String, String), OpenTest> = HashMap::new();
    let mut packages_seen: BTreeSet<String> = BTreeSet::new();
    let mut packages_done: BTreeSet<String> = BTreeSet::new();
    let mut with_subtests: BTreeSet<(String, String)> = BTreeSet::new();
    let mut finished: Vec<(String, String, Outcome, Option<String>)> = Vec::new();
    let mut first_errors: HashMap<String, String> = HashMap::new();

    for (number, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with('{') {
            // Before Go 1.24 the go command prints build failures as plain text on stdout.
            match plain_build_failure(line) {
                Some(package) => {
                    build_failed.insert(package);
                    continue;
                }
                None => {
                    return ReportOutcome::Malformed(format!(
                        "line {} is neither a test event nor a build failure: {line:?}",
                        number + 1
                    ));
                }
            }
        }
        let event: Event = match serde_json::from_str(line) {
            Ok(event) => event,
            Err(e) => {
                return ReportOutcome::Malformed(format!("line {}: {e}", number + 1));
            }
        };
        if event.action == "build-fail" {
            if let Some(path) = event.import_path.as_deref() {
                build_failed.insert(strip_test_variant(path).to_owned());
            }
            continue;
        }
        if event.action == "build-output" {
            if let (Some(path), Some(error)) = (
                event.import_path.as_deref(),
                event.output.as_deref().and_then(compiler_error),
            ) {
                first_errors
                    .entry(strip_test_variant(path).to_owned())
                    .or_insert(error);
            }
            continue;
        }
        if event.package.is_empty() {
            continue;
        }
        packages_seen.insert(event.package.clone());
        match event.test {
            None => match event.action.as_str() {
                "pass" | "fail" | "skip" => {
                    if let Some(failed) = event.failed_build.as_deref() {
                        build_failed.insert(strip_test_variant(failed).to_owned());
                    }
                    packages_done.insert(event.package);
                }
                _ => {}
            },
            Some(path) => {
                let key = (event.package.clone(), path.clone());
                match event.action.as_str() {
                    "run" => {
                        if let Some((parent, _)) = path.rsplit_once('/') {
                            with_subtests.insert((event.package.clone(), parent.to_owned()));
                        }
                        open.insert(
                            key,
                            OpenTest {
                                package: event.package,
                                path,
                                output: Vec::new(),
                            },
                        );
                    }
                    "output" => {
                        if let (Some(test), Some(output)) = (open.get_mut(&key), event.output) {
                            let trimmed = output.trim();
                            let framing = trimmed.starts_with("=== ")
                                || trimmed.starts_with("--- ")
                                || trimmed.is_empty();
                            if !framing {
                                test.output.push(trimmed.to_owned());
                            }
                        }
                    }
                    action @ ("pass" | "fail" | "skip") => {
                        let Some(test) = open.remove(&key) else {
                            return ReportOutcome::Inconsistent(format!(
                                "{path} in {} ends without having started",
                                event.package
                            ));
                        };
                        let outcome = match action {
                            "pass" => Outcome::Passed,
                            "fail" => Outcome::Failed,
                            _ => Outcome::Skipped,
                        };
                        let message = (!test.output.is_empty() && outcome != Outcome::Passed)
                            .then(|| truncate(test.output.join("\n")));
                        finished.push((test.package, test.path, outcome, message));
                    }
                    _ => {}
                }
            }
        }
    }

    if let Some(test) = open.values().next() {
        return ReportOutcome::Inconsistent(format!(
            "{} in {} started but never finished (the run was cut short)",
            test.path, test.package
        ));
    }
    if let Some(package) = packages_seen
        .iter()
        .find(|p| !packages_done.contains(*p) && !build_failed.contains(*p))
    {
        return ReportOutcome::Inconsistent(format!(
            "package {package} never reported its result (the run was cut short)"
        ));
    }
    for (package, path, outcome, message) in finished {
        // A parent that passed only says its subtests did; keeping it would let a function whose
        // subtests all skipped read as a named pass.
        if outcome == Outcome::Passed && with_subtests.contains(&(package.clone(), path.clone())) {
            continue;
        }
        // A run of prebuilt tests re-runs a failing executable at once under this package
        // name (`test_binaries::script`): its cases are the first run's re-runs.
        let (package, variant) = match package.strip_suffix(RERUN_PACKAGE_SUFFIX) {
            Some(package) => (
                package.to_owned(),
                Some(crate::report::libtest::RERUN_VARIANT.to_owned()),
            ),
            None => (package, None),
        };
        report.cases.push(CaseResult {
            file: package,
            suite: String::new(),
            name: without_duplicate_suffixes(&path),
            variant,
            outcome,
            message,
        });
    }
    report.collection_errors = build_failed
        .into_iter()
        .map(|file| CollectionError {
            message: first_errors
                .remove(&file)
                .unwrap_or_else(|| BUILD_FAILED.into()),
            file,
        })
        .collect();
    if report.cases.is_empty() && report.collection_errors.is_empty() {
        return ReportOutcome::ZeroTests;
    }
    ReportOutcome::Parsed(report)
}

/// Whether any of `report`'s build failures still waits for its compiler error, which only the
/// run's stderr can give ([`name_compiler_errors`]).
pub fn lacks_compiler_errors(report: &TestReport) -> bool {
    report
        .collection_errors
        .iter()
        .any(|e| e.message == BUILD_FAILED)
}

/// Gives each build failure of `report` that has no message yet the compiler's first error
/// from the run's `stderr`, where the go command before 1.24 prints it under a `# PACKAGE`
/// heading: the package's own, else (a package that failed because a dependency did) the
/// first of a package that is not itself a failure of the report. Only the first
/// [`STDERR_HEAD`] bytes are read, so the worker and a later re-read of the stored stderr agree.
pub fn name_compiler_errors(report: &mut TestReport, stderr: &[u8]) {
    if !lacks_compiler_errors(report) {
        return;
    }
    let errors = first_errors_by_heading(&stderr[..stderr.len().min(STDERR_HEAD)]);
    let failed: BTreeSet<String> = report
        .collection_errors
        .iter()
        .map(|e| e.file.clone())
        .collect();
    for error in &mut report.collection_errors {
        if error.message != BUILD_FAILED {
            continue;
        }
        let own = errors
            .iter()
            .find(|(package, _)| package.as_deref() == Some(error.file.as_str()));
        let dependency = || {
            errors
                .iter()
                .find(|(package, _)| package.as_ref().is_none_or(|p| !failed.contains(p)))
        };
        if let Some((_, line)) = own.or_else(dependency) {
            error.message = line.clone();
        }
    }
}

/// The first compiler error under each `# PACKAGE` heading of `stderr` (`None`: before any
/// heading), in order.
fn first_errors_by_heading(stderr: &[u8]) -> Vec<(Option<String>, String)> {
    let text = String::from_utf8_lossy(stderr);
    let mut errors: Vec<(Option<String>, String)> = Vec::new();
    let mut heading: Option<String> = None;
    for line in text.lines() {
        let line = crate::report::printable(line);
        if let Some(package) = line.strip_prefix("# ") {
            heading = Some(strip_test_variant(package.trim()).to_owned());
            continue;
        }
        if errors.iter().any(|(package, _)| *package == heading) {
            continue;
        }
        if let Some(error) = compiler_error(&line) {
            errors.push((heading.clone(), error));
        }
    }
    errors
}

/// `FILE:LINE:COL: MESSAGE` (or `FILE:LINE: MESSAGE`), as the go command prints a compiler or
/// vet error, trimmed and cut at [`ERROR_CHARS`]; `None` for any other line (`go: …`, a note).
fn compiler_error(line: &str) -> Option<String> {
    let line = crate::report::printable(line);
    let line = line.trim();
    let (place, message) = line.split_once(": ")?;
    let mut parts = place.split(':');
    let file = parts.next()?;
    let numbers: Vec<&str> = parts.collect();
    let position = matches!(numbers.len(), 1 | 2)
        && numbers
            .iter()
            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    if file.is_empty() || !position || message.trim().is_empty() {
        return None;
    }
    Some(match line.char_indices().nth(ERROR_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    })
}

/// `FAIL\texample.com/pager/broken [build failed]` (or `[setup failed]`) → the package.
fn plain_build_failure(line: &str) -> Option<String> {
    let rest = line.strip_prefix("FAIL")?.trim_start();
    let package = rest
        .strip_suffix("[build failed]")
        .or_else(|| rest.strip_suffix("[setup failed]"))?
        .trim();
    (!package.is_empty() && !package.contains(char::is_whitespace)).then(|| package.to_owned())
}

/// `example.com/pager/cache [example.com/pager/cache.test]` → `example.com/pager/cache`.
fn strip_test_variant(import_path: &str) -> &str {
    import_path.split(" [").next().unwrap_or(import_path)
}

/// Go makes repeated subtest names unique with `#01`, `#02`, …; dropping the suffix gives
/// them one identity, so a duplicated name is never a named pass.
fn without_duplicate_suffixes(path: &str) -> String {
    path.split('/')
        .map(|element| match element.rsplit_once('#') {
            Some((base, digits))
                if digits.len() >= 2 && digits.chars().all(|c| c.is_ascii_digit()) =>
            {
                base
            }
            _ => element,
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_go_build_failure_events_are_collection_errors() {
        let stream = r#"{"ImportPath":"example.com/pager/ledger [example.com/pager/ledger.test]","Action":"build-output","Output":"ledger_test.go:3: undefined: RoundedTotal\n"}
{"ImportPath":"example.com/pager/ledger [example.com/pager/ledger.test]","Action":"build-fail"}
{"Action":"start","Package":"example.com/pager/ledger"}
{"Action":"output","Package":"example.com/pager/ledger","Output":"FAIL\texample.com/pager/ledger [build failed]\n"}
{"Action":"fail","Package":"example.com/pager/ledger","Elapsed":0,"FailedBuild":"example.com/pager/ledger [example.com/pager/ledger.test]"}
"#;
        let ReportOutcome::Parsed(report) = parse(stream.as_bytes()) else {
            panic!("expected a parsed report")
        };
        assert!(report.cases.is_empty());
        assert_eq!(report.collection_errors[0].file, "example.com/pager/ledger");
        assert_eq!(
            report.collection_errors[0].message,
            "ledger_test.go:3: undefined: RoundedTotal"
        );
        assert!(!lacks_compiler_errors(&report));
    }

    /// Go 1.19's stream: each failed package a plain `FAIL` line on stdout, its compiler
    /// errors on stderr under a `# PACKAGE` heading.
    const GO_119_FAILURES: &str = "FAIL\texample.com/pager/ledger [build failed]\nFAIL\texample.com/pager/user [build failed]\n";

    fn failures() -> TestReport {
        let ReportOutcome::Parsed(report) = parse(GO_119_FAILURES.as_bytes()) else {
            panic!("expected a parsed report")
        };
        assert!(lacks_compiler_errors(&report));
        report
    }

    fn messages(report: &TestReport) -> Vec<(&str, &str)> {
        report
            .collection_errors
            .iter()
            .map(|e| (e.file.as_str(), e.message.as_str()))
            .collect()
    }

    #[test]
    fn a_build_failure_names_its_packages_first_compiler_error_from_stderr() {
        let mut report = failures();
        let stderr = "# example.com/pager/dep\n\
            dep/dep.go:3:23: undefined: nope\n\
            # example.com/pager/ledger [example.com/pager/ledger.test]\n\
            ledger/ledger_test.go:8:5: undefined: RoundedTotal\n\
            ledger/ledger_test.go:9:2: undefined: Other\n";
        name_compiler_errors(&mut report, stderr.as_bytes());
        // `user` has no heading of its own: it failed for `dep`, which has no test package.
        assert_eq!(
            messages(&report),
            [
                (
                    "example.com/pager/ledger",
                    "ledger/ledger_test.go:8:5: undefined: RoundedTotal"
                ),
                ("example.com/pager/user", "dep/dep.go:3:23: undefined: nope"),
            ]
        );
        assert!(!lacks_compiler_errors(&report));
    }

    #[test]
    fn a_build_failure_keeps_its_message_when_stderr_names_no_error_of_its_own() {
        let mut report = failures();
        // Only another failed package's error, then the go command's own words.
        let stderr = "# example.com/pager/ledger [example.com/pager/ledger.test]\n\
            ledger/ledger_test.go:8:5: undefined: RoundedTotal\n\
            go: warning: \"all\" matched no packages\nnote: module requires Go 1.99\n";
        name_compiler_errors(&mut report, stderr.as_bytes());
        assert_eq!(
            messages(&report)[1],
            ("example.com/pager/user", BUILD_FAILED)
        );
        let mut report = failures();
        name_compiler_errors(&mut report, b"");
        assert!(
            report
                .collection_errors
                .iter()
                .all(|e| e.message == BUILD_FAILED)
        );
    }

    #[test]
    fn compiler_errors_are_read_from_hostile_stderr_as_printable_bounded_lines() {
        let mut report = failures();
        let mut stderr: Vec<u8> = b"\xff\xfe\x00binary\n# example.com/pager/ledger\n".to_vec();
        stderr.extend_from_slice(
            format!(
                "\u{1b}[1;31mledger/ledger.go:12:2:\u{1b}[0m undefined: {}\u{7}\n",
                "x".repeat(10_000)
            )
            .as_bytes(),
        );
        name_compiler_errors(&mut report, &stderr);
        let message = &report.collection_errors[0].message;
        assert!(
            message.starts_with("ledger/ledger.go:12:2: undefined: xxx"),
            "{message}"
        );
        assert!(message.ends_with('…'), "{message}");
        assert_eq!(message.chars().count(), ERROR_CHARS + 1);
        assert!(!message.chars().any(char::is_control), "{message:?}");

        // An error past the head is never read: the worker and a re-read agree on where
        // reading stops.
        let mut report = failures();
        let mut flood = "noise\n".repeat(STDERR_HEAD / 6 + 1);
        flood.push_str("# example.com/pager/ledger\nledger/ledger.go:1:1: late\n");
        name_compiler_errors(&mut report, flood.as_bytes());
        assert_eq!(report.collection_errors[0].message, BUILD_FAILED);
    }

    #[test]
    fn only_file_line_and_column_lines_are_compiler_errors() {
        for line in [
            "ledger/ledger.go:12:2: undefined: foo",
            "./ledger.go:12: undefined: foo",
            "  go.mod:3: unknown directive: bogus",
        ] {
            assert!(compiler_error(line).is_some(), "{line}");
        }
        for line in [
            "# example.com/pager/ledger",
            "go: updates to go.mod needed",
            "note: module requires Go 1.21",
            "\thave (int)",
            "ledger.go:x:2: not a line",
            "ledger.go:1:2:3: too many numbers",
            ":1:2: no file",
            "ledger.go:1:2: ",
            "FAIL\texample.com/pager/ledger [build failed]",
        ] {
            assert!(compiler_error(line).is_none(), "{line}");
        }
    }

    #[test]
    fn a_prebuilt_runs_re_run_is_read_as_re_runs_of_its_package() {
        let stream = r#"{"Action":"run","Package":"m/calc","Test":"TestA"}
{"Action":"fail","Package":"m/calc","Test":"TestA"}
{"Action":"fail","Package":"m/calc"}
{"Action":"run","Package":"m/calc [assay-rerun]","Test":"TestA"}
{"Action":"fail","Package":"m/calc [assay-rerun]","Test":"TestA"}
{"Action":"fail","Package":"m/calc [assay-rerun]"}
"#;
        let ReportOutcome::Parsed(report) = parse(stream.as_bytes()) else {
            panic!("expected a parsed report")
        };
        assert_eq!(report.cases.len(), 2);
        assert!(
            report
                .cases
                .iter()
                .all(|c| c.file == "m/calc" && c.name == "TestA")
        );
        let variants: Vec<Option<&str>> =
            report.cases.iter().map(|c| c.variant.as_deref()).collect();
        assert!(variants.contains(&None), "{variants:?}");
        assert!(variants.contains(&Some("assay-rerun")), "{variants:?}");
        // Only the exact suffix: a package merely ending in a bracket is its own.
        let other = stream.replace(" [assay-rerun]", " [assay-rerun]x");
        let ReportOutcome::Parsed(report) = parse(other.as_bytes()) else {
            panic!("expected a parsed report")
        };
        assert!(report.cases.iter().all(|c| c.variant.is_none()));
    }

    #[test]
    fn a_stream_cut_short_or_empty_gives_no_result() {
        let cut = r#"{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
"#;
        assert!(matches!(
            parse(cut.as_bytes()),
            ReportOutcome::Inconsistent(_)
        ));
        let unfinished_package = r#"{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA"}
"#;
        assert!(matches!(
            parse(unfinished_package.as_bytes()),
            ReportOutcome::Inconsistent(_)
        ));
        assert_eq!(parse(b""), ReportOutcome::Missing);
        assert!(matches!(
            parse(b"PASS TestA\n"),
            ReportOutcome::Malformed(_)
        ));
        let no_tests = r#"{"Action":"output","Package":"p","Output":"?   \tp\t[no test files]\n"}
{"Action":"skip","Package":"p","Elapsed":0}
"#;
        assert_eq!(parse(no_tests.as_bytes()), ReportOutcome::ZeroTests);
    }
}
