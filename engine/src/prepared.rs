//! What a proof is before it runs: the request as a user asks for it, and the proof prepared
//! from it (trees resolved, runner chosen, jobs and mutants planned). Apart from the pipeline
//! in [`crate::proof`], so what the pipeline calls (the mutation check) can read it too.

use crate::source::{CandidateSpec, Change};
use assay_common::criteria::Criterion;
use assay_common::diff_coverage::{ChangedHunk, ChangedSource};
use assay_common::harness::HarnessPlan;
use assay_common::job::JobSpec;
use assay_common::mutation_plan::MutationSetup;
use assay_common::runner::{ReportFormat, RunnerKind};
use assay_common::verdict::RefusedFile;
use assay_common::{ProofId, TreeId};
use std::path::PathBuf;
use std::time::Duration;

/// A proof as a user asks for it, after configuration is merged.
#[derive(Clone, Debug)]
pub struct ProofRequest {
    /// The proof's id, which names its jobs and its record.
    pub proof_id: ProofId,
    /// The git repository the trees come from.
    pub repo: PathBuf,
    /// The base revision as the user named it (a commit, branch or tag).
    pub base: String,
    /// Where the change comes from: a revision, the working tree, or a patch.
    pub candidate: CandidateSpec,
    /// What the proof must show, as the user gave them.
    pub criteria: Vec<Criterion>,
    /// The test runner the user named; `None`: detected from the tree.
    pub runner: Option<RunnerKind>,
    /// The test command the user gave; `None`: the runner's default.
    pub test_command: Option<Vec<String>>,
    /// Whether the runner's default command may follow what is installed on this machine
    /// (`cargo nextest run` where cargo-nextest is on the `PATH`): true where jobs run here,
    /// as in embedded mode. A fleet's workers may differ, so it takes the portable default.
    pub local_tools: bool,
    /// Where the command writes its report, when the runner's own place is not used
    /// (`--test-report junit:RELATIVE/PATH.xml`).
    pub test_report: Option<ReportFormat>,
    /// Globs that name the project's test files, beside the runner's defaults.
    pub test_globs: Vec<String>,
    /// Runs per side in all, counting the first: more catch a flaky test.
    pub repeats: u32,
    /// Each job's wall-clock limit, in seconds.
    pub timeout_secs: u64,
    /// The mutation check's budget; `None`: no mutation check.
    pub mutation_budget: Option<Duration>,
    /// Whether the proving tests run once more for diff coverage.
    pub diff_coverage: bool,
    /// `--trust-harness-change`: a person reviewed the change's harness and accepts it. Only a
    /// flag or the environment sets it, never the repository's configuration.
    pub trust_harness_change: bool,
    /// The person granted the test-only exception (`--allow-test-only`, never the
    /// repository): a change without product files may carry `test:` criteria, judged on the
    /// candidate alone.
    pub allow_test_only: bool,
}

/// A proof with its trees resolved and its jobs planned.
#[derive(Clone, Debug)]
pub struct PreparedProof {
    /// The request the proof was prepared from.
    pub request: ProofRequest,
    /// The change's trees and changed files.
    pub change: Change,
    /// The test runner the jobs run, as given or detected.
    pub runner: RunnerKind,
    /// The proof's jobs, in plan order.
    pub jobs: Vec<JobSpec>,
    /// Changed test files refused as proof (a node:test file that spawns another runner).
    pub refused_files: Vec<RefusedFile>,
    /// The mutation check to run once the proof is proven, planned here where the repository
    /// is, so a fleet's coordinator runs the very same mutants.
    pub mutation: Option<MutationSetup>,
    /// The `Cargo.lock` generated on this host for each tree that had none (see
    /// [`crate::dependencies`]); empty where the proof was not prepared here (a fleet's
    /// coordinator), whose trees hold them all the same.
    pub lockfiles: GeneratedLockfiles,
    /// The identity of the Rust toolchain each pinned tree's jobs run, resolved on this host
    /// (see [`crate::dependencies::Pinned::toolchain`]), for the result cache's key; empty
    /// where the proof was not prepared here or runs no rustup toolchain.
    pub rust_toolchains: Vec<(TreeId, String)>,
    /// The change's product hunks whose diff coverage the proof records, found here where the
    /// repository is; empty: no diff coverage (a runner without a coverage run, or no product
    /// line changed).
    pub diff_hunks: Vec<ChangedHunk>,
    /// The changed files' text as a coverage tool that counts offsets locates it (node's V8
    /// coverage), found here where the repository is; empty for a tool that counts lines.
    pub diff_sources: Vec<ChangedSource>,
    /// The change's harness: what the classifier found, the differential job's tree, trust.
    pub harness: HarnessPlan,
}

impl PreparedProof {
    /// The plan index of the first job the proof runs after its planned ones: the diff
    /// coverage run takes the first, when there is one, and the mutation check's follow.
    pub fn after_plan_index(&self) -> usize {
        self.jobs.len() + usize::from(!self.diff_hunks.is_empty())
    }
}

/// The sha256 of the `Cargo.lock` generated for each side's tree, when it had none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GeneratedLockfiles {
    /// The lockfile's sha256 generated for the base tree.
    pub base: Option<String>,
    /// The lockfile's sha256 generated for the candidate tree.
    pub candidate: Option<String>,
}
