//! The job-level fleet submission on a real fleet (`ClusterSandbox`: nats-server, a file
//! store, the coordinator and workers in this process): its jobs run and their results are
//! recorded in plan order with no evidence written, and a hostile submission (no jobs, too
//! many, a tree not in the store or not declared, a job twice, another run's job) is refused
//! with an error that says why, while the coordinator goes on serving.

use assay_common::fleet::{
    CancelReply, JobSubmission, MAX_SUBMITTED_JOBS, ProgressEvent, ProofRecord, ProofStatus,
    ResultMessage, Subjects, SubmitReply, SubmitRequest, keys,
};
use assay_common::job::{JobResult, JobSpec};
use assay_common::{JobId, ProofId, TreeId, WorkerId, wire};
use assay_test_support::cluster::messages::{self, completed, proofs_bucket};
use assay_test_support::cluster::{ClusterSandbox, InProcess};
use assay_worker::service::JobRunner;
use async_nats::jetstream::kv;
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;

const PREFIX: &str = "assay";

/// Answers each job at once with a pass, signed with the job's index, so a result's slot
/// shows which job produced it.
struct Answer;

#[async_trait::async_trait]
impl JobRunner for Answer {
    async fn run(&self, spec: &JobSpec) -> JobResult {
        completed(spec, &WorkerId(format!("answered-{}", spec.index)))
    }
}

fn job(run_id: &ProofId, index: usize, tree: &TreeId) -> JobSpec {
    messages::job(run_id, index, tree, &["python3", "-m", "pytest"])
}

fn jobs_of(run_id: &ProofId, count: usize, tree: &TreeId) -> JobSubmission {
    JobSubmission {
        run_id: run_id.clone(),
        repository: "/srv/invoices".into(),
        label: "suite".into(),
        trees: vec![tree.clone()],
        jobs: (0..count).map(|i| job(run_id, i, tree)).collect(),
        jobs_budget: 2,
    }
}

/// A one-file repository's tree, uploaded to the sandbox's store.
async fn uploaded_tree(sandbox: &ClusterSandbox) -> TreeId {
    let repo = assay_test_support::Repo::new();
    repo.write("invoices.py", "TAX = 20\n");
    repo.commit("invoices");
    let tree = TreeId(repo.git(&["rev-parse", "HEAD^{tree}"]).trim().to_owned());
    assay_transport::store_tree::upload_tree(sandbox.store().as_ref(), repo.path(), &tree)
        .await
        .unwrap();
    tree
}

async fn submit(client: &async_nats::Client, submission: JobSubmission) -> SubmitReply {
    messages::submit(client, PREFIX, &SubmitRequest::Jobs(Box::new(submission))).await
}

async fn record(proofs: &kv::Store, run_id: &ProofId) -> Option<ProofRecord> {
    let bytes = proofs.get(keys::record(run_id)).await.ok()??;
    wire::decode("proof record", &bytes).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_submission_records_its_results_in_plan_order_and_writes_no_evidence() {
    let sandbox = ClusterSandbox::with_file_store();
    let coordinator = sandbox.coordinator(PREFIX);
    let client = sandbox.client().await;
    let proofs = proofs_bucket(&client, PREFIX).await;
    let tree = uploaded_tree(&sandbox).await;
    let run_id = ProofId("r-invoices-suite-0001".into());
    let mut events = client
        .subscribe(Subjects::new(PREFIX).progress(&run_id))
        .await
        .unwrap();
    assert_eq!(
        submit(&client, jobs_of(&run_id, 5, &tree)).await,
        SubmitReply::Accepted {
            proof_id: run_id.clone()
        }
    );
    let workers: Vec<_> = ["w-1", "w-2"]
        .into_iter()
        .map(|name| sandbox.worker_with(sandbox.worker_config(PREFIX, name), Arc::new(Answer)))
        .collect();
    let finished = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(message) = events.next().await {
            if let Ok(ProgressEvent::JobsFinished { jobs }) =
                wire::decode::<ProgressEvent>("progress", &message.payload)
            {
                return jobs;
            }
        }
        panic!("the progress subscription closed");
    })
    .await
    .expect("the job submission never finished");
    assert_eq!(finished, 5);
    let held = record(&proofs, &run_id).await.expect("the run is recorded");
    assert_eq!(held.status, ProofStatus::Finished);
    assert_eq!((held.job_count, held.mutation_job_count), (5, 0));
    for index in 0..5u32 {
        let result = result_at(&proofs, &run_id, index).await;
        assert_eq!(result.index, index);
        assert_eq!(result.job_id, JobId::for_index(&run_id, index as usize));
        assert_eq!(result.worker.0, format!("answered-{index}"));
    }
    // Nothing is concluded: no evidence, in the bucket or the store.
    assert!(proofs.get(keys::evidence(&run_id)).await.unwrap().is_none());
    assert!(
        proofs
            .get(keys::evidence_ref(&run_id))
            .await
            .unwrap()
            .is_none()
    );
    for worker in workers {
        worker.stop().await;
    }
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_job_submissions_are_refused_with_a_reason_and_never_recorded() {
    let sandbox = ClusterSandbox::with_file_store();
    let coordinator = sandbox.coordinator(PREFIX);
    let client = sandbox.client().await;
    let proofs = proofs_bucket(&client, PREFIX).await;
    let tree = uploaded_tree(&sandbox).await;
    let absent = TreeId("4b825dc642cb6eb9a060e54bf8d69288fbee4904".into());
    let run = |name: &str| ProofId(format!("r-hostile-{name}"));

    let empty = jobs_of(&run("empty"), 0, &tree);
    let oversized = jobs_of(&run("oversized"), MAX_SUBMITTED_JOBS + 1, &tree);
    let unknown_tree = jobs_of(&run("unknown-tree"), 2, &absent);
    let mut undeclared_tree = jobs_of(&run("undeclared-tree"), 2, &tree);
    undeclared_tree.jobs[1].tree = absent.clone();
    let mut duplicated = jobs_of(&run("duplicated"), 3, &tree);
    duplicated.jobs[2] = duplicated.jobs[1].clone();
    let mut foreign = jobs_of(&run("foreign"), 2, &tree);
    foreign.jobs[1] = job(&ProofId("p-someone-else".into()), 1, &tree);
    let mut traversal = jobs_of(&run("traversal"), 1, &tree);
    traversal.run_id = ProofId("../../etc".into());
    let mut too_many_trees = jobs_of(&run("trees"), 1, &tree);
    too_many_trees.trees = vec![tree.clone(); assay_common::fleet::MAX_SUBMITTED_TREES + 1];

    // A submitter that uploaded to another store is told which one the fleet reads.
    let unknown_tree_reason = format!(
        "which is not in the artifact store {} (hint: the CLI uploads trees before submitting; check both use the same store)",
        sandbox.store_url()
    );
    let cases = [
        (empty, "has no jobs"),
        (oversized, "over the 4096 one submission may carry"),
        (unknown_tree, unknown_tree_reason.as_str()),
        (undeclared_tree, "which the submission does not declare"),
        (duplicated, "appears twice (again at position 2)"),
        (foreign, "names another proof, p-someone-else"),
        (traversal, "is not well formed"),
        (too_many_trees, "over the 64 one submission may name"),
    ];
    for (submission, why) in cases {
        let id = submission.run_id.clone();
        match submit(&client, submission).await {
            SubmitReply::Refused { message } => {
                assert!(message.contains(why), "{id}: {message}")
            }
            accepted => panic!("{id} was accepted: {accepted:?}"),
        }
        if id.is_well_formed() {
            assert!(record(&proofs, &id).await.is_none(), "{id} was recorded");
        }
    }
    // The coordinator took all that and still serves an honest run.
    let honest = run("honest");
    assert!(matches!(
        submit(&client, jobs_of(&honest, 1, &tree)).await,
        SubmitReply::Accepted { .. }
    ));
    coordinator.stop().await;
}

/// The result recorded at plan index `index` of `run_id`.
async fn result_at(proofs: &kv::Store, run_id: &ProofId, index: u32) -> JobResult {
    let bytes = proofs
        .get(keys::result(run_id, index))
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no result at plan index {index}"));
    match wire::decode("job result", &bytes).unwrap() {
        ResultMessage::Inline(result) => *result,
        stored => panic!("a small result is inline: {stored:?}"),
    }
}

/// A fleet with a coordinator and no worker, `jobs` jobs of `run_id` accepted and (two of
/// them, the budget) waiting in the queue.
async fn queued_run(
    run_id: &ProofId,
    jobs: usize,
) -> (ClusterSandbox, InProcess, async_nats::Client, kv::Store) {
    let sandbox = ClusterSandbox::with_file_store();
    let coordinator = sandbox.coordinator(PREFIX);
    let client = sandbox.client().await;
    let proofs = proofs_bucket(&client, PREFIX).await;
    let tree = uploaded_tree(&sandbox).await;
    assert!(matches!(
        submit(&client, jobs_of(run_id, jobs, &tree)).await,
        SubmitReply::Accepted { .. }
    ));
    sandbox.wait_for_pending(&client, PREFIX, 2).await;
    (sandbox, coordinator, client, proofs)
}

/// Waits until `run_id`'s record says `status`.
async fn wait_for_status(proofs: &kv::Store, run_id: &ProofId, status: ProofStatus) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while record(proofs, run_id).await.map(|r| r.status) != Some(status) {
        assert!(
            std::time::Instant::now() < deadline,
            "{run_id} never became {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancelled_job_submission_runs_none_of_its_queued_jobs() {
    let run_id = ProofId("r-invoices-mutate-0007".into());
    // No worker yet: the jobs wait in the queue when the run is cancelled.
    let (sandbox, coordinator, client, proofs) = queued_run(&run_id, 3).await;
    let reply = assay_coordinator::client::cancel(&client, &Subjects::new(PREFIX), &run_id)
        .await
        .unwrap();
    assert_eq!(reply, CancelReply::Cancelled);
    assert_eq!(
        record(&proofs, &run_id).await.map(|r| r.status),
        Some(ProofStatus::Cancelled)
    );
    let worker = sandbox.worker_with(sandbox.worker_config(PREFIX, "w-late"), Arc::new(Answer));
    tokio::time::sleep(Duration::from_secs(2)).await;
    for index in 0..3 {
        assert!(
            proofs
                .get(keys::result(&run_id, index))
                .await
                .unwrap()
                .is_none(),
            "job {index} of a cancelled run ran"
        );
    }
    worker.stop().await;
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_coordinator_resumes_an_unfinished_job_submission() {
    let run_id = ProofId("r-invoices-suite-0042".into());
    let (sandbox, first, _client, proofs) = queued_run(&run_id, 4).await;
    first.kill().await;
    // Another coordinator takes the lead once the first one's lease runs out.
    let second = sandbox.coordinator(PREFIX);
    let worker = sandbox.worker_with(sandbox.worker_config(PREFIX, "w-1"), Arc::new(Answer));
    wait_for_status(&proofs, &run_id, ProofStatus::Finished).await;
    for index in 0..4u32 {
        let result = result_at(&proofs, &run_id, index).await;
        assert_eq!(result.worker.0, format!("answered-{index}"));
    }
    assert!(proofs.get(keys::evidence(&run_id)).await.unwrap().is_none());
    worker.stop().await;
    second.stop().await;
}
