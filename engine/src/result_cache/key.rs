//! The result cache's key: everything that can change a job's result, digested.

use super::SCHEMA;
use assay_common::TreeId;
use assay_common::job::{JobKind, JobSpec};
use assay_common::runner::ReportFormat;
use assay_common::sandbox::SandboxEvidence;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// What, beside the job itself, decides a job's result where it runs: the sandbox (kind, image
/// id and limits), the interpreter a process-sandbox command resolves to, and the environment
/// passed in (names with a digest of each value, so no secret is written anywhere).
#[derive(Clone, Debug)]
pub struct RunContext {
    /// The sandbox the jobs run in: its kind, image id and limits.
    pub sandbox: SandboxEvidence,
    /// `(name, sha256 of the value)`, sorted.
    pub env: Vec<(String, String)>,
    interpreters: Interpreters,
    /// The identity of the Rust toolchain each tree's jobs run, where the tree pins it and the
    /// host resolved it ([`crate::dependencies::Pinned::toolchain`]): a rustup proxy is the
    /// same file whichever toolchain it runs, and a toolchain file's name can stay while what
    /// it names is updated.
    rust_toolchains: Arc<HashMap<TreeId, String>>,
}

#[derive(Clone, Debug)]
enum Interpreters {
    /// Docker: the image decides.
    Image,
    /// The process sandbox here: each command's program, resolved on the job's `PATH` and
    /// identified by its bytes once (see [`crate::program_identity`]).
    Resolved(Arc<Mutex<HashMap<String, String>>>),
    /// The process sandbox on a fleet: what the operator declared the workers run.
    Declared(String),
}

impl RunContext {
    /// The context of jobs run in `sandbox` with `env` passed in (values kept only as digests).
    pub fn new(sandbox: SandboxEvidence, env: &[(String, String)]) -> Self {
        let mut env: Vec<(String, String)> = env
            .iter()
            .map(|(name, value)| (name.clone(), hex::encode(Sha256::digest(value.as_bytes()))))
            .collect();
        env.sort();
        let interpreters = match sandbox.container {
            Some(_) => Interpreters::Image,
            None => Interpreters::Resolved(Arc::default()),
        };
        Self {
            sandbox,
            env,
            interpreters,
            rust_toolchains: Arc::default(),
        }
    }

    /// This context with the Rust toolchain of each of `toolchains`' trees, as pinned here.
    pub fn with_rust_toolchains(mut self, toolchains: &[(TreeId, String)]) -> Self {
        self.rust_toolchains = Arc::new(toolchains.iter().cloned().collect());
        self
    }

    /// The Rust toolchain `tree`'s jobs run, when it was resolved here.
    pub(crate) fn rust_toolchain(&self, tree: &TreeId) -> Option<&str> {
        self.rust_toolchains.get(tree).map(String::as_str)
    }

    /// A fleet's context, as its operator declared it (`[cache]`): the workers' sandbox, their
    /// interpreter (process sandbox) and the names of the variables they pass in. Values of
    /// those variables are the workers' and stay out of the key: the declaration is changed
    /// when they change.
    pub fn declared(sandbox: SandboxEvidence, env_names: &[String], interpreter: &str) -> Self {
        let mut env: Vec<(String, String)> = env_names
            .iter()
            .map(|name| (name.clone(), "declared".to_owned()))
            .collect();
        env.sort();
        let interpreters = match sandbox.container {
            Some(_) => Interpreters::Image,
            None => Interpreters::Declared(interpreter.to_owned()),
        };
        Self {
            sandbox,
            env,
            interpreters,
            rust_toolchains: Arc::default(),
        }
    }

    /// The program `command[0]` runs as here, identified without running it: a different
    /// interpreter is a different run.
    pub(crate) fn interpreter(&self, program: &str) -> Option<String> {
        let cache = match &self.interpreters {
            Interpreters::Image => return None,
            Interpreters::Declared(declared) => return Some(format!("{program}: {declared}")),
            Interpreters::Resolved(cache) => cache,
        };
        if let Ok(known) = cache.lock()
            && let Some(found) = known.get(program)
        {
            return Some(found.clone());
        }
        // Jobs get this process's PATH (`sandbox::clean_env`).
        let path = std::env::var_os("PATH").unwrap_or_default();
        let identity = crate::program_identity::identify(program, &path);
        if let Ok(mut known) = cache.lock() {
            known.insert(program.to_owned(), identity.clone());
        }
        Some(identity)
    }
}

/// Everything a key digests, in the order written; documented in docs/FORMATS.md.
#[derive(Serialize)]
struct KeyInputs<'a> {
    schema: &'static str,
    kind: &'a JobKind,
    /// Repeats of the same test on the same tree are distinct runs: each keeps its own entry.
    index: u32,
    tree: &'a str,
    edit: &'a Option<assay_common::job::ByteEdit>,
    /// Absent for every job but a schema build's, so the other keys stay as they were.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    rewrites: &'a [assay_common::job::ByteEdit],
    command: &'a [String],
    report: &'a ReportFormat,
    selected_tests: &'a [String],
    job_env: &'a [(String, String)],
    timeout_secs: u64,
    /// Absent for every job but a mutant's, so the other keys stay as they were.
    #[serde(skip_serializing_if = "Option::is_none")]
    forked_timeout_secs: Option<u64>,
    /// Prebuilt test executables (by their archive's sha256); absent for every other job.
    #[serde(skip_serializing_if = "Option::is_none")]
    binaries: &'a Option<assay_common::job::TestBinaries>,
    sandbox: &'a SandboxEvidence,
    interpreter: Option<String>,
    env: &'a [(String, String)],
    /// The Rust toolchain the tree's jobs run; absent where none was resolved, so the other
    /// keys stay as they were.
    #[serde(skip_serializing_if = "Option::is_none")]
    rust_toolchain: Option<&'a str>,
}

/// The cache key of `spec` run in `context`: hex sha256 of its canonical JSON inputs.
pub fn cache_key(spec: &JobSpec, context: &RunContext) -> String {
    schema_key(SCHEMA, spec, context)
}

/// The key of `spec` run in `context` in the key space of `schema`: the proof cache's key
/// inputs, so every job kind keyed this way digests the same run context.
pub(crate) fn schema_key(schema: &'static str, spec: &JobSpec, context: &RunContext) -> String {
    let inputs = KeyInputs {
        schema,
        kind: &spec.kind,
        index: spec.index,
        tree: spec.tree.as_str(),
        edit: &spec.edit,
        rewrites: &spec.rewrites,
        command: &spec.command,
        report: &spec.report,
        selected_tests: &spec.selected_tests,
        job_env: &spec.env,
        timeout_secs: spec.timeout_secs,
        forked_timeout_secs: spec.forked_timeout_secs,
        binaries: &spec.binaries,
        sandbox: &context.sandbox,
        interpreter: spec
            .command
            .first()
            .and_then(|program| context.interpreter(program)),
        env: &context.env,
        rust_toolchain: context.rust_toolchain(&spec.tree),
    };
    // Serializing plain data cannot fail; an empty digest input would still be a valid key.
    let bytes = serde_json::to_vec(&inputs).unwrap_or_default();
    hex::encode(Sha256::digest(&bytes))
}
