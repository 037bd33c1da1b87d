//! The one scheduling loop over a [`JobQueue`]: jobs are submitted in plan order with at most
//! `budget` in flight, each result is matched to the job it answers, and what the caller does
//! with a job (set its limit, skip it, stop admitting) is asked through [`Hooks`]. The proof's
//! jobs, a suite's batches, mutants and single jobs all run through here.

use assay_common::JobId;
use assay_common::job::{JobResult, JobSpec};
use assay_transport::queue::{JobQueue, QueueError};
use std::collections::HashMap;
use std::time::Instant;

/// What to do with a job whose turn has come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Submit it (as the hook left it).
    Run,
    /// Do not submit it; the caller has recorded why. Later jobs still get their turn.
    Skip,
    /// Submit nothing more; jobs in flight still finish.
    Stop,
}

/// What to do after a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Keep submitting jobs as budget frees.
    Continue,
    /// Submit nothing more; jobs in flight still finish and their results are kept.
    StopAdmitting,
}

/// The caller's side of a dispatch. Every method has the default of a plain run.
pub trait Hooks: Send {
    /// Job `position` is about to be submitted: set its limit, or skip it, or stop.
    fn admit(&mut self, _position: usize, _spec: &mut JobSpec) -> Admit {
        Admit::Run
    }
    /// Submitting job `position` failed. `Err` ends the dispatch with it (the default); `Ok`
    /// goes on without that job (the caller records why).
    fn submit_failed(&mut self, _position: usize, error: QueueError) -> Result<(), QueueError> {
        Err(error)
    }
    /// Job `position` finished with `result` (`done` results so far, this one included).
    fn finished(
        &mut self,
        _position: usize,
        _done: usize,
        _spec: &JobSpec,
        _result: &JobResult,
    ) -> Flow {
        Flow::Continue
    }
}

/// A plain run: every job, no limits changed.
pub struct RunAll;
impl Hooks for RunAll {}

/// What a dispatch ended with: a result per job in plan order (none for a job that was skipped,
/// never submitted, or still running at the deadline) and how many were still running then.
#[derive(Debug)]
pub struct Dispatched {
    /// One entry per planned job, in plan order; `None` for a job skipped, never submitted or cut off.
    pub results: Vec<Option<JobResult>>,
    /// How many jobs were still running when the deadline stopped the wait.
    pub cut_off_by_deadline: usize,
}

/// Runs `jobs` on `queue`, at most `budget` at once, in plan order. A result is taken only for
/// a job submitted in this dispatch, with that job's id and index, once; anything else is
/// dropped with a warning (a stray or repeated delivery can never take a job's slot). When the
/// queue's result stream closes with jobs in flight (a cancelled proof, a stopped fleet link)
/// the dispatch fails with [`QueueError::Closed`]; at `deadline` it stops waiting and returns
/// what came.
pub async fn dispatch(
    queue: &dyn JobQueue,
    jobs: &[JobSpec],
    budget: usize,
    deadline: Option<Instant>,
    hooks: &mut dyn Hooks,
) -> Result<Dispatched, QueueError> {
    let position: HashMap<&JobId, usize> = jobs
        .iter()
        .enumerate()
        .map(|(at, spec)| (&spec.job_id, at))
        .collect();
    let mut submitted: Vec<Option<JobSpec>> = vec![None; jobs.len()];
    let mut results: Vec<Option<JobResult>> = vec![None; jobs.len()];
    let (mut next, mut in_flight, mut done) = (0, 0, 0);
    let mut admitting = true;
    loop {
        while admitting && in_flight < budget.max(1) && next < jobs.len() {
            let at = next;
            next += 1;
            let mut spec = jobs[at].clone();
            match hooks.admit(at, &mut spec) {
                Admit::Skip => continue,
                Admit::Stop => {
                    admitting = false;
                    break;
                }
                Admit::Run => {}
            }
            match queue.submit(spec.clone()).await {
                Ok(()) => {
                    submitted[at] = Some(spec);
                    in_flight += 1;
                }
                Err(e) => hooks.submit_failed(at, e)?,
            }
        }
        if in_flight == 0 {
            break;
        }
        let next_result = match deadline {
            Some(deadline) => {
                match tokio::time::timeout_at(deadline.into(), queue.next_result()).await {
                    Ok(result) => result,
                    Err(_) => {
                        tracing::warn!(in_flight, "stopped waiting for results at the deadline");
                        return Ok(Dispatched {
                            results,
                            cut_off_by_deadline: in_flight,
                        });
                    }
                }
            }
            None => queue.next_result().await,
        };
        let Some(result) = next_result else {
            return Err(QueueError::Closed {
                outstanding: in_flight,
            });
        };
        let Some(&at) = position.get(&result.job_id) else {
            tracing::warn!(job_id = %result.job_id, "dropping a result for a job outside the plan");
            continue;
        };
        let Some(spec) = &submitted[at] else {
            tracing::warn!(job_id = %result.job_id, "dropping a result for a job never submitted");
            continue;
        };
        if results[at].is_some() || spec.index != result.index {
            tracing::warn!(job_id = %result.job_id, index = result.index, "dropping a duplicate or misnumbered result");
            continue;
        }
        in_flight -= 1;
        done += 1;
        if hooks.finished(at, done, spec, &result) == Flow::StopAdmitting {
            admitting = false;
        }
        results[at] = Some(result);
    }
    Ok(Dispatched {
        results,
        cut_off_by_deadline: 0,
    })
}

/// Submits one job and waits for its result.
pub async fn run_one(queue: &dyn JobQueue, spec: &JobSpec) -> Result<JobResult, QueueError> {
    let mut done = dispatch(queue, std::slice::from_ref(spec), 1, None, &mut RunAll).await?;
    done.results
        .pop()
        .flatten()
        .ok_or(QueueError::Closed { outstanding: 1 })
}

#[cfg(test)]
mod tests {
    //! The dispatcher against a queue that answers as a hostile or broken peer would: strays,
    //! repeats and misnumbered results first, or nothing at all.
    use super::*;
    use assay_common::job::{JobKind, JobStatus, Side};
    use assay_common::outcome::ReportOutcome;
    use assay_common::runner::ReportFormat;
    use assay_common::{ProofId, TreeId, WorkerId};
    use async_trait::async_trait;
    use std::sync::Mutex;
    use std::time::Duration;

    fn job(proof: &ProofId, index: usize) -> JobSpec {
        JobSpec::new(
            proof,
            index,
            JobKind::Targeted,
            Side::Base,
            &TreeId("4b825dc642cb6eb9a060e54bf8d69288fbee4904".into()),
            vec!["pytest".into()],
            ReportFormat::JunitXml,
            30,
        )
    }

    fn result_for(job_id: JobId, index: u32, worker: &str) -> JobResult {
        JobResult {
            job_id,
            index,
            status: JobStatus::Completed { exit_code: 0 },
            report: ReportOutcome::Missing,
            artifacts: Vec::new(),
            duration_ms: 5,
            worker: WorkerId(worker.into()),
            sandbox: None,
        }
    }

    /// Answers each submitted job after delivering `noise` for it first; with `silent`, never.
    #[derive(Default)]
    struct ScriptedQueue {
        pending: Mutex<Vec<JobResult>>,
        in_flight: Mutex<(usize, usize)>,
        silent: bool,
    }

    #[async_trait]
    impl JobQueue for ScriptedQueue {
        async fn submit(&self, job: JobSpec) -> Result<(), QueueError> {
            let mut flight = self.in_flight.lock().unwrap();
            flight.0 += 1;
            flight.1 = flight.1.max(flight.0);
            let mut pending = self.pending.lock().unwrap();
            let stray_proof = ProofId("p-other".into());
            // Another proof's job at the same index, the right id at the wrong index, then
            // the real result twice.
            pending.push(result_for(
                JobId::for_index(&stray_proof, job.index as usize),
                job.index,
                "stray",
            ));
            pending.push(result_for(job.job_id.clone(), job.index + 100, "stray"));
            pending.push(result_for(job.job_id.clone(), job.index, "real"));
            pending.push(result_for(job.job_id.clone(), job.index, "stray"));
            Ok(())
        }

        async fn next_result(&self) -> Option<JobResult> {
            if self.silent {
                return std::future::pending().await;
            }
            let result = {
                let mut pending = self.pending.lock().unwrap();
                if pending.is_empty() {
                    return None;
                }
                pending.remove(0)
            };
            if result.worker.0 == "real" {
                self.in_flight.lock().unwrap().0 -= 1;
            }
            Some(result)
        }
    }

    #[tokio::test]
    async fn only_each_jobs_own_result_is_taken_and_the_budget_holds() {
        let proof = ProofId("p-dispatch".into());
        let jobs: Vec<JobSpec> = (0..5).map(|i| job(&proof, i)).collect();
        let queue = ScriptedQueue::default();
        let done = dispatch(&queue, &jobs, 2, None, &mut RunAll).await.unwrap();
        assert_eq!(done.cut_off_by_deadline, 0);
        for (at, result) in done.results.iter().enumerate() {
            let result = result.as_ref().expect("every job has its result");
            assert_eq!(result.job_id, jobs[at].job_id);
            assert_eq!(result.worker.0, "real", "job {at} took a stray");
        }
        assert!(
            queue.in_flight.lock().unwrap().1 <= 2,
            "more than the budget in flight"
        );
    }

    #[tokio::test]
    async fn skipped_and_stopped_jobs_are_never_submitted() {
        struct EveryOtherThenStop;
        impl Hooks for EveryOtherThenStop {
            fn admit(&mut self, at: usize, _: &mut JobSpec) -> Admit {
                match at {
                    3 => Admit::Stop,
                    at if at % 2 == 1 => Admit::Skip,
                    _ => Admit::Run,
                }
            }
        }
        let proof = ProofId("p-skip".into());
        let jobs: Vec<JobSpec> = (0..6).map(|i| job(&proof, i)).collect();
        let done = dispatch(
            &ScriptedQueue::default(),
            &jobs,
            1,
            None,
            &mut EveryOtherThenStop,
        )
        .await
        .unwrap();
        let ran: Vec<bool> = done.results.iter().map(Option::is_some).collect();
        assert_eq!(ran, [true, false, true, false, false, false]);
    }

    #[tokio::test]
    async fn a_queue_that_never_answers_is_cut_off_at_the_deadline() {
        let proof = ProofId("p-silent".into());
        let jobs: Vec<JobSpec> = (0..3).map(|i| job(&proof, i)).collect();
        let queue = ScriptedQueue {
            silent: true,
            ..ScriptedQueue::default()
        };
        let deadline = Instant::now() + Duration::from_millis(50);
        let done = dispatch(&queue, &jobs, 2, Some(deadline), &mut RunAll)
            .await
            .unwrap();
        assert_eq!(done.cut_off_by_deadline, 2);
        assert!(done.results.iter().all(Option::is_none));
    }

    #[tokio::test]
    async fn a_closed_result_stream_is_an_error_not_a_result() {
        struct Closed;
        #[async_trait]
        impl JobQueue for Closed {
            async fn submit(&self, _: JobSpec) -> Result<(), QueueError> {
                Ok(())
            }
            async fn next_result(&self) -> Option<JobResult> {
                None
            }
        }
        let proof = ProofId("p-closed".into());
        let error = run_one(&Closed, &job(&proof, 0)).await.unwrap_err();
        assert!(
            matches!(error, QueueError::Closed { outstanding: 1 }),
            "{error}"
        );
    }
}
