//! The languages Assay mutates, registered in one place: adding a language is its module
//! (implementing [`Language`]) and one entry in [`LANGUAGES`]. The planner, the check and
//! `assay mutate` ask here and name no language.

use super::go::Go;
use super::javascript::JavaScript;
use super::language::{Language, SchemaStrategy};
use super::python::Python;
use super::rust::Rust;
use super::scope::Scope;
use assay_common::runner::RunnerKind;

/// Every language Assay mutates, asked in this order.
pub(crate) const LANGUAGES: &[&dyn Language] = &[&Python, &Rust, &Go, &JavaScript];

/// The language of runners no language claims, and of the planner's Python-only entry points:
/// the mutation check was Python's before the seam, and keeps its plans.
pub(crate) const DEFAULT: &dyn Language = &Python;

/// The language that owns `path`, if any does.
pub(crate) fn for_path(path: &str) -> Option<&'static dyn Language> {
    LANGUAGES.iter().copied().find(|l| l.owns(path))
}

/// The language the proof's mutation check mutates for `runner`.
pub(crate) fn of_check(runner: RunnerKind) -> &'static dyn Language {
    for_runner(runner).unwrap_or(DEFAULT)
}

/// The language whose mutants `runner`'s tests judge, if any.
pub(crate) fn for_runner(runner: RunnerKind) -> Option<&'static dyn Language> {
    let language = runner.runner().language()?;
    LANGUAGES.iter().copied().find(|l| l.language() == language)
}

/// How `runner`'s mutants share one tree behind the switch, unless the schemata are turned off
/// ([`SWITCH_OFF_VARIABLE`] is `0`, for a comparison with a run per mutant).
///
/// [`SWITCH_OFF_VARIABLE`]: super::rust::prebuilt::SWITCH_OFF_VARIABLE
pub(crate) fn schema_strategy(runner: RunnerKind) -> Option<SchemaStrategy> {
    let off =
        std::env::var(super::rust::prebuilt::SWITCH_OFF_VARIABLE).is_ok_and(|v| v.trim() == "0");
    for_runner(runner)
        .and_then(|l| l.schemata())
        .filter(|_| !off)
}

/// The scope of each byte range `(start, end)` of `source`, the file at `path`, in order. A
/// file of no language Assay mutates is one scope.
pub fn scopes(path: &str, source: &str, ranges: &[(usize, usize)]) -> Vec<Scope> {
    match for_path(path) {
        Some(language) => language.scopes(path, source, ranges),
        None => super::scope::whole_files(source, ranges),
    }
}
