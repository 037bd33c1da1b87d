//! The language seam of mutation: what one language decides (which files are its product
//! files, how they parse, their sites and operators, a mutant's scope, the runners that judge
//! its mutants). The planner, the proof's check and `assay mutate` ask a [`Language`] and
//! know no language themselves; a new one is a module implementing it, listed in
//! [`LANGUAGES`].

use super::scope::Scope;
use super::sites::Candidate;
use super::{ExclusionReason, Operator, OperatorSet};
use assay_common::runner::SourceLanguage;
use std::collections::BTreeSet;

pub(crate) trait Language: Sync {
    /// The language's name, for notes and errors (`Python`).
    fn name(&self) -> &'static str;
    /// Whether the planner asks this language about `path` (Python: `.py` and its `.pyi`
    /// stubs, which it then excludes).
    fn owns(&self, path: &str) -> bool;
    /// Whether `path` is a source file of the language whose code runs (`.py`): what
    /// `assay mutate` lists, and which changed test files the check names as excluded.
    fn is_source(&self, path: &str) -> bool;
    /// Why a file it owns is never mutated: a test file, a stub, an encoding, a parse error.
    fn exclusion(&self, path: &str, bytes: &[u8]) -> Option<(ExclusionReason, String)>;
    /// The operators of `set`, in the order the planner's round-robin visits them.
    fn operators(&self, set: OperatorSet) -> &'static [Operator];
    /// Every site on `changed` lines of `source`, the file at `path` (one it did not exclude),
    /// in tree order. The path names a dialect where the language has several (TypeScript).
    fn sites(
        &self,
        path: &str,
        source: &str,
        changed: &BTreeSet<u32>,
        set: OperatorSet,
    ) -> Vec<Candidate>;
    /// The scope of each byte range `(start, end)` of `source`, the file at `path`, in order.
    fn scopes(&self, path: &str, source: &str, ranges: &[(usize, usize)]) -> Vec<Scope>;
    /// Which language it is: a runner whose tests are in it ([`Runner::language`]) judges its
    /// mutants.
    ///
    /// [`Runner::language`]: assay_common::runner::Runner::language
    fn language(&self) -> SourceLanguage;
    /// Whether a mutant is compiled before its tests run: a run that reports a build failure
    /// and no test is then the mutant's compile error, never a kill.
    fn compiles(&self) -> bool;
    /// How one tree holds every mutant behind a runtime switch, so the mutants share a build
    /// or a trace; `None`: each mutant is a run with its own edit applied. What `assay
    /// mutate` (and, for Rust, the proof's check) uses instead of a run per mutant.
    fn schemata(&self) -> Option<SchemaStrategy> {
        None
    }
}

/// How a language's mutant schemata run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SchemaStrategy {
    /// A cargo test build of the schema; each mutant a run of its executables
    /// (`mutants::rust::prebuilt`).
    CargoBuild,
    /// Each package's `go test -c` executable of the schema (`mutants::go::prebuilt`).
    GoTestBinary,
    /// The rewritten files run as they are: each mutant is a run of the schema's tree with
    /// the switch set (JavaScript).
    Interpret,
}
