//! Fault handling in one place: why the fleet's machinery failed a job (an [`InfraCause`],
//! carried in the job's result and its evidence), and the policy that answers what happens
//! next — whether a cause is retried, how many times and after what pause, when a job has
//! been delivered too often, how long the queue waits for a silent worker, and when a leading
//! coordinator gives up taking up the lead.
//!
//! It lives in `assay-common` rather than a crate of its own because everything that consults
//! it already depends on common — the worker, the coordinator, and transport's queue settings
//! (transport depends on common, never the reverse) — and it is plain data and arithmetic,
//! with no I/O, as common requires. The worker and the coordinator read these figures here;
//! none of them is written anywhere else.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// What failed when a job could not be run: the infrastructure lane's reason, beside the
/// human message that says the details. Appended only: the wire encodes a variant by its
/// position (docs/FORMATS.md, "Wire messages").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InfraCause {
    /// The job's tree could not be fetched from the store or materialized (missing, corrupt,
    /// or refused as another tree's).
    TreeFetch,
    /// The worker could not prepare the job's private directory: scratch, adapters, the
    /// mutant's edits, the report's path, or reading back what the command wrote.
    Workspace,
    /// The sandbox did not start the command (a spawn, the container engine, the warm runner).
    SandboxStart,
    /// The toolchain could not run the command: missing, or not reachable from the sandbox.
    ToolchainMissing,
    /// A build's test executables could not be packed, or a run's could not be unpacked.
    PrebuiltBinaries,
    /// The artifact store did not take or give back the job's outputs.
    StoreUnavailable,
    /// The job was delivered [`DELIVERY_CAP`] times without a result: the workers running it
    /// died or lost their connection.
    WorkerLost,
    /// The NATS link failed while the job's result was awaited.
    BusUnavailable,
    /// The job was cancelled by the fleet before its result was recorded.
    Cancelled,
    /// The job's dependency archive could not be fetched, was refused (its bytes not the
    /// ones the job names, an entry that would leave its directory) or cannot be used (the
    /// tree's own cargo configuration declares sources).
    Dependencies,
}

impl InfraCause {
    /// Its name in evidence and logs: `tree_fetch`, `worker_lost`, …
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TreeFetch => "tree_fetch",
            Self::Workspace => "workspace",
            Self::SandboxStart => "sandbox_start",
            Self::ToolchainMissing => "toolchain_missing",
            Self::PrebuiltBinaries => "prebuilt_binaries",
            Self::StoreUnavailable => "store_unavailable",
            Self::WorkerLost => "worker_lost",
            Self::BusUnavailable => "bus_unavailable",
            Self::Cancelled => "cancelled",
            Self::Dependencies => "dependencies",
        }
    }

    /// Whether, and how, what failed this way is tried again.
    ///
    /// A job whose result names its cause is never run again by the fleet: that result is
    /// final, in the infrastructure lane. What is retried happens before such a result exists
    /// — the queue redelivering a job whose worker went silent, a store request or a result's
    /// publish tried again — and is what this says.
    pub fn retry(self) -> Retry {
        match self {
            // JetStream redelivers the job to another worker once its ack wait passes with no
            // ack or progress ack; the delivery past the cap records it instead.
            Self::WorkerLost => Retry::Again {
                tries: Some(DELIVERY_CAP),
                backoff: Backoff::fixed(JOB_ACK_WAIT),
                within: None,
            },
            // A result the stream refuses (a NATS server lost, its stream electing a new
            // leader: 4 to 9 s, nats-server's Raft) is offered again while the job is held
            // with progress acks; past the limit the job is handed back. The pause stops
            // growing at a second, so a result is stored within a second of the election's
            // end (a refusal is answered at once, and a try a second costs nothing).
            Self::BusUnavailable => Retry::Again {
                tries: None,
                backoff: Backoff::doubling(Duration::from_millis(250), Duration::from_secs(1)),
                within: Some(Duration::from_secs(60)),
            },
            // A blip of a few seconds is ridden out; an unreachable store is reported within
            // about three seconds (an object store client's default backs off for a minute,
            // which a user at `assay prove` reads as a hang).
            Self::StoreUnavailable => Retry::Again {
                tries: Some(STORE_RETRIES + 1),
                backoff: STORE_BACKOFF,
                within: Some(STORE_RETRY_LIMIT),
            },
            // The same tree, toolchain, sandbox and scratch space fail the same way again: the
            // job is recorded at once, and the person resubmits once the cause is fixed.
            Self::TreeFetch
            | Self::Workspace
            | Self::SandboxStart
            | Self::ToolchainMissing
            | Self::PrebuiltBinaries
            | Self::Cancelled
            | Self::Dependencies => Retry::Never,
        }
    }
}

impl fmt::Display for InfraCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a failed step is tried again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Not tried again.
    Never,
    /// Tried again with `backoff` between tries: `tries` in all, the first included (`None`:
    /// no count), and only while the first try is less than `within` ago (`None`: no limit).
    Again {
        /// Tries in all, the first included; `None`: no count.
        tries: Option<u32>,
        /// The pauses between tries.
        backoff: Backoff,
        /// How long after the first try the last may start; `None`: no limit.
        within: Option<Duration>,
    },
}

impl Retry {
    /// Whether a failed try is tried again at all.
    pub fn is_retried(self) -> bool {
        matches!(self, Self::Again { .. })
    }

    /// The pause before try `next` (2 is the first retry), or `None` when there is none: the
    /// step is not retried, its tries are spent, or the pause would end past `within` of the
    /// first try, `elapsed` ago.
    pub fn pause_before(self, next: u32, elapsed: Duration) -> Option<Duration> {
        let Self::Again {
            tries,
            backoff,
            within,
        } = self
        else {
            return None;
        };
        if next < 2 || tries.is_some_and(|tries| next > tries) {
            return None;
        }
        let pause = backoff.pause(next - 1);
        match within {
            Some(within) if elapsed.saturating_add(pause) > within => None,
            _ => Some(pause),
        }
    }
}

/// The pauses between tries: `first`, doubling on each retry up to `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The pause after the first failed try.
    pub first: Duration,
    /// The longest pause, where doubling stops.
    pub max: Duration,
}

impl Backoff {
    /// The same `pause` between every two tries.
    pub const fn fixed(pause: Duration) -> Self {
        Self {
            first: pause,
            max: pause,
        }
    }

    /// Pauses from `first`, doubling on each retry up to `max`.
    pub const fn doubling(first: Duration, max: Duration) -> Self {
        Self { first, max }
    }

    /// The pause after the `retry`-th failure (1: after the first try).
    pub fn pause(&self, retry: u32) -> Duration {
        let doublings = retry.saturating_sub(1).min(31);
        self.first
            .saturating_mul(1u32 << doublings)
            .min(self.max)
            .max(self.first)
    }
}

/// Deliveries a job gets before the worker that receives it once more records it in the
/// infrastructure lane ([`InfraCause::WorkerLost`]) instead of running it.
pub const DELIVERY_CAP: u32 = 5;

/// How long a delivered job may go without an ack or a progress ack before the queue
/// delivers it again: a worker that died gives its jobs back after this.
pub const JOB_ACK_WAIT: Duration = Duration::from_secs(30);

/// How long a result the coordinator pulled may go unacknowledged before the results stream
/// delivers it again: a result not recorded (the store or the proofs bucket unavailable) is
/// tried again this long after, without limit, since a result is never given up on, only
/// applied once; after a coordinator dies, the results it held reach its successor this long
/// after they were pulled.
pub const RESULTS_ACK_WAIT: Duration = Duration::from_secs(3);

/// A result the leader could not record (the proofs bucket electing its leader) is handed
/// back to the results stream for delivery again this long after, not [`RESULTS_ACK_WAIT`]:
/// it is recorded within this of the bucket's election's end.
pub const RESULT_RECORD_RETRY: Duration = Duration::from_millis(500);

/// Retries of one store request after its first try ([`InfraCause::StoreUnavailable`]), the
/// pauses between them, and how long after the first try the last may start.
pub const STORE_RETRIES: u32 = 5;
/// The pauses between tries of a store request.
pub const STORE_BACKOFF: Backoff =
    Backoff::doubling(Duration::from_millis(100), Duration::from_secs(2));
/// How long after a store request's first try its last may start.
pub const STORE_RETRY_LIMIT: Duration = Duration::from_secs(30);

/// The pause before a worker asks the queue for jobs again after a failed pull, and before a
/// proof cut short by the fleet (a job not published while a NATS server was lost) is driven
/// again from its recorded results; both go on for as long as the process serves.
pub const FLEET_RETRY_PAUSE: Duration = Duration::from_secs(1);

/// The pause after a coordinator gave up the lead before it stands for it again, so that
/// another coordinator, which may be luckier with the cluster, takes it first.
pub const STEP_ASIDE_PAUSE: Duration = Duration::from_secs(1);

/// How long a coordinator that has just taken the lease may take to set up leading (its
/// results consumer, halt watch, resumed proofs and subscriptions) before it gives the lead
/// up at once: three quarters of the lease's time to live, the time a holder allows itself
/// between renewals. A setup stuck on a stream that is electing its leader would otherwise
/// hold the lease, renewed, while no result is applied; released, the lease passes to a
/// standby, which takes it on its next look.
pub fn leader_setup_limit(lease_ttl: Duration) -> Duration {
    lease_ttl - lease_ttl / 4
}

/// Within that limit, a setup request is given this long before it is sent again, and a
/// refused one is sent again after [`LEADER_SETUP_RETRY_PAUSE`]: a request sent to a stream
/// that is electing its leader is never answered, and the next one, once it has a leader, is.
pub const LEADER_SETUP_TRY: Duration = Duration::from_secs(2);
/// The pause before a refused leader setup request is sent again.
pub const LEADER_SETUP_RETRY_PAUSE: Duration = Duration::from_millis(250);

/// The idle heartbeat of the leader's pull of results: a pull lost with the results
/// consumer's leader (a NATS server lost) is noticed after two missed heartbeats and sent
/// again, to the consumer's new leader, rather than when it would have expired (30 s).
pub const RESULTS_PULL_HEARTBEAT: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [InfraCause; 10] = [
        InfraCause::TreeFetch,
        InfraCause::Workspace,
        InfraCause::SandboxStart,
        InfraCause::ToolchainMissing,
        InfraCause::PrebuiltBinaries,
        InfraCause::StoreUnavailable,
        InfraCause::WorkerLost,
        InfraCause::BusUnavailable,
        InfraCause::Cancelled,
        InfraCause::Dependencies,
    ];

    #[test]
    fn only_a_lost_worker_a_refused_publish_and_a_store_blip_are_tried_again() {
        let retried: Vec<_> = ALL.into_iter().filter(|c| c.retry().is_retried()).collect();
        assert_eq!(
            retried,
            [
                InfraCause::StoreUnavailable,
                InfraCause::WorkerLost,
                InfraCause::BusUnavailable
            ]
        );
        assert_eq!(
            InfraCause::TreeFetch
                .retry()
                .pause_before(2, Duration::ZERO),
            None
        );
    }

    #[test]
    fn a_job_whose_worker_is_lost_is_delivered_five_times_each_after_the_ack_wait() {
        let retry = InfraCause::WorkerLost.retry();
        for delivery in 2..=DELIVERY_CAP {
            assert_eq!(
                retry.pause_before(delivery, Duration::from_secs(600)),
                Some(Duration::from_secs(30)),
                "delivery {delivery}"
            );
        }
        assert_eq!(retry.pause_before(DELIVERY_CAP + 1, Duration::ZERO), None);
        assert_eq!(DELIVERY_CAP, 5);
    }

    #[test]
    fn a_refused_result_is_offered_again_with_doubling_pauses_for_a_minute() {
        let retry = InfraCause::BusUnavailable.retry();
        let pauses: Vec<_> = (2..=7)
            .map(|next| {
                retry
                    .pause_before(next, Duration::ZERO)
                    .map(|p| p.as_millis())
            })
            .collect();
        assert_eq!(
            pauses,
            [
                Some(250),
                Some(500),
                Some(1000),
                Some(1000),
                Some(1000),
                Some(1000)
            ]
        );
        // A pause that would end past the minute is not taken: the job is handed back.
        assert_eq!(retry.pause_before(70, Duration::from_millis(59_500)), None);
        assert_eq!(
            retry.pause_before(70, Duration::from_secs(59)),
            Some(Duration::from_secs(1))
        );
    }

    #[test]
    fn a_store_request_is_tried_six_times_within_thirty_seconds() {
        let retry = InfraCause::StoreUnavailable.retry();
        assert_eq!(
            retry.pause_before(2, Duration::ZERO),
            Some(Duration::from_millis(100))
        );
        assert_eq!(
            retry.pause_before(6, Duration::ZERO),
            Some(Duration::from_millis(1600))
        );
        assert_eq!(retry.pause_before(7, Duration::ZERO), None);
        assert_eq!(retry.pause_before(3, Duration::from_secs(30)), None);
    }

    #[test]
    fn a_leader_gives_up_setting_up_within_three_quarters_of_its_lease() {
        assert_eq!(
            leader_setup_limit(Duration::from_millis(6000)),
            Duration::from_millis(4500)
        );
        assert_eq!(
            leader_setup_limit(Duration::from_millis(500)),
            Duration::from_millis(375)
        );
    }

    #[test]
    fn the_proof_schema_lists_every_cause() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../docs/schemas/assay.proof.v1.json"))
                .expect("the schema is JSON");
        let listed = &schema["properties"]["jobs"]["items"]["properties"]["cause"]["enum"];
        let names: Vec<_> = ALL.iter().map(|c| serde_json::json!(c.as_str())).collect();
        assert_eq!(listed, &serde_json::Value::Array(names));
    }

    #[test]
    fn causes_keep_their_names_and_their_wire_positions() {
        let names: Vec<_> = ALL.iter().map(|c| c.to_string()).collect();
        assert_eq!(
            names,
            [
                "tree_fetch",
                "workspace",
                "sandbox_start",
                "toolchain_missing",
                "prebuilt_binaries",
                "store_unavailable",
                "worker_lost",
                "bus_unavailable",
                "cancelled",
                "dependencies"
            ]
        );
        for (position, cause) in ALL.into_iter().enumerate() {
            let bytes = bincode::serialize(&cause).expect("a cause encodes");
            assert_eq!(bytes, (position as u32).to_le_bytes(), "{cause}");
            let json = serde_json::to_string(&cause).expect("a cause encodes");
            assert_eq!(json, format!("\"{cause}\""));
        }
    }
}
