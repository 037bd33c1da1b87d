//! A branch's suite history as the documents carry it: one run's record with its alerts (the
//! history file `assay.history/v1` keeps the last runs' records) and the suite report's
//! `history` section. Data only; the engine keeps the history and decides the alerts
//! (`engine::suite::history`).

use crate::report::summary::SuiteStatus;
use serde::{Deserialize, Serialize};

/// One run as history records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRecord {
    pub timestamp: String,
    pub run_id: String,
    pub total: u64,
    pub passed: u64,
    pub failed: u64,
    pub skipped: u64,
    pub coverage_pct: Option<f64>,
    /// The run's wall time in seconds; absent in runs recorded before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    pub status: SuiteStatus,
    pub status_detail: Option<String>,
    /// Of `total`, the cases the result cache answered: counted with the run's outcomes (they
    /// are this tree's), but they ran in no job of it, so their durations were not recorded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached: u64,
    /// `max(0, failed - previous failed)`, written every run.
    pub new_failures: u64,
    /// `max(0, previous coverage - coverage)` in points, written every run.
    pub coverage_drop: f64,
    pub failed_cases: Vec<String>,
    /// Cases failing now that did not fail in the run compared against.
    pub newly_failing: Vec<String>,
    pub alerts: Vec<Alert>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Alert {
    pub severity: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub detail: String,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The suite report's `history`: what the branch's history recorded of this run, and the
/// trend the HTML report draws.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HistoryReport {
    /// The history file the run was recorded in.
    pub file: String,
    pub new_failures: u64,
    pub newly_failing: Vec<String>,
    pub coverage_drop: f64,
    pub alerts: Vec<Alert>,
    /// The last runs, oldest first, this one last; absent in reports written before it was
    /// kept.
    #[serde(default)]
    pub recent: Vec<RunRecord>,
}
