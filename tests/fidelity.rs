//! Verdict fidelity on the shapes real projects have: exceptions raised in a unittest body,
//! fixtures that fail, and pytest 8 and 9 subtests (a base import error: tests/prove.rs).
//! The real binary on real git repositories with real pytest and unittest.

use crate::support;

use support::pytest_envs::pytest_python;
use support::{Repo, prove};

/// A ledger whose base raises `TypeError` on text amounts; the fix converts them.
const LEDGER_BUGGY: &str = "def total(amounts):\n    return sum(amounts)\n";
const LEDGER_FIXED: &str = "def total(amounts):\n    return sum(int(a) for a in amounts)\n";

fn unittest_ledger(test_body: &str, set_up: &str) -> Repo {
    let repo = Repo::new();
    let tests = |extra: &str| {
        format!(
            "import unittest\n\nfrom ledger import total\n\n\nclass LedgerTests(unittest.TestCase):\n{set_up}    def test_numbers_add_up(self):\n        self.assertEqual(total([1, 2]), 3)\n{extra}"
        )
    };
    repo.write("ledger.py", LEDGER_BUGGY)
        .write("tests/__init__.py", "")
        .write("tests/test_ledger.py", &tests(""));
    repo.commit("ledger");
    repo.write("ledger.py", LEDGER_FIXED)
        .write("tests/test_ledger.py", &tests(test_body));
    repo.commit("ledger: text amounts");
    repo
}

const TEXT_AMOUNTS_TEST: &str = "\n    def test_text_amounts_add_up(self):\n        self.assertEqual(total([\"1\", \"2\"]), 3)\n";

fn prove_text_amounts(repo: &Repo) -> support::Run {
    prove(
        repo,
        &[
            "--base",
            "main~1",
            "--runner",
            "unittest",
            "--no-mutation",
            "--criterion",
            "test: test_text_amounts_add_up",
            "--criterion",
            "guard: test_numbers_add_up",
        ],
    )
}

#[test]
fn an_exception_raised_in_a_unittest_body_on_the_base_is_a_reproduced_failure() {
    let repo = unittest_ledger(TEXT_AMOUNTS_TEST, "");
    let run = prove_text_amounts(&repo);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.verdict_of("C1"), "proven");
    assert_eq!(run.criterion("C1")["base"]["outcome"], "failed");
}

#[test]
fn a_unittest_set_up_error_on_the_base_is_missing_evidence_not_a_refutation() {
    // setUp calls the code under test, so on the base the error comes before the body runs.
    let set_up = "    def setUp(self):\n        self.opening = total([\"0\"])\n\n";
    let repo = unittest_ledger(TEXT_AMOUNTS_TEST, set_up);
    let run = prove(
        &repo,
        &[
            "--base",
            "main~1",
            "--runner",
            "unittest",
            "--no-mutation",
            "--criterion",
            "test: test_text_amounts_add_up",
        ],
    );
    assert_eq!(run.code, 4, "{}", run.explain());
    assert_eq!(run.verdict_of("C1"), "unverified");
    assert_eq!(run.criterion("C1")["base"]["outcome"], "error");
    let reason = run.criterion("C1")["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("not reproduced"), "{reason}");
}

/// Periods whose subtests fail on the base; a guard with subtests that pass on both.
fn subtest_ledger(candidate_breaks_guard: bool) -> Repo {
    let repo = Repo::new();
    let guard_expected = if candidate_breaks_guard { "4" } else { "3" };
    let tests = |guard: &str| {
        format!(
            "import unittest\n\nfrom ledger import total\n\n\nclass LedgerTests(unittest.TestCase):\n    def test_numbers_add_up(self):\n        for amounts in ([1, 2], [2, 1]):\n            with self.subTest(amounts=amounts):\n                self.assertEqual(total(amounts), {guard})\n\n    def test_text_amounts_add_up(self):\n        for amounts in ([1, 2], [\"1\", \"2\"], [\"3\"]):\n            with self.subTest(amounts=amounts):\n                self.assertEqual(total(amounts), int(sum(int(a) for a in amounts)))\n"
        )
    };
    repo.write("ledger.py", LEDGER_BUGGY)
        .write("conftest.py", "")
        .write("tests/test_ledger.py", &tests("3"));
    repo.commit("ledger");
    repo.write("ledger.py", LEDGER_FIXED)
        .write("tests/test_ledger.py", &tests(guard_expected));
    repo.commit("ledger: text amounts");
    repo
}

#[test]
fn subtests_prove_a_fix_and_break_a_guard_under_pytest_8_and_9() {
    for major in [8, 9] {
        let Some(python) = pytest_python(major) else {
            continue;
        };
        let command = format!("{python} -m pytest");
        for breaks_guard in [false, true] {
            let repo = subtest_ledger(breaks_guard);
            let run = prove(
                &repo,
                &[
                    "--base",
                    "main~1",
                    "--runner",
                    "pytest",
                    "--test-command",
                    &command,
                    "--no-mutation",
                    "--criterion",
                    "test: test_text_amounts_add_up",
                    "--criterion",
                    "guard: test_numbers_add_up",
                ],
            );
            let context = format!("pytest {major}, guard broken: {breaks_guard}");
            assert_eq!(
                run.verdict_of("C1"),
                "proven",
                "{context}: {}",
                run.explain()
            );
            if breaks_guard {
                assert_eq!(run.code, 1, "{context}: {}", run.explain());
                assert_eq!(run.verdict_of("C2"), "refuted", "{context}");
            } else {
                assert_eq!(run.code, 0, "{context}: {}", run.explain());
                assert_eq!(run.verdict_of("C2"), "proven", "{context}");
            }
        }
    }
}

/// A guard in a module the change's test files keep from loading on the base never ran there:
/// missing evidence, not a broken guard (a real case: a test module importing a name only the
/// candidate has, with an old test in it named as the guard).
#[test]
fn a_guard_whose_module_cannot_load_on_the_base_is_unverified_not_refuted() {
    let repo = Repo::new();
    repo.write("ledger.py", LEDGER_BUGGY)
        .write("conftest.py", "")
        .write(
            "tests/test_ledger.py",
            "from ledger import total\n\n\ndef test_numbers_add_up():\n    assert total([1, 2]) == 3\n",
        );
    repo.commit("ledger");
    repo.write(
        "ledger.py",
        &format!("{LEDGER_FIXED}\n\ndef average(amounts):\n    return total(amounts) / len(amounts)\n"),
    )
    .write(
        "tests/test_ledger.py",
        "from ledger import average, total\n\n\ndef test_numbers_add_up():\n    assert total([1, 2]) == 3\n\n\ndef test_average():\n    assert average([1, 3]) == 2\n",
    );
    repo.commit("ledger: average");
    let run = prove(
        &repo,
        &[
            "--base",
            "main~1",
            "--no-mutation",
            "--criterion",
            "guard: test_numbers_add_up",
        ],
    );
    assert_eq!(run.code, 4, "{}", run.explain());
    assert_eq!(run.verdict_of("C1"), "unverified");
    let reason = run.criterion("C1")["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("never ran on the base"), "{reason}");
}

/// pytest exits 3 when it crashes mid-session (a plugin, or its own JUnit writer, raising): the
/// report it leaves is self-consistent but lists only what ran before. No guard is proven on
/// such a run.
#[test]
fn a_pytest_session_that_crashes_midway_proves_no_guard() {
    let repo = Repo::new();
    let crash = "def pytest_runtest_logreport(report):\n    if report.when == \"call\" and report.nodeid.endswith(\"test_zz_last\"):\n        raise RuntimeError(\"the reporting plugin crashed\")\n";
    let tests = "from ledger import total\n\n\ndef test_numbers_add_up():\n    assert total([1, 2]) == 3\n\n\ndef test_zz_last():\n    assert total([]) == 0\n";
    repo.write("ledger.py", LEDGER_BUGGY)
        .write("conftest.py", crash)
        .write("tests/test_ledger.py", tests);
    repo.commit("ledger");
    repo.write("ledger.py", LEDGER_FIXED);
    repo.commit("ledger: text amounts");
    let run = prove(
        &repo,
        &[
            "--base",
            "main~1",
            "--no-mutation",
            "--criterion",
            "guard: test_numbers_add_up",
        ],
    );
    assert_eq!(run.verdict_of("C1"), "unverified", "{}", run.explain());
    let reason = run.criterion("C1")["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("internal error (exit 3)"), "{reason}");
}
