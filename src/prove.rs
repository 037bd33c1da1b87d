//! `assay prove` glue: merges flags over the configuration file, runs the proof in embedded
//! mode, prints the summary and writes the evidence.

use crate::atomic_file::write_atomically;
use crate::config::{self, ProveFile};
use crate::console::{self, StderrProgress};
use crate::embedded;
use crate::exit::{Failure, ResultExt as _};
use crate::proof_history;
use crate::sandbox::{self, SandboxArgs, SandboxChoice};
use anyhow::{Context, anyhow};
use assay_common::criteria::parse_criteria;
use assay_common::evidence::Evidence;
use assay_common::job::JobResult;
use assay_common::runner::{ReportFormat, RunnerKind};
use assay_engine::mutation::mutants::DEFAULT_MUTATION_BUDGET;
use assay_engine::progress::{ProgressSink as _, ProofEvent};
use assay_engine::proof::{self, ProofRequest};
use assay_engine::result_cache::{CacheMode, CachingQueue, ResultCache, RunContext};
use assay_engine::source::CandidateSpec;
use assay_transport::store::ArtifactStore;
use assay_worker::in_process::InProcessQueue;
use assay_worker::sandbox::Sandbox;
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

#[derive(Args, Debug, Clone, Default)]
pub struct ProveArgs {
    /// Repository to prove a change in.
    #[arg(short = 'C', long = "repo", value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
    /// Base revision: the code before the change.
    #[arg(long, value_name = "REV")]
    pub base: Option<String>,
    /// Candidate revision: the code with the change [default: HEAD, which a work tree with
    /// uncommitted changes refuses: pass --worktree or commit them].
    #[arg(long, value_name = "REV", conflicts_with_all = ["patch", "worktree"])]
    pub candidate: Option<String>,
    /// A patch file applied to the base instead of a candidate revision; `-` reads it from
    /// standard input.
    #[arg(long, value_name = "FILE", conflicts_with = "worktree")]
    pub patch: Option<PathBuf>,
    /// Prove the work tree as it is: tracked files with their uncommitted edits and untracked
    /// files that are not ignored. Neither the index nor the files are touched.
    #[arg(long)]
    pub worktree: bool,
    #[command(flatten)]
    pub cache: crate::cache_command::CacheFlags,
    /// Honour the repository's own assay.toml settings that reach beyond its tests: host paths
    /// (patch, store, json, junit), pass-env, and a wider [sandbox] (image, network, process,
    /// higher limits). Without it such a file is refused, since a pull request controls it.
    #[arg(long)]
    pub trust_repo_config: bool,
    /// Accept the change's harness changes (conftest hooks, plugins, runner configuration,
    /// start-up files, result-class overrides, support code that patches the product) after
    /// reviewing them: their findings no longer leave criteria unverified. Recorded in the
    /// evidence. The repository's configuration can never set it.
    #[arg(
        long,
        env = "ASSAY_TRUST_HARNESS_CHANGE",
        action = clap::ArgAction::SetTrue,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub trust_harness_change: bool,
    /// A criterion: "test: NAME" (fails before, passes after) or "guard: NAME" (passes on
    /// both), optionally with an id: "C3: test: NAME". Repeatable.
    #[arg(long = "criterion", value_name = "CRITERION")]
    pub criteria: Vec<String>,
    /// Test runner: pytest, unittest, go, node, vitest, cargo, junit or manifest [default:
    /// detected: go with a go.mod, vitest or node with a package.json, cargo with a Cargo.toml
    /// at the root, pytest when the project uses it, else unittest].
    #[arg(long, value_name = "RUNNER")]
    pub runner: Option<String>,
    /// The runner's command prefix [default: "python3 -m pytest", or "python3" running
    /// Assay's unittest adapter].
    #[arg(long, value_name = "CMD")]
    pub test_command: Option<String>,
    /// Where the command writes its JUnit XML, for runners without a report of their own:
    /// junit:RELATIVE/PATH.xml (inside the tree; removed before each run, read fresh after).
    #[arg(long, value_name = "junit:PATH")]
    pub test_report: Option<String>,
    /// Extra glob of test files (fixtures, goldens) overlaid on the base tree. Repeatable.
    #[arg(long = "test-glob", value_name = "GLOB")]
    pub test_globs: Vec<String>,
    /// Jobs in flight at once [default: the CPU count].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: Option<u32>,
    /// Runs per side of each proving test, counting the first [default: 3].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=20))]
    pub repeats: Option<u32>,
    /// Per-job timeout in seconds [default: 600].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: Option<u64>,
    /// Grant the test-only exception: a change without product files may carry `test:`
    /// criteria, each judged on the candidate alone (it must pass, stably). Only you can grant
    /// it, never the repository's configuration; without it such a proof is refused before
    /// anything runs.
    #[arg(
        long,
        env = "ASSAY_ALLOW_TEST_ONLY",
        value_parser = clap::builder::FalseyValueParser::new()
    )]
    pub allow_test_only: bool,
    /// Skip the mutation check that follows a proven proof.
    #[arg(long)]
    pub no_mutation: bool,
    /// Skip diff coverage: the proving tests' one more run, under the runner's coverage tool
    /// (coverage.py, Go's cover profile, node's V8 coverage, cargo llvm-cov), that names the
    /// changed lines they never executed (report only).
    #[arg(long)]
    pub no_diff_coverage: bool,
    /// Seconds the mutation check may take in all, the unmutated run included [default: 900].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub mutation_budget: Option<u64>,
    /// Write the evidence report (JSON, schema assay.proof/v1) here; `-` for standard output
    /// (the summary then goes to standard error). Each criterion carries a stable
    /// `reason_code`; the exit status is 0 proven, 1 refuted, 2 usage, 3 infrastructure, 4
    /// unverified or unstable.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a JUnit XML summary (one case per criterion) here.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    #[command(flatten)]
    pub guest_env: crate::guest_env_flags::GuestEnvFlags,
    #[command(flatten)]
    pub target: crate::fleet_link::RunTarget,
    /// State directory for suite history, where an embedded proof records its suite jobs
    /// [default: the user cache dir's assay].
    #[arg(long, value_name = "DIR", env = "ASSAY_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    #[command(flatten)]
    pub console: crate::console_flags::ConsoleFlags,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    #[command(flatten)]
    pub output: crate::report::OutputArgs,
}

/// The merged settings a proof runs with.
struct Settings {
    request: ProofRequest,
    jobs: usize,
    json: Option<PathBuf>,
    junit: Option<PathBuf>,
    store: String,
    pass_env: Vec<String>,
    sandbox: SandboxChoice,
}

fn settings(args: &ProveArgs) -> Result<Settings, Failure> {
    if !args.repo.is_dir() {
        return Err(Failure::usage(anyhow!(
            "repository directory {} does not exist",
            args.repo.display()
        )));
    }
    let repo = args
        .repo
        .canonicalize()
        .with_context(|| format!("failed to resolve {}", args.repo.display()))
        .usage()?;
    let (file, source) = config::load(&repo).usage()?;
    let reaching = file.reaching_beyond_the_repository();
    if !reaching.is_empty() && !args.trust_repo_config {
        let origin = source.as_deref().map_or_else(
            || "the configuration file".to_owned(),
            |p| p.display().to_string(),
        );
        return Err(Failure::usage(anyhow!(
            "{origin} sets {}, which reach beyond the repository's tests (host paths, your environment, a wider sandbox); the repository under test may come from anyone (hint: pass --trust-repo-config if you trust this file, or give these settings as flags)",
            reaching.join(", ")
        )));
    }
    let ProveFile {
        base,
        candidate,
        patch,
        criteria,
        runner,
        test_command,
        test_report,
        test_globs,
        jobs,
        repeats,
        timeout,
        mutation,
        mutation_budget,
        diff_coverage,
        json,
        junit,
        store,
        pass_env,
        sandbox: sandbox_table,
    } = file;
    if args.target.cluster.is_some() && args.sandbox.sandbox.is_some() {
        return Err(Failure::usage(anyhow!(
            "--sandbox applies to embedded mode; a fleet's workers run jobs in the sandbox they are configured with"
        )));
    }
    let sandbox = sandbox::resolve(&args.sandbox, sandbox_table, source.as_deref()).usage()?;
    let base = args.base.clone().or(base).ok_or_else(|| {
        Failure::usage(anyhow!(
            "no base revision (hint: pass --base REV, or set base in assay.toml)"
        ))
    })?;
    // A flag beats the file; a file's patch is relative to the repository.
    let candidate = match (&args.candidate, &args.patch) {
        _ if args.worktree => CandidateSpec::WorkTree,
        (Some(rev), _) => CandidateSpec::Revision(rev.clone()),
        (None, Some(patch)) if patch.as_os_str() == "-" => {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut bytes)
                .context("failed to read the patch from standard input")
                .usage()?;
            CandidateSpec::PatchText(bytes)
        }
        (None, Some(patch)) => CandidateSpec::Patch(patch.clone()),
        (None, None) => match (candidate, patch) {
            (Some(rev), _) => CandidateSpec::Revision(rev),
            (None, Some(patch)) => CandidateSpec::Patch(repo.join(patch)),
            (None, None) => {
                refuse_uncommitted(&repo)?;
                CandidateSpec::Revision("HEAD".into())
            }
        },
    };
    let criteria_text = if args.criteria.is_empty() {
        criteria.unwrap_or_default()
    } else {
        args.criteria.clone()
    };
    let runner = args
        .runner
        .clone()
        .or(runner)
        .map(|r| r.parse::<RunnerKind>())
        .transpose()
        .map_err(|e| Failure::usage(anyhow!(e)))?;
    // Criteria are named as the runner names tests; one not given is the one the engine will
    // detect on the candidate (on the base for a patch, which rarely changes the runner).
    let criteria_runner = match (runner, &candidate) {
        (Some(runner), _) => Some(runner),
        (None, CandidateSpec::Revision(rev)) => proof::detect_runner_at(&repo, rev).ok(),
        (None, CandidateSpec::Patch(_) | CandidateSpec::PatchText(_)) => {
            proof::detect_runner_at(&repo, &base).ok()
        }
        (None, CandidateSpec::WorkTree) => proof::detect_runner_at(&repo, "HEAD").ok(),
    };
    let criteria = match criteria_runner {
        Some(runner) => runner.parse_criteria(&criteria_text),
        None => parse_criteria(&criteria_text),
    }
    .map_err(|e| Failure::usage(e.into()))?;
    if let Some(runner) = criteria_runner {
        for hint in runner.unquoted_sentence_hints(&criteria_text, &criteria) {
            errln!("warning: {hint}");
        }
    }
    let test_command = args
        .test_command
        .clone()
        .or(test_command)
        .map(|c| config::split_command(&c))
        .transpose()
        .usage()?;
    let test_report = args
        .test_report
        .clone()
        .or(test_report)
        .map(|spec| ReportFormat::parse_test_report(&spec))
        .transpose()
        .map_err(|e| Failure::usage(e.into()))?;
    let mut globs = test_globs.unwrap_or_default();
    globs.extend(args.test_globs.iter().cloned());
    let mut pass = pass_env.unwrap_or_default();
    // The repository's `pass-env` (trusted by flag) meets the same rule as the flag's.
    assay_common::guest_env::check_all(pass.iter().map(String::as_str))
        .map_err(|e| Failure::usage(anyhow!("assay.toml: {e}")))?;
    pass.extend(args.guest_env.pass_env.iter().cloned());
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let jobs = args.jobs.map(|j| j as usize).or(jobs).unwrap_or(cpus);
    if jobs == 0 {
        return Err(Failure::usage(anyhow!("jobs must be at least 1")));
    }
    Ok(Settings {
        request: ProofRequest {
            proof_id: proof::new_proof_id(),
            repo,
            base,
            candidate,
            criteria,
            runner,
            test_command,
            local_tools: args.target.cluster.is_none(),
            test_report,
            test_globs: globs,
            repeats: args.repeats.or(repeats).unwrap_or(3).max(1),
            timeout_secs: args.timeout.or(timeout).unwrap_or(600),
            allow_test_only: args.allow_test_only,
            mutation_budget: (!args.no_mutation && mutation.unwrap_or(true)).then(|| {
                args.mutation_budget
                    .or(mutation_budget)
                    .map_or(DEFAULT_MUTATION_BUDGET, std::time::Duration::from_secs)
            }),
            diff_coverage: !args.no_diff_coverage && diff_coverage.unwrap_or(true),
            trust_harness_change: args.trust_harness_change,
        },
        jobs,
        json: args.json.clone().or(json),
        junit: args.junit.clone().or(junit),
        store: args
            .target
            .store
            .clone()
            .or(store)
            .unwrap_or_else(config::default_store_url),
        pass_env: pass,
        sandbox,
    })
}

/// The candidate defaults to HEAD; a work tree with changes HEAD lacks would be proven without
/// them, silently, so it is refused with both ways out.
fn refuse_uncommitted(repo: &Path) -> Result<(), Failure> {
    match uncommitted(repo)? {
        None => Ok(()),
        Some(named) => Err(Failure::usage(anyhow!(
            "the work tree has changes HEAD does not ({named}), and the candidate defaults to HEAD (hint: pass --worktree to prove the work tree as it is, or commit the changes first)"
        ))),
    }
}

/// The work tree's changes HEAD lacks, the first three named as `git status --short` does
/// (`M pager.py, ?? tests/test_new.py and 2 more`); `None` when there is none.
pub fn uncommitted(repo: &Path) -> Result<Option<String>, Failure> {
    let changes =
        assay_engine::source::uncommitted_changes(repo).map_err(|e| Failure::usage(e.into()))?;
    if changes.is_empty() {
        return Ok(None);
    }
    const SHOWN: usize = 3;
    let mut named = changes
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if changes.len() > SHOWN {
        named.push_str(&format!(" and {} more", changes.len() - SHOWN));
    }
    Ok(Some(named))
}

/// Runs `assay prove` in embedded mode and returns the exit code.
pub async fn run(args: &ProveArgs) -> Result<u8, Failure> {
    let settings = settings(args)?;
    let started = SystemTime::now();
    let clock = Instant::now();
    // Embedded, the store may come from assay.toml too; a fleet's must be the fleet's own.
    let store_url = match &args.target.cluster {
        Some(_) => args.target.store_url(true)?,
        None => settings.store.clone(),
    };
    let store = embedded::open_store(&store_url)?;
    // Named now, so the state directory the history goes to is masked before any job runs.
    crate::suite_state::state_dir(&args.state_dir);
    let repo = settings.request.repo.clone();
    let prepared = tokio::task::spawn_blocking(move || proof::prepare(settings.request))
        .await
        .map_err(|e| Failure::internal(e.into()))?
        .map_err(|e| {
            if e.is_usage() {
                Failure::usage(e.into())
            } else {
                Failure::infrastructure(e.into())
            }
        })?;
    if args.target.cluster.is_none() {
        preflight(&prepared)?;
    }
    let evidence = match &args.target.cluster {
        Some(url) => {
            let (evidence, suite_results) =
                run_on_fleet(args, url, store.as_ref(), &prepared, settings.jobs).await?;
            proof_history::record(&args.state_dir, &prepared, &suite_results, &*store, started)
                .await?;
            evidence
        }
        None => {
            let sandbox = embedded::open_sandbox(&settings.sandbox, settings.jobs).await?;
            run_embedded(
                args,
                sandbox,
                &repo,
                store.clone(),
                &prepared,
                settings.jobs,
                &settings.pass_env,
                (started, clock),
            )
            .await?
        }
    };
    let json = serde_json::to_vec_pretty(&evidence)
        .context("failed to encode the evidence report")
        .internal()?;
    if args.target.cluster.is_none() {
        store
            .put_bytes(
                "evidence",
                &format!("proofs/{}/evidence.json", evidence.proof_id),
                json.clone().into(),
            )
            .await
            .map_err(|e| Failure::infrastructure(e.into()))?;
    }
    if let Some(path) = &settings.json {
        crate::atomic_file::write_report(path, &json).infrastructure()?;
    }
    if let Some(path) = &settings.junit {
        write_atomically(path, console::junit(&evidence).as_bytes()).infrastructure()?;
    }
    crate::console::human(format_args!("{}", console::summary(&evidence)));
    if let Some(coverage) = &evidence.diff_coverage {
        crate::console::human(format_args!("{}", console::diff_coverage_summary(coverage)));
    }
    if let Some(check) = &evidence.mutation_check {
        crate::console::human(format_args!("{}", console::mutation_summary(check)));
    }
    crate::report::emit_proof(&args.output, &evidence, store.as_ref()).await?;
    Ok(crate::exit::of_proof(&evidence))
}

/// Stops before anything runs when the command's program is not installed where the jobs
/// would look for it: every job would fail, or wait on a registry until its timeout.
fn preflight(prepared: &proof::PreparedProof) -> Result<(), Failure> {
    let missing = proof::missing_tool(prepared).map_err(|e| Failure::infrastructure(e.into()))?;
    missing.map_or(Ok(()), |missing| {
        Err(tool_missing(prepared.runner, &missing))
    })
}

/// The one line for a runner's tool that is not installed (exit 3), for `prove`, `test` and
/// `mutate` alike.
pub fn tool_missing(runner: impl std::fmt::Display, missing: &proof::MissingTool) -> Failure {
    Failure::infrastructure(anyhow!(
        "the {runner} runner's tool {} is not installed: not found in {} (hint: install it, or pass --test-command with a command that is); nothing ran",
        missing.tool,
        missing.looked_in
    ))
}

/// Uploads the proof's trees, submits it to the fleet and waits for its evidence; also returns
/// the suite jobs' results the progress carried, for the suite history.
async fn run_on_fleet(
    args: &ProveArgs,
    url: &str,
    store: &dyn ArtifactStore,
    prepared: &proof::PreparedProof,
    jobs: usize,
) -> Result<(Evidence, Vec<JobResult>), Failure> {
    let role = assay_common::nats_permissions::Role::Submitter;
    let (client, mut refusals) = crate::fleet_link::nats_client(
        url,
        &args.target.fleet.subject_prefix,
        &args.target.fleet.nats,
        role,
    )
    .await?;
    assay_coordinator::client::upload_trees(store, prepared)
        .await
        .map_err(|e| Failure::infrastructure(e.into()))?;
    let mut submission = assay_coordinator::client::submission(prepared, jobs as u32);
    submission.cache = args.cache.mode();
    submission.dependencies = assay_coordinator::client::upload_dependencies(store, prepared)
        .await
        .map_err(|e| Failure::infrastructure(e.into()))?;
    let mut progress = crate::fleet::FleetStderr {
        progress: StderrProgress::new(args.console.progress, args.console.quiet, jobs),
        jobs: &prepared.jobs,
        check_jobs: assay_engine::mutation::check::CheckJobs::of(prepared),
        suite_results: Vec::new(),
    };
    progress.progress.event(ProofEvent::Planned {
        jobs: &prepared.jobs,
    });
    let proof_id = submission.proof_id.to_string();
    if !args.console.quiet {
        errln!(
            "[prove] submitted to the fleet as {proof_id} (`assay status {proof_id}` follows it, `assay cancel {proof_id}` stops it)"
        );
    }
    let _ = crate::fleet::SUBMITTED_PROOF.set(proof_id);
    // Raced against the server's refusals for the whole wait: every request, subscription and
    // bucket read of the proof is the submitter's, so a refused one means credentials that
    // can never see the verdict.
    let subjects = assay_common::fleet::Subjects::new(&args.target.fleet.subject_prefix);
    let proving = assay_coordinator::client::submit_and_wait(
        &client,
        &subjects,
        store,
        &submission,
        &mut progress,
    );
    let evidence = refusals
        .or_refused(
            &format!("submit proof {}", submission.proof_id),
            role,
            proving,
        )
        .await
        .map_err(|e| Failure::infrastructure(e.into()))?;
    progress.progress.terminal.finish();
    // The coordinator marked what its cache answered; said as embedded mode says it.
    let served = evidence.jobs.iter().filter(|j| j.cached.is_some()).count();
    if !args.console.quiet && submission.cache != CacheMode::Off && served > 0 {
        errln!(
            "[cache] {served} of {} jobs answered from the fleet's cache",
            prepared.jobs.len()
        );
    }
    Ok((evidence, progress.suite_results))
}

#[expect(
    clippy::too_many_arguments,
    reason = "the embedded run's inputs, each used once"
)]
async fn run_embedded(
    args: &ProveArgs,
    sandbox: Arc<dyn Sandbox>,
    repo: &Path,
    store: Arc<dyn ArtifactStore>,
    prepared: &proof::PreparedProof,
    jobs: usize,
    pass_env: &[String],
    (started, clock): (SystemTime, Instant),
) -> Result<Evidence, Failure> {
    let recorded = sandbox.evidence();
    if !args.console.quiet
        && let Some(container) = &recorded.container
    {
        errln!(
            "[prove] jobs run in containers of {} ({})",
            container.image,
            container.image_id
        );
    }
    let (ctx, _scratch) =
        embedded::job_context_in(sandbox, repo, store.clone(), pass_env, "assay-", jobs)?;
    let queue = InProcessQueue::start(ctx, jobs);
    let progress = StderrProgress::new(args.console.progress, args.console.quiet, jobs);
    let cache = embedded::result_cache(
        store.clone(),
        args.cache.mode(),
        &recorded,
        args.console.quiet,
    )
    .unwrap_or_else(|why| {
        if !args.console.quiet {
            errln!(
                "[cache] not used: {}",
                assay_transport::error_chain::error_chain(&why)
            );
        }
        ResultCache::off(store.clone())
    });
    let mode = cache.mode;
    let context = RunContext::new(recorded, &assay_worker::sandbox::clean_env(pass_env))
        .with_rust_toolchains(&prepared.rust_toolchains);
    let caching = CachingQueue::new(&queue, cache, context);
    let mut run = proof::run_proof(prepared, &caching, &*store, jobs, &progress, started, clock)
        .await
        .map_err(|e| Failure::infrastructure(e.into()))?;
    progress.terminal.finish();
    let settled = caching
        .settle(&mut run.evidence, &run.results, &run.finished_at_ms)
        .await;
    if !args.console.quiet {
        if let Some(line) = console::refusals_line(&caching.rejected(), "jobs") {
            errln!("{line}");
        }
        match &settled.stored {
            Ok(written) if mode != CacheMode::Off => errln!(
                "[cache] {} of {} jobs answered from the cache, {written} results stored",
                settled.served,
                prepared.jobs.len()
            ),
            Ok(_) => {}
            Err(e) => errln!(
                "[cache] results not stored: {}",
                assay_transport::error_chain::error_chain(e)
            ),
        }
    }
    drop(caching);
    drop(queue);
    proof_history::record(&args.state_dir, prepared, &run.results, &*store, started).await?;
    Ok(run.evidence)
}
