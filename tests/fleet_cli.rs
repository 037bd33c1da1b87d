//! Fleet mode through the real binary (`ClusterSandbox`): `assay coordinator` and `assay
//! worker` processes on a real JetStream server and a real S3 server, driven by `assay prove --cluster`, `assay status`,
//! `assay results` and `assay cancel`, and the faults a user meets at submit and mid-proof.

use crate::support;

use assay_common::dependency_archive::DependencyKind;
use assay_test_support::cluster::{
    ClusterSandbox, FleetProcess, NatsSetup, ProcessSpec, StoreKind,
};
use async_nats::jetstream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::servers::{self, free_port, http_get, s3_env};
use support::{Repo, Run};

/// A pricing module whose discount is lost on the base and applied on the candidate; the new
/// test sleeps `sleep_secs`, so jobs last long enough to act on a running proof.
fn pricing_repo(sleep_secs: f64) -> Repo {
    let repo = Repo::new();
    repo.write(
        "pricing.py",
        "def price(amount, discount=0.0):\n    return amount\n",
    )
    .write("tests/__init__.py", "")
    .write(
        "tests/test_pricing.py",
        "import unittest\n\nfrom pricing import price\n\n\nclass PriceTests(unittest.TestCase):\n    def test_full_price(self):\n        self.assertEqual(price(40), 40)\n",
    );
    repo.commit("pricing");
    repo.write(
        "pricing.py",
        "def price(amount, discount=0.0):\n    return round(amount * (1 - discount), 2)\n",
    )
    .write(
        "tests/test_pricing.py",
        &format!("import time\nimport unittest\n\nfrom pricing import price\n\n\nclass PriceTests(unittest.TestCase):\n    def test_full_price(self):\n        self.assertEqual(price(40), 40)\n\n    def test_discount_is_applied(self):\n        time.sleep({sleep_secs})\n        self.assertEqual(price(40, discount=0.25), 30)\n"),
    );
    repo.commit("pricing: apply the discount");
    repo
}

/// The fleet of these tests (`ClusterSandbox`): nats-server and an S3 server.
fn start_fleet() -> ClusterSandbox {
    ClusterSandbox::start(StoreKind::S3)
}

/// `assay {args}` against `fleet`, with a state directory of the test's own.
fn fleet_command(fleet: &ClusterSandbox, args: &[&str]) -> Command {
    let mut command = support::assay();
    command
        .args(args)
        .envs(fleet.env())
        .env("ASSAY_STATE_DIR", fleet.dir().join("state"));
    command
}

/// The service process `name` running `assay {args}` against `fleet`.
fn service_spec(fleet: &ClusterSandbox, name: &str, args: &[&str]) -> ProcessSpec {
    fleet
        .process(Path::new(env!("CARGO_BIN_EXE_assay")), name, args)
        .envs(service_env(fleet, name))
}

/// What every service of these tests gets: the binary's test signing key, the test's state
/// directory and a tree cache of its own.
fn service_env(fleet: &ClusterSandbox, name: &str) -> Vec<(String, String)> {
    let path = |path: PathBuf| path.display().to_string();
    vec![
        (
            "ASSAY_CACHE_KEY_FILE".into(),
            path(support::cache_key_file()),
        ),
        ("ASSAY_STATE_DIR".into(), path(fleet.dir().join("state"))),
        (
            "ASSAY_TREE_CACHE_DIR".into(),
            path(fleet.dir().join(format!("{name}-trees"))),
        ),
    ]
}

fn service(fleet: &ClusterSandbox, name: &str, args: &[&str]) -> FleetProcess {
    service_spec(fleet, name, args).start()
}

fn coordinator(fleet: &ClusterSandbox) -> FleetProcess {
    service_spec(fleet, "coordinator", &["coordinator"])
        .ready("coordinator started")
        .start()
}

fn worker(fleet: &ClusterSandbox, name: &str, slots: &str) -> FleetProcess {
    worker_with(fleet, name, slots, &[])
}

/// A process-sandbox worker started with `env` on top of this test's environment.
fn worker_with(
    fleet: &ClusterSandbox,
    name: &str,
    slots: &str,
    env: &[(&str, String)],
) -> FleetProcess {
    let args = ["worker", "--slots", slots, "--sandbox", "process"];
    service_spec(fleet, name, &args)
        .envs(env.iter().map(|(k, v)| ((*k).to_owned(), v.clone())))
        .ready("worker started")
        .start()
}

fn prove(fleet: &ClusterSandbox, repo: &Repo, json: &Path, extra: &[&str]) -> Command {
    prove_between(fleet, repo, ("main~1", "HEAD"), json, extra)
}

/// The pricing proof of `repo` from `base` to `candidate` on `fleet`: the discount test and
/// the full-price guard, then `extra`.
fn prove_between(
    fleet: &ClusterSandbox,
    repo: &Repo,
    (base, candidate): (&str, &str),
    json: &Path,
    extra: &[&str],
) -> Command {
    let mut args = vec![
        "--base",
        base,
        "--candidate",
        candidate,
        "--criterion",
        "test: test_discount_is_applied",
        "--criterion",
        "guard: test_full_price",
    ];
    args.extend_from_slice(extra);
    fleet_prove(fleet, repo, &args, json)
}

/// `assay prove --cluster` of `repo` on `fleet` with `args`, writing its evidence to `json`.
fn fleet_prove(fleet: &ClusterSandbox, repo: &Repo, args: &[&str], json: &Path) -> Command {
    let mut command = fleet_command(fleet, &["prove", "--cluster", &fleet.nats_url()]);
    command
        .arg("-C")
        .arg(repo.path())
        .args(args)
        .arg("--json")
        .arg(json);
    command
}

/// `assay prove --cluster` of `repo` with `args` run to its end, its evidence written to `name`
/// in the fleet's directory.
fn run_fleet_proof(fleet: &ClusterSandbox, repo: &Repo, name: &str, args: &[&str]) -> Run {
    let json = fleet.dir().join(name);
    support::run(fleet_prove(fleet, repo, args, &json), Some(json))
}

/// `assay prove --cluster` of `repo` against `main~1` with `args` run to its end, its evidence
/// written to `proof.json` in the fleet's directory.
fn run_fleet_proof_against_main_parent(fleet: &ClusterSandbox, repo: &Repo, args: &[&str]) -> Run {
    let mut all = vec!["--base", "main~1"];
    all.extend_from_slice(args);
    run_fleet_proof(fleet, repo, "proof.json", &all)
}

/// The pricing proof ([`prove`]) run to its end, its evidence written to `name` in the fleet's
/// directory.
fn run_proof(fleet: &ClusterSandbox, repo: &Repo, name: &str, extra: &[&str]) -> Run {
    run_proof_between(fleet, repo, ("main~1", "HEAD"), name, extra)
}

/// The pricing proof between `sides` ([`prove_between`]) run to its end, its evidence written
/// to `name` in the fleet's directory.
fn run_proof_between(
    fleet: &ClusterSandbox,
    repo: &Repo,
    sides: (&str, &str),
    name: &str,
    extra: &[&str],
) -> Run {
    let json = fleet.dir().join(name);
    support::run(prove_between(fleet, repo, sides, &json, extra), Some(json))
}

/// The pricing proof ([`prove`]) started in the background, its stdout and stderr kept for
/// [`finished`].
fn spawn_proof(fleet: &ClusterSandbox, repo: &Repo, json: &Path, extra: &[&str]) -> Child {
    prove(fleet, repo, json, extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits, off the async runtime, for a proof started in the background to end.
async fn finished(proof: Child) -> Output {
    tokio::task::spawn_blocking(move || proof.wait_with_output())
        .await
        .unwrap()
        .unwrap()
}

fn fleet_run(fleet: &ClusterSandbox, args: &[&str]) -> Run {
    support::run(fleet_command(fleet, args), None)
}

async fn jobs_consumer(fleet: &ClusterSandbox) -> jetstream::consumer::Info {
    fleet
        .jobs_consumer_info(&fleet.client().await, "assay")
        .await
}

async fn wait_for_a_running_job(fleet: &ClusterSandbox) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while jobs_consumer(fleet).await.num_ack_pending == 0 {
        assert!(Instant::now() < deadline, "no job started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `args` as the `&str`s a command takes.
fn as_strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

fn lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.trim().is_empty()).collect()
}

/// `assay prove --quiet --cluster {cluster}` of the pricing change's discount test, with no
/// fleet of these tests behind it.
fn submit(cluster: &str, repo: &Repo) -> Command {
    let mut command = support::assay();
    command
        .args(["prove", "--quiet", "--cluster", cluster, "-C"])
        .arg(repo.path())
        .args(["--base", "main~1", "--candidate", "HEAD"])
        .args(["--criterion", "test: test_discount_is_applied"]);
    command
}

/// The submission failed at submit: exit 3 and one line that names `what` and gives a hint.
fn assert_refused_at_submit_in_one_line(run: &Run, what: &str) {
    assert_eq!(run.code, 3, "{}", run.explain());
    assert_eq!(lines(&run.stderr).len(), 1, "{}", run.explain());
    assert!(
        run.stderr.contains(what) && run.stderr.contains("hint"),
        "{}",
        run.explain()
    );
}

#[test]
fn nats_unreachable_at_submit_exits_3_with_one_line() {
    let repo = pricing_repo(0.0);
    let closed = format!("nats://127.0.0.1:{}", free_port());
    let out = tempfile::tempdir().unwrap();
    let mut command = submit(&closed, &repo);
    command
        .arg("--store")
        .arg(format!("file://{}", out.path().join("store").display()));
    let run = support::run(command, None);
    assert_refused_at_submit_in_one_line(&run, &closed);
    // The CLI's flag for the URL is --cluster; --nats is the services'.
    assert!(run.stderr.contains("check --cluster,"), "{}", run.explain());
    let mut mutate = support::assay();
    mutate
        .args(["mutate", "--quiet", "--cluster", &closed, "-C"])
        .arg(repo.path())
        .arg("--store")
        .arg(format!("file://{}", out.path().join("store").display()));
    let mut status = support::assay();
    status.args(["status", "--cluster", &closed]);
    for command in [mutate, status] {
        let run = support::run(command, None);
        assert_eq!(run.code, 3, "{}", run.explain());
        assert!(
            run.stderr.contains(&closed) && run.stderr.contains("check --cluster,"),
            "{}",
            run.explain()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_store_at_submit_exits_3_with_one_line() {
    let nats = servers::start_nats();
    let repo = pricing_repo(0.0);
    let closed_store_port = free_port();
    let mut command = submit(&format!("nats://127.0.0.1:{}", nats.port), &repo);
    command
        .args(["--store", "s3://assay-artifacts"])
        .envs(s3_env(closed_store_port));
    let started = Instant::now();
    let run = support::run(command, None);
    assert_refused_at_submit_in_one_line(&run, "failed to upload tree");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "an unreachable store took {:?} to report",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_going_down_mid_proof_is_an_infrastructure_abort_not_a_test_failure() {
    let mut fleet = start_fleet();
    let repo = pricing_repo(3.0);
    let _coordinator = coordinator(&fleet);
    let _worker = worker(&fleet, "worker-a", "1");
    let json = fleet.dir().join("proof.json");
    let proof = spawn_proof(
        &fleet,
        &repo,
        &json,
        &["--jobs", "1", "--repeats", "1", "--quiet"],
    );
    wait_for_a_running_job(&fleet).await;
    fleet.kill_store();
    let out = finished(proof).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("infrastructure failure"), "{stderr}");
    let evidence: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(evidence["verdict"], "unverified");
    let jobs = evidence["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 4);
    for job in jobs {
        // The job that was running when the store went away ran its tests, but its logs
        // could not be kept: no evidence, no test outcome.
        assert_eq!(job["status"], "infrastructure", "{job}");
        assert_eq!(job["tests_reported"], 0, "{job}");
    }
    for criterion in evidence["criteria"].as_array().unwrap() {
        assert_ne!(criterion["verdict"], "refuted", "{criterion}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_results_and_cancel_against_a_running_fleet() {
    let fleet = start_fleet();
    let coordinator = coordinator(&fleet);
    let worker = worker(&fleet, "worker-a", "1");

    // A finished proof: status shows it, results returns its evidence and exit code.
    let quick = pricing_repo(0.0);
    let proved = run_proof(&fleet, &quick, "quick.json", &["--repeats", "1", "--quiet"]);
    assert_eq!(proved.code, 0, "{}", proved.explain());
    let evidence = proved.evidence.clone().unwrap();
    let quick_id = evidence["proof_id"].as_str().unwrap().to_owned();
    // The proven proof's mutation check ran on the fleet: the unmutated run and each mutant.
    let mutation_jobs = evidence["mutation_check"]["mutants"]
        .as_array()
        .map_or(0, Vec::len)
        + 1;
    assert!(mutation_jobs > 1, "{evidence:#}");
    let status = fleet_run(&fleet, &["status"]);
    assert_eq!(status.code, 0, "{}", status.explain());
    assert_eq!(
        lines(&status.stdout),
        [format!(
            "{quick_id}\tfinished\t4/4 jobs, mutation {mutation_jobs}/{mutation_jobs} jobs"
        )]
    );
    let results_json = fleet.dir().join("results.json");
    let results = fleet_run(
        &fleet,
        &[
            "results",
            &quick_id,
            "--json",
            results_json.to_str().unwrap(),
        ],
    );
    assert_eq!(results.code, 0, "{}", results.explain());
    assert!(
        results
            .stdout
            .starts_with(&format!("proof {quick_id}: PROVEN")),
        "{}",
        results.explain()
    );
    let fetched: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&results_json).unwrap()).unwrap();
    assert_eq!(fetched, evidence);

    // A slow proof, cancelled while its first job runs.
    let slow = pricing_repo(4.0);
    let slow_json = fleet.dir().join("slow.json");
    let slow_run = spawn_proof(
        &fleet,
        &slow,
        &slow_json,
        &["--repeats", "3", "--jobs", "2", "--quiet", "--no-mutation"],
    );
    wait_for_a_running_job(&fleet).await;
    let listed = fleet_run(&fleet, &["status"]);
    let slow_line = lines(&listed.stdout)
        .into_iter()
        .find(|l| !l.starts_with(&quick_id))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("{}", listed.explain()));
    let slow_id = slow_line.split('\t').next().unwrap().to_owned();
    assert_eq!(slow_line, format!("{slow_id}\trunning\t0/8 jobs"));
    let one = fleet_run(&fleet, &["status", &slow_id]);
    assert_eq!(lines(&one.stdout), [slow_line.as_str()]);

    let cancel = fleet_run(&fleet, &["cancel", &slow_id]);
    assert_eq!(cancel.code, 0, "{}", cancel.explain());
    assert_eq!(lines(&cancel.stdout), [format!("cancelled {slow_id}")]);
    let submitter = finished(slow_run).await;
    let submitter_err = String::from_utf8_lossy(&submitter.stderr);
    assert_eq!(submitter.status.code(), Some(3), "{submitter_err}");
    assert!(
        submitter_err.contains(&format!("proof {slow_id} was cancelled")),
        "{submitter_err}"
    );

    // The job that was running finishes; its late result is dropped and logged.
    let deadline = Instant::now() + Duration::from_secs(60);
    while coordinator.metric("assay_results_dropped_total") != Some(1) {
        assert!(
            Instant::now() < deadline,
            "no late result was dropped:\n{}",
            coordinator.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        coordinator.log().contains("dropping a late result"),
        "{}",
        coordinator.log()
    );
    // The queued jobs were purged and nothing of the proof is running: none of them will run.
    let consumer = jobs_consumer(&fleet).await;
    assert_eq!(
        (consumer.num_pending, consumer.num_ack_pending),
        (0, 0),
        "{consumer:?}"
    );
    assert_eq!(
        worker.metric_sum("assay_job_outcomes_total"),
        Some((4 + mutation_jobs + 1) as u64)
    );
    let after = fleet_run(&fleet, &["status", &slow_id]);
    assert_eq!(
        lines(&after.stdout),
        [format!("{slow_id}\tcancelled\t0/8 jobs")]
    );
    let again = fleet_run(&fleet, &["cancel", &slow_id]);
    assert_eq!(again.code, 2, "{}", again.explain());
    assert!(
        again.stderr.contains("is not running (cancelled)"),
        "{}",
        again.explain()
    );
    let no_results = fleet_run(&fleet, &["results", &slow_id]);
    assert_eq!(no_results.code, 2, "{}", no_results.explain());
    assert!(
        no_results.stderr.contains("has no evidence yet"),
        "{}",
        no_results.explain()
    );

    // Idle services stop cleanly on SIGTERM.
    assert_eq!(worker.terminate(), Some(0));
    assert_eq!(coordinator.terminate(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_fleet_client_names_the_proof_it_leaves_running() {
    let fleet = start_fleet();
    let coordinator = coordinator(&fleet);
    let worker = worker(&fleet, "worker-a", "1");
    let slow = pricing_repo(4.0);
    let json = fleet.dir().join("slow.json");
    let client = spawn_proof(&fleet, &slow, &json, &["--repeats", "3", "--no-mutation"]);
    wait_for_a_running_job(&fleet).await;
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &client.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let ended = finished(client).await;
    let stderr = String::from_utf8_lossy(&ended.stderr);
    assert_eq!(ended.status.code(), Some(143), "{stderr}");
    // The id it said when it submitted, named again with the command that stops the proof.
    let id = stderr
        .lines()
        .find_map(|l| l.strip_prefix("[prove] submitted to the fleet as "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no submission line:\n{stderr}"))
        .to_owned();
    assert!(
        stderr.contains(&format!(
            "proof {id} keeps running on the fleet (`assay cancel {id}` stops it)"
        )),
        "{stderr}"
    );
    let cancel = fleet_run(&fleet, &["cancel", &id]);
    assert_eq!(cancel.code, 0, "{}", cancel.explain());
    assert_eq!(lines(&cancel.stdout), [format!("cancelled {id}")]);
    assert_eq!(worker.terminate(), Some(0));
    assert_eq!(coordinator.terminate(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_taking_a_proof_over_does_not_repeat_its_progress_lines() {
    let fleet = start_fleet();
    let first = coordinator(&fleet);
    let worker = worker(&fleet, "worker-a", "1");
    let slow = pricing_repo(1.0);
    let json = fleet.dir().join("taken-over.json");
    let client = spawn_proof(&fleet, &slow, &json, &["--repeats", "3", "--no-mutation"]);
    // Some jobs finish under the first coordinator; its successor publishes them again.
    wait_for_a_running_job(&fleet).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    drop(first);
    let second = coordinator(&fleet);
    let ended = finished(client).await;
    let stderr = String::from_utf8_lossy(&ended.stderr);
    assert_eq!(ended.status.code(), Some(0), "{stderr}");
    let evidence: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let jobs = evidence["jobs"].as_array().map_or(0, Vec::len);
    let coordinators = evidence["coordinators"].as_array().map_or(0, Vec::len);
    assert_eq!(coordinators, 2, "the proof was not taken over:\n{stderr}");
    let said = stderr
        .lines()
        .filter(|l| l.starts_with("[prove] ") && l.contains(&format!("/{jobs} ")))
        .count();
    assert_eq!(said, jobs, "each job's line once:\n{stderr}");
    assert_eq!(worker.terminate(), Some(0));
    assert_eq!(second.terminate(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_halt_holds_a_proofs_jobs_back_until_resume() {
    let fleet = start_fleet();
    let repo = pricing_repo(0.0);
    let coordinator = coordinator(&fleet);
    let _worker = worker(&fleet, "worker-a", "1");
    let url = fleet.nats_url();
    let halt = fleet_run(
        &fleet,
        &[
            "halt",
            "--cluster",
            &url,
            "--reason",
            "invoice database migration",
        ],
    );
    assert_eq!(halt.code, 0, "{}", halt.explain());
    coordinator.wait_for_log("fleet halted");

    let json = fleet.dir().join("proof.json");
    let stderr_path = fleet.dir().join("prove.stderr");
    let proof = prove(&fleet, &repo, &json, &["--jobs", "1", "--repeats", "1"])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let stderr = || std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !stderr().contains("[HALT]") {
        assert!(Instant::now() < deadline, "no halt reported:\n{}", stderr());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        stderr().contains("[HALT] proof admission stopped. Reason: invoice database migration"),
        "{}",
        stderr()
    );
    // Held back: a second later still no job of the proof has reached the queue.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let consumer = jobs_consumer(&fleet).await;
    assert_eq!(
        (
            consumer.num_pending,
            consumer.num_ack_pending,
            consumer.delivered.consumer_sequence
        ),
        (0, 0, 0),
        "{consumer:?}"
    );
    let status = fleet_run(&fleet, &["status"]);
    assert!(
        status.stdout.contains("running\t0/4 jobs"),
        "{}",
        status.explain()
    );

    let resume = fleet_run(&fleet, &["resume", "--cluster", &url]);
    assert_eq!(resume.code, 0, "{}", resume.explain());
    assert!(
        resume.stdout.contains("admission resumed"),
        "{}",
        resume.explain()
    );
    let out = finished(proof).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr());
    assert!(
        stderr().contains("[prove] admission resumed"),
        "{}",
        stderr()
    );
    let evidence: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(evidence["verdict"], "proven");
    assert_eq!(evidence["jobs"].as_array().unwrap().len(), 4);

    // A fleet proof's suite jobs land in the candidate branch's suite history, as embedded: the
    // base suite runs the change's new test against the old code, so it fails there.
    let proof_id = evidence["proof_id"].as_str().unwrap();
    let repo_dir = repo.path().display().to_string();
    let history = fleet_run(&fleet, &["history", "-C", &repo_dir, "--json"]);
    assert_eq!(history.code, 0, "{}", history.explain());
    let history: serde_json::Value = serde_json::from_str(&history.stdout).unwrap();
    let runs: Vec<(&str, &str)> = history["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["run_id"].as_str().unwrap(), r["status"].as_str().unwrap()))
        .collect();
    let (base, candidate) = (
        format!("{proof_id}-base-suite"),
        format!("{proof_id}-candidate-suite"),
    );
    assert_eq!(
        runs,
        [(base.as_str(), "failing"), (candidate.as_str(), "passing")],
        "{history}"
    );
}

/// The `assay coordinator` and `assay worker` lines of docs/fleet.md's first example, as argv.
fn documented_service_commands() -> Vec<Vec<String>> {
    let guide =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/fleet.md"))
            .expect("read docs/fleet.md");
    let block = guide
        .split("```")
        .nth(1)
        .expect("docs/fleet.md opens with an example");
    block
        .lines()
        .filter(|line| line.starts_with("assay coordinator") || line.starts_with("assay worker"))
        .map(|line| {
            line.trim_end_matches('&')
                .split_whitespace()
                .skip(1)
                .map(String::from)
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_one_host_fleet_starts_both_services_and_proves() {
    let fleet = start_fleet();
    let commands = documented_service_commands();
    assert_eq!(commands.len(), 2, "{commands:?}");
    let mut services = Vec::new();
    // Exactly as written, but for the NATS port: no probe address is configured, so each
    // service takes its own loopback default.
    for (argv, (name, started, port)) in commands.iter().zip([
        ("coordinator", "coordinator started", 9464),
        ("worker", "worker started", 9465),
    ]) {
        let argv: Vec<String> = argv
            .iter()
            .map(|word| word.replace("nats://127.0.0.1:4222", &fleet.nats_url()))
            .collect();
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let service = fleet
            .bare_process(Path::new(env!("CARGO_BIN_EXE_assay")), name, &argv)
            .envs(service_env(&fleet, name))
            .envs(fleet.s3_port().map(s3_env).unwrap_or_default())
            .probes_on_default(port)
            .ready(started)
            .start();
        services.push(service);
    }
    for service in &services {
        assert!(
            http_get(service.http_port(), "/healthz").is_some(),
            "no probes on 127.0.0.1:{}:\n{}",
            service.http_port(),
            service.log()
        );
    }
    let repo = pricing_repo(0.0);
    let run = run_proof(&fleet, &repo, "proof.json", &["--no-mutation"]);
    assert_eq!(run.code, 0, "{}", run.explain());
    for service in services {
        assert_eq!(service.terminate(), Some(0));
    }
}

/// The person's test-only exception travels with a fleet submission: the coordinator judges
/// the regression test on the candidate alone, as embedded mode does, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_only_change_granted_the_exception_is_proven_on_a_fleet() {
    let fleet = start_fleet();
    let _coordinator = coordinator(&fleet);
    let _worker = worker(&fleet, "w1", "2");
    let repo = Repo::new();
    repo.write(
        "pricing.py",
        "def price(amount, discount=0.0):\n    return round(amount * (1 - discount), 2)\n",
    )
    .write("tests/__init__.py", "")
    .write(
        "tests/test_pricing.py",
        "import unittest\n\nfrom pricing import price\n\n\nclass PriceTests(unittest.TestCase):\n    def test_full_price(self):\n        self.assertEqual(price(40), 40)\n",
    );
    repo.commit("pricing with discounts");
    repo.write(
        "tests/test_pricing.py",
        "import unittest\n\nfrom pricing import price\n\n\nclass PriceTests(unittest.TestCase):\n    def test_full_price(self):\n        self.assertEqual(price(40), 40)\n\n    def test_discount_is_applied(self):\n        self.assertEqual(price(40, discount=0.25), 30)\n",
    );
    repo.commit("tests: the discount is applied");
    let json = fleet.dir().join("proof.json");
    let refused = support::run(prove(&fleet, &repo, &json, &["--no-mutation"]), None);
    assert_eq!(refused.code, 2, "{}", refused.explain());
    assert!(
        refused.stderr.contains("--allow-test-only"),
        "{}",
        refused.explain()
    );
    let granted = prove(
        &fleet,
        &repo,
        &json,
        &["--no-mutation", "--allow-test-only"],
    );
    let run = support::run(granted, Some(json));
    assert_eq!(run.code, 0, "{}", run.explain());
    let evidence = run.evidence.as_ref().expect("evidence");
    assert_eq!(evidence["test_only"], true, "{evidence:#}");
    let c1 = run.criterion("C1");
    assert_eq!(c1["verdict"], "proven", "{c1:#}");
    assert_eq!(c1["reason_code"], "passed_test_only", "{c1:#}");
}

/// On a fleet too, a `--test-report junit:PATH` proof's mutation check reads the report where
/// the proof's jobs do: the coordinator has the planned jobs, not the CLI's flags.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_junit_proofs_mutation_check_runs_on_a_fleet() {
    let fleet = start_fleet();
    let _coordinator = coordinator(&fleet);
    let _worker = worker(&fleet, "worker-a", "2");
    let repo = pricing_repo(0.0);
    let junit = [
        "--runner",
        "junit",
        "--test-command",
        "python3 -m pytest -p no:cacheprovider -q --junitxml=reports/junit.xml",
        "--test-report",
        "junit:reports/junit.xml",
        "--repeats",
        "2",
    ];
    let run = run_proof(&fleet, &repo, "proof.json", &junit);
    assert_eq!(run.code, 0, "{}", run.explain());
    support::assert_every_mutant_ran_and_one_was_killed(&run);
}

/// The mutation check's progress lines, numbered and named, without their timings.
fn mutation_lines(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|line| line.starts_with("[mutation] "))
        .map(|line| line.split(" (").next().unwrap_or(line).to_owned())
        .collect()
}

/// A fleet proof's CLI has no spec for the mutation check's jobs, which follow the proof's and
/// its diff coverage run: it names them by index as embedded mode names them by spec.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_proofs_mutation_jobs_are_named_as_embedded_mode_names_them() {
    let fleet = start_fleet();
    let _coordinator = coordinator(&fleet);
    let _worker = worker(&fleet, "worker-a", "1");
    let repo = support::printing_node_pager_repo("quiet", 0);
    let criterion = ["--criterion", "test: \"partial last page is counted\""];
    let args = [&["--base", "main~1", "--no-cache"][..], &criterion[..]].concat();
    let out_dir = tempfile::tempdir().unwrap();
    let (command, json) = support::prove_command(&repo, &args, out_dir.path());
    let embedded = support::run(command, Some(json));
    assert_eq!(embedded.code, 0, "{}", embedded.explain());
    let on_fleet = run_fleet_proof(&fleet, &repo, "proof.json", &args);
    assert_eq!(on_fleet.code, 0, "{}", on_fleet.explain());
    // The diff coverage run took the index after the proof's jobs: the check's come after it.
    let evidence = on_fleet.evidence.as_ref().expect("evidence");
    assert!(evidence.get("diff_coverage").is_some(), "{evidence:#}");
    let lines = mutation_lines(&on_fleet.stderr);
    assert_eq!(
        lines,
        mutation_lines(&embedded.stderr),
        "{}",
        on_fleet.explain()
    );
    let total = lines.len();
    assert!(total >= 2, "{}", on_fleet.explain());
    assert_eq!(lines[0], format!("[mutation] 1/{total} unmutated"));
    for (at, line) in lines.iter().enumerate().skip(1) {
        assert_eq!(*line, format!("[mutation] {}/{total} mutant", at + 1));
    }
}

/// A node test's output is stored on a fleet as it is embedded, cut at the worker's output cap
/// with the rest counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_tests_output_is_stored_up_to_the_workers_cap_with_the_rest_counted() {
    use assay_transport::store::ArtifactStore;
    const CAP: u64 = 4096;
    let fleet = start_fleet();
    let _coordinator = coordinator(&fleet);
    let _worker = worker_with(
        &fleet,
        "worker-a",
        "1",
        &[("ASSAY_OUTPUT_CAP_BYTES", CAP.to_string())],
    );
    let marker = "PAGER-DIAGNOSTIC-9";
    // 300 lines of 31 bytes a stream: over the cap.
    let repo = support::printing_node_pager_repo(marker, 300);
    let run = run_fleet_proof(
        &fleet,
        &repo,
        "proof.json",
        &support::one_uncached_run_against_the_parent("test: \"partial last page is counted\""),
    );
    assert_eq!(run.code, 0, "{}", run.explain());
    let artifacts = support::candidate_stream_artifacts(run.evidence.as_ref().expect("evidence"));
    let store = fleet_store(&fleet);
    for (stream, artifact) in ["stdout", "stderr"].into_iter().zip(artifacts) {
        let line = format!("{marker} on {stream}\n");
        assert_eq!(artifact["bytes"], CAP, "{artifact}");
        let dropped = artifact["dropped_bytes"].as_u64().unwrap_or_default();
        assert!(dropped >= 300 * line.len() as u64 - CAP, "{artifact}");
        let key = artifact["key"].as_str().expect("a key");
        let stored = store.get(key).await.unwrap().expect("the stored log");
        assert_eq!(stored.len() as u64, CAP);
        assert!(
            String::from_utf8_lossy(&stored).starts_with(&line),
            "{stream}: {stored:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mutation_phase_shows_in_status_and_cancel_stops_it() {
    let fleet = start_fleet();
    let coordinator = coordinator(&fleet);
    let worker = worker(&fleet, "worker-a", "1");
    // Every job runs the slow new test, so the mutation phase lasts long enough to watch.
    let repo = pricing_repo(1.5);
    let json = fleet.dir().join("proof.json");
    let submitter = spawn_proof(&fleet, &repo, &json, &["--repeats", "1", "--jobs", "1"]);
    let deadline = Instant::now() + Duration::from_secs(90);
    let line = loop {
        let status = fleet_run(&fleet, &["status"]);
        if let Some(line) = lines(&status.stdout)
            .into_iter()
            .find(|l| l.contains(", mutation "))
        {
            break line.to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "the mutation phase never showed: {}\n{}",
            status.explain(),
            coordinator.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let proof_id = line.split('\t').next().unwrap().to_owned();
    assert!(
        line.starts_with(&format!("{proof_id}\trunning\t4/4 jobs, mutation ")),
        "{line}\n{}",
        coordinator.log()
    );
    let cancel = fleet_run(&fleet, &["cancel", &proof_id]);
    assert_eq!(cancel.code, 0, "{}", cancel.explain());
    let output = finished(submitter).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("[mutation] "),
        "mutants were reported: {stderr}"
    );
    assert!(stderr.contains("was cancelled"), "{stderr}");
    // No mutant of the cancelled proof is left queued.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let consumer = jobs_consumer(&fleet).await;
        if (consumer.num_pending, consumer.num_ack_pending) == (0, 0) {
            break;
        }
        assert!(Instant::now() < deadline, "{consumer:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = fleet_run(&fleet, &["status", &proof_id]);
    assert!(
        lines(&after.stdout)
            .first()
            .is_some_and(|l| l.starts_with(&format!("{proof_id}\tcancelled\t4/4 jobs"))),
        "{}",
        after.explain()
    );
    assert_eq!(worker.terminate(), Some(0));
    assert_eq!(coordinator.terminate(), Some(0));
}

/// The `--nats-*` flags take effect on every command that connects, over the `ASSAY_NATS_*`
/// variables: a wrong token is refused in one line naming the server and its reason, the right
/// one gets in whatever the environment says, and a missing secret file is named by path.
#[test]
fn nats_flags_override_the_environment_and_a_wrong_token_is_refused_naming_the_server() {
    let server = servers::start_nats_with_config(|port, dir| {
        format!(
            "listen: \"127.0.0.1:{port}\"\njetstream {{\n  store_dir: {:?}\n}}\nauthorization {{\n  token: \"invoice-fleet-token\"\n}}\n",
            dir.join("js").display().to_string()
        )
    });
    let url = format!("nats://127.0.0.1:{}", server.port);
    let secrets = tempfile::tempdir().unwrap();
    let right = secrets.path().join("right.token");
    let wrong = secrets.path().join("wrong.token");
    std::fs::write(&right, "invoice-fleet-token\n").unwrap();
    std::fs::write(&wrong, "not-the-token\n").unwrap();
    let status = |token_flag: &Path, env_token: &Path| {
        let mut command = support::assay();
        command
            .args(["status", "--cluster", &url, "--nats-token-file"])
            .arg(token_flag)
            .env("ASSAY_NATS_TOKEN_FILE", env_token);
        support::run(command, None)
    };
    let refused = status(&wrong, &right);
    assert_eq!(refused.code, 3, "{}", refused.explain());
    // One error line (the NATS client library also logs the refusal at its own level).
    let errors: Vec<_> = lines(&refused.stderr)
        .into_iter()
        .filter(|l| l.starts_with("error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{}", refused.explain());
    assert!(
        errors[0].contains(&url) && errors[0].contains("authorization violation"),
        "{}",
        refused.explain()
    );
    let admitted = status(&right, &wrong);
    assert_eq!(admitted.code, 0, "{}", admitted.explain());
    let missing = secrets.path().join("absent.token");
    let unread = status(&missing, &right);
    assert_ne!(unread.code, 0, "{}", unread.explain());
    assert!(
        unread.stderr.contains(&missing.display().to_string()),
        "{}",
        unread.explain()
    );
    // The services take the same flags, over the same variable.
    let log = secrets.path().join("coordinator.log");
    let mut coordinator = support::assay()
        .args(["coordinator", "--nats", &url, "--nats-token-file"])
        .arg(&wrong)
        .env("ASSAY_NATS_TOKEN_FILE", &right)
        .env("ASSAY_HTTP_LISTEN", "")
        .env(
            "ASSAY_STORE",
            format!("file://{}", secrets.path().join("store").display()),
        )
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let code = loop {
        if let Some(status) = coordinator.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() > deadline {
            let _ = coordinator.kill();
            let _ = coordinator.wait();
            panic!("the coordinator connected with the environment's token, not the flag's");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains(&url) && stderr.contains("authorization violation"),
        "{stderr}"
    );
}

#[test]
fn every_command_that_connects_to_nats_documents_the_nats_flags() {
    for args in [
        &["prove", "--help"][..],
        &["test", "--help"],
        &["mutate", "--help"],
        &["status", "--help"],
        &["results", "--help"],
        &["cancel", "--help"],
        &["halt", "--help"],
        &["resume", "--help"],
        &["coordinator", "--help"],
        &["worker", "--help"],
    ] {
        let mut command = support::assay();
        command.args(args);
        let run = support::run(command, None);
        assert_eq!(run.code, 0, "{}", run.explain());
        for flag in [
            "--nats-creds",
            "--nats-nkey-seed-file",
            "--nats-user",
            "--nats-password-file",
            "--nats-token-file",
            "--nats-tls-ca",
            "--nats-tls-cert",
            "--nats-tls-key",
            "--nats-require-tls",
        ] {
            assert!(
                run.stdout.contains(flag),
                "{args:?} lacks {flag}:\n{}",
                run.stdout
            );
        }
    }
}

/// `assay ARGS --help` with the fleet's variables set, one of them empty.
fn help_of(args: &[&str]) -> String {
    let mut command = support::assay();
    command
        .args(args)
        .arg("--help")
        .env("ASSAY_NATS_URL", "")
        .env("ASSAY_STORE", "s3://private-artifacts")
        .env("ASSAY_PASS_ENV", "RUSTUP_HOME")
        .env("ASSAY_STATE_DIR", "/var/lib/assay-state");
    let run = support::run(command, None);
    assert_eq!(run.code, 0, "{args:?}: {}", run.explain());
    run.stdout
}

/// The subcommands a help lists under `Commands:`, but `help`.
fn subcommands_listed(help: &str) -> Vec<String> {
    help.split("Commands:\n")
        .nth(1)
        .map(|list| {
            list.lines()
                .take_while(|line| !line.trim().is_empty())
                .filter_map(|line| line.split_whitespace().next())
                .filter(|name| *name != "help")
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_help_names_each_variable_once_and_never_its_value() {
    let mut pending = vec![Vec::<String>::new()];
    let mut seen = 0;
    while let Some(path) = pending.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let help = help_of(&args);
        seen += 1;
        for sub in subcommands_listed(&help) {
            let mut deeper = path.clone();
            deeper.push(sub);
            pending.push(deeper);
        }
        assert!(
            !help.contains("=]"),
            "{args:?} shows a variable's value:\n{help}"
        );
        for value in [
            "s3://private-artifacts",
            "RUSTUP_HOME]",
            "/var/lib/assay-state",
        ] {
            assert!(!help.contains(value), "{args:?} shows {value}:\n{help}");
        }
        let mut named = std::collections::BTreeMap::<&str, usize>::new();
        for (at, _) in help.match_indices("env: ") {
            let name = help[at + 5..]
                .split(|c: char| !(c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit()))
                .next()
                .unwrap_or_default();
            *named.entry(name).or_default() += 1;
        }
        for (name, count) in named {
            assert_eq!(count, 1, "{args:?} names {name} {count} times:\n{help}");
        }
    }
    // The top level, its commands and `cache`'s own.
    assert!(seen > 15, "only {seen} helps were read");
}

#[test]
fn the_coordinator_takes_only_the_flags_it_uses() {
    const WORKERS_OWN: [&str; 5] = [
        "--slots",
        "--sandbox",
        "--image",
        "--shutdown-grace",
        "--pass-env",
    ];
    let coordinator = help_of(&["coordinator"]);
    let worker = help_of(&["worker"]);
    for flag in WORKERS_OWN {
        assert!(!coordinator.contains(flag), "{flag}:\n{coordinator}");
        assert!(worker.contains(flag), "{flag}:\n{worker}");
    }
    for flag in [
        "--config",
        "--nats ",
        "--store",
        "--subject-prefix",
        "--nats-user",
    ] {
        assert!(
            coordinator.contains(flag) && worker.contains(flag),
            "{flag}"
        );
    }
    // A worker's flag given to the coordinator is refused, naming whose it is.
    let mut command = support::assay();
    command.args(["coordinator", "--slots", "4"]);
    let run = support::run(command, None);
    assert_eq!(run.code, 2, "{}", run.explain());
    assert!(
        run.stderr.contains("--slots is a flag of `assay worker`"),
        "{}",
        run.explain()
    );
}

#[test]
fn a_services_nats_flag_given_to_a_fleet_client_suggests_its_cluster_flag() {
    for (args, right) in [
        (
            &["status", "--nats", "nats://127.0.0.1:4222"][..],
            "'--cluster'",
        ),
        (
            &["cancel", "--nats", "nats://127.0.0.1:4222", "p-1"],
            "'--cluster'",
        ),
        (
            &["worker", "--cluster", "nats://127.0.0.1:4222"],
            "'--nats'",
        ),
    ] {
        let mut command = support::assay();
        command.args(args);
        let run = support::run(command, None);
        assert_eq!(run.code, 2, "{args:?}: {}", run.explain());
        assert!(
            run.stderr
                .contains(&format!("a similar argument exists: {right}"))
                && !run.stderr.contains("--nats-user"),
            "{args:?}: {}",
            run.explain()
        );
    }
}

/// The shipped permissions (`deploy/nats/permissions.conf`) on a TLS server that verifies
/// clients, through the binary: `assay coordinator`, `assay worker` and `assay prove --cluster`
/// each connect as their own user with the `--nats-*` flags (user, password file, CA, client
/// certificate and key, require TLS) and prove a change; a user without its certificate is
/// refused; the submitter's `assay halt` is refused (only the operator's and the
/// coordinator's users may write the halt key) and the operator's halt and resume go through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_the_shipped_permissions_each_command_runs_as_its_own_user() {
    let roles = ["coordinator", "worker", "submitter", "operator"];
    let env: Vec<(String, String)> = roles
        .iter()
        .map(|role| {
            (
                format!("ASSAY_{}_PASSWORD", role.to_ascii_uppercase()),
                format!("{role}-secret-{}", std::process::id()),
            )
        })
        .collect();
    let certs = tempfile::tempdir().unwrap();
    servers::make_certificates(certs.path());
    let cert = |name: &str| certs.path().join(name).display().to_string();
    let fleet = ClusterSandbox::start_with_nats(
        StoreKind::S3,
        NatsSetup {
            config: format!(
                "tls {{\n  cert_file: {:?}\n  key_file: {:?}\n  ca_file: {:?}\n  verify: true\n}}\ninclude \"permissions.conf\"\n",
                cert("server.pem"),
                cert("server.key"),
                cert("ca.pem"),
            ),
            env: env.clone(),
            files: vec![(
                "permissions.conf".into(),
                include_str!("../deploy/nats/permissions.conf").into(),
            )],
        },
    );
    let user = |role: &str| -> Vec<String> {
        let file = fleet.dir().join(format!("{role}.password"));
        let (_, password) = &env[roles.iter().position(|r| *r == role).unwrap()];
        std::fs::write(&file, format!("{password}\n")).unwrap();
        vec![
            "--nats-user".into(),
            format!("assay-{role}"),
            "--nats-password-file".into(),
            file.display().to_string(),
            "--nats-tls-ca".into(),
            cert("ca.pem"),
            "--nats-tls-cert".into(),
            cert("client.pem"),
            "--nats-tls-key".into(),
            cert("client.key"),
            "--nats-require-tls".into(),
        ]
    };
    let with = |args: &[&str], role: &str| -> Vec<String> {
        args.iter()
            .map(|a| a.to_string())
            .chain(user(role))
            .collect()
    };
    let coordinator_args = with(&["coordinator"], "coordinator");
    let coordinator = service(&fleet, "coordinator", &as_strs(&coordinator_args));
    coordinator.wait_for_log("coordinator started");
    let worker_args = with(
        &["worker", "--slots", "2", "--sandbox", "process"],
        "worker",
    );
    let worker = service(&fleet, "worker", &as_strs(&worker_args));
    worker.wait_for_log("worker started");

    let repo = pricing_repo(0.0);
    let submitter = user("submitter");
    let mut extra = vec!["--no-mutation"];
    extra.extend(submitter.iter().map(String::as_str));
    let run = run_proof(&fleet, &repo, "proof.json", &extra);
    assert_eq!(run.code, 0, "{}", run.explain());
    let status = fleet_run(&fleet, &as_strs(&with(&["status"], "submitter")));
    assert_eq!(status.code, 0, "{}", status.explain());
    assert_eq!(lines(&status.stdout).len(), 1, "{}", status.explain());

    // The same user without its client certificate is refused by the TLS server.
    let user_only: Vec<String> = user("submitter").into_iter().take(6).collect();
    let mut plain = vec!["status".to_owned()];
    plain.extend(user_only);
    let plain = fleet_run(&fleet, &as_strs(&plain));
    assert_eq!(plain.code, 3, "{}", plain.explain());
    assert!(
        plain.stderr.contains(&fleet.nats_url()),
        "{}",
        plain.explain()
    );

    let refused = fleet_run(
        &fleet,
        &as_strs(&with(
            &["halt", "--cluster", &fleet.nats_url(), "--reason", "freeze"],
            "submitter",
        )),
    );
    // Answered by the server's own refusal of the submitter's credentials as the operator's
    // (its inbox), not by a request that waited out its timeout.
    assert_refused_by_the_server(
        &refused,
        "only the operator's and the coordinator's users may",
    );
    // `status` as the operator with the submitter's credentials: the same refusal, at once,
    // with the hint about --nats-role.
    let wrong_role = fleet_run(
        &fleet,
        &as_strs(&with(&["status", "--nats-role", "operator"], "submitter")),
    );
    assert_refused_by_the_server(&wrong_role, "--nats-role must name the role");
    // `prove` with the operator's credentials, and `cancel` as the operator with the
    // submitter's: each refused by the server at once, not after its requests' timeouts.
    let operator = user("operator");
    let mut as_operator = vec!["--no-mutation"];
    as_operator.extend(operator.iter().map(String::as_str));
    let prove_refused = run_proof(&fleet, &repo, "refused.json", &as_operator);
    assert_refused_by_the_server(&prove_refused, "the submitter's credentials");
    let cancel_refused = fleet_run(
        &fleet,
        &as_strs(&with(
            &["cancel", "--nats-role", "operator", "no-such-proof"],
            "submitter",
        )),
    );
    assert_refused_by_the_server(&cancel_refused, "--nats-role must name the role");
    for args in [
        &["halt", "--cluster", &fleet.nats_url(), "--reason", "freeze"][..],
        &["resume", "--cluster", &fleet.nats_url()],
    ] {
        let run = fleet_run(&fleet, &as_strs(&with(args, "operator")));
        assert_eq!(run.code, 0, "{}", run.explain());
    }
    assert_eq!(worker.terminate(), Some(0));
    assert_eq!(coordinator.terminate(), Some(0));
}

/// A command the NATS server refused at once: exit 3, the server's own words, and `hint`.
fn assert_refused_by_the_server(run: &Run, hint: &str) {
    assert_eq!(run.code, 3, "{}", run.explain());
    assert!(
        run.stderr.contains("the NATS server refused it")
            && run
                .stderr
                .to_ascii_lowercase()
                .contains("permissions violation")
            && run.stderr.contains(hint),
        "{}",
        run.explain()
    );
}

/// A coordinator whose `[cache]` declares `sandbox` (TOML of `[cache.sandbox]`, none: no
/// declaration) and signs with the key in `cache.key`.
fn cached_coordinator(fleet: &ClusterSandbox, sandbox: Option<&str>) -> FleetProcess {
    let key = fleet.dir().join("cache.key");
    std::fs::write(&key, "a8f3c91e5b2d47e09c6a1f8b3d5e7a2c4b6d8f0e").unwrap();
    let declared = sandbox
        .map(|s| format!("interpreter = \"python3 of the workers' host\"\n[cache.sandbox]\n{s}\n"))
        .unwrap_or_default();
    let config = fleet.dir().join("coordinator.toml");
    std::fs::write(
        &config,
        format!(
            "schema = \"assay.service/v1\"\n[cache]\nkey_file = \"{}\"\n{declared}",
            key.display()
        ),
    )
    .unwrap();
    let coordinator = service(
        fleet,
        "coordinator",
        &["coordinator", "--config", config.to_str().unwrap()],
    );
    coordinator.wait_for_log("coordinator started");
    coordinator
}

const PROCESS_SANDBOX: &str = "kind = \"process\"";

/// The evidence's jobs: `(side, served from the cache)`, in plan order.
fn served_by_side(run: &Run) -> Vec<(String, bool)> {
    run.evidence.as_ref().expect("evidence")["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| {
            (
                j["side"].as_str().unwrap().to_owned(),
                !j["cached"].is_null(),
            )
        })
        .collect()
}

/// The evidence's jobs ([`served_by_side`]), none of which the cache answered.
fn none_served_from_the_cache(run: &Run) -> Vec<(String, bool)> {
    let jobs = served_by_side(run);
    assert!(jobs.iter().all(|(_, served)| !served), "{jobs:?}");
    jobs
}

/// Jobs the worker has finished so far.
fn jobs_run(worker: &FleetProcess) -> u64 {
    worker.metric_sum("assay_job_outcomes_total").unwrap_or(0)
}

fn fleet_store(fleet: &ClusterSandbox) -> assay_transport::store::ObjectArtifactStore {
    assay_transport::store::open_store(&fleet.store_url(), &fleet.store_options()).unwrap()
}

async fn cache_entries(fleet: &ClusterSandbox) -> Vec<assay_engine::result_cache::CacheEntry> {
    use assay_transport::store::ArtifactStore;
    let store = fleet_store(fleet);
    let mut entries = Vec::new();
    for object in store
        .list(assay_engine::result_cache::PREFIX)
        .await
        .unwrap()
    {
        let bytes = store.get(&object.key).await.unwrap().unwrap();
        entries.push(serde_json::from_slice(&bytes).unwrap());
    }
    entries
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_re_proof_after_a_product_only_edit_serves_the_base_side_from_the_cache() {
    let fleet = start_fleet();
    let coordinator = cached_coordinator(&fleet, Some(PROCESS_SANDBOX));
    assert!(
        coordinator.log().contains("result cache on"),
        "{}",
        coordinator.log()
    );
    let worker = worker(&fleet, "worker", "2");
    let repo = pricing_repo(0.0);
    let base = repo.git(&["rev-parse", "HEAD~1"]).trim().to_owned();
    let first = run_proof_between(
        &fleet,
        &repo,
        (&base, "HEAD"),
        "first.json",
        &["--no-mutation"],
    );
    assert_eq!(first.code, 0, "{}", first.explain());
    let planned = none_served_from_the_cache(&first);
    let after_first = jobs_run(&worker);
    assert_eq!(after_first, planned.len() as u64);
    let entries = cache_entries(&fleet).await;
    assert_eq!(entries.len(), planned.len(), "every trusted result stored");
    assert!(entries.iter().all(|e| e.signature.is_some()), "signed");

    // A product-only edit: the base tree (base plus the change's tests) stays the same.
    repo.write(
        "pricing.py",
        "def price(amount, discount=0.0):\n    discounted = amount * (1 - discount)\n    return round(discounted, 2)\n",
    );
    repo.commit("pricing: name the discounted amount");
    let second = run_proof_between(
        &fleet,
        &repo,
        (&base, "HEAD"),
        "second.json",
        &["--no-mutation"],
    );
    assert_eq!(second.code, 0, "{}", second.explain());
    let jobs = served_by_side(&second);
    assert_eq!(jobs.len(), planned.len());
    for (side, served) in &jobs {
        assert_eq!(*served, side == "base", "{jobs:?}");
    }
    let base_jobs = jobs.iter().filter(|(side, _)| side == "base").count();
    assert!(
        base_jobs >= 2,
        "the base side runs its targeted and suite jobs: {jobs:?}"
    );
    // Only the candidate side reached the worker.
    assert_eq!(
        jobs_run(&worker) - after_first,
        (jobs.len() - base_jobs) as u64
    );
    assert!(
        second.stderr.contains(&format!(
            "[cache] {base_jobs} of {} jobs answered from the fleet's cache",
            jobs.len()
        )),
        "{}",
        second.explain()
    );
    // The coordinator's progress events say which jobs the cache answered, and so do the lines.
    let cached_lines = |run: &Run| {
        run.stderr
            .lines()
            .filter(|l| l.starts_with("[prove] ") && l.contains(" (cached): "))
            .count()
    };
    assert_eq!(cached_lines(&first), 0, "{}", first.explain());
    assert_eq!(cached_lines(&second), base_jobs, "{}", second.explain());
    let evidence = |run: &Run| run.evidence.clone().unwrap();
    assert_eq!(evidence(&second)["verdict"], evidence(&first)["verdict"]);
    assert_eq!(evidence(&second)["criteria"], evidence(&first)["criteria"]);
    let cached = &evidence(&second)["jobs"][0]["cached"];
    assert_eq!(cached["proof_id"], evidence(&first)["proof_id"], "{cached}");
    // Served jobs count as done in `assay status`, like the ones the worker ran, and it says
    // how many the cache answered.
    let second_id = evidence(&second)["proof_id"].as_str().unwrap().to_owned();
    let status = fleet_run(&fleet, &["status", &second_id]);
    assert_eq!(
        lines(&status.stdout),
        [format!(
            "{second_id}\tfinished\t{0}/{0} jobs ({base_jobs} from the cache)",
            jobs.len()
        )],
        "{}",
        status.explain()
    );

    // --no-cache: the same proof again dispatches every job.
    let before = jobs_run(&worker);
    let uncached = run_proof_between(
        &fleet,
        &repo,
        (&base, "HEAD"),
        "uncached.json",
        &["--no-mutation", "--no-cache"],
    );
    assert_eq!(uncached.code, 0, "{}", uncached.explain());
    let jobs = none_served_from_the_cache(&uncached);
    assert_eq!(jobs_run(&worker) - before, jobs.len() as u64);
    assert!(
        !uncached.stderr.contains("[cache]"),
        "{}",
        uncached.explain()
    );

    // --refresh-cache: every job runs, and its results replace the entries.
    let before = jobs_run(&worker);
    let refreshed = run_proof_between(
        &fleet,
        &repo,
        (&base, "HEAD"),
        "refreshed.json",
        &["--no-mutation", "--refresh-cache"],
    );
    assert_eq!(refreshed.code, 0, "{}", refreshed.explain());
    let jobs = none_served_from_the_cache(&refreshed);
    assert_eq!(jobs_run(&worker) - before, jobs.len() as u64);
    let refresh_id = evidence(&refreshed)["proof_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let rewritten = cache_entries(&fleet)
        .await
        .iter()
        .filter(|e| e.produced_by.proof_id.as_str() == refresh_id)
        .count();
    assert_eq!(
        rewritten,
        jobs.len(),
        "every entry stored over by the refresh"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_entry_forged_by_a_submitter_is_refused_and_the_job_runs() {
    use assay_engine::result_cache::SigningKey;
    use assay_transport::store::ArtifactStore;
    let fleet = start_fleet();
    let coordinator = cached_coordinator(&fleet, Some(PROCESS_SANDBOX));
    let worker = worker(&fleet, "worker", "2");
    let repo = pricing_repo(0.0);
    let first = run_proof(&fleet, &repo, "first.json", &["--no-mutation"]);
    assert_eq!(first.code, 0, "{}", first.explain());

    // A submitter holds store credentials: it rewrites the base side's entries, claiming a
    // faster run: unsigned, signed with a key of its own, the coordinator's genuine entry of a
    // candidate job (the discount test passing) copied over a base job's key, or keeping the
    // coordinator's signature of the result as it was.
    let store = fleet_store(&fleet);
    let other_key = fleet.dir().join("submitter.key");
    std::fs::write(&other_key, [0x42u8; 32]).unwrap();
    let other_key = SigningKey::from_file(&other_key).unwrap();
    let sides = served_by_side(&first);
    let entries = cache_entries(&fleet).await;
    let genuine_candidate = entries
        .iter()
        .find(|e| sides[e.result.index as usize].0 == "candidate")
        .unwrap()
        .clone();
    let mut forged = Vec::new();
    for mut entry in entries {
        if sides[entry.result.index as usize].0 != "base" {
            continue;
        }
        let key = format!("{}/{}.json", assay_engine::result_cache::PREFIX, entry.key);
        let index = entry.result.index as usize;
        entry.result.duration_ms = 1;
        let written = match forged.len() % 4 {
            0 => {
                entry.signature = None;
                entry
            }
            1 => {
                entry.signature = Some(other_key.sign(&entry));
                entry
            }
            2 => genuine_candidate.clone(),
            // The coordinator's own signature, over the result as it was.
            _ => entry,
        };
        let json = serde_json::to_vec(&written).unwrap();
        store
            .put_bytes("cache-entry", &key, json.into())
            .await
            .unwrap();
        forged.push(index);
    }
    let base_jobs = sides.iter().filter(|(side, _)| side == "base").count();
    assert!(base_jobs >= 4, "each forgery once at least: {sides:?}");
    assert_eq!(forged.len(), base_jobs, "every base entry: {sides:?}");

    let before = jobs_run(&worker);
    let second = run_proof(&fleet, &repo, "second.json", &["--no-mutation"]);
    assert_eq!(second.code, 0, "{}", second.explain());
    let jobs = served_by_side(&second);
    for (index, (side, served)) in jobs.iter().enumerate() {
        assert_eq!(
            *served,
            !forged.contains(&index),
            "job {index} ({side}): {jobs:?}"
        );
    }
    assert_eq!(
        jobs_run(&worker) - before,
        forged.len() as u64,
        "the forged jobs ran"
    );
    let log = coordinator.log();
    assert!(
        log.contains("not signed by this fleet's coordinator"),
        "{log}"
    );
    assert!(
        log.contains("does not verify under this fleet's key"),
        "{log}"
    );
    assert!(log.contains("the entry names another key"), "{log}");
    let evidence = |run: &Run| run.evidence.clone().unwrap();
    assert_eq!(evidence(&second)["criteria"], evidence(&first)["criteria"]);
    for index in forged {
        let job = &evidence(&second)["jobs"][index];
        assert_ne!(job["duration_s"], serde_json::json!(0.001), "{job}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_declared_sandbox_the_fleet_caches_nothing_and_says_why() {
    let fleet = start_fleet();
    let coordinator = cached_coordinator(&fleet, None);
    let log = coordinator.log();
    assert!(
        log.contains("result cache off: no [cache] sandbox is declared"),
        "{log}"
    );
    let worker = worker(&fleet, "worker", "2");
    let repo = pricing_repo(0.0);
    let mut planned = 0;
    for name in ["first", "second"] {
        let run = run_proof(&fleet, &repo, &format!("{name}.json"), &["--no-mutation"]);
        assert_eq!(run.code, 0, "{}", run.explain());
        let jobs = none_served_from_the_cache(&run);
        planned += jobs.len() as u64;
    }
    assert!(cache_entries(&fleet).await.is_empty());
    assert_eq!(jobs_run(&worker), planned, "both proofs ran every job");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_from_a_sandbox_other_than_the_declared_one_is_not_cached() {
    let fleet = start_fleet();
    // Declared: docker containers of a pinned image; the worker runs the process sandbox.
    let docker = "kind = \"docker\"\n[cache.sandbox.container]\nimage = \"assay-runner-python:latest\"\nimage_id = \"sha256:5c1d0b7e\"\nrepo_digests = []\nmemory_mb = 2048\ncpus = 1.0\npids = 512\nnetwork = \"none\"";
    let coordinator = cached_coordinator(&fleet, Some(docker));
    assert!(
        coordinator.log().contains("result cache on"),
        "{}",
        coordinator.log()
    );
    let _worker = worker(&fleet, "worker", "2");
    let repo = pricing_repo(0.0);
    let run = run_proof(&fleet, &repo, "proof.json", &["--no-mutation"]);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert!(cache_entries(&fleet).await.is_empty());
    let log = coordinator.log();
    assert!(
        log.contains(
            "not caching a result whose worker's sandbox is not the declared [cache] sandbox"
        ),
        "{log}"
    );
}

/// The bin directory of the Rust toolchain `rustc` runs from: a process-sandbox worker puts it
/// first on its `PATH`, because rustup's proxies need `RUSTUP_HOME`, which a job never gets.
fn rust_toolchain_bin() -> PathBuf {
    let output = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .expect("rustc runs");
    assert!(output.status.success(), "rustc --print sysroot failed");
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()).join("bin")
}

/// A Rust proof on a fleet: the CLI plans it (the portable `cargo test`, since the workers'
/// tools are not the CLI's), a process-sandbox worker builds the workspace in each job's own
/// tree and libtest's output proves the fix; the mutation check builds once and fans out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cargo_proof_runs_on_a_fleet_with_the_process_sandbox() {
    let fleet = start_fleet();
    let _coordinator = coordinator(&fleet);
    let path = std::env::join_paths(std::iter::once(rust_toolchain_bin()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("a PATH");
    let _worker = worker_with(
        &fleet,
        "worker-rust",
        "2",
        &[("PATH", path.to_string_lossy().into_owned())],
    );
    let repo = support::cargo_pager_repo("    items.div_ceil(per)\n");
    let run = run_fleet_proof_against_main_parent(
        &fleet,
        &repo,
        &[
            "--criterion",
            "test: partial_page_is_a_page",
            "--criterion",
            "guard: counts_pages",
            "--repeats",
            "2",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.explain());
    let evidence = run.evidence.as_ref().expect("evidence");
    assert_eq!(evidence["runner"], "cargo");
    // The mutation check built its mutants once on the coordinator's word (the schema's files
    // as the submitter sent them), and each mutant ran the prebuilt proving tests on a worker.
    let check = &evidence["mutation_check"];
    let mutants = check["mutants"].as_array().expect("mutants").len();
    assert!(mutants >= 2, "{check:#}");
    assert!(
        check["notes"].to_string().contains(&format!(
            "mutant schemata: {mutants} of {mutants} mutants ran from one build (1 build,"
        )),
        "{check:#}"
    );
    assert_eq!(check["killed"].as_u64(), Some(mutants as u64), "{check:#}");
    assert_eq!(run.verdict_of("C1"), "proven");
    assert_eq!(run.verdict_of("C2"), "proven");
    let commands: Vec<String> = evidence["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|job| job["command"].to_string())
        .collect();
    assert!(
        commands
            .iter()
            .all(|c| c.contains("\"test\"") && c.contains("--message-format=json")),
        "{commands:?}"
    );
}

/// The run ended 0 with its first criterion proven.
fn assert_c1_proven(run: &Run) {
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.verdict_of("C1"), "proven", "{}", run.explain());
}

/// The `kind` dependency archives the fleet's store holds: each key with when it was written.
async fn dependency_archives(fleet: &ClusterSandbox, kind: DependencyKind) -> Vec<(String, i64)> {
    use assay_transport::store::ArtifactStore;
    let mut archives: Vec<(String, i64)> = fleet_store(fleet)
        .list(&kind.key_prefix())
        .await
        .unwrap()
        .into_iter()
        .map(|object| (object.key, object.modified_secs))
        .collect();
    archives.sort();
    archives
}

/// A process-sandbox worker `worker-rust` whose `CARGO_HOME` is an empty directory, returned
/// with it.
fn worker_with_an_empty_cargo_home(fleet: &ClusterSandbox) -> (FleetProcess, PathBuf) {
    let empty_cargo_home = fleet.dir().join("empty-cargo-home");
    std::fs::create_dir_all(&empty_cargo_home).unwrap();
    let worker = worker_with(
        fleet,
        "worker-rust",
        "2",
        &[(
            "CARGO_HOME",
            empty_cargo_home.to_string_lossy().into_owned(),
        )],
    );
    (worker, empty_cargo_home)
}

/// A real release pair whose dependencies move (lru 0.12.4 -> 0.12.5, hashbrown 0.14 -> 0.15,
/// no lockfile shipped) proved on a fleet whose process-sandbox worker has the machine's own
/// `PATH` and a cargo home with nothing in it: what the submitter pinned travels as one archive
/// per lockfile through the store, written once for two proofs of the same lockfiles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_release_pair_is_proven_on_a_fleet_whose_worker_has_no_cargo_cache() {
    let fleet = start_fleet();
    let _coordinator = coordinator(&fleet);
    let (_worker, empty_cargo_home) = worker_with_an_empty_cargo_home(&fleet);
    let (_crates, repo) = support::lru_release_pair();
    let prove = |name: &str| {
        run_fleet_proof(
            &fleet,
            &repo,
            name,
            &support::one_uncached_run_against_the_parent("guard: tests::test_with_hasher"),
        )
    };
    let first = prove("first.json");
    assert_c1_proven(&first);
    let stored = dependency_archives(&fleet, DependencyKind::Cargo).await;
    // Each side pinned its own hashbrown: two lockfiles, two archives.
    assert_eq!(stored.len(), 2, "{stored:?}");
    let second = prove("second.json");
    assert_c1_proven(&second);
    assert_eq!(
        dependency_archives(&fleet, DependencyKind::Cargo).await,
        stored,
        "written again"
    );
    // The worker unpacked each once, and nothing came into its own cargo home.
    let unpacked = std::fs::read_dir(fleet.dir().join("worker-rust-trees/dependencies"))
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| !name.starts_with('.'))
        .count();
    assert_eq!(unpacked, 2);
    assert_eq!(std::fs::read_dir(&empty_cargo_home).unwrap().count(), 0);
}

/// A crate whose dependency is a git repository (a local one, `file://`) proved on a fleet whose
/// worker has an empty cargo home: the repository's package travels vendored in the archive,
/// and the job's configuration replaces that git source with it as it does the registry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_dependency_travels_in_the_archive_to_a_worker_without_a_cargo_cache() {
    let fleet = start_fleet();
    let _coordinator = coordinator(&fleet);
    let (_worker, empty_cargo_home) = worker_with_an_empty_cargo_home(&fleet);
    let helper = Repo::new();
    helper
        .write(
            "Cargo.toml",
            "[package]\nname = \"helper\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        )
        .write(
            "src/lib.rs",
            "pub fn double(x: u32) -> u32 {\n    x * 2\n}\n",
        );
    helper.commit("helper");
    let user = |body: &str| {
        format!(
            "pub fn quadruple(x: u32) -> u32 {{\n    {body}\n}}\n\n#[cfg(test)]\nmod tests {{\n    #[test]\n    fn test_quadruple() {{\n        assert_eq!(super::quadruple(3), 12);\n    }}\n}}\n"
        )
    };
    let repo = Repo::new();
    repo.write(
        "Cargo.toml",
        &format!(
            "[package]\nname = \"user\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nhelper = {{ git = \"file://{}\", branch = \"main\" }}\n",
            helper.path().display()
        ),
    )
    .write(".gitignore", "target\n")
    .write("src/lib.rs", &user("helper::double(helper::double(x))"));
    repo.commit("user");
    repo.write("src/lib.rs", &user("helper::double(x) * 2"));
    repo.commit("user: one call");
    let run = run_fleet_proof(
        &fleet,
        &repo,
        "proof.json",
        &support::one_uncached_run_against_the_parent("guard: tests::test_quadruple"),
    );
    assert_c1_proven(&run);
    // Both sides lock the same packages: one lockfile, one archive, the git package in it.
    let stored = dependency_archives(&fleet, DependencyKind::Cargo).await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(std::fs::read_dir(&empty_cargo_home).unwrap().count(), 0);
}

/// A Go module requiring `example.com/greet` (from the module proxy in a directory that
/// [`support::go_module_proxy`] writes), whose greeting is fixed by its second commit; its
/// `go.sum` and the submitting host's module cache `host_cache` are filled as `go mod download`
/// fills them.
fn go_greeting_repo(dir: &Path, host_cache: &Path) -> Repo {
    let proxy = dir.join("proxy");
    support::go_module_proxy(&proxy);
    let repo = Repo::new();
    let greeting = |name: &str| {
        format!(
            "package app\n\nimport \"example.com/greet\"\n\nfunc Greeting() string {{ return greet.Hello(\"{name}\") }}\n"
        )
    };
    repo.write(
        "go.mod",
        "module example.com/app\n\ngo 1.19\n\nrequire example.com/greet v1.0.0\n",
    )
    .write("app.go", &greeting("World"))
    .write(
        "app_test.go",
        "package app\n\nimport \"testing\"\n\nfunc TestGreeting(t *testing.T) {\n\tif Greeting() != \"hello, world\" {\n\t\tt.Fatal(Greeting())\n\t}\n}\n",
    );
    support::download_greet_module(&repo, &proxy, host_cache);
    repo.commit("app: greeting");
    repo.write("app.go", &greeting("world"));
    repo.commit("app: lower case");
    repo
}

/// `assay prove --cluster` of the Go module `repo`, with the submitting host's module cache
/// `host_cache` and no proxy to reach.
fn prove_go(fleet: &ClusterSandbox, repo: &Repo, host_cache: &Path, name: &str) -> Run {
    let json = fleet.dir().join(name);
    let mut command = fleet_prove(
        fleet,
        repo,
        &support::one_uncached_run_against_the_parent("test: TestGreeting"),
        &json,
    );
    command
        .env("GOMODCACHE", host_cache)
        .env("GOPROXY", "off")
        .env("GOSUMDB", "off");
    support::run(command, Some(json))
}

/// A Go module whose dependency is in the submitting host's module cache, proved on a fleet
/// whose process-sandbox worker has an empty module cache and `GOPATH`: the module cache
/// entries its `go.sum` needs travel as one archive, stored once for two proofs, and the job
/// reads them with no proxy and nothing of the worker's own cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_module_is_proven_on_a_fleet_whose_worker_has_no_module_cache() {
    let fleet = start_fleet();
    let _coordinator = coordinator(&fleet);
    let empty_cache = fleet.dir().join("empty-modcache");
    let empty_gopath = fleet.dir().join("empty-gopath");
    std::fs::create_dir_all(&empty_cache).unwrap();
    std::fs::create_dir_all(&empty_gopath).unwrap();
    let _worker = worker_with(
        &fleet,
        "worker-go",
        "2",
        &[
            ("GOMODCACHE", empty_cache.to_string_lossy().into_owned()),
            ("GOPATH", empty_gopath.to_string_lossy().into_owned()),
        ],
    );
    let host_cache = fleet.dir().join("host-modcache");
    let repo = go_greeting_repo(fleet.dir(), &host_cache);
    let first = prove_go(&fleet, &repo, &host_cache, "first.json");
    assert_c1_proven(&first);
    // Both sides share one go.sum: one archive.
    let stored = dependency_archives(&fleet, DependencyKind::Go).await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    let second = prove_go(&fleet, &repo, &host_cache, "second.json");
    assert_c1_proven(&second);
    assert_eq!(
        dependency_archives(&fleet, DependencyKind::Go).await,
        stored,
        "written again"
    );
    // The worker unpacked it once, extracted modules and all, and its own cache stayed empty.
    let unpacked: Vec<PathBuf> =
        std::fs::read_dir(fleet.dir().join("worker-go-trees/dependencies"))
            .unwrap()
            .filter_map(|entry| entry.ok())
            .filter(|entry| entry.file_name().to_string_lossy().starts_with("go-"))
            .map(|entry| entry.path())
            .collect();
    assert_eq!(unpacked.len(), 1, "{unpacked:?}");
    assert!(
        unpacked[0]
            .join("example.com/greet@v1.0.0/greet.go")
            .is_file()
    );
    assert!(
        unpacked[0]
            .join("cache/download/example.com/greet/@v/v1.0.0.mod")
            .is_file()
    );
    assert_eq!(std::fs::read_dir(&empty_cache).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(&empty_gopath).unwrap().count(), 0);
}

/// What a Go module's archive cannot be made of, the submitter refuses before any job: a
/// `replace` by a directory of the submitting host (an absolute path, or one climbing out of
/// the tree), whose files would otherwise be read there, and requirements with no `go.sum`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_module_replaced_from_the_host_or_without_go_sum_is_refused_on_a_fleet() {
    let fleet = start_fleet();
    let _coordinator = coordinator(&fleet);
    let _worker = worker(&fleet, "worker-go", "1");
    let host_cache = fleet.dir().join("host-modcache");
    // A module on the host that the replacement names: a real one, so only the refusal stops it.
    let outside = fleet.dir().join("greet-on-the-host");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(
        outside.join("go.mod"),
        "module example.com/greet\n\ngo 1.19\n",
    )
    .unwrap();
    std::fs::write(
        outside.join("greet.go"),
        "package greet\n\nfunc Hello(name string) string { return \"hello, \" + name }\n",
    )
    .unwrap();
    for replacement in [
        outside.display().to_string(),
        "../greet-on-the-host".into(),
        "./greet-link".into(),
    ] {
        let repo = go_greeting_repo(fleet.dir(), &host_cache);
        // A link in the tree, leading out of it.
        std::os::unix::fs::symlink(&outside, repo.path().join("greet-link")).unwrap();
        let go_mod = std::fs::read_to_string(repo.path().join("go.mod")).unwrap();
        repo.write(
            "go.mod",
            &format!("{go_mod}\nreplace example.com/greet => {replacement}\n"),
        );
        repo.commit("app: greet from the host");
        let run = prove_go(&fleet, &repo, &host_cache, "replaced.json");
        assert_ne!(run.code, 0, "{}", run.explain());
        assert!(
            run.stderr.contains(&format!(
                "replaces example.com/greet with the directory {replacement}, outside the tree"
            )),
            "{}",
            run.stderr
        );
    }
    let repo = go_greeting_repo(fleet.dir(), &host_cache);
    repo.remove("go.sum");
    repo.commit("app: no go.sum");
    let run = prove_go(&fleet, &repo, &host_cache, "unsummed.json");
    assert_ne!(run.code, 0, "{}", run.explain());
    assert!(
        run.stderr
            .contains("requires modules but the tree has no go.sum"),
        "{}",
        run.stderr
    );
    assert!(
        dependency_archives(&fleet, DependencyKind::Go)
            .await
            .is_empty()
    );
}

/// A node proof's diff coverage on a fleet: the coordinator plans the V8 coverage run as the
/// CLI would, a worker runs it, and the coordinator reads V8's ranges against the changed
/// files' text the submission carries (it has no repository): the same hunks as embedded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_proofs_diff_coverage_is_measured_on_a_fleet() {
    let fleet = start_fleet();
    let _coordinator = coordinator(&fleet);
    let _worker = worker(&fleet, "worker-node", "2");
    let repo = support::node_pager_change();
    let run = run_fleet_proof_against_main_parent(
        &fleet,
        &repo,
        &[
            "--no-mutation",
            "--criterion",
            "test: test_partial_last_page_is_counted",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.explain());
    let coverage = &run.evidence.as_ref().expect("evidence")["diff_coverage"];
    assert_eq!(coverage["tool"], "node V8 coverage", "{coverage:#}");
    let statuses: Vec<(String, u64, String)> = support::coverage_hunks(coverage)
        .into_iter()
        .map(|(path, start, status, _)| (path, start, status))
        .collect();
    let expected: Vec<(String, u64, String)> = [
        ("lib/pager.js", 4, "executed"),
        ("lib/pager.js", 8, "not_executed"),
        ("lib/range.mjs", 2, "executed"),
        ("lib/range.mjs", 6, "not_executed"),
    ]
    .iter()
    .map(|(p, s, st)| ((*p).to_owned(), *s, (*st).to_owned()))
    .collect();
    assert_eq!(statuses, expected, "{coverage:#}");
    assert_eq!(
        coverage["unmeasured_files"],
        serde_json::json!(["lib/export.js"]),
        "{coverage:#}"
    );
}

/// The `life-*` directories on a worker's default scratch root (`$TMPDIR/assay-worker`).
fn scratch_lives(worker: &FleetProcess) -> Vec<PathBuf> {
    let root = worker.temp_dir().join("assay-worker");
    let mut lives: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    lives.retain(|p| {
        p.is_dir()
            && p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("life-"))
    });
    lives
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_job_has_its_scratch_swept_when_it_starts_again() {
    let fleet = start_fleet();
    let _coordinator = coordinator(&fleet);
    let mut worker = worker(&fleet, "worker-a", "1");
    let repo = pricing_repo(3.0);
    let json = fleet.dir().join("proof.json");
    let mut proving = prove(&fleet, &repo, &json, &["--repeats", "1", "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_a_running_job(&fleet).await;
    let lives = scratch_lives(&worker);
    assert_eq!(lives.len(), 1, "{lives:?}");
    let killed_life = lives[0].clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_dir(&killed_life).map_or(0, |d| d.count()) == 0 {
        assert!(Instant::now() < deadline, "the running job made no scratch");
        std::thread::sleep(Duration::from_millis(20));
    }

    // SIGKILL: nothing of the worker runs its clean-up.
    worker.kill();
    assert!(killed_life.exists());
    worker.restart();
    assert!(
        !killed_life.exists(),
        "the killed worker's scratch is still there: {:?}",
        std::fs::read_dir(&killed_life).map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
    );
    assert!(
        worker
            .log()
            .contains("removed the scratch of workers that ended without cleaning up"),
        "{}",
        worker.log()
    );
    let lives = scratch_lives(&worker);
    assert_eq!(lives.len(), 1, "only the new life's: {lives:?}");

    // The job the kill interrupted is delivered again, and the proof ends as it should.
    let status = tokio::task::spawn_blocking(move || proving.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "the proof after the worker's restart"
    );
    let evidence: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(evidence["verdict"], "proven", "{evidence:#}");

    // A clean end (SIGTERM) removes the worker's own life.
    let new_life = lives[0].clone();
    assert_eq!(worker.terminate(), Some(0));
    assert!(!new_life.exists(), "a clean end leaves its scratch behind");
}
