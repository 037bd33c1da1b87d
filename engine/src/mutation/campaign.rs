//! `assay mutate`: mutation testing of whole files or trees of the HEAD commit. One coverage
//! run with per-test contexts maps each line to the tests that execute it; each mutant then
//! runs only those tests (or the whole suite without coverage) as one job on the same queue a
//! proof uses, ordered by expected cost, under one budget; kills are confirmed by a re-run.
//! The result is Stryker's mutation-testing-report-schema JSON plus a summary.

use crate::coverage::{self, CoverageMap};
use crate::dispatch::run_one;
use crate::mutation::check::run_mutants;
use crate::mutation::mutants::budget::MutantTimeout;
use crate::mutation::mutants::judge::{Expected, Judgement, compile_error, judge_run};
use crate::mutation::mutants::scope::Scope;
use crate::mutation::mutants::{
    self, ChangedFile, Mutant, MutationPlan, NotRunReason, OperatorSet, rerun,
};
use crate::mutation::mutants::{language, languages};
use crate::progress::ProgressSink;
use crate::source::{self, SourceError};
use assay_common::job::{JobKind, JobResult, JobSpec, JobStatus, Side};
use assay_transport::error_chain::error_chain;
use assay_transport::queue::{JobQueue, QueueError};
use reached::Reach;
use schemata::Schemata;
pub use targets::Targets;

use assay_common::runner::pytest::python_m_pytest;
use assay_common::runner::{CoverageTool, RunnerKind};
use assay_common::{JobId, ProofId, TreeId};
use assay_transport::store::ArtifactStore;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub mod mutant_cache;
mod reached;
pub mod schemata;
mod stryker;
pub mod targets;

/// Exit code when some mutant survived or no test covers it (documented in the user guide).
pub const EXIT_SURVIVORS: u8 = 5;

#[derive(Clone, Debug)]
pub struct MutateRequest {
    pub repo: PathBuf,
    /// The tree mutated, resolved once by the caller ([`head_tree`]), so a fleet run mutates
    /// exactly the tree it uploaded.
    pub tree: TreeId,
    /// Files or directories (relative, `/`-separated) to mutate, and where given the lines;
    /// no paths: every product file.
    pub targets: Targets,
    pub runner: RunnerKind,
    pub command_prefix: Vec<String>,
    /// Mutants per file; `None`: every site.
    pub max_per_file: Option<usize>,
    /// The default five operators, or the extended set.
    pub operators: OperatorSet,
    pub budget: Duration,
    pub slots: usize,
    pub run_id: ProofId,
    /// Incremental runs: where verdicts are stored and what decides them; `None` (a fleet run,
    /// or `--no-cache`): every mutant runs and nothing is stored.
    pub cache: Option<mutant_cache::MutantCache>,
}

#[derive(Debug, thiserror::Error)]
pub enum MutateError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(
        "no {language} product file under {paths:?} in HEAD (hint: name files or directories tracked in git; test files are never mutated)"
    )]
    NothingToMutate {
        language: &'static str,
        paths: Vec<String>,
    },
    #[error(
        "no changed line of a {language} product file under {paths:?} since the revision given (nothing to mutate)"
    )]
    NothingChanged {
        language: &'static str,
        paths: Vec<String>,
    },
    #[error(
        "`assay mutate` mutates Python, Rust, Go and JavaScript; the {runner} runner is not supported (hint: --runner pytest, unittest, cargo, go or node)"
    )]
    UnsupportedRunner { runner: RunnerKind },
    #[error("the mutation run stopped before every mutant had a result")]
    Stopped(#[source] assay_transport::queue::QueueError),
    #[error(
        "the unmutated baseline run did not pass: {reason}; no mutant was run (hint: a mutation score means nothing against a red suite: fix or deselect the failing tests first)"
    )]
    RedBaseline { reason: String },
}

pub use assay_common::mutation_report::{Status, Summary};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MutantResult {
    pub mutant: Mutant,
    pub status: Status,
    pub status_reason: Option<String>,
    pub covered_by: Vec<String>,
    pub killed_by: Vec<String>,
    pub tests_completed: Option<usize>,
    /// A kill that a second run did not repeat.
    pub flaky: bool,
    pub duration_s: Option<f64>,
    /// The stored verdict of an earlier run answered this mutant; it did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached: Option<mutant_cache::CachedFrom>,
}

/// What a whole-tree run found.
#[derive(Clone, Debug, Serialize)]
pub struct MutateReport {
    pub tree: String,
    pub per_line_selection: bool,
    pub selection_note: Option<String>,
    pub files: BTreeMap<String, String>,
    pub results: Vec<MutantResult>,
    pub plan: MutationPlan,
    pub elapsed_s: f64,
    /// Where the wall time went, by phase.
    pub phases: Phases,
    /// What the cache did; `None` when the run did not use it.
    pub cache: Option<mutant_cache::CacheOutcome>,
    /// Rust: what building once did (`None` for other languages, or with the schemata off).
    pub schemata: Option<schemata::SchemataOutcome>,
}

/// A run's wall time by phase, as Stryker's report counts it (`performance`): planning the
/// mutants, the unmutated baseline run, and everything after it (cache lookups, the mutants'
/// runs and their kill confirmations).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Phases {
    pub setup: Duration,
    pub initial_run: Duration,
    pub mutation: Duration,
}

fn line_range(bytes: &[u8], mutant: &Mutant) -> std::ops::RangeInclusive<u32> {
    let extra = bytes
        .get(mutant.edit.start..mutant.edit.end)
        .map_or(0, |b| b.iter().filter(|c| **c == b'\n').count() as u32);
    mutant.line..=mutant.line + extra
}

/// Whether the runner's baseline maps lines to tests (pytest) or runs the suite (unittest,
/// cargo).
fn per_line_wanted(runner: RunnerKind) -> bool {
    runner.runner().coverage() == Some(CoverageTool::CoveragePy)
}

/// Each mutant's scope (`mutants::scope`), in plan order; one parse per file.
fn scopes_of(mutants: &[Mutant], bytes: &BTreeMap<&str, &[u8]>) -> Vec<Scope> {
    let mut by_file: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (at, mutant) in mutants.iter().enumerate() {
        by_file.entry(mutant.path.as_str()).or_default().push(at);
    }
    let mut scopes = vec![
        Scope {
            start: 0,
            end: 0,
            name: String::new(),
            statement_line: 0,
        };
        mutants.len()
    ];
    for (path, ats) in by_file {
        let source = bytes
            .get(path)
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or_default();
        let ranges: Vec<(usize, usize)> = ats
            .iter()
            .map(|at| (mutants[*at].edit.start, mutants[*at].edit.end))
            .collect();
        for (at, scope) in ats
            .iter()
            .zip(mutants::languages::scopes(path, source, &ranges))
        {
            scopes[*at] = scope;
        }
    }
    scopes
}

/// The tree of the repository's HEAD commit: the tree a run mutates (never the working tree).
pub fn head_tree(repo: &Path) -> Result<TreeId, MutateError> {
    let git = source::open(repo)?;
    let tree =
        git.revparse_single("HEAD^{tree}")
            .map_err(|source| SourceError::UnknownRevision {
                rev: "HEAD".into(),
                repo: repo.to_path_buf(),
                source,
            })?;
    Ok(TreeId(tree.id().to_string()))
}

/// The request's product files under `paths`, in the language its runner's tests judge,
/// every line of each.
fn files_to_mutate(request: &MutateRequest) -> Result<(TreeId, Vec<ChangedFile>), MutateError> {
    let language = languages::for_runner(request.runner).ok_or(MutateError::UnsupportedRunner {
        runner: request.runner,
    })?;
    let tree = request.tree.clone();
    let paths = &request.targets.paths;
    let under = |path: &str| {
        paths.is_empty()
            || paths.iter().any(|p| {
                let p = p.trim_end_matches('/');
                p == "." || path == p || path.starts_with(&format!("{p}/"))
            })
    };
    let mut files = Vec::new();
    for path in source::list_files(&request.repo, &tree)? {
        if !language.is_source(&path) || request.runner.is_test_file(&path) || !under(&path) {
            continue;
        }
        let Some(bytes) = source::read_file(&request.repo, &tree, &path)? else {
            continue;
        };
        let line_count = bytes.split(|b| *b == b'\n').count() as u32;
        let changed_lines = request.targets.lines_of(&path, line_count);
        if changed_lines.is_empty() {
            continue;
        }
        files.push(ChangedFile {
            path,
            bytes,
            changed_lines,
        });
    }
    if files.is_empty() {
        return Err(match &request.targets.changed {
            Some(_) => MutateError::NothingChanged {
                language: language.name(),
                paths: paths.clone(),
            },
            None => MutateError::NothingToMutate {
                language: language.name(),
                paths: paths.clone(),
            },
        });
    }
    Ok((tree, files))
}

fn spec(request: &MutateRequest, tree: &TreeId, index: usize, command: Vec<String>) -> JobSpec {
    JobSpec {
        proof_id: request.run_id.clone(),
        job_id: JobId::for_index(&request.run_id, index),
        index: index as u32,
        kind: JobKind::Mutant,
        side: Side::Candidate,
        tree: tree.clone(),
        command,
        // Cargo's report depends on the command: nextest's JUnit or libtest's own lines.
        report: request.runner.report_format_for(&request.command_prefix),
        selected_tests: Vec::new(),
        timeout_secs: 1,
        forked_timeout_secs: None,
        rewrites: Vec::new(),
        binaries: None,
        env: Vec::new(),
        edit: None,
    }
}

/// One mutant's plan: what to run and how long it is expected to take.
struct Work {
    at: usize,
    spec: JobSpec,
    cost: Cost,
}

/// What one mutant's run is expected to cost.
#[derive(Clone, Copy, Debug)]
struct Cost {
    /// In a fresh session: start-up and collection, plus its covering tests.
    whole: Duration,
    /// In a fork of a collected session: its covering tests alone. `None` when the whole
    /// suite runs: a fork of a module-level mutant (its import run again) keeps the fresh
    /// limit, which start-up and collection no longer fill, so it only ever errs long.
    forked: Option<Duration>,
}

impl Cost {
    fn whole_suite(baseline: Duration) -> Self {
        Self {
            whole: baseline,
            forked: None,
        }
    }
}

/// What `assay mutate` tells whoever follows it, besides each job's result.
pub enum MutateEvent<'a> {
    /// `assay mutate`'s baseline ran: `to_run` of `mutants` will run, the rest have no test.
    Started {
        mutants: usize,
        to_run: usize,
        /// Answered from the cache: they neither run nor count in `to_run`.
        cached: usize,
        baseline: std::time::Duration,
    },
    /// One `assay mutate` mutant has its verdict (second runs that confirm a kill report none,
    /// so `total` never grows).
    MutantFinished(&'a MutantProgress<'a>),
    /// Every mutant has its verdict; `kills` of them (those their own session could not
    /// re-run: a collection error, a broken session) are confirmed by a run of their own.
    Confirming { kills: usize },
}

/// A follower of `assay mutate`: the proof's job events and the run's own.
pub trait MutateProgress: ProgressSink {
    fn mutate_event(&self, event: MutateEvent<'_>);
}

/// Mutates the HEAD tree's product files under `request.paths` and runs the tests per mutant.
pub async fn run(
    request: &MutateRequest,
    queue: &dyn JobQueue,
    store: &dyn ArtifactStore,
    progress: &dyn MutateProgress,
) -> Result<MutateReport, MutateError> {
    let campaign = Campaign {
        request,
        queue,
        store,
        progress,
        started: Instant::now(),
    };
    let planned = campaign.plan()?;
    // Job indices follow the order jobs are planned in: the schema's builds, the baseline's
    // runs, one per mutant (by plan position), then the second runs.
    let mut index = 0;
    let mut schemata = campaign.build_schemata(&planned, &mut index).await;
    let baseline_run = campaign
        .run_baseline(&planned, schemata.as_mut(), &mut index)
        .await?;
    let baseline = campaign
        .map_tests(&planned, baseline_run, schemata.as_ref(), &mut index)
        .await?;
    let mut caching = campaign.caching(&planned);
    let mut choices =
        campaign.choose_runs(&planned, schemata.as_ref(), &baseline, caching.cache, index)?;
    campaign.answer_from_cache(&mut choices, &mut caching).await;
    let first = campaign
        .run_first(&planned, &baseline, &mut choices, &caching)
        .await?;
    let runs = campaign
        .confirm_kills(&planned, &baseline, &mut choices, first, &caching)
        .await?;
    campaign.store_verdicts(&choices, runs, &mut caching).await;
    Ok(campaign.report(planned, schemata, baseline, choices, caching))
}

/// What every phase of a run reads: the request, where its jobs run and who follows it.
struct Campaign<'a> {
    request: &'a MutateRequest,
    queue: &'a dyn JobQueue,
    store: &'a dyn ArtifactStore,
    progress: &'a dyn MutateProgress,
    /// When the run started: its budget counts from here.
    started: Instant,
}

/// The mutants of the run and the files they mutate.
struct Planned {
    tree: TreeId,
    files: Vec<ChangedFile>,
    language: &'static dyn language::Language,
    plan: MutationPlan,
}

impl Planned {
    /// Each file's bytes by its path.
    fn bytes(&self) -> BTreeMap<&str, &[u8]> {
        self.files
            .iter()
            .map(|f| (f.path.as_str(), f.bytes.as_slice()))
            .collect()
    }
}

/// The unmutated run as it came back, before anything is read from it.
struct BaselineRun {
    result: Result<JobResult, BaselineError>,
    /// Its limit in seconds: the whole budget.
    timeout_secs: u64,
    /// Whether it ran under per-test coverage.
    per_line: bool,
    /// Planning and building, before the baseline started.
    setup: Duration,
    /// When it (or the run that replaced it) finished.
    done: Instant,
}

/// What the unmutated suite says about the mutants' tests: it passed, what it costs, and which
/// tests reach which code.
struct Baseline {
    /// The unmutated run's own duration: what a run of the whole suite costs.
    time: Duration,
    /// pytest's per-test coverage, when it was read.
    coverage: Option<CoverageMap>,
    /// Rust: which prebuilt tests reach each schema site, when the trace was read.
    reached: Option<reached::Reached>,
    /// Go: the tests the unmutated run ran (`example.com/shop/cart::TestTotal`, as a kill
    /// names them), by the directory of their package.
    package_tests: Option<BTreeMap<String, Vec<String>>>,
    /// Why the tests are not selected per mutant, when they are not.
    selection_note: Option<String>,
    /// Planning and building, before the baseline started ([`Phases::setup`]).
    setup: Duration,
    /// When the baseline finished: [`Phases::mutation`] counts from here.
    done: Instant,
}

/// Whether the run's verdicts are looked up and stored, and what the report says of that.
struct Caching<'a> {
    cache: Option<&'a mutant_cache::MutantCache>,
    outcome: Option<mutant_cache::CacheOutcome>,
}

/// What each mutant runs, and its record so far.
struct Choices {
    /// By plan position: a verdict found without a run, or a pending record.
    results: Vec<Option<MutantResult>>,
    /// The mutants that run, each as one job.
    work: Vec<Work>,
    /// The cache key of each mutant a stored verdict may answer, by plan position.
    keyed: BTreeMap<usize, String>,
    /// The runner's command prefix the mutants run with.
    prefix: Vec<String>,
}

/// The mutants' first runs: each one's verdict, in the order of [`Choices::work`].
struct FirstRuns {
    judged: Vec<Option<Judged>>,
    /// The runs behind them, kept for the cache's entries (empty when it stores none).
    runs: BTreeMap<JobId, JobResult>,
}

/// The runs behind each verdict, kept for the cache's entries (empty when it stores none).
struct Runs {
    first: BTreeMap<JobId, JobResult>,
    second: BTreeMap<JobId, JobResult>,
    /// The second run's job of each mutant (by plan position) that had one.
    second_of: BTreeMap<usize, JobId>,
}

impl<'a> Campaign<'a> {
    /// Decides which files are mutated and plans their mutants.
    fn plan(&self) -> Result<Planned, MutateError> {
        let request = self.request;
        let (tree, files) = files_to_mutate(request)?;
        let language = languages::of_check(request.runner);
        let plan =
            mutants::plan_mutants_in(language, &files, request.max_per_file, request.operators);
        Ok(Planned {
            tree,
            files,
            language,
            plan,
        })
    }

    /// Rust: decides which mutants one build of the tests holds behind the switch.
    async fn build_schemata(&self, planned: &Planned, index: &mut usize) -> Option<Schemata> {
        let request = self.request;
        match crate::mutation::mutants::rust::prebuilt::wanted(request.runner)
            && !planned.plan.mutants.is_empty()
        {
            true => Some(
                schemata::build(
                    request,
                    &planned.bytes(),
                    &planned.plan.mutants,
                    self.queue,
                    self.store,
                    index,
                )
                .await,
            ),
            false => None,
        }
    }

    /// Runs the unmutated tests; decides if the prebuilt ones hold the mutants (they must pass).
    async fn run_baseline(
        &self,
        planned: &Planned,
        schemata: Option<&mut Schemata>,
        index: &mut usize,
    ) -> Result<BaselineRun, MutateError> {
        let request = self.request;
        let prebuilt = schemata.as_ref().and_then(|s| s.prebuilt());
        // The baseline runs under the same sandbox and limits as the mutants, so contention
        // shows in the baseline too and does not fake timeouts.
        if !request.runner.runner().judges_mutants() {
            return Err(MutateError::UnsupportedRunner {
                runner: request.runner,
            });
        }
        let coverage_py = request.runner.runner().coverage() == Some(CoverageTool::CoveragePy);
        let (mut baseline_spec, per_line) = match (&prebuilt, coverage_py) {
            (Some(prebuilt), _) => (
                schemata::run_spec(request, prebuilt, *index, 0, None),
                false,
            ),
            // The map is made by the test command's own interpreter, with its own arguments, so
            // the baseline runs what the mutants run. A command that is not `PYTHON -m pytest`
            // gets no map: its baseline is the command itself, and it must pass with a report.
            (None, true) if let Some((python, args)) = python_m_pytest(&request.command_prefix) => {
                let pytest_args = args
                    .iter()
                    .cloned()
                    .chain(["-o".into(), "junit_family=xunit1".into()]);
                let command = coverage::command_with(python, pytest_args);
                (spec(request, &planned.tree, *index, command), true)
            }
            (None, _) => {
                let command = request.runner.command(&request.command_prefix, &[], &[]);
                (spec(request, &planned.tree, *index, command), false)
            }
        };
        *index += 1;
        baseline_spec.timeout_secs = request.budget.as_secs().max(1);
        let setup = self.started.elapsed();
        let mut baseline = run_single(self.queue, &baseline_spec).await;
        if let Some(s) = schemata.filter(|s| s.prebuilt().is_some()) {
            let red = judge_baseline(
                request.runner,
                &baseline,
                None,
                Duration::from_secs(baseline_spec.timeout_secs),
            );
            if let Err(reason) = red {
                // Unmutated, the prebuilt tests must pass as `cargo test` does; where they do
                // not (a test that finds its files by the build's own path, say), every mutant
                // builds.
                s.give_up(format!("the prebuilt tests failed unmutated ({reason})"));
                let command = request.runner.command(&request.command_prefix, &[], &[]);
                baseline_spec = spec(request, &planned.tree, *index, command);
                baseline_spec.timeout_secs = request.budget.as_secs().max(1);
                *index += 1;
                baseline = run_single(self.queue, &baseline_spec).await;
            }
        }
        Ok(BaselineRun {
            result: baseline,
            timeout_secs: baseline_spec.timeout_secs,
            per_line,
            setup,
            done: Instant::now(),
        })
    }

    /// Decides which tests reach each mutant's code; stops the run unless the baseline passed.
    async fn map_tests(
        &self,
        planned: &Planned,
        run: BaselineRun,
        schemata: Option<&Schemata>,
        index: &mut usize,
    ) -> Result<Baseline, MutateError> {
        let request = self.request;
        let baseline = run.result;
        let time = Duration::from_millis(baseline.as_ref().map_or(0, |r| r.duration_ms));
        let mut selection_note = None;
        let coverage = match (&baseline, run.per_line) {
            (Ok(result), true) => match CoverageMap::read(self.store, result).await {
                Ok(map) => Some(map),
                Err(why) => {
                    selection_note = Some(format!(
                        "per-test coverage unavailable ({}); each mutant runs the whole suite",
                        error_chain(&why)
                    ));
                    None
                }
            },
            (Err(why), _) => {
                selection_note = Some(error_chain(&why));
                None
            }
            (Ok(_), false) => None,
        };
        // Stops here unless the unmutated suite passed: no mutant is judged against a red one.
        let plain = match (&baseline, &coverage) {
            (Ok(_), None) if run.per_line => {
                // No map (coverage.py missing, or the session broke): the same suite without
                // coverage says whether the baseline passes.
                let command = request.runner.command(&request.command_prefix, &[], &[]);
                let mut plain = spec(request, &planned.tree, *index, command);
                plain.timeout_secs = run.timeout_secs;
                *index += 1;
                Some(run_single(self.queue, &plain).await)
            }
            _ => None,
        };
        judge_baseline(
            request.runner,
            plain.as_ref().unwrap_or(&baseline),
            coverage.as_ref(),
            Duration::from_secs(run.timeout_secs),
        )
        .map_err(|reason| MutateError::RedBaseline { reason })?;
        // Rust: the prebuilt tests' unmutated run traced which tests reach each site.
        let prebuilt = schemata.is_some_and(|s| s.prebuilt().is_some());
        let reached = match (prebuilt, &baseline) {
            (true, Ok(result)) => match reached::from_run(self.store, result).await {
                Ok(reached) => Some(reached),
                Err(why) => {
                    selection_note = Some(format!("{why}; each mutant runs every test"));
                    None
                }
            },
            _ => None,
        };
        let package_tests = match (
            request.runner.runner().reports_tests_by_package(),
            &baseline,
        ) {
            (true, Ok(result)) => go_package_tests(request, result)?,
            _ => None,
        };
        Ok(Baseline {
            time,
            coverage,
            reached,
            package_tests,
            selection_note,
            setup: run.setup,
            done: run.done,
        })
    }

    /// Decides whether the cache answers and stores verdicts: never for a compiled language.
    fn caching(&self, planned: &Planned) -> Caching<'a> {
        let request = self.request;
        // A compiled language's unit tests live in its product files, which the cache's keys
        // do not digest as test files: a verdict it stored could outlive a changed test.
        let compiled = planned.language.compiles();
        let requested = request
            .cache
            .as_ref()
            .filter(|c| c.cache.stores() && !compiled);
        let outcome = match (&request.cache, requested) {
            (Some(_), None) if compiled => Some(mutant_cache::CacheOutcome {
                not_used: Some(format!(
                    "{} mutants are not cached: its tests share the product files the keys digest",
                    planned.language.name()
                )),
                ..mutant_cache::CacheOutcome::default()
            }),
            (_, requested) => requested.map(|_| mutant_cache::CacheOutcome::default()),
        };
        Caching {
            cache: requested,
            outcome,
        }
    }

    /// Decides what each mutant runs and what that costs, or its verdict when it needs no run.
    fn choose_runs(
        &self,
        planned: &Planned,
        schemata: Option<&Schemata>,
        baseline: &Baseline,
        cache: Option<&mutant_cache::MutantCache>,
        index: usize,
    ) -> Result<Choices, MutateError> {
        let request = self.request;
        let (tree, mutants) = (&planned.tree, &planned.plan.mutants);
        let bytes = planned.bytes();
        let baseline_time = baseline.time;
        let coverage = &baseline.coverage;
        let prebuilt = schemata.and_then(|s| s.prebuilt());
        // A mutant built on its own pays a build on top of the prebuilt tests' run.
        let built_alone_time = match (schemata, &prebuilt) {
            (Some(s), Some(_)) => baseline_time.saturating_add(s.schema.one_build),
            _ => baseline_time,
        };
        // Process start-up and collection: the part of the baseline no single test accounts
        // for.
        let overhead = coverage.as_ref().map_or(baseline_time, |map| {
            // The durations are the conftest's, which the project under test controls.
            baseline_time.saturating_sub(assay_common::reported_secs(
                map.durations.values().sum::<f64>(),
            ))
        });

        let mut prefix = request.command_prefix.clone();
        prefix.extend(
            request
                .runner
                .runner()
                .mutant_run_arguments(coverage.is_some())
                .iter()
                .map(|a| (*a).to_owned()),
        );
        let mut results: Vec<Option<MutantResult>> = vec![None; mutants.len()];
        let mut work = Vec::new();
        let scopes = scopes_of(mutants, &bytes);
        let mut keys = cache.map(|c| mutant_cache::Keys::new(request, tree, &c.context, &prefix));
        let mut keyed: BTreeMap<usize, String> = BTreeMap::new();
        for (at, mutant) in mutants.iter().enumerate() {
            if let Some(error) = schemata.and_then(|s| s.schema.unviable.get(&at)) {
                results[at] = Some(MutantResult {
                    status: Status::CompileError,
                    status_reason: Some(format!("does not compile: {error}")),
                    tests_completed: None,
                    ..not_covered(mutant, "")
                });
                continue;
            }
            let held = schemata.is_some_and(|s| s.holds(at));
            let reach = match baseline.reached.as_ref().filter(|_| held) {
                Some(reached) => match reached.of(at as u32 + 1) {
                    Some(reach) => Some(reach),
                    None => {
                        results[at] = Some(not_covered(
                            mutant,
                            "no test reaches this code in the unmutated run",
                        ));
                        continue;
                    }
                },
                None => None,
            };
            let file_bytes = bytes.get(mutant.path.as_str()).copied().unwrap_or_default();
            let (covered_by, cost) = match coverage {
                Some(map) => {
                    let statement = scopes.get(at).map_or(mutant.line, |s| s.statement_line);
                    let lines = line_range(file_bytes, mutant);
                    match map.tests_running_in(mutant.path.as_str(), lines, statement) {
                        None => {
                            results[at] = Some(not_covered(mutant, "no test executes this line"));
                            continue;
                        }
                        // Only import-time code runs it: every test may observe it.
                        Some(tests) if tests.is_empty() => {
                            (Vec::new(), Cost::whole_suite(baseline_time))
                        }
                        Some(tests) => {
                            let mut tests: Vec<(f64, String)> = tests
                                .into_iter()
                                .map(|t| (map.durations.get(&t).copied().unwrap_or(0.0), t))
                                .collect();
                            // Fastest first, so `-x` stops at the cheapest kill.
                            tests.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
                            let forked =
                                assay_common::reported_secs(tests.iter().map(|t| t.0).sum());
                            let cost = Cost {
                                whole: overhead.saturating_add(forked),
                                forked: Some(forked),
                            };
                            (tests.into_iter().map(|t| t.1).collect(), cost)
                        }
                    }
                }
                None => (Vec::new(), Cost::whole_suite(baseline_time)),
            };
            let (covered_by, command) = match &baseline.package_tests {
                // Go: the mutant's package, built with the edit, runs the tests it ran
                // unmutated (`go test` takes packages, and `-count=1` keeps its cache from
                // answering).
                Some(by_package) => {
                    let dir = package_dir(mutant.path.as_str());
                    let Some(tests) = by_package.get(dir).filter(|t| !t.is_empty()) else {
                        results[at] = Some(not_covered(
                            mutant,
                            "no test of its package ran in the unmutated run",
                        ));
                        continue;
                    };
                    let names: Vec<String> = tests
                        .iter()
                        .map(|id| id.rsplit("::").next().unwrap_or(id).to_owned())
                        .collect();
                    let command =
                        request
                            .runner
                            .command(&prefix, &[mutant.path.as_str().to_owned()], &names);
                    (tests.clone(), command)
                }
                None => {
                    let command =
                        rerun::with_rerun(request.runner.command(&prefix, &covered_by, &[]));
                    (covered_by, command)
                }
            };
            if let (Some(keys), Some(scope)) = (keys.as_mut(), scopes.get(at)) {
                let source = std::str::from_utf8(file_bytes).unwrap_or_default();
                keyed.insert(at, keys.key(mutant, source, scope, &covered_by, &command)?);
            }
            let covered_by = match reach {
                Some(reach) => reach.covered_by(),
                None => covered_by,
            };
            let only = match reach {
                Some(Reach::Tests(selection)) => Some(selection.clone()),
                _ => None,
            };
            let (job, cost) = match &prebuilt {
                Some(prebuilt) if held => (
                    schemata::run_spec(request, prebuilt, index + at, at + 1, only),
                    cost,
                ),
                _ => {
                    let mut job = spec(request, tree, index + at, command);
                    job.edit = Some(mutant.edit.clone());
                    let cost = match schemata {
                        Some(_) => Cost::whole_suite(built_alone_time),
                        None => cost,
                    };
                    (job, cost)
                }
            };
            results[at] = Some(MutantResult {
                mutant: mutant.clone(),
                status: Status::Pending,
                status_reason: None,
                covered_by,
                killed_by: Vec::new(),
                tests_completed: None,
                flaky: false,
                duration_s: None,
                cached: None,
            });
            work.push(Work {
                at,
                spec: job,
                cost,
            });
        }
        // The keys borrow the prefix, which the choices keep.
        drop(keys);
        // Two mutants with one key (identical functions, say) cannot be told apart by it:
        // neither is answered or stored.
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for key in keyed.values() {
            *seen.entry(key.clone()).or_default() += 1;
        }
        keyed.retain(|_, key| seen.get(key) == Some(&1));
        Ok(Choices {
            results,
            work,
            keyed,
            prefix,
        })
    }

    /// Decides which mutants a stored verdict answers; those no longer run.
    async fn answer_from_cache(&self, choices: &mut Choices, caching: &mut Caching<'_>) {
        let (Some(c), Some(outcome)) = (caching.cache, caching.outcome.as_mut()) else {
            return;
        };
        outcome.eligible = choices.work.len();
        let format = self.request.runner.report_format();
        let mut left = Vec::with_capacity(choices.work.len());
        for w in std::mem::take(&mut choices.work) {
            let Some(key) = choices.keyed.get(&w.at) else {
                left.push(w);
                continue;
            };
            match c.lookup(key, &format).await {
                mutant_cache::Lookup::Hit(entry) => {
                    if let Some(slot) = choices.results[w.at].as_mut() {
                        let answer = entry.answer(&slot.mutant, slot.covered_by.clone());
                        *slot = answer;
                    }
                    outcome.served += 1;
                }
                mutant_cache::Lookup::Refused(why) => {
                    tracing::warn!(
                        key,
                        %why,
                        "refusing a mutant cache entry that failed its checks"
                    );
                    outcome.refused.push((key.clone(), why.to_string()));
                    left.push(w);
                }
                mutant_cache::Lookup::Miss => left.push(w),
            }
        }
        choices.work = left;
    }

    /// Decides the mutants' order (the most verdicts in the budget); runs and judges each.
    async fn run_first(
        &self,
        planned: &Planned,
        baseline: &Baseline,
        choices: &mut Choices,
        caching: &Caching<'_>,
    ) -> Result<FirstRuns, MutateError> {
        let (request, progress) = (self.request, self.progress);
        let mutants = &planned.plan.mutants;
        let compiled = planned.language.compiles();
        let served = caching.outcome.as_ref().map_or(0, |o| o.served);
        progress.mutate_event(MutateEvent::Started {
            mutants: mutants.len(),
            to_run: choices.work.len(),
            cached: served,
            baseline: baseline.time,
        });
        // Longest first when everything fits (no straggler at the end), cheapest first when
        // the budget will cut the run short (the most verdicts per second).
        // Saturating: a cost can be `Duration::MAX` when the measured durations are absurd.
        let work = &mut choices.work;
        let total_cost = work
            .iter()
            .fold(Duration::ZERO, |sum, w| sum.saturating_add(w.cost.whole));
        let slots = u32::try_from(request.slots).unwrap_or(u32::MAX).max(1);
        let fits = (total_cost / slots).saturating_add(baseline.time) < request.budget;
        work.sort_by(|a, b| {
            let order = a.cost.whole.cmp(&b.cost.whole).then(a.at.cmp(&b.at));
            if fits { order.reverse() } else { order }
        });
        let work = &*work;

        let specs: Vec<JobSpec> = work.iter().map(|w| w.spec.clone()).collect();
        let costs: BTreeMap<JobId, Cost> = work
            .iter()
            .map(|w| (w.spec.job_id.clone(), w.cost))
            .collect();
        let tally = std::sync::Mutex::new(Tally {
            done: mutants.len() - work.len(),
            ..Tally::default()
        });
        let mutants_started = Instant::now();
        let stores = caching.cache.is_some();
        let (judged, runs) = self
            .run_judged(
                &specs,
                &costs,
                baseline.time,
                stores,
                compiled,
                |result, judged| {
                    let at = work
                        .iter()
                        .find(|w| w.spec.job_id == result.job_id)
                        .map(|w| w.at);
                    if let Some(mutant) = at.and_then(|at| mutants.get(at))
                        && let Ok(mut tally) = tally.lock()
                    {
                        let elapsed = mutants_started.elapsed();
                        let event =
                            tally.record(judged, mutant, mutants.len(), work.len(), elapsed);
                        progress.mutate_event(MutateEvent::MutantFinished(&event));
                    }
                },
            )
            .await?;
        Ok(FirstRuns { judged, runs })
    }

    /// Runs `specs` at the limits their `costs` give (`baseline_time` for a job of unknown
    /// cost) and judges each result, telling `on_judged`; keeps each run's result for the
    /// cache's entries when verdicts are `stored`.
    async fn run_judged(
        &self,
        specs: &[JobSpec],
        costs: &BTreeMap<JobId, Cost>,
        baseline_time: Duration,
        stored: bool,
        compiled: bool,
        on_judged: impl Fn(&JobResult, &Judged) + Send + Sync,
    ) -> Result<(Vec<Option<Judged>>, BTreeMap<JobId, JobResult>), MutateError> {
        let runs: std::sync::Mutex<BTreeMap<JobId, JobResult>> = Default::default();
        let judged = run_mutants(
            self.queue,
            specs,
            self.request.slots,
            Some(self.deadline()),
            |spec: &mut JobSpec| self.admit(spec, costs, baseline_time),
            |result, timeout| {
                if stored && let Ok(mut runs) = runs.lock() {
                    runs.insert(result.job_id.clone(), result.clone());
                }
                let judged = judge(result, timeout, compiled);
                on_judged(result, &judged);
                Some(judged)
            },
            |reason| Some(pending(reason)),
            |_, _, _| {},
        )
        .await
        .map_err(MutateError::Stopped)?;
        Ok((judged, runs.into_inner().unwrap_or_default()))
    }

    /// Records the first verdicts; decides by a second run whether an unconfirmed kill is flaky.
    async fn confirm_kills(
        &self,
        planned: &Planned,
        baseline: &Baseline,
        choices: &mut Choices,
        first: FirstRuns,
        caching: &Caching<'_>,
    ) -> Result<Runs, MutateError> {
        let request = self.request;
        let mutants = planned.plan.mutants.len();
        let compiled = planned.language.compiles();
        // A kill is confirmed by one more run of the same selection (`-x` stops at the
        // killer); the second run's limit follows the same rules as the first. A kill the
        // mutant's own run already re-ran (see `mutants::rerun`) needs no second run, and a
        // timeout gets none (see `needs_second_run`).
        let mut again_specs = Vec::new();
        let mut again_at = Vec::new();
        for (w, outcome) in choices.work.iter().zip(&first.judged) {
            let Some(outcome) = outcome else { continue };
            if let Some(slot) = choices.results[w.at].as_mut() {
                outcome.apply(slot);
                if needs_second_run(slot.status, outcome.confirmed) {
                    let mut again = w.spec.clone();
                    let killers = killing_node_ids(&slot.covered_by, &slot.killed_by);
                    // Go's command names packages, not tests: its second run is the first again.
                    if slot.status == Status::Killed
                        && !killers.is_empty()
                        && again.binaries.is_none()
                        && request.runner.runner().reruns_named_tests()
                    {
                        again.command = request.runner.command(&choices.prefix, &killers, &[]);
                    }
                    again.index += mutants as u32;
                    again.job_id = JobId::for_index(&request.run_id, again.index as usize);
                    again_specs.push(again);
                    again_at.push((w.at, w.cost));
                }
            }
        }
        if !again_specs.is_empty() {
            self.progress.mutate_event(MutateEvent::Confirming {
                kills: again_specs.len(),
            });
        }
        let again_costs: BTreeMap<JobId, Cost> = again_specs
            .iter()
            .zip(&again_at)
            .map(|(spec, (_, cost))| (spec.job_id.clone(), *cost))
            .collect();
        let stores = caching.cache.is_some();
        let (seconds, second_runs) = self
            .run_judged(
                &again_specs,
                &again_costs,
                baseline.time,
                stores,
                compiled,
                |_, _| {},
            )
            .await?;
        let mut second_of: BTreeMap<usize, JobId> = BTreeMap::new();
        for (((at, _), again), spec) in again_at.into_iter().zip(seconds).zip(&again_specs) {
            second_of.insert(at, spec.job_id.clone());
            if let (Some(slot), Some(again)) = (choices.results[at].as_mut(), again) {
                settle(slot, &again);
            }
        }
        Ok(Runs {
            first: first.runs,
            second: second_runs,
            second_of,
        })
    }

    /// Decides which verdicts may answer a later run (see `MutantCache::store`) and stores them.
    async fn store_verdicts(&self, choices: &Choices, runs: Runs, caching: &mut Caching<'_>) {
        let (Some(c), Some(outcome)) = (caching.cache, caching.outcome.as_mut()) else {
            return;
        };
        let Runs {
            first: mut first_runs,
            second: mut second_runs,
            second_of,
        } = runs;
        for w in &choices.work {
            let (Some(key), Some(Some(slot))) =
                (choices.keyed.get(&w.at), choices.results.get(w.at))
            else {
                continue;
            };
            let Some(first) = first_runs.remove(&w.spec.job_id) else {
                continue;
            };
            let mut runs = vec![first];
            if let Some(second) = second_of.get(&w.at).and_then(|id| second_runs.remove(id)) {
                runs.push(second);
            }
            match c.store(key, &self.request.run_id, slot, runs).await {
                Ok(true) => outcome.stored += 1,
                Ok(false) => {}
                Err(e) => {
                    outcome.store_error = Some(error_chain(&e));
                    break;
                }
            }
        }
    }

    /// Assembles the report: every mutant's record in plan order, and where the time went.
    fn report(
        &self,
        planned: Planned,
        schemata: Option<Schemata>,
        baseline: Baseline,
        choices: Choices,
        caching: Caching<'_>,
    ) -> MutateReport {
        let Planned {
            tree, files, plan, ..
        } = planned;
        MutateReport {
            tree: tree.to_string(),
            per_line_selection: baseline.coverage.is_some() || baseline.reached.is_some(),
            selection_note: baseline.selection_note,
            files: files
                .iter()
                .map(|f| {
                    (
                        f.path.clone(),
                        String::from_utf8_lossy(&f.bytes).into_owned(),
                    )
                })
                .collect(),
            results: choices.results.into_iter().flatten().collect(),
            plan,
            elapsed_s: self.started.elapsed().as_secs_f64(),
            phases: Phases {
                setup: baseline.setup,
                initial_run: baseline
                    .done
                    .duration_since(self.started)
                    .saturating_sub(baseline.setup),
                mutation: baseline.done.elapsed(),
            },
            cache: caching.outcome,
            schemata: schemata.map(|s| s.outcome()),
        }
    }

    /// Each limit fits in what is left of the budget; a result that never comes (a lost job
    /// on a fleet) leaves its mutant pending at the budget's end plus a grace.
    fn deadline(&self) -> Instant {
        self.started + self.request.budget + mutants::budget::MIN_TIME_TO_START
    }

    /// Sets a mutant job's limits from its expected cost (`fallback` for a job of unknown
    /// cost) and what is left of the budget.
    fn admit(
        &self,
        spec: &mut JobSpec,
        costs: &BTreeMap<JobId, Cost>,
        fallback: Duration,
    ) -> Result<MutantTimeout, NotRunReason> {
        let budget_left = self.request.budget.saturating_sub(self.started.elapsed());
        let cost = costs.get(&spec.job_id).copied();
        limit_job(
            spec,
            budget_left,
            cost.unwrap_or(Cost::whole_suite(fallback)),
        )
    }
}

/// What a progress line says about one finished mutant and the run so far.
#[derive(Clone, Debug)]
pub struct MutantProgress<'a> {
    /// Mutants with a verdict, those no test covers included; never more than `total`.
    pub done: usize,
    /// Every mutant of the plan.
    pub total: usize,
    pub mutant: &'a Mutant,
    pub status: Status,
    pub reason: Option<String>,
    pub duration: Duration,
    /// Kills (and timeouts) and survivors so far.
    pub killed: usize,
    pub survived: usize,
    /// The remaining mutants at the rate so far; `None` before there is a rate.
    pub eta: Option<Duration>,
}

/// The counts behind the progress lines.
#[derive(Default)]
struct Tally {
    done: usize,
    ran: usize,
    killed: usize,
    survived: usize,
    /// When (since the mutants started) each of the last [`RATE_WINDOW`] verdicts came.
    recent: std::collections::VecDeque<Duration>,
}

/// Verdicts the ETA's rate is measured over: the first mutants (the costliest when the budget
/// allows, the whole-suite runs of import-time code, a warming server pool) are slower than
/// the rest, so the rate of the whole run so far overstates what is left by several times.
const RATE_WINDOW: usize = 50;

impl Tally {
    fn record<'a>(
        &mut self,
        judged: &Judged,
        mutant: &'a Mutant,
        total: usize,
        to_run: usize,
        elapsed: Duration,
    ) -> MutantProgress<'a> {
        self.done = (self.done + 1).min(total);
        self.ran += 1;
        match judged.status {
            Status::Killed | Status::Timeout => self.killed += 1,
            Status::Survived => self.survived += 1,
            _ => {}
        }
        let left = to_run.saturating_sub(self.ran);
        // Wall time per verdict over the window (which already reflects the slots running in
        // parallel); before the window fills, over the run so far.
        let (span, count) = match self.recent.front() {
            Some(oldest) if self.recent.len() == RATE_WINDOW => {
                (elapsed.saturating_sub(*oldest), RATE_WINDOW)
            }
            _ => (elapsed, self.ran),
        };
        if self.recent.len() == RATE_WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(elapsed);
        let eta = (count > 0).then(|| span.mul_f64(left as f64 / count as f64));
        MutantProgress {
            done: self.done,
            total,
            mutant,
            status: judged.status,
            reason: judged.reason.clone(),
            duration: Duration::try_from_secs_f64(judged.duration_s).unwrap_or_default(),
            killed: self.killed,
            survived: self.survived,
            eta,
        }
    }
}

/// One mutant run's verdict before it is written into its record.
#[derive(Clone)]
struct Judged {
    status: Status,
    reason: Option<String>,
    killed_by: Vec<String>,
    tests_completed: Option<usize>,
    duration_s: f64,
    /// For a kill: what the run's own re-run of its killing tests said (`mutants::rerun`).
    confirmed: Option<bool>,
}

impl Judged {
    fn apply(&self, slot: &mut MutantResult) {
        slot.status = self.status;
        slot.status_reason = self.reason.clone();
        slot.killed_by = self.killed_by.clone();
        slot.tests_completed = self.tests_completed;
        slot.duration_s = Some(self.duration_s);
        if self.status == Status::Killed && self.confirmed == Some(false) {
            slot.flaky = true;
            slot.status_reason =
                Some("flaky kill: the killing tests passed when re-run at once".into());
        }
    }
}

/// The node ids of the killing tests, to confirm a kill with those alone: empty when one
/// killer is not among the covering tests (a collection error, a broken session), so the
/// whole selection re-runs.
/// A mutant that runs no test, for `reason`.
fn not_covered(mutant: &Mutant, reason: &str) -> MutantResult {
    MutantResult {
        mutant: mutant.clone(),
        status: Status::NoCoverage,
        status_reason: Some(reason.to_owned()),
        covered_by: Vec::new(),
        killed_by: Vec::new(),
        tests_completed: Some(0),
        flaky: false,
        duration_s: None,
        cached: None,
    }
}

pub(super) fn sorted(names: &[String]) -> Vec<&String> {
    let mut names: Vec<&String> = names.iter().collect();
    names.sort();
    names
}

fn killing_node_ids(covered_by: &[String], killed_by: &[String]) -> Vec<String> {
    if killed_by.is_empty() || !killed_by.iter().all(|killer| covered_by.contains(killer)) {
        return Vec::new();
    }
    let mut ids = killed_by.to_vec();
    ids.sort();
    ids.dedup();
    ids
}

/// Whether a mutant's verdict needs one more run: a kill its own session did not re-run.
/// A timeout is final at once: its limit was already ten times its expected cost plus 2 s,
/// so a retry would mostly repeat the hang at full price (formerly queued after every other
/// mutant), and either way the mutant counts as detected.
fn needs_second_run(status: Status, confirmed: Option<bool>) -> bool {
    status == Status::Killed && confirmed.is_none()
}

/// Folds the second run of a killed mutant into its record: a kill the second run does not
/// repeat is flaky.
fn settle(slot: &mut MutantResult, again: &Judged) {
    if (slot.status, again.status) == (Status::Killed, Status::Survived) {
        slot.flaky = true;
        slot.status_reason = Some("flaky kill: a second run of the same tests passed".into());
    }
}

fn pending(reason: NotRunReason) -> Judged {
    Judged {
        status: Status::Pending,
        reason: Some(reason.to_string()),
        killed_by: Vec::new(),
        tests_completed: None,
        duration_s: 0.0,
        confirmed: None,
    }
}

/// Sets a mutant job's limits: the rule of [`mutants::mutate_timeout`] on its whole expected
/// cost (start-up, collection and its tests: a fresh session), and, when it runs node ids, the
/// same rule on its tests alone for a run in a fork of a collected session, which pays neither
/// start-up nor collection. Returns the fresh limit, which the judgement names.
fn limit_job(
    spec: &mut JobSpec,
    budget_left: Duration,
    cost: Cost,
) -> Result<MutantTimeout, NotRunReason> {
    let timeout = mutants::mutate_timeout(budget_left, cost.whole)?;
    spec.timeout_secs = timeout.limit.as_secs().max(1);
    spec.forked_timeout_secs = match cost.forked {
        Some(tests) => Some(
            mutants::mutate_timeout(budget_left, tests)?
                .limit
                .min(timeout.limit)
                .as_secs()
                .max(1),
        ),
        None => None,
    };
    Ok(timeout)
}

/// `assay mutate`'s names for the one judgement (`mutants::judge`): Stryker's statuses, a hang
/// its own `Timeout`, a budget cut `Pending`, anything else that did not run `RuntimeError`;
/// for a `compiled` language, a build that failed before any test ran `CompileError`.
fn judge(result: &JobResult, timeout: MutantTimeout, compiled: bool) -> Judged {
    let duration_s = result.duration_ms as f64 / 1000.0;
    let verdict = |status, reason: Option<String>| Judged {
        status,
        reason,
        killed_by: Vec::new(),
        tests_completed: None,
        duration_s,
        confirmed: None,
    };
    if let Some(error) = compile_error(result).filter(|_| compiled) {
        return verdict(
            Status::CompileError,
            Some(format!("does not compile: {error}")),
        );
    }
    match judge_run(result, timeout, Expected::EveryTestRun) {
        Judgement::Killed { by, reason } => Judged {
            status: Status::Killed,
            reason,
            killed_by: by,
            tests_completed: result
                .report
                .parsed()
                .map(|r| r.cases.iter().filter(|c| !rerun::is_rerun(c)).count()),
            duration_s,
            confirmed: result.report.parsed().and_then(rerun::confirmation),
        },
        Judgement::Survived { tests_run } => Judged {
            status: Status::Survived,
            reason: None,
            killed_by: Vec::new(),
            tests_completed: Some(tests_run),
            duration_s,
            confirmed: None,
        },
        Judgement::TimedOut { limit } => {
            // Stopped well before the fresh limit: the fork's own, tighter limit (`limit_job`).
            let ran = Duration::from_millis(result.duration_ms);
            let reason = if ran + Duration::from_secs(1) < limit {
                format!(
                    "ran past its {}s limit in a fork of the collected session ({}s in a fresh one)",
                    ran.as_secs_f64().round() as u64,
                    limit.as_secs()
                )
            } else {
                format!("ran past its {}s limit", limit.as_secs())
            };
            verdict(Status::Timeout, Some(reason))
        }
        Judgement::NotRun(reason @ NotRunReason::CutShort { .. }) => {
            verdict(Status::Pending, Some(reason.to_string()))
        }
        Judgement::NotRun(reason) => verdict(Status::RuntimeError, Some(reason.to_string())),
    }
}

/// Whether the unmutated baseline passed with at least one test: by the per-test coverage map
/// when there is one, else by `result`'s own report.
fn judge_baseline(
    runner: RunnerKind,
    result: &Result<JobResult, BaselineError>,
    coverage: Option<&CoverageMap>,
    limit: Duration,
) -> Result<(), String> {
    if let Some(map) = coverage.filter(|_| per_line_wanted(runner)) {
        return map.baseline_problem().map_or(Ok(()), Err);
    }
    let result = result.as_ref().map_err(|e| error_chain(e))?;
    let judgement = judge_run(
        result,
        MutantTimeout {
            limit,
            set_by_budget: true,
        },
        Expected::EveryTestRun,
    );
    crate::mutation::check::judge_baseline(result, &judgement)
}

/// The directory of a Go file's package, relative to the module root (`""` for the root).
fn package_dir(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// Go: the top-level tests of the unmutated run's report (`PACKAGE::TestName`), by the
/// directory of their package (its import path less the module's, from the root `go.mod` of
/// the tree mutated). `None` when that names no module: every mutant then runs every package.
fn go_package_tests(
    request: &MutateRequest,
    result: &JobResult,
) -> Result<Option<BTreeMap<String, Vec<String>>>, MutateError> {
    let go_mod = source::read_file(&request.repo, &request.tree, "go.mod")?.unwrap_or_default();
    let module = String::from_utf8_lossy(&go_mod)
        .lines()
        .find_map(|line| {
            let rest = line.trim().strip_prefix("module")?;
            let name = rest.trim().trim_matches('"');
            (rest.starts_with(char::is_whitespace) && !name.is_empty()).then(|| name.to_owned())
        })
        .unwrap_or_default();
    if module.is_empty() {
        return Ok(None);
    }
    let mut tests: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for case in result.report.parsed().map_or(&[][..], |r| &r.cases[..]) {
        let dir = match case.file.strip_prefix(&module) {
            Some("") => String::new(),
            Some(rest) if rest.starts_with('/') => rest[1..].to_owned(),
            _ => continue, // another module's package: not one `./dir` names
        };
        // The function: `-run` selects every subtest of it.
        let function = case.name.split('/').next().unwrap_or(&case.name);
        let function = format!("{}::{function}", case.file);
        let names = tests.entry(dir).or_default();
        if !names.contains(&function) {
            names.push(function);
        }
    }
    Ok(Some(tests))
}

/// Why the baseline gave nothing to plan from; the mutants then run the whole suite.
#[derive(Debug, thiserror::Error)]
enum BaselineError {
    #[error("the baseline run (job {job}) failed")]
    Queue {
        job: JobId,
        #[source]
        source: QueueError,
    },
    #[error("the baseline run (job {job}) failed: {message}")]
    Infrastructure { job: JobId, message: String },
}

/// The baseline's one job; an infrastructure failure is an error like a lost queue.
async fn run_single(queue: &dyn JobQueue, spec: &JobSpec) -> Result<JobResult, BaselineError> {
    let result = run_one(queue, spec)
        .await
        .map_err(|source| BaselineError::Queue {
            job: spec.job_id.clone(),
            source,
        })?;
    match &result.status {
        JobStatus::Infrastructure { message, .. } => Err(BaselineError::Infrastructure {
            job: spec.job_id.clone(),
            message: message.clone(),
        }),
        _ => Ok(result),
    }
}

impl MutateReport {
    pub fn summary(&self) -> Summary {
        let count = |s: Status| self.results.iter().filter(|r| r.status == s).count();
        let detected = count(Status::Killed) + count(Status::Timeout);
        let valid = detected + count(Status::Survived) + count(Status::NoCoverage);
        let (score, interval) = if valid == 0 {
            (None, None)
        } else {
            let n = valid as f64;
            let p = detected as f64 / n;
            let z = 1.96_f64;
            let denominator = 1.0 + z * z / n;
            let centre = (p + z * z / (2.0 * n)) / denominator;
            let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denominator;
            (
                Some(p),
                Some(((centre - half).max(0.0), (centre + half).min(1.0))),
            )
        };
        let evaluated = self.results.len() - count(Status::Pending);
        Summary {
            mutants: self.results.len(),
            killed: count(Status::Killed),
            survived: count(Status::Survived),
            no_coverage: count(Status::NoCoverage),
            timeout: count(Status::Timeout),
            runtime_error: count(Status::RuntimeError),
            compile_error: count(Status::CompileError),
            pending: count(Status::Pending),
            flaky_kills: self.results.iter().filter(|r| r.flaky).count(),
            mutation_score: score,
            confidence_interval: interval,
            elapsed_s: self.elapsed_s,
            mutants_per_minute: if self.elapsed_s > 0.0 {
                evaluated as f64 * 60.0 / self.elapsed_s
            } else {
                0.0
            },
        }
    }

    /// The exit code: 0 when every mutant with a verdict was detected and none is pending (a
    /// mutant that does not compile has none and keeps none from the rest),
    /// [`EXIT_SURVIVORS`] when one survived or no test covers it, 4 when only the budget or
    /// errors kept a verdict from some mutants.
    pub fn exit_code(&self) -> u8 {
        self.exit_code_under(None)
    }

    /// [`Self::exit_code`] where survivors fail the run only when the mutation score (a
    /// percentage) is below `fail_under`: 5 then, else 0 (4 still when mutants have no verdict).
    pub fn exit_code_under(&self, fail_under: Option<f64>) -> u8 {
        let summary = self.summary();
        let below = match (fail_under, summary.mutation_score) {
            (None, _) => true,
            (Some(threshold), Some(score)) => score * 100.0 < threshold,
            (Some(_), None) => false,
        };
        if summary.survived + summary.no_coverage > 0 && below {
            EXIT_SURVIVORS
        } else if summary.pending + summary.runtime_error > 0 {
            4
        } else {
            0
        }
    }

    /// One mutant's unified diff against the HEAD file.
    pub fn diff(&self, result: &MutantResult) -> Option<String> {
        let source = self.files.get(result.mutant.path.as_str())?;
        mutants::diff::unified_diff(source.as_bytes(), &result.mutant.edit)
    }

    /// Every mutant's diff in plan order, each after a `# mutant ID STATUS: LABEL` line, so
    /// one can be cut out and applied with `git apply`.
    pub fn diffs(&self) -> String {
        let mut out = String::new();
        for result in &self.results {
            let Some(diff) = self.diff(result) else {
                continue;
            };
            out.push_str(&format!(
                "# mutant {} {:?}: {}\n{diff}",
                result.mutant.id,
                result.status,
                result.mutant.label()
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(status: Status, reason: Option<&str>) -> MutantResult {
        let source = "def is_past_end(page, last):\n    return page > last\n";
        let plan = mutants::plan_mutants(
            &[ChangedFile {
                path: "pager/clamp.py".into(),
                bytes: source.as_bytes().to_vec(),
                changed_lines: [1, 2].into(),
            }],
            Some(1),
        );
        MutantResult {
            mutant: plan.mutants[0].clone(),
            status,
            status_reason: reason.map(str::to_owned),
            covered_by: vec!["tests/test_clamp.py::test_the_last_page".into()],
            killed_by: Vec::new(),
            tests_completed: None,
            flaky: false,
            duration_s: Some(60.0),
            cached: None,
        }
    }

    fn second(status: Status, killed_by: &[&str]) -> Judged {
        Judged {
            status,
            reason: None,
            killed_by: killed_by.iter().map(|s| s.to_string()).collect(),
            tests_completed: Some(1),
            duration_s: 0.4,
            confirmed: None,
        }
    }

    #[test]
    fn the_eta_follows_the_rate_of_the_latest_verdicts() {
        let slot = record(Status::Killed, None);
        let killed = second(Status::Killed, &[]);
        let total = RATE_WINDOW * 4;
        let mut tally = Tally::default();
        let at = |tally: &mut Tally, elapsed: Duration| {
            tally
                .record(&killed, &slot.mutant, total, total, elapsed)
                .eta
        };
        // A slow start: one verdict a second.
        for n in 1..=RATE_WINDOW {
            let eta = at(&mut tally, Duration::from_secs(n as u64));
            if n == 1 {
                let left = (total - 1) as u64;
                assert_eq!(eta, Some(Duration::from_secs(left)));
            }
        }
        // Then ten a second: once the window holds only those, the ETA is at that rate.
        let start = Duration::from_secs(RATE_WINDOW as u64);
        let mut eta = None;
        for n in 1..=RATE_WINDOW + 1 {
            eta = at(&mut tally, start + Duration::from_millis(100 * n as u64));
        }
        let left = total - 2 * RATE_WINDOW - 1;
        let expected = Duration::from_millis(100 * left as u64);
        let eta = eta.expect("an ETA");
        assert!(
            eta.abs_diff(expected) < Duration::from_millis(5),
            "{eta:?} against {expected:?}"
        );
    }

    #[test]
    fn a_timeout_is_final_and_only_an_unconfirmed_kill_runs_again() {
        assert!(!needs_second_run(Status::Timeout, None));
        assert!(needs_second_run(Status::Killed, None));
        assert!(!needs_second_run(Status::Killed, Some(true)));
        assert!(!needs_second_run(Status::Killed, Some(false)));
        assert!(!needs_second_run(Status::Survived, None));
    }

    #[test]
    fn a_kill_is_confirmed_by_the_killing_tests_alone() {
        let covered: Vec<String> = [
            "tests/test_pager.py::test_full_pages",
            "tests/test_pager.py::PageTests::test_partial_last_page_is_counted",
            "tests/test_pager.py::test_bounds[11-5]",
        ]
        .map(String::from)
        .to_vec();
        let killers = |names: &[&str]| {
            let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
            killing_node_ids(&covered, &names)
        };
        assert_eq!(
            killers(&[
                "tests/test_pager.py::test_bounds[11-5]",
                "tests/test_pager.py::PageTests::test_partial_last_page_is_counted"
            ]),
            [
                "tests/test_pager.py::PageTests::test_partial_last_page_is_counted",
                "tests/test_pager.py::test_bounds[11-5]"
            ]
        );
        assert!(
            killers(&[
                "tests/test_pager.py::test_full_pages",
                "tests/test_pager.py"
            ])
            .is_empty()
        );
        assert!(killers(&[]).is_empty());
    }

    #[test]
    fn a_kill_the_second_run_does_not_repeat_is_flaky() {
        let mut slot = record(Status::Killed, None);
        settle(&mut slot, &second(Status::Survived, &[]));
        assert_eq!(slot.status, Status::Killed);
        assert!(slot.flaky);
        let mut slot = record(Status::Killed, None);
        settle(&mut slot, &second(Status::Killed, &["test_the_last_page"]));
        assert!(!slot.flaky && slot.status_reason.is_none());
    }

    #[test]
    fn a_mutant_that_does_not_compile_is_outside_the_score_and_the_exit_code() {
        let results = [Status::Killed, Status::Timeout, Status::CompileError]
            .into_iter()
            .map(|status| record(status, None))
            .collect();
        let report = MutateReport {
            tree: "41e7".into(),
            per_line_selection: false,
            selection_note: None,
            files: BTreeMap::new(),
            results,
            plan: MutationPlan::default(),
            elapsed_s: 30.0,
            phases: Phases::default(),
            cache: None,
            schemata: None,
        };
        let summary = report.summary();
        assert_eq!((summary.compile_error, summary.mutants), (1, 3));
        assert_eq!(summary.mutation_score, Some(1.0));
        assert_eq!(report.exit_code(), 0);
    }

    #[test]
    fn a_budget_cut_run_scores_what_ran_with_a_wilson_interval() {
        let statuses = [
            (Status::Killed, 8),
            (Status::Survived, 2),
            (Status::Pending, 5),
        ];
        let results: Vec<MutantResult> = statuses
            .iter()
            .flat_map(|(status, n)| std::iter::repeat_n(*status, *n))
            .map(|status| record(status, None))
            .collect();
        let report = MutateReport {
            tree: "41e7".into(),
            per_line_selection: true,
            selection_note: None,
            files: BTreeMap::new(),
            results,
            plan: MutationPlan::default(),
            elapsed_s: 30.0,
            phases: Phases::default(),
            cache: None,
            schemata: None,
        };
        let summary = report.summary();
        assert_eq!((summary.mutants, summary.pending), (15, 5));
        assert_eq!(summary.mutation_score, Some(0.8));
        let (low, high) = summary.confidence_interval.unwrap();
        assert!(
            (low - 0.4902).abs() < 1e-3 && (high - 0.9433).abs() < 1e-3,
            "{low} {high}"
        );
        // Only the ten with a verdict count towards the rate.
        assert_eq!(summary.mutants_per_minute, 20.0);
        assert_eq!(report.exit_code(), EXIT_SURVIVORS);
    }
}
