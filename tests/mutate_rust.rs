//! `assay mutate` on a Rust crate with real cargo builds: a one-file crate with no dependencies,
//! built in the test and mutated through the runner detected from its Cargo.toml, built once
//! for all its mutants (the schemata); a killed, a surviving, a timed-out and a non-compiling
//! mutant, checked in the Stryker document field by field and in the HTML report; the same
//! statuses, mutant by mutant, with a build per mutant, doc tests included; a build that puts
//! its executables outside the tree; the red-baseline gate; a test that forges a failed build;
//! and one member of a workspace.

use crate::support;

use support::{Repo, Run, run, with_rust_toolchain};

const MANIFEST: &str = "[package]\nname = \"pager\"\nversion = \"0.1.0\"\nedition = \"2021\"\n";

/// The product code: `is_past_end`'s only test asks a page far past the end (its body as
/// `true` survives), `cover`'s `*=` as `/=` never ends, and `Book` has no `Default` (the body
/// of `book` as `Default::default()` does not compile).
const LIBRARY: &str = r#"/// Pages needed for `items` at `per` a page.
pub fn pages(items: u32, per: u32) -> u32 {
    items.div_ceil(per)
}

/// Whether `page` lies past the last page.
pub fn is_past_end(page: u32, last: u32) -> bool {
    page > last
}

pub struct Book(pub u32);

/// A book of `pages` pages.
pub fn book(pages: u32) -> Book {
    Book(pages)
}

/// The smallest power of two that is at least `n`.
pub fn cover(n: f64) -> f64 {
    let mut x = 1.0;
    while x < n {
        x *= 2.0;
    }
    x
}
"#;

const UNIT_TESTS: &str = r#"
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_pages() {
        assert_eq!(pages(10, 5), 2);
        assert_eq!(book(3).0, 3);
    }

    #[test]
    fn covers() {
        assert_eq!(cover(5.0), 8.0);
    }

    #[test]
    fn far_past_the_end() {
        assert!(is_past_end(9, 3));
    }
}
"#;

fn crate_repo(tests: &str) -> Repo {
    let repo = Repo::new();
    repo.write("Cargo.toml", MANIFEST)
        .write("src/lib.rs", &format!("{LIBRARY}{tests}"))
        .write(".gitignore", "/target\n");
    repo.commit("pager");
    repo
}

/// `assay mutate` on `repo` with `cargo test` (libtest's names, whether or not nextest is
/// installed), the runner left to detection; the Stryker JSON as the run's evidence.
fn mutate(repo: &Repo, out_dir: &tempfile::TempDir, args: &[&str]) -> Run {
    mutate_with(repo, out_dir, args, &[])
}

/// [`mutate`] with extra environment for the CLI.
fn mutate_with(
    repo: &Repo,
    out_dir: &tempfile::TempDir,
    args: &[&str],
    env: &[(&str, &str)],
) -> Run {
    let (mut command, json) = support::mutate_command(repo, out_dir.path());
    command
        .args(["--test-command", "cargo test"])
        .arg("--store")
        .arg(format!("file://{}", out_dir.path().join("store").display()))
        .args(args)
        .env("ASSAY_STATE_DIR", out_dir.path().join("state"))
        .env("XDG_CACHE_HOME", out_dir.path().join("cache"))
        .envs(env.iter().copied());
    with_rust_toolchain(&mut command);
    run(command, Some(json))
}

#[test]
fn a_crate_is_built_once_for_its_mutants_and_a_mutant_that_does_not_build_is_a_compile_error() {
    let repo = crate_repo(UNIT_TESTS);
    let out_dir = tempfile::tempdir().expect("temp dir");
    let html = out_dir.path().join("mutation.html");
    let html_arg = html.to_str().expect("a UTF-8 path");
    let run = mutate(&repo, &out_dir, &["--html", html_arg]);
    assert_eq!(run.code, 5, "a survivor: exit 5\n{}", run.explain());
    let doc = run.evidence.as_ref().expect("the Stryker document");
    assert_eq!(doc["schemaVersion"], "1");
    let files = doc["files"].as_object().expect("files");
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        ["src/lib.rs"],
        "only the product file: {doc:#}"
    );
    let file = &doc["files"]["src/lib.rs"];
    assert_eq!(file["language"], "rust");
    assert_eq!(file["source"], format!("{LIBRARY}{UNIT_TESTS}"));
    let mutants = file["mutants"].as_array().expect("mutants");
    let by_description = |description: &str| {
        mutants
            .iter()
            .find(|m| m["description"] == description)
            .unwrap_or_else(|| panic!("no mutant {description:?} among {file:#}"))
    };
    // Test code is never mutated: every mutant lies before the tests module.
    let test_line = LIBRARY.lines().count() + 1;
    for m in mutants {
        let line = m["location"]["start"]["line"].as_u64().expect("a line");
        assert!(line < test_line as u64, "a mutant in test code: {m:#}");
        assert_eq!(m["static"], false, "{m:#}");
    }
    // Each mutant ran only the tests whose threads reached its code unmutated.
    let covered = |description: &str| by_description(description)["coveredBy"].clone();
    assert_eq!(
        covered("`fn pages` body -> `0`"),
        serde_json::json!(["pager::tests::counts_pages"])
    );
    assert_eq!(
        covered("`fn is_past_end` body -> `true`"),
        serde_json::json!(["pager::tests::far_past_the_end"])
    );
    assert_eq!(
        covered("`*=` -> `/=`"),
        serde_json::json!(["pager::tests::covers"])
    );

    let killed = by_description("`fn pages` body -> `0`");
    assert_eq!(killed["status"], "Killed", "{killed:#}");
    assert_eq!(killed["mutatorName"], "function_body");
    assert_eq!(
        killed["killedBy"],
        serde_json::json!(["pager::tests::counts_pages"])
    );
    assert_eq!(killed["testsCompleted"], 1, "{killed:#}");
    assert_eq!(
        killed["location"],
        serde_json::json!({"start": {"line": 2, "column": 43}, "end": {"line": 4, "column": 2}})
    );
    assert!(killed["duration"].as_u64().is_some(), "{killed:#}");

    let comparison = by_description("`>` -> `<`");
    assert_eq!(comparison["status"], "Killed", "{comparison:#}");
    assert_eq!(comparison["mutatorName"], "comparison");
    assert_eq!(comparison["replacement"], "<");
    assert_eq!(
        comparison["killedBy"],
        serde_json::json!(["pager::tests::far_past_the_end"])
    );
    assert_eq!(
        comparison["location"],
        serde_json::json!({"start": {"line": 8, "column": 10}, "end": {"line": 8, "column": 11}})
    );

    let survived = by_description("`fn is_past_end` body -> `true`");
    assert_eq!(survived["status"], "Survived", "{survived:#}");
    assert_eq!(survived["killedBy"], serde_json::json!([]));
    assert_eq!(survived["testsCompleted"], 1, "{survived:#}");

    let unbuilt = by_description("`fn book` body -> `Default::default()`");
    assert_eq!(unbuilt["status"], "CompileError", "{unbuilt:#}");
    assert_eq!(unbuilt["killedBy"], serde_json::json!([]));
    assert!(unbuilt.get("testsCompleted").is_none(), "{unbuilt:#}");
    let reason = unbuilt["statusReason"].as_str().expect("a reason");
    assert!(
        reason.starts_with("does not compile: error[E0277]") && reason.contains("Default"),
        "the compiler's first error: {reason}"
    );

    // Never ends: stopped at the limit the unmutated run set.
    let hang = by_description("`*=` -> `/=`");
    assert_eq!(hang["status"], "Timeout", "{hang:#}");
    assert!(
        hang["statusReason"]
            .as_str()
            .is_some_and(|r| r.starts_with("ran past its ")),
        "{hang:#}"
    );

    // Built once: every other mutant ran from the one build's executables; the one whose own
    // code does not compile was judged by the schema build alone.
    let schemata = &doc["assay"]["schemata"];
    assert_eq!(schemata["held"], mutants.len() - 1, "{schemata:#}");
    assert_eq!(schemata["unviable"], 1, "{schemata:#}");
    assert_eq!(schemata["builds"], 2, "{schemata:#}");
    assert_eq!(
        schemata["builtAlone"],
        serde_json::json!({}),
        "{schemata:#}"
    );
    assert!(
        run.stdout.contains("built once: "),
        "the summary says so\n{}",
        run.explain()
    );

    let count = |status: &str| mutants.iter().filter(|m| m["status"] == status).count();
    let summary = &doc["assay"]["summary"];
    assert_eq!(summary["mutants"], mutants.len());
    assert_eq!(summary["killed"], count("Killed"));
    assert_eq!(summary["survived"], count("Survived"));
    assert_eq!(summary["timeout"], count("Timeout"));
    assert_eq!(summary["compile_error"], 1, "{summary:#}");
    assert_eq!(count("CompileError"), 1, "{file:#}");
    assert_eq!(summary["pending"], 0, "{summary:#}");
    assert_eq!(summary["runtime_error"], 0, "{summary:#}");
    assert_eq!(count("Survived"), 1, "{file:#}");
    // The score leaves the mutant that does not compile out of its denominator.
    let detected = (count("Killed") + count("Timeout")) as f64;
    let score = summary["mutation_score"].as_f64().expect("a score");
    assert!(
        (score - detected / (mutants.len() - 1) as f64).abs() < 1e-9,
        "{score} of {summary:#}"
    );
    assert_eq!(doc["assay"]["perLineSelection"], true);
    assert_eq!(
        doc["testFiles"]["pager"]["tests"]
            .as_array()
            .map(|t| t.len()),
        Some(3),
        "the three tests that killed, by their test binary: {doc:#}"
    );
    assert!(
        doc["assay"]["cache"]["notUsed"]
            .as_str()
            .is_some_and(|why| why.contains("Rust")),
        "the cache is not used for Rust mutants: {doc:#}"
    );
    assert!(
        run.stdout.contains(" 1 compile error,"),
        "the summary counts it apart\n{}",
        run.explain()
    );

    let page = std::fs::read_to_string(&html).expect("the HTML report");
    assert!(page.contains("<th>compile error</th>"), "{page}");
    assert!(
        page.contains("<div class=\"n\">1</div><div class=\"l\">compile error</div>"),
        "counted apart in the header: {page}"
    );
    assert_eq!(
        page.matches("data-status=\"CompileError\"").count(),
        1,
        "{page}"
    );
}

#[test]
fn a_crate_whose_unmutated_tests_fail_or_do_not_build_runs_no_mutant() {
    let failing = UNIT_TESTS.replace("cover(5.0), 8.0", "cover(5.0), 4.0");
    let not_building = UNIT_TESTS.replace("book(3).0", "book(3).pages");
    for (tests, why) in [(failing, "a failing test"), (not_building, "a build error")] {
        let repo = crate_repo(&tests);
        let out_dir = tempfile::tempdir().expect("temp dir");
        let run = mutate(&repo, &out_dir, &["--runner", "cargo"]);
        assert_eq!(run.code, 3, "{why}: exit 3\n{}", run.explain());
        assert!(
            run.stderr
                .contains("the unmutated baseline run did not pass"),
            "{why}\n{}",
            run.explain()
        );
        assert!(
            !run.stderr.contains("[mutate] 1/"),
            "{why}: no mutant ran\n{}",
            run.explain()
        );
    }
}

#[test]
fn a_test_that_forges_a_build_failure_when_the_mutant_breaks_it_does_not_make_a_compile_error() {
    // The code under test writes cargo's messages for a failed build past libtest's capture,
    // then ends the process: the kill stands.
    let forging = UNIT_TESTS.replace(
        "        assert!(is_past_end(9, 3));\n    }\n",
        r#"        if !is_past_end(9, 3) {
            use std::io::Write;
            let mut out = std::io::stdout();
            out.write_all(FORGED.as_bytes()).unwrap();
            out.flush().unwrap();
            std::process::exit(101);
        }
    }

    const FORGED: &str = concat!(
        "\n{\"reason\":\"compiler-message\",\"package_id\":\"path+file:///t/pager#0.1.0\",",
        "\"target\":{\"kind\":[\"lib\"],\"name\":\"pager\"},\"message\":{\"level\":\"error\",",
        "\"message\":\"forged\",\"rendered\":\"error[E0000]: forged\\n\"}}\n",
        "{\"reason\":\"build-finished\",\"success\":false}\n"
    );
"#,
    );
    assert_ne!(forging, UNIT_TESTS);
    let repo = crate_repo(&forging);
    let out_dir = tempfile::tempdir().expect("temp dir");
    let run = mutate(&repo, &out_dir, &[]);
    let doc = run.evidence.as_ref().expect("the Stryker document");
    let mutants = doc["files"]["src/lib.rs"]["mutants"]
        .as_array()
        .expect("mutants");
    let forged = mutants
        .iter()
        .find(|m| m["description"] == "`>` -> `<`")
        .unwrap_or_else(|| panic!("no `>` -> `<` among {doc:#}"));
    assert_eq!(forged["status"], "Killed", "{forged:#}");
    let reason = forged["statusReason"].as_str().expect("a reason");
    assert!(
        reason.contains("the mutant broke the test session")
            && reason.contains("a cargo message after the tests started"),
        "{reason}"
    );
    // Only the mutant that truly does not build.
    assert_eq!(doc["assay"]["summary"]["compile_error"], 1, "{doc:#}");
}

#[test]
fn a_workspace_member_named_as_a_path_is_the_only_one_mutated_and_the_whole_workspace_judges_it() {
    let repo = Repo::new();
    repo.copy_fixture("cargo-pager", &[]);
    // The fixture's base does not count a partial page yet, which its tests catch: fixed, so
    // the unmutated suite passes.
    let pager = support::fixture("cargo-pager/pager/src/lib.rs");
    repo.write(
        "pager/src/lib.rs",
        &pager.replace("    items / per\n", "    items.div_ceil(per)\n"),
    );
    repo.commit("pager and ledger");
    let out_dir = tempfile::tempdir().expect("temp dir");
    let run = mutate(&repo, &out_dir, &["ledger/"]);
    let doc = run
        .evidence
        .as_ref()
        .unwrap_or_else(|| panic!("the Stryker document\n{}", run.explain()));
    let files: Vec<&String> = doc["files"].as_object().expect("files").keys().collect();
    assert_eq!(files, ["ledger/src/lib.rs"], "{doc:#}");
    let mutants = doc["files"]["ledger/src/lib.rs"]["mutants"]
        .as_array()
        .expect("mutants");
    let zero = mutants
        .iter()
        .find(|m| m["description"] == "`fn total` body -> `0`")
        .unwrap_or_else(|| panic!("no `fn total` body -> `0` among {doc:#}"));
    assert_eq!(zero["status"], "Killed", "{zero:#}");
    assert_eq!(
        zero["killedBy"],
        serde_json::json!(["ledger::tests::counts_pages"])
    );
    assert!(mutants.iter().all(|m| m["status"] == "Killed"), "{doc:#}");
    assert_eq!(
        run.code,
        0,
        "every mutant killed: exit 0\n{}",
        run.explain()
    );
}

#[test]
fn a_mutant_that_breaks_only_another_members_build_is_a_compile_error_naming_that_member() {
    // `LINES` is a constant (no runtime switch can hold it): each of its mutants builds on its
    // own. `pages` still compiles with any value; `screen`, which fixes its buffer at 48
    // lines, does not.
    let repo = Repo::new();
    repo.write(
        "Cargo.toml",
        "[workspace]\nmembers = [\"pages\", \"screen\"]\nresolver = \"2\"\n",
    )
    .write(
        "pages/Cargo.toml",
        "[package]\nname = \"pages\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .write(
        "pages/src/lib.rs",
        "/// Lines on a page.\npub const LINES: usize = 40 + 8;\n\n\
         /// Pages needed for `lines`.\npub fn pages(lines: usize) -> usize {\n    \
         lines.div_ceil(LINES)\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    \
         fn counts_pages() {\n        assert_eq!(super::pages(100), 3);\n    }\n}\n",
    )
    .write(
        "screen/Cargo.toml",
        "[package]\nname = \"screen\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\npages = { path = \"../pages\" }\n",
    )
    .write(
        "screen/src/lib.rs",
        "/// One page's lines, fixed at 48.\npub fn page_buffer() -> [u8; 48] {\n    \
         [0; pages::LINES]\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    \
         fn a_page_fits() {\n        assert_eq!(super::page_buffer().len(), 48);\n    }\n}\n",
    )
    .write(".gitignore", "/target\n");
    repo.commit("pages and screen");
    let out_dir = tempfile::tempdir().expect("temp dir");
    let run = mutate(&repo, &out_dir, &["pages/"]);
    let doc = run
        .evidence
        .as_ref()
        .unwrap_or_else(|| panic!("the Stryker document\n{}", run.explain()));
    let mutants = doc["files"]["pages/src/lib.rs"]["mutants"]
        .as_array()
        .unwrap_or_else(|| panic!("mutants of pages/src/lib.rs in {doc:#}"));
    let constant: Vec<&serde_json::Value> = mutants
        .iter()
        .filter(|m| m["location"]["start"]["line"] == 2)
        .collect();
    assert!(!constant.is_empty(), "mutants of `40 + 8`: {doc:#}");
    for m in constant {
        assert_eq!(m["status"], "CompileError", "{m:#}");
        let reason = m["statusReason"].as_str().unwrap_or_default();
        assert!(
            reason.starts_with("does not compile")
                && reason.contains("mismatched types")
                && reason.contains("screen"),
            "the other member's error: {m:#}"
        );
    }
    let body = mutants
        .iter()
        .find(|m| m["description"] == "`fn pages` body -> `0`")
        .unwrap_or_else(|| panic!("no body mutant in {doc:#}"));
    assert_eq!(body["status"], "Killed", "{body:#}");
    let schemata = &doc["assay"]["schemata"];
    assert!(
        schemata["builtAlone"]
            .as_object()
            .is_some_and(|why| why.keys().any(|k| k.contains("compile time"))),
        "the constant's mutants built on their own: {schemata:#}"
    );
}

/// Each mutant's id and status.
fn statuses(run: &Run) -> std::collections::BTreeMap<String, String> {
    let doc = run
        .evidence
        .as_ref()
        .unwrap_or_else(|| panic!("the Stryker document\n{}", run.explain()));
    doc["files"]
        .as_object()
        .expect("files")
        .values()
        .flat_map(|f| f["mutants"].as_array().expect("mutants").iter())
        .map(|m| {
            (
                m["id"].as_str().expect("id").to_owned(),
                m["status"].as_str().expect("status").to_owned(),
            )
        })
        .collect()
}

#[test]
fn the_schemata_give_every_mutant_the_status_a_build_of_its_own_gives_it_doc_tests_included() {
    // `is_past_end`'s only test asks a page far past the end; its doc test asks one inside the
    // book, so only the doc test kills the body `true`.
    let library = LIBRARY.replace(
        "/// Whether `page` lies past the last page.\n",
        "/// Whether `page` lies past the last page.\n///\n/// ```\n/// assert!(!pager::is_past_end(2, 3));\n/// ```\n///\n/// ```should_panic\n/// assert!(pager::is_past_end(2, 3));\n/// ```\n",
    );
    assert_ne!(library, LIBRARY);
    // Reached three other ways: only from a thread a test spawns (no test's own thread, so
    // every test of the binary runs for it), only from an integration test, and never.
    let library = format!(
        "{library}\n/// Half of `n`.\npub fn halve(n: u32) -> u32 {{\n    n / 2\n}}\n\n\
         /// Twice `n`.\npub fn twice(n: u32) -> u32 {{\n    n * 2\n}}\n\n\
         /// Never tested.\npub fn unused(n: u32) -> u32 {{\n    n + 7\n}}\n"
    );
    let unit_tests = UNIT_TESTS.replace(
        "    #[test]\n    fn covers()",
        "    #[test]\n    fn halves_in_a_thread() {\n        \
         assert_eq!(std::thread::spawn(|| halve(8)).join().unwrap(), 4);\n    }\n\n    \
         #[test]\n    fn covers()",
    );
    assert_ne!(unit_tests, UNIT_TESTS);
    let repo = Repo::new();
    repo.write("Cargo.toml", MANIFEST)
        .write("src/lib.rs", &format!("{library}{unit_tests}"))
        .write(
            "tests/api.rs",
            "#[test]\nfn doubles() {\n    assert_eq!(pager::twice(3), 6);\n}\n",
        )
        .write(".gitignore", "/target\n");
    repo.commit("pager with doc tests");
    let once_dir = tempfile::tempdir().expect("temp dir");
    let once = mutate(&repo, &once_dir, &[]);
    let alone_dir = tempfile::tempdir().expect("temp dir");
    let alone = mutate_with(&repo, &alone_dir, &[], &[("ASSAY_MUTATE_SCHEMATA", "0")]);
    let doc = once.evidence.as_ref().expect("the Stryker document");
    assert!(
        doc["assay"]["schemata"]["held"]
            .as_u64()
            .is_some_and(|n| n > 5),
        "{:#}",
        doc["assay"]["schemata"]
    );
    assert!(
        alone.evidence.as_ref().expect("the Stryker document")["assay"]["schemata"].is_null(),
        "the schemata are off"
    );
    let (once, alone) = (statuses(&once), statuses(&alone));
    // A mutant no test reaches is not run from the build (`NoCoverage`); built on its own it
    // runs every test and survives. Both are undetected.
    let undetected = |status: &String| match status.as_str() {
        "NoCoverage" => "Survived".to_owned(),
        other => other.to_owned(),
    };
    let once_undetected: std::collections::BTreeMap<_, _> = once
        .iter()
        .map(|(id, s)| (id.clone(), undetected(s)))
        .collect();
    assert_eq!(once_undetected, alone, "the same status, mutant by mutant");
    let mutants = doc["files"]["src/lib.rs"]["mutants"]
        .as_array()
        .expect("mutants");
    let find = |description: &str| {
        mutants
            .iter()
            .find(|m| m["description"] == description)
            .unwrap_or_else(|| panic!("no mutant {description:?}"))
    };
    let in_thread = find("`fn halve` body -> `0`");
    assert_eq!(in_thread["status"], "Killed", "{in_thread:#}");
    assert_eq!(
        in_thread["coveredBy"],
        serde_json::json!(["pager::*"]),
        "a spawned thread is no test's own: the whole binary ran {in_thread:#}"
    );
    let integration = find("`fn twice` body -> `0`");
    assert_eq!(integration["status"], "Killed", "{integration:#}");
    assert_eq!(
        integration["coveredBy"],
        serde_json::json!(["pager::api::doubles"]),
        "{integration:#}"
    );
    assert_eq!(integration["testsCompleted"], 1, "{integration:#}");
    let never = find("`fn unused` body -> `0`");
    assert_eq!(never["status"], "NoCoverage", "{never:#}");
    let body_true = find("`fn is_past_end` body -> `true`");
    assert_eq!(
        body_true["status"], "Killed",
        "by the doc test: {body_true:#}"
    );
    assert!(
        body_true["killedBy"].to_string().contains("src_lib_rs_"),
        "{body_true:#}"
    );
    // The should_panic doc test still passes unmutated: nothing else is killed by it alone,
    // and the baseline passed (the run reached its mutants).
    assert!(once.values().any(|s| s == "Survived" || s == "Killed"));
}

#[test]
fn a_build_that_puts_its_test_executables_outside_the_tree_builds_each_mutant_on_its_own() {
    // The repository's own cargo configuration is hostile input: executables outside the job's
    // tree are never read by the worker, so nothing runs from that build.
    let repo = crate_repo(UNIT_TESTS);
    repo.write(
        ".cargo/config.toml",
        "[build]\ntarget-dir = \"/tmp/pager-target-elsewhere\"\n",
    );
    repo.commit("target dir outside the tree");
    let out_dir = tempfile::tempdir().expect("temp dir");
    let run = mutate(&repo, &out_dir, &[]);
    assert_eq!(run.code, 5, "a survivor: exit 5\n{}", run.explain());
    let doc = run.evidence.as_ref().expect("the Stryker document");
    let schemata = &doc["assay"]["schemata"];
    assert_eq!(schemata["held"], 0, "{schemata:#}");
    let note = schemata["note"]
        .as_str()
        .expect("why nothing ran from the build");
    assert!(note.contains("lies outside the job's tree"), "{note}");
    let statuses = statuses(&run);
    assert!(statuses.values().any(|s| s == "Killed"), "{statuses:?}");
    assert_eq!(
        statuses.values().filter(|s| *s == "CompileError").count(),
        1,
        "{statuses:?}"
    );
}
