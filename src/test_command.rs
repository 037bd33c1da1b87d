//! `assay test`, `assay history`, `assay halt` and `assay resume` glue: flags in, the suite
//! library called, progress and summaries out, errors mapped to the documented exit lanes.

use crate::atomic_file::write_atomically;
use crate::config;
use crate::console;
use crate::embedded;
use crate::exit::{Failure, INFRASTRUCTURE, ResultExt as _};
use crate::fleet_link;
use crate::progress::Terminal;
use crate::suite_state::{
    current_branch, open_history, open_repo, print_alerts, save_history, state_dir,
};
use anyhow::{Context, anyhow};
use assay_common::TreeId;
use assay_common::report::summary::SuiteStatus;
use assay_common::runner::ReportFormat;
use assay_common::sandbox::SandboxEvidence;
use assay_common::suite::{
    CaseListing, CaseOutcome, CaseReport, Lane, SuiteCacheReport, SuiteCase, SuiteReport,
    SuiteTotals,
};
use assay_common::suite_audit::LedgerGate;
use assay_coordinator::fleet_halt::FleetHalt;
use assay_engine::mutation::mutants::javascript::typescript;
use assay_engine::proof;
use assay_engine::result_cache::{CacheMode, CacheUnavailable, ResultCache, RunContext};
use assay_engine::source;
use assay_engine::suite::conclude::Ending;
use assay_engine::suite::drive::{DriveError, RunEvent, RunProgress};
use assay_engine::suite::gates::ScopeAudit;
use assay_engine::suite::halt::{AdmissionGate, HaltFile};
use assay_engine::suite::history::{self, History};
use assay_engine::suite::reach;
use assay_engine::suite::run::{self, AuditBase, CacheOpener, Placement};
use assay_engine::suite::runners::{SuiteRunner, SuiteSetup};
use assay_engine::suite::scope::{self, ReadSource, Relocation};
use assay_engine::suite::select::{self, Selectors};
use assay_engine::suite::{
    self, CollectError, StopReason, SuiteError, SuiteOutcome, SuiteRan, SuiteRequest,
};
use assay_transport::store::ArtifactStore;
use assay_worker::sandbox::Sandbox as _;
use assay_worker::sandbox::process::ProcessSandbox;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

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
    let fleet = args.target.connect().await?;
    let halt = admission_gate(fleet.as_ref(), &state).await?;
    if let Some(reason) = halt.stop_reason() {
        errln!("[HALT] test stopped. Reason: {reason}");
        return Ok(INFRASTRUCTURE);
    }
    let (commit, tree) = resolve_tree(&repo, &args.rev)?;
    let audit = audit_base(args, &repo)?;
    let setup = suite_setup(args, &repo, &tree, fleet.is_some())?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let store_url = args.target.store_url(fleet.is_some())?;
    let store = embedded::open_store(&store_url)?;
    let (queue, _scratch) = fleet_link::job_queue(fleet_link::QueueChoice {
        fleet: fleet.as_ref(),
        store: store.clone(),
        repo: &repo,
        tree: &tree,
        subject_prefix: &args.target.fleet.subject_prefix,
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
    // node runs no TypeScript: a TypeScript tree's jobs erase its types first.
    let erase_types = typescript::runs_erased(runner.runner(), repo, &[tree])
        .map_err(|e| Failure::infrastructure(e.into()))?;
    let setup = SuiteSetup {
        runner,
        prefix,
        report,
        manifest: select::normalize(&args.manifest),
        erase_types,
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
        errln!("[audit] FAIL {}: {violation}", gate.path);
    }
    let base = args.audit_base.as_deref().unwrap_or("the base");
    errln!("error: the quarantine ledger gate failed against {base}; nothing was run");
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
        errln!("{line}");
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

mod args;
mod summary;

pub use args::TestArgs;

use summary::{closing_line, print_findings};

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
}
