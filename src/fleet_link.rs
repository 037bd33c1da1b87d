//! A fleet reached from the CLI for runs whose jobs travel as one-job submissions
//! (`assay test --cluster`, `assay mutate --cluster`): the connection, the proofs bucket and
//! the artifact store the workers read trees from.

use crate::config;
use crate::embedded;
use crate::exit::Failure;
use crate::nats_flags::{FleetFlags, NatsFlags};
use anyhow::anyhow;
use assay_common::TreeId;
use assay_common::fleet::Subjects;
use assay_common::nats_permissions::Role;
use assay_coordinator::cluster_queue::ClusterQueue;
use assay_transport::nats::Refusals;
use assay_transport::queue::JobQueue;
use assay_transport::store::ArtifactStore;
use assay_transport::store_tree::upload_tree;
use assay_worker::in_process::InProcessQueue;
use std::path::Path;
use std::sync::Arc;

/// Connects the CLI to NATS at `url` as `role` (the role whose credentials the command runs
/// with: its replies arrive under that role's inbox prefix, the only inboxes the fleet's NATS
/// permissions let it subscribe to), authenticated and secured as the `--nats-*` flags and,
/// under them, the `ASSAY_NATS_*` variables say (the same keys as a service's `[nats]`
/// section; see docs/operations.md). The server's permissions violations are heard: a command
/// races its requests against them ([`Refusals::or_refused`]), so another role's credentials
/// stop it at once with the server's words rather than after its requests' timeouts.
pub async fn nats_client(
    url: &str,
    subject_prefix: &str,
    flags: &NatsFlags,
    role: Role,
) -> Result<(async_nats::Client, Refusals), Failure> {
    let mut nats = assay_common::service_config::NatsSection {
        url: url.to_owned(),
        subject_prefix: subject_prefix.to_owned(),
        ..Default::default()
    };
    for (name, value) in std::env::vars() {
        nats.apply_auth_var(&name, &value)
            .map_err(|e| Failure::infrastructure(e.into()))?;
    }
    flags.apply(&mut nats);
    assay_transport::nats::connect_hearing_refusals(&nats, role)
        .await
        .map_err(|e| Failure::infrastructure(e.into()))
}

/// Where a run's jobs go: the artifact store and, with `--cluster`, the fleet that runs them.
/// The flags `prove`, `test` and `mutate` share.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RunTarget {
    /// Artifact store URL (file:///DIR, memory:// or s3://BUCKET) [default: a cache directory
    /// outside the repository; with --cluster, the fleet's store: this flag or ASSAY_STORE].
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// Run the jobs on a fleet: the NATS URL its coordinator and workers use, or a
    /// comma-separated list of a cluster's servers.
    #[arg(long, value_name = "URL")]
    pub cluster: Option<String>,
    #[command(flatten)]
    pub fleet: FleetFlags,
}

impl RunTarget {
    /// The fleet `--cluster` names, connected as a submitter; `None` runs embedded.
    pub async fn connect(&self) -> Result<Option<Fleet>, Failure> {
        Fleet::connect_if(self.cluster.as_deref(), &self.fleet, Role::Submitter).await
    }

    /// The artifact store's URL for a run on a fleet (`on_fleet`) or embedded.
    pub fn store_url(&self, on_fleet: bool) -> Result<String, Failure> {
        store_url(on_fleet, &self.store)
    }
}

/// The fleet's NATS connection and proofs bucket.
pub struct Fleet {
    pub client: async_nats::Client,
    pub proofs: async_nats::jetstream::kv::Store,
}

impl Fleet {
    /// Connects to the fleet `flags` name (its subjects and proofs bucket derive from the
    /// subject prefix) at `url` as `role`.
    pub async fn connect(url: &str, flags: &FleetFlags, role: Role) -> Result<Self, Failure> {
        Self::open(url, &flags.subject_prefix, &flags.nats, role).await
    }

    /// [`Fleet::connect`] with the flags apart; stops at the server's first refusal of the
    /// connection (credentials that are not `role`'s) rather than waiting out the lookup.
    pub async fn open(
        url: &str,
        subject_prefix: &str,
        nats: &NatsFlags,
        role: Role,
    ) -> Result<Self, Failure> {
        let (client, mut refusals) = nats_client(url, subject_prefix, nats, role).await?;
        let subjects = Subjects::new(subject_prefix);
        let js = async_nats::jetstream::new(client.clone());
        let lookup = assay_transport::nats::proofs_bucket(
            &js,
            &subjects,
            assay_transport::nats::Placement::SINGLE,
        );
        let what = format!("open the proofs bucket {}", subjects.proofs_bucket());
        let proofs = refusals
            .or_refused(&what, role, lookup)
            .await
            .map_err(|e| Failure::infrastructure(e.into()))?;
        Ok(Self { client, proofs })
    }

    /// [`Fleet::connect`] when the command names a fleet (`--cluster`); `None` runs embedded.
    pub async fn connect_if(
        cluster: Option<&str>,
        flags: &FleetFlags,
        role: Role,
    ) -> Result<Option<Self>, Failure> {
        match cluster {
            Some(url) => Self::connect(url, flags, role).await.map(Some),
            None => Ok(None),
        }
    }
}

/// The artifact store URL: `--store`, else on a fleet `ASSAY_STORE` (the workers must read
/// what the CLI writes, so a local default would be wrong), else the local default.
pub fn store_url(on_fleet: bool, flag: &Option<String>) -> Result<String, Failure> {
    match (on_fleet, flag, std::env::var("ASSAY_STORE")) {
        (_, Some(url), _) => Ok(url.clone()),
        (true, None, Ok(url)) => Ok(url),
        (true, None, Err(_)) => Err(Failure::usage(anyhow!(
            "a fleet run needs the fleet's artifact store (hint: --store s3://BUCKET or ASSAY_STORE)"
        ))),
        (false, None, _) => Ok(config::default_store_url()),
    }
}

/// Where a run's jobs go and what it runs them as.
pub struct QueueChoice<'a> {
    /// The fleet, or `None` for the in-process queue.
    pub fleet: Option<&'a Fleet>,
    pub store: Arc<dyn ArtifactStore>,
    pub repo: &'a Path,
    /// The tree the jobs run on; uploaded to the store first on a fleet.
    pub tree: &'a TreeId,
    pub subject_prefix: &'a str,
    /// The kind of run, which labels its submissions in their records.
    pub kind: &'static str,
    pub pass_env: &'a [String],
    pub slots: usize,
    pub scratch_prefix: &'a str,
}

/// The run's job queue: one-job submissions to the fleet, or the in-process queue with its
/// scratch directory (keep it alive until the jobs are done).
pub async fn job_queue(
    choice: QueueChoice<'_>,
) -> Result<(Box<dyn JobQueue>, Option<tempfile::TempDir>), Failure> {
    match choice.fleet {
        Some(fleet) => {
            upload_tree(&*choice.store, choice.repo, choice.tree)
                .await
                .map_err(|e| Failure::infrastructure(e.into()))?;
            let queue = ClusterQueue::new(
                fleet.client.clone(),
                Subjects::new(choice.subject_prefix),
                fleet.proofs.clone(),
                choice.store.clone(),
                choice.repo.display().to_string(),
                choice.kind,
            );
            Ok((Box::new(queue), None))
        }
        None => {
            let (ctx, scratch) = embedded::job_context(
                choice.repo,
                choice.store,
                choice.pass_env,
                choice.scratch_prefix,
                choice.slots,
            )?;
            Ok((
                Box::new(InProcessQueue::start(ctx, choice.slots)),
                Some(scratch),
            ))
        }
    }
}
