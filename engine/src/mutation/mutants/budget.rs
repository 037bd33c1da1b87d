//! How long mutants may run and how their runs are judged: one budget covers the unmutated run
//! of the proving tests and every mutant, and each mutant ends killed, survived or not run.
//! Pure rules over durations and test names; the engine measures the time and runs the jobs.

use super::{Mutant, MutationPlan};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// The whole check's budget unless `--mutation-budget` says otherwise.
pub const DEFAULT_MUTATION_BUDGET: Duration = Duration::from_secs(900);
/// A mutant may take this many times the unmutated run…
pub const MUTANT_TIMEOUT_FACTOR: u32 = 10;
/// …but at least this long, so fast proving tests do not time out on a loaded machine…
pub const MUTANT_TIMEOUT_FLOOR: Duration = Duration::from_secs(60);
/// …and no mutant starts with less than this left of the budget.
pub const MIN_TIME_TO_START: Duration = Duration::from_secs(60);

/// `assay mutate` sizes each mutant's limit from what its own tests took in the baseline:
/// this many times the expected cost (start-up plus the covering tests' durations)…
pub const MUTATE_TIMEOUT_FACTOR: u32 = 10;
/// …plus this, so a mutant whose tests take milliseconds still survives a scheduling hiccup.
pub const MUTATE_TIMEOUT_SLACK: Duration = Duration::from_secs(2);
/// What the limit of a mutant run in a fork of a collected session counts: the same rule on
/// its covering tests alone, since the fork pays no start-up or collection. Part of the
/// mutant cache's key, as the rest of the rule is.
pub const FORKED_LIMIT_RULE: &str = "a fork's limit counts its tests alone";

/// The limit one mutant runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MutantTimeout {
    /// The mutant run's wall-clock limit.
    pub limit: Duration,
    /// The budget left, not the mutant's own allowance, set the limit: hitting it means the
    /// budget cut the mutant short, not that the mutant hangs.
    pub set_by_budget: bool,
}

/// Why a mutant has no verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotRunReason {
    /// Less than [`MIN_TIME_TO_START`] of the budget was left when its turn came.
    BudgetSpent {
        /// The budget left at its turn.
        left: Duration,
    },
    /// It ran into the end of the budget.
    CutShort {
        /// How long it ran before the budget ended.
        after: Duration,
    },
    /// The sandbox or the queue failed; says nothing about the tests.
    Infrastructure {
        /// What the sandbox or queue reported.
        message: String,
    },
    /// The engine never reported a result for it.
    NoResult,
    /// The run executed no test at all (every case skipped): nothing observed the mutant.
    NoTestRan,
}

impl fmt::Display for NotRunReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BudgetSpent { left } => write!(
                f,
                "only {}s of the mutation budget left, under the {}s a mutant needs to start",
                left.as_secs(),
                MIN_TIME_TO_START.as_secs()
            ),
            Self::CutShort { after } => {
                write!(
                    f,
                    "cut short by the mutation budget after {}s",
                    after.as_secs()
                )
            }
            Self::Infrastructure { message } => write!(f, "infrastructure failure: {message}"),
            Self::NoResult => f.write_str("no result was reported for this mutant"),
            Self::NoTestRan => f.write_str("the run executed zero tests"),
        }
    }
}

/// The limit for the next mutant: ten times the unmutated run, at least 60 s, never more than
/// the budget left; `Err` when less than 60 s is left, so the mutant is not started.
pub fn mutant_timeout(
    budget_left: Duration,
    unmutated: Duration,
) -> Result<MutantTimeout, NotRunReason> {
    let allowance = unmutated
        .saturating_mul(MUTANT_TIMEOUT_FACTOR)
        .max(MUTANT_TIMEOUT_FLOOR);
    within_budget(budget_left, allowance)
}

/// The limit for one mutant of `assay mutate`: ten times its expected cost plus 2 s, rounded up
/// to whole seconds (the job's limit is whole seconds), never more than the budget left; `Err`
/// when less than [`MIN_TIME_TO_START`] is left. Far tighter than the proof's rule, since a
/// whole-tree run has hundreds of mutants and each hang would otherwise cost a minute.
pub fn mutate_timeout(
    budget_left: Duration,
    expected: Duration,
) -> Result<MutantTimeout, NotRunReason> {
    let allowance = expected
        .saturating_mul(MUTATE_TIMEOUT_FACTOR)
        .saturating_add(MUTATE_TIMEOUT_SLACK);
    let allowance = Duration::from_secs(allowance.as_secs_f64().ceil() as u64);
    within_budget(budget_left, allowance)
}

/// A mutant's limit under the budget, whichever rule gave its `allowance`: the allowance,
/// or the budget left where that is less (the budget then set it); `Err` when less than
/// [`MIN_TIME_TO_START`] is left, so the mutant is not started.
fn within_budget(
    budget_left: Duration,
    allowance: Duration,
) -> Result<MutantTimeout, NotRunReason> {
    if budget_left < MIN_TIME_TO_START {
        return Err(NotRunReason::BudgetSpent { left: budget_left });
    }
    Ok(if allowance > budget_left {
        MutantTimeout {
            limit: budget_left,
            set_by_budget: true,
        }
    } else {
        MutantTimeout {
            limit: allowance,
            set_by_budget: false,
        }
    })
}

// The check's published record is common's: one definition for the engine, the CLI and the
// evidence (docs/FORMATS.md, `mutation_check`).
pub use assay_common::mutation_check::{MutantOutcome, MutantRecord, MutationCheck, Survivor};

/// Each survivor listed against each proving test (they all passed with it), test by test in
/// the order given, mutants in plan order.
pub fn survivors(records: &[MutantRecord], proving_tests: &[String]) -> Vec<Survivor> {
    let survived: Vec<&Mutant> = records
        .iter()
        .filter(|record| record.outcome == MutantOutcome::Survived)
        .map(|record| &record.mutant)
        .collect();
    proving_tests
        .iter()
        .flat_map(|test| {
            survived.iter().map(move |mutant| Survivor {
                test: test.clone(),
                mutant_id: mutant.id.clone(),
                path: mutant.path.to_string(),
                line: mutant.line,
                description: mutant.description.clone(),
                message: format!("{test} passes with {}", mutant.label()),
            })
        })
        .collect()
}

/// Joins a plan with its outcomes, given in plan order; a mutant without one is not run.
pub fn assemble_check(
    plan: MutationPlan,
    outcomes: Vec<MutantOutcome>,
    proving_tests: Vec<String>,
    budget: Duration,
    unmutated: Option<Duration>,
) -> MutationCheck {
    let mut outcomes = outcomes.into_iter();
    let mutants: Vec<MutantRecord> = plan
        .mutants
        .into_iter()
        .map(|mutant| MutantRecord {
            mutant,
            outcome: outcomes.next().unwrap_or_else(|| MutantOutcome::NotRun {
                reason: NotRunReason::NoResult.to_string(),
            }),
        })
        .collect();
    let count = |f: fn(&MutantOutcome) -> bool| mutants.iter().filter(|r| f(&r.outcome)).count();
    MutationCheck {
        budget_s: budget.as_secs(),
        unmutated_s: unmutated.map(|d| d.as_secs_f64()),
        killed: count(|o| matches!(o, MutantOutcome::Killed { .. })),
        survived: count(|o| matches!(o, MutantOutcome::Survived)),
        not_run: count(|o| matches!(o, MutantOutcome::NotRun { .. })),
        survivors: survivors(&mutants, &proving_tests),
        proving_tests,
        mutants,
        skipped: plan.skipped,
        excluded_files: plan.excluded_files,
        notes: Vec::new(),
    }
}
