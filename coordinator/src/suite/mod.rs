//! `assay test`: a whole suite collected into cases, sharded into jobs, run through the same
//! job queue as proofs under the jobs budget and the halt, and reassembled in plan order. The
//! pure parts (selection, sharding, audit, ledger, history) are submodules with table tests.

pub mod audit;
pub mod halt;
pub mod history;
pub mod ledger;
pub mod select;
pub mod shard;

use crate::queue::{JobQueue, QueueError};
use assay_common::job::{JobKind, JobResult, JobSpec, JobStatus, Side};
use assay_common::runner::RunnerKind;
use assay_common::suite::{SuiteCase, parse_pytest_collection, parse_unittest_collection};
use assay_common::{JobId, ProofId, TreeId};
use assay_worker::store::ArtifactStore;
use halt::AdmissionGate;

/// Plans one job per shard; shard members are indices into `cases`.
pub fn plan_suite(
    run_id: &ProofId,
    runner: RunnerKind,
    command_prefix: &[String],
    tree: &TreeId,
    cases: &[SuiteCase],
    shards: &[Vec<usize>],
    timeout_secs: u64,
) -> Vec<JobSpec> {
    shards
        .iter()
        .enumerate()
        .map(|(index, members)| {
            let ids: Vec<String> = members.iter().map(|&i| cases[i].id.clone()).collect();
            JobSpec {
                proof_id: run_id.clone(),
                job_id: JobId::for_index(run_id, index),
                index: index as u32,
                kind: JobKind::Suite,
                side: Side::Candidate,
                tree: tree.clone(),
                command: runner.case_command(command_prefix, &ids),
                report: runner.report_format(),
                selected_tests: ids,
                timeout_secs,
                env: Vec::new(),
                edit: None,
            }
        })
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[error(
        "`assay test` cannot collect {runner} cases yet (hint: it runs pytest and unittest suites)"
    )]
    Unsupported { runner: RunnerKind },
    #[error("collecting {runner} cases failed in the infrastructure lane: {message}")]
    Infrastructure { runner: RunnerKind, message: String },
    #[error("collecting {runner} cases failed ({how}){detail}")]
    Guest {
        runner: RunnerKind,
        how: String,
        detail: String,
    },
    #[error("failed to read the collection output of {runner}")]
    Store {
        runner: RunnerKind,
        #[source]
        source: assay_worker::store::StoreError,
    },
}

impl CollectError {
    pub fn is_infrastructure(&self) -> bool {
        !matches!(self, Self::Guest { .. } | Self::Unsupported { .. })
    }
}

/// Collects the suite's cases by running the runner's collection command as a job on the
/// queue, so collection happens wherever the tests would run.
pub async fn collect(
    run_id: &ProofId,
    runner: RunnerKind,
    command_prefix: &[String],
    tree: &TreeId,
    timeout_secs: u64,
    queue: &dyn JobQueue,
    store: &dyn ArtifactStore,
) -> Result<Vec<SuiteCase>, CollectError> {
    let collect_id = ProofId(format!("{run_id}-collect"));
    let spec = JobSpec {
        proof_id: collect_id.clone(),
        job_id: JobId::for_index(&collect_id, 0),
        index: 0,
        kind: JobKind::Suite,
        side: Side::Candidate,
        tree: tree.clone(),
        command: runner
            .collect_command(command_prefix)
            .ok_or(CollectError::Unsupported { runner })?,
        report: runner.report_format(),
        selected_tests: Vec::new(),
        timeout_secs,
        env: Vec::new(),
        edit: None,
    };
    queue.submit(spec).await?;
    let result = queue
        .next_result()
        .await
        .ok_or(QueueError::Closed { outstanding: 1 })?;
    let artifact = |name: &str| {
        result
            .artifacts
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.key.clone())
    };
    let read = |key: Option<String>| async move {
        match key {
            None => Ok(None),
            Some(key) => store
                .get(&key)
                .await
                .map_err(|source| CollectError::Store { runner, source }),
        }
    };
    let exit_code = match &result.status {
        JobStatus::Completed { exit_code } => *exit_code,
        JobStatus::TimedOut => {
            return Err(CollectError::Guest {
                runner,
                how: format!("timed out after {timeout_secs}s"),
                detail: String::new(),
            });
        }
        JobStatus::Infrastructure { message, .. } => {
            return Err(CollectError::Infrastructure {
                runner,
                message: message.clone(),
            });
        }
        JobStatus::Cancelled => {
            return Err(CollectError::Infrastructure {
                runner,
                message: "cancelled".into(),
            });
        }
    };
    let stdout = read(artifact("stdout")).await?.unwrap_or_default();
    let stdout = String::from_utf8_lossy(&stdout).into_owned();
    let tail = |text: &str| {
        let lines: Vec<&str> = text.lines().rev().take(15).collect();
        let joined: Vec<&str> = lines.into_iter().rev().collect();
        format!(":\n{}", joined.join("\n"))
    };
    match runner {
        RunnerKind::Pytest => match exit_code {
            0 => Ok(parse_pytest_collection(&stdout)),
            // pytest's "no tests collected".
            5 => Ok(Vec::new()),
            code => Err(CollectError::Guest {
                runner,
                how: format!("exit {code}"),
                detail: tail(&stdout),
            }),
        },
        RunnerKind::Unittest => {
            let Some(report) = read(artifact("report")).await? else {
                let stderr = read(artifact("stderr")).await?.unwrap_or_default();
                return Err(CollectError::Guest {
                    runner,
                    how: format!("exit {exit_code}, no collection report"),
                    detail: tail(&String::from_utf8_lossy(&stderr)),
                });
            };
            parse_unittest_collection(&report).map_err(|e| CollectError::Guest {
                runner,
                how: format!("exit {exit_code}"),
                detail: format!(": {e}"),
            })
        }
        other => Err(CollectError::Unsupported { runner: other }),
    }
}

/// What a reporter hears while a suite runs.
pub enum SuiteEvent<'a> {
    JobFinished {
        spec: &'a JobSpec,
        result: &'a JobResult,
    },
    Stopped {
        reason: &'a StopReason,
    },
}

pub trait SuiteProgress: Send + Sync {
    fn event(&self, event: SuiteEvent<'_>);
}

/// Why admission stopped before every job was admitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    Halted(String),
    Infrastructure { job: u32, message: String },
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Halted(reason) => write!(f, "halted: {reason}"),
            Self::Infrastructure { job, message } => {
                write!(f, "infrastructure failure in job {job}: {message}")
            }
        }
    }
}

/// Results by plan index (`None`: never admitted) and why admission stopped, if it did.
#[derive(Debug)]
pub struct SuiteRun {
    pub results: Vec<Option<JobResult>>,
    pub stopped: Option<StopReason>,
}

/// Runs `jobs` with at most `budget` in flight, asking `gate` before admitting each one. After
/// an infrastructure failure or a halt nothing new is admitted; jobs already running finish and
/// their results are kept. Results come back indexed by plan position, whatever the order.
pub async fn run_admitted(
    jobs: &[JobSpec],
    queue: &dyn JobQueue,
    budget: usize,
    gate: &dyn AdmissionGate,
    progress: &dyn SuiteProgress,
) -> Result<SuiteRun, QueueError> {
    let mut results: Vec<Option<JobResult>> = vec![None; jobs.len()];
    let mut stopped: Option<StopReason> = None;
    let (mut next, mut in_flight) = (0, 0);
    loop {
        while stopped.is_none() && in_flight < budget.max(1) && next < jobs.len() {
            if let Some(reason) = gate.stop_reason() {
                let reason = StopReason::Halted(reason);
                progress.event(SuiteEvent::Stopped { reason: &reason });
                stopped = Some(reason);
                break;
            }
            queue.submit(jobs[next].clone()).await?;
            next += 1;
            in_flight += 1;
        }
        if in_flight == 0 {
            break;
        }
        let result = queue.next_result().await.ok_or(QueueError::Closed {
            outstanding: in_flight,
        })?;
        let index = result.index as usize;
        let Some(slot) = results.get_mut(index) else {
            tracing::warn!(index, "dropping a result for a job outside the plan");
            continue;
        };
        if slot.is_some() || jobs[index].job_id != result.job_id {
            tracing::warn!(job_id = %result.job_id, "dropping a duplicate or foreign result");
            continue;
        }
        in_flight -= 1;
        progress.event(SuiteEvent::JobFinished {
            spec: &jobs[index],
            result: &result,
        });
        if let JobStatus::Infrastructure { message, .. } = &result.status
            && stopped.is_none()
        {
            let reason = StopReason::Infrastructure {
                job: result.index,
                message: message.clone(),
            };
            progress.event(SuiteEvent::Stopped { reason: &reason });
            stopped = Some(reason);
        }
        *slot = Some(result);
    }
    Ok(SuiteRun { results, stopped })
}
