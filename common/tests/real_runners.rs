//! Real-run parser tests: each fixture project under `tests/fixtures/` is copied to a temp dir,
//! run with the real tool through the command Assay builds, and its report parsed. Needs `go`
//! (Debian: `golang-go`), `node` (20+), `python3` with pytest, `cargo` and cargo-nextest on
//! the PATH.

use assay_common::criteria::TestSelector;
use assay_common::manifest::{ManifestJob, case_result, parse_manifest};
use assay_common::outcome::{CaseResult, Outcome, ReportOutcome, TestReport};
use assay_common::report::{complete_from_stderr, libtest, parse, parse_in_tree};
use assay_common::runner::node::spawns_test_runner;
use assay_common::runner::{ReportFormat, ReportLocation, RunnerKind, cargo};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name)
}

/// A private copy of a fixture project, so runs never write into the repository.
fn project(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("create a temp dir");
    copy_dir(&fixture(name), dir.path());
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("read fixture dir") {
        let entry = entry.expect("read fixture entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            std::fs::create_dir_all(&target).expect("create dir");
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy fixture file");
        }
    }
}

/// The node:test reporter the worker ships and writes next to each job.
fn node_reporter() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../worker/src/adapters/node_reporter.mjs")
}

/// Runs an argv with `{report}` and `{node_reporter}` substituted, as the worker does.
fn run(dir: &Path, argv: &[String], report: &Path, env: &[(&str, &str)]) -> Output {
    let argv: Vec<String> = argv
        .iter()
        .map(|a| {
            a.replace("{report}", &report.to_string_lossy())
                .replace("{node_reporter}", &node_reporter().to_string_lossy())
        })
        .collect();
    Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(dir)
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("failed to run {:?} (is it installed?): {e}", argv[0]))
}

fn go_env() -> Vec<(&'static str, String)> {
    vec![
        ("GOFLAGS", "-mod=mod".into()),
        ("GOPROXY", "off".into()),
        // One build cache for every test run keeps the second compile cheap.
        (
            "GOCACHE",
            Path::new(env!("CARGO_TARGET_TMPDIR"))
                .join("gocache")
                .to_string_lossy()
                .into_owned(),
        ),
    ]
}

fn parsed(outcome: ReportOutcome) -> TestReport {
    match outcome {
        ReportOutcome::Parsed(report) => report,
        other => panic!("expected a parsed report, got {other:?}"),
    }
}

fn outcomes_of(report: &TestReport, selector: &str) -> Vec<(String, Outcome)> {
    let selector = TestSelector::Exact(selector.into());
    report
        .cases
        .iter()
        .filter(|c| selector.matches(&c.name))
        .map(|c| (c.name.clone(), c.outcome))
        .collect()
}

fn case<'a>(report: &'a TestReport, name: &str) -> &'a CaseResult {
    report
        .cases
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no case {name} in {:#?}", report.cases))
}

#[test]
fn go_subtests_are_identified_by_path_and_build_failures_are_collection_errors() {
    let dir = project("go-cache");
    let runner = RunnerKind::Go;
    assert_eq!(runner.report_format().location(), ReportLocation::Stdout);
    let argv = runner.command(&runner.default_command(), &[], &[]);
    let env = go_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let output = run(dir.path(), &argv, Path::new("unused"), &env);
    let report = parsed(parse(&runner.report_format(), Some(&output.stdout)));

    assert_eq!(
        outcomes_of(&report, "TestCacheExpiry/expired"),
        vec![("TestCacheExpiry/expired".into(), Outcome::Passed)]
    );
    // Go prints the quoted subtest's spaces as underscores.
    assert_eq!(
        outcomes_of(&report, "TestCacheExpiry/at_the_limit"),
        vec![("TestCacheExpiry/at_the_limit".into(), Outcome::Failed)]
    );
    assert!(
        case(&report, "TestCacheExpiry/at_the_limit")
            .message
            .as_deref()
            .unwrap_or("")
            .contains("an entry at its ttl must expire")
    );
    // The whole function accounts for its failing subtest: a guard on it breaks.
    let function = outcomes_of(&report, "TestCacheExpiry");
    assert!(function.contains(&("TestCacheExpiry".into(), Outcome::Failed)));
    assert!(function.contains(&("TestCacheExpiry/at_the_limit".into(), Outcome::Failed)));
    assert_eq!(
        case(&report, "TestCacheExpiry/expired").file,
        "example.com/pager/cache"
    );
    // A repeated subtest name (`fresh#01`) shares its identity: a duplicate, never a named pass.
    let duplicates: Vec<&CaseResult> = report
        .cases
        .iter()
        .filter(|c| c.name == "TestCacheDuplicateNames/fresh")
        .collect();
    assert_eq!(duplicates.len(), 2);
    assert_eq!(duplicates[0].identity(), duplicates[1].identity());
    assert_eq!(case(&report, "TestCacheRedis").outcome, Outcome::Skipped);
    assert!(
        TestSelector::IdPrefix("test_c1_".into()).matches(&case(&report, "TestC1ZeroTTL").name)
    );
    // The ledger package does not build: its test never ran, so it is absent, not failed.
    assert!(
        report
            .cases
            .iter()
            .all(|c| c.file != "example.com/pager/ledger")
    );
    assert_eq!(report.collection_errors.len(), 1);
    assert_eq!(report.collection_errors[0].file, "example.com/pager/ledger");
    // Before Go 1.24 the compiler's error is on stderr, outside the report: completed from
    // there, as the worker does, the collection error names it.
    let mut report = report;
    complete_from_stderr(&runner.report_format(), &mut report, &output.stderr);
    assert_eq!(
        report.collection_errors[0].message,
        "ledger/ledger_test.go:8:5: undefined: RoundedTotal",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn go_selection_by_subtest_path_runs_the_named_subtest() {
    let dir = project("go-cache");
    let runner = RunnerKind::Go;
    let argv = runner.command(
        &runner.default_command(),
        &["cache/cache_test.go".into()],
        &["TestCacheExpiry/expired".into()],
    );
    let env = go_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let output = run(dir.path(), &argv, Path::new("unused"), &env);
    let report = parsed(parse(&runner.report_format(), Some(&output.stdout)));
    let names: Vec<&str> = report.cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["TestCacheExpiry/expired"]);
    assert_eq!(report.cases[0].outcome, Outcome::Passed);
}

#[test]
fn node_results_keep_their_files_and_skips_todos_hooks_and_empty_files_never_pass() {
    let dir = project("node-invoice");
    let runner = RunnerKind::Node;
    let report_path = dir.path().join("report.json");
    let files: Vec<String> = [
        "test/invoice.test.js",
        "test/cli.test.js",
        "test/empty.test.js",
        "test/zero.test.js",
    ]
    .map(String::from)
    .to_vec();
    let argv = runner.command(&runner.default_command(), &files, &[]);
    let output = run(dir.path(), &argv, &report_path, &[]);
    assert_eq!(output.status.code(), Some(1), "one test fails on purpose");
    let bytes = std::fs::read(&report_path).expect("node wrote Assay's report");
    let root = dir.path().to_str().expect("utf-8 path");
    let report = parsed(parse_in_tree(&runner.report_format(), Some(&bytes), root));

    let c1 = case(&report, "test_c1_totals_without_discount");
    assert_eq!(
        (c1.file.as_str(), c1.outcome),
        ("test/invoice.test.js", Outcome::Passed)
    );
    assert_eq!(
        case(&report, "test_discount_spares_the_tax").outcome,
        Outcome::Failed
    );
    assert_eq!(
        case(&report, "test_currency_rounding").outcome,
        Outcome::Skipped
    );
    assert_eq!(case(&report, "test_credit_notes").outcome, Outcome::Skipped);
    // The same name in two files: two results, each with its own file.
    let zero: Vec<(&str, &str)> = report
        .cases
        .iter()
        .filter(|c| c.name == "test_zero_net")
        .map(|c| (c.file.as_str(), c.suite.as_str()))
        .collect();
    assert_eq!(
        zero,
        [
            ("test/invoice.test.js", "totals"),
            ("test/zero.test.js", "")
        ]
    );
    // A failed `before` hook cancels its tests: an error, never a reproduced failure.
    assert_eq!(case(&report, "test_ledger_balance").outcome, Outcome::Error);
    assert_eq!(
        case(&report, "test_cli_prints_the_total").outcome,
        Outcome::Passed
    );
    // The empty file is not a test at all; the failed hook is its file's collection error.
    assert!(report.cases.iter().all(|c| !c.name.ends_with(".js")));
    let errors: Vec<&str> = report
        .collection_errors
        .iter()
        .map(|e| e.file.as_str())
        .collect();
    assert_eq!(errors, ["test/invoice.test.js"]);
}

#[test]
fn node_files_that_fail_to_load_are_collection_errors_and_a_cut_report_is_refused() {
    let dir = project("node-invoice");
    std::fs::write(
        dir.path().join("test/broken.test.js"),
        "this is not javascript\n",
    )
    .expect("write a broken test file");
    let runner = RunnerKind::Node;
    let report_path = dir.path().join("report.json");
    let argv = runner.command(
        &runner.default_command(),
        &["test/broken.test.js".into(), "test/cli.test.js".into()],
        &[],
    );
    run(dir.path(), &argv, &report_path, &[]);
    let bytes = std::fs::read(&report_path).expect("node wrote Assay's report");
    let root = dir.path().to_str().expect("utf-8 path");
    let report = parsed(parse_in_tree(&runner.report_format(), Some(&bytes), root));
    assert_eq!(report.collection_errors.len(), 1);
    assert_eq!(report.collection_errors[0].file, "test/broken.test.js");
    assert_eq!(
        case(&report, "test_cli_prints_the_total").outcome,
        Outcome::Passed
    );
    // A report cut short is no report.
    assert!(matches!(
        parse(&runner.report_format(), Some(&bytes[..bytes.len() / 2])),
        ReportOutcome::Malformed(_)
    ));
}

/// What a report says of each case and which files failed to load, to compare two runs.
fn judged(report: &TestReport) -> String {
    let mut cases: Vec<String> = report
        .cases
        .iter()
        .map(|c| format!("{} | {} | {} | {:?}", c.file, c.suite, c.name, c.outcome))
        .collect();
    cases.sort();
    let errors: Vec<&str> = report
        .collection_errors
        .iter()
        .map(|e| e.file.as_str())
        .collect();
    format!("{cases:#?} failed to load: {errors:?}")
}

#[test]
fn a_mutants_one_test_file_runs_in_node_itself_and_reports_as_under_the_runner() {
    let dir = project("node-invoice");
    let write = |name: &str, text: &str| {
        std::fs::write(dir.path().join("test").join(name), text).expect("write a test file")
    };
    write("broken.test.js", "this is not javascript\n");
    write(
        "exits.test.js",
        "const test = require('node:test');\ntest('test_never_reported', () => {});\nprocess.exit(0);\n",
    );
    write(
        "throws.test.js",
        "const test = require('node:test');\ntest('test_after_a_throw', () => {});\nthrow new Error('the ledger is closed');\n",
    );
    write(
        "where.test.js",
        "const test = require('node:test');\nconst where = process.env.NODE_TEST_CONTEXT ? 'under_the_runner' : 'in_node_itself';\ntest(where, () => {});\n",
    );
    let runner = RunnerKind::Node;
    let root = dir.path().to_str().expect("utf-8 path");
    let report_of = |argv: &[String], name: &str| {
        let report_path = dir.path().join(name);
        let output = run(dir.path(), argv, &report_path, &[]);
        let bytes = std::fs::read(&report_path)
            .unwrap_or_else(|e| panic!("no report from {argv:?}: {e}\n{output:?}"));
        (
            output.status.code(),
            parse_in_tree(&runner.report_format(), Some(&bytes), root),
        )
    };
    // What a run judged: its cases, or why its report holds none.
    let judged_run = |outcome: ReportOutcome| match outcome {
        ReportOutcome::Parsed(report) => judged(&report),
        other => format!("{other:?}"),
    };
    let default = runner.default_command();
    let sets: [&[&str]; 12] = [
        &["invoice.test.js"],
        &["cli.test.js"],
        &["zero.test.js"],
        &["empty.test.js"],
        &["broken.test.js"],
        &["exits.test.js"],
        &["throws.test.js"],
        &["invoice.test.js", "cli.test.js"],
        &["cli.test.js", "broken.test.js"],
        &["exits.test.js", "zero.test.js"],
        &["zero.test.js", "throws.test.js"],
        &["invoice.test.js", "zero.test.js", "cli.test.js"],
    ];
    for set in sets {
        let files: Vec<String> = set.iter().map(|f| format!("test/{f}")).collect();
        let (runner_code, under_runner) =
            report_of(&runner.command(&default, &files, &[]), "runner.json");
        let (direct_code, direct) = report_of(
            &runner.runner().mutant_command(&default, &files),
            "direct.json",
        );
        assert_eq!(judged_run(direct), judged_run(under_runner), "{set:?}");
        assert_eq!(direct_code, runner_code, "{set:?}");
        // Nothing but the report is left beside it.
        let left: Vec<String> = std::fs::read_dir(dir.path())
            .expect("read the project")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("direct.json."))
            .collect();
        assert!(left.is_empty(), "{set:?} left {left:?}");
    }
    // Files that load run in node itself, each in its own process, one report for all.
    let one = ["test/where.test.js".to_owned()];
    let (_, outcome) = report_of(&runner.runner().mutant_command(&default, &one), "one.json");
    let report = parsed(outcome);
    assert_eq!(report.cases.len(), 1);
    assert_eq!(report.cases[0].name, "in_node_itself");
    let two = [
        "test/where.test.js".to_owned(),
        "test/cli.test.js".to_owned(),
    ];
    let (_, outcome) = report_of(&runner.runner().mutant_command(&default, &two), "two.json");
    let report = parsed(outcome);
    assert_eq!(case(&report, "in_node_itself").file, "test/where.test.js");
    assert_eq!(
        case(&report, "test_cli_prints_the_total").outcome,
        Outcome::Passed
    );
    // A command whose program is not node keeps the runner's own command.
    let wrapped = ["npx".to_owned(), "node".to_owned()];
    assert_eq!(
        runner.runner().mutant_command(&wrapped, &one),
        runner.command(&wrapped, &one, &[])
    );
}

#[test]
fn node_test_files_that_spawn_another_runner_are_named() {
    let read = |file: &str| {
        std::fs::read_to_string(fixture("node-invoice").join(file)).expect("read fixture test")
    };
    assert_eq!(
        spawns_test_runner(&read("test/delegates.test.js")).as_deref(),
        Some("npx vitest")
    );
    assert_eq!(spawns_test_runner(&read("test/cli.test.js")), None);
    assert_eq!(spawns_test_runner(&read("test/invoice.test.js")), None);
}

#[test]
fn pytest_junit_reads_as_a_generic_in_tree_report() {
    let dir = project("pytest-junit");
    let format = ReportFormat::parse_test_report("junit:reports/junit.xml").expect("valid spec");
    let ReportLocation::Tree(path) = format.location() else {
        panic!("expected an in-tree report")
    };
    let argv: Vec<String> = [
        "python3",
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "--junitxml=reports/junit.xml",
    ]
    .map(String::from)
    .to_vec();
    let output = run(dir.path(), &argv, Path::new("unused"), &[]);
    assert_eq!(output.status.code(), Some(1), "one test fails on purpose");
    let bytes = std::fs::read(dir.path().join(path.as_str())).expect("pytest wrote the report");
    let report = parsed(parse(&format, Some(&bytes)));
    assert_eq!(case(&report, "test_full_pages").outcome, Outcome::Passed);
    assert_eq!(case(&report, "test_partial_page").outcome, Outcome::Failed);
    assert_eq!(case(&report, "test_cached_pages").outcome, Outcome::Skipped);
    let variants: Vec<Option<&str>> = report
        .cases
        .iter()
        .filter(|c| c.name == "test_exact_pages")
        .map(|c| c.variant.as_deref())
        .collect();
    assert_eq!(variants, [Some("0"), Some("10")]);
    assert_eq!(case(&report, "test_full_pages").file, "tests.test_pager");
}

#[test]
fn vitest_json_separates_file_and_hook_errors_from_test_failures() {
    let bytes = std::fs::read(fixture("vitest-report/report.json")).expect("read fixture");
    let runner = RunnerKind::Vitest;
    let report = parsed(parse_in_tree(
        &runner.report_format(),
        Some(&bytes),
        "/tmp/assay-job/tree",
    ));
    let discount = case(&report, "test_discount_spares_the_tax");
    assert_eq!(discount.outcome, Outcome::Failed);
    assert_eq!(discount.file, "tests/invoice.test.js");
    assert_eq!(discount.suite, "invoice totals");
    assert_eq!(
        case(&report, "test_c1_totals_without_discount").outcome,
        Outcome::Passed
    );
    assert_eq!(
        case(&report, "test_currency_rounding").outcome,
        Outcome::Skipped
    );
    assert_eq!(case(&report, "test_credit_notes").outcome, Outcome::Skipped);
    // Vitest skips the tests of a block whose `beforeAll` failed: never a pass, never a failure.
    assert_eq!(
        case(&report, "test_ledger_balance").outcome,
        Outcome::Skipped
    );
    assert_eq!(case(&report, "test_db_totals").outcome, Outcome::Skipped);
    let broken: Vec<(&str, &str)> = report
        .collection_errors
        .iter()
        .map(|e| (e.file.as_str(), e.message.as_str()))
        .collect();
    assert_eq!(broken.len(), 3, "{broken:?}");
    assert_eq!(broken[0].0, "tests/ledger.test.js");
    assert!(
        broken[1]
            .1
            .starts_with("Failed to load url ../src/credit-notes")
    );
    assert_eq!(
        broken[2],
        ("tests/db.test.js", "connect ECONNREFUSED 127.0.0.1:5432")
    );
    let text = String::from_utf8(bytes).expect("utf-8 fixture");
    for (from, to) in [
        ("\"numTotalTests\":8", "\"numTotalTests\":9"),
        ("\"numFailedTests\":1", "\"numFailedTests\":0"),
        ("\"numPassedTests\":2", "\"numPassedTests\":3"),
        (
            "\"status\":\"passed\",\"title\":\"test_zero_net\"",
            "\"status\":\"pending\",\"title\":\"test_zero_net\"",
        ),
    ] {
        assert!(text.contains(from), "{from}");
        let changed = text.replace(from, to);
        assert!(
            matches!(
                parse(&runner.report_format(), Some(changed.as_bytes())),
                ReportOutcome::Inconsistent(_)
            ),
            "{to}"
        );
    }
}

#[test]
fn manifest_rows_run_by_a_real_interpreter_are_judged() {
    let project = fixture("manifest-corpus");
    let text = std::fs::read_to_string(project.join("corpus/manifest.tsv")).expect("read manifest");
    let cases = parse_manifest(&text).expect("valid manifest");
    let job = ManifestJob::select(
        &assay_common::tree_path::TreeDir::new("corpus").unwrap(),
        &cases,
        &[],
    );
    let mut results = Vec::new();
    for case in &job.cases {
        let mut argv =
            RunnerKind::Manifest.command(&["python3".into(), "interpreter.py".into()], &[], &[]);
        argv.push(job.run_path(case));
        let output = run(&project, &argv, Path::new("unused"), &[]);
        let result = case_result(
            &job.manifest_path(),
            case,
            output.status.code(),
            &output.stdout,
        );
        results.push((result.name, result.outcome));
    }
    // The fixture's interpreter prints a boolean as `True`: the bug a proof fixes.
    let expected: Vec<(String, Outcome)> = [
        ("integer/add-small.inv", Outcome::Passed),
        ("integer/halve.inv", Outcome::Failed),
        ("boolean/over-limit.inv", Outcome::Failed),
        ("float-sum.inv", Outcome::Passed),
        ("float-nan.inv", Outcome::Passed),
        ("no-discount.inv", Outcome::Passed),
        ("error/divide.inv", Outcome::Passed),
        ("boolean/paid.inv", Outcome::Failed),
        ("error/unknown-rate.inv", Outcome::Passed),
    ]
    .map(|(name, outcome)| (name.to_owned(), outcome))
    .to_vec();
    assert_eq!(results, expected);
}

use assay_test_support::pytest_envs::pytest_python;

/// pytest 8 and 9 write the same suite's JUnit XML differently: pytest 9 runs subtests itself,
/// counts each in `tests=` and adds a `<failure>` per failing subtest to its test's case.
/// Both reports must read as trustworthy, with every failing subtest failing its test.
#[test]
fn pytest_8_and_9_reports_with_subtests_parse_with_the_same_outcomes() {
    for major in [8, 9] {
        let Some(python) = pytest_python(major) else {
            continue;
        };
        let dir = project("pytest-subtests");
        let prefix = vec![python.clone(), "-m".into(), "pytest".into()];
        let argv = RunnerKind::Pytest.command(&prefix, &[], &[]);
        let report_path = dir.path().join("report.xml");
        let output = run(dir.path(), &argv, &report_path, &[]);
        assert_eq!(output.status.code(), Some(1), "pytest {major}: {output:?}");
        let bytes = std::fs::read(&report_path).expect("pytest wrote its report");
        let xml = String::from_utf8_lossy(&bytes);
        let report = parsed(parse(&ReportFormat::JunitXml, Some(&bytes)));
        assert_eq!(xml.matches("<testcase ").count(), 7, "{xml}");
        let outcome = |name: &str| case(&report, name).outcome;
        assert_eq!(outcome("test_balances_every_period"), Outcome::Passed);
        assert_eq!(outcome("test_rounds_every_currency"), Outcome::Failed);
        assert_eq!(outcome("test_rejects_text_amounts"), Outcome::Failed);
        let single: Vec<Outcome> = report
            .cases
            .iter()
            .filter(|c| c.name == "test_single_entries")
            .map(|c| c.outcome)
            .collect();
        assert_eq!(single, [Outcome::Passed, Outcome::Failed]);
        // A teardown error after a passing body is an error of the test, never a pass.
        assert!(
            report
                .cases
                .iter()
                .filter(|c| c.name == "test_closing_keeps_the_balance")
                .all(|c| c.outcome == Outcome::Error)
        );
        match major {
            // The subtests fixture is pytest 9's own; pytest 8 errors at setup without it.
            8 => {
                assert_eq!(outcome("test_totals_by_account"), Outcome::Error);
                // The passing body and its teardown error count as two.
                assert!(xml.contains(r#"tests="8""#), "{xml}");
            }
            _ => {
                assert_eq!(outcome("test_totals_by_account"), Outcome::Failed);
                // 7 cases listed; 8 subtests and the teardown error counted on top of them.
                assert!(xml.contains(r#"tests="16""#), "{xml}");
            }
        }
        // A hand-edited report that drops a failure (turning its case into a pass) is refused.
        let start = xml.find("<failure ").expect("a failure element");
        let end = start + xml[start..].find("</failure>").expect("its end") + "</failure>".len();
        let edited = format!("{}{}", &xml[..start], &xml[end..]);
        let outcome = parse(&ReportFormat::JunitXml, Some(edited.as_bytes()));
        assert!(
            matches!(outcome, ReportOutcome::Inconsistent(_)),
            "pytest {major}: an edited report was accepted: {outcome:?}"
        );
    }
}

/// Under `-x`, once a test module fails to import, pytest 8 and 9 also fail their session's
/// collection: a case with an empty name and file ("stopping after 1 failures"). Only the
/// module is a collection error; the session's stop names nothing (it once read `.py`).
#[test]
fn pytest_8_and_9_stopping_after_a_collection_error_report_only_the_module() {
    for major in [8, 9] {
        let Some(python) = pytest_python(major) else {
            continue;
        };
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("tests")).expect("tests dir");
        for (path, text) in [
            (
                "tests/test_labels.py",
                "LABELS = [\"none\", \"one\"]\nLABEL_OF_ELEVEN = LABELS[3]\n\n\ndef test_labels():\n    assert LABEL_OF_ELEVEN\n",
            ),
            (
                "tests/test_pages.py",
                "def test_full_pages():\n    assert 10 // 5 == 2\n",
            ),
        ] {
            std::fs::write(dir.path().join(path), text).expect("write a test module");
        }
        let prefix = vec![python.clone(), "-m".into(), "pytest".into(), "-x".into()];
        let argv = RunnerKind::Pytest.command(
            &prefix,
            &[
                "tests/test_labels.py::test_labels".to_owned(),
                "tests/test_pages.py::test_full_pages".to_owned(),
            ],
            &[],
        );
        let report_path = dir.path().join("report.xml");
        let output = run(dir.path(), &argv, &report_path, &[]);
        // 4: the named test's module yielded no collector ("found no collectors for …").
        assert_eq!(output.status.code(), Some(4), "pytest {major}: {output:?}");
        let bytes = std::fs::read(&report_path).expect("pytest wrote its report");
        let xml = String::from_utf8_lossy(&bytes);
        assert!(
            xml.contains(r#"name="" file="""#),
            "pytest {major} no longer fails the session: {xml}"
        );
        let report = parsed(parse(&ReportFormat::JunitXml, Some(&bytes)));
        let files: Vec<&str> = report
            .collection_errors
            .iter()
            .map(|e| e.file.as_str())
            .collect();
        assert_eq!(files, ["tests/test_labels.py"], "pytest {major}: {xml}");
        assert!(report.cases.is_empty(), "pytest {major}: {report:?}");
    }
}

/// `cargo test` output framed as the worker frames it, from a run in `dir` with its own
/// target directory (never the developer's).
fn cargo_run(dir: &Path, argv: &[String], report: &Path) -> Output {
    let target = dir.join("target");
    run(
        dir,
        argv,
        report,
        &[("CARGO_TARGET_DIR", &target.to_string_lossy())],
    )
}

fn strings(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

/// (binary, suite, name, outcome) of every case, sorted.
fn cargo_cases(report: &TestReport) -> Vec<(String, String, String, Outcome)> {
    let mut cases: Vec<_> = report
        .cases
        .iter()
        .map(|c| (c.file.clone(), c.suite.clone(), c.name.clone(), c.outcome))
        .collect();
    cases.sort_by(|a, b| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)));
    cases
}

#[test]
fn cargo_test_output_names_each_test_by_its_binary_and_path() {
    let dir = project("cargo-pager");
    let runner = RunnerKind::Cargo;
    let prefix = strings(&["cargo", "test"]);
    let argv = runner.command(&prefix, &[], &[]);
    let report_path = dir.path().join("unused-report");
    let output = cargo_run(dir.path(), &argv, &report_path);
    let format = runner.report_format_for(&prefix);
    assert_eq!(format.location(), ReportLocation::Output);
    let bytes = libtest::frame(&output.stdout, &output.stderr);
    let report = parsed(parse(&format, Some(&bytes)));
    let passed = Outcome::Passed;
    let own = |file: &str, suite: &str, name: &str, outcome| {
        (file.to_owned(), suite.to_owned(), name.to_owned(), outcome)
    };
    assert_eq!(
        cargo_cases(&report),
        [
            own("ledger", "", "tests::counts_pages", passed),
            own("pager", "", "tests::counts_pages", passed),
            own("pager", "", "tests::prints_pages", Outcome::Skipped),
            own(
                "pager",
                libtest::DOC_TEST_SUITE,
                "pager/src/lib.rs - pages (line 5)",
                passed
            ),
            own("pager::api", "", "counts_pages", passed),
            own("pager::api", "", "partial_page_is_a_page", Outcome::Failed),
        ],
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let failed = case(&report, "partial_page_is_a_page");
    let message = failed.message.as_deref().expect("the failure's output");
    assert!(message.contains("ten items at three a page"), "{message}");

    // `--exact`: the path names the unit tests of both crates, not the integration test's
    // `counts_pages`, and a name with regex metacharacters is a plain string that names none.
    let names = strings(&["tests::counts_pages", "counts.*"]);
    let output = cargo_run(
        dir.path(),
        &runner.command(&prefix, &[], &names),
        &report_path,
    );
    let report = parsed(parse(
        &format,
        Some(&libtest::frame(&output.stdout, &output.stderr)),
    ));
    assert_eq!(
        cargo_cases(&report),
        [
            own("ledger", "", "tests::counts_pages", passed),
            own("pager", "", "tests::counts_pages", passed),
        ]
    );
}

#[test]
fn a_crate_that_does_not_build_is_a_collection_error_with_the_compilers_first_error() {
    let dir = project("cargo-pager");
    std::fs::write(
        dir.path().join("pager/tests/api.rs"),
        "#[test]\nfn spare_pages() {\n    assert_eq!(pager::spare_pages(10, 3), 2);\n}\n",
    )
    .expect("write the test");
    let runner = RunnerKind::Cargo;
    let prefix = strings(&["cargo", "test"]);
    let report_path = dir.path().join("unused-report");
    let output = cargo_run(dir.path(), &runner.command(&prefix, &[], &[]), &report_path);
    assert!(!output.status.success());
    let report = parsed(parse(
        &ReportFormat::CargoTestOutput,
        Some(&libtest::frame(&output.stdout, &output.stderr)),
    ));
    assert!(
        report.cases.is_empty(),
        "cargo runs nothing once a build fails"
    );
    let [error] = report.collection_errors.as_slice() else {
        panic!("one collection error: {:?}", report.collection_errors)
    };
    assert_eq!(error.file, "pager::api");
    assert!(
        error
            .message
            .starts_with("error[E0425]: cannot find function `spare_pages`"),
        "{}",
        error.message
    );
}

#[test]
fn nextest_junit_names_tests_as_cargo_test_does() {
    let dir = project("cargo-pager");
    let runner = RunnerKind::Cargo;
    let prefix = runner.default_command_where(&|program| program == "cargo-nextest");
    let report_path = dir.path().join("junit.xml");
    let config = dir.path().join("nextest.toml");
    std::fs::write(
        &config,
        cargo::nextest_config(&report_path.to_string_lossy()),
    )
    .expect("write the nextest profile");
    let argv: Vec<String> = runner
        .command(&prefix, &[], &[])
        .iter()
        .map(|a| a.replace("{nextest_config}", &config.to_string_lossy()))
        .collect();
    let output = cargo_run(dir.path(), &argv, &report_path);
    let format = runner.report_format_for(&prefix);
    assert_eq!(format, ReportFormat::NextestJunit);
    let bytes = std::fs::read(&report_path).unwrap_or_else(|e| {
        panic!(
            "cargo-nextest wrote no JUnit ({e}; is it installed?): {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let report = parsed(parse(
        &format,
        Some(&libtest::frame_nextest(Some(&bytes), &output.stdout)),
    ));
    let outcome = Outcome::Passed;
    let own = |file: &str, name: &str, outcome| {
        (file.to_owned(), String::new(), name.to_owned(), outcome)
    };
    // nextest runs no doc tests and lists no ignored test.
    assert_eq!(
        cargo_cases(&report),
        [
            own("ledger", "tests::counts_pages", outcome),
            own("pager", "tests::counts_pages", outcome),
            own("pager::api", "counts_pages", outcome),
            own("pager::api", "partial_page_is_a_page", Outcome::Failed),
        ]
    );
    // A suite that hides its failure, or a case slipped into a suite, is never read as a pass.
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let hidden = text.replacen(
        "errors=\"0\" failures=\"1\">",
        "errors=\"0\" failures=\"0\">",
        1,
    );
    let forged = text.replacen(
        "<testcase name=\"counts_pages\"",
        "<testcase name=\"forged\" classname=\"pager::api\"/><testcase name=\"counts_pages\"",
        1,
    );
    for garbled in [hidden, forged] {
        assert_ne!(garbled, text, "the garbling applies");
        assert!(matches!(
            libtest::parse_nextest_junit(garbled.as_bytes()),
            ReportOutcome::Inconsistent(_)
        ));
    }
}
