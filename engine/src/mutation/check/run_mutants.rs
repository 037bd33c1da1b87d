//! The check's and the campaign's mutant jobs dispatched with a bounded number in flight, each
//! admitted under the budget left and judged as its result comes.

use crate::dispatch::{Admit, Flow, Hooks, dispatch};
use crate::mutation::mutants::NotRunReason;
use crate::mutation::mutants::budget::MutantTimeout;
use assay_common::job::{JobResult, JobSpec};
use assay_transport::error_chain::error_chain;
use assay_transport::queue::{JobQueue, QueueError};
use std::time::Instant;

/// Runs `specs` on `queue` with at most `slots` in flight and returns one outcome per spec in
/// plan order. `admit` sets a job's limit when its turn comes (the budget left decides it) or
/// says why it does not start; `judge` turns a result into an outcome. A result stream that
/// closes with jobs in flight (a cancelled proof) is an error, never a set of outcomes; a
/// mutant still running at `deadline` has no result.
#[allow(clippy::too_many_arguments)]
pub async fn run_mutants<T: Clone + Send>(
    queue: &dyn JobQueue,
    specs: &[JobSpec],
    slots: usize,
    deadline: Option<Instant>,
    admit: impl FnMut(&mut JobSpec) -> Result<MutantTimeout, NotRunReason> + Send,
    judge: impl Fn(&JobResult, MutantTimeout) -> T + Send,
    not_run: impl Fn(NotRunReason) -> T + Send,
    on_finished: impl Fn(usize, &JobSpec, &JobResult) + Send,
) -> Result<Vec<T>, QueueError> {
    struct Mutants<T, A, J, N, F> {
        outcomes: Vec<Option<T>>,
        limits: Vec<Option<MutantTimeout>>,
        admit: A,
        judge: J,
        not_run: N,
        on_finished: F,
    }
    impl<T, A, J, N, F> Hooks for Mutants<T, A, J, N, F>
    where
        T: Send,
        A: FnMut(&mut JobSpec) -> Result<MutantTimeout, NotRunReason> + Send,
        J: Fn(&JobResult, MutantTimeout) -> T + Send,
        N: Fn(NotRunReason) -> T + Send,
        F: Fn(usize, &JobSpec, &JobResult) + Send,
    {
        fn admit(&mut self, at: usize, spec: &mut JobSpec) -> Admit {
            match (self.admit)(spec) {
                Ok(timeout) => {
                    self.limits[at] = Some(timeout);
                    Admit::Run
                }
                Err(reason) => {
                    self.outcomes[at] = Some((self.not_run)(reason));
                    Admit::Skip
                }
            }
        }
        fn submit_failed(&mut self, at: usize, error: QueueError) -> Result<(), QueueError> {
            self.outcomes[at] = Some((self.not_run)(NotRunReason::Infrastructure {
                message: error_chain(&error),
            }));
            Ok(())
        }
        fn finished(&mut self, at: usize, done: usize, spec: &JobSpec, result: &JobResult) -> Flow {
            if let Some(timeout) = self.limits[at] {
                self.outcomes[at] = Some((self.judge)(result, timeout));
            }
            (self.on_finished)(done - 1, spec, result);
            Flow::Continue
        }
    }
    let mut mutants = Mutants {
        outcomes: vec![None; specs.len()],
        limits: vec![None; specs.len()],
        admit,
        judge,
        not_run,
        on_finished,
    };
    dispatch(queue, specs, slots, deadline, &mut mutants).await?;
    let not_run = &mutants.not_run;
    Ok(mutants
        .outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| not_run(NotRunReason::NoResult)))
        .collect())
}
