//! `assay mutate --cluster`: the same small pure-Python library mutated in this process and on
//! a fleet (`ClusterSandbox`: real nats-server, real S3 server, real `assay coordinator` and
//! `assay worker` processes) reaches the same verdict for every mutant, with the same report and diffs; so do
//! a crate built once, a Go module and node:test projects in JavaScript and TypeScript.

use crate::support;

use assay_test_support::cluster::{ClusterSandbox, FleetProcess, StoreKind};
use std::path::Path;
use support::servers::s3_env;

/// An invoicing library whose tests kill most mutants, miss the zero-percent bound of
/// `apply_discount` and never call `round_cents`.
fn invoice_library() -> support::Repo {
    let repo = support::Repo::new();
    repo.write(
        "invoices/__init__.py",
        "from invoices.totals import apply_discount, line_total\n",
    )
    .write(
        "invoices/totals.py",
        "def line_total(quantity, unit_price):\n    if quantity < 0:\n        raise ValueError(\"negative quantity\")\n    return quantity * unit_price\n\n\ndef apply_discount(amount, percent):\n    if percent <= 0:\n        return amount\n    return amount - amount * percent // 100\n\n\ndef round_cents(amount):\n    return (amount + 50) // 100 * 100\n",
    )
    .write("conftest.py", "")
    .write(
        "tests/test_totals.py",
        "import pytest\n\nfrom invoices import apply_discount, line_total\n\n\ndef test_line_total_multiplies():\n    assert line_total(3, 400) == 1200\n\n\ndef test_negative_quantity_is_refused():\n    with pytest.raises(ValueError):\n        line_total(-1, 400)\n\n\ndef test_ten_percent_off():\n    assert apply_discount(2000, 10) == 1800\n",
    );
    repo.commit("invoices: line totals and discounts");
    repo
}

/// A fleet on loopback (the one harness, `ClusterSandbox`): nats-server, an S3 server, one
/// coordinator and one worker of two slots in the process sandbox, as `assay` processes, with
/// `worker_env` and `worker_args` added to the worker's.
struct Fleet {
    coordinator: FleetProcess,
    worker: FleetProcess,
    sandbox: ClusterSandbox,
}

impl Fleet {
    fn start(worker_env: &[(String, String)], worker_args: &[&str]) -> Self {
        let sandbox = ClusterSandbox::start(StoreKind::S3);
        let assay = Path::new(env!("CARGO_BIN_EXE_assay"));
        let coordinator = sandbox
            .process(assay, "coordinator", &["coordinator"])
            .ready("coordinator started")
            .start();
        let mut args = vec!["worker", "--slots", "2", "--sandbox", "process"];
        args.extend(worker_args);
        let worker = sandbox
            .process(assay, "worker", &args)
            .envs(worker_env.iter().cloned())
            .env(
                "ASSAY_TREE_CACHE_DIR",
                sandbox.dir().join("worker-trees").display().to_string(),
            )
            .ready("worker started")
            .start();
        Self {
            coordinator,
            worker,
            sandbox,
        }
    }

    /// `--cluster` and `--store` for the CLI.
    fn flags(&self) -> [String; 4] {
        [
            "--cluster".into(),
            self.sandbox.nats_url(),
            "--store".into(),
            self.sandbox.store_url(),
        ]
    }

    /// The S3 settings the CLI needs.
    fn env(&self) -> Vec<(String, String)> {
        self.sandbox.s3_port().map(s3_env).unwrap_or_default()
    }

    /// What a failed run needs beside its own output.
    fn logs(&self) -> String {
        format!(
            "coordinator:\n{}\nworker:\n{}",
            self.coordinator.log(),
            self.worker.log()
        )
    }

    /// The names in the worker's cache of unpacked dependency archives.
    fn unpacked_dependencies(&self) -> Vec<String> {
        std::fs::read_dir(self.sandbox.dir().join("worker-trees/dependencies"))
            .expect("the worker's dependency cache")
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .collect()
    }

    /// How many jobs the worker finished.
    fn jobs_finished(&self) -> usize {
        self.worker.log().matches("job finished").count()
    }

    /// [`mutate`] of `repo` on the fleet: `extra`, then the fleet's flags; the S3 settings,
    /// then `env`.
    fn mutate(
        &self,
        repo: &support::Repo,
        out: &Path,
        extra: &[&str],
        env: &[(String, String)],
    ) -> support::Run {
        let flags = self.flags();
        let mut args = extra.to_vec();
        args.extend(flags.iter().map(String::as_str));
        let mut all_env = self.env();
        all_env.extend_from_slice(env);
        mutate(repo, out, &args, &all_env)
    }

    /// [`Fleet::mutate`] with `extra`, which must exit 5 (a mutant survived); `context` heads
    /// the message otherwise, the fleet's logs end it.
    #[track_caller]
    fn mutate_to_a_survivor(
        &self,
        repo: &support::Repo,
        out: &Path,
        extra: &[&str],
        context: &str,
    ) -> support::Run {
        let fleet = self.mutate(repo, out, extra, &[]);
        assert_eq!(
            fleet.code,
            5,
            "{context}{}\n{}",
            fleet.explain(),
            self.logs()
        );
        fleet
    }

    /// `fleet` (a run of [`Fleet::mutate`]) ended with every mutant judged: killed or
    /// survived, none erred, at least one killed.
    #[track_caller]
    fn assert_every_mutant_judged(&self, fleet: &support::Run) {
        assert!(
            fleet.code == 0 || fleet.code == 5,
            "{}\n{}",
            fleet.explain(),
            self.logs()
        );
        let found = statuses(fleet.evidence.as_ref().expect("fleet report"));
        assert!(
            found.iter().any(|(_, status)| status == "Killed"),
            "{found:?}\n{}",
            self.logs()
        );
        assert!(
            found
                .iter()
                .all(|(_, status)| status == "Killed" || status == "Survived"),
            "{found:?}\n{}",
            self.logs()
        );
    }
}

/// The test command of a crate's mutation runs.
const CARGO_RUNNER: [&str; 4] = ["--runner", "cargo", "--test-command", "cargo test"];

/// Runs `assay mutate` on `repo` with `extra`, writing the report and diffs under `out`.
fn mutate(
    repo: &support::Repo,
    out: &Path,
    extra: &[&str],
    env: &[(String, String)],
) -> support::Run {
    std::fs::create_dir_all(out).expect("output dir");
    let (mut command, json) = support::mutate_command(repo, out);
    command
        .arg("--diff")
        .arg(out.join("mutants.diff"))
        .args(extra)
        .envs(env.iter().map(|(k, v)| (k, v)));
    support::run(command, Some(json))
}

/// The report without what depends on timing: the elapsed time, rate and phases, and for each mutant
/// which covering test killed it and how many ran (covering tests run fastest first, by measured
/// durations, and stop at the first failure). A killer must still be one of the covering tests.
/// Nor what the cache did: only the embedded run uses it.
fn timing_free(mut report: serde_json::Value) -> serde_json::Value {
    if let Some(doc) = report.as_object_mut() {
        doc.remove("performance");
    }
    if let Some(assay) = report["assay"].as_object_mut() {
        assay.remove("cache");
    }
    if let Some(summary) = report["assay"]["summary"].as_object_mut() {
        summary.remove("elapsed_s");
        summary.remove("mutants_per_minute");
    }
    if let Some(files) = report["files"].as_object_mut() {
        for file in files.values_mut() {
            for mutant in file["mutants"].as_array_mut().expect("mutants") {
                let covered = mutant["coveredBy"].to_string();
                for killer in mutant["killedBy"].as_array().expect("killedBy") {
                    let name = killer.as_str().expect("a test name");
                    assert!(covered.contains(name), "{name} killed but does not cover");
                }
                let fields = mutant.as_object_mut().expect("a mutant");
                fields.remove("killedBy");
                fields.remove("testsCompleted");
                fields.remove("duration");
            }
        }
    }
    report
}

/// [`mutate`] in this process with its store in `out`, then `extra`, the report and diffs in
/// `out/embedded`; it must exit 5 (a mutant survived), `context` heading the message otherwise.
#[track_caller]
fn mutate_embedded(
    repo: &support::Repo,
    out: &Path,
    extra: &[&str],
    env: &[(String, String)],
    context: &str,
) -> support::Run {
    let store = format!("file://{}", out.join("store").display());
    let embedded = mutate(
        repo,
        &out.join("embedded"),
        &[&["--store", &store][..], extra].concat(),
        env,
    );
    assert_eq!(embedded.code, 5, "{context}{}", embedded.explain());
    embedded
}

/// The statuses of an embedded run's `report`, which has a mutant of every one of `kinds`;
/// `context` heads the message otherwise.
#[track_caller]
fn statuses_of_every_kind(
    report: &serde_json::Value,
    kinds: &[&str],
    context: &str,
) -> Vec<(String, String)> {
    let expected = statuses(report);
    let found: Vec<&str> = expected.iter().map(|(_, s)| s.as_str()).collect();
    for status in kinds {
        assert!(
            found.contains(status),
            "{context}no {status} mutant: {expected:?}"
        );
    }
    expected
}

/// Each mutant's id and status, in report order.
fn statuses(report: &serde_json::Value) -> Vec<(String, String)> {
    report["files"]
        .as_object()
        .expect("files")
        .values()
        .flat_map(|file| file["mutants"].as_array().expect("mutants").iter())
        .map(|m| {
            (
                m["id"].as_str().expect("id").to_owned(),
                m["status"].as_str().expect("status").to_owned(),
            )
        })
        .collect()
}

/// The summary with its first line's timings cut.
fn summary_text(stdout: &str) -> String {
    stdout
        .lines()
        .map(|line| match line.split_once(" (") {
            Some((counts, _)) if line.starts_with("mutate: ") => counts,
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn mutants_run_on_the_fleet_reach_the_verdicts_of_an_embedded_run() {
    let repo = invoice_library();
    let out = tempfile::tempdir().expect("temp dir");
    let embedded = mutate_embedded(&repo, out.path(), &[], &[], "");
    let embedded_report = embedded.evidence.clone().expect("embedded report");

    let cluster = Fleet::start(&[], &[]);
    let fleet = cluster.mutate_to_a_survivor(&repo, &out.path().join("fleet"), &[], "");
    let fleet_report = fleet.evidence.clone().expect("fleet report");

    let expected =
        statuses_of_every_kind(&embedded_report, &["Killed", "Survived", "NoCoverage"], "");
    assert_eq!(statuses(&fleet_report), expected, "per-mutant statuses");
    assert_eq!(timing_free(fleet_report), timing_free(embedded_report));
    let diffs = |side: &str| {
        std::fs::read_to_string(out.path().join(side).join("mutants.diff")).expect("diff file")
    };
    assert_eq!(diffs("fleet"), diffs("embedded"));
    assert_eq!(summary_text(&fleet.stdout), summary_text(&embedded.stdout));
    // The baseline and every covered mutant ran on the worker, not in the CLI.
    let covered = expected.iter().filter(|(_, s)| s != "NoCoverage").count();
    let ran = cluster.jobs_finished();
    assert!(
        ran > covered,
        "the worker logged {ran} finished jobs for {covered} covered mutants and the baseline:\n{}",
        cluster.worker.log()
    );
    // `assay status` shows the campaign's submissions, a job each, as one finished line.
    let mut status = support::assay();
    status
        .args(["status", "--cluster", &cluster.sandbox.nats_url()])
        .envs(cluster.env());
    let status = support::run(status, None);
    assert_eq!(status.code, 0, "{}", status.explain());
    let lines: Vec<&str> = status.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}", status.stdout);
    let fields: Vec<&str> = lines[0].split('\t').collect();
    assert_eq!(fields.len(), 3, "{}", status.stdout);
    assert_eq!(fields[1], "finished", "{}", status.stdout);
    let (done, submitted) = fields[2]
        .split_once(" jobs")
        .and_then(|(counts, _)| counts.split_once('/'))
        .and_then(|(done, all)| Some((done.parse::<usize>().ok()?, all.parse::<usize>().ok()?)))
        .unwrap_or_else(|| panic!("no job counts: {}", status.stdout));
    assert!(
        done == submitted
            && submitted > covered
            && fields[2].ends_with("(mutate run, a submission per job)"),
        "{covered} covered mutants and the baseline: {}",
        status.stdout
    );
}

/// A CLI whose `--store` is not the fleet's uploads the tree where no worker looks: the run
/// stops at its baseline as an infrastructure failure naming the fleet's store, never as a
/// red suite.
#[test]
fn a_mutate_whose_store_is_not_the_fleets_is_an_infrastructure_failure_naming_the_store() {
    let repo = invoice_library();
    let out = tempfile::tempdir().expect("temp dir");
    let cluster = Fleet::start(&[], &[]);
    let elsewhere = format!("file://{}", out.path().join("another-store").display());
    let nats = cluster.sandbox.nats_url();
    let run = mutate(
        &repo,
        &out.path().join("run"),
        &["--cluster", &nats, "--store", &elsewhere],
        &cluster.env(),
    );
    assert_eq!(run.code, 3, "{}\n{}", run.explain(), cluster.logs());
    let fleet_store = cluster.sandbox.store_url();
    for expected in [
        "infrastructure failure: the unmutated baseline run could not be run",
        &format!("not in the artifact store {fleet_store}"),
        "check both use the same store",
    ] {
        assert!(
            run.stderr.contains(expected),
            "{expected}: {}",
            run.explain()
        );
    }
    for misleading in ["red suite", "upload the tree before submitting"] {
        assert!(
            !run.stderr.contains(misleading),
            "{misleading}: {}",
            run.explain()
        );
    }
    assert!(run.evidence.is_none(), "{}", run.explain());
}

/// A one-file crate: `pages` is tested, `is_past_end`'s body as `true` survives its only test,
/// and `Book` has no `Default`.
fn pager_crate() -> support::Repo {
    let repo = support::Repo::new();
    repo.write(
        "Cargo.toml",
        "[package]\nname = \"pager\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .write(
        "src/lib.rs",
        "/// Pages needed for `items` at `per` a page.\n///\n/// ```\n/// assert_eq!(pager::pages(7, 3), 3);\n/// ```\npub fn pages(items: u32, per: u32) -> u32 {\n    items.div_ceil(per)\n}\n\npub fn is_past_end(page: u32, last: u32) -> bool {\n    page > last\n}\n\npub struct Book(pub u32);\n\npub fn book(pages: u32) -> Book {\n    Book(pages)\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn counts_pages() {\n        assert_eq!(pages(10, 5), 2);\n        assert_eq!(book(3).0, 3);\n    }\n\n    #[test]\n    fn far_past_the_end() {\n        assert!(is_past_end(9, 3));\n    }\n}\n",
    )
    .write(".gitignore", "/target\n");
    repo.commit("pager");
    repo
}

#[test]
fn a_crate_built_once_on_the_fleet_reaches_the_verdicts_of_an_embedded_run() {
    let repo = pager_crate();
    let out = tempfile::tempdir().expect("temp dir");
    // cargo's rustup proxy finds its toolchains through RUSTUP_HOME, which the sandbox masks.
    let mut toolchain: Vec<(String, String)> = Vec::new();
    let mut pass: Vec<&str> = Vec::new();
    if let Some(home) = support::rustup_home() {
        let home = home.display().to_string();
        toolchain.push(("RUSTUP_HOME".into(), home.clone()));
        toolchain.push(("ASSAY_SANDBOX_EXPOSE".into(), home));
        pass = vec!["--pass-env", "RUSTUP_HOME"];
    }
    let embedded = mutate_embedded(
        &repo,
        out.path(),
        &[&CARGO_RUNNER[..], &pass].concat(),
        &toolchain,
        "",
    );
    let embedded_report = embedded.evidence.clone().expect("embedded report");
    assert!(
        embedded_report["assay"]["schemata"]["held"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "built once: {:#}",
        embedded_report["assay"]
    );

    let cluster = Fleet::start(&toolchain, &pass);
    let fleet = cluster.mutate_to_a_survivor(&repo, &out.path().join("fleet"), &CARGO_RUNNER, "");
    let fleet_report = fleet.evidence.clone().expect("fleet report");
    let expected = statuses_of_every_kind(
        &embedded_report,
        &["Killed", "Survived", "CompileError"],
        "",
    );
    assert_eq!(statuses(&fleet_report), expected, "per-mutant statuses");
    // Each mutant's job on a worker ran only the tests the unmutated run saw reach it.
    let covered = |report: &serde_json::Value| -> Vec<(String, serde_json::Value)> {
        report["files"]["src/lib.rs"]["mutants"]
            .as_array()
            .expect("mutants")
            .iter()
            .map(|m| (m["description"].to_string(), m["coveredBy"].clone()))
            .collect()
    };
    assert_eq!(covered(&fleet_report), covered(&embedded_report));
    assert!(
        covered(&fleet_report)
            .iter()
            .any(|(_, by)| *by == serde_json::json!(["pager::tests::far_past_the_end"])),
        "{:?}",
        covered(&fleet_report)
    );
    assert_eq!(
        fleet_report["assay"]["schemata"]["held"],
        embedded_report["assay"]["schemata"]["held"]
    );
    // The build and every run happened on the worker: the executables travelled through S3.
    assert!(
        cluster.jobs_finished() > expected.len(),
        "{}",
        cluster.worker.log()
    );
}

/// A crate with a registry dependency (strsim) whose test kills a mutant of `close`.
fn spelling_crate() -> support::Repo {
    let repo = support::Repo::new();
    repo.write(
        "Cargo.toml",
        "[package]\nname = \"spelling\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nstrsim = \"=0.11.1\"\n",
    )
    .write(".gitignore", "target\n")
    .write(
        "src/lib.rs",
        "pub fn close(a: &str, b: &str) -> bool {\n    strsim::levenshtein(a, b) <= 1\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn one_edit_is_close() {\n        assert!(super::close(\"cat\", \"cart\"));\n        assert!(!super::close(\"cat\", \"dog\"));\n    }\n}\n",
    );
    repo.commit("spelling");
    repo
}

/// `assay mutate --cluster` of a crate with a registry dependency on a worker whose cargo home
/// is empty: the campaign's dependencies travel as one archive, named in every job (the build
/// of its schema's tree as much as the runs), so every mutant is judged, none errs.
#[test]
fn a_crates_dependencies_reach_a_worker_without_a_cargo_cache_as_an_archive() {
    let repo = spelling_crate();
    let out = tempfile::tempdir().expect("temp dir");
    let empty_cargo_home = out.path().join("empty-cargo-home");
    std::fs::create_dir_all(&empty_cargo_home).expect("cargo home");
    let cluster = Fleet::start(
        &[("CARGO_HOME".into(), empty_cargo_home.display().to_string())],
        &[],
    );
    let fleet = cluster.mutate(&repo, &out.path().join("fleet"), &CARGO_RUNNER, &[]);
    cluster.assert_every_mutant_judged(&fleet);
    assert_eq!(
        std::fs::read_dir(&empty_cargo_home)
            .expect("cargo home")
            .count(),
        0
    );
    let unpacked = cluster.unpacked_dependencies().len();
    assert_eq!(unpacked, 1);
}

/// A Go module and a node:test project, each with a killed and a surviving mutant (Go's three
/// held by one schema build).
fn go_and_node_projects() -> (support::Repo, support::Repo) {
    let go = support::Repo::new();
    go.write("go.mod", "module example.com/shelf\n\ngo 1.19\n")
        .write(
            "shelf/shelf.go",
            "// Package shelf says when to restock.\npackage shelf\n\n// Reorder says whether have items are under min.\nfunc Reorder(have, min int) bool {\n\treturn have < min\n}\n",
        )
        .write(
            "shelf/shelf_test.go",
            "package shelf\n\nimport \"testing\"\n\nfunc TestReorderBelowMinimum(t *testing.T) {\n\tif !Reorder(2, 5) || Reorder(9, 5) {\n\t\tt.Fatal(\"reorder below the minimum only\")\n\t}\n}\n",
        );
    go.commit("shelf");
    let node = support::Repo::new();
    node.write("package.json", "{ \"name\": \"shelf\", \"version\": \"1.0.0\" }\n")
        .write(
            "src/shelf.js",
            "'use strict';\n\nfunction reorder(have, min) {\n  return have < min;\n}\n\nmodule.exports = { reorder };\n",
        )
        .write(
            "test/shelf.test.js",
            "const { test } = require('node:test');\nconst assert = require('node:assert/strict');\nconst { reorder } = require('../src/shelf.js');\n\ntest('reorder below the minimum only', () => {\n  assert.equal(reorder(2, 5), true);\n  assert.equal(reorder(9, 5), false);\n});\n",
        );
    node.commit("shelf");
    (go, node)
}

/// The node:test project in TypeScript (CommonJS: no `"type"` in package.json), with types
/// on every line a mutant could be on.
fn typescript_project() -> support::Repo {
    let repo = support::Repo::new();
    repo.write("package.json", "{ \"name\": \"shelf\", \"version\": \"1.0.0\" }\n")
        .write(
            "src/shelf.ts",
            "export type Stock = { have: number; min: number };\n\nexport function reorder({ have, min }: Stock): boolean {\n  return have < min;\n}\n",
        )
        .write(
            "test/shelf.test.ts",
            "import { test } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { reorder } from '../src/shelf';\n\ntest('reorder below the minimum only', () => {\n  assert.equal(reorder({ have: 2, min: 5 }), true);\n  assert.equal(reorder({ have: 9, min: 5 }), false);\n});\n",
        );
    repo.commit("shelf");
    repo
}

#[test]
fn go_and_javascript_mutants_on_the_fleet_reach_the_verdicts_of_an_embedded_run() {
    let (go, node) = go_and_node_projects();
    let typescript = typescript_project();
    let out = tempfile::tempdir().expect("temp dir");
    let cluster = Fleet::start(&[], &[]);
    for (name, repo) in [("go", &go), ("node", &node), ("typescript", &typescript)] {
        let context = format!("{name}: ");
        let embedded = mutate_embedded(repo, &out.path().join(name), &[], &[], &context);
        let expected = statuses_of_every_kind(
            embedded.evidence.as_ref().expect("embedded report"),
            &["Killed", "Survived"],
            &context,
        );
        let fleet =
            cluster.mutate_to_a_survivor(repo, &out.path().join(name).join("fleet"), &[], &context);
        let fleet_report = fleet.evidence.as_ref().expect("fleet report");
        assert_eq!(
            statuses(fleet_report),
            expected,
            "{name}: per-mutant statuses"
        );
        if name == "go" {
            // Go's mutants ran from its package's test executable, built once on a worker
            // and fetched from the store by the workers that ran them.
            let schemata = &fleet_report["assay"]["schemata"];
            assert_eq!(schemata["builds"], 1, "{schemata:#}");
            assert_eq!(schemata["held"], 3, "{schemata:#}");
        }
        if name != "go" {
            // The JavaScript mutants ran on the worker from the one schema tree (TypeScript's
            // erased there by one job), each against the test files its site's trace named.
            let schemata = &fleet_report["assay"]["schemata"];
            assert_eq!(
                schemata["held"], fleet_report["assay"]["summary"]["mutants"],
                "{schemata:#}"
            );
            assert_eq!(fleet_report["assay"]["perLineSelection"], true);
            // Several to a node process on the worker, as embedded.
            assert!(
                schemata["batched"].as_u64().unwrap_or(0) >= 2,
                "{name}: {schemata:#}"
            );
        }
    }
}

/// `assay mutate --cluster` of a Go module requiring `example.com/greet`, which is in the
/// submitting host's module cache only, on a worker whose module cache and `GOPATH` are empty:
/// the module cache entries travel as one archive named in every job, so every mutant is
/// judged, none errs, and the worker's own cache stays empty.
#[test]
fn a_go_modules_dependencies_reach_a_worker_without_a_module_cache_as_an_archive() {
    let out = tempfile::tempdir().expect("temp dir");
    let proxy = out.path().join("proxy");
    let host_cache = out.path().join("host-modcache");
    support::go_module_proxy(&proxy);
    let repo = support::Repo::new();
    repo.write(
        "go.mod",
        "module example.com/app\n\ngo 1.19\n\nrequire example.com/greet v1.0.0\n",
    )
    .write(
        "app.go",
        "package app\n\nimport \"example.com/greet\"\n\n// Greeting greets one or many.\nfunc Greeting(n int) string {\n\tif n < 2 {\n\t\treturn greet.Hello(\"one\")\n\t}\n\treturn greet.Hello(\"many\")\n}\n",
    )
    .write(
        "app_test.go",
        "package app\n\nimport \"testing\"\n\nfunc TestGreeting(t *testing.T) {\n\tif Greeting(1) != \"hello, one\" || Greeting(5) != \"hello, many\" {\n\t\tt.Fatal(Greeting(1), Greeting(5))\n\t}\n}\n",
    );
    support::download_greet_module(&repo, &proxy, &host_cache);
    repo.commit("app");
    let empty_cache = out.path().join("empty-modcache");
    let empty_gopath = out.path().join("empty-gopath");
    std::fs::create_dir_all(&empty_cache).expect("module cache");
    std::fs::create_dir_all(&empty_gopath).expect("GOPATH");
    let cluster = Fleet::start(
        &[
            ("GOMODCACHE".into(), empty_cache.display().to_string()),
            ("GOPATH".into(), empty_gopath.display().to_string()),
        ],
        &[],
    );
    let fleet = cluster.mutate(
        &repo,
        &out.path().join("fleet"),
        &["--runner", "go"],
        &[
            ("GOMODCACHE".into(), host_cache.display().to_string()),
            ("GOPROXY".into(), "off".into()),
            ("GOSUMDB".into(), "off".into()),
        ],
    );
    cluster.assert_every_mutant_judged(&fleet);
    assert_eq!(std::fs::read_dir(&empty_cache).expect("cache").count(), 0);
    assert_eq!(std::fs::read_dir(&empty_gopath).expect("GOPATH").count(), 0);
    let unpacked = cluster.unpacked_dependencies();
    assert!(
        unpacked.len() == 1 && unpacked[0].starts_with("go-"),
        "{unpacked:?}"
    );
}
