//! The shipped NATS permissions (`deploy/nats/permissions.conf`) on a real `nats-server` on
//! 127.0.0.1: a coordinator, a worker (process sandbox, file store) and a submitter, each
//! under its own user, prove a change to its verdict, so the permissions are enough; then each
//! role tries what it must not do, and the server refuses every attempt while the verdict
//! stays what the coordinator recorded.
mod support;

use assay_common::evidence::Evidence;
use assay_common::fleet::{ProgressEvent, Subjects, keys};
use assay_common::job::{JobResult, JobSpec};
use assay_common::nats_permissions::{Role, UserAuth, inbox_prefix, secret_var, user_name};
use assay_common::service_config::{NatsSection, ServiceConfig};
use assay_common::verdict::Verdict;
use assay_common::{JobId, ProofId, WorkerId, wire};
use assay_coordinator::CoordinatorConfig;
use assay_coordinator::client::{self, FleetProgress};
use assay_engine::proof::{self, PreparedProof};
use assay_transport::nats::QueueTuning;
use futures::StreamExt;
use servers::{free_port, http_get_with_status};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use assay_test_support::cluster::{ClusterSandbox, InProcess, NatsSetup, StoreKind};
use assay_test_support::{invoice_repo, servers};

const PERMISSIONS: &str = include_str!("../../deploy/nats/permissions.conf");

fn prepare(repo: &Path) -> PreparedProof {
    support::invoice_proof(repo, 1, None)
}

/// A fleet (`ClusterSandbox`) whose NATS server's only users are the shipped file's, their
/// passwords in the server's environment as the file expects.
struct SecuredFleet {
    sandbox: ClusterSandbox,
    passwords: Vec<(Role, String)>,
    /// The server's monitoring port (127.0.0.1): what the hostile tests learn a client's
    /// inboxes from, standing in for whatever way an attacker learned them.
    monitor_port: u16,
}

impl SecuredFleet {
    fn start() -> Self {
        let subjects = Subjects::new("assay");
        let passwords: Vec<(Role, String)> = Role::ALL
            .iter()
            .map(|&role| (role, format!("{}-pw-{}", role.name(), std::process::id())))
            .collect();
        let env: Vec<(String, String)> = passwords
            .iter()
            .map(|(role, pw)| (secret_var(&subjects, *role, UserAuth::Password), pw.clone()))
            .collect();
        let monitor_port = free_port();
        let sandbox = ClusterSandbox::start_with_nats(
            StoreKind::File,
            NatsSetup {
                config: format!(
                    "http: \"127.0.0.1:{monitor_port}\"\ninclude \"permissions.conf\"\n"
                ),
                env,
                files: vec![("permissions.conf".into(), PERMISSIONS.into())],
            },
        )
        .with_tuning(quick());
        for (role, pw) in &passwords {
            std::fs::write(sandbox.dir().join(format!("{}.password", role.name())), pw).unwrap();
        }
        Self {
            sandbox,
            passwords,
            monitor_port,
        }
    }

    /// The inboxes (literal subjects under `role`'s inbox prefix) that the fleet's own
    /// connections of `role` (named `assay`) subscribe to, as the server's monitoring lists
    /// them: every place a delivery to that role could be aimed at.
    fn inboxes_of(&self, role: Role) -> Vec<String> {
        let user = user_name(&Subjects::new("assay"), role);
        let prefix = format!("{}.", inbox_prefix(&Subjects::new("assay"), role));
        let body = servers::http_get(self.monitor_port, "/connz?subs=1&auth=1&limit=1000")
            .expect("the server's monitoring answers");
        let connz: serde_json::Value =
            serde_json::from_str(&unchunked(&body)).expect("connz is JSON");
        let mut inboxes = Vec::new();
        for connection in connz["connections"].as_array().into_iter().flatten() {
            if connection["authorized_user"] != user.as_str() || connection["name"] != "assay" {
                continue;
            }
            for subject in connection["subscriptions_list"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let subject = subject.as_str().unwrap_or_default();
                if subject.starts_with(&prefix) && !subject.contains(['*', '>']) {
                    inboxes.push(subject.to_owned());
                }
            }
        }
        inboxes
    }

    fn password(&self, role: Role) -> String {
        self.passwords
            .iter()
            .find(|(r, _)| *r == role)
            .map(|(_, pw)| pw.clone())
            .unwrap()
    }

    /// The proofs bucket as `assay halt|resume --cluster` open it, under the operator's user.
    async fn operators_bucket(&self) -> async_nats::jetstream::kv::Store {
        self.connected_to_the_proofs_bucket(Role::Operator).await.1
    }

    /// A connection under `role`'s user, as the CLI makes one, and the proofs bucket it opens.
    async fn connected_to_the_proofs_bucket(
        &self,
        role: Role,
    ) -> (async_nats::Client, async_nats::jetstream::kv::Store) {
        let client = assay_transport::nats::connect(&self.nats(role), role)
            .await
            .unwrap();
        let bucket = assay_transport::nats::proofs_bucket(
            &async_nats::jetstream::new(client.clone()),
            &Subjects::new("assay"),
            assay_transport::nats::Placement::SINGLE,
        )
        .await
        .unwrap();
        (client, bucket)
    }

    /// The `[nats]` settings of `role`: its user and its password file.
    fn nats(&self, role: Role) -> NatsSection {
        NatsSection {
            url: self.sandbox.nats_url(),
            user: user_name(&Subjects::new("assay"), role),
            password_file: self
                .sandbox
                .dir()
                .join(format!("{}.password", role.name()))
                .display()
                .to_string(),
            ..Default::default()
        }
    }

    /// `role`'s service configuration: the sandbox's, under `role`'s user, with the default
    /// worker slots.
    fn service_config(&self, role: Role) -> ServiceConfig {
        let mut config = self.sandbox.service_config("assay", role.name());
        config.nats = self.nats(role);
        config.worker.slots = ServiceConfig::default().worker.slots;
        config
    }

    fn coordinator(&self) -> InProcess {
        let mut config = CoordinatorConfig::new(self.service_config(Role::Coordinator));
        config.tuning = quick();
        self.sandbox.coordinator_with(config)
    }

    fn worker(&self, http_port: u16) -> InProcess {
        let mut config = self.sandbox.worker_config("assay", "worker");
        config.service = self.service_config(Role::Worker);
        config.service.http.listen = Some(format!("127.0.0.1:{http_port}"));
        config.worker_id = WorkerId("locked-down-worker".into());
        self.sandbox.worker(config)
    }

    /// A client of `role` that records the errors the server sends it.
    async fn observed(&self, role: Role) -> Observed {
        let errors = Arc::new(Mutex::new(Vec::new()));
        let seen = errors.clone();
        let client = async_nats::ConnectOptions::with_user_and_password(
            user_name(&Subjects::new("assay"), role),
            self.password(role),
        )
        .custom_inbox_prefix(inbox_prefix(&Subjects::new("assay"), role))
        .event_callback(move |event| {
            let seen = seen.clone();
            async move {
                if let async_nats::Event::ServerError(error) = event {
                    seen.lock().unwrap().push(error.to_string());
                }
            }
        })
        .connect(self.sandbox.nats_url())
        .await
        .unwrap_or_else(|e| panic!("{} connects: {e}", role.name()));
        let mut js = async_nats::jetstream::new(client.clone());
        js.set_timeout(Duration::from_secs(2));
        Observed {
            role,
            client,
            js,
            errors,
        }
    }
}

/// An HTTP/1.1 body without its chunked transfer encoding (the monitoring's answers may be).
fn unchunked(body: &str) -> String {
    let looks_chunked = body
        .lines()
        .next()
        .is_some_and(|l| !l.trim().is_empty() && l.trim().chars().all(|c| c.is_ascii_hexdigit()));
    if !looks_chunked {
        return body.to_owned();
    }
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}

/// How long an acknowledgement or reply may still come once the server refused its message:
/// an answer sent before the refusal is already here by then, and a refused one never comes.
const AFTER_A_REFUSAL: Duration = Duration::from_millis(300);

fn quick() -> QueueTuning {
    QueueTuning {
        ack_wait: Duration::from_secs(10),
        max_deliver: 3,
        duplicate_window: Duration::from_secs(120),
        lookahead: 4,
        ..QueueTuning::default()
    }
}

/// A role's own connection, and the errors the server sent it.
struct Observed {
    role: Role,
    client: async_nats::Client,
    js: async_nats::jetstream::Context,
    errors: Arc<Mutex<Vec<String>>>,
}

impl Observed {
    /// Waits for the proofs bucket the coordinator makes last to be there for this role;
    /// `never` says what it means when it does not come.
    async fn wait_for_the_proofs_bucket(&self, never: &str) {
        let bucket = Subjects::new("assay").proofs_bucket();
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.js.get_key_value(&bucket).await.is_err() {
            assert!(Instant::now() < deadline, "{never}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits for the server's permissions violation naming `subject`.
    async fn refused(&self, what: &str, subject: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let found = self.errors.lock().unwrap().iter().any(|e| {
                e.to_ascii_lowercase().contains("permissions violation") && e.contains(subject)
            });
            if found {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not refuse the {} {what} ({subject}); it sent {:?}",
                self.role.name(),
                self.errors.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A plain publish the server must refuse.
    async fn publish_refused(&self, what: &str, subject: &str, payload: Vec<u8>) {
        self.client
            .publish(subject.to_owned(), payload.into())
            .await
            .unwrap();
        self.client.flush().await.unwrap();
        self.refused(what, subject).await;
    }

    /// A JetStream publish (the way results and key-value writes travel): refused, so never
    /// acknowledged by a stream.
    async fn js_publish_refused(&self, what: &str, subject: &str, payload: Vec<u8>) {
        let acknowledged = async {
            match self.js.publish(subject.to_owned(), payload.into()).await {
                Ok(ack) => ack.await.is_ok(),
                Err(_) => false,
            }
        };
        let stored = self
            .answered_despite_refusal(what, subject, acknowledged)
            .await;
        assert!(
            !stored,
            "a stream stored the {} {what} on {subject}",
            self.role.name()
        );
    }

    /// Waits for the server's refusal of `subject` and for `answered` (an acknowledgement or an
    /// API reply): whether it came. The refusal comes within milliseconds, and a message the
    /// server refused reaches no stream and no API, so once it is seen `answered` gets a short
    /// look instead of its whole timeout (which every refused operation used to wait out).
    async fn answered_despite_refusal(
        &self,
        what: &str,
        subject: &str,
        answered: impl std::future::Future<Output = bool>,
    ) -> bool {
        tokio::pin!(answered);
        tokio::select! {
            came = &mut answered => {
                self.refused(what, subject).await;
                came
            }
            () = self.refused(what, subject) => {
                tokio::time::timeout(AFTER_A_REFUSAL, answered).await.unwrap_or(false)
            }
        }
    }

    /// A job for the workers of `proof_id`, published as only the coordinator may: refused.
    async fn job_publish_refused(&self, subjects: &Subjects, proof_id: &ProofId) {
        self.js_publish_refused(
            "job for the workers",
            &subjects.jobs(proof_id),
            b"job".to_vec(),
        )
        .await;
    }

    /// A `Cancelled` progress event of `proof_id`, published as only the coordinator may:
    /// refused.
    async fn cancelled_progress_refused(
        &self,
        what: &str,
        subjects: &Subjects,
        proof_id: &ProofId,
    ) {
        self.publish_refused(
            what,
            &subjects.progress(proof_id),
            wire::encode("progress", &ProgressEvent::Cancelled).unwrap(),
        )
        .await;
    }

    /// The last sequence the results stream holds, as this role looks it up.
    async fn results_stream_last_sequence(&self, subjects: &Subjects) -> u64 {
        self.js
            .get_stream(subjects.results_stream())
            .await
            .unwrap()
            .info()
            .await
            .unwrap()
            .state
            .last_sequence
    }

    /// A JetStream API request the server must refuse (it never reaches the API).
    async fn api_refused(&self, what: &str, subject: &str) {
        let reply = async {
            matches!(
                tokio::time::timeout(
                    Duration::from_secs(3),
                    self.client.request(subject.to_owned(), "".into()),
                )
                .await,
                Ok(Ok(_))
            )
        };
        let answered = self.answered_despite_refusal(what, subject, reply).await;
        assert!(
            !answered,
            "the JetStream API answered the {} {what} ({subject})",
            self.role.name()
        );
    }
}

struct Quiet;
impl FleetProgress for Quiet {
    fn job_finished(&mut self, _: u32, _: u32, _: &JobResult, _: bool) {}
    fn halted(&mut self, _: &str) {}
    fn resumed(&mut self) {}
}

/// A result for `spec` that would make the proof fail to run, published in a worker's name.
fn forged_result(spec: &JobSpec) -> Vec<u8> {
    let result = JobResult::infrastructure(
        spec,
        WorkerId("forger".into()),
        assay_common::fault::InfraCause::SandboxStart,
        "forged: this job never ran".into(),
    );
    wire::encode(
        "job result",
        &assay_common::fleet::ResultMessage::Inline(Box::new(result)),
    )
    .unwrap()
}

fn evidence_json(evidence: &Evidence) -> serde_json::Value {
    serde_json::to_value(evidence).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_role_can_do_its_part_of_a_proof_and_nothing_the_others_own() {
    let fleet = SecuredFleet::start();
    let subjects = Subjects::new("assay");
    let repo = invoice_repo(fleet.sandbox.dir(), 0.3);
    let coordinator = fleet.coordinator();
    // The coordinator creates the streams, consumers and bucket; the worker may only look
    // them up, so it starts once the bucket (made last) is there.
    let submitter = fleet.observed(Role::Submitter).await;
    submitter
        .wait_for_the_proofs_bucket(
            "the coordinator never created the fleet's topology under its user",
        )
        .await;
    let http_port = free_port();
    let worker = fleet.worker(http_port);
    let worker_client = fleet.observed(Role::Worker).await;
    let coordinator_client = fleet.observed(Role::Coordinator).await;

    // The submitter proves a change; while it runs, the submitter forges a failing result for
    // every job and the worker forges the progress and the bucket's verdict.
    let prepared = prepare(&repo);
    let proof_id = prepared.request.proof_id.clone();
    client::upload_trees(fleet.sandbox.store().as_ref(), &prepared)
        .await
        .unwrap();
    let submission = client::submission(&prepared, 4);
    let submitting = {
        let client = assay_transport::nats::connect(&fleet.nats(Role::Submitter), Role::Submitter)
            .await
            .unwrap();
        let store = fleet.sandbox.store();
        let submission = submission.clone();
        tokio::spawn(async move {
            client::submit_and_wait(
                &client,
                &Subjects::new("assay"),
                store.as_ref(),
                &submission,
                &mut Quiet,
            )
            .await
            .map_err(|e| e.to_string())
        })
    };
    for spec in &prepared.jobs {
        submitter
            .js_publish_refused(
                "result of a job it did not run",
                &subjects.results(&proof_id),
                forged_result(spec),
            )
            .await;
    }
    let forged_evidence = br#"{"verdict":"refuted"}"#.to_vec();
    worker_client
        .publish_refused(
            "progress event",
            &subjects.progress(&proof_id),
            wire::encode(
                "progress",
                &ProgressEvent::Finished {
                    evidence_json: String::from_utf8_lossy(&forged_evidence).into_owned(),
                },
            )
            .unwrap(),
        )
        .await;
    worker_client
        .js_publish_refused(
            "evidence in the proofs bucket",
            &format!(
                "$KV.{}.{}",
                subjects.proofs_bucket(),
                keys::evidence(&proof_id)
            ),
            forged_evidence.clone(),
        )
        .await;

    let evidence = tokio::time::timeout(Duration::from_secs(120), submitting)
        .await
        .expect("the proof finished in time under least privilege")
        .unwrap()
        .expect("the submitter's proof reached a verdict");
    assert_eq!(evidence.verdict, Verdict::Proven, "{evidence:#?}");
    assert!(
        evidence
            .jobs
            .iter()
            .all(|j| j.worker == "locked-down-worker"),
        "every result is the worker's, none forged: {:#?}",
        evidence.jobs
    );
    // The worker's probes work under its user (its queue depth is a JetStream API call).
    let (status, body) = http_get_with_status(http_port, "/readyz").expect("/readyz answers");
    assert_eq!(status, 200, "{body}");

    // After the verdict: each role's forbidden operations, one by one.
    let bucket = subjects.proofs_bucket();
    let kv_subject = |key: String| format!("$KV.{bucket}.{key}");
    let some_job = &prepared.jobs[0];
    // The worker: no progress, no key-value bucket at all (not even reading), no jobs, no
    // submissions, no stream changes.
    worker_client
        .cancelled_progress_refused("progress event after the verdict", &subjects, &proof_id)
        .await;
    worker_client
        .js_publish_refused(
            "proof record",
            &kv_subject(keys::record(&proof_id)),
            b"forged".to_vec(),
        )
        .await;
    worker_client
        .js_publish_refused(
            "job result key",
            &kv_subject(keys::result(&proof_id, 0)),
            forged_result(some_job),
        )
        .await;
    worker_client
        .api_refused(
            "lookup of the proofs bucket",
            &format!("$JS.API.STREAM.INFO.KV_{bucket}"),
        )
        .await;
    worker_client
        .job_publish_refused(&subjects, &proof_id)
        .await;
    worker_client
        .api_refused(
            "creation of a stream",
            &format!("$JS.API.STREAM.CREATE.{}", subjects.results_stream()),
        )
        .await;
    worker_client
        .api_refused(
            "purge of the results stream",
            &format!("$JS.API.STREAM.PURGE.{}", subjects.results_stream()),
        )
        .await;
    let _denied = worker_client
        .client
        .subscribe(subjects.submit())
        .await
        .unwrap();
    worker_client.client.flush().await.unwrap();
    worker_client
        .refused("subscription to submissions", &subjects.submit())
        .await;

    // The submitter: no results, no jobs, no progress, no key-value write, no stream changes.
    submitter
        .js_publish_refused(
            "result after the verdict",
            &subjects.results(&proof_id),
            forged_result(some_job),
        )
        .await;
    let proofs = submitter.js.get_key_value(&bucket).await.unwrap();
    let put = proofs
        .put(keys::evidence(&proof_id), forged_evidence.clone().into())
        .await;
    assert!(put.is_err(), "the submitter wrote the proofs bucket");
    submitter
        .refused(
            "write of the proofs bucket",
            &kv_subject(keys::evidence(&proof_id)),
        )
        .await;
    assert!(
        proofs.delete(keys::record(&proof_id)).await.is_err(),
        "the submitter deleted a proof record"
    );
    submitter
        .refused(
            "delete of a proof record",
            &kv_subject(keys::record(&proof_id)),
        )
        .await;
    assert!(
        proofs
            .put("fleet.halt", "forged halt".into())
            .await
            .is_err(),
        "the submitter halted the fleet"
    );
    submitter
        .refused("fleet halt", &kv_subject("fleet.halt".into()))
        .await;
    submitter.job_publish_refused(&subjects, &proof_id).await;
    submitter
        .cancelled_progress_refused("progress event", &subjects, &proof_id)
        .await;
    submitter
        .api_refused(
            "delete of the proofs bucket",
            &format!("$JS.API.STREAM.DELETE.KV_{bucket}"),
        )
        .await;
    submitter
        .api_refused(
            "purge of the proofs bucket",
            &format!("$JS.API.STREAM.PURGE.KV_{bucket}"),
        )
        .await;
    submitter
        .api_refused(
            "pull from the workers' consumer",
            &format!(
                "$JS.API.CONSUMER.MSG.NEXT.{}.{}",
                subjects.jobs_stream(),
                subjects.workers_consumer()
            ),
        )
        .await;
    let _denied = submitter.client.subscribe(subjects.results_filter()).await;
    submitter.client.flush().await.unwrap();
    submitter
        .refused("subscription to results", &subjects.results_filter())
        .await;
    // Not even the coordinator publishes results or deletes its own streams.
    coordinator_client
        .js_publish_refused(
            "result in a worker's name",
            &subjects.results(&proof_id),
            forged_result(some_job),
        )
        .await;
    coordinator_client
        .api_refused(
            "delete of the jobs stream",
            &format!("$JS.API.STREAM.DELETE.{}", subjects.jobs_stream()),
        )
        .await;

    // What the submitter may do still works: list proofs (a key listing), watch the fleet halt
    // (`assay test --cluster`), and cancel (the coordinator answers it).
    let listed = client::status(&proofs).await.unwrap();
    assert!(
        listed
            .iter()
            .any(|(record, _)| *record.submission.id() == proof_id),
        "the submitter lists the proof"
    );
    let halt = assay_coordinator::fleet_halt::FleetHalt::watch(proofs.clone())
        .await
        .unwrap();
    assert_eq!(
        assay_engine::suite::halt::AdmissionGate::stop_reason(&halt),
        None
    );
    drop(halt);
    let submitter_client =
        assay_transport::nats::connect(&fleet.nats(Role::Submitter), Role::Submitter)
            .await
            .unwrap();
    let reply = client::cancel(&submitter_client, &subjects, &proof_id)
        .await
        .expect("the coordinator answers the submitter's cancel");
    assert!(
        matches!(reply, assay_common::fleet::CancelReply::NotRunning { .. }),
        "{reply:?}"
    );

    // A consumer on the bucket's stream (what a watch is) told to deliver the stored results
    // onto the results subject: the server creates it (a submitter may create consumers there),
    // but a push consumer delivers only to a subscriber, so nothing reaches the results stream.
    let results_before = coordinator_client
        .results_stream_last_sequence(&subjects)
        .await;
    let replay = submitter
        .js
        .get_stream(format!("KV_{bucket}"))
        .await
        .unwrap()
        .create_consumer(async_nats::jetstream::consumer::push::Config {
            deliver_subject: subjects.results(&proof_id),
            filter_subject: kv_subject(format!("{proof_id}.result.>")),
            ..Default::default()
        })
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let results_after = coordinator_client
        .results_stream_last_sequence(&subjects)
        .await;
    assert_eq!(
        results_after, results_before,
        "a consumer the submitter made replayed stored results into the results stream"
    );
    if let Ok(mut consumer) = replay {
        let name = consumer.info().await.map(|i| i.name.clone());
        if let Ok(name) = name {
            let _ = submitter
                .js
                .delete_consumer_from_stream(&name, format!("KV_{bucket}"))
                .await;
        }
    }

    // Whatever was tried, the bucket holds the coordinator's verdict and nothing else.
    let stored = client::stored_evidence(&proofs, Some(fleet.sandbox.store().as_ref()), &proof_id)
        .await
        .unwrap()
        .expect("the evidence is still in the bucket");
    assert_eq!(evidence_json(&stored), evidence_json(&evidence));
    assert!(
        proofs.get("fleet.halt").await.unwrap().is_none(),
        "no halt was set"
    );
    let job_id = JobId::for_index(&proof_id, 0);
    let stored = proofs
        .get(keys::result(&proof_id, 0))
        .await
        .unwrap()
        .expect("the first job's result key");
    let result: JobResult =
        match wire::decode::<assay_common::fleet::ResultMessage>("job result", &stored).unwrap() {
            assay_common::fleet::ResultMessage::Inline(result) => *result,
            other => panic!("a stored result: {other:?}"),
        };
    assert_eq!(result.job_id, job_id);
    assert_eq!(result.worker, WorkerId("locked-down-worker".into()));

    worker
        .ended()
        .await
        .expect("the worker ran and stopped cleanly");
    coordinator
        .ended()
        .await
        .expect("the coordinator ran and stopped cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_started_before_the_coordinator_is_refused_the_streams_it_may_not_create() {
    let fleet = SecuredFleet::start();
    let worker = fleet.worker(free_port());
    let ended = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            if worker.is_finished() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(ended.is_ok(), "the worker neither waited nor failed");
    let message = worker
        .ended()
        .await
        .expect_err("the worker created a stream");
    assert!(
        message.to_string().contains("start the coordinator first"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_halts_and_resumes_the_fleet_and_writes_nothing_else() {
    use assay_coordinator::fleet_halt::{clear_halt, set_halt};
    let fleet = SecuredFleet::start();
    let subjects = Subjects::new("assay");
    let coordinator = fleet.coordinator();
    let operator = fleet.observed(Role::Operator).await;
    operator
        .wait_for_the_proofs_bucket("the operator never saw the proofs bucket")
        .await;
    // As `assay halt --cluster` and `assay resume --cluster` connect: the operator's user only.
    let (client, proofs) = fleet.connected_to_the_proofs_bucket(Role::Operator).await;
    let coordinator_view = fleet
        .observed(Role::Coordinator)
        .await
        .js
        .get_key_value(subjects.proofs_bucket())
        .await
        .unwrap();
    set_halt(&proofs, "store migration until 14:00")
        .await
        .expect("the operator halts the fleet");
    assert_eq!(
        coordinator_view.get(keys::HALT).await.unwrap().as_deref(),
        Some(&b"store migration until 14:00"[..])
    );
    assert!(
        clear_halt(&proofs).await.expect("the operator resumes"),
        "the halt was set"
    );
    assert_eq!(coordinator_view.get(keys::HALT).await.unwrap(), None);
    // It may cancel (the coordinator answers) and read the bucket, nothing more.
    let proof_id = proof::new_proof_id();
    let reply = client::cancel(&client, &subjects, &proof_id)
        .await
        .expect("the coordinator answers the operator's cancel");
    assert!(
        matches!(reply, assay_common::fleet::CancelReply::NotRunning { .. }),
        "{reply:?}"
    );
    let bucket = subjects.proofs_bucket();
    let kv_subject = |key: String| format!("$KV.{bucket}.{key}");
    let spec = assay_test_support::cluster::messages::job(
        &proof_id,
        0,
        &assay_common::TreeId("4b825dc642cb6eb9a060e54bf8d69288fbee4904".into()),
        &["true"],
    );
    operator
        .js_publish_refused(
            "result in a worker's name",
            &subjects.results(&proof_id),
            forged_result(&spec),
        )
        .await;
    operator.job_publish_refused(&subjects, &proof_id).await;
    operator
        .cancelled_progress_refused("progress event", &subjects, &proof_id)
        .await;
    operator
        .publish_refused("submission", &subjects.submit(), b"submission".to_vec())
        .await;
    let operator_bucket = operator.js.get_key_value(&bucket).await.unwrap();
    for key in [keys::record(&proof_id), keys::evidence(&proof_id)] {
        assert!(
            operator_bucket
                .put(&key, b"forged".to_vec().into())
                .await
                .is_err(),
            "the operator wrote {key}"
        );
        operator
            .refused("write of the proofs bucket", &kv_subject(key))
            .await;
    }
    assert!(
        operator_bucket
            .get(keys::record(&proof_id))
            .await
            .unwrap()
            .is_none(),
        "no record was written"
    );
    coordinator
        .ended()
        .await
        .expect("the coordinator ran and stopped cleanly");
}

/// Progress that remembers whether the fleet ever said it was halted.
#[derive(Default)]
struct HaltSeen(Arc<Mutex<Vec<String>>>);
impl FleetProgress for HaltSeen {
    fn job_finished(&mut self, _: u32, _: u32, _: &JobResult, _: bool) {}
    fn halted(&mut self, reason: &str) {
        self.0.lock().unwrap().push(reason.to_owned());
    }
    fn resumed(&mut self) {}
}

/// A secured fleet running a coordinator and a worker, and the submitter's connection.
struct RunningFleet {
    fleet: SecuredFleet,
    repo: PathBuf,
    coordinator: InProcess,
    worker: InProcess,
    submitter: Observed,
}

impl RunningFleet {
    async fn start() -> Self {
        let fleet = SecuredFleet::start();
        let repo = invoice_repo(fleet.sandbox.dir(), 0.3);
        let coordinator = fleet.coordinator();
        let submitter = fleet.observed(Role::Submitter).await;
        submitter
            .wait_for_the_proofs_bucket("the coordinator never made the bucket")
            .await;
        let worker = fleet.worker(free_port());
        Self {
            fleet,
            repo,
            coordinator,
            worker,
            submitter,
        }
    }

    /// Proves the invoice change as the CLI does, under the submitter's user; returns its id and
    /// the halts the fleet reported on the way.
    async fn prove(&self) -> (assay_common::ProofId, Vec<String>) {
        let prepared = prepare(&self.repo);
        let proof_id = prepared.request.proof_id.clone();
        let store = self.fleet.sandbox.store();
        client::upload_trees(store.as_ref(), &prepared)
            .await
            .unwrap();
        let client =
            assay_transport::nats::connect(&self.fleet.nats(Role::Submitter), Role::Submitter)
                .await
                .unwrap();
        let halts = HaltSeen::default();
        let mut progress = HaltSeen(halts.0.clone());
        let evidence = tokio::time::timeout(
            Duration::from_secs(120),
            client::submit_and_wait(
                &client,
                &Subjects::new("assay"),
                store.as_ref(),
                &client::submission(&prepared, 4),
                &mut progress,
            ),
        )
        .await
        .expect("the proof finished in time: the fleet kept admitting its jobs")
        .expect("the proof reached a verdict");
        assert_eq!(evidence.verdict, Verdict::Proven, "{evidence:#?}");
        let halts = halts.0.lock().unwrap().clone();
        (proof_id, halts)
    }

    async fn stop(self) {
        self.worker
            .ended()
            .await
            .expect("the worker stopped cleanly");
        self.coordinator
            .ended()
            .await
            .expect("the coordinator stopped cleanly");
    }
}

/// As the attacker with the submitter's user: a push consumer on the proofs bucket's stream
/// for each of `inboxes`, delivering the entries of `key` there (the first as that consumer's
/// sequence 1). Returns the consumers the server created.
async fn deliver_key_to(attacker: &Observed, key: &str, inboxes: &[String]) -> Vec<String> {
    let subjects = Subjects::new("assay");
    let stream = attacker
        .js
        .get_stream(format!("KV_{}", subjects.proofs_bucket()))
        .await
        .expect("the submitter may look up the bucket's stream");
    let mut created = Vec::new();
    for inbox in inboxes {
        let consumer = stream
            .create_consumer(async_nats::jetstream::consumer::push::Config {
                deliver_subject: inbox.clone(),
                filter_subject: format!("$KV.{}.{key}", subjects.proofs_bucket()),
                ack_policy: async_nats::jetstream::consumer::AckPolicy::None,
                ..Default::default()
            })
            .await;
        if let Ok(mut consumer) = consumer
            && let Ok(info) = consumer.info().await
        {
            created.push(info.name.clone());
        }
    }
    created
}

async fn delete_consumers(attacker: &Observed, names: &[String]) {
    let stream = format!("KV_{}", Subjects::new("assay").proofs_bucket());
    for name in names {
        let _ = attacker.js.delete_consumer_from_stream(name, &stream).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_proof_record_a_submitter_delivers_to_the_coordinators_inboxes_neither_halts_nor_stops_the_fleet()
 {
    let running = RunningFleet::start().await;
    let (first, halts) = running.prove().await;
    assert!(halts.is_empty(), "{halts:?}");

    // What the server does with such a consumer: the submitter may create a push consumer
    // on the bucket's stream delivering into the coordinator's inbox prefix (which it may not
    // subscribe to), and JetStream delivers there all the same.
    let coordinator_client = running.fleet.observed(Role::Coordinator).await;
    let probe = format!(
        "{}.probe",
        inbox_prefix(&Subjects::new("assay"), Role::Coordinator)
    );
    let mut probed = coordinator_client
        .client
        .subscribe(probe.clone())
        .await
        .unwrap();
    coordinator_client.client.flush().await.unwrap();
    let record = keys::record(&first);
    let probe_consumer = deliver_key_to(&running.submitter, &record, &[probe]).await;
    assert_eq!(probe_consumer.len(), 1, "the server refused the consumer");
    let delivered = tokio::time::timeout(Duration::from_secs(10), probed.next())
        .await
        .expect("JetStream delivered the submitter's consumer into the coordinator's inbox prefix")
        .unwrap();
    assert_eq!(
        delivered.subject.as_str(),
        format!("$KV.{}.{record}", Subjects::new("assay").proofs_bucket())
    );

    // The attack: the proof record, as sequence 1, into every inbox the coordinator listens
    // on, its halt watch's among them.
    let inboxes = running.fleet.inboxes_of(Role::Coordinator);
    assert!(!inboxes.is_empty(), "the coordinator listens on no inbox");
    let forged = deliver_key_to(&running.submitter, &record, &inboxes).await;
    assert_eq!(forged.len(), inboxes.len(), "{inboxes:?}");
    tokio::time::sleep(Duration::from_secs(1)).await;

    // The coordinator is not halted: the next proof is admitted and finishes, and no halt is
    // reported to its submitter.
    let (_, halts) = running.prove().await;
    assert!(halts.is_empty(), "the fleet reported a halt: {halts:?}");

    delete_consumers(&running.submitter, &probe_consumer).await;
    delete_consumers(&running.submitter, &forged).await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn assay_resume_lifts_any_halt_after_a_forged_delivery_to_the_halt_watch() {
    use assay_coordinator::fleet_halt::{clear_halt, set_halt};
    let running = RunningFleet::start().await;
    let (first, _) = running.prove().await;
    let inboxes = running.fleet.inboxes_of(Role::Coordinator);
    let forged = deliver_key_to(&running.submitter, &keys::record(&first), &inboxes).await;
    assert!(!forged.is_empty());
    tokio::time::sleep(Duration::from_secs(1)).await;

    // As `assay resume --cluster` and `assay halt --cluster` do, under the operator's user.
    let proofs = running.fleet.operators_bucket().await;
    // The resume an operator runs when the fleet says it is halted though nobody halted it:
    // the key holds no halt, and whatever the coordinator was told, it admits afterwards.
    assert!(!clear_halt(&proofs).await.unwrap(), "no halt was ever set");
    let (_, halts) = running.prove().await;
    assert!(halts.is_empty(), "the fleet is still halted: {halts:?}");

    // A real halt after the forged delivery holds, and its resume lifts it.
    set_halt(&proofs, "store migration").await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(clear_halt(&proofs).await.unwrap(), "the halt was set");
    let (_, halts) = running.prove().await;
    assert!(halts.is_empty(), "the fleet is still halted: {halts:?}");
    delete_consumers(&running.submitter, &forged).await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cluster_runs_halt_gate_ignores_a_delivered_entry_for_another_key_and_follows_the_halt_key()
 {
    use assay_coordinator::fleet_halt::{FleetHalt, HALT_RECHECK, clear_halt, set_halt};
    use assay_engine::suite::halt::AdmissionGate;
    let running = RunningFleet::start().await;
    let (first, _) = running.prove().await;
    // `assay test --cluster`'s gate, on a submitter's connection of its own.
    let (_watcher, watcher_bucket) = running
        .fleet
        .connected_to_the_proofs_bucket(Role::Submitter)
        .await;
    let gate = FleetHalt::watch(watcher_bucket).await.unwrap();
    assert_eq!(gate.stop_reason(), None);
    // Another submitter delivers a proof record into every inbox of the fleet's submitter
    // connections, the gate's watch among them.
    let inboxes = running.fleet.inboxes_of(Role::Submitter);
    let forged = deliver_key_to(&running.submitter, &keys::record(&first), &inboxes).await;
    assert!(!forged.is_empty(), "{inboxes:?}");
    let until = Instant::now() + HALT_RECHECK * 2;
    while Instant::now() < until {
        assert_eq!(gate.stop_reason(), None, "a proof record halted the gate");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The halt key itself still counts, both ways.
    let proofs = running.fleet.operators_bucket().await;
    set_halt(&proofs, "store migration").await.unwrap();
    let deadline = Instant::now() + HALT_RECHECK * 3;
    while gate.stop_reason().as_deref() != Some("store migration") {
        assert!(Instant::now() < deadline, "the gate never saw the halt");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    clear_halt(&proofs).await.unwrap();
    let deadline = Instant::now() + HALT_RECHECK * 3;
    while gate.stop_reason().is_some() {
        assert!(Instant::now() < deadline, "the gate never saw the resume");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(gate);
    delete_consumers(&running.submitter, &forged).await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_client_role_may_read_every_inbox_another_roles_inboxes_or_the_jobs() {
    let fleet = SecuredFleet::start();
    let subjects = Subjects::new("assay");
    for role in [Role::Submitter, Role::Operator, Role::Worker] {
        let client = fleet.observed(role).await;
        let mut denied = vec!["_INBOX.>".to_owned(), "_INBOX.*".to_owned()];
        for other in Role::ALL.into_iter().filter(|&o| o != role) {
            denied.push(format!("{}.>", inbox_prefix(&subjects, other)));
        }
        // Job specs (their env values included) travel on the jobs subjects, which workers
        // pull through their consumer: no client role subscribes to them.
        denied.push(subjects.jobs_filter());
        let mut subscriptions = Vec::new();
        for subject in &denied {
            subscriptions.push(client.client.subscribe(subject.clone()).await.unwrap());
        }
        client.client.flush().await.unwrap();
        for subject in &denied {
            client.refused("subscription", subject).await;
        }
        // Its own inbox prefix it may read.
        let own = format!("{}.>", inbox_prefix(&subjects, role));
        let _own = client.client.subscribe(own.clone()).await.unwrap();
        client.client.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !client
                .errors
                .lock()
                .unwrap()
                .iter()
                .any(|e| e.contains(&own)),
            "{} may not read its own inbox: {:?}",
            role.name(),
            client.errors.lock().unwrap()
        );
    }
}

/// The monitoring port lists every consumer's name: a submitter or an operator that could
/// delete a consumer on the proofs bucket's stream could stall the coordinators' watches. Only
/// the coordinator may; the others' proofs and halts still work (their watches' consumers
/// expire by themselves).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_the_coordinator_may_delete_a_consumer_on_the_proofs_bucket() {
    let running = RunningFleet::start().await;
    let (_, halts) = running.prove().await;
    assert!(halts.is_empty(), "{halts:?}");
    let subject = format!(
        "$JS.API.CONSUMER.DELETE.KV_{}.coordinator-watch",
        Subjects::new("assay").proofs_bucket()
    );
    for role in [Role::Submitter, Role::Operator] {
        let client = running.fleet.observed(role).await;
        client
            .api_refused("deletion of a consumer on the proofs bucket", &subject)
            .await;
    }
    // The submitter's watches still work after the refusals: the next proof finishes.
    let (_, halts) = running.prove().await;
    assert!(halts.is_empty(), "{halts:?}");
    running.stop().await;
}
