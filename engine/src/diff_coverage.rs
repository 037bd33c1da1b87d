//! A proof's diff coverage (report only): the proving tests run once more on the candidate
//! under the project's coverage tool, and the evidence says which changed product hunks they
//! executed. Only pytest has such a run today (coverage.py, through [`crate::coverage`]'s
//! script); nothing is installed into the project, and where coverage.py is missing the
//! record says so. The hunks are found where the repository is (`changed_hunks`), so a fleet's
//! coordinator measures the very same ones.

use crate::coverage::{self, CoverageMap};
use crate::mutation::check;
use crate::prepared::PreparedProof;
use crate::source::SourceError;
use assay_common::JobId;
use assay_common::diff_coverage::{self as record, ChangedHunk, DiffCoverage, MeasuredFile};
use assay_common::job::{JobKind, JobResult, JobSpec, Side};
use assay_common::runner::CoverageTool;
use assay_common::runner::pytest::python_m_pytest;
use assay_common::tree_path::TreePath;
use assay_transport::error_chain::error_chain;
use assay_transport::store::ArtifactStore;
use std::collections::{BTreeMap, BTreeSet};

/// The tool the pytest coverage run measures with.
const TOOL: &str = "coverage.py";

/// The report placeholder pytest's JUnit option carries in a proving-test command.
const JUNIT_OPTION: &str = "--junitxml={report}";

/// The candidate's changed product hunks: lines the change adds or modifies in Python files
/// that are not its test files. Empty where the runner has no coverage run or the request
/// turned diff coverage off.
pub fn changed_hunks(proof: &PreparedProof) -> Result<Vec<ChangedHunk>, SourceError> {
    if !proof.request.diff_coverage
        || proof.runner.runner().coverage() != Some(CoverageTool::CoveragePy)
    {
        return Ok(Vec::new());
    }
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
        .filter(|(path, _)| path.ends_with(".py") && !tests.contains(path.as_str()))
        .filter(|(path, _)| !proof.runner.is_test_file(path))
        .filter_map(|(path, lines)| Some((TreePath::new(&path).ok()?, lines)))
        .collect();
    Ok(record::hunks_of(&product))
}

/// How a proof measures its diff coverage: the job to run beside its proving jobs, or a record
/// that says at once why nothing can be measured.
pub enum Plan {
    Run(Box<JobSpec>),
    Unmeasured(DiffCoverage),
}

/// The diff coverage run of `proof`, planned before any job runs so that it shares the proving
/// jobs' dispatch (a free slot takes it while the last of them run); `None` without changed
/// product hunks or a candidate proving job.
pub fn plan(proof: &PreparedProof) -> Option<Plan> {
    if proof.diff_hunks.is_empty() {
        return None;
    }
    let proving = proof
        .jobs
        .iter()
        .find(|j| j.kind == JobKind::Targeted && j.side == Side::Candidate)?;
    Some(match coverage_job(proof, proving) {
        Some(spec) => Plan::Run(Box::new(spec)),
        None => Plan::Unmeasured(DiffCoverage::unmeasured(
            TOOL,
            &proof.diff_hunks,
            "the test command is not `PYTHON -m pytest …`, so coverage.py cannot wrap it".into(),
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
    let Some(result) = result else {
        return DiffCoverage::unmeasured(TOOL, hunks, "the coverage run returned no result".into());
    };
    let map = match CoverageMap::read(store, result).await {
        Ok(map) => map,
        Err(e) => return DiffCoverage::unmeasured(TOOL, hunks, error_chain(&e)),
    };
    let report = result
        .artifacts
        .iter()
        .find(|a| a.name == "report")
        .cloned();
    record::judge(TOOL, hunks, &measured(&map), report)
}

/// The candidate's proving-test job again, under coverage.py with the same interpreter,
/// selection and options, as the job after the planned ones.
fn coverage_job(proof: &PreparedProof, proving: &JobSpec) -> Option<JobSpec> {
    let (python, args) = python_m_pytest(&proving.command)?;
    let pytest_args: Vec<String> = args
        .iter()
        .filter(|a| *a != JUNIT_OPTION)
        .cloned()
        .collect();
    let index = proof.jobs.len();
    let mut spec = proving.clone();
    spec.job_id = JobId::for_index(&proof.request.proof_id, index);
    spec.index = index as u32;
    spec.kind = JobKind::Suite;
    spec.command = coverage::command_with(python, pytest_args);
    Some(spec)
}

/// Per file, its statements and the lines the run executed, at import (a `def` line, a
/// module's constants) or inside a proving test (a body).
fn measured(map: &CoverageMap) -> BTreeMap<String, MeasuredFile> {
    map.files
        .iter()
        .map(|(path, file)| {
            let executed = file.lines.keys().copied().collect();
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
