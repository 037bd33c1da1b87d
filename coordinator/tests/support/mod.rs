//! What the coordinator's fleet tests share: the invoice project's proof (test-support builds the
//! repository; its `tax` branch adds tax to the total).

use assay_common::criteria::parse_criteria;
use assay_engine::proof::{self, PreparedProof, ProofRequest};
use assay_engine::source::CandidateSpec;
use std::path::Path;
use std::time::Duration;

/// The proof that `tax` fixes `test_total_includes_tax` and keeps
/// `test_total_of_empty_invoice`, with `repeats` stability runs and the mutation check's
/// budget, if any.
pub fn invoice_proof(
    repo: &Path,
    repeats: u32,
    mutation_budget: Option<Duration>,
) -> PreparedProof {
    proof::prepare(ProofRequest {
        proof_id: proof::new_proof_id(),
        repo: repo.to_owned(),
        base: "main".into(),
        candidate: CandidateSpec::Revision("tax".into()),
        criteria: parse_criteria(&[
            "test: test_total_includes_tax".to_owned(),
            "guard: test_total_of_empty_invoice".to_owned(),
        ])
        .expect("the invoice criteria parse"),
        runner: None,
        test_command: None,
        local_tools: false,
        test_report: None,
        test_globs: Vec::new(),
        repeats,
        timeout_secs: 120,
        mutation_budget,
        diff_coverage: true,
        trust_harness_change: false,
        allow_test_only: false,
    })
    .expect("the invoice proof prepares")
}
