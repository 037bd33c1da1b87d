//! The `assay` binary: parses flags, starts logging, calls the libraries, maps errors to the
//! documented exit codes. Nothing here decides a verdict.

mod config;
mod example;
mod exit;
mod mutate;
mod prove;
mod reporter;

use clap::{Parser, Subcommand};
use exit::Failure;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "assay",
    version,
    about = "Prove code changes with named tests, from one laptop to a fleet",
    long_about = "Prove code changes with named tests.\n\n\
        A proof runs the change's tests on the base tree (base revision plus the change's test \
        files) and on the candidate tree, repeats them for stability, and decides each \
        criterion: `test: NAME` must fail before and pass after; `guard: NAME` must pass on both.\n\n\
        Exit status: 0 proven, 1 refuted, 2 usage or configuration error, 3 infrastructure \
        failure, 4 unverified or unstable, 70 internal error."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Prove a change with named tests (embedded mode: no services needed).
    Prove(Box<prove::ProveArgs>),
    /// Build a small example repository with a bug fix and prove it.
    Example(example::ExampleArgs),
    /// Mutate whole files or trees of HEAD and run the tests that cover each mutant (exit 5
    /// when some mutant survives).
    Mutate(Box<mutate::MutateArgs>),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { exit::USAGE } else { 0 });
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ASSAY_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: failed to start the async runtime: {e}");
            return ExitCode::from(exit::INTERNAL);
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Prove(args) => prove::run(&args).await,
            Command::Example(args) => example::run(&args).await,
            Command::Mutate(args) => mutate::run(&args).await,
        }
    });
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(Failure { code, error }) => {
            eprintln!("error: {error:#}");
            ExitCode::from(code)
        }
    }
}
