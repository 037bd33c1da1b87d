//! What a proof tells whoever follows it while it runs: the jobs planned and each job's
//! result as it arrives. `assay mutate` adds events of its own on top (`mutate::MutateEvent`),
//! so the engine knows nothing of mutation runs.

use assay_common::job::{JobResult, JobSpec};

/// What the engine tells a reporter while a proof runs.
pub enum ProofEvent<'a> {
    /// The proof was planned into `jobs`, in plan order; sent once, first.
    Planned {
        /// Every job of the proof, in plan order.
        jobs: &'a [JobSpec],
    },
    /// One job's result arrived.
    JobFinished {
        /// Results arrived so far, this one included.
        done: usize,
        /// Jobs planned in all.
        total: usize,
        /// The job that finished.
        spec: &'a JobSpec,
        /// What the job reported.
        result: &'a JobResult,
        /// Whether the result cache answered the job: it did not run in this proof.
        cached: bool,
        /// A mutation check job's name ([`crate::mutation::check::CheckJobs::label`]);
        /// `None` for the proof's own jobs.
        check_label: Option<&'static str>,
    },
}

/// Whoever follows a proof as it runs: a terminal display, a log, the fleet's status stream.
pub trait ProgressSink: Send + Sync {
    /// Told of each event as it happens; must not block the proof for long.
    fn event(&self, event: ProofEvent<'_>);
}
