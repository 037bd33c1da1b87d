//! A project's dependencies as they travel through a fleet: the submitter collects what its
//! tree's lockfile names (a cargo project's `Cargo.lock`: the vendored sources; a Go module's
//! `go.sum`: the module cache entries) into an archive and stores it, and a job names that
//! archive, so a worker builds offline from it and from nothing of its own (docs/FORMATS.md,
//! "Dependency archives"). This is the data a job carries; packing and unpacking live with the
//! store (`assay_transport::dependency_archive`).

use serde::{Deserialize, Serialize};
use std::fmt;

/// A sha256 digest in lowercase hex. A worker names its cache directories after one, so one
/// read from the wire must be 64 hex digits and nothing else.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Sha256Hex(String);

/// A digest read from outside that is not 64 lowercase hex digits.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a sha256 digest (64 lowercase hex digits)")]
pub struct Sha256HexError(String);

impl Sha256Hex {
    /// `hex` as a digest, refused unless it is exactly 64 lowercase hex digits.
    pub fn parse(hex: &str) -> Result<Self, Sha256HexError> {
        let well_formed = hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if well_formed {
            Ok(Self(hex.to_owned()))
        } else {
            Err(Sha256HexError(hex.to_owned()))
        }
    }

    /// The digest as hex text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Sha256Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Sha256Hex {
    type Error = Sha256HexError;

    fn try_from(hex: String) -> Result<Self, Self::Error> {
        Self::parse(&hex)
    }
}

impl From<Sha256Hex> for String {
    fn from(hex: Sha256Hex) -> Self {
        hex.0
    }
}

/// What an archive holds, and so which lockfile keys it and how a job builds from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DependencyKind {
    /// `cargo vendor`'s directory for a `Cargo.lock`; the job's cargo home replaces the
    /// registry (and the lockfile's git sources) with it.
    Cargo,
    /// The Go module cache entries a `go.sum`'s module needs (`cache/download/…` and the
    /// extracted `module@version` directories); the job's `GOMODCACHE`, read-only.
    Go,
}

impl DependencyKind {
    /// The name of the store's directory, and of the worker's cache entries, of this kind.
    pub fn name(self) -> &'static str {
        match self {
            Self::Cargo => "cargo",
            Self::Go => "go",
        }
    }

    /// The file at a tree's root whose sha256 keys the archive.
    pub fn lockfile(self) -> &'static str {
        match self {
            Self::Cargo => "Cargo.lock",
            Self::Go => "go.sum",
        }
    }

    /// Where every archive of this kind is stored: `dependencies/{kind}/`.
    pub fn key_prefix(self) -> String {
        format!("dependencies/{}/", self.name())
    }
}

/// The dependencies of one lockfile, as stored: keyed by the lockfile's sha256 (the same
/// lockfile, the same key) and the archive's own, which a worker checks the bytes it fetched
/// against before it unpacks anything.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DependencyArchive {
    /// The sha256 of the lockfile (`Cargo.lock`, `go.sum`) whose dependencies the archive holds.
    pub lockfile_sha256: Sha256Hex,
    /// The sha256 of the archive's bytes.
    pub sha256: Sha256Hex,
    /// The archive's size.
    pub bytes: u64,
    /// What the archive holds.
    pub kind: DependencyKind,
}

impl DependencyArchive {
    /// The archive's key in the store: `dependencies/{kind}/{lockfile sha256}/{sha256}.tar`.
    pub fn key(&self) -> String {
        format!(
            "{}{}/{}.tar",
            self.kind.key_prefix(),
            self.lockfile_sha256,
            self.sha256
        )
    }

    /// A name for the archive on a worker's disk, made of its kind and the two digests only.
    pub fn cache_name(&self) -> String {
        format!(
            "{}-{}-{}",
            self.kind.name(),
            self.lockfile_sha256,
            self.sha256
        )
    }
}

/// The name the cargo configuration a job is given calls the vendored sources by; a tree's
/// own configuration may not name it (see SECURITY.md, "Dependency archives").
pub const VENDORED_SOURCE: &str = "assay-vendored";

/// A git repository a `Cargo.lock` takes packages from, as cargo names the source: its URL and
/// the reference the manifest asked for (`rev`, `branch` or `tag`; none: the default branch).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct GitSource {
    /// The repository's URL, as the lock file names it.
    pub url: String,
    /// The kind of reference (`rev`, `branch` or `tag`) and its value; `None`: the default branch.
    pub reference: Option<(&'static str, String)>,
}

impl GitSource {
    /// The source as a lockfile's `source` names it, without the commit:
    /// `git+URL` or `git+URL?KIND=VALUE`.
    fn name(&self) -> String {
        match &self.reference {
            Some((kind, value)) => format!("git+{}?{kind}={value}", self.url),
            None => format!("git+{}", self.url),
        }
    }
}

/// The git sources `lockfile` (a `Cargo.lock`'s text) names, each once, in order.
pub fn git_sources(lockfile: &str) -> Vec<GitSource> {
    let mut sources: Vec<GitSource> = lockfile
        .lines()
        .filter_map(|line| line.trim().strip_prefix("source = \"git+"))
        .filter_map(|rest| {
            let rest = rest.strip_suffix('"')?;
            let without_commit = rest.split_once('#').map_or(rest, |(source, _)| source);
            let (url, query) = match without_commit.split_once('?') {
                Some((url, query)) => (url, Some(query)),
                None => (without_commit, None),
            };
            let reference = match query {
                None => None,
                Some(query) => {
                    let (kind, value) = query.split_once('=')?;
                    let kind = ["rev", "branch", "tag"].into_iter().find(|k| *k == kind)?;
                    Some((kind, value.to_owned()))
                }
            };
            Some(GitSource {
                url: url.to_owned(),
                reference,
            })
        })
        .collect();
    sources.sort();
    sources.dedup();
    sources
}

/// The cargo configuration that makes cargo build from `directory` (the unpacked archive, as
/// the guest sees it) instead of the registry and of `git` (the git sources the tree's lockfile
/// names, which the archive holds too), and never reach the network.
pub fn cargo_config(directory: &str, git: &[GitSource]) -> String {
    let mut config = format!(
        "[source.crates-io]\nreplace-with = \"{VENDORED_SOURCE}\"\n\n\
         [source.{VENDORED_SOURCE}]\ndirectory = {}\n\n",
        toml_string(directory)
    );
    for source in git {
        config.push_str(&format!(
            "[source.{}]\ngit = {}\n",
            toml_string(&source.name()),
            toml_string(&source.url)
        ));
        if let Some((kind, value)) = &source.reference {
            config.push_str(&format!("{kind} = {}\n", toml_string(value)));
        }
        config.push_str(&format!("replace-with = \"{VENDORED_SOURCE}\"\n\n"));
    }
    config.push_str("[net]\noffline = true\n");
    config
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if c.is_control() => quoted.push_str(&format!("\\u{:04x}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(c: char) -> Sha256Hex {
        Sha256Hex::parse(&c.to_string().repeat(64)).unwrap()
    }

    #[test]
    fn only_a_sha256_in_hex_decodes_as_a_digest() {
        let ok: Sha256Hex = serde_json::from_str(&format!("\"{}\"", "a1".repeat(32))).unwrap();
        assert_eq!(ok.as_str().len(), 64);
        for bad in [
            "\"../../etc/passwd\"".to_owned(),
            "\"\"".to_owned(),
            format!("\"{}\"", "A".repeat(64)),
            format!("\"{}\"", "a".repeat(63)),
            format!("\"{}/\"", "a".repeat(63)),
        ] {
            assert!(serde_json::from_str::<Sha256Hex>(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_key_names_the_lockfile_and_the_archive() {
        let archive = DependencyArchive {
            lockfile_sha256: digest('a'),
            sha256: digest('b'),
            bytes: 7,
            kind: DependencyKind::Cargo,
        };
        assert_eq!(
            archive.key(),
            format!(
                "dependencies/cargo/{}/{}.tar",
                "a".repeat(64),
                "b".repeat(64)
            )
        );
        assert_eq!(
            archive.cache_name(),
            format!("cargo-{}-{}", "a".repeat(64), "b".repeat(64))
        );
        let go = DependencyArchive {
            kind: DependencyKind::Go,
            ..archive
        };
        assert_eq!(
            go.key(),
            format!("dependencies/go/{}/{}.tar", "a".repeat(64), "b".repeat(64))
        );
        assert_eq!(
            go.cache_name(),
            format!("go-{}-{}", "a".repeat(64), "b".repeat(64))
        );
    }

    #[test]
    fn the_cargo_configuration_quotes_the_directory() {
        let config = cargo_config("/cache/a \"b\"\\c\n", &[]);
        let parsed: toml::Value = toml::from_str(&config).unwrap();
        assert_eq!(
            parsed["source"][VENDORED_SOURCE]["directory"].as_str(),
            Some("/cache/a \"b\"\\c\n")
        );
        assert_eq!(
            parsed["source"]["crates-io"]["replace-with"].as_str(),
            Some(VENDORED_SOURCE)
        );
        assert_eq!(parsed["net"]["offline"].as_bool(), Some(true));
    }

    #[test]
    fn git_sources_are_replaced_by_the_archive_as_the_lockfile_names_them() {
        let lockfile = "[[package]]\nname = \"helper\"\nversion = \"0.1.0\"\nsource = \"git+file:///repos/helper?branch=main#0123abc\"\n\n[[package]]\nname = \"other\"\nversion = \"1.0.0\"\nsource = \"git+https://example.invalid/other#fedcba9\"\n\n[[package]]\nname = \"again\"\nversion = \"0.2.0\"\nsource = \"git+file:///repos/helper?branch=main#0123abc\"\n\n[[package]]\nname = \"lru\"\nversion = \"0.12.5\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n";
        let git = git_sources(lockfile);
        assert_eq!(git.len(), 2, "{git:?}");
        let parsed: toml::Value = toml::from_str(&cargo_config("/v", &git)).unwrap();
        let helper = &parsed["source"]["git+file:///repos/helper?branch=main"];
        assert_eq!(helper["git"].as_str(), Some("file:///repos/helper"));
        assert_eq!(helper["branch"].as_str(), Some("main"));
        assert_eq!(helper["replace-with"].as_str(), Some(VENDORED_SOURCE));
        let other = &parsed["source"]["git+https://example.invalid/other"];
        assert_eq!(other["git"].as_str(), Some("https://example.invalid/other"));
        assert!(other.get("rev").is_none());
        // A name that would break out of its string stays inside it.
        let hostile = git_sources("source = \"git+file:///x\\\"]\\n[build]#1\"\n");
        let config = cargo_config("/v", &hostile);
        let parsed: toml::Value = toml::from_str(&config).unwrap();
        assert!(parsed.get("build").is_none(), "{config}");
    }
}
