//! Hostile input to a real fleet: a JetStream `nats-server` on a free 127.0.0.1 port, the
//! coordinator and workers running in this process through their `serve` functions, a file
//! store in a temp dir. Each test plays someone who can publish on the bus or who wrote the
//! project under test, and checks what the fleet refuses and what it never does.

use assay_common::criteria::parse_criteria;
use assay_common::evidence::{Evidence, RevisionInfo};
use assay_common::fleet::{
    ProgressEvent, ProofRecord, ProofStatus, ProofSubmission, RevisionWire, Subjects, Submission,
    SubmitReply, SubmitRequest, keys,
};
use assay_common::job::{JobKind, JobResult, JobSpec, JobStatus, Side};
use assay_common::outcome::ReportOutcome;
use assay_common::runner::{ReportFormat, RunnerKind};
use assay_common::service_config::NatsSection;
use assay_common::service_config::{SandboxKind, ServiceConfig};
use assay_common::verdict::Verdict;
use assay_common::{JobId, ProofId, TreeId, WorkerId, wire};
use assay_coordinator::client;
use assay_coordinator::cluster_queue::ClusterQueue;
use assay_engine::proof;
use assay_transport::nats::QueueTuning;
use assay_transport::queue::JobQueue;
use assay_worker::service::{self as worker, JobRunner, WorkerConfig};
use async_nats::jetstream::{self, kv};
use futures::StreamExt;
use serde::Serialize;
use servers::start_nats_with_config;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use assay_test_support::cluster::messages::{self, completed, job, proofs_bucket};
use assay_test_support::cluster::{ClusterSandbox, InProcess, NatsSetup, StoreKind};
use assay_test_support::servers;

/// The coordinator's default cap on a stored result.
const RESULT_CAP: assay_transport::offload::ReadCap = assay_transport::offload::ReadCap::results(
    assay_common::service_config::DEFAULT_MAX_RESULT_BYTES,
);

/// A worker's configuration with a short ack wait, so a lost job comes back within the test.
fn worker_config(bus: &ClusterSandbox, prefix: &str, name: &str) -> WorkerConfig {
    let mut config = bus.worker_config(prefix, name);
    config.tuning = QueueTuning {
        ack_wait: Duration::from_secs(5),
        ..QueueTuning::default()
    };
    config
}

/// A worker that runs its jobs for real, in the process sandbox.
fn worker(bus: &ClusterSandbox, prefix: &str, name: &str) -> InProcess {
    bus.worker(worker_config(bus, prefix, name))
}

/// A worker that answers each job at once, signed with its own name.
fn answering_worker(bus: &ClusterSandbox, prefix: &str, name: &str) -> InProcess {
    bus.worker_with(
        worker_config(bus, prefix, name),
        Arc::new(Answer(WorkerId(name.into()))),
    )
}

/// Answers a job with a completed run, as a command that passes would.
struct Answer(WorkerId);

#[async_trait::async_trait]
impl JobRunner for Answer {
    async fn run(&self, spec: &JobSpec) -> JobResult {
        completed(spec, &self.0)
    }
}

fn empty_tree() -> TreeId {
    // git's empty tree: any hex id will do for jobs that never fetch their tree.
    TreeId("4b825dc642cb6eb9a060e54bf8d69288fbee4904".into())
}

/// A proof of `jobs` jobs, prepared as the CLI would have.
fn submission(proof_id: &ProofId, jobs: usize) -> ProofSubmission {
    let tree = empty_tree();
    let revision = RevisionWire {
        requested: "main".into(),
        commit: None,
        tree: tree.clone(),
    };
    ProofSubmission {
        proof_id: proof_id.clone(),
        repository: "/srv/invoices".into(),
        runner: RunnerKind::Pytest,
        criteria: parse_criteria(&["test: test_total_includes_tax".to_owned()]).unwrap(),
        base: revision.clone(),
        candidate: revision,
        base_tree: tree.clone(),
        changed: vec![],
        changed_test_files: vec![],
        jobs: (0..jobs)
            .map(|i| job(proof_id, i, &tree, &["true"]))
            .collect(),
        refused_files: vec![],
        jobs_budget: jobs as u32,
        test_command: None,
        timeout_secs: 60,
        mutation: None,
        cache: Default::default(),
        diff_hunks: Vec::new(),
        diff_sources: Vec::new(),
        harness: Default::default(),
        allow_test_only: false,
        dependencies: Vec::new(),
    }
}

async fn submit(
    client: &async_nats::Client,
    prefix: &str,
    submission: ProofSubmission,
) -> SubmitReply {
    messages::submit(client, prefix, &SubmitRequest::Inline(Box::new(submission))).await
}

async fn status(proofs: &kv::Store, proof_id: &ProofId) -> Option<ProofStatus> {
    let bytes = proofs.get(keys::record(proof_id)).await.ok()??;
    Some(
        wire::decode::<ProofRecord>("proof record", &bytes)
            .ok()?
            .status,
    )
}

async fn wait_finished(proofs: &kv::Store, proof_id: &ProofId, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if status(proofs, proof_id).await == Some(ProofStatus::Finished) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

async fn stored_result(proofs: &kv::Store, proof_id: &ProofId, index: u32) -> Option<JobResult> {
    let bytes = proofs.get(keys::result(proof_id, index)).await.ok()??;
    match wire::decode("job result", &bytes).ok()? {
        assay_common::fleet::ResultMessage::Inline(result) => Some(*result),
        assay_common::fleet::ResultMessage::Stored { .. } => None,
    }
}

async fn publish_result(
    js: &jetstream::Context,
    prefix: &str,
    subject_proof: &ProofId,
    result: &JobResult,
    msg_id: &str,
) {
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Nats-Msg-Id", msg_id);
    js.publish_with_headers(
        Subjects::new(prefix).results(subject_proof),
        headers,
        wire::encode(
            "job result",
            &assay_common::fleet::ResultMessage::Inline(Box::new(result.clone())),
        )
        .unwrap()
        .into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
}

fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=Ada", "-c", "user.email=ada@invoices.test"])
        .args(args)
        .current_dir(repo)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A one-file repository, its tree uploaded to the bus's store; returns the tree id.
async fn uploaded_tree(bus: &ClusterSandbox) -> TreeId {
    uploaded_tree_of(bus, "pager", "pager.py", "LIMIT = 10\n").await
}

/// A repository of one file, its tree uploaded to the bus's store; returns the tree id.
async fn uploaded_tree_of(bus: &ClusterSandbox, name: &str, file: &str, text: &str) -> TreeId {
    let repo = bus.dir().join(name);
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join(file), text).unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", name]);
    let tree = TreeId(git(&repo, &["rev-parse", "HEAD^{tree}"]));
    let store = assay_transport::store::open_store(&bus.store_url(), &[]).unwrap();
    assay_transport::store_tree::upload_tree(&store, &repo, &tree)
        .await
        .unwrap();
    tree
}

/// A job as a peer that skips the checks would encode it: the same fields in the same order
/// (so the same bincode), with the edit's path a plain string.
#[derive(Serialize)]
struct UncheckedJob {
    proof_id: ProofId,
    job_id: JobId,
    index: u32,
    kind: JobKind,
    side: Side,
    tree: TreeId,
    command: Vec<String>,
    report: ReportFormat,
    selected_tests: Vec<String>,
    timeout_secs: u64,
    forked_timeout_secs: Option<u64>,
    env: Vec<(String, String)>,
    edit: Option<UncheckedEdit>,
    rewrites: Vec<UncheckedEdit>,
    binaries: Option<assay_common::job::TestBinaries>,
    dependencies: Option<assay_common::dependency_archive::DependencyArchive>,
    next_command: Option<Vec<String>>,
}

#[derive(Serialize)]
struct UncheckedEdit {
    path: String,
    start: usize,
    end: usize,
    replacement: String,
}

fn unchecked(job: JobSpec, edit_path: &str) -> UncheckedJob {
    UncheckedJob {
        proof_id: job.proof_id,
        job_id: job.job_id,
        index: job.index,
        kind: JobKind::Mutant,
        side: job.side,
        tree: job.tree,
        command: job.command,
        report: job.report,
        selected_tests: job.selected_tests,
        timeout_secs: job.timeout_secs,
        forked_timeout_secs: job.forked_timeout_secs,
        rewrites: Vec::new(),
        env: job.env,
        edit: Some(UncheckedEdit {
            path: edit_path.into(),
            start: 0,
            end: 9,
            replacement: "OVERWRITE".into(),
        }),
        binaries: None,
        dependencies: None,
        next_command: None,
    }
}

/// A submission as a peer that skips the checks would encode it: `SubmitRequest::Inline` of
/// `ProofSubmission`'s fields in order, with unchecked jobs.
#[derive(Serialize)]
enum UncheckedRequest {
    Inline(UncheckedSubmission),
}

#[derive(Serialize)]
struct UncheckedSubmission {
    proof_id: ProofId,
    repository: String,
    runner: RunnerKind,
    criteria: Vec<assay_common::criteria::Criterion>,
    base: RevisionWire,
    candidate: RevisionWire,
    base_tree: TreeId,
    changed: Vec<assay_common::fleet::ChangedFileWire>,
    changed_test_files: Vec<assay_common::fleet::ChangedFileWire>,
    jobs: Vec<UncheckedJob>,
    refused_files: Vec<assay_common::verdict::RefusedFile>,
    jobs_budget: u32,
    test_command: Option<Vec<String>>,
    timeout_secs: u64,
    mutation: Option<assay_common::mutation_plan::MutationSetup>,
    cache: assay_common::fleet::CacheMode,
    diff_hunks: Vec<assay_common::diff_coverage::ChangedHunk>,
    diff_sources: Vec<assay_common::diff_coverage::ChangedSource>,
    harness: assay_common::harness::HarnessPlan,
    allow_test_only: bool,
    dependencies: Vec<(TreeId, assay_common::dependency_archive::DependencyArchive)>,
}

fn unchecked_submission(submission: ProofSubmission, edit_path: &str) -> UncheckedRequest {
    UncheckedRequest::Inline(UncheckedSubmission {
        proof_id: submission.proof_id,
        repository: submission.repository,
        runner: submission.runner,
        criteria: submission.criteria,
        base: submission.base,
        candidate: submission.candidate,
        base_tree: submission.base_tree,
        changed: submission.changed,
        changed_test_files: submission.changed_test_files,
        jobs: submission
            .jobs
            .into_iter()
            .map(|job| unchecked(job, edit_path))
            .collect(),
        refused_files: submission.refused_files,
        jobs_budget: submission.jobs_budget,
        test_command: submission.test_command,
        timeout_secs: submission.timeout_secs,
        mutation: submission.mutation,
        cache: submission.cache,
        diff_hunks: submission.diff_hunks,
        diff_sources: submission.diff_sources,
        harness: submission.harness,
        allow_test_only: submission.allow_test_only,
        dependencies: submission.dependencies,
    })
}

async fn publish_job<T: Serialize>(
    js: &jetstream::Context,
    proof_id: &ProofId,
    msg_id: &str,
    job: &T,
) {
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Nats-Msg-Id", msg_id);
    js.publish_with_headers(
        Subjects::new("assay").jobs(proof_id),
        headers,
        wire::encode("job", job).unwrap().into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
}

/// The results consumer, once a worker has created the topology: a test reads results in
/// the coordinator's place.
async fn results_consumer(
    js: &jetstream::Context,
    subjects: &Subjects,
) -> jetstream::consumer::PullConsumer {
    loop {
        let workers = match js.get_stream(subjects.jobs_stream()).await {
            Ok(stream) => stream
                .get_consumer::<jetstream::consumer::pull::Config>(&subjects.workers_consumer())
                .await
                .is_ok(),
            Err(_) => false,
        };
        if workers
            && let Ok(consumer) = assay_transport::nats::coordinator_consumer(
                js,
                subjects,
                &QueueTuning::default(),
                assay_transport::nats::Placement::SINGLE,
            )
            .await
        {
            return consumer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The hostile messages below are refused for their paths, not for a layout drifted from the
/// real one: with a confined path the same shapes decode as the real messages.
#[test]
fn the_unchecked_job_and_submission_have_the_real_layout() {
    let proof = ProofId("p-1795995829-layout".into());
    let legal = unchecked(
        job(&proof, 0, &empty_tree(), &["true"]),
        "pager/__init__.py",
    );
    let decoded: JobSpec = wire::decode("job", &wire::encode("job", &legal).unwrap())
        .expect("an unchecked job with a confined path decodes as a JobSpec");
    assert_eq!(
        decoded.edit.map(|e| e.path.as_str().to_owned()).as_deref(),
        Some("pager/__init__.py")
    );
    let request = unchecked_submission(submission(&proof, 1), "pager/__init__.py");
    let bytes = wire::encode("submit request", &request).unwrap();
    assert!(
        wire::decode::<SubmitRequest>("submit request", &bytes).is_ok(),
        "an unchecked submission with a confined path decodes as a SubmitRequest"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mutant_edit_naming_a_path_outside_the_tree_is_refused_and_writes_nothing() {
    let bus = ClusterSandbox::with_file_store();
    let tree = uploaded_tree(&bus).await;
    let victim = bus.dir().join("victim.txt");
    std::fs::write(&victim, "untouched\n").unwrap();
    let worker = worker(&bus, "assay", "worker-a");
    let client = bus.client().await;
    let js = jetstream::new(client.clone());
    let subjects = Subjects::new("assay");
    let results = results_consumer(&js, &subjects).await;
    let proof = ProofId("p-1795995829-hostile".into());
    // The tree directory is `{scratch}/{proof}/{job}/tree`: four levels below the victim's.
    let absolute = victim.display().to_string();
    let climbing = "../../../../victim.txt";
    for (index, path) in [absolute.as_str(), climbing].into_iter().enumerate() {
        let hostile = unchecked(job(&proof, index, &tree, &["true"]), path);
        publish_job(&js, &proof, &format!("hostile-{index}"), &hostile).await;
    }
    // One slot takes jobs in order: once this one's result is in, both hostile jobs were handled.
    publish_job(&js, &proof, "honest", &job(&proof, 2, &tree, &["true"])).await;
    let mut messages = results.messages().await.unwrap();
    let result = next_result(&mut messages).await;
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched\n");
    assert_eq!(
        result.index, 2,
        "only the honest job has a result: {result:?}"
    );
    assert!(
        matches!(result.status, JobStatus::Completed { exit_code: 0 }),
        "{result:?}"
    );
    let another = tokio::time::timeout(Duration::from_secs(2), messages.next()).await;
    assert!(another.is_err(), "a hostile job was run and answered");
    // Refused, not left to be redelivered: the jobs stream holds nothing.
    let mut consumer: jetstream::consumer::PullConsumer = js
        .get_stream(Subjects::new("assay").jobs_stream())
        .await
        .unwrap()
        .get_consumer(&Subjects::new("assay").workers_consumer())
        .await
        .unwrap();
    let info = consumer.info().await.unwrap();
    assert_eq!((info.num_pending, info.num_ack_pending), (0, 0));
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_submission_whose_jobs_name_another_proof_or_a_path_outside_the_tree_is_refused() {
    let bus = ClusterSandbox::with_file_store();
    let coordinator = bus.coordinator("assay");
    let client = bus.client().await;
    let proofs = proofs_bucket(&client, "assay").await;
    let proof = proof::new_proof_id();
    let other = proof::new_proof_id();
    let mut foreign = submission(&proof, 2);
    foreign.jobs[1] = job(&other, 1, &empty_tree(), &["true"]);
    match submit(&client, "assay", foreign).await {
        SubmitReply::Refused { message } => {
            assert!(message.contains("names another proof"), "{message}")
        }
        other => panic!("a submission with another proof's job was accepted: {other:?}"),
    }
    let mut renumbered = submission(&proof, 2);
    renumbered.jobs[1].index = 0;
    assert!(matches!(
        submit(&client, "assay", renumbered).await,
        SubmitReply::Refused { .. }
    ));
    let mut unsafe_id = submission(&ProofId("p-1.>".into()), 1);
    unsafe_id.jobs.clear();
    match submit(&client, "assay", unsafe_id).await {
        SubmitReply::Refused { message } => {
            assert!(message.contains("not well formed"), "{message}")
        }
        other => panic!("a proof id with subject wildcards was accepted: {other:?}"),
    }
    // A schema source no planned mutant needs would have the coordinator build a file the
    // plan never mutates: refused, as is one named twice (common's unit tests).
    let mut stray_source = submission(&proof, 1);
    stray_source.mutation = Some(assay_common::mutation_plan::MutationSetup {
        budget_secs: 60,
        plan: Default::default(),
        planning_error: None,
        schema_sources: vec![assay_common::mutation_plan::SchemaSource {
            path: assay_common::tree_path::TreePath::new("ledger/src/lib.rs").unwrap(),
            text: "pub fn balance() -> i64 { 0 }\n".into(),
            proc_macro: false,
        }],
    });
    match submit(&client, "assay", stray_source).await {
        SubmitReply::Refused { message } => assert!(
            message.contains("\"ledger/src/lib.rs\" is not a file any planned mutant changes"),
            "{message}"
        ),
        other => panic!("a submission with a stray schema source was accepted: {other:?}"),
    }
    // A mutant edit outside the tree is refused by the coordinator too, never forwarded.
    for path in ["/etc/hosts", "../../victim.txt"] {
        let hostile = unchecked_submission(submission(&proof, 1), path);
        let reply = client
            .request(
                Subjects::new("assay").submit(),
                wire::encode("submit request", &hostile).unwrap().into(),
            )
            .await
            .unwrap();
        match wire::decode::<SubmitReply>("submit reply", &reply.payload).unwrap() {
            SubmitReply::Refused { message } => {
                assert!(message.contains("failed to decode"), "{message}")
            }
            other => panic!("a submission editing {path} was accepted: {other:?}"),
        }
    }
    assert_eq!(status(&proofs, &proof).await, None, "nothing was recorded");
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stray_result_takes_no_slot_and_the_real_one_finishes_the_proof() {
    let bus = ClusterSandbox::with_file_store();
    let first = bus.coordinator("assay");
    let client = bus.client().await;
    let proofs = proofs_bucket(&client, "assay").await;
    let js = jetstream::new(client.clone());
    let proof = proof::new_proof_id();
    let planned = submission(&proof, 2);
    let jobs = planned.jobs.clone();
    assert!(matches!(
        submit(&client, "assay", planned).await,
        SubmitReply::Accepted { .. }
    ));
    let stray = WorkerId("stray".into());
    // Index 0 under another proof's job id; index 1 under job 0's id; an index past the plan.
    let mut foreign = completed(&jobs[0], &stray);
    foreign.job_id = JobId::for_index(&proof::new_proof_id(), 0);
    let mut crossed = completed(&jobs[1], &stray);
    crossed.job_id = jobs[0].job_id.clone();
    let mut outside = completed(&jobs[1], &stray);
    outside.index = 7;
    outside.job_id = JobId::for_index(&proof, 7);
    for (n, result) in [foreign, crossed, outside].iter().enumerate() {
        publish_result(&js, "assay", &proof, result, &format!("stray-{n}")).await;
    }
    // The strays are applied (or refused) before a restart; the real results come after it,
    // so a key a stray took would hold the proof forever, across coordinators.
    tokio::time::sleep(Duration::from_secs(1)).await;
    first.stop().await;
    let second = bus.coordinator("assay");
    let real = WorkerId("worker-real".into());
    for job in &jobs {
        publish_result(
            &js,
            "assay",
            &proof,
            &completed(job, &real),
            job.job_id.as_str(),
        )
        .await;
    }
    // Generous: on a loaded CI machine the restarted coordinator's start-up (streams, KV,
    // resume) has been seen to take most of half a minute.
    assert!(
        wait_finished(&proofs, &proof, Duration::from_secs(120)).await,
        "the proof never finished: a stray result took a slot (coordinator stopped: {})",
        second.is_finished()
    );
    for job in &jobs {
        let stored = stored_result(&proofs, &proof, job.index).await.unwrap();
        assert_eq!(
            (stored.job_id, stored.worker),
            (job.job_id.clone(), real.clone())
        );
    }
    assert!(stored_result(&proofs, &proof, 7).await.is_none());
    second.stop().await;
}

/// A CLI that learns nothing from progress but the verdict.
struct Quiet;

impl client::FleetProgress for Quiet {
    fn job_finished(&mut self, _: u32, _: u32, _: &JobResult, _: bool) {}
    fn halted(&mut self, _: &str) {}
    fn resumed(&mut self) {}
}

/// A PROVEN evidence report for `proof`, as a forger on the bus would write it.
/// `planned` submitted on the `assay` fleet as `assay prove --cluster` does, on a connection
/// of its own; the task ends with the evidence the CLI would report.
async fn submitted_as_the_cli(
    bus: &ClusterSandbox,
    planned: ProofSubmission,
) -> tokio::task::JoinHandle<Result<Evidence, client::ClientError>> {
    let store = assay_transport::store::open_store(&bus.store_url(), &[]).unwrap();
    let cli_client = bus.client().await;
    tokio::spawn(async move {
        client::submit_and_wait(
            &cli_client,
            &Subjects::new("assay"),
            &store,
            &planned,
            &mut Quiet,
        )
        .await
    })
}

fn forged_evidence(proof: &ProofId) -> String {
    let revision = RevisionInfo {
        requested: "main".into(),
        commit: None,
        tree: empty_tree().0,
        generated_lockfile: None,
    };
    let evidence = Evidence {
        schema: assay_common::evidence::SCHEMA.into(),
        proof_id: proof.to_string(),
        verdict: Verdict::Proven,
        repository: "forged".into(),
        runner: "pytest".into(),
        base: revision.clone(),
        candidate: revision,
        changed_test_files: vec![],
        test_only: false,
        criteria: vec![],
        jobs: vec![],
        mutation_check: None,
        diff_coverage: None,
        harness: None,
        sandbox: None,
        workers: vec![],
        coordinators: vec![],
        started_at: "2026-01-01T00:00:00Z".into(),
        duration_s: 0.0,
    };
    serde_json::to_string(&evidence).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_forged_finished_event_does_not_end_the_cli_with_its_verdict() {
    let bus = ClusterSandbox::with_file_store();
    let coordinator = bus.coordinator("assay");
    let forger = bus.client().await;
    let proofs = proofs_bucket(&forger, "assay").await;
    let proof = proof::new_proof_id();
    let planned = submission(&proof, 1);
    let job = planned.jobs[0].clone();
    let cli = submitted_as_the_cli(&bus, planned).await;
    // No worker runs: the proof stays running while the forger announces it finished, inline
    // and as a stored copy (whose reference names nothing the coordinator wrote).
    let deadline = Instant::now() + Duration::from_secs(30);
    while status(&proofs, &proof).await != Some(ProofStatus::Running) {
        assert!(Instant::now() < deadline, "the proof was never accepted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let forged = ProgressEvent::Finished {
        evidence_json: forged_evidence(&proof),
    };
    let subject = Subjects::new("assay").progress(&proof);
    for _ in 0..5 {
        forger
            .publish(
                subject.clone(),
                wire::encode("progress", &forged).unwrap().into(),
            )
            .await
            .unwrap();
        forger.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    assert!(
        !cli.is_finished(),
        "the CLI ended on a forged finished event: {:?}",
        cli.await.unwrap().map(|e| e.verdict)
    );
    // The real result finishes the proof; the CLI reports the coordinator's evidence.
    let js = jetstream::new(forger.clone());
    let worker = WorkerId("worker-real".into());
    publish_result(
        &js,
        "assay",
        &proof,
        &completed(&job, &worker),
        job.job_id.as_str(),
    )
    .await;
    let evidence = tokio::time::timeout(Duration::from_secs(60), cli)
        .await
        .expect("the CLI never saw the real evidence")
        .unwrap()
        .unwrap();
    assert_eq!(evidence.repository, "/srv/invoices");
    assert_ne!(evidence.verdict, Verdict::Proven);
    coordinator.stop().await;
}

/// A proof submitted while the coordinator restarts waits for it instead of failing: NATS says
/// no one listens, so nobody received the request, and the CLI sends it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_proof_submitted_while_the_coordinator_restarts_is_taken_when_it_is_back() {
    let bus = ClusterSandbox::with_file_store();
    let proof = proof::new_proof_id();
    let planned = submission(&proof, 2);
    let cli = submitted_as_the_cli(&bus, planned).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !cli.is_finished(),
        "the CLI gave up while no coordinator ran: {:?}",
        cli.await
    );
    let coordinator = bus.coordinator("assay");
    let worker = answering_worker(&bus, "assay", "worker-after-restart");
    let evidence = tokio::time::timeout(Duration::from_secs(60), cli)
        .await
        .expect("the proof never finished")
        .unwrap()
        .expect("the submission failed instead of waiting for the coordinator");
    assert_eq!(evidence.proof_id, proof.to_string());
    worker.stop().await;
    coordinator.stop().await;
}

/// Nothing the fleet keeps grows without bound or lives only in memory: both streams are
/// work queues on disk, and the proofs bucket is on disk with a time to live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleets_streams_and_bucket_are_on_disk_and_bounded() {
    let bus = ClusterSandbox::with_file_store();
    let coordinator = bus.coordinator("assay");
    let client = bus.client().await;
    let js = jetstream::new(client.clone());
    let subjects = Subjects::new("assay");
    let deadline = Instant::now() + Duration::from_secs(30);
    let proofs = loop {
        if let Ok(store) = js.get_key_value(subjects.proofs_bucket()).await {
            break store;
        }
        assert!(
            Instant::now() < deadline,
            "the coordinator never created its bucket"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let bucket = proofs.status().await.unwrap();
    assert_eq!(bucket.max_age(), assay_transport::nats::PROOF_RECORD_TTL);
    assert_eq!(
        bucket.info.config.storage,
        jetstream::stream::StorageType::File
    );
    for name in [subjects.jobs_stream(), subjects.results_stream()] {
        // The bucket comes first; the streams once the coordinator holds the lead.
        let mut stream = loop {
            if let Ok(stream) = js.get_stream(&name).await {
                break stream;
            }
            assert!(
                Instant::now() < deadline,
                "the coordinator never created {name}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let config = &stream.info().await.unwrap().config;
        assert_eq!(
            config.storage,
            jetstream::stream::StorageType::File,
            "{name}"
        );
        assert_eq!(
            config.retention,
            jetstream::stream::RetentionPolicy::WorkQueue,
            "{name}"
        );
    }
    coordinator.stop().await;
}

/// `assay test --cluster` and `assay mutate --cluster` submit each job as a one-job job
/// submission and
/// wait for its result: a result announced in a progress message by another client must not be
/// taken; only the result the coordinator recorded counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_forged_job_finished_event_does_not_hand_a_cluster_run_its_result() {
    let bus = ClusterSandbox::with_file_store();
    let coordinator = bus.coordinator("assay");
    let forger = bus.client().await;
    let proofs = proofs_bucket(&forger, "assay").await;
    let queue = ClusterQueue::new(
        bus.client().await,
        Subjects::new("assay"),
        proofs.clone(),
        Arc::new(assay_transport::store::open_store(&bus.store_url(), &[]).unwrap()),
        "/srv/invoices".into(),
        "suite",
    );
    let run = ProofId("r-invoices-suite".into());
    let tree = uploaded_tree(&bus).await;
    let spec = job(&run, 3, &tree, &["python3", "-m", "pytest", "-q"]);
    queue.submit(spec.clone()).await.unwrap();
    // No worker yet: the job waits while the forger announces a passing result for it.
    let inner = ProofId(format!("{run}-0003"));
    let mut forged = completed(&spec, &WorkerId("worker-forged".into()));
    forged.job_id = JobId::for_index(&inner, 0);
    forged.index = 0;
    let event = ProgressEvent::JobFinished {
        done: 1,
        total: 1,
        result: Box::new(forged),
        cached: false,
    };
    let subject = Subjects::new("assay").progress(&inner);
    let deadline = Instant::now() + Duration::from_secs(30);
    while status(&proofs, &inner).await != Some(ProofStatus::Running) {
        assert!(
            Instant::now() < deadline,
            "the job's proof was never accepted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for _ in 0..3 {
        forger
            .publish(
                subject.clone(),
                wire::encode("progress", &event).unwrap().into(),
            )
            .await
            .unwrap();
        forger.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let early = tokio::time::timeout(Duration::from_secs(3), queue.next_result()).await;
    assert!(
        early.is_err(),
        "the run took a forged result: {:?}",
        early.ok().flatten().map(|r| r.worker)
    );
    // The real worker's result, recorded by the coordinator, is the one the run gets.
    let worker = answering_worker(&bus, "assay", "worker-real");
    let result = tokio::time::timeout(Duration::from_secs(60), queue.next_result())
        .await
        .expect("the real result never came")
        .expect("the result stream closed");
    assert_eq!(result.worker.0, "worker-real");
    assert_eq!((result.job_id, result.index), (spec.job_id, 3));
    // A job-level submission: no criteria, no revisions, and nothing concluded.
    let bytes = proofs.get(keys::record(&inner)).await.unwrap().unwrap();
    let record: ProofRecord = wire::decode("proof record", &bytes).unwrap();
    match record.submission {
        Submission::Jobs(jobs) => {
            assert_eq!((jobs.label.as_str(), jobs.jobs.len()), ("suite", 1));
            assert_eq!(jobs.trees, vec![tree]);
        }
        Submission::Proof(proof) => panic!("a suite job went as a proof: {proof:?}"),
    }
    assert!(wait_finished(&proofs, &inner, Duration::from_secs(30)).await);
    assert!(proofs.get(keys::evidence(&inner)).await.unwrap().is_none());
    worker.stop().await;
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_fleets_on_one_server_share_no_job_and_no_halt() {
    let bus = ClusterSandbox::with_file_store();
    let fleets = ["alpha", "beta"];
    let mut services = Vec::new();
    for prefix in fleets {
        services.push(bus.coordinator(prefix));
        services.push(answering_worker(&bus, prefix, &format!("{prefix}-worker")));
    }
    let client = bus.client().await;
    let alpha = proofs_bucket(&client, "alpha").await;
    let beta = proofs_bucket(&client, "beta").await;
    let mut proofs = Vec::new();
    for (prefix, store) in [("alpha", &alpha), ("beta", &beta)] {
        let proof = proof::new_proof_id();
        assert!(matches!(
            submit(&client, prefix, submission(&proof, 3)).await,
            SubmitReply::Accepted { .. }
        ));
        proofs.push((prefix, store, proof));
    }
    for (prefix, store, proof) in &proofs {
        assert!(
            wait_finished(store, proof, Duration::from_secs(30)).await,
            "{prefix}'s proof never finished"
        );
        for index in 0..3 {
            let result = stored_result(store, proof, index).await.unwrap();
            assert_eq!(result.worker.as_str(), format!("{prefix}-worker"));
        }
    }
    // Alpha halts; beta goes on.
    assay_coordinator::fleet_halt::set_halt(&alpha, "alpha's release is frozen")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = proof::new_proof_id();
    assert!(matches!(
        submit(&client, "alpha", submission(&held, 1)).await,
        SubmitReply::Accepted { .. }
    ));
    let going = proof::new_proof_id();
    assert!(matches!(
        submit(&client, "beta", submission(&going, 1)).await,
        SubmitReply::Accepted { .. }
    ));
    assert!(
        wait_finished(&beta, &going, Duration::from_secs(30)).await,
        "alpha's halt stopped beta"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(status(&alpha, &held).await, Some(ProofStatus::Running));
    assert!(
        stored_result(&alpha, &held, 0).await.is_none(),
        "a halted fleet ran a job"
    );
    assay_coordinator::fleet_halt::clear_halt(&alpha)
        .await
        .unwrap();
    assert!(wait_finished(&alpha, &held, Duration::from_secs(30)).await);
    for service in services {
        service.stop().await;
    }
}

/// The script of a test that leaves daemons behind: one in a session of its own, one
/// double-forked so that its parent is gone. Each writes its pid to `pids/NAME` in its tree
/// (the job's only writable place) and sleeps `$NAP` seconds, the mark the test finds them by.
const ESCAPE: &str = r#"
mkdir -p pids
setsid sh -c 'echo $$ > "$1"; exec sleep "$NAP"' daemon pids/setsid &
( sh -c 'echo $$ > "$1"; exec sleep "$NAP"' daemon pids/double & )
until [ -s pids/setsid ] && [ -s pids/double ]; do sleep 0.05; done
sleep 0.5
"#;

/// The host's pids of the processes running `sleep NAP`.
fn sleeping(nap: &str) -> Vec<i32> {
    let wanted = format!("sleep\0{nap}\0");
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| cmdline == wanted.as_bytes())
                && alive(*pid)
        })
        .collect()
}

/// Whether `pid` is a live process (a zombie is dead, only not yet reaped).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}

/// A worker's job context in `dir` running jobs in the process sandbox on the trees of the
/// one-commit repository of `files`; returns it with the tree id.
fn local_worker(
    dir: &Path,
    files: &[(&str, &str)],
) -> (assay_worker::job_context::JobContext, TreeId) {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    for (path, text) in files {
        std::fs::write(repo.join(path), text).unwrap();
    }
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "files"]);
    let tree = TreeId(git(&repo, &["rev-parse", "HEAD^{tree}"]));
    let ctx = assay_worker::job_context::JobContext {
        worker_id: WorkerId("worker-a".into()),
        sandbox: Arc::new(assay_worker::sandbox::process::ProcessSandbox::default()),
        trees: Arc::new(assay_transport::tree::GitTreeSource::new(&repo)),
        store: Arc::new(
            assay_transport::store::ObjectArtifactStore::open(&format!(
                "file://{}",
                dir.join("store").display()
            ))
            .unwrap(),
        ),
        scratch_root: dir.join("scratch"),
        pass_env: vec!["PATH".into()],
        output_cap_bytes: assay_common::service_config::DEFAULT_OUTPUT_CAP_BYTES,
        dependencies: None,
    };
    (ctx, tree)
}

/// Runs `script` as a real job in the process sandbox, with `timeout_secs`; returns the job's
/// status and the daemons' pids.
async fn run_escaping_job(script: &str, timeout_secs: u64) -> (JobStatus, Vec<i32>) {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, tree) = local_worker(dir.path(), &[("escape.sh", script)]);
    // A nap no other process on the machine takes: the daemons' mark.
    let nap = format!("97.{}{}", std::process::id(), timeout_secs);
    let proof = ProofId("p-1795995829-daemons".into());
    let mut spec = job(&proof, 0, &tree, &["sh", "escape.sh"]);
    spec.timeout_secs = timeout_secs;
    spec.env = vec![("NAP".into(), nap.clone())];
    let job = tokio::spawn(async move { assay_worker::execute::run_job(&spec, &ctx).await });
    // Watch the host's processes while the job runs: every daemon seen is one it started.
    let mut daemons: Vec<i32> = Vec::new();
    while !job.is_finished() {
        for pid in sleeping(&nap) {
            if !daemons.contains(&pid) {
                daemons.push(pid);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let result = job.await.unwrap();
    drop(dir);
    (result.status, daemons)
}

/// Asserts every daemon is dead within a moment, and kills any that is not, so a failing run
/// leaves nothing behind either.
async fn assert_all_dead(daemons: &[i32]) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while daemons.iter().any(|pid| alive(*pid)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let survivors: Vec<i32> = daemons.iter().copied().filter(|pid| alive(*pid)).collect();
    for pid in &survivors {
        // SAFETY: kill(2) on a pid this test's job started.
        unsafe {
            libc::kill(*pid, libc::SIGKILL);
        }
    }
    assert!(
        survivors.is_empty(),
        "daemons outlived their job: {survivors:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemons_a_job_leaves_behind_die_when_it_ends() {
    let (status, daemons) = run_escaping_job(ESCAPE, 60).await;
    assert_eq!(status, JobStatus::Completed { exit_code: 0 });
    assert_eq!(daemons.len(), 2, "both daemons started");
    assert_all_dead(&daemons).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemons_of_a_job_killed_at_its_timeout_die_with_it() {
    let (status, daemons) = run_escaping_job(&format!("{ESCAPE}\nsleep 60\n"), 2).await;
    assert_eq!(status, JobStatus::TimedOut);
    assert_eq!(daemons.len(), 2, "both daemons started");
    assert_all_dead(&daemons).await;
}

/// A job that copies its parent's and its grandparent's environment (its reaper's, a fork of
/// the worker, and the worker's own) to `$OUT/parent` and `$OUT/worker`.
const SNOOP: &str = r#"
cat "/proc/$PPID/environ" > "$OUT/parent"
worker=$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$PPID/status")
cat "/proc/$worker/environ" > "$OUT/worker"
"#;

const SECRET: &str = "hunter2-7f3c9a";

/// The worker's side of [`a_job_cannot_read_the_workers_secrets`]: this test binary started
/// again with a secret in its environment, serving jobs until it is killed.
async fn serve_as_secret_holding_worker(nats: String) {
    let dir = std::path::PathBuf::from(std::env::var("ASSAY_ADVERSARIAL_DIR").unwrap());
    let mut service = ServiceConfig::default();
    service.nats.url = nats;
    service.store.url = format!("file://{}", dir.join("store").display());
    service.http.listen = Some(String::new());
    service.worker.sandbox = SandboxKind::Process;
    service.worker.slots = 1;
    service.worker.tree_cache_dir = dir.join("secret-cache").display().to_string();
    let mut config = WorkerConfig::new(service);
    config.worker_id = WorkerId("worker-secret".into());
    config.scratch_root = Some(dir.join("secret-scratch"));
    config.pass_env = vec!["PATH".into()];
    worker::serve(config, futures::future::pending())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_cannot_read_the_workers_secrets() {
    if let Ok(nats) = std::env::var("ASSAY_ADVERSARIAL_WORKER_NATS") {
        return serve_as_secret_holding_worker(nats).await;
    }
    let bus = ClusterSandbox::with_file_store();
    let tree = uploaded_tree_of(&bus, "snoop", "snoop.sh", SNOOP).await;
    // The worker is this test binary again, running only this test, with a secret in the
    // environment it starts with: what /proc/<pid>/environ shows.
    let mut worker = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_job_cannot_read_the_workers_secrets",
            "--nocapture",
        ])
        .env("ASSAY_ADVERSARIAL_WORKER_NATS", bus.nats_url())
        .env("ASSAY_ADVERSARIAL_DIR", bus.dir())
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let client = bus.client().await;
    let js = jetstream::new(client.clone());
    let subjects = Subjects::new("assay");
    let results = loop {
        let ready = match js.get_stream(subjects.jobs_stream()).await {
            Ok(stream) => stream
                .get_consumer::<jetstream::consumer::pull::Config>(&subjects.workers_consumer())
                .await
                .is_ok(),
            Err(_) => false,
        };
        if ready
            && let Ok(consumer) = assay_transport::nats::coordinator_consumer(
                &js,
                &subjects,
                &QueueTuning::default(),
                assay_transport::nats::Placement::SINGLE,
            )
            .await
        {
            break consumer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let out = bus.dir().join("snooped");
    std::fs::create_dir_all(&out).unwrap();
    let proof = ProofId("p-1795995829-snoop".into());
    let mut snoop = job(&proof, 0, &tree, &["sh", "snoop.sh"]);
    snoop.env = vec![("OUT".into(), out.display().to_string())];
    publish_job(&js, &proof, "snoop", &snoop).await;
    let mut messages = results.messages().await.unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(60), messages.next()).await;
    let _ = worker.kill();
    let _ = worker.wait();
    let message = answered
        .expect("the snooping job's result arrived")
        .unwrap()
        .unwrap();
    let result: JobResult =
        match wire::decode::<assay_common::fleet::ResultMessage>("job result", &message.payload)
            .unwrap()
        {
            assay_common::fleet::ResultMessage::Inline(result) => *result,
            other => panic!("a stored result: {other:?}"),
        };
    assert!(
        matches!(result.status, JobStatus::Completed { .. }),
        "{result:?}"
    );
    for name in ["parent", "worker"] {
        let read = std::fs::read(out.join(name)).unwrap_or_default();
        // Unreadable (a non-root worker is non-dumpable) or read with the value starred out.
        let named = b"AWS_SECRET_ACCESS_KEY=";
        assert!(
            read.is_empty() || read.windows(named.len()).any(|w| w == named),
            "the job read some other process as its {name}"
        );
        assert!(
            !read.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
            "the job read the secret in its {name}'s environment"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_job_with_the_largest_timeout_runs_its_cases() {
    use assay_common::manifest::{Expectation, ManifestCase, ManifestJob};
    use assay_common::tree_path::{TreeDir, TreePath};
    let dir = tempfile::tempdir().unwrap();
    let (ctx, tree) = local_worker(dir.path(), &[("yes.txt", "true\n")]);
    let proof = ProofId("p-1795995829-forever".into());
    let mut spec = job(&proof, 0, &tree, &["cat"]);
    // No `Instant` holds now + u64::MAX seconds: the job has no deadline rather than a panic.
    spec.timeout_secs = u64::MAX;
    spec.report = ReportFormat::ManifestCases(ManifestJob {
        corpus: TreeDir::root(),
        cases: vec![ManifestCase {
            line: 1,
            path: TreePath::new("yes.txt").unwrap(),
            expectation: Expectation::Boolean(true),
        }],
    });
    let result = assay_worker::execute::run_job(&spec, &ctx).await;
    assert_eq!(result.status, JobStatus::Completed { exit_code: 0 });
    match result.report {
        ReportOutcome::Parsed(report) => {
            assert_eq!(report.cases.len(), 1);
            assert_eq!(
                report.cases[0].outcome,
                assay_common::outcome::Outcome::Passed
            );
        }
        other => panic!("the case was not judged: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_server_that_verifies_clients_refuses_a_plain_client_and_accepts_a_configured_one() {
    let certs = tempfile::tempdir().unwrap();
    servers::make_certificates(certs.path());
    let c = |name: &str| certs.path().join(name).display().to_string();
    let (ca, cert, key) = (c("ca.pem"), c("client.pem"), c("client.key"));
    let (server_cert, server_key) = (c("server.pem"), c("server.key"));
    let server = start_nats_with_config(|port, _| {
        format!(
            "listen: \"127.0.0.1:{port}\"\ntls {{\n  cert_file: \"{server_cert}\"\n  key_file: \"{server_key}\"\n  ca_file: \"{ca}\"\n  verify: true\n}}\n"
        )
    });
    let url = format!("nats://127.0.0.1:{}", server.port);
    let plain = NatsSection {
        url: url.clone(),
        ..Default::default()
    };
    assert!(
        assay_transport::nats::connect(&plain, assay_common::nats_permissions::Role::Submitter)
            .await
            .is_err(),
        "a plain client got through"
    );
    let no_certificate = NatsSection {
        url: format!("tls://127.0.0.1:{}", server.port),
        tls_ca_file: ca.clone(),
        ..Default::default()
    };
    assert!(
        assay_transport::nats::connect(
            &no_certificate,
            assay_common::nats_permissions::Role::Submitter
        )
        .await
        .is_err(),
        "a client without a certificate got through"
    );
    let configured = NatsSection {
        url: url.clone(),
        tls_ca_file: ca,
        tls_cert_file: cert,
        tls_key_file: key,
        require_tls: true,
        ..Default::default()
    };
    let client = assay_transport::nats::connect(
        &configured,
        assay_common::nats_permissions::Role::Submitter,
    )
    .await
    .unwrap();
    client.publish("assay.ping", "".into()).await.unwrap();
    client.flush().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_server_refuses_wrong_credentials_with_one_line_naming_the_url() {
    let server = start_nats_with_config(|port, _| {
        format!(
            "listen: \"127.0.0.1:{port}\"\nauthorization {{\n  user: ada\n  password: \"s3cret-right\"\n}}\n"
        )
    });
    let secrets = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = secrets.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let url = format!("nats://127.0.0.1:{}", server.port);
    let wrong = NatsSection {
        url: url.clone(),
        user: "ada".into(),
        password_file: write("wrong", "s3cret-wrong\n"),
        ..Default::default()
    };
    let message =
        assay_transport::nats::connect(&wrong, assay_common::nats_permissions::Role::Submitter)
            .await
            .expect_err("wrong credentials got through")
            .to_string();
    assert!(message.contains(&url), "{message}");
    assert!(message.contains("hint:"), "{message}");
    assert!(!message.contains('\n'), "{message}");
    let right = NatsSection {
        url,
        user: "ada".into(),
        password_file: write("right", "s3cret-right\n"),
        ..Default::default()
    };
    let client =
        assay_transport::nats::connect(&right, assay_common::nats_permissions::Role::Submitter)
            .await
            .unwrap();
    client.publish("assay.ping", "".into()).await.unwrap();
    client.flush().await.unwrap();
}

/// This process's peak resident memory (`VmHWM`), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM in /proc/self/status");
    let kib: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kib * 1024
}

const MIB: u64 = 1024 * 1024;

/// A job that prints 64 MiB to stdout and 2 MiB to stderr.
const FLOOD: &str = "import sys\nchunk = b'x' * (1024 * 1024)\nfor _ in range(64):\n    sys.stdout.buffer.write(chunk)\nfor _ in range(2):\n    sys.stderr.buffer.write(chunk)\n";

/// Runs [`FLOOD`] under `cap`; returns the result, the stored bytes of stdout and stderr, and
/// how much the worker's (this process's) peak memory grew.
async fn flood_under_cap(cap: u64) -> (JobResult, u64, u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let (mut ctx, tree) = local_worker(dir.path(), &[("flood.py", FLOOD)]);
    ctx.output_cap_bytes = cap;
    let proof = ProofId("p-1795995829-flood".into());
    let spec = job(&proof, 0, &tree, &["python3", "flood.py"]);
    let before = peak_rss();
    let result = assay_worker::execute::run_job(&spec, &ctx).await;
    let grown = peak_rss().saturating_sub(before);
    let stored = |name: &str| {
        let artifact = result.artifacts.iter().find(|a| a.name == name).unwrap();
        std::fs::metadata(dir.path().join("store").join(&artifact.key))
            .unwrap()
            .len()
    };
    let (stdout, stderr) = (stored("stdout"), stored("stderr"));
    // What was stored is what the artifact's sha256 says.
    for artifact in &result.artifacts {
        assay_transport::store::read_artifact(ctx.store.as_ref(), artifact)
            .await
            .unwrap();
    }
    (result, stdout, stderr, grown)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_flooding_its_output_is_stored_up_to_the_cap_with_the_rest_counted() {
    let (result, stdout, stderr, grown) = flood_under_cap(MIB).await;
    assert_eq!(
        result.status,
        JobStatus::Completed { exit_code: 0 },
        "{result:?}"
    );
    assert_eq!(stdout, MIB, "stdout is stored up to the cap");
    assert_eq!(stderr, MIB, "stderr has a cap of its own");
    let artifact = |name: &str| result.artifacts.iter().find(|a| a.name == name).unwrap();
    assert_eq!(artifact("stdout").bytes, MIB);
    assert_eq!(artifact("stdout").dropped_bytes, 63 * MIB);
    assert_eq!(artifact("stderr").dropped_bytes, MIB);
    assert!(
        grown < 32 * MIB,
        "the worker's peak memory grew {grown} bytes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_over_a_cap_above_the_part_size_is_streamed_in_parts_not_held_whole() {
    // 12 MiB is past the size that goes in parts: the upload streams, a part at a time.
    let (result, stdout, stderr, grown) = flood_under_cap(12 * MIB).await;
    let artifact = |name: &str| result.artifacts.iter().find(|a| a.name == name).unwrap();
    assert_eq!(stdout, 12 * MIB);
    assert_eq!(artifact("stdout").dropped_bytes, 52 * MIB);
    assert_eq!(stderr, 2 * MIB);
    assert_eq!(
        artifact("stderr").dropped_bytes,
        0,
        "stderr is under the cap"
    );
    assert!(
        grown < 40 * MIB,
        "the worker's peak memory grew {grown} bytes"
    );
}

/// A test run that reports `cases` passing cases with long names in a JUnit report.
const MANY_CASES: &str = r#"
import sys
cases = int(sys.argv[2])
with open(sys.argv[1], "w") as out:
    out.write('<testsuite name="invoices" tests="%d" failures="0" errors="0" skipped="0">\n' % cases)
    for i in range(cases):
        out.write('<testcase classname="tests.test_invoices.TestTotals" name="test_total_includes_tax_for_region_%06d" time="0.001"/>\n' % i)
    out.write('</testsuite>\n')
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_over_the_servers_max_payload_goes_through_the_store() {
    // 64 KiB messages; a report of 3000 cases makes a result of well over 200 KiB.
    let bus = ClusterSandbox::start_with_nats(
        StoreKind::File,
        NatsSetup {
            config: "max_payload: 65536".into(),
            ..NatsSetup::default()
        },
    );
    let tree = uploaded_tree_of(&bus, "cases", "many_cases.py", MANY_CASES).await;
    let coordinator = bus.coordinator("big");
    let worker = worker(&bus, "big", "worker-big");
    let client = bus.client().await;
    assert_eq!(client.server_info().max_payload, 65536);
    let proofs = proofs_bucket(&client, "big").await;
    let proof_id = ProofId("p-1795995829-bigresult".into());
    let mut proof = submission(&proof_id, 1);
    proof.jobs[0] = job(
        &proof_id,
        0,
        &tree,
        &["python3", "many_cases.py", "{report}", "3000"],
    );
    assert!(matches!(
        submit(&client, "big", proof).await,
        SubmitReply::Accepted { .. }
    ));
    assert!(
        wait_finished(&proofs, &proof_id, Duration::from_secs(60)).await,
        "the proof finished"
    );
    let value = proofs
        .get(keys::result(&proof_id, 0))
        .await
        .unwrap()
        .expect("the job's result key");
    assert!(value.len() < 65536);
    let envelope: assay_common::fleet::ResultMessage = wire::decode("job result", &value).unwrap();
    assert!(
        matches!(envelope, assay_common::fleet::ResultMessage::Stored { .. }),
        "{envelope:?}"
    );
    let store = assay_transport::store::open_store(&bus.store_url(), &[]).unwrap();
    let result = assay_transport::offload::decode_result(&store, &proof_id, &value, RESULT_CAP)
        .await
        .unwrap();
    assert_eq!(result.status, JobStatus::Completed { exit_code: 0 });
    match &result.report {
        ReportOutcome::Parsed(report) => assert_eq!(report.cases.len(), 3000),
        other => panic!("the result's report did not arrive: {other:?}"),
    }
    assert!(wire::encode("job result", &result).unwrap().len() > 4 * 65536);
    worker.stop().await;
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_result_at_another_jobs_key_or_altered_is_refused() {
    use assay_transport::store::ArtifactStore as _;
    let store = assay_transport::store::open_store("memory://", &[]).unwrap();
    let proof_id = ProofId("p-1795995829-storedres".into());
    let tree = empty_tree();
    let spec = job(&proof_id, 1, &tree, &["true"]);
    let result = completed(&spec, &WorkerId("worker-a".into()));
    let bytes = assay_transport::offload::encode_result(&store, &proof_id, &result, 0)
        .await
        .unwrap();
    // Honest: it resolves to the result.
    let back = assay_transport::offload::decode_result(&store, &proof_id, &bytes, RESULT_CAP)
        .await
        .unwrap();
    assert_eq!(back, result);
    // Another proof's message cannot name this proof's blob.
    let other = ProofId("p-1795995829-otherproof".into());
    let err = assay_transport::offload::decode_result(&store, &other, &bytes, RESULT_CAP)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not at its own key"), "{err}");
    // A blob replaced in the store is refused.
    store
        .put_bytes(
            "result",
            &assay_common::fleet::result_key(&proof_id, 1),
            bytes::Bytes::from_static(b"forged"),
        )
        .await
        .unwrap();
    let err = assay_transport::offload::decode_result(&store, &proof_id, &bytes, RESULT_CAP)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("sha256"), "{err}");
}

/// `archive` stored as tree `tree`'s archive, with its digest, as the CLI uploads one; returns
/// a worker's tree source over that store with `limits`.
async fn hostile_tree(
    dir: &Path,
    tree: &TreeId,
    archive: Vec<u8>,
    limits: assay_transport::archive::ArchiveLimits,
) -> assay_transport::store_tree::StoreTreeSource {
    use assay_transport::store::ArtifactStore as _;
    use sha2::Digest as _;
    let store = Arc::new(
        assay_transport::store::open_store(&format!("file://{}", dir.join("store").display()), &[])
            .unwrap(),
    );
    let digest = hex::encode(sha2::Sha256::digest(&archive));
    store
        .put_bytes(
            "tree",
            &assay_common::fleet::tree_archive_key(tree),
            archive.into(),
        )
        .await
        .unwrap();
    store
        .put_bytes(
            "tree digest",
            &assay_common::fleet::tree_digest_key(tree),
            digest.into(),
        )
        .await
        .unwrap();
    assay_transport::store_tree::StoreTreeSource::new(store, dir.join("cache")).with_limits(limits)
}

/// A worker's attempt to materialize `archive`, stored as `tree` by [`hostile_tree`] under
/// `dir` with `limits`, which must be refused: what the refusal says, the tree source and the
/// directory it would have written the tree to.
async fn refused_hostile_tree(
    dir: &Path,
    tree: &TreeId,
    archive: Vec<u8>,
    limits: assay_transport::archive::ArchiveLimits,
) -> (
    String,
    assay_transport::store_tree::StoreTreeSource,
    std::path::PathBuf,
) {
    use assay_transport::tree::TreeSource as _;
    let trees = hostile_tree(dir, tree, archive, limits).await;
    let dest = dir.join("tree");
    std::fs::create_dir_all(&dest).unwrap();
    let err = trees.materialize(tree, &dest).await.unwrap_err();
    let message = assay_transport::error_chain::error_chain(&err);
    (message, trees, dest)
}

fn file_header(size: u64, mode: u32) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(size);
    header.set_mode(mode);
    header.set_mtime(0);
    header.set_cksum();
    header
}

fn entries_in(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_archive_of_100k_entries_over_the_entry_limit_is_refused_before_unpacking() {
    let dir = tempfile::tempdir().unwrap();
    let mut builder = tar::Builder::new(Vec::new());
    for i in 0..100_000 {
        let mut header = file_header(1, 0o644);
        builder
            .append_data(&mut header, format!("f/{i:06}.py"), &b"x"[..])
            .unwrap();
    }
    let archive = builder.into_inner().unwrap();
    let tree = TreeId("a1".repeat(20));
    let limits = assay_transport::archive::ArchiveLimits {
        max_bytes: 1 << 30,
        max_entries: 10_000,
    };
    let (message, _, dest) = refused_hostile_tree(dir.path(), &tree, archive, limits).await;
    assert!(message.contains("more than 10000 entries"), "{message}");
    assert!(message.contains("worker.tree_max_entries"), "{message}");
    assert_eq!(entries_in(&dest), 0, "nothing was written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_archive_entry_declaring_a_terabyte_is_refused_before_unpacking() {
    let dir = tempfile::tempdir().unwrap();
    // A small honest file, then a header that declares 1 TiB followed by a few bytes, and no
    // end-of-archive blocks: an archive cut off where the store's copy ends.
    let mut honest = file_header(9, 0o644);
    honest.set_path("pager.py").unwrap();
    honest.set_cksum();
    let mut archive = honest.as_bytes().to_vec();
    let mut data = b"LIMIT = 1".to_vec();
    data.resize(512, 0);
    archive.extend_from_slice(&data);
    let mut huge = file_header(1 << 40, 0o644);
    huge.set_path("huge.bin").unwrap();
    huge.set_cksum();
    archive.extend_from_slice(huge.as_bytes());
    archive.extend_from_slice(&[b'x'; 4096]);
    let tree = TreeId("b2".repeat(20));
    let (message, _, dest) = refused_hostile_tree(
        dir.path(),
        &tree,
        archive,
        assay_transport::archive::ArchiveLimits::default(),
    )
    .await;
    assert!(message.contains("huge.bin"), "{message}");
    assert!(message.contains("worker.tree_max_bytes"), "{message}");
    assert_eq!(entries_in(&dest), 0, "nothing was written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_archive_with_setuid_setgid_or_sticky_bits_is_refused_and_writes_nothing() {
    for (path, mode, kind) in [
        ("shared/escalate", 0o4755, tar::EntryType::Regular),
        ("shared/group", 0o2755, tar::EntryType::Regular),
        ("shared", 0o3777, tar::EntryType::Directory),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut builder = tar::Builder::new(Vec::new());
        let mut honest = file_header(10, 0o755);
        builder
            .append_data(&mut honest, "run.sh", &b"#!/bin/sh\n"[..])
            .unwrap();
        let mut header = file_header(0, mode);
        header.set_entry_type(kind);
        builder
            .append_data(&mut header, path, std::io::empty())
            .unwrap();
        let archive = builder.into_inner().unwrap();
        let tree = TreeId("c3".repeat(20));
        let (message, _, dest) = refused_hostile_tree(
            dir.path(),
            &tree,
            archive,
            assay_transport::archive::ArchiveLimits::default(),
        )
        .await;
        assert!(message.contains(path), "{message}");
        assert!(message.contains(&format!("mode {mode:o}")), "{message}");
        assert_eq!(entries_in(&dest), 0, "nothing was written");
        assert_eq!(
            entries_in(&dir.path().join("cache")),
            0,
            "nothing was cached"
        );
    }
}

/// Tree `tree`'s archive and digest in the store at `url`, as they are stored.
async fn stored_tree(url: &str, tree: &TreeId) -> (bytes::Bytes, bytes::Bytes) {
    use assay_transport::store::ArtifactStore as _;
    let store = assay_transport::store::open_store(url, &[]).unwrap();
    let archive = store
        .get(&assay_common::fleet::tree_archive_key(tree))
        .await
        .unwrap()
        .unwrap();
    let digest = store
        .get(&assay_common::fleet::tree_digest_key(tree))
        .await
        .unwrap()
        .unwrap();
    (archive, digest)
}

/// Plays someone who can write the store: tree `victim`'s archive and digest become those of
/// tree `planted`, consistent with each other.
async fn plant_tree(url: &str, victim: &TreeId, planted: &TreeId) {
    use assay_transport::store::ArtifactStore as _;
    let (archive, digest) = stored_tree(url, planted).await;
    let store = assay_transport::store::open_store(url, &[]).unwrap();
    store
        .put_bytes(
            "tree",
            &assay_common::fleet::tree_archive_key(victim),
            archive,
        )
        .await
        .unwrap();
    store
        .put_bytes(
            "tree digest",
            &assay_common::fleet::tree_digest_key(victim),
            digest,
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tree_archive_swapped_in_the_store_for_another_trees_is_refused_as_tampering() {
    let bus = ClusterSandbox::with_file_store();
    let honest = uploaded_tree_of(&bus, "pager", "pager.py", "LIMIT = 10\n").await;
    let planted = uploaded_tree_of(&bus, "pager-planted", "pager.py", "LIMIT = 0\n").await;
    assert_ne!(honest, planted);
    plant_tree(&bus.store_url(), &honest, &planted).await;
    let worker = worker(&bus, "assay", "worker-a");
    let client = bus.client().await;
    let js = jetstream::new(client.clone());
    let subjects = Subjects::new("assay");
    let results = results_consumer(&js, &subjects).await;
    let proof = ProofId("p-1795995829-plantedtree".into());
    publish_job(&js, &proof, "planted", &job(&proof, 0, &honest, &["true"])).await;
    let mut messages = results.messages().await.unwrap();
    let result = next_result(&mut messages).await;
    let JobStatus::Infrastructure { message, cause } = &result.status else {
        panic!("the planted tree ran: {result:?}");
    };
    assert_eq!(*cause, assay_common::fault::InfraCause::TreeFetch);
    assert!(
        message.contains(&format!("does not hold tree {honest}")),
        "{message}"
    );
    assert!(
        message.contains(&format!("make tree {planted}")),
        "{message}"
    );
    assert!(message.contains("tampered"), "{message}");
    let cache = bus.dir().join("worker-a-cache");
    assert!(
        !cache.join(format!("{honest}.tar")).exists(),
        "the planted archive is not cached"
    );
    assert_eq!(entries_in(&cache), 0, "{cache:?} holds nothing");
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_upload_replaces_a_planted_tree_archive_and_the_tree_then_materializes() {
    use assay_transport::store_tree::{StoreTreeSource, TreeUpload, upload_tree};
    use assay_transport::tree::TreeSource as _;
    let bus = ClusterSandbox::with_file_store();
    let honest = uploaded_tree_of(&bus, "pager", "pager.py", "LIMIT = 10\n").await;
    let planted = uploaded_tree_of(&bus, "pager-planted", "pager.py", "LIMIT = 0\n").await;
    let (_, honest_digest) = stored_tree(&bus.store_url(), &honest).await;
    let (_, planted_digest) = stored_tree(&bus.store_url(), &planted).await;
    plant_tree(&bus.store_url(), &honest, &planted).await;
    let store = Arc::new(assay_transport::store::open_store(&bus.store_url(), &[]).unwrap());
    let repo = bus.dir().join("pager");
    let uploaded = upload_tree(store.as_ref(), &repo, &honest).await.unwrap();
    assert_eq!(
        uploaded.upload,
        TreeUpload::Replaced {
            stored: String::from_utf8(planted_digest.to_vec()).unwrap()
        }
    );
    assert_eq!(uploaded.sha256.as_bytes(), &honest_digest[..]);
    let again = upload_tree(store.as_ref(), &repo, &honest).await.unwrap();
    assert_eq!(again.upload, TreeUpload::Present, "nothing is sent twice");
    let trees = StoreTreeSource::new(store, bus.dir().join("worker-cache"));
    let dest = bus.dir().join("tree");
    std::fs::create_dir_all(&dest).unwrap();
    trees.materialize(&honest, &dest).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(dest.join("pager.py")).unwrap(),
        "LIMIT = 10\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_tree_archive_altered_on_disk_is_refused_then_fetched_again() {
    use assay_transport::store_tree::StoreTreeSource;
    use assay_transport::tree::TreeSource as _;
    let bus = ClusterSandbox::with_file_store();
    let honest = uploaded_tree_of(&bus, "pager", "pager.py", "LIMIT = 10\n").await;
    let planted = uploaded_tree_of(&bus, "pager-planted", "pager.py", "LIMIT = 0\n").await;
    let store = Arc::new(assay_transport::store::open_store(&bus.store_url(), &[]).unwrap());
    let cache = bus.dir().join("worker-cache");
    let trees = StoreTreeSource::new(store, &cache);
    let materialize = |name: &str| {
        let dest = bus.dir().join(name);
        std::fs::create_dir_all(&dest).unwrap();
        let trees = &trees;
        let honest = honest.clone();
        async move { trees.materialize(&honest, &dest).await.map(|()| dest) }
    };
    materialize("first").await.unwrap();
    assert_eq!(trees.downloads(), 1);
    // Someone with the worker's disk swaps the cached archive for another tree's.
    let (planted_archive, _) = stored_tree(&bus.store_url(), &planted).await;
    std::fs::write(cache.join(format!("{honest}.tar")), &planted_archive).unwrap();
    let second = materialize("second").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(second.join("pager.py")).unwrap(),
        "LIMIT = 10\n",
        "the job got its own tree, not the planted one"
    );
    assert_eq!(trees.downloads(), 2, "the altered cache was fetched afresh");
    let (honest_archive, _) = stored_tree(&bus.store_url(), &honest).await;
    assert_eq!(
        std::fs::read(cache.join(format!("{honest}.tar"))).unwrap(),
        honest_archive,
        "the cache holds the real archive again"
    );
    // A link or a FIFO in its place is refused, not followed or waited on.
    let elsewhere = bus.dir().join("planted.tar");
    std::fs::write(&elsewhere, &planted_archive).unwrap();
    std::fs::remove_file(cache.join(format!("{honest}.tar"))).unwrap();
    std::os::unix::fs::symlink(&elsewhere, cache.join(format!("{honest}.tar"))).unwrap();
    let third = materialize("third").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(third.join("pager.py")).unwrap(),
        "LIMIT = 10\n"
    );
    assert_eq!(trees.downloads(), 3);
    std::fs::remove_file(cache.join(format!("{honest}.tar"))).unwrap();
    let made = Command::new("mkfifo")
        .arg(cache.join(format!("{honest}.tar")))
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo");
    let fourth = tokio::time::timeout(Duration::from_secs(20), materialize("fourth"))
        .await
        .expect("a FIFO in the cache does not block the worker")
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(fourth.join("pager.py")).unwrap(),
        "LIMIT = 10\n"
    );
    assert_eq!(trees.downloads(), 4);
}

/// Plays a job on the worker's disk: tree `victim`'s cache entry becomes `planted`'s archive,
/// with every marker a worker ever kept beside an archive saying it is good.
fn plant_in_cache(cache: &Path, victim: &TreeId, planted_archive: &[u8]) {
    use sha2::Digest as _;
    std::fs::create_dir_all(cache).unwrap();
    let digest = hex::encode(sha2::Sha256::digest(planted_archive));
    std::fs::write(cache.join(format!("{victim}.tar")), planted_archive).unwrap();
    std::fs::write(cache.join(format!("{victim}.tar.verified")), &digest).unwrap();
    std::fs::write(cache.join(format!("{victim}.tar.sha256")), &digest).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_archive_planted_in_the_cache_with_matching_markers_is_refused_and_the_real_tree_fetched()
 {
    use assay_transport::store_tree::StoreTreeSource;
    use assay_transport::tree::TreeSource as _;
    let bus = ClusterSandbox::with_file_store();
    let honest = uploaded_tree_of(&bus, "pager", "pager.py", "LIMIT = 10\n").await;
    let planted = uploaded_tree_of(&bus, "pager-planted", "pager.py", "LIMIT = 0\n").await;
    let (planted_archive, _) = stored_tree(&bus.store_url(), &planted).await;
    let (honest_archive, _) = stored_tree(&bus.store_url(), &honest).await;
    let cache = bus.dir().join("worker-cache");
    // Planted before the worker ever fetched the tree, as another change's job would.
    plant_in_cache(&cache, &honest, &planted_archive);
    let store = Arc::new(assay_transport::store::open_store(&bus.store_url(), &[]).unwrap());
    let trees = StoreTreeSource::new(store, &cache);
    let dest = bus.dir().join("tree");
    std::fs::create_dir_all(&dest).unwrap();
    trees.materialize(&honest, &dest).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(dest.join("pager.py")).unwrap(),
        "LIMIT = 10\n",
        "the job runs on its own tree"
    );
    assert_eq!(
        trees.downloads(),
        1,
        "the real archive was fetched from the store"
    );
    assert_eq!(
        std::fs::read(cache.join(format!("{honest}.tar"))).unwrap(),
        honest_archive
    );
    for marker in ["tar.verified", "tar.sha256"] {
        assert!(
            !cache.join(format!("{honest}.{marker}")).exists(),
            "the planted {marker} marker is gone"
        );
    }
    // Planted again after the tree is cached: refused the same way.
    plant_in_cache(&cache, &honest, &planted_archive);
    let again = bus.dir().join("again");
    std::fs::create_dir_all(&again).unwrap();
    trees.materialize(&honest, &again).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(again.join("pager.py")).unwrap(),
        "LIMIT = 10\n"
    );
    assert_eq!(trees.downloads(), 2);
}

/// The result of the next job on `results`, which must be inline.
async fn next_result(messages: &mut jetstream::consumer::pull::Stream) -> JobResult {
    let message = tokio::time::timeout(Duration::from_secs(60), messages.next())
        .await
        .expect("the job's result arrived")
        .unwrap()
        .unwrap();
    let result =
        match wire::decode::<assay_common::fleet::ResultMessage>("job result", &message.payload)
            .unwrap()
        {
            assay_common::fleet::ResultMessage::Inline(result) => *result,
            other => panic!("a stored result: {other:?}"),
        };
    message.ack().await.unwrap();
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_that_plants_another_changes_tree_in_the_workers_cache_does_not_change_what_that_change_runs()
 {
    let bus = ClusterSandbox::with_file_store();
    let honest = uploaded_tree_of(&bus, "pager", "pager.py", "LIMIT = 10\n").await;
    let planted = uploaded_tree_of(&bus, "pager-planted", "pager.py", "LIMIT = 0\n").await;
    let (planted_archive, _) = stored_tree(&bus.store_url(), &planted).await;
    let cache = bus.dir().join("worker-a-cache");
    // What the hostile change's job copies into the cache: the planted archive and a marker.
    let loot = bus.dir().join("loot");
    std::fs::create_dir_all(&loot).unwrap();
    plant_in_cache(&loot, &honest, &planted_archive);
    let worker = worker(&bus, "assay", "worker-a");
    let client = bus.client().await;
    let js = jetstream::new(client.clone());
    let results = results_consumer(&js, &Subjects::new("assay")).await;
    let mut messages = results.messages().await.unwrap();
    let hostile = ProofId("p-1795995829-hostilejob".into());
    let script = format!(
        "mkdir -p {cache} && cp {loot}/{honest}.tar {loot}/{honest}.tar.verified {loot}/{honest}.tar.sha256 {cache}/",
        cache = cache.display(),
        loot = loot.display()
    );
    publish_job(
        &js,
        &hostile,
        "hostile",
        &job(&hostile, 0, &planted, &["sh", "-c", &script]),
    )
    .await;
    let planting = next_result(&mut messages).await;
    // The confined job cannot reach the worker's tree cache at all.
    assert_ne!(
        planting.status,
        JobStatus::Completed { exit_code: 0 },
        "{planting:?}"
    );
    assert!(!cache.join(format!("{honest}.tar")).exists());
    // Where a job could (an unconfined host), what it plants still never runs as the tree.
    plant_in_cache(&cache, &honest, &planted_archive);
    let victim = ProofId("p-1795995829-victimjob".into());
    publish_job(
        &js,
        &victim,
        "victim",
        &job(
            &victim,
            0,
            &honest,
            &["grep", "-qx", "LIMIT = 10", "pager.py"],
        ),
    )
    .await;
    let result = next_result(&mut messages).await;
    assert_eq!(
        result.status,
        JobStatus::Completed { exit_code: 0 },
        "the victim's job ran on its own tree, not the planted one: {result:?}"
    );
    assert!(!cache.join(format!("{honest}.tar.verified")).exists());
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_archive_past_the_byte_bound_is_refused_while_streaming_and_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    // One honest 8 MiB entry: a well-formed tar, far past what 64 KiB and 16 entries allow.
    let mut builder = tar::Builder::new(Vec::new());
    let data = vec![b'#'; 8 << 20];
    let mut header = file_header(data.len() as u64, 0o644);
    builder
        .append_data(&mut header, "fixtures/ledger.csv", &data[..])
        .unwrap();
    let archive = builder.into_inner().unwrap();
    let tree = TreeId("d4".repeat(20));
    let limits = assay_transport::archive::ArchiveLimits {
        max_bytes: 64 * 1024,
        max_entries: 16,
    };
    let (message, trees, dest) = refused_hostile_tree(dir.path(), &tree, archive, limits).await;
    let bound = limits.max_archive_bytes();
    assert!(
        message.contains(&format!("over {bound} bytes")),
        "{message}"
    );
    assert!(
        message.contains("worker.tree_max_bytes (65536)"),
        "{message}"
    );
    assert_eq!(trees.downloads(), 0, "the archive was not read to its end");
    assert_eq!(entries_in(&dest), 0, "nothing was written");
    assert_eq!(
        entries_in(&dir.path().join("cache")),
        0,
        "the partial download was removed"
    );
}

/// Sends proof `proof_id`'s submission as stored at `blob` and returns the coordinator's reply.
async fn submit_stored(
    client: &async_nats::Client,
    prefix: &str,
    proof_id: &ProofId,
    blob: assay_common::job::ArtifactRef,
) -> SubmitReply {
    let request = SubmitRequest::Stored {
        proof_id: proof_id.clone(),
        submission: blob,
    };
    let reply = assay_coordinator::client::request_submit(
        client,
        &Subjects::new(prefix),
        async_nats::HeaderMap::new(),
        wire::encode("submit request", &request).unwrap().into(),
    )
    .await
    .unwrap();
    wire::decode("submit reply", &reply.payload).unwrap()
}

/// What a stored submission's message names: `key`, its sha256 and size as declared.
fn stored_ref(key: &str, sha256: &str, bytes: u64) -> assay_common::job::ArtifactRef {
    assay_common::job::ArtifactRef {
        name: "submission".into(),
        key: key.into(),
        sha256: sha256.into(),
        bytes,
        dropped_bytes: 0,
    }
}

/// Gives a reader blocked on the FIFO at `path` its end of file, if one is blocked (a
/// blocked read would outlive the test); does nothing when none is.
fn release_fifo(path: &Path) {
    use std::os::unix::fs::OpenOptionsExt as _;
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path);
}

fn mkfifo(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let made = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success(), "mkfifo {path:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_at_a_submission_key_is_refused_at_once_and_another_proof_still_runs() {
    let bus = ClusterSandbox::with_file_store();
    let coordinator = bus.coordinator("slow");
    let worker = answering_worker(&bus, "slow", "worker-slow");
    let client = bus.client().await;
    let proofs = proofs_bucket(&client, "slow").await;
    // A FIFO nobody writes: a store that opens it waits for a writer, forever.
    let stuck = ProofId("p-1795995829-stuckstore".into());
    let key = assay_common::fleet::submission_key(&stuck);
    let fifo = bus.dir().join("store").join(&key);
    mkfifo(&fifo);
    let started = Instant::now();
    let reply = tokio::time::timeout(
        Duration::from_secs(10),
        submit_stored(
            &client,
            "slow",
            &stuck,
            stored_ref(&key, &"0".repeat(64), 1),
        ),
    )
    .await;
    release_fifo(&fifo);
    let reply = reply.expect("the FIFO's submission was answered, not left waiting");
    let SubmitReply::Refused { message } = &reply else {
        panic!("{reply:?}");
    };
    assert!(
        message.contains("is a FIFO, not a regular file"),
        "{message}"
    );
    assert!(message.contains(&key), "{message}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let quick = ProofId("p-1795995829-quickproof".into());
    assert!(matches!(
        submit(&client, "slow", submission(&quick, 2)).await,
        SubmitReply::Accepted { .. }
    ));
    assert!(
        wait_finished(&proofs, &quick, Duration::from_secs(20)).await,
        "another proof runs"
    );
    worker.stop().await;
    coordinator.stop().await;
}

/// This process's resident memory now (`VmRSS`), in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kib * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_submissions_past_the_cap_are_refused_unread_and_the_coordinator_stays_small() {
    let bus = ClusterSandbox::with_file_store();
    let coordinator = bus.coordinator("huge");
    let client = bus.client().await;
    // Three 200 MB submissions (sparse files) under the default 64 MiB cap, sent at once,
    // each declaring 100 bytes in its message: only the store's size, or counting, stops them.
    let mut keys = Vec::new();
    for n in 0..3 {
        let proof = ProofId(format!("p-1795995829-hugesub{n}"));
        let key = assay_common::fleet::submission_key(&proof);
        let path = bus.dir().join("store").join(&key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::File::create(&path)
            .unwrap()
            .set_len(200 * MIB)
            .unwrap();
        keys.push((proof, key));
    }
    // The coordinator answers before the three are sent.
    let warm = ProofId("p-1795995829-warmupsub".into());
    let warm_key = assay_common::fleet::submission_key(&warm);
    let _ = submit_stored(
        &client,
        "huge",
        &warm,
        stored_ref(&warm_key, &"0".repeat(64), 1),
    )
    .await;
    let (peak_before, rss_before) = (peak_rss(), rss());
    let started = Instant::now();
    let replies = futures::future::join_all(keys.iter().map(|(proof, key)| {
        submit_stored(
            &client,
            "huge",
            proof,
            stored_ref(key, &"0".repeat(64), 100),
        )
    }))
    .await;
    let took = started.elapsed();
    let grown = peak_rss().saturating_sub(peak_before);
    for (reply, (_, key)) in replies.iter().zip(&keys) {
        let SubmitReply::Refused { message } = reply else {
            panic!("{reply:?}");
        };
        assert!(message.contains(key), "{message}");
        assert!(
            message.contains(&format!(
                "{} bytes, past the cap of {} bytes",
                200 * MIB,
                64 * MIB
            )),
            "{message}"
        );
        assert!(
            message.contains("coordinator.max_submission_bytes"),
            "{message}"
        );
    }
    assert!(
        grown < 8 * MIB,
        "peak memory grew {grown} bytes (resident {rss_before} before)"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    coordinator.stop().await;
}

/// Proof `proof_id`'s submission of one job, stored at its own key as the CLI stores one.
async fn store_submission(
    bus: &ClusterSandbox,
    proof_id: &ProofId,
) -> (assay_common::job::ArtifactRef, Vec<u8>) {
    let store = assay_transport::store::open_store(&bus.store_url(), &[]).unwrap();
    let body = wire::encode("proof submission", &submission(proof_id, 1)).unwrap();
    let blob = assay_transport::offload::put(
        &store,
        "submission",
        &assay_common::fleet::submission_key(proof_id),
        body.clone(),
    )
    .await
    .unwrap();
    (blob, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_submission_linked_outside_the_store_or_altered_is_refused() {
    let bus = ClusterSandbox::with_file_store();
    let coordinator = bus.coordinator("linked");
    let worker = answering_worker(&bus, "linked", "worker-linked");
    let client = bus.client().await;
    let proofs = proofs_bucket(&client, "linked").await;
    // Honest: the stored submission is accepted and runs.
    let honest = ProofId("p-1795995829-honeststored".into());
    let (blob, _) = store_submission(&bus, &honest).await;
    let reply = submit_stored(&client, "linked", &honest, blob).await;
    assert!(matches!(reply, SubmitReply::Accepted { .. }), "{reply:?}");
    assert!(wait_finished(&proofs, &honest, Duration::from_secs(20)).await);
    // A link at the key to a file outside the store, holding a valid submission whose sha256
    // the message names: it would be accepted if followed.
    let linked = ProofId("p-1795995829-linkedstore".into());
    let (blob, body) = store_submission(&bus, &linked).await;
    let at_key = bus.dir().join("store").join(&blob.key);
    let outside = bus.dir().join("outside-submission.bin");
    std::fs::write(&outside, &body).unwrap();
    std::fs::remove_file(&at_key).unwrap();
    std::os::unix::fs::symlink(&outside, &at_key).unwrap();
    let reply = submit_stored(&client, "linked", &linked, blob.clone()).await;
    let SubmitReply::Refused { message } = &reply else {
        panic!("a submission outside the store was taken: {reply:?}");
    };
    assert!(
        message.contains("outside the store's directory"),
        "{message}"
    );
    assert!(
        message.contains(&outside.display().to_string()),
        "{message}"
    );
    // Altered in place, same size: refused by its digest.
    let altered = ProofId("p-1795995829-alteredsub".into());
    let (blob, mut body) = store_submission(&bus, &altered).await;
    let last = body.len() - 1;
    body[last] ^= 1;
    std::fs::write(bus.dir().join("store").join(&blob.key), &body).unwrap();
    let reply = submit_stored(&client, "linked", &altered, blob).await;
    let SubmitReply::Refused { message } = &reply else {
        panic!("{reply:?}");
    };
    assert!(message.contains("sha256"), "{message}");
    worker.stop().await;
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_or_an_outside_link_at_a_result_key_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().join("store").display());
    let store = assay_transport::store::open_store(&url, &[]).unwrap();
    let proof_id = ProofId("p-1795995829-fiforesult".into());
    let spec = job(&proof_id, 1, &empty_tree(), &["true"]);
    let result = completed(&spec, &WorkerId("worker-a".into()));
    // A result stored through the store, then replaced there by a FIFO.
    let message = assay_transport::offload::encode_result(&store, &proof_id, &result, 0)
        .await
        .unwrap();
    let key = assay_common::fleet::result_key(&proof_id, 1);
    let at_key = dir.path().join("store").join(&key);
    let body = std::fs::read(&at_key).unwrap();
    std::fs::remove_file(&at_key).unwrap();
    mkfifo(&at_key);
    let read = tokio::time::timeout(
        Duration::from_secs(5),
        assay_transport::offload::decode_result(&store, &proof_id, &message, RESULT_CAP),
    )
    .await;
    release_fifo(&at_key);
    let err = read
        .expect("the FIFO was refused, not waited on")
        .unwrap_err();
    let text = assay_transport::error_chain::error_chain(&err);
    assert!(text.contains("is a FIFO, not a regular file"), "{text}");
    assert!(
        matches!(&err, assay_transport::offload::OffloadError::Store(e) if e.is_refusal()),
        "a refusal, not a store blip to retry: {err:?}"
    );
    // A link to the very result, outside the store: refused, not followed.
    std::fs::remove_file(&at_key).unwrap();
    let outside = dir.path().join("result.bin");
    std::fs::write(&outside, &body).unwrap();
    std::os::unix::fs::symlink(&outside, &at_key).unwrap();
    let err = assay_transport::offload::decode_result(&store, &proof_id, &message, RESULT_CAP)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("outside the store's directory"),
        "{err}"
    );
    // Put back as a file, it resolves.
    std::fs::remove_file(&at_key).unwrap();
    std::fs::write(&at_key, &body).unwrap();
    let back = assay_transport::offload::decode_result(&store, &proof_id, &message, RESULT_CAP)
        .await
        .unwrap();
    assert_eq!(back, result);
}

/// A submission whose job hands the worker a loader variable (`LD_PRELOAD` naming a library
/// committed in the tree) is refused whole by the coordinator: the job never reaches a queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_submission_whose_job_sets_a_loader_variable_is_refused() {
    let bus = ClusterSandbox::with_file_store();
    let coordinator = bus.coordinator("assay");
    let client = bus.client().await;
    let proofs = proofs_bucket(&client, "assay").await;
    let proof = proof::new_proof_id();
    for (name, value) in [
        ("LD_PRELOAD", "./evil.so"),
        ("GCONV_PATH", "./gconv"),
        ("NODE_OPTIONS", "--require ./hook.js"),
    ] {
        let mut hostile = submission(&proof, 1);
        hostile.jobs[0].env = vec![(name.into(), value.into())];
        match submit(&client, "assay", hostile).await {
            SubmitReply::Refused { message } => {
                assert!(message.contains("failed to decode"), "{message}")
            }
            other => panic!("a job setting {name} was accepted: {other:?}"),
        }
    }
    assert_eq!(status(&proofs, &proof).await, None, "nothing was recorded");
    coordinator.stop().await;
}

/// The library a hostile job names in `LD_PRELOAD`: on load it records the process it was
/// loaded into, at `mark` (a path only a process outside the sandbox can write).
fn build_preload_library(dir: &Path, mark: &Path) -> bool {
    let source = dir.join("evil.c");
    std::fs::write(
        &source,
        format!(
            "#include <stdio.h>\n#include <unistd.h>\n__attribute__((constructor)) static void loaded(void) {{\n  FILE *f = fopen(\"{}\", \"a\");\n  if (f) {{ fprintf(f, \"loaded into pid %d\\n\", (int)getpid()); fclose(f); }}\n}}\n",
            mark.display()
        ),
    )
    .unwrap();
    Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(dir.join("evil.so"))
        .arg(&source)
        .status()
        .is_ok_and(|s| s.success())
}

/// Past the wire's refusal (a job built in this process, as a compromised coordinator could
/// publish), the worker's process sandbox still hands the job's variables to the guest only:
/// bubblewrap itself starts from a fixed environment in `/`, so a library committed in the tree
/// and named in `LD_PRELOAD` is never loaded on the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_loader_variable_never_reaches_the_confining_process() {
    if assay_worker::sandbox::confine::confiner().is_err() {
        panic!("bubblewrap is installed on test machines");
    }
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mark = outside.path().join("loaded-on-host");
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    assert!(
        build_preload_library(&repo, &mark),
        "cc builds the library (hint: apt-get install gcc)"
    );
    let (ctx, tree) = local_worker(dir.path(), &[("run.sh", "echo guest ran\n")]);
    let proof = ProofId("p-1795995829-preload".into());
    let mut spec = job(&proof, 0, &tree, &["sh", "run.sh"]);
    spec.env = vec![("LD_PRELOAD".into(), "./evil.so".into())];
    let result = assay_worker::execute::run_job(&spec, &ctx).await;
    assert!(
        matches!(result.status, JobStatus::Completed { .. }),
        "{result:?}"
    );
    assert!(
        !mark.exists(),
        "the library was loaded outside the sandbox: {}",
        std::fs::read_to_string(&mark).unwrap_or_default()
    );
}
