//! Manifest corpora: `manifest.tsv` rows `path<TAB>expectation<TAB>expected` (or the two-field
//! `path<TAB>true|error`), each one case run by a configured interpreter in its own process.
//! Parsing and judging are pure; a worker runs `interpreter… PATH` per row of a
//! [`ManifestJob`] and hands each exit code and stdout to [`judge`].
//!
//! The observation protocol: an interpreter that completes exits 0 and prints the result as the
//! last non-empty line of stdout (`true`, `false`, `null`, a decimal integer, a float as a
//! decimal literal, `NaN`, or `0x` and 16 hex digits for exact bits); a guest error is a
//! non-zero exit. A process killed by a signal (no exit code) is neither: it is an error.

use crate::outcome::{CaseResult, Outcome, ReportOutcome, TestReport};
use crate::tree_path::{TreeDir, TreePath, TreePathError};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// What a row expects of its run.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expectation {
    /// `true` or `false`.
    Boolean(bool),
    /// `null`, written `-` in the expected field.
    Null,
    /// A decimal integer, kept as canonical text so any width compares exactly.
    Integer(String),
    /// An exact binary64 bit pattern.
    FloatBits(u64),
    /// Any NaN: payload and sign are not portable.
    FloatNan,
    /// The run must end in a guest error (a non-zero exit).
    Error,
}

/// One row: a confined path and what its run must show.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ManifestCase {
    /// 1-based line in `manifest.tsv`.
    pub line: usize,
    /// The case's file, relative to the corpus directory.
    pub path: TreePath,
    /// What its run must show.
    pub expectation: Expectation,
}

/// A `manifest.tsv` row that cannot be read, with where.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("manifest.tsv line {line}: {problem}")]
pub struct ManifestError {
    /// 1-based line of the row.
    pub line: usize,
    /// What is wrong with it.
    // Shown inline rather than as a source: the line number alone is no error message.
    pub problem: LineProblem,
}

/// What is wrong with one `manifest.tsv` row.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LineProblem {
    /// The row has neither two nor three fields.
    #[error(
        "expected `path<TAB>expectation<TAB>expected` or `path<TAB>true|error`, found {fields} tab-separated fields"
    )]
    FieldCount {
        /// The tab-separated fields the row has.
        fields: usize,
    },
    /// The case path is absolute or leaves the corpus.
    #[error("the case path is not confined to the corpus: {0}")]
    Path(TreePathError),
    /// The expectation field names no kind Assay knows.
    #[error(
        "unknown expectation {0:?} (hint: use boolean, null, integer, float-bits, float-nan or error)"
    )]
    UnknownExpectation(String),
    /// A two-field row expects something other than `true` or `error`.
    #[error("two-field rows expect `true` or `error`, not {0:?}")]
    RetainedValue(String),
    #[error("{expectation} expects {wants}, not {found:?}")]
    /// The expected field does not fit its expectation (`integer` given `1.5`).
    Expected {
        /// The expectation kind (`integer`).
        expectation: &'static str,
        /// What that kind's expected field must be, in words.
        wants: &'static str,
        /// The expected field as written.
        found: String,
    },
    #[error("{path} is already listed on line {first}")]
    /// A case path listed twice.
    Duplicate {
        /// The path listed again.
        path: String,
        /// 1-based line where it was first listed.
        first: usize,
    },
}

/// The cases one job runs, each as `interpreter… RUN_PATH` in its own process, in manifest
/// order. The expectations travel with the job, so a worker judges without reading the corpus.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ManifestJob {
    /// The directory of `manifest.tsv`, relative to the tree root (`""` at the root); case
    /// paths are relative to it.
    pub corpus: TreeDir,
    /// The rows this job runs, in manifest order.
    pub cases: Vec<ManifestCase>,
}

impl ManifestJob {
    /// The cases `names` select (every case when there are none). A name selects the case of
    /// that path and every case under it, as a Go test path does its subtests.
    pub fn select(corpus: &TreeDir, cases: &[ManifestCase], names: &[String]) -> Self {
        let selected = cases
            .iter()
            .filter(|case| {
                names.is_empty()
                    || names.iter().any(|name| {
                        let path = case.path.as_str();
                        path == name
                            || path
                                .strip_prefix(name.as_str())
                                .is_some_and(|rest| rest.starts_with('/'))
                    })
            })
            .cloned()
            .collect();
        Self {
            corpus: corpus.clone(),
            cases: selected,
        }
    }

    /// The corpus's `manifest.tsv`, relative to the tree root: the file every case is declared
    /// in, so a directory's cases are one file's tests, not an ambiguous name.
    pub fn manifest_path(&self) -> String {
        if self.corpus.is_root() {
            "manifest.tsv".to_owned()
        } else {
            format!("{}/manifest.tsv", self.corpus)
        }
    }

    /// The path the interpreter is given, relative to the tree root it runs in.
    pub fn run_path(&self, case: &ManifestCase) -> String {
        if self.corpus.is_root() {
            case.path.to_string()
        } else {
            format!("{}/{}", self.corpus, case.path)
        }
    }
}

/// Parses a whole manifest; blank lines and lines starting with `#` are ignored.
pub fn parse_manifest(text: &str) -> Result<Vec<ManifestCase>, ManifestError> {
    let mut cases = Vec::new();
    let mut first_line: HashMap<String, usize> = HashMap::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let row = raw.strip_suffix('\r').unwrap_or(raw);
        if row.trim().is_empty() || row.starts_with('#') {
            continue;
        }
        let case = parse_row(row, line).map_err(|problem| ManifestError { line, problem })?;
        if let Some(first) = first_line.insert(case.path.to_string(), line) {
            return Err(ManifestError {
                line,
                problem: LineProblem::Duplicate {
                    path: case.path.to_string(),
                    first,
                },
            });
        }
        cases.push(case);
    }
    Ok(cases)
}

fn parse_row(row: &str, line: usize) -> Result<ManifestCase, LineProblem> {
    let fields: Vec<&str> = row.split('\t').collect();
    let expectation = match fields.as_slice() {
        [_, retained] => match *retained {
            "true" => Expectation::Boolean(true),
            "error" => Expectation::Error,
            other => return Err(LineProblem::RetainedValue(other.to_owned())),
        },
        [_, kind, expected] => parse_expectation(kind, expected)?,
        _ => {
            return Err(LineProblem::FieldCount {
                fields: fields.len(),
            });
        }
    };
    let path = TreePath::new(fields[0]).map_err(LineProblem::Path)?;
    Ok(ManifestCase {
        line,
        path,
        expectation,
    })
}

fn parse_expectation(kind: &str, expected: &str) -> Result<Expectation, LineProblem> {
    let wrong = |expectation: &'static str, wants: &'static str| LineProblem::Expected {
        expectation,
        wants,
        found: expected.to_owned(),
    };
    match kind {
        "boolean" => match expected {
            "true" => Ok(Expectation::Boolean(true)),
            "false" => Ok(Expectation::Boolean(false)),
            _ => Err(wrong("boolean", "`true` or `false`")),
        },
        "null" if expected == "-" => Ok(Expectation::Null),
        "null" => Err(wrong("null", "`-`")),
        "integer" => canonical_integer(expected)
            .map(Expectation::Integer)
            .ok_or_else(|| wrong("integer", "a decimal integer")),
        "float-bits" => {
            if expected.len() == 16 && expected.chars().all(|c| c.is_ascii_hexdigit()) {
                u64::from_str_radix(expected, 16)
                    .map(Expectation::FloatBits)
                    .map_err(|_| wrong("float-bits", "16 hex digits"))
            } else {
                Err(wrong("float-bits", "16 hex digits"))
            }
        }
        "float-nan" if matches!(expected, "-" | "nan" | "NaN") => Ok(Expectation::FloatNan),
        "float-nan" => Err(wrong("float-nan", "`-`")),
        // The expected field of an error row names the error for readers; any guest error
        // satisfies it.
        "error" => Ok(Expectation::Error),
        other => Err(LineProblem::UnknownExpectation(other.to_owned())),
    }
}

/// `-007` → `-7`; `-0` → `0`; anything but an optional sign and digits → `None`.
fn canonical_integer(text: &str) -> Option<String> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let trimmed = digits.trim_start_matches('0');
    Some(match (trimmed.is_empty(), negative) {
        (true, _) => "0".to_owned(),
        (false, true) => format!("-{trimmed}"),
        (false, false) => trimmed.to_owned(),
    })
}

/// Judges one run: `exit_code` is `None` when the process died from a signal.
pub fn judge(expectation: &Expectation, exit_code: Option<i32>, stdout: &[u8]) -> Outcome {
    let Some(exit_code) = exit_code else {
        return Outcome::Error;
    };
    if *expectation == Expectation::Error {
        return if exit_code == 0 {
            Outcome::Failed
        } else {
            Outcome::Passed
        };
    }
    if exit_code != 0 {
        return Outcome::Failed;
    }
    let text = String::from_utf8_lossy(stdout);
    let value = text
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let matched = match expectation {
        Expectation::Boolean(expected) => value == if *expected { "true" } else { "false" },
        Expectation::Null => value == "null",
        Expectation::Integer(expected) => canonical_integer(value).as_deref() == Some(expected),
        Expectation::FloatBits(expected) => float_bits(value) == Some(*expected),
        Expectation::FloatNan => {
            float_bits(value).is_some_and(|bits| f64::from_bits(bits).is_nan())
        }
        Expectation::Error => false,
    };
    if matched {
        Outcome::Passed
    } else {
        Outcome::Failed
    }
}

/// `0x3ff0000000000000` → exact bits; a decimal literal (`1`, `0.1`, `-inf`, `NaN`) → its
/// nearest binary64.
fn float_bits(value: &str) -> Option<u64> {
    if let Some(hex) = value.strip_prefix("0x")
        && hex.len() == 16
    {
        return u64::from_str_radix(hex, 16).ok();
    }
    value.parse::<f64>().ok().map(f64::to_bits)
}

/// The result of a row's run, named by the row's path and filed under `manifest` (see
/// [`ManifestJob::manifest_path`]).
pub fn case_result(
    manifest: &str,
    case: &ManifestCase,
    exit_code: Option<i32>,
    stdout: &[u8],
) -> CaseResult {
    let outcome = judge(&case.expectation, exit_code, stdout);
    let message = (outcome != Outcome::Passed).then(|| match exit_code {
        None => "the interpreter was killed by a signal".to_owned(),
        Some(code) => format!(
            "line {}: expected {:?}, the interpreter exited {code}",
            case.line, case.expectation
        ),
    });
    CaseResult {
        file: manifest.to_owned(),
        suite: String::new(),
        name: case.path.to_string(),
        variant: None,
        outcome,
        message,
    }
}

/// The report of a manifest job whose every case ran: one result per row.
pub fn job_report(results: Vec<CaseResult>) -> ReportOutcome {
    if results.is_empty() {
        return ReportOutcome::ZeroTests;
    }
    ReportOutcome::Parsed(TestReport {
        cases: results,
        collection_errors: Vec::new(),
        collection_reruns: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CORPUS: &str = "# invoice arithmetic corpus\n\
        integer/add-small.inv\tinteger\t2\n\
        \n\
        boolean/paid.inv\tboolean\ttrue\n\
        null/no-discount.inv\tnull\t-\n\
        float/tenth.inv\tfloat-bits\t3fb999999999999a\n\
        float/zero-by-zero.inv\tfloat-nan\t-\n\
        error/divide.inv\terror\tZeroDivision\n\
        toml/valid.toml\ttrue\n\
        toml/unterminated.toml\terror\r\n";

    #[test]
    fn every_expectation_kind_parses_and_comments_are_skipped() {
        let cases = parse_manifest(CORPUS).unwrap();
        let parsed: Vec<(usize, &str, &Expectation)> = cases
            .iter()
            .map(|c| (c.line, c.path.as_str(), &c.expectation))
            .collect();
        assert_eq!(
            parsed,
            vec![
                (
                    2,
                    "integer/add-small.inv",
                    &Expectation::Integer("2".into())
                ),
                (4, "boolean/paid.inv", &Expectation::Boolean(true)),
                (5, "null/no-discount.inv", &Expectation::Null),
                (
                    6,
                    "float/tenth.inv",
                    &Expectation::FloatBits(0x3fb999999999999a)
                ),
                (7, "float/zero-by-zero.inv", &Expectation::FloatNan),
                (8, "error/divide.inv", &Expectation::Error),
                (9, "toml/valid.toml", &Expectation::Boolean(true)),
                (10, "toml/unterminated.toml", &Expectation::Error),
            ]
        );
    }

    #[test]
    fn bad_rows_are_refused_naming_their_line() {
        let cases = [
            (
                "ok.inv\tinteger\t1\n../up.inv\tinteger\t1\n",
                "line 2",
                "\"..\"",
            ),
            ("a/./b.inv\tboolean\ttrue\n", "line 1", "\".\""),
            ("a//b.inv\tboolean\ttrue\n", "line 1", "empty component"),
            ("/etc/passwd\ttrue\n", "line 1", "absolute"),
            ("a\\b.inv\ttrue\n", "line 1", "backslash"),
            ("a\0b.inv\ttrue\n", "line 1", "NUL"),
            ("\tinteger\t1\n", "line 1", "path is empty"),
            ("a.inv\tinteger\tx1\n", "line 1", "decimal integer"),
            ("a.inv\tfloat-bits\t3ff0\n", "line 1", "16 hex digits"),
            ("a.inv\tnull\tnull\n", "line 1", "`-`"),
            ("a.inv\tstring\tx\n", "line 1", "unknown expectation"),
            ("a.inv\tfalse\n", "line 1", "`true` or `error`"),
            ("a.inv\n", "line 1", "found 1 tab-separated"),
            (
                "a.inv\ttrue\n# c\na.inv\terror\n",
                "line 3",
                "already listed on line 1",
            ),
        ];
        for (text, line, why) in cases {
            let err = parse_manifest(text).unwrap_err();
            let message = crate::error_chain::error_chain(&err);
            assert!(
                message.contains(line) && message.contains(why),
                "{text:?}: {message}"
            );
        }
    }

    #[test]
    fn runs_are_judged_by_exit_code_and_the_last_printed_value() {
        use Expectation::*;
        let table: &[(Expectation, Option<i32>, &str, Outcome)] = &[
            (Integer("2".into()), Some(0), "2\n", Outcome::Passed),
            (
                Integer("2".into()),
                Some(0),
                "debug: adding\n+002\n",
                Outcome::Passed,
            ),
            (Integer("2".into()), Some(0), "3\n", Outcome::Failed),
            (Integer("2".into()), Some(1), "2\n", Outcome::Failed),
            (Integer("2".into()), None, "2\n", Outcome::Error),
            (Boolean(false), Some(0), "false", Outcome::Passed),
            (Boolean(false), Some(0), "False", Outcome::Failed),
            (Null, Some(0), "null\n", Outcome::Passed),
            (Null, Some(0), "\n", Outcome::Failed),
            (
                FloatBits(0x3fb999999999999a),
                Some(0),
                "0.1\n",
                Outcome::Passed,
            ),
            (
                FloatBits(0x3fb999999999999a),
                Some(0),
                "0x3fb999999999999a\n",
                Outcome::Passed,
            ),
            (
                FloatBits(0x3fb999999999999a),
                Some(0),
                "0.1000001\n",
                Outcome::Failed,
            ),
            (
                FloatBits(0x8000000000000000),
                Some(0),
                "0.0\n",
                Outcome::Failed,
            ),
            (FloatNan, Some(0), "NaN\n", Outcome::Passed),
            (FloatNan, Some(0), "0x7ff8000000000001\n", Outcome::Passed),
            (FloatNan, Some(0), "inf\n", Outcome::Failed),
            (Error, Some(1), "", Outcome::Passed),
            (Error, Some(0), "1\n", Outcome::Failed),
            (Error, None, "", Outcome::Error),
        ];
        for (expectation, exit, stdout, outcome) in table {
            assert_eq!(
                judge(expectation, *exit, stdout.as_bytes()),
                *outcome,
                "{expectation:?} {exit:?} {stdout:?}"
            );
        }
    }

    #[test]
    fn a_case_result_names_the_case_by_its_path() {
        let case = &parse_manifest("integer/add-small.inv\tinteger\t2\n").unwrap()[0];
        let result = case_result("corpus/manifest.tsv", case, Some(0), b"3\n");
        assert_eq!(result.name, "integer/add-small.inv");
        assert_eq!(result.file, "corpus/manifest.tsv");
        assert_eq!(result.outcome, Outcome::Failed);
        let message = result.message.unwrap_or_default();
        assert!(
            message.contains("line 1") && message.contains("exited 0"),
            "{message}"
        );
        assert_eq!(job_report(Vec::new()), ReportOutcome::ZeroTests);
    }

    #[test]
    fn a_name_selects_its_case_and_the_cases_under_it() {
        let cases = parse_manifest(CORPUS).unwrap();
        let paths = |names: &[&str]| -> Vec<String> {
            let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
            let job = ManifestJob::select(&TreeDir::new("corpus").unwrap(), &cases, &names);
            job.cases.iter().map(|c| job.run_path(c)).collect()
        };
        assert_eq!(
            paths(&["integer/add-small.inv", "toml"]),
            [
                "corpus/integer/add-small.inv",
                "corpus/toml/valid.toml",
                "corpus/toml/unterminated.toml"
            ]
        );
        assert!(paths(&["integer/add"]).is_empty());
        assert_eq!(paths(&[]).len(), cases.len());
        let root = ManifestJob::select(&TreeDir::root(), &cases, &[]);
        assert_eq!(root.run_path(&root.cases[0]), "integer/add-small.inv");
        assert_eq!(root.manifest_path(), "manifest.tsv");
    }
}
