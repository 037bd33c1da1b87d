//! The code under test is hostile: with the defaults (`assay prove`, the process sandbox, the
//! store, cache key and state under the user's home), a test may try to reach Assay's own
//! files, the user's home, other programs' temporary files and the network, and to forge the
//! result cache so that a later proof of another change is answered with its lies. Each test
//! here runs the real binary against a real git repository with a home of its own, and shows
//! the attack code works by running it once unconfined (`ASSAY_BWRAP` naming no program),
//! where the run says it is unconfined and the cache is off.

use crate::support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use support::{PAGER_FIXED, Repo, Run, pytest_pager_repo};

/// A user's machine in a temp dir: `HOME` with the default store, state and key under it, and
/// a file of another program's in the temp dir.
struct Machine {
    root: tempfile::TempDir,
    /// The bubblewrap `ASSAY_BWRAP` names when confined runs are asked for; `PATH`'s if none.
    confiner: Option<PathBuf>,
}

impl Machine {
    fn new() -> Self {
        let root = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(root.path().join("home/.ssh")).expect("home");
        std::fs::write(root.path().join("home/.ssh/id_ed25519"), "PRIVATE KEY").expect("key");
        std::fs::write(root.path().join("neighbour.txt"), "another program's file").expect("tmp");
        Machine {
            root,
            confiner: None,
        }
    }

    fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    fn store(&self) -> PathBuf {
        self.home().join(".cache/assay/store")
    }

    fn cache_key(&self) -> PathBuf {
        self.home().join(".local/state/assay/cache.key")
    }

    /// `assay prove` with the defaults but for the home; `unconfined` names no bubblewrap.
    fn prove(
        &self,
        repo: &Repo,
        base: &str,
        candidate: &str,
        criteria: &[&str],
        unconfined: bool,
    ) -> Run {
        let json = self.root.path().join("proof.json");
        let _ = std::fs::remove_file(&json);
        let mut command = support::assay();
        command
            .env_remove("ASSAY_CACHE_KEY_FILE")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("XDG_STATE_HOME")
            .env_remove("ASSAY_STATE_DIR")
            .env("HOME", self.home())
            .arg("prove")
            .arg("-C")
            .arg(repo.path())
            .args(["--base", base, "--candidate", candidate, "--repeats", "1"])
            .args(["--no-mutation", "--progress", "plain", "--json"])
            .arg(&json);
        for criterion in criteria {
            command.args(["--criterion", criterion]);
        }
        if unconfined {
            command.env("ASSAY_BWRAP", self.root.path().join("no-bubblewrap-here"));
        } else if let Some(confiner) = &self.confiner {
            command.env("ASSAY_BWRAP", confiner);
        }
        support::run(command, Some(json))
    }

    /// Every cache entry in the store, by path, with its bytes.
    fn cache_entries(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut entries = BTreeMap::new();
        let mut dirs = vec![self.store().join("cache")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else {
                    let bytes = std::fs::read(&path).expect("read entry");
                    entries.insert(path, bytes);
                }
            }
        }
        entries
    }
}

fn confinement(run: &Run) -> serde_json::Value {
    run.evidence.as_ref().expect("evidence")["sandbox"]["confinement"].clone()
}

/// A guard that passes only when none of the probes reaches what it aims at.
fn probes_test(machine: &Machine, nats_port: u16) -> String {
    format!(
        r#"import os, pathlib, socket

HOME = {home:?}
PROBES = {{
    "the cache key": lambda: pathlib.Path({key:?}).read_bytes(),
    "the store": lambda: pathlib.Path({store:?}, "trees/sentinel").read_text(),
    "a file in the store": lambda: pathlib.Path({store:?}, "planted.json").write_text("{{}}"),
    "the user's ssh key": lambda: pathlib.Path(HOME, ".ssh/id_ed25519").read_text(),
    "a file under $HOME": lambda: pathlib.Path(HOME, ".assay-planted").write_text("x"),
    "the cache directory": lambda: pathlib.Path(HOME, ".cache/assay/planted").write_text("x"),
    "the state directory": lambda: pathlib.Path(HOME, ".local/state/assay/planted").write_text("x"),
    "another program's temp file": lambda: pathlib.Path({neighbour:?}).read_text(),
    "the NATS server": lambda: socket.create_connection(("127.0.0.1", {nats_port}), timeout=2),
}}


def test_reaches_nothing_of_the_machine():
    # A write beside it lands in the job's own /tmp, which the host checks stays its own.
    try:
        pathlib.Path({neighbour:?}).with_name("planted").write_text("x")
    except OSError:
        pass
    reached = []
    for name, probe in PROBES.items():
        try:
            probe()
        except OSError:
            continue
        reached.append(name)
    assert not reached, f"reached {{reached}}"
"#,
        home = machine.home().display().to_string(),
        key = machine.cache_key().display().to_string(),
        store = machine.store().display().to_string(),
        neighbour = machine
            .root
            .path()
            .join("neighbour.txt")
            .display()
            .to_string(),
    )
}

#[test]
fn the_code_under_test_reaches_none_of_assays_files_the_home_other_temp_files_or_the_bus() {
    let nats = support::servers::start_nats();
    let machine = Machine::new();
    let repo = pytest_pager_repo();
    repo.write("tests/test_reach.py", &probes_test(&machine, nats.port));
    repo.commit("tests: what a test can reach");
    // The store holds something before the guest runs, as on any machine that proved something.
    std::fs::create_dir_all(machine.store().join("trees")).expect("store");
    std::fs::write(machine.store().join("trees/sentinel"), "stored").expect("store");
    let criteria = ["guard: test_reaches_nothing_of_the_machine"];

    let confined = machine.prove(&repo, "main", "main", &criteria, false);
    assert_eq!(confined.code, 0, "{}", confined.explain());
    assert_eq!(
        confined.verdict_of("C1"),
        "proven",
        "{}",
        confined.explain()
    );
    assert_eq!(
        confinement(&confined)["confined"],
        true,
        "{}",
        confined.explain()
    );
    assert!(machine.cache_key().is_file(), "the run made its user's key");
    for planted in [
        machine.home().join(".assay-planted"),
        machine.store().join("planted.json"),
        machine.home().join(".cache/assay/planted"),
        machine.home().join(".local/state/assay/planted"),
        machine.root.path().join("planted"),
    ] {
        assert!(!planted.exists(), "{} was written", planted.display());
    }

    // The same probes unconfined reach what they aim at: the guard fails, the run says it was
    // unconfined, and the cache neither served nor stored anything.
    let entries_before = machine.cache_entries();
    let unconfined = machine.prove(&repo, "main", "main", &criteria, true);
    assert_eq!(unconfined.code, 1, "{}", unconfined.explain());
    assert_eq!(
        unconfined.verdict_of("C1"),
        "refuted",
        "{}",
        unconfined.explain()
    );
    assert!(machine.home().join(".assay-planted").is_file());
    assert!(machine.root.path().join("planted").is_file());
    assert_eq!(confinement(&unconfined)["confined"], false);
    assert!(
        unconfined
            .stderr
            .contains("[sandbox] warning: the code under test runs unconfined"),
        "{}",
        unconfined.explain()
    );
    assert!(
        unconfined
            .stderr
            .contains("[cache] not used: the code under test runs unconfined"),
        "{}",
        unconfined.explain()
    );
    let mut entries_after = machine.cache_entries();
    entries_after.retain(|path, _| !path.ends_with("planted.json"));
    assert_eq!(
        entries_after, entries_before,
        "an unconfined run stored entries"
    );
}

/// Change A's conftest forges the cache as the attack on unsigned entries did: every failure
/// stored for a candidate-side job becomes a pass, in the entry and in the JUnit report it pins, with the report's new
/// sha256 and size written into the entry, so that every check but the signature agrees. Change
/// B is wrong (its new test fails on both trees); proved after A, it must still be refuted.
fn forging_conftest(machine: &Machine) -> String {
    format!(
        r#"import hashlib, json, os, re

STORE = {store:?}


def _replace(path, text):
    # Candidate and candidate-suite run this at once: each write is whole or not at all, so
    # neither reads the other's half-written file.
    temporary = "%s.%d.forging" % (path, os.getpid())
    with open(temporary, "w") as out:
        out.write(text)
    os.replace(temporary, path)


def _passing(report):
    report = re.sub(r"<(failure|error)\b[^>]*?(/>|>.*?</\1>)", "", report, flags=re.S)
    return re.sub(r'(failures|errors)="\d+"', r'\1="0"', report)


def _forge():
    for root, _, files in os.walk(os.path.join(STORE, "cache")):
        for name in files:
            if name.endswith(".forging"):
                continue
            path = os.path.join(root, name)
            try:
                entry = json.loads(open(path).read())
                # The candidate side's jobs: odd in plan order with one run per side.
                if entry["result"]["index"] % 2 == 0:
                    continue
                for case in entry["result"]["report"]["parsed"]["cases"]:
                    if case["outcome"] == "failed":
                        case["outcome"], case["message"] = "passed", None
                for artifact in entry["result"]["artifacts"]:
                    stored = os.path.join(STORE, artifact["key"])
                    text = open(stored).read()
                    forged = _passing(text) if "<testsuite" in text else text
                    _replace(stored, forged)
                    artifact["sha256"] = hashlib.sha256(forged.encode()).hexdigest()
                    artifact["bytes"] = len(forged.encode())
                status = entry["result"]["status"]
                if isinstance(status, dict) and "completed" in status:
                    status["completed"]["exit_code"] = 0
                _replace(path, json.dumps(entry, separators=(",", ":")))
            except (OSError, ValueError, KeyError, TypeError):
                pass


_forge()
"#,
        store = machine.store().display().to_string(),
    )
}

#[test]
fn a_change_cannot_forge_the_cache_into_proving_another_change() {
    let machine = Machine::new();
    let repo = pytest_pager_repo();
    let base = repo.git(&["rev-parse", "HEAD"]);
    let base = base.trim();
    let partial_test =
        "\n\ndef test_partial_last_page_is_counted():\n    assert page_count(11, 5) == 3\n";
    let tests = std::fs::read_to_string(repo.path().join("tests/test_pages.py")).expect("tests");
    // B: a wrong fix whose new test fails on both trees.
    repo.git(&["checkout", "-q", "-b", "wrong-fix"]);
    repo.write(
        "pager.py",
        "def page_count(total, size):\n    return total // size + 0\n",
    )
    .write("tests/test_pages.py", &format!("{tests}{partial_test}"));
    repo.commit("pager: a wrong fix");
    // A: the right fix, with a conftest that forges the cache.
    repo.git(&["checkout", "-q", base]);
    repo.git(&["checkout", "-q", "-b", "agent-fix"]);
    repo.write("pager.py", PAGER_FIXED)
        .write("tests/test_pages.py", &format!("{tests}{partial_test}"))
        .write("conftest.py", &forging_conftest(&machine));
    repo.commit("pager: count the partial page");
    let criteria = [
        "test: test_partial_last_page_is_counted",
        "guard: test_full_pages",
    ];

    let wrong = machine.prove(&repo, base, "wrong-fix", &criteria, false);
    assert_eq!(wrong.code, 1, "{}", wrong.explain());
    assert_eq!(wrong.verdict_of("C1"), "refuted");
    let stored = machine.cache_entries();
    assert!(!stored.is_empty(), "the refuted proof stored its results");

    let agent = machine.prove(&repo, base, "agent-fix", &criteria, false);
    assert_eq!(agent.code, 0, "{}", agent.explain());
    let mut after_agent = machine.cache_entries();
    after_agent.retain(|path, _| stored.contains_key(path));
    assert_eq!(after_agent, stored, "the guest rewrote cache entries");

    let again = machine.prove(&repo, base, "wrong-fix", &criteria, false);
    assert_eq!(again.code, 1, "{}", again.explain());
    assert_eq!(again.verdict_of("C1"), "refuted", "{}", again.explain());
    assert!(
        again.stderr.contains("answered from the cache") && !again.stderr.contains(" refused, "),
        "{}",
        again.explain()
    );

    // The forgery is real: unconfined, the conftest rewrites the entries and their reports so
    // that only the signature gives them away.
    let unconfined = machine.prove(&repo, base, "agent-fix", &criteria, true);
    assert_eq!(unconfined.code, 0, "{}", unconfined.explain());
    let mut forged = machine.cache_entries();
    forged.retain(|path, _| stored.contains_key(path));
    assert_ne!(
        forged, stored,
        "the forging conftest changed nothing even unconfined"
    );
    let after_forgery = machine.prove(&repo, base, "wrong-fix", &criteria, false);
    assert_eq!(
        after_forgery.verdict_of("C1"),
        "refuted",
        "{}",
        after_forgery.explain()
    );
    let refusals: Vec<&str> = after_forgery
        .stderr
        .lines()
        .filter(|l| l.starts_with("[cache] ") && l.contains(" refused, "))
        .collect();
    assert_eq!(refusals.len(), 1, "{}", after_forgery.explain());
    // Every refused entry was refused for its signature, the one reason the line names.
    let reasons = refusals[0].split_once(" ran instead: ").map(|(_, r)| r);
    assert!(
        reasons.is_some_and(|r| r
            .starts_with("the entry's signature does not verify under this user's key (")
            && !r.contains("; ")),
        "{}",
        refusals[0]
    );
    // Signed with the user's key, which no confined guest can read, the same forgery passes
    // every other check and proves the wrong change: the signature is what stops it.
    machine.cache_entries();
    let unconfined = machine.prove(&repo, base, "agent-fix", &criteria, true);
    assert_eq!(unconfined.code, 0, "{}", unconfined.explain());
    for path in machine
        .cache_entries()
        .keys()
        .filter(|p| stored.contains_key(*p))
    {
        support::resign_with::<assay_engine::result_cache::CacheEntry>(path, &machine.cache_key());
    }
    let fooled = machine.prove(&repo, base, "wrong-fix", &criteria, false);
    assert_eq!(fooled.verdict_of("C1"), "proven", "{}", fooled.explain());
}

/// bubblewrap fails before its guest runs when a mount it copies vanishes (a container engine
/// at work on the same host): the host's probe meets that too, and one such failure must not
/// leave a whole run unconfined with its cache off.
#[test]
fn a_probe_that_meets_a_vanishing_mount_is_tried_again_and_the_run_stays_confined() {
    let mut machine = Machine::new();
    let real = support::which("bwrap").expect("bubblewrap is installed on test machines");
    let failures = machine.root.path().join("failures");
    let wrapper = machine.root.path().join("bwrap-on-a-busy-host");
    // Its first two sandboxes fail as bubblewrap's do; `--version` and the rest are the real one's.
    support::write_script(
        &wrapper,
        &format!(
            "#!/bin/sh\n\
             [ \"$1\" = --version ] && exec {real} --version\n\
             n=$(cat {failures} 2>/dev/null || echo 0)\n\
             if [ \"$n\" -lt 2 ]; then\n\
             echo $((n + 1)) > {failures}\n\
             echo 'bwrap: Can'\\''t bind mount /oldroot/run/docker/netns/5f1e on /newroot/run/docker/netns/5f1e: No such file or directory' >&2\n\
             exit 1\n\
             fi\n\
             exec {real} \"$@\"\n",
            real = real.display(),
            failures = failures.display(),
        ),
    );
    machine.confiner = Some(wrapper);
    let repo = pytest_pager_repo();

    let run = machine.prove(&repo, "main", "main", &["guard: test_full_pages"], false);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(confinement(&run)["confined"], true, "{}", run.explain());
    assert_eq!(
        std::fs::read_to_string(&failures)
            .expect("the wrapper failed")
            .trim(),
        "2",
        "the probe did not meet the failures"
    );
    assert!(!run.stderr.contains("runs unconfined"), "{}", run.explain());
    assert!(
        !machine.cache_entries().is_empty(),
        "a confined run stored nothing: {}",
        run.explain()
    );
}
