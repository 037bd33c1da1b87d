//! `go test -json` event streams (test2json), read from the job's captured stdout. Tests and
//! subtests are identified by path; build failures are collection errors of their package,
//! never test failures.

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
        if event.action == "build-output" || event.package.is_empty() {
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
            file,
            message: "build failed".into(),
        })
        .collect();
    if report.cases.is_empty() && report.collection_errors.is_empty() {
        return ReportOutcome::ZeroTests;
    }
    ReportOutcome::Parsed(report)
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
