//! Go mutation end to end with the real `go` toolchain, on modules with no dependencies built
//! in the test: a proven fix whose mutation check kills some mutants of its changed lines and
//! lets others survive, and `assay mutate` on a whole module (the runner detected from its
//! `go.mod`), with a killed, a surviving, a timed-out, a non-compiling and an uncovered
//! mutant, checked in the Stryker document; and `assay mutate` on two packages built once
//! against a build per mutant: the same statuses, compile errors told from the schema, and
//! each mutant's run holding only its package's tests that reach it.

use crate::support;

use std::path::PathBuf;
use std::process::Command;
use support::{Repo, Run, prove, run};

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
    let (command, json) = mutate_command(repo, out_dir);
    run(command, Some(json))
}

/// The `assay mutate` command of [`mutate`], its store, state and cache under `out_dir`, for a
/// caller that adds to it; with the path its report will be written to.
fn mutate_command(repo: &Repo, out_dir: &tempfile::TempDir) -> (Command, PathBuf) {
    let (mut command, json) = support::mutate_command(repo, out_dir.path());
    command
        .arg("--store")
        .arg(format!("file://{}", out_dir.path().join("store").display()))
        .env("ASSAY_STATE_DIR", out_dir.path().join("state"))
        .env("XDG_CACHE_HOME", out_dir.path().join("cache"));
    (command, json)
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

/// Two packages, one importing the other: the schema holds what a statement or condition can
/// switch (`Scale`'s `y := x * k` is a declaration, built alone), `Join`'s `-` is in its own
/// variant and does not compile, and `Clamp`'s boundary is never tested.
const CALC: &str = "// Package calc does sums.
package calc

// Add sums a and b.
func Add(a, b int) int {
\treturn a + b
}

// Scale multiplies x by k.
func Scale(x, k int) int {
\ty := x * k
\treturn y
}

// Clamp limits x to hi.
func Clamp(x, hi int) int {
\tif x > hi {
\t\treturn hi
\t}
\treturn x
}

// Join concatenates a and b.
func Join(a, b string) string {
\treturn a + b
}

// Tally keeps a running count.
type Tally struct{ count int }

// Record adds every count to the tally and returns the new count.
func (t *Tally) Record(counts ...int) int {
\ttotal := t.count + len(counts)
\tfor _, c := range counts {
\t\ttotal += c
\t}
\tt.count = total
\treturn total
}

// Largest is the largest of xs.
func Largest[T int | float64](xs []T) T {
\tbest := xs[0]
\tfor _, x := range xs[1:] {
\t\tbigger := x > best
\t\tif bigger {
\t\t\tbest = x
\t\t}
\t}
\treturn best
}

// Shelves is how many shelves a warehouse has.
const Shelves = 4 * 2

// Reserved reports whether c is a reserved tag.
func Reserved(c byte) bool {
\treturn c == 'r' || c == 'd'
}

// Red and Dark are the shaded tags.
const (
\tRed  = 'r'
\tDark = 'd'
)

// Shaded reports whether c is a shaded tag.
func Shaded(c byte) bool {
\treturn c == Red || c == Dark
}
";

const CALC_TESTS: &str = "package calc

import \"testing\"

func TestAdd(t *testing.T) {
\tif Add(2, 3) != 5 {
\t\tt.Fatal(\"2 + 3\")
\t}
}

func TestScale(t *testing.T) {
\tif Scale(2, 3) != 6 {
\t\tt.Fatal(\"2 * 3\")
\t}
}

func TestClamp(t *testing.T) {
\tif Clamp(9, 5) != 5 || Clamp(1, 5) != 1 {
\t\tt.Fatal(\"clamp\")
\t}
}

func TestJoin(t *testing.T) {
\tif Join(\"a\", \"b\") != \"ab\" {
\t\tt.Fatal(\"join\")
\t}
}

func TestRecord(t *testing.T) {
\tvar tally Tally
\tif tally.Record(2, 3) != 7 {
\t\tt.Fatal(\"record\")
\t}
}

func TestTags(t *testing.T) {
\tif !Reserved('r') || !Reserved('d') || Reserved('x') || !Shaded('d') || Shaded('x') {
\t\tt.Fatal(\"tags\")
\t}
}

func TestLargest(t *testing.T) {
\tif Largest([]int{3, 9, 4}) != 9 || Largest([]float64{1.5, 0.5}) != 1.5 {
\t\tt.Fatal(\"largest\")
\t}
}
";

const SHELF: &str = "// Package shelf fills shelves.
package shelf

import \"example.com/warehouse/calc\"

// Fill counts the items, at most limit.
func Fill(items []int, limit int) int {
\ttotal := 0
\tfor i := 0; i < len(items); i++ {
\t\ttotal = calc.Add(total, items[i])
\t}
\treturn calc.Clamp(total, limit)
}
";

const SHELF_TESTS: &str = "package shelf

import \"testing\"

func TestFill(t *testing.T) {
\tif Fill([]int{1, 2}, 10) != 3 {
\t\tt.Fatal(\"fill\")
\t}
}

func TestNothingFilled(t *testing.T) {
\tif 1+1 != 2 {
\t\tt.Fatal(\"arithmetic\")
\t}
}
";

fn mutate_with(repo: &Repo, out_dir: &tempfile::TempDir, schemata: bool) -> Run {
    let (mut command, json) = mutate_command(repo, out_dir);
    command
        .arg("--no-cache")
        .env("ASSAY_MUTATE_SCHEMATA", if schemata { "1" } else { "0" });
    run(command, Some(json))
}

/// A mutant: file, line, replacement, status, covering tests, tests completed.
type Row = (String, u64, String, String, Vec<String>, u64);

/// Every mutant, by file, line and replacement.
fn by_mutant(doc: &serde_json::Value) -> Vec<Row> {
    let mut all = Vec::new();
    for (path, file) in doc["files"].as_object().expect("files") {
        for m in file["mutants"].as_array().expect("mutants") {
            all.push((
                path.clone(),
                m["location"]["start"]["line"].as_u64().unwrap_or(0),
                m["replacement"].as_str().unwrap_or("").to_owned(),
                m["status"].as_str().unwrap_or("").to_owned(),
                m["coveredBy"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|t| t.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default(),
                m["testsCompleted"].as_u64().unwrap_or(0),
            ));
        }
    }
    all.sort();
    all
}

#[test]
fn go_mutants_built_once_agree_with_a_build_per_mutant_and_run_only_their_covering_tests() {
    let repo = Repo::new();
    repo.write("go.mod", GO_MOD)
        .write("calc/calc.go", CALC)
        .write("calc/calc_test.go", CALC_TESTS)
        .write("shelf/shelf.go", SHELF)
        .write("shelf/shelf_test.go", SHELF_TESTS);
    repo.commit("calc and shelf");
    let once_dir = tempfile::tempdir().expect("temp dir");
    let once = mutate_with(&repo, &once_dir, true);
    assert_eq!(once.code, 5, "survivors: exit 5\n{}", once.explain());
    let alone_dir = tempfile::tempdir().expect("temp dir");
    let alone = mutate_with(&repo, &alone_dir, false);
    assert_eq!(alone.code, 5, "survivors: exit 5\n{}", alone.explain());
    let once_doc = once.evidence.as_ref().expect("the Stryker document");
    let alone_doc = alone.evidence.as_ref().expect("the Stryker document");

    // Built once: one package executable each, the declarations' mutants in copies of their
    // functions (a method with a variadic parameter, a generic function), the package-level
    // constant's alone; unviable without a build of its own: `Join`'s `-` (its error is in
    // its own variant) and `return y` → `return 0` (it removes `y`'s last use).
    let schemata = &once_doc["assay"]["schemata"];
    assert!(schemata["held"].as_u64().unwrap_or(0) >= 16, "{schemata:#}");
    assert_eq!(schemata["unviable"], 2, "{schemata:#}");
    let alone_why = schemata["builtAlone"].as_object().expect("built alone");
    assert_eq!(
        alone_why.keys().collect::<Vec<_>>(),
        [
            "outside every function body (a constant, a package-level variable), where no switch can go"
        ],
        "{schemata:#}"
    );
    assert!(alone_doc["assay"]["schemata"].is_null(), "{alone_doc:#}");

    // (a) The same status for every mutant (no coverage is undetected, as a survivor is).
    let fold = |s: &str| {
        if s == "NoCoverage" {
            "Survived".to_owned()
        } else {
            s.to_owned()
        }
    };
    let once_all = by_mutant(once_doc);
    let alone_all = by_mutant(alone_doc);
    assert_eq!(once_all.len(), alone_all.len());
    assert!(once_all.len() >= 12, "{once_all:#?}");
    for (a, b) in once_all.iter().zip(&alone_all) {
        assert_eq!((&a.0, a.1, &a.2), (&b.0, b.1, &b.2));
        assert_eq!(fold(&a.3), fold(&b.3), "{a:?} against {b:?}");
    }
    let find = |all: &[Row], path: &str, line: u64, r: &str| {
        all.iter()
            .find(|m| m.0 == path && m.1 == line && m.2 == r)
            .unwrap_or_else(|| panic!("no mutant {r:?} at {path}:{line}: {all:#?}"))
            .clone()
    };
    // (b) A variant that does not compile is a compile error, never a kill, in both ways.
    assert_eq!(find(&once_all, "calc/calc.go", 25, "-").3, "CompileError");
    assert_eq!(find(&alone_all, "calc/calc.go", 25, "-").3, "CompileError");
    assert_eq!(find(&once_all, "calc/calc.go", 11, "/").3, "Killed");
    assert_eq!(find(&once_all, "calc/calc.go", 12, "0").3, "CompileError");
    assert_eq!(find(&alone_all, "calc/calc.go", 12, "0").3, "CompileError");
    assert_eq!(find(&once_all, "calc/calc.go", 17, ">=").3, "Survived");
    // The progress counts what settles without a run as the summary does: the two unviable
    // mutants as compile errors, not as no coverage.
    let no_coverage = once_all.iter().filter(|m| m.3 == "NoCoverage").count();
    let started = once
        .stderr
        .lines()
        .find(|l| l.starts_with("[mutate] ") && l.contains(" to run, "))
        .unwrap_or_else(|| panic!("no start line: {}", once.explain()));
    assert!(
        started.contains(&format!(", 2 compile error, {no_coverage} no coverage (")),
        "{started}"
    );
    // (c) Only the tests of its package that reach it run: `Add` is reached by `TestAdd`
    // alone in its package (shelf's tests reach it too, from another package), where a build
    // per mutant runs all seven of calc's tests.
    let add = find(&once_all, "calc/calc.go", 6, "-");
    assert_eq!(add.3, "Killed");
    assert_eq!(add.4, ["example.com/warehouse/calc::TestAdd"]);
    let clamp = find(&once_all, "calc/calc.go", 17, ">=");
    assert_eq!(clamp.4, ["example.com/warehouse/calc::TestClamp"]);
    assert_eq!(clamp.5, 1, "{clamp:?}");
    assert_eq!(find(&alone_all, "calc/calc.go", 17, ">=").5, 7);
    // A loop's condition and update hold the switch too; the shelf's mutants run its own
    // tests, and only the one that reaches them.
    let bound = find(&once_all, "shelf/shelf.go", 9, "<=");
    assert_eq!(bound.4, ["example.com/warehouse/shelf::TestFill"]);
    // A declaration's mutant runs its function's copy, reached by the tests that call it.
    let scale = find(&once_all, "calc/calc.go", 11, "/");
    assert_eq!(scale.4, ["example.com/warehouse/calc::TestScale"]);
    let record = find(&once_all, "calc/calc.go", 33, "-");
    assert_eq!(record.3, "Killed");
    assert_eq!(record.4, ["example.com/warehouse/calc::TestRecord"]);
    assert_eq!(find(&alone_all, "calc/calc.go", 33, "-").3, "Killed");
    assert_eq!(find(&once_all, "calc/calc.go", 45, ">=").3, "Survived");
    assert_eq!(find(&once_all, "calc/calc.go", 45, "<=").3, "Killed");
    assert_eq!(
        fold(&find(&once_all, "calc/calc.go", 54, "/").3),
        "Survived"
    );
    // vet would call `c == 'r' && c == 'd'` suspect; a mutant's run is `go test -vet=off`
    // either way, so the schema's build does not refuse it: it runs, and its test kills it.
    for line in [58, 69] {
        assert_eq!(find(&once_all, "calc/calc.go", line, "&&").3, "Killed");
        assert_eq!(find(&alone_all, "calc/calc.go", line, "&&").3, "Killed");
    }
    // `i--` indexes items[-1]: a panic, a kill from the executable as from `go test`.
    assert_eq!(find(&once_all, "shelf/shelf.go", 9, "--").3, "Killed");
}

#[test]
fn a_test_command_other_than_go_test_is_run_as_given_never_ignored() {
    let repo = Repo::new();
    repo.write("go.mod", GO_MOD)
        .write("stock/stock.go", STOCK)
        .write("stock/stock_test.go", STOCK_TESTS);
    repo.commit("stock");
    // A command that judges nothing stops the run: the built-once way used to ignore it and
    // report a score.
    let out_dir = tempfile::tempdir().expect("temp dir");
    let (mut command, json) = mutate_command(&repo, &out_dir);
    command.args(["--no-cache", "--test-command", "false", "stock/stock.go:6"]);
    let refused = run(command, Some(json));
    assert_eq!(refused.code, 3, "{}", refused.explain());
    assert!(refused.stderr.contains("baseline"), "{}", refused.explain());
    // Flags of its own: each mutant runs the command, and the summary says why none was
    // built once.
    let out_dir = tempfile::tempdir().expect("temp dir");
    let (mut command, json) = mutate_command(&repo, &out_dir);
    command.args([
        "--no-cache",
        "--test-command",
        "go test -short",
        "stock/stock.go:6",
    ]);
    let flagged = run(command, Some(json));
    assert_eq!(flagged.code, 5, "a survivor: {}", flagged.explain());
    assert!(
        flagged
            .stdout
            .contains("the test command is `go test -short`, not `go test`"),
        "{}",
        flagged.explain()
    );
    let doc = flagged.evidence.as_ref().expect("the Stryker document");
    let statuses: Vec<&str> = doc["files"]["stock/stock.go"]["mutants"]
        .as_array()
        .expect("mutants")
        .iter()
        .map(|m| m["status"].as_str().unwrap_or(""))
        .collect();
    assert!(statuses.contains(&"Killed"), "{doc:#}");
    assert!(statuses.contains(&"Survived"), "{doc:#}");
}
