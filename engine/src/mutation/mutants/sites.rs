//! A mutation site, whatever its language: the bytes one operator replaces on a changed line,
//! and the check every language shares (the replacement differs, fits, keeps every line
//! number) before the language's own (it parses, and reads as intended).

use super::Operator;
use super::syntax::Reparser;
use std::fmt::Debug;
use std::sync::Arc;

/// What a language checks once a candidate's replacement is applied to `source`: `Err` says
/// why the site is skipped.
pub(crate) trait Verify: Debug + Send + Sync {
    /// `file` parses the candidate's file and its mutants.
    fn verify(&self, file: &mut Reparser<'_>, candidate: &Candidate) -> Result<(), Skip>;
}

/// Why a candidate does not become a mutant: the note the plan's skipped site carries.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Skip {
    /// Known from the syntax before trying it (the language's note).
    #[error("{0}")]
    Unfit(String),
    #[error("the site's byte range does not fit the file")]
    OutOfRange,
    #[error("the replacement equals the original")]
    Unchanged,
    #[error("the replacement would move later lines")]
    MovesLines,
    /// `language` is empty where the file's language goes without saying.
    #[error("the mutated file does not parse{language} (line {line})")]
    DoesNotParse { language: &'static str, line: u32 },
    #[error("the mutated node cannot be found")]
    NodeNotFound,
    /// `what`: the statement or expression the operator meant to produce.
    #[error("the mutated {what} does not read as intended")]
    NotAsIntended { what: &'static str },
}

/// A site and its replacement, not yet checked.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    pub operator: Operator,
    /// Lower ranks are chosen first within an operator (Python's decorated definitions come
    /// last).
    pub rank: u8,
    pub start: usize,
    pub end: usize,
    pub replacement: String,
    pub line: u32,
    pub description: String,
    /// The language's check of the mutated source.
    pub verify: Arc<dyn Verify>,
    /// Why the site cannot become a mutant, when that is known before trying it.
    pub unfit: Option<String>,
}

/// Checks one candidate against its source (which `file` parses): `Err` says why the site is
/// skipped.
pub(crate) fn check(
    source: &str,
    file: &mut Reparser<'_>,
    candidate: &Candidate,
) -> Result<(), Skip> {
    if let Some(reason) = &candidate.unfit {
        return Err(Skip::Unfit(reason.clone()));
    }
    let original = source
        .get(candidate.start..candidate.end)
        .ok_or(Skip::OutOfRange)?;
    if original == candidate.replacement {
        return Err(Skip::Unchanged);
    }
    if newlines(original) != newlines(&candidate.replacement) {
        return Err(Skip::MovesLines);
    }
    candidate.verify.verify(file, candidate)
}

/// The check every tree-sitter language's candidates share: the file with `candidate` applied
/// parses cleanly with `grammar` (a 1-based line on failure), and where `token` names one,
/// the replacement is exactly a token of that kind inside a node of the parent kind (an
/// operator swapped in place).
fn verify_reparsed(
    file: &mut Reparser<'_>,
    candidate: &Candidate,
    token: Option<(&'static str, &'static str)>,
    language: &'static str,
    grammar: tree_sitter::Language,
) -> Result<(), Skip> {
    let tree = file
        .mutated_clean(grammar, candidate)
        .map_err(|line| Skip::DoesNotParse { language, line })?;
    let Some((token, parent)) = token else {
        return Ok(());
    };
    let end = candidate.start + candidate.replacement.len();
    let node = tree
        .root_node()
        .descendant_for_byte_range(candidate.start, end)
        .ok_or(Skip::NodeNotFound)?;
    let intended = node.kind() == token
        && node.byte_range() == (candidate.start..end)
        && node.parent().is_some_and(|p| p.kind() == parent);
    if intended {
        Ok(())
    } else {
        Err(Skip::NotAsIntended { what: "expression" })
    }
}

/// A tree-sitter language's check of a mutant ([`verify_reparsed`]): the mutated file parses
/// cleanly in `grammar` and, for an operator swapped in place ([`Reparsed::token`]), the
/// replacement is one token of its kind inside a node of its parent's.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reparsed {
    /// The token's kind and its parent's; `None`: any syntax (the file parses).
    token: Option<(&'static str, &'static str)>,
    /// How a parse error names the language (` as Go`).
    language: &'static str,
    grammar: fn() -> tree_sitter::Language,
}

impl Reparsed {
    /// The check for a language: the mutated file parses, named ` as NAME` in a parse error.
    pub(crate) const fn parses(
        language: &'static str,
        grammar: fn() -> tree_sitter::Language,
    ) -> Self {
        Self {
            token: None,
            language,
            grammar,
        }
    }

    /// This language's check that the replacement is a `token` inside a `parent` (an operator
    /// swapped in place).
    pub(crate) const fn token(self, token: &'static str, parent: &'static str) -> Self {
        Self {
            token: Some((token, parent)),
            ..self
        }
    }
}

impl Verify for Reparsed {
    fn verify(&self, file: &mut Reparser<'_>, candidate: &Candidate) -> Result<(), Skip> {
        verify_reparsed(file, candidate, self.token, self.language, (self.grammar)())
    }
}

pub(crate) fn mutated(source: &str, candidate: &Candidate) -> String {
    format!(
        "{}{}{}",
        &source[..candidate.start],
        candidate.replacement,
        &source[candidate.end..]
    )
}

pub(crate) fn newlines(text: &str) -> usize {
    text.bytes().filter(|b| *b == b'\n').count()
}

/// The first line of a piece of source, at most 40 characters, for descriptions.
pub(crate) fn short(original: &str) -> String {
    let first = original.lines().next().unwrap_or("");
    let mut out: String = first.chars().take(40).collect();
    if out.len() < original.len() {
        out.push('…');
    }
    out
}

/// A candidate replacing the whole of `node` by `replacement`, checked by `verify`.
pub(crate) fn candidate(
    operator: Operator,
    node: tree_sitter::Node<'_>,
    replacement: String,
    description: String,
    verify: impl Verify + 'static,
) -> Candidate {
    Candidate {
        operator,
        rank: 0,
        start: node.start_byte(),
        end: node.end_byte(),
        replacement,
        line: super::syntax::line(node),
        description,
        verify: Arc::new(verify),
        unfit: None,
    }
}

/// The operator token `op` replaced by `to`, described as `` `op` -> `to` ``: how every
/// language names the swap of one token for another.
pub(crate) fn token_swap(
    operator: Operator,
    op: tree_sitter::Node<'_>,
    to: &str,
    verify: impl Verify + 'static,
) -> Candidate {
    candidate(
        operator,
        op,
        to.to_string(),
        format!("`{}` -> `{to}`", op.kind()),
        verify,
    )
}

/// The replacements of a binary operator that C-like languages share (Go, JavaScript), as
/// gremlins and Stryker make them, by family; empty for another operator.
pub(crate) fn c_like_binary_swaps(operator: &str) -> &'static [(Operator, &'static str)] {
    match operator {
        "+" => &[(Operator::Arithmetic, "-")],
        "-" => &[(Operator::Arithmetic, "+")],
        "*" => &[(Operator::Arithmetic, "/")],
        "/" => &[(Operator::Arithmetic, "*")],
        "%" => &[(Operator::Arithmetic, "*")],
        "<" => &[(Operator::SwapBound, "<="), (Operator::Comparison, ">=")],
        "<=" => &[(Operator::SwapBound, "<"), (Operator::Comparison, ">")],
        ">" => &[(Operator::SwapBound, ">="), (Operator::Comparison, "<=")],
        ">=" => &[(Operator::SwapBound, ">"), (Operator::Comparison, "<")],
        "==" => &[(Operator::Comparison, "!=")],
        "!=" => &[(Operator::Comparison, "==")],
        "&&" => &[(Operator::Boolean, "||")],
        "||" => &[(Operator::Boolean, "&&")],
        _ => &[],
    }
}
