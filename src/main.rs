//! The `assay` binary: parses flags, starts logging, calls the libraries, maps errors to the
//! documented exit codes. Nothing here decides a verdict.

/// `eprintln!` that never panics: a line on stderr, dropped quietly once stderr's reader went
/// away (`assay mutate 2>&1 | head -1`), as [`console::out`] does for stdout.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::console::err(format_args!("{}\n", format_args!($($arg)*)))
    };
}

mod annotations;
mod atomic_file;
mod cache_command;
mod config;
mod console;
mod console_flags;
mod embedded;
mod example;
mod exit;
mod flag_suggestions;
mod fleet;
mod fleet_link;
mod guest_env_flags;
mod halt_command;
mod history_command;
mod html;
mod mutate;
mod nats_flags;
mod progress;
mod proof_history;
mod prove;
mod report;
mod sandbox;
mod suite_state;
mod telemetry;
mod test_command;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};
use exit::Failure;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "assay",
    version,
    about = "Prove code changes with named tests, from one laptop to a fleet",
    long_about = "Prove code changes with named tests.\n\n\
        A proof runs the change's tests on the base tree (base revision plus the change's test \
        files) and on the candidate tree, repeats them for stability, and decides each \
        criterion: `test: NAME` must fail before and pass after; `guard: NAME` must pass on both.\n\n\
        Exit status: 0 proven (all passed), 1 refuted (test failures), 2 usage or \
        configuration error, 3 infrastructure failure, 4 unverified or unstable, 5 some mutant \
        survived (assay mutate), 70 internal error, 130 interrupted (Ctrl-C), 143 terminated \
        (SIGTERM)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Export trace spans over OTLP/HTTP to this collector (e.g. http://127.0.0.1:4318)
    /// [default: OTEL_EXPORTER_OTLP_ENDPOINT; no export when neither is set].
    #[arg(long, global = true, value_name = "URL")]
    otlp_endpoint: Option<String>,
}

#[derive(Subcommand, Debug)]
#[expect(clippy::large_enum_variant, reason = "parsed once per process")]
enum Command {
    /// Prove a change with named tests (embedded mode: no services needed).
    Prove(Box<prove::ProveArgs>),
    /// Build a small example repository with a bug fix and prove it.
    Example(example::ExampleArgs),
    /// Run a suite sharded into cases, with selection, history and the selection audit.
    Test(test_command::TestArgs),
    /// Show the suite history trend and alerts for a repository and branch.
    History(history_command::HistoryArgs),
    /// Stop admission of new jobs everywhere until `assay resume`.
    Halt(halt_command::HaltArgs),
    /// Lift a halt.
    Resume(halt_command::ResumeArgs),
    /// Run the fleet's coordinator service.
    Coordinator(fleet::ServiceArgs),
    /// Run a fleet worker service.
    Worker(fleet::WorkerArgs),
    /// Show fleet proofs and their progress.
    Status(fleet::StatusArgs),
    /// Fetch a finished fleet proof's evidence.
    Results(fleet::ResultsArgs),
    /// Cancel a running fleet proof.
    Cancel(fleet::CancelArgs),
    /// Print the NATS server permissions of a fleet's coordinator, worker and submitter users
    /// (deploy/nats/permissions.conf is this for the default prefix).
    NatsPermissions(fleet::NatsPermissionsArgs),
    /// Mutate whole files or trees of HEAD and run the tests that cover each mutant (exit 5
    /// when some mutant survives).
    Mutate(Box<mutate::MutateArgs>),
    /// Render a saved report (proof evidence, suite report or mutation report) as HTML, a
    /// Markdown summary or CI annotations.
    Report(report::ReportArgs),
    /// Show or trim the result cache that answers jobs whose inputs were all seen before.
    Cache(cache_command::CacheArgs),
}

/// The command tree as the binary parses it and prints its help: an `[env: NAME]` never shows
/// a value (`[env: ASSAY_NATS_URL=]` for a variable that is empty, a secret for one that is
/// not).
fn cli_command() -> clap::Command {
    fn hide_env_values(command: clap::Command) -> clap::Command {
        command
            .mut_args(|arg| arg.hide_env_values(true))
            .mut_subcommands(hide_env_values)
    }
    hide_env_values(Cli::command())
}

/// The process's arguments parsed, or clap's error with a better suggestion for a flag of
/// another command ([`flag_suggestions`]).
fn parse() -> Result<Cli, clap::Error> {
    let mut command = cli_command();
    let matches = command
        .try_get_matches_from_mut(std::env::args_os())
        .map_err(|error| {
            flag_suggestions::correct(error, &mut cli_command(), std::env::args_os())
        })?;
    Cli::from_arg_matches(&matches).map_err(|error| error.format(&mut command))
}

fn main() -> ExitCode {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { exit::USAGE } else { 0 });
        }
    };
    let service = match cli.command {
        Command::Coordinator(_) => "assay-coordinator",
        Command::Worker(_) => "assay-worker",
        _ => "assay-cli",
    };
    // Dropped after the runtime, so the last spans are sent before the process exits.
    let _telemetry = telemetry::init(service, cli.otlp_endpoint.as_deref());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            errln!("error: failed to start the async runtime: {e}");
            return ExitCode::from(exit::INTERNAL);
        }
    };
    let services = matches!(cli.command, Command::Coordinator(_) | Command::Worker(_));
    let outcome = runtime.block_on(async {
        let command = run(cli.command);
        // The services stop gracefully on their own; a CLI command stops its jobs, waits for
        // their containers to be removed, and reports the interruption.
        if services {
            return command.await;
        }
        // The signal first: its handlers are installed on its first poll, and a command's first
        // poll may run long enough to start jobs; a signal before then would kill the process
        // outright, leaving their scratch directories.
        tokio::select! {
            biased;
            signal = stop_signal() => Err(interrupted(signal).await),
            outcome = command => outcome,
        }
    });
    // Every task, blocking ones too, has finished once the runtime is gone.
    drop(runtime);
    embedded::remove_leftover_scratch();
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(Failure { code, error }) => {
            errln!("error: {}", exit::one_line(&error));
            ExitCode::from(code)
        }
    }
}

/// What stopped a command from outside.
#[derive(Clone, Copy)]
enum StopSignal {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM: what CI sends on cancel, and `kill` by default.
    Terminate,
}

/// Waits for SIGINT or SIGTERM; both stop a command the same way, so a cancelled CI job leaves
/// nothing behind either. A signal that cannot be watched is never waited on.
async fn stop_signal() -> StopSignal {
    use tokio::signal::unix::{SignalKind, signal};
    let terminate = async {
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                terminate.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        Ok(()) = tokio::signal::ctrl_c() => StopSignal::Interrupt,
        () = terminate => StopSignal::Terminate,
    }
}

/// Runs after the interrupted command was dropped: dropping it killed its processes, removed
/// its scratch directories and started removing its containers; the removals get a few seconds
/// to finish.
async fn interrupted(signal: StopSignal) -> Failure {
    let removed = assay_worker::sandbox::docker::wait_for_removals(Duration::from_secs(15)).await;
    let error = if removed {
        match fleet::SUBMITTED_PROOF.get() {
            Some(proof) => anyhow::anyhow!(
                "interrupted: this machine's jobs were stopped; proof {proof} keeps running on the fleet (`assay cancel {proof}` stops it)"
            ),
            None => anyhow::anyhow!("interrupted: this machine's jobs were stopped"),
        }
    } else {
        anyhow::anyhow!(
            "interrupted: this machine's jobs were stopped, but some of their containers were not removed in time (the next run on this host removes them)"
        )
    };
    let (code, error) = match signal {
        StopSignal::Interrupt => (exit::INTERRUPTED, error),
        StopSignal::Terminate => (
            exit::TERMINATED,
            anyhow::anyhow!(
                "{}",
                error
                    .to_string()
                    .replacen("interrupted", "terminated (SIGTERM)", 1)
            ),
        ),
    };
    Failure { code, error }
}

async fn run(command: Command) -> Result<u8, Failure> {
    match command {
        Command::Prove(args) => prove::run(&args).await,
        Command::Example(args) => example::run(&args).await,
        Command::Test(args) => test_command::run_test(&args).await,
        Command::History(args) => history_command::run_history(&args),
        Command::Halt(args) => halt_command::run_halt(&args).await,
        Command::Resume(args) => halt_command::run_resume(&args).await,
        Command::Coordinator(args) => fleet::run_coordinator(&args).await,
        Command::Worker(args) => fleet::run_worker(&args).await,
        Command::Status(args) => fleet::status(&args).await,
        Command::Results(args) => fleet::results(&args).await,
        Command::Cancel(args) => fleet::cancel(&args).await,
        Command::Mutate(args) => mutate::run(&args).await,
        Command::Cache(args) => cache_command::run(&args).await,
        Command::NatsPermissions(args) => fleet::print_nats_permissions(&args),
        Command::Report(args) => report::run(&args).await,
    }
}
