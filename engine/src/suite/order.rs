//! Order-dependent cases. Assay runs a suite's cases apart (batches, one case per job), and a
//! case that only passes after another case left something behind (a class attribute, a
//! file, a module global) fails there though `python -m unittest` and `python -m pytest`, which
//! run every case in one process in collection order, pass it. So when a run that split its
//! cases has guest failures, one more job runs every collected case that way; a failure that
//! passes there is reported as order-dependent: passed, with the reason, never a regression.
//! A case that fails both ways stays a failure. Only runners whose whole suite runs in one
//! process in collection order (pytest, unittest) are checked.

use super::conclude::{self, SuiteOutcome};
use super::driven::Driven;
use super::runners::SuiteSetup;
use crate::dispatch::run_one;
use assay_common::job::{JobKind, JobSpec, Side};
use assay_common::report::summary::SuiteStatus;
use assay_common::suite::{CaseOutcome, Lane, SuiteCase, derive_outcome};
use assay_common::{ProofId, TreeId};
use assay_transport::queue::{JobQueue, QueueError};

/// Checks `outcome`'s failures against one run of every collected case in collection order,
/// and reports each that passes there as order-dependent. Returns how many were.
pub async fn confirm(
    run_id: &ProofId,
    setup: &SuiteSetup,
    tree: &TreeId,
    timeout_secs: u64,
    driven: &Driven,
    outcome: &mut SuiteOutcome,
    queue: &dyn JobQueue,
) -> Result<usize, QueueError> {
    let suspects = suspects(setup, driven, outcome);
    if suspects.is_empty() {
        return Ok(0);
    }
    let job = whole_suite_job(run_id, setup, tree, &driven.collected, timeout_secs);
    let result = run_one(queue, &job).await?;
    let mut order_dependent = 0;
    for i in suspects {
        let case = &driven.cases[i];
        let whole = derive_outcome(case, &result);
        if whole.outcome != CaseOutcome::Passed || whole.lane != Lane::Guest {
            continue;
        }
        let report = &mut outcome.cases[i];
        let apart = report.message.take().unwrap_or_default();
        report.outcome = CaseOutcome::Passed;
        report.order_dependent = true;
        report.message = Some(format!(
            "order-dependent: passes when every case runs in one process in collection order \
             (as the runner alone runs them), fails when run apart from the cases before it \
             (job {}): it depends on what another case leaves behind. Apart, it said: {apart}",
            report.job.map_or_else(|| "?".to_owned(), |j| j.to_string()),
        ));
        order_dependent += 1;
    }
    if order_dependent > 0 {
        outcome.totals = conclude::totals(&outcome.cases);
        outcome.guest_failures = conclude::guest_failures(&outcome.totals, &outcome.cases);
        outcome.counts.passed = outcome.totals.passed;
        outcome.counts.failed = outcome.guest_failures;
        if outcome.guest_failures == 0
            && outcome.selection.contained
            && outcome.status == SuiteStatus::Failing
            && outcome.stopped.is_none()
        {
            outcome.status = SuiteStatus::Passing;
        }
    }
    Ok(order_dependent)
}

/// The cases worth checking, by index: guest failures this run produced (not the cache's,
/// not excused), in a run that split the collection, of a runner the check applies to.
fn suspects(setup: &SuiteSetup, driven: &Driven, outcome: &SuiteOutcome) -> Vec<usize> {
    let applies = setup.shares_a_process_across_cases();
    let split = driven.plan.len() > 1 || driven.cases.len() != driven.collected.len();
    if !applies || !split || driven.run.stopped.is_some() || driven.collected.is_empty() {
        return Vec::new();
    }
    outcome
        .cases
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            matches!(c.outcome, CaseOutcome::Failed | CaseOutcome::Error)
                && c.lane == Lane::Guest
                && !c.quarantined
                && c.cached.is_none()
        })
        .map(|(i, _)| i)
        .collect()
}

/// One job running every collected case, in collection order, in one process.
fn whole_suite_job(
    run_id: &ProofId,
    setup: &SuiteSetup,
    tree: &TreeId,
    collected: &[SuiteCase],
    timeout_secs: u64,
) -> JobSpec {
    let order_id = ProofId(format!("{run_id}-order"));
    let cases: Vec<&SuiteCase> = collected.iter().collect();
    JobSpec {
        selected_tests: collected.iter().map(|c| c.id.clone()).collect(),
        ..JobSpec::new(
            &order_id,
            0,
            JobKind::Suite,
            Side::Candidate,
            tree,
            setup.case_command(&cases),
            setup.report_format(),
            timeout_secs,
        )
    }
}
