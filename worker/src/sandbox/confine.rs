//! Confinement of the process sandbox's guest. The code under test is untrusted (often an
//! agent's patch), and in the process sandbox it runs on the machine that holds Assay's store,
//! result cache, state, tree cache and keys; anything it could write there could become a
//! later verdict. So every guest command, and every warm server that hosts guest code, runs
//! under bubblewrap (Debian's `bubblewrap`, the tool Flatpak confines apps with) in user,
//! mount, PID, IPC, UTS and network namespaces of its own:
//! - the root is read-only, every capability dropped, `/proc` is the guest's own PID
//!   namespace's (so no other process's environment or memory is readable);
//! - `/tmp`, `/var/tmp` and `/dev/shm` are empty private tmpfs mounts; `$HOME`, `/run` and
//!   every path registered with [`hide_from_guests`] (stores, state, tree caches, keys,
//!   credentials) are empty and read-only; the toolchains the command needs from under those
//!   come back read-only, each exactly as a known layout names it (see
//!   [`super::toolchain_layouts`]), and credential files stay masked even inside them;
//! - only the job's own tree and scratch directories are writable (bound back in last);
//! - the network is the namespace's own loopback unless the run asks for the host's.
//!
//! bubblewrap is found once per process (`ASSAY_BWRAP` names another binary) and tried as
//! often as a job's start is (a mount may vanish under it); where it is missing or cannot
//! create namespaces here, the guest runs unconfined, the evidence says so
//! and the result cache neither stores nor serves for the run.

use super::toolchain_layouts::{self, Host, Needs, ToolchainError};
use assay_common::sandbox::Confinement;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// Directories a guest finds empty and may write (its own, discarded with it): scratch space
/// other programs share per boot.
const PRIVATE: [&str; 3] = ["/tmp", "/var/tmp", "/dev/shm"];

/// Where sysfs lists the network interfaces of the namespace it was mounted in: the host's.
const HOST_INTERFACES: &str = "/sys/class/net";

/// The confining tool, found and tried once.
#[derive(Clone, Debug)]
pub struct Confiner {
    program: PathBuf,
    version: String,
}

/// Why the process sandbox has no confining tool on this host, worded for a user. Found once
/// and kept for the process's life, so callers borrow it rather than clone it.
#[derive(Debug, thiserror::Error)]
pub enum NoConfiner {
    /// No bubblewrap on `PATH`.
    #[error("bubblewrap (bwrap) is not installed (hint: apt-get install bubblewrap)")]
    NotInstalled,
    /// bubblewrap is there but could not be started.
    #[error("{} cannot be run: {source}", program.display())]
    NotRunnable {
        /// The bubblewrap binary.
        program: PathBuf,
        /// Why it could not be run or tried.
        source: std::io::Error,
    },
    /// The probe's command line could not be made.
    #[error("{} cannot be tried: {source}", program.display())]
    NotTried {
        /// The bubblewrap binary.
        program: PathBuf,
        /// Why it could not be run or tried.
        source: ToolchainError,
    },
    /// The probe ran and the host refused its namespaces; `stderr` is the tool's complaint.
    #[error(
        "{version} cannot create namespaces on this host: {stderr} (hint: enable unprivileged user namespaces, sysctl kernel.unprivileged_userns_clone=1)"
    )]
    NoNamespaces {
        /// bubblewrap's version line.
        version: String,
        /// What it wrote to stderr.
        stderr: String,
    },
}

static FOUND: OnceLock<Result<Confiner, NoConfiner>> = OnceLock::new();
static HIDDEN: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Masks `path` (a directory or a file) from every guest this process confines from now on.
/// Stores, state directories, tree caches and key or credential files register here when
/// they are opened, wherever they live; `$HOME` is masked as a whole anyway.
pub fn hide_from_guests(path: &Path) {
    let path = absolute(path);
    if let Ok(mut hidden) = HIDDEN.lock()
        && !hidden.contains(&path)
    {
        hidden.push(path);
    }
}

/// The confining tool, or why there is none. The reason is worded for a user.
pub fn confiner() -> Result<&'static Confiner, &'static NoConfiner> {
    FOUND.get_or_init(find).as_ref()
}

/// What the evidence records about the process sandbox's confinement on this host.
pub fn evidence() -> Confinement {
    match confiner() {
        Ok(confiner) => Confinement {
            confined: true,
            detail: confiner.version.clone(),
        },
        Err(why) => Confinement {
            confined: false,
            detail: why.to_string(),
        },
    }
}

fn find() -> Result<Confiner, NoConfiner> {
    let program = match std::env::var_os("ASSAY_BWRAP") {
        Some(named) if !named.is_empty() => PathBuf::from(named),
        _ => which("bwrap").ok_or(NoConfiner::NotInstalled)?,
    };
    let version = Command::new(&program)
        .arg("--version")
        .current_dir("/")
        .env_clear()
        .envs(CONFINER_ENV)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| NoConfiner::NotRunnable {
            program: program.clone(),
            source,
        })?;
    let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
    let confiner = Confiner { program, version };
    // A host may forbid the namespaces (unprivileged user namespaces off, a seccomp profile):
    // try the options every job gets once, so a job never fails on them. Assay's own masks are
    // left out: the probe asks what the host allows, not what was registered so far.
    let probe = confiner
        .command_hiding(
            &Grant {
                writable: &[],
                cwd: Path::new("/"),
                network: false,
                program: "/bin/true",
                path_env: None,
                env: &[],
                vendored: None,
            },
            &["/bin/true".to_owned()],
            &[],
        )
        .map_err(|source| NoConfiner::NotTried {
            program: confiner.program.clone(),
            source,
        })?;
    // The probe meets the same vanishing mounts a job does: one failure must not leave the
    // whole process unconfined (and its cache unused), so it is tried as often as a job is.
    let mut attempt = 1;
    loop {
        let tried = Command::new(&probe[0])
            .args(&probe[1..])
            .current_dir("/")
            .env_clear()
            .envs(CONFINER_ENV)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|source| NoConfiner::NotRunnable {
                program: confiner.program.clone(),
                source,
            })?;
        if tried.status.success() {
            return Ok(confiner);
        }
        if attempt == SETUP_ATTEMPTS {
            return Err(NoConfiner::NoNamespaces {
                version: confiner.version.clone(),
                stderr: String::from_utf8_lossy(&tried.stderr).trim().to_owned(),
            });
        }
        std::thread::sleep(setup_pause(attempt));
        attempt += 1;
    }
}

/// The whole environment bubblewrap itself starts with. The job's variables are the guest's
/// alone (`--clearenv`, then `--setenv` for each): bubblewrap runs as the worker's user in the
/// worker's namespaces until it has built the guest's, so a variable chosen by a submitter
/// (`LD_PRELOAD` naming a library in the tree) must never reach it.
const CONFINER_ENV: [(&str, &str); 1] = [("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")];

/// How to start one sandboxed command: what to execute, with which environment, from where.
/// Confined, that is bubblewrap from `/` with [`CONFINER_ENV`], the guest's environment and
/// working directory travelling as its options; unconfined, the command itself.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The program and its arguments: bubblewrap and its options first when confined.
    pub argv: Vec<String>,
    /// The environment the started process gets, whole.
    pub env: Vec<(String, String)>,
    /// The directory it starts in.
    pub cwd: PathBuf,
    /// Whether bubblewrap wraps the command.
    pub confined: bool,
    /// Where the guest's own command starts in `argv` (after bubblewrap's options).
    guest_at: usize,
}

/// How many times a confined job is started, and the host's confinement probed, when
/// bubblewrap fails before its guest runs. It can: it copies the host's mounts and then
/// remounts each read-only, and a mount that vanishes in between (a container engine starting
/// and stopping containers on the same host) fails the whole setup (bubblewrap issue 650).
/// Each attempt is a fresh start of an untouched job.
pub(super) const SETUP_ATTEMPTS: u32 = 10;

/// The longest pause between two attempts.
const LONGEST_SETUP_PAUSE_MS: u64 = 1_000;

/// The pause before attempt `attempt + 1`: doubling from 10 ms up to a second (about 3.3 s
/// over all attempts), plus up to half again at random, so that jobs started together do not
/// meet the same burst of mount changes in step. Six attempts 10 to 50 ms apart all failed
/// once on a loaded 2-core host whose mounts changed without pause: a burst of slowness
/// outlasted them, so the budget is now counted in seconds.
pub(super) fn setup_pause(attempt: u32) -> std::time::Duration {
    let base = (10u64 << attempt.saturating_sub(1).min(10)).min(LONGEST_SETUP_PAUSE_MS);
    let jitter = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |now| u64::from(now.subsec_nanos()) % (base / 2 + 1));
    std::time::Duration::from_millis(base + jitter)
}

/// The trusted shell that announces a confined guest's start (see [`Launch::announcing_start`]).
/// Read-only inside the sandbox, as the whole host root is.
const ANNOUNCER: &str = "/bin/bash";

impl Launch {
    /// `command` as it is, with the guest's environment, in `cwd`: where this host cannot
    /// confine (the evidence then says so).
    pub fn unconfined(command: &[String], env: &[(String, String)], cwd: &Path) -> Self {
        Self {
            argv: command.to_vec(),
            env: env.to_vec(),
            cwd: cwd.to_path_buf(),
            confined: false,
            guest_at: 0,
        }
    }

    /// This launch with the guest preceded by a stub that writes one byte to descriptor `fd`
    /// (inherited from the spawner) and closes it, then execs the guest: a byte on `fd` says
    /// bubblewrap built the sandbox and reached the guest; none, that it failed before (see
    /// [`SETUP_ATTEMPTS`]). The guest never holds `fd`, so it cannot take the byte
    /// back. None when unconfined (nothing to fail before the guest) or without the shell.
    pub fn announcing_start(&self, fd: std::os::fd::RawFd) -> Option<Launch> {
        if !self.confined || !Path::new(ANNOUNCER).is_file() {
            return None;
        }
        let mut argv = self.argv[..self.guest_at].to_vec();
        argv.extend([
            ANNOUNCER.to_owned(),
            "-c".to_owned(),
            format!("printf 1 >&{fd} && exec {fd}>&- && exec \"$@\""),
            "assay-sandbox".to_owned(),
        ]);
        argv.extend(self.argv[self.guest_at..].iter().cloned());
        Some(Launch {
            argv,
            ..self.clone()
        })
    }

    /// A process builder for this launch (std's; tokio's converts from it), with a clean
    /// environment: nothing of this process's is inherited.
    pub fn command(&self) -> Option<Command> {
        let (program, args) = self.argv.split_first()?;
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(&self.cwd)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        Some(command)
    }
}

/// What one confined command may see and do beyond the read-only root.
pub struct Grant<'a> {
    /// Bound read-write, in this order, after every mask.
    pub writable: &'a [&'a Path],
    /// The guest's working directory inside the sandbox.
    pub cwd: &'a Path,
    /// The host's network instead of a loopback of its own.
    pub network: bool,
    /// The program as the command names it, and the `PATH` it is looked up on: the
    /// toolchains they lead to under a masked directory come back read-only (see
    /// [`toolchain_layouts`]).
    pub program: &'a str,
    /// The guest's `PATH`, when it sets one.
    pub path_env: Option<&'a str>,
    /// The guest's whole environment, set inside the sandbox only; it selects toolchains too
    /// (`PYENV_VERSION`, `GOMODCACHE`, …).
    pub env: &'a [(String, String)],
    /// A job's unpacked dependency archive: bound read-only after every mask (it lives in a
    /// masked cache), instead of the host's cargo caches.
    pub vendored: Option<&'a Path>,
}

impl Confiner {
    /// How to start `command` confined by `grant`: bubblewrap, from `/`, with a fixed
    /// environment of its own; or why the toolchain it needs cannot be given to it.
    pub fn launch(&self, grant: &Grant<'_>, command: &[String]) -> Result<Launch, ToolchainError> {
        let argv = self.command(grant, command)?;
        Ok(Launch {
            guest_at: argv.len().saturating_sub(command.len()),
            argv,
            env: CONFINER_ENV
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            cwd: PathBuf::from("/"),
            confined: true,
        })
    }

    /// The argv that runs `command` confined by `grant`, or why the toolchain it needs cannot
    /// be given to it.
    pub fn command(
        &self,
        grant: &Grant<'_>,
        command: &[String],
    ) -> Result<Vec<String>, ToolchainError> {
        let hidden = HIDDEN.lock().map(|h| h.clone()).unwrap_or_default();
        self.command_hiding(grant, command, &hidden)
    }

    /// [`Confiner::command`] with `hidden` masked. A path under another hidden one is left to
    /// that one's mask: mounted first, it would only be buried by it.
    fn command_hiding(
        &self,
        grant: &Grant<'_>,
        command: &[String],
        hidden: &[PathBuf],
    ) -> Result<Vec<String>, ToolchainError> {
        self.command_as(grant, command, hidden, &Host::current())
    }

    /// [`Confiner::command_hiding`] for a host whose home and toolchains `host` says.
    fn command_as(
        &self,
        grant: &Grant<'_>,
        command: &[String],
        hidden: &[PathBuf],
        host: &Host<'_>,
    ) -> Result<Vec<String>, ToolchainError> {
        let mut hidden = hidden.to_vec();
        hidden.sort();
        hidden.dedup();
        let outermost: Vec<PathBuf> = hidden
            .iter()
            .filter(|p| {
                !hidden
                    .iter()
                    .any(|other| other != *p && p.starts_with(other))
            })
            .cloned()
            .collect();
        let mut argv: Vec<String> = vec![self.program.to_string_lossy().into_owned()];
        let mut arg = |parts: &[&str]| argv.extend(parts.iter().map(|p| (*p).to_owned()));
        arg(&["--unshare-all", "--die-with-parent", "--cap-drop", "ALL"]);
        if grant.network {
            arg(&["--share-net"]);
        }
        arg(&["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]);
        let home = host.home.clone();
        // Masked empty and, once everything is mounted, read-only: `/run` (sockets such as the
        // Docker engine's), `$HOME`, and what Assay registered.
        let mut sealed: Vec<PathBuf> = vec![PathBuf::from("/run")];
        sealed.extend(home.clone());
        let masked: Vec<PathBuf> = PRIVATE
            .iter()
            .map(PathBuf::from)
            .chain(sealed.clone())
            .collect();
        for dir in &masked {
            if dir.is_dir() {
                argv.extend(["--tmpfs".to_owned(), path_arg(dir)]);
            }
        }
        // The root's `/sys` is the host's: without the host's network, its interfaces (names,
        // addresses, statistics) are none of the guest's business either.
        if !grant.network && Path::new(HOST_INTERFACES).is_dir() {
            argv.extend(["--tmpfs".to_owned(), HOST_INTERFACES.to_owned()]);
        }
        let toolchains = toolchain_layouts::resolve(
            &Needs {
                program: grant.program,
                path_env: grant.path_env,
                env: grant.env,
                cwd: &absolute(grant.cwd),
                masked: &masked,
                vendored: grant.vendored,
            },
            host,
        )?;
        for exposed in &toolchains.exposed {
            argv.extend([
                "--ro-bind-try".to_owned(),
                path_arg(exposed),
                path_arg(exposed),
            ]);
        }
        // After the exposures, so a credential inside one is masked all the same.
        for secret in &toolchains.masks {
            if secret.is_dir() {
                argv.extend(["--tmpfs".to_owned(), path_arg(secret)]);
                sealed.push(secret.clone());
            } else {
                argv.extend([
                    "--ro-bind".to_owned(),
                    "/dev/null".to_owned(),
                    path_arg(secret),
                ]);
            }
        }
        for path in outermost {
            match std::fs::metadata(&path) {
                Ok(meta) if meta.is_dir() => {
                    argv.extend(["--tmpfs".to_owned(), path_arg(&path)]);
                    sealed.push(path);
                }
                Ok(_) => argv.extend([
                    "--ro-bind".to_owned(),
                    "/dev/null".to_owned(),
                    path_arg(&path),
                ]),
                Err(_) => {}
            }
        }
        // After the masks of Assay's paths, the one archive of the worker's cache this job's
        // tree pins comes back, read-only.
        if let Some(vendored) = grant.vendored {
            let vendored = absolute(vendored);
            argv.extend([
                "--ro-bind".to_owned(),
                path_arg(&vendored),
                path_arg(&vendored),
            ]);
        }
        for dir in grant.writable {
            let dir = absolute(dir);
            argv.extend(["--bind".to_owned(), path_arg(&dir), path_arg(&dir)]);
        }
        // Last, since a read-only directory can take no new mount point: a write there fails
        // loudly instead of vanishing with the sandbox.
        for dir in sealed.iter().filter(|d| d.is_dir()) {
            argv.extend(["--remount-ro".to_owned(), path_arg(dir)]);
        }
        argv.push("--clearenv".to_owned());
        for (name, value) in grant.env {
            argv.extend(["--setenv".to_owned(), name.clone(), value.clone()]);
        }
        // After the job's own: bubblewrap applies them in order, and the toolchain the host
        // resolved (its `bin` first on `PATH`) is what the guest must run.
        for (key, value) in &toolchains.env {
            argv.extend(["--setenv".to_owned(), key.clone(), value.clone()]);
        }
        argv.extend([
            "--chdir".to_owned(),
            path_arg(&absolute(grant.cwd)),
            "--".to_owned(),
        ]);
        argv.extend(command.iter().cloned());
        Ok(argv)
    }
}

/// `path` made absolute with its links resolved where it exists, so a mask or a bind lands on
/// the directory a guest would otherwise reach.
fn absolute(path: &Path) -> PathBuf {
    path.canonicalize()
        .unwrap_or_else(|_| std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()))
}

fn path_arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sh` without the network, writing `writable` (the first its working directory).
    fn sh_in<'a>(writable: &'a [&'a Path]) -> Grant<'a> {
        Grant {
            writable,
            cwd: writable[0],
            network: false,
            program: "sh",
            path_env: None,
            env: &[],
            vendored: None,
        }
    }

    fn confined(grant: &Grant<'_>, script: &str) -> std::process::Output {
        let confiner = confiner().expect("bubblewrap is installed on test machines");
        let argv = confiner
            .command(grant, &["sh".into(), "-c".into(), script.into()])
            .unwrap();
        Command::new(&argv[0])
            .args(&argv[1..])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .output()
            .unwrap()
    }

    #[test]
    fn a_guest_writes_its_tree_and_nothing_it_was_not_granted() {
        let tree = tempfile::tempdir().unwrap();
        let secret_dir = tempfile::tempdir().unwrap();
        std::fs::write(secret_dir.path().join("cache.key"), "k").unwrap();
        std::fs::write("/tmp/assay-confine-neighbour", "n").unwrap();
        hide_from_guests(secret_dir.path());
        let script = format!(
            "echo fixed > patched; \
             cat {secret}/cache.key && echo READ-KEY; \
             touch /etc/assay-planted && echo WROTE-ETC; \
             cat /tmp/assay-confine-neighbour && echo READ-TMP; \
             echo done",
            secret = secret_dir.path().display(),
        );
        let out = confined(&sh_in(&[tree.path()]), &script);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("done"), "{out:?}");
        for forbidden in ["READ-KEY", "WROTE-ETC", "READ-TMP"] {
            assert!(!stdout.contains(forbidden), "{forbidden}: {out:?}");
        }
        assert_eq!(
            std::fs::read_to_string(tree.path().join("patched")).unwrap(),
            "fixed\n"
        );
        assert!(!Path::new("/etc/assay-planted").exists());
        let _ = std::fs::remove_file("/tmp/assay-confine-neighbour");
    }

    #[test]
    fn a_guest_without_the_network_lists_no_host_interface() {
        let tree = tempfile::tempdir().unwrap();
        let host: Vec<String> = std::fs::read_dir(HOST_INTERFACES)
            .map(|dir| {
                dir.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let out = confined(
            &sh_in(&[tree.path()]),
            &format!("ls -A {HOST_INTERFACES}; echo listed"),
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout, "listed\n", "host interfaces {host:?}: {out:?}");
    }

    #[test]
    fn a_hidden_path_inside_another_is_masked_by_the_outer_one() {
        let state = tempfile::tempdir().unwrap();
        let store = state.path().join("store");
        std::fs::create_dir_all(&store).unwrap();
        std::fs::write(store.join("entry.json"), "{}").unwrap();
        let tree = tempfile::tempdir().unwrap();
        let confiner = confiner().expect("bubblewrap is installed on test machines");
        // The store is registered before the state directory that holds it, as `assay prove`
        // registers them.
        let argv = confiner
            .command_hiding(
                &sh_in(&[tree.path()]),
                &[
                    "sh".into(),
                    "-c".into(),
                    format!("cat {}/entry.json; echo ran", store.display()),
                ],
                &[store.clone(), state.path().to_path_buf()],
            )
            .unwrap();
        let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("ran"), "{out:?}");
        assert!(!stdout.contains("{}"), "{out:?}");
    }

    /// Runs `command` confined as a host whose home is `home` would, with `vars` its
    /// environment, and returns what it printed.
    fn confined_as(
        home: &Path,
        vars: &dyn Fn(&str) -> Option<std::ffi::OsString>,
        program: &str,
        path_env: &str,
        command: &[String],
    ) -> String {
        let tree = tempfile::tempdir().unwrap();
        let confiner = confiner().expect("bubblewrap is installed on test machines");
        let env = [("PATH".to_owned(), path_env.to_owned())];
        let argv = confiner
            .command_as(
                &Grant {
                    writable: &[tree.path()],
                    cwd: tree.path(),
                    network: false,
                    program,
                    path_env: Some(path_env),
                    env: &env,
                    vendored: None,
                },
                command,
                &[],
                &Host {
                    home: Some(home.to_path_buf()),
                    var: vars,
                },
            )
            .unwrap();
        let out = Command::new(&argv[0])
            .args(&argv[1..])
            .env_clear()
            .env("PATH", path_env)
            .output()
            .unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    fn script(path: &Path, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn fake_home() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap().join("home");
        std::fs::create_dir_all(&home).unwrap();
        (dir, home)
    }

    #[test]
    fn a_guest_cannot_print_the_registry_token_when_cargo_is_a_rustup_proxy() {
        let (_dir, home) = fake_home();
        let toolchain = home.join(".rustup/toolchains/stable-x86_64-unknown-linux-gnu");
        let token = home.join(".cargo/credentials.toml");
        script(&token, "token = \"SECRET-TOKEN\"\n");
        script(&home.join(".rustup/settings.toml"), "version = \"12\"\n");
        // The toolchain's cargo is the test that tries to read the token.
        script(
            &toolchain.join("bin/cargo"),
            &format!("#!/bin/sh\ncat {} ; echo ran\n", token.display()),
        );
        // rustup answers `which cargo` as the real one does, and runs the toolchain's cargo as
        // its proxy.
        script(
            &home.join(".cargo/bin/rustup"),
            &format!(
                "#!/bin/sh\ncase \"$0\" in *rustup) echo {cargo} ;; *) exec {cargo} \"$@\" ;; esac\n",
                cargo = toolchain.join("bin/cargo").display()
            ),
        );
        std::os::unix::fs::symlink("rustup", home.join(".cargo/bin/cargo")).unwrap();
        let path_env = format!(
            "{}:{}:/usr/bin:/bin",
            home.join(".cargo/bin").display(),
            toolchain.join("bin").display()
        );
        let printed = confined_as(
            &home,
            &|_| None,
            "cargo",
            &path_env,
            &["cargo".into(), "test".into()],
        );
        assert!(printed.contains("ran"), "{printed}");
        assert!(!printed.contains("SECRET-TOKEN"), "{printed}");
    }

    #[test]
    fn a_credential_inside_a_directory_listed_for_exposure_stays_masked() {
        let (_dir, home) = fake_home();
        let token = home.join(".cargo/credentials.toml");
        script(&token, "token = \"SECRET-TOKEN\"\n");
        script(&home.join(".cargo/bin/tool"), "#!/bin/sh\n");
        let ssh_key = home.join(".cargo/.ssh/id_ed25519");
        script(&ssh_key, "SECRET-KEY");
        let listed = home.join(".cargo").into_os_string();
        let vars = move |name: &str| (name == "ASSAY_SANDBOX_EXPOSE").then(|| listed.clone());
        let printed = confined_as(
            &home,
            &vars,
            "sh",
            "/usr/bin:/bin",
            &[
                "sh".into(),
                "-c".into(),
                format!(
                    "ls {}/bin && cat {} ; echo ran",
                    home.join(".cargo").display(),
                    token.display()
                ),
            ],
        );
        assert!(printed.contains("tool"), "the exposure holds: {printed}");
        assert!(printed.contains("ran"), "{printed}");
        assert!(!printed.contains("SECRET-TOKEN"), "{printed}");
    }

    #[test]
    fn a_dotdot_program_path_does_not_bring_back_dot_local() {
        let (_dir, home) = fake_home();
        let keyring = home.join(".local/share/keyrings/login.keyring");
        script(&keyring, "SECRET-KEYRING");
        script(
            &home.join(".local/bin/python3"),
            &format!("#!/bin/sh\ncat {} ; echo ran\n", keyring.display()),
        );
        let program = format!("{}/.local/bin/../../.local/bin/python3", home.display());
        let printed = confined_as(
            &home,
            &|_| None,
            &program,
            "/usr/bin:/bin",
            std::slice::from_ref(&program),
        );
        assert!(printed.contains("ran"), "{printed}");
        assert!(!printed.contains("SECRET-KEYRING"), "{printed}");
    }

    #[test]
    fn the_machines_rustup_proxy_runs_its_toolchain_confined() {
        let host = Host::current();
        let Some(home) = host.home.clone() else {
            return;
        };
        let proxies = home.join(".cargo/bin");
        if !proxies.join("rustup").is_file() {
            return;
        }
        let path_env = format!("{}:/usr/bin:/bin", proxies.display());
        let vars = |name: &str| std::env::var_os(name).filter(|_| name != "RUSTUP_TOOLCHAIN");
        // Named on `PATH` (the toolchain's own cargo first) and named as the proxy itself.
        for program in [
            "cargo".to_owned(),
            proxies.join("cargo").display().to_string(),
        ] {
            let printed = confined_as(
                &home,
                &vars,
                &program,
                &path_env,
                &[program.clone(), "--version".into()],
            );
            assert!(printed.starts_with("cargo 1."), "{program}: {printed}");
        }
    }
}
