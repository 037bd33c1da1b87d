//! Fleet subcommands' glue: `assay coordinator`, `assay worker`, `assay status`, `assay results`,
//! `assay cancel`, and `assay prove --cluster`. Flags and `ASSAY_*` variables layer over the
//! service file here; the services themselves live in the libraries.

use crate::exit::{Failure, ResultExt as _};
use anyhow::{Context, anyhow};
use assay_common::ProofId;
use assay_common::fleet::{CancelReply, ProofRecord, ProofStatus, Subjects, Submission};
use assay_common::job::JobResult;
use assay_common::service_config::{SandboxKind, ServiceConfig};
use assay_coordinator::client::{self, FleetProgress};
use assay_coordinator::{self as coordinator, CoordinatorConfig};
use assay_worker::{self as worker, WorkerConfig};
use clap::Args;
use std::path::PathBuf;

/// The proof this process submitted to a fleet, once it has: an interrupted client names it,
/// since the proof keeps running there.
pub static SUBMITTED_PROOF: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// What both services take: their file, the fleet's NATS servers and artifact store, the
/// subject prefix and the NATS connection's flags.
#[derive(Args, Debug, Clone, Default)]
pub struct ServiceArgs {
    /// Service configuration file (TOML, schema assay.service/v1).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// NATS server URL, or the servers of a cluster separated by commas
    /// (nats://a:4222,nats://b:4222) [env: ASSAY_NATS_URL].
    #[arg(long, value_name = "URL[,URL…]")]
    pub nats: Option<String>,
    /// Artifact store URL: s3://BUCKET, file:///DIR or memory:// [env: ASSAY_STORE].
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// Subject prefix of this fleet [env: ASSAY_SUBJECT_PREFIX].
    #[arg(long, value_name = "PREFIX")]
    pub subject_prefix: Option<String>,
    #[command(flatten)]
    pub nats_auth: crate::nats_flags::NatsFlags,
}

/// `assay worker`: the services' flags and what only a worker uses, how it runs jobs.
#[derive(Args, Debug, Clone, Default)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub service: ServiceArgs,
    /// Jobs this worker runs at once [env: ASSAY_SLOTS].
    #[arg(long, value_name = "N")]
    pub slots: Option<u32>,
    /// Sandbox for jobs: process or docker [env: ASSAY_SANDBOX].
    #[arg(long, value_name = "KIND")]
    pub sandbox: Option<SandboxKind>,
    /// Image of the docker sandbox [default: assay-runner-python:latest].
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// Seconds running jobs get to finish on SIGTERM before they are handed back
    /// [env: ASSAY_SHUTDOWN_GRACE_SECS].
    #[arg(long, value_name = "SECS")]
    pub shutdown_grace: Option<u64>,
    /// An environment variable jobs receive from the worker's own environment (repeatable;
    /// names only, e.g. RUSTUP_HOME for a rustup toolchain; in the variable, names separated
    /// by commas). Jobs get a clean environment otherwise.
    #[arg(
        long = "pass-env",
        value_name = "NAME",
        env = "ASSAY_PASS_ENV",
        value_delimiter = ',',
        value_parser = crate::guest_env_flags::pass_env_name
    )]
    pub pass_env: Vec<String>,
}

/// defaults → file → `ASSAY_*` environment → flags, not yet validated.
fn layered_config(args: &ServiceArgs) -> Result<ServiceConfig, Failure> {
    let mut config = match &args.config {
        Some(path) => ServiceConfig::from_file(path).map_err(|e| Failure::usage(e.into()))?,
        None => ServiceConfig::default(),
    };
    config
        .apply_env(std::env::vars())
        .map_err(|e| Failure::usage(e.into()))?;
    if let Some(url) = &args.nats {
        config.nats.url = url.clone();
    }
    if let Some(url) = &args.store {
        config.store.url = url.clone();
    }
    if let Some(prefix) = &args.subject_prefix {
        config.nats.subject_prefix = prefix.clone();
    }
    args.nats_auth.apply(&mut config.nats);
    Ok(config)
}

/// The coordinator's configuration: defaults → file → `ASSAY_*` environment → flags, then
/// validated.
pub fn service_config(args: &ServiceArgs) -> Result<ServiceConfig, Failure> {
    let config = layered_config(args)?;
    config.validate().map_err(|e| Failure::usage(e.into()))?;
    Ok(config)
}

/// A worker's configuration: [`service_config`]'s layers with the worker's own flags on top,
/// then validated.
pub fn worker_config(args: &WorkerArgs) -> Result<ServiceConfig, Failure> {
    let mut config = layered_config(&args.service)?;
    if let Some(slots) = args.slots {
        config.worker.slots = slots;
    }
    if let Some(sandbox) = args.sandbox {
        config.worker.sandbox = sandbox;
    }
    if let Some(image) = &args.image {
        config.worker.image = image.clone();
    }
    if let Some(grace) = args.shutdown_grace {
        config.worker.shutdown_grace_secs = grace;
    }
    config.validate().map_err(|e| Failure::usage(e.into()))?;
    Ok(config)
}

async fn sigterm() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

pub async fn run_coordinator(args: &ServiceArgs) -> Result<u8, Failure> {
    let config = CoordinatorConfig::new(service_config(args)?);
    coordinator::serve(config, sigterm())
        .await
        .map_err(|e| Failure::infrastructure(e.into()))?;
    Ok(0)
}

pub async fn run_worker(args: &WorkerArgs) -> Result<u8, Failure> {
    let service = worker_config(args)?;
    let mut config = WorkerConfig::new(service);
    config.pass_env = args.pass_env.clone();
    worker::serve(config, sigterm())
        .await
        .map_err(|e| Failure::infrastructure(e.into()))?;
    Ok(0)
}

#[derive(Args, Debug, Clone)]
pub struct ClientArgs {
    /// NATS server URL of the fleet, or its cluster's servers separated by commas.
    #[arg(long = "cluster", env = "ASSAY_NATS_URL", value_name = "URL[,URL…]")]
    pub cluster: String,
    /// Subject prefix of the fleet; other fleets on the same NATS servers are not touched.
    #[arg(long, env = "ASSAY_SUBJECT_PREFIX", default_value = "assay")]
    pub subject_prefix: String,
    /// The fleet role whose NATS credentials the command runs with: submitter or operator.
    /// Replies arrive under that role's own inbox prefix, the only inboxes the fleet's NATS
    /// permissions let it read, so it must match the credentials.
    #[arg(
        long = "nats-role",
        env = "ASSAY_NATS_ROLE",
        value_enum,
        default_value = "submitter"
    )]
    pub role: ClientRole,
    #[command(flatten)]
    pub nats: crate::nats_flags::NatsFlags,
}

/// Who runs `assay status`, `assay results` or `assay cancel`: both submitters and operators
/// may.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientRole {
    Submitter,
    Operator,
}

impl From<ClientRole> for assay_common::nats_permissions::Role {
    fn from(role: ClientRole) -> Self {
        match role {
            ClientRole::Submitter => Self::Submitter,
            ClientRole::Operator => Self::Operator,
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct StatusArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// One proof [default: all].
    pub proof_id: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct ResultsArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    pub proof_id: String,
    /// The fleet's artifact store, where the evidence of a proof too big for one message is.
    #[arg(long, env = "ASSAY_STORE", value_name = "URL")]
    pub store: Option<String>,
    /// Write the evidence report here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct CancelArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    pub proof_id: String,
}

#[derive(Args, Debug, Clone)]
pub struct NatsPermissionsArgs {
    /// Subject prefix of the fleet; its subjects, streams, consumers, bucket and user names
    /// derive from it.
    #[arg(long, env = "ASSAY_SUBJECT_PREFIX", default_value = "assay")]
    pub subject_prefix: String,
    /// How the users authenticate: password (user and password) or nkey (public key). The
    /// secrets are environment variables of the server, named in the output.
    #[arg(long, value_name = "KIND", default_value = "password", value_parser = ["password", "nkey"])]
    pub auth: String,
}

/// `assay nats-permissions`: the server configuration fragment, on stdout.
pub fn print_nats_permissions(args: &NatsPermissionsArgs) -> Result<u8, Failure> {
    use assay_common::nats_permissions::{UserAuth, render};
    let mut config = ServiceConfig::default();
    config.nats.subject_prefix = args.subject_prefix.clone();
    config.validate().map_err(|e| Failure::usage(e.into()))?;
    let auth = if args.auth == "nkey" {
        UserAuth::Nkey
    } else {
        UserAuth::Password
    };
    let text =
        render(&Subjects::new(&args.subject_prefix), auth).map_err(|e| Failure::usage(e.into()))?;
    crate::console::out(format_args!("{text}"));
    Ok(0)
}

/// The fleet's connection and proofs bucket, as the role `args` names.
async fn open(args: &ClientArgs) -> Result<crate::fleet_link::Fleet, Failure> {
    crate::fleet_link::Fleet::open(
        &args.cluster,
        &args.subject_prefix,
        &args.nats,
        args.role.into(),
    )
    .await
    .map_err(|mut failure| {
        failure.error = failure.error.context(role_hint(args));
        failure
    })
}

/// Said when the fleet does not answer: replies arrive under the inbox prefix of the role the
/// command runs as, which must be the role of its credentials.
fn role_hint(args: &ClientArgs) -> String {
    format!(
        "no answer from the fleet as its {} (hint: --nats-role must name the role of the NATS credentials: submitter or operator)",
        assay_common::nats_permissions::Role::from(args.role).name()
    )
}

pub async fn status(args: &StatusArgs) -> Result<u8, Failure> {
    let fleet = open(&args.client).await?;
    let all = client::status(&fleet.proofs)
        .await
        .map_err(|e| Failure::infrastructure(e.into()))?;
    let rows: Vec<StatusRow> = all
        .iter()
        .map(|(record, progress)| StatusRow::of(record, progress))
        .collect();
    for line in status_lines(&rows, args.proof_id.as_deref()) {
        crate::console::outln(format_args!("{line}"));
    }
    Ok(0)
}

/// One record of the proofs bucket as `assay status` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct StatusRow {
    id: String,
    status: ProofStatus,
    jobs_done: usize,
    job_count: u32,
    mutation_done: usize,
    mutation_job_count: u32,
    from_cache: usize,
    /// For one job of a run submitted a job at a time (`assay test --cluster`, `assay mutate
    /// --cluster`, whose submissions are `{run}-{index:04}`): the run's id and its kind.
    one_job_of: Option<(String, String)>,
}

impl StatusRow {
    fn of(record: &ProofRecord, progress: &client::Progress) -> Self {
        let id = record.submission.id();
        let one_job_of = match &record.submission {
            Submission::Jobs(jobs) if jobs.jobs.len() == 1 => id
                .run_of_one_job()
                .map(|run| (run.to_owned(), jobs.label.clone())),
            _ => None,
        };
        let id = id.as_str().to_owned();
        Self {
            id,
            status: record.status,
            jobs_done: progress.jobs_done,
            job_count: record.job_count,
            mutation_done: progress.mutation_done,
            mutation_job_count: record.mutation_job_count,
            from_cache: progress.from_cache,
            one_job_of,
        }
    }
}

/// `assay status`'s lines for `rows` (in the order they were submitted), or only for the
/// record or run `only` names: a line per proof or job submission, but one line for all the
/// submissions of a run that submits a job at a time (a campaign's mutants, a suite's
/// batches), which would otherwise fill the screen a job per line; `assay status RUN-0007`
/// still shows that one.
fn status_lines(rows: &[StatusRow], only: Option<&str>) -> Vec<String> {
    use std::collections::BTreeMap;
    let mut runs: BTreeMap<&str, Vec<&StatusRow>> = BTreeMap::new();
    for row in rows {
        if let Some((run, _)) = &row.one_job_of
            && only.is_none_or(|only| only == run)
        {
            runs.entry(run.as_str()).or_default().push(row);
        }
    }
    let grouped: std::collections::BTreeSet<&str> = runs.keys().copied().collect();
    let mut lines = Vec::new();
    for row in rows {
        match &row.one_job_of {
            Some((run, label)) if grouped.contains(run.as_str()) => {
                // The run's line, where its first submission stands.
                if let Some(members) = runs.remove(run.as_str()) {
                    lines.push(run_line(run, label, &members));
                }
            }
            _ if only.is_some_and(|only| only != row.id) => {}
            _ => lines.push(proof_line(row)),
        }
    }
    lines
}

fn from_cache(count: usize) -> String {
    match count {
        0 => String::new(),
        n => format!(" ({n} from the cache)"),
    }
}

fn proof_line(row: &StatusRow) -> String {
    // The mutation phase shows once it has started: it runs only for a proven proof.
    let mutation = if row.mutation_done > 0 {
        format!(
            ", mutation {}/{} jobs",
            row.mutation_done, row.mutation_job_count
        )
    } else {
        String::new()
    };
    format!(
        "{}\t{}\t{}/{} jobs{}{mutation}",
        row.id,
        row.status.label(),
        row.jobs_done,
        row.job_count,
        from_cache(row.from_cache)
    )
}

/// One line for a run's one-job submissions so far: how many are done, still running
/// (queued or on a worker) and cancelled.
fn run_line(run: &str, label: &str, members: &[&StatusRow]) -> String {
    let count = |status: ProofStatus| members.iter().filter(|m| m.status == status).count();
    let (running, cancelled) = (count(ProofStatus::Running), count(ProofStatus::Cancelled));
    let status = if running > 0 {
        ProofStatus::Running
    } else if cancelled > 0 {
        ProofStatus::Cancelled
    } else {
        ProofStatus::Finished
    };
    let done: usize = members.iter().map(|m| m.jobs_done).sum();
    let cached: usize = members.iter().map(|m| m.from_cache).sum();
    let states: Vec<String> = [(running, "running or queued"), (cancelled, "cancelled")]
        .into_iter()
        .filter(|(count, _)| *count > 0)
        .map(|(count, state)| format!("{count} {state}"))
        .collect();
    let states = match states.is_empty() {
        true => String::new(),
        false => format!(": {}", states.join(", ")),
    };
    format!(
        "{run}\t{}\t{done}/{} jobs{} ({label} run, a submission per job{states})",
        status.label(),
        members.len(),
        from_cache(cached),
    )
}

pub async fn results(args: &ResultsArgs) -> Result<u8, Failure> {
    let fleet = open(&args.client).await?;
    let proof_id = ProofId(args.proof_id.clone());
    let store = args
        .store
        .as_deref()
        .map(crate::embedded::open_store)
        .transpose()?;
    let evidence = client::stored_evidence(&fleet.proofs, store.as_deref(), &proof_id)
        .await
        .map_err(|e| Failure::infrastructure(e.into()))?
        .ok_or_else(|| {
            Failure::usage(anyhow!(
                "proof {proof_id} has no evidence yet (hint: assay status {proof_id})"
            ))
        })?;
    if let Some(path) = &args.json {
        let json = serde_json::to_vec_pretty(&evidence)
            .context("failed to encode the evidence report")
            .internal()?;
        crate::atomic_file::write_report(path, &json).infrastructure()?;
    }
    crate::console::human(format_args!("{}", crate::console::summary(&evidence)));
    Ok(crate::exit::of_proof(&evidence))
}

pub async fn cancel(args: &CancelArgs) -> Result<u8, Failure> {
    let role = args.client.role.into();
    let (client, mut refusals) = crate::fleet_link::nats_client(
        &args.client.cluster,
        &args.client.subject_prefix,
        &args.client.nats,
        role,
    )
    .await?;
    let subjects = Subjects::new(&args.client.subject_prefix);
    let proof_id = ProofId(args.proof_id.clone());
    let what = format!("cancel proof {proof_id}");
    match refusals
        .or_refused(&what, role, client::cancel(&client, &subjects, &proof_id))
        .await
        .map_err(|e| {
            Failure::infrastructure(anyhow::Error::from(e).context(role_hint(&args.client)))
        })? {
        CancelReply::Cancelled => {
            crate::console::outln(format_args!("cancelled {}", args.proof_id));
            Ok(0)
        }
        CancelReply::NotRunning { status } => Err(Failure::usage(anyhow!(
            "proof {} is not running ({})",
            args.proof_id,
            status.map_or("unknown", |s| s.label())
        ))),
    }
}

/// Progress lines for a fleet proof, in the embedded reporter's words.
/// Keeps the suite jobs' results, which the suite history records once the proof is done.
pub struct FleetStderr<'a> {
    pub progress: crate::console::StderrProgress,
    pub jobs: &'a [assay_common::job::JobSpec],
    /// Where the mutation check's jobs sit, which the coordinator runs without sending specs.
    pub check_jobs: Option<assay_engine::mutation::check::CheckJobs>,
    pub suite_results: Vec<JobResult>,
}

impl FleetProgress for FleetStderr<'_> {
    fn job_finished(&mut self, done: u32, total: u32, result: &JobResult, cached: bool) {
        use assay_engine::progress::{ProgressSink, ProofEvent};
        let index = result.index as usize;
        if let Some(spec) = self.jobs.get(index) {
            if spec.kind == assay_common::job::JobKind::Suite {
                self.suite_results.push(result.clone());
            }
            self.progress.event(ProofEvent::JobFinished {
                done: done as usize,
                total: total as usize,
                spec,
                result,
                cached,
                check_label: None,
            });
        } else {
            // The mutation check's jobs follow the proof's (and its diff coverage run's),
            // named by index as embedded mode names them.
            let label = self
                .check_jobs
                .map_or("mutant", |check_jobs| check_jobs.label(index));
            let line = crate::console::job_line(
                "mutation",
                label,
                done as usize,
                total as usize,
                result,
                None,
                cached,
            );
            self.progress.terminal.line(&line);
            self.progress.terminal.update(done as usize, total as usize);
        }
    }

    fn halted(&mut self, reason: &str) {
        // Shown even with --quiet: the proof waits, and this says why.
        self.progress
            .terminal
            .urgent(&format!("[HALT] proof admission stopped. Reason: {reason}"));
    }

    fn resumed(&mut self) {
        self.progress.terminal.line("[prove] admission resumed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proof(id: &str, status: ProofStatus, done: usize, jobs: u32) -> StatusRow {
        StatusRow {
            id: id.into(),
            status,
            jobs_done: done,
            job_count: jobs,
            mutation_done: 0,
            mutation_job_count: 0,
            from_cache: 0,
            one_job_of: None,
        }
    }

    /// Job `index` of campaign `run`, done or not.
    fn mutant(run: &str, index: u32, status: ProofStatus) -> StatusRow {
        StatusRow {
            one_job_of: Some((run.into(), "mutate".into())),
            ..proof(
                &format!("{run}-{index:04}"),
                status,
                usize::from(status == ProofStatus::Finished),
                1,
            )
        }
    }

    /// A proof, then a campaign of 40 mutants (25 done, one of them from the cache, 3
    /// cancelled, the rest running), then another proof.
    fn fleet() -> Vec<StatusRow> {
        let mut rows = vec![proof("pricing-fix", ProofStatus::Finished, 8, 8)];
        for index in 0..40 {
            let status = match index {
                0..25 => ProofStatus::Finished,
                25..28 => ProofStatus::Cancelled,
                _ => ProofStatus::Running,
            };
            let mut row = mutant("mutate-invoices", index, status);
            row.from_cache = usize::from(index == 3);
            rows.push(row);
        }
        rows.push(proof("pager-fix", ProofStatus::Running, 2, 6));
        rows
    }

    #[test]
    fn a_campaigns_submissions_are_one_line_between_the_proofs() {
        assert_eq!(
            status_lines(&fleet(), None),
            [
                "pricing-fix\tfinished\t8/8 jobs",
                "mutate-invoices\trunning\t25/40 jobs (1 from the cache) (mutate run, a submission per job: 12 running or queued, 3 cancelled)",
                "pager-fix\trunning\t2/6 jobs",
            ]
        );
    }

    #[test]
    fn one_proof_one_run_or_one_of_its_submissions_is_shown_alone() {
        let rows = fleet();
        assert_eq!(
            status_lines(&rows, Some("pager-fix")),
            ["pager-fix\trunning\t2/6 jobs"]
        );
        let run = status_lines(&rows, Some("mutate-invoices"));
        assert_eq!(run.len(), 1, "{run:?}");
        assert!(
            run[0].starts_with("mutate-invoices\trunning\t25/40 jobs"),
            "{run:?}"
        );
        assert_eq!(
            status_lines(&rows, Some("mutate-invoices-0030")),
            ["mutate-invoices-0030\trunning\t0/1 jobs"]
        );
        assert!(status_lines(&rows, Some("no-such-proof")).is_empty());
    }

    #[test]
    fn a_finished_run_is_finished_and_a_proof_named_like_a_submission_stands_alone() {
        let rows: Vec<StatusRow> = (0..3)
            .map(|index| StatusRow {
                one_job_of: Some(("suite-7".into(), "suite".into())),
                ..mutant("suite-7", index, ProofStatus::Finished)
            })
            .chain([proof("release-2024", ProofStatus::Finished, 4, 4)])
            .collect();
        assert_eq!(
            status_lines(&rows, None),
            [
                "suite-7\tfinished\t3/3 jobs (suite run, a submission per job)",
                "release-2024\tfinished\t4/4 jobs",
            ]
        );
    }
}
