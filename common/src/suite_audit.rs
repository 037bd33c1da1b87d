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
    /// The selection audit: executed ⊆ selected ⊆ collected.
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
    /// The plan index of the job it belongs to.
    pub job: u32,
    /// The test's id, as its runner names it.
    pub id: String,
}

/// What a suite run collected, selected and executed, and whether executed ⊆ selected ⊆
/// collected held.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectionAudit {
    /// Tests the run collected.
    pub collected: usize,
    /// Tests the plan selected.
    pub selected: usize,
    /// Tests the jobs executed.
    pub executed: usize,
    /// Of the selected tests, those skipped.
    pub skipped: usize,
    /// Selected but never collected: the plan names a test the tree does not have.
    pub selected_not_collected: Vec<Outlier>,
    /// Executed but not selected by its job: the harness ran something it was not asked to.
    pub executed_not_selected: Vec<Outlier>,
    /// Whether executed ⊆ selected ⊆ collected held: both outlier lists are empty.
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
    /// The candidate's ledger gains an entry the base's lacks.
    Added {
        /// The quarantined test.
        test: String,
    },
    /// The candidate's ledger pushes an entry's expiry later (or removes it).
    ExpiryExtended {
        /// The quarantined test.
        test: String,
        /// The entry's expiry on the base (`YYYY-MM-DD`); `None`: never.
        base: Option<String>,
        /// The entry's expiry on the candidate; `None`: never.
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
    /// The ledger file, relative to the tree root.
    pub path: String,
    /// The SHA-256 of the base's ledger, in hex; `None` when the base has none.
    pub base_sha256: Option<String>,
    /// The SHA-256 of the candidate's ledger, in hex; `None` when it has none.
    pub candidate_sha256: Option<String>,
    /// The ledger changes the gate refuses.
    pub violations: Vec<LedgerViolation>,
}

impl LedgerGate {
    /// Whether the gate lets the ledger change through.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// What the executed tests do to one changed file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileReach {
    /// The changed product file, relative to the tree root.
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
    /// The base tree audited against.
    pub base_tree: String,
    /// Paths the change touches (either side).
    pub changed_files: Vec<String>,
    /// The read-set closure gate: collected tests that read a changed file must have run.
    pub closure: Closure,
    /// The inventory gate: base tests the candidate no longer collects, or collects under another id.
    pub inventory: InventoryGate,
    /// The exceptions file and what the run used of it.
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
    /// Collected tests that read a changed file and did not run.
    pub gaps: Vec<ClosureGap>,
}

/// The inventory gate as reported: what it found, written beside `unchecked`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InventoryGate {
    /// What the gate found.
    #[serde(flatten)]
    pub found: Inventory,
    /// Why the gate could not be checked.
    pub unchecked: Option<String>,
}

/// The scope exceptions file and what the run used of it, written beside `path`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exceptions {
    /// The exceptions file, relative to the tree root.
    pub path: String,
    /// The exceptions used and those expired.
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
    /// Why the test is excused, in words.
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
    /// The changed file read, relative to the tree root.
    pub file: String,
    /// How the read is known.
    pub source: ReadSource,
}

/// A collected test that reads a changed file and did not run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClosureGap {
    /// The test, as its runner names it.
    pub test: String,
    /// The changed files it reads.
    pub reads: Vec<ChangedRead>,
    /// The exception that excuses the gap, if one does.
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
    /// The test's id at the base.
    pub from: String,
    /// The test's id at the candidate.
    pub to: String,
    /// Whether it was renamed or moved.
    pub kind: Relocation,
}

/// A base test the candidate no longer collects.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Removed {
    /// The test, as the base's runner names it.
    pub test: String,
    /// The exception that excuses the removal, if one does.
    pub excused_by: Option<ScopeException>,
}

/// The inventory gate: base collection against the candidate's. Only ever written flattened
/// into [`InventoryGate`], which refuses unknown fields for it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inventory {
    /// Tests the base collected.
    pub base_collected: usize,
    /// Tests the candidate collected.
    pub candidate_collected: usize,
    /// Collected at the base, gone at the candidate, and no unchanged body took its place.
    pub removed: Vec<Removed>,
    /// Base tests found at the candidate under another id, their bodies unchanged.
    pub relocated: Vec<Relocated>,
}

/// The exceptions a run leaned on, each printed and reported. Only ever written flattened into
/// [`Exceptions`], which refuses unknown fields for it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExceptionUse {
    /// Exceptions that excused a gap or a removal.
    pub used: Vec<ScopeException>,
    /// Named a gap but expired: it excused nothing.
    pub expired: Vec<ScopeException>,
}
