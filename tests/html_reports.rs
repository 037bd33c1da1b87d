//! End-to-end tests of the reports people and CI read: `--html`, `--annotations github` and
//! `--summary-md` on `assay prove`, `assay test` and `assay mutate`, and `assay report` on the
//! saved JSON. Real git repositories, real pytest, and the pages rendered by a real headless
//! Chromium, whose DOM is read back and whose screenshots land in `target/html-screenshots/`.
//! Needs `python3` with `pytest` and `coverage`, and `chromium` (skipped with a note when it is
//! missing and `CI` is unset).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::{PAGER_BUGGY, Repo, assay};

/// The browser, or `None` (outside CI) when it is not installed.
fn chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Ok(out) = Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .output()
            && out.status.success()
        {
            return Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
        }
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "chromium is not installed, and CI is set: the HTML reports must be checked in a browser"
    );
    eprintln!(
        "note: chromium is not installed; skipping the browser check (set CI to fail instead)"
    );
    None
}

fn screenshot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/html-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}

/// What the browser made of a page: its DOM after the scripts ran, and every console message
/// or uncaught error it logged.
struct Rendered {
    dom: String,
    console: Vec<String>,
}

fn chromium_args(profile: &Path) -> Vec<String> {
    vec![
        "--headless".to_owned(),
        "--no-sandbox".to_owned(),
        "--disable-gpu".to_owned(),
        "--no-first-run".to_owned(),
        format!("--user-data-dir={}", profile.display()),
        "--virtual-time-budget=3000".to_owned(),
        // Without it a screenshot can be taken before every tile is painted (white blocks).
        "--run-all-compositor-stages-before-draw".to_owned(),
        "--enable-logging=stderr".to_owned(),
        "--v=0".to_owned(),
    ]
}

fn render(browser: &Path, page: &Path) -> Rendered {
    let profile = tempfile::tempdir().expect("profile dir");
    let dump = Command::new(browser)
        .args(chromium_args(profile.path()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    let stderr = String::from_utf8_lossy(&dump.stderr);
    assert!(dump.status.success(), "chromium failed: {stderr}");
    let dom = String::from_utf8_lossy(&dump.stdout).into_owned();
    assert!(dom.contains("</html>"), "no DOM: {stderr}");
    let mut console: Vec<String> = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .map(str::to_owned)
        .collect();
    // The reports' own error hook writes into the DOM, in case the log level hides it.
    if let Some(at) = dom.find("data-script-error=\"") {
        console.push(dom[at..].chars().take(200).collect());
    }
    Rendered { dom, console }
}

/// Renders `page` in headless Chromium and returns its DOM; fails on any console message or
/// script error; saves a 1366×900 screenshot as `target/html-screenshots/NAME.png`.
fn browse(browser: &Path, page: &Path, name: &str) -> String {
    let rendered = render(browser, page);
    assert!(
        rendered.console.is_empty(),
        "console output from {name}: {:#?}",
        rendered.console
    );
    let shot = screenshot_dir().join(format!("{name}.png"));
    let _ = std::fs::remove_file(&shot);
    let profile = tempfile::tempdir().expect("profile dir");
    let out = Command::new(browser)
        .args(chromium_args(profile.path()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1366,900")
        .arg("--hide-scrollbars")
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success() && shot.is_file(),
        "no screenshot of {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    rendered.dom
}

#[test]
fn the_browser_check_catches_a_script_error() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let page = dir.path().join("broken.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><head><script>window.onerror=function(m){document.documentElement.setAttribute('data-script-error',String(m));};</script></head><body><script>undefinedFunction();</script></body></html>",
    )
    .unwrap();
    let rendered = render(&browser, &page);
    assert!(
        rendered
            .console
            .iter()
            .any(|l| l.contains("undefinedFunction")),
        "{:#?}\n{}",
        rendered.console,
        rendered.dom
    );
}

fn occurrences(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

fn out_of(command: &mut Command) -> (i32, String, String) {
    let out = command.output().expect("assay runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `assay report SAVED --store STORE --html OUT`, returning the page.
fn report_again(saved: &Path, store: &str, out: &Path) -> String {
    let (code, stdout, stderr) = out_of(
        assay()
            .arg("report")
            .arg(saved)
            .arg("--store")
            .arg(store)
            .arg("--html")
            .arg(out),
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    std::fs::read_to_string(out).expect("report written")
}

/// A pager fix whose new test prints a script tag on the base, where it fails.
fn pager_fix() -> Repo {
    let repo = Repo::new();
    repo.write("pager.py", PAGER_BUGGY)
        .write("conftest.py", "")
        .write(
            "tests/test_pages.py",
            "from pager import page_count\n\n\ndef test_full_pages():\n    assert page_count(10, 5) == 2\n",
        );
    repo.commit("pager: count pages");
    repo.write("pager.py", support::PAGER_FIXED).write(
        "tests/test_partial.py",
        "from pager import page_count\n\n\ndef test_partial_last_page_is_counted():\n    print(\"<script>document.documentElement.setAttribute('data-pwned','yes')</script>\")\n    assert page_count(11, 5) == 3\n",
    );
    repo.commit("pager: count the partial last page");
    repo
}

fn prove(repo: &Repo, dir: &Path, criteria: &[&str], extra: &[&str]) -> (i32, String, String) {
    let mut command = assay();
    command
        .arg("prove")
        .arg("-C")
        .arg(repo.path())
        .args([
            "--base",
            "main~1",
            "--jobs",
            "2",
            "--mutation-budget",
            "120",
        ])
        .arg("--json")
        .arg(dir.join("proof.json"))
        .arg("--store")
        .arg(format!("file://{}", dir.join("store").display()))
        .env("ASSAY_STATE_DIR", dir.join("state"))
        .args(extra);
    for c in criteria {
        command.arg("--criterion").arg(c);
    }
    out_of(&mut command)
}

#[test]
fn a_proof_report_shows_the_verdict_criteria_timeline_and_logs_with_markup_as_text() {
    let repo = pager_fix();
    let dir = tempfile::tempdir().expect("temp dir");
    let html = dir.path().join("proof.html");
    let summary = dir.path().join("summary.md");
    let (code, stdout, stderr) = prove(
        &repo,
        dir.path(),
        &[
            "test: test_partial_last_page_is_counted",
            "guard: test_full_pages",
        ],
        &[
            "--html",
            html.to_str().unwrap(),
            "--summary-md",
            summary.to_str().unwrap(),
            "--annotations",
            "github",
        ],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let evidence: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("proof.json")).unwrap()).unwrap();
    let jobs = evidence["jobs"].as_array().unwrap();
    assert!(
        jobs.iter().all(|j| j["started_at_ms"].is_u64()),
        "every job has its start offset: {evidence:#}"
    );
    assert!(!stdout.contains("::error"), "{stdout}");
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(md.contains("**PROVEN**"), "{md}");
    assert!(
        md.contains("| C1 test | `test_partial_last_page_is_counted` | ✅ proven"),
        "{md}"
    );

    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "nothing fetched"
    );
    let store = format!("file://{}", dir.path().join("store").display());
    let again = report_again(
        &dir.path().join("proof.json"),
        &store,
        &dir.path().join("again.html"),
    );
    assert_eq!(
        again, page,
        "assay report renders the saved evidence the same"
    );

    let Some(browser) = chromium() else { return };
    let dom = browse(&browser, &html, "proof");
    assert!(dom.contains("id=\"verdict\">PROVEN</div>"), "{dom}");
    assert_eq!(
        occurrences(&dom, "class=\"criterion\" data-verdict=\"proven\""),
        2
    );
    assert_eq!(
        occurrences(&dom, "<g class=\"job\""),
        jobs.len(),
        "a bar per job"
    );
    assert!(dom.contains("id=\"slowest\">slowest: job #"), "{dom}");
    // The base run's failing test printed a script tag: it is text in the log, never run.
    assert!(
        dom.contains(
            "&lt;script&gt;document.documentElement.setAttribute('data-pwned','yes')&lt;/script&gt;"
        ),
        "the log line is shown as text: {dom}"
    );
    assert!(!dom.contains("data-pwned=\"yes\""), "the log's script ran");
    assert!(dom.contains("id=\"mutation-check\""), "{dom}");
    let check = &evidence["mutation_check"];
    assert_eq!(
        occurrences(&dom, "class=\"mutant\" data-status=\"killed\""),
        check["killed"].as_u64().unwrap() as usize
    );
    assert_eq!(
        occurrences(&dom, "class=\"mutant\" data-status=\"survived\""),
        check["survived"].as_u64().unwrap() as usize
    );
}

#[test]
fn a_refuted_criterion_is_annotated_at_its_test_and_the_report_says_refuted() {
    let repo = pager_fix();
    let dir = tempfile::tempdir().expect("temp dir");
    let html = dir.path().join("proof.html");
    let summary = dir.path().join("summary.md");
    // test_full_pages passes on the base too: as a `test:` criterion it is refuted.
    let (code, stdout, stderr) = prove(
        &repo,
        dir.path(),
        &["test: test_full_pages"],
        &[
            "--annotations",
            "github",
            "--html",
            html.to_str().unwrap(),
            "--summary-md",
            summary.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains(
            "::error file=tests/test_pages.py,line=4,title=assay%3A C1 refuted::C1 test: test_full_pages is refuted: "
        ),
        "{stdout}"
    );
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(
        md.contains("## ❌ Proof") && md.contains("**REFUTED**"),
        "{md}"
    );
    let Some(browser) = chromium() else { return };
    let dom = browse(&browser, &html, "proof-refuted");
    assert!(dom.contains("id=\"verdict\">REFUTED</div>"), "{dom}");
    assert_eq!(
        occurrences(&dom, "class=\"criterion\" data-verdict=\"refuted\""),
        1
    );
}

/// A pager library whose tests pin one page count and never call `clamp`.
fn pager_library() -> Repo {
    let repo = Repo::new();
    repo.write(
        "pager/__init__.py",
        "def page_count(total, size):\n    pages = total // size\n    if total % size > 0:\n        pages += 1\n    return pages\n\n\ndef clamp(page, last):\n    if page > last:\n        return last\n    return page\n",
    )
    .write("conftest.py", "")
    .write(
        "tests/test_pager.py",
        "from pager import page_count\n\n\ndef test_partial_last_page_is_counted():\n    assert page_count(11, 5) == 3\n",
    );
    repo.commit("pager: count pages");
    repo
}

#[test]
fn a_mutation_report_marks_every_mutant_on_its_line_with_a_score_per_file() {
    let repo = pager_library();
    let dir = tempfile::tempdir().expect("temp dir");
    let (json, html, summary) = (
        dir.path().join("mutation.json"),
        dir.path().join("mutation.html"),
        dir.path().join("summary.md"),
    );
    let (code, stdout, stderr) = out_of(
        assay()
            .arg("mutate")
            .arg("-C")
            .arg(repo.path())
            .args(["--jobs", "2", "--annotations", "github"])
            .arg("--json")
            .arg(&json)
            .arg("--html")
            .arg(&html)
            .arg("--summary-md")
            .arg(&summary)
            .arg("--store")
            .arg(format!("file://{}", dir.path().join("store").display())),
    );
    assert_eq!(code, 5, "{stdout}{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let mutants = doc["files"]["pager/__init__.py"]["mutants"]
        .as_array()
        .unwrap();
    let with = |status: &str| mutants.iter().filter(|m| m["status"] == status).count();
    let survivors: Vec<&serde_json::Value> = mutants
        .iter()
        .filter(|m| m["status"] == "Survived")
        .collect();
    assert!(!survivors.is_empty() && with("NoCoverage") > 0, "{doc:#}");
    for m in &survivors {
        let line = m["location"]["start"]["line"].as_u64().unwrap();
        assert!(
            stdout.contains(&format!(
                "::warning file=pager/__init__.py,line={line},title=assay%3A mutant survived::mutant {}",
                m["id"].as_str().unwrap()
            )),
            "{stdout}"
        );
    }
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(md.contains("## Mutation score: **"), "{md}");
    assert!(md.contains("| `pager/__init__.py` |"), "{md}");

    let page = std::fs::read_to_string(&html).unwrap();
    let again = report_again(&json, "memory://", &dir.path().join("again.html"));
    assert_eq!(
        again, page,
        "assay report renders the saved report the same"
    );

    let Some(browser) = chromium() else { return };
    let dom = browse(&browser, &html, "mutation");
    let killed = with("Killed") + with("Timeout");
    let score = killed as f64 / (killed + with("Survived") + with("NoCoverage")) as f64;
    assert!(
        dom.contains(&format!("id=\"score\">{:.1}%</div>", score * 100.0)),
        "{dom}"
    );
    for (status, n) in [
        ("Killed", with("Killed")),
        ("Survived", with("Survived")),
        ("NoCoverage", with("NoCoverage")),
    ] {
        assert_eq!(
            occurrences(&dom, &format!("class=\"mutant\" data-status=\"{status}\"")),
            n,
            "{status}"
        );
    }
    // The survivor's line is marked, and its diff shows the replacement.
    let line = survivors[0]["location"]["start"]["line"].as_u64().unwrap();
    assert!(
        dom.contains(&format!(
            "<div class=\"ln bad\"><span class=\"no\">{line}</span>"
        )),
        "{dom}"
    );
    assert!(dom.contains("<span class=\"add\">"), "{dom}");
    assert_eq!(occurrences(&dom, "<tr class=\"file\">"), 1);
}

const QUARANTINE: &str = "[[quarantine]]\ntest = \"tests/test_billing.py::test_flaky_clock\"\nreason = \"depends on the wall clock\"\nadded = \"2026-09-02\"\n";

#[test]
fn a_suite_report_lists_cases_by_status_with_output_and_the_trend_of_the_last_runs() {
    let repo = Repo::new();
    repo.write("conftest.py", "")
        .write(".assay/quarantine.toml", QUARANTINE)
        .write(
            "tests/test_billing.py",
            "def test_total():\n    assert 1 + 1 == 2\n\n\ndef test_flaky_clock():\n    assert False, 'clock skew'\n",
        );
    repo.commit("billing");
    let dir = tempfile::tempdir().expect("temp dir");
    let store = format!("file://{}", dir.path().join("store").display());
    let run = |html: &Path| {
        out_of(
            assay()
                .arg("test")
                .arg("-C")
                .arg(repo.path())
                .args([
                    "--runner",
                    "pytest",
                    "--jobs",
                    "2",
                    "--annotations",
                    "github",
                ])
                .arg("--json")
                .arg(dir.path().join("suite.json"))
                .arg("--html")
                .arg(html)
                .arg("--summary-md")
                .arg(dir.path().join("summary.md"))
                .arg("--store")
                .arg(&store)
                .env("ASSAY_STATE_DIR", dir.path().join("state")),
        )
    };
    let (code, stdout, stderr) = run(&dir.path().join("first.html"));
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stderr.contains("[test] FAIL (quarantined) tests/test_billing.py::test_flaky_clock"),
        "{stderr}"
    );
    assert!(
        stderr.contains("[test] 1/2 passed, 1 quarantined"),
        "{stderr}"
    );
    assert!(!stderr.contains("2/2 passed"), "{stderr}");
    assert!(
        !stdout.contains("::error"),
        "a quarantined failure is no error: {stdout}"
    );

    // The second run has a real failure whose message carries markup.
    repo.write(
        "tests/test_render.py",
        "def test_title():\n    title = '<script>document.documentElement.setAttribute(\"data-pwned\",\"yes\")</script>'\n    assert title == 'Invoice'\n",
    );
    repo.commit("render");
    let html = dir.path().join("suite.html");
    let (code, stdout, stderr) = run(&html);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains("::error file=tests/test_render.py,line=1,title=assay%3A test failed::tests/test_render.py::test_title failed"),
        "{stdout}"
    );
    let md = std::fs::read_to_string(dir.path().join("summary.md")).unwrap();
    assert!(md.contains("| 1 | 1 | 0 | 1 | 0 | 0 | 3 |"), "{md}");
    assert!(md.contains("(quarantined)"), "{md}");

    let page = std::fs::read_to_string(&html).unwrap();
    let again = report_again(
        &dir.path().join("suite.json"),
        &store,
        &dir.path().join("again.html"),
    );
    assert_eq!(
        again, page,
        "assay report renders the saved report the same"
    );

    let Some(browser) = chromium() else { return };
    let dom = browse(&browser, &html, "suite");
    assert!(dom.contains("id=\"verdict\">FAILED</div>"), "{dom}");
    for (status, n) in [("failed", 1), ("quarantined", 1), ("passed", 1)] {
        assert_eq!(
            occurrences(&dom, &format!("class=\"case\" data-status=\"{status}\"")),
            n,
            "{status}"
        );
    }
    assert!(
        dom.contains("&lt;script&gt;document.documentElement"),
        "{dom}"
    );
    assert!(
        !dom.contains("data-pwned=\"yes\""),
        "the message's script ran"
    );
    // Two runs in the trend: passed bars for both, a failed bar for the second only.
    assert_eq!(occurrences(&dom, "class=\"run-passed\""), 2, "{dom}");
    assert_eq!(occurrences(&dom, "class=\"run-failed\""), 1, "{dom}");
    assert_eq!(occurrences(&dom, "<circle class=\"duration\""), 2, "{dom}");
    assert!(dom.contains("id=\"alerts\""), "{dom}");
    assert!(dom.contains("new failure"), "the regression alert: {dom}");
}

#[test]
fn a_proof_answered_from_the_result_cache_draws_its_cached_jobs_apart_from_the_slots() {
    let repo = pager_fix();
    let dir = tempfile::tempdir().expect("temp dir");
    let html = dir.path().join("proof.html");
    let criteria = [
        "test: test_partial_last_page_is_counted",
        "guard: test_full_pages",
    ];
    let (code, stdout, stderr) = prove(&repo, dir.path(), &criteria, &["--no-mutation"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (code, stdout, stderr) = prove(
        &repo,
        dir.path(),
        &criteria,
        &["--no-mutation", "--html", html.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let evidence: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("proof.json")).unwrap()).unwrap();
    let jobs = evidence["jobs"].as_array().unwrap();
    let cached = jobs.iter().filter(|j| j["cached"].is_object()).count();
    assert!(cached > 0, "the second proof used the cache: {stderr}");
    let Some(browser) = chromium() else { return };
    let dom = browse(&browser, &html, "proof-cached");
    assert_eq!(
        occurrences(&dom, "<g class=\"job cached\""),
        cached,
        "{dom}"
    );
    assert_eq!(occurrences(&dom, "<g class=\"job\""), jobs.len() - cached);
    assert!(dom.contains(">cached</text>"), "{dom}");
}
