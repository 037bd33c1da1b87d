use super::schema::{self, Entry};
use super::*;
use crate::mutation::mutants::plan_checks::{all_lines, applied};
use crate::mutation::mutants::{Mutant, MutationPlan};
use std::collections::BTreeMap;

const LEDGER: &str = r##"//! A ledger.
#![allow(dead_code)]

pub const LIMIT: u32 = 3 + 4;

pub const fn doubled(x: u32) -> u32 {
    x * 2
}

pub struct Ledger {
    entries: Vec<i64>,
}

impl Ledger {
    pub fn balance(&self) -> i64 {
        let mut total = 0;
        for e in &self.entries {
            total += *e;
        }
        total
    }

    pub fn is_overdrawn(&self, floor: i64) -> bool {
        self.balance() < floor && !self.entries.is_empty()
    }

    pub fn label(&self) -> String {
        let pattern = r#"match { x => "}" }"#;
        format!("{} {}", pattern, self.balance() - 1)
    }

    pub fn kind(&self, code: u8) -> &'static str {
        match code {
            0 => "zero",
            1 if self.entries.len() > 2 => "one",
            _ => "many",
        }
    }

    pub fn table(&self) -> [u8; 2 + 1] {
        [0; 2 + 1]
    }

    pub fn iter(&self) -> impl Iterator<Item = &i64> {
        self.entries.iter()
    }
}

macro_rules! twice {
    ($e:expr) => {
        $e + $e
    };
}

pub fn four() -> i32 {
    twice!(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn helper(a: i32) -> i32 {
        a + 1
    }

    mod nested {
        pub fn deeper(b: bool) -> bool {
            !b
        }
    }

    #[test]
    fn balance_sums() {
        assert_eq!(helper(1), 2);
    }
}

#[cfg_attr(test, derive(Debug))]
pub struct Shown;

#[test]
fn top_level_test() {
    assert!(1 + 1 == 2);
}
"##;

fn ledger_plan() -> MutationPlan {
    plan(&[all_lines("src/lib.rs", LEDGER)], None)
}

fn line_of_text(needle: &str) -> u32 {
    let at = LEDGER.find(needle).expect("needle in the ledger");
    LEDGER[..at].matches('\n').count() as u32 + 1
}

fn on_line<'p>(plan: &'p MutationPlan, needle: &str) -> Vec<&'p Mutant> {
    let line = line_of_text(needle);
    plan.mutants.iter().filter(|m| m.line == line).collect()
}

#[test]
fn cargo_mutants_operator_families_are_all_planned() {
    let plan = ledger_plan();
    let descriptions: Vec<&str> = plan
        .mutants
        .iter()
        .map(|m| m.description.as_str())
        .collect();
    for expected in [
        "`fn is_overdrawn` body -> `true`",
        "`fn is_overdrawn` body -> `false`",
        "`fn balance` body -> `0`",
        "`fn balance` body -> `-1`",
        "`fn label` body -> `String::new()`",
        "`fn label` body -> `\"xyzzy\".into()`",
        "`fn kind` body -> `\"\"`",
        "`<` -> `==`",
        "`<` -> `>`",
        "`&&` -> `||`",
        "`+=` -> `-=`",
        "`*` -> `+`",
        "`!self.entries.is_empty()` -> `self.entries.is_empty()`",
        "match arm `0 => …` deleted",
        "match arm `1 if self.entries.len() > 2 => …` deleted",
    ] {
        assert!(
            descriptions.contains(&expected),
            "{expected} missing from {descriptions:#?}"
        );
    }
    // The wildcard arm itself is never deleted: the match would not be exhaustive.
    assert!(!descriptions.iter().any(|d| d.starts_with("match arm `_")));
}

#[test]
fn test_code_macros_and_opaque_returns_get_no_mutant() {
    let plan = ledger_plan();
    for needle in [
        "a + 1",
        "!b",
        "assert!(1 + 1 == 2)",
        "$e + $e",
        "fn top_level_test",
    ] {
        assert!(
            on_line(&plan, needle).is_empty(),
            "{needle}: {:?}",
            on_line(&plan, needle)
        );
    }
    // `fn four`'s body is a macro call: the body is replaced, nothing inside the macro is.
    assert!(on_line(&plan, "twice!(2)").is_empty());
    let iter = plan
        .skipped
        .iter()
        .find(|s| s.description.starts_with("`fn iter`"))
        .expect("the opaque return is a skipped site");
    assert_eq!(iter.reason, "returns an opaque `impl` type");
}

#[test]
fn a_test_only_file_and_cargo_test_targets_are_excluded() {
    let files = [
        all_lines("tests/it.rs", "fn f() -> bool { true }\n"),
        all_lines("crates/a/benches/b.rs", "fn f() -> bool { true }\n"),
        all_lines("build.rs", "fn main() {}\n"),
        all_lines("src/only.rs", "#![cfg(test)]\nfn f() -> bool { true }\n"),
        all_lines("src/broken.rs", "fn f( -> {\n"),
        all_lines("pager.py", "def f():\n    return 1\n"),
    ];
    let plan = plan(&files, None);
    assert!(plan.mutants.is_empty(), "{:?}", plan.mutants);
    let reasons: Vec<(&str, ExclusionReason)> = plan
        .excluded_files
        .iter()
        .map(|e| (e.path.as_str(), e.reason.clone()))
        .collect();
    assert_eq!(
        reasons,
        [
            ("build.rs", ExclusionReason::TestFile),
            ("crates/a/benches/b.rs", ExclusionReason::TestFile),
            ("pager.py", ExclusionReason::NotPython),
            ("src/broken.rs", ExclusionReason::DoesNotParse),
            ("src/only.rs", ExclusionReason::TestFile),
            ("tests/it.rs", ExclusionReason::TestFile),
        ]
    );
    assert_eq!(plan.excluded_files[2].note, "not a Rust source file");
}

#[test]
fn a_python_plan_leaves_rust_files_alone() {
    let plan = crate::mutation::mutants::plan_mutants(&[all_lines("src/lib.rs", LEDGER)], None);
    assert!(plan.mutants.is_empty());
    assert_eq!(plan.excluded_files[0].note, "not a Python source file");
}

#[test]
fn every_mutant_keeps_its_lines_and_parses() {
    let plan = ledger_plan();
    assert!(plan.mutants.len() > 20, "{}", plan.mutants.len());
    for mutant in &plan.mutants {
        let mutated = applied(LEDGER, mutant);
        assert_eq!(
            mutated.lines().count(),
            LEDGER.lines().count(),
            "{mutant:?}"
        );
        assert!(
            syntax::parse_clean(&mutated).is_ok(),
            "{mutant:?}\n{mutated}"
        );
    }
}

#[test]
fn the_scope_is_the_function_named_by_its_impl() {
    let at = LEDGER.find("self.balance() < floor").expect("needle");
    let scope = &scope::scopes(LEDGER, &[(at, at + 1)])[0];
    assert_eq!(scope.name, "Ledger::is_overdrawn");
    assert!(LEDGER[scope.start..scope.end].starts_with("pub fn is_overdrawn"));
    assert_eq!(scope.statement_line, line_of_text("self.balance() < floor"));
}

fn schema_of(source: &str, mutants: &[Mutant]) -> schema::FileSchema {
    let entries: Vec<Entry<'_>> = mutants
        .iter()
        .enumerate()
        .map(|(i, m)| Entry {
            number: i as u32 + 1,
            edit: &m.edit,
        })
        .collect();
    schema::rewrite(source, &entries, schema::Std::Prelude)
}

#[test]
fn the_schema_holds_every_runtime_site_and_leaves_const_contexts_to_a_build_of_their_own() {
    let plan = ledger_plan();
    let schema = schema_of(LEDGER, &plan.mutants);
    assert!(syntax::parse_clean(&schema.text).is_ok(), "{}", schema.text);
    let fallback: BTreeSet<u32> = schema.fallback.iter().map(|(n, _)| *n).collect();
    let held: BTreeSet<u32> = schema.held.iter().map(|h| h.number).collect();
    assert_eq!(fallback.len() + held.len(), plan.mutants.len());
    assert!(fallback.is_disjoint(&held));
    for (number, why) in &schema.fallback {
        let mutant = &plan.mutants[*number as usize - 1];
        let text = &LEDGER[mutant.edit.start..mutant.edit.end];
        assert!(
            why.contains("const") || why.contains("array"),
            "{mutant:?} ({text}) fell back: {why}"
        );
    }
    // `3 + 4` in a const item, `x * 2` in a const fn, the array lengths of the table: all
    // compile-time, all fallback.
    for needle in ["3 + 4", "x * 2", "[0; 2 + 1]", "[u8; 2 + 1]"] {
        let line = line_of_text(needle);
        let on_line: Vec<u32> = plan
            .mutants
            .iter()
            .enumerate()
            .filter(|(_, m)| {
                m.line == line && (m.description.contains('+') || m.description.contains('*'))
            })
            .map(|(i, _)| i as u32 + 1)
            .collect();
        assert!(!on_line.is_empty(), "{needle}");
        assert!(
            on_line.iter().all(|n| fallback.contains(n)),
            "{needle}: {on_line:?}"
        );
    }
    // The raw string that looks like a match stays as it was.
    assert!(schema.text.contains(r##"r#"match { x => "}" }"#"##));
    // Test code is untouched: the test module appears verbatim.
    let tests_at = LEDGER.find("#[cfg(test)]").expect("tests");
    assert!(schema.text.ends_with(&LEDGER[tests_at..]));
}

#[test]
fn a_held_mutants_arm_is_its_edit_applied_to_its_site() {
    let source = "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n";
    let plan = plan(&[all_lines("src/lib.rs", source)], None);
    let schema = schema_of(source, &plan.mutants);
    assert!(schema.fallback.is_empty(), "{:?}", schema.fallback);
    let arms: Vec<&str> = schema
        .held
        .iter()
        .map(|h| &schema.text[h.arm.clone()])
        .collect();
    for expected in ["{ 0\n\n }", "{ 1\n\n }", "a - b", "a * b"] {
        assert!(arms.contains(&expected), "{expected} not in {arms:?}");
    }
    // The operator swaps sit inside the body's default arm: the site of a swap is within the
    // site of the body.
    let body = schema
        .held
        .iter()
        .find(|h| &schema.text[h.arm.clone()] == "{ 0\n\n }")
        .unwrap();
    let swap = schema
        .held
        .iter()
        .find(|h| &schema.text[h.arm.clone()] == "a - b")
        .unwrap();
    assert!(body.site.start < swap.site.start && swap.site.end < body.site.end);
    assert!(schema.text.contains(schema::SWITCH_VARIABLE));
}

#[test]
fn build_errors_are_blamed_on_the_arm_or_site_that_holds_them() {
    let source = "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n";
    let plan = plan(&[all_lines("src/lib.rs", source)], None);
    let schema = schema_of(source, &plan.mutants);
    let swap = schema
        .held
        .iter()
        .find(|h| &schema.text[h.arm.clone()] == "a - b")
        .unwrap();
    let body = schema
        .held
        .iter()
        .find(|h| &schema.text[h.arm.clone()] == "{ 0\n\n }")
        .unwrap();
    let schemas: BTreeMap<String, schema::FileSchema> =
        [("src/lib.rs".to_owned(), schema.clone())].into();
    let json = |file: &str, start: usize, end: usize| {
        format!(
            "{{\"reason\":\"compiler-message\",\"message\":{{\"level\":\"error\",\"message\":\"boom\",\"spans\":[{{\"file_name\":\"{file}\",\"byte_start\":{start},\"byte_end\":{end}}}]}}}}\nnot json\n"
        )
    };
    let in_arm = schema::error_spans(&json("src/lib.rs", swap.arm.start, swap.arm.end));
    assert_eq!(schema::blame(&in_arm, &schemas), Some([swap.number].into()));
    // In the swap's switch but not in an arm: every mutant of that site.
    let in_site = schema::error_spans(&json("src/lib.rs", swap.site.start, swap.site.start + 1));
    let site_numbers: BTreeSet<u32> = schema
        .held
        .iter()
        .filter(|h| h.site == swap.site)
        .map(|h| h.number)
        .collect();
    assert_eq!(schema::blame(&in_site, &schemas), Some(site_numbers));
    assert!(
        !schema::blame(&in_site, &schemas)
            .unwrap()
            .contains(&body.number)
    );
    // An error in the swap's own code makes it unviable even beside an error no site holds
    // (one outside every switch, which alone would blame the whole file): the next build
    // says whether anything remains.
    let outside = schema.text.find("pub fn").unwrap();
    let mixed = format!(
        "{}{}",
        json("src/lib.rs", swap.arm.start, swap.arm.end),
        json("src/lib.rs", outside, outside + 1)
    );
    let mixed = schema::error_spans(&mixed);
    assert_eq!(
        schema::own_errors(&mixed, &schemas)
            .into_keys()
            .collect::<Vec<_>>(),
        vec![swap.number]
    );
    assert!(schema::own_errors(&in_site, &schemas).is_empty());
    // Outside every rewritten file: nobody alone.
    assert_eq!(
        schema::blame(&schema::error_spans(&json("src/other.rs", 0, 1)), &schemas),
        None
    );
    assert_eq!(schema::blame(&[], &schemas), None);
}

#[test]
fn a_no_std_crate_root_gets_the_std_alias_after_its_preamble_and_keeps_its_lines() {
    let root = "//! Docs.\n#![no_std]\n//! More docs.\nextern crate alloc;\n\npub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n";
    let module = "pub fn sub(a: u32, b: u32) -> u32 {\n    a - b\n}\n";
    assert_eq!(schema::Std::of_crate([root, module]), schema::Std::Alias);
    assert_eq!(schema::Std::of_crate([module]), schema::Std::Prelude);
    let planned = plan(&[all_lines("src/lib.rs", root)], None);
    let entries: Vec<Entry<'_>> = planned
        .mutants
        .iter()
        .enumerate()
        .map(|(i, m)| Entry {
            number: i as u32 + 1,
            edit: &m.edit,
        })
        .collect();
    let schema = schema::rewrite(root, &entries, schema::Std::Alias);
    assert!(schema.fallback.is_empty(), "{:?}", schema.fallback);
    assert!(
        schema
            .text
            .starts_with("//! Docs.\n#![no_std]\n//! More docs.\nextern crate std as __assay_std; extern crate alloc;"),
        "{}",
        schema.text
    );
    assert!(schema.text.contains("::__assay_std::sync::OnceLock"));
    assert!(!schema.text.contains("::std::"));
    // A module of that crate uses the alias and declares nothing.
    let planned = plan(&[all_lines("src/sub.rs", module)], None);
    let entries: Vec<Entry<'_>> = planned
        .mutants
        .iter()
        .enumerate()
        .map(|(i, m)| Entry {
            number: i as u32 + 1,
            edit: &m.edit,
        })
        .collect();
    let schema = schema::rewrite(module, &entries, schema::Std::Alias);
    assert!(!schema.text.contains("extern crate"));
    assert!(schema.text.contains("::__assay_std::env::var"));
}

#[test]
fn a_result_alias_with_its_types_fixed_is_replaced_by_ok_as_cargo_mutants_does() {
    let source = "use std::fmt;\n\npub struct Title;\n\nimpl fmt::Display for Title {\n    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {\n        f.write_str(\"x\")\n    }\n}\n\npub fn parse(text: &str) -> io::Result<u32> {\n    Ok(text.len() as u32)\n}\n";
    let plan = plan(&[all_lines("src/lib.rs", source)], None);
    let descriptions: Vec<&str> = plan
        .mutants
        .iter()
        .map(|m| m.description.as_str())
        .collect();
    assert!(
        descriptions.contains(&"`fn fmt` body -> `Ok(Default::default())`"),
        "{descriptions:#?}"
    );
    assert!(
        descriptions.contains(&"`fn parse` body -> `Ok(0)`"),
        "{descriptions:#?}"
    );
    assert!(
        !descriptions
            .iter()
            .any(|d| d.ends_with("-> `Default::default()`"))
    );
}

#[test]
fn a_rust_file_with_200k_nested_parentheses_around_a_syntax_error_is_excluded_not_a_crash() {
    let source = format!(
        "pub fn pages(items: u32, per: u32) -> u32 {{\n    items / per\n}}\n\npub const LIMIT: u32 = {}{}{};\n",
        "(".repeat(200_000),
        "1 +",
        ")".repeat(200_000)
    );
    let plan = plan(&[all_lines("src/lib.rs", &source)], None);
    assert!(plan.mutants.is_empty(), "{}", plan.mutants.len());
    assert_eq!(plan.excluded_files.len(), 1, "{:?}", plan.excluded_files);
}

#[test]
fn a_return_type_nested_200k_deep_gets_values_without_walking_every_level() {
    let depth = 200_000;
    let source = format!(
        "pub fn pages() -> {}u32{} {{\n    None\n}}\n",
        "Option<".repeat(depth),
        ">".repeat(depth)
    );
    let plan = plan(&[all_lines("src/lib.rs", &source)], None);
    // The grammar may or may not take it; whatever it makes of it, planning answers, and any
    // replacement stops nesting at the cap.
    for mutant in &plan.mutants {
        assert!(mutant.edit.replacement.len() < 1_000, "{}", mutant.id);
    }
}

#[test]
fn a_sum_of_a_hundred_terms_builds_its_schema_with_the_deepest_sites_on_their_own() {
    // Each `+` is a site around the sum before it: a hundred sites nested in one another.
    let terms = 100;
    let mut sum = String::from("a");
    for _ in 1..terms {
        sum.push_str(" + a");
    }
    let source = format!("pub fn total(a: u64) -> u64 {{\n    {sum}\n}}\n");
    let plan = plan(&[all_lines("src/lib.rs", &source)], None);
    assert!(plan.mutants.len() > 64, "{}", plan.mutants.len());
    let schema = schema_of(&source, &plan.mutants);
    assert_eq!(
        schema.held.len() + schema.fallback.len(),
        plan.mutants.len()
    );
    assert!(
        schema
            .fallback
            .iter()
            .any(|(_, why)| why.contains("nested inside")),
        "{:?}",
        schema.fallback.first()
    );
}
