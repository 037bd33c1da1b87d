//! The rules for a change that is part of its own judge (SPEC §2, "The change judges itself
//! only through its tests"): a proven criterion stands only where the change's harness was
//! shown not to decide it (the differential run came out the same), or where a person accepted
//! the harness change; a `test:` whose product change is inert cannot be proven.

use super::{
    CriterionVerdict, Observation, ReasonCode, SideOutcome, Verdict, matched_cases, summarize,
};
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
            verdict.reason_code = Some(ReasonCode::InertProduct);
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
            verdict.reason_code = Some(ReasonCode::HarnessChanged);
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
                verdict.reason_code = Some(ReasonCode::HarnessChanged);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TreeId;
    use crate::criteria::parse_criterion;
    use crate::harness::{HarnessKind, InertProduct};
    use crate::ids::{JobId, WorkerId};
    use crate::job::{JobResult, JobStatus, Side};
    use crate::outcome::{CaseResult, Outcome, ReportOutcome, TestReport};

    const FILE: &str = "tests/test_pager.py";

    fn ran(index: u32, outcome: Outcome) -> JobResult {
        JobResult {
            job_id: JobId(format!("p/{index}")),
            index,
            status: JobStatus::Completed { exit_code: 1 },
            report: ReportOutcome::Parsed(TestReport {
                cases: vec![CaseResult {
                    file: FILE.into(),
                    suite: "tests.test_pager".into(),
                    name: "test_partial_page".into(),
                    variant: None,
                    outcome,
                    message: None,
                }],
                collection_errors: vec![],
                collection_reruns: Vec::new(),
            }),
            artifacts: vec![],
            duration_ms: 10,
            worker: WorkerId("w".into()),
            sandbox: None,
        }
    }

    fn hook(replaceable: bool) -> HarnessFinding {
        HarnessFinding {
            file: "tests/conftest.py".into(),
            line: 5,
            construct: "pytest_runtest_makereport".into(),
            kind: HarnessKind::Hook,
            replaceable,
        }
    }

    /// The verdict of `test: test_partial_page` failing on the base and passing on the
    /// candidate, after the harness rules with `plan`, and the differential run's outcome.
    fn judged(plan: &HarnessPlan, without: Option<Outcome>) -> (CriterionVerdict, HarnessEvidence) {
        let criteria = vec![parse_criterion("test: test_partial_page", 1).unwrap()];
        let mut jobs = vec![
            (JobKind::Targeted, Side::Base, ran(0, Outcome::Failed)),
            (JobKind::Targeted, Side::Candidate, ran(1, Outcome::Passed)),
        ];
        if let Some(outcome) = without {
            jobs.push((JobKind::HarnessCheck, Side::Candidate, ran(2, outcome)));
        }
        let observations: Vec<Observation<'_>> = jobs
            .iter()
            .map(|(kind, side, result)| Observation {
                kind: *kind,
                side: *side,
                result,
            })
            .collect();
        let mut verdicts = super::super::decide(&criteria, &observations);
        assert_eq!(verdicts[0].verdict, Verdict::Proven);
        let evidence = judge(&mut verdicts, &criteria, plan, &observations).expect("evidence");
        (verdicts.remove(0), evidence)
    }

    fn plan(findings: Vec<HarnessFinding>) -> HarnessPlan {
        HarnessPlan {
            check_tree: Some(TreeId("c0ffee".into())),
            reverted_files: vec!["tests/conftest.py".into()],
            findings,
            ..HarnessPlan::default()
        }
    }

    #[test]
    fn a_harness_that_turns_a_failure_into_a_pass_decides_the_outcome() {
        let (verdict, evidence) = judged(&plan(vec![hook(true)]), Some(Outcome::Failed));
        assert_eq!(verdict.verdict, Verdict::Unverified);
        assert_eq!(
            verdict.reason,
            "the change's harness decides this test's outcome: tests/conftest.py:5 pytest_runtest_makereport (with the base's in its place the test failed, with the change's it passed)"
        );
        assert_eq!(evidence.criteria[0].decision, HarnessDecision::Decides);
        assert_eq!(verdict.reason_code, Some(ReasonCode::HarnessChanged));
        assert_eq!(evidence.check_job, Some(2));
    }

    #[test]
    fn the_same_outcome_without_the_harness_leaves_the_verdict_standing() {
        let (verdict, evidence) = judged(&plan(vec![hook(true)]), Some(Outcome::Passed));
        assert_eq!(verdict.verdict, Verdict::Proven);
        assert_eq!(
            evidence.criteria[0].decision,
            HarnessDecision::CheckedDidNotDecide
        );
        assert_eq!(
            evidence.criteria[0].without_harness.as_deref(),
            Some("passed")
        );
    }

    #[test]
    fn a_missing_differential_run_is_no_evidence_the_harness_did_not_decide() {
        let (verdict, _) = judged(&plan(vec![hook(true)]), None);
        assert_eq!(verdict.verdict, Verdict::Unverified);
        assert!(
            verdict.reason.contains("could not be observed"),
            "{}",
            verdict.reason
        );
    }

    #[test]
    fn a_construct_in_the_tests_own_file_leaves_the_criterion_unverified() {
        let mut run_override = hook(false);
        run_override.file = FILE.into();
        run_override.construct = "PagerTests.run".into();
        let (verdict, evidence) = judged(&plan(vec![run_override]), None);
        assert_eq!(verdict.verdict, Verdict::Unverified);
        assert_eq!(
            verdict.reason,
            "the change's harness may decide this test's outcome and cannot be taken away from its tests: tests/test_pager.py:5 PagerTests.run"
        );
        assert_eq!(evidence.criteria[0].decision, HarnessDecision::Unchecked);
    }

    #[test]
    fn a_trusted_harness_change_keeps_the_verdict_and_records_the_trust() {
        let trusted = HarnessPlan {
            trusted: true,
            check_tree: None,
            reverted_files: vec![],
            ..plan(vec![hook(false)])
        };
        let (verdict, evidence) = judged(&trusted, None);
        assert_eq!(verdict.verdict, Verdict::Proven);
        assert!(
            verdict
                .reason
                .ends_with("is trusted by --trust-harness-change")
        );
        assert_eq!(evidence.criteria[0].decision, HarnessDecision::Trusted);
    }

    #[test]
    fn an_inert_product_change_cannot_prove_a_test_even_when_trusted() {
        let inert = HarnessPlan {
            trusted: true,
            inert_product: Some(InertProduct {
                files: vec!["pager.py".into()],
            }),
            ..HarnessPlan::default()
        };
        let (verdict, evidence) = judged(&inert, None);
        assert_eq!(verdict.verdict, Verdict::Unverified);
        assert!(verdict.reason.starts_with(INERT), "{}", verdict.reason);
        assert_eq!(verdict.reason_code, Some(ReasonCode::InertProduct));
        assert_eq!(evidence.criteria[0].decision, HarnessDecision::InertProduct);
    }

    #[test]
    fn no_finding_and_no_inert_change_leave_no_harness_section() {
        let criteria = vec![parse_criterion("test: test_partial_page", 1).unwrap()];
        assert!(judge(&mut [], &criteria, &HarnessPlan::default(), &[]).is_none());
    }
}
