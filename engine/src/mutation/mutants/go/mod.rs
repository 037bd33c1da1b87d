//! Go, a language of the mutation seam: `.go` product files (never `_test.go`, `testdata/` or
//! generated files) parsed with tree-sitter's Go grammar, gremlins' operator families plus
//! returns of zero values, the function or method around a mutant as its scope, and
//! `go test` to judge it: each package's test executable built once with every mutant behind
//! a switch ([`schema`], [`prebuilt`]), or, for a mutant no switch can hold, the package built
//! and tested with the edit applied.

mod function_copy;
pub mod prebuilt;
pub mod schema;
mod scope;
mod sites;
pub(crate) mod syntax;

use super::language::{Language, SchemaStrategy};
use super::scope::Scope;
use super::sites::Candidate;
use super::{
    ExclusionReason, Operator, OperatorSet, bare_carriage_return, does_not_parse, not_utf8,
};
use assay_common::runner::{Runner, SourceLanguage, go::Go as GoRunner};
use std::collections::BTreeSet;

pub(crate) struct Go;

/// Go's operators, in the order the planner's round-robin visits them. Both sets are the
/// same: gremlins' families are the default.
const OPERATORS: [Operator; 10] = [
    Operator::Arithmetic,
    Operator::SwapBound,
    Operator::Comparison,
    Operator::ReturnConstant,
    Operator::IncrementDecrement,
    Operator::AugmentedAssignment,
    Operator::Boolean,
    Operator::Bitwise,
    Operator::LoopControl,
    Operator::Unary,
];

impl Language for Go {
    fn name(&self) -> &'static str {
        "Go"
    }

    fn owns(&self, path: &str) -> bool {
        path.ends_with(".go")
    }

    fn is_source(&self, path: &str) -> bool {
        path.ends_with(".go")
    }

    fn exclusion(&self, path: &str, bytes: &[u8]) -> Option<(ExclusionReason, String)> {
        if GoRunner.is_test_file(path) {
            return Some((
                ExclusionReason::TestFile,
                "a test file (`_test.go`) or test data: the tests are what the check measures"
                    .into(),
            ));
        }
        let source = match not_utf8(bytes) {
            Ok(source) => source,
            Err(excluded) => return Some(excluded),
        };
        if let Some(line) = syntax::generated_marker(source) {
            return Some((
                ExclusionReason::Generated,
                format!("generated (`// Code generated … DO NOT EDIT.` on line {line})"),
            ));
        }
        if let Some(excluded) =
            bare_carriage_return(bytes, "Go and git number such lines differently")
        {
            return Some(excluded);
        }
        if let Err(line) = syntax::parse_clean(source) {
            return Some(does_not_parse("Go", line));
        }
        None
    }

    /// One set: only Python has extended operators.
    fn operators(&self, _set: OperatorSet) -> &'static [Operator] {
        &OPERATORS
    }

    fn sites(
        &self,
        _path: &str,
        source: &str,
        changed: &BTreeSet<u32>,
        _set: OperatorSet,
    ) -> Vec<Candidate> {
        sites::find(source, changed)
    }

    fn scopes(&self, _path: &str, source: &str, ranges: &[(usize, usize)]) -> Vec<Scope> {
        scope::scopes(source, ranges)
    }

    fn language(&self) -> SourceLanguage {
        SourceLanguage::Go
    }

    fn compiles(&self) -> bool {
        true
    }

    fn schemata(&self) -> Option<SchemaStrategy> {
        Some(SchemaStrategy::GoTestBinary)
    }
}

#[cfg(test)]
mod tests;
