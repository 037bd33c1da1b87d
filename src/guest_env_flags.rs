//! What a test command's clean environment may keep from this one: the `--pass-env` flag
//! `assay prove`, `assay test` and `assay mutate` share, declared once.

use clap::Args;

#[derive(Args, Debug, Clone, Default)]
pub struct GuestEnvFlags {
    /// Environment variable passed to test commands, beyond PATH and the locale. Repeatable.
    /// Loader and start-up variables (`LD_*`, `GCONV_PATH`, `PYTHONSTARTUP`, `BASH_ENV`,
    /// `NODE_OPTIONS`, …) are refused.
    #[arg(long = "pass-env", value_name = "NAME", value_parser = pass_env_name)]
    pub pass_env: Vec<String>,
}

/// A `--pass-env` name, refused when it is a loader or start-up variable
/// ([`assay_common::guest_env`]); the refusal is clap's usage error, exit 2.
pub fn pass_env_name(name: &str) -> Result<String, assay_common::guest_env::RefusedVariable> {
    assay_common::guest_env::check_name(name).map(|()| name.to_owned())
}
