//! `assay history`: a branch's suite runs as a trend, or the history file itself.

use crate::exit::{Failure, ResultExt as _};
use crate::suite_state::{current_branch, open_repo, state_dir};
use anyhow::Context as _;
use assay_common::report::summary::SuiteStatus;
use assay_engine::suite::history;
use clap::Args;
use std::path::PathBuf;

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
        errln!("warning: suite history {} is {problem}", path.display());
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
