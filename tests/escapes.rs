//! Ways around the sandbox, tried end to end with the real binary and its defaults: nothing a
//! repository chooses runs on the host, and nothing it commits crashes the process.

use crate::support;

use std::path::Path;
use support::Repo;

/// A repository whose `assay.toml` runs its own `tools/py` as the test command. The script
/// records on the host, at `mark`, any run outside the sandbox (inside, the path is on a
/// read-only root or a private `/tmp`), then runs Python as asked.
fn repo_with_own_interpreter(mark: &Path) -> Repo {
    let repo = support::pytest_pager_repo();
    support::write_script(
        &repo.path().join("tools/py"),
        &format!(
            "#!/bin/sh\necho \"ran with $* in $(pwd)\" >> {} 2>/dev/null\nexec python3 \"$@\"\n",
            mark.display()
        ),
    );
    repo.write("assay.toml", "test-command = \"./tools/py -m pytest\"\n");
    repo.commit("tools: the project's own interpreter wrapper");
    support::commit_pager_fix(&repo);
    repo
}

#[test]
fn a_repositorys_own_test_command_never_runs_on_the_host_to_key_the_cache() {
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mark = outside.path().join("ran-on-host");
    let repo = repo_with_own_interpreter(&mark);
    let out = tempfile::tempdir().unwrap();
    // Run from the checkout's root, as a CI job does: a relative program there resolves to the
    // repository's own script.
    let (mut command, json) = support::prove_command(
        &repo,
        &[
            "--base",
            "HEAD~1",
            "--no-mutation",
            "--repeats",
            "1",
            "--criterion",
            "test: test_partial_last_page_is_counted",
        ],
        out.path(),
    );
    command.current_dir(repo.path());
    let run = support::run(command, Some(json));
    assert!(
        !mark.exists(),
        "the repository's program ran on the host: {}",
        std::fs::read_to_string(&mark).unwrap_or_default()
    );
    // The script did run where it belongs, in the sandbox: the proof is decided.
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.verdict_of("C1"), "proven", "{}", run.explain());
}

#[test]
fn a_product_file_nested_200k_deep_is_reported_by_assay_mutate_not_a_crash() {
    let repo = Repo::new();
    let nested = format!("{}1 +{}", "(".repeat(200_000), ")".repeat(200_000));
    repo.write(
        "pager.py",
        &format!("def page_count(total, size):\n    return total // size\n\n\nLIMIT = {nested}\n"),
    )
    .write(
        "tests/test_pages.py",
        "from pager import page_count\n\n\ndef test_full_pages():\n    assert page_count(10, 5) == 2\n",
    )
    .write("conftest.py", "");
    repo.commit("pager with a generated table");
    let out = tempfile::tempdir().unwrap();
    let mut command = support::assay();
    command
        .arg("mutate")
        .arg("-C")
        .arg(repo.path())
        .arg("pager.py")
        .arg("--store")
        .arg(format!("file://{}", out.path().join("store").display()))
        .env("ASSAY_STATE_DIR", out.path().join("state"));
    let run = support::run(command, None);
    // Refused or reported, with a line that says so; never a crash (101) or an abort (134).
    assert!(
        [0, 2, 3, 4, 5].contains(&run.code),
        "assay mutate crashed: {}",
        run.explain()
    );
    assert!(
        !run.stderr.contains("overflowed its stack"),
        "{}",
        run.explain()
    );
}
