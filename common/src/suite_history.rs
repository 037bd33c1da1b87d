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
    /// When the run was recorded (RFC 3339, UTC).
    pub timestamp: String,
    /// The suite run this record is of.
    pub run_id: String,
    /// Cases the run counted, whatever their outcome.
    pub total: u64,
    /// Of `total`, the cases that passed.
    pub passed: u64,
    /// Of `total`, the cases that failed.
    pub failed: u64,
    /// Of `total`, the cases skipped.
    pub skipped: u64,
    /// Line coverage of the run in percent; `None` where coverage was not measured.
    pub coverage_pct: Option<f64>,
    /// The run's wall time in seconds; absent in runs recorded before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// The run's overall status, as the suite report gave it.
    pub status: SuiteStatus,
    /// Why the run has that status, where the report said.
    pub status_detail: Option<String>,
    /// Of `total`, the cases the result cache answered: counted with the run's outcomes (they
    /// are this tree's), but they ran in no job of it, so their durations were not recorded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached: u64,
    /// `max(0, failed - previous failed)`, written every run.
    pub new_failures: u64,
    /// `max(0, previous coverage - coverage)` in points, written every run.
    pub coverage_drop: f64,
    /// The names of the cases that failed in this run.
    pub failed_cases: Vec<String>,
    /// Cases failing now that did not fail in the run compared against.
    pub newly_failing: Vec<String>,
    /// What the history found alarming in this run against the one before.
    pub alerts: Vec<Alert>,
}

/// One thing the history warns of in a run: new failures, a coverage drop.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Alert {
    /// How serious the alert is (`warning`).
    pub severity: String,
    /// What the alert is about (`regression`, `coverage_drop`); `type` in the documents.
    #[serde(rename = "type")]
    pub kind: String,
    /// The alert in words, for the report.
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
    /// `max(0, failed - previous failed)`, as the run's record has it.
    pub new_failures: u64,
    /// Cases failing now that did not fail in the run compared against.
    pub newly_failing: Vec<String>,
    /// `max(0, previous coverage - coverage)` in points.
    pub coverage_drop: f64,
    /// The alerts recorded for this run.
    pub alerts: Vec<Alert>,
    /// The last runs, oldest first, this one last; absent in reports written before it was
    /// kept.
    #[serde(default)]
    pub recent: Vec<RunRecord>,
}
