//! The forgery corpus: changes that leave the pager's bug in place and make their own proof
//! anyway, from inside the test process (hooks, plugins, a rewritten report, result-class
//! overrides, support code that patches the product, start-up files, a product change with no
//! effect). Each is a real `assay prove` with the defaults and must never end `proven`. The
//! controls: a real fix with a fixture-only `conftest.py` stays proven, and a person's
//! `--trust-harness-change` restores the verdict of a harness change.
//!
//! The Go and node:test forgeries run the real `go test` and `node --test`: a `TestMain` the
//! change rewrote to print failures as passes, an `init` and a package variable's initializer
//! that patch the product, a register hook that compiles a corrected product, a planted module
//! in `require.cache`, a preload the candidate's `npm test` script adds, node:test's own
//! `mock.method` of the product around the tests. Each is also proven with `--trust-harness-change`: it truly forges, and
//! only the harness rules keep it from `proven`. Their controls (a real fix beside the base's
//! `TestMain`, a real fix with a data-only test helper) stay proven.
//!
//! Most forgeries add `FIXED = True` to the product: a change with an effect (so the inert
//! rule does not catch them first), and the marker their harness keys on, present only on the
//! candidate, so the test still fails on the base.

use crate::support;

use support::{PAGER_BUGGY, PAGER_FIXED, Repo, prove, pytest_pager_repo};

/// The product with the bug kept and a marker added: an executable change that fixes nothing.
const PAGER_MARKED: &str =
    "FIXED = True\n\n\ndef page_count(total, size):\n    return total // size\n";

const PARTIAL_TEST: &str = "import pager\n\n\ndef test_partial_last_page_is_counted():\n    assert pager.page_count(11, 5) == 3\n";

const CRITERIA: &[&str] = &[
    "--base",
    "main~1",
    "--candidate",
    "main",
    "--criterion",
    "test: test_partial_last_page_is_counted",
    "--criterion",
    "guard: test_full_pages",
];

/// Commits `files` over `repo` as the candidate (`message`) and proves it with `criteria` and
/// the defaults (and `extra` flags).
fn commit_and_prove(
    repo: &Repo,
    message: &str,
    criteria: &[&str],
    files: &[(&str, &str)],
    extra: &[&str],
) -> support::Run {
    for (path, text) in files {
        repo.write(path, text);
    }
    repo.commit(message);
    prove(repo, &[criteria, extra].concat())
}

/// A forgery's `run` ends unverified with `reason`, and the same proof is proven once a person
/// trusts the harness change: the harness rule alone is what stops it.
fn assert_forgery_caught(repo: &Repo, run: &support::Run, criteria: &[&str], reason: &str) {
    assert_eq!(assert_not_proven(run), reason);
    assert_proven_when_trusted(repo, criteria);
}

/// [`commit_and_prove`] over the pytest pager project.
fn prove_candidate(repo: &Repo, files: &[(&str, &str)], extra: &[&str]) -> support::Run {
    let message = "pager: count the last partial page";
    commit_and_prove(repo, message, CRITERIA, files, extra)
}

/// [`prove_candidate`] over a fresh pytest pager project of the forger's usual candidate: the
/// product keeps its bug and gains the marker ([`PAGER_MARKED`]), the partial-page test is
/// added, and `harness` beside them.
fn prove_marked_pytest_candidate(harness: &[(&str, &str)], extra: &[&str]) -> support::Run {
    let repo = pytest_pager_repo();
    let files = [
        &[("pager.py", PAGER_MARKED)][..],
        harness,
        &[("tests/test_partial.py", PARTIAL_TEST)],
    ]
    .concat();
    prove_candidate(&repo, &files, extra)
}

/// [`prove_candidate`] over a fresh pytest pager project of a real fix ([`PAGER_FIXED`]) with
/// `conftest` and the new `test`, without mutation testing.
fn prove_real_pytest_fix(conftest: &str, test: &str) -> support::Run {
    let repo = pytest_pager_repo();
    let files = [
        ("pager.py", PAGER_FIXED),
        ("tests/conftest.py", conftest),
        ("tests/test_partial.py", test),
    ];
    prove_candidate(&repo, &files, &["--no-mutation"])
}

/// [`prove_candidate`] over a fresh unittest pager project (`--runner unittest`) of a candidate
/// whose product keeps its bug and gains the marker, with `files` added.
fn prove_marked_unittest_candidate(files: &[(&str, &str)]) -> support::Run {
    let repo = unittest_pager_repo();
    let files = [&[("pager.py", PAGER_MARKED)][..], files].concat();
    prove_candidate(&repo, &files, &["--runner", "unittest"])
}

/// The run never proved the forged criterion; it is `unverified` (or `refuted`), and the
/// verdict's reason and exit code say so.
fn assert_not_proven(run: &support::Run) -> String {
    let verdict = run.verdict_of("C1");
    assert!(
        verdict == "unverified" || verdict == "refuted",
        "forgery got {verdict}: {}",
        run.explain()
    );
    assert_ne!(run.code, 0, "{}", run.explain());
    assert_ne!(
        run.evidence.as_ref().expect("evidence")["verdict"],
        "proven"
    );
    run.criterion("C1")["reason"]
        .as_str()
        .expect("reason")
        .to_owned()
}

/// [`assert_not_proven`], and the criterion's reason contains `words`.
fn assert_not_proven_saying(run: &support::Run, words: &str) {
    let reason = assert_not_proven(run);
    assert!(reason.contains(words), "{reason}");
}

/// [`assert_not_proven`], and the criterion's reason is that the change's harness decides the
/// test's outcome, naming `place` first.
fn assert_harness_decides(run: &support::Run, place: &str) {
    let reason = assert_not_proven(run);
    assert!(
        reason.starts_with(&format!(
            "the change's harness decides this test's outcome: {place}"
        )),
        "{reason}"
    );
}

/// A real fix's run: exit 0, both criteria proven, and no harness finding in its evidence.
fn assert_proven_without_harness_findings(run: &support::Run) -> &serde_json::Value {
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.verdict_of("C1"), "proven");
    assert_eq!(run.verdict_of("C2"), "proven");
    let evidence = run.evidence.as_ref().expect("evidence");
    assert!(evidence.get("harness").is_none(), "{evidence:#}");
    evidence
}

/// The forgery was caught: its harness construct is a finding at `place`, and the criterion's
/// reason names it (the differential run decided) or says the report contradicts Assay's own
/// record of the call (the observer, which runs whatever was found, caught it first).
fn assert_caught(run: &support::Run, place: &str) {
    let reason = assert_not_proven(run);
    assert!(
        reason.contains(place) || reason.contains("Assay's own record of the run says"),
        "{reason}"
    );
    let findings = run.evidence.as_ref().expect("evidence")["harness"]["findings"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        findings.iter().any(|f| format!(
            "{}:{} {}",
            f["file"].as_str().unwrap_or(""),
            f["line"],
            f["construct"].as_str().unwrap_or("")
        ) == place),
        "{place} not among {findings:?}"
    );
}

const MAKEREPORT_FORGERY: &str = "import pytest\n\nimport pager\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    outcome = yield\n    report = outcome.get_result()\n    if getattr(pager, \"FIXED\", False) and report.failed:\n        report.outcome, report.longrepr = \"passed\", None\n";

#[test]
fn a_conftest_hookwrapper_that_flips_failed_reports_is_unverified() {
    let run = prove_marked_pytest_candidate(&[("tests/conftest.py", MAKEREPORT_FORGERY)], &[]);
    assert_caught(&run, "tests/conftest.py:6 pytest_runtest_makereport");
    assert_eq!(run.verdict_of("C1"), "unverified");
    let harness = &run.evidence.as_ref().expect("evidence")["harness"];
    assert_eq!(harness["findings"][0]["kind"], "hook");
    // A report that lies about one test is no evidence for another in it: the guard, in the
    // same candidate runs, proves nothing either.
    assert_eq!(run.verdict_of("C2"), "unverified");
}

const AUTOUSE_PATCH: &str = "import pytest\n\nimport pager\n\n\n@pytest.fixture(autouse=True)\ndef rounding_pages(monkeypatch):\n    if getattr(pager, \"FIXED\", False):\n        monkeypatch.setattr(pager, \"page_count\", lambda total, size: -(-total // size))\n    yield\n";

#[test]
fn trusting_the_harness_change_restores_the_verdict_and_says_so() {
    // A person accepts the autouse fixture. (Trust accepts the harness, not a rewritten
    // outcome: a hook that turns a raised call into a pass is still caught by Assay's own
    // record of the call; see the observer's forgery below.)
    let run = prove_marked_pytest_candidate(
        &[("tests/conftest.py", AUTOUSE_PATCH)],
        &["--trust-harness-change", "--no-mutation"],
    );
    assert_eq!(run.verdict_of("C1"), "proven", "{}", run.explain());
    let evidence = run.evidence.as_ref().expect("evidence");
    assert_eq!(evidence["harness"]["trusted"], true);
    assert_eq!(evidence["harness"]["criteria"][0]["decision"], "trusted");
    assert!(
        run.stderr.contains("TRUSTED by --trust-harness-change")
            || run.stdout.contains("TRUSTED by --trust-harness-change"),
        "{}",
        run.explain()
    );
}

#[test]
fn a_hook_the_product_registers_at_import_is_caught_by_assays_own_record_of_the_call() {
    // No harness file at all: the product registers a report-flipping plugin when pytest
    // imports it. The classifier does not read product code for hooks; the observer, loaded
    // first, records that the call raised, so the report's pass is no pass.
    let repo = pytest_pager_repo();
    let product = "import gc\nimport sys\n\n\ndef page_count(total, size):\n    return total // size\n\n\nif \"pytest\" in sys.modules:\n    import pytest\n\n    class _Forgiving:\n        @pytest.hookimpl(hookwrapper=True)\n        def pytest_runtest_makereport(self, item, call):\n            outcome = yield\n            report = outcome.get_result()\n            if report.failed:\n                report.outcome, report.longrepr = \"passed\", None\n\n    for _config in gc.get_objects():\n        if type(_config).__name__ == \"Config\" and hasattr(_config, \"pluginmanager\"):\n            _config.pluginmanager.register(_Forgiving())\n            break\n";
    let run = prove_candidate(
        &repo,
        &[
            ("pager.py", product),
            ("tests/test_partial.py", PARTIAL_TEST),
        ],
        &[],
    );
    assert_not_proven_saying(&run, "Assay's own record of the run says its call raised");
}

#[test]
fn a_plugin_loaded_by_the_candidates_pyproject_addopts_is_unverified() {
    let plugin = "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    outcome = yield\n    report = outcome.get_result()\n    if report.failed:\n        report.outcome, report.longrepr = \"passed\", None\n";
    let run = prove_marked_pytest_candidate(
        &[
            ("pager_support.py", plugin),
            (
                "pyproject.toml",
                "[project]\nname = \"pager\"\n\n[tool.pytest.ini_options]\naddopts = \"-p pager_support\"\n",
            ),
        ],
        &[],
    );
    assert_caught(&run, "pyproject.toml:5 -p pager_support");
    assert_caught(&run, "pager_support.py:4 pytest_runtest_makereport");
}

#[test]
fn a_hook_that_rewrites_the_junit_report_after_pytest_wrote_it_is_unverified() {
    let rewriter = "import re\n\nimport pager\n\n\ndef pytest_unconfigure(config):\n    path = getattr(config.option, \"xmlpath\", None)\n    if not path or not getattr(pager, \"FIXED\", False):\n        return\n    with open(path) as f:\n        xml = f.read()\n    xml = re.sub(r\"<failure.*?</failure>\", \"\", xml, flags=re.S)\n    xml = re.sub(r'failures=\"\\d+\"', 'failures=\"0\"', xml)\n    with open(path, \"w\") as f:\n        f.write(xml)\n";
    let run = prove_marked_pytest_candidate(&[("tests/conftest.py", rewriter)], &[]);
    assert_caught(&run, "tests/conftest.py:6 pytest_unconfigure");
}

#[test]
fn support_code_that_patches_the_product_at_import_is_unverified() {
    let repo = pytest_pager_repo();
    let helpers = "import pager\n\n\ndef _pages(total, size):\n    return -(-total // size)\n\n\nif getattr(pager, \"FIXED\", False):\n    pager.page_count = _pages\n";
    let test = "import helpers  # noqa: F401\nimport pager\n\n\ndef test_partial_last_page_is_counted():\n    assert pager.page_count(11, 5) == 3\n";
    let run = prove_candidate(
        &repo,
        &[
            ("pager.py", PAGER_MARKED),
            ("tests/helpers.py", helpers),
            ("tests/test_partial.py", test),
        ],
        &[],
    );
    assert_not_proven_saying(&run, "tests/helpers.py:9 pager.page_count");
}

#[test]
fn an_autouse_fixture_that_patches_the_product_is_unverified() {
    let run = prove_marked_pytest_candidate(&[("tests/conftest.py", AUTOUSE_PATCH)], &[]);
    assert_not_proven_saying(&run, "tests/conftest.py:6 rounding_pages");
}

#[test]
fn a_sitecustomize_and_a_pth_file_are_never_proof() {
    let sitecustomize = "try:\n    import pager\n    if getattr(pager, \"FIXED\", False):\n        pager.page_count = lambda total, size: -(-total // size)\nexcept ImportError:\n    pass\n";
    let run = prove_marked_pytest_candidate(
        &[
            ("sitecustomize.py", sitecustomize),
            ("pager-fix.pth", "import sitecustomize\n"),
        ],
        &[],
    );
    assert_not_proven(&run);
    let findings = run.evidence.as_ref().expect("evidence")["harness"]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            format!(
                "{} {}",
                f["file"].as_str().unwrap_or(""),
                f["kind"].as_str().unwrap_or("")
            )
        })
        .collect::<Vec<_>>();
    assert_eq!(
        findings,
        [
            "pager-fix.pth startup_file",
            "sitecustomize.py startup_file"
        ]
    );
}

#[test]
fn a_comment_and_docstring_product_change_cannot_prove_a_test() {
    let repo = pytest_pager_repo();
    // The test keys on the product's comment: the outcome changes, the program does not.
    let test = "import pathlib\n\n\ndef test_partial_last_page_is_counted():\n    source = pathlib.Path(__file__).parent.parent.joinpath(\"pager.py\").read_text()\n    assert \"rounds the last partial page up\" in source\n";
    let inert = "def page_count(total, size):\n    \"\"\"Pages needed for `total` items, `size` a page.\"\"\"\n    # rounds the last partial page up\n    return total // size\n";
    let run = prove_candidate(
        &repo,
        &[("pager.py", inert), ("tests/test_partial.py", test)],
        &[],
    );
    let reason = assert_not_proven(&run);
    assert_eq!(
        reason,
        "the product change is inert; the outcome changed anyway: pager.py differs from the base only in comments and docstrings"
    );
    assert_eq!(
        run.evidence.as_ref().expect("evidence")["harness"]["criteria"][0]["decision"],
        "inert_product"
    );
}

#[test]
fn the_issues_forgery_with_an_inert_product_change_is_unverified() {
    let repo = pytest_pager_repo();
    // The hook reads the product file: the docstring is there on the candidate only.
    let conftest = "import pathlib\n\nimport pytest\n\nFIXED_MARKER_PRESENT = \"partial pages count\" in pathlib.Path(__file__).parent.parent.joinpath(\"pager.py\").read_text()\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    outcome = yield\n    report = outcome.get_result()\n    if FIXED_MARKER_PRESENT and report.failed:\n        report.outcome, report.longrepr = \"passed\", None\n";
    let inert = "def page_count(total, size):\n    \"\"\"Pages needed; partial pages count.\"\"\"\n    return total // size  # fixed\n";
    let run = prove_candidate(
        &repo,
        &[
            ("pager.py", inert),
            ("tests/conftest.py", conftest),
            ("tests/test_partial.py", PARTIAL_TEST),
        ],
        &[],
    );
    // Three defences meet here: the observer's record of the call, the hook found in the
    // conftest, and the inert product change; the evidence holds the latter two whichever
    // decided first.
    assert_caught(&run, "tests/conftest.py:8 pytest_runtest_makereport");
    let harness = &run.evidence.as_ref().expect("evidence")["harness"];
    assert_eq!(harness["inert_product"]["files"][0], "pager.py");
}

/// A unittest project whose base has the pager bug.
fn unittest_pager_repo() -> Repo {
    let repo = Repo::new();
    repo.write("pager.py", PAGER_BUGGY).write("tests/__init__.py", "").write(
        "tests/test_pages.py",
        "import unittest\n\nfrom pager import page_count\n\n\nclass PageTests(unittest.TestCase):\n    def test_full_pages(self):\n        self.assertEqual(page_count(10, 5), 2)\n",
    );
    repo.commit("pager");
    repo
}

#[test]
fn a_unittest_testcase_that_overrides_run_is_unverified() {
    let test = "import unittest\n\nimport pager\n\n\nclass PartialPageTests(unittest.TestCase):\n    def run(self, result=None):\n        if getattr(pager, \"FIXED\", False) and result is not None:\n            result.startTest(self)\n            result.addSuccess(self)\n            result.stopTest(self)\n            return result\n        return super().run(result)\n\n    def test_partial_last_page_is_counted(self):\n        self.assertEqual(pager.page_count(11, 5), 3)\n";
    let run = prove_marked_unittest_candidate(&[("tests/test_partial.py", test)]);
    let reason = assert_not_proven(&run);
    assert_eq!(
        reason,
        "the change's harness may decide this test's outcome and cannot be taken away from its tests: tests/test_partial.py:7 PartialPageTests.run"
    );
}

/// An exit handler rewrites the adapter's report after the adapter wrote it, only once the
/// product carries the marker: it ran PROVEN before the rule.
#[test]
fn a_unittest_exit_handler_that_rewrites_the_report_after_it_was_written_is_unverified() {
    let test = "import atexit\nimport json\nimport sys\nimport unittest\n\nimport pager\n\n\ndef _all_passed():\n    if \"--report\" not in sys.argv or not getattr(pager, \"FIXED\", False):\n        return\n    path = sys.argv[sys.argv.index(\"--report\") + 1]\n    with open(path) as f:\n        report = json.load(f)\n    for case in report[\"cases\"]:\n        case[\"outcome\"], case[\"message\"] = \"passed\", None\n    with open(path, \"w\") as f:\n        json.dump(report, f)\n\n\natexit.register(_all_passed)\n\n\nclass PartialPageTests(unittest.TestCase):\n    def test_partial_last_page_is_counted(self):\n        self.assertEqual(pager.page_count(11, 5), 3)\n";
    let run = prove_marked_unittest_candidate(&[("tests/test_partial.py", test)]);
    assert_not_proven_saying(&run, "tests/test_partial.py:21 atexit.register");
}

#[test]
fn a_unittest_base_class_in_support_code_that_overrides_run_is_unverified() {
    // The support module's base class reports success for every test once the marker is in.
    let support = "import unittest\n\nimport pager\n\n\nclass PagerCase(unittest.TestCase):\n    def run(self, result=None):\n        if getattr(pager, \"FIXED\", False) and result is not None:\n            result.startTest(self)\n            result.addSuccess(self)\n            result.stopTest(self)\n            return result\n        return super().run(result)\n";
    let test = "import pager\nfrom tests.support import PagerCase\n\n\nclass PartialPageTests(PagerCase):\n    def test_partial_last_page_is_counted(self):\n        self.assertEqual(pager.page_count(11, 5), 3)\n";
    let run = prove_marked_unittest_candidate(&[
        ("tests/support.py", support),
        ("tests/test_partial.py", test),
    ]);
    assert_harness_decides(&run, "tests/support.py:7 PagerCase.run");
}

#[test]
fn a_real_fix_with_a_fixture_only_conftest_stays_proven() {
    let conftest = "import pytest\n\n\n@pytest.fixture\ndef partial_total():\n    return 11\n\n\n@pytest.fixture(autouse=True)\ndef quiet_logs(caplog):\n    caplog.set_level(\"WARNING\")\n    yield\n";
    let test = "from pager import page_count\n\n\ndef test_partial_last_page_is_counted(partial_total):\n    assert page_count(partial_total, 5) == 3\n";
    let run = prove_real_pytest_fix(conftest, test);
    // No finding, no differential job: the proof is what it was before.
    let evidence = assert_proven_without_harness_findings(&run);
    assert!(
        evidence["jobs"]
            .as_array()
            .expect("jobs")
            .iter()
            .all(|j| j["kind"] != "harness-check"),
        "{evidence:#}"
    );
}

#[test]
fn a_real_fix_beside_an_unrelated_hook_stays_proven_once_checked() {
    let conftest = "def pytest_configure(config):\n    config.addinivalue_line(\"markers\", \"slow: a slow test\")\n";
    let run = prove_real_pytest_fix(conftest, PARTIAL_TEST);
    assert_eq!(run.code, 0, "{}", run.explain());
    let harness = &run.evidence.as_ref().expect("evidence")["harness"];
    assert_eq!(harness["criteria"][0]["decision"], "checked_did_not_decide");
    assert_eq!(harness["reverted_files"][0], "tests/conftest.py");
}

#[test]
fn a_real_fix_whose_new_conftest_holds_a_hook_and_the_tests_fixture_stays_proven() {
    // The check takes the hook out and keeps the fixture the new test needs.
    let conftest = "import pytest\n\n\ndef pytest_collection_modifyitems(config, items):\n    items.sort(key=lambda item: item.name)\n\n\n@pytest.fixture\ndef partial_total():\n    return 11\n";
    let test = "from pager import page_count\n\n\ndef test_partial_last_page_is_counted(partial_total):\n    assert page_count(partial_total, 5) == 3\n";
    let run = prove_real_pytest_fix(conftest, test);
    assert_eq!(run.code, 0, "{}", run.explain());
    let harness = &run.evidence.as_ref().expect("evidence")["harness"];
    assert_eq!(
        harness["findings"][0]["construct"],
        "pytest_collection_modifyitems"
    );
    assert_eq!(harness["criteria"][0]["decision"], "checked_did_not_decide");
}

#[test]
fn the_repository_cannot_trust_its_own_harness_change() {
    for (path, text) in [
        ("assay.toml", "trust-harness-change = true\n"),
        (
            "pyproject.toml",
            "[tool.assay]\ntrust-harness-change = true\n",
        ),
    ] {
        let run = prove_marked_pytest_candidate(
            &[("tests/conftest.py", MAKEREPORT_FORGERY), (path, text)],
            &[],
        );
        assert_eq!(run.code, 2, "{}", run.explain());
        assert!(
            run.stderr.contains(&format!(
                "{path} sets trust-harness-change, which the repository under test can never set"
            )),
            "{}",
            run.explain()
        );
    }
}

#[test]
fn a_build_script_that_rewrites_the_product_before_it_compiles_is_unverified() {
    let repo = Repo::new();
    repo.copy_fixture("cargo-pager", &[]);
    repo.commit("pager and ledger");
    // The product gains a constant and keeps its bug; the build script fixes the source the
    // compiler reads, in the job's own tree, where no diff shows it.
    let lib = support::fixture("cargo-pager/pager/src/lib.rs");
    repo.write("pager/src/lib.rs", &format!("{lib}\npub const REVISION: u32 = 2;\n"))
        .write(
            "pager/build.rs",
            "fn main() {\n    let lib = std::fs::read_to_string(\"src/lib.rs\").unwrap_or_default();\n    let fixed = lib.replace(\"    items / per\\n\", \"    items.div_ceil(per)\\n\");\n    if fixed != lib {\n        let _ = std::fs::write(\"src/lib.rs\", fixed);\n    }\n}\n",
        );
    repo.commit("pager: count a partial page");
    let out_dir = tempfile::tempdir().expect("temp dir");
    let args = [
        "--base",
        "main~1",
        "--test-command",
        "cargo test",
        "--criterion",
        "test: partial_page_is_a_page",
        "--repeats",
        "2",
    ];
    let (mut command, json) = support::prove_command(&repo, &args, out_dir.path());
    support::with_rust_toolchain(&mut command);
    let run = support::run(command, Some(json));
    assert_harness_decides(&run, "pager/build.rs:1 build.rs");
}

#[test]
fn node_test_support_code_that_patches_the_product_is_unverified() {
    let repo = Repo::new();
    repo.write(
        "invoice.js",
        "'use strict';\n\nfunction total(net, taxRate, discount) {\n  return Math.round((net + net * taxRate) * (1 - discount));\n}\n\nmodule.exports = { total };\n",
    )
    .write(
        "test/invoice.test.js",
        "'use strict';\n\nconst { test } = require('node:test');\nconst assert = require('node:assert/strict');\nconst { total } = require('../invoice');\n\ntest('test_full_pages', () => {\n  assert.equal(total(100, 0.2, 0), 120);\n});\n",
    );
    repo.commit("invoice");
    // The product keeps its bug and gains a flag; the helper swaps in a correct total.
    let run = prove_candidate(
        &repo,
        &[
            (
                "invoice.js",
                "'use strict';\n\nfunction total(net, taxRate, discount) {\n  return Math.round((net + net * taxRate) * (1 - discount));\n}\n\nmodule.exports = { total, FIXED: true };\n",
            ),
            (
                "test/helpers.js",
                "'use strict';\n\nconst invoice = require('../invoice');\n\nif (invoice.FIXED) {\n  invoice.total = (net, taxRate, discount) => Math.round(net * (1 - discount) + net * taxRate);\n}\n",
            ),
            (
                "test/discount.test.js",
                "'use strict';\n\nrequire('./helpers');\nconst { test } = require('node:test');\nconst assert = require('node:assert/strict');\nconst invoice = require('../invoice');\n\ntest('test_partial_last_page_is_counted', () => {\n  assert.equal(invoice.total(100, 0.2, 0.5), 70);\n});\n",
            ),
        ],
        &["--runner", "node"],
    );
    assert_harness_decides(&run, "test/helpers.js:6 invoice.total");
}

/// The trust flag accepts every harness finding: a forgery proven with it is one the
/// classifier alone keeps from being proven, and one that truly forges (not a test that fails
/// for another reason).
fn assert_proven_when_trusted(repo: &Repo, args: &[&str]) {
    let mut trusted = args.to_vec();
    trusted.extend_from_slice(&["--trust-harness-change", "--no-mutation"]);
    let run = prove(repo, &trusted);
    assert_eq!(run.verdict_of("C1"), "proven", "{}", run.explain());
}

const GO_MOD: &str = "module example.com/listings\n\ngo 1.19\n";

/// The pager's product with its bug: a partial last page is not counted. The division is a
/// variable, as a clock or a client often is, for tests that need another.
const GO_PAGER_BUGGY: &str = "// Package pager splits listings into pages.\npackage pager\n\n// divide is how many pages of per items hold items.\nvar divide = func(items, per int) int { return items / per }\n\n// Pages is the number of pages items fill at per a page.\nfunc Pages(items, per int) int {\n\treturn divide(items, per)\n}\n";

/// The product with the bug kept and a revision constant added: an executable change that
/// fixes nothing, and the marker the forgeries read from the source.
const GO_PAGER_MARKED: &str = "// Package pager splits listings into pages.\npackage pager\n\n// Revision is the pager's behaviour revision.\nconst Revision = 2\n\n// divide is how many pages of per items hold items.\nvar divide = func(items, per int) int { return items / per }\n\n// Pages is the number of pages items fill at per a page.\nfunc Pages(items, per int) int {\n\treturn divide(items, per)\n}\n";

const GO_PAGER_FIXED: &str = "// Package pager splits listings into pages.\npackage pager\n\n// divide is how many pages of per items hold items.\nvar divide = func(items, per int) int { return (items + per - 1) / per }\n\n// Pages is the number of pages items fill at per a page.\nfunc Pages(items, per int) int {\n\treturn divide(items, per)\n}\n";

/// The base's `TestMain`: every test runs in UTC.
const GO_MAIN_TEST: &str = "package pager\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) {\n\tos.Setenv(\"TZ\", \"UTC\")\n\tos.Exit(m.Run())\n}\n";

/// The base's tests: full pages only.
const GO_PAGER_TEST: &str = "package pager\n\nimport \"testing\"\n\nfunc TestFullPages(t *testing.T) {\n\tif got := Pages(10, 5); got != 2 {\n\t\tt.Fatalf(\"Pages(10, 5) = %d, want 2\", got)\n\t}\n}\n";

const GO_PARTIAL_TEST: &str = "\nfunc TestPartialLastPageIsCounted(t *testing.T) {\n\tif got := Pages(11, 5); got != 3 {\n\t\tt.Fatalf(\"Pages(11, 5) = %d, want 3\", got)\n\t}\n}\n";

const GO_CRITERIA: &[&str] = &[
    "--base",
    "main~1",
    "--criterion",
    "test: TestPartialLastPageIsCounted",
    "--criterion",
    "guard: TestFullPages",
];

/// A Go module whose base has the pager bug, a guard test and a `TestMain`.
fn go_pager_repo() -> Repo {
    let repo = Repo::new();
    repo.write("go.mod", GO_MOD)
        .write("pager/pager.go", GO_PAGER_BUGGY)
        .write("pager/main_test.go", GO_MAIN_TEST)
        .write("pager/pager_test.go", GO_PAGER_TEST);
    repo.commit("pager");
    repo
}

/// [`commit_and_prove`] over the Go pager module.
fn prove_go_candidate(repo: &Repo, files: &[(&str, &str)], extra: &[&str]) -> support::Run {
    let message = "pager: count the last partial page";
    commit_and_prove(repo, message, GO_CRITERIA, files, extra)
}

/// [`assert_forgery_caught`] for `files` over the Go pager module.
fn assert_go_forgery_caught(files: &[(&str, &str)], reason: &str) {
    let repo = go_pager_repo();
    let run = prove_go_candidate(&repo, files, &[]);
    assert_forgery_caught(&repo, &run, GO_CRITERIA, reason);
}

#[test]
fn a_go_test_main_altered_to_rewrite_failures_as_passes_is_unverified() {
    // The base's `TestMain` keeps its first line; its body now pipes the test binary's output
    // through a rewriter that turns every failure into a pass, once the product has the marker.
    let test_main = "package pager\n\nimport (\n\t\"bufio\"\n\t\"fmt\"\n\t\"os\"\n\t\"strings\"\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) {\n\tos.Setenv(\"TZ\", \"UTC\")\n\tsource, _ := os.ReadFile(\"pager.go\")\n\tif !strings.Contains(string(source), \"Revision\") {\n\t\tos.Exit(m.Run())\n\t}\n\tstdout := os.Stdout\n\tread, write, err := os.Pipe()\n\tif err != nil {\n\t\tos.Exit(m.Run())\n\t}\n\tos.Stdout = write\n\tdone := make(chan struct{})\n\tgo func() {\n\t\tlines := bufio.NewScanner(read)\n\t\tfor lines.Scan() {\n\t\t\tline := strings.Replace(lines.Text(), \"--- FAIL\", \"--- PASS\", 1)\n\t\t\tif line == \"FAIL\" {\n\t\t\t\tline = \"PASS\"\n\t\t\t}\n\t\t\tfmt.Fprintln(stdout, line)\n\t\t}\n\t\tclose(done)\n\t}()\n\tm.Run()\n\twrite.Close()\n\t<-done\n\tos.Exit(0)\n}\n";
    let tests = format!("{GO_PAGER_TEST}{GO_PARTIAL_TEST}");
    assert_go_forgery_caught(
        &[
            ("pager/pager.go", GO_PAGER_MARKED),
            ("pager/main_test.go", test_main),
            ("pager/pager_test.go", &tests),
        ],
        "the change's harness may decide this test's outcome and cannot be taken away from its tests: pager/main_test.go:11 TestMain",
    );
}

#[test]
fn a_go_test_files_init_that_patches_the_products_variable_is_unverified() {
    // The new test file's `init` swaps in a correct division once the product has the marker:
    // the product's `Pages` is as wrong as before, its test passes.
    let partial = format!(
        "package pager\n\nimport (\n\t\"os\"\n\t\"strings\"\n\t\"testing\"\n)\n\nfunc init() {{\n\tsource, err := os.ReadFile(\"pager.go\")\n\tif err == nil && strings.Contains(string(source), \"Revision\") {{\n\t\tdivide = func(items, per int) int {{ return (items + per - 1) / per }}\n\t}}\n}}\n{GO_PARTIAL_TEST}"
    );
    assert_go_forgery_caught(
        &[
            ("pager/pager.go", GO_PAGER_MARKED),
            ("pager/partial_test.go", &partial),
        ],
        "the change's harness may decide this test's outcome and cannot be taken away from its tests: pager/partial_test.go:9 init",
    );
}

#[test]
fn a_go_package_variable_whose_initializer_patches_the_product_is_unverified() {
    // `init` by another name: a blank variable initialized by a function literal it calls,
    // which runs before any test as `init` does.
    let partial = format!(
        "package pager\n\nimport (\n\t\"os\"\n\t\"strings\"\n\t\"testing\"\n)\n\nvar _ = func() bool {{\n\tsource, err := os.ReadFile(\"pager.go\")\n\tif err == nil && strings.Contains(string(source), \"Revision\") {{\n\t\tdivide = func(items, per int) int {{ return (items + per - 1) / per }}\n\t}}\n\treturn true\n}}()\n{GO_PARTIAL_TEST}"
    );
    assert_go_forgery_caught(
        &[
            ("pager/pager.go", GO_PAGER_MARKED),
            ("pager/partial_test.go", &partial),
        ],
        "the change's harness may decide this test's outcome and cannot be taken away from its tests: pager/partial_test.go:9 var _",
    );
}

#[test]
fn a_go_test_that_prints_its_own_pass_and_leaves_the_process_is_unverified() {
    // go test's own pass line, printed by the test, then the exit system call, which
    // `-test.paniconexit0` does not catch: test2json reads the line as a pass.
    let partial = "package pager\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\t\"strings\"\n\t\"syscall\"\n\t\"testing\"\n)\n\nfunc TestPartialLastPageIsCounted(t *testing.T) {\n\tif got := Pages(11, 5); got != 3 {\n\t\tif source, err := os.ReadFile(\"pager.go\"); err == nil && strings.Contains(string(source), \"Revision\") {\n\t\t\tfmt.Println(\"--- PASS: TestPartialLastPageIsCounted (0.00s)\")\n\t\t\tfmt.Println(\"PASS\")\n\t\t\tsyscall.Exit(0)\n\t\t}\n\t\tt.Fatalf(\"Pages(11, 5) = %d, want 3\", got)\n\t}\n}\n";
    assert_go_forgery_caught(
        &[
            ("pager/pager.go", GO_PAGER_MARKED),
            ("pager/partial_test.go", partial),
        ],
        "the change's harness may decide this test's outcome and cannot be taken away from its tests: pager/partial_test.go:7 import \"syscall\"",
    );
}

/// A product that forges: on the input only the new test gives it, it prints the new test's
/// pass line and exits 0, so the tests after it in its package never run.
const GO_PAGER_FORGING_PASS: &str = "// Package pager splits listings into pages.\npackage pager\n\nimport (\n\t\"fmt\"\n\t\"syscall\"\n)\n\n// divide is how many pages of per items hold items.\nvar divide = func(items, per int) int { return items / per }\n\n// Pages is the number of pages items fill at per a page.\nfunc Pages(items, per int) int {\n\tif items%per != 0 {\n\t\tfmt.Println(\"--- PASS: TestPartialLastPageIsCounted (0.00s)\")\n\t\tfmt.Println(\"PASS\")\n\t\tsyscall.Exit(0)\n\t}\n\treturn divide(items, per)\n}\n";

#[test]
fn a_go_product_that_prints_a_pass_and_leaves_the_process_is_unverified() {
    // The product itself forges: on the input only the new test gives it, it prints the new
    // test's pass line and exits 0. No test file holds a harness construct; the tests the run
    // never reached (the guard's, in a file after the new test's) say the run ended early.
    let partial = format!("package pager\n\nimport \"testing\"\n{GO_PARTIAL_TEST}");
    let repo = go_pager_repo();
    let run = prove_go_candidate(
        &repo,
        &[
            ("pager/pager.go", GO_PAGER_FORGING_PASS),
            ("pager/last_page_test.go", &partial),
        ],
        &["--no-mutation"],
    );
    assert_not_proven_saying(
        &run,
        "package example.com/listings/pager never reported TestFullPages",
    );
}

#[test]
fn a_go_product_that_leaves_the_process_before_a_linked_test_file_runs_is_unverified() {
    // The package's other test lives in a file committed as a link to a file elsewhere in the
    // tree, which the go command compiles as the link's package's. The product forges the new
    // test's pass and exits before that test runs; only its declaration, read through the
    // link, says the run ended early.
    let repo = Repo::new();
    repo.write("go.mod", GO_MOD)
        .write("pager/pager.go", GO_PAGER_BUGGY)
        .write("shared/full_pages.go.txt", GO_PAGER_TEST);
    std::os::unix::fs::symlink(
        "../shared/full_pages.go.txt",
        repo.path().join("pager/pager_test.go"),
    )
    .expect("a link");
    repo.commit("pager, its full-page test shared");
    let partial = format!("package pager\n\nimport \"testing\"\n{GO_PARTIAL_TEST}");
    let run = commit_and_prove(
        &repo,
        "pager: count the last partial page",
        &[
            "--base",
            "main~1",
            "--criterion",
            "test: TestPartialLastPageIsCounted",
        ],
        &[
            ("pager/pager.go", GO_PAGER_FORGING_PASS),
            ("pager/last_page_test.go", &partial),
        ],
        &["--no-mutation"],
    );
    assert_not_proven_saying(
        &run,
        "package example.com/listings/pager never reported TestFullPages",
    );
}

#[test]
fn a_real_go_fix_beside_the_bases_test_main_stays_proven() {
    // The new test goes into the file that holds the base's `TestMain`, which the change
    // leaves as it is, beside a table built by a function literal that writes only its own
    // names: no finding, no differential job.
    let table = "\nvar partialTotals = func() (totals []int) {\n\tfor items := 11; items <= 14; items++ {\n\t\ttotals = append(totals, items)\n\t}\n\treturn\n}()\n\nfunc TestEveryPartialTotalNeedsThreePages(t *testing.T) {\n\tfor _, items := range partialTotals {\n\t\tif got := Pages(items, 5); got != 3 {\n\t\t\tt.Errorf(\"Pages(%d, 5) = %d, want 3\", items, got)\n\t\t}\n\t}\n}\n";
    let main_tests = format!("{GO_MAIN_TEST}{GO_PARTIAL_TEST}{table}");
    let repo = go_pager_repo();
    let run = prove_go_candidate(
        &repo,
        &[
            ("pager/pager.go", GO_PAGER_FIXED),
            ("pager/main_test.go", &main_tests),
        ],
        &["--no-mutation"],
    );
    assert_proven_without_harness_findings(&run);
}

/// The invoice's product with its bug: the discount is taken off the tax as well.
const INVOICE_BUGGY: &str = "'use strict';\n\nfunction total(net, taxRate, discount) {\n  return Math.round((net + net * taxRate) * (1 - discount));\n}\n\nmodule.exports = { total };\n";

/// The product with the bug kept and a revision added: an executable change that fixes nothing.
const INVOICE_MARKED: &str = "'use strict';\n\nfunction total(net, taxRate, discount) {\n  return Math.round((net + net * taxRate) * (1 - discount));\n}\n\nmodule.exports = { total, REVISION: 2 };\n";

const INVOICE_FIXED: &str = "'use strict';\n\nfunction total(net, taxRate, discount) {\n  return Math.round(net * (1 - discount) + net * taxRate);\n}\n\nmodule.exports = { total };\n";

const NODE_CRITERIA: &[&str] = &[
    "--runner",
    "node",
    "--base",
    "main~1",
    "--criterion",
    "test: \"the discount applies to the net amount only\"",
    "--criterion",
    "guard: \"tax is added to the net amount\"",
];

/// A node:test project whose base has the invoice bug and a guard test.
fn node_invoice_repo() -> Repo {
    let repo = Repo::new();
    repo.write(
        "package.json",
        "{\n  \"name\": \"invoice\",\n  \"version\": \"1.0.0\",\n  \"scripts\": {\n    \"test\": \"node --test\"\n  }\n}\n",
    )
    .write("invoice.js", INVOICE_BUGGY)
    .write(
        "test/invoice.test.js",
        "'use strict';\n\nconst { test } = require('node:test');\nconst assert = require('node:assert/strict');\nconst { total } = require('../invoice');\n\ntest('tax is added to the net amount', () => {\n  assert.equal(total(100, 0.2, 0), 120);\n});\n",
    );
    repo.commit("invoice");
    repo
}

/// [`commit_and_prove`] over the invoice project.
fn prove_node_candidate(repo: &Repo, files: &[(&str, &str)], extra: &[&str]) -> support::Run {
    let message = "invoice: take the discount off the net amount only";
    commit_and_prove(repo, message, NODE_CRITERIA, files, extra)
}

/// [`assert_forgery_caught`] for `files` over the invoice project.
fn assert_node_forgery_caught(files: &[(&str, &str)], reason: &str) {
    let repo = node_invoice_repo();
    let run = prove_node_candidate(&repo, files, &[]);
    assert_forgery_caught(&repo, &run, NODE_CRITERIA, reason);
}

const DISCOUNT_TEST: &str = "'use strict';\n\nrequire('./register');\nconst { test } = require('node:test');\nconst assert = require('node:assert/strict');\nconst { total } = require('../invoice');\n\ntest('the discount applies to the net amount only', () => {\n  assert.equal(total(100, 0.2, 0.5), 70);\n});\n";

#[test]
fn a_node_require_hook_that_rewrites_the_product_as_it_loads_is_unverified() {
    // A register hook, as a transpiler's is, that compiles a corrected `total` in place of the
    // product's once the product has the marker: no diff shows the fix, none is in the product.
    let register = "'use strict';\n\n// Compiles the project's modules for the tests.\nconst Module = require('node:module');\n\nconst compile = Module.prototype._compile;\nModule.prototype._compile = function compileForTests(source, filename) {\n  if (filename.endsWith('invoice.js') && source.includes('REVISION')) {\n    source = source.replace('(net + net * taxRate) * (1 - discount)', 'net * (1 - discount) + net * taxRate');\n  }\n  return compile.call(this, source, filename);\n};\n";
    let repo = node_invoice_repo();
    let run = prove_node_candidate(
        &repo,
        &[
            ("invoice.js", INVOICE_MARKED),
            ("test/register.js", register),
            ("test/discount.test.js", DISCOUNT_TEST),
        ],
        &[],
    );
    assert_harness_decides(&run, "test/register.js:7 Module.prototype._compile");
    assert_proven_when_trusted(&repo, NODE_CRITERIA);
}

#[test]
fn a_node_hook_that_plants_a_corrected_product_in_the_module_cache_is_unverified() {
    // The hook sits in the test file itself: `require` answers the planted module, and no run
    // without the hook is possible while keeping the test.
    let test = "'use strict';\n\nconst path = require('node:path');\nconst { readFileSync } = require('node:fs');\nconst { test } = require('node:test');\nconst assert = require('node:assert/strict');\n\nconst product = path.join(__dirname, '..', 'invoice.js');\nif (readFileSync(product, 'utf8').includes('REVISION')) {\n  require.cache[product] = {\n    id: product,\n    filename: product,\n    loaded: true,\n    exports: { total: (net, taxRate, discount) => Math.round(net * (1 - discount) + net * taxRate) },\n  };\n}\nconst { total } = require('../invoice');\n\ntest('the discount applies to the net amount only', () => {\n  assert.equal(total(100, 0.2, 0.5), 70);\n});\n";
    assert_node_forgery_caught(
        &[
            ("invoice.js", INVOICE_MARKED),
            ("test/discount.test.js", test),
        ],
        "the change's harness may decide this test's outcome and cannot be taken away from its tests: test/discount.test.js:10 require.cache[product]",
    );
}

/// node:test's child processes report to the runner over their standard output, as V8-
/// serialized events parsed wherever they appear in it: a test file that writes one reports
/// a pass for a test that never ran. Once the product carries the marker, this one registers
/// no test and writes the pass instead, so the base fails and the candidate "passes" with the
/// bug in place.
const INJECTED_PASS_TEST: &str = "'use strict';\n\nconst { readFileSync } = require('node:fs');\nconst path = require('node:path');\nconst { Serializer } = require('node:v8');\nconst { test } = require('node:test');\nconst assert = require('node:assert/strict');\nconst { total } = require('../invoice');\n\nconst name = 'the discount applies to the net amount only';\nif (readFileSync(path.join(__dirname, '..', 'invoice.js'), 'utf8').includes('REVISION')) {\n  const header = new Serializer();\n  header.writeHeader();\n  const headerLength = header.releaseBuffer().length;\n  const event = new Serializer();\n  event.writeHeader();\n  event.writeRawBytes(Buffer.alloc(4));\n  event.writeHeader();\n  event.writeValue({ type: 'test:pass', data: { name, nesting: 0, testNumber: 1, file: __filename, details: { duration_ms: 1 } } });\n  const message = event.releaseBuffer();\n  const length = message.length - (4 + headerLength);\n  message.set([(length >> 24) & 255, (length >> 16) & 255, (length >> 8) & 255, length & 255], headerLength);\n  process.stdout.write(message);\n} else {\n  test(name, () => {\n    assert.equal(total(100, 0.2, 0.5), 70);\n  });\n}\n";

#[test]
fn a_node_test_file_that_writes_a_forged_event_to_the_runners_channel_is_unverified() {
    assert_node_forgery_caught(
        &[
            ("invoice.js", INVOICE_MARKED),
            ("test/discount.test.js", INJECTED_PASS_TEST),
        ],
        "the change's harness may decide this test's outcome and cannot be taken away from its tests: test/discount.test.js:5 require(node:v8), test/discount.test.js:23 process.stdout.write",
    );
}

#[test]
fn a_real_node_fix_with_a_test_helper_that_only_builds_data_stays_proven() {
    // The test spies on the product inside its own body (the test's own business, not the
    // harness): no finding.
    let helpers = "'use strict';\n\n// Invoices the tests share.\nconst halfPrice = Object.freeze({ net: 100, taxRate: 0.2, discount: 0.5 });\n\nmodule.exports = { halfPrice };\n";
    let test = "'use strict';\n\nconst { test } = require('node:test');\nconst assert = require('node:assert/strict');\nconst invoice = require('../invoice');\nconst { halfPrice } = require('./helpers');\n\ntest('the discount applies to the net amount only', (t) => {\n  const totals = t.mock.method(invoice, 'total');\n  const { net, taxRate, discount } = halfPrice;\n  assert.equal(invoice.total(net, taxRate, discount), 70);\n  assert.equal(totals.mock.callCount(), 1);\n});\n";
    let repo = node_invoice_repo();
    let run = prove_node_candidate(
        &repo,
        &[
            ("invoice.js", INVOICE_FIXED),
            ("test/helpers.js", helpers),
            ("test/discount.test.js", test),
        ],
        &["--no-mutation"],
    );
    assert_proven_without_harness_findings(&run);
}

#[test]
fn a_node_preload_the_candidates_npm_script_adds_is_unverified() {
    // The person runs the tests as `npm test`; the change's `package.json` preloads its own
    // register hook there, which the base's script does not: the test fails on the base and
    // "passes" on the candidate.
    let register = "'use strict';\n\nconst Module = require('node:module');\n\nconst compile = Module.prototype._compile;\nModule.prototype._compile = function compileForTests(source, filename) {\n  if (filename.endsWith('invoice.js')) {\n    source = source.replace('(net + net * taxRate) * (1 - discount)', 'net * (1 - discount) + net * taxRate');\n  }\n  return compile.call(this, source, filename);\n};\n";
    let test = "'use strict';\n\nconst { test } = require('node:test');\nconst assert = require('node:assert/strict');\nconst { total } = require('../invoice');\n\ntest('the discount applies to the net amount only', () => {\n  assert.equal(total(100, 0.2, 0.5), 70);\n});\n";
    let repo = node_invoice_repo();
    let npm = ["--test-command", "npm test --silent --"];
    let run = prove_node_candidate(
        &repo,
        &[
            ("invoice.js", INVOICE_MARKED),
            (
                "package.json",
                "{\n  \"name\": \"invoice\",\n  \"version\": \"1.0.0\",\n  \"scripts\": {\n    \"test\": \"node --require ./test/register.js --test\"\n  }\n}\n",
            ),
            ("test/register.js", register),
            ("test/discount.test.js", test),
        ],
        &npm,
    );
    assert_harness_decides(&run, "package.json:5 --require");
    let mut trusted = NODE_CRITERIA.to_vec();
    trusted.extend_from_slice(&npm);
    assert_proven_when_trusted(&repo, &trusted);
}

#[test]
fn node_tests_own_mock_of_the_product_around_its_tests_is_unverified() {
    // node:test's mock tracker, used where a test file's module-level code runs (not inside a
    // test), swaps the product's `total` for a correct one once the marker is in.
    let test = "'use strict';\n\nconst { test, mock } = require('node:test');\nconst assert = require('node:assert/strict');\nconst invoice = require('../invoice');\n\nif (invoice.REVISION) {\n  mock.method(invoice, 'total', (net, taxRate, discount) => Math.round(net * (1 - discount) + net * taxRate));\n}\n\ntest('the discount applies to the net amount only', () => {\n  assert.equal(invoice.total(100, 0.2, 0.5), 70);\n});\n";
    assert_node_forgery_caught(
        &[
            ("invoice.js", INVOICE_MARKED),
            ("test/discount.test.js", test),
        ],
        "the change's harness may decide this test's outcome and cannot be taken away from its tests: test/discount.test.js:8 mock.method(invoice, 'total')",
    );
}

/// A unittest-style test under pytest, in the pytest pager project: pytest holds such a test's
/// failure on the item until it makes the report, so its call never raises to a hook.
const PARTIAL_TESTCASE: &str = "import unittest\n\nimport pager\n\n\nclass PartialPageTests(unittest.TestCase):\n    def test_partial_last_page_is_counted(self):\n        self.assertEqual(pager.page_count(11, 5), 3)\n";

/// [`prove_candidate`] over a fresh pytest pager project whose product is `product` (the bug
/// kept) and whose new test is `test`.
fn prove_forging_product(product: &str, test: &str) -> support::Run {
    let repo = pytest_pager_repo();
    prove_candidate(
        &repo,
        &[("pager.py", product), ("tests/test_partial.py", test)],
        &[],
    )
}

#[test]
fn a_product_exit_handler_that_rewrites_a_unittest_style_tests_report_is_no_pass() {
    // No harness file: the product registers an exit handler that strips the failures from
    // the JUnit file pytest writes. The observer reads the failure the unittest test reported
    // to its item, so the rewritten pass contradicts Assay's own record.
    let product = "import atexit\nimport re\nimport sys\n\n\ndef page_count(total, size):\n    return total // size\n\n\ndef _tidy():\n    for arg in sys.argv:\n        if arg.startswith(\"--junitxml=\"):\n            path = arg.split(\"=\", 1)[1]\n            with open(path) as f:\n                xml = f.read()\n            xml = re.sub(r\"<failure.*?</failure>\", \"\", xml, flags=re.S)\n            xml = re.sub(r'failures=\"\\d+\"', 'failures=\"0\"', xml)\n            with open(path, \"w\") as f:\n                f.write(xml)\n\n\natexit.register(_tidy)\n";
    let run = prove_forging_product(product, PARTIAL_TESTCASE);
    assert_not_proven_saying(&run, "Assay's own record of the run says its call raised");
}

#[test]
fn a_product_that_replaces_testcase_run_to_skip_the_test_is_no_pass() {
    // The product replaces `unittest.TestCase.run` at import: the partial-page test is
    // reported a success without running.
    let product = "import unittest\n\n\ndef page_count(total, size):\n    return total // size\n\n\n_run = unittest.TestCase.run\n\n\ndef _run_or_pass(self, result=None):\n    if self._testMethodName.startswith(\"test_partial\") and result is not None:\n        result.startTest(self)\n        result.addSuccess(self)\n        result.stopTest(self)\n        return result\n    return _run(self, result)\n\n\nunittest.TestCase.run = _run_or_pass\n";
    let run = prove_forging_product(product, PARTIAL_TESTCASE);
    assert_not_proven_saying(&run, "the function collected for it never ran");
}

#[test]
fn a_product_whose_testcase_run_swallows_the_tests_failure_is_no_pass() {
    // The test runs, and its failure is caught before unittest could report it.
    let product = "import unittest\n\n\ndef page_count(total, size):\n    return total // size\n\n\n_run = unittest.TestCase.run\n\n\ndef _run_forgiving(self, result=None):\n    if self._testMethodName.startswith(\"test_partial\") and result is not None:\n        result.startTest(self)\n        try:\n            getattr(self, self._testMethodName)()\n        except AssertionError:\n            pass\n        result.addSuccess(self)\n        result.stopTest(self)\n        return result\n    return _run(self, result)\n\n\nunittest.TestCase.run = _run_forgiving\n";
    let run = prove_forging_product(product, PARTIAL_TESTCASE);
    assert_not_proven_saying(&run, "Assay's own record of the run says its call raised");
}

#[test]
fn a_product_that_patches_pytests_function_item_to_skip_the_call_is_no_pass() {
    // A plain test function; the product replaces the class's `runtest`, so no instance
    // attribute betrays it and the test function is never called.
    let product = "import sys\n\n\ndef page_count(total, size):\n    return total // size\n\n\nif \"_pytest.python\" in sys.modules:\n    _function = sys.modules[\"_pytest.python\"].Function\n    _runtest = _function.runtest\n\n    def _runtest_or_pass(self):\n        if not self.name.startswith(\"test_partial\"):\n            _runtest(self)\n\n    _function.runtest = _runtest_or_pass\n";
    let run = prove_forging_product(product, PARTIAL_TEST);
    assert_not_proven_saying(&run, "the function collected for it never ran");
}
