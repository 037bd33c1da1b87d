//! The daily loop of a developer or a coding agent: proving uncommitted work, answers a script
//! can act on, and commands that end cleanly however their output or process is cut short.

mod support;

use std::io::Write as _;
use std::process::Stdio;
use support::{PAGER_FIXED, Repo, assay, prove, pytest_pager_repo};

const PARTIAL_TEST: &str = "from pager import page_count\n\n\ndef test_partial_last_page_is_counted():\n    assert page_count(11, 5) == 3\n";

/// The pager fixed and its test added, neither committed: the fix edits a tracked file and the
/// test is a new, untracked one.
fn uncommitted_fix(repo: &Repo) {
    repo.write("pager.py", PAGER_FIXED)
        .write("tests/test_partial.py", PARTIAL_TEST);
}

const CRITERIA: [&str; 4] = [
    "--criterion",
    "test: test_partial_last_page_is_counted",
    "--criterion",
    "guard: test_full_pages",
];

#[test]
fn the_work_tree_is_proven_as_it_is_without_touching_the_index_or_the_files() {
    let repo = pytest_pager_repo();
    uncommitted_fix(&repo);
    let index = repo.path().join(".git/index");
    let index_before = std::fs::read(&index).expect("the index");
    let status_before = repo.status();
    let run = prove(
        &repo,
        &[
            &["--base", "main", "--worktree", "--no-mutation"][..],
            &CRITERIA,
        ]
        .concat(),
    );
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.verdict_of("C1"), "proven", "{}", run.explain());
    assert_eq!(run.verdict_of("C2"), "proven", "{}", run.explain());
    let evidence = run.evidence.as_ref().expect("evidence");
    assert_eq!(evidence["candidate"]["requested"], "work tree");
    assert_eq!(evidence["changed_test_files"][0], "tests/test_partial.py");
    assert_eq!(std::fs::read(&index).expect("the index"), index_before);
    assert_eq!(repo.status(), status_before);
    assert_eq!(
        std::fs::read_to_string(repo.path().join("pager.py")).expect("pager.py"),
        PAGER_FIXED
    );
}

#[test]
fn a_dirty_work_tree_with_the_default_candidate_is_refused_naming_both_ways_out() {
    let repo = pytest_pager_repo();
    uncommitted_fix(&repo);
    let run = prove(&repo, &[&["--base", "main"][..], &CRITERIA].concat());
    assert_eq!(run.code, 2, "{}", run.explain());
    let line = run.stderr.trim_end();
    assert_eq!(line.lines().count(), 1, "{}", run.explain());
    for needed in [
        "M pager.py",
        "?? tests/test_partial.py",
        "--worktree",
        "commit",
    ] {
        assert!(line.contains(needed), "{needed}: {}", run.explain());
    }
    assert!(run.evidence.is_none(), "nothing ran");
}

#[test]
fn a_patch_on_standard_input_is_applied_to_the_base() {
    let repo = pytest_pager_repo();
    let tests = std::fs::read_to_string(repo.path().join("tests/test_pages.py")).unwrap();
    repo.write("pager.py", PAGER_FIXED).write(
        "tests/test_pages.py",
        &format!(
            "{tests}\n\ndef test_partial_last_page_is_counted():\n    assert page_count(11, 5) == 3\n"
        ),
    );
    let patch = repo.git(&["diff"]);
    repo.git(&["checkout", "--", "."]);
    assert_eq!(repo.status(), "", "the work tree is clean again");

    let out_dir = tempfile::tempdir().expect("temp dir");
    let json = out_dir.path().join("proof.json");
    let mut command = assay();
    command
        .arg("prove")
        .arg("-C")
        .arg(repo.path())
        .args(["--base", "main", "--patch", "-", "--no-mutation"])
        .args(CRITERIA)
        .arg("--json")
        .arg(&json)
        .arg("--store")
        .arg(format!("file://{}", out_dir.path().join("store").display()))
        .env("ASSAY_STATE_DIR", out_dir.path().join("state"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("assay starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(patch.as_bytes())
        .expect("the patch is written");
    let output = child.wait_with_output().expect("assay ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let evidence: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("evidence")).expect("JSON");
    assert_eq!(evidence["verdict"], "proven", "{evidence:#}");
    assert_eq!(evidence["candidate"]["requested"], "main + standard input");
    assert!(
        !repo.path().join("-").exists(),
        "no file named - was read or written"
    );
}

/// `assay CMD -C repo ARGS --json -` run from `cwd` with a private store and state.
fn with_json_on_stdout(
    repo: &Repo,
    cwd: &std::path::Path,
    command_args: &[&str],
) -> std::process::Output {
    let out_dir = tempfile::tempdir().expect("temp dir");
    let mut command = assay();
    command
        .args(command_args)
        .arg("-C")
        .arg(repo.path())
        .args(["--json", "-"])
        .arg("--store")
        .arg(format!("file://{}", out_dir.path().join("store").display()))
        .env("ASSAY_STATE_DIR", out_dir.path().join("state"))
        .env("XDG_CACHE_HOME", out_dir.path().join("cache"))
        .current_dir(cwd);
    command.output().expect("assay runs")
}

#[test]
fn json_dash_puts_the_document_alone_on_stdout_and_the_summary_on_stderr() {
    let repo = pytest_pager_repo();
    uncommitted_fix(&repo);
    repo.commit("pager: count the last partial page");
    let cwd = tempfile::tempdir().expect("temp dir");

    let proof = with_json_on_stdout(
        &repo,
        cwd.path(),
        &[
            &["prove", "--base", "main~1", "--no-mutation"][..],
            &CRITERIA,
        ]
        .concat(),
    );
    let stderr = String::from_utf8_lossy(&proof.stderr);
    assert_eq!(proof.status.code(), Some(0), "{stderr}");
    let evidence: serde_json::Value =
        serde_json::from_slice(&proof.stdout).expect("stdout is the evidence alone");
    assert_eq!(evidence["schema"], "assay.proof/v1");
    assert!(stderr.contains(": PROVEN"), "{stderr}");

    let suite = with_json_on_stdout(&repo, cwd.path(), &["test"]);
    let stderr = String::from_utf8_lossy(&suite.stderr);
    assert_eq!(suite.status.code(), Some(0), "{stderr}");
    let report: serde_json::Value =
        serde_json::from_slice(&suite.stdout).expect("stdout is the suite report alone");
    assert_eq!(report["schema"], "assay.test/v1");
    assert_eq!(report["totals"]["passed"], 2, "{report:#}");

    let mutation = with_json_on_stdout(&repo, cwd.path(), &["mutate", "pager.py"]);
    let stderr = String::from_utf8_lossy(&mutation.stderr);
    let report: serde_json::Value =
        serde_json::from_slice(&mutation.stdout).expect("stdout is the mutation report alone");
    assert_eq!(report["schemaVersion"], "1", "{stderr}");
    assert!(stderr.contains("mutation score"), "{stderr}");

    for dir in [repo.path(), cwd.path()] {
        assert!(
            !dir.join("-").exists(),
            "no file named - in {}",
            dir.display()
        );
    }
}

/// `document` validates against `docs/schemas/SCHEMA` under JSON Schema 2020-12, by the
/// `jsonschema` package `.ci/run` installs.
fn assert_matches_schema(document: &[u8], schema: &str) {
    let schema_path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/schemas")
        .join(schema);
    let mut check = std::process::Command::new("python3")
        .args([
            "-c",
            "import json, sys, jsonschema\n\
             schema = json.load(open(sys.argv[1]))\n\
             jsonschema.Draft202012Validator.check_schema(schema)\n\
             jsonschema.validate(json.load(sys.stdin), schema, cls=jsonschema.Draft202012Validator)",
        ])
        .arg(&schema_path)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    check
        .stdin
        .take()
        .expect("stdin")
        .write_all(document)
        .expect("the document is written");
    let checked = check.wait_with_output().expect("python3 ends");
    assert!(
        checked.status.success(),
        "{schema}: {}\n{}",
        String::from_utf8_lossy(&checked.stderr),
        String::from_utf8_lossy(document)
    );
}

#[test]
fn every_published_document_matches_its_json_schema_and_a_misspelt_name_gets_suggestions() {
    let repo = pytest_pager_repo();
    uncommitted_fix(&repo);
    repo.commit("pager: count the last partial page");
    let cwd = tempfile::tempdir().expect("temp dir");

    let proof = with_json_on_stdout(
        &repo,
        cwd.path(),
        &[
            "prove",
            "--base",
            "main~1",
            "--no-mutation",
            "--criterion",
            "test: test_partial_last_page_is_counted",
            "--criterion",
            "guard: full_pages",
        ],
    );
    let stderr = String::from_utf8_lossy(&proof.stderr);
    assert_eq!(proof.status.code(), Some(4), "{stderr}");
    let evidence: serde_json::Value = serde_json::from_slice(&proof.stdout).expect("evidence");
    let guard = &evidence["criteria"][1];
    assert_eq!(guard["reason_code"], "not_found", "{guard:#}");
    assert_eq!(guard["suggestions"][0], "test_full_pages", "{guard:#}");
    assert_eq!(evidence["criteria"][0]["reason_code"], "reproduced");
    assert!(stderr.contains("did you mean test_full_pages?"), "{stderr}");
    assert_matches_schema(&proof.stdout, "assay.proof.v1.json");

    let suite = with_json_on_stdout(&repo, cwd.path(), &["test"]);
    assert_eq!(suite.status.code(), Some(0));
    assert_matches_schema(&suite.stdout, "assay.test.v1.json");

    let listing = assay()
        .args(["test", "--list-cases", "-C"])
        .arg(repo.path())
        .output()
        .expect("assay runs");
    assert_eq!(listing.status.code(), Some(0));
    assert_matches_schema(&listing.stdout, "assay.cases.v1.json");

    let mutation = with_json_on_stdout(&repo, cwd.path(), &["mutate", "pager.py"]);
    assert_matches_schema(&mutation.stdout, "mutation-testing-report.v1.json");
}
