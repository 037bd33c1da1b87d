//! `assay test`, `assay history`, `assay halt` and `assay resume` glue: flags in, the suite
//! library called, progress and summaries out, errors mapped to the documented exit lanes.

use crate::atomic_file::write_atomically;
use crate::config;
use crate::console;
use crate::embedded;
use crate::exit::{Failure, INFRASTRUCTURE, ResultExt as _};
use crate::fleet_link;
use crate::progress::Terminal;
use crate::suite_state::{current_branch, open_history, print_alerts, save_history, state_dir};
use anyhow::{Context, anyhow};
use assay_common::TreeId;
use assay_common::nats_permissions::Role;
use assay_common::report::summary::SuiteStatus;
use assay_common::runner::ReportFormat;
use assay_common::sandbox::SandboxEvidence;
use assay_common::suite::{
    CaseListing, CaseOutcome, CaseReport, Lane, SuiteCacheReport, SuiteCase, SuiteReport,
    SuiteTotals,
};
use assay_common::suite_audit::LedgerGate;
use assay_coordinator::fleet_halt::{self, FleetHalt};
use assay_engine::proof;
use assay_engine::result_cache::{CacheMode, CacheUnavailable, ResultCache, RunContext};
use assay_engine::source;
use assay_engine::suite::conclude::Ending;
use assay_engine::suite::drive::{DriveError, RunEvent, RunProgress};
use assay_engine::suite::gates::ScopeAudit;
use assay_engine::suite::halt::{AdmissionGate, HaltError, HaltFile};
use assay_engine::suite::history::{self, History};
use assay_engine::suite::reach;
use assay_engine::suite::run::{self, AuditBase, CacheOpener, Placement};
use assay_engine::suite::runners::{SuiteRunner, SuiteSetup};
use assay_engine::suite::scope::{self, ReadSource, Relocation};
use assay_engine::suite::select::{self, Selectors};
use assay_engine::suite::shard::ShardMode;
use assay_engine::suite::{
    self, CollectError, StopReason, SuiteError, SuiteOutcome, SuiteRan, SuiteRequest,
};
use assay_transport::store::ArtifactStore;
use assay_worker::sandbox::Sandbox as _;
use assay_worker::sandbox::process::ProcessSandbox;
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

#[derive(Args, Debug, Clone)]
// Its bar counts cases, not jobs: the shared flag's help says so here.
#[command(mut_arg("progress", |arg| arg.help(
    "How progress shows: `auto` draws a live bar (cases done, jobs running, failures, ETA) \
     when stderr is a terminal and plain lines otherwise; `plain` always prints plain lines"
)))]
pub struct TestArgs {
    /// Repository whose suite runs.
    #[arg(short = 'C', long = "repo", value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
    /// Revision to test (its committed tree, never the working tree).
    #[arg(long, value_name = "REV", default_value = "HEAD")]
    pub rev: String,
    /// Branch name history is kept under [default: the checked-out branch].
    #[arg(long, value_name = "NAME")]
    pub branch: Option<String>,
    /// Test runner: pytest, unittest, go, node, junit, manifest or command [default: detected:
    /// go with a go.mod, node with a package.json, pytest when the project uses it, else
    /// unittest].
    #[arg(long, value_name = "RUNNER")]
    pub runner: Option<String>,
    /// The runner's command prefix [default: "python3 -m pytest", "go test", "node", or
    /// "python3" running Assay's unittest adapter]. junit and command run it as given (one
    /// case); manifest runs it with each row's path appended.
    #[arg(long, value_name = "CMD")]
    pub test_command: Option<String>,
    /// The junit runner's report: junit:RELATIVE/PATH.xml inside the tree [default: the
    /// command writes `{report}`].
    #[arg(long, value_name = "junit:PATH")]
    pub test_report: Option<String>,
    /// The manifest runner's corpus, relative to the repository root; row paths are relative
    /// to its directory.
    #[arg(long, value_name = "PATH", default_value = "manifest.tsv")]
    pub manifest: String,
    /// Cases in flight at once: a decimal number greater than zero, given once [default: the
    /// CPU count].
    #[arg(long, value_name = "N", value_parser = parse_jobs)]
    pub jobs: Option<usize>,
    /// How cases are batched into jobs: auto (a few batches per slot, balanced by recorded
    /// durations; pytest and manifest suites, whose output splits back per case), per-case
    /// (each case its own job), or K batches.
    #[arg(long, value_name = "auto|per-case|K", default_value = "auto")]
    pub shards: ShardMode,
    /// Print the selected cases as JSON (schema assay.cases/v1) and run nothing.
    #[arg(long)]
    pub list_cases: bool,
    /// Select a case by its ref from --list-cases. Repeatable; selectors combine as a union.
    #[arg(long = "case", value_name = "REF")]
    pub cases: Vec<String>,
    /// Select every case in this file. Repeatable.
    #[arg(long = "file", value_name = "FILE")]
    pub files: Vec<String>,
    /// Select every case under this directory. Repeatable.
    #[arg(long = "directory", value_name = "DIR")]
    pub directories: Vec<String>,
    /// Per-job timeout in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
    /// Write the suite report (JSON, schema assay.test/v1) here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the cases as JUnit XML here, for CI.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// State directory for suite history and the halt [default: the user cache dir's assay].
    #[arg(long, value_name = "DIR", env = "ASSAY_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Artifact store URL (file:///DIR or memory://; with --cluster, the fleet's store, also
    /// from ASSAY_STORE).
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    #[command(flatten)]
    pub cache: crate::cache_command::CacheFlags,
    /// Run the cases on a fleet: the NATS URL its coordinator and workers use, or a comma-separated
    /// list of a cluster's servers (a fleet run does not use the result cache).
    #[arg(long, value_name = "URL")]
    pub cluster: Option<String>,
    #[command(flatten)]
    pub fleet: crate::nats_flags::FleetFlags,
    /// The quarantine ledger, relative to the repository root.
    #[arg(long, value_name = "PATH", default_value = ".assay/quarantine.toml")]
    pub quarantine: String,
    /// Audit the run's scope against this base revision: the quarantine ledger may lose
    /// entries, never gain them or extend an expiry; a collected test that reads a file the
    /// change touches must run; a test collected at the base must still be collected (renames
    /// and moves are reported as such).
    #[arg(long, value_name = "REV")]
    pub audit_base: Option<String>,
    /// With --audit-base: the scope exceptions file (test, reason, expires) that may excuse a
    /// named closure or inventory gap, relative to the repository root.
    #[arg(long, value_name = "PATH", default_value = scope::EXCEPTIONS_PATH)]
    pub scope_exceptions: String,
    /// With --audit-base: the read registry (fixture or test → files read outside the test
    /// process), relative to the repository root; the base's and the candidate's both count.
    #[arg(long, value_name = "PATH", default_value = scope::REGISTRY_PATH)]
    pub fixture_reads: String,
    /// With --audit-base: run the pytest cases once more under coverage.py with per-test
    /// contexts and name the changed lines of the change that no executed test reaches.
    #[arg(long, requires = "audit_base")]
    pub reachability: bool,
    /// Coverage drop (in points) that raises a history alert.
    #[arg(long, value_name = "POINTS", default_value_t = history::DEFAULT_COVERAGE_DROP_THRESHOLD)]
    pub coverage_threshold: f64,
    #[command(flatten)]
    pub guest_env: crate::guest_env_flags::GuestEnvFlags,
    #[command(flatten)]
    pub console: crate::console_flags::ConsoleFlags,
    #[command(flatten)]
    pub output: crate::report::OutputArgs,
}

/// `--jobs`: decimal digits only (no sign, no spaces), greater than zero.
fn parse_jobs(text: &str) -> Result<usize, String> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{text:?} is not a decimal number greater than zero"
        ));
    }
    match text.parse::<usize>() {
        Ok(0) => Err("must be greater than zero".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text} is too large")),
    }
}

#[derive(Args, Debug, Clone)]
pub struct HistoryArgs {
    #[arg(short = 'C', long = "repo", value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
    /// Branch [default: the checked-out branch].
    #[arg(long, value_name = "NAME")]
    pub branch: Option<String>,
    #[arg(long, value_name = "DIR", env = "ASSAY_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Print the history file (schema assay.history/v1) instead of the trend.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct HaltArgs {
    /// Why admission stops; printed by every run that meets the halt.
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
    #[arg(long, value_name = "DIR", env = "ASSAY_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Halt a fleet (a key in its proofs bucket) instead of this machine's embedded runs.
    #[arg(long, value_name = "URL")]
    pub cluster: Option<String>,
    #[command(flatten)]
    pub fleet: crate::nats_flags::FleetFlags,
}

#[derive(Args, Debug, Clone)]
pub struct ResumeArgs {
    #[arg(long, value_name = "DIR", env = "ASSAY_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Lift a fleet's halt instead of this machine's.
    #[arg(long, value_name = "URL")]
    pub cluster: Option<String>,
    #[command(flatten)]
    pub fleet: crate::nats_flags::FleetFlags,
}

fn open_repo(dir: &Path) -> Result<PathBuf, Failure> {
    if !dir.is_dir() {
        return Err(Failure::usage(anyhow!(
            "repository directory {} does not exist",
            dir.display()
        )));
    }
    dir.canonicalize()
        .with_context(|| format!("failed to resolve {}", dir.display()))
        .usage()
}

fn resolve_tree(repo: &Path, rev: &str) -> Result<(String, TreeId), Failure> {
    let git = source::open(repo).map_err(|e| Failure::usage(e.into()))?;
    let commit = git
        .revparse_single(rev)
        .and_then(|o| o.peel_to_commit())
        .map_err(|e| {
            Failure::usage(anyhow!(
                "unknown revision {rev:?} in {} (hint: check `git rev-parse {rev}`): {e}",
                repo.display()
            ))
        })?;
    let tree = commit
        .tree()
        .with_context(|| format!("failed to read the tree of {rev}"))
        .infrastructure()?;
    Ok((commit.id().to_string(), TreeId(tree.id().to_string())))
}

/// Prints progress as `[test] K/N`, `[test] FAIL case`, `[test] INFRA case`, counted in cases,
/// and on a terminal a live bar below them.
struct CaseProgress {
    terminal: Terminal,
    state: Mutex<(usize, usize)>,
}

impl RunProgress for CaseProgress {
    fn event(&self, event: RunEvent<'_>) {
        let terminal = &self.terminal;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            RunEvent::Planned { cases: Some(cases) } => {
                state.1 = cases;
                terminal.line(&format!("[test] 0/{cases}"));
                terminal.update(0, cases);
            }
            RunEvent::Planned { cases: None } => {
                terminal.line(
                    "[test] 0/? (each batch collects the suite; cases are counted as they report)",
                );
                terminal.update(0, 0);
            }
            RunEvent::Finished { cases, pending } => {
                for verdict in cases {
                    match (verdict.lane, verdict.outcome) {
                        (Lane::Infrastructure, _) => {
                            terminal.failed();
                            terminal.line(&format!("[test] INFRA {}", verdict.case.display()))
                        }
                        (_, CaseOutcome::Failed | CaseOutcome::Error) if verdict.quarantined => {
                            terminal.line(&format!(
                                "[test] FAIL (quarantined) {}",
                                verdict.case.display()
                            ))
                        }
                        (_, CaseOutcome::Failed | CaseOutcome::Error) => {
                            terminal.failed();
                            terminal.line(&format!("[test] FAIL {}", verdict.case.display()))
                        }
                        _ => {}
                    }
                }
                state.0 += cases.len() + pending;
                let total = state.1.max(state.0);
                terminal.line(&format!("[test] {}/{total}", state.0));
                terminal.update(state.0, total);
            }
            RunEvent::Stopped { reason } => match reason {
                StopReason::Halted(text) => {
                    terminal.line(&format!("[HALT] test admission stopped. Reason: {text}"))
                }
                StopReason::Infrastructure { .. } => terminal.line(&format!(
                    "[test] infrastructure failure: admitting nothing more ({reason})"
                )),
            },
        }
    }

    fn driven(&self) {
        self.terminal.finish();
    }
}

/// Runs `assay test` and returns the exit code.
pub async fn run_test(args: &TestArgs) -> Result<u8, Failure> {
    let (started, clock) = (SystemTime::now(), Instant::now());
    let repo = open_repo(&args.repo)?;
    let state = state_dir(&args.state_dir);
    let fleet =
        fleet_link::Fleet::connect_if(args.cluster.as_deref(), &args.fleet, Role::Submitter)
            .await?;
    let halt = admission_gate(fleet.as_ref(), &state).await?;
    if let Some(reason) = halt.stop_reason() {
        eprintln!("[HALT] test stopped. Reason: {reason}");
        return Ok(INFRASTRUCTURE);
    }
    let (commit, tree) = resolve_tree(&repo, &args.rev)?;
    let audit = audit_base(args, &repo)?;
    let setup = suite_setup(args, &repo, &tree, fleet.is_some())?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let store_url = fleet_link::store_url(fleet.is_some(), &args.store)?;
    let store = embedded::open_store(&store_url)?;
    let (queue, _scratch) = fleet_link::job_queue(fleet_link::QueueChoice {
        fleet: fleet.as_ref(),
        store: store.clone(),
        repo: &repo,
        tree: &tree,
        subject_prefix: &args.fleet.subject_prefix,
        kind: "suite",
        pass_env: &args.guest_env.pass_env,
        slots: jobs,
        scratch_prefix: "assay-test-",
    })
    .await?;
    let branch = match &args.branch {
        Some(branch) => branch.clone(),
        None if args.rev == "HEAD" => current_branch(&repo)?,
        None => args.rev.clone(),
    };
    let repository = repo.display().to_string();
    let (history_file, history) = if args.list_cases {
        (PathBuf::new(), History::new(&repository, &branch))
    } else {
        open_history(&state, &repository, &branch)
    };
    let request = SuiteRequest {
        selectors: selectors(args, &repo),
        placement: placement(args, fleet.is_some(), &store),
        repo,
        repository,
        branch,
        rev: args.rev.clone(),
        commit,
        tree,
        setup,
        slots: jobs,
        shards: args.shards,
        timeout_secs: args.timeout,
        quarantine: select::normalize(&args.quarantine),
        audit,
        list_only: args.list_cases,
        no_cache: args.cache.no_cache,
        history,
        history_file,
        coverage_threshold: args.coverage_threshold,
        started,
        clock,
    };
    let progress = CaseProgress {
        terminal: Terminal::new(args.console.progress, args.console.quiet, jobs, "cases"),
        state: Mutex::new((0, 0)),
    };
    let outcome = suite::run(request, &*queue, &*store, &*halt, &progress)
        .await
        .map_err(suite_failure)?;
    drop(queue);
    match outcome {
        SuiteOutcome::Refused(gate) => refused(args, &gate),
        SuiteOutcome::Listed(cases) => listed(&cases),
        SuiteOutcome::Ran(ran) => ran_to_an_end(args, *ran, &*store).await,
    }
}

/// The admission gate the run meets: the fleet's halt key, or this machine's halt file.
async fn admission_gate(
    fleet: Option<&fleet_link::Fleet>,
    state: &Path,
) -> Result<Box<dyn AdmissionGate>, Failure> {
    Ok(match fleet {
        Some(fleet) => Box::new(
            FleetHalt::watch(fleet.proofs.clone())
                .await
                .map_err(|e| Failure::infrastructure(e.into()))?,
        ),
        None => Box::new(HaltFile::in_state_dir(state)),
    })
}

/// `--audit-base` and the scope files it judges by, its revision resolved.
fn audit_base(args: &TestArgs, repo: &Path) -> Result<Option<AuditBase>, Failure> {
    let Some(base) = &args.audit_base else {
        return Ok(None);
    };
    let (_, tree) = resolve_tree(repo, base)?;
    Ok(Some(AuditBase {
        rev: base.clone(),
        tree,
        exceptions_path: select::normalize(&args.scope_exceptions),
        registry_path: select::normalize(&args.fixture_reads),
        reachability: args.reachability,
    }))
}

/// The suite's runner, its command prefix and report, from the flags or detected in `tree`.
fn suite_setup(
    args: &TestArgs,
    repo: &Path,
    tree: &TreeId,
    on_fleet: bool,
) -> Result<SuiteSetup, Failure> {
    let runner = match &args.runner {
        Some(name) => name
            .parse::<SuiteRunner>()
            .map_err(|e| Failure::usage(anyhow!(e)))?,
        None => SuiteRunner::Kind(
            proof::detect_runner_in(repo, tree).map_err(|e| Failure::infrastructure(e.into()))?,
        ),
    };
    let prefix = match (&args.test_command, runner) {
        (Some(text), _) => config::split_command(text).usage()?,
        // Embedded, jobs run here, so the default may follow what is installed here.
        (None, SuiteRunner::Kind(kind)) if !on_fleet => kind.default_command_where(&proof::on_path),
        (None, SuiteRunner::Kind(kind)) => kind.default_command(),
        (None, SuiteRunner::Command) => Vec::new(),
    };
    // Jobs run here: a command whose program is not installed would fail every case, or wait
    // on a registry until its timeout.
    if !on_fleet
        && let Some(missing) = proof::missing_program(repo, tree, &prefix)
            .map_err(|e| Failure::infrastructure(e.into()))?
    {
        return Err(crate::prove::tool_missing(runner, &missing));
    }
    let report = match &args.test_report {
        Some(_) if !runner.takes_a_report_option() => {
            return Err(Failure::usage(anyhow!(
                "--test-report is for --runner junit; {runner} writes its own report"
            )));
        }
        Some(spec) => {
            ReportFormat::parse_test_report(spec).map_err(|e| Failure::usage(e.into()))?
        }
        None => ReportFormat::JunitXml,
    };
    let setup = SuiteSetup {
        runner,
        prefix,
        report,
        manifest: select::normalize(&args.manifest),
    };
    setup.check().map_err(|e| Failure::usage(e.into()))?;
    if args.reachability && !run::reachability_supported(&setup) {
        return Err(Failure::usage(anyhow!(
            "--reachability runs pytest under coverage.py; {runner} suites have no per-test coverage contexts here"
        )));
    }
    Ok(setup)
}

fn selectors(args: &TestArgs, repo: &Path) -> Selectors {
    Selectors {
        cases: args.cases.clone(),
        files: args.files.iter().map(|f| repo_relative(repo, f)).collect(),
        directories: args
            .directories
            .iter()
            .map(|d| repo_relative(repo, d))
            .collect(),
    }
}

/// Where the jobs run; embedded, the result cache is this user's, over `store`.
fn placement(args: &TestArgs, on_fleet: bool, store: &Arc<dyn ArtifactStore>) -> Placement {
    if on_fleet {
        return Placement::Fleet;
    }
    Placement::Embedded(Box::new(EmbeddedCaches {
        store: store.clone(),
        mode: args.cache.mode(),
        // An embedded suite's jobs run in the process sandbox (`embedded::job_context`).
        sandbox: ProcessSandbox::default().evidence(),
        pass_env: args.guest_env.pass_env.clone(),
        quiet: args.console.quiet,
    }))
}

/// This user's result cache over the run's store, signed with their key.
struct EmbeddedCaches {
    store: Arc<dyn ArtifactStore>,
    mode: CacheMode,
    sandbox: SandboxEvidence,
    pass_env: Vec<String>,
    quiet: bool,
}

impl CacheOpener for EmbeddedCaches {
    fn context(&self) -> RunContext {
        let env = assay_worker::sandbox::clean_env(&self.pass_env);
        RunContext::new(self.sandbox.clone(), &env)
    }

    fn for_cases(&self) -> Result<ResultCache, CacheUnavailable> {
        embedded::result_cache(self.store.clone(), self.mode, &self.sandbox, self.quiet)
    }

    fn for_reads(&self) -> Result<ResultCache, CacheUnavailable> {
        embedded::result_cache(self.store.clone(), self.mode, &self.sandbox, true)
    }
}

/// The quarantine ledger gate failed: its violations, and exit 1.
fn refused(args: &TestArgs, gate: &LedgerGate) -> Result<u8, Failure> {
    for violation in &gate.violations {
        eprintln!("[audit] FAIL {}: {violation}", gate.path);
    }
    let base = args.audit_base.as_deref().unwrap_or("the base");
    eprintln!("error: the quarantine ledger gate failed against {base}; nothing was run");
    Ok(1)
}

/// `--list-cases`: the selected cases as JSON on stdout.
fn listed(cases: &[SuiteCase]) -> Result<u8, Failure> {
    let listing = serde_json::to_string(&CaseListing::new(cases))
        .context("failed to encode the case listing")
        .internal()?;
    crate::console::outln(format_args!("{listing}"));
    Ok(0)
}

/// A run that ran: its findings and cache use on stderr, its history saved, its report
/// written, its closing and trend lines, and its exit code.
async fn ran_to_an_end(
    args: &TestArgs,
    ran: SuiteRan,
    store: &dyn ArtifactStore,
) -> Result<u8, Failure> {
    let report = &ran.report;
    print_findings(args, &ran);
    save_history(&ran.history_file, &ran.history);
    print_alerts(&ran.record);
    write_reports(args, report, store).await?;
    if !args.console.quiet {
        let (totals, failed) = (&report.totals, ran.guest_failures);
        let line = closing_line(totals, ran.ending, failed, ran.audit_failed);
        eprintln!("{line}");
    }
    let previous = ran.history.runs.iter().rev().skip(1);
    let previous = previous.clone().find(|r| r.status != SuiteStatus::Error);
    crate::console::humanln(format_args!(
        "{}",
        history::trend_line(&ran.record, previous)
    ));
    Ok(match ran.ending {
        Ending::Passed => 0,
        Ending::Failed => 1,
        Ending::Aborted => INFRASTRUCTURE,
    })
}

/// What the audits found and what the cache did, in the order they were decided.
fn print_findings(args: &TestArgs, ran: &SuiteRan) {
    let audit = &ran.report.audit;
    audit.reachability.iter().flatten().for_each(print_reach);
    for warning in &ran.warnings {
        eprintln!("warning: {warning}");
    }
    if let Some(scope) = &audit.scope {
        print_scope(scope, args.audit_base.as_deref().unwrap_or("the base"));
    }
    print_order_dependent(&ran.report.cases);
    for outlier in &audit.selection.executed_not_selected {
        eprintln!(
            "[audit] FAIL containment: job {} executed {}, which it did not select",
            outlier.job, outlier.id
        );
    }
    for outlier in &audit.selection.selected_not_collected {
        eprintln!(
            "[audit] FAIL containment: job {} selected {}, which the tree does not collect",
            outlier.job, outlier.id
        );
    }
    if let Some(cache) = &ran.report.cache
        && !args.console.quiet
    {
        print_cache(cache, ran, args.cache.no_cache);
    }
}

/// Cases that failed apart and passed in the whole suite's order: named, never a regression.
fn print_order_dependent(cases: &[CaseReport]) {
    let names: Vec<&str> = cases
        .iter()
        .filter(|c| c.order_dependent)
        .map(|c| c.display.as_str())
        .collect();
    if !names.is_empty() {
        eprintln!(
            "[order] {} order-dependent (failed when run apart from the cases before {}, passed with the whole suite in collection order; counted as passed): {}",
            match names.len() {
                1 => "1 case is".to_owned(),
                n => format!("{n} cases are"),
            },
            if names.len() == 1 { "it" } else { "them" },
            names.join(", ")
        );
    }
}

/// A changed file the executed tests do not reach, or only in part.
fn print_reach(file: &reach::FileReach) {
    if !file.imported {
        eprintln!(
            "[audit] UNREACHED {}: no executed test imports it",
            file.file
        );
    } else if !file.unreached.is_empty() {
        eprintln!(
            "[audit] UNREACHED {}: changed lines {}",
            file.file,
            reach::ranges(&file.unreached)
        );
    }
}

/// What the cache did: passes withheld, entries refused and served, passes stored, or why it
/// was not used (unless `--no-cache` said so).
fn print_cache(cache: &SuiteCacheReport, ran: &SuiteRan, no_cache: bool) {
    if let Some(why) = &cache.withheld {
        eprintln!("[cache] passes not stored: {why}");
        return;
    }
    if let Some(why) = &cache.not_used {
        if !no_cache {
            eprintln!("[cache] not used: {why}");
        }
        return;
    }
    for refused in &cache.refused {
        eprintln!(
            "[cache] refused entry {}: {}; the case ran instead",
            refused.entry, refused.why
        );
    }
    let from = console::stored_by(ran.answered_by.iter().map(String::as_str));
    eprintln!(
        "[cache] {} of {} cases answered from the cache{from}, {} passes stored",
        cache.served, ran.selected, cache.stored
    );
    if let Some(why) = &cache.store_error {
        eprintln!("[cache] passes not stored: {why}");
    }
}

/// `--json`, `--junit` and the `--output` reports.
async fn write_reports(
    args: &TestArgs,
    report: &SuiteReport,
    store: &dyn ArtifactStore,
) -> Result<(), Failure> {
    if let Some(path) = &args.json {
        let json = serde_json::to_vec_pretty(report)
            .context("failed to encode the suite report")
            .internal()?;
        crate::atomic_file::write_report(path, &json).infrastructure()?;
    }
    if let Some(path) = &args.junit {
        write_atomically(path, console::suite_junit(report).as_bytes()).infrastructure()?;
    }
    crate::report::emit_suite(&args.output, report, store).await
}

/// A failed suite run, in its exit lane.
fn suite_failure(error: SuiteError) -> Failure {
    match error {
        SuiteError::Drive(e) => drive_failure(e),
        e if e.is_usage() => Failure::usage(e.into()),
        e => Failure::infrastructure(e.into()),
    }
}

/// A failed collection, selection or queue, in its exit lane: a runner `assay test` cannot run
/// and a selector that matches nothing are usage errors, a listing that fails is the guest's.
fn drive_failure(error: DriveError) -> Failure {
    match error {
        DriveError::Collect(e) if matches!(e, CollectError::Unsupported { .. }) => {
            Failure::usage(e.into())
        }
        DriveError::Collect(e) if e.is_infrastructure() => Failure::infrastructure(e.into()),
        DriveError::Collect(e) => Failure {
            code: 1,
            error: e.into(),
        },
        DriveError::Select(e) => Failure::usage(e.into()),
        DriveError::Queue(e) => Failure::infrastructure(e.into()),
    }
}

/// The last progress line: how the run ended, in cases; quarantined failures are named as
/// such, never counted as passed, and a run failed by its audit alone says so.
fn closing_line(totals: &SuiteTotals, ending: Ending, failed: u64, audit_failed: bool) -> String {
    let n = totals.total;
    let quarantined = match totals.quarantined {
        0 => String::new(),
        q => format!(", {q} quarantined"),
    };
    match ending {
        Ending::Aborted => format!("[test] {}/{n} infrastructure-aborted", n - totals.not_run),
        Ending::Passed if totals.quarantined == 0 => format!("[test] {n}/{n} passed"),
        Ending::Passed => format!("[test] {}/{n} passed{quarantined}", totals.passed),
        Ending::Failed if failed == 0 && audit_failed => format!(
            "[test] {}/{n} passed{quarantined}; the selection audit failed",
            totals.passed
        ),
        Ending::Failed => format!("[test] {n}/{n} completed, {failed} failed{quarantined}"),
    }
}

/// Prints the scope gates' findings: every gap, every excuse used, every expired one, every
/// relocation; and one closing line when the audit fails.
fn print_scope(audit: &ScopeAudit, base: &str) {
    for why in [&audit.closure.unchecked, &audit.inventory.unchecked]
        .into_iter()
        .flatten()
    {
        eprintln!("[audit] FAIL not checked: {why}");
    }
    let excuse = |excused: &Option<scope::ScopeException>| match excused {
        Some(e) => format!(
            " — EXCUSED by {} until {}: {}",
            audit.exceptions.path, e.expires, e.reason
        ),
        None => String::new(),
    };
    for gap in &audit.closure.gaps {
        let reads: Vec<String> = gap
            .reads
            .iter()
            .map(|r| match r.source {
                ReadSource::Recorded => r.file.clone(),
                ReadSource::Declared => format!("{} (declared)", r.file),
            })
            .collect();
        let verdict = if gap.excused_by.is_some() {
            "EXCUSED"
        } else {
            "FAIL"
        };
        eprintln!(
            "[audit] {verdict} closure: {} reads {}, which the change touches, and was not run{}",
            gap.test,
            reads.join(", "),
            excuse(&gap.excused_by)
        );
    }
    for moved in &audit.inventory.found.relocated {
        let how = match moved.kind {
            Relocation::Renamed => "RENAMED",
            Relocation::Moved => "MOVED",
        };
        eprintln!("[audit] {how} {} -> {}", moved.from, moved.to);
    }
    for removed in &audit.inventory.found.removed {
        let verdict = if removed.excused_by.is_some() {
            "EXCUSED"
        } else {
            "FAIL"
        };
        eprintln!(
            "[audit] {verdict} inventory: {} is collected at {base} and gone at the candidate{}",
            removed.test,
            excuse(&removed.excused_by)
        );
    }
    for expired in &audit.exceptions.usage.expired {
        eprintln!(
            "[audit] exception for {} expired on {}: it excuses nothing",
            expired.test, expired.expires
        );
    }
    if !audit.passed() {
        eprintln!("error: the selection audit's scope gates failed against {base}");
    }
}

/// A `--file`/`--directory` argument relative to the repository root: relative paths are
/// taken against the working directory, as a shell user means them.
fn repo_relative(repo: &Path, arg: &str) -> String {
    let path = Path::new(arg);
    let absolute = if path.is_absolute() {
        path.to_owned()
    } else {
        std::env::current_dir().map_or_else(|_| path.to_owned(), |cwd| cwd.join(path))
    };
    let absolute = absolute.canonicalize().unwrap_or(absolute);
    match absolute.strip_prefix(repo) {
        Ok(rel) => select::normalize(&rel.to_string_lossy()),
        // Outside the repository: kept as given, so it matches nothing and is reported.
        Err(_) => arg.to_owned(),
    }
}

pub fn run_history(args: &HistoryArgs) -> Result<u8, Failure> {
    let repo = open_repo(&args.repo)?;
    let branch = match &args.branch {
        Some(b) => b.clone(),
        None => current_branch(&repo)?,
    };
    let repository = repo.display().to_string();
    let path = history::history_path(&state_dir(&args.state_dir), &repository, &branch);
    let (history, problem) = history::load(&path, &repository, &branch);
    if let Some(problem) = problem {
        eprintln!("warning: suite history {} is {problem}", path.display());
    }
    if args.json {
        let json = serde_json::to_string_pretty(&history)
            .context("failed to encode suite history")
            .internal()?;
        crate::console::outln(format_args!("{json}"));
        return Ok(0);
    }
    if history.runs.is_empty() {
        crate::console::outln(format_args!(
            "no suite runs recorded for {repository} on {branch}"
        ));
        return Ok(0);
    }
    crate::console::outln(format_args!(
        "{repository} on {branch}: {} runs recorded, last {} kept",
        history.run_count,
        history.runs.len()
    ));
    for (i, run) in history.runs.iter().enumerate() {
        let previous = match run.status {
            SuiteStatus::Error => None,
            _ => history.runs[..i]
                .iter()
                .rev()
                .find(|r| r.status != SuiteStatus::Error),
        };
        crate::console::outln(format_args!(
            "{} {}",
            run.timestamp,
            history::trend_line(run, previous)
        ));
    }
    Ok(0)
}

/// Said when `assay halt|resume --cluster` cannot reach the fleet: they connect as the
/// operator (the operator's inbox prefix is the only one its replies can arrive under), so
/// other credentials get no answer at all.
fn as_the_operator(mut failure: Failure) -> Failure {
    failure.error = failure.error.context(
        "halt and resume connect as the fleet's operator and write the proofs bucket's halt key, which only the operator's and the coordinator's users may (hint: run them with the operator's NATS credentials)",
    );
    failure
}

pub async fn run_halt(args: &HaltArgs) -> Result<u8, Failure> {
    if args.reason.trim().is_empty() {
        return Err(Failure::usage(HaltError::NoReason.into()));
    }
    match &args.cluster {
        Some(url) => {
            // Halting and resuming are the operator's.
            let fleet = fleet_link::Fleet::connect(url, &args.fleet, Role::Operator)
                .await
                .map_err(as_the_operator)?;
            fleet_halt::set_halt(&fleet.proofs, &args.reason)
                .await
                .map_err(|e| Failure::infrastructure(e.into()))?;
        }
        None => HaltFile::in_state_dir(&state_dir(&args.state_dir))
            .set(&args.reason)
            .map_err(|e| Failure::usage(e.into()))?,
    }
    crate::console::outln(format_args!(
        "[HALT] admission stopped. Reason: {}",
        args.reason.trim()
    ));
    Ok(0)
}

pub async fn run_resume(args: &ResumeArgs) -> Result<u8, Failure> {
    let cleared = match &args.cluster {
        Some(url) => {
            // Halting and resuming are the operator's.
            let fleet = fleet_link::Fleet::connect(url, &args.fleet, Role::Operator)
                .await
                .map_err(as_the_operator)?;
            fleet_halt::clear_halt(&fleet.proofs)
                .await
                .map_err(|e| Failure::infrastructure(e.into()))?
        }
        None => HaltFile::in_state_dir(&state_dir(&args.state_dir))
            .clear()
            .map_err(|e| Failure::infrastructure(e.into()))?,
    };
    crate::console::outln(format_args!(
        "{}",
        if cleared {
            "admission resumed"
        } else {
            "no halt was set"
        }
    ));
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quarantined_failure_is_not_counted_as_passed() {
        let totals = SuiteTotals {
            total: 2,
            passed: 1,
            quarantined: 1,
            ..SuiteTotals::default()
        };
        assert_eq!(
            closing_line(&totals, Ending::Passed, 0, false),
            "[test] 1/2 passed, 1 quarantined"
        );
        let clean = SuiteTotals {
            total: 2,
            passed: 2,
            ..SuiteTotals::default()
        };
        assert_eq!(
            closing_line(&clean, Ending::Passed, 0, false),
            "[test] 2/2 passed"
        );
        let failing = SuiteTotals {
            failed: 1,
            ..totals.clone()
        };
        assert_eq!(
            closing_line(&failing, Ending::Failed, 1, true),
            "[test] 2/2 completed, 1 failed, 1 quarantined"
        );
        assert_eq!(
            closing_line(&clean, Ending::Failed, 0, true),
            "[test] 2/2 passed; the selection audit failed"
        );
    }

    #[test]
    fn jobs_must_be_a_plain_decimal_above_zero() {
        assert_eq!(parse_jobs("3"), Ok(3));
        assert_eq!(parse_jobs("03"), Ok(3));
        for bad in [
            "0",
            "",
            "+3",
            "-1",
            " 3",
            "3x",
            "0x10",
            "99999999999999999999999",
        ] {
            assert!(parse_jobs(bad).is_err(), "{bad:?}");
        }
    }
}
