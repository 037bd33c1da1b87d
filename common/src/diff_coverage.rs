//! Diff coverage, the proof's report-only record of which changed product hunks the proving
//! tests executed: each hunk of lines the change adds or modifies in a product file, whether a
//! proving test ran any of its statements, and the changed files the coverage run did not
//! measure at all. It never changes a verdict: the run that measures it is the guest's, and a
//! hunk no test executes is a reason to read the tests, not proof that they are wrong.

pub mod source;

pub use source::{ChangedSource, CodeLine};

use crate::job::ArtifactRef;
use crate::tree_path::TreePath;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Lines `start..=end` of `path` (1-based, candidate side) that the change adds or modifies.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ChangedHunk {
    /// The changed file, relative to the tree root.
    pub path: TreePath,
    /// The hunk's first line (1-based, candidate side).
    pub start: u32,
    /// The hunk's last line, inclusive.
    pub end: u32,
}

/// What the coverage run says of one hunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HunkStatus {
    /// The proving tests' run executed every one of its statements.
    Executed,
    /// Some of its statements, not all (`missed_lines` are the others).
    PartlyExecuted,
    /// It holds statements, and the run executed none of them.
    NotExecuted,
    /// Only comments, blank lines or the like: nothing a test could execute.
    NoStatements,
}

/// How much of one changed hunk the proving tests executed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HunkCoverage {
    /// The hunk measured.
    #[serde(flatten)]
    pub hunk: ChangedHunk,
    /// Whether the run executed all, some or none of its statements.
    pub status: HunkStatus,
    /// Its statement lines the run did not execute.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missed_lines: Vec<u32>,
}

/// The evidence's `diff_coverage`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffCoverage {
    /// The coverage tool that measured (`coverage.py`, `go test -coverprofile`, `node V8
    /// coverage`, `cargo llvm-cov`).
    pub tool: String,
    /// Every changed product hunk of a measured file, in path and line order.
    pub hunks: Vec<HunkCoverage>,
    /// Changed product files the run did not measure: never imported by a proving test, or
    /// outside what the tool reads.
    pub unmeasured_files: Vec<String>,
    /// The coverage run's own report, pinned as every job's is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<ArtifactRef>,
    /// Why nothing was measured, when nothing was (the tool is not installed where the tests
    /// run, the run failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl DiffCoverage {
    /// A record of a run that measured nothing, with why.
    pub fn unmeasured(tool: &str, hunks: &[ChangedHunk], why: String) -> Self {
        let files: BTreeSet<String> = hunks.iter().map(|h| h.path.to_string()).collect();
        Self {
            tool: tool.to_owned(),
            hunks: Vec::new(),
            unmeasured_files: files.into_iter().collect(),
            report: None,
            note: Some(why),
        }
    }

    /// Each changed statement line the run did not execute, as `PATH:LINE` or `PATH:FIRST-LAST`
    /// for consecutive ones, in path and line order.
    pub fn missed_spans(&self) -> Vec<String> {
        let mut spans = Vec::new();
        for hunk in &self.hunks {
            let mut run: Option<(u32, u32)> = None;
            let mut flush = |run: Option<(u32, u32)>| {
                if let Some((first, last)) = run {
                    spans.push(match first == last {
                        true => format!("{}:{first}", hunk.hunk.path),
                        false => format!("{}:{first}-{last}", hunk.hunk.path),
                    });
                }
            };
            for &line in &hunk.missed_lines {
                run = match run {
                    Some((first, last)) if line == last + 1 => Some((first, line)),
                    other => {
                        flush(other);
                        Some((line, line))
                    }
                };
            }
            flush(run);
        }
        spans
    }
}

/// What a coverage run measured of one file: the statement lines, and those the run of the
/// proving tests executed (a `def` line runs at import, its body only when a test calls it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MeasuredFile {
    /// The file's lines that hold a statement (1-based).
    pub statements: BTreeSet<u32>,
    /// Of `statements`, the lines the run executed.
    pub executed: BTreeSet<u32>,
}

/// Each file's changed lines as hunks: runs of consecutive lines.
pub fn hunks_of(changed: &BTreeMap<TreePath, BTreeSet<u32>>) -> Vec<ChangedHunk> {
    let mut hunks = Vec::new();
    for (path, lines) in changed {
        let mut run: Option<(u32, u32)> = None;
        for &line in lines {
            run = match run {
                Some((start, end)) if line == end + 1 => Some((start, line)),
                Some((start, end)) => {
                    hunks.push(ChangedHunk {
                        path: path.clone(),
                        start,
                        end,
                    });
                    Some((line, line))
                }
                None => Some((line, line)),
            };
        }
        if let Some((start, end)) = run {
            hunks.push(ChangedHunk {
                path: path.clone(),
                start,
                end,
            });
        }
    }
    hunks
}

/// Judges each hunk against what the run measured; a file the run did not measure is listed
/// once in `unmeasured_files` and its hunks are left out.
pub fn judge(
    tool: &str,
    hunks: &[ChangedHunk],
    measured: &BTreeMap<String, MeasuredFile>,
    report: Option<ArtifactRef>,
) -> DiffCoverage {
    let mut judged = Vec::new();
    let mut unmeasured = BTreeSet::new();
    for hunk in hunks {
        let Some(file) = measured.get(hunk.path.as_str()) else {
            unmeasured.insert(hunk.path.to_string());
            continue;
        };
        let statements: Vec<u32> = file
            .statements
            .range(hunk.start..=hunk.end)
            .copied()
            .collect();
        let missed_lines: Vec<u32> = statements
            .iter()
            .copied()
            .filter(|line| !file.executed.contains(line))
            .collect();
        let status = if statements.is_empty() {
            HunkStatus::NoStatements
        } else if missed_lines.is_empty() {
            HunkStatus::Executed
        } else if missed_lines.len() == statements.len() {
            HunkStatus::NotExecuted
        } else {
            HunkStatus::PartlyExecuted
        };
        judged.push(HunkCoverage {
            hunk: hunk.clone(),
            status,
            missed_lines,
        });
    }
    DiffCoverage {
        tool: tool.to_owned(),
        hunks: judged,
        unmeasured_files: unmeasured.into_iter().collect(),
        report,
        note: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> TreePath {
        TreePath::new(p).expect("a tree path")
    }

    #[test]
    fn consecutive_changed_lines_make_one_hunk() {
        let changed: BTreeMap<TreePath, BTreeSet<u32>> = [
            (path("pager.py"), [3, 4, 5, 9, 11, 12].into_iter().collect()),
            (path("ledger.py"), [1].into_iter().collect()),
        ]
        .into_iter()
        .collect();
        let spans: Vec<(String, u32, u32)> = hunks_of(&changed)
            .into_iter()
            .map(|h| (h.path.to_string(), h.start, h.end))
            .collect();
        assert_eq!(
            spans,
            vec![
                ("ledger.py".into(), 1, 1),
                ("pager.py".into(), 3, 5),
                ("pager.py".into(), 9, 9),
                ("pager.py".into(), 11, 12),
            ]
        );
    }

    #[test]
    fn a_hunk_is_executed_not_executed_or_without_statements_and_unread_files_are_named() {
        let hunks = vec![
            ChangedHunk {
                path: path("pager.py"),
                start: 3,
                end: 5,
            },
            ChangedHunk {
                path: path("pager.py"),
                start: 9,
                end: 10,
            },
            ChangedHunk {
                path: path("pager.py"),
                start: 14,
                end: 14,
            },
            ChangedHunk {
                path: path("pager.py"),
                start: 20,
                end: 24,
            },
            ChangedHunk {
                path: path("export.py"),
                start: 2,
                end: 2,
            },
        ];
        let measured: BTreeMap<String, MeasuredFile> = [(
            "pager.py".to_owned(),
            MeasuredFile {
                statements: [3, 4, 5, 9, 10, 20, 22, 23, 24].into_iter().collect(),
                executed: [3, 4, 5, 20].into_iter().collect(),
            },
        )]
        .into_iter()
        .collect();
        let coverage = judge("coverage.py", &hunks, &measured, None);
        let statuses: Vec<HunkStatus> = coverage.hunks.iter().map(|h| h.status).collect();
        assert_eq!(
            statuses,
            vec![
                HunkStatus::Executed,
                HunkStatus::NotExecuted,
                HunkStatus::NoStatements,
                HunkStatus::PartlyExecuted
            ]
        );
        assert_eq!(coverage.unmeasured_files, vec!["export.py".to_owned()]);
        assert_eq!(
            coverage.missed_spans(),
            vec!["pager.py:9-10".to_owned(), "pager.py:22-24".to_owned()]
        );
    }
}
