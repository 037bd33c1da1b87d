//! Build once, fan out: `assay mutate` on Rust. Every mutant goes behind the runtime switch
//! ([`schema`]), the rewritten files become a tree of their own in the repository, and one
//! build job compiles that tree's tests and keeps the executables in the store
//! ([`TestBinaries::Keep`]). Each mutant is then a run of those executables with
//! [`schema::SWITCH_VARIABLE`] set, on any worker ([`TestBinaries::Use`]). A build that fails
//! is read back through cargo's messages: the mutants its errors are blamed on leave the schema
//! and build on their own, and the schema builds again. What cannot be held at all (a const
//! context, an error no mutant is blamed for) falls back to a build per mutant, and the report
//! says how many and why.
//!
//! JavaScript needs no build ([`interpret`]): the rewritten files' tree is what every held
//! mutant runs, with the switch set, against the test files that reached its site unmutated
//! (`campaign::reached_files`); a mutant the schema cannot hold runs with its edit applied.

use super::{MutateRequest, run_single, spec};
use crate::mutation::mutants::Mutant;
use crate::mutation::mutants::go::prebuilt::{self as go_prebuilt, GoBuildJob};
use crate::mutation::mutants::javascript::schema as js_schema;
use crate::mutation::mutants::javascript::syntax::Dialect;
use crate::mutation::mutants::javascript::typescript;
use crate::mutation::mutants::rust::prebuilt::{
    self, BuildJob, NoSchemaBuild, PROC_MACRO, Packages, Schema,
};
use crate::mutation::mutants::rust::schema::FileSchema;
use crate::mutation::mutants::switch::Entry;
use crate::source;
use assay_common::TreeId;
use assay_common::job::JobStatus;
use assay_common::job::{ArtifactRef, JobResult, JobSpec};
use assay_common::test_binaries::Selection;
use assay_transport::error_chain::error_chain;
use assay_transport::queue::JobQueue;
use assay_transport::store::ArtifactStore;
use std::collections::{BTreeMap, BTreeSet};

pub use assay_common::mutation_report::SchemataOutcome;
pub use prebuilt::SWITCH_OFF_VARIABLE;

/// The tests built once: the schema's tree and the stored executables.
#[derive(Clone, Debug)]
pub(super) struct Prebuilt {
    pub tree: TreeId,
    pub archive: ArtifactRef,
    /// Go test executables, run under test2json; else cargo's.
    pub go: bool,
}

/// The schemata's result: the build (if any) and, by plan position, the mutants it does not
/// hold, with why.
pub(super) struct Schemata {
    pub schema: Schema,
    /// The last build's tree: the executables in `schema.archive` were built from it; for a
    /// schema that is interpreted, the tree its mutants run.
    tree: Option<TreeId>,
    mutants: usize,
    /// Go: the module's path, which names each package's executable; `None` for Rust.
    go_module: Option<String>,
    /// The schema runs as written, with no build (JavaScript).
    interpreted: bool,
}

impl Schemata {
    /// No schema for any of the `mutants` mutants: each builds on its own, for `why`.
    fn given_up(mutants: usize, why: String) -> Self {
        let mut schema = Schema::default();
        schema.give_up(mutants, why);
        Self {
            schema,
            tree: None,
            mutants,
            go_module: None,
            interpreted: false,
        }
    }

    /// The build, when one holds mutants.
    pub fn prebuilt(&self) -> Option<Prebuilt> {
        if self.interpreted {
            return None;
        }
        Some(Prebuilt {
            tree: self.tree.clone()?,
            archive: self.schema.archive.clone()?,
            go: self.go_module.is_some(),
        })
    }

    /// What the report says of it.
    pub fn outcome(&self) -> SchemataOutcome {
        SchemataOutcome {
            builds: self.schema.builds,
            held: (0..self.mutants).filter(|at| self.holds(*at)).count(),
            unviable: self.schema.unviable.len(),
            built_alone: self.schema.built_alone(),
            build_s: self.schema.build_time.as_secs_f64(),
            note: self.schema.note.clone(),
            batched: 0,
            batches: 0,
        }
    }

    /// The prebuilt tests failed unmutated: every mutant builds on its own.
    pub fn give_up(&mut self, why: String) {
        self.schema.give_up(self.mutants, why);
        if self.interpreted {
            self.tree = None;
        }
    }

    /// Whether mutant `at` runs from the build (or the interpreted schema's tree).
    pub fn holds(&self, at: usize) -> bool {
        match self.interpreted {
            true => {
                self.tree.is_some()
                    && !self.schema.alone.contains_key(&at)
                    && !self.schema.unviable.contains_key(&at)
            }
            false => self.schema.holds(at),
        }
    }

    /// Whether the build is Go's (each package's test executable).
    pub fn is_go(&self) -> bool {
        self.go_module.is_some()
    }

    /// What a held mutant of the file at `path` runs, of those `only` (the trace's choice)
    /// selects: `Some(only)` for Rust; for Go, its own package's executable alone, as a
    /// `go test` of its package runs (`None`: no test of its package reaches it).
    pub fn selection(&self, path: &str, only: Option<Selection>) -> Option<Option<Selection>> {
        match &self.go_module {
            None => Some(only),
            Some(module) => {
                let import = go_prebuilt::import_path(module, go_prebuilt::package_dir(path));
                go_prebuilt::own_package(&import, only.as_ref()).map(Some)
            }
        }
    }

    /// The interpreted schema's tree, while it holds mutants.
    pub fn switched_tree(&self) -> Option<&TreeId> {
        self.tree.as_ref().filter(|_| self.interpreted)
    }
}

/// A run of the interpreted schema's `tree` with the switch at `number` (0: unmutated, traced).
pub(super) fn switched_spec(
    request: &MutateRequest,
    tree: &TreeId,
    index: usize,
    number: usize,
    command: Vec<String>,
) -> JobSpec {
    let mut job = spec(request, tree, index, command);
    job.env
        .push((js_schema::SWITCH_VARIABLE.to_owned(), number.to_string()));
    if number == 0 {
        job.env
            .push((js_schema::TRACE_VARIABLE.to_owned(), "on".to_owned()));
    }
    job
}

/// JavaScript: every mutant of `mutants` (files' texts in `sources`) behind the switch, in a
/// tree of its own written in the repository and uploaded to the store. Nothing is built: the
/// unmutated run of that tree says whether it holds them. A TypeScript tree (`erase_types`)
/// gets its types erased by one job (as job `*index`), and the JavaScript joins the tree.
pub(super) async fn interpret(
    request: &MutateRequest,
    sources: &BTreeMap<&str, &[u8]>,
    mutants: &[Mutant],
    (queue, store): (&dyn JobQueue, &dyn ArtifactStore),
    index: &mut usize,
    erase_types: bool,
) -> Schemata {
    let mut schema = Schema::default();
    let mut files: Vec<(String, String)> = Vec::new();
    for (path, bytes) in sources {
        let entries = Entry::of_file(mutants, path, |_| true);
        if entries.is_empty() {
            continue;
        }
        let Ok(text) = std::str::from_utf8(bytes) else {
            schema.send_alone(&entries, "the file is not UTF-8");
            continue;
        };
        let rewritten = js_schema::rewrite(Dialect::of(path), text, &entries);
        for (number, why) in rewritten.fallback {
            schema.alone.insert(Entry::position(number), why);
        }
        if !rewritten.held.is_empty() {
            files.push(((*path).to_owned(), rewritten.text));
        }
    }
    let mut schemata = Schemata {
        schema,
        tree: None,
        mutants: mutants.len(),
        go_module: None,
        interpreted: true,
    };
    if files.is_empty() {
        schemata.give_up("no mutant fits a schema".to_owned());
        return schemata;
    }
    let tree = match schema_tree(request, store, &borrowed(&files)).await {
        Ok(tree) => tree,
        Err(why) => {
            schemata.give_up(why.to_string());
            return schemata;
        }
    };
    if !erase_types {
        schemata.tree = Some(tree);
        return schemata;
    }
    match erase(request, &tree, (queue, store), index).await {
        Ok(erased) => {
            files.extend(erased);
            match schema_tree(request, store, &borrowed(&files)).await {
                Ok(tree) => schemata.tree = Some(tree),
                Err(why) => schemata.give_up(why.to_string()),
            }
        }
        Err(why) => schemata.give_up(format!(
            "the schema's TypeScript could not be erased to JavaScript ({why})"
        )),
    }
    schemata
}

fn borrowed(files: &[(String, String)]) -> Vec<(&str, &[u8])> {
    files
        .iter()
        .map(|(path, text)| (path.as_str(), text.as_bytes()))
        .collect()
}

/// The erased JavaScript of every TypeScript file of `tree`, from one job that prints it.
async fn erase(
    request: &MutateRequest,
    tree: &TreeId,
    (queue, store): (&dyn JobQueue, &dyn ArtifactStore),
    index: &mut usize,
) -> Result<Vec<(String, String)>, EraseError> {
    let not_run = |e: &dyn std::error::Error| EraseError::NotRun(error_chain(e));
    let sources: BTreeSet<String> = source::list_files(&request.repo, tree)
        .map_err(|e| not_run(&e))?
        .into_iter()
        .filter(|path| typescript::erases(path).is_some())
        .collect();
    let mut job = spec(
        request,
        tree,
        *index,
        typescript::emit_command(&request.command_prefix),
    );
    *index += 1;
    job.timeout_secs = request.budget.as_secs().max(1);
    let result = &run_single(queue, &job).await.map_err(|e| not_run(&e))?;
    let read = |name: &'static str| async move {
        assay_transport::store::read_named(store, result, name)
            .await
            .map_err(|e| not_run(&e))
            .map(Option::unwrap_or_default)
    };
    if result.status != (JobStatus::Completed { exit_code: 0 }) {
        let stderr = read("stderr").await?;
        let stderr = String::from_utf8_lossy(&stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        return Err(EraseError::Failed {
            status: result.status.label(),
            said: last.unwrap_or("nothing on stderr").to_owned(),
        });
    }
    if result
        .artifacts
        .iter()
        .any(|a| a.name == "stdout" && a.dropped_bytes > 0)
    {
        return Err(EraseError::PastTheCap);
    }
    let stdout = read("stdout").await?;
    Ok(typescript::read_erased(&stdout, &sources)?)
}

/// Why a TypeScript schema's types could not be erased: the schema is then given up.
#[derive(Debug, thiserror::Error)]
enum EraseError {
    /// The job could not be planned or run (the tree unread, the queue or store failing).
    #[error("{0}")]
    NotRun(String),
    /// The job ran and did not succeed.
    #[error("the job {status}: {said}")]
    Failed {
        /// How it ended.
        status: &'static str,
        /// Its stderr's last line.
        said: String,
    },
    /// Its output was cut at the worker's cap.
    #[error("the erased files are larger than the worker's output cap")]
    PastTheCap,
    /// Its document was refused.
    #[error(transparent)]
    Document(#[from] typescript::ErasedError),
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
    match prebuilt.go {
        false => prebuilt::make_run_job(&mut job, &prebuilt.archive, number, only),
        true => go_prebuilt::make_run_job(&mut job, &prebuilt.archive, number, only),
    }
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
        Err(why) => return Schemata::given_up(mutants.len(), why.to_string()),
    };
    let mut schema = Schema::default();
    let texts = texts_of(sources);
    // Proc-macro crates, by the files whose mutants they hold (each package read once).
    let mut packages = Packages::of(&request.repo, &request.tree);
    let compile_time: BTreeSet<&str> = texts
        .keys()
        .copied()
        .filter(|path| packages.is_proc_macro(path))
        .collect();
    for (at, mutant) in mutants.iter().enumerate() {
        if compile_time.contains(mutant.path.as_str()) {
            schema.alone.insert(at, PROC_MACRO.to_owned());
        }
    }
    let mut job = TreeBuild {
        command,
        builds: OwnTreeBuilds::new(request, queue, store, index),
    };
    let Ok(schema) = prebuilt::build(&texts, mutants, schema, &mut job, store).await;
    Schemata {
        schema,
        tree: job.builds.tree,
        mutants: mutants.len(),
        go_module: None,
        interpreted: false,
    }
}

/// Go: builds each package's test executable of the schema of `mutants` once, as job
/// `*index` onward; the module's path comes from the root `go.mod`.
pub(super) async fn build_go(
    request: &MutateRequest,
    sources: &BTreeMap<&str, &[u8]>,
    mutants: &[Mutant],
    queue: &dyn JobQueue,
    store: &dyn ArtifactStore,
    index: &mut usize,
) -> Schemata {
    // The schema's build and runs are `go test -c` and the executables it keeps: they stand
    // for plain `go test` only. Another command (flags, a wrapper) runs as given, per mutant.
    let plain = request.runner.runner().default_command();
    if request
        .command_prefix
        .iter()
        .map(String::as_str)
        .ne(plain.iter().copied())
    {
        return Schemata::given_up(
            mutants.len(),
            format!(
                "the test command is `{}`, not `{}`: each mutant runs it as given",
                request.command_prefix.join(" "),
                plain.join(" ")
            ),
        );
    }
    let module = source::read_file(&request.repo, &request.tree, "go.mod")
        .ok()
        .flatten()
        .and_then(|bytes| go_prebuilt::module_path(&String::from_utf8_lossy(&bytes)));
    let Some(module) = module else {
        return Schemata::given_up(
            mutants.len(),
            "the tree has no `go.mod` naming a module".into(),
        );
    };
    let texts = texts_of(sources);
    let mut job = GoTreeBuild(OwnTreeBuilds::new(request, queue, store, index));
    let schema = go_prebuilt::build(&texts, mutants, &module, &mut job, store).await;
    Schemata {
        schema,
        tree: job.0.tree,
        mutants: mutants.len(),
        go_module: Some(module),
        interpreted: false,
    }
}

/// The schema's builds, each on a tree of its own: the request's tree with the rewritten
/// files written in it ([`schema_tree`]), each build a job numbered on from `*index`. Rust's
/// and Go's builds differ only in what makes the job a build.
struct OwnTreeBuilds<'a> {
    request: &'a MutateRequest,
    queue: &'a dyn JobQueue,
    store: &'a dyn ArtifactStore,
    index: &'a mut usize,
    /// The last build's tree.
    tree: Option<TreeId>,
}

impl<'a> OwnTreeBuilds<'a> {
    fn new(
        request: &'a MutateRequest,
        queue: &'a dyn JobQueue,
        store: &'a dyn ArtifactStore,
        index: &'a mut usize,
    ) -> Self {
        Self {
            request,
            queue,
            store,
            index,
            tree: None,
        }
    }

    /// Runs one build of the tree with `files` (path, rewritten text) written in it, its job
    /// made a build by `make_build` (given the job and the request's budget in seconds).
    async fn run(
        &mut self,
        files: &[(&str, &[u8])],
        make_build: impl FnOnce(&mut JobSpec, u64) + Send,
    ) -> Result<JobResult, NoSchemaBuild> {
        let request = self.request;
        let tree = schema_tree(request, self.store, files).await?;
        let mut job = spec(request, &tree, *self.index, Vec::new());
        *self.index += 1;
        make_build(&mut job, request.budget.as_secs());
        self.tree = Some(tree);
        run_single(self.queue, &job)
            .await
            .map_err(|e| NoSchemaBuild::NotRun(error_chain(&e)))
    }
}

/// The files' texts, path → text, of those `sources` that are UTF-8: what a schema rewrites.
fn texts_of<'a>(sources: &BTreeMap<&'a str, &'a [u8]>) -> BTreeMap<&'a str, &'a str> {
    sources
        .iter()
        .filter_map(|(path, bytes)| Some((*path, std::str::from_utf8(bytes).ok()?)))
        .collect()
}

/// A Go build of the schema as a tree of its own.
struct GoTreeBuild<'a>(OwnTreeBuilds<'a>);

#[async_trait::async_trait]
impl GoBuildJob for GoTreeBuild<'_> {
    async fn run(
        &mut self,
        files: &BTreeMap<String, String>,
        command: Vec<String>,
    ) -> Result<JobResult, NoSchemaBuild> {
        let files: Vec<(&str, &[u8])> = files
            .iter()
            .map(|(path, text)| (path.as_str(), text.as_bytes()))
            .collect();
        self.0
            .run(&files, |job, budget| {
                go_prebuilt::make_build_job(job, command, budget);
            })
            .await
    }
}

/// A Rust build of the schema as a tree of its own, with cargo's `command`.
struct TreeBuild<'a> {
    command: Vec<String>,
    builds: OwnTreeBuilds<'a>,
}

#[async_trait::async_trait]
impl BuildJob for TreeBuild<'_> {
    type Error = std::convert::Infallible;

    async fn run(
        &mut self,
        schemas: &BTreeMap<String, FileSchema>,
    ) -> Result<Result<JobResult, NoSchemaBuild>, Self::Error> {
        let files: Vec<(&str, &[u8])> = schemas
            .iter()
            .map(|(path, s)| (path.as_str(), s.text.as_bytes()))
            .collect();
        let command = self.command.clone();
        Ok(self
            .builds
            .run(&files, |job, budget| {
                prebuilt::make_build_job(job, command, budget);
            })
            .await)
    }
}

/// The request's tree with `files` rewritten, as a tree of its own written in the repository
/// and uploaded to the store (where the jobs run on a fleet, workers fetch trees from it; an
/// embedded run's worker reads the repository, and the archive costs little).
async fn schema_tree(
    request: &MutateRequest,
    store: &dyn ArtifactStore,
    files: &[(&str, &[u8])],
) -> Result<TreeId, NoSchemaBuild> {
    let tree = source::tree_with_files(&request.repo, &request.tree, files)
        .map_err(|e| NoSchemaBuild::TreeNotWritten(error_chain(&e)))?;
    assay_transport::store_tree::upload_tree(store, &request.repo, &tree)
        .await
        .map_err(|e| NoSchemaBuild::TreeNotUploaded(error_chain(&e)))?;
    Ok(tree)
}
