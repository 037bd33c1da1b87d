//! `assay test`'s result cache: a case that passed (or was skipped) on this very tree, with
//! the same runner command, run context and timeout, is answered from the entry that run
//! stored instead of running again. What the key holds, and why entries are per case, is in
//! docs/FORMATS.md ("Suite cases").
//!
//! Entries are per case, not per batch: batches are planned from history, so the cases a
//! batch holds change between runs, and a batch key would rarely be seen twice. Each entry
//! points at its batch's pinned report (and the case's own output) by sha256; every read
//! re-checks those, re-parses the report and derives the case's outcome again.
//!
//! Trust follows Bazel's rule for tests: only passes and skips are stored, from jobs that
//! completed with a trustworthy report; a failure always runs again (a cached one could be a
//! flake, and whoever re-runs a failing suite wants to see it fail), and so do timeouts,
//! infrastructure failures, cases failing any variant or attempt in the report, every pass of
//! a pytest session that re-ran a test (a retry plugin reports only the last attempt, so which
//! pass needed one is not in the report), and every case the quarantine ledger lists.

use super::driven::{Answers, Driven};
use super::ledger::Ledger;
use super::runners::{SuiteRunner, SuiteSetup};
use crate::result_cache::{
    CacheError, Producer, Refusal, ResultCache, RunContext, epoch_secs, report_artifact_name,
    schema_key,
};
use assay_common::job::ArtifactRef;
use assay_common::job::{JobResult, JobSpec, JobStatus};
use assay_common::report;
use assay_common::runner::ReportFormat;
use assay_common::suite::{
    CachedCase, CaseOutcome, CaseReport, Lane, RefusedEntry, SuiteCase, derive_outcome,
};
use assay_common::{ProofId, TreeId};
use assay_transport::error_chain::error_chain;
use assay_transport::store::{read_artifact, read_named};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The entries' schema, which also starts their key space.
pub const SCHEMA: &str = "assay.cache.case/v2";
/// Where entries live in the artifact store, inside the result cache's own prefix, so
/// `assay cache stats` and `prune` see them.
pub const PREFIX: &str = "cache/v1/cases";

/// A stored pass or skip of one case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseEntry {
    /// The entry's schema; an entry of another is never served.
    pub schema: String,
    /// The cache key the entry answers.
    pub key: String,
    /// The case's id (pytest's node id, the runner's case name).
    pub case: String,
    /// The run that stored it and its job that ran the case.
    pub produced_by: Producer,
    /// Seconds since the epoch.
    pub created_at: u64,
    /// `passed` or `skipped`.
    pub outcome: CaseOutcome,
    /// The case's own time in that run.
    pub duration_s: Option<f64>,
    /// The job's exit code, with which its report is judged again.
    pub exit_code: i32,
    /// The job's structured report (for a report on stdout, its stdout), by sha256.
    pub report: ArtifactRef,
    /// The case's own output in that run, by sha256.
    pub artifacts: Vec<ArtifactRef>,
    /// Hex HMAC-SHA256 of the entry without this field, under the key of whoever may write
    /// the cache (see `cache::SigningKey`); an entry without one is never served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

crate::result_cache::signed_entry!(CaseEntry, SCHEMA);

/// A case looked up: its index in the run's cases, the case, its key, and its entry checked
/// on its own (`Ok(None)`: no entry).
type Fetched<'a> = (
    usize,
    &'a SuiteCase,
    String,
    Result<Option<CaseEntry>, Refusal>,
);

/// Store reads or writes in flight at once for one run's entries.
const PARALLEL_IO: usize = 16;

fn entry_key(key: &str) -> String {
    format!("{PREFIX}/{key}.json")
}

/// The cache as `assay test` uses it: where entries live, and what, beside the case itself,
/// decides its outcome.
#[derive(Clone)]
pub struct CaseCache {
    /// The result cache the entries live in.
    pub cache: ResultCache,
    /// A job of this suite with no selection: its tree, the runner's command without the
    /// cases, the report format and the timeout, keyed with each case's id.
    template: JobSpec,
    context: RunContext,
}

impl std::fmt::Debug for CaseCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaseCache")
            .field("mode", &self.cache.mode)
            .field("command", &self.template.command)
            .finish()
    }
}

/// Why a suite's cases cannot be cached, for its runner; `None` when they can.
pub fn uncacheable(runner: SuiteRunner) -> Option<&'static str> {
    runner.runner().suite_uncacheable()
}

impl CaseCache {
    /// The cache of `setup`'s cases on `tree`; `None` where [`uncacheable`] says so.
    pub fn new(
        cache: ResultCache,
        context: RunContext,
        setup: &SuiteSetup,
        tree: &TreeId,
        timeout_secs: u64,
    ) -> Option<Self> {
        if uncacheable(setup.runner).is_some() {
            return None;
        }
        let template = super::unselected_job(
            &ProofId("case-key".into()),
            setup,
            tree,
            setup.case_command(&[]),
            timeout_secs,
        );
        Some(Self {
            cache,
            template,
            context,
        })
    }

    /// The key of the case `id`.
    pub fn key(&self, id: &str) -> String {
        let spec = JobSpec {
            selected_tests: vec![id.to_owned()],
            ..self.template.clone()
        };
        schema_key(SCHEMA, &spec, &self.context)
    }

    /// Looks every case up (none the ledger lists: a quarantined case is under watch and
    /// runs). Each answer is checked; a refused entry is a miss, reported with why.
    pub async fn answer(&self, cases: &[SuiteCase], ledger: &Ledger, today: &str) -> Answers {
        let mut answers = Answers::default();
        if !self.cache.serves() {
            return answers;
        }
        let watched: Vec<(usize, &SuiteCase)> = cases
            .iter()
            .enumerate()
            .filter(|(_, case)| !ledger.excuses(&case.id, today))
            .collect();
        answers.looked_up = watched.len();
        // Entries and each case's own output are read a few at a time; the reports they pin,
        // which a batch's cases share, are then read and judged once each.
        let fetched: Vec<Fetched<'_>> =
            futures::stream::iter(watched.into_iter().map(|(i, case)| async move {
                let key = self.key(&case.id);
                let fetched = self.fetch(&key, case).await;
                (i, case, key, fetched)
            }))
            .buffered(PARALLEL_IO)
            .collect()
            .await;
        let mut reports = ParsedReports::default();
        for (i, case, key, fetched) in fetched {
            let judged = match fetched {
                Ok(Some(entry)) => self.judge(&key, case, entry, &mut reports).await.map(Some),
                Ok(None) => Ok(None),
                Err(why) => Err(why),
            };
            match judged {
                Ok(Some(report)) => {
                    answers.reports.insert(i, report);
                }
                Ok(None) => {}
                Err(why) => {
                    tracing::warn!(
                        key,
                        %why,
                        "refusing a case cache entry that failed its checks"
                    );
                    answers.refused.push(RefusedEntry {
                        entry: key,
                        why: why.to_string(),
                    });
                }
            }
        }
        answers
    }

    /// The entry for `case` under `key`, checked on its own: it names this key, schema and
    /// case, claims an outcome that is stored, and its artifacts are in the store with their
    /// sha256. `Ok(None)`: no entry.
    async fn fetch(&self, key: &str, case: &SuiteCase) -> Result<Option<CaseEntry>, Refusal> {
        let Some(entry) = self.cache.fetch::<CaseEntry>(&entry_key(key), key).await? else {
            return Ok(None);
        };
        if entry.case != case.id {
            return Err(Refusal::OtherCase {
                entry: entry.case.to_string(),
                case: case.id.to_string(),
            });
        }
        if !matches!(entry.outcome, CaseOutcome::Passed | CaseOutcome::Skipped) {
            return Err(Refusal::NeverStored);
        }
        for artifact in &entry.artifacts {
            read_artifact(self.cache.store(), artifact)
                .await
                .map_err(|e| Refusal::MissingArtifact(error_chain(&e)))?;
        }
        Ok(Some(entry))
    }

    /// `entry`'s answer for `case`, when its pinned report (in the store with its sha256),
    /// parsed again, gives the case the outcome the entry claims.
    async fn judge(
        &self,
        key: &str,
        case: &SuiteCase,
        entry: CaseEntry,
        reports: &mut ParsedReports,
    ) -> Result<CaseReport, Refusal> {
        let run = reports.get(self, &entry).await?;
        let judged = derive_outcome(case, run);
        if judged.outcome != entry.outcome || judged.lane != Lane::Guest {
            return Err(Refusal::OutcomeDiffers {
                judged: format!("{:?}", judged.outcome),
                claimed: format!("{:?}", entry.outcome),
            });
        }
        Ok(CaseReport {
            reference: case.reference(),
            display: case.display(),
            outcome: entry.outcome,
            lane: Lane::Guest,
            quarantined: false,
            order_dependent: false,
            message: judged.message,
            duration_s: entry.duration_s,
            job: None,
            artifacts: entry.artifacts,
            cached: Some(CachedCase {
                entry: key.to_owned(),
                run_id: entry.produced_by.proof_id.to_string(),
                job_id: entry.produced_by.job_id.to_string(),
            }),
        })
    }

    /// Stores the passes and skips of `driven`'s jobs that may answer later runs (see the
    /// module's rules); `reports` are the run's decided cases, by index into `driven.cases`.
    /// Returns how many entries were written.
    pub async fn store(
        &self,
        run_id: &ProofId,
        driven: &Driven,
        reports: &[CaseReport],
        ledger: &Ledger,
        today: &str,
    ) -> Result<usize, CacheError> {
        if !self.cache.stores() {
            return Ok(0);
        }
        let now = epoch_secs();
        let mut encoded = Vec::new();
        for (spec, members) in driven.plan.iter().zip(&driven.shards) {
            let Some(result) = driven
                .run
                .results
                .get(spec.index as usize)
                .and_then(Option::as_ref)
            else {
                continue;
            };
            let JobStatus::Completed { exit_code } = result.status else {
                continue;
            };
            let trusted = result.report.parsed().is_some() && result.report.problem().is_none();
            let Some(report) = report_artifact(result, &spec.report) else {
                continue;
            };
            if !trusted || self.reran(result).await {
                continue;
            }
            for &i in members {
                let (Some(case), Some(decided)) = (driven.cases.get(i), reports.get(i)) else {
                    continue;
                };
                let storable =
                    matches!(decided.outcome, CaseOutcome::Passed | CaseOutcome::Skipped)
                        && decided.lane == Lane::Guest
                        && decided.cached.is_none()
                        && !ledger.excuses(&case.id, today);
                if !storable {
                    continue;
                }
                let key = self.key(&case.id);
                let mut entry = CaseEntry {
                    schema: SCHEMA.into(),
                    key: key.clone(),
                    case: case.id.clone(),
                    produced_by: Producer {
                        proof_id: run_id.clone(),
                        job_id: result.job_id.clone(),
                    },
                    created_at: now,
                    outcome: decided.outcome,
                    duration_s: decided.duration_s,
                    exit_code,
                    report: report.clone(),
                    artifacts: decided.artifacts.clone(),
                    signature: None,
                };
                self.cache.seal(&mut entry);
                let json = serde_json::to_vec(&entry).map_err(|source| CacheError::Encode {
                    key: key.clone(),
                    source,
                })?;
                encoded.push((key, json));
            }
        }
        let written = encoded.len();
        // A suite's entries are many and small: written a few at a time, not one by one.
        let mut puts = futures::stream::iter(encoded.into_iter().map(|(key, json)| async move {
            self.cache
                .store()
                .put_bytes("cache-entry", &entry_key(&key), json.into())
                .await
                .map_err(|source| CacheError::Write { key, source })
        }))
        .buffer_unordered(PARALLEL_IO);
        while let Some(put) = puts.next().await {
            put?;
        }
        Ok(written)
    }
}

impl CaseCache {
    /// Whether `result`'s pytest session re-ran a test; an unreadable output counts as one.
    async fn reran(&self, result: &JobResult) -> bool {
        if !matches!(self.template.report, ReportFormat::JunitXml) {
            return false;
        }
        match read_named(self.cache.store(), result, "stdout").await {
            Ok(Some(stdout)) => reports_reruns(&String::from_utf8_lossy(&stdout)),
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(job = result.index, error = %e, "cannot read a batch's output");
                true
            }
        }
    }
}

/// Whether pytest's closing summary line (`=== 3 passed, 1 rerun in 0.12s ===`, or without the
/// rules under `-q`) counts re-runs, as retry plugins make it do.
fn reports_reruns(stdout: &str) -> bool {
    let summary = stdout.lines().rev().find_map(|line| {
        let core = line.trim().trim_matches('=').trim();
        let (counts, secs) = core.rsplit_once(" in ")?;
        let secs = secs.split_whitespace().next()?.strip_suffix('s')?;
        secs.parse::<f64>().ok().map(|_| counts)
    });
    summary.is_some_and(|counts| {
        counts
            .split([',', ' '])
            .any(|word| word == "rerun" || word == "reruns")
    })
}

/// The artifact of `result` that holds its structured report.
fn report_artifact(result: &JobResult, format: &ReportFormat) -> Option<ArtifactRef> {
    let name = report_artifact_name(format);
    result.artifacts.iter().find(|a| a.name == name).cloned()
}

/// Reports read and parsed during one run's lookups, by key, sha256 and exit code, as the run
/// that ran them would judge them: a batch's cases share one report, which is checked and
/// parsed once.
#[derive(Default)]
struct ParsedReports(HashMap<(String, String, i32), Result<JobResult, Refusal>>);

impl ParsedReports {
    async fn get(&mut self, cache: &CaseCache, entry: &CaseEntry) -> Result<&JobResult, Refusal> {
        let artifact = &entry.report;
        let id = (
            artifact.key.clone(),
            artifact.sha256.to_ascii_lowercase(),
            entry.exit_code,
        );
        if !self.0.contains_key(&id) {
            let parsed = match read_artifact(cache.cache.store(), artifact).await {
                Ok(bytes) => match report::parse(&cache.template.report, Some(&bytes)) {
                    outcome if outcome.problem().is_none() => Ok(JobResult {
                        job_id: entry.produced_by.job_id.clone(),
                        index: 0,
                        status: JobStatus::Completed {
                            exit_code: entry.exit_code,
                        },
                        report: outcome,
                        artifacts: Vec::new(),
                        duration_ms: 0,
                        worker: assay_common::WorkerId("cache".into()),
                        sandbox: None,
                    }),
                    outcome => Err(Refusal::UntrustedReport(
                        outcome.problem().unwrap_or_default().to_string(),
                    )),
                },
                Err(e) => Err(Refusal::MissingArtifact(error_chain(&e))),
            };
            self.0.insert(id.clone(), parsed);
        }
        match self.0.get(&id) {
            Some(Ok(run)) => Ok(run),
            // The same refusal for every case of the batch, as the first one was told.
            Some(Err(why)) => Err(why.clone()),
            None => Err(Refusal::UntrustedReport("the report was not read".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_line_that_counts_reruns_is_told_apart() {
        let rerun = "tests/test_feed.py R.\n=========== 2 passed, 1 rerun in 0.31s ===========\n";
        assert!(reports_reruns(rerun));
        assert!(reports_reruns(
            "== 1 failed, 4 passed, 2 reruns in 1.02s =="
        ));
        assert!(!reports_reruns(
            "======= 6 passed, 1 skipped in 0.12s =======\n"
        ));
        // A test named after reruns is no summary.
        assert!(!reports_reruns(
            "test_rerun_budget PASSED\n===== 1 passed in 0.01s =====\n"
        ));
        assert!(!reports_reruns(""));
    }
}
