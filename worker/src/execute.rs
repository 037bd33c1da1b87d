//! Runs one job end to end on this worker: a fresh scratch copy of the tree, the command in a
//! sandbox with private output files, the structured report read fresh and parsed, artifacts
//! uploaded with their sha256, and the scratch directory removed on every path.

mod go_declared_tests;
mod job_dirs;
mod mutant_edit;
mod reused_scratch;

pub use mutant_edit::EditError;

use crate::guest_file::{self, GuestFile, Placement};
use crate::job_context::{JobContext, OutputError, store_output};
use crate::manifest_job::{self, CasesError};
use crate::sandbox::{MutantSource, SandboxError, SandboxExit, SandboxRun, clean_env};
use crate::test_binaries::{self, TestBinariesError};
use assay_common::JobId;
use assay_common::fault::InfraCause;
use assay_common::job::{ArtifactRef, JobKind, JobResult, JobSpec, JobStatus, TestBinaries};
use assay_common::outcome::ReportOutcome;
use assay_common::report::{self, libtest};
use assay_common::runner::ReportLocation;
use assay_transport::error_chain::error_chain;
use assay_transport::store::StoreError;
use assay_transport::tree::TreeError;
use job_dirs::{ProofDir, proof_dir_name, scratch_name};
use mutant_edit::apply_edit;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tracing::{Instrument, info_span};

/// The unittest adapter Assay ships; written into each job's scratch directory.
pub const UNITTEST_ADAPTER: &str = include_str!("adapters/unittest_adapter.py");
/// Assay's pytest observer, loaded first with `-p assay_observer` (see [`observes`]).
pub const PYTEST_OBSERVER: &str = include_str!("adapters/pytest_observer.py");

/// The node:test reporter Assay ships; written into the scratch directory of node jobs.
pub const NODE_REPORTER: &str = include_str!("adapters/node_reporter.mjs");

/// Why a job could not be run; the job lands in the infrastructure lane with this chain.
#[derive(Debug, thiserror::Error)]
pub enum ExecuteError {
    /// The job's scratch directory could not be made.
    #[error("failed to create scratch directory {path}")]
    ScratchDir {
        /// The scratch directory it tried to make.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The job's tree could not be written into its directory.
    #[error("failed to materialize the tree of job {job}")]
    Materialize {
        /// The job being run.
        job: JobId,
        /// The underlying error.
        #[source]
        source: TreeError,
    },
    /// A mutant's edit could not be applied.
    #[error(transparent)]
    Edit(#[from] EditError),
    /// A manifest job's cases could not be run.
    #[error(transparent)]
    Cases(#[from] CasesError),
    /// The report path leads outside the tree.
    #[error("refusing report path {path}: {why}")]
    ReportOutside {
        /// The report path the job named.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A report left in the tree could not be removed before the run.
    #[error("failed to remove stale report {path}")]
    StaleReport {
        /// The stale report.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The job's prebuilt test executables could not be put in place.
    #[error("job {job}'s prebuilt test executables")]
    TestBinaries {
        /// The job being run.
        job: JobId,
        /// The underlying error.
        #[source]
        source: TestBinariesError,
    },
    /// A runner's adapter file (the pytest observer, a reporter) could not be written.
    #[error("failed to write the {what} to {path}")]
    Adapter {
        /// Which adapter it is.
        what: &'static str,
        /// Where it was to be written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The job's dependency archive could not be put in place.
    #[error("job {job}'s dependency archive")]
    Dependencies {
        /// The job being run.
        job: JobId,
        /// The underlying error.
        #[source]
        source: crate::dependency_cache::DependencyCacheError,
    },
    /// The sandbox failed to run the command (not a failing command).
    #[error("the sandbox did not run job {job}")]
    Sandbox {
        /// The job being run.
        job: JobId,
        /// The underlying error.
        #[source]
        source: SandboxError,
    },
    /// The report the command wrote could not be read.
    #[error("failed to read report {path}")]
    ReadReport {
        /// The report file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The command's output could not be captured or stored.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// The report could not be uploaded to the artifact store.
    #[error("failed to store the report of job {job}")]
    StoreReport {
        /// The job being run.
        job: JobId,
        /// The underlying error.
        #[source]
        source: StoreError,
    },
}

impl ExecuteError {
    /// What failed, for the job's result and the fault policy.
    pub fn cause(&self) -> InfraCause {
        match self {
            Self::Materialize { .. } => InfraCause::TreeFetch,
            Self::Sandbox { source, .. } => source.cause(),
            Self::Cases(cases) => cases.cause(),
            Self::TestBinaries { source, .. } => source.cause(),
            Self::Dependencies { .. } => InfraCause::Dependencies,
            Self::Output(_) | Self::StoreReport { .. } => InfraCause::StoreUnavailable,
            Self::ScratchDir { .. }
            | Self::Edit(_)
            | Self::ReportOutside { .. }
            | Self::StaleReport { .. }
            | Self::Adapter { .. }
            | Self::ReadReport { .. } => InfraCause::Workspace,
        }
    }
}

/// Runs `job` and always returns a result: failures to run it land in the infrastructure lane.
pub async fn run_job(job: &JobSpec, ctx: &JobContext) -> JobResult {
    let span = info_span!("job", proof_id = %job.proof_id, job_id = %job.job_id, worker_id = %ctx.worker_id, kind = ?job.kind);
    async {
        let started = Instant::now();
        let proof_dir = ProofDir::enter(ctx.scratch_root.join(proof_dir_name(job)));
        let scratch = proof_dir.path.join(scratch_name(job));
        let mutant = job.kind == JobKind::Mutant;
        let reused = mutant
            && scratch
                .parent()
                .is_some_and(|dir| std::fs::create_dir_all(dir).is_ok())
            && reused_scratch::take(&ctx.scratch_root, &scratch);
        let outcome = run_in(job, ctx, &proof_dir.path, &scratch, reused).await;
        // A mutant job's tree and scratch directory may be reused for the next (reset and
        // cleaned first); not after a timeout, whose processes were killed mid-write.
        let finished = outcome
            .as_ref()
            .is_ok_and(|r| matches!(r.status, JobStatus::Completed { .. }));
        if mutant && finished {
            ctx.trees.release(&job.tree, &scratch.join("tree")).await;
        }
        let parked = mutant && finished && reused_scratch::park(&ctx.scratch_root, &scratch);
        if !parked && let Err(e) = job_dirs::remove_scratch(&scratch).await {
            tracing::warn!(error = %e, path = %scratch.display(), "failed to remove job scratch directory");
        }
        drop(proof_dir);
        let mut result = match outcome {
            Ok(result) => result,
            Err(error) => JobResult::infrastructure(
                job,
                ctx.worker_id.clone(),
                error.cause(),
                error_chain(&error),
            ),
        };
        result.duration_ms = started.elapsed().as_millis() as u64;
        tracing::info!(status = result.status.label(), duration_ms = result.duration_ms, "job finished");
        result
    }
    .instrument(span)
    .await
}

async fn run_in(
    job: &JobSpec,
    ctx: &JobContext,
    proof_dir: &Path,
    scratch: &Path,
    reused: bool,
) -> Result<JobResult, ExecuteError> {
    // `tree` and `private` are the guest's (a container mounts them); `logs` is the worker's
    // alone, so the guest cannot rewrite or replace its own stdout and stderr. A reused
    // scratch directory holds only what `reused_scratch` keeps.
    let tree_dir = scratch.join("tree");
    let private = scratch.join("private");
    let logs = scratch.join("logs");
    if !reused {
        let _ = tokio::fs::remove_dir_all(scratch).await;
    }
    for dir in [
        &tree_dir,
        &private,
        &logs,
        &private.join("home"),
        &private.join("tmp"),
    ] {
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|source| ExecuteError::ScratchDir {
                path: dir.clone(),
                source,
            })?;
    }
    ctx.trees
        .materialize(&job.tree, &tree_dir)
        .await
        .map_err(|source| ExecuteError::Materialize {
            job: job.job_id.clone(),
            source,
        })?;
    for rewrite in &job.rewrites {
        apply_edit(&tree_dir, rewrite)?;
    }
    let original = match &job.edit {
        Some(edit) => Some(apply_edit(&tree_dir, edit)?),
        None => None,
    };
    let stdout_path = logs.join("stdout.log");
    let (report_path, report_root) = match job.report.location() {
        ReportLocation::Scratch | ReportLocation::ScratchAndStdout => {
            (private.join("report"), &private)
        }
        ReportLocation::Stdout | ReportLocation::Output => (stdout_path.clone(), &logs),
        ReportLocation::Tree(path) => (tree_dir.join(path.as_str()), &tree_dir),
        ReportLocation::Cases(cases) => {
            let env = job_env(job, ctx, &private);
            let dirs = manifest_job::CaseDirs {
                proof: proof_dir,
                tree: &tree_dir,
                private: &private,
                logs: &logs,
            };
            let run = manifest_job::run_cases(job, cases, ctx, dirs, env).await?;
            return Ok(JobResult {
                job_id: job.job_id.clone(),
                index: job.index,
                status: run.status,
                report: run.report,
                artifacts: run.artifacts,
                duration_ms: 0,
                worker: ctx.worker_id.clone(),
                sandbox: Some(ctx.sandbox.evidence()),
            });
        }
    };
    // A committed link (`reports -> /etc`) must not lead the removal below out of the tree.
    if let Placement::Outside(why) = guest_file::placement(&report_path, report_root) {
        return Err(ExecuteError::ReportOutside {
            path: report_path,
            why,
        });
    }
    // A report inside the tree may have been committed: it must never pass for this run's.
    if let Err(source) = tokio::fs::remove_file(&report_path).await
        && source.kind() != std::io::ErrorKind::NotFound
    {
        return Err(ExecuteError::StaleReport {
            path: report_path,
            source,
        });
    }
    // Each adapter is written only for a command that names it (most jobs name none).
    let names = |placeholder: &str| job.command.iter().any(|arg| arg.contains(placeholder));
    let adapter_path = private.join("unittest_adapter.py");
    if names("{adapter}") {
        write_adapter("unittest adapter", &adapter_path, UNITTEST_ADAPTER).await?;
    }
    let node_reporter_path = private.join("assay_node_reporter.mjs");
    if names("{node_reporter}") {
        write_adapter("node:test reporter", &node_reporter_path, NODE_REPORTER).await?;
    }
    let nextest_config_path = private.join("assay_nextest.toml");
    if names("{nextest_config}") {
        // The config names the report as the guest sees it: in a container, under its mount.
        let report = ctx
            .sandbox
            .guest_path(&tree_dir, &private, &report_path.to_string_lossy());
        let config = assay_common::runner::cargo::nextest_config(&report);
        write_adapter("nextest profile", &nextest_config_path, &config).await?;
    }
    let binaries_error = |source| ExecuteError::TestBinaries {
        job: job.job_id.clone(),
        source,
    };
    let script = match &job.binaries {
        Some(TestBinaries::Use { archive, only }) => {
            let script =
                test_binaries::unpack(ctx, archive, only.as_ref(), &private.join("test-binaries"))
                    .await
                    .map_err(binaries_error)?;
            ctx.sandbox
                .guest_path(&tree_dir, &private, &script.to_string_lossy())
        }
        _ => String::new(),
    };
    // Assay's own record of each test's call, for a proving pytest job: a pytest plugin is
    // loaded by `-p` before any conftest, so its call wrapper is the innermost.
    let observer_dir = private.join("observer");
    let record_path = observer_dir.join("calls.jsonl");
    let observing = observes(job);
    // Read before the guest runs: what it does to the tree cannot change the expectation.
    let declared_go_tests = match go_declared_tests::checked(job) {
        true => {
            let tree = tree_dir.clone();
            tokio::task::spawn_blocking(move || go_declared_tests::read(&tree))
                .await
                .ok()
        }
        false => None,
    };
    if observing {
        tokio::fs::create_dir_all(&observer_dir)
            .await
            .map_err(|source| ExecuteError::Adapter {
                what: "pytest observer",
                path: observer_dir.clone(),
                source,
            })?;
        write_adapter(
            "pytest observer",
            &observer_dir.join("assay_observer.py"),
            PYTEST_OBSERVER,
        )
        .await?;
    }
    // The report path is private and fresh, so no earlier run's report can be read as this one's.
    let placed = |arg: &String| {
        arg.replace("{report}", &report_path.to_string_lossy())
            .replace("{adapter}", &adapter_path.to_string_lossy())
            .replace("{node_reporter}", &node_reporter_path.to_string_lossy())
            .replace("{nextest_config}", &nextest_config_path.to_string_lossy())
            .replace(assay_common::test_binaries::PLACEHOLDER, &script)
    };
    let mut command: Vec<String> = job.command.iter().map(placed).collect();
    let mut env = job_env(job, ctx, &private);
    let vendored = match &job.dependencies {
        Some(archive) => {
            let given = crate::dependency_cache::for_job(
                ctx.dependencies.as_deref(),
                ctx.store.as_ref(),
                ctx.sandbox.as_ref(),
                archive,
                &tree_dir,
                &private,
            )
            .await
            .map_err(|source| ExecuteError::Dependencies {
                job: job.job_id.clone(),
                source,
            })?;
            env.retain(|(key, _)| given.env.iter().all(|(set, _)| set != key));
            env.extend(given.env);
            Some(given.sources)
        }
        None => None,
    };
    if observing {
        command.extend(["-p".to_owned(), "assay_observer".to_owned()]);
        let guest = |path: &Path| {
            ctx.sandbox
                .guest_path(&tree_dir, &private, &path.to_string_lossy())
        };
        let python_path = match env.iter().position(|(k, _)| k == "PYTHONPATH") {
            Some(at) => format!("{}:{}", guest(&observer_dir), env.remove(at).1),
            None => guest(&observer_dir),
        };
        env.push(("PYTHONPATH".to_owned(), python_path));
        env.push(("ASSAY_OBSERVE_RECORD".to_owned(), guest(&record_path)));
    }
    let run = SandboxRun {
        proof_id: job.proof_id.to_string(),
        job_id: job.job_id.to_string(),
        tree_dir: tree_dir.clone(),
        scratch_dir: private.clone(),
        proof_dir: proof_dir.to_owned(),
        command,
        env,
        stdout_path,
        stderr_path: logs.join("stderr.log"),
        timeout: Duration::from_secs(job.timeout_secs.max(1)),
        forked_timeout: job
            .forked_timeout_secs
            .map(|secs| Duration::from_secs(secs.max(1))),
        network: false,
        vendored,
    };
    let sandbox_span = info_span!("sandbox", sandbox = ctx.sandbox.name());
    // A mutation run's baseline says what its mutants will run: the sandbox may prepare for
    // them while it runs (its tree is still as materialized here).
    if let (JobKind::Mutant, None, Some(next)) = (job.kind, &job.edit, &job.next_command) {
        let next: Vec<String> = next.iter().map(placed).collect();
        ctx.sandbox
            .prepare_next(&run, &next, job.tree.as_str())
            .await;
    }
    let exit = if job.kind == JobKind::Mutant {
        match (&job.edit, &original) {
            (Some(edit), Some(original)) => {
                let source = MutantSource {
                    tree: job.tree.as_str(),
                    path: edit.path.as_str(),
                    original,
                };
                ctx.sandbox
                    .run_mutant_of(&run, &source)
                    .instrument(sandbox_span)
                    .await
            }
            _ => ctx.sandbox.run_mutant(&run).instrument(sandbox_span).await,
        }
    } else {
        ctx.sandbox.run(&run).instrument(sandbox_span).await
    }
    .map_err(|source| ExecuteError::Sandbox {
        job: job.job_id.clone(),
        source,
    })?;
    let status = match exit {
        SandboxExit::Exited(code) => JobStatus::Completed { exit_code: code },
        SandboxExit::Signalled(signal) => JobStatus::Completed {
            exit_code: 128 + signal,
        },
        SandboxExit::TimedOut => JobStatus::TimedOut,
    };
    let read_file = |path: PathBuf, root: PathBuf| async move {
        let read_report = |source| ExecuteError::ReadReport {
            path: path.clone(),
            source,
        };
        let (at, under) = (path.clone(), root);
        tokio::task::spawn_blocking(move || guest_file::read(&at, &under))
            .await
            .map_err(|e| read_report(std::io::Error::other(e)))?
            .map_err(read_report)
    };
    let mut read = read_file(report_path.clone(), report_root.clone()).await?;
    // A cargo run's report is framed here with the captured streams it needs: the guest
    // writes into them but cannot move the boundary.
    let captured = |path: &PathBuf| read_file(path.clone(), logs.clone());
    read = match (job.report.location(), read) {
        (ReportLocation::Output, GuestFile::Bytes(stdout)) => {
            match captured(&run.stderr_path).await? {
                GuestFile::Bytes(stderr) => GuestFile::Bytes(libtest::frame(&stdout, &stderr)),
                GuestFile::Absent => GuestFile::Bytes(libtest::frame(&stdout, b"")),
                refused @ GuestFile::Refused(_) => refused,
            }
        }
        (ReportLocation::ScratchAndStdout, read @ (GuestFile::Bytes(_) | GuestFile::Absent)) => {
            let junit = match read {
                GuestFile::Bytes(junit) => Some(junit),
                GuestFile::Absent | GuestFile::Refused(_) => None,
            };
            let stdout = match captured(&run.stdout_path).await? {
                GuestFile::Bytes(stdout) => stdout,
                GuestFile::Absent | GuestFile::Refused(_) => Vec::new(),
            };
            GuestFile::Bytes(libtest::frame_nextest(junit.as_deref(), &stdout))
        }
        (_, read) => read,
    };
    let (report_bytes, refused) = match read {
        GuestFile::Absent => (None, None),
        GuestFile::Bytes(bytes) => (Some(bytes), None),
        GuestFile::Refused(why) => (None, Some(why)),
    };
    let report = match (&status, refused) {
        // A killed run's report, if any, describes part of a run at best.
        (JobStatus::TimedOut, _) => {
            ReportOutcome::Inconsistent("the run was killed at its timeout".into())
        }
        (_, Some(why)) => ReportOutcome::Malformed(format!("refused: {why}")),
        _ => match (
            report::parse_in_tree(
                &job.report,
                report_bytes.as_deref(),
                &tree_dir.to_string_lossy(),
            ),
            unfinished_pytest_session(job, &status),
        ) {
            (ReportOutcome::Parsed(_), Some(why)) => ReportOutcome::Inconsistent(why),
            (report, _) => report,
        },
    };
    let report = match report {
        ReportOutcome::Parsed(parsed) if observing => {
            match read_file(record_path.clone(), private.clone()).await? {
                GuestFile::Bytes(record) => {
                    match assay_common::report::observed::contradiction(&parsed, &record) {
                        Some(why) => ReportOutcome::Inconsistent(why),
                        None => ReportOutcome::Parsed(parsed),
                    }
                }
                // No call reached the recorder, or the record was taken away: a report that
                // names a pass then describes a run Assay did not see.
                GuestFile::Absent | GuestFile::Refused(_)
                    if parsed
                        .cases
                        .iter()
                        .any(|c| c.outcome == assay_common::outcome::Outcome::Passed) =>
                {
                    ReportOutcome::Inconsistent(
                        "the report names passes, but Assay's own record of the run is missing"
                            .into(),
                    )
                }
                _ => ReportOutcome::Parsed(parsed),
            }
        }
        ReportOutcome::Parsed(parsed) => match declared_go_tests
            .as_ref()
            .and_then(|declared| declared.missing(&parsed, &job.command))
        {
            Some(why) => ReportOutcome::Inconsistent(why),
            None => ReportOutcome::Parsed(parsed),
        },
        report => report,
    };
    // Go before 1.24 prints its compiler errors on stderr, outside the report. No more is read
    // than the stored stderr keeps, so a cache's re-read of it names the same errors.
    let report = match report {
        ReportOutcome::Parsed(mut parsed) if report::reads_stderr(&job.report, &parsed) => {
            let limit = (report::go::STDERR_HEAD as u64).min(ctx.output_cap_bytes);
            let stderr = crate::stderr_tail::head(&run.stderr_path, limit);
            report::complete_from_stderr(&job.report, &mut parsed, &stderr);
            ReportOutcome::Parsed(parsed)
        }
        report => report,
    };
    let (status, report) = if never_writes_its_report(job) {
        (status, report)
    } else {
        explain_missing_report(status, report, &run.stderr_path)
    };
    let prefix = format!("proofs/{}/jobs/{:04}", job.proof_id, job.index);
    let mut artifacts: Vec<ArtifactRef> = Vec::new();
    for (name, path) in [("stdout", &run.stdout_path), ("stderr", &run.stderr_path)] {
        let key = format!("{prefix}/{name}.log");
        artifacts.push(store_output(ctx, name, &key, path).await?);
    }
    if let Some(bytes) = report_bytes.filter(|_| job.report.location() != ReportLocation::Stdout) {
        let key = format!("{prefix}/report");
        artifacts.push(
            ctx.store
                .put_bytes("report", &key, bytes.into())
                .await
                .map_err(|source| ExecuteError::StoreReport {
                    job: job.job_id.clone(),
                    source,
                })?,
        );
    }
    if job.binaries == Some(TestBinaries::Keep) && status == (JobStatus::Completed { exit_code: 0 })
    {
        let guest_root = ctx
            .sandbox
            .guest_path(&tree_dir, &private, &tree_dir.to_string_lossy());
        let key = format!("{prefix}/{}.tar", assay_common::test_binaries::ARTIFACT);
        artifacts.push(
            test_binaries::keep(ctx, &run.stdout_path, &logs, &tree_dir, &guest_root, &key)
                .await
                .map_err(binaries_error)?,
        );
    }
    Ok(JobResult {
        job_id: job.job_id.clone(),
        index: job.index,
        status,
        report,
        artifacts,
        duration_ms: 0,
        worker: ctx.worker_id.clone(),
        sandbox: Some(ctx.sandbox.evidence()),
    })
}

/// A failed command that wrote no report says why in its stderr: its last lines go with the
/// result (so the progress line, the summary and the evidence quote them), and when they say
/// the toolchain could not run the command, the job is the infrastructure's failure, never a
/// failed test of the code under test.
/// A command that is handed no `{report}` path for a report read from there (a `command`
/// suite's, judged by its exit status alone): its missing report says nothing of the
/// toolchain, and a command not found is its own outcome (the suite's `error` status).
fn never_writes_its_report(job: &JobSpec) -> bool {
    use assay_common::runner::ReportFormat::*;
    let read_from_placeholder = matches!(
        job.report,
        JunitXml | UnittestJson | NodeJson | VitestJson | NextestJunit
    );
    read_from_placeholder && !job.command.iter().any(|arg| arg.contains("{report}"))
}

fn explain_missing_report(
    status: JobStatus,
    report: ReportOutcome,
    stderr_path: &Path,
) -> (JobStatus, ReportOutcome) {
    let JobStatus::Completed { exit_code } = status else {
        return (status, report);
    };
    // A report naming no test may be what a command that never started left (cargo's
    // output framed as libtest's): only the toolchain's words turn it into more.
    let missing = report == ReportOutcome::Missing;
    if exit_code == 0 || !(missing || report == ReportOutcome::ZeroTests) {
        return (status, report);
    }
    let tail = crate::stderr_tail::read(stderr_path);
    if tail.is_empty() {
        return (status, report);
    }
    if crate::stderr_tail::toolchain_failure(exit_code, &tail) {
        let message = format!(
            "the toolchain could not run the command (exit {exit_code}); its stderr ends:{}",
            assay_common::outcome::indented(&tail)
        );
        return (
            JobStatus::Infrastructure {
                message,
                cause: InfraCause::ToolchainMissing,
            },
            report,
        );
    }
    match missing {
        true => (status, ReportOutcome::Unwritten(tail)),
        false => (status, report),
    }
}

async fn write_adapter(
    what: &'static str,
    path: &Path,
    contents: &str,
) -> Result<(), ExecuteError> {
    tokio::fs::write(path, contents)
        .await
        .map_err(|source| ExecuteError::Adapter {
            what,
            path: path.to_path_buf(),
            source,
        })
}

/// The job's whole environment: the sandbox's clean one, what the worker passes through, a
/// private HOME and TMPDIR unless the user passed their own (e.g. a warm GOCACHE), and the
/// job's own variables.
/// Whether a job's pytest run is observed by Assay's own plugin: a proving job (not a mutant's,
/// which the warm servers run) of `PYTHON -m pytest` writing JUnit XML.
fn observes(job: &JobSpec) -> bool {
    job.kind != JobKind::Mutant
        && assay_common::runner::pytest::python_m_pytest(&job.command).is_some()
        && matches!(job.report, assay_common::runner::ReportFormat::JunitXml)
}

fn job_env(job: &JobSpec, ctx: &JobContext, private: &Path) -> Vec<(String, String)> {
    let mut env = clean_env(&ctx.pass_env);
    for (key, value) in [
        ("HOME", private.join("home")),
        ("TMPDIR", private.join("tmp")),
    ] {
        if !env.iter().any(|(k, _)| k == key) {
            env.push((key.to_owned(), value.to_string_lossy().into_owned()));
        }
    }
    env.push(("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned()));
    env.extend(job.env.iter().cloned());
    env
}

/// pytest exits 2 when the session was interrupted and 3 on an internal error (a crash in a
/// plugin or in its own JUnit writer, say): the report it leaves lists only what ran before,
/// with counts that agree with that part, so the exit code is what says the run is partial.
fn unfinished_pytest_session(job: &JobSpec, status: &JobStatus) -> Option<String> {
    let JobStatus::Completed { exit_code } = status else {
        return None;
    };
    if !assay_common::runner::is_pytest_session(&job.command) {
        return None;
    }
    match exit_code {
        2 => Some(
            "pytest was interrupted (exit 2): the session stopped before every test ran".into(),
        ),
        3 => Some(
            "pytest hit an internal error (exit 3): the session stopped before every test ran"
                .into(),
        ),
        _ => None,
    }
}
