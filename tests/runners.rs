//! End-to-end proofs for the other ecosystems, on the fixture projects under `tests/fixtures/`
//! with real toolchains: a Go module, a node:test project, a pytest project writing JUnit for
//! the generic runner, and a manifest corpus with its interpreter. Each proof holds a proven, a
//! refuted and an unverified criterion.

use crate::support;

use sha2::{Digest, Sha256};
use support::{Repo, Run, fixture, prove, prove_keeping_store};

fn reason(run: &Run, id: &str) -> String {
    run.criterion(id)["reason"]
        .as_str()
        .expect("a reason")
        .to_owned()
}

/// The names of the cases a criterion matched on one side.
fn matched(run: &Run, id: &str, side: &str) -> Vec<String> {
    let mut names: Vec<String> = run.criterion(id)[side]["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| c["name"].as_str().expect("name").to_owned())
        .collect();
    names.sort();
    names.dedup();
    names
}

#[test]
fn go_proofs_match_subtests_by_path_and_a_build_failure_is_no_reproduced_bug() {
    let repo = Repo::new();
    repo.copy_fixture("go-cache", &["ledger/ledger_test.go"]);
    repo.commit("cache and ledger");
    let ledger = fixture("go-cache/ledger/ledger.go")
        + "\n// RoundedTotal is the total a printed invoice shows.\nfunc RoundedTotal(lines []int) int { return Total(lines) }\n";
    repo.write(
        "cache/cache.go",
        &fixture("go-cache/cache/cache.go").replace("age > ttl", "age >= ttl"),
    )
    .write("ledger/ledger.go", &ledger)
    .write(
        "ledger/ledger_test.go",
        &fixture("go-cache/ledger/ledger_test.go"),
    );
    repo.commit("cache: expire at the ttl; ledger: rounded totals");
    let run = prove(
        &repo,
        &[
            "--base",
            "main~1",
            "--criterion",
            "C1: test: a zero ttl expires even a new entry",
            "--criterion",
            "test: TestCacheExpiry/at_the_limit",
            "--criterion",
            "guard: TestCacheExpiry/expired",
            "--criterion",
            "guard: TestCacheExpiry",
            "--criterion",
            "test: TestTotalRounds",
            "--criterion",
            "guard: TestCacheDuplicateNames/fresh",
            "--criterion",
            "guard: TestCacheRedis",
            "--repeats",
            "2",
        ],
    );
    assert_eq!(
        run.evidence.as_ref().map(|e| e["runner"].clone()),
        Some("go".into()),
        "{}",
        run.explain()
    );
    // The criterion-id fallback: C1 names `TestC1…`.
    assert_eq!(run.verdict_of("C1"), "proven", "{}", reason(&run, "C1"));
    assert_eq!(matched(&run, "C1", "base"), ["TestC1ZeroTTL"]);
    // Every repeat ran it: a stability job that never reported the test would prove nothing.
    for side in ["base", "candidate"] {
        let runs: Vec<&str> = run.criterion("C1")[side]["runs"]
            .as_array()
            .map(|runs| runs.iter().filter_map(|r| r["outcome"].as_str()).collect())
            .unwrap_or_default();
        let expected = if side == "base" { "failed" } else { "passed" };
        assert_eq!(runs, [expected, expected], "{side}: {}", run.explain());
    }
    // `t.Run("at the limit")` is `TestCacheExpiry/at_the_limit`.
    assert_eq!(run.verdict_of("C2"), "proven", "{}", reason(&run, "C2"));
    // The failing sibling `at_the_limit` does not account for `expired`.
    assert_eq!(run.verdict_of("C3"), "proven", "{}", reason(&run, "C3"));
    assert_eq!(matched(&run, "C3", "base"), ["TestCacheExpiry/expired"]);
    // A failing subtest breaks a guard on its function.
    assert_eq!(run.verdict_of("C4"), "refuted");
    assert!(
        reason(&run, "C4").contains("TestCacheExpiry/at_the_limit"),
        "{}",
        reason(&run, "C4")
    );
    // The test does not build on the base: an error of its package, not a reproduced failure,
    // and no evidence against the fix either.
    assert_eq!(run.verdict_of("C5"), "unverified");
    assert_eq!(run.criterion("C5")["base"]["outcome"], "collection_error");
    // Go 1.19 prints the compiler's error on stderr, outside `go test -json`'s events.
    let compiler = "ledger/ledger_test.go:8:5: undefined: RoundedTotal";
    assert_eq!(
        run.criterion("C5")["base"]["error"],
        compiler,
        "{}",
        run.explain()
    );
    assert!(
        reason(&run, "C5").contains("example.com/pager/ledger"),
        "{}",
        reason(&run, "C5")
    );
    // Repeated subtest names are duplicates; a skip is never a pass.
    assert_eq!(run.verdict_of("C6"), "unverified");
    assert!(
        reason(&run, "C6").contains("more than once"),
        "{}",
        reason(&run, "C6")
    );
    assert_eq!(run.verdict_of("C7"), "unverified");
    assert!(
        reason(&run, "C7").contains("skipped"),
        "{}",
        reason(&run, "C7")
    );
    assert_eq!(run.code, 1, "{}", run.explain());
}

#[test]
fn node_proofs_attribute_tests_to_files_and_refuse_a_file_that_spawns_a_runner() {
    let repo = Repo::new();
    repo.write(
        "package.json",
        "{\"name\": \"invoice\", \"private\": true}\n",
    )
    .copy_fixture("node-invoice", &["test/delegates.test.js"]);
    repo.commit("invoice");
    let fixed = fixture("node-invoice/invoice.js").replace(
        "Math.round((net + net * taxRate) * (1 - discount))",
        "Math.round(net * (1 - discount) + net * taxRate)",
    );
    repo.write("invoice.js", &fixed).write(
        "test/delegates.test.js",
        &fixture("node-invoice/test/delegates.test.js"),
    );
    repo.commit("invoice: the discount spares the tax");
    let run = prove(
        &repo,
        &[
            "--base",
            "main~1",
            "--criterion",
            "test: test_discount_spares_the_tax",
            "--criterion",
            "guard: test_cli_prints_the_total",
            "--criterion",
            "guard: test_ledger_balance",
            "--criterion",
            "test: test_currency_rounding",
            "--criterion",
            "test: test_credit_notes",
            "--criterion",
            "guard: test_zero_net",
            "--criterion",
            "guard: test_refund_total",
            "--criterion",
            "guard: test_discount_spares_the_tax_via_vitest",
            "--repeats",
            "2",
        ],
    );
    assert_eq!(
        run.evidence.as_ref().map(|e| e["runner"].clone()),
        Some("node".into()),
        "{}",
        run.explain()
    );
    assert_eq!(run.verdict_of("C1"), "proven", "{}", reason(&run, "C1"));
    assert_eq!(
        run.criterion("C1")["candidate"]["cases"][0]["file"],
        "test/invoice.test.js"
    );
    // Running the product's own CLI from a test is a real test.
    assert_eq!(run.verdict_of("C2"), "proven", "{}", reason(&run, "C2"));
    // A failed `before` hook cancels the test: an error, so the guard does not pass.
    assert_eq!(run.verdict_of("C3"), "refuted");
    assert_eq!(run.criterion("C3")["base"]["outcome"], "error");
    // Skipped and todo tests never count.
    assert_eq!(run.verdict_of("C4"), "unverified");
    assert_eq!(run.verdict_of("C5"), "unverified");
    assert_eq!(run.criterion("C5")["candidate"]["outcome"], "skipped");
    // One name in two files is ambiguous, naming both; twice in one file, a duplicate.
    assert_eq!(run.verdict_of("C6"), "unverified");
    let ambiguous = reason(&run, "C6");
    assert!(
        ambiguous.contains("test/invoice.test.js") && ambiguous.contains("test/zero.test.js"),
        "{ambiguous}"
    );
    assert_eq!(run.verdict_of("C7"), "unverified");
    assert!(
        reason(&run, "C7").contains("more than once"),
        "{}",
        reason(&run, "C7")
    );
    // A file that runs another test runner is refused as proof, naming the file.
    assert_eq!(run.verdict_of("C8"), "unverified");
    let refused = reason(&run, "C8");
    assert!(
        refused.contains("test/delegates.test.js") && refused.contains("npx vitest"),
        "{refused}"
    );
    assert_eq!(run.code, 1, "{}", run.explain());
}

const PYTEST_JUNIT: &str = "python3 -m pytest -p no:cacheprovider -q --junitxml=reports/junit.xml";

/// The pager's fix proven through pytest's JUnit report in the tree: the two criteria it meets.
const JUNIT_PROOF: [&str; 14] = [
    "--base",
    "main~1",
    "--runner",
    "junit",
    "--test-command",
    PYTEST_JUNIT,
    "--test-report",
    "junit:reports/junit.xml",
    "--criterion",
    "test: test_partial_page",
    "--criterion",
    "guard: test_full_pages",
    "--repeats",
    "2",
];

/// A report a CI run left in the tree: it claims every test passed.
const STALE_REPORT: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" hostname="stale-ci-runner" errors="0" failures="0" skipped="0" tests="2">
<testcase classname="tests.test_pager" name="test_partial_page" file="tests/test_pager.py"/>
<testcase classname="tests.test_pager" name="test_full_pages" file="tests/test_pager.py"/>
</testsuite></testsuites>
"#;

/// The pytest fixture with the pager bug and a stale report committed, then the fix.
fn pytest_junit_repo() -> Repo {
    let repo = Repo::new();
    repo.copy_fixture("pytest-junit", &[])
        .write("reports/junit.xml", STALE_REPORT);
    repo.commit("pager");
    let fixed = fixture("pytest-junit/pager.py")
        .replace("return items // per_page", "return -(-items // per_page)");
    repo.write("pager.py", &fixed);
    repo.commit("pager: count a partial last page");
    repo
}

#[test]
fn junit_proofs_read_a_fresh_in_tree_report_whose_hash_is_pinned() {
    let repo = pytest_junit_repo();
    let (run, out_dir) = prove_keeping_store(
        &repo,
        &[
            &JUNIT_PROOF[..],
            &[
                "--criterion",
                "test: test_exact_pages",
                "--criterion",
                "test: test_cached_pages",
            ],
        ]
        .concat(),
    );
    // The stale report said test_partial_page passed on the base: it was removed, not read.
    assert_eq!(run.verdict_of("C1"), "proven", "{}", run.explain());
    // pytest exits 1 on the base (test_partial_page fails): the guard reads its own case.
    assert_eq!(run.verdict_of("C2"), "proven", "{}", reason(&run, "C2"));
    // A non-zero exit with the named test passing demonstrates no regression.
    assert_eq!(run.verdict_of("C3"), "refuted");
    assert!(
        reason(&run, "C3").contains("passes on the base too"),
        "{}",
        reason(&run, "C3")
    );
    assert_eq!(run.verdict_of("C4"), "unverified");
    assert!(
        reason(&run, "C4").contains("skipped"),
        "{}",
        reason(&run, "C4")
    );
    assert_eq!(run.code, 1, "{}", run.explain());

    let jobs = run.evidence.as_ref().expect("evidence")["jobs"]
        .as_array()
        .expect("jobs")
        .clone();
    assert!(jobs.len() >= 4);
    for job in &jobs {
        let report = job["artifacts"]
            .as_array()
            .expect("artifacts")
            .iter()
            .find(|a| a["name"] == "report")
            .unwrap_or_else(|| panic!("job {job} pins its report"));
        let key = report["key"].as_str().expect("key");
        let bytes = std::fs::read(out_dir.path().join("store").join(key)).expect("stored report");
        assert_eq!(
            hex::encode(Sha256::digest(&bytes)),
            report["sha256"].as_str().expect("sha256")
        );
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains("stale-ci-runner"),
            "job {job} read the stale report"
        );
    }
}

/// The mutation check's jobs read the report where the proof's jobs do: before, they looked
/// for it in the scratch `{report}` file, so the unmutated run "wrote no report" and no mutant
/// ever ran for a `--test-report junit:PATH` proof.
#[test]
fn a_junit_proofs_mutation_check_reads_the_in_tree_report() {
    let repo = pytest_junit_repo();
    let run = prove(&repo, &JUNIT_PROOF);
    assert_eq!(run.code, 0, "{}", run.explain());
    support::assert_every_mutant_ran_and_one_was_killed(&run);
}

#[test]
fn junit_reports_that_are_missing_malformed_or_empty_give_no_named_pass() {
    let repo = pytest_junit_repo();
    let commands = [
        // Writes nothing: only the committed, stale report would be there.
        ("python3 -c pass", "wrote no report"),
        (
            "python3 -c \"open('reports/junit.xml','w').write('<testsuite tests=\\\"2\\\"><testcase name=\\\"test_partial_page\\\"/>')\"",
            "malformed",
        ),
        (
            "python3 -c \"open('reports/junit.xml','w').write('<testsuite name=\\\"pytest\\\" tests=\\\"0\\\"></testsuite>')\"",
            "names no test",
        ),
    ];
    for (command, why) in commands {
        let run = prove(
            &repo,
            &[
                "--base",
                "main~1",
                "--runner",
                "junit",
                "--test-command",
                command,
                "--test-report",
                "junit:reports/junit.xml",
                "--criterion",
                "guard: test_full_pages",
                "--repeats",
                "1",
            ],
        );
        assert_eq!(
            run.verdict_of("C1"),
            "unverified",
            "{command}: {}",
            run.explain()
        );
        assert!(
            reason(&run, "C1").contains(why),
            "{command}: {}",
            reason(&run, "C1")
        );
        assert_eq!(run.code, 4, "{}", run.explain());
    }
}

/// The manifest fixture: an interpreter that prints booleans as `True`, and its corpus.
fn manifest_repo() -> Repo {
    let repo = Repo::new();
    repo.copy_fixture("manifest-corpus", &[]);
    repo.commit("invoice expression corpus");
    repo
}

fn prove_manifest(repo: &Repo, criteria: &[&str]) -> Run {
    let mut args = vec![
        "--base",
        "main~1",
        "--runner",
        "manifest",
        "--test-command",
        "python3 interpreter.py",
        "--repeats",
        "2",
    ];
    for criterion in criteria {
        args.extend(["--criterion", criterion]);
    }
    prove(repo, &args)
}

/// The mutation check of a manifest proof runs the proving cases: before, its jobs held no case,
/// so the unmutated run "named no test" and no mutant ever ran.
#[test]
fn a_manifest_proofs_mutation_check_runs_the_proving_cases() {
    let repo = manifest_repo();
    repo.write("interpreter.py", &fixed_interpreter());
    repo.commit("interpreter: print booleans as true and false");
    let run = prove_manifest(
        &repo,
        &["test: boolean/paid.inv", "guard: integer/add-small.inv"],
    );
    assert_eq!(run.code, 0, "{}", run.explain());
    support::assert_every_mutant_ran_and_one_was_killed(&run);
}

/// The fixture's interpreter with its bug fixed: booleans are tested before integers.
fn fixed_interpreter() -> String {
    let fixed = fixture("manifest-corpus/interpreter.py").replace(
        "    # The bug under proof: bool is a subclass of int, so a boolean prints as `True`.\n    if isinstance(value, int):\n        return str(value)\n    if isinstance(value, bool):\n        return \"true\" if value else \"false\"\n",
        "    if isinstance(value, bool):\n        return \"true\" if value else \"false\"\n    if isinstance(value, int):\n        return str(value)\n",
    );
    assert_ne!(fixed, fixture("manifest-corpus/interpreter.py"));
    fixed
}

#[test]
fn manifest_proofs_judge_each_case_by_its_typed_expectation() {
    let repo = manifest_repo();
    repo.write("interpreter.py", &fixed_interpreter());
    repo.commit("interpreter: print booleans as true and false");
    let run = prove_manifest(
        &repo,
        &[
            "test: boolean/over-limit.inv",
            "test: boolean/paid.inv",
            "guard: integer/add-small.inv",
            "guard: float-sum.inv",
            "guard: float-nan.inv",
            "guard: no-discount.inv",
            "guard: error",
            "guard: integer/halve.inv",
            "test: integer/add-small.inv",
            "test: integer/rounding.inv",
        ],
    );
    assert_eq!(
        run.evidence.as_ref().map(|e| e["runner"].clone()),
        Some("manifest".into()),
        "{}",
        run.explain()
    );
    // boolean, and the two-field `true` row.
    for id in ["C1", "C2"] {
        assert_eq!(run.verdict_of(id), "proven", "{id}: {}", reason(&run, id));
    }
    // integer, float-bits, float-nan, null, and `error` rows (three- and two-field) by directory.
    for id in ["C3", "C4", "C5", "C6", "C7"] {
        assert_eq!(run.verdict_of(id), "proven", "{id}: {}", reason(&run, id));
    }
    assert_eq!(
        matched(&run, "C7", "candidate"),
        ["error/divide.inv", "error/unknown-rate.inv"]
    );
    // The interpreter floors 7 // 2 where the row expects 4, before and after.
    assert_eq!(run.verdict_of("C8"), "refuted");
    assert_eq!(run.verdict_of("C9"), "refuted");
    assert!(
        reason(&run, "C9").contains("passes on the base too"),
        "{}",
        reason(&run, "C9")
    );
    assert_eq!(run.verdict_of("C10"), "unverified");
    assert!(
        reason(&run, "C10").contains("no test named integer/rounding.inv"),
        "{}",
        reason(&run, "C10")
    );
    // Each case ran in its own process with its own output.
    let jobs = run.evidence.as_ref().expect("evidence")["jobs"]
        .as_array()
        .expect("jobs")
        .clone();
    let suite = jobs
        .iter()
        .find(|j| j["kind"] == "base-suite")
        .expect("a base-suite job");
    let case_logs = suite["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .filter(|a| a["key"].as_str().is_some_and(|k| k.contains("/cases/")))
        .count();
    assert_eq!(case_logs, 2 * 9, "{suite}");
    assert_eq!(run.code, 1, "{}", run.explain());
}

#[test]
fn a_manifest_row_outside_the_corpus_is_refused_naming_its_line() {
    let repo = manifest_repo();
    let manifest =
        fixture("manifest-corpus/corpus/manifest.tsv") + "../interpreter.py\tboolean\ttrue\n";
    repo.write("corpus/manifest.tsv", &manifest);
    repo.commit("corpus: a row that escapes");
    let run = prove_manifest(&repo, &["guard: integer/add-small.inv"]);
    assert_eq!(run.code, 2, "{}", run.explain());
    let line = manifest.lines().count();
    assert!(
        run.stderr.contains("corpus/manifest.tsv")
            && run.stderr.contains(&format!("line {line}"))
            && run.stderr.contains("not confined"),
        "{}",
        run.explain()
    );
}

#[test]
fn a_go_proof_naming_two_subtests_of_one_function_is_proven() {
    // Both names go into one `-run` of the candidate's stability runs; an ungrouped pattern
    // (`^TestCacheExpiry$/^at_the_limit$|^fresh$`) reads as "(…/at_the_limit) or (fresh)" to
    // Go and leaves the guard unreported.
    let repo = Repo::new();
    repo.copy_fixture("go-cache", &["ledger/ledger_test.go"]);
    repo.commit("cache");
    repo.write(
        "cache/cache.go",
        &fixture("go-cache/cache/cache.go").replace("age > ttl", "age >= ttl"),
    );
    repo.commit("cache: expire at the ttl");
    let run = prove(
        &repo,
        &[
            "--base",
            "main~1",
            "--criterion",
            "test: TestCacheExpiry/at_the_limit",
            "--criterion",
            "guard: TestCacheExpiry/fresh",
        ],
    );
    assert_eq!(run.verdict_of("C1"), "proven", "{}", run.explain());
    assert_eq!(run.verdict_of("C2"), "proven", "{}", reason(&run, "C2"));
    for id in ["C1", "C2"] {
        let runs = run.criterion(id)["candidate"]["runs"]
            .as_array()
            .map_or(0, Vec::len);
        assert_eq!(
            runs,
            3,
            "{id} ran in every candidate run: {}",
            run.explain()
        );
    }
    assert_eq!(matched(&run, "C2", "candidate"), ["TestCacheExpiry/fresh"]);
    assert_eq!(run.code, 0, "{}", run.explain());
}

#[test]
fn a_node_tests_printed_output_is_stored_with_its_job() {
    let marker = "PAGER-DIAGNOSTIC-7";
    let repo = support::printing_node_pager_repo(marker, 1);
    let (run, out_dir) = prove_keeping_store(
        &repo,
        &support::one_uncached_run_against_the_parent("test: \"partial last page is counted\""),
    );
    assert_eq!(run.code, 0, "{}", run.explain());
    let artifacts = support::candidate_stream_artifacts(run.evidence.as_ref().expect("evidence"));
    for (stream, artifact) in ["stdout", "stderr"].into_iter().zip(artifacts) {
        assert_eq!(artifact["dropped_bytes"], 0, "{artifact}");
        let key = artifact["key"].as_str().expect("a key");
        let stored = std::fs::read_to_string(out_dir.path().join("store").join(key))
            .expect("the stored log");
        assert!(
            stored.contains(&format!("{marker} on {stream}")),
            "{stream}: {stored:?}"
        );
        assert_eq!(artifact["bytes"], stored.len(), "{artifact}");
    }
}
