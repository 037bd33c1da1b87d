//! Assay's own record of a pytest run (`assay_observer`, loaded first with `-p`): for each
//! test's call phase, whether its function ran, whether it raised and whether what ran is what
//! was collected.
//! A JUnit pass that the record contradicts is no pass: the report was rewritten, or a hook
//! turned the outcome, after the test ran.

use crate::outcome::{Outcome, TestReport};
use serde::Deserialize;
use std::collections::BTreeMap;

/// One line of the record.
#[derive(Debug, Deserialize)]
struct Call {
    nodeid: String,
    raised: bool,
    #[serde(default = "yes")]
    own: bool,
    /// Whether the collected function was entered; absent where the observer could not watch
    /// for it (an item with no function, such as a doctest).
    #[serde(default = "yes")]
    ran: bool,
}

fn yes() -> bool {
    true
}

/// What makes a call of a test no ground for a pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bad {
    Raised,
    NeverRan,
    NotOwn,
}

impl Call {
    fn bad(&self) -> Option<Bad> {
        match (self.raised, self.ran, self.own) {
            (true, _, _) => Some(Bad::Raised),
            (false, false, _) => Some(Bad::NeverRan),
            (false, true, false) => Some(Bad::NotOwn),
            (false, true, true) => None,
        }
    }
}

/// The record's calls of one test name in one file, by node id: `None` while every call of
/// the node ran its collected function without raising, else why its first bad call was bad.
/// Counted by node, not by call: a hook that calls a clean test twice cannot make room for a
/// forged pass.
type Calls = BTreeMap<String, Option<Bad>>;

/// Why `report` cannot be believed given the record, naming the first test it misreports;
/// `None` when they agree. Lines that do not parse are skipped: the record is evidence
/// against a pass, never for one, so a damaged line only loses that evidence.
///
/// A JUnit case holds a test's file and name, and its class only in a form a project's
/// options reshape, so tests are counted by file and name: a test that passes in the report
/// is believed while that name in that file has as many clean nodes in the record as passes.
/// Two classes' `test_all_args` in one file, one failing and one passing, agree; either one
/// turned into a pass after its call raised is one pass too many.
pub fn contradiction(report: &TestReport, record: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(record);
    let mut calls: BTreeMap<(String, String), Calls> = BTreeMap::new();
    for line in text.lines() {
        let Ok(call) = serde_json::from_str::<Call>(line) else {
            continue;
        };
        // pytest's node id is `FILE::[CLASS::]NAME`; the JUnit case holds the file and name.
        let file = call.nodeid.split("::").next().unwrap_or("").to_owned();
        let name = call.nodeid.rsplit("::").next().unwrap_or("").to_owned();
        let bad = call.bad();
        let node = calls
            .entry((file, name))
            .or_default()
            .entry(call.nodeid)
            .or_default();
        *node = node.or(bad);
    }
    for ((file, name), nodes) in calls {
        let Some((nodeid, bad)) = nodes.iter().find_map(|(id, bad)| bad.map(|b| (id, b))) else {
            continue;
        };
        let clean = nodes.values().filter(|bad| bad.is_none()).count();
        let passes = report
            .cases
            .iter()
            .filter(|case| {
                case.outcome == Outcome::Passed && case.name == name && case.file == file
            })
            .count();
        if passes > clean {
            let what = match bad {
                Bad::Raised => "its call raised",
                Bad::NeverRan => "the function collected for it never ran",
                Bad::NotOwn => "what ran is not the function collected for it",
            };
            return Some(format!(
                "{nodeid} passed in the report, but Assay's own record of the run says {what}"
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
            collection_reruns: Vec::new(),
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
    fn a_pass_whose_function_never_ran_is_contradicted() {
        let record = b"{\"nodeid\": \"tests/test_partial.py::PageTests::test_partial_page\", \"raised\": false, \"own\": true, \"ran\": false}\n";
        let why = contradiction(&report(Outcome::Passed), record).expect("a contradiction");
        assert!(why.contains("never ran"), "{why}");
        // A record of an item the observer could not watch (no `ran`) is read as before.
        let unwatched = b"{\"nodeid\": \"tests/test_partial.py::test_partial_page\", \"raised\": false, \"own\": true}\n";
        assert!(contradiction(&report(Outcome::Passed), unwatched).is_none());
    }

    #[test]
    fn a_pass_that_ran_another_function_is_contradicted() {
        let record = b"{\"nodeid\": \"tests/test_partial.py::PageTests::test_partial_page\", \"raised\": false, \"own\": false}\n";
        assert!(contradiction(&report(Outcome::Passed), record).is_some());
    }

    /// packaging 23.2's `tests/test_tags.py`: `TestCPythonTags::test_all_args` fails on the
    /// base, `TestGenericTags::test_all_args` passes; a JUnit case names neither class.
    #[test]
    fn a_passing_test_is_not_contradicted_by_a_same_named_test_of_another_class() {
        let case = |outcome| CaseResult {
            file: "tests/test_tags.py".into(),
            suite: "tests.test_tags".into(),
            name: "test_all_args".into(),
            variant: None,
            outcome,
            message: None,
        };
        let record = b"{\"nodeid\": \"tests/test_tags.py::TestCPythonTags::test_all_args\", \"raised\": true, \"own\": true}\n{\"nodeid\": \"tests/test_tags.py::TestGenericTags::test_all_args\", \"raised\": false, \"own\": true}\n";
        let honest = TestReport {
            cases: vec![case(Outcome::Failed), case(Outcome::Passed)],
            collection_errors: vec![],
            collection_reruns: Vec::new(),
        };
        assert_eq!(contradiction(&honest, record), None);
        let forged = TestReport {
            cases: vec![case(Outcome::Passed), case(Outcome::Passed)],
            collection_errors: vec![],
            collection_reruns: Vec::new(),
        };
        let why = contradiction(&forged, record).expect("one pass too many");
        assert!(
            why.starts_with("tests/test_tags.py::TestCPythonTags::test_all_args passed"),
            "{why}"
        );
        // A hook that calls the clean test once more adds a call, not a node.
        let twice = [
            &record[..],
            b"{\"nodeid\": \"tests/test_tags.py::TestGenericTags::test_all_args\", \"raised\": false, \"own\": true}\n",
        ]
        .concat();
        let why = contradiction(&forged, &twice).expect("still one pass too many");
        assert!(
            why.starts_with("tests/test_tags.py::TestCPythonTags::test_all_args passed"),
            "{why}"
        );
    }

    #[test]
    fn an_agreeing_or_damaged_record_contradicts_nothing() {
        let record = b"{\"nodeid\": \"tests/test_partial.py::test_partial_page\", \"raised\": false, \"own\": true}\nnot json\n";
        assert!(contradiction(&report(Outcome::Passed), record).is_none());
    }
}
