//! Changed-line reachability for `assay test --audit-base REV --reachability`: the selected
//! pytest cases run once more under coverage.py with per-test contexts; for every changed
//! product file, the tests whose contexts reach its changed lines, and the changed statement
//! lines that nothing executed reaches. A changed file no executed test imports is named so.

use assay_common::job::{JobKind, JobSpec, Side};
use assay_common::runner::ReportFormat;
use assay_common::{JobId, ProofId, TreeId};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// coverage.py with a context per test function, then its JSON report with the contexts.
const SCRIPT: &str = r#"rc="$TMPDIR/assay-coverage.rc"; report="$1"; shift
printf '[run]\ndynamic_context = test_function\n' > "$rc"
python3 -m coverage run --rcfile="$rc" -m pytest -q -p no:cacheprovider "$@"
python3 -m coverage json --rcfile="$rc" --show-contexts -o "$report""#;

/// The job that runs `ids` (pytest node ids) under per-test coverage contexts.
pub fn plan_job(run_id: &ProofId, tree: &TreeId, ids: &[String], timeout_secs: u64) -> JobSpec {
    let reach_id = ProofId(format!("{run_id}-reach"));
    let mut command: Vec<String> = ["sh", "-c", SCRIPT, "assay-reach", "{report}"]
        .map(String::from)
        .to_vec();
    command.extend(ids.iter().cloned());
    JobSpec {
        proof_id: reach_id.clone(),
        job_id: JobId::for_index(&reach_id, 0),
        index: 0,
        kind: JobKind::Suite,
        side: Side::Candidate,
        tree: tree.clone(),
        command,
        // Uploaded as the job's `report` artifact and read here; the worker's JUnit parse of
        // it is not used.
        report: ReportFormat::JunitXml,
        selected_tests: ids.to_vec(),
        timeout_secs,
        env: Vec::new(),
        edit: None,
    }
}

/// What the executed tests do to one changed file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FileReach {
    pub file: String,
    /// Whether any executed test imported the file at all.
    pub imported: bool,
    /// Tests (coverage contexts) that run at least one changed line.
    pub reached_by: Vec<String>,
    /// Changed statement lines that never ran.
    pub unreached: Vec<u32>,
}

#[derive(Debug, thiserror::Error)]
#[error("the per-test coverage report is unreadable: {0}")]
pub struct ReachError(String);

/// Changed lines of `changed` (product files only) against coverage.py's `--show-contexts`
/// JSON. Lines that are not statements (blank, comments) are never reported; a line that ran
/// only at import (the empty context) ran, since only the executed tests' modules import.
pub fn reach(
    changed: &BTreeMap<String, BTreeSet<u32>>,
    coverage_json: &[u8],
) -> Result<Vec<FileReach>, ReachError> {
    let json: serde_json::Value =
        serde_json::from_slice(coverage_json).map_err(|e| ReachError(e.to_string()))?;
    let files = json["files"]
        .as_object()
        .ok_or_else(|| ReachError("no \"files\" object".into()))?;
    let numbers = |value: &serde_json::Value| -> BTreeSet<u32> {
        value
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|n| n.as_u64())
                    .map(|n| n as u32)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut result = Vec::new();
    for (file, lines) in changed {
        let Some(data) = files.get(file) else {
            result.push(FileReach {
                file: file.clone(),
                imported: false,
                reached_by: Vec::new(),
                unreached: Vec::new(),
            });
            continue;
        };
        let executed = numbers(&data["executed_lines"]);
        let missing = numbers(&data["missing_lines"]);
        let mut reached_by = BTreeSet::new();
        if let Some(contexts) = data["contexts"].as_object() {
            for (line, names) in contexts {
                if line.parse().is_ok_and(|l: u32| lines.contains(&l)) {
                    let names = names.as_array().into_iter().flatten();
                    reached_by.extend(
                        names
                            .filter_map(|n| n.as_str())
                            .filter(|n| !n.is_empty())
                            .map(|n| n.split('|').next().unwrap_or(n).to_owned()),
                    );
                }
            }
        }
        result.push(FileReach {
            file: file.clone(),
            imported: true,
            reached_by: reached_by.into_iter().collect(),
            unreached: lines
                .iter()
                .filter(|l| missing.contains(l) && !executed.contains(l))
                .copied()
                .collect(),
        });
    }
    Ok(result)
}

/// `3, 4, 5, 9` → `3-5, 9`.
pub fn ranges(lines: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let start = lines[i];
        let mut end = start;
        while i + 1 < lines.len() && lines[i + 1] == end + 1 {
            i += 1;
            end = lines[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const COVERAGE: &str = r#"{"meta": {"show_contexts": true}, "files": {
        "pricing.py": {
            "executed_lines": [1, 2, 5, 6, 7, 9],
            "missing_lines": [8, 10],
            "contexts": {"1": [""], "2": ["tests.test_pricing.test_net"], "5": [""],
                         "6": ["tests.test_pricing.test_spring"], "7": ["tests.test_pricing.test_spring"],
                         "9": [""]}
        }}}"#;

    #[test]
    fn changed_statements_no_test_reaches_are_named_per_file() {
        let changed: BTreeMap<String, BTreeSet<u32>> = [
            // 5 and 9 run at import; 8 and 10 never run; 11 is not a statement.
            ("pricing.py".to_owned(), [5, 6, 7, 8, 9, 10, 11].into()),
            ("refunds.py".to_owned(), [1, 2].into()),
        ]
        .into();
        let found = reach(&changed, COVERAGE.as_bytes()).unwrap();
        assert_eq!(
            found,
            [
                FileReach {
                    file: "pricing.py".into(),
                    imported: true,
                    reached_by: vec!["tests.test_pricing.test_spring".into()],
                    unreached: vec![8, 10],
                },
                FileReach {
                    file: "refunds.py".into(),
                    imported: false,
                    reached_by: vec![],
                    unreached: vec![],
                },
            ]
        );
        assert!(reach(&changed, b"{}").is_err());
        assert_eq!(ranges(&[3, 4, 5, 9, 11, 12]), "3-5, 9, 11-12");
    }
}
