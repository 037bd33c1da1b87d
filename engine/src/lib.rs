//! Assay's engine: plans proofs into jobs, admits them under the jobs budget, reassembles
//! results in plan order and decides verdicts; runs suites (`suite`) and mutation testing
//! (`mutation`). Embedded mode runs it in-process; the fleet's coordinator (the
//! `assay-coordinator` crate) runs the same engine behind NATS. Nothing here speaks NATS: jobs
//! go through the `JobQueue` trait, artifacts through the `ArtifactStore` trait.

pub mod admission;
pub mod coverage;
pub mod dependencies;
pub mod diff_coverage;
pub mod dispatch;
pub mod go_modules;
pub mod harness;
pub mod mutation;
pub mod plan;
pub mod prepared;
pub mod program_identity;
pub mod progress;
pub mod proof;
pub mod result_cache;
pub mod source;
pub mod suite;
mod syntax;
pub mod vendored;
