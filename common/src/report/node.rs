//! The report of Assay's node:test reporter (`assay.node/v1`): every test and suite result as
//! node reported it, with its file and nesting. Node reports a test after its subtests, so a
//! result at nesting `n` adopts the results at `n + 1` of its file reported since the previous
//! one at `n`; that gives each test its describe path. Node's own JUnit reporter names no
//! file, which is why Assay ships a reporter: a name in two files must be ambiguous, not a
//! duplicate of itself.

use crate::outcome::{CaseResult, CollectionError, Outcome, ReportOutcome, TestReport};
use crate::report::libtest::RERUN_VARIANT;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};

/// The `schema` a node:test report from Assay's reporter declares.
pub const SCHEMA: &str = "assay.node/v1";

/// How deep `describe` blocks and subtests may nest in a report. The guest writes the report,
/// and each level is a level of the result tree (built, walked and dropped level by level): a
/// report that claims more is refused, never walked.
pub const MAX_NESTING: usize = 256;

#[derive(Deserialize)]
struct NodeReport {
    schema: String,
    /// The run's closing counts (`tests`, `pass`, `fail`, ...); node prints them last.
    counts: BTreeMap<String, u64>,
    results: Vec<NodeResult>,
    /// The document of a failing mutant run's second run (`common::runner::node`).
    #[serde(default)]
    rerun: bool,
}

#[derive(Clone, Deserialize)]
struct NodeResult {
    file: Option<String>,
    nesting: usize,
    name: String,
    passed: bool,
    /// A `describe` block rather than a test.
    suite: bool,
    skip: bool,
    todo: bool,
    failure_type: Option<String>,
    message: Option<String>,
}

/// A result with the results it encloses.
struct Node {
    result: NodeResult,
    children: Vec<Node>,
}

/// The outcome of a report written by the node:test reporter Assay ships: one run's document,
/// or a failing mutant run's followed by its re-run's (marked `"rerun": true`), whose cases are
/// added with the variant [`RERUN_VARIANT`] to confirm the kill. Any other sequence is refused.
pub fn parse(bytes: &[u8]) -> ReportOutcome {
    let mut documents = serde_json::Deserializer::from_slice(bytes).into_iter::<NodeReport>();
    let (first, again) = match (documents.next(), documents.next(), documents.next()) {
        (Some(Ok(first)), again, None) => (first, again),
        (Some(Err(e)), _, _) => {
            return ReportOutcome::Malformed(e.to_string());
        }
        (None, _, _) => return ReportOutcome::Malformed("the report is empty".into()),
        (_, _, Some(_)) => {
            return ReportOutcome::Malformed("the report holds more than two runs".into());
        }
    };
    if first.rerun {
        return ReportOutcome::Malformed("the report's first run says it is a re-run".into());
    }
    let mut parsed = match parse_run(first) {
        ReportOutcome::Parsed(parsed) => parsed,
        other => return other,
    };
    match again {
        None => {}
        Some(Ok(again)) if !again.rerun => {
            return ReportOutcome::Malformed("the report's second run is not a re-run".into());
        }
        // A re-run that says nothing usable confirms nothing: the kill gets a job of its own.
        Some(Ok(again)) => {
            if let ReportOutcome::Parsed(again) = parse_run(again) {
                parsed
                    .cases
                    .extend(again.cases.into_iter().map(|case| CaseResult {
                        variant: Some(RERUN_VARIANT.to_owned()),
                        ..case
                    }));
            }
        }
        Some(Err(e)) => return ReportOutcome::Malformed(e.to_string()),
    }
    ReportOutcome::Parsed(parsed)
}

/// One run's document.
fn parse_run(report: NodeReport) -> ReportOutcome {
    if report.schema != SCHEMA {
        return ReportOutcome::Malformed(format!("schema {:?} is not {SCHEMA:?}", report.schema));
    }
    let Some(&declared) = report.counts.get("tests") else {
        return ReportOutcome::Inconsistent(
            "the run's closing counts are missing (the run was cut short)".into(),
        );
    };
    if let Some(deep) = report.results.iter().find(|r| r.nesting > MAX_NESTING) {
        return ReportOutcome::Malformed(format!(
            "{:?} is nested {} deep, beyond the {MAX_NESTING} a report may nest",
            deep.name, deep.nesting
        ));
    }
    let tests = report.results.iter().filter(|r| !r.suite).count() as u64;
    if declared != tests {
        return ReportOutcome::Inconsistent(format!(
            "the run counts {declared} tests but the report lists {tests}"
        ));
    }
    let roots = match nest(report.results) {
        Ok(roots) => roots,
        Err(why) => return ReportOutcome::Inconsistent(why.to_string()),
    };
    let mut parsed = TestReport::default();
    for root in roots {
        flatten(root, &mut Vec::new(), &mut parsed);
    }
    if parsed.cases.is_empty() && parsed.collection_errors.is_empty() {
        return ReportOutcome::ZeroTests;
    }
    ReportOutcome::Parsed(parsed)
}

/// A result node reported at some nesting whose enclosing test or suite never came.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name:?} in {file} is nested but its parent never finished")]
struct Orphan {
    name: String,
    file: String,
}

/// Builds each file's tree of results from node's children-first order.
fn nest(results: Vec<NodeResult>) -> Result<Vec<Node>, Orphan> {
    // Per file, the results waiting for a parent, by nesting level.
    let mut pending: HashMap<String, Vec<Vec<Node>>> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    for result in results {
        let file = result.file.clone().unwrap_or_default();
        let levels = pending.entry(file.clone()).or_insert_with(|| {
            order.push(file.clone());
            Vec::new()
        });
        if levels.len() < result.nesting + 2 {
            levels.resize_with(result.nesting + 2, Vec::new);
        }
        let children = std::mem::take(&mut levels[result.nesting + 1]);
        levels[result.nesting].push(Node { result, children });
    }
    let mut roots = Vec::new();
    for file in order {
        let mut levels = pending.remove(&file).unwrap_or_default().into_iter();
        roots.extend(levels.next().unwrap_or_default());
        if let Some(orphan) = levels.flatten().next() {
            return Err(Orphan {
                name: orphan.result.name,
                file,
            });
        }
    }
    Ok(roots)
}

fn flatten(node: Node, path: &mut Vec<String>, report: &mut TestReport) {
    let result = node.result;
    let file = result.file.clone().unwrap_or_default();
    // A file that fails to load, or holds no test, is reported as a test named by its path.
    if result.nesting == 0 && !result.suite && node.children.is_empty() && result.name == file {
        if !result.passed {
            report.collection_errors.push(CollectionError {
                file,
                message: result
                    .message
                    .unwrap_or_else(|| "the file failed to load".into()),
            });
        }
        return;
    }
    let own_failure = matches!(
        result.failure_type.as_deref(),
        Some("testCodeFailure" | "subtestsFailed")
    );
    if result.suite {
        // A describe block that fails on its own (a hook, or its body throwing) is not a test;
        // its tests carry their own outcomes (cancelled ones are errors).
        if !result.passed && !own_failure {
            report.collection_errors.push(CollectionError {
                file: file.clone(),
                message: format!(
                    "suite {:?}: {}",
                    result.name,
                    result.message.as_deref().unwrap_or("failed")
                ),
            });
        }
    } else {
        let outcome = match (result.passed, own_failure) {
            _ if result.skip || result.todo => Outcome::Skipped,
            (true, _) => Outcome::Passed,
            (false, true) => Outcome::Failed,
            // A failed hook, a timeout, or a test cancelled because its parent ended.
            (false, false) => Outcome::Error,
        };
        report.cases.push(CaseResult {
            file: file.clone(),
            suite: path.join(" > "),
            name: result.name.clone(),
            variant: None,
            outcome,
            message: result
                .message
                .clone()
                .filter(|_| outcome != Outcome::Passed),
        });
    }
    path.push(result.name);
    for child in node.children {
        flatten(child, path, report);
    }
    path.pop();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written by `node_reporter.mjs` under node 20 for the node-invoice fixture plus a file that
    /// throws on load and one with nested subtests and a repeated name.
    const REAL_RUN: &str = include_str!("../../../tests/fixtures/node-report/report.json");
    const ROOT: &str = "/tmp/assay-job/tree/";

    fn parsed() -> TestReport {
        match parse(REAL_RUN.as_bytes()) {
            ReportOutcome::Parsed(report) => report,
            other => panic!("expected a parsed report, got {other:?}"),
        }
    }

    fn case<'a>(report: &'a TestReport, file: &str, suite: &str, name: &str) -> &'a CaseResult {
        report
            .cases
            .iter()
            .find(|c| c.file == format!("{ROOT}{file}") && c.suite == suite && c.name == name)
            .unwrap_or_else(|| panic!("{file} {suite} {name} in {:#?}", report.cases))
    }

    #[test]
    fn results_keep_their_file_and_describe_path() {
        let report = parsed();
        let zero = case(&report, "test/invoice.test.js", "totals", "test_zero_net");
        assert_eq!(zero.outcome, Outcome::Passed);
        let elsewhere = case(&report, "test/zero.test.js", "", "test_zero_net");
        assert_eq!(elsewhere.outcome, Outcome::Passed);
        let child = case(&report, "test/nested.test.js", "refunds", "partial refund");
        assert_eq!(child.outcome, Outcome::Failed);
        let parent = case(&report, "test/nested.test.js", "", "refunds");
        assert_eq!(parent.outcome, Outcome::Failed);
    }

    #[test]
    fn skips_todos_hooks_and_load_failures_are_kept_apart_from_failures() {
        let report = parsed();
        let outcome = |name: &str| case(&report, "test/invoice.test.js", "", name).outcome;
        assert_eq!(outcome("test_discount_spares_the_tax"), Outcome::Failed);
        assert_eq!(outcome("test_currency_rounding"), Outcome::Skipped);
        assert_eq!(outcome("test_credit_notes"), Outcome::Skipped);
        let cancelled = case(
            &report,
            "test/invoice.test.js",
            "ledger",
            "test_ledger_balance",
        );
        assert_eq!(cancelled.outcome, Outcome::Error);
        let errors: Vec<(&str, &str)> = report
            .collection_errors
            .iter()
            .map(|e| {
                (
                    e.file.strip_prefix(ROOT).unwrap_or(&e.file),
                    e.message.as_str(),
                )
            })
            .collect();
        assert!(
            errors.contains(&("test/broken.test.js", "test failed")),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|(file, why)| *file == "test/invoice.test.js" && why.contains("\"ledger\"")),
            "{errors:?}"
        );
        // The empty file passes as a test named by its path: it is no test at all.
        assert!(
            report
                .cases
                .iter()
                .all(|c| !c.name.ends_with("empty.test.js"))
        );
    }

    #[test]
    fn repeated_names_in_one_file_share_one_identity() {
        let report = parsed();
        let same: Vec<&CaseResult> = report
            .cases
            .iter()
            .filter(|c| c.name == "test_refund_total")
            .collect();
        assert_eq!(same.len(), 2);
        assert_eq!(same[0].identity(), same[1].identity());
    }

    #[test]
    fn a_cut_short_miscounted_or_foreign_report_gives_no_result() {
        let cut = REAL_RUN.replace("\"tests\":", "\"planned\":");
        assert!(matches!(
            parse(cut.as_bytes()),
            ReportOutcome::Inconsistent(_)
        ));
        let miscounted = r#"{"schema":"assay.node/v1","counts":{"tests":2},"results":[
            {"file":"/t/a.test.js","nesting":0,"name":"a","passed":true,"suite":false,"skip":false,"todo":false,"failure_type":null,"message":null}]}"#;
        assert!(matches!(
            parse(miscounted.as_bytes()),
            ReportOutcome::Inconsistent(_)
        ));
        let orphan = r#"{"schema":"assay.node/v1","counts":{"tests":1},"results":[
            {"file":"/t/a.test.js","nesting":1,"name":"a","passed":true,"suite":false,"skip":false,"todo":false,"failure_type":null,"message":null}]}"#;
        assert_eq!(
            parse(orphan.as_bytes()),
            ReportOutcome::Inconsistent(
                "\"a\" in /t/a.test.js is nested but its parent never finished".into()
            )
        );
        let empty = r#"{"schema":"assay.node/v1","counts":{"tests":0},"results":[]}"#;
        assert_eq!(parse(empty.as_bytes()), ReportOutcome::ZeroTests);
        let foreign = empty.replace("assay.node/v1", "other/v1");
        assert!(matches!(
            parse(foreign.as_bytes()),
            ReportOutcome::Malformed(_)
        ));
        assert!(matches!(parse(b"{\"schema\""), ReportOutcome::Malformed(_)));
    }

    /// One test's document: `a` in /t/a.test.js, passing or failing.
    fn run(passed: bool, rerun: bool) -> String {
        let marker = if rerun { r#","rerun":true"# } else { "" };
        format!(
            r#"{{"schema":"assay.node/v1","counts":{{"tests":1}},"results":[{{"file":"/t/a.test.js","nesting":0,"name":"a","passed":{passed},"suite":false,"skip":false,"todo":false,"failure_type":"testCodeFailure","message":null}}]{marker}}}"#
        ) + "\n"
    }

    #[test]
    fn a_rerun_document_adds_its_cases_as_reruns_and_any_other_sequence_is_refused() {
        let ReportOutcome::Parsed(report) =
            parse((run(false, false) + &run(true, true)).as_bytes())
        else {
            panic!("a failing run and its re-run parse");
        };
        let seen: Vec<(Outcome, Option<&str>)> = report
            .cases
            .iter()
            .map(|c| (c.outcome, c.variant.as_deref()))
            .collect();
        assert_eq!(
            seen,
            [
                (Outcome::Failed, None),
                (Outcome::Passed, Some(RERUN_VARIANT))
            ]
        );
        // A re-run with no usable result confirms nothing; the first run stands alone.
        let cut = run(true, true).replace("\"tests\":", "\"planned\":");
        let ReportOutcome::Parsed(alone) = parse((run(false, false) + &cut).as_bytes()) else {
            panic!("the first run stands");
        };
        assert_eq!(alone.cases.len(), 1);
        // Hostile orders: a re-run first, an unmarked second run, a third run, trailing junk.
        for (what, bytes) in [
            ("re-run first", run(true, true) + &run(false, false)),
            ("unmarked second", run(false, false) + &run(true, false)),
            (
                "three runs",
                run(false, false) + &run(true, true) + &run(true, true),
            ),
            ("junk after", run(false, false) + "not json"),
            ("re-run alone", run(true, true)),
        ] {
            assert!(
                matches!(parse(bytes.as_bytes()), ReportOutcome::Malformed(_)),
                "{what}: {:?}",
                parse(bytes.as_bytes())
            );
        }
    }
}
