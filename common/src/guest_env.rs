//! Which environment variables may reach a job. A job's variables are chosen by its submitter
//! (`--pass-env`, a `JobSpec`'s `env`), and some of them change what a program does before its
//! own code runs: the dynamic loader's (`LD_PRELOAD` loads a library into every program,
//! bubblewrap and the Docker engine's helpers included), glibc's (`GCONV_PATH` loads a module
//! from a path) and interpreters' start-up hooks (`PYTHONSTARTUP`, `BASH_ENV`, `NODE_OPTIONS`).
//! None of them has a place in a test run that the runner's own command line does not give it,
//! so each is refused wherever a variable name enters: the flags, a service's configuration and
//! a job decoded from the wire.

use serde::{Deserialize, Deserializer};

/// Prefixes of variables read by a dynamic loader.
const LOADER_PREFIXES: [&str; 2] = ["LD_", "DYLD_"];

/// The prefix of a function bash imports from its environment at start-up
/// (`BASH_FUNC_printf%%`): it replaces the command of that name in every bash script, the
/// process sandbox's own start-up stub among them.
const BASH_FUNCTION_PREFIX: &str = "BASH_FUNC_";

/// Variables that make glibc, a shell or an interpreter load code of the variable's choosing
/// before the program asked for anything.
const START_UP_VARIABLES: [&str; 22] = [
    "GCONV_PATH",
    "GETCONF_DIR",
    "GLIBC_TUNABLES",
    "HOSTALIASES",
    "LOCPATH",
    "MALLOC_TRACE",
    "NLSPATH",
    "RESOLV_HOST_CONF",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PYTHONSTARTUP",
    "PYTHONINSPECT",
    "PYTHONHOME",
    "NODE_OPTIONS",
    "NODE_REPL_EXTERNAL_MODULE",
    "PERL5OPT",
    "RUBYOPT",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
];

/// A variable a job may not be given, with why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "environment variable {name} may not be passed to a test command: it makes {what} load code before the test command runs (hint: set it in the test command itself, e.g. `--test-command \"env {name}=… python3 -m pytest\"`, where it reaches only the code under test)"
)]
pub struct RefusedVariable {
    /// The variable, as the job named it.
    pub name: String,
    /// What it makes load code early (`the dynamic loader`, `a shell, glibc or an interpreter`).
    pub what: &'static str,
}

/// `Err` when `name` is a loader or start-up variable (compared as written: the names are
/// case-sensitive everywhere they are read).
pub fn check_name(name: &str) -> Result<(), RefusedVariable> {
    let what = if LOADER_PREFIXES.iter().any(|p| name.starts_with(p)) {
        Some("the dynamic loader")
    } else if START_UP_VARIABLES.contains(&name) || name.starts_with(BASH_FUNCTION_PREFIX) {
        Some("a shell, glibc or an interpreter")
    } else {
        None
    };
    match what {
        Some(what) => Err(RefusedVariable {
            name: name.to_owned(),
            what,
        }),
        None => Ok(()),
    }
}

/// Every name of `env` checked; the first refused one is the error.
pub fn check_all<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<(), RefusedVariable> {
    names.into_iter().try_for_each(check_name)
}

/// Decodes a job's `env` and refuses it when it names a loader or start-up variable, so a job
/// that carries one is never run (`#[serde(deserialize_with)]` on `JobSpec::env`).
pub fn deserialize_env<'de, D>(deserializer: D) -> Result<Vec<(String, String)>, D::Error>
where
    D: Deserializer<'de>,
{
    let env = Vec::<(String, String)>::deserialize(deserializer)?;
    check_all(env.iter().map(|(name, _)| name.as_str())).map_err(serde::de::Error::custom)?;
    Ok(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_and_start_up_variables_are_refused_with_the_name_and_a_way_out() {
        for name in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "LD_AUDIT",
            "DYLD_INSERT_LIBRARIES",
            "GCONV_PATH",
            "PYTHONSTARTUP",
            "BASH_ENV",
            "ENV",
            "NODE_OPTIONS",
            "BASH_FUNC_printf%%",
        ] {
            let refused = check_name(name).expect_err(name);
            let message = refused.to_string();
            assert!(message.contains(name), "{message}");
            assert!(message.contains("hint:"), "{message}");
        }
    }

    #[test]
    fn ordinary_variables_pass() {
        for name in [
            "PATH",
            "LANG",
            "LC_ALL",
            "HTTP_PROXY",
            "PYTHONPATH",
            "RUST_BACKTRACE",
            "GOFLAGS",
            "ENVIRONMENT",
            "ld_preload_note",
        ] {
            assert_eq!(check_name(name), Ok(()), "{name}");
        }
    }
}
