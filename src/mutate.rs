//! `assay mutate` glue: mutates whole files or trees of HEAD, in this process or (`--cluster`)
//! on a fleet's workers, prints the summary and writes Stryker's mutation-testing-report JSON.

use crate::atomic_file::write_atomically;
use crate::config;
use crate::console::{self, StderrProgress};
use crate::embedded;
use crate::exit::{Failure, ResultExt as _};
use crate::fleet_link;
use anyhow::{Context, anyhow};
use assay_common::ProofId;
use assay_common::runner::{RunnerKind, SourceLanguage};
use assay_engine::mutation::campaign::mutant_cache::MutantCache;
use assay_engine::mutation::campaign::{self, MutateError, MutateRequest};
use assay_engine::mutation::mutants::OperatorSet;
use assay_engine::proof;
use assay_engine::result_cache::RunContext;
use assay_worker::sandbox::Sandbox as _;
use assay_worker::sandbox::process::ProcessSandbox;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct MutateArgs {
    /// Repository whose HEAD commit is mutated (its work tree with --worktree).
    #[arg(short = 'C', long = "repo", value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
    /// Mutate the work tree as it is, not HEAD: tracked files with their uncommitted edits and
    /// untracked files that are not ignored. Neither the index nor the files are touched.
    #[arg(long)]
    pub worktree: bool,
    /// Files or directories to mutate, relative to the repository's root (`./` is allowed),
    /// or a file's lines as PATH:START-END (PATH:LINE for one) [default: every product
    /// Python, Rust, Go, JavaScript or TypeScript file].
    #[arg(value_name = "PATH[:START-END]")]
    pub paths: Vec<String>,
    /// Mutate only the lines HEAD (the work tree with --worktree) adds or changes since REV (a
    /// branch, tag or commit), for CI: `--since origin/main`. Nothing changed: exit 0.
    #[arg(long, value_name = "REV")]
    pub since: Option<String>,
    /// Survivors fail the run (exit 5) only when the mutation score is below SCORE percent
    /// (0-100) [default: any survivor fails it].
    #[arg(long, value_name = "SCORE", value_parser = fail_under_score)]
    pub fail_under: Option<f64>,
    /// Mutants per file: a number, or "all".
    #[arg(long, value_name = "N|all", default_value = "all")]
    pub max_per_file: String,
    /// Mutation operators: "default" (the proof check's five: negate a condition, swap a
    /// bound, drop a branch, return a constant, shift a bound) or "extended" (also arithmetic,
    /// equality, boolean, unary, number, string, argument, break/continue, augmented
    /// assignment and collection mutants). Python and Rust only: Go and JavaScript always use
    /// their own full sets (gremlins' and Stryker's operators).
    #[arg(long, value_name = "SET", default_value = "default")]
    pub operators: String,
    /// Seconds for the whole run; mutants not reached are reported as pending.
    #[arg(long, value_name = "SECS", default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..))]
    pub budget: u64,
    /// Mutants in flight at once [default: the CPU count].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: Option<u32>,
    /// Test runner: pytest (per-test coverage selects tests per line), unittest, cargo (the
    /// crate is built once with every mutant behind a runtime switch, then each mutant runs the
    /// whole suite from the built test binaries; a mutant the switch cannot hold gets a build of
    /// its own), go (each package's tests built once with every mutant behind a switch, each
    /// mutant a run of the tests that reach it; plain `go test` only) or node (node:test: every mutant
    /// behind a runtime switch in one tree, each run with the test files that reach it) [default: cargo, go or node when the detected runner of HEAD is (a root
    /// Cargo.toml, go.mod, or package.json without Vitest), else pytest].
    #[arg(long, value_name = "RUNNER")]
    pub runner: Option<String>,
    /// The runner's command prefix [default: "python3 -m pytest", "python3" for unittest,
    /// "cargo nextest run" for cargo where cargo-nextest is installed, else "cargo test";
    /// "go test" for go, "node" for node].
    #[arg(long, value_name = "CMD")]
    pub test_command: Option<String>,
    /// Write the mutation-testing-report-schema JSON (Stryker's viewer reads it) here; `-` for
    /// standard output (the summary then goes to standard error).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write every mutant's unified diff here (`# mutant ID STATUS: LABEL` before each).
    #[arg(long, value_name = "FILE")]
    pub diff: Option<PathBuf>,
    #[command(flatten)]
    pub cache: crate::cache_command::CacheFlags,
    /// Where the mutants run (a fleet run does not use the cache).
    #[command(flatten)]
    pub target: crate::fleet_link::RunTarget,
    #[command(flatten)]
    pub guest_env: crate::guest_env_flags::GuestEnvFlags,
    #[command(flatten)]
    pub console: crate::console_flags::ConsoleFlags,
    #[command(flatten)]
    pub output: crate::report::OutputArgs,
}

/// `--fail-under`'s percentage.
fn fail_under_score(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|s| (0.0..=100.0).contains(s))
        .ok_or_else(|| format!("{text:?} is not a percentage from 0 to 100 (e.g. 80 or 92.5)"))
}

/// Runs `assay mutate` and returns the exit code: 0 all killed, 5 survivors (or uncovered
/// mutants; with `--fail-under`, only a score below it), 4 when the budget or errors left
/// some without a verdict.
pub async fn run(args: &MutateArgs) -> Result<u8, Failure> {
    let repo = args
        .repo
        .canonicalize()
        .with_context(|| {
            format!(
                "repository directory {} does not exist",
                args.repo.display()
            )
        })
        .usage()?;
    let tree = if args.worktree {
        assay_engine::source::worktree_tree(&repo).map_err(|e| Failure::usage(e.into()))?
    } else {
        let head = campaign::head_tree(&repo).map_err(|e| match e {
            // A repository with nothing committed yet: its work tree is what there is.
            MutateError::Source(assay_engine::source::SourceError::UnknownRevision { .. }) => {
                Failure::usage(anyhow!(e).context(
                    "nothing is committed yet (hint: pass --worktree to mutate the work tree as it is)",
                ))
            }
            e => Failure::usage(e.into()),
        })?;
        if let Some(changes) = crate::prove::uncommitted(&repo)? {
            errln!(
                "warning: the work tree has changes HEAD does not ({changes}); HEAD is mutated without them (hint: pass --worktree to mutate the work tree as it is)"
            );
        }
        head
    };
    let runner = match &args.runner {
        Some(name) => name
            .parse::<RunnerKind>()
            .map_err(|e| Failure::usage(anyhow!(e)))?,
        // Python was `assay mutate`'s only language: only a project of another language
        // whose runner judges mutants changes the default.
        None => match proof::detect_runner_in(&repo, &tree) {
            Ok(detected)
                if detected.runner().judges_mutants()
                    && detected.runner().language() != Some(SourceLanguage::Python) =>
            {
                detected
            }
            _ => assay_common::runner::MUTATION_DEFAULT,
        },
    };
    let max_per_file = match args.max_per_file.as_str() {
        "all" => None,
        n => Some(n.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
            Failure::usage(anyhow!(
                "--max-per-file takes a positive number or \"all\", not {n:?}"
            ))
        })?),
    };
    let operators = args
        .operators
        .parse::<OperatorSet>()
        .map_err(|e| Failure::usage(anyhow!(e)))?;
    let command_prefix = args
        .test_command
        .as_deref()
        .map(config::split_command)
        .transpose()
        .usage()?
        .unwrap_or_else(|| runner.default_command_where(&proof::on_path));
    // Jobs run here: a program that is not installed would fail the baseline and every mutant.
    if args.target.cluster.is_none()
        && let Some(missing) = proof::missing_program(&repo, &tree, &command_prefix)
            .map_err(|e| Failure::infrastructure(e.into()))?
    {
        return Err(crate::prove::tool_missing(runner, &missing));
    }
    let slots = args
        .jobs
        .map(|j| j as usize)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let fleet = args.target.connect().await?;
    let store_url = args.target.store_url(fleet.is_some())?;
    let store = embedded::open_store(&store_url)?;
    // A cargo project's mutants build offline from what the host pinned and fetched.
    let tree = match runner.runner().pins_dependencies_on_host() {
        true => {
            let (at, of) = (repo.clone(), tree.clone());
            tokio::task::spawn_blocking(move || assay_engine::dependencies::pin_cargo(&at, &of))
                .await
                .map_err(|e| Failure::internal(e.into()))?
                .map_err(|e| Failure::infrastructure(e.into()))?
                .tree
        }
        false => tree,
    };
    let mut targets =
        campaign::Targets::parse(&args.paths).map_err(|e| Failure::usage(e.into()))?;
    if let Some(since) = &args.since {
        let base = assay_engine::source::tree_of(&repo, since)
            .map_err(|e| Failure::usage(anyhow!(e).context(format!("--since {since}"))))?;
        let changed = assay_engine::mutation::check::changed_lines(&repo, &base, &tree)
            .map_err(|e| Failure::usage(anyhow!(e).context(format!("--since {since}"))))?;
        targets.changed = Some(changed);
    }
    let (queue, _scratch) = fleet_link::job_queue(fleet_link::QueueChoice {
        fleet: fleet.as_ref(),
        store: store.clone(),
        repo: &repo,
        tree: &tree,
        subject_prefix: &args.target.fleet.subject_prefix,
        kind: "mutate",
        pass_env: &args.guest_env.pass_env,
        slots,
        scratch_prefix: "assay-mutate-",
    })
    .await?;
    // The fleet's workers decide their own sandbox and interpreters, which the CLI cannot
    // vouch for in a key: only embedded runs use the cache.
    let cache = (fleet.is_none() && !args.cache.no_cache)
        .then(|| {
            let mode = args.cache.mode();
            let sandbox = ProcessSandbox::default().evidence();
            let cache = embedded::result_cache(store.clone(), mode, &sandbox, args.console.quiet)
                .map_err(|why| {
                    if !args.console.quiet {
                        errln!(
                            "[cache] not used: {}",
                            assay_transport::error_chain::error_chain(&why)
                        );
                    }
                })
                .ok()?;
            Some(MutantCache {
                cache,
                context: RunContext::new(
                    sandbox,
                    &assay_worker::sandbox::clean_env(&args.guest_env.pass_env),
                ),
            })
        })
        .flatten();
    let request = MutateRequest {
        repo,
        tree,
        targets,
        runner,
        command_prefix,
        max_per_file,
        operators,
        budget: Duration::from_secs(args.budget),
        slots,
        run_id: ProofId(proof::new_proof_id().0.replacen("p-", "m-", 1)),
        cache,
    };
    // On a fleet, a cargo project's or Go module's dependencies travel as an archive (see
    // `prove`).
    let kind = runner
        .runner()
        .dependency_archive()
        .filter(|_| fleet.is_some());
    let archive = match kind {
        Some(kind) => assay_engine::vendored::store_archives(
            store.as_ref(),
            &request.repo,
            std::slice::from_ref(&request.tree),
            kind,
        )
        .await
        .map_err(|e| Failure::infrastructure(e.into()))?
        .pop()
        .map(|(_, archive)| archive),
        None => None,
    };
    let queue = assay_engine::vendored::WithDependencies::every_job(&*queue, archive);
    let progress = StderrProgress::new(args.console.progress, args.console.quiet, slots);
    let report = match campaign::run(&request, &queue, store.as_ref(), &progress).await {
        // `--since` in CI on a change that touches no product line: nothing to judge, and
        // nothing wrong with that.
        Err(e @ MutateError::NothingChanged { .. }) => {
            progress.terminal.finish();
            console::outln(format_args!("mutate: {e}"));
            return Ok(0);
        }
        other => other,
    }
    .map_err(|e| match e {
        MutateError::NothingToMutate { .. }
        | MutateError::NothingChanged { .. }
        | MutateError::UnsupportedRunner { .. } => Failure::usage(e.into()),
        MutateError::Source(_) => Failure::usage(e.into()),
        // Nothing could be measured: the run's lane is that of a run that could not go on.
        MutateError::Stopped(_)
        | MutateError::RedBaseline { .. }
        | MutateError::BaselineUnrun { .. } => Failure::infrastructure(e.into()),
    })?;
    progress.terminal.finish();
    drop(queue);
    if !args.console.quiet
        && let Some(outcome) = &report.cache
    {
        if let Some(line) = console::refusals_line(&outcome.refused, "mutants") {
            errln!("{line}");
        }
        match &outcome.not_used {
            Some(why) => errln!("[cache] not used: {why}"),
            None => {
                let from = console::stored_by(
                    report
                        .results
                        .iter()
                        .filter_map(|r| Some(r.cached.as_ref()?.run_id.0.as_str())),
                );
                errln!(
                    "[cache] {} of {} mutants answered from the cache{from}, {} results stored",
                    outcome.served,
                    outcome.eligible,
                    outcome.stored
                );
            }
        }
        if let Some(why) = &outcome.store_error {
            errln!("[cache] results not stored: {why}");
        }
    }
    let stryker = report.stryker_report();
    if let Some(path) = &args.json {
        let json = serde_json::to_vec_pretty(&stryker)
            .context("failed to encode the mutation report")
            .internal()?;
        crate::atomic_file::write_report(path, &json).infrastructure()?;
    }
    if let Some(path) = &args.diff {
        write_atomically(path, report.diffs().as_bytes()).infrastructure()?;
    }
    crate::console::human(format_args!("{}", console::mutate_summary(&report)));
    if let Some(threshold) = args.fail_under
        && let (Some(score), Some(below)) = (
            report.summary().mutation_score,
            report.score_below(threshold),
        )
    {
        // Two decimals: a score shown rounded up to the threshold must not read as meeting it.
        let decision = match below {
            true => "below it: the survivors fail the run (exit 5)",
            false => "not below it: survivors do not fail the run",
        };
        crate::console::humanln(format_args!(
            "  --fail-under {threshold}%: the score {:.2}% is {decision}",
            score * 100.0
        ));
    }
    crate::report::emit_mutation(&args.output, &stryker)?;
    Ok(report.exit_code_under(args.fail_under))
}
