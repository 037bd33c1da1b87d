//! Assay's worker: materializes a job's tree, runs its command in a sandbox, captures the
//! structured report and output privately, uploads artifacts with their sha256 and returns a
//! result. The same code serves embedded mode (in-process) and the fleet.

pub mod archive;
pub mod execute;
pub mod guest_file;
pub mod health;
pub mod manifest_job;
pub mod metrics;
pub mod nats;
pub mod sandbox;
pub mod secrets;
pub mod service;
pub mod store;
pub mod store_tree;
pub mod trace_context;
pub mod tree;
