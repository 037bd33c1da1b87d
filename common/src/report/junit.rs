//! JUnit XML, as pytest (`junit_family=xunit1`) and most JVM/.NET/Rust/Ruby runners write it.
//! Safe by construction: a document type declaration is refused (no entity expansion, no
//! external entities), and only the predefined XML entities are decoded.

use crate::outcome::{CaseResult, CollectionError, Outcome, ReportOutcome, TestReport};
use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

/// Parses JUnit XML and checks it: every suite's declared `tests` count must equal the cases
/// it lists, and at least one case (or collection error) must be present.
pub fn parse(bytes: &[u8]) -> ReportOutcome {
    match parse_checked(bytes) {
        Ok(report) if report.cases.is_empty() && report.collection_errors.is_empty() => {
            ReportOutcome::ZeroTests
        }
        Ok(report) => ReportOutcome::Parsed(report),
        Err(Problem::Malformed(why)) => ReportOutcome::Malformed(why),
        Err(Problem::Inconsistent(why)) => ReportOutcome::Inconsistent(why),
    }
}

enum Problem {
    Malformed(String),
    Inconsistent(String),
}

struct SuiteFrame {
    name: String,
    declared: Option<u64>,
    direct_cases: u64,
    nested_suites: u64,
}

struct OpenCase {
    file: String,
    classname: String,
    name: String,
    outcome: Outcome,
    message: Option<String>,
}

fn parse_checked(bytes: &[u8]) -> Result<TestReport, Problem> {
    let mut reader = Reader::from_reader(bytes);
    reader.config_mut().trim_text(true);
    let mut report = TestReport::default();
    let mut suites: Vec<SuiteFrame> = Vec::new();
    let mut case: Option<OpenCase> = None;
    let mut saw_root = false;
    let mut buf = Vec::new();
    loop {
        let event = reader.read_event_into(&mut buf).map_err(|e| {
            Problem::Malformed(format!("at byte {}: {e}", reader.buffer_position()))
        })?;
        match event {
            Event::DocType(_) => {
                return Err(Problem::Malformed(
                    "a document type declaration is not allowed (entity expansion is refused)"
                        .into(),
                ));
            }
            Event::Start(ref tag) | Event::Empty(ref tag) => {
                let is_empty = matches!(event, Event::Empty(_));
                saw_root = true;
                match tag.local_name().as_ref() {
                    b"testsuite" => {
                        if let Some(parent) = suites.last_mut() {
                            parent.nested_suites += 1;
                        }
                        let frame = SuiteFrame {
                            name: attr(tag, b"name")?.unwrap_or_default(),
                            declared: attr(tag, b"tests")?
                                .map(|t| {
                                    t.trim().parse::<u64>().map_err(|_| {
                                        Problem::Malformed(format!(
                                            "testsuite tests={t:?} is not a count"
                                        ))
                                    })
                                })
                                .transpose()?,
                            direct_cases: 0,
                            nested_suites: 0,
                        };
                        if is_empty {
                            close_suite(frame)?;
                        } else {
                            suites.push(frame);
                        }
                    }
                    b"testcase" => {
                        if case.is_some() {
                            return Err(Problem::Malformed("a testcase inside a testcase".into()));
                        }
                        if let Some(suite) = suites.last_mut() {
                            suite.direct_cases += 1;
                        }
                        let name = attr(tag, b"name")?.ok_or_else(|| {
                            Problem::Malformed("a testcase without a name".into())
                        })?;
                        let classname = attr(tag, b"classname")?.unwrap_or_default();
                        let file = attr(tag, b"file")?.unwrap_or_default();
                        let open = OpenCase {
                            file,
                            classname,
                            name,
                            outcome: Outcome::Passed,
                            message: None,
                        };
                        if is_empty {
                            finish_case(open, &mut report);
                        } else {
                            case = Some(open);
                        }
                    }
                    child @ (b"failure" | b"error" | b"skipped") => {
                        let Some(open) = case.as_mut() else {
                            continue;
                        };
                        let outcome = match child {
                            b"failure" => Outcome::Failed,
                            b"error" => Outcome::Error,
                            _ => Outcome::Skipped,
                        };
                        // A teardown error after a failure stays a failure; anything beats a skip.
                        if open.outcome == Outcome::Passed
                            || (open.outcome == Outcome::Skipped && outcome != Outcome::Skipped)
                        {
                            open.outcome = outcome;
                            open.message = attr(tag, b"message")?;
                        }
                    }
                    _ => {}
                }
            }
            Event::End(ref tag) => match tag.local_name().as_ref() {
                b"testsuite" => {
                    let frame = suites
                        .pop()
                        .ok_or_else(|| Problem::Malformed("unbalanced </testsuite>".into()))?;
                    close_suite(frame)?;
                }
                b"testcase" => {
                    if let Some(open) = case.take() {
                        finish_case(open, &mut report);
                    }
                }
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    if !saw_root {
        return Err(Problem::Malformed("no XML element".into()));
    }
    if !suites.is_empty() || case.is_some() {
        return Err(Problem::Malformed(
            "the document ends inside an element (truncated?)".into(),
        ));
    }
    Ok(report)
}

fn close_suite(frame: SuiteFrame) -> Result<(), Problem> {
    if let Some(declared) = frame.declared
        && frame.nested_suites == 0
        && declared != frame.direct_cases
    {
        return Err(Problem::Inconsistent(format!(
            "suite {:?} declares {declared} tests but lists {}",
            frame.name, frame.direct_cases
        )));
    }
    Ok(())
}

fn finish_case(open: OpenCase, report: &mut TestReport) {
    // pytest reports a module that fails to import as a nameless-class case.
    if open.classname.is_empty()
        && open.outcome == Outcome::Error
        && open.message.as_deref() == Some("collection failure")
    {
        let file = if open.file.is_empty() {
            format!("{}.py", open.name.replace('.', "/"))
        } else {
            open.file
        };
        report.collection_errors.push(CollectionError {
            file,
            message: "collection failure".into(),
        });
        return;
    }
    let (name, variant) = split_variant(&open.name);
    let file = if open.file.is_empty() {
        open.classname.clone()
    } else {
        open.file
    };
    report.cases.push(CaseResult {
        file,
        suite: open.classname,
        name,
        variant,
        outcome: open.outcome,
        message: open.message,
    });
}

/// `test_pages[2-odd]` → (`test_pages`, `Some("2-odd")`).
fn split_variant(name: &str) -> (String, Option<String>) {
    match name.split_once('[') {
        Some((base, rest)) if rest.ends_with(']') => {
            (base.to_owned(), Some(rest[..rest.len() - 1].to_owned()))
        }
        _ => (name.to_owned(), None),
    }
}

fn attr(tag: &BytesStart<'_>, key: &[u8]) -> Result<Option<String>, Problem> {
    for attribute in tag.attributes() {
        let attribute = attribute.map_err(|e| Problem::Malformed(format!("bad attribute: {e}")))?;
        if attribute.key.local_name().as_ref() == key {
            let value = attribute
                .unescape_value()
                .map_err(|e| Problem::Malformed(format!("bad attribute value: {e}")))?;
            return Ok(Some(value.into_owned()));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PYTEST: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests"><testsuite name="pytest" errors="2" failures="2" skipped="2" tests="7">
<testcase classname="" name="tests.test_b" file="tests/test_b.py" time="0.000"><error message="collection failure">ImportError</error></testcase>
<testcase classname="tests.test_a" name="test_ok" file="tests/test_a.py" line="4" time="0.001" />
<testcase classname="tests.test_a" name="test_param[2]" file="tests/test_a.py" line="6"><failure message="assert 2 == 1">E</failure></testcase>
<testcase classname="tests.test_a" name="test_setup" file="tests/test_a.py"><error message="failed on setup with &quot;RuntimeError: db down&quot;">E</error></testcase>
<testcase classname="tests.test_a" name="test_skip" file="tests/test_a.py"><skipped type="pytest.skip" message="later">x</skipped></testcase>
<testcase classname="tests.test_a" name="test_xf" file="tests/test_a.py"><skipped type="pytest.xfail" message="" /></testcase>
<testcase classname="tests.test_a.TestK" name="test_m" file="tests/test_a.py" />
</testsuite></testsuites>"#;

    #[test]
    fn pytest_outcomes_variants_and_collection_errors_are_read() {
        let ReportOutcome::Parsed(report) = parse(PYTEST.as_bytes()) else {
            panic!("expected a parsed report");
        };
        assert_eq!(report.collection_errors[0].file, "tests/test_b.py");
        let outcomes: Vec<(&str, Option<&str>, Outcome)> = report
            .cases
            .iter()
            .map(|c| (c.name.as_str(), c.variant.as_deref(), c.outcome))
            .collect();
        assert_eq!(
            outcomes,
            vec![
                ("test_ok", None, Outcome::Passed),
                ("test_param", Some("2"), Outcome::Failed),
                ("test_setup", None, Outcome::Error),
                ("test_skip", None, Outcome::Skipped),
                ("test_xf", None, Outcome::Skipped),
                ("test_m", None, Outcome::Passed),
            ]
        );
        assert_eq!(report.cases[5].suite, "tests.test_a.TestK");
    }

    #[test]
    fn a_count_that_disagrees_with_the_cases_is_inconsistent() {
        let xml = PYTEST.replace("tests=\"7\"", "tests=\"9\"");
        assert!(matches!(
            parse(xml.as_bytes()),
            ReportOutcome::Inconsistent(_)
        ));
    }

    #[test]
    fn truncated_empty_and_entity_laden_reports_give_no_result() {
        let truncated = &PYTEST[..PYTEST.len() / 2];
        assert!(matches!(
            parse(truncated.as_bytes()),
            ReportOutcome::Malformed(_)
        ));
        let empty = r#"<testsuites><testsuite name="x" tests="0"></testsuite></testsuites>"#;
        assert_eq!(parse(empty.as_bytes()), ReportOutcome::ZeroTests);
        let bomb = r#"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]>
<testsuite tests="1"><testcase name="&lol2;"/></testsuite>"#;
        assert!(matches!(
            parse(bomb.as_bytes()),
            ReportOutcome::Malformed(_)
        ));
        assert!(matches!(
            parse(b"not xml at all"),
            ReportOutcome::Malformed(_)
        ));
    }
}
