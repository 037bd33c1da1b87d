//! `assay cache stats` and `assay cache prune`: the result cache in the artifact store, seen
//! and trimmed. What the cache holds and why is in `coordinator::cache`.

use crate::config;
use crate::embedded;
use crate::exit::Failure;
use assay_engine::result_cache::{CacheMode, ResultCache};
use clap::{Args, Subcommand};

/// `--no-cache` and `--refresh-cache`, as `prove`, `test` and `mutate` take them.
#[derive(Args, Debug, Clone, Copy, Default)]
pub struct CacheFlags {
    /// Run everything (jobs, cases, mutants) even when the result cache holds its answer, and
    /// store nothing.
    #[arg(long, conflicts_with = "refresh_cache")]
    pub no_cache: bool,
    /// Run everything, then store the trusted results over the cache's entries.
    #[arg(long)]
    pub refresh_cache: bool,
}

impl CacheFlags {
    /// The one reading of the two flags.
    pub fn mode(self) -> CacheMode {
        match (self.no_cache, self.refresh_cache) {
            (true, _) => CacheMode::Off,
            (_, true) => CacheMode::Refresh,
            _ => CacheMode::Use,
        }
    }
}

#[derive(Args, Debug)]
pub struct CacheArgs {
    #[command(subcommand)]
    pub command: CacheCommand,
    /// Artifact store URL holding the cache (file:///DIR or s3://BUCKET) [default: the cache
    /// directory `assay prove` uses].
    #[arg(long, value_name = "URL", global = true)]
    pub store: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum CacheCommand {
    /// How many entries the result cache holds, their size and the oldest one's age.
    Stats,
    /// Delete entries older than an age, then the oldest until the rest fit a size.
    Prune {
        /// Delete entries older than this many days.
        #[arg(long, value_name = "DAYS")]
        max_age_days: Option<u64>,
        /// Keep at most this many MB of entries, the newest first.
        #[arg(long, value_name = "MB")]
        max_size_mb: Option<u64>,
    },
}

pub async fn run(args: &CacheArgs) -> Result<u8, Failure> {
    let url = args.store.clone().unwrap_or_else(config::default_store_url);
    let cache = ResultCache::off(embedded::open_store(&url)?);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    match &args.command {
        CacheCommand::Stats => {
            let kinds = [
                assay_engine::mutation::campaign::mutant_cache::PREFIX,
                assay_engine::suite::case_cache::PREFIX,
            ];
            let stats = cache
                .stats(&kinds)
                .await
                .map_err(|e| Failure::infrastructure(e.into()))?;
            let oldest = stats.oldest_secs.map_or_else(
                || "none".to_owned(),
                |t| format!("{} days old", (now - t).max(0) / 86_400),
            );
            crate::console::outln(format_args!(
                "result cache in {url}: {} entries ({} of assay mutate, {} of assay test), {:.1} MB, oldest {oldest}",
                stats.entries,
                stats.under[0],
                stats.under[1],
                stats.bytes as f64 / 1_000_000.0
            ));
        }
        CacheCommand::Prune {
            max_age_days,
            max_size_mb,
        } => {
            if max_age_days.is_none() && max_size_mb.is_none() {
                return Err(Failure::usage(anyhow::anyhow!(
                    "prune needs a limit (hint: --max-age-days N or --max-size-mb N)"
                )));
            }
            let deleted = cache
                .prune(
                    now,
                    max_age_days.map(|d| d.saturating_mul(86_400) as i64),
                    max_size_mb.map(|mb| mb.saturating_mul(1_000_000)),
                )
                .await
                .map_err(|e| Failure::infrastructure(e.into()))?;
            crate::console::outln(format_args!(
                "result cache in {url}: {deleted} entries deleted"
            ));
        }
    }
    Ok(0)
}
