//! Per-test outcomes as a structured report states them. A failing test is data, not an error.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How one test case ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The test ran to its end and passed.
    Passed,
    /// The test ran and an assertion (or the test body) failed.
    Failed,
    /// Collection, import, fixture-hook, setup or teardown error: the test did not run to a
    /// verdict of its own, so it never counts as a reproduced failure.
    Error,
    /// Skipped, todo, or an expected failure: never a named pass.
    Skipped,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
            Self::Error => "error",
            Self::Skipped => "skipped",
        })
    }
}

/// One reported test case.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseResult {
    /// Path of the file the test lives in, relative to the tree root (`""` when unknown).
    pub file: String,
    /// Class, module or describe path that contains the test (`""` for a bare function).
    pub suite: String,
    /// The bare test function name, without parameters (`test_pages`, `TestCache/expired`).
    pub name: String,
    /// Parametrization or subtest label, when the runner reports one.
    pub variant: Option<String>,
    /// How the case ended.
    pub outcome: Outcome,
    /// The failure or skip message the runner gave, if any.
    pub message: Option<String>,
}

impl CaseResult {
    /// The identity two results must not share within one report.
    pub fn identity(&self) -> String {
        match &self.variant {
            Some(variant) => format!("{}::{}::{}[{variant}]", self.file, self.suite, self.name),
            None => format!("{}::{}::{}", self.file, self.suite, self.name),
        }
    }
}

/// What one structured report says, once parsed and checked.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestReport {
    /// Every test case the report names, in report order.
    pub cases: Vec<CaseResult>,
    /// Files (or modules) that failed to collect or import; their tests are absent from `cases`.
    pub collection_errors: Vec<CollectionError>,
    /// Files of `collection_errors` that failed again when collected once more in the same run
    /// (reported as `FILE[assay-rerun]`): the in-run confirmation of a kill by a collection error.
    #[serde(default)]
    pub collection_reruns: Vec<CollectionError>,
}

/// A file (or module) the runner could not collect or import.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectionError {
    /// The file as the runner named it, relative to the tree root.
    pub file: String,
    /// The runner's error for it.
    pub message: String,
}

/// The report of one job: parsed, or the reason it gives no named result at all.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportOutcome {
    /// A well-formed report with named results.
    Parsed(TestReport),
    /// The command did not (re)write its report file.
    Missing,
    /// The command did not write its report, and failed: the last lines of its stderr, which
    /// usually say why (a compiler's error, a missing dependency).
    Unwritten(String),
    /// A report that could not be parsed, and why.
    Malformed(String),
    /// A well-formed report that names no test and no collection error.
    ZeroTests,
    /// Counts that contradict the listed cases, or a run the report says was cut short.
    Inconsistent(String),
}

impl ReportOutcome {
    /// The parsed report, if this is one.
    pub fn parsed(&self) -> Option<&TestReport> {
        match self {
            Self::Parsed(report) => Some(report),
            _ => None,
        }
    }

    /// Why this report yields no named result, for humans.
    pub fn problem(&self) -> Option<String> {
        match self {
            Self::Parsed(_) => None,
            Self::Missing => Some("the command wrote no report".into()),
            Self::Unwritten(stderr) => Some(format!(
                "the command wrote no report; its stderr ends:{}",
                indented(stderr)
            )),
            Self::Malformed(why) => Some(format!("the report is malformed: {why}")),
            Self::ZeroTests => Some("the report names no test".into()),
            Self::Inconsistent(why) => Some(format!("the report is inconsistent: {why}")),
        }
    }
}

/// `text`'s lines, each on a line of its own indented under the one that quotes them.
pub fn indented(text: &str) -> String {
    text.lines()
        .map(|line| format!("\n        {line}"))
        .collect()
}
