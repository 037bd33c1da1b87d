//! JavaScript, a language of the mutation seam: `.js`, `.mjs` and `.cjs` product files (ES
//! modules and CommonJS; never test files or `node_modules/`) parsed with tree-sitter's
//! JavaScript grammar, and TypeScript's `.ts`, `.mts` and `.cts` with its TypeScript grammar
//! (declaration files excluded; types hold no site). Stryker's mutator families, the function
//! or method around a mutant as its scope, and node:test to judge it: every mutant of a file
//! behind one runtime switch ([`schema`]), each mutant a run of the test files that reach it; a
//! mutant the schema cannot hold is a run with its edit applied. TypeScript runs once its
//! types are erased ([`typescript`]).

pub mod schema;
mod scope;
mod sites;
pub(crate) mod syntax;
pub mod typescript;

use super::language::{Language, SchemaStrategy};
use super::scope::Scope;
use super::sites::Candidate;
use super::{
    ExclusionReason, Operator, OperatorSet, bare_carriage_return, does_not_parse, not_utf8,
};
use assay_common::runner::{Runner, SourceLanguage, node::Node};
use std::collections::BTreeSet;
use syntax::Dialect;

pub(crate) struct JavaScript;

/// JavaScript's operators, in the order the planner's round-robin visits them: Stryker's
/// families. Both sets are the same.
const OPERATORS: [Operator; 12] = [
    Operator::Arithmetic,
    Operator::SwapBound,
    Operator::Comparison,
    Operator::Boolean,
    Operator::ConditionalExpression,
    Operator::DropBranch,
    Operator::Unary,
    Operator::IncrementDecrement,
    Operator::AugmentedAssignment,
    Operator::String,
    Operator::Collection,
    Operator::OptionalChaining,
];

fn is_script(path: &str) -> bool {
    path.ends_with(".js")
        || path.ends_with(".mjs")
        || path.ends_with(".cjs")
        || syntax::is_typescript(path)
}

impl Language for JavaScript {
    fn name(&self) -> &'static str {
        "JavaScript"
    }

    fn owns(&self, path: &str) -> bool {
        is_script(path)
    }

    fn is_source(&self, path: &str) -> bool {
        is_script(path)
    }

    fn exclusion(&self, path: &str, bytes: &[u8]) -> Option<(ExclusionReason, String)> {
        if Node.is_test_file(path) {
            return Some((
                ExclusionReason::TestFile,
                "a test file: the tests are what the check measures".into(),
            ));
        }
        if path.split('/').any(|part| part == "node_modules") {
            return Some((
                ExclusionReason::TestFile,
                "a dependency under `node_modules/`: not the project's code".into(),
            ));
        }
        if syntax::is_declaration(path) {
            return Some((
                ExclusionReason::TypeStub,
                "a TypeScript declaration file: types only, no code runs".into(),
            ));
        }
        let dialect = Dialect::of(path);
        let source = match not_utf8(bytes) {
            Ok(source) => source,
            Err(excluded) => return Some(excluded),
        };
        if let Some(excluded) =
            bare_carriage_return(bytes, "node and git number such lines differently")
        {
            return Some(excluded);
        }
        if let Err(line) = syntax::parse_clean(dialect, source) {
            return Some(does_not_parse(dialect.name(), line));
        }
        None
    }

    /// One set: only Python has extended operators.
    fn operators(&self, _set: OperatorSet) -> &'static [Operator] {
        &OPERATORS
    }

    fn sites(
        &self,
        path: &str,
        source: &str,
        changed: &BTreeSet<u32>,
        _set: OperatorSet,
    ) -> Vec<Candidate> {
        sites::find(Dialect::of(path), source, changed)
    }

    fn scopes(&self, path: &str, source: &str, ranges: &[(usize, usize)]) -> Vec<Scope> {
        scope::scopes(Dialect::of(path), source, ranges)
    }

    fn language(&self) -> SourceLanguage {
        SourceLanguage::JavaScript
    }

    fn compiles(&self) -> bool {
        false
    }

    fn schemata(&self) -> Option<SchemaStrategy> {
        Some(SchemaStrategy::Interpret)
    }
}

#[cfg(test)]
mod tests;
