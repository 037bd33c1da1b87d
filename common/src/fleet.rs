//! The fleet's protocol: subject names, stream/consumer/bucket names and the messages that
//! cross NATS between the CLI, the coordinator and the workers. Every message here travels in
//! the versioned envelope of [`crate::wire`]; nothing here knows how NATS is reached.

use crate::criteria::Criterion;
use crate::job::{ArtifactRef, JobResult, JobSpec};
use crate::runner::RunnerKind;
use crate::tree_path::TreePath;
use crate::{ProofId, TreeId};
use serde::{Deserialize, Serialize};

/// The default subject prefix.
pub const DEFAULT_PREFIX: &str = "assay";

/// Subject, stream, consumer and bucket names under one prefix; two fleets on one server
/// differ by prefix and share nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subjects {
    prefix: String,
}

impl Subjects {
    /// The names under `prefix` (a trailing `.` is dropped).
    pub fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.trim_end_matches('.').to_owned(),
        }
    }
    /// The subject prefix, without a trailing `.`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
    /// Work-queue stream holding jobs until a worker acknowledges them: `ASSAY_JOBS` for the
    /// default prefix, `{PREFIX}_JOBS` for another.
    pub fn jobs_stream(&self) -> String {
        format!("{}_JOBS", self.name_token())
    }
    /// Stream holding results until the coordinator has applied them.
    pub fn results_stream(&self) -> String {
        format!("{}_RESULTS", self.name_token())
    }
    /// Durable pull consumer of the jobs stream, shared by every worker of the fleet.
    pub fn workers_consumer(&self) -> String {
        format!("{}-workers", self.name_token().to_ascii_lowercase())
    }
    /// Durable pull consumer of the results stream, shared by coordinator replicas.
    pub fn coordinator_consumer(&self) -> String {
        format!("{}-coordinator", self.name_token().to_ascii_lowercase())
    }
    /// KV bucket holding every proof's state (and the fleet's halt), so a restarted
    /// coordinator resumes it.
    pub fn proofs_bucket(&self) -> String {
        format!("{}_PROOFS", self.name_token())
    }
    /// The prefix as a stream and bucket name part (letters, digits, `-`, `_`). A prefix of
    /// lowercase letters, digits and `-` is just upper-cased; any other (`billing.ci`,
    /// `Alpha`) loses information on the way, so a digest of it keeps two such prefixes apart.
    pub fn name_token(&self) -> String {
        let upper: String = self
            .prefix
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        let lossless = self
            .prefix
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if lossless {
            upper
        } else {
            use sha2::{Digest, Sha256};
            let digest = Sha256::digest(self.prefix.as_bytes());
            format!("{upper}_{}", hex::encode(&digest[..4]))
        }
    }
    /// `{prefix}.jobs.{proof_id}`: one subject per proof, so cancelling purges by subject.
    pub fn jobs(&self, proof_id: &ProofId) -> String {
        format!("{}.jobs.{proof_id}", self.prefix)
    }
    /// The jobs stream's filter: every proof's jobs subject.
    pub fn jobs_filter(&self) -> String {
        format!("{}.jobs.>", self.prefix)
    }
    /// `{prefix}.results.{proof_id}`: where workers publish the proof's job results.
    pub fn results(&self, proof_id: &ProofId) -> String {
        format!("{}.results.{proof_id}", self.prefix)
    }
    /// The results stream's filter: every proof's results subject.
    pub fn results_filter(&self) -> String {
        format!("{}.results.>", self.prefix)
    }
    /// `{prefix}.submit`: where the CLI submits proofs and job runs, as requests.
    pub fn submit(&self) -> String {
        format!("{}.submit", self.prefix)
    }
    /// `{prefix}.cancel`: where the CLI asks to cancel a proof, as requests.
    pub fn cancel(&self) -> String {
        format!("{}.cancel", self.prefix)
    }
    /// `{prefix}.progress.{proof_id}`: where the coordinator tells the CLI how the proof goes.
    pub fn progress(&self, proof_id: &ProofId) -> String {
        format!("{}.progress.{proof_id}", self.prefix)
    }
    /// The proof id of a `{prefix}.results.{proof_id}` or `{prefix}.jobs.{proof_id}` subject.
    pub fn proof_of(&self, subject: &str) -> Option<ProofId> {
        let rest = subject.strip_prefix(&self.prefix)?.strip_prefix('.')?;
        let (_, proof) = rest.split_once('.')?;
        (!proof.is_empty()).then(|| ProofId(proof.to_owned()))
    }
}

/// KV keys of one proof in the fleet's [`Subjects::proofs_bucket`].
pub mod keys {
    use crate::ProofId;

    /// The fleet-wide halt: its value is the reason; no key, no halt.
    pub const HALT: &str = "fleet.halt";
    /// The leading coordinator's lease: its value names the holder; renewed by revision.
    pub const LEASE: &str = "fleet.lease";
    /// The leader's epoch: written once by each new leader, whose writes the server applies
    /// only while this key's last sequence is the one it wrote.
    pub const EPOCH: &str = "fleet.epoch";

    /// The coordinators that drove a proof, in order: JSON, one entry per leadership.
    pub fn drivers(proof_id: &ProofId) -> String {
        format!("{proof_id}.drivers")
    }

    /// The proof's durable state, a wire [`ProofRecord`](super::ProofRecord).
    pub fn record(proof_id: &ProofId) -> String {
        format!("{proof_id}.record")
    }
    /// The result of job `index` of the proof, a wire [`ResultMessage`](super::ResultMessage).
    pub fn result(proof_id: &ProofId, index: u32) -> String {
        format!("{proof_id}.result.{index:06}")
    }
    /// The proof's evidence report, when it fits a KV value.
    pub fn evidence(proof_id: &ProofId) -> String {
        format!("{proof_id}.evidence")
    }
    /// A job the result cache answered; its value is the entry's key.
    pub fn cached(proof_id: &ProofId, index: u32) -> String {
        format!("{proof_id}.cached.{index:06}")
    }
    /// Where the evidence is when it is too big for a KV value: a wire `ArtifactRef`.
    pub fn evidence_ref(proof_id: &ProofId) -> String {
        format!("{proof_id}.evidence-ref")
    }
    /// The proof id of a record key, for listing proofs.
    pub fn proof_of_record(key: &str) -> Option<ProofId> {
        key.strip_suffix(".record").map(|p| ProofId(p.to_owned()))
    }
}

/// One revision of a submitted proof, as resolved by the CLI.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevisionWire {
    /// What the user asked for (`main`, `HEAD`).
    pub requested: String,
    /// The commit it resolved to, if it is one.
    pub commit: Option<String>,
    /// The git tree the jobs run on.
    pub tree: TreeId,
}

/// A file the change touches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedFileWire {
    /// The file, relative to the tree root.
    pub path: TreePath,
    /// The change deletes it.
    pub deleted: bool,
}

/// Whether a run reads and writes the result cache (`--no-cache`, `--refresh-cache`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheMode {
    /// Serve hits, store trusted misses.
    #[default]
    Use,
    /// Run everything, then store trusted results over what was there (`--refresh-cache`).
    Refresh,
    /// Neither read nor write (`--no-cache`).
    Off,
}

/// A prepared proof as the CLI submits it: the plan is made where the repository is; the
/// trees its jobs name are already in the object store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProofSubmission {
    /// The proof's id, chosen by the CLI.
    pub proof_id: ProofId,
    /// The repository, as the CLI was given it; for the evidence.
    pub repository: String,
    /// The runner the plan was made for.
    pub runner: RunnerKind,
    /// The declared criteria, in order.
    pub criteria: Vec<Criterion>,
    /// The tree before the change.
    pub base: RevisionWire,
    /// The tree with the change.
    pub candidate: RevisionWire,
    /// The base tree with the changed test files overlaid: where the base's jobs run.
    pub base_tree: TreeId,
    /// Every file the change touches.
    pub changed: Vec<ChangedFileWire>,
    /// Of `changed`, the test files.
    pub changed_test_files: Vec<ChangedFileWire>,
    /// The planned jobs, in plan order.
    pub jobs: Vec<JobSpec>,
    /// Changed test files refused as proof (see `verdict::refuse_spawning_files`).
    pub refused_files: Vec<crate::verdict::RefusedFile>,
    /// `--jobs N`: this proof's in-flight cap across the whole fleet.
    pub jobs_budget: u32,
    /// The runner's command prefix when the user set one (`--test-command`): the mutation
    /// check's jobs are built with it, as the proof's were.
    pub test_command: Option<Vec<String>>,
    /// The per-job timeout the proof's jobs were planned with.
    pub timeout_secs: u64,
    /// The mutation check to run once the proof is proven; `None`: none.
    pub mutation: Option<crate::mutation_plan::MutationSetup>,
    /// How the proof uses the fleet's result cache. Defaults to `Use` where a self-describing
    /// decoder meets a submission without it; bincode cannot skip a field, so adding it bumped
    /// the wire protocol version.
    #[serde(default)]
    pub cache: CacheMode,
    /// The change's product hunks whose diff coverage the coordinator records (found where the
    /// repository is); empty: none. Added in wire protocol 15.
    #[serde(default)]
    pub diff_hunks: Vec<crate::diff_coverage::ChangedHunk>,
    /// The changed files' text as a tool that counts offsets (node's V8 coverage) locates it,
    /// found where the repository is; empty for other tools. Added in wire protocol 21.
    #[serde(default)]
    pub diff_sources: Vec<crate::diff_coverage::ChangedSource>,
    /// The change's harness as the submitter classified it (where the repository is), so the
    /// coordinator concludes as embedded mode would. Added in wire protocol 15.
    #[serde(default)]
    pub harness: crate::harness::HarnessPlan,
    /// The person granted the test-only exception (`--allow-test-only` or
    /// `ASSAY_ALLOW_TEST_ONLY`, never the repository): a `test:` on a change without product
    /// files is judged on the candidate alone. Added in wire protocol 16.
    #[serde(default)]
    pub allow_test_only: bool,
    /// The dependency archive of each tree (a cargo project's, a Go module's), already in the
    /// store: every job of the proof on one of these trees names its archive. Empty: the
    /// workers' own caches. Added in wire protocol 19.
    #[serde(default)]
    pub dependencies: Vec<(TreeId, crate::dependency_archive::DependencyArchive)>,
}

/// Jobs for the fleet to run, and nothing more: no criteria, no revisions, no evidence. The
/// coordinator publishes them, records each one's result at its KV result key in plan order,
/// and marks the run finished; what the results mean is the submitter's business. `assay test
/// --cluster` and `assay mutate --cluster` submit these (see `ClusterQueue`). Added in wire
/// protocol 18.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSubmission {
    /// The run's id: a proof id's shape, since it names the same subjects and keys.
    pub run_id: ProofId,
    /// Where the run comes from and what kind it is (`suite`, `mutate`), kept in its record.
    pub repository: String,
    /// The kind of run (`suite`, `mutate`).
    pub label: String,
    /// Every tree a job runs on, each already in the artifact store.
    pub trees: Vec<TreeId>,
    /// In plan order: job `i` is index `i` with `JobId::for_index(run_id, i)`.
    pub jobs: Vec<JobSpec>,
    /// This run's in-flight cap across the whole fleet.
    pub jobs_budget: u32,
}

/// The most jobs one job submission may carry: it travels inline, in one message.
pub const MAX_SUBMITTED_JOBS: usize = 4096;
/// The most trees one job submission may name (each is looked up in the store when it comes).
pub const MAX_SUBMITTED_TREES: usize = 64;

/// What a fleet run is: a proof, which the coordinator concludes into evidence, or bare jobs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Submission {
    /// A proof: criteria, revisions, jobs; the coordinator concludes its evidence.
    Proof(Box<ProofSubmission>),
    /// Bare jobs: the coordinator records their results and nothing more.
    Jobs(JobSubmission),
}

impl Submission {
    /// The run's id (a proof's id, or a job submission's).
    pub fn id(&self) -> &ProofId {
        match self {
            Self::Proof(proof) => &proof.proof_id,
            Self::Jobs(jobs) => &jobs.run_id,
        }
    }
    /// The run's jobs, in plan order.
    pub fn jobs(&self) -> &[JobSpec] {
        match self {
            Self::Proof(proof) => &proof.jobs,
            Self::Jobs(jobs) => &jobs.jobs,
        }
    }
    /// The run's in-flight cap across the whole fleet.
    pub fn jobs_budget(&self) -> u32 {
        match self {
            Self::Proof(proof) => proof.jobs_budget,
            Self::Jobs(jobs) => jobs.jobs_budget,
        }
    }
}

/// What the CLI sends on the submit subject. A proof bigger than the server's `max_payload` (a
/// proof of thousands of jobs) waits in the artifact store, named here; a job submission is
/// always inline (at most [`MAX_SUBMITTED_JOBS`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SubmitRequest {
    /// The proof, in the message.
    Inline(Box<ProofSubmission>),
    /// The proof, too big for a message, already in the artifact store.
    Stored {
        /// The proof the stored submission is of.
        proof_id: ProofId,
        /// Where the stored submission is, and its sha256.
        submission: ArtifactRef,
    },
    /// A job submission, always in the message.
    Jobs(Box<JobSubmission>),
}

/// The store key of a submission too big to send inline.
pub fn submission_key(proof_id: &ProofId) -> String {
    format!("proofs/{proof_id}/submission.bin")
}

/// A job's result on the results subject and in its KV result key. A result bigger than the
/// server's `max_payload` (a report of thousands of cases) waits in the artifact store at
/// [`result_key`], named here by its key and sha256.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ResultMessage {
    /// The result, in the message.
    Inline(Box<JobResult>),
    /// The result, too big for a message, already in the artifact store.
    Stored {
        /// The job it is the result of.
        job_id: crate::JobId,
        /// The job's position in the plan.
        index: u32,
        /// Where the stored result is, and its sha256.
        result: ArtifactRef,
    },
}

/// The store key of a result too big to send inline.
pub fn result_key(proof_id: &ProofId, index: u32) -> String {
    format!("proofs/{proof_id}/jobs/{index:04}/result.bin")
}

/// The store key of a proof's evidence report.
pub fn evidence_key(proof_id: &ProofId) -> String {
    format!("proofs/{proof_id}/evidence.json")
}

/// The coordinator's answer to a submit request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SubmitReply {
    /// The submission was accepted and will run.
    Accepted {
        /// The id the run goes by in subjects, keys and progress.
        proof_id: ProofId,
    },
    /// The submission was refused and will not run.
    Refused {
        /// Why, for the person who submitted it.
        message: String,
    },
}

/// Where a proof (or job run) is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProofStatus {
    /// Its jobs are being run.
    Running,
    /// Every result is in; the proof has its evidence (or the run is done).
    Finished,
    /// It was cancelled before it finished.
    Cancelled,
}

impl ProofStatus {
    /// The status as people read it (`running`).
    pub fn label(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Finished => "finished",
            Self::Cancelled => "cancelled",
        }
    }
}

/// A proof's durable state in the KV bucket; results live beside it, one key per job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProofRecord {
    /// The submission; a proof's `jobs` are empty when `stored` names the whole of it.
    pub submission: Submission,
    /// The full submission in the artifact store, when it is too big for a KV value.
    pub stored: Option<ArtifactRef>,
    /// Jobs of the proof's own plan.
    pub job_count: u32,
    /// Jobs after the proof's own: its diff coverage run (when it has changed product hunks),
    /// then the mutation check's, once it is proven: the unmutated run and one per mutant (0:
    /// no check), and for a Rust check built once the schema's, of which it uses what its
    /// builds need (so the count is then at most).
    pub mutation_job_count: u32,
    /// Where the proof is in its life.
    pub status: ProofStatus,
    /// Seconds since the epoch when the coordinator accepted the proof.
    pub submitted_at: u64,
}

/// What the coordinator tells the submitting CLI while a proof runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ProgressEvent {
    /// A job finished: its result, and how many of the proof's are done.
    JobFinished {
        /// Jobs finished so far, this one included.
        done: u32,
        /// Jobs of the proof in all.
        total: u32,
        /// The job's result.
        result: Box<JobResult>,
        /// Whether the fleet's result cache answered the job instead of a worker. `false` where
        /// a self-describing decoder meets an event without it; bincode cannot skip a field,
        /// so adding it made wire protocol 25.
        #[serde(default)]
        cached: bool,
    },
    /// The evidence report as JSON (its schema is the document's, not the wire's).
    Finished {
        /// The evidence report's JSON text.
        evidence_json: String,
    },
    /// The evidence, too big for one message, is in the artifact store.
    FinishedStored {
        /// Where the stored evidence is, and its sha256.
        evidence: ArtifactRef,
    },
    /// The proof was cancelled.
    Cancelled,
    /// Every job of a job submission has its result at its KV result key: the run is done.
    JobsFinished {
        /// Jobs of the run in all.
        jobs: u32,
    },
    /// The fleet-wide halt is set: no job of any proof is admitted until it is lifted.
    Halted {
        /// Why the fleet was halted, as the operator gave it.
        reason: String,
    },
    /// The halt was lifted; admission goes on.
    Resumed,
}

/// What the CLI sends on the cancel subject.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelRequest {
    /// The proof to cancel.
    pub proof_id: ProofId,
}

/// The coordinator's answer to a cancel request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CancelReply {
    /// The proof was running and is now cancelled.
    Cancelled,
    /// The proof was not running: nothing was cancelled.
    NotRunning {
        /// Where the proof is, if the coordinator knows it.
        status: Option<ProofStatus>,
    },
}

/// The store key of a tree archive and of its sha256, content-addressed by git tree id.
pub fn tree_archive_key(tree: &TreeId) -> String {
    format!("trees/{tree}.tar")
}
/// The store key of a tree archive's sha256, beside the archive.
pub fn tree_digest_key(tree: &TreeId) -> String {
    format!("trees/{tree}.tar.sha256")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_carry_the_prefix_and_the_proof_id() {
        let subjects = Subjects::new("billing.");
        let proof = ProofId("p-1795995229-0a1b2c3d".into());
        assert_eq!(subjects.jobs(&proof), "billing.jobs.p-1795995229-0a1b2c3d");
        assert_eq!(subjects.jobs_filter(), "billing.jobs.>");
        assert_eq!(
            subjects.proof_of(&subjects.results(&proof)),
            Some(proof.clone())
        );
        assert_eq!(subjects.proof_of("other.results.p-1"), None);
        assert_eq!(
            keys::proof_of_record(&keys::record(&proof)),
            Some(proof.clone())
        );
    }

    #[test]
    fn the_default_prefix_keeps_the_names_deployments_already_use() {
        let subjects = Subjects::new(DEFAULT_PREFIX);
        assert_eq!(subjects.jobs_stream(), "ASSAY_JOBS");
        assert_eq!(subjects.results_stream(), "ASSAY_RESULTS");
        assert_eq!(subjects.workers_consumer(), "assay-workers");
        assert_eq!(subjects.coordinator_consumer(), "assay-coordinator");
        assert_eq!(subjects.proofs_bucket(), "ASSAY_PROOFS");
    }

    #[test]
    fn every_stream_consumer_and_bucket_name_derives_from_the_prefix() {
        let alpha = Subjects::new("alpha");
        assert_eq!(alpha.jobs_stream(), "ALPHA_JOBS");
        assert_eq!(alpha.workers_consumer(), "alpha-workers");
        assert_eq!(alpha.proofs_bucket(), "ALPHA_PROOFS");
        let names = |s: &Subjects| {
            [
                s.jobs_stream(),
                s.results_stream(),
                s.workers_consumer(),
                s.coordinator_consumer(),
                s.proofs_bucket(),
            ]
        };
        // Prefixes that upper-case or sanitize alike still get names of their own.
        let prefixes = ["alpha", "Alpha", "billing.ci", "billing_ci", "billing-ci"];
        for (i, a) in prefixes.iter().enumerate() {
            for b in &prefixes[i + 1..] {
                let (a_names, b_names) = (names(&Subjects::new(a)), names(&Subjects::new(b)));
                for (x, y) in a_names.iter().zip(&b_names) {
                    assert_ne!(x, y, "{a} and {b}");
                }
            }
            for name in names(&Subjects::new(a)) {
                assert!(
                    name.bytes()
                        .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'),
                    "{name}"
                );
            }
        }
    }
}
