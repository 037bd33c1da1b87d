//! Rust, the second language of the mutation seam: `.rs` product files parsed with
//! tree-sitter's Rust grammar, cargo-mutants' operator families (a function's body replaced by
//! a value of its return type, binary, comparison and boolean operators, `!` and `-` deleted,
//! compound assignments, match arms deleted), test code (`#[test]`, `#[cfg(test)]`, `tests/`)
//! never mutated, the function around a mutant as its scope, and [`schema`]: every mutant of a
//! crate behind one runtime switch, so the crate builds once for all of them.

pub mod prebuilt;
pub mod schema;
mod scope;
mod sites;
pub(crate) mod syntax;
mod values;

use super::language::{Language, SchemaStrategy};
use super::scope::Scope;
use super::sites::Candidate;
use super::{
    ExclusionReason, Operator, OperatorSet, bare_carriage_return, does_not_parse, not_utf8,
};
use assay_common::runner::SourceLanguage;
use std::collections::BTreeSet;

pub(crate) struct Rust;

/// Rust's operators, in the order the planner's round-robin visits them. Both sets are the
/// same: cargo-mutants' families are the default, and Rust has no extended set yet.
const OPERATORS: [Operator; 7] = [
    Operator::FunctionBody,
    Operator::Comparison,
    Operator::Boolean,
    Operator::Arithmetic,
    Operator::Unary,
    Operator::MatchArm,
    Operator::AugmentedAssignment,
];

/// Cargo's target directories that hold no product code: integration tests, benchmarks and
/// examples, at the root of any package of a workspace.
fn is_test_target(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    parts[..parts.len().saturating_sub(1)]
        .iter()
        .any(|part| matches!(*part, "tests" | "benches" | "examples"))
        || parts.last() == Some(&"build.rs")
}

impl Language for Rust {
    fn name(&self) -> &'static str {
        "Rust"
    }

    fn owns(&self, path: &str) -> bool {
        path.ends_with(".rs")
    }

    fn is_source(&self, path: &str) -> bool {
        path.ends_with(".rs")
    }

    fn exclusion(&self, path: &str, bytes: &[u8]) -> Option<(ExclusionReason, String)> {
        if is_test_target(path) {
            return Some((
                ExclusionReason::TestFile,
                "a test, benchmark, example or build script target: not product code".into(),
            ));
        }
        let source = match not_utf8(bytes) {
            Ok(source) => source,
            Err(excluded) => return Some(excluded),
        };
        if let Some(excluded) = bare_carriage_return(bytes, "rustc refuses it") {
            return Some(excluded);
        }
        let tree = match syntax::parse_clean(source) {
            Ok(tree) => tree,
            Err(line) => return Some(does_not_parse("Rust", line)),
        };
        if syntax::is_test_only_file(tree.root_node(), source) {
            return Some((
                ExclusionReason::TestFile,
                "compiled for tests only (`#![cfg(test)]`): the tests are what the check measures"
                    .into(),
            ));
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
        SourceLanguage::Rust
    }

    fn compiles(&self) -> bool {
        true
    }

    fn schemata(&self) -> Option<SchemaStrategy> {
        Some(SchemaStrategy::CargoBuild)
    }
}
/// Rust mutants on the changed lines of `files` (at most `cap` per file, `None`: every site);
/// every file that is not Rust is excluded.
pub fn plan(files: &[super::ChangedFile], cap: Option<usize>) -> super::MutationPlan {
    super::plan_mutants_in(&Rust, files, cap, OperatorSet::Default)
}

#[cfg(test)]
mod tests;
