//! Build once for the mutation check of a Rust proof. The submitter sends the candidate's text
//! of each file holding a mutant ([`MutationSetup::schema_sources`]); here every mutant goes
//! behind the runtime switch in those texts, one build job compiles the candidate with the
//! files replaced ([`JobSpec::rewrites`]: a coordinator has the trees, not the repository to
//! write a tree in) and keeps the test executables, and each mutant the schema holds is then a
//! run of them with its number set. A failed build's errors take their mutants out and the
//! schema builds again; what it cannot hold builds on its own, as every mutant did before.

use crate::dispatch::run_one;
use crate::mutation::mutants::rust::prebuilt::{
    self, BLAMED, Blamed, Built, MAX_BUILDS, PROC_MACRO, blame_failed_build,
};
use crate::mutation::mutants::rust::schema::{self, FileSchema};
use assay_common::criteria::TestSelector;
use assay_common::job::{ArtifactRef, ByteEdit, JobResult, JobSpec};
use assay_common::mutation_plan::{MutationSetup, SchemaSource};
use assay_common::report::libtest::{DOC_TEST_SUITE, RERUN_VARIANT};
use assay_common::test_binaries::Selection;
use assay_transport::error_chain::error_chain;
use assay_transport::queue::{JobQueue, QueueError};
use assay_transport::store::{ArtifactStore, read_named};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Job indexes the schemata may use after the check's mutants: its builds and, if the prebuilt
/// tests do not pass unmutated, the unmutated run built by cargo.
pub const JOBS: usize = MAX_BUILDS + 1;

/// Why a mutant whose file's text the submitter did not send builds on its own.
const NO_SOURCE: &str = "its file's text was not sent with the proof";

/// What the schema build did, by plan position.
pub(super) struct Schemata {
    /// The executables of the last build, when one built.
    pub archive: Option<ArtifactRef>,
    /// Mutants built on their own, with why.
    pub alone: BTreeMap<usize, String>,
    /// Mutants whose own code did not compile in the schema, with the compiler's error.
    pub unviable: BTreeMap<usize, String>,
    /// The last build's wall time: what a mutant built on its own costs on top of its tests.
    pub one_build: Duration,
    builds: usize,
    build_time: Duration,
    note: Option<String>,
}

impl Schemata {
    /// Whether mutant `at` runs from the build.
    pub fn holds(&self, at: usize) -> bool {
        self.archive.is_some() && !self.alone.contains_key(&at) && !self.unviable.contains_key(&at)
    }

    /// The prebuilt tests cannot stand as the baseline: every mutant builds on its own.
    pub fn give_up(&mut self, mutants: usize, why: String) {
        self.archive = None;
        for (at, _) in std::mem::take(&mut self.unviable) {
            self.alone.insert(at, BLAMED.into());
        }
        for at in 0..mutants {
            self.alone.entry(at).or_insert_with(|| why.clone());
        }
        self.note = Some(why);
    }

    /// What the check's notes say of it.
    pub fn summary(&self, mutants: usize) -> String {
        let held = (0..mutants).filter(|at| self.holds(*at)).count();
        let mut by_why: BTreeMap<&str, usize> = BTreeMap::new();
        for why in self.alone.values() {
            *by_why.entry(why.as_str()).or_insert(0) += 1;
        }
        let mut text = format!(
            "mutant schemata: {held} of {mutants} mutants ran from one build ({} build{}, {:.1}s)",
            self.builds,
            if self.builds == 1 { "" } else { "s" },
            self.build_time.as_secs_f64()
        );
        if !self.unviable.is_empty() {
            text.push_str(&format!(
                "; {} did not compile in the schema",
                self.unviable.len()
            ));
        }
        for (why, count) in by_why {
            text.push_str(&format!("; {count} built on their own: {why}"));
        }
        if let Some(note) = &self.note {
            text.push_str(&format!(" ({note})"));
        }
        text
    }
}

/// What the build jobs need from the check: a job on the candidate at an index, the test
/// command, the time it may take, where to say a job finished.
pub(super) struct BuildJobs<'a> {
    pub make_job: &'a (dyn Fn(usize) -> JobSpec + Send + Sync),
    pub first_index: usize,
    pub command_prefix: &'a [String],
    pub timeout_secs: u64,
    pub on_finished: &'a (dyn Fn(&JobSpec, &JobResult) + Send + Sync),
}

/// Builds the schema of `setup`'s mutants: at most [`MAX_BUILDS`] build jobs, numbered from
/// `jobs.first_index`. Fails only when the queue's result stream closes.
pub(super) async fn build(
    setup: &MutationSetup,
    jobs: &BuildJobs<'_>,
    queue: &dyn JobQueue,
    store: &dyn ArtifactStore,
) -> Result<Schemata, QueueError> {
    let mutants = &setup.plan.mutants;
    let sources: BTreeMap<&str, &SchemaSource> = setup
        .schema_sources
        .iter()
        .map(|s| (s.path.as_str(), s))
        .collect();
    let mut schemata = Schemata {
        archive: None,
        alone: BTreeMap::new(),
        unviable: BTreeMap::new(),
        one_build: Duration::ZERO,
        builds: 0,
        build_time: Duration::ZERO,
        note: None,
    };
    for (at, mutant) in mutants.iter().enumerate() {
        match sources.get(mutant.path.as_str()) {
            None => {
                schemata.alone.insert(at, NO_SOURCE.into());
            }
            Some(source) if source.proc_macro => {
                schemata.alone.insert(at, PROC_MACRO.into());
            }
            Some(_) => {}
        }
    }
    let command = match prebuilt::build_command(jobs.command_prefix) {
        Ok(command) => command,
        Err(why) => {
            schemata.give_up(mutants.len(), why);
            return Ok(schemata);
        }
    };
    let std = schema::Std::of_crate(sources.values().map(|s| s.text.as_str()));
    let mut failure = None;
    for index in jobs.first_index..jobs.first_index + MAX_BUILDS {
        let mut schemas: BTreeMap<String, FileSchema> = BTreeMap::new();
        let mut rewrites = Vec::new();
        for (path, source) in &sources {
            let entries: Vec<schema::Entry<'_>> = mutants
                .iter()
                .enumerate()
                .filter(|(at, m)| {
                    m.path.as_str() == *path
                        && !schemata.alone.contains_key(at)
                        && !schemata.unviable.contains_key(at)
                })
                // Switch numbers are plan positions plus one: 0 is the unmutated code.
                .map(|(at, m)| schema::Entry {
                    number: at as u32 + 1,
                    edit: &m.edit,
                })
                .collect();
            if entries.is_empty() {
                continue;
            }
            let rewritten = schema::rewrite(&source.text, &entries, std);
            for (number, why) in &rewritten.fallback {
                schemata.alone.insert(*number as usize - 1, why.clone());
            }
            rewrites.push(ByteEdit {
                path: source.path.clone(),
                start: 0,
                end: source.text.len(),
                replacement: rewritten.text.clone(),
            });
            schemas.insert((*path).to_owned(), rewritten);
        }
        if schemas.is_empty() {
            failure = Some("no mutant fits a schema".to_owned());
            break;
        }
        let mut job = (jobs.make_job)(index);
        prebuilt::make_build_job(&mut job, command.clone(), jobs.timeout_secs);
        job.rewrites = rewrites;
        let result = match run_one(queue, &job).await {
            Ok(result) => result,
            Err(closed @ QueueError::Closed { .. }) => return Err(closed),
            Err(e) => {
                failure = Some(format!("the schema build failed: {}", error_chain(&e)));
                break;
            }
        };
        (jobs.on_finished)(&job, &result);
        schemata.builds += 1;
        schemata.one_build = Duration::from_millis(result.duration_ms);
        schemata.build_time += schemata.one_build;
        match Built::of(&result) {
            Built::Kept(archive) => {
                schemata.archive = Some(archive);
                return Ok(schemata);
            }
            Built::Other(why) => {
                failure = Some(why);
                break;
            }
            Built::Failed => {}
        }
        let json = match read_named(store, &result, "stdout").await {
            Ok(bytes) => String::from_utf8_lossy(&bytes.unwrap_or_default()).into_owned(),
            Err(e) => {
                failure = Some(format!(
                    "the schema build's messages could not be read: {}",
                    error_chain(&e)
                ));
                break;
            }
        };
        match blame_failed_build(&json, &schemas) {
            Blamed::Unviable(own) => {
                for (number, error) in own {
                    let at = number as usize - 1;
                    schemata.alone.remove(&at);
                    schemata.unviable.insert(at, error);
                }
            }
            Blamed::Alone(blamed) => {
                for (number, why) in blamed {
                    schemata.alone.insert(number as usize - 1, why);
                }
            }
            Blamed::NoSchema(why) => {
                failure = Some(format!("{why}; {}", stderr_tail(store, &result).await));
                break;
            }
        }
    }
    let why =
        failure.unwrap_or_else(|| format!("the schema did not build in {MAX_BUILDS} attempts"));
    schemata.give_up(mutants.len(), why);
    Ok(schemata)
}

/// The last lines a failed build wrote on stderr, to say why it failed where its messages
/// name no file (cargo missing, a broken toolchain).
async fn stderr_tail(store: &dyn ArtifactStore, result: &JobResult) -> String {
    let text = match read_named(store, result, "stderr").await {
        Ok(bytes) => String::from_utf8_lossy(&bytes.unwrap_or_default()).into_owned(),
        Err(e) => return format!("its stderr could not be read: {}", error_chain(&e)),
    };
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    match lines.len() {
        0 => "it wrote nothing on stderr".to_owned(),
        n => format!(
            "its stderr ends: {}",
            lines[n.saturating_sub(3)..].join(" / ")
        ),
    }
}

/// The proving tests as the unmutated run of the prebuilt tests `report` names them, by test
/// executable: what each mutant's run selects. Doc tests are never proving tests.
pub(super) fn proving_selection(
    tests: &[(String, TestSelector)],
    result: &JobResult,
) -> Result<Selection, String> {
    let report = result
        .report
        .parsed()
        .ok_or_else(|| "the unmutated run of the prebuilt tests has no report".to_owned())?;
    let mut selection = Selection::default();
    for case in &report.cases {
        if case.suite == DOC_TEST_SUITE || case.variant.as_deref() == Some(RERUN_VARIANT) {
            continue;
        }
        if tests
            .iter()
            .any(|(_, selector)| selector.matches(&case.name))
            && let Some(names) = selection
                .binaries
                .entry(case.file.clone())
                .or_insert_with(|| Some(BTreeSet::new()))
        {
            names.insert(case.name.clone());
        }
    }
    if selection.binaries.is_empty() {
        return Err("no proving test is among the prebuilt tests".into());
    }
    selection.check().map_err(|e| e.to_string())?;
    Ok(selection)
}
