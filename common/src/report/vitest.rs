//! Vitest's `json` reporter (Jest-compatible shape, as Vitest 4 writes it). A file-level error
//! (the file failed to load, or a suite hook failed) is kept apart from test failures: it is a
//! collection error, and a test failed in such a file is an error, never a reproduced bug.

use crate::outcome::{CaseResult, CollectionError, Outcome, ReportOutcome, TestReport};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    num_total_tests: u64,
    num_failed_tests: u64,
    #[serde(default)]
    num_pending_tests: u64,
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
    // Vitest maps a test still in the `run` state to `pending`: the report was written before
    // the run finished.
    if report.num_pending_tests > 0 {
        return ReportOutcome::Inconsistent(format!(
            "{} tests were still running when the report was written",
            report.num_pending_tests
        ));
    }
    let mut parsed = TestReport::default();
    let mut failed = 0;
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
            parsed.collection_errors.push(CollectionError {
                file: file.name.clone(),
                message: "the file failed without a failing test".into(),
            });
        }
        for assertion in file.assertion_results {
            let outcome = match assertion.status.as_str() {
                "passed" => Outcome::Passed,
                "failed" => {
                    failed += 1;
                    if file_error {
                        Outcome::Error
                    } else {
                        Outcome::Failed
                    }
                }
                "skipped" | "pending" | "todo" | "disabled" => Outcome::Skipped,
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
    if failed != report.num_failed_tests {
        return ReportOutcome::Inconsistent(format!(
            "{} failed tests counted but {failed} listed",
            report.num_failed_tests
        ));
    }
    if parsed.cases.is_empty() && parsed.collection_errors.is_empty() {
        return ReportOutcome::ZeroTests;
    }
    ReportOutcome::Parsed(parsed)
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().trim().to_owned()
}
