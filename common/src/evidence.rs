//! The evidence report (`assay.proof/v1`): the JSON document a proof leaves behind. Its shape
//! is documented in docs/FORMATS.md; change both together.

use crate::criteria::Criterion;
use crate::job::{ArtifactRef, JobResult, JobSpec, JobStatus};
use crate::verdict::{CriterionVerdict, Verdict};
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "assay.proof/v1";

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Evidence {
    pub schema: String,
    pub proof_id: String,
    pub verdict: Verdict,
    pub repository: String,
    pub runner: String,
    pub base: RevisionInfo,
    pub candidate: RevisionInfo,
    /// Test files the change adds, modifies or deletes; they are overlaid on the base tree.
    pub changed_test_files: Vec<String>,
    pub criteria: Vec<CriterionVerdict>,
    pub jobs: Vec<JobEvidence>,
    /// Report-only checks; absent until they run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mutation_check: Option<serde_json::Value>,
    /// The sandbox the jobs ran in (embedded mode; a fleet's workers each use their own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxEvidence>,
    pub started_at: String,
    pub duration_s: f64,
}

/// What isolated the jobs: the sandbox kind and, for a container, the exact image and limits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SandboxEvidence {
    /// `process` or `docker`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerEvidence>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContainerEvidence {
    /// The image as named (`assay-runner-python:latest`).
    pub image: String,
    /// The engine's content id of that image (`sha256:…`), which a tag does not pin.
    pub image_id: String,
    /// Registry digests of the image; empty for an image built locally.
    pub repo_digests: Vec<String>,
    pub memory_mb: u64,
    pub cpus: f64,
    pub pids: i64,
    /// `none` or `bridge`.
    pub network: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RevisionInfo {
    /// What the user asked for (`main`, `HEAD`, a patch file).
    pub requested: String,
    /// The commit it resolved to (absent for a patch).
    pub commit: Option<String>,
    /// The git tree the jobs ran on.
    pub tree: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobEvidence {
    pub index: u32,
    pub job_id: String,
    pub kind: String,
    pub side: String,
    pub tree: String,
    pub command: Vec<String>,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `parsed`, or why the report gives no named result.
    pub report: String,
    pub tests_reported: usize,
    pub duration_s: f64,
    pub worker: String,
    pub artifacts: Vec<ArtifactRef>,
}

impl JobEvidence {
    pub fn new(spec: &JobSpec, result: &JobResult) -> Self {
        let (exit_code, message) = match &result.status {
            JobStatus::Completed { exit_code } => (Some(*exit_code), None),
            JobStatus::Infrastructure { message, .. } => (None, Some(message.clone())),
            JobStatus::TimedOut => (None, Some(format!("killed after {} s", spec.timeout_secs))),
            JobStatus::Cancelled => (None, None),
        };
        Self {
            index: spec.index,
            job_id: spec.job_id.to_string(),
            kind: spec.kind.label(spec.side),
            side: spec.side.to_string(),
            tree: spec.tree.to_string(),
            command: spec.command.clone(),
            status: result.status.label().into(),
            exit_code,
            message,
            report: result.report.problem().unwrap_or_else(|| "parsed".into()),
            tests_reported: result.report.parsed().map_or(0, |r| r.cases.len()),
            duration_s: result.duration_ms as f64 / 1000.0,
            worker: result.worker.to_string(),
            artifacts: result.artifacts.clone(),
        }
    }
}

/// The criteria as declared, kept beside the verdicts so a report explains itself.
pub fn declared(criteria: &[Criterion]) -> Vec<String> {
    criteria
        .iter()
        .map(|c| format!("{}: {}: {}", c.id, c.kind, c.test.display()))
        .collect()
}
