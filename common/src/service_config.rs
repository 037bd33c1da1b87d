//! The services' configuration (`assay.service/v1`): one schema shared by the coordinator, the
//! workers and the Helm chart, layered defaults → file → `ASSAY_*` environment → flags, then
//! validated. Unknown keys are errors so a misspelt chart value never passes silently.

use serde::Deserialize;
use std::path::PathBuf;

/// The `schema` a service configuration file declares.
pub const SCHEMA: &str = "assay.service/v1";

/// Why a service configuration could not be read, parsed or accepted.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The configuration file could not be read.
    #[error("failed to read service configuration {path}")]
    Read {
        /// The file, as given.
        path: PathBuf,
        /// The OS's reason.
        #[source]
        source: std::io::Error,
    },
    /// The configuration text is not TOML of this schema (a misspelt key, a wrong type).
    #[error("invalid service configuration {origin}")]
    Parse {
        /// Where the text came from (a file's path), for the message.
        origin: String,
        /// The TOML parser's reason, with line and column.
        #[source]
        source: toml::de::Error,
    },
    /// The file declares another schema than [`SCHEMA`].
    #[error(
        "service configuration schema {found:?} is not supported (hint: set schema = \"{SCHEMA}\")"
    )]
    Schema {
        /// The schema the file declares.
        found: String,
    },
    /// A value (from the file or an `ASSAY_*` variable) is out of its range or form.
    #[error("invalid value {value:?} for {key}: {reason}")]
    Value {
        /// The key or variable that carries it.
        key: &'static str,
        /// The value as given.
        value: String,
        /// What it should be.
        reason: &'static str,
    },
}

/// Which sandbox a worker runs jobs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxKind {
    /// Jobs run as processes on the worker's host, confined with bubblewrap where it can.
    Process,
    /// Jobs run in Docker containers of `worker.image`.
    Docker,
}

impl std::str::FromStr for SandboxKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "process" => Ok(Self::Process),
            "docker" => Ok(Self::Docker),
            other => Err(format!(
                "unknown sandbox {other:?} (expected process or docker)"
            )),
        }
    }
}

/// The whole service configuration: every section, defaults filled in.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServiceConfig {
    /// The configuration's format: always [`SCHEMA`].
    pub schema: String,
    /// How to reach and authenticate to NATS.
    pub nats: NatsSection,
    /// Where artifacts, trees and submissions are stored.
    pub store: StoreSection,
    /// Where probes and metrics are served.
    pub http: HttpSection,
    /// How a worker runs jobs.
    pub worker: WorkerSection,
    /// The coordinator's limits and lease.
    pub coordinator: CoordinatorSection,
    /// The fleet's result cache.
    pub cache: CacheSection,
}

/// How a service reaches NATS: servers, replicas, subject prefix and credentials.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NatsSection {
    /// One server URL, or several separated by commas (`nats://a:4222,nats://b:4222`): the
    /// servers of a cluster, tried in turn at start and reconnected to when one is lost.
    pub url: String,
    /// Copies JetStream keeps of each stream and bucket the coordinator creates: 1 for one
    /// server, 3 in a cluster of three so any one server may be lost (`ASSAY_NATS_REPLICAS`).
    pub replicas: usize,
    /// The prefix of every subject, stream and bucket of the fleet, so fleets can share a server.
    pub subject_prefix: String,
    /// How every process of the fleet (and the CLI) authenticates to NATS and secures the
    /// connection; each empty string means "not used". Secrets are read from files, never
    /// given inline.
    /// A `.creds` file (JWT and nkey seed).
    pub credentials_file: String,
    /// A file holding an nkey seed (`SU…`).
    pub nkey_seed_file: String,
    /// A user name; its password is read from `password_file`.
    pub user: String,
    /// A file holding the password of `user`.
    pub password_file: String,
    /// A file holding a token.
    pub token_file: String,
    /// PEM file of the CA that signed the server's certificate.
    pub tls_ca_file: String,
    /// PEM client certificate and key, for a server that verifies clients.
    pub tls_cert_file: String,
    /// The PEM key of `tls_cert_file`.
    pub tls_key_file: String,
    /// Refuse a connection that is not TLS (implied by a `tls://` URL).
    pub require_tls: bool,
}

impl NatsSection {
    /// Applies the `ASSAY_NATS_*` variables that say how to authenticate and secure the
    /// connection (not the URL or prefix); what the CLI reads, and part of
    /// [`ServiceConfig::apply_env`]. Returns whether `name` was one of them.
    pub fn apply_auth_var(&mut self, name: &str, value: &str) -> Result<bool, ConfigError> {
        let field = match name {
            "ASSAY_NATS_CREDENTIALS" => &mut self.credentials_file,
            "ASSAY_NATS_NKEY_SEED_FILE" => &mut self.nkey_seed_file,
            "ASSAY_NATS_USER" => &mut self.user,
            "ASSAY_NATS_PASSWORD_FILE" => &mut self.password_file,
            "ASSAY_NATS_TOKEN_FILE" => &mut self.token_file,
            "ASSAY_NATS_TLS_CA" => &mut self.tls_ca_file,
            "ASSAY_NATS_TLS_CERT" => &mut self.tls_cert_file,
            "ASSAY_NATS_TLS_KEY" => &mut self.tls_key_file,
            "ASSAY_NATS_REQUIRE_TLS" => {
                self.require_tls = match value {
                    "1" | "true" => true,
                    "0" | "false" | "" => false,
                    _ => {
                        return Err(ConfigError::Value {
                            key: "ASSAY_NATS_REQUIRE_TLS",
                            value: value.to_owned(),
                            reason: "expected true or false",
                        });
                    }
                };
                return Ok(true);
            }
            _ => return Ok(false),
        };
        *field = value.to_owned();
        Ok(true)
    }
}

/// Where the fleet's artifacts, trees and submissions are stored.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSection {
    /// The object store's URL: `file:///ABSOLUTE/DIR`, `s3://BUCKET` or `memory://`.
    pub url: String,
}

/// Where a service serves its probes and metrics.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpSection {
    /// Where probes and metrics are served. Unset: the role's loopback default (see
    /// [`ServiceConfig::http_listen`]); empty: no HTTP endpoint.
    pub listen: Option<String>,
}

/// Which service a configuration serves: their defaults differ where both run on one host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The coordinator: probes and metrics on 9464 by default.
    Coordinator,
    /// A worker: probes and metrics on 9465 by default.
    Worker,
}

/// How a worker runs jobs: how many at once, in which sandbox, under which limits.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerSection {
    /// Jobs the worker runs at once.
    pub slots: u32,
    /// The sandbox jobs run in.
    pub sandbox: SandboxKind,
    /// The Docker image jobs run in (`docker` sandbox only).
    pub image: String,
    /// Each job's memory limit, in MiB.
    pub memory_mb: u64,
    /// Each job's CPU limit, in cores (fractions allowed).
    pub cpus: f64,
    /// The most processes one job may hold at once.
    pub pids: u64,
    /// The directory the worker caches trees (and dependency archives) in.
    pub tree_cache_dir: String,
    /// On SIGTERM, how long running jobs may finish before they are handed back to the queue.
    /// Keep it below the orchestrator's own kill deadline (Kubernetes'
    /// `terminationGracePeriodSeconds`) so the hand-back happens.
    pub shutdown_grace_secs: u64,
    /// The most of a job's stdout, and separately of its stderr, a worker stores; the rest
    /// is dropped and the artifact records how many bytes (`dropped_bytes`).
    pub output_cap_bytes: u64,
    /// The most a tree archive may unpack to (the sum of its files' sizes).
    pub tree_max_bytes: u64,
    /// The most entries (files, directories, links) a tree archive may hold.
    pub tree_max_entries: u64,
}

/// The default of `worker.output_cap_bytes`: 16 MiB per stream.
pub const DEFAULT_OUTPUT_CAP_BYTES: u64 = 16 * 1024 * 1024;
/// The default of `worker.tree_max_bytes`: 4 GiB.
pub const DEFAULT_TREE_MAX_BYTES: u64 = 4 * 1024 * 1024 * 1024;
/// The default of `worker.tree_max_entries`.
pub const DEFAULT_TREE_MAX_ENTRIES: u64 = 500_000;

/// The coordinator's limits and leadership lease.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CoordinatorSection {
    /// The most jobs of one proof (or job run) in flight at once, whatever its `--jobs` asks.
    pub max_jobs_per_proof: u32,
    /// The most bytes of a submission passed through the store the coordinator reads; a
    /// bigger one is refused unread (`ASSAY_MAX_SUBMISSION_BYTES`).
    pub max_submission_bytes: u64,
    /// The most bytes of a job result passed through the store the coordinator reads
    /// (`ASSAY_MAX_RESULT_BYTES`).
    pub max_result_bytes: u64,
    /// How long the leading coordinator's lease lasts without a renewal before a standby takes
    /// over (`ASSAY_LEASE_TTL_MS`); renewed every quarter of it.
    pub lease_ttl_ms: u64,
}

/// The default of `coordinator.lease_ttl_ms`: a standby takes over within about 6 s of the
/// leader's last renewal, well inside the results' redelivery and the workers' heartbeats.
pub const DEFAULT_LEASE_TTL_MS: u64 = 6000;

/// The default of `coordinator.max_submission_bytes`: 64 MiB.
pub const DEFAULT_MAX_SUBMISSION_BYTES: u64 = 64 * 1024 * 1024;
/// The default of `coordinator.max_result_bytes`: 64 MiB.
pub const DEFAULT_MAX_RESULT_BYTES: u64 = 64 * 1024 * 1024;

/// The fleet's result cache, read by the coordinator only. On a fleet the coordinator cannot
/// know which worker runs a job, so the operator declares the sandbox every worker runs jobs in;
/// keys are made from that declaration, and a result is stored only when the sandbox its worker
/// reports is the declared one. Off unless both `sandbox` and `key_file` are set.
#[derive(Clone, Debug, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheSection {
    /// The secret the coordinator signs and checks entries with (HMAC-SHA256), only mounted
    /// into the coordinator; `ASSAY_CACHE_KEY_FILE`.
    pub key_file: String,
    /// The sandbox as job results report it: `kind`, and for docker the `container` fields.
    pub sandbox: Option<crate::sandbox::SandboxEvidence>,
    /// Process sandbox: what the workers' interpreter is (e.g. `python3 3.12.3`); part of the
    /// key, since a coordinator cannot ask a worker's `PATH`.
    pub interpreter: String,
    /// Names of the variables the workers pass into jobs (`pass_env`); part of the key.
    pub env: Vec<String>,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        Self {
            schema: SCHEMA.into(),
            nats: NatsSection::default(),
            store: StoreSection::default(),
            http: HttpSection::default(),
            worker: WorkerSection::default(),
            coordinator: CoordinatorSection::default(),
            cache: CacheSection::default(),
        }
    }
}

impl Default for NatsSection {
    fn default() -> Self {
        Self {
            url: "nats://127.0.0.1:4222".into(),
            replicas: 1,
            subject_prefix: crate::fleet::DEFAULT_PREFIX.into(),
            credentials_file: String::new(),
            nkey_seed_file: String::new(),
            user: String::new(),
            password_file: String::new(),
            token_file: String::new(),
            tls_ca_file: String::new(),
            tls_cert_file: String::new(),
            tls_key_file: String::new(),
            require_tls: false,
        }
    }
}

impl Default for StoreSection {
    fn default() -> Self {
        Self {
            url: "file:///var/lib/assay/artifacts".into(),
        }
    }
}

impl Default for WorkerSection {
    fn default() -> Self {
        Self {
            slots: 2,
            sandbox: SandboxKind::Process,
            image: "assay-runner-python:latest".into(),
            memory_mb: 2048,
            cpus: 1.0,
            pids: 512,
            tree_cache_dir: "/var/cache/assay/trees".into(),
            shutdown_grace_secs: 840,
            output_cap_bytes: DEFAULT_OUTPUT_CAP_BYTES,
            tree_max_bytes: DEFAULT_TREE_MAX_BYTES,
            tree_max_entries: DEFAULT_TREE_MAX_ENTRIES,
        }
    }
}

impl Default for CoordinatorSection {
    fn default() -> Self {
        Self {
            max_jobs_per_proof: 64,
            max_submission_bytes: DEFAULT_MAX_SUBMISSION_BYTES,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            lease_ttl_ms: DEFAULT_LEASE_TTL_MS,
        }
    }
}

impl ServiceConfig {
    /// The address probes and metrics are served on, `None` for none. By default each role
    /// binds loopback on its own port (coordinator 9464, worker 9465), so a coordinator and a
    /// worker started on one machine as docs/fleet.md shows both come up, and nothing is
    /// exposed beyond the host unless configured (the chart sets `0.0.0.0:9464`).
    pub fn http_listen(&self, role: Role) -> Option<String> {
        match (&self.http.listen, role) {
            (Some(listen), _) if listen.is_empty() => None,
            (Some(listen), _) => Some(listen.clone()),
            (None, Role::Coordinator) => Some("127.0.0.1:9464".into()),
            (None, Role::Worker) => Some("127.0.0.1:9465".into()),
        }
    }

    /// Parses a file's text over the defaults; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|source| ConfigError::Parse {
            origin: origin.to_owned(),
            source,
        })
    }

    /// Reads and parses the configuration file at `path` over the defaults.
    pub fn from_file(path: &std::path::Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_toml(&text, &path.display().to_string())
    }

    /// Applies `ASSAY_*` variables from `vars` (pass `std::env::vars()`).
    pub fn apply_env(
        &mut self,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<(), ConfigError> {
        for (name, value) in vars {
            if self.nats.apply_auth_var(&name, &value)? {
                continue;
            }
            match name.as_str() {
                "ASSAY_NATS_URL" => self.nats.url = value,
                "ASSAY_NATS_REPLICAS" => {
                    self.nats.replicas = value.parse().map_err(|_| ConfigError::Value {
                        key: "ASSAY_NATS_REPLICAS",
                        value: value.clone(),
                        reason: "expected a whole number from 1 to 5",
                    })?
                }
                "ASSAY_LEASE_TTL_MS" => {
                    self.coordinator.lease_ttl_ms =
                        value.parse().map_err(|_| ConfigError::Value {
                            key: "ASSAY_LEASE_TTL_MS",
                            value: value.clone(),
                            reason: "expected a whole number of milliseconds",
                        })?
                }
                "ASSAY_SUBJECT_PREFIX" => self.nats.subject_prefix = value,
                "ASSAY_STORE" => self.store.url = value,
                "ASSAY_HTTP_LISTEN" => self.http.listen = Some(value),
                "ASSAY_SLOTS" => {
                    self.worker.slots = value.parse().map_err(|_| ConfigError::Value {
                        key: "ASSAY_SLOTS",
                        value: value.clone(),
                        reason: "expected a whole number",
                    })?
                }
                "ASSAY_SANDBOX" => {
                    self.worker.sandbox = value.parse().map_err(|_| ConfigError::Value {
                        key: "ASSAY_SANDBOX",
                        value: value.clone(),
                        reason: "expected process or docker",
                    })?
                }
                "ASSAY_TREE_CACHE_DIR" => self.worker.tree_cache_dir = value,
                "ASSAY_SHUTDOWN_GRACE_SECS" => {
                    self.worker.shutdown_grace_secs =
                        value.parse().map_err(|_| ConfigError::Value {
                            key: "ASSAY_SHUTDOWN_GRACE_SECS",
                            value: value.clone(),
                            reason: "expected a whole number of seconds",
                        })?
                }
                "ASSAY_OUTPUT_CAP_BYTES" | "ASSAY_TREE_MAX_BYTES" | "ASSAY_TREE_MAX_ENTRIES" => {
                    let parsed: u64 = value.parse().map_err(|_| ConfigError::Value {
                        key: "ASSAY_OUTPUT_CAP_BYTES, ASSAY_TREE_MAX_BYTES or ASSAY_TREE_MAX_ENTRIES",
                        value: value.clone(),
                        reason: "expected a whole number",
                    })?;
                    match name.as_str() {
                        "ASSAY_OUTPUT_CAP_BYTES" => self.worker.output_cap_bytes = parsed,
                        "ASSAY_TREE_MAX_BYTES" => self.worker.tree_max_bytes = parsed,
                        _ => self.worker.tree_max_entries = parsed,
                    }
                }
                "ASSAY_CACHE_KEY_FILE" => self.cache.key_file = value,
                "ASSAY_MAX_SUBMISSION_BYTES" | "ASSAY_MAX_RESULT_BYTES" => {
                    let parsed: u64 = value.parse().map_err(|_| ConfigError::Value {
                        key: "ASSAY_MAX_SUBMISSION_BYTES or ASSAY_MAX_RESULT_BYTES",
                        value: value.clone(),
                        reason: "expected a whole number of bytes",
                    })?;
                    if name == "ASSAY_MAX_SUBMISSION_BYTES" {
                        self.coordinator.max_submission_bytes = parsed;
                    } else {
                        self.coordinator.max_result_bytes = parsed;
                    }
                }
                "ASSAY_MAX_JOBS_PER_PROOF" => {
                    self.coordinator.max_jobs_per_proof =
                        value.parse().map_err(|_| ConfigError::Value {
                            key: "ASSAY_MAX_JOBS_PER_PROOF",
                            value: value.clone(),
                            reason: "expected a whole number",
                        })?
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Checks what serde cannot: the schema, non-zero counts, a usable prefix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.schema != SCHEMA {
            return Err(ConfigError::Schema {
                found: self.schema.clone(),
            });
        }
        let prefix = &self.nats.subject_prefix;
        if prefix.is_empty()
            || prefix
                .split('.')
                .any(|t| t.is_empty() || t.contains(['*', '>', ' ']))
        {
            return Err(ConfigError::Value {
                key: "nats.subject_prefix",
                value: prefix.clone(),
                reason: "expected dot-separated tokens without wildcards or spaces",
            });
        }
        if self.nats.url.split(',').any(|url| url.trim().is_empty()) {
            return Err(ConfigError::Value {
                key: "nats.url",
                value: self.nats.url.clone(),
                reason: "expected one URL or several separated by commas, none empty",
            });
        }
        // JetStream refuses more than 5 replicas; 0 would be taken for the server's default.
        if !(1..=5).contains(&self.nats.replicas) {
            return Err(ConfigError::Value {
                key: "nats.replicas",
                value: self.nats.replicas.to_string(),
                reason: "expected 1 to 5 (JetStream keeps at most 5 copies)",
            });
        }
        // Under 500 ms a lease would be renewed more often than a loaded NATS round trip allows.
        if self.coordinator.lease_ttl_ms < 500 {
            return Err(ConfigError::Value {
                key: "coordinator.lease_ttl_ms",
                value: self.coordinator.lease_ttl_ms.to_string(),
                reason: "expected at least 500 ms",
            });
        }
        if self.worker.slots == 0 {
            return Err(ConfigError::Value {
                key: "worker.slots",
                value: "0".into(),
                reason: "a worker needs at least one slot",
            });
        }
        for (key, value) in [
            ("worker.output_cap_bytes", self.worker.output_cap_bytes),
            ("worker.tree_max_bytes", self.worker.tree_max_bytes),
            ("worker.tree_max_entries", self.worker.tree_max_entries),
            (
                "coordinator.max_submission_bytes",
                self.coordinator.max_submission_bytes,
            ),
            (
                "coordinator.max_result_bytes",
                self.coordinator.max_result_bytes,
            ),
        ] {
            if value == 0 {
                return Err(ConfigError::Value {
                    key,
                    value: "0".into(),
                    reason: "a limit of 0 would refuse everything it bounds; raise it",
                });
            }
        }
        if self.coordinator.max_jobs_per_proof == 0 {
            return Err(ConfigError::Value {
                key: "coordinator.max_jobs_per_proof",
                value: "0".into(),
                reason: "a proof needs at least one job in flight",
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHART_VALUES: &str = r#"
schema = "assay.service/v1"
[nats]
url = "nats://nats:4222"
subject_prefix = "assay"
credentials_file = ""
[store]
url = "s3://assay-artifacts"
[http]
listen = "0.0.0.0:9464"
[worker]
slots = 2
sandbox = "docker"
image = "assay-runner-python:latest"
memory_mb = 2048
cpus = 1.0
pids = 512
tree_cache_dir = "/var/cache/assay/trees"
[coordinator]
max_jobs_per_proof = 64
"#;

    #[test]
    fn the_documented_schema_parses_in_full() {
        let config = ServiceConfig::from_toml(CHART_VALUES, "values").unwrap();
        config.validate().unwrap();
        assert_eq!(config.store.url, "s3://assay-artifacts");
        assert_eq!(config.worker.sandbox, SandboxKind::Docker);
        assert_eq!(config.coordinator.max_jobs_per_proof, 64);
    }

    #[test]
    fn the_workers_limits_default_parse_from_file_and_env_and_refuse_zero() {
        let config = ServiceConfig::default();
        assert_eq!(config.worker.output_cap_bytes, 16 * 1024 * 1024);
        let mut config = ServiceConfig::from_toml(
            "[worker]\noutput_cap_bytes = 1048576\ntree_max_entries = 1000\n",
            "values",
        )
        .unwrap();
        assert_eq!(config.worker.output_cap_bytes, 1 << 20);
        assert_eq!(config.worker.tree_max_entries, 1000);
        assert_eq!(config.worker.tree_max_bytes, DEFAULT_TREE_MAX_BYTES);
        config
            .apply_env([("ASSAY_TREE_MAX_BYTES".to_owned(), "4096".to_owned())])
            .unwrap();
        assert_eq!(config.worker.tree_max_bytes, 4096);
        config.validate().unwrap();
        config.worker.output_cap_bytes = 0;
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains("worker.output_cap_bytes"), "{err}");
    }

    #[test]
    fn the_fleet_cache_section_declares_a_docker_sandbox_and_takes_its_key_from_env() {
        let text = r#"
[cache]
key_file = "/etc/assay/cache/key"
env = ["PIP_INDEX_URL"]
[cache.sandbox]
kind = "docker"
[cache.sandbox.container]
image = "assay-runner-python:latest"
image_id = "sha256:4b1f0c"
repo_digests = []
memory_mb = 2048
cpus = 1.0
pids = 512
network = "none"
"#;
        let mut config = ServiceConfig::from_toml(text, "values").unwrap();
        let sandbox = config.cache.sandbox.clone().unwrap();
        assert_eq!(sandbox.kind, "docker");
        assert_eq!(sandbox.container.unwrap().image_id, "sha256:4b1f0c");
        assert_eq!(config.cache.env, ["PIP_INDEX_URL"]);
        config
            .apply_env([(
                "ASSAY_CACHE_KEY_FILE".to_owned(),
                "/run/secrets/cache-key".to_owned(),
            )])
            .unwrap();
        assert_eq!(config.cache.key_file, "/run/secrets/cache-key");
        assert_eq!(ServiceConfig::default().cache.sandbox, None);
    }

    #[test]
    fn an_unknown_key_is_refused_naming_it() {
        let err = ServiceConfig::from_toml("[worker]\nslot = 3\n", "values").unwrap_err();
        let text = format!("{err}: {}", std::error::Error::source(&err).unwrap());
        assert!(text.contains("slot"), "{text}");
    }

    #[test]
    fn environment_overrides_the_file() {
        let mut config = ServiceConfig::from_toml(CHART_VALUES, "values").unwrap();
        config
            .apply_env([
                ("ASSAY_SLOTS".to_owned(), "8".to_owned()),
                ("ASSAY_NATS_URL".to_owned(), "nats://queue:4222".to_owned()),
                ("HOME".to_owned(), "/root".to_owned()),
            ])
            .unwrap();
        assert_eq!(config.worker.slots, 8);
        assert_eq!(config.nats.url, "nats://queue:4222");
        let err = config
            .apply_env([("ASSAY_SLOTS".to_owned(), "many".to_owned())])
            .unwrap_err();
        assert!(err.to_string().contains("ASSAY_SLOTS"));
    }

    #[test]
    fn a_cluster_takes_a_url_list_replicas_and_a_lease_from_file_and_env() {
        let mut config = ServiceConfig::from_toml(
            "[nats]\nurl = \"nats://a:4222,nats://b:4222,nats://c:4222\"\nreplicas = 3\n",
            "test",
        )
        .unwrap();
        config.validate().unwrap();
        assert_eq!(config.nats.replicas, 3);
        assert_eq!(config.coordinator.lease_ttl_ms, DEFAULT_LEASE_TTL_MS);
        config
            .apply_env([
                ("ASSAY_NATS_REPLICAS".to_owned(), "1".to_owned()),
                ("ASSAY_LEASE_TTL_MS".to_owned(), "2000".to_owned()),
            ])
            .unwrap();
        assert_eq!(
            (config.nats.replicas, config.coordinator.lease_ttl_ms),
            (1, 2000)
        );
        for (hostile, key) in [
            ("[nats]\nreplicas = 0\n", "nats.replicas"),
            ("[nats]\nreplicas = 6\n", "nats.replicas"),
            (
                "[nats]\nurl = \"nats://a:4222,,nats://b:4222\"\n",
                "nats.url",
            ),
            ("[nats]\nurl = \"nats://a:4222, \"\n", "nats.url"),
            (
                "[coordinator]\nlease_ttl_ms = 10\n",
                "coordinator.lease_ttl_ms",
            ),
        ] {
            let err = ServiceConfig::from_toml(hostile, "test")
                .unwrap()
                .validate()
                .unwrap_err()
                .to_string();
            assert!(err.contains(key), "{hostile:?}: {err}");
        }
        let err = ServiceConfig::default()
            .apply_env([("ASSAY_NATS_REPLICAS".to_owned(), "three".to_owned())])
            .unwrap_err()
            .to_string();
        assert!(err.contains("ASSAY_NATS_REPLICAS"), "{err}");
    }

    #[test]
    fn a_wildcard_prefix_and_an_old_schema_are_refused() {
        let mut config = ServiceConfig::default();
        config.nats.subject_prefix = "assay.>".into();
        assert!(config.validate().is_err());
        let config = ServiceConfig {
            schema: "assay.service/v0".into(),
            ..ServiceConfig::default()
        };
        assert!(matches!(config.validate(), Err(ConfigError::Schema { .. })));
    }
}
