//! Live progress as a person at a terminal sees it: `assay example` run under a real
//! pseudo-terminal (util-linux `script`), against the same run with stderr piped.

mod support;

use std::process::Command;

/// Runs `assay ARGS` under a pseudo-terminal and returns everything the terminal showed.
fn on_a_terminal(args: &str) -> String {
    let command = format!("{} {args}", env!("CARGO_BIN_EXE_assay"));
    let out = Command::new("script")
        .args(["--quiet", "--return", "--command", &command, "/dev/null"])
        .env("TERM", "xterm-256color")
        .env("COLUMNS", "160")
        .output()
        .expect("script (util-linux) runs");
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "assay {args} failed on a terminal:\n{shown}"
    );
    shown
}

#[test]
fn a_terminal_gets_a_live_bar_above_which_the_job_lines_scroll() {
    let dir = tempfile::tempdir().unwrap();
    let shown = on_a_terminal(&format!(
        "example --dir {}",
        dir.path().join("pager").display()
    ));
    // The bar: jobs done of all, running jobs, failures so far and an ETA.
    assert!(
        shown.contains("running · 0 failed"),
        "no live bar:\n{shown}"
    );
    assert!(shown.contains("ETA"), "no ETA:\n{shown}");
    assert!(
        shown.contains(" jobs · "),
        "the bar does not count jobs:\n{shown}"
    );
    // The plain lines still scroll above it, and the summary comes after it is cleared.
    assert!(shown.contains("[prove] 1/"), "job lines missing:\n{shown}");
    let summary = shown.rfind("PROVEN").expect("a verdict is printed");
    let last_bar = shown.rfind("running ·").expect("a bar was drawn");
    assert!(
        last_bar < summary,
        "the bar was drawn over the summary:\n{shown}"
    );
}

#[test]
fn plain_progress_on_a_terminal_and_piped_stderr_draw_no_bar() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("pager");
    support::run(
        {
            let mut example = support::assay();
            example.args(["example", "--quiet", "--dir"]).arg(&repo);
            example
        },
        None,
    );
    let prove = format!(
        "prove -C {} --base main~1 --candidate main --progress plain --store file://{} --criterion 'test: test_partial_last_page_is_counted'",
        repo.display(),
        dir.path().join("store").display()
    );
    let shown = on_a_terminal(&prove);
    assert!(shown.contains("[prove] 1/"), "job lines missing:\n{shown}");
    assert!(
        !shown.contains("running ·"),
        "a bar under --progress plain:\n{shown}"
    );

    let piped = support::assay()
        .args(["prove", "-C"])
        .arg(&repo)
        .args([
            "--base",
            "main~1",
            "--candidate",
            "main",
            "--criterion",
            "test: test_partial_last_page_is_counted",
        ])
        .arg("--store")
        .arg(format!("file://{}", dir.path().join("store2").display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&piped.stderr);
    assert!(
        stderr.contains("[prove] 1/"),
        "job lines missing:\n{stderr}"
    );
    assert!(!stderr.contains("running ·"), "a bar on a pipe:\n{stderr}");
}

#[test]
fn a_suite_run_on_a_terminal_counts_cases_in_its_bar() {
    let repo = support::pytest_pager_repo();
    let state = tempfile::tempdir().unwrap();
    let shown = on_a_terminal(&format!(
        "test -C {} --runner pytest --state-dir {} --store file://{}",
        repo.path().display(),
        state.path().display(),
        state.path().join("store").display()
    ));
    assert!(
        shown.contains(" cases · "),
        "the bar does not count cases:\n{shown}"
    );
    assert!(shown.contains("running ·"), "no live bar:\n{shown}");
    assert!(
        shown.contains("[test] 0/"),
        "the plain lines are gone:\n{shown}"
    );
}
