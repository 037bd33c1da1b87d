//! Real projects in the confined sandbox, as their users have them: the machine's rustup
//! installation with its proxies first on `PATH` (no exposure, no `PATH` surgery), a crate with
//! a registry dependency, a crate that ships no lockfile, and a Go module whose dependency is in
//! a module cache. Dependencies are resolved and fetched on the host before any job; the jobs
//! build offline from the caches they read. A job that cannot run says why on the terminal.

use crate::support;

use support::{Repo, Run, run};

/// A crate whose `distance` is off by one on the base and right on the candidate, using
/// `dependencies` (Cargo.toml lines); with a committed `Cargo.lock` when `lockfile`.
fn crate_repo(dependencies: &str, lockfile: bool) -> Repo {
    let repo = Repo::new();
    repo.write(
        "Cargo.toml",
        &format!(
            "[package]\nname = \"pager\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n{dependencies}\n"
        ),
    )
    .write(".gitignore", "target\n")
    .write(
        "src/lib.rs",
        "pub fn distance(a: &str, b: &str) -> usize {\n    strsim::levenshtein(a, b) + 1\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn test_distance() {\n        assert_eq!(super::distance(\"kitten\", \"sitting\"), 3);\n    }\n}\n",
    );
    if lockfile {
        // The test's setup fetches on the host as a user would have; the proof fetches too.
        let status = std::process::Command::new("cargo")
            .args(["generate-lockfile", "--quiet"])
            .current_dir(repo.path())
            .status()
            .expect("cargo runs");
        assert!(status.success());
    }
    repo.commit("pager: distance");
    repo.write(
        "src/lib.rs",
        "pub fn distance(a: &str, b: &str) -> usize {\n    strsim::levenshtein(a, b)\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn test_distance() {\n        assert_eq!(super::distance(\"kitten\", \"sitting\"), 3);\n    }\n}\n",
    );
    repo.commit("pager: no off-by-one");
    repo
}

/// `assay prove` of HEAD~1..HEAD with the machine's own `PATH` (rustup's proxies first where
/// rustup is installed), a store and state of the run's own, and `env` for the CLI.
fn prove(repo: &Repo, criterion: &str, env: &[(&str, &std::path::Path)]) -> Run {
    prove_with(repo, criterion, env, &[])
}

/// [`prove`] with `extra` flags.
fn prove_with(
    repo: &Repo,
    criterion: &str,
    env: &[(&str, &std::path::Path)],
    extra: &[&str],
) -> Run {
    let out_dir = tempfile::tempdir().expect("temp dir");
    let mut args = support::one_uncached_run_against_the_parent(criterion);
    args.extend(["--progress", "plain"]);
    args.extend(extra);
    let (mut command, json) = support::prove_command(repo, &args, out_dir.path());
    // The worker's own toolchain choice (cargo sets it for this test) must not be what decides.
    command.env_remove("RUSTUP_TOOLCHAIN");
    for (key, value) in env {
        command.env(key, value);
    }
    run(command, Some(json))
}

fn assert_proven(run: &Run) {
    assert_eq!(
        run.criterion("C1")["verdict"],
        "proven",
        "{}\n{:#}",
        run.stderr,
        run.evidence.as_ref().expect("evidence")
    );
}

#[test]
fn a_crate_with_a_registry_dependency_is_proven_through_rustups_proxies() {
    let repo = crate_repo("strsim = \"=0.11.1\"", true);
    let run = prove(&repo, "test: tests::test_distance", &[]);
    assert_proven(&run);
    // The repository's own lockfile is the one the jobs used.
    let evidence = run.evidence.as_ref().expect("evidence");
    assert!(
        evidence["candidate"].get("generated_lockfile").is_none(),
        "{evidence:#}"
    );
}

#[test]
fn a_crate_without_a_lockfile_gets_one_pinned_on_the_host_and_named_in_the_evidence() {
    let repo = crate_repo("strsim = \"0.11\"", false);
    let run = prove(&repo, "test: tests::test_distance", &[]);
    assert_proven(&run);
    let evidence = run.evidence.as_ref().expect("evidence");
    for side in ["base", "candidate"] {
        let generated = evidence[side]["generated_lockfile"]
            .as_str()
            .unwrap_or_else(|| panic!("{side}: {evidence:#}"));
        assert_eq!(generated.len(), 64, "a sha256: {generated}");
        // The jobs ran on a tree of their own, the commit's tree plus the lockfile.
        let commit_tree = repo.git(&[
            "rev-parse",
            &format!(
                "{}^{{tree}}",
                if side == "base" { "HEAD~1" } else { "HEAD" }
            ),
        ]);
        assert_ne!(evidence[side]["tree"], commit_tree.trim(), "{evidence:#}");
    }
}

#[test]
fn a_go_module_is_proven_offline_from_the_module_cache() {
    let dir = tempfile::tempdir().expect("temp dir");
    let proxy = dir.path().join("proxy");
    let cache = dir.path().join("modcache");
    support::go_module_proxy(&proxy);
    let repo = Repo::new();
    repo.write(
        "go.mod",
        "module example.com/app\n\ngo 1.19\n\nrequire example.com/greet v1.0.0\n",
    )
    .write(
        "app.go",
        "package app\n\nimport \"example.com/greet\"\n\nfunc Greeting() string { return greet.Hello(\"World\") }\n",
    )
    .write(
        "app_test.go",
        "package app\n\nimport \"testing\"\n\nfunc TestGreeting(t *testing.T) {\n\tif Greeting() != \"hello, world\" {\n\t\tt.Fatal(Greeting())\n\t}\n}\n",
    );
    // The host's module cache, filled as `go mod download` fills it (go.sum with it).
    support::download_greet_module(&repo, &proxy, &cache);
    repo.commit("app: greeting");
    let fixed = "package app\n\nimport \"example.com/greet\"\n\nfunc Greeting() string { return greet.Hello(\"world\") }\n";
    repo.write("app.go", fixed);
    repo.commit("app: lower case");
    let run = prove(&repo, "test: TestGreeting", &[("GOMODCACHE", &cache)]);
    assert_proven(&run);
}

#[test]
fn a_command_the_toolchain_cannot_run_says_why_in_the_infrastructure_lane() {
    let repo = crate_repo("strsim = \"=0.11.1\"", true);
    let run = prove_with(
        &repo,
        "test: tests::test_distance",
        &[],
        &["--test-command", "cargo no-such-subcommand"],
    );
    // The progress line, the summary and the evidence quote cargo's own words.
    let progress = run
        .stderr
        .lines()
        .find(|l| l.starts_with("[prove] 1/2"))
        .unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(
        progress.contains("INFRA the toolchain could not run the command"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("error: no such command: `no-such-subcommand`"),
        "{}",
        run.stderr
    );
    assert_eq!(run.code, 3, "infrastructure: {}", run.stderr);
    let evidence = run.evidence.as_ref().expect("evidence");
    for job in evidence["jobs"].as_array().expect("jobs") {
        assert_eq!(job["status"], "infrastructure", "{job}");
        assert!(
            job["message"]
                .as_str()
                .is_some_and(|m| m.contains("no such command")),
            "{job}"
        );
    }
}

#[test]
fn a_failed_command_that_wrote_no_report_quotes_its_stderr() {
    let repo = Repo::new();
    repo.write("m.py", "def f():\n    return 1\n").write(
        "test_m.py",
        "from m import f\n\n\ndef test_f():\n    assert f() == 2\n",
    );
    repo.commit("m: f");
    repo.write("m.py", "def f():\n    return 2\n");
    repo.commit("m: f is 2");
    let run = prove_with(
        &repo,
        "test: test_f",
        &[],
        &[
            "--test-command",
            "sh -c 'echo the fixture server is down >&2; exit 1' sh",
        ],
    );
    let evidence = run.evidence.as_ref().expect("evidence");
    assert_eq!(run.criterion("C1")["verdict"], "unverified", "{evidence:#}");
    assert!(
        run.stderr.contains("exit 1, the command wrote no report; its stderr ends:\n        the fixture server is down"),
        "{}",
        run.stderr
    );
    assert!(
        run.criterion("C1")["reason"]
            .as_str()
            .is_some_and(|r| r.contains("the fixture server is down")),
        "{evidence:#}"
    );
    assert!(
        evidence["jobs"][0]["report"]
            .as_str()
            .is_some_and(|r| r.contains("the fixture server is down")),
        "{evidence:#}"
    );
}

#[test]
fn a_crate_with_a_git_dependency_is_proven_from_the_hosts_git_cache() {
    let greet = Repo::new();
    greet
        .write(
            "Cargo.toml",
            "[package]\nname = \"greet\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        )
        .write(
            "src/lib.rs",
            "pub fn hello() -> &'static str {\n    \"hello\"\n}\n",
        );
    greet.commit("greet: hello");
    let repo = Repo::new();
    repo.write(
        "Cargo.toml",
        &format!(
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\ngreet = {{ git = \"file://{}\" }}\n",
            greet.path().display()
        ),
    )
    .write(".gitignore", "target\n")
    .write(
        "src/lib.rs",
        "pub fn greeting() -> String {\n    format!(\"{}!\", greet::hello())\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn test_greeting() {\n        assert_eq!(super::greeting(), \"hello\");\n    }\n}\n",
    );
    repo.commit("app: greeting");
    repo.write(
        "src/lib.rs",
        "pub fn greeting() -> String {\n    greet::hello().to_owned()\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn test_greeting() {\n        assert_eq!(super::greeting(), \"hello\");\n    }\n}\n",
    );
    repo.commit("app: no exclamation");
    let run = prove(&repo, "test: tests::test_greeting", &[]);
    assert_proven(&run);
}

#[test]
fn a_toolchain_file_naming_a_path_in_the_tree_is_refused_in_the_infrastructure_lane() {
    let repo = crate_repo("strsim = \"=0.11.1\"", true);
    repo.write("rust-toolchain.toml", "[toolchain]\npath = \"./evil\"\n");
    repo.commit("pager: a toolchain of its own");
    let run = prove(&repo, "guard: tests::test_distance", &[]);
    assert_eq!(run.code, 3, "infrastructure: {}", run.stderr);
    assert!(
        run.stderr.contains(
            "refusing the toolchain file rust-toolchain.toml: it names a toolchain by path"
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn a_real_release_pair_whose_dependency_moves_is_proven_with_each_side_pinned() {
    let (_crates, repo) = support::lru_release_pair();
    let run = prove(&repo, "guard: tests::test_with_hasher", &[]);
    assert_proven(&run);
    let evidence = run.evidence.as_ref().expect("evidence");
    let lockfile = |side: &str| {
        evidence[side]["generated_lockfile"]
            .as_str()
            .unwrap_or_else(|| panic!("{side}: {evidence:#}"))
            .to_owned()
    };
    // Each side pinned its own hashbrown.
    assert_ne!(lockfile("base"), lockfile("candidate"), "{evidence:#}");
}
