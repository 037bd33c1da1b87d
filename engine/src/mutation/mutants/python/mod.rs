//! Python, the first language of the mutation seam: `.py` product files parsed with
//! tree-sitter's Python grammar, the five operators of the proof's check and ten more, the
//! function or method around a mutant as its scope, and pytest or unittest to judge it.

mod scope;
mod sites;
pub(crate) mod syntax;

use super::language::Language;
use super::scope::Scope;
use super::sites::Candidate;
use super::{
    ExclusionReason, Operator, OperatorSet, bare_carriage_return, does_not_parse, not_utf8,
};
use assay_common::runner::{Runner, SourceLanguage, pytest::Pytest};
use std::collections::BTreeSet;

pub(crate) struct Python;

impl Language for Python {
    fn name(&self) -> &'static str {
        "Python"
    }

    fn owns(&self, path: &str) -> bool {
        path.ends_with(".py") || path.ends_with(".pyi")
    }

    fn is_source(&self, path: &str) -> bool {
        path.ends_with(".py")
    }

    fn exclusion(&self, path: &str, bytes: &[u8]) -> Option<(ExclusionReason, String)> {
        if path.ends_with(".pyi") {
            return Some((
                ExclusionReason::TypeStub,
                "a type stub: no code runs from it".into(),
            ));
        }
        if Pytest.is_test_file(path) {
            return Some((
                ExclusionReason::TestFile,
                "a test file: the tests are what the check measures".into(),
            ));
        }
        let source = match not_utf8(bytes) {
            Ok(source) => source,
            Err(excluded) => return Some(excluded),
        };
        if !source.is_ascii()
            && let Some(encoding) = syntax::declared_encoding(source)
        {
            return Some((
                ExclusionReason::DeclaredEncoding,
                format!("declares encoding {encoding} and is not plain ASCII"),
            ));
        }
        if let Some(excluded) =
            bare_carriage_return(bytes, "Python and git would number the lines differently")
        {
            return Some(excluded);
        }
        if let Err(line) = syntax::parses(source) {
            return Some(does_not_parse("Python", line));
        }
        None
    }

    fn operators(&self, set: OperatorSet) -> &'static [Operator] {
        match set {
            OperatorSet::Default => &Operator::ALL,
            OperatorSet::Extended => &Operator::EXTENDED,
        }
    }

    fn sites(
        &self,
        _path: &str,
        source: &str,
        changed: &BTreeSet<u32>,
        set: OperatorSet,
    ) -> Vec<Candidate> {
        sites::find(source, changed, set == OperatorSet::Extended)
    }

    fn scopes(&self, _path: &str, source: &str, ranges: &[(usize, usize)]) -> Vec<Scope> {
        scope::scopes(source, ranges)
    }

    fn language(&self) -> SourceLanguage {
        SourceLanguage::Python
    }

    fn compiles(&self) -> bool {
        // An import error under a mutant is the mutant breaking the module: a kill.
        false
    }
}
