//! Summary counts and coverage read from a command's text output, for suites that write no
//! structured report. These numbers feed suite history only: text never names a passing test.
//! Frameworks are tried in a fixed order, because some summaries look alike (unittest's
//! `Ran N tests` must win over Bun's).

use regex::Regex;
use serde::{Deserialize, Serialize};
use std::sync::LazyLock;

/// Counts a framework's summary states.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryCounts {
    /// Which pattern matched: `jest`, `pytest`, `go`, `mocha`, `rspec`, `cargo`, `unittest`,
    /// `bun`, `vitest` or `generic`.
    pub framework: String,
    /// Tests the summary counts in all.
    pub total: u64,
    /// Tests it says passed.
    pub passed: u64,
    /// Tests it says failed.
    pub failed: u64,
    /// Tests it says were skipped.
    pub skipped: u64,
}

/// How a suite command ended, for history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SuiteStatus {
    /// The command exited 0.
    Passing,
    /// The command exited non-zero: tests failed.
    Failing,
    /// The command could not run (not found, not executable) or hit its timeout.
    Error,
}

impl SuiteStatus {
    /// The status as history and reports write it (`passing`).
    pub fn label(self) -> &'static str {
        match self {
            Self::Passing => "passing",
            Self::Failing => "failing",
            Self::Error => "error",
        }
    }
}

/// Status of a command run: `None` exit means it was killed at its timeout.
pub fn status_of(exit_code: Option<i32>, timeout_secs: u64) -> (SuiteStatus, Option<String>) {
    match exit_code {
        Some(0) => (SuiteStatus::Passing, None),
        Some(126 | 127) => (
            SuiteStatus::Error,
            Some("test command not found or not executable".into()),
        ),
        None => (
            SuiteStatus::Error,
            Some(format!("timeout after {timeout_secs}s")),
        ),
        Some(_) => (SuiteStatus::Failing, None),
    }
}

fn re(pattern: &str) -> Regex {
    // The patterns are literals in this file; a bad one fails every test below.
    Regex::new(pattern).unwrap_or_else(|e| panic!("summary pattern {pattern:?} is invalid: {e}"))
}

fn count(pattern: &Regex, text: &str) -> Option<u64> {
    pattern
        .captures(text)
        .and_then(|c| c.get(1))
        .and_then(|m| m.as_str().parse().ok())
}

fn counts(
    framework: &str,
    passed: u64,
    failed: u64,
    skipped: u64,
    total: Option<u64>,
) -> SummaryCounts {
    SummaryCounts {
        framework: framework.into(),
        total: total.unwrap_or(passed + failed + skipped),
        passed,
        failed,
        skipped,
    }
}

static JEST_LINE: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^\s*Tests:\s+(.*)$"));
static FAILED: LazyLock<Regex> = LazyLock::new(|| re(r"(\d+) failed"));
static PASSED: LazyLock<Regex> = LazyLock::new(|| re(r"(\d+) passed"));
static SKIPPED: LazyLock<Regex> = LazyLock::new(|| re(r"(\d+) skipped"));
static TOTAL: LazyLock<Regex> = LazyLock::new(|| re(r"(\d+) total"));
static PYTEST_LINE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?m)^=*\s*((?:\d+ (?:passed|failed|skipped|errors?|xfailed|xpassed|deselected|warnings?)(?:, )?)+) in [\d.]+s\b",
    )
});
static ERRORS: LazyLock<Regex> = LazyLock::new(|| re(r"(\d+) errors?\b"));
static GO_OK: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^ok\s+\S+"));
static GO_FAIL: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^FAIL\t\S+"));
static GO_TEST_PASS: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^\s*--- PASS:"));
static GO_TEST_FAIL: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^\s*--- FAIL:"));
static GO_TEST_SKIP: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^\s*--- SKIP:"));
static MOCHA_PASSING: LazyLock<Regex> = LazyLock::new(|| re(r"(\d+) passing"));
static MOCHA_FAILING: LazyLock<Regex> = LazyLock::new(|| re(r"(\d+) failing"));
static MOCHA_PENDING: LazyLock<Regex> = LazyLock::new(|| re(r"(\d+) pending"));
static RSPEC: LazyLock<Regex> =
    LazyLock::new(|| re(r"(\d+) examples?,\s*(\d+) failures?(?:,\s*(\d+) pending)?"));
static CARGO: LazyLock<Regex> = LazyLock::new(|| {
    re(r"test result: (?:ok|FAILED)\.\s*(\d+) passed;\s*(\d+) failed;\s*(\d+) ignored")
});
static UNITTEST_RAN: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^Ran\s+(\d+)\s+tests?\s+in\b"));
static UNITTEST_OK: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^OK\b(.*)$"));
static UNITTEST_FAILED: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^FAILED\s*\((.+)\)"));
static FAILURES_EQ: LazyLock<Regex> = LazyLock::new(|| re(r"failures=(\d+)"));
static ERRORS_EQ: LazyLock<Regex> = LazyLock::new(|| re(r"errors=(\d+)"));
static SKIPPED_EQ: LazyLock<Regex> = LazyLock::new(|| re(r"skipped=(\d+)"));
static BUN_PASS: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^\s*(\d+)\s+pass\b"));
static BUN_FAIL: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^\s*(\d+)\s+fail\b"));
static BUN_SKIP: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^\s*(\d+)\s+skip\b"));
static BUN_RAN: LazyLock<Regex> = LazyLock::new(|| re(r"Ran\s+(\d+)\s+tests"));
static VITEST_LINE: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^\s*Tests\s+(.*\(\d+\).*)$"));
static VITEST_TOTAL: LazyLock<Regex> = LazyLock::new(|| re(r"\((\d+)\)"));
static GENERIC_PASSED: LazyLock<Regex> = LazyLock::new(|| re(r"(\d+)\s+(?:tests?\s+)?passed"));
static GENERIC_FAILED: LazyLock<Regex> = LazyLock::new(|| re(r"(\d+)\s+(?:tests?\s+)?failed"));

/// Reads summary counts from combined output, trying the ten framework patterns in order.
pub fn parse_counts(output: &str) -> Option<SummaryCounts> {
    jest(output)
        .or_else(|| pytest(output))
        .or_else(|| go(output))
        .or_else(|| mocha(output))
        .or_else(|| rspec(output))
        .or_else(|| cargo(output))
        .or_else(|| unittest(output))
        .or_else(|| bun(output))
        .or_else(|| vitest(output))
        .or_else(|| generic(output))
}

fn jest(output: &str) -> Option<SummaryCounts> {
    // Tokens are read one by one: the line omits `failed` when everything passed.
    let line = JEST_LINE.captures(output)?.get(1)?.as_str();
    let total = count(&TOTAL, line)?;
    Some(counts(
        "jest",
        count(&PASSED, line).unwrap_or(0),
        count(&FAILED, line).unwrap_or(0),
        count(&SKIPPED, line).unwrap_or(0),
        Some(total),
    ))
}

fn pytest(output: &str) -> Option<SummaryCounts> {
    // The last summary line wins: pytest prints one at the very end.
    let line = PYTEST_LINE.captures_iter(output).last()?.get(1)?.as_str();
    let failed = count(&FAILED, line).unwrap_or(0) + count(&ERRORS, line).unwrap_or(0);
    Some(counts(
        "pytest",
        count(&PASSED, line).unwrap_or(0),
        failed,
        count(&SKIPPED, line).unwrap_or(0),
        None,
    ))
}

fn go(output: &str) -> Option<SummaryCounts> {
    let ok_packages = GO_OK.find_iter(output).count() as u64;
    let failed_packages = GO_FAIL.find_iter(output).count() as u64;
    if ok_packages + failed_packages == 0 {
        return None;
    }
    let test_passed = GO_TEST_PASS.find_iter(output).count() as u64;
    let test_failed = GO_TEST_FAIL.find_iter(output).count() as u64;
    let skipped = GO_TEST_SKIP.find_iter(output).count() as u64;
    // Verbose output names tests; otherwise packages are the only unit Go prints.
    Some(if test_passed + test_failed > 0 {
        counts("go", test_passed, test_failed, skipped, None)
    } else {
        counts("go", ok_packages, failed_packages, skipped, None)
    })
}

fn mocha(output: &str) -> Option<SummaryCounts> {
    let passed = count(&MOCHA_PASSING, output)?;
    Some(counts(
        "mocha",
        passed,
        count(&MOCHA_FAILING, output).unwrap_or(0),
        count(&MOCHA_PENDING, output).unwrap_or(0),
        None,
    ))
}

fn rspec(output: &str) -> Option<SummaryCounts> {
    let caps = RSPEC.captures(output)?;
    let number = |i: usize| {
        caps.get(i)
            .and_then(|m| m.as_str().parse::<u64>().ok())
            .unwrap_or(0)
    };
    let (total, failed, pending) = (number(1), number(2), number(3));
    Some(counts(
        "rspec",
        total.saturating_sub(failed + pending),
        failed,
        pending,
        Some(total),
    ))
}

fn cargo(output: &str) -> Option<SummaryCounts> {
    // One summary per test binary; a workspace run prints many.
    let mut found = false;
    let (mut passed, mut failed, mut ignored) = (0, 0, 0);
    for caps in CARGO.captures_iter(output) {
        found = true;
        let number = |i: usize| caps[i].parse::<u64>().unwrap_or(0);
        passed += number(1);
        failed += number(2);
        ignored += number(3);
    }
    found.then(|| counts("cargo", passed, failed, ignored, None))
}

fn unittest(output: &str) -> Option<SummaryCounts> {
    let total = count(&UNITTEST_RAN, output)?;
    if let Some(caps) = UNITTEST_FAILED.captures(output) {
        let inner = caps.get(1).map_or("", |m| m.as_str());
        let failed =
            count(&FAILURES_EQ, inner).unwrap_or(0) + count(&ERRORS_EQ, inner).unwrap_or(0);
        let skipped = count(&SKIPPED_EQ, inner).unwrap_or(0);
        return Some(counts(
            "unittest",
            total.saturating_sub(failed + skipped),
            failed,
            skipped,
            Some(total),
        ));
    }
    let rest = UNITTEST_OK
        .captures(output)?
        .get(1)
        .map_or("", |m| m.as_str());
    let skipped = count(&SKIPPED_EQ, rest).unwrap_or(0);
    Some(counts(
        "unittest",
        total.saturating_sub(skipped),
        0,
        skipped,
        Some(total),
    ))
}

fn bun(output: &str) -> Option<SummaryCounts> {
    let passed = count(&BUN_PASS, output);
    let failed = count(&BUN_FAIL, output);
    if passed.is_none() && failed.is_none() {
        return None;
    }
    Some(counts(
        "bun",
        passed.unwrap_or(0),
        failed.unwrap_or(0),
        count(&BUN_SKIP, output).unwrap_or(0),
        count(&BUN_RAN, output),
    ))
}

fn vitest(output: &str) -> Option<SummaryCounts> {
    let line = VITEST_LINE.captures(output)?.get(1)?.as_str();
    Some(counts(
        "vitest",
        count(&PASSED, line).unwrap_or(0),
        count(&FAILED, line).unwrap_or(0),
        count(&SKIPPED, line).unwrap_or(0),
        count(&VITEST_TOTAL, line),
    ))
}

fn generic(output: &str) -> Option<SummaryCounts> {
    let passed = count(&GENERIC_PASSED, output);
    let failed = count(&GENERIC_FAILED, output);
    if passed.is_none() && failed.is_none() {
        return None;
    }
    Some(counts(
        "generic",
        passed.unwrap_or(0),
        failed.unwrap_or(0),
        0,
        None,
    ))
}

static ISTANBUL: LazyLock<Regex> = LazyLock::new(|| re(r"All files\s*\|\s*([\d.]+)"));
static PYTEST_COV: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^TOTAL\s+.*?([\d.]+)%"));
static GO_COVERAGE_LINE: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^.*coverage:\s*([\d.]+)%.*$"));
static JEST_SUMMARY: LazyLock<Regex> = LazyLock::new(|| re(r"Statements\s*:\s*([\d.]+)%"));
static GENERIC_COVERAGE: LazyLock<Regex> = LazyLock::new(|| re(r"([\d.]+)%\s*coverage"));

fn percent(pattern: &Regex, output: &str) -> Option<f64> {
    pattern
        .captures(output)
        .and_then(|c| c.get(1))
        .and_then(|m| m.as_str().parse().ok())
}

/// Reads a coverage percentage, trying Istanbul, pytest-cov, Go (averaged over packages),
/// Jest's text summary and a generic pattern, in that order; `None` when none matches.
pub fn parse_coverage(output: &str) -> Option<f64> {
    percent(&ISTANBUL, output)
        .or_else(|| percent(&PYTEST_COV, output))
        .or_else(|| go_coverage(output))
        .or_else(|| percent(&JEST_SUMMARY, output))
        .or_else(|| percent(&GENERIC_COVERAGE, output))
}

fn go_coverage(output: &str) -> Option<f64> {
    // Go prints one figure per package; packages without tests report a meaningless 0.0%.
    let values: Vec<f64> = GO_COVERAGE_LINE
        .captures_iter(output)
        .filter(|c| !c[0].contains("[no test files]"))
        .filter_map(|c| c[1].parse().ok())
        .collect();
    if values.is_empty() {
        return None;
    }
    Some(values.iter().sum::<f64>() / values.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expect(output: &str, framework: &str, total: u64, passed: u64, failed: u64, skipped: u64) {
        let got = parse_counts(output).unwrap_or_else(|| panic!("no summary in {output:?}"));
        assert_eq!(
            got,
            SummaryCounts {
                framework: framework.into(),
                total,
                passed,
                failed,
                skipped
            },
            "{output}"
        );
    }

    #[test]
    fn each_framework_summary_is_read_from_its_real_output() {
        let table: &[(&str, &str, u64, u64, u64, u64)] = &[
            (
                "Test Suites: 1 failed, 3 passed, 4 total\nTests:       2 failed, 1 skipped, 23 passed, 26 total\nSnapshots:   0 total\nTime:        1.52 s\n",
                "jest",
                26,
                23,
                2,
                1,
            ),
            (
                "Test Suites: 2 passed, 2 total\nTests:       26 passed, 26 total\n",
                "jest",
                26,
                26,
                0,
                0,
            ),
            (
                "tests/test_invoice.py ..F.s                                  [100%]\n=================== 1 failed, 3 passed, 1 skipped in 0.12s ===================\n",
                "pytest",
                5,
                3,
                1,
                1,
            ),
            ("....\n4 passed in 0.01s\n", "pytest", 4, 4, 0, 0),
            (
                "=========== 2 passed, 1 error in 0.30s ===========\n",
                "pytest",
                3,
                2,
                1,
                0,
            ),
            (
                "ok  \texample.com/pager\t0.011s\n--- FAIL: TestCursor (0.00s)\nFAIL\nFAIL\texample.com/pager/cursor\t0.004s\nFAIL\n",
                "go",
                1,
                0,
                1,
                0,
            ),
            (
                "ok  \texample.com/pager\t0.011s\nok  \texample.com/invoice\t0.020s\n",
                "go",
                2,
                2,
                0,
                0,
            ),
            (
                "=== RUN   TestA\n--- PASS: TestA (0.00s)\n=== RUN   TestB\n--- SKIP: TestB (0.00s)\n=== RUN   TestC\n--- FAIL: TestC (0.00s)\nFAIL\nFAIL\texample.com/pager\t0.003s\n",
                "go",
                3,
                1,
                1,
                1,
            ),
            (
                "  invoices\n    ✓ totals lines\n\n  12 passing (34ms)\n  2 failing\n  1 pending\n",
                "mocha",
                15,
                12,
                2,
                1,
            ),
            (
                "Finished in 0.0123 seconds (files took 0.1 seconds to load)\n8 examples, 2 failures, 1 pending\n",
                "rspec",
                8,
                5,
                2,
                1,
            ),
            (
                "Finished in 0.01 seconds\n3 examples, 0 failures\n",
                "rspec",
                3,
                3,
                0,
                0,
            ),
            (
                "running 4 tests\ntest result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\nrunning 2 tests\ntest result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out\n",
                "cargo",
                6,
                4,
                1,
                1,
            ),
            (
                "..F.E\n----------------------------------------------------------------------\nRan 5 tests in 0.002s\n\nFAILED (failures=1, errors=1, skipped=1)\n",
                "unittest",
                5,
                2,
                2,
                1,
            ),
            (
                "....\n----------------------------------------------------------------------\nRan 4 tests in 0.001s\n\nOK (skipped=1)\n",
                "unittest",
                4,
                3,
                0,
                1,
            ),
            (
                "invoice.test.ts:\n✓ totals [0.10ms]\n\n 7 pass\n 1 fail\n 2 skip\n 12 expect() calls\nRan 10 tests across 2 files. [15.00ms]\n",
                "bun",
                10,
                7,
                1,
                2,
            ),
            (
                " ✓ src/pager.test.ts (3 tests) 2ms\n\n Test Files  1 failed | 1 passed (2)\n      Tests  1 failed | 4 passed (5)\n   Start at  10:00:00\n",
                "vitest",
                5,
                4,
                1,
                0,
            ),
            (
                "suite done: 9 tests passed, 1 test failed\n",
                "generic",
                10,
                9,
                1,
                0,
            ),
        ];
        for &(output, framework, total, passed, failed, skipped) in table {
            expect(output, framework, total, passed, failed, skipped);
        }
    }

    #[test]
    fn output_with_no_summary_gives_no_counts() {
        assert_eq!(parse_counts("compiling...\ndone\n"), None);
    }

    #[test]
    fn coverage_is_read_from_each_tool_in_order() {
        let table: &[(&str, Option<f64>)] = &[
            (
                "----------|---------|----------|\nFile      | % Stmts | % Branch |\n----------|---------|----------|\nAll files |   87.3  |    80.1  |\n",
                Some(87.3),
            ),
            (
                "Name                 Stmts   Miss  Cover\n----------------------------------------\ninvoice/__init__.py     40      4    90%\nTOTAL                   120     18    85%\n",
                Some(85.0),
            ),
            (
                "ok  \texample.com/pager\t0.01s\tcoverage: 80.0% of statements\nok  \texample.com/invoice\t0.02s\tcoverage: 60.0% of statements\n?   \texample.com/cmd\t[no test files]\tcoverage: 0.0% of statements\n",
                Some(70.0),
            ),
            (
                "=============================== Coverage summary ===============================\nStatements   : 91.5% ( 183/200 )\nBranches     : 80% ( 40/50 )\n",
                Some(91.5),
            ),
            (
                "report: 64.2% coverage of the invoice service\n",
                Some(64.2),
            ),
            ("3 passed in 0.01s\n", None),
        ];
        for &(output, want) in table {
            assert_eq!(parse_coverage(output), want, "{output}");
        }
    }

    #[test]
    fn exit_codes_map_to_statuses() {
        assert_eq!(status_of(Some(0), 300).0, SuiteStatus::Passing);
        assert_eq!(status_of(Some(1), 300).0, SuiteStatus::Failing);
        let (status, detail) = status_of(Some(127), 300);
        assert_eq!(status, SuiteStatus::Error);
        assert_eq!(
            detail.as_deref(),
            Some("test command not found or not executable")
        );
        assert_eq!(
            status_of(None, 300),
            (SuiteStatus::Error, Some("timeout after 300s".into()))
        );
    }
}
