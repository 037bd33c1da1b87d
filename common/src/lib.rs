//! Assay's shared model and pure logic: criteria, plans, jobs, results, report parsers, the
//! verdict rules and the wire codec. No I/O beyond parsing bytes handed in; no tokio, no NATS,
//! no Docker — everything here is synchronous and testable with plain data.

pub mod criteria;
pub mod dependency_archive;
pub mod diff_coverage;
pub mod error_chain;
pub mod evidence;
pub mod fault;
pub mod fleet;
pub mod guest_env;
pub mod harness;
pub mod ids;
pub mod job;
pub mod json_field;
pub mod manifest;
pub mod mutation_check;
pub mod mutation_plan;
pub mod mutation_report;
pub mod nats_permissions;
pub mod outcome;
pub mod report;
pub mod report_format;
pub mod runner;
pub mod sandbox;
pub mod service_config;
pub mod suite;
pub mod suite_audit;
pub mod suite_case;
pub mod suite_history;
pub mod test_binaries;
pub mod tree_path;
pub mod verdict;
pub mod wire;

pub use ids::{JobId, ProofId, TreeId, WorkerId};

/// Seconds a test run reported (a report's `time`, a conftest's `report.duration`) as a
/// `Duration`, for input the guest controls: NaN and negatives are zero, and what does not fit
/// (`1e20`, infinity) is [`std::time::Duration::MAX`], where `Duration::from_secs_f64` panics.
pub fn reported_secs(secs: f64) -> std::time::Duration {
    if secs.is_nan() || secs <= 0.0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::try_from_secs_f64(secs).unwrap_or(std::time::Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn reported_seconds_never_panic_whatever_the_guest_wrote() {
        assert_eq!(reported_secs(1.5), Duration::from_millis(1500));
        assert_eq!(reported_secs(1e20), Duration::MAX);
        assert_eq!(reported_secs(f64::INFINITY), Duration::MAX);
        assert_eq!(reported_secs(f64::NAN), Duration::ZERO);
        assert_eq!(reported_secs(-3.0), Duration::ZERO);
        assert_eq!(reported_secs(f64::NEG_INFINITY), Duration::ZERO);
    }
}
