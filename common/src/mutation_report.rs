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
    /// A test failed with the mutant in place (or the mutant broke the session).
    Killed,
    /// Every test that reaches the mutant still passed.
    Survived,
    /// No test executes the mutant's lines: it was not run.
    NoCoverage,
    /// The run went past the mutant's time limit; not retried.
    Timeout,
    /// Zero tests ran, or the infrastructure failed.
    RuntimeError,
    /// A mutant of a compiled language whose build failed: never run, so neither killed nor
    /// survived, and (as Stryker counts it) outside the score.
    CompileError,
    /// Not run: the budget ran out first.
    Pending,
}

impl Status {
    /// The status's name in the schema (`NoCoverage`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Killed => "Killed",
            Self::Survived => "Survived",
            Self::NoCoverage => "NoCoverage",
            Self::Timeout => "Timeout",
            Self::RuntimeError => "RuntimeError",
            Self::CompileError => "CompileError",
            Self::Pending => "Pending",
        }
    }
}

/// The whole `assay mutate` document: Stryker's schema with Assay's block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MutationReport {
    /// Stryker's schema version, [`SCHEMA_VERSION`].
    pub schema_version: String,
    /// The score bands the viewer colours by.
    pub thresholds: Thresholds,
    /// By path: each file's source and its mutants.
    pub files: BTreeMap<String, FileReport>,
    /// Every test a mutant names, by its file.
    pub test_files: BTreeMap<String, TestFile>,
    /// The test framework the mutants ran under.
    pub framework: Framework,
    /// Time spent in each phase of the run.
    pub performance: Performance,
    /// Assay's own part: selection, counts, skips, cache and schemata.
    pub assay: AssayBlock,
}

/// The score bands Stryker's viewer colours by.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Thresholds {
    /// The lowest score, in percent, shown as good.
    pub high: u32,
    /// The lowest score, in percent, not shown as poor.
    pub low: u32,
}

/// One mutated file: its source and its mutants.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileReport {
    /// The schema's name for the file's language (`python`, `rust`).
    pub language: String,
    /// The file's text as mutated (the candidate's).
    pub source: String,
    /// The file's mutants, in line order.
    pub mutants: Vec<MutantReport>,
}

/// One mutant as the schema describes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MutantReport {
    /// The mutant's id, stable across runs.
    pub id: String,
    /// The operator that made it (`swap_bound`).
    pub mutator_name: String,
    /// The text that replaced the original.
    pub replacement: String,
    /// What changed, e.g. ``` `>` -> `>=` ```.
    pub description: String,
    /// Where the replaced text lies in the file.
    pub location: Location,
    /// The mutant's verdict.
    pub status: Status,
    /// The tests that reach it, sorted.
    pub covered_by: Vec<String>,
    /// The tests that failed with it, sorted.
    pub killed_by: Vec<String>,
    /// Only code no one test can be named for covers it (a module-level constant; for Rust,
    /// code reached off every test's thread): every test may observe it, so all ran.
    #[serde(rename = "static")]
    pub is_static: bool,
    /// Why the mutant has its status, where it is not plain (a flaky kill, a build error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_reason: Option<String>,
    /// Tests that ran to an end with the mutant in place.
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
    /// Where the replaced text starts.
    pub start: Position,
    /// Where the replaced text ends.
    pub end: Position,
}

/// 1-based line and column (in characters), as the schema counts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Position {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

/// The tests of one test file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestFile {
    /// Its tests, as mutants name them.
    pub tests: Vec<TestDefinition>,
}

/// A test as `coveredBy` and `killedBy` name it (`id`), and its name within its file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestDefinition {
    /// The test's id, as `coveredBy` and `killedBy` name it.
    pub id: String,
    /// Its name within its file.
    pub name: String,
}

/// The framework the tests ran under (`pytest`, `cargo`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Framework {
    /// The framework's name.
    pub name: String,
    /// Its version, as it reported it.
    pub version: String,
}

/// Whole milliseconds of each phase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Performance {
    /// Planning and the unmutated coverage run.
    pub setup: u64,
    /// The first run of the tests without a mutant.
    pub initial_run: u64,
    /// Running the mutants.
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
    /// The counts and score of the run.
    pub summary: Summary,
    /// Changed sites that did not become mutants, and why.
    pub skipped: Vec<SkippedSite>,
    /// Changed files never mutated, and why.
    pub excluded_files: Vec<ExcludedFile>,
    /// What the cache did; `null` when the run did not use it.
    pub cache: Option<CacheReport>,
    /// What Rust's or Go's mutant schemata did; `null` for other runs.
    pub schemata: Option<SchemataOutcome>,
}

/// The counts and the mutation score of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    /// Mutants in all.
    pub mutants: usize,
    /// Mutants `Killed`.
    pub killed: usize,
    /// Mutants `Survived`.
    pub survived: usize,
    /// Mutants `NoCoverage`.
    pub no_coverage: usize,
    /// Mutants `Timeout`.
    pub timeout: usize,
    /// Mutants `RuntimeError`.
    pub runtime_error: usize,
    /// Mutants whose build failed: no verdict, and outside the score, as Stryker counts them.
    pub compile_error: usize,
    /// Mutants `Pending`: the budget ran out first.
    pub pending: usize,
    /// Kills a second run of the killing tests did not repeat (still `Killed`).
    pub flaky_kills: usize,
    /// Detected (killed or timed out) over detected plus undetected (survived, no coverage),
    /// of the mutants that reached a verdict.
    pub mutation_score: Option<f64>,
    /// 95 % Wilson interval of the score: what the whole set would likely score when a budget
    /// left some mutants pending.
    pub confidence_interval: Option<(f64, f64)>,
    /// The run's wall time, in seconds.
    pub elapsed_s: f64,
    /// Mutants judged per minute of wall time.
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

/// A cache entry found but refused, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefusedMutantEntry {
    /// Its key in the cache.
    pub key: String,
    /// Why it was refused, in words.
    pub why: String,
}

/// A mutant answered from the cache: its key and the run whose entry answered it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CachedFrom {
    /// The cache entry's key.
    pub key: String,
    /// The run that stored it.
    pub run_id: ProofId,
    /// The job of that run that judged the mutant.
    pub job_id: JobId,
    /// When that run stored it, seconds since the epoch.
    pub stored_at: u64,
}

/// What Rust's or Go's mutant schemata did.
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
    /// Mutants whose run shared a job and a process with others (JavaScript's batches);
    /// absent when none did.
    #[serde(default, skip_serializing_if = "none_batched")]
    pub batched: usize,
    /// The batches they ran in.
    #[serde(default, skip_serializing_if = "none_batched")]
    pub batches: usize,
}

fn none_batched(count: &usize) -> bool {
    *count == 0
}
