//! The rule for each kind of criterion: what its two sides' evidence decides.

use super::*;

pub(super) fn rule(
    criterion: &Criterion,
    known_files: &BTreeSet<String>,
    base: &SideEvidence,
    candidate: &SideEvidence,
    missing: Missing,
) -> (Verdict, ReasonCode, String) {
    let name = criterion.test.display();
    let sides = [(Side::Base, base), (Side::Candidate, candidate)];
    if let Some(decided) = before_outcomes(name, known_files, &sides) {
        return decided;
    }
    match criterion.kind {
        CriterionKind::Test => test_rule(name, base, candidate, missing),
        CriterionKind::Guard => guard_rule(name, base, candidate, missing),
    }
}

/// What decides a criterion before the outcomes on the `sides` judged do, in this order: a
/// name that is ambiguous, runs of one side that disagree, a side where some run did not
/// report the test. `None`: the outcomes decide.
fn before_outcomes(
    name: &str,
    known_files: &BTreeSet<String>,
    sides: &[(Side, &SideEvidence)],
) -> Option<(Verdict, ReasonCode, String)> {
    if let Some(ambiguous) = ambiguity(&name, known_files) {
        return Some(ambiguous);
    }
    for (side, evidence) in sides {
        if let Some(disagreement) = disagreement(&evidence.runs) {
            return Some((
                Verdict::Unstable,
                ReasonCode::Unstable,
                format!("{name} is unstable on the {side}: {disagreement}"),
            ));
        }
    }
    for (side, evidence) in sides {
        if let Some((gap, missing)) = unreported_repeat(&evidence.runs) {
            // A run cut short by its job's timeout says so; any other gap is a gap.
            let code = match missing {
                Some(ReasonCode::TimedOut) => ReasonCode::TimedOut,
                _ => ReasonCode::NotInEveryRun,
            };
            return Some((
                Verdict::Unverified,
                code,
                format!(
                    "{name} is not covered by every run on the {side}: {gap}; each proving test must be reported by all of its runs"
                ),
            ));
        }
    }
    None
}

/// A `test:` under the test-only exception: ambiguity, stability and the outcome, on the
/// candidate alone.
pub(super) fn candidate_rule(
    criterion: &Criterion,
    known_files: &BTreeSet<String>,
    candidate: &SideEvidence,
    missing: Missing,
) -> (Verdict, ReasonCode, String) {
    use SideOutcome::*;
    let name = criterion.test.display();
    if let Some(decided) = before_outcomes(name, known_files, &[(Side::Candidate, candidate)]) {
        return decided;
    }
    match &candidate.outcome {
        Passed => (
            Verdict::Proven,
            ReasonCode::PassedTestOnly,
            format!(
                "{name} passes with the change in every run; the change has no product files and the test-only exception was granted, so the base was not judged"
            ),
        ),
        Failed | Error => (
            Verdict::Refuted,
            ReasonCode::FailsWithChange,
            format!(
                "{name} fails with the change ({}){}",
                describe_failures(&candidate.cases),
                network::network_hint(&candidate.cases)
            ),
        ),
        CollectionError(file) => (
            Verdict::Refuted,
            ReasonCode::BuildFailed,
            format!("{name} cannot load with the change: {file} fails to collect"),
        ),
        other => unverified_side(name, Side::Candidate, other, missing),
    }
}

fn test_rule(
    name: &str,
    base: &SideEvidence,
    candidate: &SideEvidence,
    missing: Missing,
) -> (Verdict, ReasonCode, String) {
    use SideOutcome::*;
    let failing_variant = |evidence: &SideEvidence| describe_failures(&evidence.cases);
    match &candidate.outcome {
        Passed => {}
        Failed | Error => {
            return (
                Verdict::Refuted,
                ReasonCode::FailsWithChange,
                format!(
                    "{name} fails with the change ({}){}",
                    failing_variant(candidate),
                    network::network_hint(&candidate.cases)
                ),
            );
        }
        CollectionError(file) => {
            return (
                Verdict::Refuted,
                ReasonCode::BuildFailed,
                format!("{name} cannot load with the change: {file} fails to collect"),
            );
        }
        other => return unverified_side(name, Side::Candidate, other, missing),
    }
    match &base.outcome {
        Failed => (
            Verdict::Proven,
            ReasonCode::Reproduced,
            format!("{name} fails on the base and passes with the change"),
        ),
        Passed => (
            Verdict::Refuted,
            ReasonCode::PassesOnBase,
            format!("{name} passes on the base too: the change's test does not reproduce the bug"),
        ),
        // Missing evidence, not evidence against the claim: the test never reached a result
        // of its own on the base, so nothing says whether it catches the bug.
        Error => (
            Verdict::Unverified,
            ReasonCode::ErroredOnBase,
            format!(
                "{name} did not run to a result of its own on the base: the report marks it an error, not a failure ({}), so the bug was not reproduced; make its setup and fixtures work on the base so that it fails in its own body{}",
                failing_variant(base),
                network::network_hint(&base.cases)
            ),
        ),
        CollectionError(file) => (
            Verdict::Unverified,
            ReasonCode::NeverRanOnBase,
            format!(
                "{name} never ran on the base: {file} fails to collect, import or build there{}, so there is no evidence that the test catches the bug; make the test use only names the base already has, so that it fails for the bug and not at import",
                base.error
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            ),
        ),
        other => unverified_side(name, Side::Base, other, missing),
    }
}

fn guard_rule(
    name: &str,
    base: &SideEvidence,
    candidate: &SideEvidence,
    missing: Missing,
) -> (Verdict, ReasonCode, String) {
    use SideOutcome::*;
    for (side, evidence) in [(Side::Base, base), (Side::Candidate, candidate)] {
        match &evidence.outcome {
            Failed | Error => {
                return (
                    Verdict::Refuted,
                    ReasonCode::GuardFailed,
                    format!(
                        "guard {name} does not pass on the {side} ({}){}",
                        describe_failures(&evidence.cases),
                        network::network_hint(&evidence.cases)
                    ),
                );
            }
            // The change breaks loading the guard's module: evidence against the change.
            CollectionError(file) if side == Side::Candidate => {
                return (
                    Verdict::Refuted,
                    ReasonCode::BuildFailed,
                    format!("guard {name} cannot load with the change: {file} fails to collect"),
                );
            }
            _ => {}
        }
    }
    for (side, evidence) in [(Side::Base, base), (Side::Candidate, candidate)] {
        match &evidence.outcome {
            Passed => {}
            // The change's test files do not load on the base: the guard never ran there.
            CollectionError(file) => {
                return (
                    Verdict::Unverified,
                    ReasonCode::NeverRanOnBase,
                    format!(
                        "guard {name} never ran on the base: {file} fails to collect, import or build there (with the change's test files), so there is no evidence it passed before the change; move what the base lacks out of the guard's module, or name a guard in a module the base can load"
                    ),
                );
            }
            other => return unverified_side(name, side, other, missing),
        }
    }
    (
        Verdict::Proven,
        ReasonCode::PassedOnBoth,
        format!("{name} passes on the base and with the change"),
    )
}

fn unverified_side(
    name: &str,
    side: Side,
    outcome: &SideOutcome,
    missing: Missing,
) -> (Verdict, ReasonCode, String) {
    let (code, why) = match outcome {
        SideOutcome::Skipped => (
            ReasonCode::Skipped,
            format!("{name} was skipped on the {side}; a skip is never a pass"),
        ),
        SideOutcome::NotFound => (
            ReasonCode::NotFound,
            format!("no test named {name} ran on the {side}"),
        ),
        SideOutcome::NoEvidence(why) => (
            missing.on(side).unwrap_or(ReasonCode::NoReport),
            format!("no evidence for {name} on the {side}: {why}"),
        ),
        other => (
            ReasonCode::NotRun,
            format!("{name} is {} on the {side}", other.label()),
        ),
    };
    (Verdict::Unverified, code, why)
}
