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
use crate::mutation::mutants::rust::schema::{self, FileSchema};
use crate::source;
use assay_common::TreeId;
use assay_common::job::{ArtifactRef, JobResult, JobSpec, JobStatus, TestBinaries};
use assay_common::runner::{RunnerKind, cargo::runs_nextest};
use assay_common::test_binaries::{ARTIFACT, PLACEHOLDER, Selection};
use assay_transport::error_chain::error_chain;
use assay_transport::queue::JobQueue;
use assay_transport::store::{ArtifactStore, read_named};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Schema builds before giving up: each failed build takes the blamed mutants out, and a
/// crate's errors rarely need more than two rounds.
const MAX_BUILDS: usize = 6;

const PROC_MACRO: &str =
    "a proc-macro crate's code runs inside the compiler, where the switch is never read";

/// Which packages of the tree are proc-macro crates, by directory, read once each.
#[derive(Default)]
struct Packages {
    proc_macro: BTreeMap<String, bool>,
}

impl Packages {
    /// Whether the package holding `path` (its nearest `Cargo.toml` with a `[package]`) is
    /// a proc-macro crate (`[lib] proc-macro = true`).
    fn is_proc_macro(&mut self, request: &MutateRequest, path: &str) -> bool {
        let mut dir = path;
        while let Some((parent, _)) = dir.rsplit_once('/') {
            dir = parent;
            if let Some(known) = self.proc_macro.get(dir) {
                return *known;
            }
            let manifest = format!("{dir}/Cargo.toml");
            if let Some(found) = Self::read(request, &manifest) {
                self.proc_macro.insert(dir.to_owned(), found);
                return found;
            }
        }
        Self::read(request, "Cargo.toml").unwrap_or(false)
    }

    /// `Some(is a proc-macro crate)` for a package manifest; `None` when there is none.
    fn read(request: &MutateRequest, manifest: &str) -> Option<bool> {
        let bytes = source::read_file(&request.repo, &request.tree, manifest).ok()??;
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

/// Turns the schemata off (`0`), for a comparison with a build per mutant.
pub const SWITCH_OFF_VARIABLE: &str = "ASSAY_MUTATE_SCHEMATA";

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

/// The build command for `prefix` (the run's test command), or why there is none: the
/// schema builds with `cargo test --no-run` and the same cargo arguments.
fn build_command(prefix: &[String]) -> Result<Vec<String>, String> {
    let args: &[String] = match prefix {
        [cargo, test, rest @ ..] if cargo == "cargo" && test == "test" => rest,
        _ if runs_nextest(prefix) => &[],
        _ => {
            return Err(format!(
                "the test command {:?} is not `cargo test` or `cargo nextest run`",
                prefix.join(" ")
            ));
        }
    };
    Ok(assay_common::test_binaries::build_command(args))
}

/// The schemata are used for a cargo run unless [`SWITCH_OFF_VARIABLE`] is `0`.
pub(super) fn wanted(runner: RunnerKind) -> bool {
    runner == RunnerKind::Cargo
        && std::env::var(SWITCH_OFF_VARIABLE).map_or(true, |v| v.trim() != "0")
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
    let mut job = spec(
        request,
        &prebuilt.tree,
        index,
        vec!["sh".into(), PLACEHOLDER.into()],
    );
    job.report = assay_common::runner::ReportFormat::CargoTestOutput;
    job.env
        .push((schema::SWITCH_VARIABLE.to_owned(), number.to_string()));
    if number == 0 {
        job.env
            .push((schema::TRACE_VARIABLE.to_owned(), "on".to_owned()));
    }
    job.binaries = Some(TestBinaries::Use {
        archive: prebuilt.archive.clone(),
        only,
    });
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
    let command = match build_command(&request.command_prefix) {
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
    let mut packages = Packages::default();
    let compile_time: BTreeSet<&str> = texts
        .keys()
        .copied()
        .filter(|path| packages.is_proc_macro(request, path))
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
        let mut job = spec(request, &tree, *index, command.clone());
        *index += 1;
        job.report = assay_common::runner::ReportFormat::CargoTestOutput;
        job.timeout_secs = request.budget.as_secs().max(1);
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
        match built(&result) {
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
        let spans = schema::error_spans(&json);
        if let Some(own) = schema::own_errors(&spans, &schemas) {
            for (number, error) in own {
                alone.remove(&(number as usize - 1));
                unviable.insert(number as usize - 1, error);
            }
        } else {
            match schema::blame(&spans, &schemas).filter(|b| !b.is_empty()) {
                Some(blamed) => {
                    for number in blamed {
                        alone.insert(number as usize - 1, "did not compile in the schema".into());
                    }
                }
                None => {
                    // An error outside every rewritten file (another member's build broken by a
                    // mutant, say) names no mutant: half of those still held build on their own,
                    // until the rest builds.
                    let first = spans.first().map_or_else(
                        || "no error names a file".to_owned(),
                        |s| format!("{}: {}", s.file, s.message),
                    );
                    let held: Vec<usize> = (0..mutants.len())
                        .filter(|at| !alone.contains_key(at) && !unviable.contains_key(at))
                        .collect();
                    if held.len() < 2 {
                        note = Some(format!(
                            "the schema build failed on an error no mutant is blamed for ({first})"
                        ));
                        break None;
                    }
                    for at in &held[held.len() / 2..] {
                        alone.insert(
                        *at,
                        format!("left the schema with half the rest after an error no mutant is blamed for ({first})"),
                    );
                    }
                }
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
            alone.insert(at, "did not compile in the schema".into());
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

enum Built {
    /// The build kept its executables.
    Kept(ArtifactRef),
    /// It failed to compile: cargo's messages say why.
    Failed,
    /// Anything else (a timeout, the worker refused the executables): no schema.
    Other(String),
}

fn built(result: &JobResult) -> Built {
    match &result.status {
        JobStatus::Completed { exit_code: 0 } => {
            match result.artifacts.iter().find(|a| a.name == ARTIFACT) {
                Some(archive) => Built::Kept(archive.clone()),
                None => Built::Other("the schema build kept no test executables".into()),
            }
        }
        JobStatus::Completed { .. } => Built::Failed,
        JobStatus::TimedOut => Built::Other("the schema build ran past the budget".into()),
        JobStatus::Infrastructure { message, .. } => {
            Built::Other(format!("the schema build could not run: {message}"))
        }
        JobStatus::Cancelled => Built::Other("the schema build was cancelled".into()),
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
        let err = build_command(&strings(&["make", "check"])).unwrap_err();
        assert!(err.contains("\"make check\""), "{err}");
    }
}
