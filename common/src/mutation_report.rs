//! The document `assay mutate` publishes (`--json`, the HTML report's input): Stryker's
//! mutation-testing-report-schema, version 1, which Stryker's viewer and dashboards read, with
//! Assay's own block under `assay`. The one definition of its shape; the engine fills it.
//! Reading refuses fields the schema here does not name, so a drifted writer is caught.

use crate::ids::{JobId, ProofId};
use crate::mutation_plan::{ExcludedFile, SkippedSite};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The Stryker schema version written.
pub const SCHEMA_VERSION: &str = "1";

/// Stryker's mutant statuses, plus why a mutant has no verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    Killed,
    Survived,
    NoCoverage,
    Timeout,
    RuntimeError,
    /// A mutant of a compiled language whose build failed: never run, so neither killed nor
    /// survived, and (as Stryker counts it) outside the score.
    CompileError,
    Pending,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MutationReport {
    pub schema_version: String,
    pub thresholds: Thresholds,
    /// By path: each file's source and its mutants.
    pub files: BTreeMap<String, FileReport>,
    /// Every test a mutant names, by its file.
    pub test_files: BTreeMap<String, TestFile>,
    pub framework: Framework,
    pub performance: Performance,
    pub assay: AssayBlock,
}

/// The score bands Stryker's viewer colours by.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Thresholds {
    pub high: u32,
    pub low: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileReport {
    /// The schema's name for the file's language (`python`, `rust`).
    pub language: String,
    pub source: String,
    pub mutants: Vec<MutantReport>,
}

/// One mutant as the schema describes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MutantReport {
    pub id: String,
    pub mutator_name: String,
    pub replacement: String,
    pub description: String,
    pub location: Location,
    pub status: Status,
    /// The tests that reach it, sorted.
    pub covered_by: Vec<String>,
    pub killed_by: Vec<String>,
    /// Only code no one test can be named for covers it (a module-level constant; for Rust,
    /// code reached off every test's thread): every test may observe it, so all ran.
    #[serde(rename = "static")]
    pub is_static: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests_completed: Option<usize>,
    /// Milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<u64>,
}

/// Where a mutant's replaced text starts and ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Location {
    pub start: Position,
    pub end: Position,
}

/// 1-based line and column (in characters), as the schema counts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestFile {
    pub tests: Vec<TestDefinition>,
}

/// A test as `coveredBy` and `killedBy` name it (`id`), and its name within its file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestDefinition {
    pub id: String,
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Framework {
    pub name: String,
    pub version: String,
}

/// Whole milliseconds of each phase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Performance {
    pub setup: u64,
    pub initial_run: u64,
    pub mutation: u64,
}

/// Assay's own part, kept apart so each mutant stays as the schema describes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AssayBlock {
    /// The tree mutated.
    pub tree: String,
    /// Whether each mutant ran only the tests that reach it.
    pub per_line_selection: bool,
    /// Why it did not, when it did not.
    pub selection_note: Option<String>,
    pub summary: Summary,
    pub skipped: Vec<SkippedSite>,
    pub excluded_files: Vec<ExcludedFile>,
    /// What the cache did; `null` when the run did not use it.
    pub cache: Option<CacheReport>,
    /// What Rust's mutant schemata did; `null` for other runs.
    pub schemata: Option<SchemataOutcome>,
}

/// The counts and the mutation score of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    pub mutants: usize,
    pub killed: usize,
    pub survived: usize,
    pub no_coverage: usize,
    pub timeout: usize,
    pub runtime_error: usize,
    /// Mutants whose build failed: no verdict, and outside the score, as Stryker counts them.
    pub compile_error: usize,
    pub pending: usize,
    pub flaky_kills: usize,
    /// Detected (killed or timed out) over detected plus undetected (survived, no coverage),
    /// of the mutants that reached a verdict.
    pub mutation_score: Option<f64>,
    /// 95 % Wilson interval of the score: what the whole set would likely score when a budget
    /// left some mutants pending.
    pub confidence_interval: Option<(f64, f64)>,
    pub elapsed_s: f64,
    pub mutants_per_minute: f64,
}

/// What the incremental run's cache did, and which mutants it answered from which run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CacheReport {
    /// Mutants answered from the cache.
    pub served: usize,
    /// Mutants that needed a run: what `served` is out of.
    pub eligible: usize,
    /// Entries written after the run.
    pub stored: usize,
    /// Entries found but refused.
    pub refused: Vec<RefusedMutantEntry>,
    /// Why the cache was not used, when so.
    pub not_used: Option<String>,
    /// Why the verdicts could not be stored, when so.
    pub store_error: Option<String>,
    /// By mutant id: the run whose entry answered it.
    pub mutants: BTreeMap<String, CachedFrom>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefusedMutantEntry {
    pub key: String,
    pub why: String,
}

/// A mutant answered from the cache: its key and the run whose entry answered it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CachedFrom {
    pub key: String,
    pub run_id: ProofId,
    pub job_id: JobId,
    /// When that run stored it, seconds since the epoch.
    pub stored_at: u64,
}

/// What Rust's mutant schemata did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SchemataOutcome {
    /// Schema builds run (the last one built, unless `note` says otherwise).
    pub builds: usize,
    /// Mutants run from the one build.
    pub held: usize,
    /// Mutants whose own code did not compile in the schema: `CompileError` without a build.
    pub unviable: usize,
    /// Mutants built on their own, by why.
    pub built_alone: BTreeMap<String, usize>,
    /// Wall time of the schema builds, in seconds.
    #[serde(rename = "buildSeconds")]
    pub build_s: f64,
    /// Why no mutant runs from a build, when none does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}
