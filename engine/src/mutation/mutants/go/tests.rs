use super::*;
use crate::mutation::mutants::{ChangedFile, apply_edit, languages};

/// Every mutant of `files`' changed lines, at most `cap` per file.
fn plan(files: &[ChangedFile], cap: Option<usize>) -> crate::mutation::mutants::MutationPlan {
    crate::mutation::mutants::plan_mutants_in(&Go, files, cap, OperatorSet::Default)
}

const LEDGER: &str = r#"// Package ledger keeps accounts.
package ledger

import (
	"errors"
	"fmt"
)

// Entry is one posting.
type Entry struct {
	Amount int
	Memo   string
}

type Ledger struct {
	entries []Entry
	limit   int
}

var ErrOverdrawn = errors.New("overdrawn")

func (l *Ledger) Balance() int {
	total := 0
	for _, e := range l.entries {
		if e.Amount == 0 {
			continue
		}
		total += e.Amount
	}
	return total
}

func (l *Ledger) Withdraw(amount int) (int, error) {
	if l.Balance()-amount < -l.limit {
		return 0, ErrOverdrawn
	}
	l.entries = append(l.entries, Entry{Amount: -amount, Memo: "withdrawal"})
	return l.Balance(), nil
}

func Label(e Entry) string {
	return fmt.Sprintf("%d", e.Amount) + " " + e.Memo
}

func FirstLarge(entries []Entry, floor int) (Entry, bool) {
	for i := 0; i < len(entries); i++ {
		switch {
		case entries[i].Amount >= floor && floor > 0:
			return entries[i], true
		}
	}
	return Entry{}, false
}

func Flags(a, b uint) uint {
	a <<= 1
	a--
	return a&b | a>>2 ^ b
}

func Scan(rows [][]int) int {
	n := 0
outer:
	for _, row := range rows {
		for _, v := range row {
			if v < 0 {
				break outer
			}
			n *= 2
			n %= 7
		}
	}
	switch n {
	case 3:
		break
	}
	return n
}
"#;

fn all_lines(path: &str, source: &str) -> ChangedFile {
    let lines = source.lines().count() as u32;
    ChangedFile {
        path: path.into(),
        bytes: source.as_bytes().to_vec(),
        changed_lines: (1..=lines).collect(),
    }
}

fn descriptions(plan: &MutationPlan) -> Vec<String> {
    plan.mutants
        .iter()
        .map(|m| format!("{}:{} {}", m.line, m.operator, m.description))
        .collect()
}

use crate::mutation::mutants::MutationPlan;

#[test]
fn every_go_mutant_parses_and_keeps_every_line_number() {
    let plan = plan(&[all_lines("ledger/ledger.go", LEDGER)], None);
    assert!(plan.mutants.len() > 30, "{:#?}", descriptions(&plan));
    for mutant in &plan.mutants {
        let bytes = apply_edit(LEDGER.as_bytes(), &mutant.edit).expect("the edit fits");
        let text = String::from_utf8(bytes).expect("UTF-8");
        assert_eq!(
            text.matches('\n').count(),
            LEDGER.matches('\n').count(),
            "{}",
            mutant.label()
        );
        assert!(syntax::parse_clean(&text).is_ok(), "{}", mutant.label());
        // The edit starts on the line the mutant names.
        assert_eq!(
            LEDGER[..mutant.edit.start].matches('\n').count() as u32 + 1,
            mutant.line,
            "{}",
            mutant.label()
        );
    }
}

#[test]
fn go_mutants_cover_gremlins_families_and_zero_returns() {
    let plan = plan(&[all_lines("ledger/ledger.go", LEDGER)], None);
    let found = descriptions(&plan);
    for expected in [
        "25:comparison `==` -> `!=`",
        "26:loop_control `continue` -> `break`",
        "28:augmented_assignment `+=` -> `-=`",
        "28:augmented_assignment `+=` -> `=`",
        "30:return_constant `return total` -> `return 0`",
        "34:arithmetic `-` -> `+`",
        "34:swap_bound `<` -> `<=`",
        "34:comparison `<` -> `>=`",
        "34:unary `-l.limit` -> `+l.limit`",
        "35:return_constant `return 0, ErrOverdrawn` -> `return 0, nil`",
        "38:return_constant `return l.Balance(), nil` -> `return 0, nil`",
        "42:return_constant `return fmt.Sprintf(\"%d\", e.Amount) + \" \" + e.Me…` -> `return \"\"`",
        "46:increment_decrement `++` -> `--`",
        "48:boolean `&&` -> `||`",
        "48:swap_bound `>=` -> `>`",
        "49:return_constant `return entries[i], true` -> `return *new(Entry), false`",
        "56:augmented_assignment `<<=` -> `>>=`",
        "57:increment_decrement `--` -> `++`",
        "58:bitwise `&` -> `|`",
        "58:bitwise `|` -> `&`",
        "58:bitwise `>>` -> `<<`",
        "58:bitwise `^` -> `&`",
        "69:augmented_assignment `*=` -> `/=`",
        "70:augmented_assignment `%=` -> `*=`",
    ] {
        assert!(
            found.iter().any(|f| f == expected),
            "{expected} missing from {found:#?}"
        );
    }
    // The string joins of `Label` are no arithmetic; a labelled `break` may leave anything,
    // and a `break` of a `switch` outside any loop has no `continue`.
    for absent in ["42:arithmetic", "67:loop_control", "75:loop_control"] {
        assert!(
            !found.iter().any(|f| f.starts_with(absent)),
            "{absent} in {found:#?}"
        );
    }
    assert!(
        plan.skipped
            .iter()
            .any(|s| s.line == 42 && s.reason.contains("joins strings")),
        "{:#?}",
        plan.skipped
    );
}

#[test]
fn the_proofs_check_takes_six_go_mutants_on_the_changed_lines_only() {
    let mut file = all_lines("ledger/ledger.go", LEDGER);
    file.changed_lines = [34, 35, 58].into();
    let plan = plan(&[file], Some(6));
    assert_eq!(plan.mutants.len(), 6, "{:#?}", descriptions(&plan));
    assert!(
        plan.mutants.iter().all(|m| [34, 35, 58].contains(&m.line)),
        "{:#?}",
        descriptions(&plan)
    );
}

#[test]
fn go_test_files_test_data_and_generated_files_are_never_mutated() {
    let generated = "// Code generated by stringer -type=Kind; DO NOT EDIT.\n\npackage ledger\n\nfunc Double(x int) int { return x * 2 }\n";
    let plan = plan(
        &[
            all_lines("ledger/ledger_test.go", LEDGER),
            all_lines("ledger/testdata/sample.go", LEDGER),
            all_lines("ledger/kind_string.go", generated),
            all_lines("ledger/broken.go", "package ledger\n\nfunc (\n"),
            all_lines("ledger/ledger.py", "x = 1 + 2\n"),
        ],
        None,
    );
    assert!(plan.mutants.is_empty(), "{:#?}", descriptions(&plan));
    let reasons: Vec<(&str, &ExclusionReason)> = plan
        .excluded_files
        .iter()
        .map(|f| (f.path.as_str(), &f.reason))
        .collect();
    assert_eq!(
        reasons,
        [
            ("ledger/broken.go", &ExclusionReason::DoesNotParse),
            ("ledger/kind_string.go", &ExclusionReason::Generated),
            ("ledger/ledger.py", &ExclusionReason::NotPython),
            ("ledger/ledger_test.go", &ExclusionReason::TestFile),
            ("ledger/testdata/sample.go", &ExclusionReason::TestFile),
        ]
    );
    assert!(
        plan.excluded_files[1].note.contains("line 1"),
        "{:?}",
        plan.excluded_files[1]
    );
}

#[test]
fn a_go_mutants_scope_is_its_method_or_function() {
    let at = |needle: &str| {
        let start = LEDGER.find(needle).expect("in the ledger");
        (start, start + needle.len())
    };
    let scopes = languages::scopes(
        "ledger/ledger.go",
        LEDGER,
        &[at("total += e.Amount"), at("floor > 0"), at("errors.New")],
    );
    let names: Vec<&str> = scopes.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["Ledger.Balance", "FirstLarge", ""]);
    assert_eq!(scopes[0].statement_line, 28);
    // A `case` is no statement: the `switch` around it is.
    assert_eq!(scopes[1].statement_line, 47);
}

#[test]
fn a_go_file_nested_200k_deep_plans_without_overflowing_the_stack() {
    let depth = 200_000;
    let source = format!(
        "package ledger\n\nfunc Deep(a, b int) int {{\n\treturn {}a + b{}\n}}\n",
        "(".repeat(depth),
        ")".repeat(depth)
    );
    let file = all_lines("ledger/deep.go", &source);
    let plan = plan(&[file], None);
    // Whatever the grammar makes of it, planning answers, and what it plans parses.
    for mutant in &plan.mutants {
        let bytes = apply_edit(source.as_bytes(), &mutant.edit).expect("the edit fits");
        let text = String::from_utf8(bytes).expect("UTF-8");
        assert!(syntax::parse_clean(&text).is_ok(), "{}", mutant.label());
    }
    let ranges: Vec<(usize, usize)> = plan
        .mutants
        .iter()
        .map(|m| (m.edit.start, m.edit.end))
        .collect();
    let scopes = languages::scopes("ledger/deep.go", &source, &ranges);
    assert!(scopes.iter().all(|s| s.name == "Deep"), "{scopes:?}");
    assert!(
        !plan.mutants.is_empty() || !plan.excluded_files.is_empty(),
        "neither planned nor excluded"
    );
}
