//! How a run shows on the terminal: the `--quiet` and `--progress` flags `assay prove`,
//! `assay test` and `assay mutate` share, declared once so the three cannot drift apart.

use crate::progress::ProgressMode;
use clap::Args;

#[derive(Args, Debug, Clone, Default)]
pub struct ConsoleFlags {
    /// Print only the summary, no progress.
    #[arg(short, long)]
    pub quiet: bool,
    /// How progress shows: `auto` draws a live bar (jobs done, running, failures, ETA) when
    /// stderr is a terminal and plain lines otherwise; `plain` always prints plain lines.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = ProgressMode::Auto)]
    pub progress: ProgressMode,
}
