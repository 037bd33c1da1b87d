//! A Go module's dependencies made to travel with its trees to a fleet: on the submitting side,
//! the host's `go` downloads what the tree's `go.mod` and `go.sum` name (`go mod download -json
//! all`, which reads module files and runs no package code) into a fresh module cache, served
//! first by the host's own module cache and then by the user's `GOPROXY`; that cache, download
//! entries and extracted `module@version` directories, is packed as a
//! [`DependencyKind::Go`] archive, and the worker gives it to the job as its read-only
//! `GOMODCACHE` with `GOPROXY=off` (docs/fleet.md, "Dependency archives").

use crate::dependencies::{self, DependencyError};
use crate::vendored::{VendorError, Vendored, digest};
use assay_common::TreeId;
use assay_common::dependency_archive::DependencyKind;
use serde::Deserialize;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};

/// Why a tree's Go modules could not be read, checked or vendored.
#[derive(Debug, thiserror::Error)]
pub enum GoModulesError {
    /// The go command could not be started.
    #[error("failed to run go {step} for tree {tree} (hint: is go on PATH?)")]
    Spawn {
        /// The go subcommand being run (e.g. `mod edit`, `mod vendor`).
        step: &'static str,
        /// The tree it ran in.
        tree: TreeId,
        /// The spawn's failure.
        #[source]
        source: std::io::Error,
    },
    /// The go command exited with a failure.
    #[error("go {step} failed for tree {tree}:\n{stderr}")]
    Go {
        /// The go subcommand that failed.
        step: &'static str,
        /// The tree it ran in.
        tree: TreeId,
        /// What go printed on stderr.
        stderr: String,
    },
    /// `go mod edit -json` printed what does not parse as a go.mod.
    #[error("go mod edit -json printed what is not a go.mod for tree {tree}")]
    Parse {
        /// The tree whose go.mod was read.
        tree: TreeId,
        /// Where the JSON parse failed.
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "the go.mod of tree {tree} requires modules but the tree has no go.sum, so the workers could not check what they build from (hint: run `go mod tidy` and commit go.sum)"
    )]
    /// The go.mod requires modules but the tree has no go.sum to check them against.
    NoGoSum {
        /// The tree without a go.sum.
        tree: TreeId,
    },
    #[error(
        "the go.mod of tree {tree} replaces {module} with the directory {path}, outside the tree: refused, a fleet's jobs read nothing of the submitting host (hint: replace it with a module version, or with a directory inside the tree)"
    )]
    /// A `replace` points to a directory outside the tree, which a fleet's worker cannot see.
    ReplacedOutside {
        /// The tree whose go.mod says so.
        tree: TreeId,
        /// The module path being replaced.
        module: String,
        /// The replacement directory, as go.mod writes it.
        path: String,
    },
}

/// What `go mod edit -json` prints of a `go.mod`, as far as the archive needs it.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct GoMod {
    #[serde(default)]
    require: Option<Vec<ModuleVersion>>,
    #[serde(default)]
    replace: Option<Vec<Replace>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ModuleVersion {
    path: String,
    #[serde(default)]
    version: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Replace {
    old: ModuleVersion,
    new: ModuleVersion,
}

/// The module cache entries `tree`'s module needs, packed. `None` when the tree has no
/// `go.mod` at its root, or one that requires nothing; an error when it requires modules
/// without a `go.sum`, or replaces one with a directory outside the tree.
pub fn collect(repo: &Path, tree: &TreeId) -> Result<Option<Vendored>, VendorError> {
    let (scratch, copy) = dependencies::stripped_checkout(repo, tree)?;
    if !std::fs::symlink_metadata(copy.join("go.mod")).is_ok_and(|m| m.is_file()) {
        return Ok(None);
    }
    let module = go_mod(&copy, tree)?;
    refuse_replacements_outside(&copy, tree, &module)?;
    let requires = module.require.as_ref().is_some_and(|r| !r.is_empty());
    let go_sum = copy.join("go.sum");
    let lockfile = match std::fs::symlink_metadata(&go_sum) {
        Ok(meta) if meta.is_file() => {
            std::fs::read(&go_sum).map_err(|source| DependencyError::Io {
                tree: tree.clone(),
                path: go_sum.clone(),
                source,
            })?
        }
        _ if requires => return Err(GoModulesError::NoGoSum { tree: tree.clone() }.into()),
        _ => return Ok(None),
    };
    let cache = scratch.path().join("modcache");
    download(&copy, &cache, tree)?;
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| DependencyError::Io {
            tree: tree.clone(),
            path,
            source,
        }
    };
    std::fs::create_dir_all(&cache).map_err(io(&cache))?;
    // Version control checkouts (a `direct` fetch) and the cache's own lock are no module.
    for leftover in ["cache/vcs", "cache/lock"] {
        let path = cache.join(leftover);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&path).map_err(io(&path))?,
            Ok(_) => std::fs::remove_file(&path).map_err(io(&path))?,
            Err(_) => {}
        }
    }
    Vendored::pack(&cache, tree, DependencyKind::Go, digest(&lockfile)).map(Some)
}

/// The tree's `go.mod`, as the host's `go` parses it.
fn go_mod(copy: &Path, tree: &TreeId) -> Result<GoMod, GoModulesError> {
    let printed = go(copy, tree, "mod edit", &["mod", "edit", "-json"], &[])?;
    serde_json::from_str(&printed).map_err(|source| GoModulesError::Parse {
        tree: tree.clone(),
        source,
    })
}

/// Refuses a `replace` by a directory outside the tree (an absolute path, one climbing above
/// the root, or a link leading out): `go` would read it from the submitting host.
fn refuse_replacements_outside(
    copy: &Path,
    tree: &TreeId,
    module: &GoMod,
) -> Result<(), GoModulesError> {
    let root = copy.canonicalize().unwrap_or_else(|_| copy.to_owned());
    for replace in module.replace.iter().flatten() {
        if replace
            .new
            .version
            .as_deref()
            .is_some_and(|v| !v.is_empty())
        {
            continue;
        }
        let path = &replace.new.path;
        let inside = lexically_inside(Path::new(path))
            && copy
                .join(path)
                .canonicalize()
                .map_or(true, |real| real.starts_with(&root));
        if !inside {
            return Err(GoModulesError::ReplacedOutside {
                tree: tree.clone(),
                module: replace.old.path.clone(),
                path: path.clone(),
            });
        }
    }
    Ok(())
}

/// Whether `path` is relative and never climbs above where it starts.
fn lexically_inside(path: &Path) -> bool {
    let mut depth = 0usize;
    for component in path.components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir if depth > 0 => depth -= 1,
            _ => return false,
        }
    }
    true
}

/// Downloads every module of the build list into the fresh module cache `cache`, reading the
/// host's module cache first (as a proxy: nothing of it is written) and then the user's
/// `GOPROXY`, with the host's `go` whatever the tree's `toolchain` line asks.
fn download(copy: &Path, cache: &Path, tree: &TreeId) -> Result<(), GoModulesError> {
    let host_cache = go(copy, tree, "env", &["env", "GOMODCACHE"], &[])?;
    let user_proxy = go(copy, tree, "env", &["env", "GOPROXY"], &[])?;
    let host_download = PathBuf::from(host_cache.trim()).join("cache/download");
    let proxy = match (host_download.is_dir(), user_proxy.trim()) {
        (true, "") => file_url(&host_download),
        (true, user) => format!("{},{user}", file_url(&host_download)),
        (false, user) => user.to_owned(),
    };
    let cache = cache.to_string_lossy();
    go(
        copy,
        tree,
        "mod download",
        &["mod", "download", "-json", "all"],
        &[
            ("GOMODCACHE", &cache),
            ("GOPROXY", &proxy),
            // Writable, so the scratch directory can be removed; packed read-only anyway.
            ("GOFLAGS", "-mod=mod -modcacherw"),
        ],
    )?;
    Ok(())
}

/// `dir` as a `file://` URL, every byte but a path's plain ones escaped (a `,` or `|` would
/// otherwise split the `GOPROXY` list).
fn file_url(dir: &Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let mut url = String::from("file://");
    for &byte in dir.as_os_str().as_bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'/' | b'.' | b'_' | b'-' | b'~' => {
                url.push(char::from(byte))
            }
            _ => url.push_str(&format!("%{byte:02X}")),
        }
    }
    url
}

/// Runs the host's `go` in `dir` (no workspace, the local toolchain) and returns its stdout.
fn go(
    dir: &Path,
    tree: &TreeId,
    step: &'static str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<String, GoModulesError> {
    let output = Command::new("go")
        .args(args)
        .current_dir(dir)
        .env("GOTOOLCHAIN", "local")
        .env("GOWORK", "off")
        .env("GOFLAGS", "-mod=mod")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .map_err(|source| GoModulesError::Spawn {
            step,
            tree: tree.clone(),
            source,
        })?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    // `go mod download -json` says what failed in its JSON, on stdout.
    let said = match output.stderr.is_empty() {
        true => &output.stdout,
        false => &output.stderr,
    };
    Err(GoModulesError::Go {
        step,
        tree: tree.clone(),
        stderr: dependencies::last_lines(&String::from_utf8_lossy(said)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_cache_as_a_proxy_url_cannot_split_the_proxy_list() {
        assert_eq!(
            file_url(Path::new("/home/a b/go,x|y/pkg/mod/cache/download")),
            "file:///home/a%20b/go%2Cx%7Cy/pkg/mod/cache/download"
        );
    }

    #[test]
    fn a_replacement_directory_is_inside_only_when_it_never_climbs_out() {
        for inside in ["./sub", "sub/../other", "./a/b/../../c"] {
            assert!(lexically_inside(Path::new(inside)), "{inside}");
        }
        for outside in ["/etc", "../sibling", "./a/../../x", "sub/../../.."] {
            assert!(!lexically_inside(Path::new(outside)), "{outside}");
        }
    }
}
