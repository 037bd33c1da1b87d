//! Vitest's `json` reporter (Jest-compatible shape, as Vitest 4 writes it). A file-level error
//! (the file failed to load, a hook failed) is kept apart from test failures: it is a collection
//! error of the file, and a test failed in such a file is an error, never a reproduced bug.
//! Vitest marks the tests of a block whose `beforeAll` failed as skipped, so they never pass.

use crate::outcome::{CaseResult, CollectionError, Outcome, ReportOutcome, TestReport};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    num_total_tests: u64,
    num_failed_tests: u64,
    num_passed_tests: u64,
    test_results: Vec<FileResult>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileResult {
    name: String,
    status: String,
    #[serde(default)]
    message: String,
    assertion_results: Vec<AssertionResult>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AssertionResult {
    #[serde(default)]
    ancestor_titles: Vec<String>,
    title: String,
    status: String,
    #[serde(default)]
    failure_messages: Vec<String>,
}

/// The outcome of a Vitest JSON report.
pub fn parse(bytes: &[u8]) -> ReportOutcome {
    let report: Report = match serde_json::from_slice(bytes) {
        Ok(report) => report,
        Err(e) => return ReportOutcome::Malformed(e.to_string()),
    };
    let listed: u64 = report
        .test_results
        .iter()
        .map(|file| file.assertion_results.len() as u64)
        .sum();
    if listed != report.num_total_tests {
        return ReportOutcome::Inconsistent(format!(
            "{} tests counted but {listed} listed",
            report.num_total_tests
        ));
    }
    // Vitest writes `pending` for a test still running or queued: the report was written before
    // the run finished. (`numPendingTests` counts skipped tests too, so it says nothing here.)
    if let Some(unfinished) = report
        .test_results
        .iter()
        .flat_map(|file| &file.assertion_results)
        .find(|a| a.status == "pending")
    {
        return ReportOutcome::Inconsistent(format!(
            "test {:?} was still running when the report was written",
            unfinished.title
        ));
    }
    let mut parsed = TestReport::default();
    let (mut failed, mut passed) = (0, 0);
    for file in report.test_results {
        let file_error = !file.message.trim().is_empty();
        if file_error {
            parsed.collection_errors.push(CollectionError {
                file: file.name.clone(),
                message: first_line(&file.message),
            });
        } else if file.status == "failed"
            && file.assertion_results.iter().all(|a| a.status != "failed")
        {
            // A hook of a `describe` block: its error is the block's, which the report omits.
            parsed.collection_errors.push(CollectionError {
                file: file.name.clone(),
                message: "the file failed without a failing test (a hook of a describe block)"
                    .into(),
            });
        }
        for assertion in file.assertion_results {
            let outcome = match assertion.status.as_str() {
                "passed" => {
                    passed += 1;
                    Outcome::Passed
                }
                "failed" => {
                    failed += 1;
                    if file_error {
                        Outcome::Error
                    } else {
                        Outcome::Failed
                    }
                }
                "skipped" | "todo" | "disabled" => Outcome::Skipped,
                other => {
                    return ReportOutcome::Malformed(format!(
                        "test {:?} has the unknown status {other:?}",
                        assertion.title
                    ));
                }
            };
            parsed.cases.push(CaseResult {
                file: file.name.clone(),
                suite: assertion.ancestor_titles.join(" > "),
                name: assertion.title,
                variant: None,
                outcome,
                message: assertion.failure_messages.first().map(|m| first_line(m)),
            });
        }
    }
    for (label, counted, listed) in [
        ("failed", report.num_failed_tests, failed),
        ("passed", report.num_passed_tests, passed),
    ] {
        if counted != listed {
            return ReportOutcome::Inconsistent(format!(
                "{counted} {label} tests counted but {listed} listed"
            ));
        }
    }
    if parsed.cases.is_empty() && parsed.collection_errors.is_empty() {
        return ReportOutcome::ZeroTests;
    }
    ReportOutcome::Parsed(parsed)
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().trim().to_owned()
}
