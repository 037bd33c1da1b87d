//! JavaScript mutant schemata: every mutant of a file behind a runtime switch, so one tree
//! holds them all and each mutant is a run of the tests with [`SWITCH_VARIABLE`] set to its
//! number. There is nothing to build: node reads the switch once per file, as it loads
//! (`var __assay_m = +(globalThis.__assay_mutant ?? globalThis.process?.env?.ASSAY_MUTANT ??
//! 0)`: the global is a batch's, which loads the files again per mutant; after a shebang and the
//! directive prologue, valid in ES modules and CommonJS alike, and `var` so a function of the
//! file called early through an import cycle sees the unmutated code rather than a TDZ error).
//!
//! A mutated expression becomes `(__assay_m === 7 ? (a - b) : (__assay_m || __assay_t("7"), a + b))`;
//! an emptied block `{ … }` becomes `{ if (__assay_m === 7) {} else if (…trace…) { … } }`.
//! Unmutated, each site tells [`TRACE_MARK`] on stderr the first time a process reaches it,
//! when [`TRACE_VARIABLE`] is `on`: that is the coverage a mutant's tests are chosen by.
//!
//! What cannot go behind the switch (no expression spans the edit, a directive would be lost,
//! an assignment's target) and any mutant whose switched form does not re-parse with
//! tree-sitter leaves the schema and runs on its own with its edit applied. Pure: the caller
//! writes the tree and runs the jobs.

use super::syntax::{self, Dialect};
use crate::mutation::mutants::switch::{Entry, SwitchedSite, shallow_sites};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use tree_sitter::Node;

/// The variable naming the mutant a run turns on: `0` or unset runs the unmutated code.
pub const SWITCH_VARIABLE: &str = "ASSAY_MUTANT";

/// The variable that turns on the unmutated run's trace (`on`).
pub use assay_common::test_binaries::TRACE_VARIABLE;

/// The first field of a trace line a site writes: `assay-reached\tNUMBERS`. Assay's node:test
/// reporter forwards it as `assay-reached-in\tFILE\tNUMBERS`, the file named by node.
pub const TRACE_MARK: &str = "assay-reached";

/// What the file-level prologue declares: the switch, read once, and the tracer.
fn prologue() -> String {
    format!(
        "var __assay_m = +(globalThis.__assay_mutant ?? globalThis.process?.env?.{SWITCH_VARIABLE} ?? 0); \
         function __assay_t(s) {{ var g = globalThis, r = g.__assay_reached || \
         (g.__assay_reached = new Set()); if (!r.has(s)) {{ r.add(s); \
         if (g.process?.env?.{TRACE_VARIABLE} === \"on\") \
         g.process.stderr.write(\"\\n{TRACE_MARK}\\t\" + s + \"\\n\"); }} }} "
    )
}

/// A file rewritten with its mutants behind the switch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileSchema {
    /// The rewritten file.
    pub text: String,
    /// The mutants it holds behind the switch.
    pub held: BTreeSet<u32>,
    /// Mutants left to a run of their own (their edit applied to the tree), with why.
    pub fallback: Vec<(u32, String)>,
}

/// How a site's mutants are switched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// An expression: `(__assay_m === n ? (mutated) : (trace, original))`.
    Expression,
    /// A block: `{ if (__assay_m === n) mutated else if (trace) original }`.
    Block,
}

struct Site<'e> {
    range: Range<usize>,
    form: Form,
    entries: Vec<Entry<'e>>,
}

impl<'e> SwitchedSite<'e> for Site<'e> {
    fn range(&self) -> &Range<usize> {
        &self.range
    }

    fn entries(&self) -> &[Entry<'e>] {
        &self.entries
    }
}

/// The most sites of a file whose switched forms are parsed one by one, when the whole does
/// not parse: each is a parse of the whole file.
const MAX_SITES_CHECKED_ALONE: usize = 2_000;

/// Rewrites `source` (a file of `dialect`) with `entries` behind the switch; what it cannot
/// hold goes to `fallback`.
pub(crate) fn rewrite(dialect: Dialect, source: &str, entries: &[Entry<'_>]) -> FileSchema {
    let Some(tree) = syntax::parse(dialect, source) else {
        let why = format!("the file does not parse as {}", dialect.name());
        return all_fallback(source, entries, &why);
    };
    let root = tree.root_node();
    let mut fallback = Vec::new();
    let mut sites: BTreeMap<(usize, std::cmp::Reverse<usize>), Site<'_>> = BTreeMap::new();
    for entry in entries {
        match place(root, entry.edit.start, entry.edit.end, source) {
            Ok((node, form)) => sites
                .entry((node.start_byte(), std::cmp::Reverse(node.end_byte())))
                .or_insert_with(|| Site {
                    range: node.byte_range(),
                    form,
                    entries: Vec::new(),
                })
                .entries
                .push(*entry),
            Err(why) => fallback.push((entry.number, why.to_owned())),
        }
    }
    let mut sites = shallow_sites(sites.into_values().collect(), &mut fallback);
    let starts = statement_starts(root);
    let insert_at = prologue_end(root, source);
    // Most schemata parse whole; where one does not, each site alone must re-parse where it
    // stands, and one that does not leaves the schema (a parse of the file per site, so only
    // for a file with few enough of them).
    let whole = |sites: &[Site<'_>]| {
        let mut out = String::with_capacity(source.len() * 2);
        Emitter {
            source,
            sites,
            starts: &starts,
        }
        .emit(0..source.len(), None, &mut out);
        syntax::parse_clean(dialect, &out).is_ok()
    };
    if !whole(&sites) {
        if sites.len() > MAX_SITES_CHECKED_ALONE {
            return all_fallback(
                source,
                entries,
                &format!(
                    "the switched file does not parse, and its {} sites are too many to check one by one",
                    sites.len()
                ),
            );
        }
        sites.retain(|site| {
            if whole(std::slice::from_ref(site)) {
                return true;
            }
            fallback.extend(site.entries.iter().map(|e| {
                (
                    e.number,
                    format!("its switched form does not parse as {}", dialect.name()),
                )
            }));
            false
        });
    }
    if sites.is_empty() {
        fallback.sort();
        return FileSchema {
            text: source.to_owned(),
            held: BTreeSet::new(),
            fallback,
        };
    }
    let emitter = Emitter {
        source,
        sites: &sites,
        starts: &starts,
    };
    let mut out = String::with_capacity(source.len() * 2);
    emitter.emit(0..insert_at, None, &mut out);
    out.push_str(&prologue());
    emitter.emit(insert_at..source.len(), None, &mut out);
    if let Err(line) = syntax::parse_clean(dialect, &out) {
        return all_fallback(
            source,
            entries,
            &format!("the rewritten file does not parse (line {line})"),
        );
    }
    fallback.sort();
    FileSchema {
        text: out,
        held: sites
            .iter()
            .flat_map(|s| s.entries.iter().map(|e| e.number))
            .collect(),
        fallback,
    }
}

fn all_fallback(source: &str, entries: &[Entry<'_>], why: &str) -> FileSchema {
    FileSchema {
        text: source.to_owned(),
        held: BTreeSet::new(),
        fallback: entries.iter().map(|e| (e.number, why.to_owned())).collect(),
    }
}

/// Where the prologue goes: after a shebang line and the directive prologue (`'use strict'`),
/// on the same line, so no line of the file moves.
fn prologue_end(root: Node<'_>, source: &str) -> usize {
    let mut end = 0;
    let mut cursor = root.walk();
    for node in root.named_children(&mut cursor) {
        match node.kind() {
            "hash_bang_line" => {
                // The shebang's line ends with its newline: the prologue starts line 2.
                end = source[node.end_byte()..]
                    .find('\n')
                    .map_or(source.len(), |at| node.end_byte() + at + 1);
            }
            "comment" => {}
            "expression_statement" if is_directive(node) => end = node.end_byte(),
            _ => break,
        }
    }
    end
}

fn is_directive(statement: Node<'_>) -> bool {
    statement.kind() == "expression_statement"
        && statement
            .named_child(0)
            .is_some_and(|c| c.kind() == "string")
}

/// The start of every expression statement in a list of statements: a site starting there
/// opens with `(`, which would continue a previous line that has no semicolon (`f()\n(…)`
/// calls `f()`'s value), so it gets a `;` first.
fn statement_starts(root: Node<'_>) -> BTreeSet<usize> {
    let mut starts = BTreeSet::new();
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        let list = matches!(
            node.kind(),
            "program" | "statement_block" | "switch_case" | "switch_default" | "class_static_block"
        );
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            if list && child.kind() == "expression_statement" {
                starts.insert(child.start_byte());
            }
            stack.push(child);
        }
    }
    starts
}

/// The node a mutant's switch goes around, and how; or why it has none.
fn place<'t>(
    root: Node<'t>,
    start: usize,
    end: usize,
    source: &str,
) -> Result<(Node<'t>, Form), &'static str> {
    const UNPLACED: &str = "the schema has no place for this edit";
    let mut node = root.descendant_for_byte_range(start, end).ok_or(UNPLACED)?;
    while node.byte_range() != (start..end) {
        node = node.parent().ok_or(UNPLACED)?;
    }
    // The widest node of that range: a token's parent may share it.
    while let Some(parent) = node.parent().filter(|p| p.byte_range() == (start..end)) {
        if parent.kind() == "expression_statement" {
            break;
        }
        node = parent;
    }
    let parent = node.parent();
    let wrapped = match (node.kind(), parent.map(|p| p.kind())) {
        ("statement_block", _) => {
            let mut cursor = node.walk();
            let first = node.named_children(&mut cursor).next();
            if first.is_some_and(is_directive) {
                return Err("a block with a directive, which the switch would make a string");
            }
            return Ok((node, Form::Block));
        }
        ("optional_chain", _) => outermost_chain(parent.ok_or(UNPLACED)?),
        (
            _,
            Some(
                "binary_expression"
                | "augmented_assignment_expression"
                | "update_expression"
                | "unary_expression",
            ),
        ) if parent.and_then(|p| p.child_by_field_name("operator")) == Some(node) => {
            parent.ok_or(UNPLACED)?
        }
        (
            "true"
            | "false"
            | "string"
            | "array"
            | "object"
            | "binary_expression"
            | "unary_expression"
            | "parenthesized_expression"
            | "identifier"
            | "call_expression"
            | "member_expression"
            | "subscript_expression"
            | "number"
            | "ternary_expression"
            | "sequence_expression"
            | "assignment_expression"
            | "null"
            | "undefined"
            | "template_string"
            | "this"
            | "await_expression"
            | "new_expression",
            _,
        ) => node,
        _ => return Err(UNPLACED),
    };
    // A callee keeps its `this` only as written: `(o.f)()` is `o.f()`, `(c ? o.f : o.g)()`
    // is not. The call goes behind the switch instead.
    let wrapped = match wrapped.parent() {
        Some(call)
            if call.kind() == "call_expression"
                && call.child_by_field_name("function") == Some(wrapped) =>
        {
            call
        }
        _ => wrapped,
    };
    if let Some(parent) = wrapped.parent() {
        let target = matches!(
            parent.kind(),
            "assignment_expression" | "augmented_assignment_expression" | "for_in_statement"
        ) && parent.child_by_field_name("left") == Some(wrapped);
        let argument_of_update =
            parent.kind() == "update_expression" && wrapped.kind() != "update_expression";
        if target || argument_of_update {
            return Err("an assignment's target, which no conditional expression can be");
        }
        // A tagged template's tag, a `new`'s constructor: as with calls, keep it whole.
        if matches!(parent.kind(), "new_expression") {
            return Err(UNPLACED);
        }
    }
    if source.get(wrapped.byte_range()).is_none() {
        return Err(UNPLACED);
    }
    Ok((wrapped, Form::Expression))
}

/// The whole optional chain `node` is a link of: `a?.b.c` short-circuits as one, so
/// `(a?.b).c` would throw where `a?.b.c` is `undefined`.
fn outermost_chain(mut node: Node<'_>) -> Node<'_> {
    while let Some(parent) = node.parent() {
        let link = match parent.kind() {
            "member_expression" | "subscript_expression" => {
                parent.child_by_field_name("object") == Some(node)
            }
            "call_expression" => parent.child_by_field_name("function") == Some(node),
            _ => false,
        };
        if !link {
            break;
        }
        node = parent;
    }
    node
}

/// Writes a file's schema: its text with its sites rewritten.
struct Emitter<'a, 'e> {
    source: &'a str,
    sites: &'a [Site<'e>],
    /// Starts of expression statements in statement lists (see [`statement_starts`]).
    starts: &'a BTreeSet<usize>,
}

impl Emitter<'_, '_> {
    /// Writes `range` of the source, each site inside it (but `skip`) rewritten.
    fn emit(&self, range: Range<usize>, skip: Option<usize>, out: &mut String) {
        let mut at = range.start;
        for (index, site) in self.sites.iter().enumerate() {
            let inside = range.start <= site.range.start && site.range.end <= range.end;
            if !inside || Some(index) == skip || site.range.start < at {
                continue;
            }
            out.push_str(&self.source[at..site.range.start]);
            // A site at the very start of the one around it is inside its parentheses.
            let enclosed = skip.is_some_and(|s| self.sites[s].range.start == site.range.start);
            if !enclosed && self.starts.contains(&site.range.start) {
                out.push(';');
            }
            self.emit_site(index, out);
            at = site.range.end;
        }
        out.push_str(&self.source[at..range.end]);
    }

    fn emit_site(&self, index: usize, out: &mut String) {
        let site = &self.sites[index];
        let original = &self.source[site.range.clone()];
        let numbers = site
            .entries
            .iter()
            .map(|e| e.number.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let trace = format!("__assay_m || __assay_t(\"{numbers}\")");
        let mutated = |entry: &Entry<'_>| {
            let from = entry.edit.start - site.range.start;
            let to = entry.edit.end - site.range.start;
            format!(
                "{}{}{}",
                &original[..from],
                entry.edit.replacement,
                &original[to..]
            )
        };
        match site.form {
            Form::Expression => {
                out.push('(');
                for entry in &site.entries {
                    out.push_str(&format!(
                        "__assay_m === {} ? ({}) : ",
                        entry.number,
                        mutated(entry)
                    ));
                }
                out.push('(');
                out.push_str(&trace);
                out.push_str(", ");
                self.emit(site.range.clone(), Some(index), out);
                out.push_str("))");
            }
            Form::Block => {
                out.push_str("{ ");
                for entry in &site.entries {
                    out.push_str(&format!(
                        "if (__assay_m === {}) {} else ",
                        entry.number,
                        mutated(entry)
                    ));
                }
                out.push_str(&format!("if (({trace}, true)) "));
                self.emit(site.range.clone(), Some(index), out);
                out.push_str(" }");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_common::job::ByteEdit;
    use assay_common::tree_path::TreePath;

    fn edit(source: &str, find: &str, replacement: &str) -> ByteEdit {
        let start = source.find(find).expect("the text is in the source");
        ByteEdit {
            path: TreePath::new("a.js").expect("a path"),
            start,
            end: start + find.len(),
            replacement: replacement.into(),
        }
    }

    #[test]
    fn an_operator_and_a_block_go_behind_the_switch_and_the_prologue_after_directives() {
        let source = "#!/usr/bin/env node\n'use strict';\nfunction f(a, b) {\n  return a + b;\n}\nmodule.exports = f;\n";
        let plus = edit(source, "+", "-");
        let body = edit(source, "{\n  return a + b;\n}", "{\n\n}");
        let entries = [
            Entry {
                number: 1,
                edit: &plus,
            },
            Entry {
                number: 2,
                edit: &body,
            },
        ];
        let schema = rewrite(Dialect::JavaScript, source, &entries);
        assert_eq!(schema.fallback, Vec::new(), "{}", schema.text);
        assert_eq!(schema.held, BTreeSet::from([1, 2]));
        assert!(
            schema
                .text
                .starts_with("#!/usr/bin/env node\n'use strict';var __assay_m")
        );
        assert!(
            schema
                .text
                .contains("(__assay_m === 1 ? (a - b) : (__assay_m || __assay_t(\"1\"), a + b))"),
            "{}",
            schema.text
        );
        assert!(
            schema.text.contains(
                "if (__assay_m === 2) {\n\n} else if ((__assay_m || __assay_t(\"2\"), true)) {"
            ),
            "{}",
            schema.text
        );
        // The prologue shares the directive's line: no line before a site moves.
        assert_eq!(
            schema.text.lines().nth(2),
            Some("function f(a, b) { if (__assay_m === 2) {")
        );
    }

    #[test]
    fn a_statement_that_opens_a_line_gets_a_semicolon_first() {
        let source = "let x = 1\nx++\nmodule.exports = x\n";
        let update = edit(source, "++", "--");
        let schema = rewrite(
            Dialect::JavaScript,
            source,
            &[Entry {
                number: 3,
                edit: &update,
            }],
        );
        assert!(
            schema.text.contains("\n;(__assay_m === 3 ? (x--)"),
            "{}",
            schema.text
        );
    }

    #[test]
    fn a_callee_keeps_its_receiver_and_a_chain_short_circuits_whole() {
        let source = "const r = o?.f();\nconst s = a?.b.c;\n";
        let call = edit(source, "?.", ".");
        let chain_at = source.rfind("?.").expect("a second chain");
        let chain = ByteEdit {
            start: chain_at,
            end: chain_at + 2,
            ..call.clone()
        };
        let schema = rewrite(
            Dialect::JavaScript,
            source,
            &[
                Entry {
                    number: 1,
                    edit: &call,
                },
                Entry {
                    number: 2,
                    edit: &chain,
                },
            ],
        );
        assert!(
            schema.text.contains("(__assay_m === 1 ? (o.f()) :"),
            "{}",
            schema.text
        );
        assert!(
            schema.text.contains("(__assay_m === 2 ? (a.b.c) :"),
            "{}",
            schema.text
        );
    }

    #[test]
    fn a_mutant_whose_switched_form_does_not_parse_leaves_the_schema() {
        // A method named by a string: `("" ? …)() {}` is no method.
        let source = "class A {\n  'm'() { return 1 + 2; }\n}\n";
        let name = edit(source, "'m'", "''");
        let plus = edit(source, "+", "-");
        let schema = rewrite(
            Dialect::JavaScript,
            source,
            &[
                Entry {
                    number: 1,
                    edit: &name,
                },
                Entry {
                    number: 2,
                    edit: &plus,
                },
            ],
        );
        assert_eq!(schema.held, BTreeSet::from([2]));
        assert_eq!(schema.fallback.len(), 1);
        assert_eq!(schema.fallback[0].0, 1);
        assert!(syntax::parse_clean(Dialect::JavaScript, &schema.text).is_ok());
    }

    #[test]
    fn an_assignment_target_is_never_switched() {
        let source = "let a = [1];\n[a] = [2];\n";
        let target = edit(source, "[a]", "[]");
        let schema = rewrite(
            Dialect::JavaScript,
            source,
            &[Entry {
                number: 1,
                edit: &target,
            }],
        );
        assert!(schema.held.is_empty());
        assert_eq!(schema.text, source);
    }

    #[test]
    fn a_hostile_nesting_is_held_only_to_its_limit_and_the_schema_still_parses() {
        let depth = 1_000;
        let source = format!(
            "module.exports = {}1{};\n",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let file = crate::mutation::mutants::ChangedFile {
            path: "deep.js".into(),
            bytes: source.clone().into_bytes(),
            changed_lines: [1].into(),
        };
        let plan = crate::mutation::mutants::plan_mutants_in(
            &super::super::JavaScript,
            &[file],
            None,
            crate::mutation::mutants::OperatorSet::Default,
        );
        assert_eq!(plan.mutants.len(), depth, "{:?}", plan.skipped.first());
        let entries: Vec<Entry<'_>> = plan
            .mutants
            .iter()
            .enumerate()
            .map(|(at, m)| Entry {
                number: at as u32 + 1,
                edit: &m.edit,
            })
            .collect();
        let started = std::time::Instant::now();
        let schema = rewrite(Dialect::JavaScript, &source, &entries);
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
        assert_eq!(
            schema.held.len(),
            crate::mutation::mutants::switch::MAX_SITE_NESTING
        );
        assert_eq!(
            schema.fallback.len(),
            depth - crate::mutation::mutants::switch::MAX_SITE_NESTING
        );
        assert!(syntax::parse_clean(Dialect::JavaScript, &schema.text).is_ok());
    }
}
