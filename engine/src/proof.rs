//! The proof engine: prepares a proof (git trees, runner, plan, mutants), runs it through a
//! queue with [`run_proof`] — the proving jobs under the jobs budget, reassembled in plan
//! order, the verdicts and evidence, then for a proven proof the mutation check as per-mutant
//! jobs on the same queue. Embedded mode and the fleet's coordinator both call `run_proof`.

use crate::dependencies::{self, DependencyError};
use crate::dispatch::{Flow, Hooks, dispatch};
use crate::mutation::check;
use crate::mutation::mutants::javascript::typescript;
use crate::plan::{ProofPlanInput, plan_proof};
use crate::prepared::GeneratedLockfiles;
pub use crate::prepared::{PreparedProof, ProofRequest};
use crate::progress::{ProgressSink, ProofEvent};
use crate::source::{self, Change, SourceError};
use assay_common::TreeId;
use assay_common::evidence::{Evidence, JobEvidence, RevisionInfo, SCHEMA, WorkerEvidence};
use assay_common::job::{JobResult, JobSpec};
use assay_common::manifest::{ManifestError, ManifestJob, parse_manifest};
use assay_common::mutation_plan::{MutationPlan, MutationSetup};
use assay_common::runner::{ReportFormat, RunnerKind, TreeFiles};
use assay_common::verdict::{self, Observation, RefusedFile, Verdict};
use assay_common::{ProofId, WorkerId};
use assay_transport::queue::{JobQueue, QueueError};
use globset::{Glob, GlobSetBuilder};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

mod preflight;

pub use preflight::{MissingTool, missing_program, missing_tool, on_path};

/// Why a proof could not be prepared or run.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The repository's trees, revisions or files could not be read.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A configured test glob does not parse.
    #[error("invalid test glob {glob:?}")]
    Glob {
        /// The glob as given.
        glob: String,
        /// The glob parser's failure.
        #[source]
        source: globset::Error,
    },
    /// The proof names no criterion.
    #[error("no criteria given (hint: --criterion \"test: test_name\" or \"guard: test_name\")")]
    NoCriteria,
    #[error(
        "the {runner} runner has no default command (hint: pass --test-command CMD, and for junit --test-report junit:RELATIVE/PATH.xml)"
    )]
    /// The runner has no default command and none was given.
    NeedsCommand {
        /// The runner chosen.
        runner: RunnerKind,
    },
    #[error(
        "the manifest runner found no manifest.tsv in the candidate tree (hint: commit the corpus's manifest.tsv)"
    )]
    /// The manifest runner found no `manifest.tsv` in the candidate.
    NoManifest,
    #[error(
        "the manifest runner found several manifest.tsv files ({}); a proof takes one corpus",
        paths.join(", ")
    )]
    /// The manifest runner found more than one `manifest.tsv`.
    SeveralManifests {
        /// Every `manifest.tsv` found, by path in the tree.
        paths: Vec<String>,
    },
    /// The manifest's directory cannot be named safely to a worker.
    #[error("corpus directory of {path} cannot be named to a worker")]
    CorpusDir {
        /// The manifest's path in the tree.
        path: String,
        /// Why the path is refused.
        #[source]
        source: assay_common::tree_path::TreePathError,
    },
    /// The corpus manifest is malformed.
    #[error("invalid corpus manifest {path}")]
    Manifest {
        /// The manifest's path in the tree.
        path: String,
        /// What is wrong with it.
        #[source]
        source: ManifestError,
    },
    #[error(
        "{path} line {line}: the case file {case} is not in the tree (hint: commit it, or fix the row)"
    )]
    /// A manifest row names a case file the tree lacks.
    MissingCase {
        /// The manifest's path in the tree.
        path: String,
        /// The row's line in the manifest.
        line: usize,
        /// The case file the row names.
        case: String,
    },
    #[error(
        "the change touches no product file ({}), so `test:` criterion {criterion} cannot fail before it and pass after; nothing ran (hint: name it as a guard, add the product change, or grant the test-only exception with --allow-test-only or ASSAY_ALLOW_TEST_ONLY=1, which judges the test on the candidate alone)",
        describe_files(changed)
    )]
    /// A `test:` criterion on a change without product files, and no test-only exception.
    TestOnly {
        /// The criterion as given.
        criterion: String,
        /// The files the change touches, all tests.
        changed: Vec<String>,
    },
    /// A job could not be submitted or its result never came.
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// The project's dependencies could not be pinned or fetched.
    #[error("failed to resolve the project's dependencies before any job")]
    Dependencies(#[from] DependencyError),
}

/// Up to three paths, and how many more.
fn describe_files(paths: &[String]) -> String {
    const SHOWN: usize = 3;
    if paths.is_empty() {
        return "it changes no file".into();
    }
    let mut text = paths[..paths.len().min(SHOWN)].join(", ");
    if paths.len() > SHOWN {
        text.push_str(&format!(" and {} more", paths.len() - SHOWN));
    }
    match paths.len() {
        1 => format!("only the test file {text}"),
        _ => format!("only the test files {text}"),
    }
}

impl EngineError {
    /// Usage and configuration errors (exit 2) as opposed to infrastructure failures (exit 3).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Self::Source(
                SourceError::NotARepo { .. }
                    | SourceError::UnknownRevision { .. }
                    | SourceError::ReadPatch { .. }
                    | SourceError::PatchApply { .. }
                    | SourceError::Bare { .. }
            ) | Self::Glob { .. }
                | Self::NoCriteria
                | Self::NeedsCommand { .. }
                | Self::NoManifest
                | Self::SeveralManifests { .. }
                | Self::Manifest { .. }
                | Self::MissingCase { .. }
                | Self::TestOnly { .. }
        )
    }
}

/// Resolves trees with git2, picks the runner and plans the jobs. Touches nothing but the
/// repository's object database.
pub fn prepare(request: ProofRequest) -> Result<PreparedProof, EngineError> {
    if request.criteria.is_empty() {
        return Err(EngineError::NoCriteria);
    }
    let mut globs = GlobSetBuilder::new();
    for glob in &request.test_globs {
        globs.add(Glob::new(glob).map_err(|source| EngineError::Glob {
            glob: glob.clone(),
            source,
        })?);
    }
    let globs = globs.build().map_err(|source| EngineError::Glob {
        glob: request.test_globs.join(", "),
        source,
    })?;
    // Before the runner is known, any ecosystem's test-file convention counts: overlaying a
    // file that is a test elsewhere is harmless, missing a test file is not.
    let chosen = request.runner;
    let is_test_file = source::test_file_classifier(
        move |p| match chosen {
            Some(runner) => runner.is_test_file(p),
            None => assay_common::runner::is_test_file_for_any_detectable(p),
        },
        globs,
    );
    let mut change = source::resolve_change(
        &request.repo,
        &request.base,
        &request.candidate,
        &is_test_file,
    )?;
    // A `test:` must fail before the change and pass after it; a change without product files
    // leaves the code it tests as it was, so only the person may grant that exception.
    if is_test_only(&change)
        && !request.allow_test_only
        && let Some(criterion) = request
            .criteria
            .iter()
            .find(|c| c.kind == assay_common::criteria::CriterionKind::Test)
    {
        return Err(EngineError::TestOnly {
            criterion: criterion.id.clone(),
            changed: change.changed.iter().map(|f| f.path.clone()).collect(),
        });
    }
    let runner = match request.runner {
        Some(runner) => runner,
        None => detect_runner(&request.repo, &change)?,
    };
    let (lockfiles, rust_toolchains) = pin_dependencies(&request.repo, runner, &mut change)?;
    // A corpus has no test modules to run apart from the whole: its cases are run by name.
    let changed_test_modules: Vec<String> = change
        .changed_test_files
        .iter()
        .filter(|f| {
            !f.deleted && runner.is_test_module(&f.path) && !runner.runner().runs_a_corpus()
        })
        .map(|f| f.path.clone())
        .collect();
    let corpus = match runner.runner().runs_a_corpus() {
        true => Some(load_corpus(&request.repo, &change.candidate.tree)?),
        false => None,
    };
    if runner.needs_explicit_command() && request.test_command.is_none() {
        return Err(EngineError::NeedsCommand { runner });
    }
    let command_prefix =
        request
            .test_command
            .clone()
            .unwrap_or_else(|| match request.local_tools {
                true => runner.default_command_where(&on_path),
                false => runner.default_command(),
            });
    let mut refused_files = Vec::new();
    if let Some(spawned_test_runner) = runner.runner().spawned_test_runner_check() {
        for file in &changed_test_modules {
            let source =
                source::read_file(&request.repo, &change.candidate.tree, file)?.unwrap_or_default();
            let source = String::from_utf8_lossy(&source).into_owned();
            if let Some(spawns) = spawned_test_runner(&source) {
                refused_files.push(RefusedFile {
                    // A changed file: `source::list_changes` refused any path not confined.
                    path: assay_common::tree_path::TreePath::new(file).map_err(|source| {
                        SourceError::PathNotConfined {
                            path: file.clone(),
                            source,
                        }
                    })?,
                    spawns,
                    source,
                });
            }
        }
    }
    let harness =
        crate::harness::plan(&request.repo, &change, runner, request.trust_harness_change)?;
    // A runner of JavaScript only runs a TypeScript tree erased: every job first erases the
    // types to the JavaScript beside each file, and the changed test modules run as theirs.
    let erase_types = typescript::runs_erased(
        runner.runner(),
        &request.repo,
        &[&change.base_tree, &change.candidate.tree],
    )?;
    let changed_test_modules: Vec<String> = match erase_types {
        true => changed_test_modules
            .into_iter()
            .map(|module| typescript::erases(&module).unwrap_or(module))
            .collect(),
        false => changed_test_modules,
    };
    let mut jobs = plan_proof(&ProofPlanInput {
        proof_id: &request.proof_id,
        runner,
        command_prefix: &command_prefix,
        criteria: &request.criteria,
        changed_test_modules: &changed_test_modules,
        base_tree: &change.base_tree,
        candidate_tree: &change.candidate.tree,
        repeats: request.repeats,
        timeout_secs: request.timeout_secs,
        report: request
            .test_report
            .clone()
            .unwrap_or_else(|| runner.report_format_for(&command_prefix)),
        harness_check_tree: harness.check_tree.as_ref(),
    });
    if erase_types {
        for job in &mut jobs {
            job.command = typescript::erasing(std::mem::take(&mut job.command));
        }
    }
    if let Some(corpus) = &corpus {
        for job in &mut jobs {
            job.report = ReportFormat::ManifestCases(ManifestJob::select(
                &corpus.corpus,
                &corpus.cases,
                &job.selected_tests,
            ));
        }
    }
    let mut prepared = PreparedProof {
        request,
        change,
        runner,
        jobs,
        refused_files,
        mutation: None,
        lockfiles,
        rust_toolchains,
        diff_hunks: Vec::new(),
        diff_sources: Vec::new(),
        harness,
    };
    (prepared.diff_hunks, prepared.diff_sources) = crate::diff_coverage::changed_hunks(&prepared)?;
    prepared.mutation = prepared.request.mutation_budget.map(|budget| {
        let (plan, schema_sources, planning_error) = match check::plan_for(&prepared) {
            Ok((plan, sources)) => (plan, sources, None),
            Err(e) => (
                MutationPlan::default(),
                Vec::new(),
                Some(assay_transport::error_chain::error_chain(&e)),
            ),
        };
        MutationSetup {
            budget_secs: budget.as_secs(),
            plan,
            planning_error,
            schema_sources,
        }
    });
    Ok(prepared)
}

/// For a project whose runner pins its dependencies on the host (cargo), pins and fetches both trees' dependencies on this host (see
/// [`dependencies`]) and moves the change onto the trees the jobs will run: each with the
/// `Cargo.lock` generated for it when it had none. Also says which Rust toolchain each of
/// those trees runs, for the result cache's key.
fn pin_dependencies(
    repo: &std::path::Path,
    runner: RunnerKind,
    change: &mut Change,
) -> Result<(GeneratedLockfiles, Vec<(TreeId, String)>), EngineError> {
    if !runner.runner().pins_dependencies_on_host() {
        return Ok((GeneratedLockfiles::default(), Vec::new()));
    }
    let base = dependencies::pin_cargo(repo, &change.base_tree)?;
    let candidate = if change.candidate.tree == change.base_tree {
        base.clone()
    } else {
        dependencies::pin_cargo(repo, &change.candidate.tree)?
    };
    let toolchains = [&base, &candidate]
        .into_iter()
        .filter_map(|pinned| Some((pinned.tree.clone(), pinned.toolchain.clone()?)))
        .collect();
    change.base_tree = base.tree;
    change.candidate.tree = candidate.tree;
    Ok((
        GeneratedLockfiles {
            base: base.generated_lockfile,
            candidate: candidate.generated_lockfile,
        },
        toolchains,
    ))
}

/// The candidate tree's one corpus: its directory and its parsed rows, every case file present.
fn load_corpus(
    repo: &std::path::Path,
    tree: &assay_common::TreeId,
) -> Result<ManifestJob, EngineError> {
    let files = source::list_files(repo, tree)?;
    let manifests: Vec<&String> = files
        .iter()
        .filter(|f| f.rsplit('/').next() == Some("manifest.tsv"))
        .collect();
    let path = match manifests.as_slice() {
        [] => return Err(EngineError::NoManifest),
        [one] => (*one).clone(),
        several => {
            return Err(EngineError::SeveralManifests {
                paths: several.iter().map(|p| (*p).clone()).collect(),
            });
        }
    };
    read_corpus(repo, tree, &path, &files)
}

/// The corpus whose manifest is `path` in `tree` (whose files are `files`): its directory and
/// its parsed rows, every case file present. Shared with `assay test`.
pub fn read_corpus(
    repo: &std::path::Path,
    tree: &assay_common::TreeId,
    path: &str,
    files: &[String],
) -> Result<ManifestJob, EngineError> {
    let bytes = source::read_file(repo, tree, path)?.unwrap_or_default();
    let cases = parse_manifest(&String::from_utf8_lossy(&bytes)).map_err(|source| {
        EngineError::Manifest {
            path: path.to_owned(),
            source,
        }
    })?;
    let dir = path.rsplit_once('/').map_or("", |(dir, _)| dir);
    let corpus = ManifestJob {
        corpus: assay_common::tree_path::TreeDir::new(dir).map_err(|source| {
            EngineError::CorpusDir {
                path: path.to_owned(),
                source,
            }
        })?,
        cases,
    };
    if let Some(missing) = corpus
        .cases
        .iter()
        .find(|case| !files.contains(&corpus.run_path(case)))
    {
        return Err(EngineError::MissingCase {
            path: path.to_owned(),
            line: missing.line,
            case: missing.path.to_string(),
        });
    }
    Ok(corpus)
}

/// The runner the candidate tree shows it uses (see [`assay_common::runner::detect`]).
fn detect_runner(repo: &std::path::Path, change: &Change) -> Result<RunnerKind, EngineError> {
    detect_runner_in(repo, &change.candidate.tree)
}

/// Runner detection on the tree of revision `rev`.
pub fn detect_runner_at(repo: &std::path::Path, rev: &str) -> Result<RunnerKind, EngineError> {
    let tree = source::tree_of(repo, rev)?;
    detect_runner_in(repo, &tree)
}

/// Runner detection for one tree (shared with `assay test`): each runner reads the files it
/// looks for; the first read that fails is the error.
pub fn detect_runner_in(
    repo: &std::path::Path,
    tree: &assay_common::TreeId,
) -> Result<RunnerKind, EngineError> {
    let files = source::list_files(repo, tree)?;
    let mut failed: Option<SourceError> = None;
    let mut read = |path: &str| match source::read_file(repo, tree, path) {
        Ok(bytes) => bytes.map(|b| String::from_utf8_lossy(&b).into_owned()),
        Err(e) => {
            failed.get_or_insert(e);
            None
        }
    };
    let detected = assay_common::runner::detect(&mut TreeFiles {
        files: &files,
        read: &mut read,
    });
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(detected),
    }
}

/// What a proof yields: its proving jobs' results in plan order and the evidence, which holds
/// the mutation check when one ran.
pub struct ProofRun {
    /// The proving jobs' results, in plan order.
    pub results: Vec<JobResult>,
    /// When each proving job's result arrived, in plan order, in milliseconds after the
    /// proof's clock started.
    pub finished_at_ms: Vec<u64>,
    /// The proof's evidence: verdicts, jobs, and the mutation check when one ran.
    pub evidence: Evidence,
}

/// The one proof pipeline: the proving jobs, the verdicts and the evidence, then for a proven
/// proof with a mutation setup the mutation check, its mutants on the same queue under the
/// same `slots` (`store` holds what their jobs stored: a schema build's messages). Cancelling the queue (its result stream closing) ends whichever phase runs.
pub async fn run_proof(
    proof: &PreparedProof,
    queue: &dyn JobQueue,
    store: &dyn assay_transport::store::ArtifactStore,
    slots: usize,
    progress: &dyn ProgressSink,
    started: SystemTime,
    clock: Instant,
) -> Result<ProofRun, EngineError> {
    let coverage = crate::diff_coverage::plan(proof);
    let beside = match &coverage {
        Some(crate::diff_coverage::Plan::Run(spec)) => Some((**spec).clone()),
        _ => None,
    };
    let (results, finished_at_ms, beside) =
        run_jobs_beside(&proof.jobs, beside, queue, slots, progress, clock).await?;
    let mut evidence = conclude(proof, &results, &finished_at_ms, started, clock);
    evidence.diff_coverage = match coverage {
        Some(crate::diff_coverage::Plan::Run(_)) => {
            Some(crate::diff_coverage::judge(proof, beside.as_ref(), store).await)
        }
        Some(crate::diff_coverage::Plan::Unmeasured(record)) => Some(record),
        None => None,
    };
    if let Some(setup) = &proof.mutation
        && evidence.verdict == Verdict::Proven
    {
        let check = check::run_check(proof, setup, queue, store, slots, progress).await?;
        evidence.mutation_check = Some(check);
    }
    Ok(ProofRun {
        results,
        finished_at_ms,
        evidence,
    })
}

/// Runs `jobs` through `queue` with at most `budget` in flight and returns their results in
/// plan order, whatever order they finish in, with when each arrived (milliseconds after
/// `clock`). A second result for a job is ignored.
pub async fn run_jobs(
    jobs: &[JobSpec],
    queue: &dyn JobQueue,
    budget: usize,
    progress: &dyn ProgressSink,
    clock: Instant,
) -> Result<(Vec<JobResult>, Vec<u64>), EngineError> {
    let (results, finished_at_ms, _) =
        run_jobs_beside(jobs, None, queue, budget, progress, clock).await?;
    Ok((results, finished_at_ms))
}

/// [`run_jobs`], with `beside` (a report-only job after the plan, such as the diff coverage
/// run) in the same dispatch, submitted first: the longest job of a proof (its tests under a
/// coverage tool) then shares the slots with the plan's from the start instead of adding a
/// round after them all. It is no job of the plan's progress; its result, if any, comes apart.
pub async fn run_jobs_beside(
    jobs: &[JobSpec],
    beside: Option<JobSpec>,
    queue: &dyn JobQueue,
    budget: usize,
    progress: &dyn ProgressSink,
    clock: Instant,
) -> Result<(Vec<JobResult>, Vec<u64>, Option<JobResult>), EngineError> {
    progress.event(ProofEvent::Planned { jobs });
    struct Proving<'a> {
        /// Asked which results the cache answered.
        queue: &'a dyn JobQueue,
        /// Dispatch positions before the plan's first job (the job beside it).
        offset: usize,
        total: usize,
        progress: &'a dyn ProgressSink,
        clock: Instant,
        finished_at_ms: Vec<u64>,
        /// The plan's jobs finished so far (the one beside it is not counted).
        done: usize,
    }
    impl Hooks for Proving<'_> {
        fn finished(&mut self, at: usize, _: usize, spec: &JobSpec, result: &JobResult) -> Flow {
            let Some(at) = at.checked_sub(self.offset) else {
                return Flow::Continue;
            };
            self.done += 1;
            self.finished_at_ms[at] = self.clock.elapsed().as_millis() as u64;
            self.progress.event(ProofEvent::JobFinished {
                done: self.done,
                total: self.total,
                spec,
                result,
                cached: self.queue.served_from_cache(&spec.job_id),
                check_label: None,
            });
            Flow::Continue
        }
    }
    let offset = usize::from(beside.is_some());
    let mut proving = Proving {
        queue,
        offset,
        total: jobs.len(),
        progress,
        clock,
        finished_at_ms: vec![0; jobs.len()],
        done: 0,
    };
    let all: Vec<JobSpec> = beside.into_iter().chain(jobs.iter().cloned()).collect();
    let done = dispatch(queue, &all, budget, None, &mut proving).await?;
    let mut results = done.results;
    let beside = results.drain(..offset).flatten().next();
    let results: Vec<JobResult> = results.into_iter().flatten().collect();
    if results.len() != jobs.len() {
        return Err(QueueError::Closed {
            outstanding: jobs.len() - results.len(),
        }
        .into());
    }
    Ok((results, proving.finished_at_ms, beside))
}

/// Decides every criterion and builds the evidence report. `finished_at_ms` holds, in plan
/// order, when each result arrived (milliseconds after `elapsed`); the jobs' start offsets
/// derive from it.
pub fn conclude(
    proof: &PreparedProof,
    results: &[JobResult],
    finished_at_ms: &[u64],
    started: SystemTime,
    elapsed: Instant,
) -> Evidence {
    let (workers, sandbox) = WorkerEvidence::of(results);
    let observations: Vec<Observation<'_>> = proof
        .jobs
        .iter()
        .zip(results)
        .map(|(spec, result)| Observation {
            kind: spec.kind,
            side: spec.side,
            result,
        })
        .collect();
    let test_only = proof.request.allow_test_only && is_test_only(&proof.change);
    let mut criteria = verdict::decide_as(&proof.request.criteria, &observations, test_only);
    verdict::refuse_spawning_files(&mut criteria, &proof.refused_files);
    let harness = verdict::harness::judge(
        &mut criteria,
        &proof.request.criteria,
        &proof.harness,
        &observations,
    );
    let change = &proof.change;
    Evidence {
        schema: SCHEMA.into(),
        proof_id: proof.request.proof_id.to_string(),
        verdict: verdict::proof_verdict(&criteria),
        repository: proof.request.repo.display().to_string(),
        runner: proof.runner.to_string(),
        base: RevisionInfo {
            requested: change.base.requested.clone(),
            commit: change.base.commit.clone(),
            tree: change.base_tree.to_string(),
            generated_lockfile: proof.lockfiles.base.clone(),
        },
        candidate: RevisionInfo {
            requested: change.candidate.requested.clone(),
            commit: change.candidate.commit.clone(),
            tree: change.candidate.tree.to_string(),
            generated_lockfile: proof.lockfiles.candidate.clone(),
        },
        changed_test_files: change
            .changed_test_files
            .iter()
            .map(|f| f.path.clone())
            .collect(),
        test_only,
        criteria,
        jobs: proof
            .jobs
            .iter()
            .zip(results)
            .enumerate()
            .map(|(i, (spec, result))| {
                JobEvidence::new(spec, result, finished_at_ms.get(i).copied())
            })
            .collect(),
        mutation_check: None,
        diff_coverage: None,
        harness,
        sandbox,
        workers,
        coordinators: Vec::new(),
        started_at: rfc3339(started),
        duration_s: elapsed.elapsed().as_secs_f64(),
    }
}

/// Whether the change touches no product file: every file it changes is a test file.
fn is_test_only(change: &Change) -> bool {
    change.changed.len() == change.changed_test_files.len()
}

/// A fresh proof id: time-ordered, unique enough across a fleet.
pub fn new_proof_id() -> ProofId {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    ProofId(format!("p-{secs}-{}", hex::encode(random_bytes::<8>())))
}

/// Bytes from the kernel's random source: a proof id names a proof's subjects and keys, so it
/// must not be guessable from the clock and the pid. Without that source (no `/dev/urandom` in
/// a minimal chroot), the clock, the pid and a process-wide counter, hashed, still keep ids
/// distinct, if not secret.
// N is at most 32, a SHA-256's length.
fn random_bytes<const N: usize>() -> [u8; N] {
    use std::io::Read;
    let mut bytes = [0u8; N];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_ok()
    {
        return bytes;
    }
    use sha2::{Digest, Sha256};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let digest = Sha256::digest(format!(
        "{:?}-{}-{count}",
        SystemTime::now(),
        std::process::id()
    ));
    bytes.copy_from_slice(&digest[..N]);
    bytes
}

/// The worker id of embedded mode's in-process workers.
pub fn embedded_worker_id() -> WorkerId {
    WorkerId(format!("embedded-{}", std::process::id()))
}

/// UTC `YYYY-MM-DDTHH:MM:SSZ` without a date library.
pub fn rfc3339(time: SystemTime) -> String {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rfc3339_formats_utc() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_995_229);
        assert_eq!(rfc3339(t), "2026-11-29T23:33:49Z");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
    }
}
