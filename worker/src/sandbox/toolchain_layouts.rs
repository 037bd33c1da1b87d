//! The toolchains a confined guest gets back from under the masks (`$HOME`, Assay's registered
//! paths), and the credential files it never sees. A toolchain comes back exactly: the one
//! installation a known layout names, found from canonical paths so that `..` and links cannot
//! widen it, never a parent of it. Known layouts: a rustup toolchain (a `~/.cargo/bin` proxy
//! resolved on the host to the toolchain it would run), cargo's registry and git caches, a
//! pyenv version and its shims, a venv with its base interpreter, a `pip --user` site, an nvm
//! version, a `GOROOT` and Go's module cache; any other `bin` directory comes back alone.

use assay_transport::rust_toolchain::{self, RustToolchain, RustupError, is_rustup_proxy};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Files and directories under the home that hold secrets: masked in every guest, even inside
/// an exposed toolchain or where nothing masks them.
const HOME_CREDENTIALS: [&str; 9] = [
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".netrc",
    ".pypirc",
    ".npmrc",
    ".docker/config.json",
    ".git-credentials",
    ".ssh",
    ".local/share/keyrings",
];

/// The parts of a pyenv root its shims need (`pyenv exec` and its plugins), besides the
/// versions they run: not its other versions, nor anything a user keeps beside them.
const PYENV_MECHANISM: [&str; 6] = ["bin", "libexec", "plugins", "shims", "pyenv.d", "version"];

/// Where the host's toolchains live: the worker's own home and environment (trusted), never
/// the job's, which the submitter chooses.
pub struct Host<'a> {
    /// The worker's home directory, when it has one.
    pub home: Option<PathBuf>,
    /// Reads a variable of the worker's environment.
    pub var: &'a dyn Fn(&str) -> Option<OsString>,
}

impl Host<'_> {
    /// The worker process's own home and environment.
    pub fn current() -> Host<'static> {
        Host {
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from)
                .and_then(|h| h.canonicalize().ok())
                // A home of `/` masks nothing: the root stays read-only as it is.
                .filter(|h| h.parent().is_some()),
            var: &|name| std::env::var_os(name).filter(|v| !v.is_empty()),
        }
    }

    fn dir(&self, name: &str, default_under_home: &str) -> Option<PathBuf> {
        (self.var)(name)
            .map(PathBuf::from)
            .or_else(|| self.home.as_ref().map(|h| h.join(default_under_home)))
            .and_then(|p| p.canonicalize().ok())
    }
}

/// What one command needs from under the masks.
pub struct Needs<'a> {
    /// The program as the command names it.
    pub program: &'a str,
    /// The job's `PATH`, which the program is looked up on.
    pub path_env: Option<&'a str>,
    /// The job's environment (the guest's, before what [`Toolchains::env`] sets).
    pub env: &'a [(String, String)],
    /// The command's working directory: the job's tree, where a toolchain file is read.
    pub cwd: &'a Path,
    /// The directories masked empty.
    pub masked: &'a [PathBuf],
    /// The job's unpacked dependency archive, which its own `CARGO_HOME` or `GOMODCACHE`
    /// names: the host's cargo caches and home, and its Go module cache, are then not given.
    pub vendored: Option<&'a Path>,
}

/// What the guest gets back: paths bound read-only, then credential paths masked, and the
/// variables set in its environment.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Toolchains {
    /// Toolchain directories bound read-only under the masks.
    pub exposed: Vec<PathBuf>,
    /// Credential files and directories masked empty.
    pub masks: Vec<PathBuf>,
    /// Variables set in the guest's environment (e.g. `RUSTUP_TOOLCHAIN`).
    pub env: Vec<(String, String)>,
}

/// Why a job's toolchain could not be worked out for its sandbox.
#[derive(Debug, thiserror::Error)]
pub enum ToolchainError {
    /// rustup could not resolve, or refused, the tree's Rust toolchain.
    #[error(transparent)]
    Rustup(#[from] RustupError),
    /// No rustup home could be found to resolve a Rust toolchain in.
    #[error("rustup's home is unknown: neither RUSTUP_HOME nor HOME names an existing directory")]
    NoRustupHome,
}

/// The toolchains `needs` leads to under the masks, and the credential files to mask.
pub fn resolve(needs: &Needs<'_>, host: &Host<'_>) -> Result<Toolchains, ToolchainError> {
    let mut exposed: Vec<PathBuf> = Vec::new();
    let mut env: Vec<(String, String)> = Vec::new();
    let path_dirs: Vec<PathBuf> = needs
        .path_env
        .map(|p| std::env::split_paths(p).collect())
        .unwrap_or_default();
    let program = program_path(needs.program, &path_dirs, needs.cwd);
    let program_name = Path::new(needs.program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    for dir in path_dirs.iter().filter_map(|d| d.canonicalize().ok()) {
        exposed.extend(installation(&dir));
        if let Some(root) = pyenv_root_of_shims(&dir) {
            exposed.extend(pyenv(&root, needs));
        }
    }
    if let Some(program) = &program {
        // As named, the link itself kept (a venv's `bin/python` is a link out of the venv),
        // and where it leads: both ends are needed.
        for path in [named(program), program.canonicalize().ok()]
            .into_iter()
            .flatten()
        {
            exposed.extend(installation(&path));
            if let Some(root) = path.parent().and_then(pyenv_root_of_shims) {
                exposed.extend(pyenv(&root, needs));
            }
        }
    }
    // rustup's proxies read rustup's home, which stays masked: the toolchain they would run is
    // resolved here and put first on the guest's `PATH`.
    let proxy = program
        .iter()
        .filter(|p| is_rustup_proxy(p))
        .chain(
            path_dirs
                .iter()
                .map(|d| d.join("cargo"))
                .filter(|p| is_rustup_proxy(p))
                .collect::<Vec<_>>()
                .iter(),
        )
        .next()
        .cloned();
    let runs_rust = is_rust_tool(program_name) || program.as_deref().is_some_and(in_rust_toolchain);
    // Directories the guest's `PATH` gets first, before the job's own.
    let mut path_first: Vec<PathBuf> = Vec::new();
    if let Some(exec_dir) = program
        .as_deref()
        .and_then(|p| pyenv_root_of_shims(&p.parent()?.canonicalize().ok()?))
        .and_then(|root| pyenv_exec_dir(&root, program_name, needs))
    {
        path_first.push(exec_dir);
    }
    let mut rust = false;
    // Asking rustup costs a process per tree: only a Rust command, or a tree that builds Rust
    // at its root (a Python package with a Rust extension), gets the toolchain.
    if let Some(proxy) = proxy.filter(|_| runs_rust || builds_rust(needs.cwd)) {
        match rustup_toolchain(&proxy, needs, host) {
            Ok(toolchain) => {
                rust = true;
                exposed.push(toolchain.dir.clone());
                if let Some(settings) = toolchain.settings {
                    exposed.push(settings);
                }
                path_first.push(toolchain.dir.join("bin"));
                env.push(("RUSTUP_TOOLCHAIN".into(), toolchain.name));
                env.push((
                    "RUSTUP_HOME".into(),
                    toolchain.rustup_home.to_string_lossy().into_owned(),
                ));
                env.push(("RUSTUP_AUTO_INSTALL".into(), "0".into()));
            }
            Err(e) if runs_rust => return Err(e),
            // A command that runs no Rust (a Python suite on a machine with rustup) starts
            // without it.
            Err(_) => {}
        }
    }
    if !path_first.is_empty() {
        let path = std::env::join_paths(path_first.iter().chain(path_dirs.iter()))
            .or_else(|_| std::env::join_paths(path_first.iter()))
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        env.push(("PATH".into(), path));
    }
    if rust || runs_rust {
        // Dependencies were fetched on the host: the guest reads cargo's caches, never the
        // rest of its home (credentials, configuration), and never the network. A job with
        // a dependency archive reads that instead, and nothing of the host's.
        let host_caches = match needs.vendored {
            Some(_) => None,
            None => host.dir("CARGO_HOME", ".cargo"),
        };
        if let Some(cargo_home) = host_caches {
            for cache in ["registry", "git"] {
                exposed.push(cargo_home.join(cache));
            }
            env.push((
                "CARGO_HOME".into(),
                cargo_home.to_string_lossy().into_owned(),
            ));
        }
        env.push(("CARGO_NET_OFFLINE".into(), "true".into()));
    }
    if program_name == "go" {
        if let Some(goroot) =
            (host.var)("GOROOT").and_then(|g| PathBuf::from(g).canonicalize().ok())
        {
            exposed.push(goroot);
        }
        // A job with a dependency archive reads its modules from it (its `GOMODCACHE`, set
        // with the archive), and nothing of the host's module cache.
        let host_cache = match needs.vendored {
            Some(_) => None,
            None => go_module_cache(needs, host),
        };
        if let Some(cache) = host_cache {
            exposed.push(cache.clone());
            env.push(("GOMODCACHE".into(), cache.to_string_lossy().into_owned()));
            env.push(("GOFLAGS".into(), "-mod=mod".into()));
            env.push(("GOPROXY".into(), "off".into()));
        }
    }
    if let Some(home) = &host.home {
        exposed.extend(user_sites(home));
    }
    if let Some(listed) = (host.var)("ASSAY_SANDBOX_EXPOSE") {
        exposed.extend(std::env::split_paths(&listed).filter_map(|p| p.canonicalize().ok()));
    }
    let exposed = only_under_masks(exposed, needs.masked, host.home.as_deref());
    let masks = credentials(host, &exposed, needs.masked);
    Ok(Toolchains {
        exposed,
        masks,
        env,
    })
}

/// The program's path: relative to the command's directory (the job's tree, never this
/// process's) when it names a directory, else the first match on `PATH`.
fn program_path(program: &str, path_dirs: &[PathBuf], cwd: &Path) -> Option<PathBuf> {
    if program.contains('/') {
        Some(cwd.join(program))
    } else {
        path_dirs
            .iter()
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    }
}

/// `path` with its directory canonicalised and its own name kept, so a link stays a link.
fn named(path: &Path) -> Option<PathBuf> {
    let dir = path.parent()?.canonicalize().ok()?;
    Some(dir.join(path.file_name()?))
}

/// The installation that holds `path` (canonical), by its layout; a `bin` directory (or the
/// one holding `path`) alone when no layout names one; the file itself when it is in neither.
fn installation(path: &Path) -> Vec<PathBuf> {
    if let Some((root, base)) = layout_of(path) {
        let mut found = vec![root];
        found.extend(base.iter().flat_map(|b| installation(b)));
        return found;
    }
    if path.is_dir() {
        return match path.file_name().is_some_and(|n| n == "bin") {
            true => vec![path.to_path_buf()],
            false => Vec::new(),
        };
    }
    match path.parent() {
        Some(dir) if dir.file_name().is_some_and(|n| n == "bin") => vec![dir.to_path_buf()],
        _ => vec![path.to_path_buf()],
    }
}

/// The innermost installation of a known layout that holds `path`, and for a venv the
/// canonical directory of its base interpreter.
fn layout_of(path: &Path) -> Option<(PathBuf, Option<PathBuf>)> {
    for at in path.ancestors() {
        let parent = at.parent()?;
        let named = |dir: &Path, name: &str| dir.file_name().is_some_and(|n| n == name);
        if at.join("pyvenv.cfg").is_file() {
            let base = venv_home(&at.join("pyvenv.cfg"));
            return Some((at.to_path_buf(), base));
        }
        // rustup: `RUSTUP_HOME/toolchains/NAME`.
        let rustup = named(parent, "toolchains")
            && parent
                .parent()
                .is_some_and(|h| h.join("settings.toml").is_file() || named(h, ".rustup"));
        // nvm: `NVM_DIR/versions/node/VERSION`; pyenv: `PYENV_ROOT/versions/VERSION`.
        let nvm = named(parent, "node") && parent.parent().is_some_and(|v| named(v, "versions"));
        let pyenv = named(parent, "versions") && parent.parent().is_some_and(is_pyenv_root);
        let goroot = at.join("bin/go").is_file() && at.join("src/runtime").is_dir();
        if rustup || nvm || pyenv || goroot {
            return Some((at.to_path_buf(), None));
        }
    }
    None
}

/// A venv's base interpreter directory: `home = DIR` in its `pyvenv.cfg`, canonical.
fn venv_home(cfg: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(cfg).ok()?;
    text.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "home")
            .then(|| PathBuf::from(value.trim()).canonicalize().ok())
            .flatten()
    })
}

fn is_pyenv_root(dir: &Path) -> bool {
    dir.join("libexec/pyenv").is_file()
}

/// The pyenv root whose shims `dir` is: `ROOT/shims`, or a plugin's (`pyenv-virtualenv`'s
/// `ROOT/plugins/NAME/shims`).
fn pyenv_root_of_shims(dir: &Path) -> Option<PathBuf> {
    if dir.file_name()? != "shims" {
        return None;
    }
    dir.ancestors()
        .skip(1)
        .take(3)
        .find(|root| is_pyenv_root(root))
        .map(Path::to_path_buf)
}

/// What pyenv's shims need: its mechanism and the versions the job would select.
fn pyenv(root: &Path, needs: &Needs<'_>) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = PYENV_MECHANISM
        .iter()
        .map(|part| root.join(part))
        .filter(|p| p.exists())
        .collect();
    found.extend(
        pyenv_selection(root, needs)
            .into_iter()
            .filter_map(|selected| match selected {
                PyenvSelected::Version(dir) => Some(dir),
                PyenvSelected::System => None,
            }),
    );
    found
}

/// One entry of pyenv's selection: an installed version's directory, or the system's Python.
#[derive(Debug, PartialEq, Eq)]
enum PyenvSelected {
    Version(PathBuf),
    System,
}

/// The versions the job would select, in order, as pyenv selects them (`PYENV_VERSION`, else
/// `.python-version` from the working directory up, else the root's `version`), each confined
/// to the root's `versions`: a name with `..` or a link out of it selects nothing.
fn pyenv_selection(root: &Path, needs: &Needs<'_>) -> Vec<PyenvSelected> {
    let selected = needs
        .env
        .iter()
        .find(|(k, _)| k == "PYENV_VERSION")
        .map(|(_, v)| v.clone())
        .or_else(|| {
            needs
                .cwd
                .ancestors()
                .find_map(|dir| std::fs::read_to_string(dir.join(".python-version")).ok())
        })
        .or_else(|| std::fs::read_to_string(root.join("version")).ok())
        .unwrap_or_default();
    let Ok(versions) = root.join("versions").canonicalize() else {
        return Vec::new();
    };
    selected
        .split(|c: char| c == ':' || c.is_whitespace())
        .filter(|n| !n.is_empty())
        .filter_map(|name| {
            if name == "system" {
                return Some(PyenvSelected::System);
            }
            let version = versions.join(name).canonicalize().ok()?;
            let top = version.strip_prefix(&versions).ok()?.components().next()?;
            Some(PyenvSelected::Version(versions.join(top)))
        })
        .collect()
}

/// Where a pyenv shim named `program` leads, as `pyenv exec` finds it: the `bin` of the first
/// selected version that has the program. `pyenv exec` puts that directory first on `PATH`
/// and runs the program from it; doing so here spares every job the shim's shell scripts
/// (tens of milliseconds a process). `None` when the system's Python comes first or no
/// selected version has the program: the shim then runs as it would anyway.
fn pyenv_exec_dir(root: &Path, program: &str, needs: &Needs<'_>) -> Option<PathBuf> {
    for selected in pyenv_selection(root, needs) {
        match selected {
            PyenvSelected::System => return None,
            PyenvSelected::Version(dir) => {
                let bin = dir.join("bin");
                if bin.join(program).is_file() {
                    return Some(bin);
                }
            }
        }
    }
    None
}

/// Python's user sites (`pip install --user`): `~/.local/lib/pythonX.Y`, not the rest of
/// `~/.local` (keyrings and other programs' state live there).
fn user_sites(home: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(home.join(".local/lib")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("python"))
        .filter_map(|e| e.path().canonicalize().ok())
        .collect()
}

/// Go's module cache: the job's `GOMODCACHE`, else the host's, else `GOPATH`'s (its first
/// entry, `~/go` by default) `pkg/mod`.
fn go_module_cache(needs: &Needs<'_>, host: &Host<'_>) -> Option<PathBuf> {
    let job = |name: &str| {
        needs
            .env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| OsString::from(v))
    };
    let cache = job("GOMODCACHE")
        .or_else(|| (host.var)("GOMODCACHE"))
        .map(PathBuf::from)
        .or_else(|| {
            let gopath = job("GOPATH").or_else(|| (host.var)("GOPATH"));
            let first = gopath.and_then(|g| std::env::split_paths(&g).next());
            first
                .or_else(|| host.home.as_ref().map(|h| h.join("go")))
                .map(|g| g.join("pkg/mod"))
        })?;
    cache.canonicalize().ok()
}

fn is_rust_tool(name: &str) -> bool {
    matches!(name, "cargo" | "rustc" | "rustdoc" | "rustup") || name.starts_with("cargo-")
}

fn in_rust_toolchain(program: &Path) -> bool {
    program
        .canonicalize()
        .ok()
        .and_then(|p| layout_of(&p))
        .is_some_and(|(root, _)| {
            root.parent()
                .is_some_and(|p| p.file_name().is_some_and(|n| n == "toolchains"))
        })
}

/// Whether the tree at `cwd` builds Rust: a cargo manifest or a toolchain file at its root.
fn builds_rust(cwd: &Path) -> bool {
    ["Cargo.toml", "rust-toolchain", "rust-toolchain.toml"]
        .iter()
        .any(|name| cwd.join(name).is_file())
}

/// Asks rustup, on the host, which toolchain its proxy would run in the job's tree (see
/// [`rust_toolchain::resolve`]), with the job's `RUSTUP_TOOLCHAIN` when it sets one.
fn rustup_toolchain(
    proxy: &Path,
    needs: &Needs<'_>,
    host: &Host<'_>,
) -> Result<RustToolchain, ToolchainError> {
    let rustup_home = host
        .dir("RUSTUP_HOME", ".rustup")
        .ok_or(ToolchainError::NoRustupHome)?;
    let chosen = needs
        .env
        .iter()
        .find(|(k, _)| k == "RUSTUP_TOOLCHAIN")
        .map(|(_, v)| v.as_str());
    Ok(rust_toolchain::resolve(
        proxy,
        needs.cwd,
        &rustup_home,
        chosen,
    )?)
}

/// The exposures worth binding: each existing and strictly under a mask (the rest is visible
/// anyway), never the home or a mask itself nor a directory holding one, and none inside
/// another (its bind would add nothing).
fn only_under_masks(found: Vec<PathBuf>, masked: &[PathBuf], home: Option<&Path>) -> Vec<PathBuf> {
    let mut kept: Vec<PathBuf> = found
        .into_iter()
        .filter(|p| p.exists())
        .filter(|p| masked.iter().any(|m| p.starts_with(m) && p != m))
        .filter(|p| !masked.iter().any(|m| m.starts_with(p)))
        .filter(|p| home.is_none_or(|h| !h.starts_with(p)))
        .collect();
    kept.sort();
    kept.dedup();
    let outermost: Vec<PathBuf> = kept
        .iter()
        .filter(|p| !kept.iter().any(|other| other != *p && p.starts_with(other)))
        .cloned()
        .collect();
    outermost
}

/// The credential paths to mask: every one that exists and that a guest would otherwise see
/// (inside an exposure, or under no mask at all).
fn credentials(host: &Host<'_>, exposed: &[PathBuf], masked: &[PathBuf]) -> Vec<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(home) = &host.home {
        candidates.extend(HOME_CREDENTIALS.iter().map(|c| home.join(c)));
    }
    if let Some(cargo_home) = host.dir("CARGO_HOME", ".cargo") {
        candidates.extend(["credentials", "credentials.toml"].map(|c| cargo_home.join(c)));
    }
    if let Some(docker) = (host.var)("DOCKER_CONFIG") {
        candidates.push(PathBuf::from(docker).join("config.json"));
    }
    let mut masks: Vec<PathBuf> = Vec::new();
    for candidate in candidates {
        if std::fs::symlink_metadata(&candidate).is_err() {
            continue;
        }
        // A link is masked where it leads, which is what a guest would read.
        let Ok(real) = candidate.canonicalize() else {
            continue;
        };
        let visible = exposed.iter().any(|e| real.starts_with(e))
            || !masked.iter().any(|m| real.starts_with(m));
        if visible {
            masks.push(real);
        }
    }
    masks.sort();
    masks.dedup();
    masks
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    /// A home of the test's own, canonical, with nothing in it yet.
    fn fake_home() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap().join("home");
        std::fs::create_dir_all(&home).unwrap();
        (dir, home)
    }

    fn file(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn no_vars(_: &str) -> Option<OsString> {
        None
    }

    fn resolve_in(
        home: &Path,
        program: &str,
        path_env: &str,
        env: &[(String, String)],
        cwd: &Path,
    ) -> Result<Toolchains, ToolchainError> {
        resolve_vendored(home, program, path_env, env, cwd, None)
    }

    /// [`resolve_in`] for a job whose dependencies are the archive unpacked at `vendored`.
    fn resolve_vendored(
        home: &Path,
        program: &str,
        path_env: &str,
        env: &[(String, String)],
        cwd: &Path,
        vendored: Option<&Path>,
    ) -> Result<Toolchains, ToolchainError> {
        let masked = vec![home.to_path_buf()];
        resolve(
            &Needs {
                program,
                path_env: Some(path_env),
                env,
                cwd,
                masked: &masked,
                vendored,
            },
            &Host {
                home: Some(home.to_path_buf()),
                var: &no_vars,
            },
        )
    }

    /// A rustup installation in `home`: `rustup` is a script that answers `which cargo` with
    /// `answer` (relative to rustup's home), and `cargo` in `~/.cargo/bin` links to it.
    fn rustup_in(home: &Path, answer: &str) {
        let toolchain = home.join(".rustup/toolchains/stable-x86_64-unknown-linux-gnu");
        file(&toolchain.join("bin/cargo"), "#!/bin/sh\n");
        file(&toolchain.join("lib/librustc_driver.so"), "");
        file(&home.join(".rustup/settings.toml"), "version = \"12\"\n");
        file(
            &home.join(".cargo/bin/rustup"),
            &format!("#!/bin/sh\necho \"$RUSTUP_HOME/{answer}\"\n"),
        );
        symlink("rustup", home.join(".cargo/bin/cargo")).unwrap();
        file(
            &home.join(".cargo/credentials.toml"),
            "token = \"secret\"\n",
        );
        std::fs::create_dir_all(home.join(".cargo/registry/cache")).unwrap();
    }

    /// rustup is a process per tree: a Python command in a tree that builds no Rust does not
    /// ask it, one in a tree with a cargo manifest at its root does.
    #[test]
    fn only_a_tree_that_builds_rust_asks_rustup_for_a_command_that_runs_none() {
        let (_dir, home) = fake_home();
        rustup_in(
            &home,
            "toolchains/stable-x86_64-unknown-linux-gnu/bin/cargo",
        );
        // A rustup that records each question it answers.
        file(
            &home.join(".cargo/bin/rustup"),
            "#!/bin/sh\necho asked >> \"$RUSTUP_HOME/asked\"\necho \"$RUSTUP_HOME/toolchains/stable-x86_64-unknown-linux-gnu/bin/cargo\"\n",
        );
        let path_env = format!("{}:/usr/bin", home.join(".cargo/bin").display());
        let python_only = tempfile::tempdir().unwrap();
        let found = resolve_in(&home, "python3", &path_env, &[], python_only.path()).unwrap();
        assert!(!home.join(".rustup/asked").exists(), "rustup was asked");
        assert!(!found.env.iter().any(|(k, _)| k == "RUSTUP_TOOLCHAIN"));
        let with_extension = tempfile::tempdir().unwrap();
        file(
            &with_extension.path().join("Cargo.toml"),
            "[package]\nname = \"speedups\"\n",
        );
        let found = resolve_in(&home, "python3", &path_env, &[], with_extension.path()).unwrap();
        assert!(home.join(".rustup/asked").exists(), "rustup was not asked");
        assert!(found.env.iter().any(|(k, _)| k == "RUSTUP_TOOLCHAIN"));
    }

    #[test]
    fn a_job_with_a_dependency_archive_gets_its_toolchain_and_none_of_the_hosts_cargo_caches() {
        let (_dir, home) = fake_home();
        rustup_in(
            &home,
            "toolchains/stable-x86_64-unknown-linux-gnu/bin/cargo",
        );
        let tree = tempfile::tempdir().unwrap();
        let path_env = format!("{}:/usr/bin", home.join(".cargo/bin").display());
        let vendored = home.join("trees/dependencies/archive");
        let found =
            resolve_vendored(&home, "cargo", &path_env, &[], tree.path(), Some(&vendored)).unwrap();
        assert_eq!(
            found.exposed,
            vec![
                home.join(".cargo/bin"),
                home.join(".rustup/settings.toml"),
                home.join(".rustup/toolchains/stable-x86_64-unknown-linux-gnu"),
            ],
        );
        // The job's own `CARGO_HOME` stands: the toolchain's variables name none.
        assert!(
            !found.env.iter().any(|(k, _)| k == "CARGO_HOME"),
            "{:?}",
            found.env
        );
        assert!(
            found
                .env
                .iter()
                .any(|(k, v)| k == "CARGO_NET_OFFLINE" && v == "true")
        );
    }

    #[test]
    fn a_rustup_proxy_brings_back_its_active_toolchain_and_caches_never_cargo_or_rustup_homes() {
        let (_dir, home) = fake_home();
        rustup_in(
            &home,
            "toolchains/stable-x86_64-unknown-linux-gnu/bin/cargo",
        );
        let tree = tempfile::tempdir().unwrap();
        let path_env = format!("{}:/usr/bin", home.join(".cargo/bin").display());
        let found = resolve_in(&home, "cargo", &path_env, &[], tree.path()).unwrap();
        let toolchain = home.join(".rustup/toolchains/stable-x86_64-unknown-linux-gnu");
        assert_eq!(
            found.exposed,
            vec![
                home.join(".cargo/bin"),
                home.join(".cargo/registry"),
                home.join(".rustup/settings.toml"),
                toolchain.clone(),
            ],
        );
        let env = |key: &str| {
            found
                .env
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(
            env("PATH"),
            Some(format!("{}/bin:{path_env}", toolchain.display()))
        );
        assert_eq!(
            env("RUSTUP_TOOLCHAIN").as_deref(),
            Some("stable-x86_64-unknown-linux-gnu")
        );
        assert_eq!(env("CARGO_NET_OFFLINE").as_deref(), Some("true"));
        // Under the home's mask and in no exposure: hidden already, nothing to mask again.
        assert!(found.masks.is_empty(), "{:?}", found.masks);
    }

    #[test]
    fn credentials_inside_an_exposed_directory_are_masked() {
        let (_dir, home) = fake_home();
        rustup_in(
            &home,
            "toolchains/stable-x86_64-unknown-linux-gnu/bin/cargo",
        );
        file(&home.join(".ssh/id_ed25519"), "key");
        file(&home.join(".netrc"), "machine x password y");
        let tree = tempfile::tempdir().unwrap();
        let masked = vec![home.clone()];
        let listed = OsString::from(format!(
            "{}:{}",
            home.join(".cargo").display(),
            home.display()
        ));
        let var = move |name: &str| (name == "ASSAY_SANDBOX_EXPOSE").then(|| listed.clone());
        let found = resolve(
            &Needs {
                program: "sh",
                path_env: Some("/usr/bin:/bin"),
                env: &[],
                cwd: tree.path(),
                masked: &masked,
                vendored: None,
            },
            &Host {
                home: Some(home.clone()),
                var: &var,
            },
        )
        .unwrap();
        // The home itself is never exposed, even when listed; `~/.cargo` is, as listed, with
        // its token masked.
        assert_eq!(found.exposed, vec![home.join(".cargo")]);
        assert_eq!(found.masks, vec![home.join(".cargo/credentials.toml")]);
    }

    #[test]
    fn credentials_under_no_mask_are_masked() {
        let (_dir, home) = fake_home();
        let elsewhere = tempfile::tempdir().unwrap();
        let cargo_home = elsewhere.path().canonicalize().unwrap();
        file(&cargo_home.join("credentials"), "token");
        let tree = tempfile::tempdir().unwrap();
        let masked = vec![home.clone()];
        let named = cargo_home.clone().into_os_string();
        let var = move |name: &str| (name == "CARGO_HOME").then(|| named.clone());
        let found = resolve(
            &Needs {
                program: "cargo",
                path_env: Some("/usr/bin"),
                env: &[],
                cwd: tree.path(),
                masked: &masked,
                vendored: None,
            },
            &Host {
                home: Some(home.clone()),
                var: &var,
            },
        )
        .unwrap();
        assert_eq!(found.masks, vec![cargo_home.join("credentials")]);
    }

    #[test]
    fn a_dotdot_program_path_brings_back_its_bin_never_dot_local() {
        let (_dir, home) = fake_home();
        file(&home.join(".local/bin/python3"), "#!/bin/sh\n");
        file(&home.join(".local/share/keyrings/login.keyring"), "secret");
        let program = format!("{}/.local/bin/../../.local/bin/python3", home.display());
        let tree = tempfile::tempdir().unwrap();
        let found = resolve_in(&home, &program, "/usr/bin", &[], tree.path()).unwrap();
        assert_eq!(found.exposed, vec![home.join(".local/bin")]);
    }

    #[test]
    fn a_program_outside_any_layout_comes_back_alone() {
        let (_dir, home) = fake_home();
        file(&home.join("tools/py"), "#!/bin/sh\n");
        file(&home.join("tools/token"), "secret");
        let tree = tempfile::tempdir().unwrap();
        let program = format!("{}/tools/py", home.display());
        let found = resolve_in(&home, &program, "/usr/bin", &[], tree.path()).unwrap();
        assert_eq!(found.exposed, vec![home.join("tools/py")]);
    }

    /// A pyenv root with two versions, the first the global one.
    fn pyenv_in(home: &Path) -> PathBuf {
        let root = home.join(".pyenv");
        file(&root.join("libexec/pyenv"), "#!/bin/sh\n");
        file(&root.join("bin/pyenv"), "#!/bin/sh\n");
        file(&root.join("shims/python3"), "#!/bin/sh\n");
        file(&root.join("versions/3.11.7/bin/python3.11"), "");
        file(&root.join("versions/3.12.1/bin/python3.12"), "");
        file(&root.join("version"), "3.11.7\n");
        file(&root.join("cache/secret"), "");
        root
    }

    #[test]
    fn pyenv_shims_bring_back_the_mechanism_and_the_selected_version_only() {
        let (_dir, home) = fake_home();
        let root = pyenv_in(&home);
        let tree = tempfile::tempdir().unwrap();
        let path_env = format!("{}:/usr/bin", root.join("shims").display());
        let found = resolve_in(&home, "python3", &path_env, &[], tree.path()).unwrap();
        assert_eq!(
            found.exposed,
            vec![
                root.join("bin"),
                root.join("libexec"),
                root.join("shims"),
                root.join("version"),
                root.join("versions/3.11.7"),
            ]
        );
        // The tree's `.python-version` selects as pyenv would; a name leading out of
        // `versions` selects nothing.
        std::fs::write(tree.path().join(".python-version"), "3.12.1\n../../..\n").unwrap();
        let found = resolve_in(&home, "python3", &path_env, &[], tree.path()).unwrap();
        assert!(
            found.exposed.contains(&root.join("versions/3.12.1")),
            "{found:?}"
        );
        assert!(
            !found.exposed.contains(&root.join("versions/3.11.7")),
            "{found:?}"
        );
        assert!(
            !found.exposed.iter().any(|p| p == &root || p == &home),
            "{found:?}"
        );
        let env = [("PYENV_VERSION".to_owned(), "3.11.7".to_owned())];
        let found = resolve_in(&home, "python3", &path_env, &env, tree.path()).unwrap();
        assert!(
            found.exposed.contains(&root.join("versions/3.11.7")),
            "{found:?}"
        );
    }

    /// A shim is run as `pyenv exec` would run it: the selected version's `bin` first on
    /// `PATH`, when that version has the program; the system's Python first, or no selected
    /// version with the program, leaves the shim to run.
    #[test]
    fn a_pyenv_shim_runs_the_selected_versions_program_directly() {
        let (_dir, home) = fake_home();
        let root = pyenv_in(&home);
        file(&root.join("versions/3.12.1/bin/python3"), "");
        let tree = tempfile::tempdir().unwrap();
        let path_env = format!("{}:/usr/bin", root.join("shims").display());
        let guest_path = |env: &[(String, String)], tree: &Path| {
            resolve_in(&home, "python3", &path_env, env, tree)
                .unwrap()
                .env
                .into_iter()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v)
        };
        // The global version (3.11.7) has no `python3`: the shim runs.
        assert_eq!(guest_path(&[], tree.path()), None);
        std::fs::write(tree.path().join(".python-version"), "3.12.1\n").unwrap();
        assert_eq!(
            guest_path(&[], tree.path()),
            Some(format!(
                "{}:{path_env}",
                root.join("versions/3.12.1/bin").display()
            ))
        );
        // Versions are tried in order, and `system` before them keeps the shim.
        let env = [("PYENV_VERSION".to_owned(), "3.11.7:3.12.1".to_owned())];
        assert!(
            guest_path(&env, tree.path()).is_some_and(
                |p| p.starts_with(&*root.join("versions/3.12.1/bin").to_string_lossy())
            ),
        );
        let env = [("PYENV_VERSION".to_owned(), "system:3.12.1".to_owned())];
        assert_eq!(guest_path(&env, tree.path()), None);
        // A name leading out of `versions` selects nothing.
        let env = [("PYENV_VERSION".to_owned(), "../../../usr".to_owned())];
        assert_eq!(guest_path(&env, tree.path()), None);
    }

    #[test]
    fn a_pyenv_interpreter_named_directly_brings_back_its_version() {
        let (_dir, home) = fake_home();
        let root = pyenv_in(&home);
        let tree = tempfile::tempdir().unwrap();
        let program = root.join("versions/3.12.1/bin/python3.12");
        let found = resolve_in(
            &home,
            &program.display().to_string(),
            "/usr/bin",
            &[],
            tree.path(),
        )
        .unwrap();
        assert_eq!(found.exposed, vec![root.join("versions/3.12.1")]);
    }

    #[test]
    fn a_venv_brings_back_itself_and_its_base_interpreter() {
        let (_dir, home) = fake_home();
        let root = pyenv_in(&home);
        let venv = home.join("venvs/pytest9");
        file(
            &venv.join("pyvenv.cfg"),
            &format!("home = {}\n", root.join("versions/3.11.7/bin").display()),
        );
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        symlink(
            root.join("versions/3.11.7/bin/python3.11"),
            venv.join("bin/python"),
        )
        .unwrap();
        let tree = tempfile::tempdir().unwrap();
        let program = venv.join("bin/python").display().to_string();
        let found = resolve_in(&home, &program, "/usr/bin", &[], tree.path()).unwrap();
        assert_eq!(found.exposed, vec![root.join("versions/3.11.7"), venv]);
    }

    #[test]
    fn the_user_site_comes_back_without_the_rest_of_dot_local() {
        let (_dir, home) = fake_home();
        file(&home.join(".local/lib/python3.11/site-packages/m.py"), "");
        file(&home.join(".local/share/keyrings/login.keyring"), "secret");
        let tree = tempfile::tempdir().unwrap();
        let found = resolve_in(&home, "python3", "/usr/bin", &[], tree.path()).unwrap();
        assert_eq!(found.exposed, vec![home.join(".local/lib/python3.11")]);
    }

    #[test]
    fn an_nvm_node_brings_back_its_version_only() {
        let (_dir, home) = fake_home();
        file(&home.join(".nvm/versions/node/v20.11.0/bin/node"), "");
        file(&home.join(".nvm/versions/node/v18.0.0/bin/node"), "");
        file(&home.join(".nvm/alias/default"), "");
        let tree = tempfile::tempdir().unwrap();
        let path_env = format!(
            "{}:/usr/bin",
            home.join(".nvm/versions/node/v20.11.0/bin").display()
        );
        let found = resolve_in(&home, "node", &path_env, &[], tree.path()).unwrap();
        assert_eq!(
            found.exposed,
            vec![home.join(".nvm/versions/node/v20.11.0")]
        );
    }

    #[test]
    fn go_brings_back_its_goroot_and_a_read_only_module_cache_with_the_proxy_off() {
        let (_dir, home) = fake_home();
        let goroot = home.join("sdk/go1.22.0");
        file(&goroot.join("bin/go"), "");
        std::fs::create_dir_all(goroot.join("src/runtime")).unwrap();
        std::fs::create_dir_all(home.join("go/pkg/mod/cache/download")).unwrap();
        file(&home.join("go/bin/tool"), "");
        let tree = tempfile::tempdir().unwrap();
        let path_env = format!("{}:/usr/bin", goroot.join("bin").display());
        let found = resolve_in(&home, "go", &path_env, &[], tree.path()).unwrap();
        assert_eq!(found.exposed, vec![home.join("go/pkg/mod"), goroot]);
        for (key, value) in [
            ("GOMODCACHE", home.join("go/pkg/mod").display().to_string()),
            ("GOFLAGS", "-mod=mod".into()),
            ("GOPROXY", "off".into()),
        ] {
            assert!(found.env.contains(&(key.into(), value)), "{found:?}");
        }
    }

    #[test]
    fn a_go_job_with_a_dependency_archive_gets_none_of_the_hosts_module_cache() {
        let (_dir, home) = fake_home();
        let goroot = home.join("sdk/go1.22.0");
        file(&goroot.join("bin/go"), "");
        std::fs::create_dir_all(goroot.join("src/runtime")).unwrap();
        std::fs::create_dir_all(home.join("go/pkg/mod/cache/download")).unwrap();
        let tree = tempfile::tempdir().unwrap();
        let path_env = format!("{}:/usr/bin", goroot.join("bin").display());
        let vendored = home.join("trees/dependencies/archive");
        std::fs::create_dir_all(&vendored).unwrap();
        // The job's `GOMODCACHE` names the archive; the host's cache is not brought back.
        let env = [("GOMODCACHE".to_owned(), vendored.display().to_string())];
        let found =
            resolve_vendored(&home, "go", &path_env, &env, tree.path(), Some(&vendored)).unwrap();
        assert_eq!(found.exposed, vec![goroot]);
        assert!(
            !found.env.iter().any(|(k, _)| k == "GOMODCACHE"),
            "{:?}",
            found.env
        );
    }

    #[test]
    fn a_toolchain_file_naming_a_path_is_refused_before_rustup_runs() {
        let (_dir, home) = fake_home();
        // rustup would answer with the tree's own "toolchain": it must never be asked.
        rustup_in(&home, "../../tree/bin/cargo");
        let tree = tempfile::tempdir().unwrap();
        std::fs::write(
            tree.path().join("rust-toolchain.toml"),
            "[toolchain]\npath = \"./evil\"\n",
        )
        .unwrap();
        let path_env = home.join(".cargo/bin").display().to_string();
        let refused = resolve_in(&home, "cargo", &path_env, &[], tree.path());
        assert!(
            matches!(
                refused,
                Err(ToolchainError::Rustup(RustupError::PathToolchain { .. }))
            ),
            "{refused:?}"
        );
        // A Python job on the same machine starts anyway, without Rust.
        let python = resolve_in(&home, "python3", &path_env, &[], tree.path()).unwrap();
        assert!(!python.env.iter().any(|(k, _)| k == "RUSTUP_TOOLCHAIN"));
    }

    #[test]
    fn a_toolchain_rustup_finds_outside_its_toolchains_is_refused() {
        let (_dir, home) = fake_home();
        file(&home.join("elsewhere/bin/cargo"), "");
        rustup_in(&home, "../elsewhere/bin/cargo");
        let tree = tempfile::tempdir().unwrap();
        let path_env = home.join(".cargo/bin").display().to_string();
        let refused = resolve_in(&home, "cargo", &path_env, &[], tree.path());
        assert!(
            matches!(
                refused,
                Err(ToolchainError::Rustup(
                    RustupError::OutsideRustupHome { .. }
                ))
            ),
            "{refused:?}"
        );
    }

    #[test]
    fn the_machines_rustup_resolves_to_an_installed_toolchain() {
        // The real layout, where there is one (every Rust developer's machine and CI).
        let host = Host::current();
        let Some(home) = host.home.clone() else {
            return;
        };
        let bin = home.join(".cargo/bin");
        if !is_rustup_proxy(&bin.join("cargo")) {
            return;
        }
        let tree = tempfile::tempdir().unwrap();
        let masked = vec![home.clone()];
        let path_env = format!("{}:/usr/bin", bin.display());
        let found = resolve(
            &Needs {
                program: "cargo",
                path_env: Some(&path_env),
                env: &[],
                cwd: tree.path(),
                masked: &masked,
                vendored: None,
            },
            &host,
        )
        .unwrap();
        let toolchains = host
            .dir("RUSTUP_HOME", ".rustup")
            .unwrap()
            .join("toolchains");
        let toolchain = found
            .exposed
            .iter()
            .find(|p| p.parent() == Some(toolchains.as_path()))
            .unwrap_or_else(|| panic!("no toolchain in {found:?}"));
        assert!(toolchain.join("bin/cargo").is_file());
        assert!(
            !found
                .exposed
                .iter()
                .any(|p| p == &home.join(".cargo") || p == &home.join(".rustup"))
        );
    }
}
