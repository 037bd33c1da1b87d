//! A batch's output and durations split back into its cases. pytest runs a batch with
//! `-o junit_logging=all`, so its JUnit report carries each test's own time and its captured
//! stdout, stderr and log in `<system-out>`/`<system-err>`, and a failure's traceback in the
//! `<failure>`/`<error>` element. Each case gets those as artifacts of its own, as if it had run
//! alone; a case the report does not name (a module that failed to import) keeps the batch's.

use assay_common::job::{ArtifactRef, JobResult};
use assay_common::outcome::{CaseResult, Outcome};
use assay_common::suite::SuiteCase;
use assay_transport::store::{ArtifactError, ArtifactStore, StoreError, read_named};
use bytes::Bytes;
use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

/// One `<testcase>` of a pytest JUnit report, with what it captured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Capture {
    /// The result as the report parser names it, so [`SuiteCase::owns`] can match it.
    pub result: Option<CaseResult>,
    /// The `time` attribute: setup, call and teardown.
    pub seconds: Option<f64>,
    /// The case's `<system-out>`.
    pub stdout: String,
    /// The case's `<system-err>`.
    pub stderr: String,
    /// The text of `<failure>` and `<error>` elements: pytest's traceback.
    pub traceback: String,
}

/// Why a batch's report could not be split into its cases.
#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    /// The JUnit report does not parse; the parser's message.
    #[error("the batch's JUnit report is malformed: {0}")]
    Malformed(String),
    /// A case's output could not be stored.
    #[error("failed to store a batch's per-case output")]
    Store(#[from] StoreError),
    /// The batch's report could not be read from the store.
    #[error("failed to read a batch's report")]
    Report(#[from] Box<ArtifactError>),
}

/// Which text a `<testcase>` child holds.
#[derive(Clone, Copy, PartialEq)]
enum Field {
    Stdout,
    Stderr,
    Traceback,
}

/// Reads each `<testcase>`'s time and captured text. A document type declaration is refused,
/// as the report parser refuses it.
pub fn pytest_captures(report: &[u8]) -> Result<Vec<Capture>, SplitError> {
    let mut reader = Reader::from_reader(report);
    let mut captures = Vec::new();
    let mut open: Option<Capture> = None;
    let mut field: Option<Field> = None;
    let mut buf = Vec::new();
    loop {
        let event = next_event(&mut reader, &mut buf)?;
        match event {
            Event::Start(ref tag) | Event::Empty(ref tag) => {
                let empty = matches!(event, Event::Empty(_));
                match tag.local_name().as_ref() {
                    b"testcase" => {
                        let capture = start_case(tag)?;
                        if empty {
                            captures.push(capture);
                        } else {
                            open = Some(capture);
                        }
                    }
                    name @ (b"failure" | b"error" | b"skipped") => {
                        if let Some(case) = open.as_mut().and_then(|c| c.result.as_mut()) {
                            let outcome = match name {
                                b"failure" => Outcome::Failed,
                                b"error" => Outcome::Error,
                                _ => Outcome::Skipped,
                            };
                            if case.outcome == Outcome::Passed
                                || (case.outcome == Outcome::Skipped && outcome != Outcome::Skipped)
                            {
                                case.outcome = outcome;
                                case.message = attr(tag, b"message")?;
                            }
                        }
                        if !empty && name != b"skipped" {
                            field = Some(Field::Traceback);
                        }
                    }
                    b"system-out" if !empty => field = Some(Field::Stdout),
                    b"system-err" if !empty => field = Some(Field::Stderr),
                    _ => {}
                }
            }
            Event::Text(ref text) => {
                let text = text.unescape().map_err(|e| malformed(&e))?;
                append(&mut open, field, &text);
            }
            Event::CData(ref text) => {
                append(&mut open, field, &String::from_utf8_lossy(text));
            }
            Event::End(ref tag) => match tag.local_name().as_ref() {
                b"testcase" => {
                    if let Some(capture) = open.take() {
                        captures.push(capture);
                    }
                    field = None;
                }
                b"failure" | b"error" | b"system-out" | b"system-err" => field = None,
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    for capture in &mut captures {
        capture.stdout = drop_empty_sections(&capture.stdout);
        capture.stderr = drop_empty_sections(&capture.stderr);
    }
    Ok(captures)
}

/// The node ids a batch run through [`assay_common::runner::PYTEST_SELECT_SCRIPT`] collected,
/// in collection order: its report's suite-level `assay.collected` properties. Empty when the
/// report has none (a session that never finished collecting, another command).
pub fn collected_ids(report: &[u8]) -> Result<Vec<String>, SplitError> {
    let mut reader = Reader::from_reader(report);
    let mut ids = Vec::new();
    let mut in_case = false;
    let mut buf = Vec::new();
    loop {
        let event = next_event(&mut reader, &mut buf)?;
        match event {
            Event::Start(ref tag) if tag.local_name().as_ref() == b"testcase" => in_case = true,
            Event::End(ref tag) if tag.local_name().as_ref() == b"testcase" => in_case = false,
            Event::Start(ref tag) | Event::Empty(ref tag)
                if !in_case && tag.local_name().as_ref() == b"property" =>
            {
                if attr(tag, b"name")?.as_deref()
                    == Some(assay_common::runner::PYTEST_COLLECTED_PROPERTY)
                    && let Some(id) = attr(tag, b"value")?
                {
                    ids.push(id);
                }
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    Ok(ids)
}

/// The report's next event. A document type declaration is refused, as the report parser
/// refuses it.
fn next_event<'b>(
    reader: &mut Reader<&[u8]>,
    buf: &'b mut Vec<u8>,
) -> Result<Event<'b>, SplitError> {
    match reader.read_event_into(buf) {
        Ok(Event::DocType(_)) => Err(malformed(&"a document type declaration")),
        Ok(event) => Ok(event),
        Err(e) => Err(malformed(&e)),
    }
}

fn malformed(e: &dyn std::fmt::Display) -> SplitError {
    SplitError::Malformed(e.to_string())
}

fn append(open: &mut Option<Capture>, field: Option<Field>, text: &str) {
    let (Some(capture), Some(field)) = (open.as_mut(), field) else {
        return;
    };
    let target = match field {
        Field::Stdout => &mut capture.stdout,
        Field::Stderr => &mut capture.stderr,
        Field::Traceback => &mut capture.traceback,
    };
    if field == Field::Traceback && !target.is_empty() {
        target.push('\n');
    }
    target.push_str(text);
}

/// The result a `<testcase>` names, as the pytest dialect of the report parser reads it; a
/// module's collection failure (a nameless class) names no case.
fn start_case(tag: &BytesStart<'_>) -> Result<Capture, SplitError> {
    let name = attr(tag, b"name")?.unwrap_or_default();
    let classname = attr(tag, b"classname")?.unwrap_or_default();
    let file = attr(tag, b"file")?.unwrap_or_default();
    let seconds = attr(tag, b"time")?.and_then(|t| t.trim().parse::<f64>().ok());
    let result = (!classname.is_empty()).then(|| {
        let (bare, variant) = match name.split_once('[') {
            Some((base, rest)) if rest.ends_with(']') => {
                (base.to_owned(), Some(rest[..rest.len() - 1].to_owned()))
            }
            _ => (name.clone(), None),
        };
        CaseResult {
            file: if file.is_empty() {
                classname.clone()
            } else {
                file
            },
            suite: classname,
            name: bare,
            variant,
            outcome: Outcome::Passed,
            message: None,
        }
    });
    Ok(Capture {
        result,
        seconds,
        ..Capture::default()
    })
}

fn attr(tag: &BytesStart<'_>, key: &[u8]) -> Result<Option<String>, SplitError> {
    for attribute in tag.attributes() {
        let attribute = attribute.map_err(|e| SplitError::Malformed(e.to_string()))?;
        if attribute.key.local_name().as_ref() == key {
            let value = attribute
                .unescape_value()
                .map_err(|e| SplitError::Malformed(e.to_string()))?;
            return Ok(Some(value.into_owned()));
        }
    }
    Ok(None)
}

/// pytest heads each captured stream with `--- Captured Out ---`; a stream with nothing in it
/// is left out, so a quiet test's artifact is empty.
fn drop_empty_sections(text: &str) -> String {
    let is_header = |line: &str| {
        let inner = line.trim().trim_matches('-').trim();
        line.trim_start().starts_with("---") && inner.starts_with("Captured ")
    };
    let mut sections: Vec<(Option<&str>, String)> = vec![(None, String::new())];
    for line in text.split_inclusive('\n') {
        if is_header(line) {
            sections.push((Some(line), String::new()));
        } else if let Some((_, body)) = sections.last_mut() {
            body.push_str(line);
        }
    }
    let mut kept = String::new();
    for (header, body) in sections {
        if body.trim().is_empty() {
            continue;
        }
        if let Some(header) = header {
            kept.push_str(header);
        }
        kept.push_str(body.trim_end_matches('\n'));
        kept.push('\n');
    }
    kept
}

/// A case's share of its batch: its own time and its own output artifacts.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseShare {
    /// The case's own time, in seconds, when its report gives one.
    pub seconds: Option<f64>,
    /// The case's own output, stored apart from its batch's.
    pub artifacts: Vec<ArtifactRef>,
}

/// Splits a pytest batch's report among `members` and stores each case's output under
/// `proofs/RUN/jobs/INDEX/cases/REF/`. `None` for a case the report names no result of, and
/// for every case when the batch left no report.
pub async fn split_pytest_batch(
    store: &dyn ArtifactStore,
    prefix: &str,
    members: &[&SuiteCase],
    result: &JobResult,
) -> Result<Vec<Option<CaseShare>>, SplitError> {
    let mut shares = vec![None; members.len()];
    let Some(bytes) = read_named(store, result, "report")
        .await
        .map_err(Box::new)?
    else {
        return Ok(shares);
    };
    let captures = pytest_captures(&bytes)?;
    for (case, share) in members.iter().zip(shares.iter_mut()) {
        let mine: Vec<&Capture> = captures
            .iter()
            .filter(|c| c.result.as_ref().is_some_and(|r| case.owns(r)))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let joined = |get: fn(&Capture) -> &str| {
            mine.iter()
                .map(|c| get(c))
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
                .join("\n")
        };
        let mut artifacts = Vec::new();
        let streams = [
            ("stdout", joined(|c| &c.stdout)),
            ("stderr", joined(|c| &c.stderr)),
            ("traceback", joined(|c| &c.traceback)),
        ];
        for (name, text) in streams {
            if name == "traceback" && text.is_empty() {
                continue;
            }
            let key = format!("{prefix}/cases/{}/{name}.log", case.reference());
            artifacts.push(store.put_bytes(name, &key, Bytes::from(text)).await?);
        }
        let seconds = mine
            .iter()
            .map(|c| c.seconds)
            .sum::<Option<f64>>()
            .map(|s| (s * 1000.0).round() / 1000.0);
        *share = Some(CaseShare { seconds, artifacts });
    }
    Ok(shares)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BATCH: &str = r#"<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="0" failures="1" skipped="0" tests="3" time="0.067"><testcase classname="tests.test_pager" name="test_a" file="tests/test_pager.py" line="1" time="0.005"><system-out>--------------------------------- Captured Log ---------------------------------

--------------------------------- Captured Out ---------------------------------
out of a

</system-out><system-err>--------------------------------- Captured Err ---------------------------------
err of a

</system-err></testcase><testcase classname="tests.test_pager" name="test_b[2-odd]" file="tests/test_pager.py" line="3" time="0.250"><failure message="assert 1 == 2">&gt;       assert 1 == 2
E       assert 1 == 2</failure><system-out>--------------------------------- Captured Out ---------------------------------
out of b &amp; &lt;b&gt;
</system-out></testcase><testcase classname="tests.test_pager" name="test_c" file="tests/test_pager.py" line="6" time="0.000"/><testcase classname="" name="tests.test_broken" time="0.000"><error message="collection failure">ImportError</error></testcase></testsuite></testsuites>"#;

    #[test]
    fn each_testcase_keeps_its_own_time_output_and_traceback() {
        let captures = pytest_captures(BATCH.as_bytes()).unwrap();
        assert_eq!(captures.len(), 4);
        let a = &captures[0];
        assert_eq!(a.seconds, Some(0.005));
        assert_eq!(
            a.stdout,
            "--------------------------------- Captured Out ---------------------------------\nout of a\n"
        );
        assert!(a.stderr.ends_with("err of a\n"), "{:?}", a.stderr);
        assert_eq!(a.traceback, "");
        let b = &captures[1];
        let result = b.result.as_ref().unwrap();
        assert_eq!(
            (result.name.as_str(), result.variant.as_deref()),
            ("test_b", Some("2-odd"))
        );
        assert_eq!(result.outcome, Outcome::Failed);
        assert!(b.stdout.ends_with("out of b & <b>\n"), "{:?}", b.stdout);
        assert_eq!(b.traceback, ">       assert 1 == 2\nE       assert 1 == 2");
        assert_eq!(
            (captures[2].stdout.as_str(), captures[2].seconds),
            ("", Some(0.0))
        );
        // A module that failed to import is no case's.
        assert_eq!(captures[3].result, None);
    }

    #[test]
    fn a_selecting_batch_names_what_it_collected_in_order() {
        let doc = r#"<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="1"><properties><property name="assay.collected" value="t.py::test_b[x &amp; y]" /><property name="other" value="no" /><property name="assay.collected" value="t.py::test_a" /></properties><testcase classname="t" name="test_a" file="t.py" time="0.1"><properties><property name="assay.collected" value="not a suite property" /></properties></testcase></testsuite></testsuites>"#;
        assert_eq!(
            collected_ids(doc.as_bytes()).unwrap(),
            ["t.py::test_b[x & y]", "t.py::test_a"]
        );
        assert!(collected_ids(BATCH.as_bytes()).unwrap().is_empty());
    }

    #[test]
    fn a_document_type_declaration_is_refused() {
        let doc = r#"<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><testsuites/>"#;
        assert!(matches!(
            pytest_captures(doc.as_bytes()),
            Err(SplitError::Malformed(_))
        ));
    }
}
