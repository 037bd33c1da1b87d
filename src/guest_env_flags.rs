//! What a test command's clean environment may keep from this one: the `--pass-env` flag
//! `assay prove`, `assay test` and `assay mutate` share, declared once.

use clap::Args;

#[derive(Args, Debug, Clone, Default)]
pub struct GuestEnvFlags {
    /// Environment variable passed to test commands, beyond PATH and the locale. Repeatable.
    #[arg(long = "pass-env", value_name = "NAME")]
    pub pass_env: Vec<String>,
}
