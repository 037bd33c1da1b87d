//! What Assay's coordinator and workers share: the NATS link (subjects, streams, buckets and
//! connection security), the job queue interface, the artifact store, trees and their archives,
//! health probes, metrics, trace context and one-line error chains. Neither service's logic
//! lives here, so the coordinator does not depend on the worker. The NATS link (`nats`,
//! `health`, `trace_context`) is behind the `nats` feature: the engine builds without it.
#![warn(missing_docs)]

pub mod archive;
pub mod dependency_archive;
/// The one error-chain formatter lives in `assay_common`; named here too so transport and its
/// callers keep one path.
pub use assay_common::error_chain;
#[cfg(feature = "nats")]
pub mod health;
pub mod local_file;
pub mod metrics;
#[cfg(feature = "nats")]
pub mod nats;
pub mod offload;
pub mod queue;
pub mod rust_toolchain;
pub mod store;
pub mod store_tree;
#[cfg(feature = "nats")]
pub mod trace_context;
pub mod tree;
