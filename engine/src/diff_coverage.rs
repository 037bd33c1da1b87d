//! A proof's diff coverage (report only): the proving tests run once more on the candidate
//! under the runner's coverage tool ([`CoverageTool`]), and the evidence says which changed
//! product hunks they executed: pytest under coverage.py (through [`crate::coverage`]'s
//! script), Go under `go test -coverprofile` (every package of the module measured, so a test
//! in one package covers the code of another), node:test under node's V8 coverage ([`v8`]),
//! cargo under `cargo llvm-cov` ([`lcov`]). Nothing is installed into the project, and where
//! the tool is missing the record says so. The hunks, and for V8 the changed files' text, are
//! found where the repository is (`changed_hunks`), so a fleet's coordinator measures the very
//! same ones.

pub mod lcov;
pub mod source_map;
pub mod v8;

/// More than any real coverage run's report (V8's, lcov's); a bigger one is refused unread
/// (the worker keeps none over 64 MiB, and a reader does not trust that it did not).
pub const MAX_REPORT_BYTES: usize = 64 * 1024 * 1024;

use crate::coverage::{self, CoverageMap};
use crate::mutation::check;
use crate::mutation::mutants::javascript::typescript;
use crate::mutation::mutants::languages;
use crate::prepared::PreparedProof;
use crate::source::{self, SourceError};
use assay_common::JobId;
use assay_common::criteria::Criterion;
use assay_common::diff_coverage::{
    self as record, ChangedHunk, ChangedSource, DiffCoverage, MeasuredFile,
};
use assay_common::job::{JobKind, JobResult, JobSpec, JobStatus, Side};
use assay_common::runner::pytest::python_m_pytest;
use assay_common::runner::{CoverageTool, ReportFormat};
use assay_common::tree_path::TreePath;
use assay_transport::error_chain::error_chain;
use assay_transport::store::{ArtifactError, ArtifactStore, read_named};
use std::collections::{BTreeMap, BTreeSet};

/// The report placeholder pytest's JUnit option carries in a proving-test command.
const JUNIT_OPTION: &str = "--junitxml={report}";

/// The candidate's changed product hunks: lines the change adds or modifies in files of the
/// runner's language that are not its test files; and, for a tool that counts offsets (V8),
/// those files' text as it locates them. Empty where the runner has no coverage tool or the
/// request turned diff coverage off.
pub fn changed_hunks(
    proof: &PreparedProof,
) -> Result<(Vec<ChangedHunk>, Vec<ChangedSource>), SourceError> {
    let runner = proof.runner.runner();
    let Some(tool) = runner.coverage().filter(|_| proof.request.diff_coverage) else {
        return Ok((Vec::new(), Vec::new()));
    };
    let language = runner.language();
    let tests: BTreeSet<&str> = proof
        .change
        .changed_test_files
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    let lines = check::changed_lines(
        &proof.request.repo,
        &proof.change.base.tree,
        &proof.change.candidate.tree,
    )?;
    let product: BTreeMap<TreePath, BTreeSet<u32>> = lines
        .into_iter()
        .filter(|(path, _)| {
            languages::for_path(path).map(|l| l.language()) == language
                && !tests.contains(path.as_str())
        })
        .filter(|(path, _)| !proof.runner.is_test_file(path))
        .filter_map(|(path, lines)| Some((TreePath::new(&path).ok()?, lines)))
        .collect();
    let mut sources = Vec::new();
    if tool.counts_offsets() {
        for (path, lines) in &product {
            let Some(bytes) = source::read_file(
                &proof.request.repo,
                &proof.change.candidate.tree,
                path.as_str(),
            )?
            else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            sources.push(record::source::changed_source(path.clone(), &text, lines));
        }
    }
    Ok((record::hunks_of(&product), sources))
}

/// How a proof measures its diff coverage: the job to run beside its proving jobs, or a record
/// that says at once why nothing can be measured.
pub enum Plan {
    /// Run this job beside the proving jobs and measure its coverage.
    Run(Box<JobSpec>),
    /// Nothing can be measured; the record says why.
    Unmeasured(DiffCoverage),
}

/// The diff coverage run of `proof`, planned before any job runs so that it shares the proving
/// jobs' dispatch (a free slot takes it while the last of them run); `None` without changed
/// product hunks or a candidate proving job.
pub fn plan(proof: &PreparedProof) -> Option<Plan> {
    if proof.diff_hunks.is_empty() {
        return None;
    }
    // The proving tests on the candidate: the changed test files' job, or, when the change
    // touches no test file, a repeat that selects them by name.
    let on_candidate = |kind| {
        proof
            .jobs
            .iter()
            .find(move |j| j.kind == kind && j.side == Side::Candidate)
    };
    let proving = on_candidate(JobKind::Targeted).or_else(|| on_candidate(JobKind::Stability))?;
    let tool = proof.runner.runner().coverage()?;
    // A TypeScript tree's command erases its types first: the tool wraps the command after,
    // and the erasure writes source maps, which lead V8's offsets back to the TypeScript.
    let erased = typescript::erased_from(&proving.command);
    let proving_command = erased.unwrap_or(&proving.command);
    let command = match tool {
        CoverageTool::CoveragePy => coverage_py_command(proving_command),
        CoverageTool::GoCoverProfile => go_cover_command(proving_command),
        CoverageTool::NodeV8 => v8::command(proving_command),
        CoverageTool::CargoLlvmCov => lcov::command(proving_command),
    }
    .map(|command| match erased {
        Some(_) => typescript::erasing_mapped(command),
        None => command,
    });
    Some(match command {
        Ok(command) => {
            let index = proof.jobs.len();
            let mut spec = proving.clone();
            spec.job_id = JobId::for_index(&proof.request.proof_id, index);
            spec.index = index as u32;
            spec.kind = JobKind::Suite;
            spec.command = command;
            // The measurement is uploaded as the job's report; the worker's parse of it as
            // JUnit is not used.
            spec.report = ReportFormat::JunitXml;
            Plan::Run(Box::new(spec))
        }
        Err(why) => Plan::Unmeasured(DiffCoverage::unmeasured(
            tool.name(),
            &proof.diff_hunks,
            why.into(),
        )),
    })
}

/// The record of the planned coverage run's `result` (`None`: it never returned).
pub async fn judge(
    proof: &PreparedProof,
    result: Option<&JobResult>,
    store: &dyn ArtifactStore,
) -> DiffCoverage {
    let hunks = &proof.diff_hunks;
    let Some(tool) = proof.runner.runner().coverage() else {
        return DiffCoverage::unmeasured("", hunks, "the runner has no coverage tool".into());
    };
    let Some(result) = result else {
        return DiffCoverage::unmeasured(
            tool.name(),
            hunks,
            "the coverage run returned no result".into(),
        );
    };
    let measured = match tool {
        CoverageTool::CoveragePy => CoverageMap::read(store, result)
            .await
            .map(|map| measured(&map, &proof.request.criteria))
            .map_err(|e| error_chain(&e)),
        CoverageTool::GoCoverProfile => written_report(store, result)
            .await
            .map(|profile| go_measured(&String::from_utf8_lossy(&profile), hunks))
            .map_err(|e| error_chain(&e)),
        CoverageTool::NodeV8 => written_report(store, result)
            .await
            .map_err(|e| error_chain(&e))
            .and_then(|report| {
                v8::measured(&report, &proof.diff_sources).map_err(|e| error_chain(&e))
            }),
        CoverageTool::CargoLlvmCov => match written_report(store, result).await {
            Ok(report) => lcov::measured(&report, hunks).map_err(|e| error_chain(&e)),
            Err(e) => Err(llvm_cov_missing(store, result)
                .await
                .unwrap_or_else(|| error_chain(&e))),
        },
    };
    let measured = match measured {
        Ok(measured) => measured,
        Err(why) => return DiffCoverage::unmeasured(tool.name(), hunks, why),
    };
    let report = result
        .artifacts
        .iter()
        .find(|a| a.name == "report")
        .cloned();
    record::judge(tool.name(), hunks, &measured, report)
}

/// The candidate's proving-test command under coverage.py, with the same interpreter,
/// selection and options.
fn coverage_py_command(proving: &[String]) -> Result<Vec<String>, &'static str> {
    let (python, args) = python_m_pytest(proving)
        .ok_or("the test command is not `PYTHON -m pytest …`, so coverage.py cannot wrap it")?;
    let pytest_args: Vec<String> = args
        .iter()
        .filter(|a| *a != JUNIT_OPTION)
        .cloned()
        .collect();
    Ok(coverage::command_with(python, pytest_args))
}

/// The candidate's proving-test command with Go's cover profile written to the report's place:
/// every package of the module measured (`-coverpkg=./...`), and no cached result (`-count=1`),
/// which would measure nothing.
fn go_cover_command(proving: &[String]) -> Result<Vec<String>, &'static str> {
    let test = proving
        .iter()
        .position(|word| word == "test")
        .filter(|&at| at > 0)
        .ok_or("the test command is not `go test …`, so no cover profile can be asked of it")?;
    let mut command = proving[..=test].to_vec();
    command.extend(["-count=1", "-coverpkg=./...", "-coverprofile={report}"].map(String::from));
    command.extend(proving[test + 1..].iter().cloned());
    Ok(command)
}

/// Why a coverage run gives no report to measure.
#[derive(Debug, thiserror::Error)]
enum ReportError {
    /// The run kept no `report` artifact; `why` says how it ended instead, as a sentence.
    #[error("{why}")]
    NotWritten { why: String },
    #[error(transparent)]
    Unreadable(#[from] ArtifactError),
}

/// How a coverage run that kept no report ended, as a sentence.
fn not_written(status: &JobStatus) -> String {
    match status {
        JobStatus::Completed { exit_code } => {
            format!("the coverage run exited {exit_code} without writing a report")
        }
        JobStatus::TimedOut => "the coverage run timed out before writing a report".to_owned(),
        JobStatus::Infrastructure { .. } => {
            "the coverage run hit an infrastructure failure and wrote no report".to_owned()
        }
        JobStatus::Cancelled => "the coverage run was cancelled before writing a report".to_owned(),
    }
}

/// The report a coverage run wrote (Go's cover profile, the V8 wrapper's JSON, lcov).
async fn written_report(
    store: &dyn ArtifactStore,
    result: &JobResult,
) -> Result<bytes::Bytes, ReportError> {
    read_named(store, result, "report")
        .await?
        .ok_or_else(|| ReportError::NotWritten {
            why: not_written(&result.status),
        })
}

/// Why an llvm-cov run wrote no report, when its stderr says cargo has no `llvm-cov`.
async fn llvm_cov_missing(store: &dyn ArtifactStore, result: &JobResult) -> Option<String> {
    let stderr = read_named(store, result, "stderr").await.ok()??;
    lcov::says_not_installed(&stderr).then(|| {
        "`cargo llvm-cov` is not installed where the tests run (cargo: no such command: `llvm-cov`)".to_owned()
    })
}

/// Per changed file, its statements' lines and the lines the run executed, from a Go cover
/// profile (`mode: set`, then `IMPORT/PATH/file.go:L1.C1,L2.C2 STATEMENTS COUNT` a block). A
/// block's lines are all its own; a line of an executed block is executed. The profile names
/// files by import path: a file is the changed file its path ends with (`/` + the tree path).
fn go_measured(profile: &str, hunks: &[ChangedHunk]) -> BTreeMap<String, MeasuredFile> {
    let changed: BTreeSet<&str> = hunks.iter().map(|h| h.path.as_str()).collect();
    let suffixes: Vec<(&str, String)> = changed.iter().map(|p| (*p, format!("/{p}"))).collect();
    let mut files: BTreeMap<String, MeasuredFile> = BTreeMap::new();
    for line in profile.lines().skip_while(|l| l.starts_with("mode:")) {
        let Some((file, lines, count)) = go_block(line) else {
            continue;
        };
        let Some((path, _)) = suffixes
            .iter()
            .find(|(path, suffix)| file == *path || file.ends_with(suffix.as_str()))
        else {
            continue;
        };
        let entry = files.entry((*path).to_owned()).or_insert(MeasuredFile {
            statements: BTreeSet::new(),
            executed: BTreeSet::new(),
        });
        entry.statements.extend(lines.clone());
        if count > 0 {
            entry.executed.extend(lines);
        }
    }
    files
}

/// One block of a cover profile: its file, its lines and its count.
fn go_block(line: &str) -> Option<(&str, std::ops::RangeInclusive<u32>, u64)> {
    let (location, rest) = line.rsplit_once(':')?;
    let mut words = rest.split_whitespace();
    let (span, statements, count) = (words.next()?, words.next()?, words.next()?);
    statements.parse::<u32>().ok()?;
    let (start, end) = span.split_once(',')?;
    let line_of = |at: &str| at.split_once('.').and_then(|(l, _)| l.parse::<u32>().ok());
    Some((
        location,
        line_of(start)?..=line_of(end)?,
        count.parse().ok()?,
    ))
}

/// Per file, its statements and the lines the run executed, at import (a `def` line, a
/// module's constants) or inside a proving test (a body): the run holds every test of the
/// changed test files, and a line only another of them ran is not the proving tests' doing.
fn measured(map: &CoverageMap, criteria: &[Criterion]) -> BTreeMap<String, MeasuredFile> {
    let proving = |context: &String| {
        context.is_empty() || {
            // `tests/test_pager.py::PageTests::test_partial[11-5]`: the test's bare name.
            let name = context.rsplit("::").next().unwrap_or(context);
            let name = name.split_once('[').map_or(name, |(bare, _)| bare);
            criteria.iter().any(|c| c.test.matches(name))
        }
    };
    map.files
        .iter()
        .map(|(path, file)| {
            let executed = file
                .lines
                .iter()
                .filter(|(_, contexts)| contexts.iter().any(proving))
                .map(|(line, _)| *line)
                .collect();
            let statements = file.lines.keys().chain(&file.missing).copied().collect();
            (
                path.clone(),
                MeasuredFile {
                    statements,
                    executed,
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_coverage_run_without_a_report_says_how_it_ended_in_a_sentence() {
        let store = assay_transport::store::ObjectArtifactStore::open("memory://").expect("store");
        let ended = |status| JobResult {
            job_id: assay_common::JobId("p-1-0008".into()),
            index: 8,
            status,
            report: assay_common::outcome::ReportOutcome::Missing,
            artifacts: Vec::new(),
            duration_ms: 10,
            worker: assay_common::WorkerId("w-1".into()),
            sandbox: None,
        };
        let cases = [
            (
                JobStatus::Infrastructure {
                    message: "tree b542 could not be materialized".into(),
                    cause: assay_common::fault::InfraCause::TreeFetch,
                },
                "the coverage run hit an infrastructure failure and wrote no report",
            ),
            (
                JobStatus::Completed { exit_code: 1 },
                "the coverage run exited 1 without writing a report",
            ),
            (
                JobStatus::TimedOut,
                "the coverage run timed out before writing a report",
            ),
        ];
        for (status, expected) in cases {
            let why = written_report(&store, &ended(status))
                .await
                .expect_err("no report");
            assert_eq!(why.to_string(), expected);
        }
    }

    fn hunk(path: &str, start: u32, end: u32) -> ChangedHunk {
        ChangedHunk {
            path: TreePath::new(path).expect("a tree path"),
            start,
            end,
        }
    }

    #[test]
    fn a_line_only_another_test_of_the_changed_file_ran_is_not_the_proving_tests_doing() {
        let criteria = assay_common::criteria::parse_criteria(&[
            "test: test_empty_time_designator_is_rejected".to_owned(),
            "guard: test_parseerror".to_owned(),
        ])
        .expect("criteria");
        let mut map = CoverageMap::default();
        map.files.insert(
            "src/isodate/isoduration.py".into(),
            coverage::FileCoverage {
                lines: [
                    (3, vec![String::new()]),
                    (
                        40,
                        vec![
                            "tests/test_duration.py::DurationTest::test_empty_time_designator_is_rejected"
                                .into(),
                        ],
                    ),
                    (52, vec!["tests/test_duration.py::test_parseerror[PT1]".into()]),
                    (86, vec!["tests/test_duration.py::DurationTest::test_typeerror".into()]),
                ]
                .into_iter()
                .collect(),
                missing: [90].into_iter().collect(),
            },
        );
        let file = &measured(&map, &criteria)["src/isodate/isoduration.py"];
        assert_eq!(file.executed, [3, 40, 52].into_iter().collect());
        assert_eq!(file.statements, [3, 40, 52, 86, 90].into_iter().collect());
    }

    #[test]
    fn a_cover_profile_is_read_by_the_changed_file_its_import_path_ends_with() {
        let profile = "mode: set\n\
            example.com/pager/cache/cache.go:6.36,6.53 1 1\n\
            example.com/pager/cache/cache.go:9.32,10.14 1 0\n\
            example.com/pager/cache/cache.go:10.14,12.3 1 0\n\
            example.com/pager/notcache/cache.go:6.1,6.9 1 1\n\
            example.com/pager/cache/cache.go:garbage\n\
            example.com/pager/cache/cache.go:20.1,21.2 one 1\n";
        let measured = go_measured(profile, &[hunk("cache/cache.go", 6, 12)]);
        let file = measured.get("cache/cache.go").expect("the changed file");
        assert_eq!(
            file.statements.iter().copied().collect::<Vec<_>>(),
            [6, 9, 10, 11, 12]
        );
        assert_eq!(file.executed.iter().copied().collect::<Vec<_>>(), [6]);
        assert_eq!(
            measured.len(),
            1,
            "another package's file of the same name is not it"
        );
    }

    #[test]
    fn the_go_cover_run_keeps_the_command_and_adds_its_flags_after_test() {
        let proving: Vec<String> = ["go", "test", "-json", "-run", "^TestA$", "./..."]
            .map(String::from)
            .to_vec();
        assert_eq!(
            go_cover_command(&proving).expect("a go test command"),
            [
                "go",
                "test",
                "-count=1",
                "-coverpkg=./...",
                "-coverprofile={report}",
                "-json",
                "-run",
                "^TestA$",
                "./..."
            ]
        );
        assert!(go_cover_command(&["make".to_owned(), "check".to_owned()]).is_err());
    }
}
