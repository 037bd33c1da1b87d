//! Rust test results: libtest's own human output, as `cargo test` and a test binary print it,
//! and cargo-nextest's JUnit XML. Both name a test by its path in its crate
//! (`tests::counts_pages`) and by its test binary, named as nextest names binaries: `pager`
//! (the library's unit tests), `pager::api` (the integration test `tests/api.rs`),
//! `pager::bin/pager` (a binary's unit tests). The binary is the result's `file`.
//!
//! libtest prints no binary name, and its output is the code under test's stdout, so a run of
//! `cargo test --message-format=json` is read from both of the job's streams
//! ([`frame`]): stdout holds cargo's JSON messages (which executable each target built, and
//! the compiler's errors) and then one block per test binary; stderr holds cargo's
//! `Running …`/`Doc-tests …` lines, in the same order as the blocks. Every block must say
//! `running N tests`, list N results, and end with a `test result:` line whose counts and
//! failure list agree; a line that fits none of that makes the report malformed, and a block
//! count that differs from cargo's makes it inconsistent, so a line the guest prints itself
//! (`test forged ... ok`) never passes for a result.

use crate::outcome::{CaseResult, CollectionError, Outcome, ReportOutcome, TestReport};
use crate::report::{junit, truncate};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

/// The first line of a [`frame`]d cargo run: the worker's, never the guest's.
pub const FRAME_HEADER: &str = "assay.cargo-output/v1";

/// The first line of a [`frame_nextest`]ed nextest run.
pub const NEXTEST_FRAME_HEADER: &str = "assay.nextest-output/v1";

/// The variant of a case from a test binary announced twice in a row: the run of prebuilt
/// executables re-runs a binary that failed, at once, to confirm a mutant's kill in the same
/// job (`test_binaries::script`). Cargo itself never runs one executable twice.
pub const RERUN_VARIANT: &str = "assay-rerun";

/// The suite of a doc test: its name is its file, item and line, and it is reported but not
/// selectable by a criterion.
pub const DOC_TEST_SUITE: &str = "doc-tests";

/// A cargo run's two streams as one report: the header, stdout's length in decimal, a newline,
/// stdout, then stderr. The worker builds it from the job's private logs, so the guest can
/// write into either stream but cannot move the boundary.
pub fn frame(stdout: &[u8], stderr: &[u8]) -> Vec<u8> {
    let mut bytes = format!("{FRAME_HEADER}\n{}\n", stdout.len()).into_bytes();
    bytes.extend_from_slice(stdout);
    bytes.extend_from_slice(stderr);
    bytes
}

/// A nextest run's JUnit report (`None`: it wrote none, as when the build failed) and its
/// stdout, where `--cargo-message-format json` puts cargo's messages: the header, the JUnit's
/// length in decimal (or `none`), a newline, the JUnit, then stdout.
pub fn frame_nextest(junit: Option<&[u8]>, stdout: &[u8]) -> Vec<u8> {
    let length = junit.map_or("none".to_owned(), |j| j.len().to_string());
    let mut bytes = format!("{NEXTEST_FRAME_HEADER}\n{length}\n").into_bytes();
    bytes.extend_from_slice(junit.unwrap_or_default());
    bytes.extend_from_slice(stdout);
    bytes
}

/// Reads a [`frame_nextest`]ed run: its JUnit ([`parse_nextest_junit`]) when nextest wrote
/// one; otherwise the build's failure from cargo's messages, a collection error per target
/// that did not compile with the compiler's first error, or no report at all.
pub fn parse_nextest_framed(bytes: &[u8]) -> ReportOutcome {
    let Some((junit, stdout)) = unframe(NEXTEST_FRAME_HEADER, bytes, true) else {
        return ReportOutcome::Malformed(format!(
            "the nextest output is not {NEXTEST_FRAME_HEADER}"
        ));
    };
    if let Some(junit) = junit {
        return parse_nextest_junit(junit);
    }
    let Ok(stdout) = std::str::from_utf8(stdout) else {
        return ReportOutcome::Malformed("the nextest stdout is not UTF-8".into());
    };
    match CargoBuild::read(stdout) {
        Ok(build) if build.failed || !build.errors.is_empty() => {
            ReportOutcome::Parsed(TestReport {
                cases: Vec::new(),
                collection_errors: build.collection_errors(),
                collection_reruns: Vec::new(),
            })
        }
        Ok(_) => ReportOutcome::Missing,
        Err(problem) => problem,
    }
}

/// Reads a [`frame`]d `cargo test --message-format=json` run; see [`parse_cargo_output`].
pub fn parse_framed(bytes: &[u8]) -> ReportOutcome {
    let Some((Some(stdout), stderr)) = unframe(FRAME_HEADER, bytes, false) else {
        return ReportOutcome::Malformed(format!("the cargo output is not {FRAME_HEADER}"));
    };
    let (Ok(stdout), Ok(stderr)) = (std::str::from_utf8(stdout), std::str::from_utf8(stderr))
    else {
        return ReportOutcome::Malformed("the cargo output is not UTF-8".into());
    };
    parse_cargo_output(stdout, stderr)
}

/// The first part (`None` where its length is `none` and `absent` allows it) and the rest.
fn unframe<'a>(
    header: &str,
    bytes: &'a [u8],
    absent: bool,
) -> Option<(Option<&'a [u8]>, &'a [u8])> {
    let rest = bytes.strip_prefix(header.as_bytes())?.strip_prefix(b"\n")?;
    let newline = rest.iter().position(|b| *b == b'\n')?;
    let length = std::str::from_utf8(&rest[..newline]).ok()?;
    let body = &rest[newline + 1..];
    if absent && length == "none" {
        return Some((None, body));
    }
    let length: usize = length.parse().ok()?;
    (length <= body.len()).then(|| {
        let (first, rest) = body.split_at(length);
        (Some(first), rest)
    })
}

/// One cargo JSON message, as much of it as Assay reads.
#[derive(Deserialize)]
struct CargoMessage {
    reason: String,
    #[serde(default)]
    package_id: String,
    #[serde(default)]
    target: Option<Target>,
    #[serde(default)]
    executable: Option<String>,
    #[serde(default)]
    message: Option<CompilerMessage>,
    #[serde(default)]
    success: Option<bool>,
}

#[derive(Deserialize)]
struct Target {
    #[serde(default)]
    kind: Vec<String>,
    #[serde(default)]
    name: String,
}

#[derive(Deserialize)]
struct CompilerMessage {
    #[serde(default)]
    level: String,
    #[serde(default)]
    rendered: Option<String>,
    #[serde(default)]
    message: String,
}

/// What cargo's stderr says ran, in order.
enum Ran {
    /// A test executable (its file name: `pager-54c5b536b5039199`).
    Binary(String),
    /// The doc tests of a library crate (its crate name: `pager`).
    DocTests(String),
}

/// What cargo's JSON messages on stdout say of the build, and the rest of stdout.
#[derive(Default)]
struct CargoBuild {
    /// Executable file name → binary id.
    executables: BTreeMap<String, String>,
    /// Library crate name → package name.
    libraries: BTreeMap<String, String>,
    /// Binary id → the compiler's first error for that target.
    errors: BTreeMap<String, String>,
    failed: bool,
    /// The lines after cargo's messages (libtest's blocks).
    rest: String,
}

impl CargoBuild {
    /// Reads cargo's messages at the head of `stdout`; a message after other output, or a
    /// line starting with `{` that is not one, makes the stream malformed.
    fn read(stdout: &str) -> Result<Self, ReportOutcome> {
        let mut build = Self::default();
        for (number, line) in stdout.lines().enumerate() {
            if !line.starts_with('{') {
                build.rest.push_str(line);
                build.rest.push('\n');
                continue;
            }
            if !build.rest.trim().is_empty() {
                return Err(ReportOutcome::Malformed(format!(
                    "stdout line {}: a cargo message after the tests started: {}",
                    number + 1,
                    clip(line)
                )));
            }
            let message: CargoMessage = serde_json::from_str(line).map_err(|e| {
                ReportOutcome::Malformed(format!(
                    "stdout line {} is not a cargo message: {e}",
                    number + 1
                ))
            })?;
            build.take(message);
        }
        Ok(build)
    }

    fn take(&mut self, message: CargoMessage) {
        let package = package_name(&message.package_id);
        match message.reason.as_str() {
            "compiler-artifact" => {
                let Some(target) = &message.target else {
                    return;
                };
                if target.kind.iter().any(|k| k == "lib" || k == "proc-macro") {
                    self.libraries
                        .insert(target.name.clone(), package.to_owned());
                }
                if let Some(executable) = &message.executable {
                    let file_name = executable.rsplit('/').next().unwrap_or(executable);
                    self.executables
                        .insert(file_name.to_owned(), binary_id(package, target));
                }
            }
            "compiler-message" => {
                let (Some(target), Some(compiler)) = (&message.target, &message.message) else {
                    return;
                };
                if compiler.level == "error" {
                    let text = compiler.rendered.as_deref().unwrap_or(&compiler.message);
                    self.errors
                        .entry(binary_id(package, target))
                        .or_insert_with(|| truncate(text.trim_end().to_owned()));
                }
            }
            "build-finished" => self.failed = message.success == Some(false),
            _ => {}
        }
    }

    /// A collection error per target that did not compile, with the compiler's first error.
    fn collection_errors(&self) -> Vec<CollectionError> {
        let mut errors: Vec<CollectionError> = self
            .errors
            .iter()
            .map(|(file, message)| CollectionError {
                file: file.clone(),
                message: message.clone(),
            })
            .collect();
        if self.failed && errors.is_empty() {
            errors.push(CollectionError {
                file: String::new(),
                message: "the build failed and the compiler named no error".into(),
            });
        }
        errors
    }
}

/// Reads `cargo test --message-format=json`: `stdout` with cargo's JSON messages and
/// libtest's blocks, `stderr` with cargo's status lines. A build that failed gives a
/// collection error per failing target, with the compiler's first error as its message.
pub fn parse_cargo_output(stdout: &str, stderr: &str) -> ReportOutcome {
    let build = match CargoBuild::read(stdout) {
        Ok(build) => build,
        Err(problem) => return problem,
    };
    let CargoBuild {
        executables,
        libraries,
        rest: libtest,
        ..
    } = &build;
    let ran = match cargo_ran(stderr) {
        Ok(ran) => ran,
        Err(problem) => return ReportOutcome::Malformed(problem.to_string()),
    };
    let blocks = match split_blocks(libtest) {
        Ok(blocks) => blocks,
        Err(problem) => return ReportOutcome::Malformed(problem.to_string()),
    };
    if blocks.len() != ran.len() {
        return ReportOutcome::Inconsistent(format!(
            "cargo ran {} test binaries but stdout holds {} libtest blocks",
            ran.len(),
            blocks.len()
        ));
    }
    let mut report = TestReport::default();
    let mut previous: Option<&str> = None;
    for (block, ran) in blocks.iter().zip(&ran) {
        let rerun = match ran {
            Ran::Binary(executable) => {
                let again = previous == Some(executable.as_str());
                previous = Some(executable.as_str());
                again
            }
            Ran::DocTests(_) => {
                previous = None;
                false
            }
        };
        let (file, suite) = match ran {
            Ran::Binary(executable) => match executables.get(executable) {
                Some(id) => (id.clone(), ""),
                None => {
                    return ReportOutcome::Inconsistent(format!(
                        "cargo ran {executable}, which it did not report building"
                    ));
                }
            },
            Ran::DocTests(krate) => (
                libraries
                    .get(krate)
                    .cloned()
                    .unwrap_or_else(|| krate.clone()),
                DOC_TEST_SUITE,
            ),
        };
        match parse_block(block, &file, suite) {
            Ok(cases) => report.cases.extend(cases.into_iter().map(|mut case| {
                if rerun {
                    case.variant = Some(RERUN_VARIANT.to_owned());
                }
                case
            })),
            Err(problem) => return problem,
        }
    }
    report.collection_errors = build.collection_errors();
    if report.cases.is_empty() && report.collection_errors.is_empty() {
        return ReportOutcome::ZeroTests;
    }
    ReportOutcome::Parsed(report)
}

/// Reads the stdout of one test binary run directly (`pager-54c5… --exact tests::x`), its
/// results attributed to `binary` (a nextest-style binary id). The same checks as a cargo run:
/// one block, counts that agree, nothing else on the stream.
pub fn parse_binary_output(stdout: &[u8], binary: &str) -> ReportOutcome {
    let Ok(text) = std::str::from_utf8(stdout) else {
        return ReportOutcome::Malformed("the test binary's output is not UTF-8".into());
    };
    if text.trim().is_empty() {
        return ReportOutcome::Missing;
    }
    let blocks = match split_blocks(text) {
        Ok(blocks) => blocks,
        Err(problem) => return ReportOutcome::Malformed(problem.to_string()),
    };
    let [block] = blocks.as_slice() else {
        return ReportOutcome::Inconsistent(format!(
            "one test binary printed {} libtest blocks",
            blocks.len()
        ));
    };
    match parse_block(block, binary, "") {
        Ok(cases) if cases.is_empty() => ReportOutcome::ZeroTests,
        Ok(cases) => ReportOutcome::Parsed(TestReport {
            cases,
            collection_errors: Vec::new(),
            collection_reruns: Vec::new(),
        }),
        Err(problem) => problem,
    }
}

/// Reads cargo-nextest's JUnit XML: each case's `classname` is its binary id, its `name` the
/// test path, kept whole. Counts are checked as for any JUnit report.
pub fn parse_nextest_junit(bytes: &[u8]) -> ReportOutcome {
    junit::parse_dialect(bytes, junit::Dialect::Nextest)
}

/// Why cargo's status lines or libtest's output are not laid out as libtest lays them out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum LayoutError {
    /// A `Doc-tests` status line without a crate name.
    #[error("stderr names no crate for its doc tests: {line:?}")]
    DocTestsUnnamed { line: String },
    /// A line (1-based, clipped) that no `running N tests` line opened.
    #[error("line {number} is outside any libtest block: {line}")]
    OutsideBlock { number: usize, line: String },
    #[error("a libtest block has no `test result:` line (the run was cut short)")]
    CutShort,
}

/// The stderr lines that say which binary ran next. Cargo indents them; the guest's own
/// stderr lines are ignored unless they imitate one, which then adds a binary that has no
/// block and makes the report inconsistent.
fn cargo_ran(stderr: &str) -> Result<Vec<Ran>, LayoutError> {
    let mut ran = Vec::new();
    for line in stderr.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("Running ") {
            // `Running unittests src/lib.rs (target/debug/deps/pager-54c5…)`
            let Some(path) = rest
                .rsplit_once(" (")
                .and_then(|(_, path)| path.strip_suffix(')'))
            else {
                continue;
            };
            let file_name = path.rsplit('/').next().unwrap_or(path);
            ran.push(Ran::Binary(file_name.to_owned()));
        } else if let Some(krate) = line.strip_prefix("Doc-tests ") {
            if krate.is_empty() || krate.contains(char::is_whitespace) {
                return Err(LayoutError::DocTestsUnnamed {
                    line: line.to_owned(),
                });
            }
            ran.push(Ran::DocTests(krate.to_owned()));
        }
    }
    Ok(ran)
}

/// libtest's blocks, each from its `running N tests` line to its `test result:` line.
/// Blank lines may separate blocks; anything else between them is not libtest's.
fn split_blocks(text: &str) -> Result<Vec<Vec<&str>>, LayoutError> {
    let mut blocks: Vec<Vec<&str>> = Vec::new();
    let mut open: Option<Vec<&str>> = None;
    for (number, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        match open.as_mut() {
            None if line.trim().is_empty() => {}
            None if line.starts_with("running ") => open = Some(vec![line]),
            None => {
                return Err(LayoutError::OutsideBlock {
                    number: number + 1,
                    line: clip(line),
                });
            }
            Some(block) => {
                block.push(line);
                if line.starts_with("test result: ") {
                    blocks.extend(open.take());
                }
            }
        }
    }
    if open.is_some() {
        return Err(LayoutError::CutShort);
    }
    Ok(blocks)
}

/// The counts of `test result: ok. 2 passed; 1 failed; 0 ignored; 0 measured; 3 filtered out;
/// finished in 0.00s`.
struct Summary {
    passed: usize,
    failed: usize,
    ignored: usize,
}

fn parse_summary(line: &str) -> Option<Summary> {
    let rest = line.strip_prefix("test result: ")?;
    let (status, counts) = rest.split_once(". ")?;
    if status != "ok" && status != "FAILED" {
        return None;
    }
    // A line cut short lacks its closing time.
    let (counts, time) = counts.rsplit_once("; finished in ")?;
    time.strip_suffix('s')?.parse::<f64>().ok()?;
    let mut found: BTreeMap<&str, usize> = BTreeMap::new();
    for part in counts.split("; ") {
        let Some((count, what)) = part.split_once(' ') else {
            continue;
        };
        if let Ok(count) = count.parse() {
            found.insert(what, count);
        }
    }
    let summary = Summary {
        passed: *found.get("passed")?,
        failed: *found.get("failed")?,
        ignored: *found.get("ignored")?,
    };
    ((status == "FAILED") == (summary.failed > 0)).then_some(summary)
}

/// One block's results, checked: `running N tests` lists N results, the summary counts them,
/// and the failure list names exactly the failed ones.
fn parse_block(block: &[&str], file: &str, suite: &str) -> Result<Vec<CaseResult>, ReportOutcome> {
    let malformed = |why: String| ReportOutcome::Malformed(format!("{file}: {why}"));
    let inconsistent = |why: String| ReportOutcome::Inconsistent(format!("{file}: {why}"));
    let header = block.first().copied().unwrap_or_default();
    let announced: usize = header
        .strip_prefix("running ")
        .and_then(|rest| {
            rest.strip_suffix(" tests")
                .or_else(|| rest.strip_suffix(" test"))
        })
        .and_then(|count| count.parse().ok())
        .ok_or_else(|| malformed(format!("not a libtest header: {}", clip(header))))?;
    let summary_line = block.last().copied().unwrap_or_default();
    let summary = parse_summary(summary_line)
        .ok_or_else(|| malformed(format!("not a libtest summary: {}", clip(summary_line))))?;
    let body = &block[1..block.len() - 1];
    let mut results: Vec<(String, Outcome)> = Vec::new();
    let mut at = 0;
    // Results, until the blank line before the failures or the summary.
    while at < body.len() && !body[at].is_empty() {
        let line = body[at];
        at += 1;
        if line.starts_with("test ") && line.contains(" has been running for over ") {
            continue;
        }
        let Some((name, outcome)) = result_line(line) else {
            return Err(malformed(format!("not a test result: {}", clip(line))));
        };
        results.push((name.to_owned(), outcome));
    }
    let failed: BTreeSet<&str> = results
        .iter()
        .filter(|(_, o)| *o == Outcome::Failed)
        .map(|(n, _)| n.as_str())
        .collect();
    let (outputs, listed) =
        failure_sections(&body[at..], &failed).map_err(|e| malformed(e.to_string()))?;
    let count = |outcome: Outcome| results.iter().filter(|(_, o)| *o == outcome).count();
    if results.len() != announced
        || count(Outcome::Passed) != summary.passed
        || count(Outcome::Failed) != summary.failed
        || count(Outcome::Skipped) != summary.ignored
    {
        return Err(inconsistent(format!(
            "announced {announced} tests and counted {} passed, {} failed, {} ignored, but lists {} results",
            summary.passed,
            summary.failed,
            summary.ignored,
            results.len()
        )));
    }
    if listed != failed {
        return Err(inconsistent(
            "the failure list does not name exactly the failed tests".into(),
        ));
    }
    Ok(results
        .into_iter()
        .map(|(name, outcome)| CaseResult {
            file: file.to_owned(),
            suite: suite.to_owned(),
            message: outputs.get(name.as_str()).cloned(),
            name,
            variant: None,
            outcome,
        })
        .collect())
}

/// `test tests::counts_pages ... ok` → the name and its outcome. An ignored test (`ignored`,
/// or `ignored, needs a database`) is skipped.
fn result_line(line: &str) -> Option<(&str, Outcome)> {
    let (name, status) = line.strip_prefix("test ")?.rsplit_once(" ... ")?;
    let outcome = match status {
        "ok" => Outcome::Passed,
        "FAILED" => Outcome::Failed,
        "ignored" => Outcome::Skipped,
        other if other.starts_with("ignored, ") => Outcome::Skipped,
        _ => return None,
    };
    (!name.is_empty()).then_some((name, outcome))
}

/// Why the part after a binary's results is not libtest's `failures:` section.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum FailuresError {
    #[error("results are followed by something other than `failures:`")]
    NotFailures,
    #[error("the failures are never listed")]
    NeverListed,
    /// A line of the closing list that is not an indented name (clipped).
    #[error("not a listed failure: {line}")]
    NotListed { line: String },
}

/// The `failures:` part after the results: each failed test's captured output under
/// `---- NAME stdout ----`, then `failures:` again listing the failed names, indented. Returns
/// each name's output and the names listed.
fn failure_sections<'a>(
    lines: &[&'a str],
    failed: &BTreeSet<&str>,
) -> Result<(BTreeMap<&'a str, String>, BTreeSet<&'a str>), FailuresError> {
    let mut outputs: BTreeMap<&str, String> = BTreeMap::new();
    let mut listed: BTreeSet<&str> = BTreeSet::new();
    let mut rest = lines
        .iter()
        .copied()
        .skip_while(|l| l.is_empty())
        .peekable();
    if rest.peek().is_none() {
        return Ok((outputs, listed));
    }
    if rest.next() != Some("failures:") {
        return Err(FailuresError::NotFailures);
    }
    let remaining: Vec<&str> = rest.collect();
    // The list is the last `failures:` line's: captured output may print that word itself.
    let list_at = remaining
        .iter()
        .rposition(|l| *l == "failures:")
        .ok_or(FailuresError::NeverListed)?;
    let mut current: Option<&str> = None;
    for line in &remaining[..list_at] {
        let header = line
            .strip_prefix("---- ")
            .and_then(|l| l.strip_suffix(" stdout ----"))
            .filter(|name| failed.contains(name));
        match header {
            Some(name) => {
                current = Some(name);
                outputs.entry(name).or_default();
            }
            None => {
                if let Some(output) = current.and_then(|name| outputs.get_mut(name)) {
                    output.push_str(line);
                    output.push('\n');
                }
            }
        }
    }
    for line in &remaining[list_at + 1..] {
        if line.is_empty() {
            continue;
        }
        let name = line
            .strip_prefix("    ")
            .ok_or_else(|| FailuresError::NotListed { line: clip(line) })?;
        listed.insert(name);
    }
    for output in outputs.values_mut() {
        *output = truncate(output.trim().to_owned());
    }
    Ok((outputs, listed))
}

/// A package's name from its id: `path+file:///work/pager#0.1.0` (the directory's name),
/// `path+file:///work/crates/x#pager@0.1.0`, `registry+…#pager@0.1.0`, or the older
/// `pager 0.1.0 (path+file:///work/pager)`.
fn package_name(id: &str) -> &str {
    if let Some((source, fragment)) = id.rsplit_once('#') {
        return match fragment.split_once('@') {
            Some((name, _)) => name,
            None => source.rsplit('/').next().unwrap_or(source),
        };
    }
    id.split(' ').next().unwrap_or(id)
}

/// nextest's name for the test binary of `target` in `package`.
/// The binary id of the test executable a `compiler-artifact` message (one JSON line) names,
/// as a report of its run names its cases' `file`; `None` for any other line.
pub fn binary_id_of(message: &str) -> Option<String> {
    let message: CargoMessage = serde_json::from_str(message).ok()?;
    let target = message.target.as_ref()?;
    (message.reason == "compiler-artifact" && message.executable.is_some())
        .then(|| binary_id(package_name(&message.package_id), target))
}

fn binary_id(package: &str, target: &Target) -> String {
    let kind = target.kind.first().map(String::as_str).unwrap_or("lib");
    match kind {
        "lib" | "rlib" | "dylib" | "cdylib" | "staticlib" | "proc-macro" => package.to_owned(),
        "test" => format!("{package}::{}", target.name),
        other => format!("{package}::{other}/{}", target.name),
    }
}

fn clip(line: &str) -> String {
    let mut end = line.len().min(200);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}", &line[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARTIFACTS: &str = r#"{"reason":"compiler-artifact","package_id":"path+file:///t/pager#0.1.0","target":{"kind":["lib"],"crate_types":["lib"],"name":"pager","src_path":"/t/pager/src/lib.rs"},"profile":{"test":false},"executable":null,"fresh":false}
{"reason":"compiler-artifact","package_id":"path+file:///t/pager#0.1.0","target":{"kind":["lib"],"crate_types":["lib"],"name":"pager","src_path":"/t/pager/src/lib.rs"},"profile":{"test":true},"executable":"/t/target/debug/deps/pager-54c5","fresh":false}
{"reason":"compiler-artifact","package_id":"path+file:///t/pager#0.1.0","target":{"kind":["test"],"crate_types":["bin"],"name":"api","src_path":"/t/pager/tests/api.rs"},"profile":{"test":true},"executable":"/t/target/debug/deps/api-d142","fresh":false}
{"reason":"build-finished","success":true}
"#;

    const STDERR: &str = "   Compiling pager v0.1.0 (/t/pager)\n    Finished `test` profile\n     Running unittests src/lib.rs (target/debug/deps/pager-54c5)\n     Running tests/api.rs (target/debug/deps/api-d142)\n   Doc-tests pager\n";

    const BLOCKS: &str = "
running 3 tests
test tests::counts_pages ... ok
test tests::slow ... ignored, needs a disk
test tests::partial_page ... FAILED

failures:

---- tests::partial_page stdout ----
out

thread 'tests::partial_page' panicked at src/lib.rs:13:42:
assertion `left == right` failed

failures:
    tests::partial_page

test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.21s


running 1 test
test counts_pages ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s


running 1 test
test pager/src/lib.rs - pages (line 3) ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.35s

";

    fn parsed(outcome: ReportOutcome) -> TestReport {
        match outcome {
            ReportOutcome::Parsed(report) => report,
            other => panic!("expected a parsed report, got {other:?}"),
        }
    }

    #[test]
    fn a_binary_announced_twice_in_a_row_is_a_rerun_and_nowhere_else() {
        let first = BLOCKS.split("\n\n\nrunning 1 test").next().unwrap();
        let stdout = format!("{ARTIFACTS}{first}\n\n{first}\n");
        let stderr = "     Running unittests src/lib.rs (target/debug/deps/pager-54c5)\n     Running unittests src/lib.rs (target/debug/deps/pager-54c5)\n";
        let report = parsed(parse_cargo_output(&stdout, stderr));
        let variants: Vec<Option<&str>> =
            report.cases.iter().map(|c| c.variant.as_deref()).collect();
        assert_eq!(
            variants,
            [
                None,
                None,
                None,
                Some(RERUN_VARIANT),
                Some(RERUN_VARIANT),
                Some(RERUN_VARIANT)
            ]
        );
        // Two different binaries are no rerun of each other.
        let report = parsed(parse_framed(&frame(
            format!("{ARTIFACTS}{BLOCKS}").as_bytes(),
            STDERR.as_bytes(),
        )));
        assert!(report.cases.iter().all(|c| c.variant.is_none()));
    }

    #[test]
    fn each_block_is_attributed_to_the_binary_cargo_ran_for_it() {
        let stdout = format!("{ARTIFACTS}{BLOCKS}");
        let report = parsed(parse_framed(&frame(stdout.as_bytes(), STDERR.as_bytes())));
        let seen: Vec<(&str, &str, &str, Outcome)> = report
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
            seen,
            [
                ("pager", "", "tests::counts_pages", Outcome::Passed),
                ("pager", "", "tests::slow", Outcome::Skipped),
                ("pager", "", "tests::partial_page", Outcome::Failed),
                ("pager::api", "", "counts_pages", Outcome::Passed),
                (
                    "pager",
                    DOC_TEST_SUITE,
                    "pager/src/lib.rs - pages (line 3)",
                    Outcome::Passed
                ),
            ]
        );
        let message = report.cases[2]
            .message
            .as_deref()
            .expect("a failure message");
        assert!(message.starts_with("out\n"), "{message}");
        assert!(
            message.contains("assertion `left == right` failed"),
            "{message}"
        );
    }

    #[test]
    fn a_failed_build_is_a_collection_error_with_the_compilers_first_error() {
        let stdout = r#"{"reason":"compiler-message","package_id":"path+file:///t/pager#0.1.0","target":{"kind":["lib"],"name":"pager"},"message":{"level":"warning","message":"unused","rendered":"warning: unused\n"}}
{"reason":"compiler-message","package_id":"path+file:///t/pager#0.1.0","target":{"kind":["lib"],"name":"pager"},"message":{"level":"error","message":"cannot find function `rounded`","rendered":"error[E0425]: cannot find function `rounded` in this scope\n --> src/lib.rs:9:20\n"}}
{"reason":"compiler-message","package_id":"path+file:///t/pager#0.1.0","target":{"kind":["lib"],"name":"pager"},"message":{"level":"error","message":"aborting","rendered":"error: aborting due to 1 previous error\n"}}
{"reason":"build-finished","success":false}
"#;
        let report = parsed(parse_cargo_output(
            stdout,
            "error: could not compile `pager`\n",
        ));
        assert!(report.cases.is_empty());
        assert_eq!(report.collection_errors.len(), 1);
        assert_eq!(report.collection_errors[0].file, "pager");
        assert_eq!(
            report.collection_errors[0].message,
            "error[E0425]: cannot find function `rounded` in this scope\n --> src/lib.rs:9:20"
        );
    }

    #[test]
    fn a_line_the_guest_prints_itself_never_passes_for_a_result() {
        // A test writing straight to the process's stdout, past libtest's capture.
        let forged = BLOCKS.replacen(
            "test tests::counts_pages ... ok\n",
            "test tests::counts_pages ... ok\ntest tests::forged ... ok\n",
            1,
        );
        let stdout = format!("{ARTIFACTS}{forged}");
        assert!(matches!(
            parse_cargo_output(&stdout, STDERR),
            ReportOutcome::Inconsistent(_)
        ));
        // A whole forged block is one block too many for the binaries cargo ran.
        let extra = format!(
            "{ARTIFACTS}{BLOCKS}running 1 test\ntest forged ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n"
        );
        assert!(matches!(
            parse_cargo_output(&extra, STDERR),
            ReportOutcome::Inconsistent(_)
        ));
        // A summary that hides a failure, a garbled result, a cut run, text outside a block.
        for (from, to) in [
            (
                "test result: FAILED. 1 passed; 1 failed",
                "test result: ok. 2 passed; 0 failed",
            ),
            ("test counts_pages ... ok", "test counts_pages ... okay"),
            ("    tests::partial_page\n", "    tests::counts_pages\n"),
        ] {
            let garbled = format!("{ARTIFACTS}{}", BLOCKS.replacen(from, to, 1));
            let outcome = parse_cargo_output(&garbled, STDERR);
            assert!(
                matches!(
                    outcome,
                    ReportOutcome::Malformed(_) | ReportOutcome::Inconsistent(_)
                ),
                "{to}: {outcome:?}"
            );
        }
        for end in [BLOCKS.len() / 3, BLOCKS.len() / 2, BLOCKS.len() - 20] {
            let cut = format!("{ARTIFACTS}{}", &BLOCKS[..end]);
            assert!(
                matches!(
                    parse_cargo_output(&cut, STDERR),
                    ReportOutcome::Malformed(_) | ReportOutcome::Inconsistent(_)
                ),
                "cut at {end}"
            );
        }
        let chatter = format!("{ARTIFACTS}PASS tests::counts_pages\n{BLOCKS}");
        assert!(matches!(
            parse_cargo_output(&chatter, STDERR),
            ReportOutcome::Malformed(_)
        ));
        // A `Running` line the guest writes to stderr adds a binary with no block.
        let stderr = format!("{STDERR}     Running tests/evil.rs (target/debug/deps/evil-0)\n");
        let stdout = format!("{ARTIFACTS}{BLOCKS}");
        assert!(matches!(
            parse_cargo_output(&stdout, &stderr),
            ReportOutcome::Inconsistent(_)
        ));
    }

    #[test]
    fn a_failures_section_out_of_shape_says_what_is_wrong() {
        let failed: BTreeSet<&str> = ["tests::a"].into();
        let said = |lines: &[&str]| failure_sections(lines, &failed).unwrap_err().to_string();
        assert_eq!(
            said(&["", "note: run with `RUST_BACKTRACE=1`"]),
            "results are followed by something other than `failures:`"
        );
        assert_eq!(
            said(&["failures:", "---- tests::a stdout ----"]),
            "the failures are never listed"
        );
        assert_eq!(
            said(&["failures:", "failures:", "tests::a"]),
            "not a listed failure: \"tests::a\""
        );
    }

    #[test]
    fn the_frame_is_the_workers_and_checked() {
        assert!(matches!(
            parse_framed(b"running 1 test\n"),
            ReportOutcome::Malformed(_)
        ));
        let mut short = format!("{FRAME_HEADER}\n99\n").into_bytes();
        short.extend_from_slice(b"abc");
        assert!(matches!(parse_framed(&short), ReportOutcome::Malformed(_)));
        let empty = frame(b"", b"");
        assert_eq!(parse_framed(&empty), ReportOutcome::ZeroTests);
    }

    #[test]
    fn a_nextest_run_is_its_junit_or_else_the_builds_first_error() {
        let junit = r#"<testsuites name="nextest-run" tests="1" failures="0" errors="0"><testsuite name="pager" tests="1" failures="0" errors="0" skipped="0"><testcase name="tests::a" classname="pager"/></testsuite></testsuites>"#;
        let report = parsed(parse_nextest_framed(&frame_nextest(
            Some(junit.as_bytes()),
            b"",
        )));
        assert_eq!(report.cases[0].file, "pager");
        assert_eq!(report.cases[0].name, "tests::a");
        let failed = r#"{"reason":"compiler-message","package_id":"path+file:///t/pager#0.1.0","target":{"kind":["test"],"name":"api"},"message":{"level":"error","message":"x","rendered":"error[E0425]: cannot find function `x`\n"}}
{"reason":"build-finished","success":false}
"#;
        let report = parsed(parse_nextest_framed(&frame_nextest(
            None,
            failed.as_bytes(),
        )));
        assert_eq!(report.collection_errors[0].file, "pager::api");
        assert_eq!(
            report.collection_errors[0].message,
            "error[E0425]: cannot find function `x`"
        );
        let built = "{\"reason\":\"build-finished\",\"success\":true}\n";
        assert_eq!(
            parse_nextest_framed(&frame_nextest(None, built.as_bytes())),
            ReportOutcome::Missing
        );
        assert!(matches!(
            parse_nextest_framed(junit.as_bytes()),
            ReportOutcome::Malformed(_)
        ));
    }

    #[test]
    fn a_test_binary_run_directly_reads_as_one_block() {
        let one = "\nrunning 2 tests\ntest tests::a ... ok\ntest tests::b ... FAILED\n\nfailures:\n\n---- tests::b stdout ----\nboom\n\nfailures:\n    tests::b\n\ntest result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 3 filtered out; finished in 0.00s\n\n";
        let report = parsed(parse_binary_output(one.as_bytes(), "pager"));
        assert_eq!(report.cases.len(), 2);
        assert_eq!(report.cases[1].message.as_deref(), Some("boom"));
        assert_eq!(parse_binary_output(b"", "pager"), ReportOutcome::Missing);
        let none = "running 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 2 filtered out; finished in 0.00s\n";
        assert_eq!(
            parse_binary_output(none.as_bytes(), "pager"),
            ReportOutcome::ZeroTests
        );
        let twice = format!("{one}{one}");
        assert!(matches!(
            parse_binary_output(twice.as_bytes(), "pager"),
            ReportOutcome::Inconsistent(_)
        ));
    }

    #[test]
    fn a_guest_that_prints_outside_libtests_layout_is_named_as_such() {
        let block = "running 1 test\ntest tests::a ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";
        let planted = format!("{block}\nrm -rf / # planted\n");
        assert_eq!(
            split_blocks(&planted),
            Err(LayoutError::OutsideBlock {
                number: 6,
                line: "\"rm -rf / # planted\"".into()
            })
        );
        assert_eq!(
            parse_binary_output(planted.as_bytes(), "pager"),
            ReportOutcome::Malformed(
                "line 6 is outside any libtest block: \"rm -rf / # planted\"".into()
            )
        );
        let cut = "running 2 tests\ntest tests::a ... ok\n";
        assert_eq!(split_blocks(cut), Err(LayoutError::CutShort));
        // A guest's own stderr imitating cargo's status line without a crate.
        let imitated = "     Running unittests src/lib.rs (target/debug/deps/pager-54c5)\n   Doc-tests \n   Doc-tests two words\n";
        assert_eq!(
            cargo_ran(imitated).err(),
            Some(LayoutError::DocTestsUnnamed {
                line: "Doc-tests two words".into()
            })
        );
    }

    #[test]
    fn package_names_come_from_every_id_shape() {
        assert_eq!(package_name("path+file:///t/pager#0.1.0"), "pager");
        assert_eq!(package_name("path+file:///t/crates/x#pager@0.1.0"), "pager");
        assert_eq!(
            package_name("registry+https://example.invalid/index#semver@1.0.0"),
            "semver"
        );
        assert_eq!(package_name("pager 0.1.0 (path+file:///t/pager)"), "pager");
    }
}
