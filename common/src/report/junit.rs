//! JUnit XML, as pytest (`junit_family=xunit1`) and the JVM/.NET/Rust/Ruby runners (Maven Surefire, Gradle, cargo-nextest, RSpec) write it. Safe by construction: a
//! document type declaration is refused (no entity expansion, no external entities), and only
//! the predefined XML entities are decoded.

use crate::outcome::{CaseResult, CollectionError, Outcome, ReportOutcome, TestReport};
use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

/// Whose JUnit XML this is: the producers disagree on what a file, a name and a count mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// pytest, `junit_family=xunit1`: `file` attributes, a nameless-class collection failure.
    Pytest,
    /// Any other producer: `classname` (or `file`) as the file, `module::name` (nextest) and
    /// `name()`/`name(int)[1]` (Surefire, Gradle) reduced to the bare name, and the suites'
    /// `failures`/`errors`/`skipped` counts checked against the cases.
    Generic,
    /// cargo-nextest read by the cargo runner: counted as [`Dialect::Generic`], but a case's
    /// `classname` (its binary id) is its file and its `name` (`tests::counts_pages`) is kept
    /// whole, as `cargo test` names it; see [`crate::report::libtest`].
    Nextest,
}

/// Parses pytest's JUnit XML; see [`parse_dialect`].
pub fn parse(bytes: &[u8]) -> ReportOutcome {
    parse_dialect(bytes, Dialect::Pytest)
}

/// Parses JUnit XML and checks it: every suite's (and the root's) declared counts must agree
/// with what it lists, and at least one case (or collection error) must be present.
///
/// pytest ≥ 9 runs `subTest` blocks and the `subtests` fixture itself and counts every subtest
/// in `tests=` while it lists one `<testcase>` per test, a failing subtest adding one more
/// `<failure>` to its test's case. So for pytest the declared `tests` may exceed the listed
/// cases, never fall short of them, and the declared `failures`, `errors` and `skipped` must
/// equal the elements listed (pytest 8 and 9 both count one per element). A report cut short
/// or with a failing case taken out stays refused; one with a passing case taken out reads as
/// a run that lacks that case, which can never name a pass.
pub fn parse_dialect(bytes: &[u8], dialect: Dialect) -> ReportOutcome {
    match parse_checked(bytes, dialect) {
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
    declared_failures: Option<u64>,
    declared_errors: Option<u64>,
    declared_skipped: Option<u64>,
    /// Cases this suite holds, nested suites included.
    cases: Counts,
    /// The `(classname, name)` of the last case listed directly in this suite.
    last_case: Option<(String, String)>,
}

/// What a suite lists: its cases by outcome, and its `<failure>`/`<error>`/`<skipped>`
/// elements (one case may hold several: a failing subtest each, or a teardown error).
#[derive(Clone, Copy, Default)]
struct Counts {
    total: u64,
    /// Cases that repeat the case before them: pytest closes a failed test's case and opens a
    /// second one for its teardown error, and counts the test once.
    repeats: u64,
    failures: u64,
    errors: u64,
    skipped: u64,
    elements: Elements,
}

#[derive(Clone, Copy, Default)]
struct Elements {
    failures: u64,
    errors: u64,
    skipped: u64,
}

struct OpenCase {
    file: String,
    classname: String,
    name: String,
    outcome: Outcome,
    message: Option<String>,
    elements: Elements,
}

fn parse_checked(bytes: &[u8], dialect: Dialect) -> Result<TestReport, Problem> {
    let mut reader = Reader::from_reader(bytes);
    reader.config_mut().trim_text(true);
    let mut report = TestReport::default();
    let mut suites: Vec<SuiteFrame> = Vec::new();
    let mut case: Option<OpenCase> = None;
    let mut saw_root = false;
    let mut root_declared: Option<u64> = None;
    let mut all_cases: u64 = 0;
    let mut all_repeats: u64 = 0;
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
                    b"testsuites" if suites.is_empty() => {
                        root_declared = count_attr(tag, b"tests")?;
                    }
                    b"testsuite" => {
                        let frame = SuiteFrame {
                            name: attr(tag, b"name")?.unwrap_or_default(),
                            declared: count_attr(tag, b"tests")?,
                            declared_failures: count_attr(tag, b"failures")?,
                            declared_errors: count_attr(tag, b"errors")?,
                            declared_skipped: count_attr(tag, b"skipped")?,
                            cases: Counts::default(),
                            last_case: None,
                        };
                        if is_empty {
                            let counts = close_suite(frame, dialect)?;
                            if let Some(parent) = suites.last_mut() {
                                parent.cases.add(counts);
                            }
                        } else {
                            suites.push(frame);
                        }
                    }
                    b"testcase" => {
                        if case.is_some() {
                            return Err(Problem::Malformed("a testcase inside a testcase".into()));
                        }
                        all_cases += 1;
                        let name = attr(tag, b"name")?.ok_or_else(|| {
                            Problem::Malformed("a testcase without a name".into())
                        })?;
                        let classname = attr(tag, b"classname")?.unwrap_or_default();
                        if let Some(suite) = suites.last_mut() {
                            let key = (classname.clone(), name.clone());
                            if suite.last_case.as_ref() == Some(&key) {
                                suite.cases.repeats += 1;
                                all_repeats += 1;
                            }
                            suite.last_case = Some(key);
                        }
                        let file = attr(tag, b"file")?.unwrap_or_default();
                        let open = OpenCase {
                            file,
                            classname,
                            name,
                            outcome: Outcome::Passed,
                            message: None,
                            elements: Elements::default(),
                        };
                        if is_empty {
                            let elements = open.elements;
                            let outcome = finish_case(open, &mut report, dialect);
                            if let Some(suite) = suites.last_mut() {
                                suite.cases.count(outcome, elements);
                            }
                        } else {
                            case = Some(open);
                        }
                    }
                    child @ (b"failure" | b"error" | b"skipped") => {
                        let Some(open) = case.as_mut() else {
                            continue;
                        };
                        let outcome = match child {
                            b"failure" => {
                                open.elements.failures += 1;
                                Outcome::Failed
                            }
                            b"error" => {
                                open.elements.errors += 1;
                                Outcome::Error
                            }
                            _ => {
                                open.elements.skipped += 1;
                                Outcome::Skipped
                            }
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
                    let counts = close_suite(frame, dialect)?;
                    if let Some(parent) = suites.last_mut() {
                        parent.cases.add(counts);
                    }
                }
                b"testcase" => {
                    if let Some(open) = case.take() {
                        let elements = open.elements;
                        let outcome = finish_case(open, &mut report, dialect);
                        if let Some(suite) = suites.last_mut() {
                            suite.cases.count(outcome, elements);
                        }
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
    if let Some(declared) = root_declared
        && !dialect.tests_count_agrees(declared, all_cases, all_repeats)
    {
        return Err(Problem::Inconsistent(format!(
            "the report declares {declared} tests but lists {all_cases}"
        )));
    }
    Ok(report)
}

fn count_attr(tag: &BytesStart<'_>, key: &[u8]) -> Result<Option<u64>, Problem> {
    attr(tag, key)?
        .map(|value| {
            value.trim().parse::<u64>().map_err(|_| {
                Problem::Malformed(format!(
                    "{}={value:?} is not a count",
                    String::from_utf8_lossy(key)
                ))
            })
        })
        .transpose()
}

impl Counts {
    fn add(&mut self, other: Counts) {
        self.total += other.total;
        self.repeats += other.repeats;
        self.failures += other.failures;
        self.errors += other.errors;
        self.skipped += other.skipped;
        self.elements.failures += other.elements.failures;
        self.elements.errors += other.elements.errors;
        self.elements.skipped += other.elements.skipped;
    }

    fn count(&mut self, outcome: Option<Outcome>, elements: Elements) {
        self.total += 1;
        self.elements.failures += elements.failures;
        self.elements.errors += elements.errors;
        self.elements.skipped += elements.skipped;
        match outcome {
            Some(Outcome::Failed) => self.failures += 1,
            Some(Outcome::Error) => self.errors += 1,
            Some(Outcome::Skipped) => self.skipped += 1,
            Some(Outcome::Passed) | None => {}
        }
    }
}

fn close_suite(frame: SuiteFrame, dialect: Dialect) -> Result<Counts, Problem> {
    let counts = frame.cases;
    if let Some(declared) = frame.declared
        && !dialect.tests_count_agrees(declared, counts.total, counts.repeats)
    {
        return Err(Problem::Inconsistent(format!(
            "suite {:?} declares {declared} tests but lists {}",
            frame.name, counts.total
        )));
    }
    // pytest counts every element it writes (a case may hold several); the generic producers
    // count the cases by their outcome.
    let listed = match dialect {
        Dialect::Pytest => (
            counts.elements.failures,
            counts.elements.errors,
            counts.elements.skipped,
        ),
        Dialect::Generic | Dialect::Nextest => (counts.failures, counts.errors, counts.skipped),
    };
    for (label, declared, listed) in [
        ("failures", frame.declared_failures, listed.0),
        ("errors", frame.declared_errors, listed.1),
        ("skipped", frame.declared_skipped, listed.2),
    ] {
        if let Some(declared) = declared
            && declared != listed
        {
            return Err(Problem::Inconsistent(format!(
                "suite {:?} declares {declared} {label} but lists {listed}",
                frame.name
            )));
        }
    }
    Ok(counts)
}

impl Dialect {
    /// Whether a declared `tests` count agrees with the cases listed: exactly, except that
    /// pytest also counts subtests and teardown errors it lists no case of their own for, and
    /// counts a failed test's repeated case (for its teardown error) once.
    fn tests_count_agrees(self, declared: u64, listed: u64, repeats: u64) -> bool {
        match self {
            Dialect::Pytest => declared >= listed.saturating_sub(repeats),
            Dialect::Generic | Dialect::Nextest => declared == listed,
        }
    }
}

/// Records a case (or the collection error it stands for); returns the outcome it counts as
/// in its suite's totals (`None` for an entry that is not a test).
fn finish_case(open: OpenCase, report: &mut TestReport, dialect: Dialect) -> Option<Outcome> {
    let raw_outcome = open.outcome;
    match dialect {
        Dialect::Pytest => finish_pytest_case(open, report),
        Dialect::Generic => finish_generic_case(open, report),
        Dialect::Nextest => report.cases.push(CaseResult {
            file: open.classname,
            suite: String::new(),
            name: open.name,
            variant: None,
            outcome: open.outcome,
            message: open.message,
        }),
    }
    Some(raw_outcome)
}

/// What a failure of pytest's session node (whose node id is empty) is reported as: it names
/// no file.
pub const SESSION: &str = "the test session";

/// `NAME` of `NAME[assay-rerun]`: what the re-run plugin names a module it collected again.
fn rerun_of(named: &str) -> Option<&str> {
    named
        .strip_suffix(']')?
        .strip_suffix(super::libtest::RERUN_VARIANT)?
        .strip_suffix('[')
}

fn finish_pytest_case(open: OpenCase, report: &mut TestReport) {
    // pytest reports a module that fails to import as a nameless-class case.
    if open.classname.is_empty()
        && open.outcome == Outcome::Error
        && open.message.as_deref() == Some("collection failure")
    {
        // The re-run plugin's second import of a module that failed (`FILE[assay-rerun]`) is
        // that module's re-run, not an error of its own; pytest 9.2 keeps `.py` in its name.
        let (file_rerun, name_rerun) = (rerun_of(&open.file), rerun_of(&open.name));
        let rerun = file_rerun.is_some() || name_rerun.is_some();
        let file = file_rerun.unwrap_or(&open.file);
        let name = name_rerun.map_or(open.name.as_str(), |n| n.strip_suffix(".py").unwrap_or(n));
        let file = if !file.is_empty() {
            file.to_owned()
        } else if !name.is_empty() {
            format!("{}.py", name.replace('.', "/"))
        } else if report.collection_errors.is_empty() {
            // The session node (node id ""): a failure of the session's own collection.
            SESSION.to_owned()
        } else {
            // Under `-x` or `--maxfail`, after a module failed to import, pytest fails the
            // session's collection too ("stopping after 1 failures"): only the module failed.
            return;
        };
        let into = if rerun {
            &mut report.collection_reruns
        } else {
            &mut report.collection_errors
        };
        into.push(CollectionError {
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

fn finish_generic_case(open: OpenCase, report: &mut TestReport) {
    let (name, variant) = split_variant(&open.name);
    // cargo-nextest: `tests::counts_pages`; the module path joins the suite.
    let (module, name) = match name.rsplit_once("::") {
        Some((module, bare)) => (Some(module.to_owned()), bare.to_owned()),
        None => (None, name),
    };
    // Surefire/Gradle (JUnit 5): `countsPages()`, `pages(int)`.
    let name = match name.split_once('(') {
        Some((bare, _)) if name.ends_with(')') && !bare.is_empty() => bare.to_owned(),
        _ => name,
    };
    let file = if open.file.is_empty() {
        open.classname.clone()
    } else {
        open.file.trim_start_matches("./").to_owned()
    };
    let suite = match module {
        Some(module) if open.classname.is_empty() => module,
        Some(module) => format!("{}::{module}", open.classname),
        None => open.classname,
    };
    report.cases.push(CaseResult {
        file,
        suite,
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
<testsuites name="pytest tests"><testsuite name="pytest" errors="2" failures="1" skipped="2" tests="7">
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

    /// pytest 8 and 9 with `-x`, after `tests/test_format.py` failed to import: the session's
    /// own collection fails as well, as a case with an empty name and file.
    const STOPPED_AFTER_A_COLLECTION_ERROR: &str = r#"<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="2" failures="0" skipped="0" tests="2" time="0.240"><testcase classname="" name="tests.test_format" file="tests/test_format.py" time="0.000"><error message="collection failure">tests/test_format.py:39: in &lt;module&gt;
E   KeyError: 'major'</error></testcase><testcase classname="" name="" file="" time="0.000"><error message="collection failure">.venv/lib/python3.11/site-packages/_pytest/main.py:696: in pytest_collectstart
    raise self.Failed(self.shouldfail)
E   _pytest.main.Failed: stopping after 1 failures</error></testcase></testsuite></testsuites>"#;

    #[test]
    fn a_session_collection_failure_names_the_session_and_an_x_stop_is_no_error() {
        let ReportOutcome::Parsed(report) = parse(STOPPED_AFTER_A_COLLECTION_ERROR.as_bytes())
        else {
            panic!("expected a parsed report");
        };
        let files: Vec<&str> = report
            .collection_errors
            .iter()
            .map(|e| e.file.as_str())
            .collect();
        assert_eq!(files, ["tests/test_format.py"]);
        // The session's collection failing on its own (a collection hook raising) is reported.
        let alone = STOPPED_AFTER_A_COLLECTION_ERROR
            .replacen(r#"<testcase classname="" name="tests.test_format" file="tests/test_format.py" time="0.000"><error message="collection failure">tests/test_format.py:39: in &lt;module&gt;
E   KeyError: 'major'</error></testcase>"#, "", 1)
            .replace(r#"errors="2""#, r#"errors="1""#)
            .replace(r#"tests="2""#, r#"tests="1""#);
        let ReportOutcome::Parsed(report) = parse(alone.as_bytes()) else {
            panic!("expected a parsed report: {alone}");
        };
        assert_eq!(report.collection_errors[0].file, SESSION);
    }

    /// pytest 9 with the re-run plugin, after `tests/test_format.py` failed to import twice.
    const A_COLLECTION_ERROR_AND_ITS_RERUN: &str = r#"<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="2" failures="0" skipped="0" tests="2" time="0.110"><testcase classname="" name="tests.test_format" file="tests/test_format.py" time="0.000"><error message="collection failure">tests/test_format.py:1: in &lt;module&gt;
    from semver import Version
src/semver/version.py:40: in &lt;module&gt;
E   KeyError: 'major'</error></testcase><testcase classname="" name="tests.test_format.py[assay-rerun]" file="tests/test_format.py[assay-rerun]" time="0.000"><error message="collection failure">tests/test_format.py:1: in &lt;module&gt;
    from semver import Version
src/semver/version.py:40: in &lt;module&gt;
E   KeyError: 'major'</error></testcase></testsuite></testsuites>"#;

    #[test]
    fn a_module_that_fails_to_import_again_is_its_errors_rerun_not_a_second_error() {
        let files = |errors: &[CollectionError]| -> Vec<String> {
            errors.iter().map(|e| e.file.clone()).collect()
        };
        let ReportOutcome::Parsed(report) = parse(A_COLLECTION_ERROR_AND_ITS_RERUN.as_bytes())
        else {
            panic!("expected a parsed report");
        };
        assert_eq!(files(&report.collection_errors), ["tests/test_format.py"]);
        assert_eq!(files(&report.collection_reruns), ["tests/test_format.py"]);
        assert!(report.cases.is_empty(), "{:?}", report.cases);
        // A pytest that writes no `file` attribute names the module by its dotted name only.
        let unfiled = A_COLLECTION_ERROR_AND_ITS_RERUN
            .replace(r#" file="tests/test_format.py[assay-rerun]""#, "");
        let ReportOutcome::Parsed(report) = parse(unfiled.as_bytes()) else {
            panic!("expected a parsed report: {unfiled}");
        };
        assert_eq!(files(&report.collection_reruns), ["tests/test_format.py"]);
        assert_eq!(files(&report.collection_errors), ["tests/test_format.py"]);
    }

    #[test]
    fn a_count_that_disagrees_with_the_cases_is_inconsistent() {
        // Fewer tests than cases, or a failure taken out of (or added to) the listing.
        for xml in [
            PYTEST.replace("tests=\"7\"", "tests=\"6\""),
            PYTEST.replace("failures=\"1\"", "failures=\"2\""),
            PYTEST.replace("<failure message=\"assert 2 == 1\">E</failure>", ""),
        ] {
            assert!(
                matches!(parse(xml.as_bytes()), ReportOutcome::Inconsistent(_)),
                "{xml}"
            );
        }
    }

    #[test]
    fn pytest_may_declare_more_tests_than_cases_for_its_subtests() {
        let xml = PYTEST.replace("tests=\"7\"", "tests=\"12\"");
        assert!(matches!(parse(xml.as_bytes()), ReportOutcome::Parsed(_)));
        assert!(matches!(
            parse_dialect(xml.as_bytes(), Dialect::Generic),
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

    /// The classic billion laughs: ten levels of ten references, 10^9 `lol`s if expanded.
    const BILLION_LAUGHS: &str = r#"<?xml version="1.0"?>
<!DOCTYPE testsuite [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<testsuite name="pager" tests="1" failures="0" errors="0" skipped="0">
<testcase classname="pager" name="counts_pages" message="&lol9;"/>
</testsuite>"#;

    /// An external entity that would read a file of the worker into a test's name.
    const EXTERNAL_ENTITY: &str = r#"<?xml version="1.0"?>
<!DOCTYPE testsuite [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<testsuite name="pager" tests="1"><testcase classname="pager" name="&secret;"/></testsuite>"#;

    #[test]
    fn entity_expansion_and_external_entities_are_refused_in_every_dialect() {
        for dialect in [Dialect::Pytest, Dialect::Generic] {
            for document in [BILLION_LAUGHS, EXTERNAL_ENTITY] {
                let ReportOutcome::Malformed(why) = parse_dialect(document.as_bytes(), dialect)
                else {
                    panic!("{dialect:?} accepted {document}")
                };
                assert!(why.contains("document type declaration"), "{why}");
            }
            // Without a DTD an entity reference is undefined: never resolved, never a name.
            let undeclared =
                r#"<testsuite tests="1"><testcase classname="pager" name="&secret;"/></testsuite>"#;
            assert!(matches!(
                parse_dialect(undeclared.as_bytes(), dialect),
                ReportOutcome::Malformed(_)
            ));
        }
        let predefined = r#"<testsuite tests="1"><testcase classname="pager" name="a &lt; b &amp;&#x41;"/></testsuite>"#;
        let ReportOutcome::Parsed(report) = parse_dialect(predefined.as_bytes(), Dialect::Generic)
        else {
            panic!("predefined entities must decode")
        };
        assert_eq!(report.cases[0].name, "a < b &A");
    }

    const NEXTEST: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="nextest-run" tests="3" failures="1" errors="0" uuid="0" timestamp="2026-01-01T00:00:00Z" time="0.01">
<testsuite name="pager" tests="3" disabled="0" errors="0" failures="1">
<testcase name="tests::counts_full_pages" classname="pager" timestamp="2026-01-01T00:00:00Z" time="0.001"></testcase>
<testcase name="tests::counts_partial_page" classname="pager" time="0.001"><failure type="test failure">assertion failed</failure></testcase>
<testcase name="tests::ignored_cache" classname="pager" time="0.000"><skipped/></testcase>
</testsuite></testsuites>"#;

    const SUREFIRE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuite xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" name="example.PageCountTest" time="0.02" tests="3" errors="1" skipped="0" failures="0">
<properties><property name="java.version" value="17"/></properties>
<testcase name="countsPartialPage()" classname="example.PageCountTest" time="0.01"/>
<testcase name="pages(int)[1]" classname="example.PageCountTest" time="0.001"/>
<testcase name="loadsFixture" classname="example.PageCountTest" time="0"><error message="setup" type="java.io.IOException">boom</error></testcase>
</testsuite>"#;

    #[test]
    fn nextest_names_lose_their_module_path_to_the_suite() {
        let ReportOutcome::Parsed(report) = parse_dialect(NEXTEST.as_bytes(), Dialect::Generic)
        else {
            panic!("expected a parsed report")
        };
        let cases: Vec<(&str, &str, &str, Outcome)> = report
            .cases
            .iter()
            .map(|c| {
                (
                    c.file.as_str(),
                    c.suite.as_str(),
                    c.name.as_str(),
                    c.outcome,
                )
            })
            .collect();
        assert_eq!(
            cases,
            vec![
                (
                    "pager",
                    "pager::tests",
                    "counts_full_pages",
                    Outcome::Passed
                ),
                (
                    "pager",
                    "pager::tests",
                    "counts_partial_page",
                    Outcome::Failed
                ),
                ("pager", "pager::tests", "ignored_cache", Outcome::Skipped),
            ]
        );
    }

    #[test]
    fn surefire_method_names_and_parameters_reduce_to_the_bare_name() {
        let ReportOutcome::Parsed(report) = parse_dialect(SUREFIRE.as_bytes(), Dialect::Generic)
        else {
            panic!("expected a parsed report")
        };
        let cases: Vec<(&str, Option<&str>, Outcome)> = report
            .cases
            .iter()
            .map(|c| (c.name.as_str(), c.variant.as_deref(), c.outcome))
            .collect();
        assert_eq!(
            cases,
            vec![
                ("countsPartialPage", None, Outcome::Passed),
                ("pages", Some("1"), Outcome::Passed),
                ("loadsFixture", None, Outcome::Error),
            ]
        );
        assert_eq!(report.cases[0].file, "example.PageCountTest");
    }

    #[test]
    fn generic_counts_that_disagree_with_the_cases_are_inconsistent() {
        for xml in [
            NEXTEST.replace(
                "tests=\"3\" failures=\"1\" errors",
                "tests=\"4\" failures=\"1\" errors",
            ),
            NEXTEST.replace(
                "disabled=\"0\" errors=\"0\" failures=\"1\"",
                "disabled=\"0\" errors=\"0\" failures=\"0\"",
            ),
            SUREFIRE.replace("errors=\"1\"", "errors=\"0\""),
        ] {
            assert!(
                matches!(
                    parse_dialect(xml.as_bytes(), Dialect::Generic),
                    ReportOutcome::Inconsistent(_)
                ),
                "{xml}"
            );
        }
    }
}
