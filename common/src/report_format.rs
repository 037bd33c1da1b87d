//! Which report a job yields and so where the worker reads it: the one type a job carries
//! about its runner, apart from the runners themselves.

use crate::manifest::ManifestJob;
use crate::tree_path::{TreePath, TreePathError};
use serde::{Deserialize, Serialize};

/// The structured report a job yields, and so where the worker finds it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportFormat {
    /// JUnit XML at `{report}` (pytest, or an explicit command that spells `{report}`).
    JunitXml,
    /// The `assay.unittest/v1` JSON of the unittest adapter Assay ships, at `{report}`.
    UnittestJson,
    /// `go test -json`'s event stream. The go command writes it only to stdout, so the worker
    /// hands the job's captured stdout to the parser: no shell wrapper, and stdout is already
    /// private to the job. Test output is wrapped in events, so nothing else lands there.
    GoTestJson,
    /// The `assay.node/v1` JSON of the node:test reporter Assay ships (`{node_reporter}`), at
    /// `{report}`. Node's built-in JUnit reporter names no file, so it cannot attribute a test.
    NodeJson,
    /// Vitest's `json` reporter at `{report}`.
    VitestJson,
    /// JUnit XML the configured command writes inside the tree. The worker deletes this file
    /// before the command and reads it fresh after; a stale one must never be read.
    JunitXmlInTree(TreePath),
    /// Manifest rows, each run in its own process: the interpreter's exit code and stdout are
    /// judged against the row's expectation with [`crate::manifest::judge`], not parsed by
    /// [`crate::report::parse`]. The runner's default holds no case; the engine fills it in.
    ManifestCases(ManifestJob),
    /// `cargo test --message-format=json`: the worker [`crate::report::libtest::frame`]s the
    /// job's stdout (cargo's messages, libtest's blocks) and stderr (which binary ran when).
    CargoTestOutput,
    /// cargo-nextest's JUnit at `{report}`, through Assay's profile (`{nextest_config}`),
    /// which the worker [`crate::report::libtest::frame_nextest`]s with stdout, where cargo's
    /// messages say why a build that failed left no report.
    NextestJunit,
}

/// Where the worker reads a job's report from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportLocation<'a> {
    /// The job's private `{report}` file in its scratch directory.
    Scratch,
    /// The command's captured stdout.
    Stdout,
    /// Both captured streams, framed by the worker ([`crate::report::libtest::frame`]).
    Output,
    /// The `{report}` file, if written, and the captured stdout, framed by the worker
    /// ([`crate::report::libtest::frame_nextest`]).
    ScratchAndStdout,
    /// A file inside the job's tree, removed before the command runs.
    Tree(&'a TreePath),
    /// No report: each case's exit code and stdout, one process per case.
    Cases(&'a ManifestJob),
}

/// Why a `--test-report` (or `test-report =`) value was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TestReportError {
    /// The value has no `FORMAT:` before its path.
    #[error("test report {spec:?} does not name a format (hint: write `junit:RELATIVE/PATH.xml`)")]
    NoFormat {
        /// The value as given.
        spec: String,
    },
    /// The format is not one Assay reads from a tree (only `junit`).
    #[error("test report format {format:?} in {spec:?} is not supported (hint: use `junit:`)")]
    UnknownFormat {
        /// The value as given.
        spec: String,
        /// The format it named.
        format: String,
    },
    /// The path is absolute or leaves the tree.
    #[error("test report path in {spec:?} is not confined to the tree")]
    Path {
        /// The value as given.
        spec: String,
        /// Why the path is not a tree path.
        #[source]
        source: TreePathError,
    },
}

impl ReportFormat {
    /// Where the worker reads a report of this format.
    pub fn location(&self) -> ReportLocation<'_> {
        match self {
            Self::GoTestJson => ReportLocation::Stdout,
            Self::CargoTestOutput => ReportLocation::Output,
            Self::NextestJunit => ReportLocation::ScratchAndStdout,
            Self::ManifestCases(job) => ReportLocation::Cases(job),
            Self::JunitXmlInTree(path) => ReportLocation::Tree(path),
            Self::JunitXml | Self::UnittestJson | Self::NodeJson | Self::VitestJson => {
                ReportLocation::Scratch
            }
        }
    }

    /// Parses `--test-report junit:RELATIVE/PATH.xml` (or `test-report = "junit:…"`).
    pub fn parse_test_report(spec: &str) -> Result<Self, TestReportError> {
        let Some((format, path)) = spec.split_once(':') else {
            return Err(TestReportError::NoFormat {
                spec: spec.to_owned(),
            });
        };
        if format != "junit" {
            return Err(TestReportError::UnknownFormat {
                spec: spec.to_owned(),
                format: format.to_owned(),
            });
        }
        let path = TreePath::new(path).map_err(|source| TestReportError::Path {
            spec: spec.to_owned(),
            source,
        })?;
        Ok(Self::JunitXmlInTree(path))
    }
}
