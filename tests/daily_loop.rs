//! The daily loop of a developer or a coding agent: proving uncommitted work, answers a script
//! can act on, and commands that end cleanly however their output or process is cut short.

use crate::support;

use std::io::Write as _;
use std::process::Stdio;
use support::{
    PAGER_FIX_CRITERIA, PAGER_FIXED, Repo, Run, assay, prove, prove_keeping_store,
    pytest_pager_repo,
};

const PARTIAL_TEST: &str = "from pager import page_count\n\n\ndef test_partial_last_page_is_counted():\n    assert page_count(11, 5) == 3\n";

/// The pager fixed and its test added, neither committed: the fix edits a tracked file and the
/// test is a new, untracked one.
fn uncommitted_fix(repo: &Repo) {
    repo.write("pager.py", PAGER_FIXED)
        .write("tests/test_partial.py", PARTIAL_TEST);
}

/// The pager with its fix and test committed on top of the base.
fn committed_fix() -> Repo {
    let repo = pytest_pager_repo();
    uncommitted_fix(&repo);
    repo.commit("pager: count the last partial page");
    repo
}

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
            &PAGER_FIX_CRITERIA,
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
    let run = prove(
        &repo,
        &[&["--base", "main"][..], &PAGER_FIX_CRITERIA].concat(),
    );
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
    support::write_pager_fix(&repo);
    let patch = repo.git(&["diff"]);
    repo.git(&["checkout", "--", "."]);
    assert_eq!(repo.status(), "", "the work tree is clean again");

    let out_dir = tempfile::tempdir().expect("temp dir");
    let (mut command, json) = support::prove_command(
        &repo,
        &[
            &["--base", "main", "--patch", "-", "--no-mutation"][..],
            &PAGER_FIX_CRITERIA,
        ]
        .concat(),
        out_dir.path(),
    );
    command
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
    let repo = committed_fix();
    let cwd = tempfile::tempdir().expect("temp dir");

    let proof = with_json_on_stdout(
        &repo,
        cwd.path(),
        &[
            &["prove", "--base", "main~1", "--no-mutation"][..],
            &PAGER_FIX_CRITERIA,
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
    let repo = committed_fix();
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

/// A pager whose new test takes a minute: a proof or a mutation run of it is still running
/// when the test stops it.
fn slow_pager() -> Repo {
    let repo = pytest_pager_repo();
    repo.write("pager.py", PAGER_FIXED).write(
        "tests/test_partial.py",
        "import time\n\nfrom pager import page_count\n\n\ndef test_partial_last_page_is_counted():\n    time.sleep(60)\n    assert page_count(11, 5) == 3\n",
    );
    repo.commit("pager: count the last partial page, slowly");
    repo
}

/// The names in `dir` that start with `assay-`.
fn assay_dirs(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("read the temp dir")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("assay-"))
        .collect()
}

/// Starts `assay ARGS` with a private temp dir, waits until a job of it is running (its job
/// directory exists), sends `signal`, and returns the exit code and stderr once it ended, having
/// checked that nothing it made is left in the temp dir.
fn stopped_by(repo: &Repo, args: &[&str], signal: &str) -> (Option<i32>, String) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let out_dir = tempfile::tempdir().expect("temp dir");
    let stderr_path = out_dir.path().join("stderr");
    let mut child = assay()
        .args(args)
        .arg("-C")
        .arg(repo.path())
        .arg("--store")
        .arg(format!("file://{}", out_dir.path().join("store").display()))
        .env("ASSAY_STATE_DIR", out_dir.path().join("state"))
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"))
        .spawn()
        .expect("assay starts");
    // A job is running once its directory `{scratch}/{proof}/{job}` exists.
    let job_running = || {
        assay_dirs(tmp.path()).iter().any(|scratch| {
            std::fs::read_dir(tmp.path().join(scratch))
                .into_iter()
                .flatten()
                .flatten()
                .filter(|proof| !proof.file_name().to_string_lossy().starts_with('.'))
                .any(|proof| {
                    std::fs::read_dir(proof.path()).is_ok_and(|mut jobs| jobs.next().is_some())
                })
        })
    };
    let started = std::time::Instant::now();
    while !job_running() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "no job started: {}",
            std::fs::read_to_string(&stderr_path).unwrap_or_default()
        );
        assert!(
            child.try_wait().expect("poll").is_none(),
            "assay ended early"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let sent = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    let stopped = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("poll") {
            break status;
        }
        assert!(
            stopped.elapsed() < std::time::Duration::from_secs(30),
            "assay did not stop on SIG{signal}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(&stderr_path).expect("stderr");
    assert_eq!(
        assay_dirs(tmp.path()),
        Vec::<String>::new(),
        "left behind after SIG{signal}: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    // The jobs' directories are removed on the way out: no warning says otherwise.
    assert!(
        !stderr.contains("failed to remove job scratch directory"),
        "{stderr}"
    );
    (status.code(), stderr)
}

#[test]
fn sigterm_stops_a_proof_and_removes_its_scratch_as_sigint_does() {
    let repo = slow_pager();
    let prove = [
        "prove",
        "--base",
        "main~1",
        "--criterion",
        "test: test_partial_last_page_is_counted",
    ];
    let (code, stderr) = stopped_by(&repo, &prove, "INT");
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stderr.contains("error: interrupted"), "{stderr}");
    let (code, stderr) = stopped_by(&repo, &prove, "TERM");
    assert_eq!(code, Some(143), "{stderr}");
    assert!(stderr.contains("error: terminated (SIGTERM)"), "{stderr}");
}

#[test]
fn sigterm_stops_a_mutation_run_and_removes_its_scratch() {
    let repo = slow_pager();
    let (code, stderr) = stopped_by(&repo, &["mutate", "pager.py"], "TERM");
    assert_eq!(code, Some(143), "{stderr}");
}

#[test]
fn mutate_says_it_mutates_head_without_the_uncommitted_work_and_worktree_mutates_that_work() {
    let repo = pytest_pager_repo();
    uncommitted_fix(&repo);
    let out_dir = tempfile::tempdir().expect("temp dir");
    let status_before = repo.git(&["status", "--porcelain"]);
    let mutate = |extra: &[&str], report: &str| {
        let report = out_dir.path().join(report);
        let mut args = vec![
            "--jobs".into(),
            "2".into(),
            "pager.py".into(),
            "--json".into(),
        ];
        args.push(report.clone().into_os_string());
        args.extend(extra.iter().map(std::ffi::OsString::from));
        let output = mutate_in(&repo, out_dir.path(), &args);
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&report).expect("the report")).expect("JSON");
        let lines: Vec<(u64, String)> = doc["files"]["pager.py"]["mutants"]
            .as_array()
            .expect("pager.py's mutants")
            .iter()
            .map(|m| {
                (
                    m["location"]["start"]["line"].as_u64().expect("a line"),
                    m["status"].as_str().expect("a status").to_owned(),
                )
            })
            .collect();
        (String::from_utf8_lossy(&output.stderr).into_owned(), lines)
    };

    let (stderr, head) = mutate(&[], "head.json");
    assert!(
        stderr.contains(
            "warning: the work tree has changes HEAD does not (M pager.py, ?? tests/test_partial.py); HEAD is mutated without them (hint: pass --worktree"
        ),
        "{stderr}"
    );
    // HEAD's pager is two lines long.
    assert!(
        !head.is_empty() && head.iter().all(|(line, _)| *line <= 2),
        "{head:?}"
    );

    let (stderr, worktree) = mutate(&["--worktree"], "worktree.json");
    assert!(!stderr.contains("warning: the work tree"), "{stderr}");
    // The uncommitted `if total % size > 0:` is mutated, and the untracked test kills it.
    let on_the_fix: Vec<&(u64, String)> = worktree.iter().filter(|(line, _)| *line == 3).collect();
    assert!(!on_the_fix.is_empty(), "{worktree:?}");
    assert!(
        on_the_fix.iter().all(|(_, status)| status == "Killed"),
        "{worktree:?}"
    );
    assert_eq!(repo.git(&["status", "--porcelain"]), status_before);
}

#[test]
fn mutate_in_a_repository_with_nothing_committed_points_to_worktree_which_mutates_it() {
    let repo = Repo::new();
    repo.write("pager.py", PAGER_FIXED)
        .write("conftest.py", "")
        .write("tests/test_partial.py", PARTIAL_TEST);
    let out_dir = tempfile::tempdir().expect("temp dir");
    let mutate = |extra: &[&str]| mutate_in(&repo, out_dir.path(), extra);
    let head = mutate(&[]);
    let stderr = String::from_utf8_lossy(&head.stderr);
    assert_eq!(head.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "nothing is committed yet (hint: pass --worktree to mutate the work tree as it is)"
        ),
        "{stderr}"
    );
    let worktree = mutate(&["--worktree"]);
    let stdout = String::from_utf8_lossy(&worktree.stdout);
    assert!(
        stdout.contains("mutate: ") && !stdout.contains(" 0 killed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&worktree.stderr)
    );
}

/// `assay mutate ARGS -C REPO`, uncached, with its store and state in `out_dir`.
fn mutate_in(
    repo: &Repo,
    out_dir: &std::path::Path,
    args: &[impl AsRef<std::ffi::OsStr>],
) -> std::process::Output {
    assay()
        .args(["mutate", "--no-cache", "--store"])
        .arg(format!("file://{}", out_dir.join("store").display()))
        .args(args)
        .arg("-C")
        .arg(repo.path())
        .env("ASSAY_STATE_DIR", out_dir.join("state"))
        .output()
        .expect("assay runs")
}

/// [`committed_fix`] with a directory for its state (returned, to be kept while it is used),
/// the state directory and a store URL inside it.
fn committed_fix_with_state() -> (Repo, tempfile::TempDir, std::path::PathBuf, String) {
    let repo = committed_fix();
    let out_dir = tempfile::tempdir().expect("temp dir");
    let state = out_dir.path().join("state");
    let store = format!("file://{}", out_dir.path().join("store").display());
    (repo, out_dir, state, store)
}

/// `assay prove` of the committed fix in `repo` against its parent, one criterion, no
/// mutation check.
fn prove_fix_args(store: &str, repo: &std::path::Path) -> Vec<std::ffi::OsString> {
    [
        "prove",
        "--base",
        "main~1",
        "--no-mutation",
        "--store",
        store,
        "--criterion",
        "test: test_partial_last_page_is_counted",
        "-C",
    ]
    .into_iter()
    .map(std::ffi::OsString::from)
    .chain([repo.as_os_str().to_owned()])
    .collect()
}

/// Which of the command's streams is a pipe whose reader is gone before anything is written.
#[derive(Clone, Copy)]
enum Closed {
    /// `assay ARGS | head -0`.
    Stdout,
    /// `assay ARGS 2>&1 >out | head -0`: every progress line fails to write.
    Stderr,
}

/// Runs `assay ARGS` with the `closed` stream's reader gone, the other captured.
fn with_closed(
    closed: Closed,
    args: &[&std::ffi::OsStr],
    state: &std::path::Path,
) -> std::process::Output {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let mut command = assay();
    command.args(args).env("ASSAY_STATE_DIR", state);
    match closed {
        Closed::Stdout => command.stdout(writer).stderr(Stdio::piped()),
        Closed::Stderr => command.stdout(Stdio::piped()).stderr(writer),
    };
    let child = command.spawn().expect("assay starts");
    child.wait_with_output().expect("assay ends")
}

#[test]
fn a_closed_stderr_changes_neither_the_exit_code_nor_stdout_of_mutate_and_prove() {
    let (repo, _out_dir, state, store) = committed_fix_with_state();
    let repo_arg = repo.path().as_os_str();
    let words = |words: &[&str]| -> Vec<std::ffi::OsString> {
        words
            .iter()
            .map(std::ffi::OsString::from)
            .chain([repo_arg.to_owned()])
            .collect()
    };
    let prove = prove_fix_args(&store, repo.path());
    let mutate = words(&["mutate", "--no-cache", "--store", &store, "pager.py", "-C"]);
    for args in [prove, mutate] {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let open = assay()
            .args(&args)
            .env("ASSAY_STATE_DIR", &state)
            .output()
            .expect("assay runs");
        let open_stderr = String::from_utf8_lossy(&open.stderr);
        assert!(
            open_stderr.lines().count() > 1,
            "the run says something on stderr: {open_stderr}"
        );
        let closed = with_closed(Closed::Stderr, &args, &state);
        // A panic would exit 101, and its message would be lost with stderr.
        assert_eq!(closed.status.code(), open.status.code(), "{args:?}");
        // `proof ID: PROVEN (…)`, `mutate: N mutants: … (…)`: what was decided, not its id or
        // time.
        let summary = |out: &[u8]| {
            String::from_utf8_lossy(out)
                .lines()
                .find(|l| l.starts_with("mutate: ") || l.starts_with("proof "))
                .and_then(|l| l.split_once(": "))
                .map(|(_, said)| said.split(" (").next().unwrap_or(said).to_owned())
        };
        assert!(summary(&open.stdout).is_some(), "{args:?}: {open:?}");
        assert_eq!(summary(&closed.stdout), summary(&open.stdout), "{args:?}");
    }
}

/// `output`'s command exited 0 without a panic; its stderr is the message otherwise.
#[track_caller]
fn assert_ended_cleanly(output: &std::process::Output) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_closed_stdout_ends_history_and_prove_quietly() {
    let (repo, _out_dir, state, store) = committed_fix_with_state();
    let repo_arg = repo.path().as_os_str();

    let history = with_closed(
        Closed::Stdout,
        &["history".as_ref(), "-C".as_ref(), repo_arg],
        &state,
    );
    assert_ended_cleanly(&history);

    let prove = prove_fix_args(&store, repo.path());
    let prove: Vec<&std::ffi::OsStr> = prove.iter().map(|a| a.as_os_str()).collect();
    let proof = with_closed(Closed::Stdout, &prove, &state);
    assert_ended_cleanly(&proof);
}

#[test]
fn a_runner_whose_tool_is_not_installed_stops_at_once_naming_it() {
    let repo = Repo::new();
    repo.write(
        "package.json",
        "{\"name\": \"pager\", \"devDependencies\": {\"vitest\": \"^4.0.0\"}}\n",
    )
    .write(
        "src/pager.js",
        "export const pageCount = (total, size) => Math.floor(total / size);\n",
    )
    .write(
        "test/pager.test.js",
        "import { test, expect } from 'vitest';\nimport { pageCount } from '../src/pager.js';\n\ntest('full pages are counted', () => {\n  expect(pageCount(10, 5)).toBe(2);\n});\n",
    );
    repo.commit("pager");
    repo.write(
        "src/pager.js",
        "export const pageCount = (total, size) => Math.ceil(total / size);\n",
    );
    repo.commit("pager: count the last partial page");
    let started = std::time::Instant::now();
    let run = prove(
        &repo,
        &[
            "--base",
            "main~1",
            "--runner",
            "vitest",
            "--criterion",
            "guard: pages",
        ],
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(run.code, 3, "{}", run.explain());
    let line = run.stderr.trim_end();
    assert!(
        line.starts_with("error: the vitest runner's tool vitest is not installed"),
        "{}",
        run.explain()
    );
    assert!(
        line.contains("node_modules/.bin/vitest"),
        "{}",
        run.explain()
    );
    assert!(!run.stderr.contains("jobs planned"), "{}", run.explain());

    // `assay test` and `assay mutate` check the same before anything runs.
    let python = pytest_pager_repo();
    let state = tempfile::tempdir().expect("temp dir");
    for command in [&["test", "--runner", "unittest"][..], &["mutate"][..]] {
        let out = assay()
            .args(command)
            .args(["--test-command", "python3.99 -m pytest", "-C"])
            .arg(python.path())
            .env("ASSAY_STATE_DIR", state.path())
            .env("XDG_CACHE_HOME", state.path())
            .output()
            .expect("assay runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{command:?}: {stderr}");
        assert!(
            stderr.contains("tool python3.99 is not installed: not found in PATH"),
            "{command:?}: {stderr}"
        );
    }
}

/// A node:test pager whose tests are named by sentences, and the commit that counts a partial
/// last page.
fn node_pager() -> Repo {
    let repo = Repo::new();
    let tests = "import { test } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { pageCount } from '../src/pager.js';\n\ntest('full pages are counted', () => {\n  assert.equal(pageCount(10, 5), 2);\n});\n";
    repo.write(
        "package.json",
        "{\"name\": \"pager\", \"private\": true, \"type\": \"module\"}\n",
    )
    .write(
        "src/pager.js",
        "export function pageCount(total, size) {\n  return Math.floor(total / size);\n}\n",
    )
    .write("test/pager.test.js", tests);
    repo.commit("pager");
    repo.write(
        "src/pager.js",
        "export function pageCount(total, size) {\n  return Math.ceil(total / size);\n}\n",
    )
    .write(
        "test/pager.test.js",
        &format!("{tests}\ntest('partial last page is counted', () => {{\n  assert.equal(pageCount(11, 5), 3);\n}});\n"),
    );
    repo.commit("pager: count the last partial page");
    repo
}

/// The flags of a proof of the last commit against its parent on `criteria`, with no mutation
/// check.
fn unmutated_against_the_parent<'a>(criteria: &[&'a str]) -> Vec<&'a str> {
    [&["--base", "main~1", "--no-mutation"][..], criteria].concat()
}

#[test]
fn node_tests_are_named_by_quoted_sentences_and_a_re_proof_is_answered_from_the_cache() {
    let repo = node_pager();
    let args = unmutated_against_the_parent(&[
        "--criterion",
        "test: \"partial last page is counted\"",
        "--criterion",
        "guard: 'full pages are counted'",
    ]);
    let (first, out_dir) = prove_keeping_store(&repo, &args);
    assert_eq!(first.code, 0, "{}", first.explain());
    assert_eq!(first.verdict_of("C1"), "proven", "{}", first.explain());
    assert_eq!(
        first.criterion("C1")["test"],
        "partial last page is counted"
    );
    assert_eq!(first.verdict_of("C2"), "proven", "{}", first.explain());

    let (mut again, json) = support::prove_command(&repo, &args, out_dir.path());
    again.arg("-q");
    let quiet = support::run(again, Some(json));
    assert_eq!(quiet.code, 0, "{}", quiet.explain());
    // Quiet means quiet: no refusal, and no log line either.
    assert_eq!(quiet.stderr, "", "{}", quiet.explain());
    let (again, json) = support::prove_command(&repo, &args, out_dir.path());
    let again = support::run(again, Some(json));
    let jobs = again.evidence.as_ref().expect("evidence")["jobs"]
        .as_array()
        .expect("jobs")
        .clone();
    assert!(
        jobs.iter().all(|job| job["cached"].is_object()),
        "{}",
        again.explain()
    );
    assert!(
        again
            .stderr
            .contains("[cache] 8 of 8 jobs answered from the cache"),
        "{}",
        again.explain()
    );
}

/// A node:test name written without its quotes falls back to the criterion's id, as the
/// rule for prose says; the user is told so before anything runs, with the quoted form.
#[test]
fn an_unquoted_node_test_name_is_answered_with_its_quoted_form() {
    let repo = node_pager();
    let run = prove(
        &repo,
        &unmutated_against_the_parent(&["--criterion", "test: partial last page is counted"]),
    );
    assert_eq!(run.code, 4, "{}", run.explain());
    assert!(
        run.stderr.contains(
            "warning: C1 names no test: unquoted words fall back to the criterion's id (tests named test_c1_…); to name the node test \"partial last page is counted\", quote it: test: \"partial last page is counted\""
        ),
        "{}",
        run.explain()
    );
}

/// A change that only adds a regression test for behaviour the pager already has.
fn test_only_change() -> Repo {
    let repo = pytest_pager_repo();
    repo.write(
        "tests/test_exact.py",
        "from pager import page_count\n\n\ndef test_exact_pages_are_counted():\n    assert page_count(15, 5) == 3\n",
    );
    repo.commit("tests: exact pages are counted");
    repo
}

#[test]
fn a_test_criterion_on_a_change_without_product_files_needs_the_persons_exception() {
    let repo = test_only_change();
    let criteria =
        unmutated_against_the_parent(&["--criterion", "test: test_exact_pages_are_counted"]);
    let refused = prove(&repo, &criteria);
    assert_eq!(refused.code, 2, "{}", refused.explain());
    assert_eq!(
        refused.stderr.trim_end().lines().count(),
        1,
        "{}",
        refused.explain()
    );
    for needed in [
        "touches no product file (only the test file tests/test_exact.py)",
        "--allow-test-only",
        "nothing ran",
    ] {
        assert!(
            refused.stderr.contains(needed),
            "{needed}: {}",
            refused.explain()
        );
    }
    assert!(refused.evidence.is_none());

    // The repository cannot grant it: its configuration has no such key.
    repo.write("assay.toml", "allow-test-only = true\n");
    let from_repo = prove(&repo, &criteria);
    assert_eq!(from_repo.code, 2, "{}", from_repo.explain());
    assert!(from_repo.evidence.is_none());
    std::fs::remove_file(repo.path().join("assay.toml")).expect("remove assay.toml");

    let granted = prove(&repo, &[&criteria[..], &["--allow-test-only"]].concat());
    assert_eq!(granted.code, 0, "{}", granted.explain());
    let evidence = granted.evidence.as_ref().expect("evidence");
    assert_eq!(evidence["test_only"], true);
    let c1 = granted.criterion("C1");
    assert_eq!(c1["verdict"], "proven", "{c1:#}");
    assert_eq!(c1["reason_code"], "passed_test_only", "{c1:#}");
    assert_eq!(c1["candidate"]["runs"].as_array().map(Vec::len), Some(3));

    let env_dir = tempfile::tempdir().expect("temp dir");
    let (mut by_env, json) = support::prove_command(&repo, &criteria, env_dir.path());
    by_env.env("ASSAY_ALLOW_TEST_ONLY", "1");
    let by_env = support::run(by_env, Some(json));
    assert_eq!(by_env.code, 0, "{}", by_env.explain());
    assert_eq!(by_env.verdict_of("C1"), "proven");
}

/// `assay ARGS` run to its end, as text.
fn assay_output(args: &[&str]) -> (Option<i32>, String, String) {
    let out = assay().args(args).output().expect("assay runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_names_every_exit_status_and_runner_and_an_empty_criterion_is_refused() {
    let (_, top, _) = assay_output(&["--help"]);
    for status in [
        "5 some mutant survived",
        "130 interrupted",
        "143 terminated",
    ] {
        assert!(top.contains(status), "{status}: {top}");
    }
    let (_, prove_help, _) = assay_output(&["prove", "--help"]);
    let runner = prove_help
        .split("--runner <RUNNER>")
        .nth(1)
        .and_then(|rest| rest.split("--test-command").next())
        .expect("prove --runner's help");
    assert!(runner.contains("cargo"), "{runner}");
    let (_, mutate_help, _) = assay_output(&["mutate", "--help"]);
    assert!(
        mutate_help.contains("built once") && !mutate_help.contains("a build per mutant"),
        "{mutate_help}"
    );

    let repo = pytest_pager_repo();
    let run = prove(&repo, &["--base", "main", "--criterion", "test:"]);
    assert_eq!(run.code, 2, "{}", run.explain());
    assert!(
        run.stderr.contains("criterion \"test:\" names no test"),
        "{}",
        run.explain()
    );
    assert!(run.evidence.is_none());
}

/// `assay test ARGS -C repo --json FILE` with a private state and cache, run to its end.
fn suite_run(repo: &Repo, args: &[&str]) -> Run {
    let out_dir = tempfile::tempdir().expect("temp dir");
    let json = out_dir.path().join("report.json");
    let mut command = assay();
    command
        .arg("test")
        .args(args)
        .arg("-C")
        .arg(repo.path())
        .arg("--json")
        .arg(&json)
        .env("ASSAY_STATE_DIR", out_dir.path().join("state"))
        .env("XDG_CACHE_HOME", out_dir.path().join("cache"));
    support::run(command, Some(json))
}

#[test]
fn a_case_is_selected_by_the_node_id_that_list_cases_displays() {
    let repo = pytest_pager_repo();
    let listing = assay()
        .args(["test", "--list-cases", "-C"])
        .arg(repo.path())
        .output()
        .expect("assay runs");
    let listed: serde_json::Value = serde_json::from_slice(&listing.stdout).expect("listing");
    let display = listed["cases"][0]["display"]
        .as_str()
        .expect("a display")
        .to_owned();
    assert_eq!(display, "tests/test_pages.py::test_full_pages");
    let run = suite_run(&repo, &["--case", &display]);
    assert_eq!(run.code, 0, "{}", run.explain());
    let report = run.evidence.as_ref().expect("report");
    assert_eq!(report["totals"]["total"], 1, "{report:#}");
    assert_eq!(report["cases"][0]["display"], display.as_str());
}

#[test]
fn a_unittest_suite_whose_tests_share_class_state_passes_as_it_does_under_unittest() {
    // Like pathspec's IterTreeTest: the first test records what the machine can do on the
    // class, and later tests of the class read it.
    let repo = Repo::new();
    repo.write("pager.py", support::PAGER_FIXED)
        .write("tests/__init__.py", "")
        .write(
            "tests/test_links.py",
            "import os\nimport tempfile\nimport unittest\n\n\nclass LinkTest(unittest.TestCase):\n    def test_1_check_symlink(self):\n        with tempfile.TemporaryDirectory() as tmp:\n            os.symlink(tmp, os.path.join(tmp, 'link'))\n        self.__class__.can_link = True\n\n    def test_2_links(self):\n        if not self.can_link:\n            self.skipTest('no symlinks')\n\n    def test_3_more_links(self):\n        self.assertTrue(self.can_link)\n",
        )
        .write(
            "tests/test_pages.py",
            "import unittest\n\nfrom pager import page_count\n\n\nclass PageTest(unittest.TestCase):\n    def test_full_pages(self):\n        self.assertEqual(page_count(10, 5), 2)\n\n    def test_partial_page(self):\n        self.assertEqual(page_count(11, 5), 3)\n",
        );
    repo.commit("pager with link checks");
    let plain = std::process::Command::new("python3")
        .args(["-m", "unittest"])
        .current_dir(repo.path())
        .output()
        .expect("python3 runs");
    let plain_stderr = String::from_utf8_lossy(&plain.stderr);
    assert!(
        plain.status.success() && plain_stderr.contains("Ran 5 tests"),
        "{plain_stderr}"
    );

    let run = suite_run(&repo, &["--runner", "unittest", "--no-cache"]);
    assert_eq!(run.code, 0, "{}", run.explain());
    let report = run.evidence.as_ref().expect("report");
    assert_eq!(report["totals"]["passed"], 5, "{report:#}");
    // A module's cases ran in one session; the two modules in their own.
    assert_eq!(
        report["jobs"].as_array().map(Vec::len),
        Some(2),
        "{report:#}"
    );
}

#[test]
fn a_unittest_failure_is_reported_with_its_traceback() {
    let repo = Repo::new();
    repo.write("pager.py", support::PAGER_BUGGY)
        .write("tests/__init__.py", "")
        .write(
            "tests/test_pages.py",
            "import unittest\n\nfrom pager import page_count\n\n\nclass PageTest(unittest.TestCase):\n    def test_partial_page(self):\n        self.assertEqual(page_count(11, 5), 3)\n",
        );
    repo.commit("pager");
    let run = suite_run(&repo, &["--runner", "unittest", "--no-cache"]);
    assert_eq!(run.code, 1, "{}", run.explain());
    let report = run.evidence.as_ref().expect("report");
    let message = report["cases"][0]["message"].as_str().expect("a message");
    for line in [
        "Traceback (most recent call last):",
        "self.assertEqual(page_count(11, 5), 3)",
        "AssertionError: 2 != 3",
    ] {
        assert!(message.contains(line), "{line}: {message}");
    }
}

#[test]
fn a_unittest_case_whose_id_does_not_load_costs_its_batch_nothing_else() {
    // A module that adds its product's doctests (`load_tests`): unittest names a doctest after
    // the function it tests, and that name does not load as a test.
    let repo = Repo::new();
    repo.write(
        "pager.py",
        "def page_count(total, size):\n    \"\"\"\n    >>> page_count(10, 5)\n    2\n    \"\"\"\n    return -(-total // size)\n",
    )
    .write("tests/__init__.py", "")
    .write(
        "tests/test_pages.py",
        "import doctest\nimport unittest\n\nimport pager\n\n\ndef load_tests(loader, tests, ignore):\n    tests.addTests(doctest.DocTestSuite(pager))\n    return tests\n\n\nclass PageTest(unittest.TestCase):\n    def test_full_pages(self):\n        self.assertEqual(pager.page_count(10, 5), 2)\n",
    );
    repo.commit("pager with doctests");
    let run = suite_run(
        &repo,
        &["--runner", "unittest", "--no-cache", "--shards", "1"],
    );
    let report = run.evidence.as_ref().expect("report");
    let full_pages = report["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .find(|case| {
            case["display"]
                .as_str()
                .is_some_and(|d| d.ends_with("test_full_pages"))
        })
        .unwrap_or_else(|| panic!("test_full_pages listed: {report:#}"));
    assert_eq!(full_pages["outcome"], "passed", "{report:#}");
}
