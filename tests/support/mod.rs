//! Helpers for the binary's end-to-end tests: the real `assay` binary with its test signing
//! key, and what the crate `assay-test-support` shares with every crate's tests.

#![allow(dead_code, unused_imports)] // each test file uses its own subset

pub use assay_test_support::{Repo, Run, docker, fixture, fixture_dir, pytest_envs, run, servers};

use std::path::{Path, PathBuf};
use std::process::Command;

/// The proof's mutation check ran every mutant (none `not_run`) and killed at least one.
pub fn assert_every_mutant_ran_and_one_was_killed(run: &Run) {
    let check = &run.evidence.as_ref().expect("evidence")["mutation_check"];
    let mutants = check["mutants"].as_array().expect("mutants");
    assert!(!mutants.is_empty(), "{check}");
    for mutant in mutants {
        assert_ne!(mutant["outcome"]["status"], "not_run", "{mutant}");
    }
    assert!(check["killed"].as_u64().expect("killed") >= 1, "{check}");
}

/// The changed hunks of a proof's `diff_coverage` record, in order: path, first line, status
/// and the lines it missed.
pub fn coverage_hunks(coverage: &serde_json::Value) -> Vec<(String, u64, String, Vec<u64>)> {
    coverage["hunks"]
        .as_array()
        .unwrap_or_else(|| panic!("no hunks: {coverage:#}"))
        .iter()
        .map(|h| {
            (
                h["path"].as_str().unwrap_or_default().to_owned(),
                h["start"].as_u64().unwrap_or_default(),
                h["status"].as_str().unwrap_or_default().to_owned(),
                h["missed_lines"]
                    .as_array()
                    .map(|m| m.iter().filter_map(|l| l.as_u64()).collect())
                    .unwrap_or_default(),
            )
        })
        .collect()
}

/// The kills of `path` starting on `flaky_lines` are flaky (their killing tests passed when
/// re-run at once) and those on `steady_lines` are not, at least two of each, and the summary
/// counts exactly the flaky ones.
pub fn assert_flaky_and_steady_kills(
    report: &serde_json::Value,
    path: &str,
    flaky_lines: std::ops::RangeInclusive<u64>,
    steady_lines: std::ops::RangeInclusive<u64>,
) {
    let mutants = report["files"][path]["mutants"]
        .as_array()
        .unwrap_or_else(|| panic!("no mutants of {path}: {report:#}"));
    let killed_in = |lines: &std::ops::RangeInclusive<u64>| -> Vec<&serde_json::Value> {
        mutants
            .iter()
            .filter(|m| {
                m["status"] == "Killed"
                    && m["location"]["start"]["line"]
                        .as_u64()
                        .is_some_and(|line| lines.contains(&line))
            })
            .collect()
    };
    let (flaky, steady) = (killed_in(&flaky_lines), killed_in(&steady_lines));
    assert!(!flaky.is_empty() && !steady.is_empty(), "{report:#}");
    for mutant in &flaky {
        assert_eq!(
            mutant["statusReason"], "flaky kill: the killing tests passed when re-run at once",
            "{mutant:#}"
        );
    }
    for mutant in &steady {
        assert!(mutant.get("statusReason").is_none(), "{mutant:#}");
    }
    assert_eq!(
        report["assay"]["summary"]["flaky_kills"].as_u64(),
        Some(flaky.len() as u64),
        "{report:#}"
    );
}

/// Writes an executable script at `path`, making its directory.
pub fn write_script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("dir");
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// `program` as `PATH` finds it.
pub fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
}

/// The binary, with its result cache's signing key in the build's test directory rather than
/// the user's state directory.
pub fn assay() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_assay"));
    command.env("ASSAY_CACHE_KEY_FILE", cache_key_file());
    command
}

/// Signs the cache entry at `path` again with the key the binary signs with, as whoever holds
/// that key could: what the signature cannot catch then, the entry's other checks must.
pub fn resign<E>(path: &Path)
where
    E: assay_engine::result_cache::Signed + serde::de::DeserializeOwned,
{
    resign_with::<E>(path, &cache_key_file());
}

/// [`resign`] with the key in `key_file`.
pub fn resign_with<E>(path: &Path, key_file: &Path)
where
    E: assay_engine::result_cache::Signed + serde::de::DeserializeOwned,
{
    let bytes = std::fs::read(path).expect("read cache entry");
    let mut entry: E = serde_json::from_slice(&bytes).expect("a cache entry");
    let key = assay_engine::result_cache::SigningKey::from_file(key_file).expect("a cache key");
    entry.set_signature(None);
    let signature = key.sign(&entry);
    entry.set_signature(Some(signature));
    std::fs::write(path, serde_json::to_vec(&entry).expect("encode")).expect("write entry");
}

/// Where the binary run by [`assay`] keeps its cache signing key, made here on first use: a
/// coordinator started by [`assay`] reads the key and never makes it, and in a fresh build
/// directory it may start before any other run has.
pub fn cache_key_file() -> PathBuf {
    static MADE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    MADE.get_or_init(|| {
        let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cache.key");
        assay_engine::result_cache::SigningKey::load_or_create(&path)
            .expect("the tests' cache key");
        path
    })
    .clone()
}

/// The flags of a proof of `criterion` against `HEAD~1`, run once, with no mutation check and
/// no cache.
pub fn one_uncached_run_against_the_parent(criterion: &str) -> Vec<&str> {
    vec![
        "--base",
        "HEAD~1",
        "--criterion",
        criterion,
        "--repeats",
        "1",
        "--no-mutation",
        "--no-cache",
    ]
}

/// Runs `assay prove -C repo ARGS --json FILE` with a private store.
/// The `cargo-pager` workspace (tests/fixtures/cargo-pager) committed, then [`change_pages`].
pub fn cargo_pager_repo(body: &str) -> Repo {
    let repo = Repo::new();
    repo.copy_fixture("cargo-pager", &[]);
    repo.commit("pager and ledger");
    change_pages(&repo, body);
    repo
}

/// The body of `cargo-pager`'s `pages` replaced with `body`, committed.
pub fn change_pages(repo: &Repo, body: &str) {
    let lib = fixture("cargo-pager/pager/src/lib.rs");
    repo.write("pager/src/lib.rs", &lib.replace("    items / per\n", body));
    repo.commit("pager: count a partial page");
}

pub fn prove(repo: &Repo, args: &[&str]) -> Run {
    prove_keeping_store(repo, args).0
}

/// The evidence of [`prove`] of `repo`'s last commit against the one before it, on `criterion`
/// alone; the proof must be proven (exit 0).
pub fn proven_fix(repo: &Repo, criterion: &str) -> serde_json::Value {
    let run = prove(repo, &["--base", "main~1", "--criterion", criterion]);
    assert_eq!(run.code, 0, "{}", run.explain());
    run.evidence.expect("evidence written")
}

/// [`prove`], keeping the directory that holds the store (`store/`) and the suite history
/// (`state/`) for the caller to read.
pub fn prove_keeping_store(repo: &Repo, args: &[&str]) -> (Run, tempfile::TempDir) {
    let out_dir = tempfile::tempdir().expect("temp dir");
    let (command, json) = prove_command(repo, args, out_dir.path());
    (run(command, Some(json)), out_dir)
}

/// The `assay prove` command of [`prove`], its store and state under `out_dir`, for a caller
/// that adds to it; with the path its evidence will be written to.
pub fn prove_command(repo: &Repo, args: &[&str], out_dir: &Path) -> (Command, PathBuf) {
    let json = out_dir.join("proof.json");
    let store = format!("file://{}", out_dir.join("store").display());
    let mut command = assay();
    command
        .arg("prove")
        .arg("-C")
        .arg(repo.path())
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg("--store")
        .arg(&store)
        .env("ASSAY_STATE_DIR", out_dir.join("state"));
    (command, json)
}

/// The `assay mutate -C repo --jobs 2 --json FILE` command, for a caller that adds to it; with
/// the path its report will be written to, in `out_dir`.
pub fn mutate_command(repo: &Repo, out_dir: &Path) -> (Command, PathBuf) {
    let json = out_dir.join("mutation.json");
    let mut command = assay();
    command
        .arg("mutate")
        .arg("-C")
        .arg(repo.path())
        .args(["--jobs", "2", "--json"])
        .arg(&json);
    (command, json)
}

pub const PAGER_BUGGY: &str = "def page_count(total, size):\n    return total // size\n";
pub const PAGER_FIXED: &str = "def page_count(total, size):\n    pages = total // size\n    if total % size > 0:\n        pages += 1\n    return pages\n";

/// The criteria of the pager's fix: its new test reproduces the partial last page, and the
/// full pages stay counted.
pub const PAGER_FIX_CRITERIA: [&str; 4] = [
    "--criterion",
    "test: test_partial_last_page_is_counted",
    "--criterion",
    "guard: test_full_pages",
];

/// A pytest project whose base has the pager bug and an existing guard test.
pub fn pytest_pager_repo() -> Repo {
    let repo = Repo::new();
    repo.write("pager.py", PAGER_BUGGY)
        .write("conftest.py", "")
        .write(
            "tests/test_pages.py",
            "from pager import page_count\n\n\ndef test_full_pages():\n    assert page_count(10, 5) == 2\n",
        );
    repo.commit("pager: count pages");
    repo
}

/// [`pytest_pager_repo`]'s pager fixed in the work tree, with a test of the partial last page
/// added to its test module; nothing committed.
pub fn write_pager_fix(repo: &Repo) {
    let tests = std::fs::read_to_string(repo.path().join("tests/test_pages.py")).unwrap();
    repo.write("pager.py", PAGER_FIXED).write(
        "tests/test_pages.py",
        &format!(
            "{tests}\n\ndef test_partial_last_page_is_counted():\n    assert page_count(11, 5) == 3\n"
        ),
    );
}

/// [`write_pager_fix`], committed on top of the base.
pub fn commit_pager_fix(repo: &Repo) {
    write_pager_fix(repo);
    repo.commit("pager: count the last partial page");
}

/// Where rustup keeps the toolchains its `cargo` proxy runs, if cargo is installed that way.
/// The process sandbox masks `$HOME`, so a run exposes it read-only and passes it on.
pub fn rustup_home() -> Option<PathBuf> {
    std::env::var_os("RUSTUP_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".rustup")))
        .filter(|home| home.is_dir())
}

/// Lets the jobs of `command` (an `assay` run) find rustup's toolchains, where cargo is
/// installed that way.
pub fn with_rust_toolchain(command: &mut Command) {
    if let Some(home) = rustup_home() {
        command
            .env("RUSTUP_HOME", &home)
            .env("ASSAY_SANDBOX_EXPOSE", &home)
            .args(["--pass-env", "RUSTUP_HOME"]);
    }
}

/// lru 0.12.4 then 0.12.5, each release's published files as a commit: the pair moves to
/// hashbrown 0.15, neither ships a Cargo.lock, and its tests use dev-dependencies
/// (scoped_threadpool, stats_alloc). The directory the releases were unpacked in goes with the
/// first value.
pub fn lru_release_pair() -> (tempfile::TempDir, Repo) {
    let dir = tempfile::tempdir().expect("temp dir");
    let old = published_crate(
        "lru",
        "0.12.4",
        "37ee39891760e7d94734f6f63fedc29a2e4a152f836120753a72503f09fcf904",
        dir.path(),
    );
    let new = published_crate(
        "lru",
        "0.12.5",
        "234cf4f4a04dc1f57e24b96cc0cd600cf2af460d4161ac5ecdd0af8e1f3b2a38",
        dir.path(),
    );
    let repo = Repo::new();
    commit_release(&repo, &old, "lru 0.12.4");
    commit_release(&repo, &new, "lru 0.12.5");
    (dir, repo)
}

/// The registry's archive of `name` `version`, fetched by the machine's cargo as a user's
/// project would fetch it, checked against `sha256` and unpacked under `into`.
pub fn published_crate(
    name: &str,
    version: &str,
    sha256: &str,
    into: &std::path::Path,
) -> std::path::PathBuf {
    use sha2::{Digest, Sha256};
    let fetcher = into.join(format!("fetch-{name}-{version}"));
    std::fs::create_dir_all(fetcher.join("src")).expect("fetcher dir");
    std::fs::write(fetcher.join("src/lib.rs"), "").expect("fetcher lib");
    std::fs::write(
        fetcher.join("Cargo.toml"),
        format!("[package]\nname = \"fetch-{name}\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n[dependencies]\n{name} = \"={version}\"\n\n[workspace]\n"),
    )
    .expect("fetcher manifest");
    let status = std::process::Command::new("cargo")
        .args(["fetch", "--quiet"])
        .current_dir(&fetcher)
        .env_remove("RUSTUP_TOOLCHAIN")
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cargo fetch {name} {version}");
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cargo")
        });
    let archive = std::fs::read_dir(cargo_home.join("registry/cache"))
        .expect("registry cache")
        .flatten()
        .map(|index| index.path().join(format!("{name}-{version}.crate")))
        .find(|archive| archive.is_file())
        .expect("the fetched archive");
    let bytes = std::fs::read(&archive).expect("read archive");
    assert_eq!(
        hex::encode(Sha256::digest(&bytes)),
        sha256,
        "{}",
        archive.display()
    );
    let status = std::process::Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(into)
        .status()
        .expect("tar runs");
    assert!(status.success());
    into.join(format!("{name}-{version}"))
}

/// Commits the files of `unpacked` (a published crate) as the repository's whole tree.
pub fn commit_release(repo: &Repo, unpacked: &std::path::Path, message: &str) {
    repo.git(&["rm", "-rq", "--ignore-unmatch", "."]);
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(format!("{}/.", unpacked.display()))
        .arg(repo.path())
        .status()
        .expect("cp runs");
    assert!(status.success());
    repo.remove(".cargo_vcs_info.json")
        .write(".gitignore", "/target\n");
    repo.commit(message);
}

/// A module proxy in a directory (the layout `GOPROXY=file://` reads) holding
/// `example.com/greet v1.0.0`.
pub fn go_module_proxy(dir: &std::path::Path) {
    use std::io::Write;
    let versions = dir.join("example.com/greet/@v");
    std::fs::create_dir_all(&versions).expect("proxy dir");
    let module = "module example.com/greet\n\ngo 1.19\n";
    let source = "package greet\n\nfunc Hello(name string) string { return \"hello, \" + name }\n";
    std::fs::write(versions.join("list"), "v1.0.0\n").expect("list");
    std::fs::write(
        versions.join("v1.0.0.info"),
        "{\"Version\":\"v1.0.0\",\"Time\":\"2024-01-01T00:00:00Z\"}",
    )
    .expect("info");
    std::fs::write(versions.join("v1.0.0.mod"), module).expect("mod");
    let mut zip = Vec::new();
    {
        // A stored (uncompressed) zip, as Go's module zips may be: written by hand, since the
        // format is small and no zip library is needed elsewhere.
        let mut entries: Vec<(Vec<u8>, u32, u32)> = Vec::new();
        for (name, body) in [
            ("example.com/greet@v1.0.0/go.mod", module),
            ("example.com/greet@v1.0.0/greet.go", source),
        ] {
            let offset = zip.len() as u32;
            let crc = crc32(body.as_bytes());
            let mut header = Vec::new();
            header.extend(0x04034b50u32.to_le_bytes());
            header.extend([20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            header.extend(crc.to_le_bytes());
            header.extend((body.len() as u32).to_le_bytes());
            header.extend((body.len() as u32).to_le_bytes());
            header.extend((name.len() as u16).to_le_bytes());
            header.extend(0u16.to_le_bytes());
            header.extend(name.as_bytes());
            zip.extend(&header);
            zip.extend(body.as_bytes());
            entries.push((name.as_bytes().to_vec(), crc, offset));
        }
        let directory_start = zip.len() as u32;
        for ((name, crc, offset), body) in entries.iter().zip([module, source]) {
            let mut central = Vec::new();
            central.extend(0x02014b50u32.to_le_bytes());
            central.extend([20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            central.extend(crc.to_le_bytes());
            central.extend((body.len() as u32).to_le_bytes());
            central.extend((body.len() as u32).to_le_bytes());
            central.extend((name.len() as u16).to_le_bytes());
            central.extend([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            central.extend(offset.to_le_bytes());
            central.extend(name);
            zip.extend(central);
        }
        let directory_len = zip.len() as u32 - directory_start;
        zip.extend(0x06054b50u32.to_le_bytes());
        zip.extend([0, 0, 0, 0]);
        zip.extend((entries.len() as u16).to_le_bytes());
        zip.extend((entries.len() as u16).to_le_bytes());
        zip.extend(directory_len.to_le_bytes());
        zip.extend(directory_start.to_le_bytes());
        zip.extend([0, 0]);
    }
    std::fs::File::create(versions.join("v1.0.0.zip"))
        .and_then(|mut f| f.write_all(&zip))
        .expect("zip");
}

/// Fills the module cache `cache` and `repo`'s `go.sum` with `example.com/greet` from the proxy
/// [`go_module_proxy`] wrote in `proxy`, as `go mod download` fills them on a user's host.
pub fn download_greet_module(repo: &Repo, proxy: &Path, cache: &Path) {
    let status = Command::new("go")
        .args(["mod", "download", "example.com/greet"])
        .current_dir(repo.path())
        .env("GOMODCACHE", cache)
        .env("GOPROXY", format!("file://{}", proxy.display()))
        .env("GOSUMDB", "off")
        .env("GOFLAGS", "-mod=mod")
        .status()
        .expect("go runs");
    assert!(status.success());
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for byte in bytes {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A node project whose pager has the ceiling bug: a CommonJS module, an ES module and an
/// exporter no test loads.
pub fn node_pager_repo() -> Repo {
    let repo = Repo::new();
    repo.write("package.json", "{\"name\": \"pager\", \"private\": true}\n")
        .write(
            "lib/pager.js",
            "'use strict';\n\nfunction pageCount(total, size) {\n  return Math.floor(total / size);\n}\n\nfunction clamp(page, last) {\n  return page;\n}\n\nmodule.exports = { pageCount, clamp };\n",
        )
        .write(
            "lib/range.mjs",
            "export function first(page, size) {\n  return (page - 1) * size;\n}\n\nexport function last(page, size) {\n  return page * size;\n}\n",
        )
        .write(
            "lib/export.js",
            "module.exports = (rows) => rows.join(',');\n",
        );
    repo.commit("pager, range and export");
    repo
}

/// The typed pager's node:test module: full pages only.
pub const TYPED_PAGER_TESTS: &str = "import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pages } from '../src/pager.js';

test('full pages are counted', () => {
  assert.equal(pages({ items: 10, per: 5 }), 2);
});
";

/// An ES-module TypeScript package: an interface and `pages`, which floors, tested by
/// [`TYPED_PAGER_TESTS`]; committed.
pub fn typed_pager_repo() -> Repo {
    let repo = Repo::new();
    repo.write(
        "package.json",
        "{ \"name\": \"pager\", \"version\": \"1.0.0\", \"type\": \"module\" }\n",
    )
    .write(
        "src/pager.ts",
        "export interface Listing { items: number; per: number }\n\nexport function pages({ items, per }: Listing): number {\n  return Math.floor(items / per);\n}\n",
    )
    .write("test/pager.test.ts", TYPED_PAGER_TESTS);
    repo.commit("pager");
    repo
}

/// [`node_pager_repo`] with the fix (`Math.ceil`, which the new test reaches), a change to
/// `clamp` and to the ES module's `last` that no test calls, `first` fixed (reached through a
/// dynamic import), and the exporter changed though no test loads it; committed.
pub fn node_pager_change() -> Repo {
    let repo = node_pager_repo();
    repo.write(
        "lib/pager.js",
        "'use strict';\n\nfunction pageCount(total, size) {\n  return Math.ceil(total / size);\n}\n\nfunction clamp(page, last) {\n  if (page > last) {\n    return last;\n  }\n  return page;\n}\n\nmodule.exports = { pageCount, clamp };\n",
    )
    .write(
        "lib/range.mjs",
        "export function first(page, size) {\n  return Math.max(0, (page - 1) * size);\n}\n\nexport function last(page, size) {\n  return page * size - 1;\n}\n",
    )
    .write(
        "lib/export.js",
        "module.exports = (rows) => rows.join(';');\n",
    )
    .write(
        "test/pager.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\nconst { pageCount } = require('../lib/pager.js');\n\ntest('test_partial_last_page_is_counted', async () => {\n  assert.strictEqual(pageCount(11, 5), 3);\n  const { first } = await import('../lib/range.mjs');\n  assert.strictEqual(first(0, 10), 0);\n});\n",
    );
    repo.commit("pager: count the last partial page; clamp to the last page; the last offset; export with ;");
    repo
}

/// The stored `stdout` and `stderr` artifacts of the proof's candidate job that ran the one
/// test and passed.
pub fn candidate_stream_artifacts(evidence: &serde_json::Value) -> [&serde_json::Value; 2] {
    let job = evidence["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .find(|job| job["tests_reported"] == 1 && job["exit_code"] == 0)
        .unwrap_or_else(|| panic!("no candidate job that ran the test: {evidence:#}"));
    let artifact = |stream: &str| {
        job["artifacts"]
            .as_array()
            .expect("artifacts")
            .iter()
            .find(|a| a["name"] == stream)
            .unwrap_or_else(|| panic!("no {stream}: {job:#}"))
    };
    [artifact("stdout"), artifact("stderr")]
}

/// A node project whose `pageCount` floors on the base and rounds up on the candidate, whose
/// new test (`partial last page is counted`) prints `lines` lines naming `marker` on each of
/// stdout and stderr.
pub fn printing_node_pager_repo(marker: &str, lines: usize) -> Repo {
    let repo = Repo::new();
    repo.write("package.json", "{\"name\": \"pager\", \"private\": true}\n")
        .write(
            "lib/pager.js",
            "exports.pageCount = (total, size) => Math.floor(total / size);\n",
        );
    repo.commit("pager");
    repo.write(
        "lib/pager.js",
        "exports.pageCount = (total, size) => Math.ceil(total / size);\n",
    )
    .write(
        "test/pager.test.js",
        &format!(
            "const test = require('node:test');\nconst assert = require('node:assert');\nconst {{ pageCount }} = require('../lib/pager.js');\n\ntest('partial last page is counted', () => {{\n  for (let i = 0; i < {lines}; i++) {{\n    console.log('{marker} on stdout');\n    console.error('{marker} on stderr');\n  }}\n  assert.strictEqual(pageCount(11, 5), 3);\n}});\n"
        ),
    );
    repo.commit("pager: count the last partial page");
    repo
}
