//! The fleet's JetStream topology, declared in one place so the coordinator and the workers
//! create identical streams, consumers and buckets whichever starts first.

use assay_common::fault;
use assay_common::fleet::Subjects;
use assay_common::nats_permissions::{Role, inbox_prefix};
use assay_common::service_config::NatsSection;
use async_nats::jetstream::{self, consumer, kv, stream};
use std::time::Duration;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why connecting to NATS, or making or using the fleet's streams and bucket, failed.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The connection to the NATS server could not be made.
    #[error(
        "failed to connect to NATS at {url}: {source} (hint: start nats-server -js, check {url_flag}, and check the nats credentials and TLS settings: a tls:// URL or require_tls, the CA, client certificate and key)"
    )]
    Connect {
        /// The server's URL.
        url: String,
        /// The flag that named it to whoever connected ([`url_flag`]).
        url_flag: &'static str,
        /// The client's error.
        #[source]
        source: BoxError,
    },
    /// A credentials, nkey seed, password or token file could not be read.
    #[error(
        "failed to read NATS credentials {path} (hint: check the nats credentials_file, nkey_seed_file, password_file or token_file setting)"
    )]
    Credentials {
        /// The file named in the settings.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A TLS CA, certificate or key file is missing or unreadable.
    #[error(
        "NATS {what} {path} is not a readable file (hint: check the nats tls_ca_file, tls_cert_file and tls_key_file settings)"
    )]
    Tls {
        /// The file named in the settings.
        path: String,
        /// Which file it is: "CA certificate", "client certificate" or "client key".
        what: &'static str,
    },
    /// Only one of the client certificate and its key was set.
    #[error(
        "NATS connection to {url}: a client certificate needs both tls_cert_file and tls_key_file (hint: set both or neither)"
    )]
    TlsPair {
        /// The server's URL.
        url: String,
    },
    /// A JetStream request was answered with an error (JetStream off, not permitted...).
    #[error(
        "failed to {what} (hint: the NATS server needs JetStream enabled: nats-server -js; under the fleet's NATS permissions only the coordinator may create the streams, consumers and bucket: start the coordinator first)"
    )]
    JetStream {
        /// What was being done, as "failed to {what}" reads.
        what: String,
        /// The server's or client's error.
        #[source]
        source: BoxError,
    },
    /// No server answered in time: JetStream is there (a server without it answers at once,
    /// "no responders"), but a server was lost, a stream is electing its leader, or the
    /// request was one this role may not make (the server drops it unanswered).
    #[error(
        "failed to {what}: no NATS server answered in time (hint: a server of the cluster lost, or a stream electing its leader; or, under the fleet's NATS permissions, a request only the coordinator may make: start the coordinator first)"
    )]
    TimedOut {
        /// What was being done, as "failed to {what}" reads.
        what: String,
        /// The client's timeout error.
        #[source]
        source: BoxError,
    },
    /// The server refused one of this connection's operations under its permissions (a
    /// subscription to the role's own inbox, a publish to a subject the role may not use):
    /// what would otherwise wait out a request's whole timeout, said at once.
    #[error(
        "failed to {what}: the NATS server refused it: {refusal} (hint: under the fleet's NATS permissions each role may use only its own inbox and subjects: check that these are the {role}'s credentials; only the coordinator creates the streams, consumers and bucket, so start it first)"
    )]
    Refused {
        /// What was being done, as "failed to {what}" reads.
        what: String,
        /// The role the connection was made as.
        role: &'static str,
        /// The server's own words.
        refusal: String,
    },
    /// A plain NATS operation (no JetStream involved) failed.
    #[error("failed to {what}")]
    Nats {
        /// What was being done, as "failed to {what}" reads.
        what: String,
        /// The client's error.
        #[source]
        source: BoxError,
    },
}

impl FleetError {
    /// A JetStream step `what` that failed with `source`.
    pub fn jetstream(what: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::JetStream {
            what: what.into(),
            source: source.into(),
        }
    }

    /// A failed JetStream request: [`FleetError::TimedOut`] when it got no answer in time,
    /// [`FleetError::JetStream`] otherwise.
    pub fn request<E: Unanswered + Into<BoxError>>(what: impl Into<String>, error: E) -> Self {
        let what = what.into();
        if error.unanswered() {
            Self::TimedOut {
                what,
                source: error.into(),
            }
        } else {
            Self::jetstream(what, error)
        }
    }

    /// A plain NATS step `what` that failed with `source`.
    pub fn nats(what: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Nats {
            what: what.into(),
            source: source.into(),
        }
    }
}

/// Whether a failed JetStream request got no answer in time.
pub trait Unanswered {
    /// True when no server answered, rather than one answering with an error.
    fn unanswered(&self) -> bool;
}

macro_rules! unanswered_when_timed_out {
    ($($error:ty => $kind:path),* $(,)?) => {
        $(impl Unanswered for $error {
            fn unanswered(&self) -> bool {
                self.kind() == $kind
            }
        })*
    };
}

unanswered_when_timed_out! {
    stream::ConsumerError => stream::ConsumerErrorKind::TimedOut,
    jetstream::context::CreateStreamError => jetstream::context::CreateStreamErrorKind::TimedOut,
    jetstream::context::CreateKeyValueError => jetstream::context::CreateKeyValueErrorKind::TimedOut,
    kv::WatchError => kv::WatchErrorKind::TimedOut,
    consumer::StreamError => consumer::StreamErrorKind::TimedOut,
}

/// Delivery settings of the jobs consumer. Not in the service file: they are protocol
/// constants that tests shorten, and every process of a fleet must agree on them. The
/// defaults are the fault policy's (`assay_common::fault`).
#[derive(Clone, Copy, Debug)]
pub struct QueueTuning {
    /// How long a delivered job may go without an ack or a progress ack before redelivery.
    pub ack_wait: Duration,
    /// Deliveries a job gets before it is recorded in the infrastructure lane.
    pub max_deliver: i64,
    /// How long the server remembers message ids for de-duplication.
    pub duplicate_window: Duration,
    /// Jobs the coordinator lets wait in the work queue beyond the workers' idle slots; the
    /// rest wait in its round-robin admission, where a small proof can overtake a huge one.
    pub lookahead: usize,
    /// How long a result the coordinator pulled may go unacknowledged before it is delivered
    /// again: after a coordinator dies, the results it held reach its successor this long after
    /// they were pulled. Applying one is a KV round trip or two, far inside it; a slow stored
    /// result is redelivered at worst, and then dropped as a duplicate.
    pub results_ack_wait: Duration,
}

impl Default for QueueTuning {
    fn default() -> Self {
        Self {
            ack_wait: fault::JOB_ACK_WAIT,
            max_deliver: i64::from(fault::DELIVERY_CAP),
            duplicate_window: Duration::from_secs(600),
            lookahead: 4,
            results_ack_wait: fault::RESULTS_ACK_WAIT,
        }
    }
}

impl QueueTuning {
    /// A running job's progress acks come this often: well inside `ack_wait`.
    pub fn heartbeat(&self) -> Duration {
        (self.ack_wait / 3).max(Duration::from_millis(100))
    }
}

/// Connects with bounded retries at startup so a missing server fails fast with one line.
/// `nats` says where, how to authenticate and how to secure the connection; the CLI, the
/// coordinator and the workers all connect through here. `role` is who connects: its replies,
/// JetStream answers and key-value watch deliveries arrive under its own inbox prefix
/// ([`inbox_prefix`] of `nats.subject_prefix`), the only inboxes the fleet's NATS permissions
/// let that role subscribe to.
///
/// `nats.url` may list several servers, separated by commas: the client tries them in turn and,
/// once connected, reconnects to any server of the cluster (those listed and those the cluster
/// announces) for as long as the process runs.
pub async fn connect(nats: &NatsSection, role: Role) -> Result<async_nats::Client, FleetError> {
    connect_hearing_refusals(nats, role)
        .await
        .map(|(client, _)| client)
}

/// The permissions violations the server reported on one connection, as they come.
pub struct Refusals(tokio::sync::watch::Receiver<Option<String>>);

impl Refusals {
    /// The server's words for the first permissions violation of the connection, once there
    /// is one; pending for as long as there is none.
    pub async fn first(&mut self) -> String {
        match self.0.wait_for(Option::is_some).await {
            Ok(refusal) => refusal.clone().unwrap_or_default(),
            // The connection is gone and never reported one.
            Err(_) => std::future::pending().await,
        }
    }

    /// `operation` (a lookup or request on this connection, `what` it does), unless the
    /// server refuses something of the connection first: a role's credentials that may not
    /// subscribe to its own inbox (the one its answers come to) get no answer at all, and
    /// would otherwise wait out every request's timeout.
    pub async fn or_refused<T, E: From<FleetError>>(
        &mut self,
        what: &str,
        role: Role,
        operation: impl std::future::Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        tokio::select! {
            done = operation => done,
            refusal = self.first() => Err(FleetError::Refused {
                what: what.to_owned(),
                role: role.name(),
                refusal,
            }
            .into()),
        }
    }
}

/// [`connect`], with the server's permissions violations heard ([`Refusals`]).
pub async fn connect_hearing_refusals(
    nats: &NatsSection,
    role: Role,
) -> Result<(async_nats::Client, Refusals), FleetError> {
    let (refused, refusals) = tokio::sync::watch::channel(None::<String>);
    let url = nats.url.as_str();
    let servers: Vec<&str> = url.split(',').map(str::trim).collect();
    let mut options = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(5))
        .name("assay")
        .custom_inbox_prefix(inbox_prefix(&Subjects::new(&nats.subject_prefix), role))
        .event_callback(move |event| {
            if let async_nats::Event::ServerError(error) = &event {
                let words = error.to_string();
                if words.to_ascii_lowercase().contains("permissions violation") {
                    // Only the first is kept: it is the one that stopped the connection's work.
                    refused.send_if_modified(|first| {
                        let unset = first.is_none();
                        first.get_or_insert(words);
                        unset
                    });
                }
            }
            std::future::ready(())
        });
    if !nats.credentials_file.is_empty() {
        options = options
            .credentials_file(&nats.credentials_file)
            .await
            .map_err(|source| FleetError::Credentials {
                path: nats.credentials_file.clone(),
                source,
            })?;
    }
    if !nats.nkey_seed_file.is_empty() {
        options = options.nkey(read_secret(&nats.nkey_seed_file)?);
    }
    if !nats.user.is_empty() || !nats.password_file.is_empty() {
        let password = if nats.password_file.is_empty() {
            String::new()
        } else {
            read_secret(&nats.password_file)?
        };
        options = options.user_and_password(nats.user.clone(), password);
    }
    if !nats.token_file.is_empty() {
        options = options.token(read_secret(&nats.token_file)?);
    }
    for (path, what) in [
        (&nats.tls_ca_file, "CA certificate"),
        (&nats.tls_cert_file, "client certificate"),
        (&nats.tls_key_file, "client key"),
    ] {
        if !path.is_empty() && !std::path::Path::new(path).is_file() {
            return Err(FleetError::Tls {
                path: path.clone(),
                what,
            });
        }
    }
    if !nats.tls_ca_file.is_empty() {
        options = options.add_root_certificates(nats.tls_ca_file.clone().into());
    }
    match (nats.tls_cert_file.is_empty(), nats.tls_key_file.is_empty()) {
        (false, false) => {
            options = options.add_client_certificate(
                nats.tls_cert_file.clone().into(),
                nats.tls_key_file.clone().into(),
            );
        }
        (true, true) => {}
        _ => {
            return Err(FleetError::TlsPair {
                url: url.to_owned(),
            });
        }
    }
    if nats.require_tls || url.starts_with("tls://") {
        options = options.require_tls(true);
    }
    let client = options
        .connect(servers)
        .await
        .map_err(|source| FleetError::Connect {
            url: url.to_owned(),
            url_flag: url_flag(role),
            source: source.into(),
        })?;
    Ok((client, Refusals(refusals)))
}

/// The flag that names the NATS URL to whoever connects as `role`: the services' `--nats`,
/// the CLI's `--cluster` (both also read `ASSAY_NATS_URL`).
fn url_flag(role: Role) -> &'static str {
    match role {
        Role::Coordinator | Role::Worker => "--nats",
        Role::Submitter | Role::Operator => "--cluster",
    }
}

/// A secret from its file, without the trailing newline an editor leaves.
fn read_secret(path: &str) -> Result<String, FleetError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim_end_matches(['\n', '\r']).to_owned())
        .map_err(|source| FleetError::Credentials {
            path: path.to_owned(),
            source,
        })
}

/// Where the fleet's streams and bucket live: how many copies JetStream keeps of each
/// (`[nats] replicas`). Only the coordinator creates them; others open what exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Copies JetStream keeps of each stream and of the bucket (1 to 5).
    pub replicas: usize,
}

impl Placement {
    /// The placement the `[nats]` settings ask for.
    pub fn of(nats: &NatsSection) -> Self {
        Self {
            replicas: nats.replicas,
        }
    }

    /// One server, one copy: what a process that only opens existing streams passes.
    pub const SINGLE: Self = Self { replicas: 1 };
}

/// The jobs work-queue stream, made if missing: where the coordinator publishes jobs.
pub async fn jobs_stream(
    js: &jetstream::Context,
    subjects: &Subjects,
    tuning: &QueueTuning,
    placement: Placement,
) -> Result<stream::Stream, FleetError> {
    work_queue(
        js,
        subjects.jobs_stream(),
        subjects.jobs_filter(),
        tuning,
        placement,
    )
    .await
}

/// The results work-queue stream, made if missing: where workers publish job results.
pub async fn results_stream(
    js: &jetstream::Context,
    subjects: &Subjects,
    tuning: &QueueTuning,
    placement: Placement,
) -> Result<stream::Stream, FleetError> {
    work_queue(
        js,
        subjects.results_stream(),
        subjects.results_filter(),
        tuning,
        placement,
    )
    .await
}

/// A work-queue stream (a message leaves once acked) named `name` over `filter`.
async fn work_queue(
    js: &jetstream::Context,
    name: String,
    filter: String,
    tuning: &QueueTuning,
    placement: Placement,
) -> Result<stream::Stream, FleetError> {
    js.get_or_create_stream(stream::Config {
        name: name.clone(),
        subjects: vec![filter],
        retention: stream::RetentionPolicy::WorkQueue,
        // On disk, so a restarted server still holds queued work (see docs/operations.md,
        // "Durability"), on as many servers as `[nats] replicas` says.
        storage: stream::StorageType::File,
        num_replicas: placement.replicas,
        duplicate_window: tuning.duplicate_window,
        ..Default::default()
    })
    .await
    .map_err(|e| FleetError::request(format!("create stream {name}"), e))
}

/// The pull consumer all workers share. One delivery beyond the cap is allowed so that a
/// worker can record the job in the infrastructure lane instead of the job vanishing.
pub async fn workers_consumer(
    js: &jetstream::Context,
    subjects: &Subjects,
    tuning: &QueueTuning,
    placement: Placement,
) -> Result<consumer::PullConsumer, FleetError> {
    let stream = jobs_stream(js, subjects, tuning, placement).await?;
    durable_pull(
        &stream,
        subjects.workers_consumer(),
        subjects.jobs_filter(),
        tuning.ack_wait,
        tuning.max_deliver + 1,
    )
    .await
}

/// The coordinator's durable pull consumer on the results stream, made if missing.
pub async fn coordinator_consumer(
    js: &jetstream::Context,
    subjects: &Subjects,
    tuning: &QueueTuning,
    placement: Placement,
) -> Result<consumer::PullConsumer, FleetError> {
    let stream = results_stream(js, subjects, tuning, placement).await?;
    let name = subjects.coordinator_consumer();
    // Created or updated: a consumer an earlier version made keeps its old, longer ack wait
    // otherwise, and a failover would wait that long for the results the dead leader held.
    // Only the coordinator makes this consumer, so nothing else's settings are overwritten.
    stream
        .create_consumer(pull_config(
            &name,
            subjects.results_filter(),
            tuning.results_ack_wait,
            // The server's default: unlimited deliveries; a result is never given up on, only
            // applied once.
            0,
        ))
        .await
        .map_err(|e| FleetError::request(format!("create consumer {name}"), e))
}

/// A durable pull consumer with explicit acks over `filter` of `stream`.
async fn durable_pull(
    stream: &stream::Stream,
    name: String,
    filter: String,
    ack_wait: Duration,
    max_deliver: i64,
) -> Result<consumer::PullConsumer, FleetError> {
    stream
        .get_or_create_consumer(&name, pull_config(&name, filter, ack_wait, max_deliver))
        .await
        .map_err(|e| FleetError::request(format!("create consumer {name}"), e))
}

fn pull_config(
    name: &str,
    filter: String,
    ack_wait: Duration,
    max_deliver: i64,
) -> consumer::pull::Config {
    consumer::pull::Config {
        durable_name: Some(name.to_owned()),
        ack_policy: consumer::AckPolicy::Explicit,
        ack_wait,
        max_deliver,
        filter_subject: filter,
        ..Default::default()
    }
}

/// How long a proof's records (status, results, evidence reference) stay in the proofs bucket
/// after they were last written: long enough for `assay results` on last week's proofs, short
/// enough that the bucket does not grow without bound. The evidence itself stays in the store.
pub const PROOF_RECORD_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// The proofs KV bucket (proof records, results, lease, halt), opened or made.
pub async fn proofs_bucket(
    js: &jetstream::Context,
    subjects: &Subjects,
    placement: Placement,
) -> Result<kv::Store, FleetError> {
    let bucket = subjects.proofs_bucket();
    if let Ok(store) = js.get_key_value(&bucket).await {
        return Ok(store);
    }
    js.create_key_value(kv::Config {
        bucket: bucket.clone(),
        history: 1,
        storage: stream::StorageType::File,
        max_age: PROOF_RECORD_TTL,
        num_replicas: placement.replicas,
        ..Default::default()
    })
    .await
    .map_err(|e| FleetError::request(format!("create key-value bucket {bucket}"), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unreachable_server_is_blamed_on_the_flag_that_named_it() {
        // A port nothing listens on: bound, then released.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let nats = NatsSection {
            url: format!("nats://127.0.0.1:{port}"),
            ..NatsSection::default()
        };
        for (role, flag) in [
            (Role::Worker, "check --nats,"),
            (Role::Coordinator, "check --nats,"),
            (Role::Submitter, "check --cluster,"),
            (Role::Operator, "check --cluster,"),
        ] {
            let error = connect(&nats, role).await.expect_err("nothing listens");
            let text = error.to_string();
            assert!(
                text.starts_with(&format!("failed to connect to NATS at {}", nats.url))
                    && text.contains(flag),
                "{role:?}: {text}"
            );
        }
    }
}
