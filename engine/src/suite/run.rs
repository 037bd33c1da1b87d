//! One `assay test` run as a library call: the quarantine ledger gate, the case cache and
//! reads-cache policy, the suite's jobs, the reachability job, the scope gates, history and
//! the suite report. The caller opens the repository, queue and store, prints, writes files
//! and maps the [`SuiteOutcome`] to an exit code.

use super::audit::AuditReport;
use super::case_cache::{self, CaseCache};
use super::conclude::{self, ConcludeRequest, Ending};
use super::drive::{self, DriveError, DriveRequest, RunProgress};
use super::driven::Driven;
use super::gates::{self, GateError, GateRequest, ScopeAudit, ScopeFiles};
use super::halt::AdmissionGate;
use super::history::{History, RunRecord};
use super::ledger::{self, Ledger, LedgerError};
use super::order;
use super::reach;
use super::runners::SuiteSetup;
use super::select::Selectors;
use super::shard::ShardMode;
use crate::coverage::{CoverageError, CoverageMap};
use crate::dispatch::run_one;
use crate::proof;
use crate::result_cache::{CacheUnavailable, ResultCache, RunContext};
use crate::source::{self, SourceError};
use assay_common::suite::{SUITE_SCHEMA, SuiteCacheReport, SuiteCase, SuiteReport};
use assay_common::suite_audit::{FileReach, LedgerGate};
use assay_common::suite_history::HistoryReport;
use assay_common::{ProofId, TreeId};
use assay_transport::queue::{JobQueue, QueueError};
use assay_transport::store::ArtifactStore;
use assay_transport::tree::TreeError;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Instant, SystemTime};

/// Runs of history a suite report carries for its trend (`history.recent`).
pub const RECENT_RUNS: usize = 20;

/// Why a run's passes are not stored when its selection audit found outliers.
pub const WITHHELD: &str = "the selection audit found outliers (executed ⊆ selected ⊆ \
                            collected does not hold), so this run's results are not trusted";

/// What one suite run needs besides its queue, store, halt and progress.
pub struct SuiteRequest {
    /// The repository's root; `repository` is how the report and history name it.
    pub repo: PathBuf,
    /// The repository's name in the report and history.
    pub repository: String,
    /// The branch history is kept under.
    pub branch: String,
    /// The revision as given (`--rev`).
    pub rev: String,
    /// The commit `rev` names.
    pub commit: String,
    /// That commit's tree: what the jobs run on.
    pub tree: TreeId,
    /// The runner and its configured command.
    pub setup: SuiteSetup,
    /// Which cases to run (`--select`, `--deselect`, markers), as given.
    pub selectors: Selectors,
    /// Jobs in flight at once.
    pub slots: usize,
    /// How the cases are split into jobs (`--shards`).
    pub shards: ShardMode,
    /// Each job's wall-clock limit, in seconds.
    pub timeout_secs: u64,
    /// The quarantine ledger's path, relative to the root.
    pub quarantine: String,
    /// `--audit-base`: the scope audit's base, when there is one.
    pub audit: Option<AuditBase>,
    /// Collect and select the cases, run none of them ([`SuiteOutcome::Listed`]).
    pub list_only: bool,
    /// Where the jobs run: in this process or on a fleet.
    pub placement: Placement,
    /// `--no-cache`: no case is answered from the result cache and none is stored.
    pub no_cache: bool,
    /// The branch's history; the run is recorded in it and it is handed back.
    pub history: History,
    /// Where the caller keeps `history`, as the report names it.
    pub history_file: PathBuf,
    /// Coverage drop (in points) that raises a history alert.
    pub coverage_threshold: f64,
    /// When the run started, for the report and history.
    pub started: SystemTime,
    /// When the run started, on the monotonic clock its durations are measured on.
    pub clock: Instant,
}

/// The base a run's scope is audited against.
pub struct AuditBase {
    /// The base as given (`--audit-base`) and its tree.
    pub rev: String,
    /// The base's tree.
    pub tree: TreeId,
    /// The scope exceptions file, relative to the root.
    pub exceptions_path: String,
    /// The read registry (`--fixture-reads`), relative to the root.
    pub registry_path: String,
    /// Run the pytest cases once more under coverage.py and name the changed lines no
    /// executed test reaches (pytest suites only).
    pub reachability: bool,
}

/// Where the jobs run, which decides whether the result cache may be used.
pub enum Placement {
    /// In this process: cases may be answered from the embedded result cache.
    Embedded(Box<dyn CacheOpener>),
    /// On a fleet, whose store the run shares (the audit's base tree is uploaded to it).
    Fleet,
}

/// Opens the embedded result cache, when the run's policy lets it use one.
pub trait CacheOpener: Send + Sync {
    /// What beside the job decides a case's outcome here (sandbox, environment).
    fn context(&self) -> RunContext;
    /// The cache the cases are answered from and stored in, or why there is none.
    fn for_cases(&self) -> Result<ResultCache, CacheUnavailable>;
    /// The cache an audit keeps the base's recorded read sets in, or why there is none.
    fn for_reads(&self) -> Result<ResultCache, CacheUnavailable>;
}

/// How a run ended.
#[derive(Debug)]
pub enum SuiteOutcome {
    /// The quarantine ledger gate failed against the audit's base: nothing ran.
    Refused(LedgerGate),
    /// [`SuiteRequest::list_only`]: the selected cases; nothing ran.
    Listed(Vec<SuiteCase>),
    /// The suite ran.
    Ran(Box<SuiteRan>),
}

impl SuiteOutcome {
    /// Whether the run passed, failed or was aborted: a refused run failed, a listing passed.
    pub fn ending(&self) -> Ending {
        match self {
            Self::Refused(_) => Ending::Failed,
            Self::Listed(_) => Ending::Passed,
            Self::Ran(ran) => ran.ending,
        }
    }
}

/// A suite run that ran: its report and what the caller shows or keeps beside it.
#[derive(Debug)]
pub struct SuiteRan {
    /// The run's report, as written to the report file.
    pub report: SuiteReport,
    /// Whether the run passed, failed or was aborted.
    pub ending: Ending,
    /// The branch's history with this run recorded, for the caller to save in `history_file`.
    pub history: History,
    /// Where the caller keeps the history, as given in the request.
    pub history_file: PathBuf,
    /// This run's history record: its deltas and alerts.
    pub record: RunRecord,
    /// Problems that leave the result standing (a batch whose output could not be split).
    pub warnings: Vec<String>,
    /// Failed and errored guest-lane cases the ledger does not excuse.
    pub guest_failures: u64,
    /// The selection audit found outliers or a scope gate failed.
    pub audit_failed: bool,
    /// The selected cases, and the runs that stored the entries the cache answered with.
    pub selected: usize,
    /// The proof or run ids that stored the entries the cache answered with.
    pub answered_by: Vec<String>,
}

/// Why a suite run could not be done or finished.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// Reading the quarantine ledger from a tree.
    #[error(transparent)]
    Read(SourceError),
    /// A quarantine ledger that cannot be parsed or compared.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// Uploading the audit's base tree to the fleet's store.
    #[error(transparent)]
    Upload(#[from] TreeError),
    /// Collecting, selecting or running the suite's cases.
    #[error(transparent)]
    Drive(#[from] DriveError),
    /// Reading the scope files (exceptions, read registry) the audit judges by.
    #[error(transparent)]
    Scope(#[from] GateError),
    /// The reachability job: the change's lines, the job, or its coverage.
    #[error(transparent)]
    Reachability(#[from] ReachError),
    /// The whole-suite job that tells order-dependent cases from failures.
    #[error("the whole-suite run that checks the failures for order dependence")]
    OrderCheck(#[source] QueueError),
}

impl SuiteError {
    /// A mistake in the request or the repository's files rather than a failure to run.
    pub fn is_usage(&self) -> bool {
        match self {
            Self::Ledger(_) => true,
            Self::Scope(e) => e.is_usage(),
            Self::Read(_)
            | Self::Upload(_)
            | Self::Drive(_)
            | Self::Reachability(_)
            | Self::OrderCheck(_) => false,
        }
    }
}

/// Why the reachability run could not say which changed lines no test reaches.
#[derive(Debug, thiserror::Error)]
pub enum ReachError {
    /// The change's lines could not be read from the repository.
    #[error(transparent)]
    ChangedLines(SourceError),
    /// The coverage job could not be run.
    #[error(transparent)]
    Job(#[from] QueueError),
    /// The coverage job's map could not be read.
    #[error(transparent)]
    Coverage(Box<CoverageError>),
}

/// What the run decided before its first job.
struct Plan {
    run_id: ProofId,
    /// `YYYY-MM-DD`, for the ledger's and exceptions' expiries.
    today: String,
    ledger: Ledger,
    ledger_gate: Option<LedgerGate>,
    cache: Option<CaseCache>,
    /// Why the run has no case cache, when it has none.
    cache_not_used: Option<String>,
}

impl Plan {
    fn drive_request<'a>(&'a self, request: &'a SuiteRequest) -> DriveRequest<'a> {
        DriveRequest {
            run_id: &self.run_id,
            setup: &request.setup,
            repo: &request.repo,
            tree: &request.tree,
            timeout_secs: request.timeout_secs,
            slots: request.slots,
            shards: request.shards,
            selectors: &request.selectors,
            history: &request.history,
            ledger: &self.ledger,
            today: &self.today,
            cache: self.cache.as_ref(),
        }
    }
}

/// The run's audit findings, for the report.
struct Audits {
    ledger: Option<LedgerGate>,
    reachability: Option<Vec<FileReach>>,
    scope: Option<ScopeAudit>,
}

/// Runs the suite `request` describes: gates, plans, drives, audits and concludes it.
pub async fn run(
    request: SuiteRequest,
    queue: &dyn JobQueue,
    store: &dyn ArtifactStore,
    halt: &dyn AdmissionGate,
    progress: &dyn RunProgress,
) -> Result<SuiteOutcome, SuiteError> {
    let ledger_bytes = read_at(&request, &request.tree)?;
    let ledger_gate = match gate_ledger(&request, ledger_bytes.as_deref())? {
        Some(gate) if !gate.passed() => return Ok(SuiteOutcome::Refused(gate)),
        gate => gate,
    };
    let plan = plan(&request, ledger_bytes, ledger_gate, store).await?;
    if request.list_only {
        let drive = plan.drive_request(&request);
        let (_, cases) = drive::collect_selected(&drive, queue, store).await?;
        return Ok(SuiteOutcome::Listed(cases));
    }
    let reads = reads_cache(&request);
    let gate = gate_request(&request, &plan, reads.as_ref());
    // The scope files are read before anything runs: a malformed one is a usage error now,
    // not after the suite.
    let scope_files = gate.as_ref().map(gates::read_files).transpose()?;
    let driven = drive::run(&plan.drive_request(&request), queue, store, halt, progress).await?;
    progress.driven();
    let reachability = reachability(&request, &plan, &driven, queue, store).await?;
    let mut outcome = conclude(&request, &plan, &driven, store).await;
    let scope = audit_scope(gate.as_ref(), scope_files, &driven, &outcome, queue, store).await;
    if scope.as_ref().is_some_and(|audit| !audit.passed()) {
        outcome.fail_audit();
    }
    let cache = cache_report(&plan, &driven, &outcome).await;
    // After the cache took this run's passes (an order-dependent pass is the whole-suite
    // run's, which no batch's pinned report says), and never over a failed scope audit.
    if scope.as_ref().is_none_or(|audit| audit.passed()) {
        let (setup, tree) = (&request.setup, &request.tree);
        let timeout = request.timeout_secs;
        order::confirm(
            &plan.run_id,
            setup,
            tree,
            timeout,
            &driven,
            &mut outcome,
            queue,
        )
        .await
        .map_err(SuiteError::OrderCheck)?;
    }
    let audits = Audits {
        ledger: plan.ledger_gate.clone(),
        reachability,
        scope,
    };
    Ok(SuiteOutcome::Ran(Box::new(assemble(
        request, &plan, &driven, outcome, audits, cache,
    ))))
}

/// The quarantine ledger gate against the audit's base: the candidate's ledger (`candidate`)
/// may lose entries, never gain them or extend an expiry. `None` without a base.
fn gate_ledger(
    request: &SuiteRequest,
    candidate: Option<&[u8]>,
) -> Result<Option<LedgerGate>, SuiteError> {
    let Some(audit) = &request.audit else {
        return Ok(None);
    };
    let base = read_at(request, &audit.tree)?;
    let gate = ledger::compare(&request.quarantine, base.as_deref(), candidate)?;
    Ok(Some(gate))
}

/// The quarantine ledger's bytes at `tree`, if it has one.
fn read_at(request: &SuiteRequest, tree: &TreeId) -> Result<Option<Vec<u8>>, SuiteError> {
    source::read_file(&request.repo, tree, &request.quarantine).map_err(SuiteError::Read)
}

/// What is decided before the first job: the run's id and day, its ledger (parsed from
/// `ledger_bytes`), its case cache;
/// on a fleet, the audit's base tree is uploaded so its jobs run there too.
async fn plan(
    request: &SuiteRequest,
    ledger_bytes: Option<Vec<u8>>,
    ledger_gate: Option<LedgerGate>,
    store: &dyn ArtifactStore,
) -> Result<Plan, SuiteError> {
    let ledger = match ledger_bytes {
        Some(bytes) => ledger::parse(&bytes, &request.quarantine, &request.rev)?,
        None => Ledger::default(),
    };
    if let (Placement::Fleet, Some(audit)) = (&request.placement, &request.audit) {
        assay_transport::store_tree::upload_tree(store, &request.repo, &audit.tree).await?;
    }
    let run_id = ProofId(proof::new_proof_id().0.replacen("p-", "t-", 1));
    let (cache, cache_not_used) = match case_cache(request) {
        Ok(cache) => (cache, None),
        Err(why) => (None, Some(assay_transport::error_chain::error_chain(&why))),
    };
    let mut today = proof::rfc3339(SystemTime::now());
    today.truncate("YYYY-MM-DD".len());
    Ok(Plan {
        run_id,
        today,
        ledger,
        ledger_gate,
        cache,
        cache_not_used,
    })
}

/// The run's case cache, or why it has none: `--no-cache`, a fleet run (its workers choose
/// their own sandbox and interpreter, which the caller cannot vouch for in a key, and on a
/// fleet only the coordinator may write entries, signed), a runner whose cases cannot be
/// checked against a pinned report, or a cache that cannot be opened.
fn case_cache(request: &SuiteRequest) -> Result<Option<CaseCache>, CacheUnavailable> {
    if request.no_cache {
        return Err(CacheUnavailable::TurnedOff);
    }
    let Placement::Embedded(caches) = &request.placement else {
        return Err(CacheUnavailable::OnAFleet);
    };
    let setup = &request.setup;
    if let Some(why) = case_cache::uncacheable(setup.runner) {
        return Err(CacheUnavailable::Uncacheable {
            runner: setup.runner,
            why,
        });
    }
    let cache = caches.for_cases()?;
    let (tree, timeout) = (&request.tree, request.timeout_secs);
    Ok(CaseCache::new(
        cache,
        caches.context(),
        setup,
        tree,
        timeout,
    ))
}

/// Where an audit keeps the base's recorded read sets: the embedded result cache. None on a
/// fleet, whose store every submitter writes, nor where the cache cannot be opened (the code
/// under test runs unconfined and could write the store): the read sets are then recorded
/// afresh by every audit.
fn reads_cache(request: &SuiteRequest) -> Option<ResultCache> {
    match (&request.placement, &request.audit) {
        (Placement::Embedded(caches), Some(_)) => caches.for_reads().ok(),
        _ => None,
    }
}

/// What the scope gates judge, when the run has an audit base.
fn gate_request<'a>(
    request: &'a SuiteRequest,
    plan: &'a Plan,
    reads_cache: Option<&'a ResultCache>,
) -> Option<GateRequest<'a>> {
    let audit = request.audit.as_ref()?;
    Some(GateRequest {
        run_id: &plan.run_id,
        setup: &request.setup,
        repo: &request.repo,
        base_tree: &audit.tree,
        tree: &request.tree,
        timeout_secs: request.timeout_secs,
        exceptions_path: &audit.exceptions_path,
        registry_path: &audit.registry_path,
        today: &plan.today,
        reads_cache,
    })
}

/// The reachability audit, when asked for and the run was not stopped.
async fn reachability(
    request: &SuiteRequest,
    plan: &Plan,
    driven: &Driven,
    queue: &dyn JobQueue,
    store: &dyn ArtifactStore,
) -> Result<Option<Vec<FileReach>>, ReachError> {
    match &request.audit {
        Some(audit) if audit.reachability && driven.run.stopped.is_none() => {
            let ids: Vec<String> = driven.cases.iter().map(|c| c.id.clone()).collect();
            let files = reach_files(request, &audit.tree, plan, &ids, queue, store).await?;
            Ok(Some(files))
        }
        _ => Ok(None),
    }
}

/// The change's changed product lines (base..tested) against a per-test coverage run of the
/// cases `ids`: what each changed file's lines are reached by.
async fn reach_files(
    request: &SuiteRequest,
    base_tree: &TreeId,
    plan: &Plan,
    ids: &[String],
    queue: &dyn JobQueue,
    store: &dyn ArtifactStore,
) -> Result<Vec<FileReach>, ReachError> {
    let changed = changed_product_lines(request, base_tree)?;
    if changed.is_empty() || ids.is_empty() {
        return Ok(Vec::new());
    }
    let job = reach::plan_job(&plan.run_id, &request.tree, ids, request.timeout_secs);
    let result = run_one(queue, &job).await?;
    let map = CoverageMap::read(store, &result)
        .await
        .map_err(|e| ReachError::Coverage(Box::new(e)))?;
    Ok(reach::reach(&changed, &map))
}

/// The changed lines of the change's Python product files (not its test files).
fn changed_product_lines(
    request: &SuiteRequest,
    base_tree: &TreeId,
) -> Result<BTreeMap<String, BTreeSet<u32>>, ReachError> {
    let changed = crate::mutation::check::changed_lines(&request.repo, base_tree, &request.tree)
        .map_err(ReachError::ChangedLines)?;
    Ok(changed
        .into_iter()
        .filter(|(file, _)| {
            file.ends_with(".py") && !request.setup.runner.runner().is_test_file(file)
        })
        .collect())
}

/// The jobs' results judged into cases, totals and the selection audit.
async fn conclude(
    request: &SuiteRequest,
    plan: &Plan,
    driven: &Driven,
    store: &dyn ArtifactStore,
) -> conclude::SuiteOutcome {
    let conclude_request = ConcludeRequest {
        run_id: &plan.run_id,
        runner: request.setup.runner,
        timeout_secs: request.timeout_secs,
        ledger: &plan.ledger,
        today: &plan.today,
    };
    conclude::conclude(&conclude_request, driven, store).await
}

/// The scope gates (read-set closure, inventory), when the run has an audit base and was not
/// stopped.
async fn audit_scope(
    gate: Option<&GateRequest<'_>>,
    files: Option<ScopeFiles>,
    driven: &Driven,
    outcome: &conclude::SuiteOutcome,
    queue: &dyn JobQueue,
    store: &dyn ArtifactStore,
) -> Option<ScopeAudit> {
    let (gate, files) = (gate?, files?);
    if driven.run.stopped.is_some() {
        return None;
    }
    let executed = gates::executed(&driven.cases, &outcome.cases);
    Some(gates::check(gate, files, &driven.collected, &executed, queue, store).await)
}

/// What the cache did: the passes stored, withheld from a run whose selection audit found
/// outliers, or why the cache was not used.
async fn cache_report(
    plan: &Plan,
    driven: &Driven,
    outcome: &conclude::SuiteOutcome,
) -> Option<SuiteCacheReport> {
    let answers = &driven.answers;
    match &plan.cache {
        Some(_) if !outcome.selection.contained => Some(SuiteCacheReport {
            served: answers.reports.len() as u64,
            looked_up: answers.looked_up as u64,
            refused: answers.refused.clone(),
            withheld: Some(WITHHELD.to_owned()),
            ..SuiteCacheReport::default()
        }),
        Some(cache) => Some(store_passes(cache, plan, driven, outcome).await),
        None => plan.cache_not_used.clone().map(|why| SuiteCacheReport {
            not_used: Some(why),
            ..SuiteCacheReport::default()
        }),
    }
}

/// Stores the run's trusted passes and says what the cache did.
async fn store_passes(
    cache: &CaseCache,
    plan: &Plan,
    driven: &Driven,
    outcome: &conclude::SuiteOutcome,
) -> SuiteCacheReport {
    let answers = &driven.answers;
    let (run_id, ledger, today) = (&plan.run_id, &plan.ledger, &plan.today);
    let stored = cache
        .store(run_id, driven, &outcome.cases, ledger, today)
        .await;
    SuiteCacheReport {
        served: answers.reports.len() as u64,
        looked_up: answers.looked_up as u64,
        stored: *stored.as_ref().unwrap_or(&0) as u64,
        refused: answers.refused.clone(),
        not_used: None,
        store_error: stored
            .as_ref()
            .err()
            .map(|e| assay_transport::error_chain::error_chain(e)),
        withheld: None,
    }
}

/// Records the run in history and assembles its report.
fn assemble(
    mut request: SuiteRequest,
    plan: &Plan,
    driven: &Driven,
    outcome: conclude::SuiteOutcome,
    audits: Audits,
    cache: Option<SuiteCacheReport>,
) -> SuiteRan {
    let record = record(&mut request, plan, driven, &outcome);
    let ending = outcome.ending();
    let audit_failed = !outcome.selection.contained || audits.scope_failed();
    let report = SuiteReport {
        schema: SUITE_SCHEMA.into(),
        run_id: plan.run_id.to_string(),
        status: ending,
        repository: request.repository,
        branch: request.branch,
        revision: request.commit,
        runner: request.setup.runner,
        started_at: proof::rfc3339(request.started),
        duration_s: request.clock.elapsed().as_secs_f64(),
        totals: outcome.totals.clone(),
        cases: outcome.cases,
        jobs: outcome.jobs,
        audit: AuditReport {
            selection: outcome.selection,
            quarantine_ledger: audits.ledger,
            reachability: audits.reachability,
            scope: audits.scope,
        },
        history: history_report(&request.history_file, &request.history, &record),
        stopped: outcome.stopped.as_ref().map(ToString::to_string),
        cache,
    };
    SuiteRan {
        report,
        ending,
        history: request.history,
        history_file: request.history_file,
        record,
        warnings: outcome.warnings,
        guest_failures: outcome.guest_failures,
        audit_failed,
        selected: driven.cases.len(),
        answered_by: answered_by(driven),
    }
}

impl Audits {
    fn scope_failed(&self) -> bool {
        self.scope.as_ref().is_some_and(|audit| !audit.passed())
    }
}

/// Records the run in the request's history: its cases' costs, its collected cases when the
/// next run can be batched from them, and its summary.
fn record(
    request: &mut SuiteRequest,
    plan: &Plan,
    driven: &Driven,
    outcome: &conclude::SuiteOutcome,
) -> RunRecord {
    let summary = outcome.summary(
        &plan.run_id.to_string(),
        proof::rfc3339(request.started),
        request.clock.elapsed().as_secs_f64(),
    );
    let cases = driven.case_list(&request.setup, &request.tree);
    outcome.record(
        &mut request.history,
        summary,
        request.coverage_threshold,
        cases,
    )
}

/// The report's history part: this run's deltas and the trend the HTML report draws (the
/// last runs, oldest first, this one last).
fn history_report(file: &std::path::Path, history: &History, record: &RunRecord) -> HistoryReport {
    HistoryReport {
        file: file.display().to_string(),
        new_failures: record.new_failures,
        newly_failing: record.newly_failing.clone(),
        coverage_drop: record.coverage_drop,
        alerts: record.alerts.clone(),
        recent: history.runs[history.runs.len().saturating_sub(RECENT_RUNS)..].to_vec(),
    }
}

/// The runs that stored the entries the cache answered with, one per answered case.
fn answered_by(driven: &Driven) -> Vec<String> {
    let reports = driven.answers.reports.values();
    reports
        .filter_map(|r| Some(r.cached.as_ref()?.run_id.clone()))
        .collect()
}

/// Whether `setup` can run the reachability job: it runs pytest under coverage.py.
pub fn reachability_supported(setup: &SuiteSetup) -> bool {
    setup.coverage() == Some(assay_common::runner::CoverageTool::CoveragePy)
}
