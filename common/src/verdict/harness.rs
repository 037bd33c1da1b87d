//! The rules for a change that is part of its own judge (SPEC §2, "The change judges itself
//! only through its tests"): a proven criterion stands only where the change's harness was
//! shown not to decide it (the differential run came out the same), or where a person accepted
//! the harness change; a `test:` whose product change is inert cannot be proven.

use super::{CriterionVerdict, Observation, SideOutcome, Verdict, matched_cases, summarize};
use crate::criteria::{Criterion, CriterionKind};
use crate::harness::{
    CriterionHarness, HarnessDecision, HarnessEvidence, HarnessFinding, HarnessPlan,
};
use crate::job::JobKind;
use std::collections::BTreeSet;

/// The reason of a criterion whose outcome the change's harness decides; its start is stable
/// (the `harness_changed` reason code keys on it).
pub const DECIDES: &str = "the change's harness decides this test's outcome";
/// The reason of a criterion whose harness construct sits in its tests' own file.
pub const UNCHECKED: &str =
    "the change's harness may decide this test's outcome and cannot be taken away from its tests";
/// The reason of a `test:` whose product change is inert.
pub const INERT: &str = "the product change is inert; the outcome changed anyway";

/// Places named in a reason: a few, then how many more.
fn places(findings: &[&HarnessFinding]) -> String {
    const SHOWN: usize = 3;
    let mut named: Vec<String> = findings.iter().take(SHOWN).map(|f| f.place()).collect();
    if findings.len() > SHOWN {
        named.push(format!("and {} more", findings.len() - SHOWN));
    }
    named.join(", ")
}

/// Applies the harness rules to the verdicts `decide` gave `criteria` (in the same order), and
/// returns the evidence's `harness` section; `None` when the change has no harness finding, no
/// inert product change and no trust to record.
pub fn judge(
    verdicts: &mut [CriterionVerdict],
    criteria: &[Criterion],
    plan: &HarnessPlan,
    observations: &[Observation<'_>],
) -> Option<HarnessEvidence> {
    if plan.is_empty() {
        return None;
    }
    let check = observations
        .iter()
        .find(|o| o.kind == JobKind::HarnessCheck);
    let unreplaceable: Vec<&HarnessFinding> =
        plan.findings.iter().filter(|f| !f.replaceable).collect();
    let replaced: Vec<&HarnessFinding> = plan.findings.iter().filter(|f| f.replaceable).collect();
    let mut records = Vec::new();
    for (verdict, criterion) in verdicts.iter_mut().zip(criteria) {
        // Only a proven verdict can be the harness's doing: a harness that makes a test fail or
        // go missing proves nothing for the change.
        if verdict.verdict != Verdict::Proven {
            continue;
        }
        if let Some(inert) = &plan.inert_product
            && criterion.kind == CriterionKind::Test
        {
            verdict.verdict = Verdict::Unverified;
            verdict.reason = format!(
                "{INERT}: {} differs from the base only in comments and docstrings",
                inert.files.join(", ")
            );
            records.push(record(verdict, HarnessDecision::InertProduct, None));
            continue;
        }
        if plan.findings.is_empty() {
            continue;
        }
        if plan.trusted {
            verdict.reason = format!(
                "{}; the change's harness ({}) is trusted by --trust-harness-change",
                verdict.reason,
                places(&plan.findings.iter().collect::<Vec<_>>())
            );
            records.push(record(verdict, HarnessDecision::Trusted, None));
            continue;
        }
        if !unreplaceable.is_empty() {
            verdict.verdict = Verdict::Unverified;
            verdict.reason = format!("{UNCHECKED}: {}", places(&unreplaceable));
            records.push(record(verdict, HarnessDecision::Unchecked, None));
            continue;
        }
        let without = check.map(|job| {
            let known_files: BTreeSet<String> = verdict
                .base
                .cases
                .iter()
                .chain(&verdict.candidate.cases)
                .map(|c| c.file.clone())
                .collect();
            let cases = matched_cases(&criterion.test, &[job]);
            summarize(&[job], &cases, &known_files, &criterion.test)
        });
        match without {
            Some(outcome) if outcome == verdict.candidate.outcome => {
                records.push(record(
                    verdict,
                    HarnessDecision::CheckedDidNotDecide,
                    Some(outcome.label().to_owned()),
                ));
            }
            other => {
                let observed = match &other {
                    Some(SideOutcome::NoEvidence(why)) => format!("could not be observed ({why})"),
                    Some(outcome) => outcome.label().to_owned(),
                    None => "could not be observed (no differential run)".to_owned(),
                };
                verdict.verdict = Verdict::Unverified;
                verdict.reason = format!(
                    "{DECIDES}: {} (with the base's in its place the test {}, with the change's it {})",
                    places(&replaced),
                    with_verb(&observed),
                    with_verb(verdict.candidate.outcome.label()),
                );
                records.push(record(
                    verdict,
                    HarnessDecision::Decides,
                    other.map(|o| o.label().to_owned()),
                ));
            }
        }
    }
    Some(HarnessEvidence {
        findings: plan.findings.clone(),
        trusted: plan.trusted,
        check_job: check.map(|o| o.result.index),
        reverted_files: plan.reverted_files.clone(),
        inert_product: plan.inert_product.clone(),
        criteria: records,
    })
}

fn with_verb(outcome: &str) -> String {
    match outcome {
        "passed" | "failed" | "skipped" => outcome.to_owned(),
        "error" => "errored".to_owned(),
        "not_found" => "was not found".to_owned(),
        _ if outcome.starts_with("could not") => outcome.to_owned(),
        other => format!("is {other}"),
    }
}

fn record(
    verdict: &CriterionVerdict,
    decision: HarnessDecision,
    without_harness: Option<String>,
) -> CriterionHarness {
    CriterionHarness {
        criterion: verdict.id.clone(),
        decision,
        without_harness,
    }
}
