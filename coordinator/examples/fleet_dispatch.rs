//! Dispatch throughput of the fleet, for `bench/fleet-throughput.sh`: no-op jobs go coordinator
//! → worker → result through the real services, against raw JetStream doing the same exchange
//! (publish a job-sized message, fetch it, publish a result-sized message, ack, fetch the result,
//! ack) with the same message sizes, slots and in-flight window: the limit Assay can approach.
//!
//! `cargo run --release -p assay-coordinator --example fleet_dispatch -- NATS_URL JOBS SLOTS`
//! prints `fleet SLOTS JOBS SECONDS JOBS_PER_S` and `raw …` lines. Use a fresh server per run.

use assay_common::criteria::parse_criteria;
use assay_common::fleet::{ProofSubmission, RevisionWire, Subjects};
use assay_common::job::{JobKind, JobResult, JobSpec, JobStatus, Side};
use assay_common::outcome::ReportOutcome;
use assay_common::runner::{ReportFormat, RunnerKind};
use assay_common::service_config::ServiceConfig;
use assay_common::{TreeId, WorkerId, wire};
use assay_coordinator::client::{self, FleetProgress};
use assay_coordinator::{self as coordinator, CoordinatorConfig};
use assay_engine::proof;
use assay_worker::service::{self as worker, JobRunner, WorkerConfig};
use async_nats::jetstream::{self, consumer, stream};
use futures::StreamExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The proof's in-flight window: the default `coordinator.max_jobs_per_proof`.
const WINDOW: usize = 64;
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Answers every job at once, as a test command that does nothing would.
struct Noop(WorkerId);

#[async_trait::async_trait]
impl JobRunner for Noop {
    async fn run(&self, spec: &JobSpec) -> JobResult {
        done(spec, &self.0)
    }
}

fn done(spec: &JobSpec, worker: &WorkerId) -> JobResult {
    JobResult {
        job_id: spec.job_id.clone(),
        index: spec.index,
        status: JobStatus::Completed { exit_code: 0 },
        report: ReportOutcome::Missing,
        artifacts: Vec::new(),
        duration_ms: 0,
        worker: worker.clone(),
        sandbox: None,
    }
}

/// A proof of `jobs` stability repeats on the empty tree: realistic messages, nothing to run.
fn submission(jobs: usize) -> Result<ProofSubmission, Error> {
    let proof_id = proof::new_proof_id();
    let tree = TreeId(EMPTY_TREE.into());
    let revision = |requested: &str| RevisionWire {
        requested: requested.into(),
        commit: None,
        tree: tree.clone(),
    };
    let specs = (0..jobs)
        .map(|index| JobSpec {
            selected_tests: vec!["tests.test_pricing.PriceTests.test_discount_is_applied".into()],
            ..JobSpec::new(
                &proof_id,
                index,
                JobKind::Stability,
                if index % 2 == 0 {
                    Side::Base
                } else {
                    Side::Candidate
                },
                &tree,
                ["python3", "{adapter}", "--report", "{report}", "tests"]
                    .map(String::from)
                    .to_vec(),
                ReportFormat::UnittestJson,
                600,
            )
        })
        .collect();
    Ok(ProofSubmission {
        proof_id,
        repository: "/srv/checkout/pricing".into(),
        runner: RunnerKind::Unittest,
        criteria: parse_criteria(&["test: test_discount_is_applied".to_owned()])?,
        base: revision("main"),
        candidate: revision("HEAD"),
        base_tree: tree.clone(),
        changed: Vec::new(),
        changed_test_files: Vec::new(),
        jobs: specs,
        refused_files: Vec::new(),
        jobs_budget: WINDOW as u32,
        test_command: None,
        timeout_secs: 600,
        mutation: None,
        cache: Default::default(),
        diff_hunks: Vec::new(),
        diff_sources: Vec::new(),
        harness: Default::default(),
        allow_test_only: false,
        dependencies: Vec::new(),
    })
}

struct Quiet;
impl FleetProgress for Quiet {
    fn job_finished(&mut self, _: u32, _: u32, _: &JobResult, _: bool) {}
    fn halted(&mut self, _: &str) {}
    fn resumed(&mut self) {}
}

fn service_config(url: &str) -> ServiceConfig {
    let mut config = ServiceConfig::default();
    config.nats.url = url.into();
    config.store.url = "memory://".into();
    config.http.listen = Some(String::new());
    config
}

async fn fleet(url: &str, jobs: usize, slots: u32) -> Result<Duration, Error> {
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let until_stopped = |mut stop: tokio::sync::watch::Receiver<bool>| async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    let mut coordinator_config = CoordinatorConfig::new(service_config(url));
    // LOOKAHEAD=N tries another admission lookahead (jobs queued beyond idle worker slots).
    if let Some(lookahead) = std::env::var("LOOKAHEAD").ok().and_then(|v| v.parse().ok()) {
        coordinator_config.tuning.lookahead = lookahead;
    }
    let coordinator = tokio::spawn(coordinator::serve(
        coordinator_config,
        until_stopped(stop.clone()),
    ));
    let mut config = WorkerConfig::new(service_config(url));
    config.service.worker.slots = slots;
    let parts = worker::WorkerParts {
        runner: Arc::new(Noop(config.worker_id.clone())),
        store: Arc::new(assay_transport::store::open_store("memory://", &[])?),
        metrics: Default::default(),
    };
    let worker = tokio::spawn(worker::serve_with(config, parts, until_stopped(stop)));
    let client = async_nats::connect(url).await?;
    let subjects = Subjects::new("assay");
    let submission = submission(jobs)?;
    // Wait for the coordinator to listen before timing.
    while client.request(subjects.cancel(), "".into()).await.is_err() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let started = Instant::now();
    // Shares nothing with the services' memory stores: every message here fits inline.
    let store = assay_transport::store::ObjectArtifactStore::open("memory://")?;
    let evidence =
        client::submit_and_wait(&client, &subjects, &store, &submission, &mut Quiet).await?;
    let took = started.elapsed();
    if evidence.jobs.len() != jobs {
        return Err(format!("{} of {jobs} results came back", evidence.jobs.len()).into());
    }
    let _ = stop_tx.send(true);
    coordinator.await??;
    worker.await??;
    Ok(took)
}

/// The same exchange on bare JetStream, with the fleet's message sizes.
async fn raw(url: &str, jobs: usize, slots: usize) -> Result<Duration, Error> {
    let sample = submission(1)?;
    let job_bytes = wire::encode("job", &sample.jobs[0])?.len();
    let result_bytes = wire::encode(
        "job result",
        &done(&sample.jobs[0], &WorkerId("raw".into())),
    )?
    .len();
    let client = async_nats::connect(url).await?;
    let js = jetstream::new(client);
    let mut consumers = Vec::new();
    for (name, subject) in [("RAW_JOBS", "raw.jobs.>"), ("RAW_RESULTS", "raw.results.>")] {
        let stream = js
            .get_or_create_stream(stream::Config {
                name: name.into(),
                subjects: vec![subject.into()],
                retention: stream::RetentionPolicy::WorkQueue,
                ..Default::default()
            })
            .await?;
        let consumer: consumer::PullConsumer = stream
            .get_or_create_consumer(
                name,
                consumer::pull::Config {
                    durable_name: Some(name.into()),
                    ack_policy: consumer::AckPolicy::Explicit,
                    ..Default::default()
                },
            )
            .await?;
        consumers.push(consumer);
    }
    let results = consumers.pop().ok_or("no results consumer")?;
    let jobs_consumer = consumers.pop().ok_or("no jobs consumer")?;
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..slots {
        let consumer = jobs_consumer.clone();
        let js = js.clone();
        let result = vec![b'r'; result_bytes];
        workers.spawn(async move {
            loop {
                let mut batch = consumer
                    .batch()
                    .max_messages(1)
                    .expires(Duration::from_secs(5))
                    .messages()
                    .await?;
                if let Some(message) = batch.next().await {
                    let message = message?;
                    js.publish("raw.results.p", result.clone().into())
                        .await?
                        .await?;
                    message.ack().await?;
                }
            }
            #[allow(unreachable_code, reason = "the loop ends by abort")]
            Ok::<(), Error>(())
        });
    }
    let job = vec![b'j'; job_bytes];
    let started = Instant::now();
    let mut in_flight = 0;
    let mut published = 0;
    let mut collected = 0;
    let mut results = results.messages().await?;
    while collected < jobs {
        while in_flight < WINDOW && published < jobs {
            js.publish("raw.jobs.p", job.clone().into()).await?.await?;
            published += 1;
            in_flight += 1;
        }
        let message = results.next().await.ok_or("results ended")??;
        message.ack().await?;
        in_flight -= 1;
        collected += 1;
    }
    let took = started.elapsed();
    workers.abort_all();
    Ok(took)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, jobs, slots] = args.as_slice() else {
        return Err("usage: fleet_dispatch NATS_URL JOBS SLOTS".into());
    };
    let jobs: usize = jobs.parse()?;
    let slots: u32 = slots.parse()?;
    let report = |mode: &str, took: Duration| {
        println!(
            "{mode} {slots} {jobs} {:.3} {:.0}",
            took.as_secs_f64(),
            jobs as f64 / took.as_secs_f64()
        );
    };
    report("raw", raw(url, jobs, slots as usize).await?);
    report("fleet", fleet(url, jobs, slots).await?);
    Ok(())
}
