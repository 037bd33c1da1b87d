//! The mutation check of a proven proof: finds the change's changed product lines with git2,
//! plans mutants on them, runs the proving tests once unmutated and then once per mutant
//! through the proof's own job queue (so mutants run `--jobs` at a time, or fan out on a
//! fleet), and judges each mutant. Report only: nothing here touches a verdict. What it
//! yields is the evidence's record, [`assay_common::mutation_check::MutationCheck`].

mod baseline;
mod run_mutants;
mod schemata;

pub use baseline::{BaselineProblem, judge_baseline, with_network_failure};
use baseline::{Prebuilt, Unmutated, prebuilt_baseline, unmutated_run};
pub use run_mutants::run_mutants;

use crate::mutation::mutants::budget::assemble_check;
use crate::mutation::mutants::javascript::typescript;
use crate::mutation::mutants::judge::{Expected, compile_error, judge_run, outcome_of};
use crate::mutation::mutants::languages;
use crate::mutation::mutants::rust::prebuilt;
use crate::mutation::mutants::{
    self, ChangedFile, DEFAULT_MUTANTS_PER_FILE, ExcludedFile, ExclusionReason, MutantOutcome,
    MutationCheck, MutationPlan, NotRunReason, OperatorSet,
};
use crate::prepared::PreparedProof;
use crate::progress::{ProgressSink, ProofEvent};
use crate::source::{self, SourceError};
use assay_common::TreeId;
use assay_common::criteria::TestSelector;
use assay_common::job::{ByteEdit, JobKind, JobResult, JobSpec, Side};
use assay_common::manifest::ManifestJob;
use assay_common::mutation_plan::{MutationSetup, SchemaSource};
use assay_common::runner::ReportFormat;
use assay_common::tree_path::TreePath;
use assay_transport::queue::{JobQueue, QueueError};
use assay_transport::store::ArtifactStore;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

/// Where the mutation check numbers its jobs in a proof's plan (see [`run_check`]): from the
/// proof's `after_plan_index`, the unmutated run, one job per mutant, then the schema's builds
/// and the unmutated run built by cargo should the prebuilt tests not pass. Progress names a
/// check job by its index alone, so the CLI of a fleet proof, which has no spec for the check's
/// jobs, names each one as embedded mode does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckJobs {
    /// The plan index of the unmutated run.
    pub first_index: usize,
    /// The mutants planned.
    pub mutants: usize,
}

impl CheckJobs {
    /// The check's jobs of `proof`; `None` when it runs no check.
    pub fn of(proof: &PreparedProof) -> Option<Self> {
        proof.mutation.as_ref().map(|setup| Self {
            first_index: proof.after_plan_index(),
            mutants: setup.plan.mutants.len(),
        })
    }

    /// The plan index of the schema's first build.
    fn schema_index(&self) -> usize {
        self.first_index + 1 + self.mutants
    }

    /// The check's name for its job at plan `index`: `unmutated`, `mutant` or
    /// `schema-build`.
    pub fn label(&self, index: usize) -> &'static str {
        let schema_index = self.schema_index();
        if index == self.first_index || index == schemata::fallback_baseline_index(schema_index) {
            "unmutated"
        } else if index < schema_index {
            "mutant"
        } else {
            "schema-build"
        }
    }
}

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
    let mut command = proof.runner.command(&prefix, &[], names);
    // Where the proof's own jobs erase a TypeScript tree's types, the check's do too.
    if proof
        .jobs
        .iter()
        .any(|j| typescript::is_erasing(&j.command))
    {
        command = typescript::erasing(command);
    }
    JobSpec {
        selected_tests: names.to_vec(),
        edit,
        ..JobSpec::new(
            &proof.request.proof_id,
            index,
            JobKind::Mutant,
            Side::Candidate,
            &proof.change.candidate.tree,
            command,
            report_format(proof, names),
            timeout.as_secs().max(1),
        )
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
    let check_jobs = CheckJobs {
        first_index: proof.after_plan_index(),
        mutants: plan.mutants.len(),
    };
    let (first_index, mutants) = (check_jobs.first_index, check_jobs.mutants);
    let schema_index = check_jobs.schema_index();
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
            cached: queue.served_from_cache(&spec.job_id),
            check_label: Some(check_jobs.label(spec.index as usize)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn check_jobs_are_named_by_their_place_after_the_proofs_jobs() {
        // Eight proof jobs and a diff coverage run (8): the check starts at 9.
        let check_jobs = CheckJobs {
            first_index: 9,
            mutants: 3,
        };
        let labels: Vec<&str> = (9..=13).map(|i| check_jobs.label(i)).collect();
        assert_eq!(
            labels,
            ["unmutated", "mutant", "mutant", "mutant", "schema-build"]
        );
        let fallback = schemata::fallback_baseline_index(13);
        assert_eq!(check_jobs.label(fallback - 1), "schema-build");
        assert_eq!(check_jobs.label(fallback), "unmutated");
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
