//! The Rust toolchain rustup would run in a job's tree, resolved on the host: the worker's
//! sandbox exposes it to the guest, and the result cache's key names it, so one resolution
//! serves both. rustup is trusted code and only reads the tree's toolchain file; a toolchain
//! named by path (one the tree could ship) is refused before rustup sees it, whatever rustup
//! answers must be one of its own installed toolchains, and it never installs one for a job.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// How many trailing lines of rustup's stderr an error quotes.
const STDERR_LINES: usize = 8;

/// The toolchain a rustup proxy would run in a tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RustToolchain {
    /// `RUSTUP_HOME/toolchains/NAME`, canonical.
    pub dir: PathBuf,
    /// The toolchain's full name, e.g. `stable-x86_64-unknown-linux-gnu`.
    pub name: String,
    /// The rustup home it was resolved in, canonical.
    pub rustup_home: PathBuf,
    /// rustup's settings: a proxy the guest names itself reads them (nothing secret).
    pub settings: Option<PathBuf>,
}

/// Why the toolchain a tree's cargo would run could not be resolved, or was refused.
#[derive(Debug, thiserror::Error)]
pub enum RustupError {
    /// The tree's toolchain file names a toolchain by path, a program the tree chooses.
    #[error(
        "refusing the toolchain file {file}: it names a toolchain by path, which could run a program of the tree's choosing (hint: name a channel, such as `channel = \"1.95\"`)"
    )]
    PathToolchain {
        /// The toolchain file.
        file: PathBuf,
    },
    /// rustup could not be started.
    #[error("failed to run {rustup} to resolve the Rust toolchain for {cwd}")]
    Spawn {
        /// The rustup binary run.
        rustup: PathBuf,
        /// The directory it was asked about.
        cwd: PathBuf,
        /// Why it did not start.
        #[source]
        source: std::io::Error,
    },
    /// rustup ran but chose no toolchain: none is installed for the tree's channel.
    #[error(
        "rustup could not choose a Rust toolchain for {cwd} (nothing is installed for a job: install it with rustup first): {stderr}"
    )]
    Which {
        /// The directory it was asked about.
        cwd: PathBuf,
        /// The last lines rustup wrote to stderr.
        stderr: String,
    },
    /// rustup named a cargo outside its own toolchains directory.
    #[error(
        "rustup resolved {cwd}'s cargo to {resolved}, outside rustup's toolchains ({toolchains})"
    )]
    OutsideRustupHome {
        /// The directory it was asked about.
        cwd: PathBuf,
        /// The cargo it named, canonical.
        resolved: PathBuf,
        /// The toolchains directory it had to be under.
        toolchains: PathBuf,
    },
}

/// Asks rustup (the one beside `proxy`, or the one it links to), with `rustup_home` as its home,
/// which toolchain its proxy would run in `cwd`: the tree's `rust-toolchain.toml` as rustup
/// honours it for a user, else `chosen` (a job's `RUSTUP_TOOLCHAIN`), else rustup's default.
pub fn resolve(
    proxy: &Path,
    cwd: &Path,
    rustup_home: &Path,
    chosen: Option<&str>,
) -> Result<RustToolchain, RustupError> {
    // Read once: the file decides both whether rustup may be asked and what it answers.
    let toolchain_file = toolchain_file_text(cwd);
    if let Some((file, text)) = &toolchain_file
        && names_a_path(text)
    {
        return Err(RustupError::PathToolchain { file: file.clone() });
    }
    let rustup = proxy
        .parent()
        .map(|d| d.join("rustup"))
        .filter(|r| r.is_file())
        .or_else(|| proxy.canonicalize().ok())
        .unwrap_or_else(|| proxy.to_path_buf());
    // Every job asks: the answer depends on rustup, its home, the job's choice and the
    // toolchain file the job's tree (or a directory above it) holds, so it is asked once per
    // such set in a process. rustup's per-directory overrides never name a job's fresh tree.
    let asked = Asked {
        rustup: rustup.clone(),
        rustup_home: rustup_home.to_path_buf(),
        chosen: chosen.map(str::to_owned),
        toolchain_file,
    };
    // Held while rustup answers, so that jobs starting together ask it once.
    let mut answers = answered()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(known) = answers.get(&asked) {
        return Ok(known.clone());
    }
    let toolchain = ask_rustup(&rustup, cwd, rustup_home, chosen)?;
    answers.insert(asked, toolchain.clone());
    Ok(toolchain)
}

/// What decides rustup's answer for a job.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Asked {
    rustup: PathBuf,
    rustup_home: PathBuf,
    chosen: Option<String>,
    /// The nearest toolchain file up from the job's directory: its path and text.
    toolchain_file: Option<(PathBuf, String)>,
}

/// rustup's answers in this process.
fn answered() -> &'static std::sync::Mutex<std::collections::HashMap<Asked, RustToolchain>> {
    static ANSWERED: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<Asked, RustToolchain>>,
    > = std::sync::OnceLock::new();
    ANSWERED.get_or_init(Default::default)
}

/// The nearest `rust-toolchain` or `rust-toolchain.toml` up from `cwd`, with its text.
fn toolchain_file_text(cwd: &Path) -> Option<(PathBuf, String)> {
    let file = cwd.ancestors().find_map(|dir| {
        ["rust-toolchain", "rust-toolchain.toml"]
            .iter()
            .map(|name| dir.join(name))
            .find(|f| f.is_file())
    })?;
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    // A tree's own file is named relative to it, as the repository has it: every job's tree
    // is a fresh directory.
    let file = file
        .strip_prefix(cwd)
        .map(Path::to_path_buf)
        .unwrap_or(file);
    Some((file, text))
}

/// Runs `rustup which cargo` in `cwd` and reads the toolchain it names.
fn ask_rustup(
    rustup: &Path,
    cwd: &Path,
    rustup_home: &Path,
    chosen: Option<&str>,
) -> Result<RustToolchain, RustupError> {
    let rustup = rustup.to_path_buf();
    let mut command = Command::new(&rustup);
    command
        .args(["which", "cargo"])
        .current_dir(cwd)
        .env("RUSTUP_AUTO_INSTALL", "0")
        .env("RUSTUP_HOME", rustup_home)
        // This process's own toolchain (set when it runs under cargo) must not override the
        // tree's toolchain file; the job's choice may.
        .env_remove("RUSTUP_TOOLCHAIN")
        // Its error, not its stack, is what an error message quotes.
        .env("RUST_BACKTRACE", "0")
        .env("RUST_LIB_BACKTRACE", "0")
        .stdin(Stdio::null());
    if let Some(chosen) = chosen {
        command.env("RUSTUP_TOOLCHAIN", chosen);
    }
    let output = command.output().map_err(|source| RustupError::Spawn {
        rustup: rustup.clone(),
        cwd: cwd.to_path_buf(),
        source,
    })?;
    if !output.status.success() {
        return Err(RustupError::Which {
            cwd: cwd.to_path_buf(),
            stderr: last_lines(&output.stderr, STDERR_LINES),
        });
    }
    let resolved = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    let toolchains = rustup_home.join("toolchains");
    let outside = || RustupError::OutsideRustupHome {
        cwd: cwd.to_path_buf(),
        resolved: resolved.clone(),
        toolchains: toolchains.clone(),
    };
    let real = resolved.canonicalize().map_err(|_| outside())?;
    let dir = real
        .parent()
        .and_then(Path::parent)
        .filter(|dir| dir.parent() == Some(toolchains.as_path()))
        .ok_or_else(outside)?
        .to_path_buf();
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(outside)?;
    let settings = Some(rustup_home.join("settings.toml")).filter(|s| s.is_file());
    Ok(RustToolchain {
        dir,
        name,
        rustup_home: rustup_home.to_path_buf(),
        settings,
    })
}

impl RustToolchain {
    /// What this toolchain is, for a result cache's key, read and never run: its name, and a
    /// digest of its `cargo` and `rustc` programs and of the names and sizes of its `lib`
    /// files (the compiler proper is `lib/librustc_driver-HASH.so`, whose name changes with
    /// every build). Another toolchain, or this one updated in place, is another identity.
    pub fn identity(&self) -> String {
        let mut hasher = Sha256::new();
        for program in ["cargo", "rustc"] {
            let file = self.dir.join("bin").join(program);
            hasher.update(program.as_bytes());
            match std::fs::File::open(&file) {
                Ok(mut reader) => {
                    if let Err(e) = std::io::copy(&mut reader, &mut hasher) {
                        hasher.update(format!("unreadable: {e}").as_bytes());
                    }
                }
                Err(e) => hasher.update(format!("missing: {e}").as_bytes()),
            }
        }
        let mut libs: Vec<(String, u64)> = std::fs::read_dir(self.dir.join("lib"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| {
                let size = entry.metadata().map(|m| m.len()).unwrap_or_default();
                (entry.file_name().to_string_lossy().into_owned(), size)
            })
            .collect();
        libs.sort();
        for (name, size) in libs {
            hasher.update(format!("lib/{name} {size}\n").as_bytes());
        }
        format!("{} sha256:{}", self.name, hex::encode(hasher.finalize()))
    }
}

/// Whether `path` is one of rustup's proxies: a link to `rustup`, or a hard link of the
/// `rustup` beside it (rustup installs either).
pub fn is_rustup_proxy(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(real) = path.canonicalize() else {
        return false;
    };
    if real
        .file_name()
        .is_some_and(|n| n == "rustup" || n == "rustup-init")
    {
        return true;
    }
    let same = |a: &Path, b: &Path| match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    };
    path.parent()
        .is_some_and(|dir| same(path, &dir.join("rustup")))
}

/// Whether a toolchain file's text names a toolchain by path.
fn names_a_path(text: &str) -> bool {
    match text.parse::<toml::Table>() {
        Ok(table) => table
            .get("toolchain")
            .and_then(|t| t.as_table())
            .is_some_and(|t| t.contains_key("path")),
        // The legacy form is one line: a channel, or a path.
        Err(_) => text.trim().contains('/'),
    }
}

/// The last `n` non-blank lines of a tool's stderr, for an error message.
pub fn last_lines(stderr: &[u8], n: usize) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn file(path: &Path, bytes: &[u8]) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn toolchain(dir: &Path) -> RustToolchain {
        RustToolchain {
            dir: dir.to_path_buf(),
            name: "stable-x86_64-unknown-linux-gnu".into(),
            rustup_home: dir.to_path_buf(),
            settings: None,
        }
    }

    #[test]
    fn an_updated_compiler_is_another_identity() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path();
        file(&at.join("bin/cargo"), b"cargo 1.95.0");
        file(&at.join("bin/rustc"), b"rustc 1.95.0");
        file(&at.join("lib/librustc_driver-59807616.so"), b"driver");
        let first = toolchain(at).identity();
        assert_eq!(first, toolchain(at).identity());
        assert!(first.starts_with("stable-x86_64-unknown-linux-gnu sha256:"));
        // A new driver under its new name, the programs unchanged (an update in place).
        std::fs::rename(
            at.join("lib/librustc_driver-59807616.so"),
            at.join("lib/librustc_driver-e50aa6fb.so"),
        )
        .unwrap();
        let driver = toolchain(at).identity();
        assert_ne!(driver, first);
        file(&at.join("bin/rustc"), b"rustc 1.95.1");
        assert_ne!(toolchain(at).identity(), driver);
    }

    #[test]
    fn a_toolchain_file_naming_a_path_is_refused_before_rustup_runs() {
        let tree = tempfile::tempdir().unwrap();
        let marker = tree.path().join("ran");
        let proxy = tree.path().join("bin/cargo");
        file(
            &proxy,
            format!("#!/bin/sh\ntouch {}\n", marker.display()).as_bytes(),
        );
        std::fs::write(
            tree.path().join("rust-toolchain.toml"),
            "[toolchain]\npath = \"./evil\"\n",
        )
        .unwrap();
        let refused = resolve(&proxy, tree.path(), tree.path(), None);
        assert!(
            matches!(&refused, Err(RustupError::PathToolchain { file }) if file == Path::new("rust-toolchain.toml")),
            "{refused:?}"
        );
        assert!(!marker.exists());
    }

    /// rustup is asked once per set of what decides its answer: two jobs' fresh trees with the
    /// same toolchain file share one answer; another file text is asked again.
    #[test]
    fn rustup_is_asked_once_per_toolchain_file_and_choice() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("rustup-home");
        let cargo = home.join("toolchains/1.95.0-x86_64-unknown-linux-gnu/bin/cargo");
        file(&cargo, b"#!/bin/sh\n");
        let asked = dir.path().join("asked");
        let bin = dir.path().join("cargo-home/bin");
        file(
            &bin.join("rustup"),
            format!(
                "#!/bin/sh\necho asked >> '{}'\necho '{}'\n",
                asked.display(),
                cargo.display()
            )
            .as_bytes(),
        );
        file(&bin.join("cargo"), b"#!/bin/sh\n");
        let tree = |name: &str, toolchain_file: &str| {
            let tree = dir.path().join(name);
            file(&tree.join("rust-toolchain.toml"), toolchain_file.as_bytes());
            tree
        };
        let pinned = "[toolchain]\nchannel = \"1.95.0\"\n";
        let first = resolve(&bin.join("cargo"), &tree("job-1", pinned), &home, None).unwrap();
        let second = resolve(&bin.join("cargo"), &tree("job-2", pinned), &home, None).unwrap();
        assert_eq!(first, second);
        assert_eq!(first.name, "1.95.0-x86_64-unknown-linux-gnu");
        let times = || std::fs::read_to_string(&asked).unwrap().lines().count();
        assert_eq!(times(), 1, "the second job's tree holds the same file");
        let other = "[toolchain]\nchannel = \"1.94.0\"\n";
        resolve(&bin.join("cargo"), &tree("job-3", other), &home, None).unwrap();
        resolve(
            &bin.join("cargo"),
            &tree("job-4", pinned),
            &home,
            Some("1.94.0"),
        )
        .unwrap();
        assert_eq!(times(), 3, "another file, another choice: asked again");
    }
}
