//! The Stryker mutation-testing-report-schema (version 1) document of a run: what Stryker's
//! HTML viewer and dashboards read. The one place that knows the schema's shape.

use super::{MutateReport, Status, sorted};
use assay_common::mutation_report::{
    AssayBlock, CacheReport, FileReport, Framework, Location, MutantReport, MutationReport,
    Performance, Position, RefusedMutantEntry, SCHEMA_VERSION, TestDefinition, TestFile,
    Thresholds,
};
use std::collections::{BTreeMap, BTreeSet};

impl MutateReport {
    /// Stryker's mutation-testing-report-schema (version 1) document, which its HTML viewer
    /// reads; Assay's summary rides along under `assay`.
    pub fn stryker_report(&self) -> MutationReport {
        let mut files = BTreeMap::new();
        for (path, source) in &self.files {
            let mutants: Vec<MutantReport> = self
                .results
                .iter()
                .filter(|r| r.mutant.path.as_str() == path.as_str())
                .map(|r| {
                    let edit = &r.mutant.edit;
                    MutantReport {
                        id: r.mutant.id.clone(),
                        mutator_name: r.mutant.operator.name().to_owned(),
                        replacement: edit.replacement.clone(),
                        description: r.mutant.description.clone(),
                        location: Location {
                            start: position(source, edit.start),
                            end: position(source, edit.end),
                        },
                        status: r.verdict.status,
                        // Run order follows measured durations; the report's order must not.
                        covered_by: sorted(&r.covered_by).into_iter().cloned().collect(),
                        killed_by: r.verdict.killed_by.clone(),
                        // Only code run at import covers it (a class body, a module-level
                        // constant; for Rust, code no one test can be named for): every test
                        // may observe it, so the whole suite ran.
                        is_static: self.per_line_selection
                            && r.covered_by.is_empty()
                            && !matches!(
                                r.verdict.status,
                                Status::NoCoverage | Status::CompileError
                            ),
                        status_reason: r.verdict.status_reason.clone(),
                        tests_completed: r.verdict.tests_completed,
                        duration: r
                            .verdict
                            .duration_s
                            .map(|seconds| (seconds * 1000.0).round() as u64),
                    }
                })
                .collect();
            if mutants.is_empty() {
                continue;
            }
            let file = FileReport {
                language: language_of(path),
                source: source.clone(),
                mutants,
            };
            files.insert(path.clone(), file);
        }
        MutationReport {
            schema_version: SCHEMA_VERSION.into(),
            thresholds: Thresholds { high: 80, low: 60 },
            files,
            test_files: self.test_files(),
            framework: Framework {
                name: "assay".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            performance: Performance {
                setup: millis(self.phases.setup),
                initial_run: millis(self.phases.initial_run),
                mutation: millis(self.phases.mutation),
            },
            assay: AssayBlock {
                tree: self.tree.clone(),
                per_line_selection: self.per_line_selection,
                selection_note: self.selection_note.clone(),
                summary: self.summary(),
                skipped: self.plan.skipped.clone(),
                excluded_files: self.plan.excluded_files.clone(),
                cache: self.cache_report(),
                schemata: self.schemata.clone(),
            },
        }
    }

    /// What the cache did, and which mutants it answered from which run: `None` when the run
    /// did not use it. Kept in Assay's block so each mutant stays as the schema describes it.
    fn cache_report(&self) -> Option<CacheReport> {
        let outcome = self.cache.as_ref()?;
        let mutants = self
            .results
            .iter()
            .filter_map(|r| Some((r.mutant.id.clone(), r.cached.clone()?)))
            .collect();
        Some(CacheReport {
            served: outcome.served,
            eligible: outcome.eligible,
            stored: outcome.stored,
            refused: outcome
                .refused
                .iter()
                .map(|(key, why)| RefusedMutantEntry {
                    key: key.clone(),
                    why: why.clone(),
                })
                .collect(),
            not_used: outcome.not_used.clone(),
            store_error: outcome.store_error.clone(),
            mutants,
        })
    }
}

impl MutateReport {
    /// Every test a mutant names (covering or killing), by the file of its pytest node id
    /// (`tests/test_pages.py::TestLast::test_partial`: file `tests/test_pages.py`, name
    /// `TestLast::test_partial`); the test's id is the node id `coveredBy` and `killedBy` use.
    fn test_files(&self) -> BTreeMap<String, TestFile> {
        let mut by_file: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for result in &self.results {
            for id in result.covered_by.iter().chain(&result.verdict.killed_by) {
                if let Some((file, _)) = id.split_once("::") {
                    by_file.entry(file).or_default().insert(id);
                }
            }
        }
        by_file
            .into_iter()
            .map(|(file, ids)| {
                let tests = ids
                    .into_iter()
                    .map(|id| TestDefinition {
                        id: id.to_owned(),
                        name: id.split_once("::").map_or(id, |(_, name)| name).to_owned(),
                    })
                    .collect();
                (file.to_owned(), TestFile { tests })
            })
            .collect()
    }
}

/// The schema's name for a file's language (`python`, `rust`), by the language that owns it.
fn language_of(path: &str) -> String {
    crate::mutation::mutants::languages::for_path(path)
        .map_or("python", |language| language.name())
        .to_ascii_lowercase()
}

/// Whole milliseconds, as the schema's `performance` block counts time.
fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// 1-based line and column (in characters) of a byte offset, as Stryker's schema counts them.
fn position(source: &str, offset: usize) -> Position {
    let offset = offset.min(source.len());
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    Position { line, column }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_and_count_characters() {
        let source = "def f(x):\n    return x > 0\n";
        assert_eq!(
            position(source, 23),
            Position {
                line: 2,
                column: 14
            }
        );
        assert_eq!(position(source, 0), Position { line: 1, column: 1 });
    }

    #[test]
    fn test_files_list_every_named_test_under_its_file_and_durations_are_in_milliseconds() {
        use crate::mutation::campaign::{MutantResult, Phases, Status, Verdict};
        use crate::mutation::mutants::{self, ChangedFile, MutationPlan};
        use std::time::Duration;
        let source = "def is_past_end(page, last):\n    return page > last\n";
        let plan = mutants::plan_mutants(
            &[ChangedFile {
                path: "pager/clamp.py".into(),
                bytes: source.as_bytes().to_vec(),
                changed_lines: [1, 2].into(),
            }],
            Some(1),
        );
        let killer = "tests/test_pages.py::TestLast::test_partial_page";
        let report = MutateReport {
            tree: "41e7".into(),
            per_line_selection: true,
            selection_note: None,
            files: [("pager/clamp.py".to_owned(), source.to_owned())].into(),
            results: vec![MutantResult {
                mutant: plan.mutants[0].clone(),
                verdict: Verdict {
                    status: Status::Killed,
                    status_reason: None,
                    killed_by: vec![killer.into()],
                    tests_completed: Some(1),
                    duration_s: Some(0.0624),
                },
                covered_by: vec![killer.into(), "tests/test_edges.py::test_zero".into()],
                flaky: false,
                cached: None,
            }],
            plan: MutationPlan::default(),
            elapsed_s: 1.0,
            phases: Phases {
                setup: Duration::from_micros(12_400),
                initial_run: Duration::from_millis(640),
                mutation: Duration::from_millis(348),
            },
            cache: None,
            schemata: None,
        };
        let doc = serde_json::to_value(report.stryker_report()).unwrap();
        assert_eq!(
            doc["testFiles"],
            serde_json::json!({
                "tests/test_edges.py": {"tests": [{"id": "tests/test_edges.py::test_zero", "name": "test_zero"}]},
                "tests/test_pages.py": {"tests": [{"id": killer, "name": "TestLast::test_partial_page"}]},
            })
        );
        let mutant = &doc["files"]["pager/clamp.py"]["mutants"][0];
        assert_eq!(mutant["duration"], 62);
        assert_eq!(mutant["killedBy"][0], killer);
        assert_eq!(
            doc["performance"],
            serde_json::json!({"setup": 12, "initialRun": 640, "mutation": 348})
        );
    }
}
