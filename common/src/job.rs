//! Jobs and their results: what the coordinator publishes and what a worker reports back.

use crate::fault::InfraCause;
use crate::ids::{JobId, ProofId, TreeId, WorkerId};
use crate::outcome::ReportOutcome;
use crate::report_format::ReportFormat;
use crate::sandbox::SandboxEvidence;
use crate::tree_path::TreePath;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Which tree a job runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The tree before the change.
    Base,
    /// The tree with the change.
    Candidate,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Base => "base",
            Self::Candidate => "candidate",
        })
    }
}

/// What a job is for; plan order follows the declaration order of the variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    /// The changed test files (the proving tests) on one side.
    Targeted,
    /// The whole suite on one side.
    Suite,
    /// A repeat of the proving tests, selected by name.
    Stability,
    /// The proving tests against one mutant of the candidate (report only).
    Mutant,
    /// The proving tests on the candidate with the change's harness parts replaced by the
    /// base's: the differential run that shows whether the change's harness decides them.
    HarnessCheck,
}

impl JobKind {
    /// The job's name in plans and progress: `base`, `candidate-suite`, `stability`, …
    pub fn label(self, side: Side) -> String {
        match self {
            Self::Targeted => side.to_string(),
            Self::Suite => format!("{side}-suite"),
            Self::Stability => "stability".into(),
            Self::Mutant => "mutant".into(),
            Self::HarnessCheck => "harness-check".into(),
        }
    }
}

/// A replacement of one byte range of one file, applied to the tree after it is materialized.
/// A mutant travels as this, never as a whole tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByteEdit {
    /// Checked when decoded: a job naming a path outside its tree is refused, never applied.
    pub path: TreePath,
    /// Byte offset of the range's first byte in the file.
    pub start: usize,
    /// Byte offset just past the range's last byte.
    pub end: usize,
    /// The text that takes the range's place.
    pub replacement: String,
}

/// One unit of work, self-contained: a worker needs nothing else to run it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSpec {
    /// The proof the job belongs to.
    pub proof_id: ProofId,
    /// The job's own id, unique across the fleet.
    pub job_id: JobId,
    /// Position in the plan; results are reassembled in this order.
    pub index: u32,
    /// What the job is for.
    pub kind: JobKind,
    /// Which side of the change it runs on.
    pub side: Side,
    /// The git tree the worker materializes and runs the command in.
    pub tree: TreeId,
    /// argv; `{report}`, `{adapter}` and `{node_reporter}` are replaced by the worker with the
    /// job's report path and the paths of the unittest adapter and node:test reporter it ships.
    pub command: Vec<String>,
    /// The report the command yields, and so where the worker reads it.
    pub report: ReportFormat,
    /// Tests the job selects by name (empty: whatever the command selects).
    pub selected_tests: Vec<String>,
    /// The command's time limit, in seconds; past it the command is killed.
    pub timeout_secs: u64,
    /// A mutant job's tighter limit for when the worker runs it in a fork of a session that
    /// already configured pytest and collected the tests (the warm runner): such a run pays no
    /// interpreter start-up or collection, which `timeout_secs` allows for. Never above
    /// `timeout_secs`; `None`: `timeout_secs` applies either way. (Always encoded: the wire's
    /// bincode has no optional fields, so adding it made wire protocol 8.)
    #[serde(default)]
    pub forked_timeout_secs: Option<u64>,
    /// Extra environment on top of the sandbox's clean one; a loader or start-up variable
    /// (`LD_PRELOAD`, `NODE_OPTIONS`, …) is refused when decoded (see [`crate::guest_env`]).
    #[serde(deserialize_with = "crate::guest_env::deserialize_env")]
    pub env: Vec<(String, String)>,
    /// A mutant job's one edit to the materialized tree; `None` for every other job.
    pub edit: Option<ByteEdit>,
    /// Edits applied to the materialized tree before `edit`, in order, each checked as `edit`
    /// is: the files of a mutant schema that a build job compiles on the unchanged tree (the
    /// proof's mutation check, whose coordinator has trees but no repository to write one in).
    /// Empty for every other job.
    pub rewrites: Vec<ByteEdit>,
    /// Prebuilt test executables: a build job keeps them, a run job runs them (see
    /// [`TestBinaries`]). `None` for every other job.
    pub binaries: Option<TestBinaries>,
    /// The dependencies a cargo or Go job builds from instead of the worker's own caches (see
    /// [`crate::dependency_archive`]); `None`: the host's caches, as embedded mode gives them.
    /// Added in wire protocol 19; its kind (Go archives) in 20.
    pub dependencies: Option<crate::dependency_archive::DependencyArchive>,
    /// What the run's next jobs on this tree will run: a mutation run's baseline names the
    /// command its mutants run, with no test named, so a worker may prepare for them while
    /// the baseline runs (the warm runner collects a pytest session of it; see
    /// `worker::sandbox::warm`). A hint only: no result depends on it, and a worker that
    /// cannot use it ignores it. `None` for every other job. Added in wire protocol 23.
    #[serde(default)]
    pub next_command: Option<Vec<String>>,
}

impl JobSpec {
    /// Job `index` of `proof_id`'s plan (its id follows from both): `command` run on `tree`,
    /// its report read as `report`, within `timeout_secs`. Nothing is selected by name and
    /// nothing extra rides along (no edit, rewrites, binaries, dependencies or environment):
    /// a caller that needs one sets that field.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        proof_id: &ProofId,
        index: usize,
        kind: JobKind,
        side: Side,
        tree: &TreeId,
        command: Vec<String>,
        report: ReportFormat,
        timeout_secs: u64,
    ) -> Self {
        Self {
            proof_id: proof_id.clone(),
            job_id: JobId::for_index(proof_id, index),
            index: u32::try_from(index).unwrap_or(u32::MAX),
            kind,
            side,
            tree: tree.clone(),
            command,
            report,
            selected_tests: Vec::new(),
            timeout_secs,
            forked_timeout_secs: None,
            env: Vec::new(),
            edit: None,
            rewrites: Vec::new(),
            binaries: None,
            dependencies: None,
            next_command: None,
        }
    }
}

/// Build once, run many times: how a job takes part in a run of prebuilt Rust test
/// executables (mutant schemata, see docs/mutation.md). The archive's format is
/// [`crate::test_binaries`]'s.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TestBinaries {
    /// A build job: once its command (`cargo test --no-run --message-format=json`) exits 0,
    /// the worker packs the test executables cargo's messages on stdout name, each confined
    /// to the job's tree, and stores them as the artifact `test-binaries`.
    Keep,
    /// A run job: the worker fetches this archive (a build job's `test-binaries`), checks its
    /// sha256, unpacks it into the job's private directory and replaces `{test_binaries}` in
    /// the command with the script that runs each executable as cargo would: all of them, or
    /// only what `only` selects.
    Use {
        /// The build job's `test-binaries` artifact.
        archive: ArtifactRef,
        /// The tests to run; `None`: every test of every executable.
        only: Option<crate::test_binaries::Selection>,
    },
}

/// A stored artifact: where it is and what it hashes to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactRef {
    /// What the artifact is (`stdout`, `stderr`, `test-binaries`).
    pub name: String,
    /// Where it is in the object store.
    pub key: String,
    /// The sha256 of the stored bytes, in lowercase hex.
    pub sha256: String,
    /// What was stored (`sha256` is of these bytes).
    pub bytes: u64,
    /// What the source had beyond what was stored: a job's output past the worker's cap on
    /// captured output (`output_cap_bytes`); 0 when nothing was dropped. Absent (0) in evidence
    /// written before it existed.
    #[serde(default)]
    pub dropped_bytes: u64,
}

/// How a job ended, in one of two lanes: the guest's (the command ran) or the infrastructure's.
// No serde tagging attributes on wire types: bincode cannot read internally tagged enums.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// The command ran to its end; its exit code is the guest's business.
    Completed {
        /// The command's exit code.
        exit_code: i32,
    },
    /// The command was killed at its timeout.
    TimedOut,
    /// The job could not be run: `cause` says what failed (the fault policy's key, see
    /// [`crate::fault`]), `message` the details for a person.
    Infrastructure {
        /// What failed, for a person.
        message: String,
        /// What failed, as the fault policy keys it.
        cause: InfraCause,
    },
    /// The proof was cancelled before this job finished.
    Cancelled,
}

impl JobStatus {
    /// The status as progress and evidence name it (`timed_out`).
    pub fn label(&self) -> &'static str {
        match self {
            Self::Completed { .. } => "completed",
            Self::TimedOut => "timed_out",
            Self::Infrastructure { .. } => "infrastructure",
            Self::Cancelled => "cancelled",
        }
    }
}

/// What a worker reports back for one job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobResult {
    /// The job this is the result of.
    pub job_id: JobId,
    /// The job's position in the plan.
    pub index: u32,
    /// How the job ended.
    pub status: JobStatus,
    /// What its report says, or why it gives no named result.
    pub report: ReportOutcome,
    /// What the worker stored of the run (captured output, test binaries).
    pub artifacts: Vec<ArtifactRef>,
    /// The job's wall time on the worker, in milliseconds.
    pub duration_ms: u64,
    /// The worker that ran it.
    pub worker: WorkerId,
    /// The sandbox the worker ran it in; `None` when it never reached one (a delivery cap).
    pub sandbox: Option<SandboxEvidence>,
}

impl JobResult {
    /// A result for a job that never reached a sandbox, failed by `cause`.
    pub fn infrastructure(
        job: &JobSpec,
        worker: WorkerId,
        cause: InfraCause,
        message: String,
    ) -> Self {
        Self {
            job_id: job.job_id.clone(),
            index: job.index,
            status: JobStatus::Infrastructure { message, cause },
            report: ReportOutcome::Missing,
            artifacts: Vec::new(),
            duration_ms: 0,
            worker,
            sandbox: None,
        }
    }
}
