//! `assay test`: a whole suite collected into cases, sharded into jobs, run through the same
//! job queue as proofs under the jobs budget and the halt, and reassembled in plan order. The
//! pure parts (selection, sharding, audit, ledger, history) are submodules with table tests.
//! [`run()`] is one whole run as a library call, from its request to its report.

pub mod audit;
pub mod case_cache;
pub mod conclude;
pub mod drive;
pub mod driven;
pub mod gates;
pub mod halt;
pub mod history;
pub mod ledger;
pub mod order;
pub mod reach;
pub mod reads;
pub mod run;
pub mod runners;
pub mod scope;
pub mod select;
pub mod shard;
pub mod split;

pub use run::{SuiteError, SuiteOutcome, SuiteRan, SuiteRequest, run};

use crate::dispatch::{Admit, Flow, Hooks, dispatch, run_one};
use crate::source::SourceError;
use assay_common::job::{JobKind, JobResult, JobSpec, JobStatus, Side};
use assay_common::manifest::ManifestJob;
use assay_common::runner::{ListingFormat, ReportFormat};
use assay_common::suite::{
    SuiteCase, parse_go_list, parse_pytest_collection, parse_unittest_collection,
};
use assay_common::{ProofId, TreeId};
use assay_transport::queue::{JobQueue, QueueError};
use assay_transport::store::{ArtifactStore, read_named};
use halt::AdmissionGate;
use runners::{Listing, SuiteRunner, SuiteSetup};
use std::path::Path;

/// Plans one job per shard; shard members are indices into `cases`. A manifest suite's job
/// carries its rows (from `corpus`, the whole collected corpus) for the worker to run and judge.
pub fn plan_suite(
    run_id: &ProofId,
    setup: &SuiteSetup,
    tree: &TreeId,
    (cases, corpus): (&[SuiteCase], Option<&ManifestJob>),
    shards: &[Vec<usize>],
    timeout_secs: u64,
) -> Vec<JobSpec> {
    shards
        .iter()
        .enumerate()
        .map(|(index, members)| {
            let members: Vec<&SuiteCase> = members.iter().map(|&i| &cases[i]).collect();
            let report = match corpus {
                Some(corpus) => {
                    let rows: Vec<String> = members.iter().map(|c| c.name.clone()).collect();
                    ReportFormat::ManifestCases(ManifestJob::select(
                        &corpus.corpus,
                        &corpus.cases,
                        &rows,
                    ))
                }
                None => setup.report_format(),
            };
            JobSpec {
                selected_tests: members.iter().map(|c| c.id.clone()).collect(),
                ..JobSpec::new(
                    run_id,
                    index,
                    JobKind::Suite,
                    Side::Candidate,
                    tree,
                    setup.case_command(&members),
                    report,
                    timeout_secs,
                )
            }
        })
        .collect()
}

/// The first job of run `run_id` over `setup`'s suite on `tree`, running `command` with no
/// cases selected: the listing job, and the shape every case's cache key is taken over.
pub(crate) fn unselected_job(
    run_id: &ProofId,
    setup: &SuiteSetup,
    tree: &TreeId,
    command: Vec<String>,
    timeout_secs: u64,
) -> JobSpec {
    JobSpec::new(
        run_id,
        0,
        JobKind::Suite,
        Side::Candidate,
        tree,
        command,
        setup.report_format(),
        timeout_secs,
    )
}

/// The last lines of a collecting session's output, as a [`CollectError::Guest`] detail.
pub(crate) fn output_tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().rev().take(15).collect();
    let joined: Vec<&str> = lines.into_iter().rev().collect();
    format!(":\n{}", joined.join("\n"))
}

/// Why a suite's cases could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// The listing job could not be submitted or its result never came.
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// The runner or its configuration is one `assay test` cannot list.
    #[error("`assay test` cannot run {runner} suites: {why}")]
    Unsupported {
        /// The suite's runner.
        runner: SuiteRunner,
        /// What about it cannot be listed.
        why: String,
    },
    /// The listing job failed in the infrastructure (a sandbox or worker failure).
    #[error("collecting {runner} cases failed in the infrastructure lane: {message}")]
    Infrastructure {
        /// The suite's runner.
        runner: SuiteRunner,
        /// What the infrastructure reported.
        message: String,
    },
    /// The runner itself failed to list the cases (an import error, a syntax error).
    #[error("collecting {runner} cases failed ({how}){detail}")]
    Guest {
        /// The suite's runner.
        runner: SuiteRunner,
        /// How the listing job ended (its exit or status).
        how: String,
        /// The tail of its output, ready to append to the message.
        detail: String,
    },
    /// The listing job's output could not be read from the store.
    #[error("failed to read the collection output of {runner}")]
    Store {
        /// The suite's runner.
        runner: SuiteRunner,
        /// The store's failure.
        #[source]
        source: Box<assay_transport::store::ArtifactError>,
    },
    /// A manifest suite's corpus could not be read or planned.
    #[error("collecting {runner} cases failed")]
    Corpus {
        /// The suite's runner.
        runner: SuiteRunner,
        /// The engine's failure.
        #[source]
        source: crate::proof::EngineError,
    },
    /// The tree could not be read while listing.
    #[error("failed to read the tree while collecting {runner} cases")]
    Source {
        /// The suite's runner.
        runner: SuiteRunner,
        /// git's failure.
        #[source]
        source: SourceError,
    },
}

impl CollectError {
    /// Whether the failure is the infrastructure's (retry elsewhere), not the project's.
    pub fn is_infrastructure(&self) -> bool {
        match self {
            Self::Guest { .. } | Self::Unsupported { .. } => false,
            Self::Corpus { source, .. } => !source.is_usage(),
            _ => true,
        }
    }
}

/// A suite's cases in plan order and, for a manifest suite, its whole corpus: the rows jobs
/// carry to the worker.
#[derive(Debug, Default)]
pub struct Collection {
    /// Every case, in plan order.
    pub cases: Vec<SuiteCase>,
    /// A manifest suite's whole corpus; `None` for any other runner.
    pub corpus: Option<ManifestJob>,
    /// How long the listing job took: a runner session's start-up and collection, which every
    /// job of the suite pays again before its first test.
    pub listing_s: Option<f64>,
}

/// Collects the suite's cases: by running the runner's listing as a job on the queue (so
/// collection happens wherever the tests would run), or from the tree where the cases are
/// files, manifest rows or the whole command.
pub async fn collect(
    run_id: &ProofId,
    setup: &SuiteSetup,
    repo: &Path,
    tree: &TreeId,
    timeout_secs: u64,
    queue: &dyn JobQueue,
    store: &dyn ArtifactStore,
) -> Result<Collection, CollectError> {
    setup.check()?;
    let runner = setup.runner;
    let (argv, listing) = match setup.listing() {
        Listing::Tree => {
            let (cases, corpus) = setup.tree_cases(repo, tree)?;
            return Ok(Collection {
                cases,
                corpus,
                listing_s: None,
            });
        }
        Listing::Job(argv, listing) => (argv, listing),
    };
    let spec = unselected_job(
        &ProofId(format!("{run_id}-collect")),
        setup,
        tree,
        argv,
        timeout_secs,
    );
    let result = run_one(queue, &spec).await?;
    let read = |name: &'static str| {
        let result = &result;
        async move {
            read_named(store, result, name)
                .await
                .map_err(|source| CollectError::Store {
                    runner,
                    source: Box::new(source),
                })
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
    let stdout = read("stdout").await?.unwrap_or_default();
    let stdout = String::from_utf8_lossy(&stdout).into_owned();
    let failed = |how: String, output: &str| CollectError::Guest {
        runner,
        how,
        detail: output_tail(output),
    };
    let cases = match listing {
        ListingFormat::PytestNodeIds => match exit_code {
            0 => parse_pytest_collection(&stdout),
            // pytest's "no tests collected".
            5 => Vec::new(),
            code => {
                // A conftest that fails to import is reported on stderr, not stdout.
                let stderr = read("stderr").await?.unwrap_or_default();
                let output = match stdout.trim() {
                    "" => String::from_utf8_lossy(&stderr).into_owned(),
                    _ => stdout,
                };
                return Err(failed(format!("exit {code}"), &output));
            }
        },
        ListingFormat::UnittestCases => {
            let Some(report) = read("report").await? else {
                let stderr = read("stderr").await?.unwrap_or_default();
                return Err(failed(
                    format!("exit {exit_code}, no collection report"),
                    &String::from_utf8_lossy(&stderr),
                ));
            };
            parse_unittest_collection(&report).map_err(|e| CollectError::Guest {
                runner,
                how: format!("exit {exit_code}"),
                detail: format!(": {e}"),
            })?
        }
        ListingFormat::GoTestList => {
            if exit_code != 0 {
                let stderr = read("stderr").await?.unwrap_or_default();
                let output = format!("{stdout}{}", String::from_utf8_lossy(&stderr));
                return Err(failed(format!("exit {exit_code}"), &output));
            }
            runners::go_cases(runner, repo, tree, &parse_go_list(&stdout))?
        }
    };
    Ok(Collection {
        cases,
        corpus: None,
        listing_s: Some(result.duration_ms as f64 / 1000.0),
    })
}

/// What a reporter hears while a suite runs.
pub enum SuiteEvent<'a> {
    /// One job's result arrived.
    JobFinished {
        /// The job that finished.
        spec: &'a JobSpec,
        /// What it reported.
        result: &'a JobResult,
    },
    /// Admission stopped before every job was admitted.
    Stopped {
        /// Why it stopped.
        reason: &'a StopReason,
    },
}

/// Whoever follows a suite as it runs (a terminal display, a log).
pub trait SuiteProgress: Send + Sync {
    /// Told of each event as it happens; must not block the run for long.
    fn event(&self, event: SuiteEvent<'_>);
}

/// Why admission stopped before every job was admitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// A halt rule fired; what it said.
    Halted(String),
    /// A job failed in the infrastructure lane.
    Infrastructure {
        /// The plan index of the job that failed.
        job: u32,
        /// What the infrastructure reported.
        message: String,
    },
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
    /// One entry per planned job, by plan index; `None`: never admitted.
    pub results: Vec<Option<JobResult>>,
    /// Why admission stopped early; `None`: every job was admitted.
    pub stopped: Option<StopReason>,
}

/// Runs `jobs` with at most `budget` in flight, asking `gate` before admitting each one. After
/// an infrastructure failure or a halt nothing new is admitted; jobs already running finish and
/// their results are kept. Results come back indexed by plan position, whatever the order; the
/// plan's indices may start past zero (a later round of the same run), counted from the first.
pub async fn run_admitted(
    jobs: &[JobSpec],
    queue: &dyn JobQueue,
    budget: usize,
    gate: &dyn AdmissionGate,
    progress: &dyn SuiteProgress,
) -> Result<SuiteRun, QueueError> {
    struct Admitted<'a> {
        gate: &'a dyn AdmissionGate,
        progress: &'a dyn SuiteProgress,
        stopped: Option<StopReason>,
    }
    impl Admitted<'_> {
        fn stop(&mut self, reason: StopReason) {
            self.progress.event(SuiteEvent::Stopped { reason: &reason });
            self.stopped = Some(reason);
        }
    }
    impl Hooks for Admitted<'_> {
        fn admit(&mut self, _: usize, _: &mut JobSpec) -> Admit {
            match self.gate.stop_reason() {
                Some(reason) => {
                    self.stop(StopReason::Halted(reason));
                    Admit::Stop
                }
                None => Admit::Run,
            }
        }
        fn finished(&mut self, _: usize, _: usize, spec: &JobSpec, result: &JobResult) -> Flow {
            self.progress
                .event(SuiteEvent::JobFinished { spec, result });
            match &result.status {
                JobStatus::Infrastructure { message, .. } if self.stopped.is_none() => {
                    self.stop(StopReason::Infrastructure {
                        job: result.index,
                        message: message.clone(),
                    });
                    Flow::StopAdmitting
                }
                _ => Flow::Continue,
            }
        }
    }
    let mut admitted = Admitted {
        gate,
        progress,
        stopped: None,
    };
    let results = dispatch(queue, jobs, budget, None, &mut admitted)
        .await?
        .results;
    let stopped = admitted.stopped;
    Ok(SuiteRun { results, stopped })
}
