//! `assay mutate`: mutation testing of whole files or trees of the HEAD commit. One coverage
//! run with per-test contexts maps each line to the tests that execute it; each mutant then
//! runs only those tests (or the whole suite without coverage) as one job on the same queue a
//! proof uses, ordered by expected cost, under one budget; kills are confirmed by a re-run.
//! The result is Stryker's mutation-testing-report-schema JSON plus a summary.

use crate::coverage::{self, CoverageMap};
use crate::dispatch::run_one;
use crate::mutation::check::run_mutants;
use crate::mutation::mutants::budget::MutantTimeout;
use crate::mutation::mutants::javascript::typescript;
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
use baseline::{BaselineError, package_dir, run_single};
use dispatch::{Judged, judge, not_covered};
use progress::Tally;
pub use progress::{MutantProgress, MutateEvent, MutateProgress};
use reached::Reach;
use schemata::Schemata;
pub use targets::Targets;

use assay_common::runner::pytest::python_m_pytest;
use assay_common::runner::{BatchMember, CoverageTool, RunnerKind};
use assay_common::{JobId, ProofId, TreeId};
use assay_transport::store::ArtifactStore;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod baseline;
mod batches;
mod choose;
mod dispatch;
pub mod mutant_cache;
mod progress;
mod reached;
mod reached_files;
mod report;
pub mod schemata;
mod stryker;
pub mod targets;

/// Exit code when some mutant survived or no test covers it (documented in the user guide).
pub const EXIT_SURVIVORS: u8 = 5;

/// An `assay mutate` run as asked for: the tree, what to mutate, how, and within what budget.
#[derive(Clone, Debug)]
pub struct MutateRequest {
    /// The git repository the tree comes from.
    pub repo: PathBuf,
    /// The tree mutated, resolved once by the caller ([`head_tree`]), so a fleet run mutates
    /// exactly the tree it uploaded.
    pub tree: TreeId,
    /// Files or directories (relative, `/`-separated) to mutate, and where given the lines;
    /// no paths: every product file.
    pub targets: Targets,
    /// The test runner the mutants' tests run under.
    pub runner: RunnerKind,
    /// The runner's argv before any selected tests.
    pub command_prefix: Vec<String>,
    /// Mutants per file; `None`: every site.
    pub max_per_file: Option<usize>,
    /// The default five operators, or the extended set.
    pub operators: OperatorSet,
    /// The run's whole time budget: the baseline's limit, and what the mutants share.
    pub budget: Duration,
    /// Jobs in flight at once (`--jobs`).
    pub slots: usize,
    /// The run's id, which names its jobs.
    pub run_id: ProofId,
    /// Incremental runs: where verdicts are stored and what decides them; `None` (a fleet run,
    /// or `--no-cache`): every mutant runs and nothing is stored.
    pub cache: Option<mutant_cache::MutantCache>,
}

/// The paths a run was given, as a user typed them: `pager.py, src/ledger`, or the whole
/// repository when none was.
fn listed(paths: &[String]) -> String {
    match paths.is_empty() {
        true => "the whole repository".to_owned(),
        false => paths.join(", "),
    }
}

/// Why a mutation run could not be planned or finished.
#[derive(Debug, thiserror::Error)]
pub enum MutateError {
    /// The repository's tree or files could not be read.
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(
        "no {language} product file under {} in the tree mutated (hint: name files or directories of the repository: HEAD's, or the work tree's with --worktree; test files are never mutated)",
        listed(.paths)
    )]
    /// The paths given hold no product file of the runner's language.
    NothingToMutate {
        /// The runner's language.
        language: &'static str,
        /// The paths given.
        paths: Vec<String>,
    },
    #[error(
        "no changed line of a {language} product file under {} since the revision given (nothing to mutate)",
        listed(.paths)
    )]
    /// No product line under the paths changed since the revision given.
    NothingChanged {
        /// The runner's language.
        language: &'static str,
        /// The paths given.
        paths: Vec<String>,
    },
    /// The runner's language is not one `assay mutate` mutates.
    #[error(
        "`assay mutate` mutates Python, Rust, Go and JavaScript; the {runner} runner is not supported (hint: --runner pytest, unittest, cargo, go or node)"
    )]
    UnsupportedRunner {
        /// The runner given.
        runner: RunnerKind,
    },
    /// The queue stopped before every mutant had a result.
    #[error("the mutation run stopped before every mutant had a result")]
    Stopped(#[source] assay_transport::queue::QueueError),
    #[error(
        "the unmutated baseline run did not pass: {reason}; no mutant was run{}",
        red_suite_hint(.reason)
    )]
    /// The unmutated tests did not pass, so no mutant was run.
    RedBaseline {
        /// What was wrong with the baseline run.
        reason: crate::mutation::check::BaselineProblem,
    },
    #[error(
        "infrastructure failure: the unmutated baseline run could not be run: {reason}; no mutant was run"
    )]
    /// The queue or the sandbox could not run the unmutated tests (a store the fleet does not
    /// share, a worker without the toolchain), so no mutant was run.
    BaselineUnrun {
        /// What failed, with its error chain.
        reason: String,
    },
}

/// The hint for a baseline whose own tests failed; none when they did not fail (the run was
/// empty, unreported or out of time), where fixing tests is not the remedy.
fn red_suite_hint(reason: &crate::mutation::check::BaselineProblem) -> &'static str {
    match reason.tests_failed() {
        true => {
            " (hint: a mutation score means nothing against a red suite: fix or deselect the failing tests first)"
        }
        false => "",
    }
}

pub use assay_common::mutation_report::{Status, Summary};

/// One mutant's verdict, the one type from the judgement of its run (`dispatch::judge`) to its
/// record, the mutant cache's entry (`MutantEntry::verdict`, written with these field names)
/// and the Stryker report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// What became of the mutant: killed, survived, timed out, not covered, …
    pub status: Status,
    /// Why, in words, when the status needs one (a timeout's limit, a compile error).
    pub status_reason: Option<String>,
    /// The tests that failed on the mutant.
    pub killed_by: Vec<String>,
    /// Tests the mutant's run completed, when its report says.
    pub tests_completed: Option<usize>,
    /// The mutant's run time, in seconds.
    pub duration_s: Option<f64>,
}

impl Verdict {
    /// A verdict with `status` and `reason` and nothing run to show for it.
    pub(crate) fn of(status: Status, reason: Option<String>) -> Self {
        Self {
            status,
            status_reason: reason,
            killed_by: Vec::new(),
            tests_completed: None,
            duration_s: None,
        }
    }
}

/// A mutant's record in the run: its verdict, the tests that covered it, and where it came
/// from when the cache answered it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MutantResult {
    /// The mutant: its file, site, operator and edit.
    pub mutant: Mutant,
    /// What its run decided.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The tests run against the mutant: those that reach its code, where that is known.
    pub covered_by: Vec<String>,
    /// A kill that a second run did not repeat.
    pub flaky: bool,
    /// The stored verdict of an earlier run answered this mutant; it did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached: Option<mutant_cache::CachedFrom>,
}

/// What a whole-tree run found.
#[derive(Clone, Debug, Serialize)]
pub struct MutateReport {
    /// The tree mutated.
    pub tree: String,
    /// Whether each mutant ran only the tests that reach it (per-test coverage or a trace).
    pub per_line_selection: bool,
    /// Why tests were not selected per mutant, when they were not.
    pub selection_note: Option<String>,
    /// Each mutated file's source, by path, for the report to show.
    pub files: BTreeMap<String, String>,
    /// Every mutant's record, in plan order.
    pub results: Vec<MutantResult>,
    /// The mutation plan the run followed.
    pub plan: MutationPlan,
    /// The run's wall time, in seconds.
    pub elapsed_s: f64,
    /// Where the wall time went, by phase.
    pub phases: Phases,
    /// What the cache did; `None` when the run did not use it.
    pub cache: Option<mutant_cache::CacheOutcome>,
    /// Rust and JavaScript: what one tree behind the switch did (`None` for other languages,
    /// or with the schemata off).
    pub schemata: Option<schemata::SchemataOutcome>,
}

/// A run's wall time by phase, as Stryker's report counts it (`performance`): planning the
/// mutants, the unmutated baseline run, and everything after it (cache lookups, the mutants'
/// runs and their kill confirmations).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Phases {
    /// Planning the mutants and building, before the baseline.
    pub setup: Duration,
    /// The unmutated baseline run.
    pub initial_run: Duration,
    /// Everything after the baseline: cache lookups, mutants' runs and confirmations.
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
    // A file the test command itself names (`node --require ./test/globals.cjs`) is the
    // harness, loaded around every test: never a product file, wherever it lives.
    let named_by_command: Vec<String> = request
        .command_prefix
        .iter()
        .filter_map(|arg| targets::in_tree(arg).ok())
        .collect();
    let mut files = Vec::new();
    for path in source::list_files(&request.repo, &tree)? {
        if !language.is_source(&path)
            || request.runner.is_test_file(&path)
            || named_by_command.contains(&path)
            || !under(&path)
        {
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
    JobSpec::new(
        &request.run_id,
        index,
        JobKind::Mutant,
        Side::Candidate,
        tree,
        command,
        // Cargo's report depends on the command: nextest's JUnit or libtest's own lines.
        request.runner.report_format_for(&request.command_prefix),
        1,
    )
}

/// One mutant's plan: what to run and how long it is expected to take.
struct Work {
    at: usize,
    spec: JobSpec,
    cost: Cost,
    /// A switched mutant's number and test files, when its run may share a job and a process
    /// with others (`batches`); its limit is set when the batch is admitted.
    batch: Option<BatchMember>,
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
        erase_types: erases_types(request)?,
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
    /// The tree is TypeScript: node runs it once its types are erased
    /// (`mutants::javascript::typescript`).
    erase_types: bool,
}

/// Whether the request's tree is TypeScript its runner runs erased: node's, with a `.ts` file.
fn erases_types(request: &MutateRequest) -> Result<bool, SourceError> {
    typescript::runs_erased(request.runner.runner(), &request.repo, &[&request.tree])
}

impl Campaign<'_> {
    /// A job of the run on `tree`, a tree of the project's own (not the schema's).
    fn spec(&self, tree: &TreeId, index: usize, command: Vec<String>) -> JobSpec {
        spec(self.request, tree, index, self.on_own_tree(command))
    }

    /// The command prefix a mutant runs with: the request's, plus what the runner adds to a
    /// mutant's run (`coverage`: the baseline mapped each test's lines).
    fn mutant_prefix(&self, coverage: bool) -> Vec<String> {
        let runner = self.request.runner.runner();
        let mut prefix = self.request.command_prefix.clone();
        prefix.extend(
            runner
                .mutant_run_arguments(coverage)
                .iter()
                .map(|a| (*a).to_owned()),
        );
        prefix
    }

    /// A mutant's command (on a tree of the project's own, no schema): `tests` run with
    /// `prefix`, a failure run again by the runner where it can.
    fn mutant_command(&self, prefix: &[String], tests: &[String]) -> Vec<String> {
        let runner = self.request.runner;
        runner
            .runner()
            .rerunning_failures(runner.command(prefix, tests, &[]))
    }

    /// `command` as it runs on a tree of the project's own: a TypeScript tree's types are
    /// erased first (the schema's tree holds its files erased already).
    fn on_own_tree(&self, command: Vec<String>) -> Vec<String> {
        match self.erase_types {
            true => typescript::erasing(command),
            false => command,
        }
    }
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
    /// JavaScript: which test files reach each schema site, when the trace was read.
    reached_files: Option<reached_files::ReachedFiles>,
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
    /// How many mutants batches settled, and in how many batches.
    batched: (usize, usize),
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
}

pub(super) fn sorted(names: &[String]) -> Vec<&String> {
    let mut names: Vec<&String> = names.iter().collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests;
