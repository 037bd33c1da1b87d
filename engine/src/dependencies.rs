//! Dependencies resolved on the trusted side. A Rust project's jobs build offline in their
//! sandboxes, reading the host's cargo caches read-only; so before any job runs, the host's
//! cargo pins each tree's dependencies (`cargo generate-lockfile` when the tree has no
//! `Cargo.lock`: the repository's own always wins) and fetches them (`cargo fetch`). A
//! generated lockfile becomes part of the jobs' tree (a tree of its own in the repository's
//! object database), so the result cache's key and the evidence's tree name it.
//!
//! Only cargo's own code runs here: neither command builds anything or runs a build script.
//! They run on a copy of the tree without what could make cargo run a program of the tree's
//! choosing (its `.cargo` configuration: wrappers, credential providers; its toolchain files),
//! in a directory of this user's cache, so no other user's `.cargo/config.toml` up the path
//! is read either.

use assay_common::ids::TreeId;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// How many trailing lines of cargo's stderr an error quotes.
const STDERR_LINES: usize = 8;

/// A tree whose dependencies the host holds, and the lockfile generated for it, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pinned {
    /// The tree the jobs run on: the tree itself, or it with the generated `Cargo.lock`.
    pub tree: TreeId,
    /// The sha256 of the `Cargo.lock` generated for the tree, when it had none.
    pub generated_lockfile: Option<String>,
    /// The identity of the Rust toolchain rustup would run in the tree (its toolchain file
    /// honoured), when the `cargo` on `PATH` is a rustup proxy: part of the result cache's key.
    pub toolchain: Option<String>,
}

/// Why a cargo tree's dependencies could not be pinned and fetched.
#[derive(Debug, thiserror::Error)]
pub enum DependencyError {
    /// The tree could not be checked out to a scratch directory.
    #[error("failed to copy tree {tree} to {dir} to resolve its dependencies")]
    Copy {
        /// The tree being copied.
        tree: TreeId,
        /// The scratch directory it was copied to.
        dir: PathBuf,
        /// The checkout's failure.
        #[source]
        source: Box<assay_transport::tree::TreeError>,
    },
    /// A file of the scratch copy could not be read or written.
    #[error("failed to prepare {path} to resolve the dependencies of tree {tree}")]
    Io {
        /// The tree being resolved.
        tree: TreeId,
        /// The file or directory that failed.
        path: PathBuf,
        /// The I/O failure.
        #[source]
        source: std::io::Error,
    },
    /// cargo could not be started.
    #[error("failed to run cargo {step} for tree {tree} (hint: is cargo on PATH?)")]
    Spawn {
        /// The cargo subcommand being run (e.g. `generate-lockfile`, `fetch`).
        step: &'static str,
        /// The tree it ran in.
        tree: TreeId,
        /// The spawn's failure.
        #[source]
        source: std::io::Error,
    },
    /// cargo exited with a failure.
    #[error("cargo {step} failed for tree {tree}:\n{stderr}")]
    Cargo {
        /// The cargo subcommand that failed.
        step: &'static str,
        /// The tree it ran in.
        tree: TreeId,
        /// The last lines cargo printed on stderr.
        stderr: String,
    },
    /// rustup could not say which toolchain the tree runs.
    #[error("failed to resolve the Rust toolchain of tree {tree}")]
    Toolchain {
        /// The tree whose toolchain was asked for.
        tree: TreeId,
        /// rustup's failure.
        #[source]
        source: assay_transport::rust_toolchain::RustupError,
    },
    /// The tree with its generated `Cargo.lock` could not be written to the repository.
    #[error("failed to write tree {tree} with its generated Cargo.lock")]
    Write {
        /// The tree the lockfile was generated for.
        tree: TreeId,
        /// The write's failure.
        #[source]
        source: Box<crate::source::SourceError>,
    },
}

/// Pins and fetches the dependencies of `tree` (of the repository at `repo`), a cargo project,
/// with the host's `cargo`.
pub fn pin_cargo(repo: &Path, tree: &TreeId) -> Result<Pinned, DependencyError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DependencyError::Io {
            tree: tree.clone(),
            path,
            source,
        }
    };
    let (_scratch, copy) = checkout(repo, tree)?;
    // Resolved before the toolchain files go: the jobs' sandboxes run what the tree names.
    let toolchain = rust_toolchain_of(&copy)
        .map_err(|source| DependencyError::Toolchain {
            tree: tree.clone(),
            source,
        })?
        .map(|found| found.identity());
    strip_tree_configuration(&copy).map_err(io(&copy))?;
    let lockfile = copy.join("Cargo.lock");
    let generated = if lockfile.exists() {
        None
    } else {
        cargo(&copy, tree, "generate-lockfile", &[])?;
        Some(std::fs::read(&lockfile).map_err(io(&lockfile))?)
    };
    // A committed lockfile cargo would have to update (a version bumped in a manifest) is
    // the repository's to fix; the jobs then resolve offline from what this fetched.
    if cargo(&copy, tree, "fetch", &["--locked"]).is_err() {
        cargo(&copy, tree, "fetch", &[])?;
    }
    let Some(generated) = generated else {
        return Ok(Pinned {
            tree: tree.clone(),
            generated_lockfile: None,
            toolchain,
        });
    };
    let pinned = crate::source::tree_with_files(repo, tree, &[("Cargo.lock", &generated)])
        .map_err(|source| DependencyError::Write {
            tree: tree.clone(),
            source: Box::new(source),
        })?;
    Ok(Pinned {
        tree: pinned,
        generated_lockfile: Some(hex::encode(Sha256::digest(&generated))),
        toolchain,
    })
}

/// A private checkout of `tree` (in a directory that goes with the returned guard) for the
/// host's cargo to read: the tree's own programs stay out of it once
/// [`strip_tree_configuration`] has run.
fn checkout(repo: &Path, tree: &TreeId) -> Result<(tempfile::TempDir, PathBuf), DependencyError> {
    let parent = private_temp_root();
    let io = |source| DependencyError::Io {
        tree: tree.clone(),
        path: parent.clone(),
        source,
    };
    std::fs::create_dir_all(&parent).map_err(io)?;
    let scratch = tempfile::Builder::new()
        .prefix("pin-")
        .tempdir_in(&parent)
        .map_err(io)?;
    let copy = scratch.path().join("tree");
    assay_transport::tree::write_tree(repo, tree, &copy).map_err(|source| {
        DependencyError::Copy {
            tree: tree.clone(),
            dir: copy.clone(),
            source: Box::new(source),
        }
    })?;
    Ok((scratch, copy))
}

/// A checkout of `tree` stripped of what could make the host's cargo run the tree's programs,
/// for cargo to read the dependencies the tree's `Cargo.lock` pins (see [`crate::vendored`]).
pub(crate) fn stripped_checkout(
    repo: &Path,
    tree: &TreeId,
) -> Result<(tempfile::TempDir, PathBuf), DependencyError> {
    let (scratch, copy) = checkout(repo, tree)?;
    strip_tree_configuration(&copy).map_err(|source| DependencyError::Io {
        tree: tree.clone(),
        path: copy.clone(),
        source,
    })?;
    Ok((scratch, copy))
}

/// The toolchain the jobs' sandboxes will run in `tree` (a checkout of the job's tree): the
/// one rustup resolves there for the `cargo` on this process's `PATH`, which the jobs get, as
/// the sandbox resolves it. None when that `cargo` is no rustup proxy: its own bytes are then
/// the program's identity in the key.
fn rust_toolchain_of(
    tree: &Path,
) -> Result<
    Option<assay_transport::rust_toolchain::RustToolchain>,
    assay_transport::rust_toolchain::RustupError,
> {
    use assay_transport::rust_toolchain::{is_rustup_proxy, resolve};
    let path = std::env::var_os("PATH").unwrap_or_default();
    let Some(proxy) = std::env::split_paths(&path)
        .map(|dir| dir.join("cargo"))
        .find(|candidate| candidate.is_file())
        .filter(|cargo| is_rustup_proxy(cargo))
    else {
        return Ok(None);
    };
    let Some(rustup_home) =
        named_or_under_home("RUSTUP_HOME", ".rustup").and_then(|h| h.canonicalize().ok())
    else {
        return Ok(None);
    };
    resolve(&proxy, tree, &rustup_home, None).map(Some)
}

/// Runs `cargo STEP ARGS` in `dir` and returns what it wrote on stdout; never installs a
/// toolchain, and reads no toolchain file (the copy has none: the host's default toolchain,
/// or the user's `RUSTUP_TOOLCHAIN`, runs).
pub(crate) fn cargo(
    dir: &Path,
    tree: &TreeId,
    step: &'static str,
    args: &[&str],
) -> Result<String, DependencyError> {
    let output = Command::new("cargo")
        .arg(step)
        .args(args)
        .arg("--quiet")
        .current_dir(dir)
        .env("RUSTUP_AUTO_INSTALL", "0")
        .stdin(Stdio::null())
        .output()
        .map_err(|source| DependencyError::Spawn {
            step,
            tree: tree.clone(),
            source,
        })?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    Err(DependencyError::Cargo {
        step,
        tree: tree.clone(),
        stderr: last_lines(&String::from_utf8_lossy(&output.stderr)),
    })
}

/// The last [`STDERR_LINES`] lines of a tool's output that say something.
pub(crate) fn last_lines(output: &str) -> String {
    let lines: Vec<&str> = output.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(STDERR_LINES)..].join("\n")
}

/// Removes, everywhere in the copy, what would make the host's cargo or rustup run a program
/// the tree names: `.cargo` directories (configuration: `build.rustc-wrapper`, credential
/// providers, `target.*.runner`) and toolchain files (`path = "./bin"`).
fn strip_tree_configuration(copy: &Path) -> std::io::Result<()> {
    let mut dirs = vec![copy.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let kind = entry.file_type()?;
            let path = entry.path();
            match name.to_str() {
                Some(".cargo") => {
                    if kind.is_dir() {
                        std::fs::remove_dir_all(&path)?;
                    } else {
                        std::fs::remove_file(&path)?;
                    }
                }
                Some("rust-toolchain" | "rust-toolchain.toml") => std::fs::remove_file(&path)?,
                Some(".git") => {}
                _ if kind.is_dir() => dirs.push(path),
                _ => {}
            }
        }
    }
    Ok(())
}

/// A directory only this user writes, with nothing of another user's on the way up: cargo
/// reads `.cargo/config.toml` in every directory above where it runs, and the shared temp dir
/// is anyone's to plant one in.
fn private_temp_root() -> PathBuf {
    named_or_under_home("XDG_CACHE_HOME", ".cache")
        .map(|cache| cache.join("assay/pin"))
        .unwrap_or_else(|| std::env::temp_dir().join("assay-pin"))
}

/// The directory the environment variable `variable` names, else `under` in the home
/// (`$HOME`); an empty variable names nothing.
fn named_or_under_home(variable: &str, under: &str) -> Option<PathBuf> {
    std::env::var_os(variable)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(under))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_test_support::Repo;

    /// A crate with no dependency and no lockfile whose `.cargo/config.toml` names a rustc
    /// wrapper: it would leave `marker` behind if the host's cargo ran it.
    fn hostile_crate(marker: &Path) -> Repo {
        let repo = Repo::new();
        let evil = format!("#!/bin/sh\ntouch {}\nexec \"$@\"\n", marker.display());
        repo.write(
            "Cargo.toml",
            "[package]\nname = \"pager\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        )
        .write("src/lib.rs", "pub fn pages() -> u32 {\n    1\n}\n")
        .write("tools/wrap.sh", &evil)
        .write("evil-toolchain/bin/cargo", &evil)
        .write(
            ".cargo/config.toml",
            "[build]\nrustc-wrapper = \"tools/wrap.sh\"\n",
        );
        for program in ["tools/wrap.sh", "evil-toolchain/bin/cargo"] {
            use std::os::unix::fs::PermissionsExt;
            let path = repo.path().join(program);
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        repo.commit("pager");
        repo
    }

    #[test]
    fn a_lockfile_is_generated_without_running_anything_the_tree_names() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran-on-the-host");
        let repo = hostile_crate(&marker);
        let tree = crate::source::tree_of(repo.path(), "HEAD").unwrap();
        let pinned = pin_cargo(repo.path(), &tree).unwrap();
        assert!(!marker.exists(), "the tree's program ran on the host");
        assert_ne!(pinned.tree, tree);
        assert_eq!(
            pinned.generated_lockfile.as_ref().map(String::len),
            Some(64)
        );
        let lockfile = crate::source::read_file(repo.path(), &pinned.tree, "Cargo.lock")
            .unwrap()
            .unwrap();
        assert!(String::from_utf8_lossy(&lockfile).contains("name = \"pager\""));
        // Everything else of the tree is as it was.
        let files = crate::source::list_files(repo.path(), &pinned.tree).unwrap();
        assert!(
            files.contains(&".cargo/config.toml".to_owned()),
            "{files:?}"
        );
    }

    #[test]
    fn the_repositorys_own_lockfile_wins() {
        let dir = tempfile::tempdir().unwrap();
        let repo = hostile_crate(&dir.path().join("marker"));
        repo.write("Cargo.lock", "# This file is automatically @generated by Cargo.\nversion = 4\n\n[[package]]\nname = \"pager\"\nversion = \"0.1.0\"\n");
        repo.commit("pager: lockfile");
        let tree = crate::source::tree_of(repo.path(), "HEAD").unwrap();
        let pinned = pin_cargo(repo.path(), &tree).unwrap();
        assert_eq!(pinned.tree, tree);
        assert_eq!(pinned.generated_lockfile, None);
    }

    #[test]
    fn a_toolchain_named_by_path_is_refused_before_anything_runs() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran-on-the-host");
        let repo = hostile_crate(&marker);
        repo.write(
            "rust-toolchain.toml",
            "[toolchain]\npath = \"evil-toolchain\"\n",
        );
        repo.commit("pager: a toolchain of its own");
        let tree = crate::source::tree_of(repo.path(), "HEAD").unwrap();
        let refused = pin_cargo(repo.path(), &tree);
        assert!(!marker.exists(), "the tree's program ran on the host");
        assert!(
            matches!(
                &refused,
                Err(DependencyError::Toolchain {
                    source: assay_transport::rust_toolchain::RustupError::PathToolchain { .. },
                    ..
                })
            ),
            "{refused:?}"
        );
    }
}
