//! `assay prove --sandbox docker` end to end: the real binary proves the same changes in the
//! process sandbox and in containers of the runner image, and both must reach the same
//! verdicts on every criterion. Without the engine or the image the docker half skips loudly,
//! unless `ASSAY_REQUIRE_DOCKER` is set (CI), in which case it fails.

use crate::support;

use serde_json::Value;
use std::process::Command;
use support::docker::containers_labelled;
use support::{PAGER_BUGGY, PAGER_FIXED, Repo, Run, prove, pytest_pager_repo};

const IMAGE: &str = "assay-runner-python:latest";

/// A docker proof of one run per side against `main~1`, before its `--criterion` value.
const ONE_DOCKER_RUN: [&str; 8] = [
    "--base",
    "main~1",
    "--sandbox",
    "docker",
    "--repeats",
    "1",
    "--no-mutation",
    "--criterion",
];

/// Whether the engine answers and has the runner image; says loudly why not.
fn docker_ready() -> bool {
    let inspect = Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", IMAGE])
        .output();
    let why = match inspect {
        Ok(out) if out.status.success() => return true,
        Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        Err(e) => format!("the docker CLI did not run: {e}"),
    };
    assert!(
        std::env::var_os("ASSAY_REQUIRE_DOCKER").is_none(),
        "docker sandbox required but unavailable: {why}"
    );
    eprintln!(
        "\n*** SKIPPING docker sandbox test: {why}\n*** (build the image with deploy/build-images.sh --runner-only; set ASSAY_REQUIRE_DOCKER=1 to make this a failure)\n"
    );
    false
}

fn proof_id(run: &Run) -> String {
    let evidence = run.evidence.as_ref().expect("evidence written");
    evidence["proof_id"].as_str().expect("proof id").to_owned()
}

fn assert_no_container_left(run: &Run) {
    let left = containers_labelled(&format!("assay.proof_id={}", proof_id(run)));
    assert!(
        left.is_empty(),
        "containers left by {}: {left:?}",
        proof_id(run)
    );
}

/// What must agree between sandboxes: per criterion its verdict, each side's outcome and the
/// outcome of every run of it.
fn verdicts(run: &Run) -> Vec<(String, String, String, String, Vec<String>)> {
    let evidence = run.evidence.as_ref().expect("evidence written");
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    evidence["criteria"]
        .as_array()
        .expect("criteria")
        .iter()
        .map(|c| {
            let runs = ["base", "candidate"]
                .iter()
                .flat_map(|side| c[side]["runs"].as_array().cloned().unwrap_or_default())
                .map(|r| text(&r["outcome"]))
                .collect();
            (
                text(&c["id"]),
                text(&c["verdict"]),
                text(&c["base"]["outcome"]),
                text(&c["candidate"]["outcome"]),
                runs,
            )
        })
        .collect()
}

fn add_fix_with_test(repo: &Repo) {
    repo.write("pager.py", PAGER_FIXED).write(
        "tests/test_pages.py",
        "from pager import page_count\n\n\ndef test_full_pages():\n    assert page_count(10, 5) == 2\n\n\ndef test_partial_last_page_is_counted():\n    assert page_count(11, 5) == 3\n",
    );
    repo.commit("pager: count the last partial page");
}

/// One end-to-end case: a repository, the criteria, and what the proof must conclude.
struct Case {
    name: &'static str,
    repo: Repo,
    criteria: &'static [&'static str],
    code: i32,
    /// (criterion id, verdict, base outcome, candidate outcome)
    expected: &'static [(&'static str, &'static str, &'static str, &'static str)],
}

fn cases() -> Vec<Case> {
    let proven = pytest_pager_repo();
    add_fix_with_test(&proven);

    let broken_guard = pytest_pager_repo();
    broken_guard
        .write(
            "pager.py",
            "def page_count(total, size):\n    return total // size + 1\n",
        )
        .write(
            "tests/test_partial.py",
            "from pager import page_count\n\n\ndef test_partial_last_page_is_counted():\n    assert page_count(11, 5) == 3\n",
        );
    broken_guard.commit("pager: always add a page");

    // A product change that leaves `page_count` as it was (a change of tests alone needs the
    // test-only exception), and a test that already passes.
    let not_reproduced = pytest_pager_repo();
    not_reproduced
        .write(
            "pager.py",
            &format!(
                "{}\n\ndef last_page(total, size):\n    return page_count(total, size)\n",
                PAGER_BUGGY
            ),
        )
        .write(
            "tests/test_pages.py",
            "from pager import page_count\n\n\ndef test_full_pages():\n    assert page_count(10, 5) == 2\n\n\ndef test_twenty_items():\n    assert page_count(20, 5) == 4\n",
        );
    not_reproduced.commit("pager: last page; tests: twenty items");

    let skipped = pytest_pager_repo();
    skipped.write("pager.py", PAGER_FIXED).write(
        "tests/test_partial.py",
        "import pytest\nfrom pager import page_count\n\n\n@pytest.mark.skipif(page_count(11, 5) == 3, reason='fixed upstream')\ndef test_partial_last_page_is_counted():\n    assert page_count(11, 5) == 3\n",
    );
    skipped.commit("pager: partial page, test skipped once fixed");

    let import_error = pytest_pager_repo();
    import_error
        .write(
            "pager.py",
            &format!(
                "{PAGER_FIXED}\n\ndef last_page_size(total, size):\n    return total % size or size\n"
            ),
        )
        .write(
            "tests/test_last_page.py",
            "from pager import last_page_size\n\n\ndef test_last_page_size():\n    assert last_page_size(11, 5) == 1\n",
        );
    import_error.commit("pager: last page size");

    let unittest = Repo::new();
    unittest
        .write("pager.py", PAGER_BUGGY)
        .write("tests/__init__.py", "")
        .write(
            "tests/test_pages.py",
            "import unittest\n\nfrom pager import page_count\n\n\nclass PageTests(unittest.TestCase):\n    def test_full_pages(self):\n        self.assertEqual(page_count(10, 5), 2)\n",
        );
    unittest.commit("pager");
    unittest.write("pager.py", PAGER_FIXED).write(
        "tests/test_pages.py",
        "import unittest\n\nfrom pager import page_count\n\n\nclass PageTests(unittest.TestCase):\n    def test_full_pages(self):\n        self.assertEqual(page_count(10, 5), 2)\n\n    def test_partial_last_page_is_counted(self):\n        self.assertEqual(page_count(11, 5), 3)\n",
    );
    unittest.commit("pager: partial page");

    vec![
        Case {
            name: "a real fix",
            repo: proven,
            criteria: &[
                "test: test_partial_last_page_is_counted",
                "guard: test_full_pages",
            ],
            code: 0,
            expected: &[
                ("C1", "proven", "failed", "passed"),
                ("C2", "proven", "passed", "passed"),
            ],
        },
        Case {
            name: "a broken guard",
            repo: broken_guard,
            criteria: &[
                "test: test_partial_last_page_is_counted",
                "guard: test_full_pages",
            ],
            code: 1,
            expected: &[
                ("C1", "proven", "failed", "passed"),
                ("C2", "refuted", "passed", "failed"),
            ],
        },
        Case {
            name: "a test that does not reproduce",
            repo: not_reproduced,
            criteria: &["test: test_twenty_items"],
            code: 1,
            expected: &[("C1", "refuted", "passed", "passed")],
        },
        Case {
            name: "a test skipped with the change",
            repo: skipped,
            criteria: &["test: test_partial_last_page_is_counted"],
            code: 4,
            expected: &[("C1", "unverified", "failed", "skipped")],
        },
        Case {
            name: "an import error on the base",
            repo: import_error,
            criteria: &["test: test_last_page_size"],
            // A base that cannot run the test is missing evidence, not a refutation.
            code: 4,
            expected: &[("C1", "unverified", "collection_error", "passed")],
        },
        Case {
            name: "a unittest fix through the shipped adapter",
            repo: unittest,
            criteria: &[
                "test: test_partial_last_page_is_counted",
                "guard: test_full_pages",
            ],
            code: 0,
            expected: &[
                ("C1", "proven", "failed", "passed"),
                ("C2", "proven", "passed", "passed"),
            ],
        },
    ]
}

fn prove_in(case: &Case, sandbox: &str) -> Run {
    let mut args = vec![
        "--base",
        "main~1",
        "--sandbox",
        sandbox,
        "--repeats",
        "2",
        "--jobs",
        "2",
        "--no-mutation",
    ];
    for criterion in case.criteria {
        args.extend(["--criterion", criterion]);
    }
    prove(&case.repo, &args)
}

#[test]
fn proofs_reach_the_same_verdicts_in_containers_as_in_processes() {
    if !docker_ready() {
        return;
    }
    for case in cases() {
        let process = prove_in(&case, "process");
        let docker = prove_in(&case, "docker");
        assert_no_container_left(&docker);
        let label = case.name;
        assert_eq!(
            process.code,
            case.code,
            "{label}, process: {}",
            process.explain()
        );
        assert_eq!(
            docker.code,
            case.code,
            "{label}, docker: {}",
            docker.explain()
        );
        let (process_verdicts, docker_verdicts) = (verdicts(&process), verdicts(&docker));
        assert_eq!(
            process_verdicts, docker_verdicts,
            "{label}: sandboxes disagree"
        );
        let decided: Vec<(&str, &str, &str, &str)> = docker_verdicts
            .iter()
            .map(|(id, verdict, base, candidate, _)| {
                (
                    id.as_str(),
                    verdict.as_str(),
                    base.as_str(),
                    candidate.as_str(),
                )
            })
            .collect();
        assert_eq!(decided, case.expected, "{label}");

        let evidence = docker.evidence.as_ref().expect("evidence");
        assert_eq!(
            evidence["verdict"],
            process.evidence.as_ref().unwrap()["verdict"]
        );
        assert_eq!(evidence["sandbox"]["kind"], "docker", "{label}");
        let container = &evidence["sandbox"]["container"];
        assert_eq!(container["image"], IMAGE);
        assert!(
            container["image_id"]
                .as_str()
                .unwrap_or("")
                .starts_with("sha256:"),
            "{label}: {container}"
        );
        assert_eq!(container["network"], "none");
        let process_sandbox = &process.evidence.as_ref().unwrap()["sandbox"];
        assert_eq!(process_sandbox["kind"], "process");
        assert_eq!(process_sandbox["container"], serde_json::Value::Null);
        assert_eq!(
            process_sandbox["confinement"]["confined"], true,
            "{process_sandbox}"
        );
        assert_eq!(evidence["sandbox"]["confinement"], serde_json::Value::Null);
        for job in evidence["jobs"].as_array().expect("jobs") {
            assert!(job["status"] == "completed", "{label}: {job:#}");
        }
    }
}

/// The host name the binary labels its containers with.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("host name")
        .trim()
        .to_owned()
}

#[test]
fn containers_of_a_killed_proof_are_reaped_by_the_next_and_live_owners_are_left_alone() {
    if !docker_ready() {
        return;
    }
    // A process that has exited: its id names no live owner.
    let mut gone = Command::new("true").spawn().expect("spawn");
    gone.wait().expect("wait");
    let dead_owner = format!("embedded-{}", gone.id());
    let live_owner = format!("embedded-{}", std::process::id());
    let marker = format!("reap-{}", std::process::id());
    for owner in [&dead_owner, &live_owner] {
        let status = Command::new("docker")
            .args(["create", "--network", "none", "--label"])
            .arg(format!("assay.worker_id={owner}"))
            .arg("--label")
            .arg(format!("assay.host={}", host_name()))
            .arg("--label")
            .arg(format!("assay.test={marker}"))
            .args([IMAGE, "sleep", "300"])
            .stdout(std::process::Stdio::null())
            .status()
            .expect("docker create");
        assert!(status.success());
    }
    assert_eq!(
        containers_labelled(&format!("assay.test={marker}")).len(),
        2
    );

    let repo = pytest_pager_repo();
    add_fix_with_test(&repo);
    let mut args = ONE_DOCKER_RUN.to_vec();
    args.push("test: test_partial_last_page_is_counted");
    let run = prove(&repo, &args);
    let left_dead = containers_labelled(&format!("assay.worker_id={dead_owner}"));
    let left_live = containers_labelled(&format!("assay.worker_id={live_owner}"));
    for id in &left_live {
        let _ = Command::new("docker").args(["rm", "-f", id]).output();
    }
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_no_container_left(&run);
    assert!(left_dead.is_empty(), "a dead owner's container is reaped");
    assert_eq!(left_live.len(), 1, "a live owner's container is kept");
}

#[test]
fn the_sandbox_table_is_read_and_checked_and_flags_win() {
    let repo = pytest_pager_repo();
    add_fix_with_test(&repo);
    let criterion = ["--criterion", "test: test_partial_last_page_is_counted"];
    repo.write(
        "assay.toml",
        "base = \"main~1\"\n[sandbox]\nkind = \"docker\"\nmemory_mb = 4\n",
    );
    let bad = prove(&repo, &criterion);
    assert_eq!(bad.code, 2, "{}", bad.explain());
    let toml = repo.path().join("assay.toml").canonicalize().unwrap();
    assert_eq!(
        bad.stderr.trim_end(),
        format!(
            "error: invalid memory_mb = 4 in [sandbox] of {}: expected at least 16 MB, a container with less cannot start a test runner",
            toml.display()
        )
    );
    assert!(bad.evidence.is_none());

    repo.write(
        "assay.toml",
        "base = \"main~1\"\n[sandbox]\nkind = \"docker\"\nnetwrok = \"none\"\n",
    );
    let unknown = prove(&repo, &criterion);
    assert_eq!(unknown.code, 2, "{}", unknown.explain());
    assert!(unknown.stderr.contains("netwrok"), "{}", unknown.explain());

    // The file asks for docker; the flag wins, and no engine is needed.
    repo.write("assay.toml", "base = \"main~1\"\nrepeats = 1\nmutation = false\n[sandbox]\nkind = \"docker\"\nimage = \"assay-runner-cobol:latest\"\n");
    let process = prove(
        &repo,
        &[
            &criterion[..],
            &["--sandbox", "process", "--trust-repo-config"],
        ]
        .concat(),
    );
    assert_eq!(process.code, 0, "{}", process.explain());
    assert_eq!(
        process.evidence.as_ref().unwrap()["sandbox"]["kind"],
        "process"
    );

    let docker_flag_alone = prove(
        &repo,
        &[
            &criterion[..],
            &[
                "--sandbox",
                "process",
                "--pids",
                "64",
                "--trust-repo-config",
            ],
        ]
        .concat(),
    );
    assert_eq!(docker_flag_alone.code, 2, "{}", docker_flag_alone.explain());
    assert!(
        docker_flag_alone
            .stderr
            .contains("--pids applies to the docker sandbox only"),
        "{}",
        docker_flag_alone.explain()
    );
}

#[test]
fn a_missing_image_or_engine_is_an_infrastructure_failure_in_one_line() {
    let repo = pytest_pager_repo();
    add_fix_with_test(&repo);
    let args = [
        "--base",
        "main~1",
        "--no-mutation",
        "--criterion",
        "test: test_partial_last_page_is_counted",
        "--sandbox",
        "docker",
    ];

    let mut no_engine = support::assay();
    no_engine
        .arg("prove")
        .arg("-C")
        .arg(repo.path())
        .args(args)
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock");
    let no_engine = support::run(no_engine, None);
    assert_eq!(no_engine.code, 3, "{}", no_engine.explain());
    assert_eq!(
        no_engine.stderr.lines().count(),
        1,
        "{}",
        no_engine.explain()
    );
    assert!(
        no_engine.stderr.starts_with(
            "error: cannot reach the docker engine at unix:///nonexistent/docker.sock: "
        ),
        "{}",
        no_engine.explain()
    );
    assert!(
        no_engine.stderr.contains("(hint: start the docker engine"),
        "{}",
        no_engine.explain()
    );

    if !docker_ready() {
        return;
    }
    let missing = prove(
        &repo,
        &[&args[..], &["--image", "assay-runner-cobol:latest"]].concat(),
    );
    assert_eq!(missing.code, 3, "{}", missing.explain());
    assert_eq!(
        missing.stderr,
        "error: image assay-runner-cobol:latest is not present on the docker engine (hint: build the runner image with deploy/build-images.sh --runner-only, or name an image the engine has)\n"
    );
    assert!(missing.evidence.is_none());
}

/// Ctrl-C on an embedded docker proof: the running job's container is stopped and removed
/// before the process exits, and the exit code says it was interrupted.
#[test]
fn an_interrupted_docker_proof_removes_its_containers_and_exits_130() {
    if !docker_ready() {
        return;
    }
    let repo = pytest_pager_repo();
    add_fix_with_test(&repo);
    repo.write(
        "tests/test_export.py",
        "import time\n\n\ndef test_the_export_finishes():\n    time.sleep(120)\n",
    );
    repo.commit("tests: a slow export");
    let mut child = support::assay()
        .arg("prove")
        .arg("-C")
        .arg(repo.path())
        .args(ONE_DOCKER_RUN)
        .arg("guard: test_the_export_finishes")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("assay starts");
    let label = format!("assay.worker_id=embedded-{}", child.id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    while containers_labelled(&label).is_empty() {
        if std::time::Instant::now() > deadline || child.try_wait().expect("wait").is_some() {
            let _ = child.kill();
            panic!(
                "no container of the proof appeared: {:?}",
                child.wait_with_output()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let interrupt = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(interrupt.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(40);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("assay did not stop within 40 s of Ctrl-C");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let output = child.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("error: interrupted"), "{stderr}");
    assert!(containers_labelled(&label).is_empty(), "{stderr}");
}

/// The repository under test writes its own assay.toml: a pull request may ask for the
/// caller's secrets, a network, a wider container or host paths. None of that takes effect
/// without `--trust-repo-config`; narrowing the sandbox needs no flag.
#[test]
fn a_repositorys_own_config_cannot_widen_its_sandbox_or_touch_host_paths_unless_trusted() {
    let repo = pytest_pager_repo();
    add_fix_with_test(&repo);
    let criterion = ["--criterion", "test: test_partial_last_page_is_counted"];
    let outside = tempfile::tempdir().unwrap();
    let planted = outside.path().join("authorized_keys");
    repo.write(
        "assay.toml",
        &format!(
            "base = \"main~1\"\nrepeats = 1\nmutation = false\npass-env = [\"AWS_SECRET_ACCESS_KEY\"]\njunit = \"{}\"\n[sandbox]\nkind = \"docker\"\nnetwork = \"bridge\"\npids = 100000\n",
            planted.display()
        ),
    );
    let refused = prove(&repo, &criterion);
    assert_eq!(refused.code, 2, "{}", refused.explain());
    for key in ["pass-env", "junit", "sandbox.network", "sandbox.pids"] {
        assert!(refused.stderr.contains(key), "{key}: {}", refused.explain());
    }
    assert!(
        refused.stderr.contains("--trust-repo-config"),
        "{}",
        refused.explain()
    );
    assert!(
        !planted.exists(),
        "nothing was written outside the repository"
    );

    // Narrowing is the repository's own business.
    repo.write(
        "assay.toml",
        "base = \"main~1\"\nrepeats = 1\nmutation = false\n[sandbox]\nnetwork = \"none\"\n",
    );
    let narrowed = prove(&repo, &criterion);
    assert_eq!(narrowed.code, 0, "{}", narrowed.explain());

    // Trusted, the same file is honoured: its JUnit summary lands where it says.
    repo.write(
        "assay.toml",
        &format!(
            "base = \"main~1\"\nrepeats = 1\nmutation = false\njunit = \"{}\"\n",
            planted.display()
        ),
    );
    let trusted = prove(&repo, &[&criterion[..], &["--trust-repo-config"]].concat());
    assert_eq!(trusted.code, 0, "{}", trusted.explain());
    assert!(planted.is_file());
}
