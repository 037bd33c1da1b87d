//! Diff coverage through the real binary: the proving tests run once more under coverage.py
//! and the evidence names each changed product hunk they did or did not execute.

mod support;

use support::Repo;

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

#[test]
fn the_hunks_no_proving_test_executed_are_named_in_the_evidence_and_the_summary() {
    let repo = fix_with_an_untested_helper();
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
    let coverage = &run.evidence.as_ref().expect("evidence")["diff_coverage"];
    assert_eq!(coverage["tool"], "coverage.py", "{coverage:#}");
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
    let run = support::prove(
        &repo,
        &[
            "--base",
            "HEAD~1",
            "--no-mutation",
            "--criterion",
            "test: TestCacheExpiry/at_the_limit",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.explain());
    let coverage = &run.evidence.as_ref().expect("evidence")["diff_coverage"];
    assert_eq!(coverage["tool"], "go test -coverprofile", "{coverage:#}");
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
