//! The base's recorded read sets for the selection audit's closure gate: the base tree's whole
//! pytest suite runs once under the per-test coverage adapter (`crate::coverage`, the run
//! `--reachability` uses), whose audit hook records the files each test, fixture and collector
//! opens. The result is stored by base tree id (and the adapter's hash), so a second audit of
//! the same base runs nothing.

use crate::coverage::{self, CoverageError, CoverageMap, Reads};
use crate::dispatch::run_one;
use assay_common::job::Side;
use assay_common::{ProofId, TreeId};
use assay_transport::queue::{JobQueue, QueueError};
use assay_transport::store::{ArtifactStore, StoreError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

pub const SCHEMA: &str = "assay.reads/v1";
/// Where recorded read sets live in the artifact store.
pub const PREFIX: &str = "audit/reads/v1";

/// What a base tree's tests read, as recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedReads {
    pub schema: String,
    /// The base tree the suite ran on.
    pub tree: String,
    /// The adapter script's sha256.
    pub adapter: String,
    pub collected: Vec<String>,
    pub reads: Reads,
    /// Each test's fixture closure.
    pub fixtures: BTreeMap<String, BTreeSet<String>>,
}

impl RecordedReads {
    pub fn from_map(tree: &TreeId, map: CoverageMap) -> Self {
        Self {
            schema: SCHEMA.into(),
            tree: tree.to_string(),
            adapter: coverage::script_sha256(),
            collected: map.collected,
            reads: map.reads,
            fixtures: map.fixtures,
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

#[derive(Debug, thiserror::Error)]
pub enum ReadsError {
    #[error("failed to run the base's read-set recording (base tree {tree})")]
    Queue {
        tree: TreeId,
        #[source]
        source: QueueError,
    },
    #[error(transparent)]
    Map(#[from] CoverageError),
    #[error("the base's recorded read sets (base tree {tree}) could not be stored at {key}")]
    Store {
        tree: TreeId,
        key: String,
        #[source]
        source: StoreError,
    },
}

/// The store key of `tree`'s read sets.
pub fn key(tree: &TreeId) -> String {
    format!("{PREFIX}/{tree}-{}.json", &coverage::script_sha256()[..16])
}

/// Where the read sets came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Provenance {
    /// Recorded by this run.
    Recorded,
    /// Stored by an earlier audit of the same base tree.
    Stored,
}

/// The base tree's read sets: the stored ones when `use_stored` and they match, else a run of
/// the base's whole suite under the adapter, stored when `store_new`.
pub async fn base_reads(
    run_id: &ProofId,
    tree: &TreeId,
    timeout_secs: u64,
    (use_stored, store_new): (bool, bool),
    queue: &dyn JobQueue,
    store: &dyn ArtifactStore,
) -> Result<(RecordedReads, Provenance), ReadsError> {
    let key = key(tree);
    if use_stored && let Some(stored) = stored(store, &key, tree).await {
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
    let recorded = RecordedReads::from_map(tree, CoverageMap::read(store, &result).await?);
    // Plain strings and maps: encoding cannot fail, and an entry that did would only be a miss.
    if store_new && let Ok(bytes) = serde_json::to_vec(&recorded) {
        store
            .put_bytes("reads", &key, bytes.into())
            .await
            .map_err(|source| ReadsError::Store {
                tree: tree.clone(),
                key: key.clone(),
                source,
            })?;
    }
    Ok((recorded, Provenance::Recorded))
}

/// A stored entry, only if it is for this tree and this adapter; anything else is a miss.
async fn stored(store: &dyn ArtifactStore, key: &str, tree: &TreeId) -> Option<RecordedReads> {
    let bytes = store.get(key).await.ok()??;
    let entry: RecordedReads = serde_json::from_slice(&bytes).ok()?;
    (entry.schema == SCHEMA
        && entry.tree == tree.as_str()
        && entry.adapter == coverage::script_sha256())
    .then_some(entry)
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
    async fn a_stored_entry_for_another_tree_or_adapter_is_a_miss() {
        use assay_transport::store::ObjectArtifactStore;
        let store = ObjectArtifactStore::open("memory://").unwrap();
        let tree = TreeId("a".repeat(40));
        let mut entry = recorded();
        let key = key(&tree);
        let put = |entry: &RecordedReads| {
            let bytes = serde_json::to_vec(entry).unwrap();
            let store = &store;
            let key = key.clone();
            async move { store.put_bytes("reads", &key, bytes.into()).await.unwrap() }
        };
        put(&entry).await;
        assert_eq!(stored(&store, &key, &tree).await, Some(entry.clone()));
        entry.tree = "b".repeat(40);
        put(&entry).await;
        assert_eq!(stored(&store, &key, &tree).await, None);
        entry.tree = tree.to_string();
        entry.adapter = "0".repeat(64);
        put(&entry).await;
        assert_eq!(stored(&store, &key, &tree).await, None);
        store
            .put_bytes("reads", &key, b"{\"schema\": 1}".to_vec().into())
            .await
            .unwrap();
        assert_eq!(stored(&store, &key, &tree).await, None);
    }
}
