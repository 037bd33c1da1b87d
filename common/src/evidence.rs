//! The evidence report (`assay.proof/v1`): the JSON document a proof leaves behind. Its shape
//! is documented in docs/FORMATS.md; change both together.

use crate::criteria::Criterion;
use crate::fault::InfraCause;
use crate::job::{ArtifactRef, JobResult, JobSpec, JobStatus};
use crate::json_field;
use crate::mutation_check::MutationCheck;
use crate::sandbox::SandboxEvidence;
use crate::verdict::{CriterionVerdict, Verdict};
use serde::{Deserialize, Deserializer, Serialize};

/// The `schema` an evidence report declares.
pub const SCHEMA: &str = "assay.proof/v1";

/// The evidence report of one proof: what was asked, what ran, and the verdict.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Evidence {
    /// [`SCHEMA`]; evidence of any other is refused when read.
    #[serde(deserialize_with = "schema")]
    pub schema: String,
    /// The proof's id (`p-…`), as its subjects and store keys name it.
    pub proof_id: String,
    /// What the proof concluded: proven iff every criterion is, refuted if any is.
    pub verdict: Verdict,
    /// The repository the proof ran on, as the path it was given.
    pub repository: String,
    /// The runner that ran the tests (`pytest`, `cargo`).
    pub runner: String,
    /// The tree before the change.
    pub base: RevisionInfo,
    /// The tree with the change.
    pub candidate: RevisionInfo,
    /// Test files the change adds, modifies or deletes; they are overlaid on the base tree.
    pub changed_test_files: Vec<String>,
    /// The person granted the test-only exception (`--allow-test-only`) to a change without
    /// product files: its `test:` criteria were judged on the candidate alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub test_only: bool,
    /// Each criterion's verdict, in declaration order.
    pub criteria: Vec<CriterionVerdict>,
    /// Every job of the plan, in plan order.
    pub jobs: Vec<JobEvidence>,
    /// Report-only checks; absent until they run. Written with its keys sorted, as it always
    /// was (see [`crate::json_field`]).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "json_field::sorted",
        deserialize_with = "mutation_check"
    )]
    pub mutation_check: Option<MutationCheck>,
    /// Which changed product hunks the proving tests executed (report only); absent where
    /// the runner has no coverage run (only pytest with coverage.py has one today) or the
    /// change touches no product line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff_coverage: Option<crate::diff_coverage::DiffCoverage>,
    /// The change's harness: what of the change runs in the test process around the tests,
    /// and how each criterion met it. Absent when the change has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness: Option<crate::harness::HarnessEvidence>,
    /// The sandbox the jobs ran in, when they all ran in the same one (embedded mode, or a
    /// fleet whose workers agree); each worker's own is under `workers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxEvidence>,
    /// Every worker that ran a job of the proof (as `jobs[].worker` names it), in the order
    /// they first appear in the plan, with the sandbox it ran its jobs in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workers: Vec<WorkerEvidence>,
    /// Fleet proofs: each coordinator that drove the proof, in order. More than one means the
    /// proof lived through a failover (or a restart): the later ones resumed it from KV.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub coordinators: Vec<CoordinatorEvidence>,
    /// When the proof started (RFC 3339, UTC).
    pub started_at: String,
    /// The proof's wall time, in seconds.
    pub duration_s: f64,
}

fn schema<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    json_field::schema(SCHEMA, deserializer)
}

fn mutation_check<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<MutationCheck>, D::Error> {
    json_field::named("mutation_check", deserializer)
}

/// A coordinator that drove a fleet proof for one leadership (`epoch`); `resumed` when it
/// took the proof over from KV rather than accepting it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoordinatorEvidence {
    /// The coordinator, as the leadership lease names its holder.
    pub coordinator: String,
    /// The leadership term it drove the proof in.
    pub epoch: u64,
    /// It took the proof over from KV rather than accepting the submission.
    pub resumed: bool,
}

/// A worker that ran jobs of a proof, and what isolated them there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerEvidence {
    /// The worker's id, as `jobs[].worker` names it.
    pub worker: String,
    /// Absent when none of its jobs reached a sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxEvidence>,
}

impl WorkerEvidence {
    /// One entry per worker in plan order, and the sandbox every job that reached one shares
    /// (`None` when they differ or none did).
    pub fn of(results: &[JobResult]) -> (Vec<WorkerEvidence>, Option<SandboxEvidence>) {
        let mut workers: Vec<WorkerEvidence> = Vec::new();
        for result in results {
            let name = result.worker.to_string();
            match workers.iter_mut().find(|w| w.worker == name) {
                Some(known) if known.sandbox.is_none() => known.sandbox = result.sandbox.clone(),
                Some(_) => {}
                None => workers.push(WorkerEvidence {
                    worker: name,
                    sandbox: result.sandbox.clone(),
                }),
            }
        }
        let mut sandboxes = results.iter().filter_map(|r| r.sandbox.as_ref());
        let shared = sandboxes
            .next()
            .cloned()
            .filter(|first| sandboxes.all(|s| s == first));
        (workers, shared)
    }
}

/// One side of the change: what was asked for and the tree it resolved to.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RevisionInfo {
    /// What the user asked for (`main`, `HEAD`, a patch file).
    pub requested: String,
    /// The commit it resolved to (absent for a patch).
    pub commit: Option<String>,
    /// The git tree the jobs ran on.
    pub tree: String,
    /// The sha256 of the `Cargo.lock` generated for the tree on the host that prepared the
    /// proof, because the repository has none; the tree holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated_lockfile: Option<String>,
}

/// One job of the proof, as the evidence records it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobEvidence {
    /// The job's position in the plan.
    pub index: u32,
    /// The job's id, unique across the fleet.
    pub job_id: String,
    /// The job's name in the plan (`base`, `candidate-suite`, `stability`).
    pub kind: String,
    /// The side it ran on (`base` or `candidate`).
    pub side: String,
    /// The git tree it ran on.
    pub tree: String,
    /// The argv it ran, placeholders as planned.
    pub command: Vec<String>,
    /// How it ended (`completed`, `timed_out`, `infrastructure`, `cancelled`).
    pub status: String,
    /// The command's exit code, when it ran to its end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// What went wrong, for a job that timed out or hit an infrastructure failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// What failed, for an `infrastructure` job (`tree_fetch`, `worker_lost`, … see
    /// [`InfraCause`]). Absent otherwise, and in evidence written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<InfraCause>,
    /// `parsed`, or why the report gives no named result.
    pub report: String,
    /// Test cases its report named.
    pub tests_reported: usize,
    /// The job's wall time on the worker, in seconds.
    pub duration_s: f64,
    /// When the job started, in milliseconds after the proof started: the moment its result
    /// reached the engine less its own duration. Absent in evidence written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at_ms: Option<u64>,
    /// The worker that ran it.
    pub worker: String,
    /// What the worker stored of the run (captured output, test binaries).
    pub artifacts: Vec<ArtifactRef>,
    /// Set when the result was served from the result cache: the entry and the run that
    /// produced it (its artifacts are that run's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached: Option<CachedFrom>,
}

/// The cache entry a job's result came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedFrom {
    /// The entry's key (docs/FORMATS.md, "Result cache").
    pub entry: String,
    /// The proof whose run produced the cached result.
    pub proof_id: String,
    /// The job of that proof that ran it.
    pub job_id: String,
}

impl JobEvidence {
    /// `finished_at_ms`: when the result reached the engine, in milliseconds after the proof
    /// started.
    pub fn new(spec: &JobSpec, result: &JobResult, finished_at_ms: Option<u64>) -> Self {
        let (exit_code, message, cause) = match &result.status {
            JobStatus::Completed { exit_code } => (Some(*exit_code), None, None),
            JobStatus::Infrastructure { message, cause } => {
                (None, Some(message.clone()), Some(*cause))
            }
            JobStatus::TimedOut => (
                None,
                Some(format!("killed after {} s", spec.timeout_secs)),
                None,
            ),
            JobStatus::Cancelled => (None, None, None),
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
            cause,
            report: result.report.problem().unwrap_or_else(|| "parsed".into()),
            tests_reported: result.report.parsed().map_or(0, |r| r.cases.len()),
            duration_s: result.duration_ms as f64 / 1000.0,
            started_at_ms: finished_at_ms.map(|end| end.saturating_sub(result.duration_ms)),
            worker: result.worker.to_string(),
            artifacts: result.artifacts.clone(),
            cached: None,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{JobId, ProofId, WorkerId};
    use crate::outcome::ReportOutcome;

    fn ran_on(worker: &str, sandbox: Option<&str>) -> JobResult {
        JobResult {
            job_id: JobId::for_index(&ProofId("p-1".into()), 0),
            index: 0,
            status: JobStatus::Completed { exit_code: 0 },
            report: ReportOutcome::Missing,
            artifacts: Vec::new(),
            duration_ms: 10,
            worker: WorkerId(worker.into()),
            sandbox: sandbox.map(|kind| SandboxEvidence {
                kind: kind.into(),
                container: None,
                confinement: None,
            }),
        }
    }

    #[test]
    fn each_worker_is_listed_once_with_its_sandbox_and_a_shared_one_is_the_proofs() {
        let results = [
            ran_on("ci-7", None),
            ran_on("ci-3", Some("docker")),
            ran_on("ci-7", Some("docker")),
            ran_on("ci-3", Some("docker")),
        ];
        let (workers, shared) = WorkerEvidence::of(&results);
        let listed: Vec<(&str, Option<&str>)> = workers
            .iter()
            .map(|w| {
                (
                    w.worker.as_str(),
                    w.sandbox.as_ref().map(|s| s.kind.as_str()),
                )
            })
            .collect();
        assert_eq!(listed, [("ci-7", Some("docker")), ("ci-3", Some("docker"))]);
        assert_eq!(shared.map(|s| s.kind), Some("docker".into()));
    }

    #[test]
    fn a_job_of_older_evidence_has_no_start_offset_and_writes_none_back() {
        let old = serde_json::json!({
            "index": 0, "job_id": "p-1/0000", "kind": "base", "side": "base", "tree": "b71c",
            "command": ["python3"], "status": "completed", "exit_code": 0, "report": "parsed",
            "tests_reported": 1, "duration_s": 0.5, "worker": "embedded-1", "artifacts": []
        });
        let job: JobEvidence = serde_json::from_value(old.clone()).expect("older evidence reads");
        assert_eq!(job.started_at_ms, None);
        assert_eq!(serde_json::to_value(&job).unwrap(), old);
        let timed = JobEvidence {
            started_at_ms: Some(412),
            ..job
        };
        assert_eq!(serde_json::to_value(&timed).unwrap()["started_at_ms"], 412);
    }

    #[test]
    fn an_infrastructure_job_names_its_cause_and_others_name_none() {
        let spec: JobSpec = serde_json::from_value(serde_json::json!({
            "proof_id": "p-1", "job_id": "p-1/0000", "index": 0, "kind": "targeted",
            "side": "base", "tree": "b71c", "command": ["python3"], "report": "junit_xml",
            "selected_tests": [], "timeout_secs": 60, "env": [], "edit": null,
            "rewrites": [], "binaries": null
        }))
        .expect("a job spec");
        let lost = JobResult::infrastructure(
            &spec,
            crate::ids::WorkerId("ci-3".into()),
            InfraCause::TreeFetch,
            "failed to materialize the tree of job p-1/0000".into(),
        );
        let job = serde_json::to_value(JobEvidence::new(&spec, &lost, None)).unwrap();
        assert_eq!(job["status"], "infrastructure");
        assert_eq!(job["cause"], "tree_fetch");
        let ran =
            serde_json::to_value(JobEvidence::new(&spec, &ran_on("ci-3", None), None)).unwrap();
        assert!(ran.get("cause").is_none(), "{ran}");
    }

    #[test]
    fn workers_in_different_sandboxes_share_none() {
        let results = [
            ran_on("ci-3", Some("docker")),
            ran_on("laptop", Some("process")),
        ];
        let (workers, shared) = WorkerEvidence::of(&results);
        assert_eq!(workers.len(), 2);
        assert_eq!(shared, None);
        assert_eq!(WorkerEvidence::of(&[ran_on("ci-3", None)]).1, None);
    }
}
