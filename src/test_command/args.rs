//! `assay test`'s flags.

use assay_engine::suite::shard::ShardMode;
use assay_engine::suite::{history, scope};
use clap::Args;
use std::path::PathBuf;

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
    #[command(flatten)]
    pub cache: crate::cache_command::CacheFlags,
    /// Where the cases run (a fleet run does not use the result cache).
    #[command(flatten)]
    pub target: crate::fleet_link::RunTarget,
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

#[cfg(test)]
mod tests {
    use super::*;

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
