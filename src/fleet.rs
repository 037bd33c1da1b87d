//! Fleet subcommands' glue: `assay coordinator`, `assay worker`, `assay status`, `assay results`,
//! `assay cancel`, and `assay prove --cluster`. Flags and `ASSAY_*` variables layer over the
//! service file here; the services themselves live in the libraries.

use crate::exit::{Failure, ResultExt as _};
use anyhow::{Context, anyhow};
use assay_common::ProofId;
use assay_common::fleet::{CancelReply, Subjects};
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
    for (record, progress) in all {
        let id = record.submission.id();
        if args.proof_id.as_deref().is_some_and(|p| p != id.as_str()) {
            continue;
        }
        // The mutation phase shows once it has started: it runs only for a proven proof.
        let mutation = if progress.mutation_done > 0 {
            format!(
                ", mutation {}/{} jobs",
                progress.mutation_done, record.mutation_job_count
            )
        } else {
            String::new()
        };
        let from_cache = if progress.from_cache > 0 {
            format!(" ({} from the cache)", progress.from_cache)
        } else {
            String::new()
        };
        crate::console::outln(format_args!(
            "{id}\t{}\t{}/{} jobs{from_cache}{mutation}",
            record.status.label(),
            progress.jobs_done,
            record.job_count
        ));
    }
    Ok(0)
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
