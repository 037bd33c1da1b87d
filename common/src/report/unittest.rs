//! The JSON report of Assay's unittest adapter (`assay.unittest/v1`): a structured result
//! written by a `unittest.TestResult`, never parsed from text output.

use crate::outcome::{CaseResult, CollectionError, ReportOutcome, TestReport};
use serde::Deserialize;

/// The `schema` a report from Assay's unittest adapter declares.
pub const SCHEMA: &str = "assay.unittest/v1";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AdapterReport {
    schema: String,
    /// Set only after the whole suite has run; a crash or kill leaves it false or absent.
    complete: bool,
    total: usize,
    cases: Vec<CaseResult>,
    collection_errors: Vec<CollectionError>,
    /// A `--partition` batch's whole collection, read by the suite, not by the judge.
    #[serde(default)]
    #[allow(dead_code)]
    collected: Option<serde::de::IgnoredAny>,
}

/// The outcome of a report written by Assay's unittest adapter.
pub fn parse(bytes: &[u8]) -> ReportOutcome {
    let report: AdapterReport = match serde_json::from_slice(bytes) {
        Ok(report) => report,
        Err(e) => return ReportOutcome::Malformed(e.to_string()),
    };
    if report.schema != SCHEMA {
        return ReportOutcome::Malformed(format!("schema {:?} is not {SCHEMA:?}", report.schema));
    }
    if !report.complete {
        return ReportOutcome::Inconsistent("the run ended before the adapter finished".into());
    }
    if report.total != report.cases.len() {
        return ReportOutcome::Inconsistent(format!(
            "{} tests counted but {} listed",
            report.total,
            report.cases.len()
        ));
    }
    if report.cases.is_empty() && report.collection_errors.is_empty() {
        return ReportOutcome::ZeroTests;
    }
    ReportOutcome::Parsed(TestReport {
        cases: report.cases,
        collection_errors: report.collection_errors,
        collection_reruns: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Outcome;

    #[test]
    fn a_complete_report_parses() {
        let json = r#"{"schema":"assay.unittest/v1","complete":true,"total":1,
            "cases":[{"file":"tests/test_pager.py","suite":"tests.test_pager.PagerTests","name":"test_full_pages","variant":null,"outcome":"passed","message":null}],
            "collection_errors":[{"file":"tests/test_other.py","message":"ImportError"}]}"#;
        let ReportOutcome::Parsed(report) = parse(json.as_bytes()) else {
            panic!("expected a parsed report")
        };
        assert_eq!(report.cases[0].outcome, Outcome::Passed);
        assert_eq!(report.collection_errors[0].file, "tests/test_other.py");
    }

    #[test]
    fn incomplete_miscounted_and_foreign_reports_give_no_result() {
        let base = r#"{"schema":"assay.unittest/v1","complete":COMPLETE,"total":TOTAL,"cases":[],"collection_errors":[]}"#;
        let incomplete = base.replace("COMPLETE", "false").replace("TOTAL", "0");
        assert!(matches!(
            parse(incomplete.as_bytes()),
            ReportOutcome::Inconsistent(_)
        ));
        let miscounted = base.replace("COMPLETE", "true").replace("TOTAL", "3");
        assert!(matches!(
            parse(miscounted.as_bytes()),
            ReportOutcome::Inconsistent(_)
        ));
        let empty = base.replace("COMPLETE", "true").replace("TOTAL", "0");
        assert_eq!(parse(empty.as_bytes()), ReportOutcome::ZeroTests);
        let foreign = base
            .replace("assay.unittest/v1", "other/v9")
            .replace("COMPLETE", "true")
            .replace("TOTAL", "0");
        assert!(matches!(
            parse(foreign.as_bytes()),
            ReportOutcome::Malformed(_)
        ));
    }
}
