//! The services' HTTP probe endpoint: `/healthz` (the process answers; it reports NATS and
//! store state but stays 200, so a NATS outage never restarts every pod), `/readyz` (503 unless
//! NATS is connected and the store answers, its bucket there) and `/metrics` (Prometheus
//! text). Hand-rolled: three fixed GETs do not justify an HTTP framework in every service.

use crate::metrics::{Metrics, Probed};
use crate::store::{ArtifactStore, StoreError};
use assay_common::fleet::Subjects;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A probe that takes longer than this counts as a failure.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// The key `/readyz` reads: absent in every store, so a reachable store answers "not found"
/// (for an object; a missing bucket is an error of its own, [`StoreError::NoSuchBucket`]).
const PROBE_KEY: &str = "health/readyz-probe";
/// Probe requests are a line and a few headers; anything longer is cut off here.
const MAX_HEAD: usize = 8 * 1024;

/// What the endpoint checks on each request.
#[derive(Clone)]
pub struct Probes {
    /// The service's NATS connection, ready when connected.
    pub client: async_nats::Client,
    /// The artifact store, ready when it answers.
    pub store: Arc<dyn ArtifactStore>,
    /// The fleet whose queue `/metrics` reports.
    pub subjects: Subjects,
}

impl Probes {
    async fn probe(&self, with_queue: bool) -> Probed {
        let nats_connected =
            self.client.connection_state() == async_nats::connection::State::Connected;
        let (store_reachable, missing_bucket) =
            match tokio::time::timeout(PROBE_TIMEOUT, self.store.get(PROBE_KEY)).await {
                Ok(Ok(_)) => (true, None),
                Ok(Err(StoreError::NoSuchBucket { bucket, .. })) => (false, Some(bucket)),
                Ok(Err(_)) | Err(_) => (false, None),
            };
        let queue = if with_queue && nats_connected {
            tokio::time::timeout(PROBE_TIMEOUT, self.queue())
                .await
                .ok()
                .flatten()
        } else {
            None
        };
        Probed {
            nats_connected,
            store_reachable,
            missing_bucket,
            queue,
        }
    }

    async fn queue(&self) -> Option<(u64, u64)> {
        let js = async_nats::jetstream::new(self.client.clone());
        let stream = js.get_stream(self.subjects.jobs_stream()).await.ok()?;
        let info = stream
            .consumer_info(self.subjects.workers_consumer())
            .await
            .ok()?;
        Some((info.num_pending, info.num_ack_pending as u64))
    }
}

/// The probes' endpoint could not listen: a service that was asked for probes does not start
/// without them.
#[derive(Debug, thiserror::Error)]
#[error("failed to serve probes on {listen}")]
pub struct ListenError {
    /// The address it was to listen on (`host:port`).
    pub listen: String,
    /// Why binding it failed.
    #[source]
    pub source: std::io::Error,
}

/// Binds `listen` and serves probes until `shutdown`; returns the bound address.
pub async fn spawn(
    listen: &str,
    probes: Probes,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<std::net::SocketAddr, ListenError> {
    let failed = |source| ListenError {
        listen: listen.to_owned(),
        source,
    };
    let listener = TcpListener::bind(listen).await.map_err(failed)?;
    let addr = listener.local_addr().map_err(failed)?;
    tokio::spawn(async move {
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => accepted,
            };
            let Ok((mut socket, _)) = accepted else {
                continue;
            };
            let probes = probes.clone();
            let metrics = metrics.clone();
            tokio::spawn(async move {
                let request = read_head(&mut socket).await;
                let path = request.split_whitespace().nth(1).unwrap_or("/");
                let (status, body) = match path {
                    "/healthz" => ("200 OK", state(&probes.probe(false).await)),
                    "/readyz" => {
                        let probed = probes.probe(false).await;
                        if probed.nats_connected && probed.store_reachable {
                            ("200 OK", format!("ready\n{}", state(&probed)))
                        } else {
                            (
                                "503 Service Unavailable",
                                format!("not ready\n{}", state(&probed)),
                            )
                        }
                    }
                    "/metrics" => ("200 OK", metrics.render(&probes.probe(true).await)),
                    _ => ("404 Not Found", "not found\n".to_owned()),
                };
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    Ok(addr)
}

/// The request line and headers: read until the blank line, so a request split across
/// packets is read whole (closing on unread bytes would reset the client's connection).
async fn read_head(socket: &mut tokio::net::TcpStream) -> String {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
        match tokio::time::timeout(PROBE_TIMEOUT, socket.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

fn state(probed: &Probed) -> String {
    let nats = match probed.nats_connected {
        true => "connected",
        false => "not connected",
    };
    let store = match (&probed.missing_bucket, probed.store_reachable) {
        (Some(bucket), _) => format!("bucket {bucket} does not exist"),
        (None, true) => "reachable".to_owned(),
        (None, false) => "unreachable".to_owned(),
    };
    format!("nats: {nats}\nstore: {store}\n")
}
