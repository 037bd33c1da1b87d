//! Suite history for proofs: a proof's suite jobs (base-suite, then candidate-suite) are
//! recorded like `assay test` runs, under the candidate's branch, so `assay history` shows
//! proofs and suite runs side by side and the candidate's entry is compared with the base's.
//! The base-suite is recorded as a baseline, compared with nothing: it runs the code before
//! the change, so comparing it with the branch's last run (often the previous proof's
//! candidate) would call every failure the change fixes a new regression.

use crate::exit::Failure;
use crate::suite_state;
use assay_engine::proof::{self, PreparedProof};
use assay_engine::source::{self, CandidateSpec};
use assay_engine::suite::conclude;
use assay_transport::store::ArtifactStore;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Records every suite job of a finished proof; `results` are in plan order.
pub async fn record(
    state_dir: &Option<PathBuf>,
    proof: &PreparedProof,
    results: &[assay_common::job::JobResult],
    store: &dyn ArtifactStore,
    started: SystemTime,
) -> Result<(), Failure> {
    let repo = &proof.request.repo;
    let branch = candidate_branch(repo, &proof.request.candidate)?;
    let repository = repo.display().to_string();
    let (path, mut history) =
        suite_state::open_history(&suite_state::state_dir(state_dir), &repository, &branch);
    let mut warnings = Vec::new();
    let recorded = conclude::record_proof_suites(
        &mut history,
        &proof.request.proof_id.to_string(),
        &proof::rfc3339(started),
        &proof.jobs,
        results,
        store,
        &mut warnings,
    )
    .await;
    for warning in &warnings {
        errln!("warning: {warning}");
    }
    for record in &recorded {
        suite_state::print_alerts(record);
    }
    suite_state::save_history(&path, &history);
    Ok(())
}

/// The candidate's branch: the checked-out one for `HEAD`, the name itself for a local branch;
/// the checked-out one for the work tree; `detached` for anything else (a commit, a tag, a
/// patch), as for a detached checkout.
fn candidate_branch(repo: &Path, candidate: &CandidateSpec) -> Result<String, Failure> {
    let rev = match candidate {
        CandidateSpec::Revision(rev) => rev,
        // The work tree is the checked-out branch with its edits.
        CandidateSpec::WorkTree => return suite_state::current_branch(repo),
        CandidateSpec::Patch(_) | CandidateSpec::PatchText(_) => return Ok("detached".into()),
    };
    if rev == "HEAD" {
        return suite_state::current_branch(repo);
    }
    let git = source::open(repo).map_err(|e| Failure::usage(e.into()))?;
    let name = rev.strip_prefix("refs/heads/").unwrap_or(rev);
    Ok(match git.find_reference(&format!("refs/heads/{name}")) {
        Ok(_) => name.to_owned(),
        Err(_) => "detached".to_owned(),
    })
}
