//! What `assay mutate` tells whoever follows it: the run's events and each verdict with the
//! rate and the time left.

use super::*;

/// What `assay mutate` tells whoever follows it, besides each job's result.
pub enum MutateEvent<'a> {
    /// `assay mutate`'s baseline ran: `to_run` of `mutants` will run; the rest are answered
    /// from the cache, do not compile in the schema, or have no test.
    Started {
        /// Mutants planned in all.
        mutants: usize,
        /// Mutants that will run: covered and not answered from the cache.
        to_run: usize,
        /// Answered from the cache: they neither run nor count in `to_run`.
        cached: usize,
        /// Settled as compile errors without a run (their code failed the schema's build).
        compile_errors: usize,
        /// Settled as no coverage without a run: no test reaches them.
        no_coverage: usize,
        /// How long the baseline run took.
        baseline: std::time::Duration,
    },
    /// One `assay mutate` mutant has its verdict (second runs that confirm a kill report none,
    /// so `total` never grows).
    MutantFinished(&'a MutantProgress<'a>),
    /// Every mutant has its verdict; `kills` of them (those their own session could not
    /// re-run: a collection error, a broken session) are confirmed by a run of their own.
    Confirming {
        /// The kills being confirmed.
        kills: usize,
    },
}

/// A follower of `assay mutate`: the proof's job events and the run's own.
pub trait MutateProgress: ProgressSink {
    /// Told of each mutation-run event as it happens; must not block the run for long.
    fn mutate_event(&self, event: MutateEvent<'_>);
}

/// What a progress line says about one finished mutant and the run so far.
#[derive(Clone, Debug)]
pub struct MutantProgress<'a> {
    /// Mutants with a verdict, those no test covers included; never more than `total`.
    pub done: usize,
    /// Every mutant of the plan.
    pub total: usize,
    /// The mutant that finished.
    pub mutant: &'a Mutant,
    /// Its verdict's status.
    pub status: Status,
    /// Why, when the status needs a reason.
    pub reason: Option<String>,
    /// How long its run took.
    pub duration: Duration,
    /// Kills (and timeouts) and survivors so far.
    pub killed: usize,
    /// Survivors so far.
    pub survived: usize,
    /// The remaining mutants at the rate so far; `None` before there is a rate.
    pub eta: Option<Duration>,
}

/// The counts behind the progress lines.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) done: usize,
    pub(super) ran: usize,
    pub(super) killed: usize,
    pub(super) survived: usize,
    /// When (since the mutants started) each of the last [`RATE_WINDOW`] verdicts came.
    pub(super) recent: std::collections::VecDeque<Duration>,
}

/// Verdicts the ETA's rate is measured over: the first mutants (the costliest when the budget
/// allows, the whole-suite runs of import-time code, a warming server pool) are slower than
/// the rest, so the rate of the whole run so far overstates what is left by several times.
pub(super) const RATE_WINDOW: usize = 50;

impl Tally {
    pub(super) fn record<'a>(
        &mut self,
        judged: &Judged,
        mutant: &'a Mutant,
        total: usize,
        to_run: usize,
        elapsed: Duration,
    ) -> MutantProgress<'a> {
        self.done = (self.done + 1).min(total);
        self.ran += 1;
        match judged.verdict.status {
            Status::Killed | Status::Timeout => self.killed += 1,
            Status::Survived => self.survived += 1,
            _ => {}
        }
        let left = to_run.saturating_sub(self.ran);
        // Wall time per verdict over the window (which already reflects the slots running in
        // parallel); before the window fills, over the run so far.
        let (span, count) = match self.recent.front() {
            Some(oldest) if self.recent.len() == RATE_WINDOW => {
                (elapsed.saturating_sub(*oldest), RATE_WINDOW)
            }
            _ => (elapsed, self.ran),
        };
        if self.recent.len() == RATE_WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(elapsed);
        let eta = (count > 0).then(|| span.mul_f64(left as f64 / count as f64));
        MutantProgress {
            done: self.done,
            total,
            mutant,
            status: judged.verdict.status,
            reason: judged.verdict.status_reason.clone(),
            duration: judged
                .verdict
                .duration_s
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .unwrap_or_default(),
            killed: self.killed,
            survived: self.survived,
            eta,
        }
    }
}
