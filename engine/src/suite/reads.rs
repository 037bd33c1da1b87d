//! The base's recorded read sets for the selection audit's closure gate: the base tree's whole
//! pytest suite runs once under the per-test coverage adapter (`crate::coverage`, the run
//! `--reachability` uses), whose audit hook records the files each test, fixture and collector
//! opens. The result is stored by base tree id (and the adapter's hash), signed with the result
//! cache's key, so a second audit of the same base runs nothing; an entry that does not verify
//! is recorded again.

use crate::coverage::{self, CoverageError, CoverageMap, Reads};
use crate::dispatch::run_one;
use crate::result_cache::ResultCache;
use assay_common::job::Side;
use assay_common::{ProofId, TreeId};
use assay_transport::queue::{JobQueue, QueueError};
use assay_transport::store::{ArtifactStore, StoreError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

pub use assay_common::suite_audit::Provenance;

/// The recorded read sets' schema; an entry of another is never served.
pub const SCHEMA: &str = "assay.reads/v1";
/// Where recorded read sets live in the artifact store.
pub const PREFIX: &str = "audit/reads/v1";

/// What a base tree's tests read, as recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedReads {
    /// The entry's schema, [`SCHEMA`].
    pub schema: String,
    /// `{tree}-{adapter sha256}`: what the entry answers.
    pub key: String,
    /// The base tree the suite ran on.
    pub tree: String,
    /// The adapter script's sha256.
    pub adapter: String,
    /// Every node id the base's run collected, in order.
    pub collected: Vec<String>,
    /// What each test, fixture and collector opened for reading.
    pub reads: Reads,
    /// Each test's fixture closure.
    pub fixtures: BTreeMap<String, BTreeSet<String>>,
    /// The result cache key's signature over everything else.
    pub signature: Option<String>,
}

crate::result_cache::signed_entry!(RecordedReads, SCHEMA);

impl RecordedReads {
    /// The read sets a coverage run of `tree` measured, unsigned.
    pub fn from_map(tree: &TreeId, map: CoverageMap) -> Self {
        Self {
            schema: SCHEMA.into(),
            key: key(tree),
            tree: tree.to_string(),
            adapter: coverage::script_sha256(),
            collected: map.collected,
            reads: map.reads,
            fixtures: map.fixtures,
            signature: None,
        }
    }

    /// Everything `test` reads: its own opens, its fixtures' setups, and the collection of
    /// every collector above it (its module's top-level code, its directories' conftests).
    pub fn files_read_by<'a>(&'a self, test: &str) -> BTreeSet<&'a str> {
        let own = self.reads.tests.get(test).into_iter().flatten();
        let fixtures = self
            .fixtures
            .get(test)
            .into_iter()
            .flatten()
            .filter_map(|name| self.reads.fixtures.get(name))
            .flatten();
        let collectors = self
            .reads
            .collectors
            .iter()
            .filter(|(collector, _)| encloses(collector, test))
            .flat_map(|(_, files)| files);
        own.chain(fixtures)
            .chain(collectors)
            .map(String::as_str)
            .collect()
    }
}

/// Whether the collector node id `collector` holds the test `test` (`""` is the session).
fn encloses(collector: &str, test: &str) -> bool {
    collector.is_empty()
        || test
            .strip_prefix(collector)
            .is_some_and(|rest| rest.starts_with("::") || rest.starts_with('/'))
}

/// Why the base's read sets could not be recorded or stored.
#[derive(Debug, thiserror::Error)]
pub enum ReadsError {
    /// The recording job could not be run.
    #[error("failed to run the base's read-set recording (base tree {tree})")]
    Queue {
        /// The base tree being recorded.
        tree: TreeId,
        /// The queue's failure.
        #[source]
        source: QueueError,
    },
    /// The recording's coverage map could not be read.
    #[error(transparent)]
    Map(#[from] CoverageError),
    /// The recorded read sets could not be put in the store.
    #[error("the base's recorded read sets (base tree {tree}) could not be stored at {path}")]
    Store {
        /// The base tree recorded.
        tree: TreeId,
        /// The store key it was put under.
        path: String,
        /// The store's failure.
        #[source]
        source: StoreError,
    },
}

/// What an entry answers: the tree and the adapter that recorded it.
pub fn key(tree: &TreeId) -> String {
    format!("{tree}-{}", coverage::script_sha256())
}

/// Where `tree`'s entry lives in the store.
pub fn path(tree: &TreeId) -> String {
    format!("{PREFIX}/{tree}-{}.json", &coverage::script_sha256()[..16])
}

/// The base tree's read sets: a stored entry `cache` serves and verifies, else a run of the
/// base's whole suite under the adapter, stored when `cache` stores. Without a cache (a
/// fleet run, `--no-cache`, an unconfined host) every audit records afresh.
pub async fn base_reads(
    run_id: &ProofId,
    tree: &TreeId,
    timeout_secs: u64,
    cache: Option<&ResultCache>,
    queue: &dyn JobQueue,
    store: &dyn ArtifactStore,
) -> Result<(RecordedReads, Provenance), ReadsError> {
    if let Some(stored) = stored(cache, tree).await {
        return Ok((stored, Provenance::Stored));
    }
    let job = coverage::plan_job(
        ProofId(format!("{run_id}-reads")),
        Side::Base,
        tree,
        &[],
        timeout_secs,
    );
    let result = run_one(queue, &job)
        .await
        .map_err(|source| ReadsError::Queue {
            tree: tree.clone(),
            source,
        })?;
    let mut recorded = RecordedReads::from_map(tree, CoverageMap::read(store, &result).await?);
    if let Some(cache) = cache.filter(|c| c.stores()) {
        cache.seal(&mut recorded);
        // Plain strings and maps: encoding cannot fail, and an entry that did would be a miss.
        if let Ok(bytes) = serde_json::to_vec(&recorded) {
            let path = path(tree);
            cache
                .store()
                .put_bytes("reads", &path, bytes.into())
                .await
                .map_err(|source| ReadsError::Store {
                    tree: tree.clone(),
                    path,
                    source,
                })?;
        }
    }
    Ok((recorded, Provenance::Recorded))
}

/// A stored entry the cache serves, signed by its key, for this tree and this adapter;
/// anything else is a miss.
async fn stored(cache: Option<&ResultCache>, tree: &TreeId) -> Option<RecordedReads> {
    let cache = cache.filter(|c| c.serves())?;
    let entry: RecordedReads = cache.fetch(&path(tree), &key(tree)).await.ok()??;
    (entry.tree == tree.as_str() && entry.adapter == coverage::script_sha256()).then_some(entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded() -> RecordedReads {
        let map = CoverageMap::parse(
            br#"{"exit": 0, "files": {}, "durations": {},
                "collected": ["tests/test_rates.py::test_loaded", "tests/test_rates.py::test_spring",
                              "tests/unit/test_tax.py::TestTax::test_vat"],
                "reads": {"tests": {"tests/test_rates.py::test_spring": ["tests/data/spring.csv"]},
                          "fixtures": {"rates": ["tests/data/rates.json"]},
                          "collectors": {"tests/unit": ["tests/unit/vat.toml"],
                                         "tests/unit/test_tax.py::TestTax": ["tests/unit/classes.json"],
                                         "tests/unit/test_tax.py::TestTaxes": ["tests/unit/other.json"]}},
                "fixtures": {"tests/test_rates.py::test_loaded": ["rates", "tmp_path"]}}"#,
        )
        .unwrap();
        RecordedReads::from_map(&TreeId("a".repeat(40)), map)
    }

    #[test]
    fn a_test_reads_what_it_its_fixtures_and_its_collectors_opened() {
        let reads = recorded();
        assert_eq!(
            reads.files_read_by("tests/test_rates.py::test_loaded"),
            ["tests/data/rates.json"].into()
        );
        assert_eq!(
            reads.files_read_by("tests/test_rates.py::test_spring"),
            ["tests/data/spring.csv"].into()
        );
        // `TestTaxes` is another class whose id merely starts the same way.
        assert_eq!(
            reads.files_read_by("tests/unit/test_tax.py::TestTax::test_vat"),
            ["tests/unit/classes.json", "tests/unit/vat.toml"].into()
        );
        assert!(reads.files_read_by("tests/test_gone.py::test_x").is_empty());
    }

    #[tokio::test]
    async fn only_a_signed_entry_for_this_tree_and_adapter_is_served() {
        use crate::result_cache::{CacheMode, SigningKey};
        use assay_transport::store::{ArtifactStore, ObjectArtifactStore};
        use std::sync::Arc;
        let store: Arc<dyn ArtifactStore> =
            Arc::new(ObjectArtifactStore::open("memory://").unwrap());
        let dir = tempfile::tempdir().unwrap();
        let key_at = |name: &str| {
            let path = dir.path().join(name);
            Arc::new(SigningKey::load_or_create(&path).unwrap())
        };
        let cache = ResultCache::new(store.clone(), CacheMode::Use, key_at("mine.key"));
        let theirs = ResultCache::new(store.clone(), CacheMode::Use, key_at("theirs.key"));
        let tree = TreeId("a".repeat(40));
        let put = |entry: &RecordedReads| {
            let bytes = serde_json::to_vec(entry).unwrap();
            let store = store.clone();
            let at = path(&tree);
            async move { store.put_bytes("reads", &at, bytes.into()).await.unwrap() }
        };
        let mut entry = recorded();
        cache.seal(&mut entry);
        put(&entry).await;
        assert_eq!(stored(Some(&cache), &tree).await, Some(entry.clone()));
        // Without a cache, or one that does not serve, nothing is read.
        assert_eq!(stored(None, &tree).await, None);
        let refreshing = ResultCache::new(store.clone(), CacheMode::Refresh, key_at("mine.key"));
        assert_eq!(stored(Some(&refreshing), &tree).await, None);
        // Unsigned, signed by another key, or altered after signing: refused.
        let mut unsigned = entry.clone();
        unsigned.signature = None;
        put(&unsigned).await;
        assert_eq!(stored(Some(&cache), &tree).await, None);
        let mut foreign = recorded();
        theirs.seal(&mut foreign);
        put(&foreign).await;
        assert_eq!(stored(Some(&cache), &tree).await, None);
        let mut emptied = entry.clone();
        emptied.reads = Reads::default();
        put(&emptied).await;
        assert_eq!(stored(Some(&cache), &tree).await, None);
        // Signed, but for another tree or adapter.
        let mut other_tree = recorded();
        other_tree.tree = "b".repeat(40);
        cache.seal(&mut other_tree);
        put(&other_tree).await;
        assert_eq!(stored(Some(&cache), &tree).await, None);
        let mut old_adapter = recorded();
        old_adapter.adapter = "0".repeat(64);
        cache.seal(&mut old_adapter);
        put(&old_adapter).await;
        assert_eq!(stored(Some(&cache), &tree).await, None);
    }
}
