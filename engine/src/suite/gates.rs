//! The scope gates of an audited run (`assay test --audit-base REV`), from the trees to their
//! findings: the read registry and scope exceptions read from git, the base's recorded read
//! sets (pytest; stored by tree id, signed), the base collected by the runner's listing, and `scope`'s
//! pure gates applied. A gate that cannot be checked fails
//! closed and says why: an audit that could not look is no pass.

use super::reads;
use super::runners::SuiteSetup;
use super::scope::{self, Inventory, ReadRegistry, ScopeError, ScopeExceptions, Side};
use crate::result_cache::ResultCache;
use crate::source::{self, SourceError};
use assay_common::runner::{CoverageTool, SourceLanguage};
use assay_common::suite::{CaseOutcome, CaseReport, SuiteCase};
use assay_common::{ProofId, TreeId};
use assay_transport::error_chain::error_chain;
use assay_transport::queue::JobQueue;
use assay_transport::store::ArtifactStore;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub use assay_common::suite_audit::{Closure, Exceptions, InventoryGate, ScopeAudit};

/// A scope file that is there but cannot be used: a usage error, before anything is judged.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// A scope exceptions file or read registry is malformed.
    #[error(transparent)]
    Scope(#[from] ScopeError),
    /// The trees could not be read.
    #[error("failed to read the trees for the selection audit")]
    Source(#[from] SourceError),
}

impl GateError {
    /// Whether the repository's files are at fault (a usage error) rather than the run.
    pub fn is_usage(&self) -> bool {
        matches!(self, Self::Scope(_))
    }
}

/// The run and trees the gates judge.
pub struct GateRequest<'a> {
    /// The run's id, which names the audit's jobs.
    pub run_id: &'a ProofId,
    /// The runner and its configured command.
    pub setup: &'a SuiteSetup,
    /// The repository's root.
    pub repo: &'a Path,
    /// The audit's base tree (`--audit-base`).
    pub base_tree: &'a TreeId,
    /// The tree the suite ran on.
    pub tree: &'a TreeId,
    /// Each job's wall-clock limit, in seconds.
    pub timeout_secs: u64,
    /// The scope exceptions file (`--scope-exceptions`), relative to the root.
    pub exceptions_path: &'a str,
    /// The read registry (`--fixture-reads`), relative to the root.
    pub registry_path: &'a str,
    /// `YYYY-MM-DD`, for the exceptions' expiries.
    pub today: &'a str,
    /// The result cache the base's read sets are stored in and served from; `None` records
    /// them afresh every time.
    pub reads_cache: Option<&'a ResultCache>,
}

/// The ids of the selected cases that ran (or were answered from the cache for this very
/// tree): `cases` and `reports` are the run's, in plan order.
pub fn executed(cases: &[SuiteCase], reports: &[CaseReport]) -> BTreeSet<String> {
    cases
        .iter()
        .zip(reports)
        .filter(|(_, report)| report.outcome != CaseOutcome::NotRun)
        .map(|(case, _)| case.id.clone())
        .collect()
}

/// What the gates read from the trees, read before the run so a malformed file fails before
/// anything runs.
#[derive(Clone, Debug)]
pub struct ScopeFiles {
    exceptions: ScopeExceptions,
    /// Both sides' registries; `None` when neither tree has one.
    registry: Option<ReadRegistry>,
    changed: BTreeSet<String>,
}

/// Reads the exceptions (at the candidate), the registries (both sides) and the change's paths.
pub fn read_files(request: &GateRequest<'_>) -> Result<ScopeFiles, GateError> {
    let (repo, base_tree, tree) = (request.repo, request.base_tree, request.tree);
    let exceptions = match source::read_file(repo, tree, request.exceptions_path)? {
        Some(bytes) => scope::parse_exceptions(&bytes, request.exceptions_path)?,
        None => ScopeExceptions::default(),
    };
    let mut registry = None;
    for (side, at) in [("base", base_tree), ("candidate", tree)] {
        if let Some(bytes) = source::read_file(repo, at, request.registry_path)? {
            let parsed = scope::parse_registry(&bytes, request.registry_path, side)?;
            registry = Some(registry.unwrap_or_else(ReadRegistry::default).union(parsed));
        }
    }
    Ok(ScopeFiles {
        exceptions,
        registry,
        changed: source::changed_paths(repo, base_tree, tree)?,
    })
}

/// Runs the closure and inventory gates for a run that collected `collected` at the candidate
/// and executed `executed`.
pub async fn check(
    request: &GateRequest<'_>,
    files: ScopeFiles,
    collected: &[SuiteCase],
    executed: &BTreeSet<String>,
    queue: &dyn JobQueue,
    store: &dyn ArtifactStore,
) -> ScopeAudit {
    let (repo, base_tree, tree) = (request.repo, request.base_tree, request.tree);
    let ScopeFiles {
        exceptions,
        registry,
        changed,
    } = files;

    let recorded = if request.setup.coverage() == Some(CoverageTool::CoveragePy) {
        Some(
            reads::base_reads(
                request.run_id,
                base_tree,
                request.timeout_secs,
                request.reads_cache,
                queue,
                store,
            )
            .await
            .map_err(|e| error_chain(&e)),
        )
    } else {
        None
    };
    let recorded_reads = recorded.as_ref().and_then(|r| r.as_ref().ok());
    let ids: Vec<String> = collected.iter().map(|c| c.id.clone()).collect();
    let mut gaps = scope::closure(
        &changed,
        recorded_reads.map(|(r, _)| r),
        registry.as_ref().unwrap_or(&ReadRegistry::default()),
        &ids,
        executed,
    );
    let closure_unchecked = match &recorded {
        Some(Err(why)) => Some(format!("the base's reads could not be recorded: {why}")),
        Some(Ok((r, _))) if r.collected.is_empty() => {
            Some("the base's read-set run collected no test".into())
        }
        _ => None,
    };

    // Collected with the run's own command, as the candidate was: the read-set run collects
    // with the adapter's, which a `--test-command` narrowing the suite does not narrow.
    let base_cases = super::collect(
        &ProofId(format!("{}-base", request.run_id)),
        request.setup,
        repo,
        base_tree,
        request.timeout_secs,
        queue,
        store,
    )
    .await
    .map(|c| c.cases)
    .map_err(|e| format!("the base could not be collected: {}", error_chain(&e)));
    let (mut inventory, inventory_unchecked) = match &base_cases {
        Ok(base) => (
            scope::inventory(base, collected, bodies(request, base_tree, tree)),
            None,
        ),
        Err(why) => (Inventory::default(), Some(why.clone())),
    };
    let usage = scope::excuse(&exceptions, request.today, &mut gaps, &mut inventory);
    ScopeAudit {
        base_tree: base_tree.to_string(),
        changed_files: changed.into_iter().collect(),
        closure: Closure {
            recorded: recorded_reads.map(|(_, provenance)| *provenance),
            registry: registry.map(|_| request.registry_path.to_owned()),
            unchecked: closure_unchecked,
            gaps,
        },
        inventory: InventoryGate {
            found: inventory,
            unchecked: inventory_unchecked,
        },
        exceptions: Exceptions {
            path: request.exceptions_path.to_owned(),
            usage,
        },
    }
}

/// A case's function body on its side, for Python runners (read once per file and side).
fn bodies<'r>(
    request: &'r GateRequest<'_>,
    base_tree: &'r TreeId,
    tree: &'r TreeId,
) -> impl FnMut(Side, &SuiteCase) -> Option<String> + 'r {
    let python = request.setup.language() == Some(SourceLanguage::Python);
    let mut files: BTreeMap<(bool, String), Option<String>> = BTreeMap::new();
    move |side, case| {
        if !python {
            return None;
        }
        let at = match side {
            Side::Base => base_tree,
            Side::Candidate => tree,
        };
        let text = files
            .entry((side == Side::Base, case.file.clone()))
            .or_insert_with(|| {
                source::read_file(request.repo, at, &case.file)
                    .ok()
                    .flatten()
                    .and_then(|b| String::from_utf8(b).ok())
            });
        scope::python_body(text.as_deref()?, &case.class, &case.name)
    }
}
