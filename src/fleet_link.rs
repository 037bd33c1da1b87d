//! A fleet reached from the CLI for runs whose jobs travel as one-job submissions
//! (`assay test --cluster`, `assay mutate --cluster`): the connection, the proofs bucket and
//! the artifact store the workers read trees from.

use crate::config;
use crate::exit::Failure;
use anyhow::anyhow;

/// The fleet's NATS connection and proofs bucket.
pub struct Fleet {
    pub client: async_nats::Client,
    pub proofs: async_nats::jetstream::kv::Store,
}

impl Fleet {
    pub async fn connect(url: &str) -> Result<Self, Failure> {
        let client = assay_worker::nats::connect(url, "")
            .await
            .map_err(|e| Failure::infrastructure(e.into()))?;
        let proofs = assay_worker::nats::proofs_bucket(&async_nats::jetstream::new(client.clone()))
            .await
            .map_err(|e| Failure::infrastructure(e.into()))?;
        Ok(Self { client, proofs })
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
