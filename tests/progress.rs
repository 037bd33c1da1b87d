//! Live progress as a person at a terminal sees it: `assay example` run under a real
//! pseudo-terminal (util-linux `script`), against the same run with stderr piped.

use crate::support;

use std::process::Command;

/// Runs `assay ARGS` under a pseudo-terminal and returns everything the terminal showed.
fn on_a_terminal(args: &str) -> String {
    let (shown, code) = on_a_terminal_with_code(args);
    assert_eq!(code, Some(0), "assay {args} failed on a terminal:\n{shown}");
    shown
}

/// [`on_a_terminal`], with assay's exit code.
fn on_a_terminal_with_code(args: &str) -> (String, Option<i32>) {
    let command = format!("{} {args}", env!("CARGO_BIN_EXE_assay"));
    let out = Command::new("script")
        .args(["--quiet", "--return", "--command", &command, "/dev/null"])
        .env("TERM", "xterm-256color")
        .env("COLUMNS", "160")
        .output()
        .expect("script (util-linux) runs");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code(),
    )
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
    // The example excludes one file from the mutation check: the count agrees with its noun.
    let stdout = String::from_utf8_lossy(&piped.stdout);
    assert!(
        stdout.contains("1 file excluded)"),
        "mutation summary:\n{stdout}"
    );
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

/// The mutation bar starts where the progress lines do (the mutants no test covers are settled
/// before any runs) and shows the run's own ETA, none before the first verdict: the bar's own
/// rate read that jump as speed ("0/9 mutants … ETA 0s", then minutes for a seconds-long run).
#[test]
fn a_mutation_run_on_a_terminal_counts_from_the_settled_mutants_with_the_runs_eta() {
    let repo = support::Repo::new();
    repo.write(
        "pager/__init__.py",
        "import time\n\n\ndef page_count(total, size):\n    time.sleep(0.3)\n    pages = total // size\n    if total % size > 0:\n        pages += 1\n    return pages\n\n\ndef clamp(page, last):\n    if page > last:\n        return last\n    return page\n",
    )
    .write(
        "tests/test_pager.py",
        "from pager import page_count\n\n\ndef test_partial_last_page_is_counted():\n    assert page_count(11, 5) == 3\n",
    );
    repo.commit("pager: count pages");
    let state = tempfile::tempdir().unwrap();
    let (shown, code) = on_a_terminal_with_code(&format!(
        "mutate -C {} --jobs 1 --no-cache --store file://{}",
        repo.path().display(),
        state.path().join("store").display()
    ));
    // `clamp` is never called: its mutants have no coverage, so the run exits 5.
    assert_eq!(code, Some(5), "{shown}");
    let plain = strip_ansi(&shown);
    let started = plain
        .lines()
        .find_map(|l| l.strip_prefix("[mutate] ")?.split_once(" mutants: "))
        .map(|(total, rest)| (total.to_owned(), rest.to_owned()))
        .unwrap_or_else(|| panic!("no start line:\n{plain}"));
    let (total, rest) = started;
    let uncovered: usize = rest
        .split(", ")
        .find_map(|part| part.split_once(" no coverage")?.0.parse().ok())
        .unwrap_or_else(|| panic!("no coverage count: {rest}"));
    assert!(uncovered > 0, "{rest}");
    let bars: Vec<&str> = plain
        .split(['\r', '\n'])
        .filter(|segment| segment.contains(" mutants · "))
        .collect();
    let first = bars.first().unwrap_or_else(|| panic!("no bar:\n{plain}"));
    assert!(
        first.contains(&format!("] {uncovered}/{total} mutants · ")),
        "{first}"
    );
    assert!(!first.contains("ETA"), "an ETA before any verdict: {first}");
    assert!(
        bars.iter()
            .any(|bar| bar.contains(" elapsed, ETA ") && !bar.contains("ETA 0s")),
        "no ETA of the run's:\n{plain}"
    );
}

/// The text of a terminal's output without its escape sequences.
fn strip_ansi(shown: &str) -> String {
    let mut out = String::with_capacity(shown.len());
    let mut chars = shown.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}
