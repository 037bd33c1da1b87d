//! What a process-sandbox job's program is, for the result cache's key: a different
//! interpreter is a different run. The program is read, never run. A test command is the
//! repository's to choose (`test-command = "./tools/py -m pytest"`), so running it here, even
//! for `--version`, would run the change's own program on the host, outside every sandbox,
//! with the host's network and the cache's key in reach. So the identity is the sha256 of the
//! file the name resolves to, of the interpreter its `#!` line names, for a pyenv shim of the
//! interpreter pyenv would choose, and for a rustup proxy of the toolchain's own program.

use sha2::{Digest, Sha256};
use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};

/// How much of a file is read for its `#!` line.
const SHEBANG_BYTES: usize = 256;

/// The identity of `program` as a job would start it, with `path` as its `PATH`: the program's
/// resolved path with digests of what it runs. A program inside the job's tree (`./tools/py`,
/// any relative path with a `/`) is the tree's, which the key digests already; it is named,
/// not resolved against this process's working directory.
pub fn identify(program: &str, path: &OsStr) -> String {
    let pyenv_version = std::env::var("PYENV_VERSION").ok();
    let rustup_home = std::env::var_os("RUSTUP_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".rustup")));
    identify_with(
        program,
        path,
        pyenv_version.as_deref(),
        rustup_home.as_deref(),
    )
}

/// [`identify`] with pyenv's `PYENV_VERSION` and rustup's home as given.
fn identify_with(
    program: &str,
    path: &OsStr,
    pyenv_version: Option<&str>,
    rustup_home: Option<&Path>,
) -> String {
    if program.contains('/') && !program.starts_with('/') {
        return format!("{program} (in the tree)");
    }
    let resolved = if program.starts_with('/') {
        Some(PathBuf::from(program))
    } else {
        on_path(program, path)
    };
    let Some(real) = resolved.and_then(|p| p.canonicalize().ok()) else {
        return format!("{program} (not found)");
    };
    let mut parts = vec![describe(&real)];
    if let Some(interpreter) = shebang(&real).and_then(|line| interpreter_of(&line, path)) {
        parts.push(describe(&interpreter));
    }
    if let Some(chosen) = pyenv_choice(&real, pyenv_version) {
        parts.push(describe(&chosen));
    }
    if let Some(chosen) = rustup_choice(&real, program, rustup_home) {
        parts.push(describe(&chosen));
    }
    parts.join(" ")
}

/// `path sha256:HEX`, or why the file could not be read.
fn describe(file: &Path) -> String {
    match digest(file) {
        Ok(hex) => format!("{} sha256:{hex}", file.display()),
        Err(e) => format!("{} (unreadable: {e})", file.display()),
    }
}

fn digest(file: &Path) -> std::io::Result<String> {
    let mut reader = std::fs::File::open(file)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut reader, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

fn on_path(program: &str, path: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// The `#!` line of `file`, without the `#!`, when it has one.
fn shebang(file: &Path) -> Option<String> {
    let mut head = Vec::with_capacity(SHEBANG_BYTES);
    std::fs::File::open(file)
        .ok()?
        .take(SHEBANG_BYTES as u64)
        .read_to_end(&mut head)
        .ok()?;
    let rest = head.strip_prefix(b"#!")?;
    let line = rest.split(|b| *b == b'\n').next()?;
    Some(String::from_utf8_lossy(line).trim().to_owned())
}

/// The interpreter a `#!` line starts: its first word, or with `/usr/bin/env NAME` (and
/// `env -S NAME …`), NAME resolved on `path`.
fn interpreter_of(line: &str, path: &OsStr) -> Option<PathBuf> {
    let mut words = line.split_whitespace();
    let first = words.next()?;
    let interpreter = if Path::new(first).file_name() == Some(OsStr::new("env")) {
        let name = words.find(|w| !w.starts_with('-'))?;
        on_path(name, path)?
    } else {
        PathBuf::from(first)
    };
    interpreter.canonicalize().ok()
}

/// For a pyenv shim (`ROOT/shims/NAME`), the interpreter pyenv would start:
/// `ROOT/versions/VERSION/bin/NAME` for `PYENV_VERSION` or the global `ROOT/version`. A
/// repository's `.python-version` is in its tree, which the key digests already.
fn pyenv_choice(real: &Path, pyenv_version: Option<&str>) -> Option<PathBuf> {
    let shims = real.parent()?;
    if shims.file_name() != Some(OsStr::new("shims")) {
        return None;
    }
    let root = shims.parent()?;
    let version = match pyenv_version {
        Some(named) if !named.is_empty() => named.to_owned(),
        _ => std::fs::read_to_string(root.join("version"))
            .ok()?
            .lines()
            .next()?
            .trim()
            .to_owned(),
    };
    // A version name is one path component; anything else is not pyenv's to resolve here.
    if version.is_empty() || version.contains('/') || version == ".." || version == "." {
        return None;
    }
    root.join("versions")
        .join(version)
        .join("bin")
        .join(real.file_name()?)
        .canonicalize()
        .ok()
}

/// For a rustup proxy (a name that resolves to `rustup` itself), the program of rustup's
/// default toolchain (`default_toolchain` in `RUSTUP_HOME/settings.toml`): the proxy is the same
/// file whichever toolchain it runs, and a job runs the one the worker resolves (its default, or
/// the one a toolchain file in the tree names, which the key digests already). Read, not run.
fn rustup_choice(real: &Path, program: &str, rustup_home: Option<&Path>) -> Option<PathBuf> {
    if real.file_name() != Some(OsStr::new("rustup")) || program.contains('/') {
        return None;
    }
    let home = rustup_home?;
    let settings = std::fs::read_to_string(home.join("settings.toml")).ok()?;
    let table = settings.parse::<toml::Table>().ok()?;
    let name = table.get("default_toolchain")?.as_str()?;
    // A toolchain name is one path component, as in pyenv's case.
    if name.is_empty() || name.contains('/') || name == ".." || name == "." {
        return None;
    }
    home.join("toolchains")
        .join(name)
        .join("bin")
        .join(program)
        .canonicalize()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn executable(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_program_in_the_tree_is_named_and_never_run_or_resolved_here() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        // The program exists relative to this process's working directory too: it must still
        // not be read from there, let alone run.
        executable(
            &dir.path().join("tools/py"),
            &format!("#!/bin/sh\ntouch {}\n", marker.display()),
        );
        let identity = identify("./tools/py", OsStr::new(""));
        assert_eq!(identity, "./tools/py (in the tree)");
        assert!(!marker.exists());
    }

    #[test]
    fn a_script_on_path_is_identified_by_its_bytes_and_its_interpreter_without_running() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        let marker = dir.path().join("ran");
        let script = format!("#!/usr/bin/env sh\ntouch {}\n", marker.display());
        executable(&bin.join("pytest-runner"), &script);
        let path = std::env::join_paths([bin.as_path(), Path::new("/usr/bin"), Path::new("/bin")])
            .unwrap();
        let first = identify("pytest-runner", &path);
        assert!(!marker.exists(), "the program ran: {first}");
        assert!(first.contains("sha256:"), "{first}");
        let sh = Path::new("/bin/sh").canonicalize().unwrap();
        assert!(first.contains(&sh.display().to_string()), "{first}");
        // Another program under the same name is another identity.
        executable(&bin.join("pytest-runner"), &format!("{script}# edited\n"));
        assert_ne!(identify("pytest-runner", &path), first);
    }

    #[test]
    fn a_pyenv_shim_is_identified_with_the_version_pyenv_chooses() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        executable(
            &root.join("shims/python3"),
            "#!/bin/sh\nexec pyenv exec \"$@\"\n",
        );
        executable(&root.join("versions/3.11.7/bin/python3"), "cpython 3.11.7");
        executable(&root.join("versions/3.12.1/bin/python3"), "cpython 3.12.1");
        std::fs::write(root.join("version"), "3.11.7\n").unwrap();
        let path = root.join("shims").into_os_string();
        let on_311 = identify_with("python3", &path, None, None);
        assert!(on_311.contains("versions/3.11.7/bin/python3"), "{on_311}");
        std::fs::write(root.join("version"), "3.12.1\n").unwrap();
        let on_312 = identify_with("python3", &path, None, None);
        assert!(on_312.contains("versions/3.12.1/bin/python3"), "{on_312}");
        assert_ne!(on_311, on_312);
        // `PYENV_VERSION` wins over the global file, as in pyenv; a name that would climb out
        // of `versions` is not followed.
        let named = identify_with("python3", &path, Some("3.11.7"), None);
        assert!(named.contains("versions/3.11.7/bin/python3"), "{named}");
        let climbing = identify_with("python3", &path, Some("../../etc"), None);
        assert!(!climbing.contains("etc"), "{climbing}");
    }

    #[test]
    fn a_rustup_proxy_is_identified_with_its_default_toolchains_program() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join(".rustup");
        executable(&root.join(".cargo/bin/rustup"), "rustup");
        std::os::unix::fs::symlink("rustup", root.join(".cargo/bin/cargo")).unwrap();
        executable(&home.join("toolchains/stable-x/bin/cargo"), "cargo 1.95");
        executable(
            &home.join("toolchains/nightly-x/bin/cargo"),
            "cargo 1.97-nightly",
        );
        let settings = |name: &str| {
            std::fs::write(
                home.join("settings.toml"),
                format!("version = \"12\"\ndefault_toolchain = \"{name}\"\n"),
            )
            .unwrap()
        };
        let path = root.join(".cargo/bin").into_os_string();
        settings("stable-x");
        let stable = identify_with("cargo", &path, None, Some(&home));
        assert!(stable.contains("toolchains/stable-x/bin/cargo"), "{stable}");
        settings("nightly-x");
        let nightly = identify_with("cargo", &path, None, Some(&home));
        assert!(
            nightly.contains("toolchains/nightly-x/bin/cargo"),
            "{nightly}"
        );
        assert_ne!(stable, nightly);
        settings("../../etc");
        let climbing = identify_with("cargo", &path, None, Some(&home));
        assert!(!climbing.contains("etc"), "{climbing}");
    }

    #[test]
    fn a_missing_program_is_said_so() {
        assert_eq!(
            identify("no-such-interpreter", OsStr::new("/nonexistent")),
            "no-such-interpreter (not found)"
        );
    }
}
