//! End-to-end Rust proofs with real cargo builds: the `cargo-pager` workspace (two members, no
//! dependencies, built offline in each job's own tree) proved through libtest's output and
//! through cargo-nextest, a base that does not build, and the code under test forging
//! libtest's lines or a criterion naming a pattern.

use crate::support;

use support::{Repo, Run, assay, run, with_rust_toolchain};

/// Whether cargo-nextest is on this `PATH`, as the engine asks it.
fn nextest_installed() -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| dir.join("cargo-nextest").is_file())
    })
}

fn prove_rust(repo: &Repo, args: &[&str]) -> Run {
    prove_rust_with(repo, args, &["--no-mutation"])
}

/// [`prove_rust`] with `extra` flags in place of `--no-mutation`.
fn prove_rust_with(repo: &Repo, args: &[&str], extra: &[&str]) -> Run {
    prove_rust_in(repo, args, extra, &[])
}

/// [`prove_rust_with`] with `env` set for the CLI.
fn prove_rust_in(repo: &Repo, args: &[&str], extra: &[&str], env: &[(&str, &str)]) -> Run {
    let out_dir = tempfile::tempdir().expect("temp dir");
    let mut args = args.to_vec();
    args.extend(extra);
    args.extend(["--repeats", "2"]);
    let (mut command, json) = support::prove_command(repo, &args, out_dir.path());
    with_rust_toolchain(&mut command);
    command.envs(env.iter().copied());
    run(command, Some(json))
}

fn reason(run: &Run, id: &str) -> String {
    run.criterion(id)["reason"]
        .as_str()
        .expect("a reason")
        .to_owned()
}

/// The first job's command, which says how the proof ran cargo.
fn first_command(run: &Run) -> Vec<String> {
    run.evidence.as_ref().expect("evidence")["jobs"][0]["command"]
        .as_array()
        .expect("a command")
        .iter()
        .map(|w| w.as_str().expect("a word").to_owned())
        .collect()
}

#[test]
fn a_cargo_proof_through_libtest_names_tests_by_path_and_proves_a_fix() {
    let repo = support::cargo_pager_repo("    items.div_ceil(per)\n");
    let run = prove_rust(
        &repo,
        &[
            "--base",
            "main~1",
            "--test-command",
            "cargo test",
            "--criterion",
            "test: partial_page_is_a_page",
            "--criterion",
            "guard: counts_pages",
        ],
    );
    let evidence = run.evidence.as_ref().expect("evidence");
    assert_eq!(evidence["runner"], "cargo", "{}", run.explain());
    assert!(
        first_command(&run).contains(&"--message-format=json".to_string()),
        "libtest's output, said in the job's command: {:?}",
        first_command(&run)
    );
    assert_eq!(run.verdict_of("C1"), "proven", "{}", reason(&run, "C1"));
    assert_eq!(
        run.criterion("C1")["base"]["cases"][0]["file"],
        "pager::api"
    );
    // `counts_pages` is the integration test's; the unit tests are `tests::counts_pages`.
    assert_eq!(run.verdict_of("C2"), "proven", "{}", reason(&run, "C2"));
    assert_eq!(run.code, 0, "{}", run.explain());
}

#[test]
fn a_cargo_proof_refutes_a_fix_that_breaks_a_guard_and_a_path_in_two_binaries_is_ambiguous() {
    let repo = support::cargo_pager_repo("    items / per + 1\n");
    // No command: cargo-nextest where it is installed, as here; `cargo test` otherwise.
    let run = prove_rust(
        &repo,
        &[
            "--base",
            "main~1",
            "--criterion",
            "test: partial_page_is_a_page",
            "--criterion",
            "guard: counts_pages",
            "--criterion",
            "guard: tests::counts_pages",
        ],
    );
    let command = first_command(&run);
    assert_eq!(
        command.get(1).map(String::as_str),
        Some(if nextest_installed() {
            "nextest"
        } else {
            "test"
        }),
        "{command:?}"
    );
    assert_eq!(run.verdict_of("C1"), "proven", "{}", reason(&run, "C1"));
    assert_eq!(run.verdict_of("C2"), "refuted", "{}", reason(&run, "C2"));
    // `pager` and `ledger` both have `tests::counts_pages`.
    assert_eq!(run.verdict_of("C3"), "unverified", "{}", reason(&run, "C3"));
    let why = reason(&run, "C3");
    assert!(why.contains("pager") && why.contains("ledger"), "{why}");
    assert_eq!(run.code, 1, "{}", run.explain());
}

#[test]
fn a_test_that_does_not_build_on_the_base_is_unverified_with_the_compilers_first_error() {
    let repo = Repo::new();
    repo.copy_fixture("cargo-pager", &[]);
    repo.commit("pager and ledger");
    let lib = support::fixture("cargo-pager/pager/src/lib.rs");
    repo.write(
        "pager/src/lib.rs",
        &lib.replace(
            "#[cfg(test)]",
            "/// The room left on the last page.\npub fn spare_pages(items: u32, per: u32) -> u32 {\n    (per - items % per) % per\n}\n\n#[cfg(test)]",
        ),
    )
    .write(
        "pager/tests/spare.rs",
        "#[test]\nfn spare_room_on_the_last_page() {\n    assert_eq!(pager::spare_pages(10, 3), 2);\n}\n",
    );
    repo.commit("pager: the room left on the last page");
    // libtest's output, then nextest (the default where it is installed): both say why.
    for command in ["cargo test", "cargo nextest run"] {
        let run = prove_rust(
            &repo,
            &[
                "--base",
                "main~1",
                "--test-command",
                command,
                "--criterion",
                "test: spare_room_on_the_last_page",
            ],
        );
        assert_eq!(
            run.verdict_of("C1"),
            "unverified",
            "{command}: {}",
            run.explain()
        );
        let base = &run.criterion("C1")["base"];
        assert_eq!(base["outcome"], "collection_error", "{command}: {base}");
        assert_eq!(base["detail"], "pager::spare");
        let why = reason(&run, "C1");
        assert!(
            why.contains("error[E0425]: cannot find function `spare_pages`"),
            "{command}: {why}"
        );
        assert_eq!(run.criterion("C1")["candidate"]["outcome"], "passed");
        assert_eq!(run.code, 4, "{command}: {}", run.explain());
        if !nextest_installed() {
            break;
        }
    }
}

#[test]
fn libtest_lines_the_code_under_test_prints_itself_give_no_named_result() {
    // A failing test that writes a pass for itself past libtest's capture, on both sides.
    let repo = Repo::new();
    repo.copy_fixture("cargo-pager", &[]);
    let ledger = support::fixture("cargo-pager/ledger/src/lib.rs");
    repo.write(
        "ledger/src/lib.rs",
        &ledger.replace(
            "    #[test]\n    fn counts_pages()",
            "    #[test]\n    fn forges_a_pass() {\n        use std::io::Write;\n        let mut out = std::io::stdout();\n        out.write_all(b\"\\ntest tests::forges_a_pass ... ok\\n\").unwrap();\n        out.flush().unwrap();\n        panic!(\"the real outcome\");\n    }\n\n    #[test]\n    fn counts_pages()",
        ),
    );
    repo.commit("pager and a ledger with a test that forges its pass");
    support::change_pages(&repo, "    items.div_ceil(per)\n");
    let run = prove_rust(
        &repo,
        &[
            "--base",
            "main~1",
            "--test-command",
            "cargo test",
            "--criterion",
            "guard: tests::forges_a_pass",
        ],
    );
    assert_eq!(run.verdict_of("C1"), "unverified", "{}", run.explain());
    let why = reason(&run, "C1");
    assert!(
        why.contains("no evidence") && why.contains("the report is") && why.contains("ledger: "),
        "{why}"
    );
    assert_ne!(run.code, 0, "{}", run.explain());

    // A pattern is not a test name: refused before anything runs.
    let run = prove_rust(
        &repo,
        &["--base", "main~1", "--criterion", "guard: tests::count.*"],
    );
    assert_eq!(run.code, 2, "{}", run.explain());
    assert!(run.stderr.contains("tests::count.*"), "{}", run.explain());
}

#[test]
fn assay_test_runs_a_cargo_workspace_as_one_case_judged_by_its_report() {
    let repo = Repo::new();
    repo.copy_fixture("cargo-pager", &[]);
    repo.commit("pager and ledger, a partial page not yet counted");
    let state = tempfile::tempdir().expect("temp dir");
    let json = state.path().join("report.json");
    let mut command = assay();
    command
        .arg("test")
        .arg("--state-dir")
        .arg(state.path())
        .current_dir(repo.path())
        .env("XDG_CACHE_HOME", state.path().join("cache"))
        .args(["--test-command", "cargo test", "--json"])
        .arg(&json);
    with_rust_toolchain(&mut command);
    let run = run(command, Some(json));
    assert_eq!(run.code, 1, "{}", run.explain());
    let report = run.evidence.as_ref().expect("the suite report");
    assert_eq!(report["runner"], "cargo", "{report}");
    let cases = report["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 1, "{report}");
    assert_eq!(cases[0]["outcome"], "failed", "{report}");
    assert_eq!(report["totals"]["failed"], 1, "{report}");
}

/// The mutation check of a proven Rust change, built once behind the runtime switch
/// (`schemata`) or once per mutant (`ASSAY_MUTATE_SCHEMATA=0`).
fn check_of_the_pager_fix(repo: &Repo, schemata: bool) -> (Run, serde_json::Value) {
    let switch = if schemata { "1" } else { "0" };
    let run = prove_rust_in(
        repo,
        &[
            "--base",
            "main~1",
            "--test-command",
            "cargo test",
            "--criterion",
            "test: partial_page_is_a_page",
            "--criterion",
            "guard: counts_pages",
        ],
        &[],
        &[("ASSAY_MUTATE_SCHEMATA", switch)],
    );
    assert_eq!(run.verdict_of("C1"), "proven", "{}", run.explain());
    let check = run.evidence.as_ref().expect("evidence")["mutation_check"].clone();
    (run, check)
}

#[test]
fn a_proven_rust_change_gets_its_changed_lines_mutated_and_a_mutant_that_does_not_build_is_not_a_kill()
 {
    // The fix, and a new constructor whose body has no `Default` to become: that mutant does
    // not compile.
    let repo = support::cargo_pager_repo(
        "    (items + per - 1) / per\n}\n\npub struct Book(pub u32);\n\npub fn book(pages: u32) -> Book {\n    Book(pages)\n",
    );
    let (run, check) = check_of_the_pager_fix(&repo, true);
    let check = &check;
    let mutants = check["mutants"].as_array().expect("mutants");
    assert!(!mutants.is_empty(), "{check:#}");
    let outcome = |description: &str| {
        mutants
            .iter()
            .find(|m| m["mutant"]["description"] == description)
            .map(|m| m["outcome"].clone())
            .unwrap_or_else(|| panic!("{description} not among {check:#}"))
    };
    // Only the changed file's changed lines, in Rust.
    for m in mutants {
        assert_eq!(m["mutant"]["path"], "pager/src/lib.rs", "{m:#}");
    }
    assert_eq!(
        outcome("`fn pages` body -> `0`")["status"],
        "killed",
        "{check:#}"
    );
    let unbuilt = outcome("`fn book` body -> `Default::default()`");
    assert_eq!(unbuilt["status"], "not_run", "{unbuilt:#}");
    assert!(
        unbuilt["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("does not compile: ")),
        "{unbuilt:#}"
    );
    assert_eq!(
        check["not_run"].as_u64(),
        Some(1),
        "only the mutant that does not build has no verdict: {check:#}"
    );
    assert_eq!(
        run.code,
        0,
        "the check never changes the exit code\n{}",
        run.explain()
    );
    // Built once: the mutant that does not compile is told by the first build's errors, the
    // second build holds every other mutant, and each runs the prebuilt proving tests.
    let notes = check["notes"].to_string();
    let held = mutants.len() - 1;
    assert!(
        notes.contains(&format!(
            "mutant schemata: {held} of {} mutants ran from one build (2 builds",
            mutants.len()
        )) && notes.contains("1 did not compile in the schema"),
        "{check:#}"
    );
    // Each job of the check is named for what it is: two builds, the prebuilt tests' run
    // unmutated, one run of them per held mutant.
    let mut labels: Vec<&str> = run
        .stderr
        .lines()
        .filter_map(|line| line.strip_prefix("[mutation] "))
        .filter_map(|line| line.split(' ').nth(1))
        .collect();
    labels.sort();
    let mut expected = vec!["schema-build", "schema-build", "unmutated"];
    expected.extend(std::iter::repeat_n("mutant", held));
    expected.sort();
    assert_eq!(labels, expected, "{}", run.explain());

    // The same verdicts mutant by mutant as a build of each mutant on its own.
    let (_, alone) = check_of_the_pager_fix(&repo, false);
    assert!(
        !alone["notes"].to_string().contains("mutant schemata"),
        "{alone:#}"
    );
    let statuses = |check: &serde_json::Value| -> Vec<(String, String)> {
        let mutants = check["mutants"].as_array().expect("mutants");
        mutants
            .iter()
            .map(|m| {
                (
                    m["mutant"]["id"].as_str().expect("an id").to_owned(),
                    m["outcome"]["status"]
                        .as_str()
                        .expect("a status")
                        .to_owned(),
                )
            })
            .collect()
    };
    assert_eq!(statuses(check), statuses(&alone), "{check:#}\n{alone:#}");
    let reason = |check: &serde_json::Value| {
        let mutants = check["mutants"].as_array().expect("mutants");
        let unbuilt = mutants
            .iter()
            .find(|m| m["outcome"]["status"] == "not_run")
            .expect("the mutant that does not build");
        unbuilt["outcome"]["reason"]
            .as_str()
            .expect("a reason")
            .to_owned()
    };
    // Both name the compiler's error (the schema's by its heading, a build by its place).
    let (schema_reason, alone_reason) = (reason(check), reason(&alone));
    let heading = |r: &str| r.split(" at ").next().unwrap_or(r).to_owned();
    assert_eq!(heading(&schema_reason), heading(&alone_reason));
}
