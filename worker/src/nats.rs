//! The fleet's JetStream topology, declared in one place so the coordinator and the workers
//! create identical streams, consumers and buckets whichever starts first.

use assay_common::fleet::Subjects;
use async_nats::jetstream::{self, consumer, kv, stream};
use std::time::Duration;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("failed to connect to NATS at {url} (hint: start nats-server -js, or check --nats)")]
    Connect {
        url: String,
        #[source]
        source: BoxError,
    },
    #[error("failed to read NATS credentials {path}")]
    Credentials {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to {what} (hint: the NATS server needs JetStream enabled: nats-server -js)")]
    JetStream {
        what: String,
        #[source]
        source: BoxError,
    },
}

impl FleetError {
    pub fn jetstream(what: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::JetStream {
            what: what.into(),
            source: source.into(),
        }
    }
}

/// Delivery settings of the jobs consumer. Not in the service file: they are protocol
/// constants that tests shorten, and every process of a fleet must agree on them.
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
}

impl Default for QueueTuning {
    fn default() -> Self {
        Self {
            ack_wait: Duration::from_secs(30),
            max_deliver: 5,
            duplicate_window: Duration::from_secs(600),
            lookahead: 4,
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
pub async fn connect(url: &str, credentials_file: &str) -> Result<async_nats::Client, FleetError> {
    let mut options = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(5))
        .name("assay");
    if !credentials_file.is_empty() {
        options = options
            .credentials_file(credentials_file)
            .await
            .map_err(|source| FleetError::Credentials {
                path: credentials_file.to_owned(),
                source,
            })?;
    }
    options
        .connect(url)
        .await
        .map_err(|source| FleetError::Connect {
            url: url.to_owned(),
            source: source.into(),
        })
}

pub async fn jobs_stream(
    js: &jetstream::Context,
    subjects: &Subjects,
    tuning: &QueueTuning,
) -> Result<stream::Stream, FleetError> {
    let name = subjects.jobs_stream();
    js.get_or_create_stream(stream::Config {
        name: name.clone(),
        subjects: vec![subjects.jobs_filter()],
        retention: stream::RetentionPolicy::WorkQueue,
        duplicate_window: tuning.duplicate_window,
        ..Default::default()
    })
    .await
    .map_err(|e| FleetError::jetstream(format!("create stream {name}"), e))
}

pub async fn results_stream(
    js: &jetstream::Context,
    subjects: &Subjects,
    tuning: &QueueTuning,
) -> Result<stream::Stream, FleetError> {
    let name = subjects.results_stream();
    js.get_or_create_stream(stream::Config {
        name: name.clone(),
        subjects: vec![subjects.results_filter()],
        retention: stream::RetentionPolicy::WorkQueue,
        duplicate_window: tuning.duplicate_window,
        ..Default::default()
    })
    .await
    .map_err(|e| FleetError::jetstream(format!("create stream {name}"), e))
}

/// The pull consumer all workers share. One delivery beyond the cap is allowed so that a
/// worker can record the job in the infrastructure lane instead of the job vanishing.
pub async fn workers_consumer(
    js: &jetstream::Context,
    subjects: &Subjects,
    tuning: &QueueTuning,
) -> Result<consumer::PullConsumer, FleetError> {
    let stream = jobs_stream(js, subjects, tuning).await?;
    let name = subjects.workers_consumer();
    stream
        .get_or_create_consumer(
            &name,
            consumer::pull::Config {
                durable_name: Some(name.clone()),
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: tuning.ack_wait,
                max_deliver: tuning.max_deliver + 1,
                filter_subject: subjects.jobs_filter(),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| FleetError::jetstream(format!("create consumer {name}"), e))
}

pub async fn coordinator_consumer(
    js: &jetstream::Context,
    subjects: &Subjects,
    tuning: &QueueTuning,
) -> Result<consumer::PullConsumer, FleetError> {
    let stream = results_stream(js, subjects, tuning).await?;
    let name = subjects.coordinator_consumer();
    stream
        .get_or_create_consumer(
            &name,
            consumer::pull::Config {
                durable_name: Some(name.clone()),
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: Duration::from_secs(30),
                filter_subject: subjects.results_filter(),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| FleetError::jetstream(format!("create consumer {name}"), e))
}

pub async fn proofs_bucket(
    js: &jetstream::Context,
    subjects: &Subjects,
) -> Result<kv::Store, FleetError> {
    let bucket = subjects.proofs_bucket();
    if let Ok(store) = js.get_key_value(&bucket).await {
        return Ok(store);
    }
    js.create_key_value(kv::Config {
        bucket: bucket.clone(),
        history: 1,
        ..Default::default()
    })
    .await
    .map_err(|e| FleetError::jetstream(format!("create key-value bucket {bucket}"), e))
}
