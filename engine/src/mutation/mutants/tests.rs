use super::*;
use std::process::Command;
use std::time::Duration;

fn file(path: &str, source: &str, lines: impl IntoIterator<Item = u32>) -> ChangedFile {
    ChangedFile {
        path: path.into(),
        bytes: source.as_bytes().to_vec(),
        changed_lines: lines.into_iter().collect(),
    }
}

fn all_lines(source: &str) -> Vec<u32> {
    (1..=source.lines().count() as u32 + 1).collect()
}

fn plan_all(source: &str) -> MutationPlan {
    plan_mutants(
        &[file("pager/__init__.py", source, all_lines(source))],
        None,
    )
}

fn applied(source: &str, mutant: &Mutant) -> String {
    let bytes = apply_edit(source.as_bytes(), &mutant.edit).expect("edit fits the file");
    String::from_utf8(bytes).expect("mutated file is UTF-8")
}

/// The mutated line each mutant produces, trimmed, for compact expectations.
fn mutated_lines(source: &str, plan: &MutationPlan) -> Vec<(Operator, String)> {
    plan.mutants
        .iter()
        .map(|m| {
            let mutated = applied(source, m);
            let line = mutated.lines().nth(m.line as usize - 1).unwrap_or("");
            (m.operator, line.trim().to_string())
        })
        .collect()
}

fn of(plan: &MutationPlan, operator: Operator) -> Vec<&Mutant> {
    plan.mutants
        .iter()
        .filter(|m| m.operator == operator)
        .collect()
}

const PAGER: &str = "\
def page_count(total, per_page):
    if per_page <= 0:
        raise ValueError(\"per_page must be positive\")
    pages = total // per_page
    if total % per_page > 0:
        pages += 1
    return pages
";

/// An invoice service touching every operator and every construct left alone.
const INVOICES: &str = r#"from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from decimal import Decimal

LIMIT: int = 10


def register(fn):
    return fn


@register
@functools.cache
def tax_rate(region: str) -> float:
    if region == "eu":
        return 0.2
    elif region in ("us", "ca"):
        return 0.07
    else:
        return 0


def due(invoices, today):
    overdue = [i for i in invoices if i.days_late(today) >= 30]
    while len(overdue) > LIMIT:
        overdue.pop()
    assert all(i.amount > 0 for i in overdue), "amounts are positive"
    label = "late" if overdue else "on time"
    print(f"{len(overdue) > 3} invoices are {label}")
    if not overdue:
        pass
    if (len(overdue) < 5 and
            today.weekday() <= 4):
        notify(overdue)
    else:
        ...
    match label:
        case "late" if len(overdue) >= 0x10:
            return True
        case _:
            return False


def total(invoices) -> Decimal:
    return (sum(i.amount for i in invoices)
            + sum(i.fee for i in invoices))


def is_empty(invoices):
    return len(invoices) == 0 or invoices is None


if __name__ == "__main__":
    if LIMIT > 3:
        print(due([], None))
"#;

/// Layouts that stress line preservation: one-line bodies, backslash continuations, nested and
/// decorated definitions inside branches, comments at the end of blocks, CRLF-free tabs.
const EDGES: &str = "class Ledger:\n    @property\n    def balance(self):\n        if self.closed: return 0\n        while self.pending and \\\n                len(self.pending) >= 2:\n            self.settle()\n        return (self.credit\n                - self.debit)\n\n\nif __debug__:\n    @staticmethod\n    def audit(entries):\n        return [e for e in entries if e.amount < -1]\n    # audited\nelse:\n\tpass\n\nx = 1 if 2 > 1 else 0\n";

#[test]
fn the_pager_gets_one_mutant_per_site_without_a_cap() {
    let plan = plan_all(PAGER);
    assert_eq!(
        mutated_lines(PAGER, &plan),
        vec![
            (
                Operator::NegateCondition,
                "if not (per_page <= 0):".to_string()
            ),
            (Operator::SwapBound, "if per_page < 0:".into()),
            (Operator::ShiftBound, "if per_page <= 1:".into()),
            (Operator::DropBranch, "pass".into()),
            (
                Operator::NegateCondition,
                "if not (total % per_page > 0):".into()
            ),
            (Operator::SwapBound, "if total % per_page >= 0:".into()),
            (Operator::ShiftBound, "if total % per_page > 1:".into()),
            (Operator::DropBranch, "pass".into()),
            (Operator::ReturnConstant, "return None".into()),
        ]
    );
    let swap = &of(&plan, Operator::SwapBound)[1];
    assert_eq!(swap.line, 5);
    assert_eq!(swap.description, "`>` -> `>=`");
    assert_eq!(swap.label(), "pager/__init__.py:5 changed (`>` -> `>=`)");
    assert!(plan.skipped.is_empty());
    assert!(plan.excluded_files.is_empty());
}

#[test]
fn negation_covers_if_elif_while_ternary_assert_comprehension_filter_and_case_guard() {
    let plan = plan_all(INVOICES);
    let negated: Vec<String> = mutated_lines(INVOICES, &plan)
        .into_iter()
        .filter(|(op, _)| *op == Operator::NegateCondition)
        .map(|(_, line)| line)
        .collect();
    for expected in [
        "if not (region == \"eu\"):",
        "elif not (region in (\"us\", \"ca\")):",
        "overdue = [i for i in invoices if not (i.days_late(today) >= 30)]",
        "while not (len(overdue) > LIMIT):",
        "assert not (all(i.amount > 0 for i in overdue)), \"amounts are positive\"",
        "label = \"late\" if not (overdue) else \"on time\"",
        "if not (not overdue):",
        "if not ((len(overdue) < 5 and",
        "case \"late\" if not (len(overdue) >= 0x10):",
    ] {
        assert!(
            negated.iter().any(|line| line == expected),
            "missing {expected:?} in {negated:#?}"
        );
    }
    assert_eq!(negated.len(), 9, "{negated:#?}");
}

#[test]
fn swap_bound_swaps_each_ordering_operator_and_nothing_else() {
    let source =
        "def f(a, b):\n    return a < b, a <= b, a > b, a >= b, a == b, a != b, a in b, a is b\n";
    let plan = plan_all(source);
    let swaps: Vec<String> = of(&plan, Operator::SwapBound)
        .iter()
        .map(|m| m.description.clone())
        .collect();
    assert_eq!(
        swaps,
        ["`<` -> `<=`", "`<=` -> `<`", "`>` -> `>=`", "`>=` -> `>`"]
    );
}

#[test]
fn drop_branch_replaces_if_and_else_bodies_with_pass_and_keeps_every_line_number() {
    let source = "\
def settle(invoice):
    if invoice.paid:
        invoice.close()
        log(invoice)  # closed
    else:
        invoice.remind()
        invoice.escalate()
    return invoice
";
    let plan = plan_all(source);
    let drops = of(&plan, Operator::DropBranch);
    assert_eq!(drops.len(), 2);
    assert_eq!(
        applied(source, drops[0]),
        "def settle(invoice):\n    if invoice.paid:\n        pass\n\n    else:\n        invoice.remind()\n        invoice.escalate()\n    return invoice\n"
    );
    assert_eq!(drops[0].description, "`if` body -> `pass`");
    assert_eq!(
        applied(source, drops[1]),
        "def settle(invoice):\n    if invoice.paid:\n        invoice.close()\n        log(invoice)  # closed\n    else:\n        pass\n\n    return invoice\n"
    );
    assert_eq!(drops[1].description, "`else` body -> `pass`");
    assert_eq!(drops[1].line, 6);
}

#[test]
fn an_elif_is_mutated_as_its_own_if() {
    let plan = plan_all(INVOICES);
    let elif: Vec<&Mutant> = plan
        .mutants
        .iter()
        .filter(|m| m.description.starts_with("`elif"))
        .collect();
    assert_eq!(elif.len(), 2, "{elif:#?}");
    assert!(elif.iter().any(|m| m.operator == Operator::NegateCondition));
    assert!(
        elif.iter()
            .any(|m| m.operator == Operator::DropBranch && m.line == 22)
    );
}

#[test]
fn branches_that_already_do_nothing_are_not_dropped() {
    let plan = plan_all(INVOICES);
    let dropped_lines: Vec<u32> = of(&plan, Operator::DropBranch)
        .iter()
        .map(|m| m.line)
        .collect();
    // Line 35 is `pass` under `if not overdue:`, line 40 is `...` under `else:`.
    assert_eq!(dropped_lines, [16, 20, 22, 24, 38]);
}

#[test]
fn a_decorated_definition_is_dropped_with_its_decorators() {
    let plan = plan_all(INVOICES);
    let dropped: Vec<&Mutant> = of(&plan, Operator::DropBranch)
        .into_iter()
        .filter(|m| m.description == "decorated `tax_rate` -> `pass`")
        .collect();
    assert_eq!(dropped.len(), 1);
    let mutated = applied(INVOICES, dropped[0]);
    assert!(!mutated.contains("@register"));
    assert!(!mutated.contains("def tax_rate"));
    assert_eq!(mutated.lines().nth(15), Some("pass"));
    assert_eq!(mutated.lines().count(), INVOICES.lines().count());
}

#[test]
fn return_constant_flips_booleans_zeroes_integers_and_returns_none_otherwise() {
    let plan = plan_all(INVOICES);
    let returns: Vec<String> = of(&plan, Operator::ReturnConstant)
        .iter()
        .map(|m| m.description.clone())
        .collect();
    assert_eq!(
        returns,
        [
            "`return fn` -> `return None`",
            "`return 0.2` -> `return None`",
            "`return 0.07` -> `return None`",
            "`return 0` -> `return 1`",
            "`return True` -> `return False`",
            "`return False` -> `return True`",
            "`return (sum(i.amount for i in invoices)…` -> `return None`",
            "`return len(invoices) == 0 or invoices is None` -> `return None`",
        ]
    );
    let multi_line = of(&plan, Operator::ReturnConstant)
        .into_iter()
        .find(|m| m.line == 49)
        .expect("the two-line return is a site");
    assert_eq!(multi_line.edit.replacement, "(None\n)");
}

#[test]
fn return_none_is_skipped_with_a_note_and_the_next_return_takes_its_place() {
    let source = "def nothing(invoices):\n    return None\n\n\ndef find(invoices, number):\n    return invoices[number]\n";
    let plan = plan_mutants(&[file("invoices/lookup.py", source, [2, 6])], Some(1));
    assert_eq!(plan.mutants.len(), 1);
    assert_eq!(
        plan.mutants[0].description,
        "`return invoices[number]` -> `return None`"
    );
    assert_eq!(
        plan.skipped,
        vec![SkippedSite {
            path: "invoices/lookup.py".into(),
            line: 2,
            operator: Operator::ReturnConstant,
            description: "`return None` -> `return None`".into(),
            reason: "returns `None` already".into(),
        }]
    );
}

#[test]
fn shift_bound_moves_only_integers_beside_ordering_comparisons() {
    let plan = plan_all(INVOICES);
    let shifts: Vec<(u32, String)> = of(&plan, Operator::ShiftBound)
        .iter()
        .map(|m| (m.line, m.description.clone()))
        .collect();
    // `== 0` in is_empty and the string/`in` operands are never bounds; hex stays hex.
    assert_eq!(
        shifts,
        [
            (28, "`30` -> `31`".to_string()),
            (31, "`0` -> `1`".into()),
            (36, "`5` -> `6`".into()),
            (37, "`4` -> `5`".into()),
            (42, "`0x10` -> `0x11`".into()),
        ]
    );
}

#[test]
fn a_literal_between_a_bound_and_an_equality_is_not_a_bound() {
    let source = "def f(a, b):\n    return a < 3 == b, 0 < a <= 9\n";
    let plan = plan_all(source);
    let shifts: Vec<String> = of(&plan, Operator::ShiftBound)
        .iter()
        .map(|m| m.description.clone())
        .collect();
    assert_eq!(shifts, ["`0` -> `1`", "`9` -> `10`"]);
}

#[test]
fn an_integer_too_long_to_shift_is_skipped_with_a_note() {
    let huge = "9".repeat(60);
    let source = format!("def f(a):\n    return a > {huge}\n");
    let plan = plan_all(&source);
    assert!(of(&plan, Operator::ShiftBound).is_empty());
    assert!(
        plan.skipped
            .iter()
            .any(|s| s.operator == Operator::ShiftBound && s.reason.contains("too long")),
        "{:?}",
        plan.skipped
    );
}

#[test]
fn guards_fstrings_and_annotations_are_left_alone() {
    let plan = plan_all(INVOICES);
    for mutant in &plan.mutants {
        let line = mutant.line;
        // TYPE_CHECKING guard (6-7), annotated constant (9), f-string (33), `__main__` guard (57-59).
        assert!(
            !matches!(line, 6 | 7 | 9 | 33 | 57..=59),
            "mutant inside a construct left alone: {mutant:?}"
        );
    }
    let source = "def f(x: int = 3) -> bool:\n    return f\"{x > 1}\" == \"True\"\n";
    let plan = plan_all(source);
    assert_eq!(
        plan.mutants.iter().map(|m| m.operator).collect::<Vec<_>>(),
        [Operator::ReturnConstant]
    );
}

#[test]
fn only_sites_on_changed_lines_become_mutants() {
    let plan = plan_mutants(&[file("pager/__init__.py", PAGER, [5])], None);
    assert_eq!(
        mutated_lines(PAGER, &plan),
        vec![
            (
                Operator::NegateCondition,
                "if not (total % per_page > 0):".to_string()
            ),
            (Operator::SwapBound, "if total % per_page >= 0:".into()),
            (Operator::ShiftBound, "if total % per_page > 1:".into()),
        ]
    );
    let untouched = plan_mutants(&[file("pager/__init__.py", PAGER, [])], None);
    assert!(untouched.mutants.is_empty());
}

#[test]
fn excluded_files_are_noted_with_their_reason() {
    let files = vec![
        file("tests/test_pager.py", PAGER, [5]),
        file("pager/conftest.py", PAGER, [5]),
        file(
            "pager/__init__.pyi",
            "def page_count(total: int) -> int: ...\n",
            [1],
        ),
        file("README.md", "# pager\n", [1]),
        ChangedFile {
            path: "pager/legacy.py".into(),
            bytes: b"# -*- coding: latin-1 -*-\nname = '\xe9t\xe9'\n".to_vec(),
            changed_lines: [2].into(),
        },
        file(
            "pager/latin.py",
            "# -*- coding: latin-1 -*-\nname = 'été'\n",
            [2],
        ),
        file("pager/mac.py", "x = 1\rif x > 0:\n    pass\n", [2]),
        file("pager/broken.py", "def page_count(:\n    return 1\n", [2]),
    ];
    let plan = plan_mutants(&files, None);
    let reasons: Vec<(&str, &ExclusionReason)> = plan
        .excluded_files
        .iter()
        .map(|e| (e.path.as_str(), &e.reason))
        .collect();
    assert_eq!(
        reasons,
        [
            ("README.md", &ExclusionReason::NotPython),
            ("pager/__init__.pyi", &ExclusionReason::TypeStub),
            ("pager/broken.py", &ExclusionReason::DoesNotParse),
            ("pager/conftest.py", &ExclusionReason::TestFile),
            ("pager/latin.py", &ExclusionReason::DeclaredEncoding),
            ("pager/legacy.py", &ExclusionReason::NotUtf8),
            ("pager/mac.py", &ExclusionReason::BareCarriageReturn),
            ("tests/test_pager.py", &ExclusionReason::TestFile),
        ]
    );
    let note = |path: &str| {
        plan.excluded_files
            .iter()
            .find(|e| e.path == path)
            .map(|e| e.note.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        note("pager/broken.py"),
        "does not parse as Python (first error on line 1)"
    );
    assert_eq!(
        note("pager/legacy.py"),
        "not UTF-8 (first invalid byte on line 2)"
    );
    assert!(note("pager/mac.py").contains("line 1"));
    assert!(note("pager/latin.py").contains("latin-1"));
    assert!(plan.mutants.is_empty());
}

#[test]
fn ascii_files_with_any_coding_cookie_and_crlf_files_are_mutated() {
    let ascii = "# -*- coding: latin-1 -*-\ndef f(a):\n    return a > 1\n";
    let crlf = "def f(a):\r\n    if a > 1:\r\n        return a\r\n    return 0\r\n";
    let plan = plan_mutants(
        &[
            file("pager/ascii.py", ascii, [3]),
            file("pager/crlf.py", crlf, [2, 3]),
        ],
        None,
    );
    assert!(plan.excluded_files.is_empty(), "{:?}", plan.excluded_files);
    assert!(
        plan.mutants
            .iter()
            .any(|m| m.path.as_str() == "pager/ascii.py")
    );
    let crlf_drop = plan
        .mutants
        .iter()
        .find(|m| m.path.as_str() == "pager/crlf.py" && m.operator == Operator::DropBranch)
        .expect("the crlf file's if body is a site");
    assert_eq!(
        applied(crlf, crlf_drop).lines().count(),
        crlf.lines().count()
    );
}

#[test]
fn the_cap_spreads_mutants_over_operators_then_lines() {
    let plan = plan_mutants(
        &[file("billing/invoices.py", INVOICES, all_lines(INVOICES))],
        Some(DEFAULT_MUTANTS_PER_FILE),
    );
    assert_eq!(plan.mutants.len(), 6);
    let operators: BTreeSet<Operator> = plan.mutants.iter().map(|m| m.operator).collect();
    assert_eq!(operators.len(), 5, "{:#?}", plan.mutants);
    let lines: BTreeSet<u32> = plan.mutants.iter().map(|m| m.line).collect();
    assert_eq!(
        lines.len(),
        6,
        "six mutants on six different lines: {:#?}",
        plan.mutants
    );
    // The sixth mutant is the second negation, on the next line that has one.
    let negations: Vec<u32> = of(&plan, Operator::NegateCondition)
        .iter()
        .map(|m| m.line)
        .collect();
    assert_eq!(negations, [19, 21]);
    let uncapped = plan_all(INVOICES);
    assert!(uncapped.mutants.len() > 30, "{}", uncapped.mutants.len());
}

#[test]
fn the_cap_applies_to_each_file_separately() {
    let files = [
        file("billing/invoices.py", INVOICES, all_lines(INVOICES)),
        file("pager/__init__.py", PAGER, all_lines(PAGER)),
    ];
    let plan = plan_mutants(&files, Some(2));
    let per_file: Vec<&str> = plan.mutants.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(
        per_file,
        [
            "billing/invoices.py",
            "billing/invoices.py",
            "pager/__init__.py",
            "pager/__init__.py"
        ]
    );
}

#[test]
fn the_same_change_always_gets_byte_identical_mutants() {
    let files = [
        file("pager/__init__.py", PAGER, all_lines(PAGER)),
        file("billing/invoices.py", INVOICES, all_lines(INVOICES)),
    ];
    let first = serde_json::to_vec(&plan_mutants(&files, Some(6))).expect("plan serializes");
    let second = serde_json::to_vec(&plan_mutants(&files, Some(6))).expect("plan serializes");
    assert_eq!(first, second);
    let reversed = [files[1].clone(), files[0].clone()];
    let third = serde_json::to_vec(&plan_mutants(&reversed, Some(6))).expect("plan serializes");
    assert_eq!(first, third, "input order does not matter");
    let ids: BTreeSet<String> = plan_all(INVOICES)
        .mutants
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(
        ids.len(),
        plan_all(INVOICES).mutants.len(),
        "ids are unique"
    );
    assert_eq!(plan_all(PAGER).mutants[4].id, "909ed7ac4355");
}

/// `mutant` applied to `source`: it keeps every line number, parses and changes the file.
fn assert_keeps_lines_and_parses(source: &str, mutant: &Mutant) -> String {
    let mutated = applied(source, mutant);
    assert_eq!(
        mutated.matches('\n').count(),
        source.matches('\n').count(),
        "{mutant:?}"
    );
    assert_eq!(
        python::syntax::parses(&mutated),
        Ok(()),
        "{mutant:?}\n{mutated}"
    );
    assert_ne!(mutated, source);
    mutated
}

/// Every mutant `plan` makes of `sources`, written out, is read without a syntax error by
/// python3's `reader` (a statement of the file `p`), and there are more than `more_than`.
fn assert_python3_reads_every_mutant(
    sources: &[&str],
    plan: fn(&str) -> MutationPlan,
    reader: &str,
    more_than: usize,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut count = 0;
    for (n, source) in sources.iter().enumerate() {
        for mutant in plan(source).mutants {
            let path = dir.path().join(format!("m{n}_{}.py", mutant.id));
            std::fs::write(&path, applied(source, &mutant)).expect("write mutant");
            count += 1;
        }
    }
    assert!(count > more_than, "{count}");
    let script = "import ast, pathlib, sys\nbad = []\nfor p in sorted(pathlib.Path(sys.argv[1]).glob('*.py')):\n    try:\n        READER\n    except SyntaxError as e:\n        bad.append(f'{p.name}: {e}')\nprint(len(list(pathlib.Path(sys.argv[1]).glob('*.py'))))\nsys.exit('\\n'.join(bad) if bad else 0)\n"
        .replace("READER", reader);
    let output = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(dir.path())
        .output()
        .expect("python3 runs (hint: install python3)");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        count.to_string()
    );
}

#[test]
fn every_mutant_keeps_every_line_number_and_parses() {
    for source in [PAGER, INVOICES, EDGES] {
        for mutant in plan_all(source).mutants {
            let mutated = assert_keeps_lines_and_parses(source, &mutant);
            let original_tail = &source[mutant.edit.end..];
            assert!(mutated.ends_with(original_tail), "{mutant:?}");
        }
    }
}

#[test]
fn every_mutant_compiles_with_python3() {
    assert_python3_reads_every_mutant(
        &[PAGER, INVOICES, EDGES],
        plan_all,
        "ast.parse(p.read_text(), str(p))",
        50,
    );
}

#[test]
fn a_mutant_may_take_ten_times_the_unmutated_run_but_at_least_a_minute() {
    let left = Duration::from_secs(800);
    assert_eq!(
        mutant_timeout(left, Duration::from_secs(2)),
        Ok(budget::MutantTimeout {
            limit: Duration::from_secs(60),
            set_by_budget: false
        })
    );
    assert_eq!(
        mutant_timeout(left, Duration::from_secs(30)),
        Ok(budget::MutantTimeout {
            limit: Duration::from_secs(300),
            set_by_budget: false
        })
    );
    assert_eq!(
        mutant_timeout(left, Duration::from_secs(120)),
        Ok(budget::MutantTimeout {
            limit: left,
            set_by_budget: true
        })
    );
    assert_eq!(
        mutant_timeout(Duration::from_secs(60), Duration::from_secs(1)),
        Ok(budget::MutantTimeout {
            limit: Duration::from_secs(60),
            set_by_budget: false
        })
    );
}

#[test]
fn a_mutate_mutant_may_take_ten_times_its_tests_plus_two_seconds() {
    let left = Duration::from_secs(800);
    let limit = |expected: Duration| mutate_timeout(left, expected).map(|t| t.limit);
    // A 0.4 s mutant hangs for 6 s, not the proof's 60 s floor.
    assert_eq!(
        limit(Duration::from_millis(400)),
        Ok(Duration::from_secs(6))
    );
    assert_eq!(limit(Duration::ZERO), Ok(Duration::from_secs(2)));
    // Rounded up to whole seconds.
    assert_eq!(
        limit(Duration::from_millis(1_010)),
        Ok(Duration::from_secs(13))
    );
    assert_eq!(
        mutate_timeout(left, Duration::from_secs(100)),
        Ok(budget::MutantTimeout {
            limit: left,
            set_by_budget: true
        })
    );
    assert!(mutate_timeout(Duration::from_secs(59), Duration::ZERO).is_err());
}

#[test]
fn no_mutant_starts_with_under_a_minute_of_budget_left() {
    let refused = mutant_timeout(Duration::from_secs(59), Duration::from_secs(1));
    assert_eq!(
        refused,
        Err(NotRunReason::BudgetSpent {
            left: Duration::from_secs(59)
        })
    );
    assert_eq!(
        refused.err().map(|r| r.to_string()).as_deref(),
        Some("only 59s of the mutation budget left, under the 60s a mutant needs to start")
    );
    assert_eq!(DEFAULT_MUTATION_BUDGET, Duration::from_secs(900));
}

#[test]
fn the_evidence_names_a_hang_a_kill_by_every_proving_test_and_keeps_a_reason() {
    use judge::{Judgement, outcome_of};
    let tests = vec![
        "test_full_pages".to_string(),
        "test_partial_last_page_is_counted".into(),
    ];
    assert_eq!(
        outcome_of(
            Judgement::TimedOut {
                limit: Duration::from_secs(60)
            },
            &tests
        ),
        MutantOutcome::Killed {
            by: tests.clone(),
            timed_out: true,
            reason: None
        }
    );
    assert_eq!(
        outcome_of(
            Judgement::Killed {
                by: tests.clone(),
                reason: Some("the mutant broke the test session: exit 4".into())
            },
            &tests
        ),
        MutantOutcome::Killed {
            by: tests.clone(),
            timed_out: false,
            reason: Some("the mutant broke the test session: exit 4".into())
        }
    );
    assert_eq!(
        outcome_of(Judgement::Survived { tests_run: 2 }, &tests),
        MutantOutcome::Survived
    );
    assert_eq!(
        outcome_of(
            Judgement::NotRun(NotRunReason::CutShort {
                after: Duration::from_secs(75)
            }),
            &tests
        ),
        MutantOutcome::NotRun {
            reason: "cut short by the mutation budget after 75s".into()
        }
    );
}

#[test]
fn survivors_are_listed_against_each_proving_test_in_the_seed_wording() {
    let plan = plan_mutants(&[file("pager/__init__.py", PAGER, [5])], None);
    let tests = vec!["test_partial_last_page_is_counted".to_string()];
    let outcomes = vec![
        MutantOutcome::Killed {
            by: tests.clone(),
            timed_out: false,
            reason: None,
        },
        MutantOutcome::Survived,
    ];
    let check = budget::assemble_check(
        plan,
        outcomes,
        tests,
        DEFAULT_MUTATION_BUDGET,
        Some(Duration::from_millis(1500)),
    );
    assert_eq!((check.killed, check.survived, check.not_run), (1, 1, 1));
    let lines: Vec<String> = check.survivors.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        lines,
        ["test_partial_last_page_is_counted passes with pager/__init__.py:5 changed (`>` -> `>=`)"]
    );
    let json = serde_json::to_value(&check).expect("check serializes");
    assert_eq!(json["mutants"][0]["outcome"]["status"], "killed");
    assert_eq!(json["mutants"][1]["outcome"]["status"], "survived");
    assert_eq!(json["mutants"][2]["outcome"]["status"], "not_run");
    assert_eq!(
        json["mutants"][2]["outcome"]["reason"],
        "no result was reported for this mutant"
    );
    assert_eq!(json["mutants"][1]["mutant"]["operator"], "swap_bound");
    assert_eq!(json["budget_s"], 900);
    let back: MutationCheck = serde_json::from_value(json).expect("check reads back");
    assert_eq!(back, check);
}

#[test]
fn edge_layouts_yield_their_expected_sites() {
    let plan = plan_all(EDGES);
    let described: Vec<(u32, Operator, String)> = plan
        .mutants
        .iter()
        .map(|m| (m.line, m.operator, m.description.clone()))
        .collect();
    for expected in [
        (2, Operator::DropBranch, "decorated `balance` -> `pass`"),
        (4, Operator::DropBranch, "`if` body -> `pass`"),
        (4, Operator::ReturnConstant, "`return 0` -> `return 1`"),
        (6, Operator::ShiftBound, "`2` -> `3`"),
        (13, Operator::DropBranch, "`if` body -> `pass`"),
        (15, Operator::SwapBound, "`<` -> `<=`"),
        (
            20,
            Operator::NegateCondition,
            "`if 2 > 1` -> `if not (2 > 1)`",
        ),
    ] {
        assert!(
            described
                .iter()
                .any(|(l, o, d)| (*l, *o, d.as_str()) == expected),
            "missing {expected:?} in {described:#?}"
        );
    }
    // `e.amount < -1`: the literal is `1` under a unary minus, shifted to `-2`.
    let shifted = plan
        .mutants
        .iter()
        .find(|m| m.line == 15 && m.operator == Operator::ShiftBound)
        .expect("the negative bound is a site");
    assert_eq!(shifted.description, "`-1` -> `-2`");
    assert!(applied(EDGES, shifted).contains("e.amount < -2"));
    // The `else: pass` branch does nothing and is not dropped.
    assert!(!plan.mutants.iter().any(|m| m.line == 18));
}

// The extended operators (`assay mutate --operators extended`).

fn plan_extended(source: &str) -> MutationPlan {
    plan_mutants_with(
        &[file("shop/__init__.py", source, all_lines(source))],
        None,
        OperatorSet::Extended,
    )
}

/// Each mutant of `operator` as its diff: the original and the mutated line(s) it changes.
fn diffs_of(source: &str, operator: Operator) -> Vec<String> {
    let plan = plan_extended(source);
    plan.mutants
        .iter()
        .filter(|m| m.operator == operator)
        .map(|m| {
            let mutated = applied(source, m);
            let old: Vec<&str> = source.lines().collect();
            let new: Vec<&str> = mutated.lines().collect();
            assert_eq!(old.len(), new.len(), "{m:?}");
            old.iter()
                .zip(&new)
                .filter(|(a, b)| a != b)
                .map(|(a, b)| format!("-{}\n+{}", a.trim(), b.trim()))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

fn skipped_reasons(source: &str, operator: Operator) -> Vec<String> {
    plan_extended(source)
        .skipped
        .into_iter()
        .filter(|s| s.operator == operator)
        .map(|s| s.reason)
        .collect()
}

const ARITHMETIC: &str = "\
def area(w, h):
    return w * h + 2


def half(n):
    return n // 2 - n % 2


def power(x):
    return x ** 2 / 1


def same(x):
    return x * 1 | 4
";

#[test]
fn arithmetic_swaps_each_binary_operator_and_skips_a_neutral_operand() {
    assert_eq!(
        diffs_of(ARITHMETIC, Operator::Arithmetic),
        [
            "-return w * h + 2\n+return w / h + 2",
            "-return w * h + 2\n+return w * h - 2",
            "-return n // 2 - n % 2\n+return n / 2 - n % 2",
            "-return n // 2 - n % 2\n+return n // 2 + n % 2",
            "-return n // 2 - n % 2\n+return n // 2 - n / 2",
            "-return x ** 2 / 1\n+return x * 2 / 1",
            "-return x * 1 | 4\n+return x * 1 & 4",
        ]
    );
    let skipped = skipped_reasons(ARITHMETIC, Operator::Arithmetic);
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(
        skipped
            .iter()
            .all(|r| r.starts_with("likely equivalent: `x / 1` and `x * 1`")
                || r.starts_with("likely equivalent: `x * 1` and `x / 1`")),
        "{skipped:?}"
    );
}

#[test]
fn comparison_swaps_equality_identity_and_membership() {
    let source = "def f(a, b):\n    return a == b, a != b, a is None, a is not None, a in b, a not in b, a < b\n";
    let changed: Vec<String> = plan_extended(source)
        .mutants
        .iter()
        .filter(|m| m.operator == Operator::Comparison)
        .map(|m| m.description.clone())
        .collect();
    assert_eq!(
        changed,
        [
            "`==` -> `!=`",
            "`!=` -> `==`",
            "`is` -> `is not`",
            "`is not` -> `is`",
            "`in` -> `not in`",
            "`not in` -> `in`",
        ]
    );
    assert_eq!(
        diffs_of(source, Operator::Comparison)[3],
        "-return a == b, a != b, a is None, a is not None, a in b, a not in b, a < b\n+return a == b, a != b, a is None, a is None, a in b, a not in b, a < b"
    );
}

#[test]
fn boolean_swaps_and_or_and_flips_boolean_constants() {
    let source = "def ok(a, b):\n    flag = True\n    return a and b or flag is False\n";
    assert_eq!(
        diffs_of(source, Operator::Boolean),
        [
            "-flag = True\n+flag = False",
            "-return a and b or flag is False\n+return a or b or flag is False",
            "-return a and b or flag is False\n+return a and b and flag is False",
            "-return a and b or flag is False\n+return a and b or flag is True",
        ]
    );
}

#[test]
fn unary_drops_not_minus_and_invert_but_not_plus_or_minus_zero() {
    let source = "def f(a, b, c, d):\n    return not a, -b, ~c, +d, -0\n";
    assert_eq!(
        diffs_of(source, Operator::Unary),
        [
            "-return not a, -b, ~c, +d, -0\n+return a, -b, ~c, +d, -0",
            "-return not a, -b, ~c, +d, -0\n+return not a, b, ~c, +d, -0",
            "-return not a, -b, ~c, +d, -0\n+return not a, -b, c, +d, -0",
        ]
    );
    assert_eq!(
        skipped_reasons(source, Operator::Unary),
        ["likely equivalent: `-0` equals `0`"]
    );
}

#[test]
fn number_adds_one_in_the_literals_base_and_skips_complex_literals() {
    let source = "RATE = 0.5\nMASK = 0x1f\nZ = 2j\n\n\ndef f(n):\n    return n * 3 - 0\n";
    assert_eq!(
        diffs_of(source, Operator::Number),
        [
            "-RATE = 0.5\n+RATE = 1.5",
            "-MASK = 0x1f\n+MASK = 0x20",
            "-return n * 3 - 0\n+return n * 4 - 0",
            "-return n * 3 - 0\n+return n * 3 - 1",
        ]
    );
    assert_eq!(
        skipped_reasons(source, Operator::Number),
        ["`2j` is a complex literal"]
    );
}

#[test]
fn string_wraps_plain_strings_and_leaves_docstrings_fstrings_and_all_alone() {
    let source = "\"\"\"Module docstring.\"\"\"\nGREETING = \"hello\"\nEMPTY = ''\n\n\ndef f():\n    \"\"\"Doc.\"\"\"\n    return b\"raw\" + f\"{GREETING}!\" + r'\\d' + \"a\" \"b\"\n\n\n__all__ = [\"f\"]\nT = Optional[\"Version\"]\n";
    assert_eq!(
        diffs_of(source, Operator::String),
        [
            "-GREETING = \"hello\"\n+GREETING = \"XXhelloXX\"",
            "-EMPTY = ''\n+EMPTY = 'XX'",
            "-return b\"raw\" + f\"{GREETING}!\" + r'\\d' + \"a\" \"b\"\n+return b\"XXrawXX\" + f\"{GREETING}!\" + r'\\d' + \"a\" \"b\"",
            "-return b\"raw\" + f\"{GREETING}!\" + r'\\d' + \"a\" \"b\"\n+return b\"raw\" + f\"{GREETING}!\" + r'XX\\dXX' + \"a\" \"b\"",
            "-return b\"raw\" + f\"{GREETING}!\" + r'\\d' + \"a\" \"b\"\n+return b\"raw\" + f\"{GREETING}!\" + r'\\d' + \"XXaXX\" \"b\"",
            "-return b\"raw\" + f\"{GREETING}!\" + r'\\d' + \"a\" \"b\"\n+return b\"raw\" + f\"{GREETING}!\" + r'\\d' + \"a\" \"XXbXX\"",
        ]
    );
}

const CALLS: &str = "\
def f(a, b, items, start):
    print(a)
    top = max(a, b, key=abs)
    total = sum(
        items,  # the values
        start,
    )
    return top, total
";

#[test]
fn argument_removes_each_argument_of_a_call_keeping_line_breaks() {
    assert_eq!(
        diffs_of(CALLS, Operator::Argument)[..4],
        [
            "-print(a)\n+print()",
            "-top = max(a, b, key=abs)\n+top = max(b, key=abs)",
            "-top = max(a, b, key=abs)\n+top = max(a, key=abs)",
            "-top = max(a, b, key=abs)\n+top = max(a, b)",
        ]
    );
    let plan = plan_extended(CALLS);
    let multi: Vec<String> = of(&plan, Operator::Argument)
        .iter()
        .filter(|m| m.line == 4)
        .map(|m| {
            applied(CALLS, m)
                .lines()
                .skip(3)
                .take(4)
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect();
    assert_eq!(
        multi,
        [
            "    total = sum(|        |start,|    )",
            "    total = sum(|        items|,|    )",
        ]
    );
}

#[test]
fn loop_control_swaps_break_and_continue() {
    let source =
        "def first(xs):\n    for x in xs:\n        if x:\n            break\n        continue\n";
    assert_eq!(
        diffs_of(source, Operator::LoopControl),
        ["-break\n+continue", "-continue\n+break"]
    );
}

#[test]
fn augmented_assignment_swaps_the_operator_or_assigns_plainly() {
    let source = "def f(total, n, x):\n    total += x\n    n //= 2\n    return total, n\n";
    assert_eq!(
        diffs_of(source, Operator::AugmentedAssignment),
        [
            "-total += x\n+total -= x",
            "-total += x\n+total = x",
            "-n //= 2\n+n /= 2",
            "-n //= 2\n+n = 2",
        ]
    );
}

#[test]
fn collection_empties_non_empty_displays_keeping_line_breaks() {
    let source = "A = [1, 2]\nB = (1,)\nC = {\"k\": 1}\nD = {1}\nE = []\nF = [\n    3,\n]\n__all__ = [\"A\"]\n";
    assert_eq!(
        diffs_of(source, Operator::Collection),
        [
            "-A = [1, 2]\n+A = []",
            "-B = (1,)\n+B = ()",
            "-C = {\"k\": 1}\n+C = {}",
            "-D = {1}\n+D = set()",
            "-3,\n+",
        ]
    );
}

/// Every construct at once, for the invariants below.
const EXTENDED: &str = "\"\"\"Shop.\"\"\"\nRATE = 0.5\n\n\ndef checkout(cart, coupon=None):\n    total = 0\n    for item in cart:\n        if item.price is None or not item.ok:\n            continue\n        total += item.price * item.count - -1\n        if total > 100 and coupon in (\"A\", \"B\"):\n            break\n    tags = [t.upper() for t in cart if t]\n    return round(\n        total * (1 - RATE),  # discounted\n        2,\n    ), {\"total\": total, \"tags\": tags}, ~len(cart)\n";

#[test]
fn the_default_plan_has_only_the_five_operators() {
    for source in [EXTENDED, CALLS, ARITHMETIC, INVOICES] {
        let plan = plan_all(source);
        assert!(
            plan.mutants
                .iter()
                .all(|m| Operator::ALL.contains(&m.operator)),
            "{plan:#?}"
        );
        let extended = plan_extended(source);
        assert!(extended.mutants.len() > plan.mutants.len());
    }
    let all: BTreeSet<Operator> = plan_extended(EXTENDED)
        .mutants
        .iter()
        .map(|m| m.operator)
        .collect();
    assert_eq!(all.len(), Operator::EXTENDED.len(), "{all:?}");
}

#[test]
fn every_extended_mutant_keeps_every_line_number_parses_and_is_unique() {
    for source in [PAGER, INVOICES, EDGES, EXTENDED, CALLS, ARITHMETIC] {
        let plan = plan_extended(source);
        let mut edits = BTreeSet::new();
        for mutant in plan.mutants {
            let mutated = assert_keeps_lines_and_parses(source, &mutant);
            assert!(edits.insert(mutated), "a duplicate edit: {mutant:?}");
        }
    }
}

#[test]
fn every_extended_mutant_compiles_with_python3() {
    assert_python3_reads_every_mutant(
        &[PAGER, INVOICES, EDGES, EXTENDED, CALLS, ARITHMETIC],
        plan_extended,
        "compile(p.read_text(), str(p), 'exec')",
        150,
    );
}

/// 200,000 nested parentheses: the source chooses the depth of its syntax tree, so whatever
/// reads the tree must loop, not recurse (a stack overflow aborts every proof of the process).
fn nested_parentheses(inner: &str) -> String {
    format!("{}{inner}{}", "(".repeat(200_000), ")".repeat(200_000))
}

#[test]
fn a_python_file_with_200k_nested_parentheses_around_a_syntax_error_is_excluded_not_a_crash() {
    let source = format!(
        "def page_count(total, size):\n    return total // size\n\n\nLIMIT = {}\n",
        nested_parentheses("1 +")
    );
    let plan = plan_all(&source);
    assert!(plan.mutants.is_empty(), "{:?}", plan.mutants.len());
    assert_eq!(plan.excluded_files.len(), 1, "{:?}", plan.excluded_files);
}

#[test]
fn a_python_file_with_200k_nested_parentheses_that_parses_is_planned() {
    let source = format!(
        "def page_count(total, size):\n    return total // size\n\n\nLIMIT = {}\n",
        nested_parentheses("1")
    );
    // Whether the grammar takes it or not, planning answers.
    let _ = plan_all(&source);
}

/// Every node of a parse (kind, byte range, error or missing), or the line of its first
/// problem: what a mutant's check reads of a tree.
fn shape(parsed: Result<tree_sitter::Tree, u32>) -> Result<Vec<(u16, usize, usize, bool)>, u32> {
    let tree = parsed?;
    let mut nodes = Vec::new();
    let mut cursor = tree.walk();
    'walk: loop {
        let node = cursor.node();
        nodes.push((
            node.kind_id(),
            node.start_byte(),
            node.end_byte(),
            node.is_error() || node.is_missing(),
        ));
        if cursor.goto_first_child() || cursor.goto_next_sibling() {
            continue;
        }
        while cursor.goto_parent() {
            if cursor.goto_next_sibling() {
                continue 'walk;
            }
        }
        break;
    }
    Ok(nodes)
}

/// Real files nobody here wrote, where this machine has them: the Python standard library,
/// Go's, npm's own JavaScript; and this crate's Rust.
fn real_sources() -> Vec<(
    &'static dyn Language,
    tree_sitter::Language,
    std::path::PathBuf,
)> {
    let output = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .output()
            .ok()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
            .filter(|dir| !dir.is_empty())
    };
    let mut files: Vec<(
        &'static dyn Language,
        tree_sitter::Language,
        std::path::PathBuf,
    )> = Vec::new();
    let stdlib = output(
        "python3",
        &[
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['stdlib'])",
        ],
    )
    .expect("python3 names its standard library (hint: install python3)");
    for name in ["argparse.py", "difflib.py", "textwrap.py", "fractions.py"] {
        let path = std::path::Path::new(&stdlib).join(name);
        files.push((&python::Python, python::syntax::grammar(), path));
    }
    if let Some(root) = output("go", &["env", "GOROOT"]) {
        for name in ["src/strings/strings.go", "src/sort/sort.go"] {
            files.push((
                &go::Go,
                go::syntax::grammar(),
                std::path::Path::new(&root).join(name),
            ));
        }
    }
    for name in ["lib/npm.js", "lib/utils/verify-signatures.js"] {
        let path = std::path::Path::new("/usr/lib/node_modules/npm").join(name);
        if path.exists() {
            files.push((
                &javascript::JavaScript,
                javascript::syntax::Dialect::JavaScript.grammar(),
                path,
            ));
        }
    }
    let own = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/mutation/mutants/mod.rs");
    files.push((&rust::Rust, rust::syntax::grammar(), own));
    files
}

#[test]
fn a_mutant_parsed_from_its_files_tree_parses_as_it_does_from_scratch() {
    let mut compared = 0;
    for (language, grammar, path) in real_sources() {
        let source = std::fs::read_to_string(&path).expect("a real source file");
        let every_line: BTreeSet<u32> = (1..=source.lines().count() as u32 + 1).collect();
        let mut file = syntax::Reparser::new(&source);
        let name = path.to_string_lossy();
        let candidates = language.sites(&name, &source, &every_line, OperatorSet::Extended);
        assert!(
            candidates.len() > 20,
            "{}: {}",
            path.display(),
            candidates.len()
        );
        // Spread over the file: 60 of its candidates.
        let step = (candidates.len() / 60).max(1);
        for candidate in candidates.iter().step_by(step) {
            let Some(original) = source.get(candidate.start..candidate.end) else {
                continue;
            };
            if original == candidate.replacement {
                continue;
            }
            let fresh = syntax::parse_clean(grammar.clone(), &sites::mutated(&source, candidate));
            let incremental = file.mutated_clean(grammar.clone(), candidate);
            let (incremental, fresh) = (shape(incremental), shape(fresh));
            let summary = |s: &Result<Vec<_>, u32>| s.clone().map(|nodes| nodes.len());
            assert!(
                incremental == fresh,
                "{} at byte {} ({}): {:?} nodes against {:?} from scratch",
                path.display(),
                candidate.start,
                candidate.description,
                summary(&incremental),
                summary(&fresh)
            );
            compared += 1;
        }
    }
    assert!(compared > 300, "{compared} mutants compared");
}
