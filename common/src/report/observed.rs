//! Assay's own record of a pytest run (`assay_observer`, loaded first with `-p`): for each
//! test's call phase, whether its function raised and whether what ran is what was collected.
//! A JUnit pass that the record contradicts is no pass: the report was rewritten, or a hook
//! turned the outcome, after the test ran.

use crate::outcome::{Outcome, TestReport};
use serde::Deserialize;

/// One line of the record.
#[derive(Debug, Deserialize)]
struct Call {
    nodeid: String,
    raised: bool,
    #[serde(default = "own_by_default")]
    own: bool,
}

fn own_by_default() -> bool {
    true
}

/// Why `report` cannot be believed given the record, naming the first test it misreports;
/// `None` when they agree. Lines that do not parse are skipped: the record is evidence
/// against a pass, never for one, so a damaged line only loses that evidence.
pub fn contradiction(report: &TestReport, record: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(record);
    for line in text.lines() {
        let Ok(call) = serde_json::from_str::<Call>(line) else {
            continue;
        };
        if !call.raised && call.own {
            continue;
        }
        // pytest's node id is `FILE::[CLASS::]NAME`; the JUnit case holds the file and name.
        let file = call.nodeid.split("::").next().unwrap_or("");
        let name = call.nodeid.rsplit("::").next().unwrap_or("");
        let passed = report
            .cases
            .iter()
            .any(|case| case.outcome == Outcome::Passed && case.name == name && case.file == file);
        if passed {
            let what = match call.raised {
                true => "its call raised",
                false => "what ran is not the function collected for it",
            };
            return Some(format!(
                "{} passed in the report, but Assay's own record of the run says {what}",
                call.nodeid
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::CaseResult;

    fn report(outcome: Outcome) -> TestReport {
        TestReport {
            cases: vec![CaseResult {
                file: "tests/test_partial.py".into(),
                suite: "tests.test_partial".into(),
                name: "test_partial_page".into(),
                variant: None,
                outcome,
                message: None,
            }],
            collection_errors: vec![],
        }
    }

    #[test]
    fn a_pass_whose_call_raised_is_contradicted() {
        let record = b"{\"nodeid\": \"tests/test_partial.py::test_partial_page\", \"raised\": true, \"own\": true}\n";
        let why = contradiction(&report(Outcome::Passed), record).expect("a contradiction");
        assert!(why.contains("its call raised"), "{why}");
        assert!(contradiction(&report(Outcome::Failed), record).is_none());
    }

    #[test]
    fn a_pass_that_ran_another_function_is_contradicted() {
        let record = b"{\"nodeid\": \"tests/test_partial.py::PageTests::test_partial_page\", \"raised\": false, \"own\": false}\n";
        assert!(contradiction(&report(Outcome::Passed), record).is_some());
    }

    #[test]
    fn an_agreeing_or_damaged_record_contradicts_nothing() {
        let record = b"{\"nodeid\": \"tests/test_partial.py::test_partial_page\", \"raised\": false, \"own\": true}\nnot json\n";
        assert!(contradiction(&report(Outcome::Passed), record).is_none());
    }
}
