//! What fleet tests send and expect, built as a peer would: a job of a run's plan, the result
//! of a command that passed, a submit request by request/reply, and the proofs bucket once the
//! coordinator has made it.

use assay_common::fleet::{Subjects, SubmitReply, SubmitRequest};
use assay_common::job::{JobKind, JobResult, JobSpec, JobStatus, Side};
use assay_common::outcome::ReportOutcome;
use assay_common::runner::ReportFormat;
use assay_common::{ProofId, TreeId, WorkerId, wire};
use async_nats::jetstream::{self, kv};
use std::time::{Duration, Instant};

/// Job `index` of `proof_id`'s plan on `tree`, running `command`: even indexes on the base,
/// odd on the candidate, as a proof's plan alternates.
pub fn job(proof_id: &ProofId, index: usize, tree: &TreeId, command: &[&str]) -> JobSpec {
    JobSpec::new(
        proof_id,
        index,
        JobKind::Targeted,
        if index.is_multiple_of(2) {
            Side::Base
        } else {
            Side::Candidate
        },
        tree,
        command.iter().map(|s| (*s).to_owned()).collect(),
        ReportFormat::JunitXml,
        60,
    )
}

/// `spec`'s result as `worker` reports a command that passed and wrote no report.
pub fn completed(spec: &JobSpec, worker: &WorkerId) -> JobResult {
    JobResult {
        job_id: spec.job_id.clone(),
        index: spec.index,
        status: JobStatus::Completed { exit_code: 0 },
        report: ReportOutcome::Missing,
        artifacts: vec![],
        duration_ms: 0,
        worker: worker.clone(),
        sandbox: None,
    }
}

/// Sends `request` on `prefix`'s submit subject as the CLI does (a coordinator whose bucket
/// exists may not be subscribed yet), and returns the coordinator's reply.
pub async fn submit(
    client: &async_nats::Client,
    prefix: &str,
    request: &SubmitRequest,
) -> SubmitReply {
    let reply = assay_coordinator::client::request_submit(
        client,
        &Subjects::new(prefix),
        async_nats::HeaderMap::new(),
        wire::encode("submit request", request)
            .expect("a submit request encodes")
            .into(),
    )
    .await
    .expect("the coordinator answers");
    wire::decode("submit reply", &reply.payload).expect("the reply decodes")
}

/// `prefix`'s proofs bucket, once a coordinator has made it.
pub async fn proofs_bucket(client: &async_nats::Client, prefix: &str) -> kv::Store {
    let js = jetstream::new(client.clone());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(store) = js
            .get_key_value(Subjects::new(prefix).proofs_bucket())
            .await
        {
            return store;
        }
        assert!(
            Instant::now() < deadline,
            "the {prefix} proofs bucket never appeared"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
