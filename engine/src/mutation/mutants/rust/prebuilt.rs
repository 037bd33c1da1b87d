//! The one build of a mutant schema, shared by `assay mutate` and the proof's mutation check:
//! the build job's command and environment, what a build kept, which packages can hold no
//! schema, and what a failed build's errors take out of the schema before the next one.

use super::schema::{self, Entry, FileSchema};
use crate::mutation::mutants::Mutant;
use crate::mutation::mutants::language::SchemaStrategy;
use crate::source;
use assay_common::TreeId;
use assay_common::job::{ArtifactRef, JobResult, JobSpec, JobStatus, TestBinaries};
use assay_common::runner::{ReportFormat, RunnerKind, cargo::runs_nextest};
use assay_common::test_binaries::{ARTIFACT, PLACEHOLDER, Selection};
use assay_transport::error_chain::error_chain;
use assay_transport::store::{ArtifactStore, read_named};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

/// Schema builds before giving up: each failed build takes the blamed mutants out, and a
/// crate's errors rarely need more than two rounds.
pub const MAX_BUILDS: usize = 6;

/// Turns the schemata off (`0`), for a comparison with a build per mutant.
pub const SWITCH_OFF_VARIABLE: &str = "ASSAY_MUTATE_SCHEMATA";

/// Why a proc-macro crate's mutants build on their own.
pub const PROC_MACRO: &str =
    "a proc-macro crate's code runs inside the compiler, where the switch is never read";

/// Why a mutant blamed for a failed schema build builds on its own.
const BLAMED: &str = "did not compile in the schema";

/// Whether `runner`'s mutants build once behind the switch as a cargo schema, unless
/// [`SWITCH_OFF_VARIABLE`] is `0`.
pub fn wanted(runner: RunnerKind) -> bool {
    crate::mutation::mutants::languages::schema_strategy(runner) == Some(SchemaStrategy::CargoBuild)
}

/// Why a schema build gives no executables to run mutants from, before or as it runs; the
/// check on the candidate and `assay mutate` say it as the reason their mutants build alone.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoSchemaBuild {
    /// The run's test command (joined) has no `--no-run` form.
    #[error("the test command {command:?} is not `cargo test` or `cargo nextest run`")]
    NotCargo {
        /// The test command, joined with spaces.
        command: String,
    },
    /// The tree holding the rewritten files could not be written, with the error chain.
    #[error("the schema tree was not written: {0}")]
    TreeNotWritten(String),
    /// That tree could not reach the store, with the error chain.
    #[error("the schema tree was not uploaded: {0}")]
    TreeNotUploaded(String),
    /// The queue did not run the build job, with the error chain.
    #[error("the schema build failed: {0}")]
    NotRun(String),
}

/// The build command for `prefix` (the run's test command), or why there is none: the
/// schema builds with `cargo test --no-run` and the same cargo arguments.
pub fn build_command(prefix: &[String]) -> Result<Vec<String>, NoSchemaBuild> {
    let args: &[String] = match prefix {
        [cargo, test, rest @ ..] if cargo == "cargo" && test == "test" => rest,
        _ if runs_nextest(prefix) => &[],
        _ => {
            return Err(NoSchemaBuild::NotCargo {
                command: prefix.join(" "),
            });
        }
    };
    Ok(assay_common::test_binaries::build_command(args))
}

/// Makes `job` the schema's build job: it keeps its executables, within `timeout_secs`.
pub fn make_build_job(job: &mut JobSpec, command: Vec<String>, timeout_secs: u64) {
    job.command = command;
    job.report = ReportFormat::CargoTestOutput;
    job.timeout_secs = timeout_secs.max(1);
    job.binaries = Some(TestBinaries::Keep);
    job.env.extend(
        [
            // The schema's parentheses and matches must not meet a crate's
            // `#![deny(warnings)]` (cargo-mutants caps lints too), and thousands of
            // warnings about them would only fill the log. No debug info, the standard
            // library's stripped too: executables a tenth the size to store and send.
            ("RUSTFLAGS", "--cap-lints=allow -C strip=debuginfo"),
            ("RUSTDOCFLAGS", "--cap-lints=allow -C strip=debuginfo"),
            // A fresh tree builds once: incremental state would only be written.
            ("CARGO_INCREMENTAL", "0"),
            ("CARGO_PROFILE_TEST_DEBUG", "0"),
            ("CARGO_PROFILE_DEV_DEBUG", "0"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned())),
    );
}

/// Makes `job` a run of the executables in `archive` with the switch at `number`, of those
/// `only` selects. The unmutated run (0) traces which tests reach each site
/// ([`schema::TRACE_VARIABLE`]).
pub fn make_run_job(
    job: &mut JobSpec,
    archive: &ArtifactRef,
    number: usize,
    only: Option<Selection>,
) {
    make_switched_run(job, ReportFormat::CargoTestOutput, archive, number, only);
}

/// Makes `job` a run of the prebuilt executables in `archive` (Rust's or Go's, read as
/// `report`) with the switch at `number`, of those `only` selects; the unmutated run (0) is
/// traced.
pub(crate) fn make_switched_run(
    job: &mut JobSpec,
    report: ReportFormat,
    archive: &ArtifactRef,
    number: usize,
    only: Option<Selection>,
) {
    job.command = vec!["sh".into(), PLACEHOLDER.into()];
    job.report = report;
    job.env
        .push((schema::SWITCH_VARIABLE.to_owned(), number.to_string()));
    if number == 0 {
        job.env
            .push((schema::TRACE_VARIABLE.to_owned(), "on".to_owned()));
    }
    job.binaries = Some(TestBinaries::Use {
        archive: archive.clone(),
        only,
    });
}

/// What a schema build did (Rust's, Go's).
pub(crate) enum Built {
    /// The build kept its executables.
    Kept(ArtifactRef),
    /// It failed to compile: cargo's messages say why.
    Failed,
    /// Anything else (a timeout, the worker refused the executables): no schema.
    Other(String),
}

impl Built {
    pub(crate) fn of(result: &JobResult) -> Self {
        match &result.status {
            JobStatus::Completed { exit_code: 0 } => {
                match result.artifacts.iter().find(|a| a.name == ARTIFACT) {
                    Some(archive) => Self::Kept(archive.clone()),
                    None => Self::Other("the schema build kept no test executables".into()),
                }
            }
            JobStatus::Completed { .. } => Self::Failed,
            JobStatus::TimedOut => Self::Other("the schema build ran past the budget".into()),
            JobStatus::Infrastructure { message, .. } => {
                Self::Other(format!("the schema build could not run: {message}"))
            }
            JobStatus::Cancelled => Self::Other("the schema build was cancelled".into()),
        }
    }
}

/// A failed schema build's compiler output that could not be read, which gives the schema up.
#[derive(Debug, thiserror::Error)]
#[error("the schema build's {what} could not be read")]
pub(crate) struct UnreadableOutput {
    /// What the output holds (`messages`, `errors`).
    what: &'static str,
    #[source]
    source: assay_transport::store::ArtifactError,
}

/// The text a failed schema build wrote on `stream` (`stdout`, `stderr`), where its compiler
/// says why: its `what` (`messages`, `errors`).
pub(crate) async fn build_output(
    store: &dyn ArtifactStore,
    result: &JobResult,
    stream: &str,
    what: &'static str,
) -> Result<String, UnreadableOutput> {
    let bytes = read_named(store, result, stream)
        .await
        .map_err(|source| UnreadableOutput { what, source })?;
    Ok(String::from_utf8_lossy(&bytes.unwrap_or_default()).into_owned())
}

/// What a failed schema build's errors take out of the schema, by switch number.
#[derive(Debug, PartialEq, Eq)]
enum Blamed {
    /// Errors lie inside these mutants' own code: they do not compile, no build needed.
    Unviable(BTreeMap<u32, String>),
    /// These build on their own, with why.
    Alone(BTreeMap<u32, String>),
    /// No mutant can be blamed and too few are held to halve: no schema.
    NoSchema(String),
}

/// Reads a failed build's cargo messages (`cargo_json`) against the files it built
/// (`schemas`). Mutants with an error inside their own code are unviable, whatever else
/// failed (the next build shows what remains). An error outside every rewritten file (another member's build broken by a
/// mutant, say) names no mutant: half of those held build on their own, until the rest builds.
fn blame_failed_build(cargo_json: &str, schemas: &BTreeMap<String, FileSchema>) -> Blamed {
    let spans = schema::error_spans(cargo_json);
    let own = schema::own_errors(&spans, schemas);
    if !own.is_empty() {
        return Blamed::Unviable(own);
    }
    if let Some(blamed) = schema::blame(&spans, schemas).filter(|b| !b.is_empty()) {
        return Blamed::Alone(blamed.into_iter().map(|n| (n, BLAMED.into())).collect());
    }
    let first = spans.first().map_or_else(
        || "no error names a file".to_owned(),
        |s| format!("{}: {}", s.file, s.message),
    );
    let held: BTreeSet<u32> = schemas
        .values()
        .flat_map(|s| s.held.iter().map(|h| h.number))
        .collect();
    let held: Vec<u32> = held.into_iter().collect();
    if held.len() < 2 {
        return Blamed::NoSchema(format!(
            "the schema build failed on an error no mutant is blamed for ({first})"
        ));
    }
    let why = format!(
        "left the schema with half the rest after an error no mutant is blamed for ({first})"
    );
    Blamed::Alone(
        held[held.len() / 2..]
            .iter()
            .map(|n| (*n, why.clone()))
            .collect(),
    )
}

/// Which of a plan's mutants a schema holds, across its builds, by plan position.
#[derive(Debug, Default)]
pub struct Schema {
    /// The last build's executables, when one built.
    pub archive: Option<ArtifactRef>,
    /// Mutants built on their own, with why.
    pub alone: BTreeMap<usize, String>,
    /// Mutants whose own code did not compile in the schema, with the compiler's error.
    pub unviable: BTreeMap<usize, String>,
    /// The last build's wall time: what a mutant built on its own costs on top of its tests.
    pub one_build: Duration,
    /// Schema builds run, each retry after a build error included.
    pub builds: usize,
    /// Their wall time in all.
    pub build_time: Duration,
    /// Why no mutant runs from a build, when none does.
    pub note: Option<String>,
}

impl Schema {
    /// Whether mutant `at` runs from the build.
    pub fn holds(&self, at: usize) -> bool {
        self.archive.is_some() && self.in_schema(at)
    }

    /// Whether mutant `at` is still in the schema: neither sent to build alone nor unviable.
    pub fn in_schema(&self, at: usize) -> bool {
        !self.alone.contains_key(&at) && !self.unviable.contains_key(&at)
    }

    /// Every one of `entries` builds on its own, for `why`.
    pub fn send_alone(&mut self, entries: &[Entry<'_>], why: &str) {
        for entry in entries {
            self.alone.insert(entry.at(), why.to_owned());
        }
    }

    /// No build holds a mutant (none built, or its tests failed unmutated): every one of
    /// `mutants` builds on its own, those that did not compile in the schema too (their error
    /// was seen beside others').
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

    /// Mutants built on their own, by why.
    pub fn built_alone(&self) -> BTreeMap<String, usize> {
        let mut by_why = BTreeMap::new();
        for why in self.alone.values() {
            *by_why.entry(why.clone()).or_insert(0) += 1;
        }
        by_why
    }
}

/// How a schema's user runs one build of it: where the rewritten files go (a tree of their
/// own, or whole-file rewrites of the job's tree) and which job builds them.
#[async_trait::async_trait]
pub trait BuildJob: Send {
    /// What ends the whole run (a closed result stream), not just the schema.
    type Error: Send;
    /// Runs the build of `schemas` (path → rewritten file): its result, or why none could
    /// run (the schema is then given up).
    async fn run(
        &mut self,
        schemas: &BTreeMap<String, FileSchema>,
    ) -> Result<Result<JobResult, NoSchemaBuild>, Self::Error>;
}

/// Builds the schema of `mutants` over the files' texts `texts` (path → text), `schema`
/// holding the mutants left out beforehand: each failed build's errors take their mutants
/// out and it builds again, at most [`MAX_BUILDS`] times. Switch numbers are plan positions
/// plus one: 0 is the unmutated code.
pub async fn build<E: Send>(
    texts: &BTreeMap<&str, &str>,
    mutants: &[Mutant],
    mut schema: Schema,
    job: &mut (dyn BuildJob<Error = E> + '_),
    store: &dyn ArtifactStore,
) -> Result<Schema, E> {
    let std = schema::Std::of_crate(texts.values().copied());
    let why = loop {
        if schema.builds >= MAX_BUILDS {
            break format!("the schema did not build in {MAX_BUILDS} attempts");
        }
        let mut schemas: BTreeMap<String, FileSchema> = BTreeMap::new();
        for (path, text) in texts {
            let entries = Entry::of_file(mutants, path, |at| schema.in_schema(at));
            if entries.is_empty() {
                continue;
            }
            let rewritten = schema::rewrite(text, &entries, std);
            for (number, why) in &rewritten.fallback {
                schema.alone.insert(Entry::position(*number), why.clone());
            }
            schemas.insert((*path).to_owned(), rewritten);
        }
        if schemas.is_empty() {
            break "no mutant fits a schema".to_owned();
        }
        schema.builds += 1;
        let result = match job.run(&schemas).await? {
            Ok(result) => result,
            Err(why) => break why.to_string(),
        };
        schema.one_build = Duration::from_millis(result.duration_ms);
        schema.build_time += schema.one_build;
        match Built::of(&result) {
            Built::Kept(archive) => {
                schema.archive = Some(archive);
                return Ok(schema);
            }
            Built::Other(why) => break why,
            Built::Failed => {}
        }
        let json = match build_output(store, &result, "stdout", "messages").await {
            Ok(json) => json,
            Err(why) => break error_chain(&why),
        };
        match blame_failed_build(&json, &schemas) {
            Blamed::Unviable(own) => {
                for (number, error) in own {
                    let at = Entry::position(number);
                    schema.alone.remove(&at);
                    schema.unviable.insert(at, error);
                }
            }
            Blamed::Alone(blamed) => {
                for (number, why) in blamed {
                    schema.alone.insert(Entry::position(number), why);
                }
            }
            Blamed::NoSchema(why) => break format!("{why}; {}", stderr_tail(store, &result).await),
        }
    };
    schema.give_up(mutants.len(), why);
    Ok(schema)
}

/// The last lines a failed build wrote on stderr, to say why it failed where its messages
/// name no file (cargo missing, a toolchain that does not start).
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

/// Which packages of a tree are proc-macro crates, by directory, each manifest read once.
pub struct Packages<'a> {
    repo: &'a Path,
    tree: &'a TreeId,
    proc_macro: BTreeMap<String, bool>,
}

impl<'a> Packages<'a> {
    /// The packages of `tree` in `repo`, none read yet.
    pub fn of(repo: &'a Path, tree: &'a TreeId) -> Self {
        Self {
            repo,
            tree,
            proc_macro: BTreeMap::new(),
        }
    }

    /// Whether the package holding `path` (its nearest `Cargo.toml` with a `[package]`) is
    /// a proc-macro crate (`[lib] proc-macro = true`).
    pub fn is_proc_macro(&mut self, path: &str) -> bool {
        let mut dir = path;
        while let Some((parent, _)) = dir.rsplit_once('/') {
            dir = parent;
            if let Some(known) = self.proc_macro.get(dir) {
                return *known;
            }
            let manifest = format!("{dir}/Cargo.toml");
            if let Some(found) = self.read(&manifest) {
                self.proc_macro.insert(dir.to_owned(), found);
                return found;
            }
        }
        self.read("Cargo.toml").unwrap_or(false)
    }

    /// `Some(is a proc-macro crate)` for a package manifest; `None` when there is none.
    fn read(&self, manifest: &str) -> Option<bool> {
        let bytes = source::read_file(self.repo, self.tree, manifest).ok()??;
        let value: toml::Value = toml::from_str(std::str::from_utf8(&bytes).ok()?).ok()?;
        value.get("package")?;
        let lib = value.get("lib");
        let flag = |key: &str| lib.and_then(|l| l.get(key)).and_then(toml::Value::as_bool);
        Some(
            flag("proc-macro")
                .or_else(|| flag("proc_macro"))
                .unwrap_or(false),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn the_build_keeps_cargo_tests_arguments_and_replaces_nextest() {
        let workspace = build_command(&strings(&["cargo", "test", "--workspace"])).unwrap();
        assert_eq!(workspace[..2], strings(&["sh", "-c"]));
        assert!(workspace[2].starts_with("cargo test --no-run --message-format=json \"$@\""));
        assert_eq!(workspace[3..], strings(&["assay-build", "--workspace"]));
        let nextest = build_command(&strings(&["cargo", "nextest", "run"])).unwrap();
        assert_eq!(nextest[3..], strings(&["assay-build"]));
        let err = build_command(&strings(&["make", "check"]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"make check\""), "{err}");
    }
}
