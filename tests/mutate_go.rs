//! Go mutation end to end with the real `go` toolchain, on modules with no dependencies built
//! in the test: a proven fix whose mutation check kills some mutants of its changed lines and
//! lets others survive, and `assay mutate` on a whole module (the runner detected from its
//! `go.mod`), with a killed, a surviving, a timed-out, a non-compiling and an uncovered
//! mutant, checked in the Stryker document.

mod support;

use support::{Repo, Run, assay, prove, run};

const GO_MOD: &str = "module example.com/warehouse\n\ngo 1.19\n";

fn statuses(check: &serde_json::Value) -> Vec<(String, String)> {
    check["mutants"]
        .as_array()
        .expect("mutants")
        .iter()
        .map(|m| {
            (
                m["mutant"]["description"].as_str().unwrap_or("").to_owned(),
                m["outcome"]["status"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_go_fix_is_proven_and_its_mutation_check_kills_and_lets_survive() {
    let repo = Repo::new();
    repo.write("go.mod", GO_MOD)
        .write(
            "pager/pager.go",
            "// Package pager splits listings into pages.\npackage pager\n\n// Pages is the number of pages items fill at per a page.\nfunc Pages(items, per int) int {\n\treturn items / per\n}\n",
        )
        .write(
            "pager/pager_test.go",
            "package pager\n\nimport \"testing\"\n\nfunc TestFullPages(t *testing.T) {\n\tif got := Pages(10, 5); got != 2 {\n\t\tt.Fatalf(\"Pages(10, 5) = %d\", got)\n\t}\n}\n",
        );
    repo.commit("pager");
    repo.write(
        "pager/pager.go",
        "// Package pager splits listings into pages.\npackage pager\n\n// Pages is the number of pages items fill at per a page.\nfunc Pages(items, per int) int {\n\tpages := items / per\n\tif items%per > 0 {\n\t\tpages++\n\t}\n\treturn pages\n}\n",
    )
    .write(
        "pager/pager_test.go",
        "package pager\n\nimport \"testing\"\n\nfunc TestFullPages(t *testing.T) {\n\tif got := Pages(10, 5); got != 2 {\n\t\tt.Fatalf(\"Pages(10, 5) = %d\", got)\n\t}\n}\n\nfunc TestPartialLastPageIsCounted(t *testing.T) {\n\tif got := Pages(11, 5); got != 3 {\n\t\tt.Fatalf(\"Pages(11, 5) = %d\", got)\n\t}\n}\n",
    );
    repo.commit("pager: count the last partial page");
    let run = prove(
        &repo,
        &[
            "--base",
            "main~1",
            "--criterion",
            "test: TestPartialLastPageIsCounted",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.explain());
    let evidence = run.evidence.as_ref().expect("evidence written");
    let check = &evidence["mutation_check"];
    let mut statuses = statuses(check);
    statuses.sort();
    // 11 % 5 is 1: `*` (55) and `>=` both still count the partial page.
    assert_eq!(
        statuses,
        [
            ("`%` -> `*`", "survived"),
            ("`++` -> `--`", "killed"),
            ("`/` -> `*`", "killed"),
            ("`>` -> `<=`", "killed"),
            ("`>` -> `>=`", "survived"),
            ("`return pages` -> `return 0`", "killed"),
        ]
        .map(|(d, s)| (d.to_owned(), s.to_owned())),
        "{check:#}"
    );
    assert_eq!(check["excluded_files"][0]["path"], "pager/pager_test.go");
    assert_eq!(check["excluded_files"][0]["reason"], "test_file");
    let survivor =
        "TestPartialLastPageIsCounted passes with pager/pager.go:7 changed (`>` -> `>=`)";
    assert!(run.stdout.contains(survivor), "{}", run.explain());
}

/// The product: `Reorder`'s test never asks the minimum itself (`<=` survives), `Label`'s `+`
/// joins strings (`-` does not compile), `Capacity`'s `*=` as `/=` or `=` never ends, and
/// `report` has no test at all.
const STOCK: &str = "// Package stock counts what a warehouse holds.
package stock

// Reorder says whether a shelf holding have items must be restocked to keep min.
func Reorder(have, min int) bool {
\treturn have < min
}

// Label names a shelf by its aisle and its bin.
func Label(aisle, bin string) string {
\treturn aisle + bin
}

// Capacity is the smallest power of two that holds n items.
func Capacity(n int) int {
\tc := 1
\tfor c < n {
\t\tc *= 2
\t}
\treturn c
}
";

const STOCK_TESTS: &str = "package stock

import \"testing\"

func TestReorderBelowMinimum(t *testing.T) {
\tif !Reorder(2, 5) || Reorder(9, 5) {
\t\tt.Fatal(\"reorder below the minimum only\")
\t}
}

func TestLabelJoinsAisleAndBin(t *testing.T) {
\tif got := Label(\"A\", \"7\"); got != \"A7\" {
\t\tt.Fatalf(\"Label = %q\", got)
\t}
}

func TestCapacityRoundsUpToAPowerOfTwo(t *testing.T) {
\tif got := Capacity(5); got != 8 {
\t\tt.Fatalf(\"Capacity(5) = %d\", got)
\t}
}
";

fn mutate(repo: &Repo, out_dir: &tempfile::TempDir) -> Run {
    let json = out_dir.path().join("mutation.json");
    let mut command = assay();
    command
        .arg("mutate")
        .arg("-C")
        .arg(repo.path())
        .args(["--jobs", "2", "--json"])
        .arg(&json)
        .arg("--store")
        .arg(format!("file://{}", out_dir.path().join("store").display()))
        .env("ASSAY_STATE_DIR", out_dir.path().join("state"))
        .env("XDG_CACHE_HOME", out_dir.path().join("cache"));
    run(command, Some(json))
}

#[test]
fn mutate_on_a_go_module_kills_times_out_and_tells_a_mutant_that_does_not_compile() {
    let repo = Repo::new();
    repo.write("go.mod", GO_MOD)
        .write("stock/stock.go", STOCK)
        .write("stock/stock_test.go", STOCK_TESTS)
        .write(
            "report/report.go",
            "// Package report formats stock figures.\npackage report\n\n// Percent is part of whole, in percent.\nfunc Percent(part, whole int) int {\n\treturn part * 100 / whole\n}\n",
        );
    repo.commit("stock and report");
    let out_dir = tempfile::tempdir().expect("temp dir");
    let run = mutate(&repo, &out_dir);
    assert_eq!(run.code, 5, "survivors: exit 5\n{}", run.explain());
    let doc = run.evidence.as_ref().expect("the Stryker document");
    let files = doc["files"].as_object().expect("files");
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        ["report/report.go", "stock/stock.go"],
        "never a test file: {doc:#}"
    );
    let file = &doc["files"]["stock/stock.go"];
    assert_eq!(file["language"], "go");
    assert_eq!(file["source"], STOCK);
    let status = |line: u64, replacement: &str| -> String {
        let mutant = file["mutants"]
            .as_array()
            .expect("mutants")
            .iter()
            .find(|m| m["location"]["start"]["line"] == line && m["replacement"] == replacement)
            .unwrap_or_else(|| panic!("no mutant {replacement:?} on line {line}: {file:#}"));
        mutant["status"].as_str().unwrap_or("").to_owned()
    };
    assert_eq!(status(6, ">="), "Killed");
    assert_eq!(status(6, "<="), "Survived");
    assert_eq!(status(6, "false"), "Killed");
    assert_eq!(status(11, "-"), "CompileError");
    assert_eq!(status(11, "\"\""), "Killed");
    assert_eq!(status(18, "/="), "Timeout");
    assert_eq!(status(18, "="), "Timeout");
    assert_eq!(status(17, ">="), "Killed");
    assert_eq!(status(20, "0"), "Killed");
    let killed = file["mutants"]
        .as_array()
        .expect("mutants")
        .iter()
        .find(|m| m["status"] == "Killed")
        .expect("a kill");
    // A kill names its test as the mutant's covering tests do: package, then function.
    let killer = killed["killedBy"][0].as_str().expect("a killer");
    assert!(
        killer.starts_with("example.com/warehouse/stock::Test"),
        "{killed:#}"
    );
    assert!(
        killed["coveredBy"]
            .as_array()
            .expect("coveredBy")
            .iter()
            .any(|t| t == killer),
        "{killed:#}"
    );
    let uncovered = &doc["files"]["report/report.go"]["mutants"];
    for mutant in uncovered.as_array().expect("mutants") {
        assert_eq!(mutant["status"], "NoCoverage", "{mutant:#}");
    }
    assert!(
        run.stdout.contains("0 error, 0 pending"),
        "{}",
        run.explain()
    );
}
