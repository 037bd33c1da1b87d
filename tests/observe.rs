//! Observability of a real fleet (`ClusterSandbox`): `assay coordinator` and `assay worker`
//! processes on a real JetStream server and S3-protocol server, a proof submitted with `assay prove --cluster`.
//! Traces go to an OTLP/HTTP receiver in this test; metrics and probes are scraped over HTTP.

use crate::support;

use assay_test_support::cluster::{ClusterSandbox, FleetProcess, StoreKind};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use prost::Message as _;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::servers::{http_get_with_status, s3_env, wait_for_port};
use support::{Repo, pytest_pager_repo};

/// OTLP/HTTP receiver: keeps every request body posted to `/v1/traces`.
struct Collector {
    port: u16,
    bodies: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Collector {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the collector");
        let port = listener.local_addr().expect("address").port();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let kept = bodies.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let kept = kept.clone();
                std::thread::spawn(move || serve_otlp(stream, &kept));
            }
        });
        Self { port, bodies }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn spans(&self) -> Vec<Span> {
        let mut spans = Vec::new();
        for body in self.bodies.lock().expect("bodies").iter() {
            let request = ExportTraceServiceRequest::decode(body.as_slice())
                .expect("an OTLP protobuf trace export");
            for resource in request.resource_spans {
                let service = resource
                    .resource
                    .as_ref()
                    .and_then(|r| string_attribute(&r.attributes, "service.name"))
                    .unwrap_or_default();
                for scope in resource.scope_spans {
                    for span in scope.spans {
                        spans.push(Span {
                            service: service.clone(),
                            name: span.name.clone(),
                            trace_id: hex(&span.trace_id),
                            span_id: hex(&span.span_id),
                            parent_id: hex(&span.parent_span_id),
                            proof_id: string_attribute(&span.attributes, "proof_id"),
                            worker_id: string_attribute(&span.attributes, "worker_id"),
                        });
                    }
                }
            }
        }
        spans
    }
}

/// One keep-alive connection: requests until the client closes it.
fn serve_otlp(stream: TcpStream, kept: &Mutex<Vec<Vec<u8>>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().expect("content-length");
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).expect("request body");
        let status = if request_line.starts_with("POST /v1/traces ") {
            kept.lock().expect("bodies").push(body);
            "200 OK"
        } else {
            "404 Not Found"
        };
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n"
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

#[derive(Clone, Debug)]
struct Span {
    service: String,
    name: String,
    trace_id: String,
    span_id: String,
    parent_id: String,
    proof_id: Option<String>,
    worker_id: Option<String>,
}

fn string_attribute(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| match &v.value {
            Some(any_value::Value::StringValue(s)) => Some(s.clone()),
            _ => None,
        })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `GET path` on 127.0.0.1:port: status code and body.
fn http_get(port: u16, path: &str) -> (u16, String) {
    http_get_with_status(port, path)
        .unwrap_or_else(|| panic!("no answer from 127.0.0.1:{port}{path}"))
}

fn wait_for_status(port: u16, path: &str, want: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = http_get(port, path);
        if status == want {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "{path} on {port} stayed {status}: {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The fleet (`ClusterSandbox`: nats-server, an S3 server), the two services and the proof's
/// repository.
struct Fleet {
    repo: Repo,
    coordinator: Option<FleetProcess>,
    worker: Option<FleetProcess>,
    coordinator_port: u16,
    worker_port: u16,
    sandbox: ClusterSandbox,
}

impl Fleet {
    /// Starts everything; `otlp` is the collector the services export to, if any.
    fn start(otlp: Option<&Collector>) -> Self {
        let sandbox = ClusterSandbox::start(StoreKind::S3);
        let repo = pytest_pager_repo();
        support::commit_pager_fix(&repo);
        let mut otel: Vec<(String, String)> = Vec::new();
        if let Some(collector) = otlp {
            otel.push(("OTEL_EXPORTER_OTLP_ENDPOINT".into(), collector.endpoint()));
            otel.push(("OTEL_BSP_SCHEDULE_DELAY".into(), "100".into()));
        }
        let coordinator = service(&sandbox, "coordinator", &otel);
        otel.push(("OTEL_SERVICE_NAME".into(), "pager-ci-worker".into()));
        let worker = service(&sandbox, "worker", &otel);
        let (coordinator_port, worker_port) = (coordinator.http_port(), worker.http_port());
        wait_for_port(coordinator_port, "assay coordinator");
        wait_for_port(worker_port, "assay worker");
        wait_for_status(coordinator_port, "/readyz", 200);
        wait_for_status(worker_port, "/readyz", 200);
        Self {
            repo,
            coordinator: Some(coordinator),
            worker: Some(worker),
            coordinator_port,
            worker_port,
            sandbox,
        }
    }

    /// `assay prove --cluster` on the pager fix; returns the evidence.
    fn prove(&self, extra: &[&str]) -> serde_json::Value {
        let json = self.sandbox.dir().join("proof.json");
        let child = support::assay()
            .arg("prove")
            .arg("-C")
            .arg(self.repo.path())
            .args(["--base", "main~1", "--candidate", "main"])
            .args(["--criterion", "test: test_partial_last_page_is_counted"])
            .args(["--criterion", "guard: test_full_pages"])
            .args(["--cluster", &self.sandbox.nats_url()])
            .args(["--store", &self.sandbox.store_url()])
            // The proof's own jobs are what these tests count; mutants would add their own.
            .arg("--no-mutation")
            .arg("--json")
            .arg(&json)
            .args(extra)
            .envs(self.sandbox.s3_port().map(s3_env).unwrap_or_default())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("assay prove starts");
        let output = wait_with_deadline(child, Duration::from_secs(180));
        assert_eq!(
            output.status.code(),
            Some(0),
            "stdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let evidence: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&json).expect("evidence written"))
                .expect("evidence is JSON");
        assert_eq!(evidence["verdict"], "proven", "{evidence:#}");
        evidence
    }
}

/// `assay {kind}` on `sandbox`'s fleet in the process sandbox, with `extra` in its environment
/// and its scratch and tree cache under a directory of its own.
fn service(sandbox: &ClusterSandbox, kind: &str, extra: &[(String, String)]) -> FleetProcess {
    let scratch = sandbox.dir().join(kind);
    std::fs::create_dir_all(&scratch).expect("scratch dir");
    sandbox
        .process(Path::new(env!("CARGO_BIN_EXE_assay")), kind, &[kind])
        .env(
            "ASSAY_CACHE_KEY_FILE",
            support::cache_key_file().display().to_string(),
        )
        .env("ASSAY_SANDBOX", "process")
        .env(
            "ASSAY_TREE_CACHE_DIR",
            scratch.join("trees").display().to_string(),
        )
        .env("TMPDIR", scratch.display().to_string())
        .envs(extra.iter().cloned())
        .start()
}

fn wait_with_deadline(mut child: Child, limit: Duration) -> std::process::Output {
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("assay prove did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().expect("output")
}

fn jobs(evidence: &serde_json::Value) -> &Vec<serde_json::Value> {
    evidence["jobs"].as_array().expect("jobs")
}

#[test]
fn a_fleet_proof_is_one_trace_from_the_cli_to_the_sandbox() {
    let collector = Collector::start();
    let mut fleet = Fleet::start(Some(&collector));
    // The CLI gets the collector by flag, the services by OTEL_EXPORTER_OTLP_ENDPOINT.
    let evidence = fleet.prove(&["--otlp-endpoint", &collector.endpoint()]);
    let proof_id = evidence["proof_id"].as_str().expect("proof id").to_owned();
    // SIGTERM and a clean exit: the services flush their spans on the way out.
    assert_eq!(fleet.worker.take().expect("worker").terminate(), Some(0));
    assert_eq!(
        fleet.coordinator.take().expect("coordinator").terminate(),
        Some(0)
    );

    let spans = collector.spans();
    let by_id: HashMap<&str, &Span> = spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let ancestors = |span: &Span| -> Vec<String> {
        let mut chain = Vec::new();
        let mut parent = span.parent_id.clone();
        while let Some(next) = by_id.get(parent.as_str()) {
            chain.push(next.span_id.clone());
            parent = next.parent_id.clone();
        }
        chain
    };
    let one = |name: &str, service: &str| -> &Span {
        let found: Vec<&Span> = spans
            .iter()
            .filter(|s| {
                s.name == name && s.service == service && s.proof_id.as_deref() == Some(&proof_id)
            })
            .collect();
        assert_eq!(
            found.len(),
            1,
            "one {name} span from {service} in {spans:#?}"
        );
        found[0]
    };
    let prove = one("prove", "assay-cli");
    let proof = one("proof", "assay-coordinator");
    assert_eq!(proof.trace_id, prove.trace_id);
    assert_eq!(
        proof.parent_id, prove.span_id,
        "the proof continues the CLI's span"
    );

    let job_spans: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "job" && s.proof_id.as_deref() == Some(&proof_id))
        .collect();
    // The proof's own jobs and its diff coverage run, which the fleet runs as a job too.
    assert_eq!(
        evidence["diff_coverage"]["hunks"][0]["status"], "executed",
        "{evidence:#}"
    );
    assert_eq!(
        job_spans.len(),
        jobs(&evidence).len() + 1,
        "a job span per job"
    );
    for job in &job_spans {
        assert_eq!(job.service, "pager-ci-worker");
        assert_eq!(
            job.worker_id.as_deref(),
            jobs(&evidence)[0]["worker"].as_str()
        );
        assert_eq!(
            job.trace_id, prove.trace_id,
            "one trace for the whole proof"
        );
        let chain = ancestors(job);
        assert!(
            chain.contains(&proof.span_id),
            "{job:?} under the coordinator's proof span"
        );
        assert_eq!(
            chain.last(),
            Some(&prove.span_id),
            "{job:?} rooted at the CLI's span"
        );
        let delivery = by_id[job.parent_id.as_str()];
        assert_eq!(delivery.name, "job delivery");
        assert_eq!(
            delivery.parent_id, proof.span_id,
            "jobs carry the proof's context"
        );
    }
    let job_ids: BTreeSet<&str> = job_spans.iter().map(|s| s.span_id.as_str()).collect();
    let sandboxes = spans.iter().filter(|s| s.name == "sandbox").count();
    assert_eq!(sandboxes, job_spans.len(), "a sandbox span per job");
    assert!(
        spans
            .iter()
            .filter(|s| s.name == "sandbox")
            .all(|s| job_ids.contains(s.parent_id.as_str())),
        "each sandbox span is a job's child"
    );
}

/// Prometheus text: series (name with labels) to value.
fn parse_metrics(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let (series, value) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("malformed line {line:?}"));
            let value = value
                .parse()
                .unwrap_or_else(|_| panic!("malformed value in {line:?}"));
            (series.to_owned(), value)
        })
        .collect()
}

/// Checks a histogram's buckets are cumulative up to `+Inf` = `_count`; returns its count.
fn histogram_count(metrics: &BTreeMap<String, f64>, name: &str, labels: &str) -> f64 {
    let prefix = format!(
        "{name}_bucket{{{labels}{}le=\"",
        if labels.is_empty() { "" } else { "," }
    );
    let mut buckets: Vec<(f64, f64)> = metrics
        .iter()
        .filter_map(|(series, value)| {
            let le = series.strip_prefix(&prefix)?.strip_suffix("\"}")?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().expect("le")
            };
            Some((le, *value))
        })
        .collect();
    assert!(buckets.len() > 2, "{name}{{{labels}}} has buckets");
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert!(
        buckets.windows(2).all(|w| w[0].1 <= w[1].1),
        "{name} buckets are cumulative"
    );
    let braces = if labels.is_empty() {
        String::new()
    } else {
        format!("{{{labels}}}")
    };
    let count = metrics[&format!("{name}_count{braces}")];
    assert_eq!(buckets.last().map(|b| b.0), Some(f64::INFINITY));
    assert_eq!(
        buckets.last().map(|b| b.1),
        Some(count),
        "+Inf bucket = count"
    );
    assert!(metrics.contains_key(&format!("{name}_sum{braces}")));
    count
}

/// A store URL naming a bucket S3 does not have answers every read "not found", as a missing
/// object does: `/readyz` tells the two apart, and names the bucket.
#[test]
fn a_service_whose_bucket_does_not_exist_is_not_ready_and_names_the_bucket() {
    let sandbox = ClusterSandbox::start(StoreKind::S3);
    let worker = service(
        &sandbox,
        "worker",
        &[("ASSAY_STORE".into(), "s3://no-such-bucket".into())],
    );
    let coordinator = service(&sandbox, "coordinator", &[]);
    wait_for_port(worker.http_port(), "assay worker");
    wait_for_port(coordinator.http_port(), "assay coordinator");
    let body = wait_for_status(worker.http_port(), "/readyz", 503);
    assert!(
        body.contains("store: bucket no-such-bucket does not exist"),
        "{body}"
    );
    let metrics = parse_metrics(&http_get(worker.http_port(), "/metrics").1);
    assert_eq!(metrics["assay_store_reachable"], 0.0);
    // The fleet's own bucket holds no probe object either: that is a reachable store.
    let body = wait_for_status(coordinator.http_port(), "/readyz", 200);
    assert!(body.contains("store: reachable"), "{body}");
}

#[test]
fn a_workers_metrics_count_its_jobs_and_its_probes_follow_nats_and_the_store() {
    let mut fleet = Fleet::start(None);
    let before = parse_metrics(&http_get(fleet.worker_port, "/metrics").1);
    assert_eq!(
        before["assay_job_outcomes_total{lane=\"guest\",status=\"completed\"}"],
        0.0
    );
    let evidence = fleet.prove(&[]);
    let jobs = jobs(&evidence);
    let (status, text) = http_get(fleet.worker_port, "/metrics");
    assert_eq!(status, 200);
    let metrics = parse_metrics(&text);

    let mut by_kind = 0.0;
    for kind in ["targeted", "suite", "stability", "mutant"] {
        by_kind += histogram_count(
            &metrics,
            "assay_job_duration_seconds",
            &format!("kind=\"{kind}\""),
        );
    }
    // What the worker ran: the proof's own jobs and its diff coverage run.
    assert!(evidence.get("diff_coverage").is_some(), "{evidence:#}");
    let runs = jobs.len() as f64 + 1.0;
    assert_eq!(by_kind, runs, "every job timed once, by kind");
    assert!(histogram_count(&metrics, "assay_job_duration_seconds", "kind=\"targeted\"") >= 2.0);
    assert_eq!(
        histogram_count(&metrics, "assay_container_start_seconds", ""),
        0.0,
        "process sandbox"
    );
    assert_eq!(
        metrics["assay_job_outcomes_total{lane=\"guest\",status=\"completed\"}"],
        runs
    );
    assert_eq!(
        metrics["assay_job_outcomes_total{lane=\"infrastructure\",status=\"infrastructure\"}"],
        0.0
    );
    let trees: BTreeSet<&str> = jobs.iter().filter_map(|j| j["tree"].as_str()).collect();
    assert_eq!(
        metrics["assay_tree_cache_misses_total"],
        trees.len() as f64,
        "each tree fetched once"
    );
    assert_eq!(
        metrics["assay_tree_cache_hits_total"] + metrics["assay_tree_cache_misses_total"],
        runs
    );
    assert_eq!(metrics["assay_jobs_in_flight"], 0.0);
    assert_eq!(metrics["assay_job_redeliveries_total"], 0.0);
    assert_eq!(metrics["assay_queue_depth"], 0.0);
    assert_eq!(metrics["assay_nats_connected"], 1.0);
    assert_eq!(metrics["assay_store_reachable"], 1.0);
    let coordinator = parse_metrics(&http_get(fleet.coordinator_port, "/metrics").1);
    assert_eq!(coordinator["assay_results_applied_total"], runs);

    // The store goes away: not ready, but alive.
    fleet.sandbox.kill_store();
    let body = wait_for_status(fleet.worker_port, "/readyz", 503);
    assert!(body.contains("store: unreachable"), "{body}");
    let (status, body) = http_get(fleet.worker_port, "/healthz");
    assert_eq!(status, 200);
    assert!(body.contains("nats: connected"), "{body}");
    // NATS goes away too.
    fleet.sandbox.kill_nats();
    let body = wait_for_status(fleet.coordinator_port, "/healthz", 200);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut body = body;
    while !body.contains("nats: not connected") {
        assert!(Instant::now() < deadline, "NATS loss never showed: {body}");
        std::thread::sleep(Duration::from_millis(100));
        body = http_get(fleet.coordinator_port, "/healthz").1;
    }
    let metrics = parse_metrics(&http_get(fleet.worker_port, "/metrics").1);
    assert_eq!(metrics["assay_nats_connected"], 0.0);
    assert!(
        !metrics.contains_key("assay_queue_depth"),
        "no stale queue depth without NATS"
    );
}
