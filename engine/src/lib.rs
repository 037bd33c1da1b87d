//! Assay's engine: plans proofs into jobs, admits them under the jobs budget, reassembles
//! results in plan order and decides verdicts; runs suites (`suite`) and mutation testing
//! (`mutation`). Embedded mode runs it in-process; the fleet's coordinator is `service`, the
//! same engine behind NATS.

pub mod admission;
pub mod admitter;
pub mod client;
pub mod cluster_queue;
pub mod coverage;
pub mod diff_coverage;
pub mod dispatch;
pub mod harness;
pub mod mutation;
pub mod nats_queue;
pub mod plan;
pub mod prepared;
pub mod program_identity;
pub mod progress;
pub mod proof;
pub mod result_cache;
pub mod service;
pub mod source;
pub mod suite;
