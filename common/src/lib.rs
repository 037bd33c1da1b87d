//! Assay's shared model and pure logic: criteria, plans, jobs, results, report parsers, the
//! verdict rules and the wire codec. No I/O beyond parsing bytes handed in; no tokio, no NATS,
//! no Docker — everything here is synchronous and testable with plain data.

pub mod criteria;
pub mod evidence;
pub mod fleet;
pub mod ids;
pub mod job;
pub mod manifest;
pub mod mutation_plan;
pub mod outcome;
pub mod report;
pub mod runner;
pub mod service_config;
pub mod suite;
pub mod tree_path;
pub mod verdict;
pub mod wire;

pub use ids::{JobId, ProofId, TreeId, WorkerId};
