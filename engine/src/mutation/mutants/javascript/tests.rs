use super::*;
use crate::mutation::mutants::plan_checks::{
    all_lines, applied, applied_keeping_every_line, descriptions,
};
use crate::mutation::mutants::{ChangedFile, languages};

/// Every mutant of `files`' changed lines, at most `cap` per file.
fn plan(files: &[ChangedFile], cap: Option<usize>) -> crate::mutation::mutants::MutationPlan {
    crate::mutation::mutants::plan_mutants_in(&JavaScript, files, cap, OperatorSet::Default)
}

const INVOICE: &str = r#"'use strict';
const { round } = require('./money.js');

class Invoice {
  constructor(lines) {
    this.lines = lines ?? [];
  }

  total() {
    let sum = 0;
    for (let i = 0; i < this.lines.length; i++) {
      sum += this.lines[i].price * this.lines[i].quantity;
    }
    return round(sum);
  }

  isLarge(limit) {
    return this.total() >= limit && !this.voided;
  }

  label() {
    return 'Invoice ' + (this.customer?.name || "");
  }
}

function discount(total, rate) {
  if (rate > 0.5) {
    throw new Error("rate too high");
  }
  const tiers = [0, 100,
    1000];
  const names = { small: 'S', large: 'L' };
  return total > tiers[1] ? total - total * rate : -total;
}

module.exports = { Invoice, discount, flag: true };
"#;

#[test]
fn every_javascript_mutant_parses_and_keeps_every_line_number() {
    let plan = plan(&[all_lines("src/invoice.js", INVOICE)], None);
    assert!(plan.mutants.len() > 30, "{:#?}", descriptions(&plan));
    for mutant in &plan.mutants {
        let text = applied_keeping_every_line(INVOICE, mutant);
        assert!(
            syntax::parse_clean(Dialect::of(mutant.path.as_str()), &text).is_ok(),
            "{}",
            mutant.label()
        );
    }
}

#[test]
fn javascript_mutants_follow_strykers_families() {
    let plan = plan(&[all_lines("src/invoice.js", INVOICE)], None);
    let found = descriptions(&plan);
    for expected in [
        "6:boolean `??` -> `&&`",
        "11:swap_bound `<` -> `<=`",
        "11:comparison `<` -> `>=`",
        "11:conditional_expression `i < this.lines.length` -> `false`",
        "11:increment_decrement `++` -> `--`",
        "12:augmented_assignment `+=` -> `-=`",
        "12:arithmetic `*` -> `/`",
        "18:boolean `&&` -> `||`",
        "18:boolean `!this.voided` -> `this.voided`",
        "22:optional_chaining `?.` -> `.`",
        "22:string `\"\"` -> `\"Stryker was here!\"`",
        "27:conditional_expression `rate > 0.5` -> `true`",
        "27:drop_branch `{…` -> `{}`",
        "28:string `\"rate too high\"` -> `\"\"`",
        "30:collection `[0, 100,…` -> `[]`",
        "32:collection `{ small: 'S', large: 'L' }` -> `{}`",
        "33:unary `-total` -> `+total`",
        "33:conditional_expression `total > tiers[1]` -> `false`",
        "36:boolean `true` -> `false`",
    ] {
        assert!(
            found.iter().any(|f| f == expected),
            "{expected} missing from {found:#?}"
        );
    }
    // Directives, `require` paths and object keys are no text of the program; an empty
    // array is no collection to empty, and `'Invoice ' + …` joins strings.
    for absent in ["1:string", "2:string", "6:collection", "22:arithmetic"] {
        assert!(
            !found.iter().any(|f| f.starts_with(absent)),
            "{absent} in {found:#?}"
        );
    }
}

#[test]
fn javascript_test_files_and_dependencies_are_never_mutated() {
    let plan = plan(
        &[
            all_lines("test/invoice.test.js", INVOICE),
            all_lines("src/invoice.test.mjs", INVOICE),
            all_lines("node_modules/left-pad/index.js", INVOICE),
            all_lines("src/broken.cjs", "function (\n"),
        ],
        None,
    );
    assert!(plan.mutants.is_empty(), "{:#?}", descriptions(&plan));
    let reasons: Vec<&ExclusionReason> = plan.excluded_files.iter().map(|f| &f.reason).collect();
    assert_eq!(
        reasons,
        [
            &ExclusionReason::TestFile,
            &ExclusionReason::DoesNotParse,
            &ExclusionReason::TestFile,
            &ExclusionReason::TestFile,
        ]
    );
}

#[test]
fn a_javascript_mutants_scope_is_its_method_or_function() {
    let at = |needle: &str| {
        let start = INVOICE.find(needle).expect("in the invoice");
        (start, start + needle.len())
    };
    let scopes = languages::scopes(
        "src/invoice.js",
        INVOICE,
        &[at("sum += "), at("rate > 0.5"), at("flag: true")],
    );
    let names: Vec<&str> = scopes.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["Invoice.total", "discount", ""]);
    assert_eq!(scopes[0].statement_line, 12);
}

#[test]
fn a_javascript_file_nested_200k_deep_plans_without_overflowing_the_stack() {
    let depth = 200_000;
    let source = format!(
        "export function deep(a, b) {{\n  return {}a?.b + b{};\n}}\n",
        "(".repeat(depth),
        ")".repeat(depth)
    );
    let plan = plan(&[all_lines("src/deep.mjs", &source)], None);
    for mutant in &plan.mutants {
        let text = applied(&source, mutant);
        assert!(
            syntax::parse_clean(Dialect::of(mutant.path.as_str()), &text).is_ok(),
            "{}",
            mutant.label()
        );
    }
    let ranges: Vec<(usize, usize)> = plan
        .mutants
        .iter()
        .map(|m| (m.edit.start, m.edit.end))
        .collect();
    let scopes = languages::scopes("src/deep.mjs", &source, &ranges);
    assert!(scopes.iter().all(|s| s.name == "deep"), "{scopes:?}");
    assert!(
        !plan.mutants.is_empty() || !plan.excluded_files.is_empty(),
        "neither planned nor excluded"
    );
}

const LEDGER_TS: &str = r#"import type { Currency } from './currency.js';
import { round } from './money.js';

export interface Entry { amount: number; memo?: string; kind: "debit" | "credit" }
export type Totals = Record<"debit" | "credit", number>;
declare const DEBUG: boolean;

export abstract class Book<T extends Entry = Entry> implements Iterable<T> {
  private entries: T[] = [];
  constructor(public readonly currency: Currency = 'EUR', protected limit: number = 100) {}

  abstract label(): string;

  add(entry: T): this {
    if (this.entries.length >= this.limit) {
      throw new RangeError(`more than ${this.limit} entries`);
    }
    this.entries.push(entry);
    return this;
  }

  totals(): Totals {
    const totals: Totals = { debit: 0, credit: 0 };
    for (const e of this.entries) {
      totals[e.kind] += e.amount as number;
    }
    return totals;
  }

  [Symbol.iterator](): Iterator<T> {
    return this.entries[Symbol.iterator]();
  }
}

export function balance<T extends Entry>(book: Book<T>, opening = 0): number {
  const { debit, credit } = book.totals();
  const last = [...book].at(-1)?.memo ?? "none";
  return round(opening + credit - debit!) satisfies number;
}
"#;

/// The byte ranges of the type-level syntax of `source`, TypeScript.
fn type_ranges(source: &str) -> Vec<std::ops::Range<usize>> {
    let tree = syntax::parse(Dialect::TypeScript, source).expect("a tree");
    let mut ranges = Vec::new();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        if syntax::is_type(node) {
            ranges.push(node.byte_range());
            continue;
        }
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor));
    }
    ranges
}

#[test]
fn typescript_mutants_parse_as_typescript_and_never_touch_a_type() {
    assert!(syntax::parse_clean(Dialect::TypeScript, LEDGER_TS).is_ok());
    let plan = plan(&[all_lines("src/ledger.ts", LEDGER_TS)], None);
    assert!(plan.mutants.len() >= 18, "{:#?}", descriptions(&plan));
    let types = type_ranges(LEDGER_TS);
    assert!(types.len() >= 18, "{types:?}");
    for mutant in &plan.mutants {
        let text = applied(LEDGER_TS, mutant);
        assert!(
            syntax::parse_clean(Dialect::TypeScript, &text).is_ok(),
            "{}",
            mutant.label()
        );
        let edit = mutant.edit.start..mutant.edit.end;
        assert!(
            !types.iter().any(|t| edit.start < t.end
                && t.start < edit.end
                && !(edit.start <= t.start && t.end <= edit.end)),
            "{} edits inside a type",
            mutant.label()
        );
        // A mutant may empty a block holding annotations, never change one alone.
        assert!(!types.contains(&edit), "{} replaces a type", mutant.label());
    }
    let described = descriptions(&plan).join("\n");
    for expected in [
        "`>=` -> `<`",
        "`+=` -> `-=`",
        "`?.` -> `.`",
        "`??` -> `&&`",
        "`-` -> `+`",
    ] {
        assert!(described.contains(expected), "{expected}:\n{described}");
    }
    // The literal types `"debit" | "credit"` are types; only the string the code reads is
    // mutated.
    assert!(!described.contains("\"debit\""), "{described}");
    assert!(described.contains("`\"none\"` -> `\"\"`"), "{described}");
}

#[test]
fn a_typescript_schema_holds_every_mutant_and_parses_as_typescript() {
    let plan = plan(&[all_lines("src/ledger.ts", LEDGER_TS)], None);
    let entries: Vec<crate::mutation::mutants::switch::Entry<'_>> =
        crate::mutation::mutants::switch::Entry::of_file(&plan.mutants, "src/ledger.ts", |_| true);
    let schema = schema::rewrite(Dialect::TypeScript, LEDGER_TS, &entries);
    assert_eq!(schema.fallback, Vec::new(), "{}", schema.text);
    assert_eq!(schema.held.len(), plan.mutants.len());
    assert!(syntax::parse_clean(Dialect::TypeScript, &schema.text).is_ok());
}

/// A component in TSX: a tag name with a member (`<Menu.Item>`), attribute strings, JSX inside
/// an expression and an expression inside JSX.
const BADGE_TSX: &str = r#"import { h, Menu } from './h.js';

export interface BadgeProps { count: number; label: string }

export function Badge({ count, label }: BadgeProps): string {
  const shown = count > 99 ? '99+' : String(count);
  return (
    <span className="badge" title={label}>
      {count > 0 && <b>{shown}</b>}
      <Menu.Item key="first" />
      {label.trim()}
    </span>
  );
}
"#;

#[test]
fn tsx_mutants_and_their_schema_parse_as_tsx_and_leave_markup_alone() {
    assert!(syntax::parse_clean(Dialect::Tsx, BADGE_TSX).is_ok());
    let plan = plan(&[all_lines("src/badge.tsx", BADGE_TSX)], None);
    for mutant in &plan.mutants {
        let text = applied(BADGE_TSX, mutant);
        assert!(
            syntax::parse_clean(Dialect::Tsx, &text).is_ok(),
            "{}:\n{text}",
            mutant.label()
        );
    }
    let described = descriptions(&plan).join("\n");
    for expected in ["`>` -> `>=`", "`'99+'` -> `''`", "`&&` -> `||`"] {
        assert!(described.contains(expected), "{expected}:\n{described}");
    }
    // An attribute's string is markup, a tag's name is no expression.
    for markup in ["badge", "first", "Menu.Item", "?."] {
        assert!(!described.contains(markup), "{markup}:\n{described}");
    }
    let entries: Vec<crate::mutation::mutants::switch::Entry<'_>> =
        crate::mutation::mutants::switch::Entry::of_file(&plan.mutants, "src/badge.tsx", |_| true);
    let schema = schema::rewrite(Dialect::Tsx, BADGE_TSX, &entries);
    assert_eq!(schema.fallback, Vec::new(), "{}", schema.text);
    assert_eq!(schema.held.len(), plan.mutants.len());
    assert!(
        syntax::parse_clean(Dialect::Tsx, &schema.text).is_ok(),
        "{}",
        schema.text
    );
}

#[test]
fn typescript_declaration_files_are_type_stubs_and_tests_are_never_mutated() {
    let plan = plan(
        &[
            all_lines(
                "src/currency.d.ts",
                "export type Currency = 'EUR' | 'USD';\n",
            ),
            all_lines("test/ledger.test.ts", LEDGER_TS),
            all_lines("src/broken.mts", "function f(: number {\n"),
            all_lines("src/ledger.cts", LEDGER_TS),
        ],
        None,
    );
    let reasons: Vec<(&str, &ExclusionReason)> = plan
        .excluded_files
        .iter()
        .map(|f| (f.path.as_str(), &f.reason))
        .collect();
    assert_eq!(
        reasons,
        [
            ("src/broken.mts", &ExclusionReason::DoesNotParse),
            ("src/currency.d.ts", &ExclusionReason::TypeStub),
            ("test/ledger.test.ts", &ExclusionReason::TestFile),
        ]
    );
    assert!(
        plan.mutants
            .iter()
            .all(|m| m.path.as_str() == "src/ledger.cts")
    );
    assert!(!plan.mutants.is_empty());
    let broken = &plan.excluded_files[0].note;
    assert!(broken.contains("does not parse as TypeScript"), "{broken}");
}
