//! What a service counts for `/metrics`, rendered in the Prometheus text format. Hand-rolled:
//! a dozen series with fixed labels do not justify a metrics framework in every service.

use assay_common::job::{JobKind, JobResult};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds (seconds) of job duration buckets: sub-second unit tests to hour-long suites.
const JOB_SECONDS: &[f64] = &[
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];
/// Upper bounds (seconds) of container start latency buckets.
const START_SECONDS: &[f64] = &[0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// A histogram with fixed buckets; observations are lock-free.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// Per bucket, not cumulative; the last one is `+Inf`.
    buckets: Vec<AtomicU64>,
    sum_micros: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_micros: AtomicU64::new(0),
        }
    }

    /// Counts one duration in its bucket and in the sum.
    pub fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let bucket = self
            .bounds
            .iter()
            .position(|&le| seconds <= le)
            .unwrap_or(self.bounds.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(
            u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// `labels` is empty or `key="value",…` without braces.
    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (i, count) in self.buckets.iter().enumerate() {
            cumulative += count.load(Ordering::Relaxed);
            let le = self
                .bounds
                .get(i)
                .map_or_else(|| "+Inf".to_owned(), f64::to_string);
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
            );
        }
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum{braces} {sum}");
        let _ = writeln!(out, "{name}_count{braces} {cumulative}");
    }
}

const KINDS: [(JobKind, &str); 5] = [
    (JobKind::Targeted, "targeted"),
    (JobKind::Suite, "suite"),
    (JobKind::Stability, "stability"),
    (JobKind::Mutant, "mutant"),
    (JobKind::HarnessCheck, "harness_check"),
];

/// Job statuses with the lane they belong to: the guest lane is the code under test's doing,
/// the infrastructure lane is the fleet's.
const STATUSES: [(&str, &str); 4] = [
    ("completed", "guest"),
    ("timed_out", "guest"),
    ("infrastructure", "infrastructure"),
    ("cancelled", "infrastructure"),
];

/// What one service counts. The coordinator uses the result counters, a worker the job ones.
#[derive(Debug)]
pub struct Metrics {
    jobs_in_flight: AtomicI64,
    /// Jobs a worker received again after another delivery was not acknowledged.
    pub redeliveries: AtomicU64,
    /// Jobs whose tree was already in the worker's tree cache.
    pub tree_cache_hits: AtomicU64,
    /// Jobs whose tree the worker had to fetch and unpack.
    pub tree_cache_misses: AtomicU64,
    /// Results the coordinator applied to their proof.
    pub results_applied: AtomicU64,
    /// Results the coordinator did not apply: a duplicate, or one naming no job of its proof.
    pub results_dropped: AtomicU64,
    /// Seconds from creating a job's container to its start (the Docker sandbox's).
    pub container_start: Histogram,
    job_seconds: [Histogram; KINDS.len()],
    outcomes: [AtomicU64; 4],
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            jobs_in_flight: AtomicI64::new(0),
            redeliveries: AtomicU64::new(0),
            tree_cache_hits: AtomicU64::new(0),
            tree_cache_misses: AtomicU64::new(0),
            results_applied: AtomicU64::new(0),
            results_dropped: AtomicU64::new(0),
            container_start: Histogram::new(START_SECONDS),
            job_seconds: std::array::from_fn(|_| Histogram::new(JOB_SECONDS)),
            outcomes: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// What the service learns from NATS when it is scraped.
#[derive(Clone, Debug, Default)]
pub struct Probed {
    /// Whether the NATS connection is up.
    pub nats_connected: bool,
    /// Whether the artifact store answered, and its bucket exists.
    pub store_reachable: bool,
    /// The store's bucket, when the store answered that it does not exist.
    pub missing_bucket: Option<String>,
    /// Jobs waiting in the queue and jobs delivered but not yet acknowledged, fleet-wide;
    /// `None` when JetStream did not answer.
    pub queue: Option<(u64, u64)>,
}

/// Counts one running job until dropped, whichever way the job ends.
pub struct InFlight<'a>(&'a AtomicI64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Metrics {
    /// Counts a job as running until the returned guard is dropped.
    pub fn in_flight(&self) -> InFlight<'_> {
        self.jobs_in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(&self.jobs_in_flight)
    }

    /// Counts a finished job: its duration by kind and its outcome by lane.
    pub fn job_finished(&self, kind: JobKind, result: &JobResult) {
        if let Some(i) = KINDS.iter().position(|(k, _)| *k == kind) {
            self.job_seconds[i].observe(Duration::from_millis(result.duration_ms));
        }
        let label = result.status.label();
        if let Some(i) = STATUSES.iter().position(|(s, _)| *s == label) {
            self.outcomes[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The counters and `probed` in the Prometheus text format, for `/metrics`.
    pub fn render(&self, probed: &Probed) -> String {
        let mut out = String::new();
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        gauge(
            &mut out,
            "assay_nats_connected",
            "1 when connected to NATS.",
            u64::from(probed.nats_connected),
        );
        gauge(
            &mut out,
            "assay_store_reachable",
            "1 when the artifact store answered the last probe.",
            u64::from(probed.store_reachable),
        );
        if let Some((pending, ack_pending)) = probed.queue {
            gauge(
                &mut out,
                "assay_queue_depth",
                "Jobs queued and not yet delivered to a worker, fleet-wide.",
                pending,
            );
            gauge(
                &mut out,
                "assay_queue_unacknowledged",
                "Jobs delivered to workers and not yet acknowledged, fleet-wide.",
                ack_pending,
            );
        }
        let in_flight = self
            .jobs_in_flight
            .load(Ordering::Relaxed)
            .max(0)
            .unsigned_abs();
        gauge(
            &mut out,
            "assay_jobs_in_flight",
            "Jobs this worker is running.",
            in_flight,
        );
        header(
            &mut out,
            "assay_job_duration_seconds",
            "histogram",
            "Job run time on this worker, by job kind.",
        );
        for (histogram, (_, kind)) in self.job_seconds.iter().zip(KINDS) {
            histogram.render(
                &mut out,
                "assay_job_duration_seconds",
                &format!("kind=\"{kind}\""),
            );
        }
        header(
            &mut out,
            "assay_job_outcomes_total",
            "counter",
            "Finished jobs by lane and status.",
        );
        for (count, (status, lane)) in self.outcomes.iter().zip(STATUSES) {
            let _ = writeln!(
                out,
                "assay_job_outcomes_total{{lane=\"{lane}\",status=\"{status}\"}} {}",
                load(count)
            );
        }
        counter(
            &mut out,
            "assay_job_redeliveries_total",
            "Jobs this worker received that an earlier delivery did not finish.",
            load(&self.redeliveries),
        );
        counter(
            &mut out,
            "assay_tree_cache_hits_total",
            "Jobs whose tree archive was already in the local cache.",
            load(&self.tree_cache_hits),
        );
        counter(
            &mut out,
            "assay_tree_cache_misses_total",
            "Tree archives fetched from the store.",
            load(&self.tree_cache_misses),
        );
        header(
            &mut out,
            "assay_container_start_seconds",
            "histogram",
            "Time from creating a job's container to its start.",
        );
        self.container_start
            .render(&mut out, "assay_container_start_seconds", "");
        counter(
            &mut out,
            "assay_results_applied_total",
            "Results the coordinator applied to a proof.",
            load(&self.results_applied),
        );
        counter(
            &mut out,
            "assay_results_dropped_total",
            "Duplicate or late results the coordinator dropped.",
            load(&self.results_dropped),
        );
        out
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn gauge(out: &mut String, name: &str, help: &str, value: u64) {
    header(out, name, "gauge", help);
    let _ = writeln!(out, "{name} {value}");
}

fn counter(out: &mut String, name: &str, help: &str, value: u64) {
    header(out, name, "counter", help);
    let _ = writeln!(out, "{name} {value}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_and_end_with_inf() {
        let h = Histogram::new(&[0.5, 1.0]);
        h.observe(Duration::from_millis(200));
        h.observe(Duration::from_millis(700));
        h.observe(Duration::from_secs(3));
        let mut out = String::new();
        h.render(&mut out, "t", "kind=\"suite\"");
        assert_eq!(
            out,
            "t_bucket{kind=\"suite\",le=\"0.5\"} 1\nt_bucket{kind=\"suite\",le=\"1\"} 2\nt_bucket{kind=\"suite\",le=\"+Inf\"} 3\nt_sum{kind=\"suite\"} 3.9\nt_count{kind=\"suite\"} 3\n"
        );
    }
}
