//! The result cache: a job whose every input was seen before is answered from the stored result
//! of that earlier run instead of running again, so re-proving a change after a product-only
//! edit runs only what the edit touched.
//!
//! It sits in front of any [`JobQueue`](assay_transport::queue::JobQueue) ([`CachingQueue`]),
//! so every dispatcher loop gets it in one place. The traps it avoids, and how:
//! - a stale result: the key digests everything that can change a result (see [`cache_key`]
//!   and docs/FORMATS.md, "Result cache"); what is not in the key never reaches the job;
//! - a flaky result cached as truth: only results [`ResultCache::store_trusted`] accepts are
//!   written — completed, with a trustworthy report, from a proof none of whose criteria was
//!   unstable; never timeouts, infrastructure failures, cancelled or report-less runs;
//! - a poisoned entry: every read re-checks the entry and each artifact it names against
//!   their sha256, and re-parses the pinned report; anything off is a miss, reported, never used;
//! - a forged entry, written by whoever else can write the store: a fleet's submitters (they
//!   hold store credentials), or on one machine the code under test of an earlier run. Every
//!   entry is signed by whoever may write it (HMAC-SHA256, [`SigningKey`]): a fleet's
//!   coordinator with its key, an embedded run with its user's key (made on first use, kept
//!   where no confined guest can read it, [`SigningKey::user_key_path`]); only entries that verify
//!   are served.

use assay_common::evidence::{CachedFrom, Evidence};
use assay_common::job::{JobResult, JobSpec, JobStatus};
use assay_common::report;
use assay_common::runner::{ReportFormat, ReportLocation};
use assay_common::sandbox::SandboxEvidence;
use assay_common::verdict::Verdict;
use assay_common::{JobId, ProofId};
use assay_transport::error_chain::error_chain;
use assay_transport::store::{ArtifactStore, StoreError, read_artifact};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The entries' schema; a new one starts a new key space.
pub const SCHEMA: &str = "assay.cache/v2";
/// Where entries live in the artifact store.
pub const PREFIX: &str = "cache/v1";

pub use assay_common::fleet::CacheMode;

mod caching_queue;
mod key;
mod signing;

pub use caching_queue::{CachingQueue, Settled};
pub(crate) use key::schema_key;
pub use key::{RunContext, cache_key};
pub(crate) use signing::signed_entry;
pub use signing::{MIN_KEY_BYTES, Signed, SigningKey, SigningKeyError};

/// Why the result cache could not be written, listed or pruned.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// An entry could not be put in the store.
    #[error("failed to write cache entry {key}")]
    Write {
        /// The entry's store key.
        key: String,
        /// The store's failure.
        #[source]
        source: StoreError,
    },
    /// An entry could not be encoded as JSON.
    #[error("failed to encode cache entry {key}")]
    Encode {
        /// The entry's store key.
        key: String,
        /// The encoder's failure.
        #[source]
        source: serde_json::Error,
    },
    /// The store's listing of the cache failed.
    #[error("failed to list the result cache")]
    List(#[source] StoreError),
    /// An entry could not be deleted from the store.
    #[error("failed to delete cache entry {key}")]
    Delete {
        /// The entry's store key.
        key: String,
        /// The store's failure.
        #[source]
        source: StoreError,
    },
}

/// Why a run answers nothing from the result cache and stores nothing in it.
#[derive(Debug, thiserror::Error)]
pub enum CacheUnavailable {
    /// The user turned the cache off (`--no-cache`).
    #[error("--no-cache")]
    TurnedOff,
    #[error(
        "a fleet run's workers choose their own sandbox and interpreter, and only a fleet's coordinator may write cache entries"
    )]
    /// A fleet run: its workers' sandboxes are not this host's, and only the coordinator may write.
    OnAFleet,
    /// The runner's cases cannot be checked against a pinned report.
    #[error("{runner} suites: {why}")]
    Uncacheable {
        /// The suite's runner.
        runner: assay_common::suite::SuiteRunner,
        /// What keeps its cases from being checked.
        why: &'static str,
    },
    /// The tests run without a sandbox, so they could write the cache themselves.
    #[error("the code under test runs unconfined, so it could write the cache")]
    Unconfined,
    /// The key that signs and checks entries cannot be read or created.
    #[error("the cache's signing key cannot be had")]
    SigningKey(#[from] SigningKeyError),
}

signed_entry!(CacheEntry, SCHEMA);

/// Why a stored entry is not served: the job (or mutant, or case) then runs as if nothing
/// were stored, and the refusal is counted and printed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The store failed to read the entry; the store's message.
    #[error("the store cannot be read: {0}")]
    Unreadable(String),
    /// The entry is not a cache entry's JSON; the parser's message.
    #[error("the entry does not parse: {0}")]
    Unparsable(String),
    /// The entry holds another key or schema than the one it is stored under.
    #[error("the entry names another key or schema")]
    OtherKey,
    /// The entry has no signature; names the key it needed.
    #[error("the entry is not signed by {0}")]
    Unsigned(&'static str),
    /// The entry's signature does not verify; names the key it was checked under.
    #[error("the entry's signature does not verify under {0}")]
    Forged(&'static str),
    /// An artifact the entry pins is gone or altered; the store's message.
    #[error("a pinned artifact cannot be read: {0}")]
    MissingArtifact(String),
    /// The pinned report says another thing than the entry's result.
    #[error("the pinned report does not say what the entry claims")]
    ReportDiffers,
    /// The pinned report cannot be trusted; why.
    #[error("its pinned report is not one to trust: {0}")]
    UntrustedReport(String),
    /// The entry's runs, judged again, give another verdict than it claims.
    #[error("its runs do not judge to the verdict the entry claims")]
    VerdictDiffers,
    /// A case's entry found under another case's key.
    #[error("the entry is for {entry}, not {case}")]
    OtherCase {
        /// The case the entry was stored for.
        entry: String,
        /// The case asked about.
        case: String,
    },
    /// The entry claims a case outcome other than passed or skipped, which the cache never stores.
    #[error("the entry claims an outcome that is never stored")]
    NeverStored,
    /// The pinned report gives the case another outcome than the entry claims.
    #[error("its pinned report gives the case {judged}, not the {claimed} the entry claims")]
    OutcomeDiffers {
        /// The case's outcome as the pinned report gives it.
        judged: String,
        /// The outcome the entry claims.
        claimed: String,
    },
}

/// Which run produced an entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Producer {
    /// The proof that ran the job.
    pub proof_id: ProofId,
    /// The job whose result was stored.
    pub job_id: JobId,
}

/// A stored result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheEntry {
    /// The entry format's schema name; an entry of another schema is never served.
    pub schema: String,
    /// The cache key the entry answers (see [`cache_key`]).
    pub key: String,
    /// The run that produced the result.
    pub produced_by: Producer,
    /// Seconds since the epoch.
    pub created_at: u64,
    /// The job's result, its artifacts pinned by key and sha256.
    pub result: JobResult,
    /// Hex HMAC-SHA256 of the entry without this field, under the key of whoever may write
    /// the cache (see `cache::SigningKey`); an entry without one is never served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// A job answered from the cache: the entry's key and the run that produced it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheHit {
    /// The key of the entry that answered.
    pub key: String,
    /// The run that produced the entry.
    pub produced_by: Producer,
}

impl CacheHit {
    /// Marks each job of `evidence` that `served` answered from the cache. Such a job ran
    /// for no time in this proof (its `duration_s` is the producing run's): its start is when
    /// its answer arrived, `finished_at_ms` in plan order.
    pub fn mark(
        evidence: &mut Evidence,
        served: &BTreeMap<JobId, CacheHit>,
        finished_at_ms: &[u64],
    ) {
        for (i, job) in evidence.jobs.iter_mut().enumerate() {
            if let Some(hit) = served.get(&JobId(job.job_id.clone())) {
                job.started_at_ms = finished_at_ms.get(i).copied();
                job.cached = Some(CachedFrom {
                    entry: hit.key.clone(),
                    proof_id: hit.produced_by.proof_id.to_string(),
                    job_id: hit.produced_by.job_id.to_string(),
                });
            }
        }
    }
}

/// What a lookup found.
#[derive(Debug)]
pub enum Lookup {
    /// A stored entry passed every check: serve its result.
    Hit(Box<CacheEntry>),
    /// Nothing is stored under the key.
    Miss,
    /// An entry was there but failed a check: never used.
    Rejected {
        /// The key the entry was stored under.
        key: String,
        /// The check it failed.
        why: Refusal,
    },
}

fn entry_key(key: &str) -> String {
    format!("{PREFIX}/{key}.json")
}

/// The name of the artifact that holds a job's report in `format`: its stdout for a report
/// written there, its `report` otherwise.
pub(crate) fn report_artifact_name(format: &ReportFormat) -> &'static str {
    match format.location() {
        ReportLocation::Stdout => "stdout",
        _ => "report",
    }
}

/// Seconds since the epoch, as entries record when they were written.
pub(crate) fn epoch_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Checks a stored result against the store: every artifact it names must be there with its
/// recorded sha256, and its report must re-parse to the result's own report. `Err` says why not.
pub(crate) async fn check_pinned(
    store: &dyn ArtifactStore,
    result: &JobResult,
    format: &ReportFormat,
) -> Result<(), Refusal> {
    check_pinned_as(store, result, format, |bytes, stderr| {
        reparse(format, bytes, stderr, &result.report)
    })
    .await
}

/// [`check_pinned`] with the pinned report (the bytes of the artifact `format` names, and the
/// run's stored stderr) read again by `reread`: for a run whose report is its part of a larger
/// one.
pub(crate) async fn check_pinned_as(
    store: &dyn ArtifactStore,
    result: &JobResult,
    format: &ReportFormat,
    reread: impl FnOnce(Option<&[u8]>, &[u8]) -> assay_common::outcome::ReportOutcome + Send,
) -> Result<(), Refusal> {
    let mut report_bytes = None;
    let mut stderr = bytes::Bytes::new();
    for artifact in &result.artifacts {
        let bytes = read_artifact(store, artifact)
            .await
            .map_err(|e| Refusal::MissingArtifact(error_chain(&e)))?;
        if artifact.name == report_artifact_name(format) {
            report_bytes = Some(bytes);
        } else if artifact.name == "stderr" {
            stderr = bytes;
        }
    }
    if reread(report_bytes.as_deref(), &stderr) != result.report {
        return Err(Refusal::ReportDiffers);
    }
    Ok(())
}

/// A pinned report parsed again as the worker parsed it. Node and Vitest name test files
/// absolutely, under the directory the job's tree was in, which the worker made relative
/// (`report::parse_in_tree`); an entry does not record that directory, so it is read off the
/// first file the claimed report names relatively, and the whole report must then agree. What
/// the worker completed from the job's stderr (`report::complete_from_stderr`) is completed
/// again from the stored `stderr`.
pub(crate) fn reparse(
    format: &ReportFormat,
    bytes: Option<&[u8]>,
    stderr: &[u8],
    claimed: &assay_common::outcome::ReportOutcome,
) -> assay_common::outcome::ReportOutcome {
    use assay_common::outcome::ReportOutcome;
    let complete = |outcome: ReportOutcome| match outcome {
        ReportOutcome::Parsed(mut parsed) => {
            report::complete_from_stderr(format, &mut parsed, stderr);
            ReportOutcome::Parsed(parsed)
        }
        other => other,
    };
    let parsed = complete(report::parse(format, bytes));
    let (ReportOutcome::Parsed(absolute), ReportOutcome::Parsed(relative)) = (&parsed, claimed)
    else {
        return parsed;
    };
    let files = |report: &assay_common::outcome::TestReport| -> Vec<String> {
        report
            .cases
            .iter()
            .map(|case| case.file.clone())
            .chain(report.collection_errors.iter().map(|e| e.file.clone()))
            .collect()
    };
    let root = files(absolute)
        .iter()
        .zip(files(relative))
        .find_map(|(absolute, relative)| {
            let root = absolute
                .strip_suffix(relative.as_str())?
                .strip_suffix('/')?;
            (!root.is_empty() && !relative.is_empty()).then(|| root.to_owned())
        });
    match root {
        Some(root) => complete(report::parse_in_tree(format, bytes, &root)),
        None => parsed,
    }
}

/// The cache over an artifact store.
#[derive(Clone)]
pub struct ResultCache {
    store: Arc<dyn ArtifactStore>,
    /// Whether hits are served, results stored over what was there, or the cache is off.
    pub mode: CacheMode,
    /// Signs what is stored; only entries that verify under it are served. `None` only for a
    /// cache that is off.
    key: Option<Arc<SigningKey>>,
    /// A fleet's declared sandbox: only results whose worker reports it are stored.
    declared: Option<SandboxEvidence>,
}

impl ResultCache {
    /// An embedded run's cache, signed with its user's key ([`SigningKey::user_key_path`]).
    pub fn new(store: Arc<dyn ArtifactStore>, mode: CacheMode, key: Arc<SigningKey>) -> Self {
        Self {
            store,
            mode,
            key: Some(key),
            declared: None,
        }
    }

    /// A cache that neither serves nor stores: for counting and pruning entries, and for runs
    /// that may not use the cache.
    pub fn off(store: Arc<dyn ArtifactStore>) -> Self {
        Self {
            store,
            mode: CacheMode::Off,
            key: None,
            declared: None,
        }
    }

    /// A fleet coordinator's cache: it stores only results run in the `declared` sandbox,
    /// signs each entry with `key`, and serves only entries that verify under it.
    pub fn signed(
        store: Arc<dyn ArtifactStore>,
        mode: CacheMode,
        key: Arc<SigningKey>,
        declared: SandboxEvidence,
    ) -> Self {
        Self {
            store,
            mode,
            key: Some(key),
            declared: Some(declared),
        }
    }

    /// Whether the cache serves entries.
    pub(crate) fn serves(&self) -> bool {
        self.mode == CacheMode::Use && self.key.is_some()
    }

    /// Whether the cache stores entries.
    pub(crate) fn stores(&self) -> bool {
        self.mode != CacheMode::Off && self.key.is_some()
    }

    /// Signs `entry` with this cache's key.
    pub(crate) fn seal<E: Signed>(&self, entry: &mut E) {
        entry.set_signature(None);
        let signature = self.key.as_ref().map(|key| key.sign(entry));
        entry.set_signature(signature);
    }

    /// Why `entry` may not be served, if it may not: it is unsigned, or its signature does not
    /// verify under this cache's key (someone else wrote it, or altered it).
    pub(crate) fn check_seal<E: Signed>(&self, entry: &E) -> Result<(), Refusal> {
        let (signer, key_name) = if self.declared.is_some() {
            ("this fleet's coordinator", "this fleet's key")
        } else {
            ("this user's key", "this user's key")
        };
        match &self.key {
            _ if entry.signature().is_none() => Err(Refusal::Unsigned(signer)),
            Some(key) if key.verifies(entry) => Ok(()),
            _ => Err(Refusal::Forged(key_name)),
        }
    }

    /// The entry stored at `path` for `key`, parsed and sealed by this cache's key; `None`
    /// when nothing is stored there. What else makes an entry usable is its cache's to check.
    pub(crate) async fn fetch<E: Signed>(
        &self,
        path: &str,
        key: &str,
    ) -> Result<Option<E>, Refusal> {
        let bytes = match self.store.get(path).await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Ok(None),
            Err(e) => return Err(Refusal::Unreadable(error_chain(&e))),
        };
        let entry: E =
            serde_json::from_slice(&bytes).map_err(|e| Refusal::Unparsable(e.to_string()))?;
        if entry.schema() != E::SCHEMA || entry.key() != key {
            return Err(Refusal::OtherKey);
        }
        self.check_seal(&entry)?;
        Ok(Some(entry))
    }

    pub(crate) fn store(&self) -> &dyn ArtifactStore {
        self.store.as_ref()
    }

    /// The entry for `key`, checked: it must name this key, every artifact it names must be in
    /// the store with its recorded sha256, and its report must re-parse to the result it
    /// claims. A store that cannot be read is a miss too: the job simply runs.
    pub async fn lookup(&self, key: &str, spec: &JobSpec) -> Lookup {
        if !self.serves() {
            return Lookup::Miss;
        }
        let reject = |why: Refusal| Lookup::Rejected {
            key: key.to_owned(),
            why,
        };
        let entry: CacheEntry = match self.fetch(&entry_key(key), key).await {
            Ok(Some(entry)) => entry,
            Ok(None) => return Lookup::Miss,
            Err(why) => return reject(why),
        };
        if let Err(why) = check_pinned(self.store.as_ref(), &entry.result, &spec.report).await {
            return reject(why);
        }
        Lookup::Hit(Box::new(entry))
    }

    /// Stores the results of a finished proof that may serve later runs: completed jobs with a
    /// trustworthy report, of a proof whose criteria were all decided without instability.
    /// Jobs served from the cache, timeouts, infrastructure failures, cancelled jobs and
    /// mutants (report-only, unconfirmed) are never stored. Returns how many were written.
    pub async fn store_trusted(
        &self,
        keyed: &BTreeMap<JobId, String>,
        served: &BTreeMap<JobId, CacheHit>,
        results: &[JobResult],
        evidence: &Evidence,
    ) -> Result<usize, CacheError> {
        if !self.stores()
            || evidence
                .criteria
                .iter()
                .any(|c| c.verdict == Verdict::Unstable)
        {
            return Ok(0);
        }
        let now = epoch_secs();
        let mut written = 0;
        for result in results {
            let Some(key) = keyed.get(&result.job_id) else {
                continue;
            };
            let trusted = matches!(result.status, JobStatus::Completed { .. })
                && result.report.parsed().is_some()
                && result.report.problem().is_none();
            if !trusted || served.contains_key(&result.job_id) {
                continue;
            }
            if let Some(why) = result.sandbox.as_ref().and_then(|s| s.unconfined()) {
                // The guest could reach the store, and this very entry.
                tracing::warn!(job_id = %result.job_id, %why, "not caching a result of an unconfined guest");
                continue;
            }
            if let Some(declared) = &self.declared
                && !result
                    .sandbox
                    .as_ref()
                    .is_some_and(|s| s.is_declared(declared))
            {
                // The key says the declared sandbox ran it; this worker's did not.
                tracing::warn!(
                    job_id = %result.job_id,
                    worker = %result.worker,
                    reported = ?result.sandbox,
                    "not caching a result whose worker's sandbox is not the declared [cache] sandbox"
                );
                continue;
            }
            let mut entry = CacheEntry {
                schema: SCHEMA.into(),
                key: key.clone(),
                produced_by: Producer {
                    proof_id: ProofId(evidence.proof_id.clone()),
                    job_id: result.job_id.clone(),
                },
                created_at: now,
                result: result.clone(),
                signature: None,
            };
            self.seal(&mut entry);
            let json = serde_json::to_vec(&entry).map_err(|source| CacheError::Encode {
                key: key.clone(),
                source,
            })?;
            self.store
                .put_bytes("cache-entry", &entry_key(key), json.into())
                .await
                .map_err(|source| CacheError::Write {
                    key: key.clone(),
                    source,
                })?;
            written += 1;
        }
        Ok(written)
    }

    /// How many entries the cache holds and their size in bytes, and how many of them lie
    /// under each of `kinds` (a prefix inside [`PREFIX`], such as the mutant or case cache's):
    /// the caller names the caches it reports, so this one knows none of them.
    pub async fn stats(&self, kinds: &[&str]) -> Result<CacheStats, CacheError> {
        let objects = self.store.list(PREFIX).await.map_err(CacheError::List)?;
        let under = |prefix: &str| {
            let prefix = format!("{prefix}/");
            objects
                .iter()
                .filter(|o| o.key.starts_with(&prefix))
                .count()
        };
        Ok(CacheStats {
            entries: objects.len(),
            under: kinds.iter().map(|kind| under(kind)).collect(),
            bytes: objects.iter().map(|o| o.bytes).sum(),
            oldest_secs: objects.iter().map(|o| o.modified_secs).min(),
        })
    }

    /// Deletes entries older than `max_age_secs`, then the oldest until the rest fit in
    /// `max_bytes`. Artifacts stay: proofs' evidence names them too.
    pub async fn prune(
        &self,
        now_secs: i64,
        max_age_secs: Option<i64>,
        max_bytes: Option<u64>,
    ) -> Result<usize, CacheError> {
        let mut objects = self.store.list(PREFIX).await.map_err(CacheError::List)?;
        objects.sort_by_key(|o| std::cmp::Reverse(o.modified_secs));
        let mut kept_bytes = 0u64;
        let mut deleted = 0;
        for object in objects {
            let too_old = max_age_secs.is_some_and(|age| now_secs - object.modified_secs > age);
            let too_big = max_bytes.is_some_and(|limit| kept_bytes + object.bytes > limit);
            if too_old || too_big {
                self.store
                    .delete(&object.key)
                    .await
                    .map_err(|source| CacheError::Delete {
                        key: object.key.clone(),
                        source,
                    })?;
                deleted += 1;
            } else {
                kept_bytes += object.bytes;
            }
        }
        Ok(deleted)
    }
}

/// What the result cache holds, for `assay cache stats`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheStats {
    /// Every entry, of every kind.
    pub entries: usize,
    /// The entries under each prefix the caller named, in its order.
    pub under: Vec<usize>,
    /// The entries' size in all, in bytes.
    pub bytes: u64,
    /// The oldest entry's modification time, in seconds since the epoch; `None` when empty.
    pub oldest_secs: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> CacheEntry {
        CacheEntry {
            schema: SCHEMA.into(),
            key: "9f2c".into(),
            produced_by: Producer {
                proof_id: ProofId("pricing-1".into()),
                job_id: JobId("pricing-1/0000".into()),
            },
            created_at: 1_790_000_000,
            result: JobResult {
                job_id: JobId("pricing-1/0000".into()),
                index: 0,
                status: JobStatus::Completed { exit_code: 1 },
                report: assay_common::outcome::ReportOutcome::Missing,
                artifacts: Vec::new(),
                duration_ms: 800,
                worker: assay_common::WorkerId("worker-a".into()),
                sandbox: None,
            },
            signature: None,
        }
    }

    fn key(byte: u8) -> SigningKey {
        SigningKey(vec![byte; MIN_KEY_BYTES])
    }

    #[test]
    fn a_signature_verifies_only_under_its_key_and_only_for_what_it_signed() {
        let mut signed = entry();
        signed.signature = Some(key(7).sign(&signed));
        assert!(key(7).verifies(&signed));
        assert!(!key(8).verifies(&signed), "another key's coordinator");
        assert!(!key(7).verifies(&entry()), "unsigned");
        let mut altered = signed.clone();
        altered.result.status = JobStatus::Completed { exit_code: 0 };
        assert!(!key(7).verifies(&altered), "a result changed after signing");
        let mut garbled = signed;
        garbled.signature = Some("not hex".into());
        assert!(!key(7).verifies(&garbled));
    }

    #[test]
    fn a_go_build_failure_re_reads_with_the_compiler_error_from_the_stored_stderr() {
        use assay_common::outcome::ReportOutcome;
        let format = ReportFormat::GoTestJson;
        let stdout: &[u8] = b"FAIL\texample.com/pager/ledger [build failed]\n";
        let stderr: &[u8] = b"# example.com/pager/ledger [example.com/pager/ledger.test]\n\
            ledger/ledger_test.go:8:5: undefined: RoundedTotal\n";
        // What the worker judged: the report completed from the job's stderr.
        let ReportOutcome::Parsed(mut claimed) = report::parse(&format, Some(stdout)) else {
            panic!("expected a parsed report")
        };
        report::complete_from_stderr(&format, &mut claimed, stderr);
        let claimed = ReportOutcome::Parsed(claimed);
        assert_eq!(reparse(&format, Some(stdout), stderr, &claimed), claimed);
        assert_ne!(reparse(&format, Some(stdout), b"", &claimed), claimed);
    }

    #[test]
    fn a_short_or_missing_key_file_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache-key");
        std::fs::write(&path, "secret\n").unwrap();
        let err = SigningKey::from_file(&path).unwrap_err().to_string();
        assert!(
            err.contains("cache-key") && err.contains("6 bytes"),
            "{err}"
        );
        let err = SigningKey::from_file(&dir.path().join("absent")).unwrap_err();
        assert!(matches!(err, SigningKeyError::Read { .. }), "{err}");
        std::fs::write(&path, [0x5a; 32]).unwrap();
        assert!(SigningKey::from_file(&path).is_ok());
    }
}
