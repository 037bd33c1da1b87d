//! Criteria: `test: NAME` (fails before, passes after) and `guard: NAME` (passes on both),
//! optionally prefixed with an id (`C3: test: NAME`). Parsing refuses qualified selectors
//! before anything runs, and falls back to the criterion id when no name is readable.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Which way a criterion's test must go from base to candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CriterionKind {
    /// Must fail on the base tree and pass on the candidate tree.
    Test,
    /// Must pass on both trees.
    Guard,
}

impl fmt::Display for CriterionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Test => "test",
            Self::Guard => "guard",
        })
    }
}

/// What a criterion's test is called.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestSelector {
    /// An exact bare name (`test_health`, `TestCacheExpiry/expired`).
    Exact(String),
    /// No readable name: the criterion id names tests starting with this prefix
    /// (`C1` → `test_c1_`; Go's `TestC1` matches too).
    IdPrefix(String),
}

impl TestSelector {
    /// The text shown to users and used to select tests by name.
    pub fn display(&self) -> &str {
        match self {
            Self::Exact(name) | Self::IdPrefix(name) => name,
        }
    }

    /// Does a reported test name belong to this selector?
    ///
    /// Go reports subtests by path (`TestCacheExpiry/expired`): a declared path accounts for
    /// itself and every path under it, so a declared function covers all of its subtests and
    /// one failing subtest breaks a guard on it. A sibling subtest, or the parent of a declared
    /// subtest (which fails whenever any sibling does), is not matched. Python names never
    /// contain `/`, so for them this is exact equality.
    pub fn matches(&self, reported_name: &str) -> bool {
        match self {
            Self::Exact(name) => {
                reported_name == name
                    || reported_name
                        .strip_prefix(name.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            }
            Self::IdPrefix(prefix) => {
                reported_name.starts_with(prefix.as_str())
                    || go_id_prefix(prefix).is_some_and(|go| {
                        // `TestC1` names `TestC1Adds` and `TestC1/x`, never `TestC10`.
                        reported_name
                            .strip_prefix(go.as_str())
                            .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_digit()))
                    })
            }
        }
    }
}

/// `test_c1_` → `TestC1`, so an id-named Go test (`TestC1Adds`) matches too.
fn go_id_prefix(python_prefix: &str) -> Option<String> {
    let id = python_prefix.strip_prefix("test_")?.strip_suffix('_')?;
    Some(format!("Test{}", id.to_ascii_uppercase()))
}

/// One declared criterion: a test the proof must see fail then pass, or pass on both trees.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Criterion {
    /// The criterion's short id (`C1`), as written or numbered by position.
    pub id: String,
    /// Whether it is a `test:` or a `guard:`.
    pub kind: CriterionKind,
    /// The test (or tests) it names.
    pub test: TestSelector,
}

/// Why a criterion's text was refused; `text` is the criterion as written.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CriterionError {
    /// It starts with neither `test:` nor `guard:`.
    #[error(
        "criterion {text:?} does not start with `test:` or `guard:` (hint: write \"test: test_name\" or \"C1: guard: test_name\")"
    )]
    MissingKind {
        /// The criterion as written.
        text: String,
    },
    /// It names a qualified selector (`tests/test_x.py::test_y`) instead of a bare name.
    #[error(
        "criterion {text:?} names the qualified selector {selector:?}; a proof declares a bare test name (hint: write `{kind}: {bare}`)"
    )]
    Qualified {
        /// The criterion as written.
        text: String,
        /// The qualified selector it names.
        selector: String,
        /// Its kind, for the hint.
        kind: CriterionKind,
        /// The bare name to write instead.
        bare: String,
    },
    /// Its id is not a short identifier such as `C1`.
    #[error("criterion id {id:?} in {text:?} is not a short identifier such as C1")]
    BadId {
        /// The id as written.
        id: String,
        /// The criterion as written.
        text: String,
    },
    /// Two criteria share an id.
    #[error("criterion id {id} is used twice")]
    DuplicateId {
        /// The id used twice.
        id: String,
    },
    /// Nothing after the kind reads as a test name.
    #[error(
        "criterion {text:?} names no test (hint: write \"{kind}: test_name\", or prose after the kind to name it by its id)"
    )]
    NoName {
        /// The criterion as written.
        text: String,
        /// Its kind, for the hint.
        kind: CriterionKind,
    },
    /// A quoted test name does not close.
    #[error(
        "criterion {text:?} opens a quoted name that does not close (hint: write {kind}: \"the test's name\")"
    )]
    UnclosedQuote {
        /// The criterion as written.
        text: String,
        /// Its kind, for the hint.
        kind: CriterionKind,
    },
}

/// Parses criteria in order; ids are taken from the text or numbered `C1`, `C2`, … by position.
pub fn parse_criteria(texts: &[String]) -> Result<Vec<Criterion>, CriterionError> {
    parse_all(texts, Names::Bare)
}

/// Parses criteria whose tests are Rust tests, named as cargo reports them: a path of
/// identifiers (`tests::counts_pages`, `counts_pages`, `tests::r#match`). A path is the test's
/// name, not a qualified selector; anything else parses as in [`parse_criteria`].
pub fn parse_rust_path_criteria(texts: &[String]) -> Result<Vec<Criterion>, CriterionError> {
    parse_all(texts, Names::RustPaths)
}

/// Parses criteria whose tests are named by sentences, as node:test and Vitest name them
/// (`test('partial last page is counted', …)`): a name in double or single quotes is the
/// test's exact name, `test: "partial last page is counted"`; anything else parses as in
/// [`parse_criteria`].
pub fn parse_sentence_criteria(texts: &[String]) -> Result<Vec<Criterion>, CriterionError> {
    parse_all(texts, Names::Sentences)
}

/// How a runner names the tests criteria declare.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Names {
    Bare,
    CasePaths,
    RustPaths,
    Sentences,
}

/// Parses criteria whose tests are manifest cases, named by their paths in the corpus
/// (`integer/add-small.inv`, or a directory `integer` for every case under it). A path is a
/// file name, not a qualified selector; anything else parses as in [`parse_criteria`].
pub fn parse_case_path_criteria(texts: &[String]) -> Result<Vec<Criterion>, CriterionError> {
    parse_all(texts, Names::CasePaths)
}

fn parse_all(texts: &[String], names: Names) -> Result<Vec<Criterion>, CriterionError> {
    let mut criteria: Vec<Criterion> = Vec::with_capacity(texts.len());
    for (position, text) in texts.iter().enumerate() {
        let criterion = parse_one(text, position + 1, names)?;
        if criteria.iter().any(|c| c.id == criterion.id) {
            return Err(CriterionError::DuplicateId { id: criterion.id });
        }
        criteria.push(criterion);
    }
    Ok(criteria)
}

/// Parses one criterion; `position` (1-based) supplies the default id.
pub fn parse_criterion(text: &str, position: usize) -> Result<Criterion, CriterionError> {
    parse_one(text, position, Names::Bare)
}

fn parse_one(text: &str, position: usize, names: Names) -> Result<Criterion, CriterionError> {
    let trimmed = text.trim();
    let (id, rest) = split_id(trimmed, text)?;
    let id = id.unwrap_or_else(|| format!("C{position}"));
    let (kind, body) = if let Some(body) = strip_prefix_ci(rest, "test:") {
        (CriterionKind::Test, body)
    } else if let Some(body) = strip_prefix_ci(rest, "guard:") {
        (CriterionKind::Guard, body)
    } else {
        return Err(CriterionError::MissingKind {
            text: text.to_owned(),
        });
    };
    if body.is_empty() {
        return Err(CriterionError::NoName {
            text: text.to_owned(),
            kind,
        });
    }
    if names == Names::Sentences
        && let Some(quote) = body.chars().next().filter(|c| matches!(c, '"' | '\''))
    {
        let inner = &body[quote.len_utf8()..];
        let Some((name, explanation)) = inner.split_once(quote) else {
            return Err(CriterionError::UnclosedQuote {
                text: text.to_owned(),
                kind,
            });
        };
        let explanation = explanation.trim();
        let explained = explanation.is_empty() || explanation.starts_with(['—', '-', '(', ':']);
        if name.trim().is_empty() || !explained {
            return Err(CriterionError::NoName {
                text: text.to_owned(),
                kind,
            });
        }
        return Ok(Criterion {
            id,
            kind,
            test: TestSelector::Exact(name.to_owned()),
        });
    }
    let (token, explanation) = first_token(body);
    // Prose ("test: the partial page is counted") names no test: fall back to the id.
    let explained = explanation.is_empty() || explanation.starts_with(['—', '-', '(', ':']);
    let named = match names {
        Names::Bare | Names::Sentences => false,
        Names::CasePaths => is_case_path(&token),
        Names::RustPaths => is_rust_path(&token),
    };
    if named && explained {
        return Ok(Criterion {
            id,
            kind,
            test: TestSelector::Exact(token),
        });
    }
    if is_qualified(&token) {
        let bare = token
            .rsplit(['.', ':'])
            .next()
            .unwrap_or(token.as_str())
            .to_owned();
        return Err(CriterionError::Qualified {
            text: text.to_owned(),
            selector: token,
            kind,
            bare,
        });
    }
    let test = if is_bare_name(&token) && explained {
        TestSelector::Exact(token)
    } else {
        TestSelector::IdPrefix(format!("test_{}_", id.to_ascii_lowercase()))
    };
    Ok(Criterion { id, kind, test })
}

/// For a runner whose tests are named by sentences: the words after the kind of a criterion
/// that named no test by them (it fell back to its id), when they read like a test's name
/// written without the quotes it needs (`test: partial last page is counted`).
pub fn unquoted_sentence(text: &str, criterion: &Criterion) -> Option<String> {
    if !matches!(criterion.test, TestSelector::IdPrefix(_)) {
        return None;
    }
    let (_, rest) = split_id(text.trim(), text).ok()?;
    let body = strip_prefix_ci(rest, "test:").or_else(|| strip_prefix_ci(rest, "guard:"))?;
    (body.contains(' ') && !body.starts_with(['"', '\''])).then(|| body.to_owned())
}

/// `C3: test: x` → (`Some("C3")`, `test: x`); `test: x` → (`None`, `test: x`).
fn split_id<'a>(trimmed: &'a str, text: &str) -> Result<(Option<String>, &'a str), CriterionError> {
    let Some((head, rest)) = trimmed.split_once(':') else {
        return Ok((None, trimmed));
    };
    let head = head.trim();
    if head.eq_ignore_ascii_case("test") || head.eq_ignore_ascii_case("guard") {
        return Ok((None, trimmed));
    }
    let valid = !head.is_empty()
        && head.len() <= 16
        && head
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid {
        return Err(CriterionError::BadId {
            id: head.to_owned(),
            text: text.to_owned(),
        });
    }
    Ok((Some(head.to_owned()), rest.trim_start()))
}

fn strip_prefix_ci<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| text[prefix.len()..].trim())
}

/// The declared identifier (the first word, without paired backticks) and what follows it.
fn first_token(body: &str) -> (String, &str) {
    let body = body.trim();
    if let Some((quoted, rest)) = body
        .strip_prefix('`')
        .and_then(|inner| inner.split_once('`'))
    {
        return (quoted.trim().to_owned(), rest.trim());
    }
    let end = body
        .find(|c: char| c.is_whitespace() || c == '(' || c == '—')
        .unwrap_or(body.len());
    (body[..end].to_owned(), body[end..].trim())
}

fn is_bare_name(token: &str) -> bool {
    let mut chars = token.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && token
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '/')
        && !token.ends_with('/')
}

/// `integer/add-small.inv`: a confined relative path of plain file-name characters.
fn is_case_path(token: &str) -> bool {
    !token.is_empty()
        && token
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
        && token
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// `tests::counts_pages`, `counts_pages`, `tests::r#match`: `::`-separated Rust identifiers.
fn is_rust_path(token: &str) -> bool {
    token.split("::").all(|segment| {
        let ident = segment.strip_prefix("r#").unwrap_or(segment);
        ident.starts_with(|c: char| c.is_alphabetic() || c == '_')
            && ident.chars().all(|c| c.is_alphanumeric() || c == '_')
    })
}

/// `tests.test_health.HealthTests.test_health`, `tests/x.py::test_y`: a module, file, class or
/// method path rather than a bare name. A Go subtest path (`TestA/b`) is not qualified.
fn is_qualified(token: &str) -> bool {
    if token.contains("::") || token.contains(".py") {
        return true;
    }
    let parts: Vec<&str> = token.split('.').collect();
    parts.len() > 1 && parts.iter().all(|p| is_bare_name(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unquoted_sentence_is_found_for_the_hint_and_nothing_else_is() {
        let texts = [
            "test: partial last page is counted",
            "C2: guard: full pages are counted",
            "test: \"partial last page is counted\"",
            "test: test_full_pages",
        ]
        .map(String::from);
        let criteria = parse_sentence_criteria(&texts).unwrap();
        let found: Vec<Option<String>> = texts
            .iter()
            .zip(&criteria)
            .map(|(text, c)| unquoted_sentence(text, c))
            .collect();
        assert_eq!(
            found,
            [
                Some("partial last page is counted".to_owned()),
                Some("full pages are counted".to_owned()),
                None,
                None
            ]
        );
    }

    fn one(text: &str) -> Result<Criterion, CriterionError> {
        parse_criterion(text, 1)
    }

    #[test]
    fn a_quoted_sentence_is_a_node_or_vitest_tests_exact_name() {
        let parsed = parse_sentence_criteria(&[
            "test: \"partial last page is counted\"".into(),
            "C7: guard: 'full pages are counted' (existing behaviour)".into(),
            "guard: test_full_pages".into(),
        ])
        .unwrap();
        assert_eq!(
            parsed[0].test,
            TestSelector::Exact("partial last page is counted".into())
        );
        assert_eq!(parsed[1].id, "C7");
        assert_eq!(
            parsed[1].test,
            TestSelector::Exact("full pages are counted".into())
        );
        assert_eq!(
            parsed[2].test,
            TestSelector::Exact("test_full_pages".into())
        );
        // Unquoted prose still names the test by its id.
        let prose = parse_sentence_criteria(&["test: partial last page is counted".into()]);
        assert_eq!(
            prose.unwrap()[0].test,
            TestSelector::IdPrefix("test_c1_".into())
        );
        assert!(matches!(
            parse_sentence_criteria(&["test: \"partial last page".into()]),
            Err(CriterionError::UnclosedQuote { .. })
        ));
        assert!(matches!(
            parse_sentence_criteria(&["test: \"\"".into()]),
            Err(CriterionError::NoName { .. })
        ));
    }

    #[test]
    fn a_criterion_with_no_name_at_all_is_refused() {
        for text in ["test:", "guard:  ", "C2: test:"] {
            assert!(
                matches!(one(text), Err(CriterionError::NoName { .. })),
                "{text}: {:?}",
                one(text)
            );
        }
    }

    #[test]
    fn bare_names_parse_with_positional_ids() {
        let parsed = parse_criteria(&[
            "test: test_partial_page".into(),
            "guard: test_full_pages — existing behaviour".into(),
        ])
        .unwrap();
        assert_eq!(parsed[0].id, "C1");
        assert_eq!(parsed[0].kind, CriterionKind::Test);
        assert_eq!(
            parsed[0].test,
            TestSelector::Exact("test_partial_page".into())
        );
        assert_eq!(parsed[1].id, "C2");
        assert_eq!(
            parsed[1].test,
            TestSelector::Exact("test_full_pages".into())
        );
    }

    #[test]
    fn explicit_ids_and_explanations_are_kept_apart() {
        let c = one("C3: guard: test_health (must keep answering)").unwrap();
        assert_eq!(c.id, "C3");
        assert_eq!(c.kind, CriterionKind::Guard);
        assert_eq!(c.test, TestSelector::Exact("test_health".into()));
    }

    #[test]
    fn go_subtest_paths_are_bare_names() {
        let c = one("test: TestCacheExpiry/expired").unwrap();
        assert_eq!(
            c.test,
            TestSelector::Exact("TestCacheExpiry/expired".into())
        );
    }

    #[test]
    fn a_go_path_accounts_for_itself_and_paths_under_it_only() {
        let function = TestSelector::Exact("TestCacheExpiry".into());
        let subtest = TestSelector::Exact("TestCacheExpiry/expired".into());
        assert!(function.matches("TestCacheExpiry"));
        assert!(function.matches("TestCacheExpiry/expired"));
        assert!(function.matches("TestCacheExpiry/at_the_limit"));
        assert!(!function.matches("TestCacheExpiryTTL"));
        assert!(subtest.matches("TestCacheExpiry/expired"));
        assert!(subtest.matches("TestCacheExpiry/expired/zero_ttl"));
        assert!(!subtest.matches("TestCacheExpiry/expired_early"));
        assert!(!subtest.matches("TestCacheExpiry/at_the_limit"));
        assert!(!subtest.matches("TestCacheExpiry"));
        let python = TestSelector::Exact("test_pages".into());
        assert!(python.matches("test_pages"));
        assert!(!python.matches("test_pages_extra"));
    }

    #[test]
    fn manifest_case_paths_are_exact_names_only_for_the_manifest_runner() {
        let texts: Vec<String> = [
            "test: integer/halve.inv",
            "guard: float-sum.inv — exact bits",
            "guard: integer",
            "test: ../secret.inv",
            "test: the boolean case",
        ]
        .map(String::from)
        .to_vec();
        let parsed = parse_case_path_criteria(&texts).unwrap();
        let tests: Vec<&TestSelector> = parsed.iter().map(|c| &c.test).collect();
        assert_eq!(
            tests,
            [
                &TestSelector::Exact("integer/halve.inv".into()),
                &TestSelector::Exact("float-sum.inv".into()),
                &TestSelector::Exact("integer".into()),
                &TestSelector::IdPrefix("test_c4_".into()),
                &TestSelector::IdPrefix("test_c5_".into()),
            ]
        );
        assert!(matches!(
            parse_criteria(&texts[..1]),
            Err(CriterionError::Qualified { .. })
        ));
    }

    #[test]
    fn the_go_id_fallback_does_not_take_a_longer_id() {
        let c1 = TestSelector::IdPrefix("test_c1_".into());
        assert!(c1.matches("TestC1Adds"));
        assert!(c1.matches("TestC1/expired"));
        assert!(!c1.matches("TestC10Adds"));
        assert!(!c1.matches("test_c10_adds"));
    }

    #[test]
    fn rust_paths_are_names_for_cargo_and_anything_else_is_refused_or_falls_back_to_the_id() {
        let texts: Vec<String> = [
            "test: tests::counts_pages",
            "guard: counts_pages",
            "guard: tests::r#match",
            "guard: count.*",
        ]
        .map(String::from)
        .to_vec();
        let parsed = parse_rust_path_criteria(&texts).unwrap();
        let tests: Vec<&TestSelector> = parsed.iter().map(|c| &c.test).collect();
        assert_eq!(
            tests,
            [
                &TestSelector::Exact("tests::counts_pages".into()),
                &TestSelector::Exact("counts_pages".into()),
                &TestSelector::Exact("tests::r#match".into()),
                &TestSelector::IdPrefix("test_c4_".into()),
            ]
        );
        // A pattern is never a name: refused before anything runs.
        for hostile in [
            "guard: tests::count.*",
            "guard: tests::(a|b)",
            "test: tests::",
        ] {
            assert!(
                matches!(
                    parse_rust_path_criteria(&[hostile.to_owned()]),
                    Err(CriterionError::Qualified { .. })
                ),
                "{hostile}"
            );
        }
        assert!(matches!(
            parse_criteria(&texts[..1]),
            Err(CriterionError::Qualified { .. })
        ));
    }

    #[test]
    fn qualified_selectors_are_refused_with_the_bare_name_as_hint() {
        for text in [
            "test: tests.test_health.HealthTests.test_health",
            "test: tests/test_x.py::test_y",
            "guard: `tests.test_health.test_health`",
        ] {
            let err = one(text).unwrap_err();
            assert!(
                matches!(err, CriterionError::Qualified { .. }),
                "{text}: {err}"
            );
        }
        let err = one("test: tests/test_x.py::test_y").unwrap_err();
        assert!(err.to_string().contains("`test: test_y`"), "{err}");
    }

    #[test]
    fn prose_falls_back_to_the_criterion_id() {
        let c = one("C1: test: the partial page is counted").unwrap();
        assert_eq!(c.test, TestSelector::IdPrefix("test_c1_".into()));
        let c = one("C4: test: <name of the test>").unwrap();
        assert_eq!(c.test, TestSelector::IdPrefix("test_c4_".into()));
        assert!(c.test.matches("test_c4_adds_two"));
        assert!(c.test.matches("TestC4Adds"));
        assert!(!c.test.matches("test_c40_other"));
    }

    #[test]
    fn missing_kind_and_duplicate_ids_are_errors() {
        assert!(matches!(
            one("test_x"),
            Err(CriterionError::MissingKind { .. })
        ));
        assert!(matches!(
            parse_criteria(&["C1: test: a".into(), "C1: guard: b".into()]),
            Err(CriterionError::DuplicateId { .. })
        ));
        assert!(matches!(
            one("a b c: test: x"),
            Err(CriterionError::BadId { .. })
        ));
    }
}
