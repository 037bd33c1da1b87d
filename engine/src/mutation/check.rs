//! The mutation check of a proven proof: finds the change's changed product lines with git2,
//! plans mutants on them, runs the proving tests once unmutated and then once per mutant
//! through the proof's own job queue (so mutants run `--jobs` at a time, or fan out on a
//! fleet), and judges each mutant. Report only: nothing here touches a verdict. What it
//! yields is the evidence's record, [`assay_common::mutation_check::MutationCheck`].

mod schemata;
use schemata::NoPrebuiltBaseline;

use crate::dispatch::{Admit, Flow, Hooks, dispatch, run_one};
use crate::mutation::mutants::budget::MutantTimeout;
use crate::mutation::mutants::budget::assemble_check;
use crate::mutation::mutants::judge::{Expected, Judgement, compile_error, judge_run, outcome_of};
use crate::mutation::mutants::languages;
use crate::mutation::mutants::rust::prebuilt;
use crate::mutation::mutants::{
    self, ChangedFile, DEFAULT_MUTANTS_PER_FILE, ExcludedFile, ExclusionReason, MutantOutcome,
    MutationCheck, MutationPlan, NotRunReason, OperatorSet,
};
use crate::prepared::PreparedProof;
use crate::progress::{ProgressSink, ProofEvent};
use crate::source::{self, SourceError};
use assay_common::criteria::TestSelector;
use assay_common::job::{ArtifactRef, ByteEdit, JobKind, JobResult, JobSpec, JobStatus, Side};
use assay_common::manifest::ManifestJob;
use assay_common::mutation_plan::{MutationSetup, SchemaSource};
use assay_common::runner::ReportFormat;
use assay_common::test_binaries::Selection;
use assay_common::tree_path::TreePath;
use assay_common::{JobId, TreeId};
use assay_transport::error_chain::error_chain;
use assay_transport::queue::{JobQueue, QueueError};
use assay_transport::store::ArtifactStore;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

/// Candidate-side line numbers (1-based) that the change adds or modifies, per file.
pub fn changed_lines(
    repo_path: &Path,
    base: &TreeId,
    candidate: &TreeId,
) -> Result<BTreeMap<String, BTreeSet<u32>>, SourceError> {
    let repo = source::open(repo_path)?;
    let git = |what: &str| {
        let what = what.to_owned();
        move |source| SourceError::Git { what, source }
    };
    let tree = |id: &TreeId| -> Result<git2::Tree<'_>, SourceError> {
        let oid = git2::Oid::from_str(id.as_str()).map_err(git("parse a tree id"))?;
        repo.find_tree(oid).map_err(git("find a tree for the diff"))
    };
    let (base_tree, candidate_tree) = (tree(base)?, tree(candidate)?);
    // No context lines: only added lines carry a new-side number worth mutating.
    let mut options = git2::DiffOptions::new();
    options.context_lines(0);
    let diff = repo
        .diff_tree_to_tree(Some(&base_tree), Some(&candidate_tree), Some(&mut options))
        .map_err(git("diff base..candidate for changed lines"))?;
    let mut lines: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    diff.foreach(
        &mut |_, _| true,
        None,
        None,
        Some(&mut |delta, _hunk, line| {
            if line.origin() == '+'
                && let (Some(path), Some(number)) = (
                    delta.new_file().path().and_then(Path::to_str),
                    line.new_lineno(),
                )
            {
                lines.entry(path.to_owned()).or_default().insert(number);
            }
            true
        }),
    )
    .map_err(git("walk the diff's lines"))?;
    Ok(lines)
}

/// The mutants for a proof: at most six per changed product file, on its changed lines, and
/// the texts the check builds them from at once ([`schema_sources`]). Changed test files are
/// never mutated; they are listed as excluded.
pub fn plan_for(proof: &PreparedProof) -> Result<(MutationPlan, Vec<SchemaSource>), SourceError> {
    let change = &proof.change;
    let repo = &proof.request.repo;
    let lines = changed_lines(repo, &change.base.tree, &change.candidate.tree)?;
    let test_files: BTreeSet<&str> = change
        .changed_test_files
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    let language = languages::of_check(proof.runner);
    let mut files = Vec::new();
    let mut excluded = Vec::new();
    for file in change.changed.iter().filter(|f| !f.deleted) {
        if test_files.contains(file.path.as_str()) {
            if language.is_source(&file.path) {
                excluded.push(ExcludedFile {
                    path: file.path.clone(),
                    reason: ExclusionReason::TestFile,
                    note: "a test file: the tests are what the check measures".into(),
                });
            }
            continue;
        }
        let Some(changed_lines) = lines.get(&file.path) else {
            continue; // a pure rename or mode change: no line to mutate
        };
        let Some(bytes) = source::read_file(repo, &change.candidate.tree, &file.path)? else {
            continue;
        };
        files.push(ChangedFile {
            path: file.path.clone(),
            bytes,
            changed_lines: changed_lines.clone(),
        });
    }
    let mut plan = mutants::plan_mutants_in(
        language,
        &files,
        Some(DEFAULT_MUTANTS_PER_FILE),
        OperatorSet::Default,
    );
    plan.excluded_files.extend(excluded);
    plan.excluded_files.sort_by(|a, b| a.path.cmp(&b.path));
    let sources = schema_sources(proof, &plan, &files);
    Ok((plan, sources))
}

/// The proof's named tests (every criterion's), in the order they are declared.
fn proving_tests(proof: &PreparedProof) -> Vec<(String, TestSelector)> {
    let mut seen = BTreeSet::new();
    proof
        .request
        .criteria
        .iter()
        .filter(|c| seen.insert(c.test.display().to_owned()))
        .map(|c| (c.test.display().to_owned(), c.test.clone()))
        .collect()
}

/// Why the unmutated run did not pass, in words.
fn why_not_passed(judgement: &Judgement) -> String {
    match judgement {
        Judgement::Killed {
            reason: Some(reason),
            ..
        } => reason.clone(),
        Judgement::Killed { by, reason: None } => format!("{} failed", by.join(", ")),
        Judgement::TimedOut { limit } => format!("timed out after {}s", limit.as_secs()),
        Judgement::NotRun(why) => why.to_string(),
        Judgement::Survived { .. } => "it passed".to_owned(),
    }
}

/// Whether an unmutated run can stand as the baseline mutants are judged against: it ran at
/// least one test and every test it had to pass passed. Against a red or empty baseline every
/// mutant "dies" of the baseline's own failure, so, as mutmut and Stryker refuse a red initial
/// run, nothing is judged; `Err` says why, naming the failing tests.
pub fn judge_baseline(result: &JobResult, judgement: &Judgement) -> Result<(), BaselineProblem> {
    match (judgement, &result.status) {
        (Judgement::Survived { tests_run }, _) if *tests_run > 0 => Ok(()),
        (Judgement::Survived { .. }, _) => Err(BaselineProblem::RanNoTest),
        (_, JobStatus::Completed { exit_code }) if result.report.parsed().is_none() => {
            Err(BaselineProblem::NoReport {
                exit_code: *exit_code,
                problem: result
                    .report
                    .problem()
                    .unwrap_or_else(|| "left no usable report".into()),
            })
        }
        (other, _) => Err(BaselineProblem::NotPassed(why_not_passed(other))),
    }
}

/// Why an unmutated run cannot stand as the baseline mutants are judged against.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BaselineProblem {
    #[error("it ran no test")]
    RanNoTest,
    #[error(
        "it exited {exit_code} and {problem} (hint: is the test runner installed where the tests run?)"
    )]
    NoReport { exit_code: i32, problem: String },
    /// What failed, timed out or broke, as the judgement says it.
    #[error("{0}")]
    NotPassed(String),
    /// What the per-test coverage map says of the run (see `CoverageMap::baseline_problem`).
    #[error("{0}")]
    CoverageMap(String),
    /// The queue could not run it, with its error chain.
    #[error("it could not be run: {0}")]
    Unrun(String),
}

/// Where a check job's report comes from, for a run of the proving tests `names`: where the
/// proof's own jobs read it when the command writes it inside the tree (`--test-report
/// junit:PATH`); for a manifest corpus, the cases `names` select from the candidate suite's
/// (the runner's default holds no case); else the runner's place. It is read from the planned
/// jobs, so a fleet coordinator, which gets the jobs and not the request, finds it too.
fn report_format(proof: &PreparedProof, names: &[String]) -> ReportFormat {
    for planned in &proof.jobs {
        match &planned.report {
            in_tree @ ReportFormat::JunitXmlInTree(_) => return in_tree.clone(),
            ReportFormat::ManifestCases(suite)
                if planned.kind == JobKind::Suite && planned.side == Side::Candidate =>
            {
                let cases = ManifestJob::select(&suite.corpus, &suite.cases, names);
                return ReportFormat::ManifestCases(cases);
            }
            _ => {}
        }
    }
    proof.runner.report_format_for(&command_prefix(proof))
}

/// The check's command prefix: the proof's command, or the runner's portable default (the
/// check may run on a fleet coordinator, which knows nothing of the submitter's tools).
fn command_prefix(proof: &PreparedProof) -> Vec<String> {
    proof
        .request
        .test_command
        .clone()
        .unwrap_or_else(|| proof.runner.default_command())
}

/// Builds the job that runs the proving tests on the candidate, with `edit` applied if given.
fn job(
    proof: &PreparedProof,
    index: usize,
    names: &[String],
    edit: Option<ByteEdit>,
    timeout: Duration,
) -> JobSpec {
    let prefix = command_prefix(proof);
    JobSpec {
        proof_id: proof.request.proof_id.clone(),
        job_id: JobId::for_index(&proof.request.proof_id, index),
        index: index as u32,
        kind: JobKind::Mutant,
        side: Side::Candidate,
        tree: proof.change.candidate.tree.clone(),
        command: proof.runner.command(&prefix, &[], names),
        report: report_format(proof, names),
        selected_tests: names.to_vec(),
        timeout_secs: timeout.as_secs().max(1),
        forked_timeout_secs: None,
        rewrites: Vec::new(),
        binaries: None,
        env: Vec::new(),
        edit,
    }
}

/// Jobs the check of `setup` may run after the proof's own: the unmutated run, one per mutant,
/// and the schema's when the setup offers one ([`schemata::JOBS`]).
pub fn job_count(setup: &MutationSetup) -> usize {
    match setup.plan.mutants.len() {
        0 => 0,
        mutants if setup.schema_sources.is_empty() => mutants + 1,
        mutants => mutants + 1 + schemata::JOBS,
    }
}

/// The candidate's text of each of `files` holding a mutant of `plan`, for the check to build
/// its mutants once behind the runtime switch: Rust under cargo only, unless the schemata are
/// switched off ([`prebuilt::SWITCH_OFF_VARIABLE`]).
fn schema_sources(
    proof: &PreparedProof,
    plan: &MutationPlan,
    files: &[ChangedFile],
) -> Vec<SchemaSource> {
    if !prebuilt::wanted(proof.runner) {
        return Vec::new();
    }
    let (repo, tree) = (&proof.request.repo, &proof.change.candidate.tree);
    let mut packages = prebuilt::Packages::of(repo, tree);
    let mutated: BTreeMap<&str, &TreePath> = plan
        .mutants
        .iter()
        .map(|m| (m.path.as_str(), &m.path))
        .collect();
    files
        .iter()
        .filter_map(|file| {
            Some(SchemaSource {
                path: (*mutated.get(file.path.as_str())?).clone(),
                text: String::from_utf8(file.bytes.clone()).ok()?,
                proc_macro: packages.is_proc_macro(&file.path),
            })
        })
        .collect()
}

/// Runs the mutation check `setup` of a proven proof, with at most `slots` jobs in flight on
/// `queue`. What could not run is `not_run` with its reason, or a note; it fails only when
/// the queue's result stream closes (the proof was cancelled).
///
/// The check's jobs belong to the proof and follow its jobs in plan order (the unmutated run,
/// then one job per mutant, then the schema's builds), so on a fleet their results reach this
/// proof and a restarted coordinator finds the ones already applied.
pub async fn run_check(
    proof: &PreparedProof,
    setup: &MutationSetup,
    queue: &dyn JobQueue,
    store: &dyn ArtifactStore,
    slots: usize,
    progress: &dyn ProgressSink,
) -> Result<MutationCheck, QueueError> {
    let started = Instant::now();
    let budget = Duration::from_secs(setup.budget_secs);
    let tests = proving_tests(proof);
    let names: Vec<String> = tests.iter().map(|(name, _)| name.clone()).collect();
    let assemble = |plan: MutationPlan, outcomes, unmutated, notes: Vec<String>| {
        let mut check = assemble_check(plan, outcomes, names.clone(), budget, unmutated);
        check.notes.extend(notes);
        check
    };
    if let Some(why) = &setup.planning_error {
        let note = format!("failed to plan mutants: {why}");
        return Ok(assemble(
            MutationPlan::default(),
            Vec::new(),
            None,
            vec![note],
        ));
    }
    let plan = setup.plan.clone();
    if plan.mutants.is_empty() {
        let note = "no mutation site on the changed product lines".to_owned();
        return Ok(assemble(plan, Vec::new(), None, vec![note]));
    }
    let first_index = proof.after_plan_index();
    let mutants = plan.mutants.len();
    let schema_index = first_index + 1 + mutants;
    let unmutated_timeout = budget.min(Duration::from_secs(proof.request.timeout_secs));
    let done = std::sync::atomic::AtomicUsize::new(0);
    let total = mutants + 1 + usize::from(!setup.schema_sources.is_empty());
    let finished = |spec: &JobSpec, result: &JobResult| {
        let done = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        progress.event(ProofEvent::JobFinished {
            done,
            total: total.max(done),
            spec,
            result,
        });
    };
    let candidate_job = |index: usize| job(proof, index, &names, None, unmutated_timeout);

    // Build once, when the submitter sent the schema's files.
    let mut schemata = if setup.schema_sources.is_empty() {
        None
    } else {
        let jobs = schemata::BuildJobs {
            make_job: &candidate_job,
            first_index: schema_index,
            command_prefix: &command_prefix(proof),
            timeout_secs: budget.as_secs(),
            on_finished: &finished,
        };
        Some(schemata::build(setup, &jobs, queue, store).await?)
    };
    // The unmutated run: of the prebuilt tests, which also names the proving tests by
    // executable; if they cannot stand as the baseline, every mutant builds on its own and the
    // unmutated run is cargo's own.
    let mut prebuilt: Option<Prebuilt> = None;
    let mut baseline_index = first_index;
    if let Some(schemata) = &mut schemata
        && let Some(archive) = schemata.archive.clone()
    {
        let spec = candidate_job(first_index);
        match prebuilt_baseline(queue, spec, archive, &tests, unmutated_timeout, &finished).await? {
            Ok(built) => prebuilt = Some(built),
            Err(why) => {
                schemata.give_up(
                    mutants,
                    format!("the prebuilt tests are no baseline: {why}"),
                );
                baseline_index = schemata::fallback_baseline_index(schema_index);
            }
        }
    }
    let mut notes: Vec<String> = schemata
        .iter()
        .map(|s| schemata::summary(s, mutants))
        .collect();
    let baseline_result = match &prebuilt {
        Some(prebuilt) => prebuilt.result.clone(),
        None => {
            let spec = candidate_job(baseline_index);
            match unmutated_run(queue, &spec, &tests, unmutated_timeout, &finished).await? {
                Unmutated::Passed(result) => result,
                Unmutated::Unrun(why) => {
                    notes.insert(0, format!("the unmutated run could not be run: {why}"));
                    return Ok(assemble(plan, Vec::new(), None, notes));
                }
                Unmutated::Failed(result, why) => {
                    let reason =
                        format!("the unmutated run of the proving tests did not pass: {why}");
                    let outcomes = plan
                        .mutants
                        .iter()
                        .map(|_| MutantOutcome::NotRun {
                            reason: reason.clone(),
                        })
                        .collect();
                    notes.insert(0, reason);
                    let unmutated = Duration::from_millis(result.duration_ms);
                    return Ok(assemble(plan, outcomes, Some(unmutated), notes));
                }
            }
        }
    };
    let unmutated = Duration::from_millis(baseline_result.duration_ms);

    // One job per mutant: a run of the prebuilt tests with its number set, the proving tests
    // alone selected, where the schema holds it; else a build of its own. A mutant whose own
    // code did not compile in the schema needs no job to say so.
    let mut outcomes: Vec<Option<MutantOutcome>> = vec![None; mutants];
    let mut specs = Vec::new();
    let mut positions = Vec::new();
    for (at, mutant) in plan.mutants.iter().enumerate() {
        let index = first_index + 1 + at;
        if let Some(error) = schemata.as_ref().and_then(|s| s.unviable.get(&at)) {
            outcomes[at] = Some(MutantOutcome::NotRun {
                reason: format!("does not compile: {error}"),
            });
            continue;
        }
        let spec = match &prebuilt {
            Some(prebuilt) if schemata.as_ref().is_some_and(|s| s.holds(at)) => {
                let mut spec = candidate_job(index);
                let only = Some(prebuilt.selection.clone());
                prebuilt::make_run_job(&mut spec, &prebuilt.archive, at + 1, only);
                spec
            }
            _ => job(
                proof,
                index,
                &names,
                Some(mutant.edit.clone()),
                unmutated_timeout,
            ),
        };
        specs.push(spec);
        positions.push(at);
    }
    // A mutant built on its own pays the build the prebuilt baseline did not.
    let build_cost = match (&prebuilt, &schemata) {
        (Some(_), Some(schemata)) => schemata.one_build,
        _ => Duration::ZERO,
    };
    // Every limit fits in the budget; past it and a grace, a mutant whose result never came
    // (a lost job on a fleet) has none, rather than holding the proof forever.
    let deadline = started + budget + mutants::budget::MIN_TIME_TO_START;
    let compiled = languages::of_check(proof.runner).compiles();
    let ran = run_mutants(
        queue,
        &specs,
        slots,
        Some(deadline),
        |spec| {
            let left = budget.saturating_sub(started.elapsed());
            let expected = match spec.binaries {
                Some(_) => unmutated,
                None => unmutated + build_cost,
            };
            let timeout = mutants::mutant_timeout(left, expected)?;
            spec.timeout_secs = timeout.limit.as_secs().max(1);
            Ok(timeout)
        },
        |result, timeout| match compile_error(result).filter(|_| compiled) {
            Some(error) => MutantOutcome::NotRun {
                reason: format!("does not compile: {error}"),
            },
            None => outcome_of(
                judge_run(result, timeout, Expected::ProvingTests(&tests)),
                &names,
            ),
        },
        |reason| MutantOutcome::NotRun {
            reason: reason.to_string(),
        },
        |_, spec, result| finished(spec, result),
    )
    .await?;
    for (at, outcome) in positions.into_iter().zip(ran) {
        outcomes[at] = Some(outcome);
    }
    let outcomes = outcomes
        .into_iter()
        .map(|o| {
            o.unwrap_or_else(|| MutantOutcome::NotRun {
                reason: NotRunReason::NoResult.to_string(),
            })
        })
        .collect();
    Ok(assemble(plan, outcomes, Some(unmutated), notes))
}

/// The executables the schema build kept, the proving tests among them, and their unmutated
/// run.
struct Prebuilt {
    archive: ArtifactRef,
    selection: Selection,
    result: JobResult,
}

/// The unmutated run of the prebuilt tests in `archive` (as `spec`, a job of the proving tests
/// on the candidate), and the proving tests by executable as it names them; `Err` says why it
/// cannot stand as the baseline. Fails only when the queue's result stream closes.
async fn prebuilt_baseline(
    queue: &dyn JobQueue,
    mut spec: JobSpec,
    archive: ArtifactRef,
    tests: &[(String, TestSelector)],
    limit: Duration,
    finished: &(dyn Fn(&JobSpec, &JobResult) + Sync),
) -> Result<Result<Prebuilt, NoPrebuiltBaseline>, QueueError> {
    prebuilt::make_run_job(&mut spec, &archive, 0, None);
    Ok(
        match unmutated_run(queue, &spec, tests, limit, finished).await? {
            Unmutated::Passed(result) => {
                schemata::proving_selection(tests, &result).map(|selection| Prebuilt {
                    archive,
                    selection,
                    result,
                })
            }
            Unmutated::Failed(_, why) => Err(why.into()),
            Unmutated::Unrun(why) => Err(NoPrebuiltBaseline::NotRun(why)),
        },
    )
}

/// The unmutated run of the proving tests.
enum Unmutated {
    /// Every proving test passed: the baseline mutants are judged against.
    Passed(JobResult),
    /// It ran and cannot stand as the baseline, with why.
    Failed(JobResult, BaselineProblem),
    /// It could not run (the queue refused it), with why.
    Unrun(String),
}

/// Runs `spec`, the unmutated run of the proving `tests`, and judges whether it can stand as
/// the baseline. Fails only when the queue's result stream closes.
async fn unmutated_run(
    queue: &dyn JobQueue,
    spec: &JobSpec,
    tests: &[(String, TestSelector)],
    limit: Duration,
    finished: &(dyn Fn(&JobSpec, &JobResult) + Sync),
) -> Result<Unmutated, QueueError> {
    let result = match run_one(queue, spec).await {
        Ok(result) => result,
        Err(closed @ QueueError::Closed { .. }) => return Err(closed),
        Err(e) => return Ok(Unmutated::Unrun(error_chain(&e))),
    };
    finished(spec, &result);
    let timeout = MutantTimeout {
        limit,
        set_by_budget: true,
    };
    let judgement = judge_run(&result, timeout, Expected::ProvingTests(tests));
    Ok(match judge_baseline(&result, &judgement) {
        Ok(()) => Unmutated::Passed(result),
        Err(why) => Unmutated::Failed(result, why),
    })
}

/// Runs `specs` on `queue` with at most `slots` in flight and returns one outcome per spec in
/// plan order. `admit` sets a job's limit when its turn comes (the budget left decides it) or
/// says why it does not start; `judge` turns a result into an outcome. A result stream that
/// closes with jobs in flight (a cancelled proof) is an error, never a set of outcomes; a
/// mutant still running at `deadline` has no result.
#[allow(clippy::too_many_arguments)]
pub async fn run_mutants<T: Clone + Send>(
    queue: &dyn JobQueue,
    specs: &[JobSpec],
    slots: usize,
    deadline: Option<Instant>,
    admit: impl FnMut(&mut JobSpec) -> Result<MutantTimeout, NotRunReason> + Send,
    judge: impl Fn(&JobResult, MutantTimeout) -> T + Send,
    not_run: impl Fn(NotRunReason) -> T + Send,
    on_finished: impl Fn(usize, &JobSpec, &JobResult) + Send,
) -> Result<Vec<T>, QueueError> {
    struct Mutants<T, A, J, N, F> {
        outcomes: Vec<Option<T>>,
        limits: Vec<Option<MutantTimeout>>,
        admit: A,
        judge: J,
        not_run: N,
        on_finished: F,
    }
    impl<T, A, J, N, F> Hooks for Mutants<T, A, J, N, F>
    where
        T: Send,
        A: FnMut(&mut JobSpec) -> Result<MutantTimeout, NotRunReason> + Send,
        J: Fn(&JobResult, MutantTimeout) -> T + Send,
        N: Fn(NotRunReason) -> T + Send,
        F: Fn(usize, &JobSpec, &JobResult) + Send,
    {
        fn admit(&mut self, at: usize, spec: &mut JobSpec) -> Admit {
            match (self.admit)(spec) {
                Ok(timeout) => {
                    self.limits[at] = Some(timeout);
                    Admit::Run
                }
                Err(reason) => {
                    self.outcomes[at] = Some((self.not_run)(reason));
                    Admit::Skip
                }
            }
        }
        fn submit_failed(&mut self, at: usize, error: QueueError) -> Result<(), QueueError> {
            self.outcomes[at] = Some((self.not_run)(NotRunReason::Infrastructure {
                message: error_chain(&error),
            }));
            Ok(())
        }
        fn finished(&mut self, at: usize, done: usize, spec: &JobSpec, result: &JobResult) -> Flow {
            if let Some(timeout) = self.limits[at] {
                self.outcomes[at] = Some((self.judge)(result, timeout));
            }
            (self.on_finished)(done - 1, spec, result);
            Flow::Continue
        }
    }
    let mut mutants = Mutants {
        outcomes: vec![None; specs.len()],
        limits: vec![None; specs.len()],
        admit,
        judge,
        not_run,
        on_finished,
    };
    dispatch(queue, specs, slots, deadline, &mut mutants).await?;
    let not_run = &mutants.not_run;
    Ok(mutants
        .outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| not_run(NotRunReason::NoResult)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn unmutated_run(exit_code: i32, report: assay_common::outcome::ReportOutcome) -> JobResult {
        JobResult {
            job_id: JobId("p-1-0008".into()),
            index: 8,
            status: JobStatus::Completed { exit_code },
            report,
            artifacts: Vec::new(),
            duration_ms: 900,
            worker: assay_common::WorkerId("w-1".into()),
            sandbox: None,
        }
    }

    fn judged(result: &JobResult) -> Result<(), BaselineProblem> {
        let judgement = judge_run(
            result,
            MutantTimeout {
                limit: Duration::from_secs(60),
                set_by_budget: true,
            },
            Expected::EveryTestRun,
        );
        judge_baseline(result, &judgement)
    }

    #[test]
    fn a_red_or_empty_unmutated_run_is_no_baseline() {
        use assay_common::outcome::{CaseResult, Outcome, ReportOutcome, TestReport};
        let case = |name: &str, outcome| CaseResult {
            file: "tests/test_version.py".into(),
            suite: "tests.test_version".into(),
            name: name.into(),
            variant: None,
            outcome,
            message: None,
        };
        let report = |cases| {
            ReportOutcome::Parsed(TestReport {
                cases,
                collection_errors: vec![],
            })
        };
        let green = unmutated_run(0, report(vec![case("test_parse", Outcome::Passed)]));
        assert_eq!(judged(&green), Ok(()));
        // The runner is missing: `python3 -m pytest` exits 1 with no report.
        let missing = judged(&unmutated_run(1, ReportOutcome::Missing)).unwrap_err();
        assert!(
            matches!(missing, BaselineProblem::NoReport { exit_code: 1, .. }),
            "{missing:?}"
        );
        let missing = missing.to_string();
        assert!(
            missing.starts_with("it exited 1 and the command wrote no report")
                && missing.contains("is the test runner installed"),
            "{missing}"
        );
        let red = unmutated_run(
            1,
            report(vec![
                case("test_parse", Outcome::Passed),
                case("test_compare", Outcome::Failed),
            ]),
        );
        let why = judged(&red).unwrap_err().to_string();
        assert!(
            why.contains("test_compare") && why.ends_with("failed"),
            "{why}"
        );
        let skipped = unmutated_run(0, report(vec![case("test_parse", Outcome::Skipped)]));
        assert_eq!(
            judged(&skipped),
            Err(BaselineProblem::NotPassed(
                "the run executed zero tests".into()
            ))
        );
    }

    #[test]
    fn the_published_check_is_written_and_read_as_the_checks_own_record_was() {
        let source = "def page_count(total, size):\n    if size <= 0:\n        raise ValueError(size)\n    pages = total // size\n    if total % size > 0:\n        pages += 1\n    return pages\n";
        let file = ChangedFile {
            path: "pager/__init__.py".into(),
            bytes: source.as_bytes().to_vec(),
            changed_lines: (1..=7).collect(),
        };
        let mut plan = mutants::plan_mutants_in(
            languages::of_check(assay_common::runner::RunnerKind::Pytest),
            &[file],
            Some(DEFAULT_MUTANTS_PER_FILE),
            OperatorSet::Default,
        );
        plan.skipped.push(assay_common::mutation_plan::SkippedSite {
            path: "pager/__init__.py".into(),
            line: 7,
            operator: assay_common::mutation_plan::Operator::ReturnConstant,
            description: "`return None`".into(),
            reason: "returns the constant already".into(),
        });
        plan.excluded_files.push(ExcludedFile {
            path: "tests/test_pager.py".into(),
            reason: ExclusionReason::TestFile,
            note: "a test file: the tests are what the check measures".into(),
        });
        assert!(plan.mutants.len() >= 4, "{plan:#?}");
        let proving = vec!["test_partial_last_page_is_counted".to_owned()];
        let outcomes = vec![
            MutantOutcome::Killed {
                by: proving.clone(),
                timed_out: false,
                reason: None,
            },
            MutantOutcome::Killed {
                by: Vec::new(),
                timed_out: true,
                reason: Some("the session crashed".into()),
            },
            MutantOutcome::Survived,
            MutantOutcome::NotRun {
                reason: NotRunReason::NoTestRan.to_string(),
            },
        ];
        let mut check = assemble_check(
            plan,
            outcomes,
            proving,
            Duration::from_secs(900),
            Some(Duration::from_millis(420)),
        );
        check.notes.push("a note".into());
        // How the evidence held it before it had a type of its own.
        let written_before = serde_json::to_value(&check).unwrap();
        let published = check;
        assert_eq!(serde_json::to_value(&published).unwrap(), written_before);
        let read: MutationCheck = serde_json::from_value(written_before.clone()).unwrap();
        assert_eq!(read, published);
        assert!(!read.survivors.is_empty() && !read.skipped.is_empty());
        let unfinished = assemble_check(
            MutationPlan::default(),
            Vec::new(),
            Vec::new(),
            Duration::from_secs(60),
            None,
        );
        let written_before = serde_json::to_value(&unfinished).unwrap();
        assert_eq!(serde_json::to_value(unfinished).unwrap(), written_before);
    }

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    #[test]
    fn changed_lines_are_the_added_lines_on_the_candidate_side() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        git(repo, &["init", "-q", "-b", "main"]);
        git(repo, &["config", "user.name", "Dana Reviewer"]);
        git(repo, &["config", "user.email", "dana@example.com"]);
        std::fs::write(
            repo.join("pager.py"),
            "def page_count(total, size):\n    return total // size\n",
        )
        .unwrap();
        git(repo, &["add", "-A"]);
        git(repo, &["commit", "-q", "-m", "pager"]);
        let base = git(repo, &["rev-parse", "HEAD^{tree}"]);
        std::fs::write(
            repo.join("pager.py"),
            "def page_count(total, size):\n    pages = total // size\n    if total % size > 0:\n        pages += 1\n    return pages\n",
        )
        .unwrap();
        std::fs::write(repo.join("README.md"), "pager\n").unwrap();
        git(repo, &["add", "-A"]);
        git(repo, &["commit", "-q", "-m", "fix"]);
        let candidate = git(repo, &["rev-parse", "HEAD^{tree}"]);
        let lines = changed_lines(repo, &TreeId(base), &TreeId(candidate)).unwrap();
        assert_eq!(
            lines["pager.py"].iter().copied().collect::<Vec<_>>(),
            [2, 3, 4, 5]
        );
        assert_eq!(lines["README.md"].iter().copied().collect::<Vec<_>>(), [1]);
    }
}
