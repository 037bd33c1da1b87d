//! The services' HTTP probe endpoint: `/healthz` (the process answers), `/readyz` (NATS is
//! connected) and `/metrics` (Prometheus text). Hand-rolled: three fixed GETs do not justify an
//! HTTP framework in every service.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Counters a service exposes on `/metrics`.
#[derive(Default, Debug)]
pub struct Metrics {
    pub jobs_finished: AtomicU64,
    pub jobs_infrastructure: AtomicU64,
    pub results_applied: AtomicU64,
    pub results_dropped: AtomicU64,
}

impl Metrics {
    fn render(&self, connected: bool) -> String {
        format!(
            "assay_nats_connected {}\nassay_jobs_finished_total {}\nassay_jobs_infrastructure_total {}\nassay_results_applied_total {}\nassay_results_dropped_total {}\n",
            u8::from(connected),
            self.jobs_finished.load(Ordering::Relaxed),
            self.jobs_infrastructure.load(Ordering::Relaxed),
            self.results_applied.load(Ordering::Relaxed),
            self.results_dropped.load(Ordering::Relaxed),
        )
    }
}

/// Binds `listen` and serves probes until `shutdown`; returns the bound address.
pub async fn spawn(
    listen: &str,
    client: async_nats::Client,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<std::net::SocketAddr> {
    let listener = TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
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
            let client = client.clone();
            let metrics = metrics.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let n = socket.read(&mut buf).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&buf[..n]);
                let path = request.split_whitespace().nth(1).unwrap_or("/");
                let connected =
                    client.connection_state() == async_nats::connection::State::Connected;
                let (status, body) = match path {
                    "/healthz" => ("200 OK", "ok\n".to_owned()),
                    "/readyz" if connected => ("200 OK", "ready\n".to_owned()),
                    "/readyz" => (
                        "503 Service Unavailable",
                        "not connected to NATS\n".to_owned(),
                    ),
                    "/metrics" => ("200 OK", metrics.render(connected)),
                    _ => ("404 Not Found", "not found\n".to_owned()),
                };
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    Ok(addr)
}
