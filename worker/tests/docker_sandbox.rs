//! The Docker sandbox against the real engine and the runner image built by
//! `deploy/build-images.sh`, plus one table of cases run through both sandboxes to show they
//! agree. Without the image these tests skip loudly, unless `ASSAY_REQUIRE_DOCKER` is set (CI),
//! in which case they fail.

use assay_common::outcome::Outcome;
use assay_worker::sandbox::docker::{DockerConfig, DockerSandbox, DockerSetupError};
use assay_worker::sandbox::process::ProcessSandbox;
use assay_worker::sandbox::{Sandbox, SandboxError, SandboxExit, SandboxRun, clean_env};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use assay_test_support::docker;

use docker::docker_sandbox;

fn small_limits() -> DockerConfig {
    DockerConfig {
        memory_mb: 256,
        cpus: 1.0,
        pids: 64,
        ..DockerConfig::default()
    }
}

/// A job's directories laid out the way the worker lays them out: a tree and a scratch dir.
struct Job {
    _root: tempfile::TempDir,
    tree: PathBuf,
    scratch: PathBuf,
    proof_id: String,
    job_id: String,
}

impl Job {
    fn new(name: &str) -> Job {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let root = tempfile::tempdir().expect("temp dir");
        let tree = root.path().join("tree");
        let scratch = root.path().join("scratch");
        std::fs::create_dir_all(&tree).expect("tree dir");
        std::fs::create_dir_all(&scratch).expect("scratch dir");
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        Job {
            _root: root,
            tree,
            scratch,
            proof_id: format!("proof-{}", std::process::id()),
            job_id: format!("{name}-{}-{seq}", std::process::id()),
        }
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.tree.join(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
        std::fs::write(path, text).expect("write tree file");
    }

    fn run(&self, command: &[&str], timeout: Duration) -> SandboxRun {
        SandboxRun {
            proof_id: self.proof_id.clone(),
            job_id: self.job_id.clone(),
            tree_dir: self.tree.clone(),
            scratch_dir: self.scratch.clone(),
            proof_dir: self._root.path().to_path_buf(),
            command: command
                .iter()
                .map(|arg| {
                    arg.replace(
                        "{report}",
                        &self.scratch.join("report.xml").to_string_lossy(),
                    )
                })
                .collect(),
            env: clean_env(&[]),
            stdout_path: self.scratch.join("stdout"),
            stderr_path: self.scratch.join("stderr"),
            timeout,
            forked_timeout: None,
            network: false,
            vendored: None,
        }
    }

    fn stdout(&self) -> String {
        std::fs::read_to_string(self.scratch.join("stdout")).expect("stdout file")
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.scratch.join("stderr")).expect("stderr file")
    }
}

fn containers_labelled(label: &str, value: &str) -> Vec<String> {
    docker::containers_labelled(&format!("{label}={value}"))
}

fn assert_no_container_left(job: &Job) {
    let left = containers_labelled("assay.job_id", &job.job_id);
    assert!(
        left.is_empty(),
        "containers left for job {}: {left:?}",
        job.job_id
    );
}

const INVOICE: &str = "\
def total(lines):
    return sum(quantity * price for quantity, price in lines)
";

const INVOICE_TESTS: &str = "\
from invoice import total

def test_total_of_no_lines_is_zero():
    assert total([]) == 0

def test_total_sums_quantity_times_price():
    assert total([(2, 5), (1, 3)]) == 13

def test_total_applies_discount():
    assert total([(1, 100)]) == 90
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pytest_project_runs_and_its_junit_report_is_readable() {
    let Some(sandbox) = docker_sandbox("worker-pytest", small_limits()).await else {
        return;
    };
    let job = Job::new("pytest");
    job.write("invoice.py", INVOICE);
    job.write("tests/test_invoice.py", INVOICE_TESTS);
    let run = job.run(
        &[
            "python3",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--junitxml={report}",
            "tests",
        ],
        Duration::from_secs(120),
    );
    let exit = sandbox.run(&run).await.expect("sandbox run");
    assert_eq!(
        exit,
        SandboxExit::Exited(1),
        "stdout: {}\nstderr: {}",
        job.stdout(),
        job.stderr()
    );
    assert!(
        job.stdout().contains("1 failed, 2 passed"),
        "stdout: {}",
        job.stdout()
    );
    let report = std::fs::read(job.scratch.join("report.xml")).expect("report written");
    let parsed = assay_common::report::junit::parse(&report);
    let cases = &parsed.parsed().expect("report parses").cases;
    let outcome = |name: &str| {
        cases
            .iter()
            .find(|case| case.name == name)
            .map(|case| case.outcome)
    };
    assert_eq!(
        outcome("test_total_of_no_lines_is_zero"),
        Some(Outcome::Passed)
    );
    assert_eq!(
        outcome("test_total_sums_quantity_times_price"),
        Some(Outcome::Passed)
    );
    assert_eq!(
        outcome("test_total_applies_discount"),
        Some(Outcome::Failed)
    );
    assert_no_container_left(&job);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_and_stderr_are_captured_separately_and_the_exit_code_is_the_guests() {
    let Some(sandbox) = docker_sandbox("worker-streams", small_limits()).await else {
        return;
    };
    let job = Job::new("streams");
    let run = job.run(
        &[
            "sh",
            "-c",
            "echo paging starts; echo page 2 missing >&2; echo paging ends; exit 7",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(
        sandbox.run(&run).await.expect("run"),
        SandboxExit::Exited(7)
    );
    assert_eq!(job.stdout(), "paging starts\npaging ends\n");
    assert_eq!(job.stderr(), "page 2 missing\n");
    assert_no_container_left(&job);
}

const NETWORK_PROBE: &str = "\
import os, socket, sys
interfaces = sorted(os.listdir('/sys/class/net'))
print(' '.join(interfaces))
try:
    socket.create_connection(('192.0.2.10', 80), timeout=3)
    sys.exit(0)
except OSError as error:
    print(type(error).__name__, error.errno)
    sys.exit(3)
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_that_reaches_for_the_network_fails_inside_the_sandbox() {
    let Some(sandbox) = docker_sandbox("worker-network", small_limits()).await else {
        return;
    };
    let job = Job::new("network");
    job.write("probe.py", NETWORK_PROBE);
    let run = job.run(&["python3", "probe.py"], Duration::from_secs(60));
    let started = Instant::now();
    assert_eq!(
        sandbox.run(&run).await.expect("run"),
        SandboxExit::Exited(3)
    );
    let stdout = job.stdout();
    assert!(stdout.starts_with("lo\n"), "only loopback exists: {stdout}");
    // ENETUNREACH at once: there is no route at all, not a slow timeout.
    assert!(stdout.contains(" 101"), "network unreachable: {stdout}");
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_no_container_left(&job);

    // When the plan asks for network, the container gets an interface beyond loopback.
    let job = Job::new("network-allowed");
    job.write(
        "probe.py",
        "import os; print(' '.join(sorted(os.listdir('/sys/class/net'))))",
    );
    let mut run = job.run(&["python3", "probe.py"], Duration::from_secs(60));
    run.network = true;
    assert_eq!(
        sandbox.run(&run).await.expect("run"),
        SandboxExit::Exited(0)
    );
    assert!(job.stdout().contains("eth0"), "stdout: {}", job.stdout());
    assert_no_container_left(&job);
}

const CONFINEMENT_PROBE: &str = "\
import errno, os, sys
def can_write(path):
    try:
        with open(path, 'w') as f:
            f.write('cached invoice')
        return 'ok'
    except OSError as error:
        return errno.errorcode[error.errno]
status = dict(line.split(':\\t', 1) for line in open('/proc/self/status').read().splitlines() if ':\\t' in line)
print('root', can_write('/etc/invoice-cache'))
print('usr', can_write('/usr/lib/python3/invoice.py'))
print('tmp', can_write('/tmp/invoice-cache'))
print('tree', can_write('invoice-cache'))
print('scratch', can_write('/work/scratch/invoice-cache'))
print('uid', os.getuid())
print('caps', status['CapEff'].strip(), status['CapBnd'].strip())
print('nnp', status['NoNewPrivs'].strip())
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_outside_tree_scratch_and_tmp_fail_and_the_guest_has_no_privileges() {
    let Some(sandbox) = docker_sandbox("worker-confine", small_limits()).await else {
        return;
    };
    let job = Job::new("confine");
    job.write("probe.py", CONFINEMENT_PROBE);
    let run = job.run(&["python3", "probe.py"], Duration::from_secs(60));
    assert_eq!(
        sandbox.run(&run).await.expect("run"),
        SandboxExit::Exited(0),
        "{}",
        job.stderr()
    );
    let stdout = job.stdout();
    for expected in [
        "root EROFS",
        "usr EROFS",
        "tmp ok",
        "tree ok",
        "scratch ok",
        "uid 10001",
        "caps 0000000000000000 0000000000000000",
        "nnp 1",
    ] {
        assert!(
            stdout.lines().any(|line| line == expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    assert!(job.tree.join("invoice-cache").exists());
    assert!(job.scratch.join("invoice-cache").exists());
    assert_no_container_left(&job);
}

const FORK_BOMB: &str = "\
import os, sys, time
children = 0
try:
    while children < 10000:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        children += 1
except OSError as error:
    print('fork refused after', children, 'children:', error.strerror, flush=True)
    sys.exit(3)
print('forked', children, 'children unhindered', flush=True)
sys.exit(0)
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_is_contained_by_the_pids_limit() {
    let Some(sandbox) = docker_sandbox("worker-forkbomb", small_limits()).await else {
        return;
    };
    let job = Job::new("forkbomb");
    job.write("bomb.py", FORK_BOMB);
    let run = job.run(&["python3", "bomb.py"], Duration::from_secs(60));
    let started = Instant::now();
    let exit = sandbox.run(&run).await.expect("run");
    assert_eq!(exit, SandboxExit::Exited(3), "stdout: {}", job.stdout());
    let children: usize = job
        .stdout()
        .split_whitespace()
        .nth(3)
        .and_then(|n| n.parse().ok())
        .expect("child count");
    assert!(
        children < 64,
        "the pids limit is 64, yet {children} children forked"
    );
    // The sleeping children die with the container instead of holding the job to its timeout.
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_no_container_left(&job);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_sleeps_past_its_timeout_is_killed_and_reported_timed_out() {
    let Some(sandbox) = docker_sandbox("worker-timeout", small_limits()).await else {
        return;
    };
    let job = Job::new("timeout");
    let run = job.run(
        &["sh", "-c", "echo rendering page 1; sleep 300"],
        Duration::from_secs(2),
    );
    let started = Instant::now();
    assert_eq!(sandbox.run(&run).await.expect("run"), SandboxExit::TimedOut);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(job.stdout(), "rendering page 1\n");
    assert_no_container_left(&job);
}

/// Waits for a condition on the engine, polling; the engine offers nothing to block on here.
async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_job_leaves_no_container_behind() {
    let Some(sandbox) = docker_sandbox("worker-cancel", small_limits()).await else {
        return;
    };
    let job = Job::new("cancel");
    let run = job.run(&["sleep", "300"], Duration::from_secs(300));
    let running = tokio::spawn({
        let sandbox = sandbox.clone();
        let run = run.clone();
        async move { sandbox.run(&run).await }
    });
    eventually("the job's container exists", || {
        !containers_labelled("assay.job_id", &job.job_id).is_empty()
    })
    .await;
    running.abort();
    assert!(running.await.expect_err("aborted").is_cancelled());
    eventually("the cancelled job's container is removed", || {
        containers_labelled("assay.job_id", &job.job_id).is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftovers_of_a_previous_life_of_the_worker_are_reaped_and_others_kept() {
    let worker_id = format!("worker-reap-{}", std::process::id());
    let Some(sandbox) = docker_sandbox(&worker_id, small_limits()).await else {
        return;
    };
    let create = |worker: &str, job: &str, start: bool| {
        let status = Command::new("docker")
            .args([if start { "run" } else { "create" }])
            .args(if start { &["-d"][..] } else { &[][..] })
            .args(["--network", "none", "--label"])
            .arg(format!("assay.worker_id={worker}"))
            .arg("--label")
            .arg(format!("assay.job_id={job}"))
            .args(["assay-runner-python:latest", "sleep", "300"])
            .stdout(std::process::Stdio::null())
            .status()
            .expect("docker create");
        assert!(status.success());
    };
    let other_worker = format!("{worker_id}-other");
    create(&worker_id, "crashed-running", true);
    create(&worker_id, "crashed-created", false);
    create(&other_worker, "alive-elsewhere", false);

    assert_eq!(sandbox.reap_leftovers().await.expect("reap"), 2);
    assert!(containers_labelled("assay.worker_id", &worker_id).is_empty());
    assert_eq!(
        containers_labelled("assay.worker_id", &other_worker).len(),
        1
    );

    let other = DockerSandbox::connect(small_limits(), other_worker.clone())
        .await
        .expect("connect");
    assert_eq!(other.reap_leftovers().await.expect("reap"), 1);
    assert!(containers_labelled("assay.worker_id", &other_worker).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_image_is_an_infrastructure_error_with_a_hint() {
    let Some(sandbox) = docker_sandbox("worker-image", small_limits()).await else {
        return;
    };
    let config = DockerConfig {
        image: "assay-runner-cobol:latest".to_owned(),
        ..sandbox.config().clone()
    };
    let missing = DockerSandbox::connect(config, "worker-image")
        .await
        .expect("connect");
    let error = missing.check_image().await.expect_err("image is absent");
    assert!(matches!(error, DockerSetupError::ImageMissing { .. }));
    assert_eq!(
        error.to_string(),
        "image assay-runner-cobol:latest is not present on the docker engine (hint: build the runner image with deploy/build-images.sh --runner-only, or name an image the engine has)"
    );
    let job = Job::new("missing-image");
    let run = job.run(&["python3", "-c", "pass"], Duration::from_secs(30));
    let error = missing
        .run(&run)
        .await
        .expect_err("no container without an image");
    let SandboxError::Backend { job_id, message } = &error else {
        panic!("expected a backend error, got {error:?}");
    };
    assert_eq!(job_id, &job.job_id);
    assert!(message.contains("assay-runner-cobol:latest"), "{message}");
    assert!(
        message.ends_with(
            "(hint: build the runner image with deploy/build-images.sh --runner-only, or name an image the engine has)"
        ),
        "{message}"
    );
    assert_no_container_left(&job);
}

/// One case of the shared suite: the same command must end the same way in every sandbox.
struct Case {
    name: &'static str,
    command: &'static [&'static str],
    timeout: Duration,
    exit: SandboxExit,
    stdout: &'static str,
    stderr: &'static str,
    report: Option<&'static str>,
}

const SECOND: Duration = Duration::from_secs(1);

fn shared_cases() -> Vec<Case> {
    vec![
        Case {
            name: "passing",
            command: &["sh", "-c", "echo all pages rendered"],
            timeout: 30 * SECOND,
            exit: SandboxExit::Exited(0),
            stdout: "all pages rendered\n",
            stderr: "",
            report: None,
        },
        Case {
            name: "failing",
            command: &[
                "python3",
                "-c",
                "import sys; print('page 3 is blank', file=sys.stderr); sys.exit(1)",
            ],
            timeout: 30 * SECOND,
            exit: SandboxExit::Exited(1),
            stdout: "",
            stderr: "page 3 is blank\n",
            report: None,
        },
        Case {
            name: "exit-code",
            command: &["sh", "-c", "exit 42"],
            timeout: 30 * SECOND,
            exit: SandboxExit::Exited(42),
            stdout: "",
            stderr: "",
            report: None,
        },
        Case {
            name: "killed-by-signal",
            command: &["sh", "-c", "kill -KILL $$"],
            timeout: 30 * SECOND,
            exit: SandboxExit::Signalled(9),
            stdout: "",
            stderr: "",
            report: None,
        },
        Case {
            name: "report",
            command: &["sh", "-c", "printf '<testsuite tests=\"0\"/>' > {report}"],
            timeout: 30 * SECOND,
            exit: SandboxExit::Exited(0),
            stdout: "",
            stderr: "",
            report: Some("<testsuite tests=\"0\"/>"),
        },
        Case {
            name: "timeout",
            command: &["sh", "-c", "echo waiting for the pager; sleep 300"],
            timeout: 2 * SECOND,
            exit: SandboxExit::TimedOut,
            stdout: "waiting for the pager\n",
            stderr: "",
            report: None,
        },
    ]
}

async fn run_case(sandbox: &dyn Sandbox, case: &Case) {
    let job = Job::new(&format!("{}-{}", sandbox.name(), case.name));
    let run = job.run(case.command, case.timeout);
    let exit = sandbox.run(&run).await.expect("sandbox run");
    let label = format!("case {} in the {} sandbox", case.name, sandbox.name());
    assert_eq!(exit, case.exit, "{label}");
    assert_eq!(job.stdout(), case.stdout, "{label}");
    assert_eq!(job.stderr(), case.stderr, "{label}");
    let report = std::fs::read_to_string(job.scratch.join("report.xml")).ok();
    assert_eq!(report.as_deref(), case.report, "{label}");
    if sandbox.name() == "docker" {
        assert_no_container_left(&job);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_process_sandbox_ends_every_shared_case_as_expected() {
    for case in shared_cases() {
        run_case(&ProcessSandbox::default(), &case).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docker_sandbox_ends_every_shared_case_like_the_process_sandbox() {
    let Some(sandbox) = docker_sandbox("worker-shared", small_limits()).await else {
        return;
    };
    for case in shared_cases() {
        run_case(&sandbox, &case).await;
    }
}

/// A job's unpacked dependency archive is the guest's to read where the sandbox shows it, and
/// never to write; in the process sandbox it comes back from under the mask of the cache that
/// holds it, and nothing else of that cache does.
async fn vendored_sources_are_read_only(sandbox: &dyn Sandbox) {
    let job = Job::new(&format!("{}-vendored", sandbox.name()));
    let cache = job._root.path().join("dependency-cache");
    let sources = cache.join("archive");
    std::fs::create_dir_all(sources.join("lru-0.12.5")).expect("sources");
    std::fs::write(sources.join("lru-0.12.5/lib.rs"), "// lru\n").expect("source file");
    std::fs::write(cache.join("another-archive"), "another job's\n").expect("cache file");
    assay_worker::sandbox::confine::hide_from_guests(&cache);
    let guest = sandbox.vendored_path(&sources);
    let beside = cache.join("another-archive");
    let script = format!(
        "cat {guest}/lru-0.12.5/lib.rs; touch {guest}/planted 2>/dev/null && echo written; cat {} 2>/dev/null; true",
        beside.display()
    );
    let mut run = job.run(&["sh", "-c", &script], Duration::from_secs(60));
    run.vendored = Some(sources.clone());
    let exit = sandbox.run(&run).await.expect("sandbox run");
    assert_eq!(exit, SandboxExit::Exited(0), "{}", job.stderr());
    assert_eq!(job.stdout(), "// lru\n", "{}", job.stderr());
    assert!(!sources.join("planted").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_process_sandbox_gives_vendored_sources_read_only() {
    vendored_sources_are_read_only(&ProcessSandbox::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docker_sandbox_mounts_vendored_sources_read_only() {
    let Some(sandbox) = docker_sandbox("worker-vendored", small_limits()).await else {
        return;
    };
    vendored_sources_are_read_only(&sandbox).await;
}
