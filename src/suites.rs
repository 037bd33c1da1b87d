//! `assay test`, `assay history`, `assay halt` and `assay resume` glue: flags in, the suite
//! library called, progress and summaries out, errors mapped to the documented exit lanes.

use crate::config;
use crate::embedded;
use crate::exit::{Failure, INFRASTRUCTURE, ResultExt as _};
use crate::fleet_link;
use crate::prove::write_atomically;
use crate::reporter;
use anyhow::{Context, anyhow};
use assay_common::ProofId;
use assay_common::TreeId;
use assay_common::job::{JobResult, JobStatus};
use assay_common::report::summary::{self, SuiteStatus};
use assay_common::runner::{ReportFormat, RunnerKind};
use assay_common::suite::{
    CaseListing, CaseOutcome, CaseReport, Lane, SUITE_SCHEMA, SuiteCase, SuiteJobReport,
    SuiteReport, SuiteTotals, derive_outcome,
};
use assay_coordinator::dispatch::run_one;
use assay_coordinator::engine;
use assay_coordinator::source;
use assay_coordinator::suite::CollectError;
use assay_coordinator::suite::audit::{self, JobSelection};
use assay_coordinator::suite::cluster::{self, FleetHalt};
use assay_coordinator::suite::halt::{AdmissionGate, HaltError, HaltFile};
use assay_coordinator::suite::history::{self, History, RunRecord, RunSummary};
use assay_coordinator::suite::ledger::{self, Ledger};
use assay_coordinator::suite::reach;
use assay_coordinator::suite::runners::{self, SuiteRunner, SuiteSetup};
use assay_coordinator::suite::select::{self, Selectors};
use assay_coordinator::suite::shard::{self, ShardMode};
use assay_coordinator::suite::split;
use assay_coordinator::suite::{self, StopReason, SuiteEvent, SuiteProgress};
use assay_transport::queue::JobQueue;
use assay_transport::store::{ArtifactStore, read_named};
use clap::Args;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Instant, SystemTime};

#[derive(Args, Debug, Clone)]
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
    /// Run the cases on a fleet: the NATS URL its coordinator and workers use.
    #[arg(long, value_name = "URL")]
    pub cluster: Option<String>,
    /// Subject prefix of the fleet.
    #[arg(long, env = "ASSAY_SUBJECT_PREFIX", default_value = "assay")]
    pub subject_prefix: String,
    #[command(flatten)]
    pub nats: crate::nats_flags::NatsFlags,
    /// The quarantine ledger, relative to the repository root.
    #[arg(long, value_name = "PATH", default_value = ".assay/quarantine.toml")]
    pub quarantine: String,
    /// Gate the quarantine ledger against this base revision's: entries may be removed, never
    /// added, and no expiry extended.
    #[arg(long, value_name = "REV")]
    pub audit_base: Option<String>,
    /// With --audit-base: run the pytest cases once more under coverage.py with per-test
    /// contexts and name the changed lines of the change that no executed test reaches.
    #[arg(long, requires = "audit_base")]
    pub reachability: bool,
    /// Coverage drop (in points) that raises a history alert.
    #[arg(long, value_name = "POINTS", default_value_t = history::DEFAULT_COVERAGE_DROP_THRESHOLD)]
    pub coverage_threshold: f64,
    /// Environment variable passed to test commands, beyond PATH and the locale. Repeatable.
    #[arg(long = "pass-env", value_name = "NAME")]
    pub pass_env: Vec<String>,
    /// Print only the summary, no progress.
    #[arg(short, long)]
    pub quiet: bool,
    #[command(flatten)]
    pub output: crate::report::OutputArgs,
}

/// Runs of history a suite report carries for its trend (`history.recent`).
const RECENT_RUNS: usize = 20;

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
    /// Subject prefix of the fleet to halt; other fleets on the same server go on.
    #[arg(long, env = "ASSAY_SUBJECT_PREFIX", default_value = "assay")]
    pub subject_prefix: String,
    #[command(flatten)]
    pub nats: crate::nats_flags::NatsFlags,
}

#[derive(Args, Debug, Clone)]
pub struct ResumeArgs {
    #[arg(long, value_name = "DIR", env = "ASSAY_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Lift a fleet's halt instead of this machine's.
    #[arg(long, value_name = "URL")]
    pub cluster: Option<String>,
    /// Subject prefix of the fleet to resume.
    #[arg(long, env = "ASSAY_SUBJECT_PREFIX", default_value = "assay")]
    pub subject_prefix: String,
    #[command(flatten)]
    pub nats: crate::nats_flags::NatsFlags,
}

pub(crate) fn state_dir(flag: &Option<PathBuf>) -> PathBuf {
    flag.clone().unwrap_or_else(|| {
        std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir)
            .join("assay")
    })
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

/// The checked-out branch, or `detached`.
pub(crate) fn current_branch(repo: &Path) -> Result<String, Failure> {
    let git = source::open(repo).map_err(|e| Failure::usage(e.into()))?;
    let name = match git.head() {
        Ok(head) if head.is_branch() => head.shorthand().unwrap_or("detached").to_owned(),
        _ => "detached".to_owned(),
    };
    Ok(name)
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

fn read_at(repo: &Path, tree: &TreeId, path: &str) -> Result<Option<Vec<u8>>, Failure> {
    source::read_file(repo, tree, path).map_err(|e| Failure::infrastructure(e.into()))
}

/// Prints progress as `[test] K/N`, `[test] FAIL case`, `[test] INFRA case`, counted in cases.
struct CaseProgress<'a> {
    quiet: bool,
    cases: &'a [SuiteCase],
    shards: &'a [Vec<usize>],
    /// Failures the ledger excuses are printed as quarantined.
    ledger: &'a Ledger,
    today: &'a str,
    total: usize,
    done: Mutex<usize>,
}

impl SuiteProgress for CaseProgress<'_> {
    fn event(&self, event: SuiteEvent<'_>) {
        if self.quiet {
            return;
        }
        match event {
            SuiteEvent::JobFinished { spec, result } => {
                let members = &self.shards[spec.index as usize];
                for &i in members {
                    let derived = derive_outcome(&self.cases[i], result);
                    match (derived.lane, derived.outcome) {
                        (Lane::Infrastructure, _) => {
                            eprintln!("[test] INFRA {}", self.cases[i].display())
                        }
                        (_, CaseOutcome::Failed | CaseOutcome::Error)
                            if self.ledger.excuses(&self.cases[i].id, self.today) =>
                        {
                            eprintln!("[test] FAIL (quarantined) {}", self.cases[i].display())
                        }
                        (_, CaseOutcome::Failed | CaseOutcome::Error) => {
                            eprintln!("[test] FAIL {}", self.cases[i].display())
                        }
                        _ => {}
                    }
                }
                let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
                *done += members.len();
                eprintln!("[test] {}/{}", *done, self.total);
            }
            SuiteEvent::Stopped { reason } => match reason {
                StopReason::Halted(text) => {
                    eprintln!("[HALT] test admission stopped. Reason: {text}")
                }
                StopReason::Infrastructure { .. } => {
                    eprintln!("[test] infrastructure failure: admitting nothing more ({reason})")
                }
            },
        }
    }
}

/// Runs `assay test` and returns the exit code.
pub async fn run_test(args: &TestArgs) -> Result<u8, Failure> {
    let started = SystemTime::now();
    let clock = Instant::now();
    let repo = open_repo(&args.repo)?;
    let state = state_dir(&args.state_dir);
    let fleet = match &args.cluster {
        Some(url) => Some(fleet_link::Fleet::connect(url, &args.subject_prefix, &args.nats).await?),
        None => None,
    };
    let halt: Box<dyn AdmissionGate> = match &fleet {
        Some(fleet) => Box::new(
            FleetHalt::watch(fleet.proofs.clone())
                .await
                .map_err(|e| Failure::infrastructure(e.into()))?,
        ),
        None => Box::new(HaltFile::in_state_dir(&state)),
    };
    if let Some(reason) = halt.stop_reason() {
        eprintln!("[HALT] test stopped. Reason: {reason}");
        return Ok(INFRASTRUCTURE);
    }
    let (commit, tree) = resolve_tree(&repo, &args.rev)?;
    let quarantine_path = select::normalize(&args.quarantine);
    let ledger_bytes = read_at(&repo, &tree, &quarantine_path)?;
    let mut ledger_gate = None;
    let mut audit_base_tree = None;
    if let Some(base) = &args.audit_base {
        let (_, base_tree) = resolve_tree(&repo, base)?;
        audit_base_tree = Some(base_tree.clone());
        let base_bytes = read_at(&repo, &base_tree, &quarantine_path)?;
        let gate = ledger::compare(
            &quarantine_path,
            base_bytes.as_deref(),
            ledger_bytes.as_deref(),
        )
        .map_err(|e| Failure::usage(e.into()))?;
        if !gate.passed() {
            for violation in &gate.violations {
                eprintln!("[audit] FAIL {quarantine_path}: {violation}");
            }
            eprintln!("error: the quarantine ledger gate failed against {base}; nothing was run");
            return Ok(1);
        }
        ledger_gate = Some(gate);
    }
    let ledger = match &ledger_bytes {
        Some(bytes) => ledger::parse(bytes, &quarantine_path, &args.rev)
            .map_err(|e| Failure::usage(e.into()))?,
        None => Ledger::default(),
    };
    let runner = match &args.runner {
        Some(name) => name
            .parse::<SuiteRunner>()
            .map_err(|e| Failure::usage(anyhow!(e)))?,
        None => SuiteRunner::Kind(
            engine::detect_runner_in(&repo, &tree)
                .map_err(|e| Failure::infrastructure(e.into()))?,
        ),
    };
    let prefix = match (&args.test_command, runner) {
        (Some(text), _) => config::split_command(text).usage()?,
        (None, SuiteRunner::Kind(kind)) => kind.default_command(),
        (None, SuiteRunner::Command) => Vec::new(),
    };
    let report = match &args.test_report {
        Some(spec) => {
            if runner != SuiteRunner::Kind(RunnerKind::Junit) {
                return Err(Failure::usage(anyhow!(
                    "--test-report is for --runner junit; {runner} writes its own report"
                )));
            }
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
    if args.reachability && runner != SuiteRunner::Kind(RunnerKind::Pytest) {
        return Err(Failure::usage(anyhow!(
            "--reachability runs pytest under coverage.py; {runner} suites have no per-test coverage contexts here"
        )));
    }
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
        subject_prefix: &args.subject_prefix,
        runner: match runner {
            SuiteRunner::Kind(kind) => kind,
            SuiteRunner::Command => RunnerKind::Junit,
        },
        kind: "suite",
        pass_env: &args.pass_env,
        slots: jobs,
        scratch_prefix: "assay-test-",
    })
    .await?;
    let run_id = ProofId(engine::new_proof_id().0.replacen("p-", "t-", 1));

    let collection = suite::collect(
        &run_id,
        &setup,
        &repo,
        &tree,
        args.timeout,
        &*queue,
        &*store,
    )
    .await
    .map_err(|e| {
        if matches!(e, CollectError::Unsupported { .. }) {
            Failure::usage(e.into())
        } else if e.is_infrastructure() {
            Failure::infrastructure(e.into())
        } else {
            Failure {
                code: 1,
                error: e.into(),
            }
        }
    })?;
    let collected = &collection.cases;
    let selectors = Selectors {
        cases: args.cases.clone(),
        files: args.files.iter().map(|f| repo_relative(&repo, f)).collect(),
        directories: args
            .directories
            .iter()
            .map(|d| repo_relative(&repo, d))
            .collect(),
    };
    let chosen = select::select(collected, &selectors).map_err(|e| Failure::usage(e.into()))?;
    let cases: Vec<SuiteCase> = chosen.iter().map(|&i| collected[i].clone()).collect();
    if args.list_cases {
        let listing = serde_json::to_string(&CaseListing::new(&cases))
            .context("failed to encode the case listing")
            .internal()?;
        println!("{listing}");
        return Ok(0);
    }

    let branch = match &args.branch {
        Some(branch) => branch.clone(),
        None if args.rev == "HEAD" => current_branch(&repo)?,
        None => args.rev.clone(),
    };
    let repository = repo.display().to_string();
    let (history_path, mut history) = open_history(&state, &repository, &branch);
    let refs: Vec<String> = cases.iter().map(SuiteCase::reference).collect();
    let mode = match args.shards {
        ShardMode::Auto if !setup.batches_by_default() => ShardMode::PerCase,
        mode => mode,
    };
    let (estimates, known) = shard::estimate_durations(&refs, &history.durations);
    let shards = shard::heaviest_first(
        runners::split_shards(
            &setup,
            &cases,
            shard::plan_batches(mode, &estimates, known, jobs),
        ),
        &estimates,
    );
    let plan = suite::plan_suite(
        &run_id,
        &setup,
        &tree,
        (&cases, collection.corpus.as_ref()),
        &shards,
        args.timeout,
    );
    if !args.quiet {
        eprintln!("[test] 0/{}", cases.len());
    }
    let today = engine::rfc3339(SystemTime::now())[..10].to_owned();
    let progress = CaseProgress {
        quiet: args.quiet,
        cases: &cases,
        shards: &shards,
        ledger: &ledger,
        today: &today,
        total: cases.len(),
        done: Mutex::new(0),
    };
    let outcome = suite::run_admitted(&plan, &*queue, jobs, &*halt, &progress)
        .await
        .map_err(|e| Failure::infrastructure(e.into()))?;
    let reachability = match (
        &audit_base_tree,
        args.reachability && outcome.stopped.is_none(),
    ) {
        (Some(base_tree), true) => {
            let ids: Vec<String> = cases.iter().map(|c| c.id.clone()).collect();
            Some(
                reachability(
                    &repo,
                    base_tree,
                    &tree,
                    &run_id,
                    &ids,
                    args.timeout,
                    &*queue,
                    &*store,
                )
                .await?,
            )
        }
        _ => None,
    };
    drop(queue);

    let today = today.as_str();
    let mut case_reports: Vec<Option<CaseReport>> = vec![None; cases.len()];
    // What each case costs a batch, for balancing the next run (see `shard::batch_costs`).
    let mut costs: Vec<Option<f64>> = vec![None; cases.len()];
    let mut selections = Vec::new();
    let mut job_reports = Vec::new();
    for (spec, members) in plan.iter().zip(&shards) {
        let result: Option<&JobResult> = outcome.results[spec.index as usize].as_ref();
        let member_cases: Vec<&SuiteCase> = members.iter().map(|&i| &cases[i]).collect();
        if let Some(result) = result {
            selections.push(JobSelection::from_report(
                spec.index,
                &member_cases,
                result.report.parsed(),
            ));
            job_reports.push(SuiteJobReport {
                index: spec.index,
                job_id: spec.job_id.to_string(),
                cases: member_cases.iter().map(|c| c.reference()).collect(),
                status: result.status.label().into(),
                duration_s: result.duration_ms as f64 / 1000.0,
                artifacts: result.artifacts.clone(),
            });
        }
        // A pytest job's report says what each of its cases printed and how long it took; the
        // session's own output stays the job's.
        let shares = match result {
            Some(result) if runner == SuiteRunner::Kind(RunnerKind::Pytest) => {
                let prefix = format!("proofs/{run_id}/jobs/{:04}", spec.index);
                split::split_pytest_batch(&*store, &prefix, &member_cases, result)
                    .await
                    .unwrap_or_else(|e| {
                        eprintln!(
                            "warning: job {} keeps one output for its cases: {:#}",
                            spec.index,
                            anyhow::Error::from(e)
                        );
                        vec![None; members.len()]
                    })
            }
            _ => vec![None; members.len()],
        };
        if let Some(result) = result {
            let own: Vec<Option<f64>> = shares
                .iter()
                .map(|s| s.as_ref().and_then(|s| s.seconds))
                .collect();
            let job_s = result.duration_ms as f64 / 1000.0;
            let startup_s = collection.listing_s.unwrap_or(0.0);
            for (&i, cost) in members
                .iter()
                .zip(shard::batch_costs(job_s, startup_s, &own))
            {
                costs[i] = cost;
            }
        }
        for (&i, share) in members.iter().zip(shares) {
            let case = &cases[i];
            case_reports[i] = Some(match result {
                None => CaseReport {
                    reference: case.reference(),
                    display: case.display(),
                    outcome: CaseOutcome::NotRun,
                    lane: Lane::Infrastructure,
                    quarantined: false,
                    message: outcome
                        .stopped
                        .as_ref()
                        .map(|s| format!("never admitted: {s}")),
                    duration_s: None,
                    job: None,
                    artifacts: Vec::new(),
                },
                Some(result) => {
                    let derived = derive_outcome(case, result);
                    let bad = matches!(derived.outcome, CaseOutcome::Failed | CaseOutcome::Error);
                    CaseReport {
                        reference: case.reference(),
                        display: case.display(),
                        outcome: derived.outcome,
                        lane: derived.lane,
                        quarantined: bad
                            && derived.lane == Lane::Guest
                            && ledger.excuses(&case.id, today),
                        message: derived.message,
                        duration_s: Some(
                            share.as_ref().and_then(|s| s.seconds).unwrap_or(
                                result.duration_ms as f64 / 1000.0 / members.len() as f64,
                            ),
                        ),
                        job: Some(spec.index),
                        artifacts: match share {
                            Some(share) => share.artifacts,
                            None => case.own_artifacts(&result.artifacts),
                        },
                    }
                }
            });
        }
    }
    let case_reports: Vec<CaseReport> = case_reports.into_iter().flatten().collect();
    let mut totals = SuiteTotals {
        total: case_reports.len() as u64,
        ..SuiteTotals::default()
    };
    for case in &case_reports {
        if case.quarantined {
            totals.quarantined += 1;
            continue;
        }
        match case.outcome {
            CaseOutcome::Passed => totals.passed += 1,
            CaseOutcome::Failed => totals.failed += 1,
            CaseOutcome::Skipped => totals.skipped += 1,
            CaseOutcome::Error => totals.error += 1,
            CaseOutcome::NotRun => totals.not_run += 1,
        }
    }
    let collected_ids: Vec<String> = collected.iter().map(|c| c.id.clone()).collect();
    let selection_audit = audit::audit(&collected_ids, &selections);
    for outlier in &selection_audit.executed_not_selected {
        eprintln!(
            "[audit] job {} executed {} which it did not select",
            outlier.job, outlier.id
        );
    }
    let aborted = outcome.stopped.is_some();
    let guest_failures = totals.failed
        + case_reports
            .iter()
            .filter(|c| c.outcome == CaseOutcome::Error && c.lane == Lane::Guest && !c.quarantined)
            .count() as u64;
    // A run that is one job has one output: its summary line and coverage are the suite's.
    // Per-case percentages cannot be combined into suite coverage, so they are not recorded.
    let single = match outcome.results.as_slice() {
        [Some(result)] => Some((result, job_output(&*store, result).await)),
        _ => None,
    };
    let coverage_pct = single.as_ref().and_then(|(_, text)| coverage_of(text));
    let mut counted = RunCounts {
        total: totals.total,
        passed: totals.passed,
        failed: guest_failures,
        skipped: totals.skipped,
    };
    let (status, status_detail) = if aborted {
        (
            SuiteStatus::Error,
            outcome.stopped.as_ref().map(ToString::to_string),
        )
    } else if let (SuiteRunner::Command, Some((result, text))) = (runner, &single) {
        if let Some(found) = summary::parse_counts(text) {
            counted = RunCounts {
                total: found.total,
                passed: found.passed,
                failed: found.failed,
                skipped: found.skipped,
            };
        }
        let exit_code = match result.status {
            JobStatus::Completed { exit_code } => Some(exit_code),
            _ => None,
        };
        summary::status_of(exit_code, args.timeout)
    } else if guest_failures > 0 || !selection_audit.contained {
        (SuiteStatus::Failing, None)
    } else {
        (SuiteStatus::Passing, None)
    };
    for (case, cost) in case_reports.iter().zip(&costs) {
        if let Some(d) = cost.or(case.duration_s)
            && case.lane == Lane::Guest
        {
            history.durations.insert(case.reference.clone(), d);
        }
    }
    let record = history
        .record(
            RunSummary {
                timestamp: engine::rfc3339(started),
                run_id: run_id.to_string(),
                total: counted.total,
                passed: counted.passed,
                failed: counted.failed,
                skipped: counted.skipped,
                coverage_pct,
                duration_s: Some(clock.elapsed().as_secs_f64()),
                status,
                status_detail,
                failed_cases: case_reports
                    .iter()
                    .filter(|c| matches!(c.outcome, CaseOutcome::Failed | CaseOutcome::Error))
                    .filter(|c| c.lane == Lane::Guest && !c.quarantined)
                    .map(|c| c.display.clone())
                    .collect(),
            },
            args.coverage_threshold,
        )
        .clone();
    save_history(&history_path, &history);
    print_alerts(&record);
    let status_text = if aborted {
        "infrastructure_aborted"
    } else if status == SuiteStatus::Passing {
        "passed"
    } else {
        "failed"
    };
    let report = SuiteReport {
        schema: SUITE_SCHEMA.into(),
        run_id: run_id.to_string(),
        status: status_text.into(),
        repository,
        branch,
        revision: commit,
        runner: runner.to_string(),
        started_at: engine::rfc3339(started),
        duration_s: clock.elapsed().as_secs_f64(),
        totals: totals.clone(),
        cases: case_reports,
        jobs: job_reports,
        audit: serde_json::json!({
            "selection": selection_audit,
            "quarantine_ledger": ledger_gate,
            "reachability": reachability,
        }),
        history: serde_json::json!({
            "file": history_path.display().to_string(),
            "new_failures": record.new_failures,
            "newly_failing": record.newly_failing,
            "coverage_drop": record.coverage_drop,
            "alerts": record.alerts,
            // The trend the HTML report draws: the last runs, oldest first, this one last.
            "recent": &history.runs[history.runs.len().saturating_sub(RECENT_RUNS)..],
        }),
        stopped: outcome.stopped.as_ref().map(ToString::to_string),
    };
    if let Some(path) = &args.json {
        let json = serde_json::to_vec_pretty(&report)
            .context("failed to encode the suite report")
            .internal()?;
        write_atomically(path, &json).infrastructure()?;
    }
    if let Some(path) = &args.junit {
        write_atomically(path, reporter::suite_junit(&report).as_bytes()).infrastructure()?;
    }
    crate::report::emit_suite(&args.output, &report, &*store).await?;
    if !args.quiet {
        eprintln!(
            "{}",
            closing_line(
                &totals,
                aborted,
                status == SuiteStatus::Passing,
                guest_failures
            )
        );
    }
    println!(
        "{}",
        history::trend_line(
            &record,
            history
                .runs
                .iter()
                .rev()
                .skip(1)
                .find(|r| r.status != SuiteStatus::Error)
        )
    );
    Ok(if aborted {
        INFRASTRUCTURE
    } else if status == SuiteStatus::Passing {
        0
    } else {
        1
    })
}

/// The last progress line: how the run ended, in cases; quarantined failures are named as
/// such, never counted as passed.
fn closing_line(totals: &SuiteTotals, aborted: bool, passing: bool, failed: u64) -> String {
    let n = totals.total;
    let quarantined = match totals.quarantined {
        0 => String::new(),
        q => format!(", {q} quarantined"),
    };
    if aborted {
        format!("[test] {}/{n} infrastructure-aborted", n - totals.not_run)
    } else if passing && totals.quarantined == 0 {
        format!("[test] {n}/{n} passed")
    } else if passing {
        format!("[test] {}/{n} passed{quarantined}", totals.passed)
    } else {
        format!("[test] {n}/{n} completed, {failed} failed{quarantined}")
    }
}

/// The change's changed product lines (base..tested) against a per-test coverage run of the
/// selected cases; prints each file that has lines nothing executed reaches.
#[expect(clippy::too_many_arguments, reason = "the run's parts, passed once")]
async fn reachability(
    repo: &Path,
    base_tree: &TreeId,
    tree: &TreeId,
    run_id: &ProofId,
    ids: &[String],
    timeout: u64,
    queue: &dyn JobQueue,
    store: &dyn ArtifactStore,
) -> Result<Vec<reach::FileReach>, Failure> {
    let changed: BTreeMap<String, BTreeSet<u32>> =
        assay_coordinator::mutation::changed_lines(repo, base_tree, tree)
            .map_err(|e| Failure::infrastructure(e.into()))?
            .into_iter()
            .filter(|(file, _)| file.ends_with(".py") && !RunnerKind::Pytest.is_test_file(file))
            .collect();
    if changed.is_empty() || ids.is_empty() {
        return Ok(Vec::new());
    }
    let job = reach::plan_job(run_id, tree, ids, timeout);
    let result = run_one(queue, &job)
        .await
        .map_err(|e| Failure::infrastructure(e.into()))?;
    let bytes = read_named(store, &result, "report")
        .await
        .map_err(|e| Failure::infrastructure(e.into()))?
        .ok_or_else(|| {
        Failure::infrastructure(anyhow!(
            "the per-test coverage run ({}) wrote no coverage report (hint: --reachability needs coverage.py installed where the tests run)",
            result.status.label()
        ))
    })?;
    let files = reach::reach(&changed, &bytes).map_err(|e| Failure::infrastructure(e.into()))?;
    for file in &files {
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
    Ok(files)
}

/// Counts a run contributes to history.
struct RunCounts {
    total: u64,
    passed: u64,
    failed: u64,
    skipped: u64,
}

/// A run's coverage figure from its output, to one decimal as history keeps it.
pub(crate) fn coverage_of(output: &str) -> Option<f64> {
    summary::parse_coverage(output).map(|c| (c * 10.0).round() / 10.0)
}

/// A branch's suite history and its file; a corrupt or unreadable one is reported and started
/// over.
pub(crate) fn open_history(state: &Path, repository: &str, branch: &str) -> (PathBuf, History) {
    let path = history::history_path(state, repository, branch);
    let (history, problem) = history::load(&path, repository, branch);
    if let Some(problem) = problem {
        eprintln!(
            "warning: suite history {} is {problem}; starting it over",
            path.display()
        );
    }
    (path, history)
}

/// Saves history; failing to is a warning, since the run's own result stands.
pub(crate) fn save_history(path: &Path, history: &History) {
    if let Err(e) = history::save(path, history) {
        eprintln!("warning: {:#}", anyhow::Error::from(e));
    }
}

pub(crate) fn print_alerts(record: &RunRecord) {
    for alert in &record.alerts {
        eprintln!(
            "[ALERT] [{}] {}: {}",
            alert.severity, alert.kind, alert.detail
        );
    }
}

/// A finished job's stdout then stderr, as stored; an unreadable artifact reads as empty.
pub(crate) async fn job_output(store: &dyn ArtifactStore, result: &JobResult) -> String {
    let mut text = String::new();
    for name in ["stdout", "stderr"] {
        match read_named(store, result, name).await {
            Ok(Some(bytes)) => text.push_str(&String::from_utf8_lossy(&bytes)),
            Ok(None) => {}
            Err(e) => eprintln!("warning: {:#}", anyhow::Error::from(e)),
        }
    }
    text
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
        println!("{json}");
        return Ok(0);
    }
    if history.runs.is_empty() {
        println!("no suite runs recorded for {repository} on {branch}");
        return Ok(0);
    }
    println!(
        "{repository} on {branch}: {} runs recorded, last {} kept",
        history.run_count,
        history.runs.len()
    );
    for (i, run) in history.runs.iter().enumerate() {
        let previous = match run.status {
            SuiteStatus::Error => None,
            _ => history.runs[..i]
                .iter()
                .rev()
                .find(|r| r.status != SuiteStatus::Error),
        };
        println!("{} {}", run.timestamp, history::trend_line(run, previous));
    }
    Ok(0)
}

pub async fn run_halt(args: &HaltArgs) -> Result<u8, Failure> {
    if args.reason.trim().is_empty() {
        return Err(Failure::usage(HaltError::NoReason.into()));
    }
    match &args.cluster {
        Some(url) => {
            let fleet = fleet_link::Fleet::connect(url, &args.subject_prefix, &args.nats).await?;
            cluster::set_halt(&fleet.proofs, &args.reason)
                .await
                .map_err(|e| Failure::infrastructure(e.into()))?;
        }
        None => HaltFile::in_state_dir(&state_dir(&args.state_dir))
            .set(&args.reason)
            .map_err(|e| Failure::usage(e.into()))?,
    }
    println!("[HALT] admission stopped. Reason: {}", args.reason.trim());
    Ok(0)
}

pub async fn run_resume(args: &ResumeArgs) -> Result<u8, Failure> {
    let cleared = match &args.cluster {
        Some(url) => {
            let fleet = fleet_link::Fleet::connect(url, &args.subject_prefix, &args.nats).await?;
            cluster::clear_halt(&fleet.proofs)
                .await
                .map_err(|e| Failure::infrastructure(e.into()))?
        }
        None => HaltFile::in_state_dir(&state_dir(&args.state_dir))
            .clear()
            .map_err(|e| Failure::infrastructure(e.into()))?,
    };
    println!(
        "{}",
        if cleared {
            "admission resumed"
        } else {
            "no halt was set"
        }
    );
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
            closing_line(&totals, false, true, 0),
            "[test] 1/2 passed, 1 quarantined"
        );
        let clean = SuiteTotals {
            total: 2,
            passed: 2,
            ..SuiteTotals::default()
        };
        assert_eq!(closing_line(&clean, false, true, 0), "[test] 2/2 passed");
        let failing = SuiteTotals {
            failed: 1,
            ..totals.clone()
        };
        assert_eq!(
            closing_line(&failing, false, false, 1),
            "[test] 2/2 completed, 1 failed, 1 quarantined"
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
