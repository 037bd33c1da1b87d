//! Coordinator failover against real processes: a JetStream `nats-server`, two coordinators as
//! processes of their own (this test binary started again as `coordinator_process`), and real
//! workers in this process running a real unittest proof. The leader is killed (SIGKILL) or
//! paused past its lease (SIGSTOP, then SIGCONT), or the NATS server every service is
//! connected to dies under a 3-node cluster; every write to the proofs bucket is watched.
mod support;

use assay_common::evidence::Evidence;
use assay_common::fleet::{ProofRecord, ProofStatus, Subjects, SubmitReply, SubmitRequest, keys};
use assay_common::job::JobResult;
use assay_common::service_config::ServiceConfig;
use assay_common::verdict::Verdict;
use assay_coordinator::client::{self, FleetProgress};
use assay_coordinator::lease::{Fence, FenceError};
use assay_coordinator::{self as coordinator, CoordinatorConfig};
use assay_engine::proof::PreparedProof;
use assay_transport::nats::{Placement, QueueTuning};
use assay_transport::store::ArtifactStore;
use futures::StreamExt;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use assay_test_support::cluster::{ClusterSandbox, FleetProcess, InProcess};
use assay_test_support::invoice_repo;

/// Where a coordinator process finds its service file.
const CHILD_CONFIG: &str = "ASSAY_FAILOVER_COORDINATOR_CONFIG";
/// The lease the coordinators run with: short, so a takeover fits a test.
const LEASE_TTL_MS: u64 = 2000;

/// Shortened delivery settings, the same in the coordinators and the workers.
fn quick() -> QueueTuning {
    QueueTuning {
        ack_wait: Duration::from_secs(2),
        max_deliver: 3,
        results_ack_wait: Duration::from_secs(2),
        ..QueueTuning::default()
    }
}

/// Not a test: the coordinator process the failover tests start (they set [`CHILD_CONFIG`]).
/// Run on its own, it returns at once.
#[test]
#[ignore = "the coordinator process the failover tests start, not a test of its own"]
fn coordinator_process() {
    let Ok(path) = std::env::var(CHILD_CONFIG) else {
        return;
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter("assay_engine=info,assay_coordinator=info")
        .init();
    let service = ServiceConfig::from_file(Path::new(&path)).expect("the service file");
    let mut config = CoordinatorConfig::new(service);
    config.tuning = quick();
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime
        .block_on(coordinator::serve(config, async {
            let _ = tokio::signal::ctrl_c().await;
        }))
        .expect("the coordinator serves");
}

fn prepare(repo: &Path) -> PreparedProof {
    support::invoice_proof(repo, 2, None)
}

/// Sends `signal` to a coordinator process this test started and has not reaped.
fn signal(process: &FleetProcess, signal: libc::c_int) {
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    let sent = unsafe { libc::kill(process.pid() as libc::pid_t, signal) };
    assert_eq!(sent, 0, "signal {signal} to coordinator {}", process.pid());
}

/// Every put to the proofs bucket from the moment it starts: how often each key was written.
#[derive(Clone, Default)]
struct Writes(Arc<Mutex<HashMap<String, u32>>>);

impl Writes {
    fn count(&self, key: &str) -> u32 {
        self.0.lock().unwrap().get(key).copied().unwrap_or(0)
    }

    /// Every key of `proof` written, with its count.
    fn of_proof(&self, proof: &str) -> HashMap<String, u32> {
        let prefix = format!("{proof}.");
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(key, _)| key.starts_with(&prefix))
            .map(|(key, count)| (key.clone(), *count))
            .collect()
    }

    fn total(&self, proof: &str) -> u32 {
        self.of_proof(proof).values().sum()
    }
}

/// A coordinator process named `name`: this test binary again, as `coordinator_process`, with
/// a service file for the fleet and the short lease.
fn coordinator(fleet: &ClusterSandbox, name: &str) -> FleetProcess {
    let config = fleet.dir().join(format!("{name}.toml"));
    std::fs::create_dir_all(fleet.dir().join("store")).unwrap();
    std::fs::write(
        &config,
        format!(
            "schema = \"assay.service/v1\"\n[nats]\nurl = \"{}\"\nreplicas = {}\n[store]\nurl = \"{}\"\n[http]\nlisten = \"\"\n[coordinator]\nlease_ttl_ms = {LEASE_TTL_MS}\n",
            fleet.nats_url(),
            fleet.replicas(),
            fleet.store_url()
        ),
    )
    .unwrap();
    fleet
        .process(
            &std::env::current_exe().unwrap(),
            name,
            &["coordinator_process", "--exact", "--ignored", "--nocapture"],
        )
        .env(CHILD_CONFIG, config.display().to_string())
        .start()
}

/// A worker of two slots in this process.
fn worker(fleet: &ClusterSandbox, name: &str) -> InProcess {
    let mut config = fleet.worker_config("assay", name);
    config.service.worker.slots = 2;
    fleet.worker(config)
}

fn store(fleet: &ClusterSandbox) -> Arc<dyn ArtifactStore> {
    std::fs::create_dir_all(fleet.dir().join("store")).unwrap();
    fleet.store()
}

async fn bucket(
    fleet: &ClusterSandbox,
    client: &async_nats::Client,
) -> async_nats::jetstream::kv::Store {
    assay_transport::nats::proofs_bucket(
        &async_nats::jetstream::new(client.clone()),
        &Subjects::new("assay"),
        // Whoever comes first creates it: the test's watch may start before a coordinator.
        Placement {
            replicas: fleet.replicas(),
        },
    )
    .await
    .unwrap()
}

/// Counts every put to the bucket from now on.
async fn watch_writes(fleet: &ClusterSandbox, client: &async_nats::Client) -> Writes {
    let bucket = bucket(fleet, client).await;
    let mut watch = bucket.watch_all_from_revision(1).await.unwrap();
    let writes = Writes::default();
    let counted = writes.clone();
    tokio::spawn(async move {
        while let Some(Ok(entry)) = watch.next().await {
            if entry.operation == async_nats::jetstream::kv::Operation::Put {
                *counted.0.lock().unwrap().entry(entry.key).or_default() += 1;
            }
        }
    });
    writes
}

/// Waits until the lease names a holder from process `pid`; returns when.
async fn wait_for_leader(fleet: &ClusterSandbox, client: &async_nats::Client, pid: u32) -> Instant {
    let bucket = bucket(fleet, client).await;
    let marker = format!("-{pid}-");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Some(holder)) = bucket.get(keys::LEASE).await
            && String::from_utf8_lossy(&holder).contains(&marker)
        {
            return Instant::now();
        }
        assert!(Instant::now() < deadline, "coordinator {pid} never led");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct Quiet;

impl FleetProgress for Quiet {
    fn job_finished(&mut self, _: u32, _: u32, _: &JobResult, _: bool) {}
    fn halted(&mut self, _: &str) {}
    fn resumed(&mut self) {}
}

/// Submits the proof of `repo` as the CLI does; the handle gives its evidence.
async fn submit(
    fleet: &ClusterSandbox,
    prepared: &PreparedProof,
) -> tokio::task::JoinHandle<Result<Evidence, client::ClientError>> {
    let store = store(fleet);
    client::upload_trees(store.as_ref(), prepared)
        .await
        .unwrap();
    let submission = client::submission(prepared, 8);
    let client = fleet.client().await;
    tokio::spawn(async move {
        client::submit_and_wait(
            &client,
            &Subjects::new("assay"),
            store.as_ref(),
            &submission,
            &mut Quiet,
        )
        .await
    })
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What a proof that lived through one change of leader must show: its verdict, both
/// coordinators in its evidence (the second resuming it), every job once, and every result and
/// the verdict written once.
fn assert_survived(evidence: &Evidence, prepared: &PreparedProof, writes: &Writes) {
    let proof = prepared.request.proof_id.to_string();
    assert_eq!(evidence.verdict, Verdict::Proven, "{evidence:#?}");
    assert_eq!(evidence.jobs.len(), prepared.jobs.len());
    let drivers: Vec<_> = evidence.coordinators.iter().collect();
    assert_eq!(drivers.len(), 2, "{drivers:?}");
    assert!(!drivers[0].resumed && drivers[1].resumed, "{drivers:?}");
    assert_ne!(drivers[0].coordinator, drivers[1].coordinator);
    assert!(drivers[1].epoch > drivers[0].epoch, "{drivers:?}");
    for index in 0..prepared.jobs.len() as u32 {
        let key = keys::result(&prepared.request.proof_id, index);
        assert_eq!(
            writes.count(&key),
            1,
            "{key}: {:?}",
            writes.of_proof(&proof)
        );
    }
    assert_eq!(
        writes.count(&keys::evidence(&prepared.request.proof_id)),
        1,
        "{:?}",
        writes.of_proof(&proof)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_leaders_proof_finishes_under_the_standby_with_each_result_applied_once() {
    let fleet = ClusterSandbox::with_file_store().with_tuning(quick());
    let client = fleet.client().await;
    let writes = watch_writes(&fleet, &client).await;
    let leader = coordinator(&fleet, "a");
    wait_for_leader(&fleet, &client, leader.pid()).await;
    let standby = coordinator(&fleet, "b");
    let _workers = [worker(&fleet, "w1"), worker(&fleet, "w2")];
    let repo = invoice_repo(fleet.dir(), 1.5);
    let prepared = prepare(&repo);
    let proof = prepared.request.proof_id.to_string();
    let evidence = submit(&fleet, &prepared).await;
    // Killed once some results are applied and others are still running.
    wait_until("a first result", || {
        writes
            .of_proof(&proof)
            .keys()
            .any(|key| key.contains(".result."))
    })
    .await;
    signal(&leader, libc::SIGKILL);
    let killed = Instant::now();
    let took_over = wait_for_leader(&fleet, &client, standby.pid()).await;
    let failover = took_over - killed;
    println!("failover after SIGKILL: {} ms", failover.as_millis());
    // The bound docs/operations.md states: the lease's time to live and a standby's look.
    assert!(
        failover < Duration::from_millis(LEASE_TTL_MS * 2),
        "the standby took {failover:?} to lead"
    );
    let evidence = tokio::time::timeout(Duration::from_secs(60), evidence)
        .await
        .expect("the proof finishes under the standby")
        .unwrap()
        .expect("evidence");
    wait_until("the verdict's write to be seen", || {
        writes.count(&keys::evidence(&prepared.request.proof_id)) > 0
    })
    .await;
    assert_survived(&evidence, &prepared, &writes);
    println!(
        "proof finished {} ms after the kill",
        killed.elapsed().as_millis()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_paused_past_its_lease_writes_nothing_when_it_wakes() {
    let fleet = ClusterSandbox::with_file_store().with_tuning(quick());
    let client = fleet.client().await;
    let writes = watch_writes(&fleet, &client).await;
    let paused = coordinator(&fleet, "a");
    wait_for_leader(&fleet, &client, paused.pid()).await;
    let standby = coordinator(&fleet, "b");
    let _workers = [worker(&fleet, "w1")];
    let repo = invoice_repo(fleet.dir(), 2.0);
    let prepared = prepare(&repo);
    let proof = prepared.request.proof_id.to_string();
    let evidence = submit(&fleet, &prepared).await;
    wait_until("a first result", || {
        writes
            .of_proof(&proof)
            .keys()
            .any(|key| key.contains(".result."))
    })
    .await;
    // Paused with a proof in flight: results keep arriving, some into its own pull.
    signal(&paused, libc::SIGSTOP);
    wait_for_leader(&fleet, &client, standby.pid()).await;
    let evidence = tokio::time::timeout(Duration::from_secs(60), evidence)
        .await
        .expect("the proof finishes under the standby")
        .unwrap()
        .expect("evidence");
    wait_until("the verdict's write to be seen", || {
        writes.count(&keys::evidence(&prepared.request.proof_id)) > 0
    })
    .await;
    assert_survived(&evidence, &prepared, &writes);
    // The standby's last write of the proof is its record's finished status, after the
    // evidence: the snapshot waits for it to be counted (the watch delivers in order, so two
    // lease renewals after it is read back mean it was).
    let record_key = keys::record(&prepared.request.proof_id);
    let bucket = bucket(&fleet, &client).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !bucket
        .get(&record_key)
        .await
        .ok()
        .flatten()
        .and_then(|bytes| assay_common::wire::decode::<ProofRecord>("proof record", &bytes).ok())
        .is_some_and(|record| record.status == ProofStatus::Finished)
    {
        assert!(
            Instant::now() < deadline,
            "the standby never marked the proof finished"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let lease_writes = writes.count(keys::LEASE);
    wait_until("two lease renewals after the finished status", || {
        writes.count(keys::LEASE) >= lease_writes + 2
    })
    .await;
    let before_waking = writes.of_proof(&proof);
    signal(&paused, libc::SIGCONT);
    // Woken, it notices it is past its lease and steps down without a write.
    wait_until("the woken coordinator to step down", || {
        paused.log().contains("leader lease lost: stepping down")
    })
    .await;
    // Had it gone on, it would have applied the results it pulled before the pause and written
    // the proof's status; the new leader's renewals meanwhile show the watch is live.
    let lease_writes = writes.count(keys::LEASE);
    wait_until("two more lease renewals by the new leader", || {
        writes.count(keys::LEASE) >= lease_writes + 2
    })
    .await;
    assert_eq!(
        writes.of_proof(&proof),
        before_waking,
        "the woken coordinator wrote to the proof's keys; its log:\n{}",
        paused.log()
    );
    assert!(
        writes.total(&proof) > 0,
        "the proof's writes were watched at all"
    );
    // Still the standby's lease: the woken one stands by.
    wait_for_leader(&fleet, &client, standby.pid()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_proof_finishes_when_the_nats_server_every_service_uses_dies() {
    let mut fleet = ClusterSandbox::clustered(3).with_tuning(quick());
    let client = fleet.client().await;
    let leader = coordinator(&fleet, "a");
    wait_for_leader(&fleet, &client, leader.pid()).await;
    let standby = coordinator(&fleet, "b");
    let _workers = [worker(&fleet, "w1"), worker(&fleet, "w2")];
    let bucket = bucket(&fleet, &client).await;
    let replicas = bucket.status().await.unwrap().info.config.num_replicas;
    assert_eq!(replicas, 3, "the bucket is on every server");
    let repo = invoice_repo(fleet.dir(), 1.5);
    let prepared = prepare(&repo);
    let first_result = keys::result(&prepared.request.proof_id, 0);
    let evidence = submit(&fleet, &prepared).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !matches!(bucket.get(&first_result).await, Ok(Some(_))) {
        assert!(Instant::now() < deadline, "no result was recorded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The first URL is where every service connected first: they must find the others.
    fleet.kill_cluster_node(0);
    let Ok(evidence) = tokio::time::timeout(Duration::from_secs(90), evidence).await else {
        panic!(
            "the proof did not finish on the surviving servers; the coordinators' logs:\n{}\n{}",
            leader.log(),
            standby.log()
        );
    };
    let evidence = evidence.unwrap().expect("evidence");
    assert_eq!(evidence.verdict, Verdict::Proven, "{evidence:#?}");
    let mut indices: Vec<u32> = evidence.jobs.iter().map(|job| job.index).collect();
    indices.dedup();
    assert_eq!(indices.len(), prepared.jobs.len(), "every job once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_submission_sent_again_is_the_proof_accepted_and_another_under_its_id_is_refused() {
    let fleet = ClusterSandbox::with_file_store().with_tuning(quick());
    let client = fleet.client().await;
    let leader = coordinator(&fleet, "a");
    wait_for_leader(&fleet, &client, leader.pid()).await;
    let repo = invoice_repo(fleet.dir(), 0.0);
    let prepared = prepare(&repo);
    let submission = client::submission(&prepared, 4);
    let send = |submission: assay_common::fleet::ProofSubmission| {
        let client = client.clone();
        async move {
            let payload = assay_common::wire::encode(
                "submit request",
                &SubmitRequest::Inline(Box::new(submission)),
            )
            .unwrap();
            let reply = client::request_submit(
                &client,
                &Subjects::new("assay"),
                async_nats::HeaderMap::new(),
                payload.into(),
            )
            .await
            .unwrap();
            assay_common::wire::decode::<SubmitReply>("submit reply", &reply.payload).unwrap()
        }
    };
    let proof_id = submission.proof_id.clone();
    assert_eq!(
        send(submission.clone()).await,
        SubmitReply::Accepted {
            proof_id: proof_id.clone()
        }
    );
    // As a CLI whose first request went unanswered sends it again.
    assert_eq!(
        send(submission.clone()).await,
        SubmitReply::Accepted {
            proof_id: proof_id.clone()
        }
    );
    // Someone else's submission under the same id is not taken for it.
    let mut hostile = submission;
    hostile.jobs_budget += 1;
    match send(hostile).await {
        SubmitReply::Refused { message } => {
            assert!(message.contains("already written"), "{message}")
        }
        other => panic!("a different submission under a recorded id was {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_server_refuses_a_write_from_an_epoch_that_is_over() {
    let fleet = ClusterSandbox::with_file_store().with_tuning(quick());
    let client = fleet.client().await;
    let proofs = bucket(&fleet, &client).await;
    let js = async_nats::jetstream::new(client.clone());
    // A lease long enough that the holder's own clock never stops it: only the server can.
    let fence = Fence::acquire(
        js.clone(),
        proofs.clone(),
        "old-leader",
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    fence.put("p-1.record", "first".into()).await.unwrap();
    assert!(matches!(
        fence.create("p-1.record", "again".into()).await,
        Err(FenceError::Exists { .. })
    ));
    // A new leader opens its epoch (as `Fence::acquire` does once it holds the lease).
    proofs.put(keys::EPOCH, "new-leader".into()).await.unwrap();
    assert!(
        fence.holds(),
        "the old leader's own deadline has not passed"
    );
    for hostile in ["p-1.record", "p-1.evidence", "p-1.result.000000"] {
        let refused = fence.put(hostile, "from the old epoch".into()).await;
        assert!(
            matches!(refused, Err(FenceError::Deposed { .. })),
            "{hostile}: {refused:?}"
        );
    }
    assert!(!fence.holds(), "a refused write deposes the writer");
    assert_eq!(
        proofs.get("p-1.record").await.unwrap().as_deref(),
        Some(&b"first"[..])
    );
    assert_eq!(proofs.get("p-1.evidence").await.unwrap(), None);
}
