//! `assay prove`'s sandbox: the `[sandbox]` table of the configuration file under the flags,
//! each value checked where it was given, then built by the worker library exactly as a fleet
//! worker builds it.

use crate::config::SandboxFile;
use anyhow::{Result, anyhow, bail};
use assay_common::service_config::SandboxKind;
use assay_worker::sandbox::docker::DockerConfig;
use clap::Args;
use std::path::Path;

#[derive(Args, Debug, Clone, Default)]
pub struct SandboxArgs {
    /// Where jobs run: process (a process group on this machine) or docker (a fresh
    /// locked-down container per job) [default: process].
    #[arg(long, value_name = "KIND", value_parser = parse_kind)]
    pub sandbox: Option<SandboxKind>,
    /// Image of the docker sandbox [default: assay-runner-python:latest, built by
    /// deploy/build-images.sh --runner-only].
    #[arg(long, value_name = "IMAGE", value_parser = parse_image)]
    pub image: Option<String>,
    /// Memory limit of each job's container, in MB [default: 2048].
    #[arg(long, value_name = "MB", value_parser = parse_memory)]
    pub memory_mb: Option<u64>,
    /// CPUs of each job's container, fractions allowed [default: 1].
    #[arg(long, value_name = "N", value_parser = parse_cpus)]
    pub cpus: Option<f64>,
    /// Process limit of each job's container [default: 256].
    #[arg(long, value_name = "N", value_parser = parse_pids)]
    pub pids: Option<i64>,
    /// Network of each job: none (a loopback of its own only) or bridge (the host's network in
    /// the process sandbox, Docker's bridge network in a container) [default: none].
    #[arg(long, value_name = "MODE", value_parser = parse_network)]
    pub network: Option<bool>,
}

impl SandboxArgs {
    /// The docker-only flags that were given, for refusing them with the process sandbox.
    fn docker_flags(&self) -> Vec<&'static str> {
        [
            (self.image.is_some(), "--image"),
            (self.memory_mb.is_some(), "--memory-mb"),
            (self.cpus.is_some(), "--cpus"),
            (self.pids.is_some(), "--pids"),
        ]
        .into_iter()
        .filter_map(|(given, flag)| given.then_some(flag))
        .collect()
    }
}

/// The sandbox a proof runs its jobs in.
#[derive(Clone, Debug, PartialEq)]
pub struct SandboxChoice {
    pub kind: SandboxKind,
    pub docker: DockerConfig,
}

impl Default for SandboxChoice {
    fn default() -> Self {
        SandboxChoice {
            kind: SandboxKind::Process,
            docker: DockerConfig::default(),
        }
    }
}

/// Flags over the file's `[sandbox]` table over the defaults. `origin` is the file the table
/// came from, named in errors.
pub fn resolve(
    args: &SandboxArgs,
    file: Option<SandboxFile>,
    origin: Option<&Path>,
) -> Result<SandboxChoice> {
    let file = file.unwrap_or_default();
    let table = match origin {
        Some(path) if path.ends_with("pyproject.toml") => {
            format!("[tool.assay.sandbox] of {}", path.display())
        }
        Some(path) => format!("[sandbox] of {}", path.display()),
        None => "[sandbox]".to_owned(),
    };
    let kind = args
        .sandbox
        .or(in_file("kind", file.kind, &table, |v: String| {
            parse_kind(&v)
        })?)
        .unwrap_or(SandboxKind::Process);
    let docker_flags = args.docker_flags();
    if kind == SandboxKind::Process && !docker_flags.is_empty() {
        bail!(
            "{} applies to the docker sandbox only (hint: add --sandbox docker, or set kind = \"docker\" in {table})",
            docker_flags.join(", ")
        );
    }
    let defaults = DockerConfig::default();
    let image = in_file("image", file.image, &table, |v: String| parse_image(&v))?;
    let memory_mb = in_file("memory_mb", file.memory_mb, &table, check_memory)?;
    let cpus = in_file("cpus", file.cpus, &table, check_cpus)?;
    let pids = in_file("pids", file.pids, &table, check_pids)?;
    let network = in_file("network", file.network, &table, |v: String| {
        parse_network(&v)
    })?;
    Ok(SandboxChoice {
        kind,
        docker: DockerConfig {
            image: args.image.clone().or(image).unwrap_or(defaults.image),
            memory_mb: args.memory_mb.or(memory_mb).unwrap_or(defaults.memory_mb),
            cpus: args.cpus.or(cpus).unwrap_or(defaults.cpus),
            pids: args.pids.or(pids).unwrap_or(defaults.pids),
            network_default: args.network.or(network).unwrap_or(defaults.network_default),
        },
    })
}

/// A file value, checked by the same rule as its flag (even when a flag overrides it: the file
/// is wrong either way); the error names the key, the table and the file.
fn in_file<V: std::fmt::Display, T>(
    key: &str,
    value: Option<V>,
    table: &str,
    rule: impl Fn(V) -> Result<T, String>,
) -> Result<Option<T>> {
    let Some(value) = value else {
        return Ok(None);
    };
    let shown = value.to_string();
    rule(value)
        .map(Some)
        .map_err(|why| anyhow!("invalid {key} = {shown} in {table}: {why}"))
}

fn parse_kind(text: &str) -> Result<SandboxKind, String> {
    text.parse()
}

fn parse_image(text: &str) -> Result<String, String> {
    if text.is_empty() || text.chars().any(char::is_whitespace) {
        return Err("an image name is one word, e.g. assay-runner-python:latest".into());
    }
    Ok(text.to_owned())
}

/// Below this a container cannot start a test runner; the engine itself refuses under 6 MB.
const MIN_MEMORY_MB: u64 = 16;
/// Below this a test runner cannot start its interpreter and a few helper threads.
const MIN_PIDS: i64 = 8;

fn check_memory(mb: u64) -> Result<u64, String> {
    if mb < MIN_MEMORY_MB {
        return Err(format!(
            "expected at least {MIN_MEMORY_MB} MB, a container with less cannot start a test runner"
        ));
    }
    Ok(mb)
}

fn parse_memory(text: &str) -> Result<u64, String> {
    check_memory(
        text.parse()
            .map_err(|_| "expected a whole number of MB, e.g. 2048".to_owned())?,
    )
}

fn check_cpus(cpus: f64) -> Result<f64, String> {
    if !cpus.is_finite() || cpus < 0.01 {
        return Err("expected a number of CPUs of at least 0.01, e.g. 1 or 1.5".into());
    }
    Ok(cpus)
}

fn parse_cpus(text: &str) -> Result<f64, String> {
    check_cpus(
        text.parse()
            .map_err(|_| "expected a number of CPUs, e.g. 1 or 1.5".to_owned())?,
    )
}

fn check_pids(pids: i64) -> Result<i64, String> {
    if pids < MIN_PIDS {
        return Err(format!(
            "expected at least {MIN_PIDS} processes, a test runner needs a few to start"
        ));
    }
    Ok(pids)
}

fn parse_pids(text: &str) -> Result<i64, String> {
    check_pids(
        text.parse()
            .map_err(|_| "expected a whole number of processes, e.g. 256".to_owned())?,
    )
}

/// `bridge` gives the job network access; `none` leaves it only loopback.
fn parse_network(text: &str) -> Result<bool, String> {
    match text {
        "none" => Ok(false),
        "bridge" => Ok(true),
        other => Err(format!(
            "unknown network {other:?} (expected none or bridge)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> SandboxFile {
        toml::from_str(text).expect("sandbox table parses")
    }

    #[test]
    fn flags_win_over_the_file_and_the_file_over_defaults() {
        let table = file(
            "kind = 'docker'\nimage = 'pager-runner:3.12'\nmemory_mb = 512\ncpus = 0.5\npids = 64\nnetwork = 'bridge'\n",
        );
        let args = SandboxArgs {
            memory_mb: Some(1024),
            network: Some(false),
            ..SandboxArgs::default()
        };
        let choice = resolve(&args, Some(table), Some(Path::new("/src/pager/assay.toml"))).unwrap();
        assert_eq!(
            choice,
            SandboxChoice {
                kind: SandboxKind::Docker,
                docker: DockerConfig {
                    image: "pager-runner:3.12".into(),
                    memory_mb: 1024,
                    cpus: 0.5,
                    pids: 64,
                    network_default: false,
                },
            }
        );
        assert_eq!(
            resolve(&SandboxArgs::default(), None, None).unwrap(),
            SandboxChoice::default()
        );
        let process = SandboxArgs {
            sandbox: Some(SandboxKind::Process),
            ..SandboxArgs::default()
        };
        let choice = resolve(&process, Some(file("kind = 'docker'\npids = 64\n")), None).unwrap();
        assert_eq!(choice.kind, SandboxKind::Process);
    }

    #[test]
    fn bad_file_values_name_the_key_the_table_and_the_file() {
        let origin = Path::new("/src/pager/pyproject.toml");
        let cases = [
            (
                "kind = 'vm'",
                "invalid kind = vm in [tool.assay.sandbox] of /src/pager/pyproject.toml: unknown sandbox \"vm\" (expected process or docker)",
            ),
            (
                "memory_mb = 4",
                "invalid memory_mb = 4 in [tool.assay.sandbox] of /src/pager/pyproject.toml: expected at least 16 MB",
            ),
            (
                "cpus = 0.0",
                "invalid cpus = 0 in [tool.assay.sandbox] of /src/pager/pyproject.toml: expected a number of CPUs of at least 0.01",
            ),
            (
                "pids = 1",
                "invalid pids = 1 in [tool.assay.sandbox] of /src/pager/pyproject.toml: expected at least 8 processes",
            ),
            (
                "network = 'host'",
                "invalid network = host in [tool.assay.sandbox] of /src/pager/pyproject.toml: unknown network \"host\" (expected none or bridge)",
            ),
            (
                "image = 'pager runner'",
                "invalid image = pager runner in [tool.assay.sandbox] of /src/pager/pyproject.toml: an image name is one word",
            ),
        ];
        for (text, expected) in cases {
            let error = resolve(&SandboxArgs::default(), Some(file(text)), Some(origin))
                .expect_err(text)
                .to_string();
            assert!(error.starts_with(expected), "{text}: {error}");
        }
        assert!(toml::from_str::<SandboxFile>("memroy_mb = 512").is_err());
    }

    #[test]
    fn docker_flags_with_the_process_sandbox_are_refused_with_a_hint() {
        let args = SandboxArgs {
            image: Some("pager-runner:3.12".into()),
            pids: Some(64),
            ..SandboxArgs::default()
        };
        let error = resolve(&args, None, Some(Path::new("/src/pager/assay.toml")))
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "--image, --pids applies to the docker sandbox only (hint: add --sandbox docker, or set kind = \"docker\" in [sandbox] of /src/pager/assay.toml)"
        );
    }

    #[test]
    fn flag_values_are_checked_by_the_same_rules() {
        assert_eq!(parse_memory("512"), Ok(512));
        assert!(parse_memory("8").unwrap_err().contains("at least 16 MB"));
        assert!(parse_memory("lots").is_err());
        assert_eq!(parse_cpus("1.5"), Ok(1.5));
        assert!(parse_cpus("NaN").is_err());
        assert!(parse_pids("0").is_err());
        assert_eq!(parse_network("bridge"), Ok(true));
        assert!(parse_kind("podman").is_err());
    }
}
