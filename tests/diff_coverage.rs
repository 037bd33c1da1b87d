//! Diff coverage through the real binary: the proving tests run once more under coverage.py
//! and the evidence names each changed product hunk they did or did not execute.

use crate::support;

use support::{Repo, Run};

/// A fix to `page_count` and a new, untested `clamp`, with a test for the fix only.
fn fix_with_an_untested_helper() -> Repo {
    let repo = support::pytest_pager_repo();
    repo.write(
        "pager.py",
        "def page_count(total, size):\n    pages = total // size\n    if total % size > 0:\n        pages += 1\n    return pages\n\n\ndef clamp(page, last):\n    if page > last:\n        return last\n    return page\n",
    );
    let tests = std::fs::read_to_string(repo.path().join("tests/test_pages.py")).unwrap();
    repo.write(
        "tests/test_pages.py",
        &format!("{tests}\n\ndef test_partial_last_page_is_counted():\n    assert page_count(11, 5) == 3\n"),
    );
    repo.commit("pager: count the last partial page; clamp pages");
    repo
}

/// `assay prove` of the change at HEAD against its parent with `criterion` (and `more`), no
/// mutation check: it must prove, and its diff coverage record was made by `tool`.
fn proven_with_coverage(
    repo: &Repo,
    criterion: &str,
    more: &[&str],
    tool: &str,
) -> (Run, serde_json::Value) {
    let mut args = vec![
        "--base",
        "HEAD~1",
        "--no-mutation",
        "--criterion",
        criterion,
    ];
    args.extend_from_slice(more);
    let run = support::prove(repo, &args);
    assert_eq!(run.code, 0, "{}", run.explain());
    let coverage = run.evidence.as_ref().expect("evidence")["diff_coverage"].clone();
    assert_eq!(coverage["tool"], tool, "{coverage:#}");
    (run, coverage)
}

#[test]
fn the_hunks_no_proving_test_executed_are_named_in_the_evidence_and_the_summary() {
    let repo = fix_with_an_untested_helper();
    let (run, coverage) = proven_with_coverage(
        &repo,
        "test: test_partial_last_page_is_counted",
        &[],
        "coverage.py",
    );
    let coverage = &coverage;
    // One hunk, as git shows it (the blank lines between the functions are added too): the
    // fix's lines ran, `clamp`'s body did not (its `def` line ran at import).
    let hunks = coverage["hunks"].as_array().expect("hunks");
    assert_eq!(hunks.len(), 1, "{coverage:#}");
    assert_eq!(
        (hunks[0]["start"].as_u64(), hunks[0]["end"].as_u64()),
        (Some(2), Some(11))
    );
    assert_eq!(hunks[0]["status"], "partly_executed", "{coverage:#}");
    assert_eq!(
        hunks[0]["missed_lines"],
        serde_json::json!([9, 10, 11]),
        "{coverage:#}"
    );
    assert_eq!(
        coverage["report"]["sha256"].as_str().map(str::len),
        Some(64)
    );
    assert!(
        run.stdout.contains(
            "diff coverage (coverage.py): the proving tests executed 0 of 1 changed hunks whole"
        ),
        "{}",
        run.explain()
    );
    assert!(
        run.stdout.contains("not executed: pager.py:9-11"),
        "{}",
        run.explain()
    );
}

#[test]
fn a_test_only_change_or_another_runner_records_no_diff_coverage() {
    let repo = support::pytest_pager_repo();
    let tests = std::fs::read_to_string(repo.path().join("tests/test_pages.py")).unwrap();
    repo.write(
        "tests/test_pages.py",
        &format!("{tests}\n\ndef test_one_page():\n    assert page_count(5, 5) == 1\n"),
    );
    repo.commit("tests: one page");
    let run = support::prove(
        &repo,
        &[
            "--base",
            "HEAD~1",
            "--no-mutation",
            "--criterion",
            "guard: test_one_page",
        ],
    );
    let evidence = run.evidence.as_ref().expect("evidence");
    assert!(evidence.get("diff_coverage").is_none(), "{evidence:#}");
}

/// Go: the proving tests run once more with `-coverprofile`, every package measured; the
/// fix's line ran, a new helper no proving test calls did not.
#[test]
fn a_go_proof_names_the_changed_lines_its_proving_tests_did_not_execute() {
    let repo = support::Repo::new();
    repo.copy_fixture("go-cache", &[]);
    repo.commit("cache and ledger");
    let cache = std::fs::read_to_string(repo.path().join("cache/cache.go")).unwrap();
    repo.write(
        "cache/cache.go",
        &format!(
            "{}\n// Stale reports whether an entry should be refreshed before it expires.\nfunc Stale(age, ttl int) bool {{\n\tif ttl <= 0 {{\n\t\treturn true\n\t}}\n\treturn age*2 >= ttl\n}}\n",
            cache.replace("age > ttl", "age >= ttl")
        ),
    );
    repo.commit("cache: expire at the ttl; stale entries");
    let (run, coverage) = proven_with_coverage(
        &repo,
        "test: TestCacheExpiry/at_the_limit",
        &[],
        "go test -coverprofile",
    );
    let coverage = &coverage;
    // One hunk, as git shows it: the fixed comparison ran, `Stale`'s body did not.
    let hunks = coverage["hunks"].as_array().expect("hunks");
    assert_eq!(hunks.len(), 1, "{coverage:#}");
    assert_eq!(hunks[0]["path"], "cache/cache.go", "{coverage:#}");
    assert_eq!(hunks[0]["status"], "partly_executed", "{coverage:#}");
    let missed: Vec<u64> = hunks[0]["missed_lines"]
        .as_array()
        .expect("missed lines")
        .iter()
        .filter_map(|l| l.as_u64())
        .collect();
    assert!(
        !missed.contains(&6) && missed.contains(&11) && missed.contains(&13),
        "{coverage:#}"
    );
    assert!(
        run.stdout.contains("diff coverage (go test -coverprofile)"),
        "{}",
        run.explain()
    );
}

/// node: the proving tests run once more under `NODE_V8_COVERAGE`; in the CommonJS module the
/// fix ran and a new helper did not, likewise in the ES module, and the changed exporter no
/// test loads is listed as not measured. The summary and the HTML say so.
#[test]
fn a_node_proof_names_the_changed_lines_its_proving_tests_did_not_execute() {
    let repo = support::node_pager_change();
    let out = tempfile::tempdir().expect("temp dir");
    let html = out.path().join("proof.html");
    let (run, coverage) = proven_with_coverage(
        &repo,
        "test: test_partial_last_page_is_counted",
        &["--html", html.to_str().expect("a UTF-8 path")],
        "node V8 coverage",
    );
    let coverage = &coverage;
    assert!(coverage.get("note").is_none(), "{coverage:#}");
    let hunks = support::coverage_hunks(coverage);
    let status_at = |path: &str, line: u64| {
        hunks
            .iter()
            .find(|(p, start, _, _)| p == path && *start <= line)
            .map(|(_, _, status, missed)| (status.clone(), missed.clone()))
    };
    // CommonJS: the fixed return ran; the change to `clamp`, which no test calls, did not.
    assert_eq!(
        status_at("lib/pager.js", 4),
        Some(("executed".to_owned(), vec![])),
        "{coverage:#}"
    );
    // The second hunk of each file: its path, the line it starts after, and what it missed.
    let later = |path: &str, after: u64| {
        hunks
            .iter()
            .find(|(p, start, _, _)| p == path && *start > after)
            .map(|(_, _, status, missed)| (status.as_str(), missed.as_slice()))
    };
    assert_eq!(
        later("lib/pager.js", 4),
        Some(("not_executed", &[8, 9, 10][..])),
        "clamp's hunk: {coverage:#}"
    );
    // The ES module, loaded by a dynamic import: `first` ran, `last` did not.
    assert_eq!(
        status_at("lib/range.mjs", 2),
        Some(("executed".to_owned(), vec![])),
        "{coverage:#}"
    );
    assert_eq!(
        later("lib/range.mjs", 2),
        Some(("not_executed", &[6][..])),
        "last's hunk: {coverage:#}"
    );
    assert_eq!(hunks.len(), 4, "{coverage:#}");
    assert_eq!(
        coverage["unmeasured_files"],
        serde_json::json!(["lib/export.js"]),
        "{coverage:#}"
    );
    assert_eq!(
        coverage["report"]["sha256"].as_str().map(str::len),
        Some(64)
    );
    for line in [
        "diff coverage (node V8 coverage): the proving tests executed 2 of 4 changed hunks whole",
        "not executed: lib/pager.js:8-10, lib/range.mjs:6",
        "not measured: lib/export.js",
    ] {
        assert!(run.stdout.contains(line), "{line}: {}", run.explain());
    }
    let page = std::fs::read_to_string(&html).expect("the HTML report");
    for shown in [
        "measured with node V8 coverage",
        "lib/range.mjs:6-6",
        "not executed</span></td><td class=\"mono\">8, 9, 10</td>",
        "not measured: lib/export.js",
    ] {
        assert!(page.contains(shown), "{shown} not in the HTML report");
    }
}

/// TypeScript runs as the JavaScript its types erase to: the coverage run's erasure writes
/// each file's source map inline, and the changed lines are named by the TypeScript the change
/// wrote. The fix ran; the new `clamp`, which no test calls, did not; a type alias holds no
/// code that runs.
#[test]
fn a_typescript_proof_names_the_changed_typescript_lines_its_tests_did_not_execute() {
    let repo = support::typed_pager_repo();
    let tests = support::TYPED_PAGER_TESTS;
    repo.write(
        "src/pager.ts",
        "export interface Listing { items: number; per: number }\n\nexport function pages({ items, per }: Listing): number {\n  return Math.ceil(items / per);\n}\n\nexport type Page = number;\n\nexport function clamp(page: Page, last: Page): Page {\n  if (page > last) {\n    return last;\n  }\n  return page;\n}\n",
    )
    .write(
        "test/pager.test.ts",
        &format!("{tests}\ntest('a partial last page is counted', () => {{\n  assert.equal(pages({{ items: 11, per: 5 }}), 3);\n}});\n"),
    );
    repo.commit("pager: count the last partial page; clamp pages");
    let (run, coverage) = proven_with_coverage(
        &repo,
        "test: \"a partial last page is counted\"",
        &[],
        "node V8 coverage",
    );
    let coverage = &coverage;
    assert!(coverage.get("note").is_none(), "{coverage:#}");
    assert_eq!(
        coverage["unmeasured_files"],
        serde_json::json!([]),
        "{coverage:#}"
    );
    // One hunk (the fix, then `clamp` after one unchanged line): the fix ran, `clamp`'s body
    // did not, and neither its type alias nor the interface is code.
    let hunks = support::coverage_hunks(coverage);
    assert_eq!(
        hunks,
        [(
            "src/pager.ts".to_owned(),
            4,
            "partly_executed".to_owned(),
            vec![10, 11, 12, 13]
        )],
        "{coverage:#}"
    );
    assert!(
        run.stdout.contains("not executed: src/pager.ts:10-13"),
        "{}",
        run.explain()
    );
}

/// The guest writes the coverage: a test that plants a V8 file of its own, with a range past
/// the changed file's end, gets the record refused with why, and the verdict is untouched.
#[test]
fn a_planted_v8_coverage_file_is_refused_in_the_record_and_never_decides() {
    let repo = support::node_pager_repo();
    repo.write(
        "lib/pager.js",
        "'use strict';\n\nfunction pageCount(total, size) {\n  return Math.ceil(total / size);\n}\n\nfunction clamp(page, last) {\n  return page;\n}\n\nmodule.exports = { pageCount, clamp };\n",
    )
    .write(
        "test/pager.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\nconst fs = require('node:fs');\nconst path = require('node:path');\nconst { pathToFileURL } = require('node:url');\nconst { pageCount } = require('../lib/pager.js');\n\ntest('test_partial_last_page_is_counted', () => {\n  assert.strictEqual(pageCount(11, 5), 3);\n  const dir = process.env.NODE_V8_COVERAGE;\n  if (dir) {\n    const url = pathToFileURL(path.resolve('lib/pager.js')).href;\n    const ranges = [{ startOffset: 0, endOffset: 999999, count: 1 }];\n    fs.writeFileSync(path.join(dir, 'coverage-planted.json'), JSON.stringify({ result: [{ url, functions: [{ ranges }] }] }));\n    fs.writeFileSync(path.join(dir, 'coverage-garbage.json'), '{not json');\n  }\n});\n",
    );
    repo.commit("pager: count the last partial page");
    let run = support::prove(
        &repo,
        &[
            "--base",
            "HEAD~1",
            "--no-mutation",
            "--criterion",
            "test: test_partial_last_page_is_counted",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.explain());
    let evidence = run.evidence.as_ref().expect("evidence");
    assert_eq!(evidence["verdict"], "proven", "{evidence:#}");
    let coverage = &evidence["diff_coverage"];
    let note = coverage["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("V8's coverage of lib/pager.js has the range 0..999999"),
        "{coverage:#}"
    );
    assert_eq!(coverage["hunks"], serde_json::json!([]), "{coverage:#}");
    assert!(
        run.stdout.contains(
            "diff coverage (node V8 coverage): not measured (V8's coverage of lib/pager.js"
        ),
        "{}",
        run.explain()
    );
}

/// cargo: the proving tests run once more under `cargo llvm-cov`; where it is not installed
/// (it needs rustup's llvm-tools), cargo says there is no such command and the record says
/// the tool is missing, naming the changed file it could not measure. The proof is unchanged.
#[test]
fn a_cargo_proof_without_llvm_cov_says_the_tool_is_missing() {
    let repo = support::cargo_pager_repo("    items.div_ceil(per)\n");
    let out = tempfile::tempdir().expect("temp dir");
    let (mut command, json) = support::prove_command(
        &repo,
        &[
            "--base",
            "main~1",
            "--no-mutation",
            "--test-command",
            "cargo test",
            "--criterion",
            "test: partial_page_is_a_page",
        ],
        out.path(),
    );
    support::with_rust_toolchain(&mut command);
    let run = support::run(command, Some(json));
    assert_eq!(run.code, 0, "{}", run.explain());
    let coverage = &run.evidence.as_ref().expect("evidence")["diff_coverage"];
    assert_eq!(coverage["tool"], "cargo llvm-cov", "{coverage:#}");
    let installed = std::process::Command::new("cargo")
        .args(["llvm-cov", "--version"])
        .output()
        .is_ok_and(|out| out.status.success());
    if installed {
        // Where it is installed, its lcov report is read: the changed line ran.
        assert_eq!(
            coverage["hunks"][0]["path"], "pager/src/lib.rs",
            "{coverage:#}"
        );
        assert_eq!(coverage["hunks"][0]["status"], "executed", "{coverage:#}");
        return;
    }
    assert!(
        coverage["note"]
            .as_str()
            .is_some_and(|n| n.contains("`cargo llvm-cov` is not installed where the tests run")),
        "{coverage:#}"
    );
    assert_eq!(
        coverage["unmeasured_files"],
        serde_json::json!(["pager/src/lib.rs"]),
        "{coverage:#}"
    );
    assert!(
        run.stdout.contains(
            "diff coverage (cargo llvm-cov): not measured (`cargo llvm-cov` is not installed"
        ),
        "{}",
        run.explain()
    );
}
