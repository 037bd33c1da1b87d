//! What a proof tells whoever follows it while it runs: the jobs planned and each job's
//! result as it arrives. `assay mutate` adds events of its own on top (`mutate::MutateEvent`),
//! so the engine knows nothing of mutation runs.

use assay_common::job::{JobResult, JobSpec};

/// What the engine tells a reporter while a proof runs.
pub enum ProofEvent<'a> {
    Planned {
        jobs: &'a [JobSpec],
    },
    JobFinished {
        done: usize,
        total: usize,
        spec: &'a JobSpec,
        result: &'a JobResult,
    },
}

pub trait ProgressSink: Send + Sync {
    fn event(&self, event: ProofEvent<'_>);
}
