//! Assay's worker: materializes a job's tree, runs its command in a sandbox, captures the
//! structured report and output privately, uploads artifacts with their sha256 and returns a
//! result. The same code serves embedded mode (the in-process queue) and the fleet, whose
//! worker service [`serve`] runs.

pub mod dependency_cache;
pub mod execute;
pub mod guest_file;
pub mod in_process;
pub mod job_context;
pub mod manifest_job;
pub mod reused_trees;
pub mod sandbox;
pub mod scratch_life;
pub mod secrets;
pub mod service;
pub mod stderr_tail;
pub mod test_binaries;

pub use service::{ServiceError, WorkerConfig, serve, serve_with};
