//! `assay prove` configuration: defaults, then `assay.toml` (or `[tool.assay]` in
//! `pyproject.toml`) at the repository root, then flags. Unknown keys are errors.

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The file schema; every key is optional and every key has a flag.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ProveFile {
    pub base: Option<String>,
    pub candidate: Option<String>,
    pub patch: Option<PathBuf>,
    pub criteria: Option<Vec<String>>,
    pub runner: Option<String>,
    pub test_command: Option<String>,
    pub test_report: Option<String>,
    pub test_globs: Option<Vec<String>>,
    pub jobs: Option<usize>,
    pub repeats: Option<u32>,
    pub timeout: Option<u64>,
    /// `false` turns the mutation check off, like `--no-mutation`.
    pub mutation: Option<bool>,
    /// Seconds for the whole mutation check, like `--mutation-budget`.
    pub mutation_budget: Option<u64>,
    /// `false` turns diff coverage off, like `--no-diff-coverage`.
    pub diff_coverage: Option<bool>,
    pub json: Option<PathBuf>,
    pub junit: Option<PathBuf>,
    pub store: Option<String>,
    pub pass_env: Option<Vec<String>>,
    /// `[sandbox]`: where jobs run; checked and merged with the flags in `crate::sandbox`.
    pub sandbox: Option<SandboxFile>,
}

/// The `[sandbox]` table (`[tool.assay.sandbox]` in `pyproject.toml`). Its keys are spelt as
/// in the services' configuration (`memory_mb`); the kebab-case spelling is accepted too.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxFile {
    pub kind: Option<String>,
    pub image: Option<String>,
    #[serde(alias = "memory-mb")]
    pub memory_mb: Option<u64>,
    pub cpus: Option<f64>,
    pub pids: Option<i64>,
    pub network: Option<String>,
}

#[derive(Deserialize)]
struct PyProject {
    tool: Option<PyProjectTool>,
}

#[derive(Deserialize)]
struct PyProjectTool {
    assay: Option<toml::Value>,
}

impl ProveFile {
    /// The keys set here that reach beyond the repository's own tests: host paths Assay reads
    /// or writes (`patch`, `store`, `json`, `junit`), variables of the caller's environment
    /// (`pass-env`), and `[sandbox]` values that widen the sandbox (any image, a network,
    /// the process sandbox, limits above the defaults). The file comes from the repository
    /// under test, which a pull request controls: these need `--trust-repo-config`. A
    /// repository may still narrow its sandbox (`kind = "docker"`, `network = "none"`, lower
    /// limits) and shape its proof (criteria, runner, command, repeats, timeouts) freely.
    pub fn reaching_beyond_the_repository(&self) -> Vec<&'static str> {
        let defaults = assay_worker::sandbox::docker::DockerConfig::default();
        let mut keys = Vec::new();
        for (set, key) in [
            (self.patch.is_some(), "patch"),
            (self.store.is_some(), "store"),
            (self.json.is_some(), "json"),
            (self.junit.is_some(), "junit"),
            (
                self.pass_env.as_ref().is_some_and(|v| !v.is_empty()),
                "pass-env",
            ),
        ] {
            if set {
                keys.push(key);
            }
        }
        if let Some(sandbox) = &self.sandbox {
            for (set, key) in [
                (
                    sandbox.kind.as_deref().is_some_and(|k| k != "docker"),
                    "sandbox.kind",
                ),
                (sandbox.image.is_some(), "sandbox.image"),
                (
                    sandbox.network.as_deref().is_some_and(|n| n != "none"),
                    "sandbox.network",
                ),
                (
                    sandbox.memory_mb.is_some_and(|m| m > defaults.memory_mb),
                    "sandbox.memory_mb",
                ),
                (
                    sandbox.cpus.is_some_and(|c| c > defaults.cpus),
                    "sandbox.cpus",
                ),
                (
                    sandbox.pids.is_some_and(|p| p > defaults.pids),
                    "sandbox.pids",
                ),
            ] {
                if set {
                    keys.push(key);
                }
            }
        }
        keys
    }
}

/// Reads `assay.toml`, else `[tool.assay]` of `pyproject.toml`, from the repository root.
pub fn load(repo: &Path) -> Result<(ProveFile, Option<PathBuf>)> {
    let assay_toml = repo.join("assay.toml");
    if assay_toml.is_file() {
        let text = std::fs::read_to_string(&assay_toml)
            .with_context(|| format!("failed to read {}", assay_toml.display()))?;
        if let Ok(table) = toml::from_str::<toml::Table>(&text) {
            refuse_person_only_keys(&table, &assay_toml)?;
        }
        let file = toml::from_str(&text)
            .with_context(|| format!("invalid configuration in {}", assay_toml.display()))?;
        return Ok((file, Some(assay_toml)));
    }
    let pyproject = repo.join("pyproject.toml");
    if pyproject.is_file() {
        let text = std::fs::read_to_string(&pyproject)
            .with_context(|| format!("failed to read {}", pyproject.display()))?;
        let parsed: PyProject = toml::from_str(&text)
            .with_context(|| format!("invalid TOML in {}", pyproject.display()))?;
        if let Some(value) = parsed.tool.and_then(|t| t.assay) {
            if let Some(table) = value.as_table() {
                refuse_person_only_keys(table, &pyproject)?;
            }
            let file = value
                .try_into()
                .with_context(|| format!("invalid [tool.assay] in {}", pyproject.display()))?;
            return Ok((file, Some(pyproject)));
        }
    }
    Ok((ProveFile::default(), None))
}

/// Settings only a person may give, by flag or environment: the repository under test is the
/// change's own, and a change must not accept its own harness.
const PERSON_ONLY_KEYS: &[(&str, &str)] = &[
    ("trust-harness-change", "--trust-harness-change"),
    ("trust_harness_change", "--trust-harness-change"),
];

/// Refuses a configuration file that sets a person-only setting, naming the flag to use.
fn refuse_person_only_keys(table: &toml::Table, origin: &Path) -> Result<()> {
    if let Some((key, flag)) = PERSON_ONLY_KEYS
        .iter()
        .find(|(key, _)| table.contains_key(*key))
    {
        bail!(
            "{} sets {key}, which the repository under test can never set: the change would accept its own harness (hint: a person who reviewed the harness change passes {flag} or sets ASSAY_TRUST_HARNESS_CHANGE=1)",
            origin.display()
        );
    }
    Ok(())
}

/// Splits a command line the way a POSIX shell would for plain words and quotes.
pub fn split_command(text: &str) -> Result<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => bail!("unterminated single quote in command {text:?}"),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c) => word.push(c),
                            None => bail!("trailing backslash in command {text:?}"),
                        },
                        Some(c) => word.push(c),
                        None => bail!("unterminated double quote in command {text:?}"),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(c) => word.push(c),
                    None => bail!("trailing backslash in command {text:?}"),
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    if words.is_empty() {
        bail!("the test command is empty");
    }
    Ok(words)
}

/// The store used when none is configured: a cache directory outside every repository.
pub fn default_store_url() -> String {
    format!(
        "file://{}",
        user_cache_dir().join("assay").join("store").display()
    )
}

/// The user's cache directory: `$XDG_CACHE_HOME`, else `$HOME/.cache`, else the temp dir. An
/// empty or relative `XDG_CACHE_HOME` is ignored, as the XDG base directory rule says (a
/// relative one would put Assay's state inside whatever directory it runs from).
pub fn user_cache_dir() -> PathBuf {
    cache_dir_from(std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME"))
}

fn cache_dir_from(xdg_cache_home: Option<OsString>, home: Option<OsString>) -> PathBuf {
    let absolute =
        |value: Option<OsString>| value.map(PathBuf::from).filter(|path| path.is_absolute());
    absolute(xdg_cache_home)
        .or_else(|| absolute(home).map(|home| home.join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_or_relative_xdg_cache_home_counts_as_unset() {
        let home = Some(OsString::from("/home/ada"));
        for unset in [None, Some(""), Some("assay"), Some("./cache")] {
            assert_eq!(
                cache_dir_from(unset.map(OsString::from), home.clone()),
                PathBuf::from("/home/ada/.cache"),
                "{unset:?}"
            );
        }
        assert_eq!(
            cache_dir_from(Some("/var/cache/ada".into()), home),
            PathBuf::from("/var/cache/ada")
        );
        assert_eq!(
            cache_dir_from(Some(OsString::new()), Some(OsString::new())),
            std::env::temp_dir()
        );
    }

    #[test]
    fn commands_split_like_a_shell() {
        assert_eq!(
            split_command(r#"python3 -m pytest -o 'addopts=-x -q' "a b""#).unwrap(),
            ["python3", "-m", "pytest", "-o", "addopts=-x -q", "a b"]
        );
        assert!(split_command("'open").is_err());
        assert!(split_command("   ").is_err());
    }

    #[test]
    fn pyproject_tool_table_is_read_and_unknown_keys_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("pyproject.toml"),
            "[project]\nname='pager'\n[tool.assay]\nbase='main'\nrepeats=5\ntest-command='python3 -m pytest -x'\n[tool.assay.sandbox]\nkind='docker'\nmemory-mb=512\n",
        )
        .unwrap();
        let (file, from) = load(dir.path()).unwrap();
        assert_eq!(file.base.as_deref(), Some("main"));
        assert_eq!(file.repeats, Some(5));
        let sandbox = file.sandbox.expect("[tool.assay.sandbox] is read");
        assert_eq!(sandbox.kind.as_deref(), Some("docker"));
        assert_eq!(sandbox.memory_mb, Some(512));
        assert!(from.unwrap().ends_with("pyproject.toml"));
        std::fs::write(dir.path().join("assay.toml"), "bsae = 'main'\n").unwrap();
        let err = format!("{:#}", load(dir.path()).unwrap_err());
        assert!(err.contains("assay.toml") && err.contains("bsae"), "{err}");
    }
}
