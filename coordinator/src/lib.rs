//! Assay's coordinator: plans proofs into jobs, admits them under the jobs budget, reassembles
//! results in plan order and decides verdicts. Embedded mode runs it in-process; the fleet runs
//! it as a service.

pub mod admission;
pub mod admitter;
pub mod cache;
pub mod client;
pub mod cluster_queue;
pub mod dispatch;
pub mod engine;
pub mod mutants;
pub mod mutate;
pub mod mutation;
pub mod nats_queue;
pub mod plan;
pub mod service;
pub mod source;
pub mod suite;
