//! Build once for the mutation check of a Rust proof. The submitter sends the candidate's text
//! of each file holding a mutant ([`MutationSetup::schema_sources`]); here every mutant goes
//! behind the runtime switch in those texts, one build job compiles the candidate with the
//! files replaced ([`JobSpec::rewrites`]: a coordinator has the trees, not the repository to
//! write a tree in) and keeps the test executables, and each mutant the schema holds is then a
//! run of them with its number set. A failed build's errors take their mutants out and the
//! schema builds again; what it cannot hold builds on its own, as every mutant did before.

use super::BaselineProblem;
use crate::dispatch::run_one;
use crate::mutation::mutants::rust::prebuilt::{self, BuildJob, NoSchemaBuild, PROC_MACRO, Schema};
use crate::mutation::mutants::rust::schema::FileSchema;
use assay_common::criteria::TestSelector;
use assay_common::job::{ByteEdit, JobResult, JobSpec};
use assay_common::mutation_plan::{MutationSetup, SchemaSource};
use assay_common::report::libtest::{DOC_TEST_SUITE, RERUN_VARIANT};
use assay_common::test_binaries::{IndexError, Selection};
use assay_transport::error_chain::error_chain;
use assay_transport::queue::{JobQueue, QueueError};
use assay_transport::store::ArtifactStore;
use std::collections::{BTreeMap, BTreeSet};

/// Job indexes the schemata may use after the check's mutants: its builds and, if the prebuilt
/// tests do not pass unmutated, the unmutated run built by cargo.
pub const JOBS: usize = prebuilt::MAX_BUILDS + 1;

/// Where the unmutated run built by cargo goes when the prebuilt tests cannot stand as the
/// baseline: the last of the schema's [`JOBS`], after its builds from `first_index`.
pub(super) fn fallback_baseline_index(first_index: usize) -> usize {
    first_index + prebuilt::MAX_BUILDS
}

/// Why a mutant whose file's text the submitter did not send builds on its own.
const NO_SOURCE: &str = "its file's text was not sent with the proof";

/// What the check's notes say of `schema`, over its `mutants`.
pub(super) fn summary(schema: &Schema, mutants: usize) -> String {
    let held = (0..mutants).filter(|at| schema.holds(*at)).count();
    let builds = schema.builds;
    let mut text = format!(
        "mutant schemata: {held} of {mutants} mutants ran from one build ({builds} build{}, {:.1}s)",
        if builds == 1 { "" } else { "s" },
        schema.build_time.as_secs_f64()
    );
    if !schema.unviable.is_empty() {
        let unviable = schema.unviable.len();
        text.push_str(&format!("; {unviable} did not compile in the schema"));
    }
    let built_alone = schema.built_alone();
    for (why, count) in &built_alone {
        text.push_str(&format!("; {count} built on their own: {why}"));
    }
    // A schema given up names its reason as every held mutant's: said once is enough.
    if let Some(note) = schema
        .note
        .as_ref()
        .filter(|n| !built_alone.contains_key(*n))
    {
        text.push_str(&format!(" ({note})"));
    }
    text
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

/// Builds the schema of `setup`'s mutants: at most [`prebuilt::MAX_BUILDS`] build jobs,
/// numbered from `jobs.first_index`. Fails only when the queue's result stream closes.
pub(super) async fn build(
    setup: &MutationSetup,
    jobs: &BuildJobs<'_>,
    queue: &dyn JobQueue,
    store: &dyn ArtifactStore,
) -> Result<Schema, QueueError> {
    let mutants = &setup.plan.mutants;
    let sources: BTreeMap<&str, &SchemaSource> = setup
        .schema_sources
        .iter()
        .map(|s| (s.path.as_str(), s))
        .collect();
    let mut schema = Schema::default();
    for (at, mutant) in mutants.iter().enumerate() {
        match sources.get(mutant.path.as_str()) {
            None => {
                schema.alone.insert(at, NO_SOURCE.into());
            }
            Some(source) if source.proc_macro => {
                schema.alone.insert(at, PROC_MACRO.into());
            }
            Some(_) => {}
        }
    }
    let command = match prebuilt::build_command(jobs.command_prefix) {
        Ok(command) => command,
        Err(why) => {
            schema.give_up(mutants.len(), why.to_string());
            return Ok(schema);
        }
    };
    let texts: BTreeMap<&str, &str> = sources
        .iter()
        .map(|(path, source)| (*path, source.text.as_str()))
        .collect();
    let mut job = RewriteBuild {
        jobs,
        sources: &sources,
        command,
        queue,
        index: jobs.first_index,
    };
    prebuilt::build(&texts, mutants, schema, &mut job, store).await
}

/// A build of the schema on the candidate tree, each rewritten file replacing the
/// candidate's whole.
struct RewriteBuild<'a> {
    jobs: &'a BuildJobs<'a>,
    sources: &'a BTreeMap<&'a str, &'a SchemaSource>,
    command: Vec<String>,
    queue: &'a dyn JobQueue,
    index: usize,
}

#[async_trait::async_trait]
impl BuildJob for RewriteBuild<'_> {
    type Error = QueueError;

    async fn run(
        &mut self,
        schemas: &BTreeMap<String, FileSchema>,
    ) -> Result<Result<JobResult, NoSchemaBuild>, QueueError> {
        let mut job = (self.jobs.make_job)(self.index);
        self.index += 1;
        prebuilt::make_build_job(&mut job, self.command.clone(), self.jobs.timeout_secs);
        job.rewrites = schemas
            .iter()
            .filter_map(|(path, schema)| {
                let source = self.sources.get(path.as_str())?;
                Some(ByteEdit {
                    path: source.path.clone(),
                    start: 0,
                    end: source.text.len(),
                    replacement: schema.text.clone(),
                })
            })
            .collect();
        match run_one(self.queue, &job).await {
            Ok(result) => {
                (self.jobs.on_finished)(&job, &result);
                Ok(Ok(result))
            }
            Err(closed @ QueueError::Closed { .. }) => Err(closed),
            Err(e) => Ok(Err(NoSchemaBuild::NotRun(error_chain(&e)))),
        }
    }
}

/// Why the unmutated run of the prebuilt tests cannot stand as the baseline, so every mutant
/// builds on its own.
#[derive(Debug, thiserror::Error)]
pub(super) enum NoPrebuiltBaseline {
    /// It ran, and did not pass as a baseline must.
    #[error(transparent)]
    Failed(#[from] BaselineProblem),
    /// The queue did not run it, with the error chain.
    #[error("{0}")]
    NotRun(String),
    #[error("the unmutated run of the prebuilt tests has no report")]
    NoReport,
    #[error("no proving test is among the prebuilt tests")]
    NoProvingTest,
    /// A proving test's name, as the run reported it, that cannot be selected.
    #[error(transparent)]
    Unselectable(#[from] IndexError),
}

/// The proving tests as the unmutated run of the prebuilt tests `report` names them, by test
/// executable: what each mutant's run selects. Doc tests are never proving tests.
pub(super) fn proving_selection(
    tests: &[(String, TestSelector)],
    result: &JobResult,
) -> Result<Selection, NoPrebuiltBaseline> {
    let report = result.report.parsed().ok_or(NoPrebuiltBaseline::NoReport)?;
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
        return Err(NoPrebuiltBaseline::NoProvingTest);
    }
    selection.check()?;
    Ok(selection)
}
