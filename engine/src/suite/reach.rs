//! Changed-line reachability for `assay test --audit-base REV --reachability`: the selected
//! pytest cases run once more under per-test coverage (`crate::coverage`); for every changed
//! product file, the tests (node ids) that run its changed lines, and the changed statement
//! lines that nothing executed reaches. A changed file no executed test imports is named so.

use crate::coverage::{self, CoverageMap};
use assay_common::job::{JobSpec, Side};
use assay_common::{ProofId, TreeId};
use std::collections::{BTreeMap, BTreeSet};

pub use assay_common::suite_audit::FileReach;

/// The job that runs `ids` (pytest node ids) under per-test coverage contexts.
pub fn plan_job(run_id: &ProofId, tree: &TreeId, ids: &[String], timeout_secs: u64) -> JobSpec {
    let reach_id = ProofId(format!("{run_id}-reach"));
    coverage::plan_job(reach_id, Side::Candidate, tree, ids, timeout_secs)
}

/// Changed lines of `changed` (product files only) against a per-test coverage map. Lines
/// that are not statements (blank, comments) are never reported; a line that ran only at
/// import (outside any test) ran, since only the executed tests' modules import.
pub fn reach(changed: &BTreeMap<String, BTreeSet<u32>>, map: &CoverageMap) -> Vec<FileReach> {
    changed
        .iter()
        .map(|(file, lines)| FileReach {
            file: file.clone(),
            imported: map.files.contains_key(file),
            reached_by: map
                .tests_running(file, lines.iter().copied())
                .unwrap_or_default()
                .into_iter()
                .collect(),
            unreached: map.files.get(file).map_or_else(Vec::new, |measured| {
                lines.intersection(&measured.missing).copied().collect()
            }),
        })
        .collect()
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

    const MAP: &str = r#"{"exit": 0, "files": {
        "pricing.py": {
            "lines": {"1": [""], "2": ["tests/test_pricing.py::test_net"], "5": [""],
                      "6": ["tests/test_pricing.py::test_spring"], "7": ["tests/test_pricing.py::test_spring"],
                      "9": [""]},
            "missing": [8, 10]
        }}, "durations": {}}"#;

    #[test]
    fn changed_statements_no_test_reaches_are_named_per_file() {
        let changed: BTreeMap<String, BTreeSet<u32>> = [
            // 5 and 9 run at import; 8 and 10 never run; 11 is not a statement.
            ("pricing.py".to_owned(), [5, 6, 7, 8, 9, 10, 11].into()),
            ("refunds.py".to_owned(), [1, 2].into()),
        ]
        .into();
        let map = CoverageMap::parse(MAP.as_bytes()).unwrap();
        assert_eq!(
            reach(&changed, &map),
            [
                FileReach {
                    file: "pricing.py".into(),
                    imported: true,
                    reached_by: vec!["tests/test_pricing.py::test_spring".into()],
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
        assert_eq!(ranges(&[3, 4, 5, 9, 11, 12]), "3-5, 9, 11-12");
    }
}
