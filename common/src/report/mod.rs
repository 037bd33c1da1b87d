//! Structured report parsers. Each turns the bytes a run wrote into a checked [`ReportOutcome`];
//! a report that cannot be trusted yields no named result at all.

pub mod go;
pub mod go_declared;
pub mod junit;
pub mod libtest;
pub mod mutant_batch;
pub mod node;
pub mod observed;
pub mod summary;
pub mod unittest;
pub mod vitest;

use crate::outcome::{ReportOutcome, TestReport};
use crate::runner::ReportFormat;

/// The longest failure message a parser keeps from a test's own output.
const MESSAGE_LIMIT: usize = 2000;

/// `message` cut at [`MESSAGE_LIMIT`] bytes (on a character boundary), marked with `…`.
pub(crate) fn truncate(mut message: String) -> String {
    if message.len() > MESSAGE_LIMIT {
        let mut end = MESSAGE_LIMIT;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

/// `line` without terminal escape sequences (`ESC [ … final`) or other control characters: the
/// guest writes into stderr too.
pub fn printable(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        if !c.is_control() || c == '\t' {
            out.push(c);
        }
    }
    out
}

/// Parses a freshly written report; `None` means the file was absent. For
/// [`ReportFormat::GoTestJson`] the bytes are the job's captured stdout.
pub fn parse(format: &ReportFormat, bytes: Option<&[u8]>) -> ReportOutcome {
    let Some(bytes) = bytes else {
        return ReportOutcome::Missing;
    };
    match format {
        ReportFormat::JunitXml => junit::parse(bytes),
        ReportFormat::UnittestJson => unittest::parse(bytes),
        ReportFormat::GoTestJson => go::parse(bytes),
        ReportFormat::NodeJson => node::parse(bytes),
        ReportFormat::VitestJson => vitest::parse(bytes),
        ReportFormat::CargoTestOutput => libtest::parse_framed(bytes),
        ReportFormat::NextestJunit => libtest::parse_nextest_framed(bytes),
        ReportFormat::JunitXmlInTree(_) => junit::parse_dialect(bytes, junit::Dialect::Generic),
        ReportFormat::ManifestCases(_) => ReportOutcome::Malformed(
            "a manifest case is judged from its exit code and stdout, not parsed as a report"
                .into(),
        ),
    }
}

/// Whether `report`, parsed from `format`, still lacks what only the job's stderr holds: the
/// Go compiler's errors for its build failures, which `go test -json` before Go 1.24 prints
/// there rather than in its events.
pub fn reads_stderr(format: &ReportFormat, report: &TestReport) -> bool {
    matches!(format, ReportFormat::GoTestJson) && go::lacks_compiler_errors(report)
}

/// Completes `report` from the job's captured `stderr` where [`reads_stderr`] says it lacks
/// something. The worker and a cache's re-read of the stored stderr both call it, so a pinned
/// report reads again as it was judged.
pub fn complete_from_stderr(format: &ReportFormat, report: &mut TestReport, stderr: &[u8]) {
    if reads_stderr(format, report) {
        go::name_compiler_errors(report, stderr);
    }
}

/// [`parse`], then rewrites absolute file paths under `tree_root` (Vitest and node name test
/// files absolutely) relative to it, so the same test has the same file on both trees.
pub fn parse_in_tree(
    format: &ReportFormat,
    bytes: Option<&[u8]>,
    tree_root: &str,
) -> ReportOutcome {
    match parse(format, bytes) {
        ReportOutcome::Parsed(mut report) => {
            let root = tree_root.trim_end_matches('/');
            let relative = |file: &mut String| {
                if let Some(rest) = file.strip_prefix(root)
                    && let Some(rest) = rest.strip_prefix('/')
                {
                    *file = rest.to_owned();
                }
            };
            for case in &mut report.cases {
                relative(&mut case.file);
            }
            for error in &mut report.collection_errors {
                relative(&mut error.file);
            }
            ReportOutcome::Parsed(report)
        }
        other => other,
    }
}
