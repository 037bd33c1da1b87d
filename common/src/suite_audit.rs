//! The suite report's `audit` section as the document carries it (docs/FORMATS.md, "The suite
//! report's audit"): the selection audit's containment, the quarantine ledger's gate, changed-line
//! reachability and the scope gates. Data only; the engine computes every part of it
//! (`engine::suite::{audit, ledger, reach, gates, scope}`) and re-exports these types where it
//! names them.
//!
//! Every struct refuses fields it does not know, so a section written by something else is
//! refused rather than half read. Two structs flatten another into themselves
//! ([`InventoryGate`], [`Exceptions`]); serde checks unknown fields on the outer one only, so
//! the flattened [`Inventory`] and [`ExceptionUse`] do not refuse on their own.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The report's `audit` section.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditReport {
    pub selection: SelectionAudit,
    /// With `--audit-base`: the quarantine ledger's gate.
    pub quarantine_ledger: Option<LedgerGate>,
    /// With `--reachability`: each changed product file's reach.
    pub reachability: Option<Vec<FileReach>>,
    /// With `--audit-base`: the read-set closure and inventory gates, and the exceptions used.
    pub scope: Option<ScopeAudit>,
}

/// A selected or executed test outside the containment, with the job it belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outlier {
    pub job: u32,
    pub id: String,
}

/// What a suite run collected, selected and executed, and whether executed ⊆ selected ⊆
/// collected held.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectionAudit {
    pub collected: usize,
    pub selected: usize,
    pub executed: usize,
    pub skipped: usize,
    /// Selected but never collected: the plan names a test the tree does not have.
    pub selected_not_collected: Vec<Outlier>,
    /// Executed but not selected by its job: the harness ran something it was not asked to.
    pub executed_not_selected: Vec<Outlier>,
    pub contained: bool,
}

/// The audit of a run that collected, selected and executed nothing: contained, as nothing
/// lies outside.
impl Default for SelectionAudit {
    fn default() -> Self {
        Self {
            collected: 0,
            selected: 0,
            executed: 0,
            skipped: 0,
            selected_not_collected: Vec::new(),
            executed_not_selected: Vec::new(),
            contained: true,
        }
    }
}

/// A change to the quarantine ledger the gate refuses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum LedgerViolation {
    Added {
        test: String,
    },
    ExpiryExtended {
        test: String,
        base: Option<String>,
        candidate: Option<String>,
    },
}

impl fmt::Display for LedgerViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Added { test } => write!(f, "the ledger gains entry {test}"),
            Self::ExpiryExtended {
                test,
                base,
                candidate,
            } => write!(
                f,
                "the ledger extends the expiry of {test} from {} to {}",
                base.as_deref().unwrap_or("never"),
                candidate.as_deref().unwrap_or("never")
            ),
        }
    }
}

/// The quarantine ledger's gate: the ledger's bytes on each side (by SHA-256, `None` when
/// absent) and what the candidate's changes the gate refuses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerGate {
    pub path: String,
    pub base_sha256: Option<String>,
    pub candidate_sha256: Option<String>,
    pub violations: Vec<LedgerViolation>,
}

impl LedgerGate {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// What the executed tests do to one changed file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileReach {
    pub file: String,
    /// Whether any executed test imported the file at all.
    pub imported: bool,
    /// Tests (pytest node ids) that run at least one changed line.
    pub reached_by: Vec<String>,
    /// Changed statement lines that never ran.
    pub unreached: Vec<u32>,
}

/// An audited run's scope, as the report's `audit.scope` carries it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScopeAudit {
    pub base_tree: String,
    /// Paths the change touches (either side).
    pub changed_files: Vec<String>,
    pub closure: Closure,
    pub inventory: InventoryGate,
    pub exceptions: Exceptions,
}

impl ScopeAudit {
    /// No unexcused gap, no unexcused removal, and both gates checked.
    pub fn passed(&self) -> bool {
        self.closure.unchecked.is_none()
            && self.inventory.unchecked.is_none()
            && self.closure.gaps.iter().all(|g| g.excused_by.is_some())
            && self
                .inventory
                .found
                .removed
                .iter()
                .all(|r| r.excused_by.is_some())
    }
}

/// The read-set closure gate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Closure {
    /// Where the base's recorded read sets came from; `None` for a runner that records none.
    pub recorded: Option<Provenance>,
    /// The read registry, when either tree has one.
    pub registry: Option<String>,
    /// Why the gate could not be checked.
    pub unchecked: Option<String>,
    pub gaps: Vec<ClosureGap>,
}

/// The inventory gate as reported: what it found, written beside `unchecked`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InventoryGate {
    #[serde(flatten)]
    pub found: Inventory,
    pub unchecked: Option<String>,
}

/// The scope exceptions file and what the run used of it, written beside `path`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exceptions {
    pub path: String,
    #[serde(flatten)]
    pub usage: ExceptionUse,
}

/// Where the base's read sets came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provenance {
    /// Recorded by this run.
    Recorded,
    /// Stored by an earlier audit of the same base tree.
    Stored,
}

/// One `[[exception]]` of `.assay/scope_exceptions.toml`, as the file has it: read from the
/// file and written into the report alike.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScopeException {
    /// The runner's test id the exception excuses.
    pub test: String,
    pub reason: String,
    /// `YYYY-MM-DD`, required: an excuse nobody has to renew is a hole.
    pub expires: String,
}

/// Where a read came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadSource {
    /// Recorded while the base's tests ran.
    Recorded,
    /// Declared in the read registry.
    Declared,
}

/// A changed file a test reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangedRead {
    pub file: String,
    pub source: ReadSource,
}

/// A collected test that reads a changed file and did not run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClosureGap {
    pub test: String,
    pub reads: Vec<ChangedRead>,
    pub excused_by: Option<ScopeException>,
}

/// How a test collected at the base shows at the candidate under another id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Relocation {
    /// Same file, another name.
    Renamed,
    /// Another file (or class).
    Moved,
}

/// A base test found at the candidate under another id, its body unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Relocated {
    pub from: String,
    pub to: String,
    pub kind: Relocation,
}

/// A base test the candidate no longer collects.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Removed {
    pub test: String,
    pub excused_by: Option<ScopeException>,
}

/// The inventory gate: base collection against the candidate's. Only ever written flattened
/// into [`InventoryGate`], which refuses unknown fields for it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inventory {
    pub base_collected: usize,
    pub candidate_collected: usize,
    /// Collected at the base, gone at the candidate, and no unchanged body took its place.
    pub removed: Vec<Removed>,
    pub relocated: Vec<Relocated>,
}

/// The exceptions a run leaned on, each printed and reported. Only ever written flattened into
/// [`Exceptions`], which refuses unknown fields for it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExceptionUse {
    pub used: Vec<ScopeException>,
    /// Named a gap but expired: it excused nothing.
    pub expired: Vec<ScopeException>,
}
