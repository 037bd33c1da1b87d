//! A confined guest gets its toolchain back exactly, never the directory that holds it: with a
//! home of the test's own, a cargo that rustup's proxy resolves to cannot print the registry
//! token in `~/.cargo`, and a program named through `..` does not bring back `~/.local` and its
//! keyrings. Each secret would reach the terminal (a job that writes no report quotes its
//! stderr there), the evidence and the store's logs if the guest could read it.

use crate::support;

use std::path::{Path, PathBuf};
use support::{Repo, Run, run, write_script};

/// Everything a run left for people to read: its terminal output, its evidence and every file
/// of its store (the jobs' stdout and stderr logs among them).
fn everything_written(run: &Run, store: &Path) -> String {
    let mut all = format!("{}\n{}\n", run.stdout, run.stderr);
    if let Some(evidence) = &run.evidence {
        all.push_str(&evidence.to_string());
    }
    let mut dirs = vec![store.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                all.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }
    all
}

/// `assay prove` of HEAD~1..HEAD with `home` as `HOME` and `path` as `PATH`; its store under
/// `out`.
fn prove_as(repo: &Repo, home: &Path, path: &str, out: &Path, extra: &[&str]) -> Run {
    let mut args = vec![
        "--base",
        "HEAD~1",
        "--repeats",
        "1",
        "--no-mutation",
        "--no-cache",
        "--progress",
        "plain",
    ];
    args.extend(extra);
    let (mut command, json) = support::prove_command(repo, &args, out);
    command
        .env("HOME", home)
        .env("PATH", path)
        .env_remove("RUSTUP_HOME")
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("CARGO_HOME")
        .env_remove("XDG_CACHE_HOME");
    run(command, Some(json))
}

#[test]
fn a_cargo_rustups_proxy_resolves_to_cannot_print_the_registry_token() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().canonicalize().expect("canonical");
    let home = root.join("home");
    let token = home.join(".cargo/credentials.toml");
    write_script(&token, "[registry]\ntoken = \"SECRET-REGISTRY-TOKEN\"\n");
    write_script(&home.join(".rustup/settings.toml"), "version = \"12\"\n");
    let cargo = home.join(".rustup/toolchains/stable-x86_64-unknown-linux-gnu/bin/cargo");
    // The toolchain's cargo: fetching on the host succeeds with nothing to fetch; as a test
    // run, it is the hostile test, printing the token if it can read it.
    write_script(
        &cargo,
        &format!(
            "#!/bin/sh\ncase \"$1\" in fetch|generate-lockfile) exit 0 ;; esac\necho GUEST-RAN >&2\ncat {} >&2\nexit 1\n",
            token.display()
        ),
    );
    write_script(
        &home.join(".cargo/bin/rustup"),
        &format!(
            "#!/bin/sh\ncase \"$0\" in *rustup) echo {cargo} ;; *) exec {cargo} \"$@\" ;; esac\n",
            cargo = cargo.display()
        ),
    );
    std::os::unix::fs::symlink("rustup", home.join(".cargo/bin/cargo")).expect("proxy");
    let repo = Repo::new();
    repo.write(
        "Cargo.toml",
        "[package]\nname = \"pager\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .write("Cargo.lock", "version = 4\n")
    .write("src/lib.rs", "pub fn pages() -> u32 {\n    1\n}\n");
    repo.commit("pager");
    repo.write("src/lib.rs", "pub fn pages() -> u32 {\n    2\n}\n");
    repo.commit("pager: two");
    let out = root.join("out");
    let path = format!("{}:/usr/bin:/bin", home.join(".cargo/bin").display());
    let run = prove_as(
        &repo,
        &home,
        &path,
        &out,
        &["--criterion", "test: tests::pages"],
    );
    let written = everything_written(&run, &out.join("store"));
    assert!(
        written.contains("GUEST-RAN"),
        "the guest ran: {}",
        run.stderr
    );
    assert!(!written.contains("SECRET-REGISTRY-TOKEN"), "{}", run.stderr);
}

#[test]
fn a_program_named_through_dotdot_does_not_bring_back_dot_local() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root: PathBuf = dir.path().canonicalize().expect("canonical");
    let home = root.join("home");
    let keyring = home.join(".local/share/keyrings/login.keyring");
    write_script(&keyring, "SECRET-KEYRING-ENTRY");
    write_script(
        &home.join(".local/bin/python3"),
        &format!(
            "#!/bin/sh\necho GUEST-RAN >&2\ncat {} >&2\nexit 1\n",
            keyring.display()
        ),
    );
    let repo = Repo::new();
    repo.write("m.py", "def f():\n    return 1\n").write(
        "test_m.py",
        "from m import f\n\n\ndef test_f():\n    assert f() == 2\n",
    );
    repo.commit("m");
    repo.write("m.py", "def f():\n    return 2\n");
    repo.commit("m: two");
    let out = root.join("out");
    let program = format!("{}/.local/bin/../../.local/bin/python3", home.display());
    let command = format!("{program} -m pytest");
    let run = prove_as(
        &repo,
        &home,
        "/usr/bin:/bin",
        &out,
        &[
            "--runner",
            "pytest",
            "--test-command",
            &command,
            "--criterion",
            "test: test_f",
        ],
    );
    let written = everything_written(&run, &out.join("store"));
    assert!(
        written.contains("GUEST-RAN"),
        "the guest ran: {}",
        run.stderr
    );
    assert!(!written.contains("SECRET-KEYRING-ENTRY"), "{}", run.stderr);
}

/// The toolchain rustup's `cargo` proxy runs here by default (`RUSTUP_HOME/toolchains/NAME`).
fn machines_toolchain() -> PathBuf {
    let out = std::process::Command::new("rustup")
        .args(["which", "cargo"])
        .env_remove("RUSTUP_TOOLCHAIN")
        .output()
        .expect("rustup on PATH");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cargo = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let cargo = cargo.canonicalize().expect("canonical cargo");
    cargo
        .parent()
        .and_then(Path::parent)
        .expect("toolchain dir")
        .to_path_buf()
}

/// A rustup home of the test's own holding `names`, each the machine's toolchain's `bin` and
/// `lib` as hard links (no copy, no download): rustup treats each as an installed toolchain.
/// The first is the default.
fn rustup_home_with(root: &Path, names: &[&str]) -> PathBuf {
    let real = machines_toolchain();
    let home = root.join("rustup");
    for name in names {
        let dir = home.join("toolchains").join(name);
        std::fs::create_dir_all(&dir).expect("toolchain dir");
        let status = std::process::Command::new("cp")
            .arg("-al")
            .arg(real.join("bin"))
            .arg(real.join("lib"))
            .arg(&dir)
            .status()
            .expect("cp");
        assert!(status.success(), "hard-linking {}", real.display());
    }
    write_script(
        &home.join("settings.toml"),
        &format!("version = \"12\"\ndefault_toolchain = \"{}\"\n", names[0]),
    );
    home
}

/// `assay prove` of HEAD~1..HEAD with the cache on, `rustup_home` as rustup's home and rustup's
/// proxies first on `PATH`; one store for every call under `out`.
fn prove_cached(repo: &Repo, rustup_home: &Path, out: &Path) -> Run {
    let cargo_bin = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .expect("a cargo home")
        .join("bin");
    let args = [
        "--base",
        "HEAD~1",
        "--repeats",
        "1",
        "--no-mutation",
        "--progress",
        "plain",
        "--criterion",
        "test: tests::a_partial_last_page_is_counted",
    ];
    let (mut command, json) = support::prove_command(repo, &args, out);
    let _ = std::fs::remove_file(&json);
    command
        .env("RUSTUP_HOME", rustup_home)
        .env("PATH", format!("{}:/usr/bin:/bin", cargo_bin.display()))
        .env_remove("RUSTUP_TOOLCHAIN");
    run(command, Some(json))
}

#[test]
fn a_toolchain_updated_under_its_name_is_not_answered_from_the_cache() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().canonicalize().expect("canonical");
    let rustup_home = rustup_home_with(&root, &["host-default", "release-pinned"]);
    let repo = Repo::new();
    let tests = "\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn a_partial_last_page_is_counted() {\n        assert_eq!(super::pages(11, 5), 3);\n    }\n}\n";
    repo.write(
        "Cargo.toml",
        "[package]\nname = \"pager\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .write(
        "Cargo.lock",
        "version = 4\n\n[[package]]\nname = \"pager\"\nversion = \"0.1.0\"\n",
    )
    .write(
        "rust-toolchain.toml",
        "[toolchain]\nchannel = \"release-pinned\"\n",
    )
    .write(
        "src/lib.rs",
        &format!("pub fn pages(total: u32, size: u32) -> u32 {{\n    total / size\n}}{tests}"),
    );
    repo.commit("pager");
    repo.write(
        "src/lib.rs",
        &format!(
            "pub fn pages(total: u32, size: u32) -> u32 {{\n    total.div_ceil(size)\n}}{tests}"
        ),
    );
    repo.commit("pager: count the last partial page");
    let out = root.join("out");
    let first = prove_cached(&repo, &rustup_home, &out);
    assert_eq!(
        first.criterion("C1")["verdict"],
        "proven",
        "{}",
        first.stderr
    );
    let again = prove_cached(&repo, &rustup_home, &out);
    assert!(
        again
            .stderr
            .contains("[cache] 2 of 2 jobs answered from the cache"),
        "the same toolchain is answered from the cache: {}",
        again.stderr
    );
    // `release-pinned` is updated in place: the tree names it as before, its compiler is
    // another program (the file replaced, never written through its hard link).
    let pinned = rustup_home.join("toolchains/release-pinned/bin");
    std::fs::rename(pinned.join("rustc"), pinned.join("rustc-previous")).expect("rename");
    write_script(
        &pinned.join("rustc"),
        &format!(
            "#!/bin/sh\nexec {} \"$@\"\n",
            pinned.join("rustc-previous").display()
        ),
    );
    let updated = prove_cached(&repo, &rustup_home, &out);
    assert_eq!(
        updated.criterion("C1")["verdict"],
        "proven",
        "{}",
        updated.stderr
    );
    assert!(
        updated
            .stderr
            .contains("[cache] 0 of 2 jobs answered from the cache"),
        "an updated toolchain is run again: {}",
        updated.stderr
    );
    // A toolchain that is not installed is refused before any job, naming what rustup said.
    repo.write("rust-toolchain.toml", "[toolchain]\nchannel = \"1.31.0\"\n");
    repo.commit("pager: an old toolchain");
    let refused = prove_cached(&repo, &rustup_home, &out);
    assert_eq!(refused.code, 3, "infrastructure: {}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("rustup could not choose a Rust toolchain")
            && refused.stderr.contains("1.31.0"),
        "{}",
        refused.stderr
    );
}
