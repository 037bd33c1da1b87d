//! Suite history on this machine: where the state directory is, a branch's history read and
//! saved, the alerts a recorded run raised, and the branch a run is recorded under. Shared by
//! `assay test` (`suites`) and a proof's suite jobs (`proof_history`).

use crate::config;
use crate::exit::{Failure, ResultExt as _};
use anyhow::Context as _;
use assay_engine::source;
use assay_engine::suite::history::{self, History, RunRecord};
use std::path::{Path, PathBuf};

/// The state directory (suite history, the halt file), masked from every confined guest
/// from the moment a command names it, wherever it lives.
pub fn state_dir(flag: &Option<PathBuf>) -> PathBuf {
    let dir = flag
        .clone()
        .unwrap_or_else(|| config::user_cache_dir().join("assay"));
    assay_worker::sandbox::confine::hide_from_guests(&dir);
    dir
}

/// The repository directory `dir`, made absolute; a usage error when it does not exist.
pub fn open_repo(dir: &Path) -> Result<PathBuf, Failure> {
    if !dir.is_dir() {
        return Err(Failure::usage(anyhow::anyhow!(
            "repository directory {} does not exist",
            dir.display()
        )));
    }
    dir.canonicalize()
        .with_context(|| format!("failed to resolve {}", dir.display()))
        .usage()
}

/// The checked-out branch, or `detached`.
pub fn current_branch(repo: &Path) -> Result<String, Failure> {
    let git = source::open(repo).map_err(|e| Failure::usage(e.into()))?;
    let name = match git.head() {
        Ok(head) if head.is_branch() => head.shorthand().unwrap_or("detached").to_owned(),
        _ => "detached".to_owned(),
    };
    Ok(name)
}

/// A branch's suite history and its file; a corrupt or unreadable one is reported and started
/// over.
pub fn open_history(state: &Path, repository: &str, branch: &str) -> (PathBuf, History) {
    let path = history::history_path(state, repository, branch);
    let (history, problem) = history::load(&path, repository, branch);
    if let Some(problem) = problem {
        errln!(
            "warning: suite history {} is {problem}; starting it over",
            path.display()
        );
    }
    (path, history)
}

/// Saves history; failing to is a warning, since the run's own result stands.
pub fn save_history(path: &Path, history: &History) {
    if let Err(e) = history::save(path, history) {
        errln!("warning: {:#}", anyhow::Error::from(e));
    }
}

pub fn print_alerts(record: &RunRecord) {
    for alert in &record.alerts {
        errln!(
            "[ALERT] [{}] {}: {}",
            alert.severity,
            alert.kind,
            alert.detail
        );
    }
}
