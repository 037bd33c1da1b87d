//! Fleet mode against real services (`ClusterSandbox`): a JetStream server (`nats-server -js`)
//! and an S3-protocol server (`moto_server`) started on free 127.0.0.1 ports by each test, with
//! the coordinator and workers running in this process through their `serve` functions.
mod support;

use assay_common::evidence::Evidence;
use assay_common::fleet::{
    ProofRecord, ProofSubmission, Subjects, SubmitReply, keys, submission_key,
};
use assay_common::job::{ArtifactRef, JobResult, JobSpec};
use assay_common::{JobId, WorkerId, wire};
use assay_coordinator::client::{self, FleetProgress};

use assay_engine::progress::{ProgressSink, ProofEvent};
use assay_engine::proof::{self, PreparedProof};
use assay_transport::nats::QueueTuning;
use assay_transport::store::{ArtifactStore, ObjectArtifactStore};
use assay_transport::tree::GitTreeSource;
use assay_worker::in_process::InProcessQueue;
use assay_worker::job_context::JobContext;
use assay_worker::sandbox::process::ProcessSandbox;
use assay_worker::service::{JobRunner, WorkerConfig};
use futures::StreamExt;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use assay_test_support::cluster::messages::completed;
use assay_test_support::cluster::{ClusterSandbox, InProcess, StoreKind};
use assay_test_support::{invoice_repo, servers};
use tokio::task::JoinHandle;

fn prepare(repo: &Path) -> PreparedProof {
    prepare_with(repo, 2, None)
}

fn prepare_with_repeats(repo: &Path, repeats: u32) -> PreparedProof {
    prepare_with(repo, repeats, None)
}

fn prepare_with(repo: &Path, repeats: u32, mutation_budget: Option<Duration>) -> PreparedProof {
    support::invoice_proof(repo, repeats, mutation_budget)
}

/// The fleet of these tests (`ClusterSandbox`): nats-server and an S3 server, every service
/// tuned with `tuning`.
fn start_fleet(tuning: QueueTuning) -> ClusterSandbox {
    ClusterSandbox::start(StoreKind::S3).with_tuning(tuning)
}

/// Puts the proof's trees in the fleet's store, as the CLI does before it submits.
async fn upload(fleet: &ClusterSandbox, prepared: &PreparedProof) {
    client::upload_trees(fleet.store().as_ref(), prepared)
        .await
        .unwrap();
}

/// The invoice proof of `repo`, prepared and its trees uploaded.
async fn uploaded(fleet: &ClusterSandbox, repo: &Path) -> PreparedProof {
    let prepared = prepare(repo);
    upload(fleet, &prepared).await;
    prepared
}

fn worker_config(fleet: &ClusterSandbox, name: &str, slots: u32) -> WorkerConfig {
    let mut config = fleet.worker_config("assay", name);
    config.service.worker.slots = slots;
    config
}

fn worker(fleet: &ClusterSandbox, name: &str, slots: u32) -> InProcess {
    worker_with_grace(fleet, name, slots, 60)
}

fn worker_with_grace(fleet: &ClusterSandbox, name: &str, slots: u32, grace_secs: u64) -> InProcess {
    let mut config = worker_config(fleet, name, slots);
    config.service.worker.shutdown_grace_secs = grace_secs;
    fleet.worker(config)
}

/// A worker whose jobs run nothing: for tests of the transport, not of the runs.
fn noop_worker(fleet: &ClusterSandbox, name: &str, slots: u32) -> InProcess {
    let mut config = worker_config(fleet, name, slots);
    config.scratch_root = None;
    let runner = Arc::new(Noop(config.worker_id.clone()));
    fleet.worker_with(config, runner)
}

/// Answers each job at once with a completed run and its log, as a command that passes would.
struct Noop(WorkerId);

#[async_trait::async_trait]
impl JobRunner for Noop {
    async fn run(&self, spec: &JobSpec) -> JobResult {
        JobResult {
            artifacts: vec![ArtifactRef {
                name: "stdout".into(),
                key: format!("proofs/{}/{}/stdout.log", spec.proof_id, spec.job_id),
                sha256: hex::encode(Sha256::digest(spec.job_id.to_string())),
                bytes: 0,
                dropped_bytes: 0,
            }],
            ..completed(spec, &self.0)
        }
    }
}

struct Quiet;
impl FleetProgress for Quiet {
    fn job_finished(&mut self, _: u32, _: u32, _: &JobResult, _: bool) {}
    fn halted(&mut self, _: &str) {}
    fn resumed(&mut self) {}
}
struct QuietSink;
impl ProgressSink for QuietSink {
    fn event(&self, _: ProofEvent<'_>) {}
}

async fn run_fleet_proof(
    fleet: &ClusterSandbox,
    client: &async_nats::Client,
    prepared: &PreparedProof,
) -> Evidence {
    upload(fleet, prepared).await;
    let submission = client::submission(prepared, 4);
    submit_and_wait_within(
        120,
        fleet,
        client,
        &submission,
        "the fleet proof finished in time",
    )
    .await
}

/// Submits `submission` and waits, at most `secs` seconds, for its evidence.
async fn submit_and_wait_within(
    secs: u64,
    fleet: &ClusterSandbox,
    client: &async_nats::Client,
    submission: &ProofSubmission,
    what: &str,
) -> Evidence {
    tokio::time::timeout(
        Duration::from_secs(secs),
        client::submit_and_wait(
            client,
            &Subjects::new("assay"),
            fleet.store().as_ref(),
            submission,
            &mut Quiet,
        ),
    )
    .await
    .expect(what)
    .unwrap()
}

/// A client of the fleet, once the coordinator has made its topology.
async fn connected(fleet: &ClusterSandbox) -> async_nats::Client {
    let client = fleet.client().await;
    fleet.wait_for_topology(&client, "assay").await;
    client
}

/// What the task `proof` ends with, which must be within `secs` seconds.
async fn finished_within<T>(secs: u64, proof: JoinHandle<T>, what: &str) -> T {
    tokio::time::timeout(Duration::from_secs(secs), proof)
        .await
        .expect(what)
        .unwrap()
}

/// The pull consumer the workers take jobs from, for a test that plays a worker.
async fn workers_consumer(
    js: &async_nats::jetstream::Context,
) -> async_nats::jetstream::consumer::PullConsumer {
    js.get_stream("ASSAY_JOBS")
        .await
        .unwrap()
        .get_consumer(&Subjects::new("assay").workers_consumer())
        .await
        .unwrap()
}

/// The next job message `consumer` delivers, waiting as long as it takes.
async fn next_job(
    consumer: &async_nats::jetstream::consumer::PullConsumer,
) -> async_nats::jetstream::Message {
    loop {
        let request = consumer
            .batch()
            .max_messages(1)
            .expires(Duration::from_secs(5));
        if let Some(Ok(message)) = request.messages().await.unwrap().next().await {
            return message;
        }
    }
}

async fn run_embedded_proof(prepared: &PreparedProof, dir: &Path) -> Evidence {
    let store: Arc<dyn assay_transport::store::ArtifactStore> = Arc::new(
        ObjectArtifactStore::open(&format!("file://{}", dir.join("embedded-store").display()))
            .unwrap(),
    );
    let ctx = JobContext {
        worker_id: proof::embedded_worker_id(),
        sandbox: Arc::new(ProcessSandbox::default()),
        trees: Arc::new(GitTreeSource::new(&prepared.request.repo)),
        store: store.clone(),
        scratch_root: dir.join("embedded-scratch"),
        pass_env: Vec::new(),
        output_cap_bytes: assay_common::service_config::DEFAULT_OUTPUT_CAP_BYTES,
        dependencies: None,
    };
    let queue = InProcessQueue::start(ctx, 2);
    proof::run_proof(
        prepared,
        &queue,
        &*store,
        2,
        &QuietSink,
        SystemTime::now(),
        Instant::now(),
    )
    .await
    .unwrap()
    .evidence
}

/// Evidence with ids, timings, workers and artifact keys removed: what must match. Of the
/// workers, only the sandboxes they ran jobs in remain.
fn comparable(evidence: &Evidence) -> serde_json::Value {
    let mut value = serde_json::to_value(evidence).unwrap();
    for key in ["proof_id", "started_at", "duration_s"] {
        value[key] = serde_json::Value::Null;
    }
    let mut sandboxes: Vec<String> = evidence
        .workers
        .iter()
        .map(|w| serde_json::to_string(&w.sandbox).unwrap())
        .collect();
    sandboxes.sort();
    sandboxes.dedup();
    value["workers"] = sandboxes.into();
    for job in value["jobs"].as_array_mut().unwrap() {
        for key in [
            "job_id",
            "duration_s",
            "started_at_ms",
            "worker",
            "artifacts",
        ] {
            job[key] = serde_json::Value::Null;
        }
    }
    if let Some(check) = value.get_mut("mutation_check").filter(|c| !c.is_null()) {
        check["unmutated_s"] = serde_json::Value::Null;
    }
    // Only a fleet proof names the coordinators that drove it.
    if let Some(fields) = value.as_object_mut() {
        fields.remove("coordinators");
    }
    value
}

fn quick() -> QueueTuning {
    QueueTuning {
        ack_wait: Duration::from_secs(2),
        max_deliver: 2,
        duplicate_window: Duration::from_secs(120),
        lookahead: 4,
        ..QueueTuning::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fleet_proof_gives_the_same_verdicts_and_evidence_as_embedded() {
    let fleet = start_fleet(QueueTuning::default());
    let repo = invoice_repo(fleet.dir(), 0.0);
    let coordinator = fleet.coordinator("assay");
    let workers = [worker(&fleet, "worker-a", 2), worker(&fleet, "worker-b", 2)];
    let client = connected(&fleet).await;
    // With the mutation check: the fleet runs it as per-mutant jobs, as embedded mode does.
    let budget = Some(Duration::from_secs(120));
    let prepared = prepare_with(&repo, 2, budget);
    let fleet_evidence = run_fleet_proof(&fleet, &client, &prepared).await;
    let embedded = run_embedded_proof(&prepare_with(&repo, 2, budget), fleet.dir()).await;
    assert_eq!(
        fleet_evidence.verdict,
        assay_common::verdict::Verdict::Proven
    );
    let check = fleet_evidence
        .mutation_check
        .as_ref()
        .expect("a proven fleet proof carries its mutation check");
    assert!(!check.mutants.is_empty(), "{check:#?}");
    assert_eq!(check.killed, check.mutants.len(), "{check:#?}");
    assert_eq!(comparable(&fleet_evidence), comparable(&embedded));
    // Each worker that ran a job is named with the sandbox it ran it in.
    assert_eq!(
        fleet_evidence.sandbox.as_ref().map(|s| s.kind.as_str()),
        Some("process")
    );
    assert!(!fleet_evidence.workers.is_empty());
    for worker in &fleet_evidence.workers {
        assert!(
            ["worker-a", "worker-b"].contains(&worker.worker.as_str()),
            "{worker:?}"
        );
        assert_eq!(
            worker.sandbox.as_ref().map(|s| s.kind.as_str()),
            Some("process")
        );
        assert!(
            fleet_evidence
                .jobs
                .iter()
                .any(|j| j.worker == worker.worker),
            "{worker:?} ran a job"
        );
    }
    // Every artifact is in S3 under its recorded key, with its recorded sha256.
    let store = fleet.store();
    for job in &fleet_evidence.jobs {
        assert!(!job.artifacts.is_empty());
        for artifact in &job.artifacts {
            let bytes = store.get(&artifact.key).await.unwrap().unwrap();
            assert_eq!(hex::encode(Sha256::digest(&bytes)), artifact.sha256);
        }
    }
    let evidence_json = store
        .get(&format!("proofs/{}/evidence.json", fleet_evidence.proof_id))
        .await
        .unwrap();
    assert!(evidence_json.is_some());
    for worker in workers {
        worker.stop().await;
    }
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_killed_mid_job_hands_its_job_to_another_worker() {
    let fleet = start_fleet(quick());
    // The new test outlives ack_wait, so the survivor also proves progress acks work.
    let repo = invoice_repo(fleet.dir(), 3.0);
    let coordinator = fleet.coordinator("assay");
    let doomed = worker(&fleet, "worker-doomed", 1);
    let client = connected(&fleet).await;
    let prepared = uploaded(&fleet, &repo).await;
    let proof = submit_timed(&fleet, &client, &prepared, 4, Instant::now());
    fleet.wait_for_ack_pending(&client, "assay", 1).await;
    doomed.kill().await;
    let survivor = worker(&fleet, "worker-survivor", 2);
    let (evidence, _) = finished_within(120, proof, "the proof finished after redelivery").await;
    assert_eq!(evidence.verdict, assay_common::verdict::Verdict::Proven);
    assert_eq!(evidence.jobs.len(), prepared.jobs.len());
    assert!(evidence.jobs.iter().all(|j| j.worker == "worker-survivor"));
    survivor.stop().await;
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_past_its_delivery_cap_lands_in_the_infrastructure_lane() {
    let fleet = start_fleet(quick());
    let repo = invoice_repo(fleet.dir(), 0.0);
    let coordinator = fleet.coordinator("assay");
    let client = connected(&fleet).await;
    let prepared = uploaded(&fleet, &repo).await;
    let proof = submit_timed(&fleet, &client, &prepared, 1, Instant::now());
    // Play workers that die: take the first job and hand it back, up to the cap.
    let js = async_nats::jetstream::new(client.clone());
    let consumer = workers_consumer(&js).await;
    for _ in 0..quick().max_deliver {
        next_job(&consumer)
            .await
            .ack_with(async_nats::jetstream::AckKind::Nak(None))
            .await
            .unwrap();
    }
    let worker = worker(&fleet, "worker-a", 1);
    let (evidence, _) = finished_within(120, proof, "the proof finished in time").await;
    let first = &evidence.jobs[0];
    assert_eq!(first.status, "infrastructure");
    assert_eq!(
        first.cause,
        Some(assay_common::fault::InfraCause::WorkerLost),
        "{first:?}"
    );
    assert!(
        first
            .message
            .as_deref()
            .unwrap_or("")
            .contains("delivery cap"),
        "{first:?}"
    );
    // Never a failed test: no exit code, no report read from a run that never happened.
    assert_eq!(first.exit_code, None);
    assert_eq!(first.tests_reported, 0);
    assert_ne!(evidence.verdict, assay_common::verdict::Verdict::Refuted);
    worker.stop().await;
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_coordinator_resumes_an_unfinished_proof() {
    let fleet = start_fleet(QueueTuning::default());
    let repo = invoice_repo(fleet.dir(), 0.0);
    let first = fleet.coordinator("assay");
    let client = connected(&fleet).await;
    let prepared = uploaded(&fleet, &repo).await;
    let proof = submit_timed(&fleet, &client, &prepared, 2, Instant::now());
    // No worker yet: the admitted jobs wait in the queue while the coordinator goes away.
    fleet.wait_for_pending(&client, "assay", 2).await;
    first.kill().await;
    // The proof waits a while for a coordinator: its duration counts from its submission.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let second = fleet.coordinator("assay");
    let worker = worker(&fleet, "worker-a", 2);
    let (evidence, _) = finished_within(120, proof, "the resumed proof finished").await;
    assert_eq!(evidence.verdict, assay_common::verdict::Verdict::Proven);
    assert_eq!(evidence.jobs.len(), prepared.jobs.len());
    assert!(evidence.duration_s >= 5.0, "{}", evidence.duration_s);
    worker.stop().await;
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_duplicate_result_is_applied_once() {
    let fleet = start_fleet(QueueTuning::default());
    let repo = invoice_repo(fleet.dir(), 0.0);
    let coordinator = fleet.coordinator("assay");
    let client = connected(&fleet).await;
    let prepared = uploaded(&fleet, &repo).await;
    let proof = submit_timed(&fleet, &client, &prepared, 1, Instant::now());
    // Answer the first job twice, under distinct message ids so the server's de-duplication
    // does not hide the second: the coordinator must apply only the first.
    let js = async_nats::jetstream::new(client.clone());
    let consumer = workers_consumer(&js).await;
    let message = next_job(&consumer).await;
    let spec: assay_common::job::JobSpec = wire::decode("job", &message.payload).unwrap();
    for (n, worker) in ["replay-first", "replay-second"].iter().enumerate() {
        let result = JobResult::infrastructure(
            &spec,
            WorkerId((*worker).into()),
            assay_common::fault::InfraCause::SandboxStart,
            format!("replayed {n}"),
        );
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", format!("replay-{n}").as_str());
        js.publish_with_headers(
            Subjects::new("assay").results(&spec.proof_id),
            headers,
            wire::encode(
                "job result",
                &assay_common::fleet::ResultMessage::Inline(Box::new(result)),
            )
            .unwrap()
            .into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    }
    message.double_ack().await.unwrap();
    let worker = worker(&fleet, "worker-a", 1);
    let (evidence, _) = finished_within(120, proof, "the proof finished in time").await;
    assert_eq!(evidence.jobs.len(), prepared.jobs.len());
    assert_eq!(evidence.jobs[0].worker, "replay-first");
    assert_eq!(evidence.jobs[0].message.as_deref(), Some("replayed 0"));
    worker.stop().await;
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submission_from_a_newer_peer_is_refused_not_misread() {
    let fleet = start_fleet(QueueTuning::default());
    let repo = invoice_repo(fleet.dir(), 0.0);
    let coordinator = fleet.coordinator("assay");
    let client = connected(&fleet).await;
    let submission: ProofSubmission = client::submission(&prepare(&repo), 1);
    let newer =
        wire::encode_with_version("proof submission", &submission, wire::PROTOCOL_VERSION + 1)
            .unwrap();
    // As the CLI does: the topology may exist before the coordinator listens for submissions.
    let reply = client::request_submit(
        &client,
        &Subjects::new("assay"),
        async_nats::HeaderMap::new(),
        newer.into(),
    )
    .await
    .unwrap();
    match wire::decode::<SubmitReply>("submit reply", &reply.payload).unwrap() {
        SubmitReply::Refused { message } => {
            assert!(message.contains("wire protocol version"), "{message}")
        }
        other => panic!("a newer submission was accepted: {other:?}"),
    }
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_round_trips_artifacts_with_their_sha256_including_multipart() {
    let s3 = servers::start_s3("assay-artifacts");
    let store =
        assay_transport::store::open_store("s3://assay-artifacts", &servers::s3_options(s3.port))
            .unwrap();
    let small = store
        .put_bytes(
            "stdout",
            "proofs/p-9/jobs/0000/stdout.log",
            "2 passed\n".into(),
        )
        .await
        .unwrap();
    assert_eq!(small.sha256, hex::encode(Sha256::digest(b"2 passed\n")));
    let large: Vec<u8> = (0..assay_transport::store::MULTIPART_THRESHOLD + 1_500_000)
        .map(|i| b"ledger line 7 balanced\n"[i % 23])
        .collect();
    let artifact = store
        .put_bytes(
            "stdout",
            "proofs/p-9/jobs/0001/stdout.log",
            large.clone().into(),
        )
        .await
        .unwrap();
    let back = store
        .get("proofs/p-9/jobs/0001/stdout.log")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(back.len(), large.len());
    assert_eq!(hex::encode(Sha256::digest(&back)), artifact.sha256);
    assert_eq!(artifact.sha256, hex::encode(Sha256::digest(&large)));
    assert_eq!(store.get("proofs/p-9/absent").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_bucket_is_an_error_naming_it_while_a_missing_object_is_none() {
    use assay_transport::store::StoreError;
    let s3 = servers::start_s3("assay-artifacts");
    let options = servers::s3_options(s3.port);
    let store = assay_transport::store::open_store("s3://assay-artifacts", &options).unwrap();
    assert_eq!(store.get("health/readyz-probe").await.unwrap(), None);
    assert!(
        store
            .get_stream("health/readyz-probe")
            .await
            .unwrap()
            .is_none()
    );
    let elsewhere = assay_transport::store::open_store("s3://no-such-bucket", &options).unwrap();
    for read in [
        elsewhere.get("health/readyz-probe").await.map(|_| ()),
        elsewhere
            .get_stream("health/readyz-probe")
            .await
            .map(|_| ()),
    ] {
        let error = read.unwrap_err();
        assert!(
            matches!(&error, StoreError::NoSuchBucket { bucket, .. } if bucket == "no-such-bucket"),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .contains("the bucket no-such-bucket of store s3://no-such-bucket does not exist"),
            "{error}"
        );
    }
}

/// Submits `prepared` and returns how long after `since` its evidence arrived.
fn submit_timed(
    fleet: &ClusterSandbox,
    client: &async_nats::Client,
    prepared: &PreparedProof,
    budget: u32,
    since: Instant,
) -> JoinHandle<(Evidence, Duration)> {
    let client = client.clone();
    let store = fleet.store();
    let submission = client::submission(prepared, budget);
    tokio::spawn(async move {
        let evidence = client::submit_and_wait(
            &client,
            &Subjects::new("assay"),
            store.as_ref(),
            &submission,
            &mut Quiet,
        )
        .await
        .unwrap();
        (evidence, since.elapsed())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_small_proof_is_not_starved_by_a_huge_one_submitted_first() {
    // One job may wait in the work queue beyond the idle slots; the rest wait for their turn.
    let fleet = start_fleet(QueueTuning {
        lookahead: 1,
        ..QueueTuning::default()
    });
    let huge_repo = invoice_repo(&fleet.dir().join("huge"), 1.0);
    let small_repo = invoice_repo(&fleet.dir().join("small"), 0.0);
    let coordinator = fleet.coordinator("assay");
    let worker = worker(&fleet, "worker-a", 2);
    let client = connected(&fleet).await;
    let huge = prepare_with_repeats(&huge_repo, 10);
    let small = prepare(&small_repo);
    for prepared in [&huge, &small] {
        upload(&fleet, prepared).await;
    }
    let started = Instant::now();
    // Its budget alone would let the huge proof fill the queue with 16 one-second jobs.
    let huge_run = submit_timed(&fleet, &client, &huge, 16, started);
    fleet.wait_for_ack_pending(&client, "assay", 2).await;
    let small_submitted = Instant::now();
    let small_run = submit_timed(&fleet, &client, &small, 4, small_submitted);
    let (small_evidence, small_took) =
        finished_within(120, small_run, "the proof finished in time").await;
    let (huge_evidence, huge_took) =
        finished_within(180, huge_run, "the proof finished in time").await;
    assert_eq!(
        small_evidence.verdict,
        assay_common::verdict::Verdict::Proven
    );
    assert_eq!(
        huge_evidence.verdict,
        assay_common::verdict::Verdict::Proven
    );
    assert_eq!(huge_evidence.jobs.len(), 22);
    // Measured in the huge proof's own work, not in a ratio of wall times a loaded machine
    // bends: first come, first served would run 16 of the huge proof's 22 jobs before the
    // small proof's, leaving it a few jobs once the small one is done; a fair queue leaves it
    // most of its work (about two thirds here, alone on an idle machine).
    let small_finished = small_submitted + small_took;
    let huge_finished = started + huge_took;
    let huge_work_per_slot =
        Duration::from_secs_f64(huge_evidence.jobs.iter().map(|j| j.duration_s).sum::<f64>() / 2.0);
    let huge_left = huge_finished.saturating_duration_since(small_finished);
    assert!(
        huge_left * 3 > huge_work_per_slot,
        "the huge proof had {huge_left:?} left when the small one finished, of {huge_work_per_slot:?} per slot"
    );
    worker.stop().await;
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tree_whose_archive_fails_its_sha256_check_lands_in_the_infrastructure_lane() {
    let fleet = start_fleet(QueueTuning::default());
    let repo = invoice_repo(fleet.dir(), 0.0);
    let coordinator = fleet.coordinator("assay");
    let worker = worker(&fleet, "worker-a", 2);
    let client = connected(&fleet).await;
    let prepared = prepare(&repo);
    let store = fleet.store();
    client::upload_trees(store.as_ref(), &prepared)
        .await
        .unwrap();
    // Damage every archive after upload, as a bad disk or a partial overwrite would.
    let mut trees: Vec<_> = prepared.jobs.iter().map(|j| j.tree.clone()).collect();
    trees.sort();
    trees.dedup();
    for tree in &trees {
        let key = assay_common::fleet::tree_archive_key(tree);
        let mut archive = store.get(&key).await.unwrap().unwrap().to_vec();
        archive[600] ^= 0x20;
        store.put_bytes("tree", &key, archive.into()).await.unwrap();
    }
    let submission = client::submission(&prepared, 4);
    let evidence = submit_and_wait_within(
        120,
        &fleet,
        &client,
        &submission,
        "the proof finished in time",
    )
    .await;
    assert_eq!(evidence.verdict, assay_common::verdict::Verdict::Unverified);
    assert_eq!(evidence.jobs.len(), prepared.jobs.len());
    for (job, spec) in evidence.jobs.iter().zip(&prepared.jobs) {
        let message = job.message.as_deref().unwrap_or("");
        assert_eq!(job.status, "infrastructure", "{job:?}");
        // The cause travelled from the worker, over the wire, into the evidence.
        assert_eq!(
            job.cause,
            Some(assay_common::fault::InfraCause::TreeFetch),
            "{job:?}"
        );
        assert!(
            message.contains(spec.tree.as_str()) && message.contains("sha256"),
            "{message}"
        );
        assert_eq!(job.exit_code, None);
        assert_eq!(job.tests_reported, 0);
    }
    worker.stop().await;
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopping_worker_finishes_a_job_that_ends_within_its_grace() {
    let fleet = start_fleet(QueueTuning::default());
    let repo = invoice_repo(fleet.dir(), 2.0);
    let coordinator = fleet.coordinator("assay");
    let leaving = worker_with_grace(&fleet, "worker-leaving", 1, 60);
    let client = connected(&fleet).await;
    let prepared = uploaded(&fleet, &repo).await;
    let proof = submit_timed(&fleet, &client, &prepared, 4, Instant::now());
    fleet.wait_for_ack_pending(&client, "assay", 1).await;
    // Stopping waits for the running job: it ends with a result, not a redelivery.
    leaving.stop().await;
    let info = fleet.jobs_consumer_info(&client, "assay").await;
    assert_eq!(info.num_ack_pending, 0);
    assert_eq!(info.num_redelivered, 0);
    let staying = worker(&fleet, "worker-staying", 2);
    let (evidence, _) = finished_within(120, proof, "the proof finished in time").await;
    assert_eq!(evidence.verdict, assay_common::verdict::Verdict::Proven);
    let by_leaving = evidence
        .jobs
        .iter()
        .filter(|j| j.worker == "worker-leaving")
        .count();
    assert_eq!(by_leaving, 1, "{:?}", evidence.jobs);
    staying.stop().await;
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopping_worker_hands_back_a_job_still_running_after_its_grace() {
    // ack_wait stays 30 s: a job handed back reaches the next worker long before that.
    let fleet = start_fleet(QueueTuning::default());
    let repo = invoice_repo(fleet.dir(), 5.0);
    let coordinator = fleet.coordinator("assay");
    let leaving = worker_with_grace(&fleet, "worker-leaving", 1, 1);
    let client = connected(&fleet).await;
    let prepared = uploaded(&fleet, &repo).await;
    let proof = submit_timed(&fleet, &client, &prepared, 4, Instant::now());
    fleet.wait_for_ack_pending(&client, "assay", 1).await;
    let stopping = Instant::now();
    leaving.stop().await;
    assert!(
        stopping.elapsed() < Duration::from_secs(4),
        "the worker waited {:?} for a 5 s job despite a 1 s grace",
        stopping.elapsed()
    );
    // Handed back, not abandoned: the next worker gets the job again at once, where an
    // abandoned job would wait out the 30 s ack_wait.
    let staying = worker(&fleet, "worker-staying", 2);
    let deadline = Instant::now() + Duration::from_secs(10);
    while fleet
        .jobs_consumer_info(&client, "assay")
        .await
        .num_redelivered
        == 0
    {
        assert!(
            Instant::now() < deadline,
            "the job was not handed back: it waits for ack_wait"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (evidence, _) = finished_within(120, proof, "the proof finished in time").await;
    assert_eq!(evidence.verdict, assay_common::verdict::Verdict::Proven);
    assert!(
        evidence.jobs.iter().all(|j| j.worker == "worker-staying"),
        "{:?}",
        evidence.jobs
    );
    staying.stop().await;
    coordinator.stop().await;
}

/// `prepared` fanned out to `jobs` jobs, as a monorepo's proof is: more stability repeats.
fn fanned_out(mut prepared: PreparedProof, jobs: usize) -> PreparedProof {
    let template = prepared.jobs.last().cloned().unwrap();
    for index in prepared.jobs.len()..jobs {
        prepared.jobs.push(JobSpec {
            job_id: JobId::for_index(&prepared.request.proof_id, index),
            index: index as u32,
            ..template.clone()
        });
    }
    prepared
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_proof_too_big_for_one_message_goes_through_the_store_and_completes() {
    let fleet = start_fleet(QueueTuning::default());
    let repo = invoice_repo(fleet.dir(), 0.0);
    let coordinator = fleet.coordinator("assay");
    let worker = noop_worker(&fleet, "worker-a", 8);
    let client = connected(&fleet).await;
    let prepared = fanned_out(prepare_with_repeats(&repo, 1), 6000);
    let submission = client::submission(&prepared, 64);
    let max_payload = client.server_info().max_payload;
    let encoded = wire::encode("proof submission", &submission).unwrap().len();
    assert!(
        encoded > max_payload,
        "the submission ({encoded} bytes) must exceed max_payload ({max_payload})"
    );
    let store = fleet.store();
    let evidence = submit_and_wait_within(
        240,
        &fleet,
        &client,
        &submission,
        "a big proof must complete, not hang",
    )
    .await;
    assert_eq!(evidence.jobs.len(), 6000);
    let ids: Vec<String> = evidence.jobs.iter().map(|j| j.job_id.clone()).collect();
    let planned: Vec<String> = prepared.jobs.iter().map(|j| j.job_id.to_string()).collect();
    assert_eq!(ids, planned, "results are reassembled in plan order");

    let js = async_nats::jetstream::new(client.clone());
    let proofs = js.get_key_value("ASSAY_PROOFS").await.unwrap();
    let proof_id = &submission.proof_id;
    let record: ProofRecord = wire::decode(
        "proof record",
        &proofs.get(keys::record(proof_id)).await.unwrap().unwrap(),
    )
    .unwrap();
    assert_eq!(record.job_count, 6000);
    assert!(record.submission.jobs().is_empty());
    assert_eq!(record.stored.unwrap().key, submission_key(proof_id));
    let json = serde_json::to_vec_pretty(&evidence).unwrap();
    assert!(json.len() > max_payload, "evidence of {} bytes", json.len());
    assert!(
        proofs
            .get(keys::evidence(proof_id))
            .await
            .unwrap()
            .is_none()
    );
    let err = client::stored_evidence(&proofs, None, proof_id)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("--store"), "{err}");
    let again = client::stored_evidence(&proofs, Some(store.as_ref()), proof_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        serde_json::to_value(&again).unwrap(),
        serde_json::to_value(&evidence).unwrap()
    );
    worker.stop().await;
    coordinator.stop().await;
}
