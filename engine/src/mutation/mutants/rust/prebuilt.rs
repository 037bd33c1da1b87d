//! The one build of a mutant schema, shared by `assay mutate` and the proof's mutation check:
//! the build job's command and environment, what a build kept, which packages can hold no
//! schema, and what a failed build's errors take out of the schema before the next one.

use super::schema::{self, FileSchema};
use crate::source;
use assay_common::TreeId;
use assay_common::job::{ArtifactRef, JobResult, JobSpec, JobStatus, TestBinaries};
use assay_common::runner::{ReportFormat, cargo::runs_nextest};
use assay_common::test_binaries::{ARTIFACT, PLACEHOLDER, Selection};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Schema builds before giving up: each failed build takes the blamed mutants out, and a
/// crate's errors rarely need more than two rounds.
pub const MAX_BUILDS: usize = 6;

/// Turns the schemata off (`0`), for a comparison with a build per mutant.
pub const SWITCH_OFF_VARIABLE: &str = "ASSAY_MUTATE_SCHEMATA";

/// Why a proc-macro crate's mutants build on their own.
pub const PROC_MACRO: &str =
    "a proc-macro crate's code runs inside the compiler, where the switch is never read";

/// Why a mutant blamed for a failed schema build builds on its own.
pub const BLAMED: &str = "did not compile in the schema";

/// The schemata are used for a cargo run unless [`SWITCH_OFF_VARIABLE`] is `0`.
pub fn wanted() -> bool {
    std::env::var(SWITCH_OFF_VARIABLE).map_or(true, |v| v.trim() != "0")
}

/// The build command for `prefix` (the run's test command), or why there is none: the
/// schema builds with `cargo test --no-run` and the same cargo arguments.
pub fn build_command(prefix: &[String]) -> Result<Vec<String>, String> {
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
    job.command = vec!["sh".into(), PLACEHOLDER.into()];
    job.report = ReportFormat::CargoTestOutput;
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

/// What a schema build did.
pub enum Built {
    /// The build kept its executables.
    Kept(ArtifactRef),
    /// It failed to compile: cargo's messages say why.
    Failed,
    /// Anything else (a timeout, the worker refused the executables): no schema.
    Other(String),
}

impl Built {
    pub fn of(result: &JobResult) -> Self {
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

/// What a failed schema build's errors take out of the schema, by switch number.
#[derive(Debug, PartialEq, Eq)]
pub enum Blamed {
    /// Every error lies inside these mutants' own code: they do not compile, no build needed.
    Unviable(BTreeMap<u32, String>),
    /// These build on their own, with why.
    Alone(BTreeMap<u32, String>),
    /// No mutant can be blamed and too few are held to halve: no schema.
    NoSchema(String),
}

/// Reads a failed build's cargo messages (`cargo_json`) against the files it built
/// (`schemas`). An error outside every rewritten file (another member's build broken by a
/// mutant, say) names no mutant: half of those held build on their own, until the rest builds.
pub fn blame_failed_build(cargo_json: &str, schemas: &BTreeMap<String, FileSchema>) -> Blamed {
    let spans = schema::error_spans(cargo_json);
    if let Some(own) = schema::own_errors(&spans, schemas) {
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

/// Which packages of a tree are proc-macro crates, by directory, each manifest read once.
pub struct Packages<'a> {
    repo: &'a Path,
    tree: &'a TreeId,
    proc_macro: BTreeMap<String, bool>,
}

impl<'a> Packages<'a> {
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
        let err = build_command(&strings(&["make", "check"])).unwrap_err();
        assert!(err.contains("\"make check\""), "{err}");
    }
}
