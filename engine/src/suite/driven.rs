//! What a suite run drove: its cases in plan order, the jobs that ran them, their results and
//! the cases the result cache answered. Drive fills it, the case cache and the conclusion read
//! it, so it lives apart from all three.

use super::SuiteRun;
use super::history::CaseList;
use super::runners::SuiteSetup;
use assay_common::TreeId;
use assay_common::job::JobSpec;
use assay_common::manifest::ManifestJob;
use assay_common::suite::{CaseReport, RefusedEntry, SuiteCase};
use std::collections::BTreeMap;

/// Where a run's cases came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaseSource {
    /// The runner's listing, run as a job before the batches.
    Listing,
    /// The tree: files, manifest rows or the whole command.
    Tree,
    /// The last run's recorded cases, checked against what the batches collected.
    History,
    /// What a first run's batches collected, each running its part of it.
    Partitions,
}

/// A finished run: the cases in plan order, the jobs that ran them and their results.
#[derive(Debug)]
pub struct Driven {
    /// Every case the tree collects (selected or not), in collection order.
    pub collected: Vec<SuiteCase>,
    /// The selected cases, in plan order.
    pub cases: Vec<SuiteCase>,
    /// A manifest suite's whole corpus.
    pub corpus: Option<ManifestJob>,
    /// Every job of every round, by plan index.
    pub plan: Vec<JobSpec>,
    /// Each job's cases, as indices into `cases`, by plan index.
    pub shards: Vec<Vec<usize>>,
    /// Results by plan index and why admission stopped, if it did.
    pub run: SuiteRun,
    /// Where the cases came from: a listing, the tree, history, or the batches.
    pub source: CaseSource,
    /// A runner session's start-up and collection: the listing's time, or as last recorded.
    pub startup_s: Option<f64>,
    /// The cases the result cache answered, by index into `cases`; no job holds them.
    pub answers: Answers,
}

impl Driven {
    /// The cases to record for the next run, when this run's batches could have been planned
    /// from them: the whole collection of a pytest suite run as `PYTHON -m pytest`.
    pub fn case_list(&self, setup: &SuiteSetup, tree: &TreeId) -> Option<CaseList> {
        let batchable = setup.select_command(&[]).is_some()
            && matches!(
                self.source,
                CaseSource::Listing | CaseSource::History | CaseSource::Partitions
            )
            && !self.collected.is_empty();
        batchable.then(|| CaseList {
            command: setup.prefix.clone(),
            ids: self.collected.iter().map(|c| c.id.clone()).collect(),
            startup_s: self.startup_s,
            tree: Some(tree.clone()),
        })
    }
}

/// The cases answered from the cache before a run, by index into the run's cases.
#[derive(Debug, Default)]
pub struct Answers {
    /// Each answered case's report, by index into the run's cases.
    pub reports: BTreeMap<usize, CaseReport>,
    /// How many cases were looked up.
    pub looked_up: usize,
    /// Entries found but refused, with why.
    pub refused: Vec<RefusedEntry>,
}
