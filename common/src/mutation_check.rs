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
    pub budget_s: u64,
    /// The unmutated run of the proving tests, when it ran.
    pub unmutated_s: Option<f64>,
    pub proving_tests: Vec<String>,
    pub killed: usize,
    pub survived: usize,
    pub not_run: usize,
    pub mutants: Vec<MutantRecord>,
    pub survivors: Vec<Survivor>,
    pub skipped: Vec<SkippedSite>,
    pub excluded_files: Vec<ExcludedFile>,
    /// Why the check ran fewer mutants than planned, or none (an unmutated run that did not
    /// pass, a file that could not be read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One mutant with its verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MutantRecord {
    pub mutant: Mutant,
    pub outcome: MutantOutcome,
}

/// A mutant's verdict as the proof's evidence names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum MutantOutcome {
    /// A proving test failed (or hung past the mutant's own limit) with the mutant in place.
    Killed {
        by: Vec<String>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        timed_out: bool,
        /// How the run showed it when no test result does (the mutant broke the session).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Every proving test still passed.
    Survived,
    NotRun {
        reason: String,
    },
}

/// A proving test that passed with a mutant in place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Survivor {
    pub test: String,
    pub mutant_id: String,
    pub path: String,
    pub line: u32,
    pub description: String,
    /// `test_x passes with pager/__init__.py:9 changed (`>` -> `>=`)`.
    pub message: String,
}

impl fmt::Display for Survivor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
