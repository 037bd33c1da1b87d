//! Build once, fan out: `assay mutate` on Rust. Every mutant goes behind the runtime switch
//! ([`schema`]), the rewritten files become a tree of their own in the repository, and one
//! build job compiles that tree's tests and keeps the executables in the store
//! ([`TestBinaries::Keep`]). Each mutant is then a run of those executables with
//! [`schema::SWITCH_VARIABLE`] set, on any worker ([`TestBinaries::Use`]). A build that fails
//! is read back through cargo's messages: the mutants its errors are blamed on leave the schema
//! and build on their own, and the schema builds again. What cannot be held at all (a const
//! context, an error no mutant is blamed for) falls back to a build per mutant, and the report
//! says how many and why.

use super::{MutateRequest, run_single, spec};
use crate::mutation::mutants::Mutant;
use crate::mutation::mutants::rust::prebuilt::{
    self, BLAMED, Blamed, Built, MAX_BUILDS, PROC_MACRO, Packages, blame_failed_build,
};
use crate::mutation::mutants::rust::schema::{self, FileSchema};
use crate::source;
use assay_common::TreeId;
use assay_common::job::{ArtifactRef, JobSpec};
use assay_common::runner::RunnerKind;
use assay_common::test_binaries::Selection;
use assay_transport::error_chain::error_chain;
use assay_transport::queue::JobQueue;
use assay_transport::store::{ArtifactStore, read_named};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

pub use prebuilt::SWITCH_OFF_VARIABLE;

/// The tests built once: the schema's tree and the stored executables.
#[derive(Clone, Debug)]
pub(super) struct Prebuilt {
    pub tree: TreeId,
    pub archive: ArtifactRef,
}

/// What the schemata did, for the report.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SchemataOutcome {
    /// Schema builds run (the last one built, unless `note` says otherwise).
    pub builds: usize,
    /// Mutants run from the one build.
    pub held: usize,
    /// Mutants whose own code did not compile in the schema: `CompileError` without a build.
    pub unviable: usize,
    /// Mutants built on their own, by why.
    pub built_alone: BTreeMap<String, usize>,
    /// Wall time of the schema builds, in seconds.
    #[serde(rename = "buildSeconds")]
    pub build_s: f64,
    /// Why no mutant runs from a build, when none does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The schemata's result: the build (if any) and, by plan position, the mutants it does not
/// hold, with why.
pub(super) struct Schemata {
    pub prebuilt: Option<Prebuilt>,
    /// Mutants built on their own, with why.
    pub alone: BTreeMap<usize, String>,
    /// Mutants whose own code did not compile in the schema, with the compiler's error.
    pub unviable: BTreeMap<usize, String>,
    /// The last schema build's wall time: what a mutant built on its own costs on top of its
    /// tests.
    pub one_build: Duration,
    mutants: usize,
    builds: usize,
    build_time: Duration,
    note: Option<String>,
}

impl Schemata {
    fn none(mutants: usize, note: String) -> Self {
        Self {
            prebuilt: None,
            alone: (0..mutants).map(|at| (at, note.clone())).collect(),
            unviable: BTreeMap::new(),
            one_build: Duration::ZERO,
            mutants,
            builds: 0,
            build_time: Duration::ZERO,
            note: Some(note),
        }
    }

    /// What the report says of it.
    pub fn outcome(&self) -> SchemataOutcome {
        let mut built_alone = BTreeMap::new();
        for why in self.alone.values() {
            *built_alone.entry(why.clone()).or_insert(0) += 1;
        }
        SchemataOutcome {
            builds: self.builds,
            held: (0..self.mutants).filter(|at| self.holds(*at)).count(),
            unviable: self.unviable.len(),
            built_alone,
            build_s: self.build_time.as_secs_f64(),
            note: self.note.clone(),
        }
    }

    /// The prebuilt tests failed unmutated: every mutant builds on its own.
    pub fn give_up(&mut self, why: String) {
        *self = Self {
            builds: self.builds,
            build_time: self.build_time,
            one_build: self.one_build,
            ..Self::none(self.mutants, why)
        };
    }

    /// Whether mutant `at` runs from the build.
    pub fn holds(&self, at: usize) -> bool {
        self.prebuilt.is_some() && !self.alone.contains_key(&at) && !self.unviable.contains_key(&at)
    }
}

/// The schemata are used for a cargo run unless [`SWITCH_OFF_VARIABLE`] is `0`.
pub(super) fn wanted(runner: RunnerKind) -> bool {
    runner == RunnerKind::Cargo && prebuilt::wanted()
}

/// A run of the prebuilt tests with the switch at `number`, of those `only` selects. The
/// unmutated run (0) traces which tests reach each site ([`schema::TRACE_VARIABLE`]).
pub(super) fn run_spec(
    request: &MutateRequest,
    prebuilt: &Prebuilt,
    index: usize,
    number: usize,
    only: Option<Selection>,
) -> JobSpec {
    let mut job = spec(request, &prebuilt.tree, index, Vec::new());
    prebuilt::make_run_job(&mut job, &prebuilt.archive, number, only);
    job
}

/// Builds the schema of `mutants` (files' texts in `sources`) once, as job `*index` onward.
pub(super) async fn build(
    request: &MutateRequest,
    sources: &BTreeMap<&str, &[u8]>,
    mutants: &[Mutant],
    queue: &dyn JobQueue,
    store: &dyn ArtifactStore,
    index: &mut usize,
) -> Schemata {
    let command = match prebuilt::build_command(&request.command_prefix) {
        Ok(command) => command,
        Err(why) => return Schemata::none(mutants.len(), why),
    };
    let texts: BTreeMap<&str, &str> = sources
        .iter()
        .filter_map(|(path, bytes)| Some((*path, std::str::from_utf8(bytes).ok()?)))
        .collect();
    let std = schema::Std::of_crate(texts.values().copied());
    let mut alone: BTreeMap<usize, String> = BTreeMap::new();
    let mut unviable: BTreeMap<usize, String> = BTreeMap::new();
    // Proc-macro crates, by the files whose mutants they hold (each package read once).
    let mut packages = Packages::of(&request.repo, &request.tree);
    let compile_time: BTreeSet<&str> = texts
        .keys()
        .copied()
        .filter(|path| packages.is_proc_macro(path))
        .collect();
    for (at, mutant) in mutants.iter().enumerate() {
        if compile_time.contains(mutant.path.as_str()) {
            alone.insert(at, PROC_MACRO.to_owned());
        }
    }
    let mut note = None;
    let mut builds = 0;
    let mut build_time = Duration::ZERO;
    let mut one_build = Duration::ZERO;
    let prebuilt = loop {
        let mut schemas: BTreeMap<String, FileSchema> = BTreeMap::new();
        for (path, text) in &texts {
            // Switch numbers are plan positions plus one: 0 is the unmutated code.
            let entries: Vec<schema::Entry<'_>> = mutants
                .iter()
                .enumerate()
                .filter(|(at, m)| {
                    m.path.as_str() == *path
                        && !alone.contains_key(at)
                        && !unviable.contains_key(at)
                })
                .map(|(at, m)| schema::Entry {
                    number: at as u32 + 1,
                    edit: &m.edit,
                })
                .collect();
            if entries.is_empty() {
                continue;
            }
            let rewritten = schema::rewrite(text, &entries, std);
            for (number, why) in &rewritten.fallback {
                alone.insert(*number as usize - 1, why.clone());
            }
            schemas.insert((*path).to_owned(), rewritten);
        }
        if schemas.is_empty() {
            break None;
        }
        let files: Vec<(&str, &[u8])> = schemas
            .iter()
            .map(|(path, s)| (path.as_str(), s.text.as_bytes()))
            .collect();
        let tree = match source::tree_with_files(&request.repo, &request.tree, &files) {
            Ok(tree) => tree,
            Err(e) => {
                note = Some(format!(
                    "the schema tree was not written: {}",
                    error_chain(&e)
                ));
                break None;
            }
        };
        // Where the jobs run on a fleet, workers fetch trees from the store (an embedded run's
        // worker reads the repository, and the archive costs little).
        if let Err(e) = assay_transport::store_tree::upload_tree(store, &request.repo, &tree).await
        {
            note = Some(format!(
                "the schema tree was not uploaded: {}",
                error_chain(&e)
            ));
            break None;
        }
        let mut job = spec(request, &tree, *index, Vec::new());
        *index += 1;
        prebuilt::make_build_job(&mut job, command.clone(), request.budget.as_secs());
        builds += 1;
        let result = match run_single(queue, &job).await {
            Ok(result) => result,
            Err(e) => {
                note = Some(format!("the schema build failed: {}", error_chain(&e)));
                break None;
            }
        };
        one_build = Duration::from_millis(result.duration_ms);
        build_time += one_build;
        match Built::of(&result) {
            Built::Kept(archive) => break Some(Prebuilt { tree, archive }),
            Built::Other(why) => {
                note = Some(why);
                break None;
            }
            Built::Failed => {}
        }
        let json = match read_named(store, &result, "stdout").await {
            Ok(Some(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            Ok(None) => String::new(),
            Err(e) => {
                note = Some(format!(
                    "the schema build's messages could not be read: {}",
                    error_chain(&e)
                ));
                break None;
            }
        };
        match blame_failed_build(&json, &schemas) {
            Blamed::Unviable(own) => {
                for (number, error) in own {
                    alone.remove(&(number as usize - 1));
                    unviable.insert(number as usize - 1, error);
                }
            }
            Blamed::Alone(blamed) => {
                for (number, why) in blamed {
                    alone.insert(number as usize - 1, why);
                }
            }
            Blamed::NoSchema(why) => {
                note = Some(why);
                break None;
            }
        }
        if builds >= MAX_BUILDS {
            note = Some(format!("the schema did not build in {MAX_BUILDS} attempts"));
            break None;
        }
    };
    if prebuilt.is_none() {
        // Without a build every mutant builds on its own, those that did not compile in the
        // schema too (their error was seen beside others').
        let why = note
            .clone()
            .unwrap_or_else(|| "no mutant fits a schema".to_owned());
        for (at, _) in std::mem::take(&mut unviable) {
            alone.insert(at, BLAMED.into());
        }
        for at in 0..mutants.len() {
            alone.entry(at).or_insert_with(|| why.clone());
        }
    }
    Schemata {
        prebuilt,
        alone,
        unviable,
        one_build,
        mutants: mutants.len(),
        builds,
        build_time,
        note,
    }
}
