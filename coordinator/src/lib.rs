//! Assay's coordinator: plans proofs into jobs, admits them under the jobs budget, reassembles
//! results in plan order and decides verdicts. Embedded mode runs it in-process; the fleet runs
//! it as a service.

pub mod admission;
pub mod admitter;
pub mod cache;
pub mod client;
pub mod cluster_queue;
pub mod coverage;
pub mod dispatch;
pub mod engine;
// Mutation testing, in three parts: `mutants` holds the rules both uses share (choosing
// mutants, budgets, judging a run) and no I/O; `mutation_check` is the check a proven proof
// runs; `mutate` is `assay mutate`, a whole file's or tree's mutation run.
pub mod mutants;
pub mod mutate;
pub mod mutation_check;
pub mod nats_queue;
pub mod plan;
pub mod progress;
pub mod service;
pub mod source;
pub mod suite;
