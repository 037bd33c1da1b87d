//! The evidence report's `mutation_check` record: each mutant the check ran on a proven
//! proof with its verdict, the counts, and each survivor against each proving test. Data only;
//! the engine plans, runs and judges the mutants (`engine::mutation::check`). Report only: it
//! never changes the proof's verdict. Its shape is documented in docs/FORMATS.md.

use crate::mutation_plan::{ExcludedFile, Mutant, SkippedSite};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The `mutation_check` record of the evidence report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MutationCheck {
    /// The time the check was allowed, in seconds.
    pub budget_s: u64,
    /// The unmutated run of the proving tests, when it ran.
    pub unmutated_s: Option<f64>,
    /// The tests that proved the change, run against each mutant.
    pub proving_tests: Vec<String>,
    /// Mutants a proving test caught.
    pub killed: usize,
    /// Mutants every proving test passed with.
    pub survived: usize,
    /// Mutants that got no verdict (the budget spent, a sandbox failure, no test ran).
    pub not_run: usize,
    /// Every planned mutant with its verdict, in plan order.
    pub mutants: Vec<MutantRecord>,
    /// Each surviving mutant against each proving test that passed with it.
    pub survivors: Vec<Survivor>,
    /// Changed sites the plan did not mutate, and why.
    pub skipped: Vec<SkippedSite>,
    /// Changed files the plan never mutates, and why.
    pub excluded_files: Vec<ExcludedFile>,
    /// Why the check ran fewer mutants than planned, or none (an unmutated run that did not
    /// pass, a file that could not be read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One mutant with its verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MutantRecord {
    /// The mutant as planned.
    pub mutant: Mutant,
    /// What the proving tests made of it.
    pub outcome: MutantOutcome,
}

/// A mutant's verdict as the proof's evidence names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum MutantOutcome {
    /// A proving test failed (or hung past the mutant's own limit) with the mutant in place.
    Killed {
        /// The proving tests that failed with it.
        by: Vec<String>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        /// The tests hung past the mutant's own limit rather than failed.
        timed_out: bool,
        /// How the run showed it when no test result does (the mutant broke the session).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Every proving test still passed.
    Survived,
    /// No verdict: the budget was spent, the sandbox failed, no test ran, or the unmutated
    /// run did not pass.
    NotRun {
        /// Why, in words.
        reason: String,
    },
}

/// A proving test that passed with a mutant in place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Survivor {
    /// The proving test that passed.
    pub test: String,
    /// The surviving mutant's [`Mutant::id`].
    pub mutant_id: String,
    /// The mutated file, relative to the tree root.
    pub path: String,
    /// 1-based line of the mutation.
    pub line: u32,
    /// What the mutant changed, e.g. ``` `>` -> `>=` ```.
    pub description: String,
    /// `test_x passes with pager/__init__.py:9 changed (`>` -> `>=`)`.
    pub message: String,
}

impl Survivor {
    /// The surviving mutant's label, as [`crate::mutation_plan::Mutant::label`] gives it.
    pub fn label(&self) -> String {
        crate::mutation_plan::changed_label(&self.path, self.line, &self.description)
    }
}

impl fmt::Display for Survivor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
