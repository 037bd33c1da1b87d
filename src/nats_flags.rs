//! The flags that say how a command authenticates to NATS and secures the connection: the
//! same settings as a service's `[nats]` keys and the `ASSAY_NATS_*` variables, which they
//! override. Every command that connects to NATS takes them (`assay coordinator`,
//! `assay worker` and each `--cluster` command).

use assay_common::service_config::NatsSection;
use clap::Args;

const HEADING: &str = "NATS connection";

/// Which fleet a `--cluster` command talks to beyond its URL: the subject prefix and the
/// connection's authentication and TLS. Shared by `prove`, `test`, `mutate`, `halt` and
/// `resume`.
#[derive(Args, Debug, Clone, Default)]
pub struct FleetFlags {
    /// Subject prefix of the fleet; other fleets on the same NATS servers are not touched.
    #[arg(
        long,
        value_name = "PREFIX",
        default_value = "assay",
        env = "ASSAY_SUBJECT_PREFIX"
    )]
    pub subject_prefix: String,
    #[command(flatten)]
    pub nats: NatsFlags,
}

#[derive(Args, Debug, Clone, Default)]
pub struct NatsFlags {
    /// NATS .creds file (user JWT and nkey seed) to authenticate with
    /// [config: nats.credentials_file; env: ASSAY_NATS_CREDENTIALS].
    #[arg(help_heading = HEADING, long = "nats-creds", value_name = "FILE")]
    pub creds: Option<String>,
    /// File holding the nkey seed (SU…) to authenticate with
    /// [config: nats.nkey_seed_file; env: ASSAY_NATS_NKEY_SEED_FILE].
    #[arg(help_heading = HEADING, long = "nats-nkey-seed-file", value_name = "FILE")]
    pub nkey_seed_file: Option<String>,
    /// NATS user name; its password is read from --nats-password-file
    /// [config: nats.user; env: ASSAY_NATS_USER].
    #[arg(help_heading = HEADING, long = "nats-user", value_name = "NAME")]
    pub user: Option<String>,
    /// File holding the NATS user's password
    /// [config: nats.password_file; env: ASSAY_NATS_PASSWORD_FILE].
    #[arg(help_heading = HEADING, long = "nats-password-file", value_name = "FILE")]
    pub password_file: Option<String>,
    /// File holding a NATS token to authenticate with
    /// [config: nats.token_file; env: ASSAY_NATS_TOKEN_FILE].
    #[arg(help_heading = HEADING, long = "nats-token-file", value_name = "FILE")]
    pub token_file: Option<String>,
    /// PEM file of the CA that signed the NATS server's certificate
    /// [config: nats.tls_ca_file; env: ASSAY_NATS_TLS_CA].
    #[arg(help_heading = HEADING, long = "nats-tls-ca", value_name = "FILE")]
    pub tls_ca: Option<String>,
    /// PEM client certificate, for a server that verifies clients (with --nats-tls-key)
    /// [config: nats.tls_cert_file; env: ASSAY_NATS_TLS_CERT].
    #[arg(help_heading = HEADING, long = "nats-tls-cert", value_name = "FILE")]
    pub tls_cert: Option<String>,
    /// PEM key of the client certificate (with --nats-tls-cert)
    /// [config: nats.tls_key_file; env: ASSAY_NATS_TLS_KEY].
    #[arg(help_heading = HEADING, long = "nats-tls-key", value_name = "FILE")]
    pub tls_key: Option<String>,
    /// Refuse a NATS connection that is not TLS (a tls:// URL implies it)
    /// [config: nats.require_tls; env: ASSAY_NATS_REQUIRE_TLS].
    #[arg(help_heading = HEADING, long = "nats-require-tls")]
    pub require_tls: bool,
}

impl NatsFlags {
    /// Lays the flags given over `nats` (already the file and the environment).
    pub fn apply(&self, nats: &mut NatsSection) {
        for (flag, field) in [
            (&self.creds, &mut nats.credentials_file),
            (&self.nkey_seed_file, &mut nats.nkey_seed_file),
            (&self.user, &mut nats.user),
            (&self.password_file, &mut nats.password_file),
            (&self.token_file, &mut nats.token_file),
            (&self.tls_ca, &mut nats.tls_ca_file),
            (&self.tls_cert, &mut nats.tls_cert_file),
            (&self.tls_key, &mut nats.tls_key_file),
        ] {
            if let Some(value) = flag {
                field.clone_from(value);
            }
        }
        if self.require_tls {
            nats.require_tls = true;
        }
    }
}
