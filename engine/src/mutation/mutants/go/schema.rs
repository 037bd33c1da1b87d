//! Go mutant schemata: every mutant of a package compiled into its test executable at once,
//! each behind a runtime switch, so the package builds once (`go test -c`) and each mutant is a
//! run of that executable with [`SWITCH_VARIABLE`] at its number.
//!
//! Go has no expression that picks between two values of a type the rewrite does not know,
//! so the switch is placed where no type is needed: the innermost *statement* around a mutant
//! (an assignment, a call, `x++`, a `return`, `break`/`continue`, `go`, `defer`, a send)
//! becomes `if assayMutantOn(N) { MUTATED } else if … { … } else { ORIGINAL }`, on the lines the
//! original held when it held one. Every variant stays in the code, so no variable or import
//! loses its last use and `return` still ends the function. A mutant in an `if` or `for`
//! condition switches the condition (`func() bool { … }()`, a condition is a `bool`); one in a
//! `for` clause's update or an `if` initializer switches that statement inside a closure.
//! What holds no such place (a declaration `x := …`, a `case` value, a mutant inside another
//! mutant's statement) switches its whole function to a mutated copy of it
//! ([`super::function_copy`]); what is outside every function body (a constant, a package
//! variable) or in a function that cannot be copied builds on its own.
//!
//! The switch is read once from the environment in a file the schema adds to the package. With
//! the trace variable set, each site appends to the trace file, the first time it is reached,
//! which test reached it (the run job runs each top-level test alone to name it, and copies
//! the file to its stderr: test2json would read the executable's stderr as test output). Pure: the caller
//! runs the builds and [`blame`]s their errors.

use super::function_copy::Function;
use super::syntax;
use crate::mutation::mutants::rust::schema::TRACE_MARK;
pub use crate::mutation::mutants::switch::Entry;
use assay_common::job::ByteEdit;
use assay_common::test_binaries::{TRACE_FILE_VARIABLE, TRACE_TEST_VARIABLE, TRACE_VARIABLE};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use tree_sitter::Node;

/// The variable naming the mutant a schema build runs: `0` or unset runs the unmutated code.
pub const SWITCH_VARIABLE: &str = "ASSAY_MUTANT";

/// The file the schema adds to each package it rewrites: the switch and the trace.
pub const SWITCH_FILE: &str = "zz_assay_mutant_switch.go";

/// Why a mutant outside every function body builds on its own.
pub const OUTSIDE_FUNCTIONS: &str =
    "outside every function body (a constant, a package-level variable), where no switch can go";

/// Why a mutant no statement holds is not switched there (its function's copy may hold it).
pub const NO_STATEMENT: &str =
    "no statement or condition around it can hold the switch (a declaration, a case value)";

/// Why a mutant inside another mutant's switched statement builds on its own.
pub const NESTED: &str = "inside a statement the schema already switches for another mutant";

/// A file rewritten with its mutants behind the switch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileSchema {
    /// The rewritten text.
    pub text: String,
    /// Each held mutant's own code in `text` (its variant of the statement), by number.
    pub arms: BTreeMap<u32, Range<usize>>,
    /// Each switched place in `text`, with the mutants it holds.
    pub sites: Vec<(Range<usize>, Vec<u32>)>,
    /// Mutants left to a build of their own, with why.
    pub fallback: Vec<(u32, String)>,
    /// Mutants that cannot compile, told without a build, with the compiler's complaint.
    pub unviable: Vec<(u32, String)>,
}

/// How a place holds the switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Host {
    /// A statement of a statement list: an `if` chain in its place.
    Statement,
    /// A simple statement where only a simple statement fits: the `if` chain in a closure.
    Closure,
    /// A condition: a closure returning the chosen variant.
    Condition,
}

const SIMPLE: [&str; 10] = [
    "expression_statement",
    "assignment_statement",
    "inc_statement",
    "dec_statement",
    "return_statement",
    "break_statement",
    "continue_statement",
    "send_statement",
    "go_statement",
    "defer_statement",
];

/// What `node` (a child of `parent`) can hold, if anything.
fn host_of(node: Node<'_>, parent: Node<'_>) -> Option<Host> {
    let kind = node.kind();
    let is = |field: &str| parent.child_by_field_name(field) == Some(node);
    match parent.kind() {
        "statement_list" if SIMPLE.contains(&kind) => Some(Host::Statement),
        "for_clause" if is("update") && SIMPLE[..4].contains(&kind) => Some(Host::Closure),
        "if_statement" | "expression_switch_statement"
            if is("initializer") && SIMPLE[..4].contains(&kind) =>
        {
            Some(Host::Closure)
        }
        "if_statement" | "for_clause" if is("condition") => Some(Host::Condition),
        "for_statement"
            if node.is_named()
                && !matches!(kind, "for_clause" | "range_clause" | "block" | "comment") =>
        {
            Some(Host::Condition)
        }
        _ => None,
    }
}

/// The innermost place around `start..end` that can hold the switch: one walk down.
fn innermost_host(root: Node<'_>, start: usize, end: usize) -> Option<(Range<usize>, Host)> {
    let mut node = root;
    let mut found = None;
    loop {
        let mut cursor = node.walk();
        let child = node.children(&mut cursor).find(|c| {
            c.start_byte() <= start && end <= c.end_byte() && c.end_byte() > c.start_byte()
        });
        let Some(child) = child else {
            return found;
        };
        if let Some(host) = host_of(child, node) {
            found = Some((child.byte_range(), host));
        }
        node = child;
    }
}

/// Rewrites `source` with `entries` behind the switch.
pub fn rewrite(source: &str, entries: &[Entry<'_>]) -> FileSchema {
    let mut schema = FileSchema::default();
    let Some(tree) = syntax::parse(source) else {
        schema.text = source.to_owned();
        schema.fallback = entries
            .iter()
            .map(|e| (e.number, "the file did not parse".to_owned()))
            .collect();
        return schema;
    };
    let root = tree.root_node();
    // Places by their range, each with its kind and entries.
    let mut places: BTreeMap<(usize, std::cmp::Reverse<usize>), (Host, Vec<Entry<'_>>)> =
        BTreeMap::new();
    // Mutants no kept place holds, with why: each may go to a copy of its function.
    let mut loose: Vec<(Entry<'_>, &'static str)> = Vec::new();
    for entry in entries {
        let (start, end) = (entry.edit.start, entry.edit.end);
        if let Some(unused) = removed_last_use(root, source, entry.edit) {
            schema.unviable.push((entry.number, unused));
            continue;
        }
        match innermost_host(root, start, end) {
            Some((range, host)) => places
                .entry((range.start, std::cmp::Reverse(range.end)))
                .or_insert_with(|| (host, Vec::new()))
                .1
                .push(*entry),
            None => loose.push((*entry, NO_STATEMENT)),
        }
    }
    // A place inside another kept place is not kept: its mutants are loose.
    let mut kept = Vec::with_capacity(places.len());
    let mut kept_end = 0;
    for ((start, std::cmp::Reverse(end)), (host, entries)) in places {
        if start < kept_end {
            loose.extend(entries.into_iter().map(|e| (e, NESTED)));
            continue;
        }
        kept_end = end;
        kept.push((start..end, host, entries));
    }
    // Loose mutants in a function that can be copied, by the function's body.
    let mut copied_functions: BTreeMap<usize, (Function, Vec<Entry<'_>>)> = BTreeMap::new();
    for (entry, why) in loose {
        match Function::around(root, source, entry.edit) {
            Ok(function) => copied_functions
                .entry(function.body_open)
                .or_insert_with(|| (function, Vec::new()))
                .1
                .push(entry),
            Err(None) if why == NO_STATEMENT => schema
                .fallback
                .push((entry.number, OUTSIDE_FUNCTIONS.to_owned())),
            Err(None) => schema.fallback.push((entry.number, why.to_owned())),
            Err(Some(not_copyable)) => schema.fallback.push((
                entry.number,
                format!("{why}, and its function cannot be copied: {not_copyable}"),
            )),
        }
    }
    // What is written, in source order: a kept place replaces its range, a dispatch to the
    // copies goes in just after its function body's `{`.
    enum Write<'e> {
        Place(Host, Vec<Entry<'e>>),
        Dispatch(Vec<u32>),
    }
    let mut writes: Vec<(Range<usize>, Write<'_>)> = kept
        .into_iter()
        .map(|(range, host, entries)| (range, Write::Place(host, entries)))
        .collect();
    writes.extend(copied_functions.values().map(|(function, entries)| {
        let at = function.body_open;
        (
            at..at,
            Write::Dispatch(entries.iter().map(|e| e.number).collect()),
        )
    }));
    writes.sort_by_key(|(range, _)| range.start);
    let mut text = String::with_capacity(source.len() * 2);
    let mut copied = 0;
    for (range, write) in writes {
        text.push_str(&source[copied..range.start]);
        let site_start = text.len();
        match write {
            Write::Place(host, entries) => {
                write_place(
                    &mut text,
                    &mut schema,
                    &source[range.clone()],
                    range.start,
                    host,
                    &entries,
                );
                schema.sites.push((
                    site_start..text.len(),
                    entries.iter().map(|e| e.number).collect(),
                ));
            }
            Write::Dispatch(numbers) => {
                let (function, _) = &copied_functions[&range.start];
                text.push_str(&function.dispatch(source, &numbers));
                schema.sites.push((site_start..text.len(), numbers));
            }
        }
        copied = range.end;
    }
    text.push_str(&source[copied..]);
    // Each copy after everything, so no line of the original moves.
    for (function, entries) in copied_functions.values() {
        for entry in entries {
            text.push_str(if text.ends_with('\n') { "\n" } else { "\n\n" });
            let arm_start = text.len();
            text.push_str(&function.copy(source, entry.number, entry.edit));
            schema.arms.insert(entry.number, arm_start..text.len());
            text.push('\n');
        }
    }
    schema.text = text;
    schema
}

/// Writes the place `original` (at `start` in the source) with `entries` behind the switch.
fn write_place(
    text: &mut String,
    schema: &mut FileSchema,
    original: &str,
    start: usize,
    host: Host,
    entries: &[Entry<'_>],
) {
    let (open, close) = match host {
        Host::Statement => ("", ""),
        Host::Closure => ("func() { ", " }()"),
        Host::Condition => ("func() bool { ", ""),
    };
    text.push_str(open);
    for entry in entries {
        let (a, b) = (entry.edit.start - start, entry.edit.end - start);
        text.push_str(&format!("if assayMutantOn({}) {{ ", entry.number));
        let arm_start = text.len();
        if host == Host::Condition {
            text.push_str("return ");
        }
        text.push_str(&original[..a]);
        text.push_str(&entry.edit.replacement);
        text.push_str(&original[b..]);
        schema.arms.insert(entry.number, arm_start..text.len());
        text.push_str(match host {
            Host::Condition => " }; ",
            _ => " } else ",
        });
    }
    match host {
        Host::Condition => {
            text.push_str("return ");
            text.push_str(original);
            text.push_str(" }()");
        }
        _ => {
            text.push_str("{ ");
            text.push_str(original);
            text.push_str(" }");
        }
    }
    text.push_str(close);
}

/// What Go says of a local variable or an imported package whose last use `edit` removes:
/// the mutant does not compile (Go refuses an unused variable or import), though beside the
/// original in the schema it would, so it is told here, without a build. Uses are counted by name over the innermost function (or function
/// literal) that declares the name (an import's over the file), so a shadowed name may hide a
/// removed last use, never invent one.
fn removed_last_use(root: Node<'_>, source: &str, edit: &ByteEdit) -> Option<String> {
    let range = edit.start..edit.end;
    let kept: BTreeSet<&str> = edit
        .replacement
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .collect();
    let removed: BTreeSet<&str> = nodes(root)
        .filter(|n| {
            n.kind() == "identifier" && range.start <= n.start_byte() && n.end_byte() <= range.end
        })
        .map(|n| syntax::text(n, source))
        .filter(|name| !kept.contains(name) && *name != "_")
        .collect();
    if removed.is_empty() {
        return None;
    }
    // The functions around the edit, innermost first (a function literal is one).
    let mut functions = Vec::new();
    let mut node = root;
    loop {
        let mut cursor = node.walk();
        let Some(child) = node
            .children(&mut cursor)
            .find(|c| c.start_byte() <= range.start && range.end <= c.end_byte())
        else {
            break;
        };
        if matches!(
            child.kind(),
            "function_declaration" | "method_declaration" | "func_literal"
        ) {
            functions.insert(0, child);
        }
        node = child;
    }
    let outside = |n: &Node<'_>| n.end_byte() <= range.start || range.end <= n.start_byte();
    for name in removed {
        let named = |n: &Node<'_>| n.kind() == "identifier" && syntax::text(*n, source) == name;
        // The innermost function declaring the name holds every use of it the edit could
        // have been the last of.
        let function = functions.iter().copied().find(|f| {
            nodes(*f)
                .filter(|n| named(n))
                .any(|n| matches!(role(n), Role::Declared | Role::Parameter))
        });
        if let Some(function) = function {
            let mut local = false;
            let mut used = false;
            for n in nodes(function).filter(|n| named(n)) {
                match role(n) {
                    Role::Parameter => {
                        local = false;
                        used = true;
                        break;
                    }
                    Role::Declared => local = true,
                    Role::Assigned => {}
                    Role::Used => used |= outside(&n),
                }
            }
            if local && !used {
                return Some(format!(
                    "declared and not used: {name} (the mutant removes its last use)"
                ));
            }
        }
        if imports(root, source).contains(name) {
            let used = nodes(root).any(|n| {
                named(&n)
                    && outside(&n)
                    && n.parent().is_some_and(|p| {
                        p.kind() == "selector_expression"
                            && p.child_by_field_name("operand") == Some(n)
                    })
            });
            if !used {
                return Some(format!(
                    "imported and not used: {name} (the mutant removes its last use)"
                ));
            }
        }
    }
    None
}

/// What an identifier's occurrence does with its name.
enum Role {
    /// A function's parameter or result: never "declared and not used".
    Parameter,
    /// A declaration: `x :=`, `var x`, `for x := range`.
    Declared,
    /// Assigned to with a plain `=`: not a use to Go (`x += 1` and `x++` are).
    Assigned,
    /// Anything else.
    Used,
}

fn role(n: Node<'_>) -> Role {
    let Some(parent) = n.parent() else {
        return Role::Used;
    };
    let left_of = |list: Node<'_>, kind: &str| {
        list.parent()
            .is_some_and(|g| g.kind() == kind && g.child_by_field_name("left") == Some(list))
    };
    match parent.kind() {
        "parameter_declaration" | "variadic_parameter_declaration" => Role::Parameter,
        "var_spec" | "const_spec" => Role::Declared,
        "expression_list" if left_of(parent, "short_var_declaration") => Role::Declared,
        "expression_list" if left_of(parent, "range_clause") => Role::Declared,
        // Only a plain `=` leaves a variable unused to Go: `x += 1` and `x++` read it.
        "expression_list"
            if left_of(parent, "assignment_statement")
                && parent
                    .parent()
                    .and_then(|a| a.child_by_field_name("operator"))
                    .is_some_and(|op| op.kind() == "=") =>
        {
            Role::Assigned
        }
        _ => Role::Used,
    }
}

/// The names a file's imports bind: an alias, else the path's last element (less a `/vN`
/// major version, a `.vN` suffix and a `go-` prefix, as most packages are named).
fn imports<'s>(root: Node<'_>, source: &'s str) -> BTreeSet<&'s str> {
    let mut names = BTreeSet::new();
    for spec in nodes(root).filter(|n| n.kind() == "import_spec") {
        if let Some(alias) = spec.child_by_field_name("name") {
            names.insert(syntax::text(alias, source));
            continue;
        }
        let Some(path) = spec.child_by_field_name("path") else {
            continue;
        };
        let path = syntax::text(path, source).trim_matches(|c| c == '"' || c == '`');
        let mut parts = path.rsplit('/');
        let mut last = parts.next().unwrap_or(path);
        if last.len() > 1 && last.starts_with('v') && last[1..].chars().all(|c| c.is_ascii_digit())
        {
            last = parts.next().unwrap_or(last);
        }
        let last = last.split(".v").next().unwrap_or(last);
        names.insert(last.strip_prefix("go-").unwrap_or(last));
    }
    names
}

/// Every node under `root`, `root` included, by an explicit stack.
fn nodes(root: Node<'_>) -> impl Iterator<Item = Node<'_>> {
    let mut stack = vec![root];
    std::iter::from_fn(move || {
        let node = stack.pop()?;
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor));
        Some(node)
    })
}

/// The package clause's name in `source` (`semver`), if it has one.
pub fn package_name(source: &str) -> Option<String> {
    let tree = syntax::parse(source)?;
    let root = tree.root_node();
    let mut cursor = root.walk();
    let clause = root
        .named_children(&mut cursor)
        .find(|n| n.kind() == "package_clause")?;
    let mut inner = clause.walk();
    let name = clause
        .named_children(&mut inner)
        .find(|n| n.kind() == "package_identifier")?;
    let name = syntax::text(name, source);
    let plain = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    plain.then(|| name.to_owned())
}

/// The file the schema adds to package `package`: the switch, read once, and the trace that
/// names, in the trace file, the test that first reaches each site (`assay-reached LABEL N TEST`, as
/// the trace reader reads it). `highest` is the highest switch number the package holds.
pub fn switch_file(package: &str, highest: u32) -> String {
    format!(
        r#"// Code generated by assay (mutant schema). DO NOT EDIT.

package {package}

import (
	assayos "os"
	assaystrconv "strconv"
	assayatomic "sync/atomic"
)

var assayMutantNumber, _ = assaystrconv.Atoi(assayos.Getenv("{SWITCH_VARIABLE}"))
var assayMutantTrace = assayos.Getenv("{TRACE_VARIABLE}")
var assayMutantTest = assayos.Getenv("{TRACE_TEST_VARIABLE}")
var assayMutantTraceFile = assayos.Getenv("{TRACE_FILE_VARIABLE}")
var assayMutantSeen [{size}]uint32

func assayMutantOn(n int) bool {{
	if assayMutantTrace != "" && n >= 0 && n < len(assayMutantSeen) && assayatomic.CompareAndSwapUint32(&assayMutantSeen[n], 0, 1) {{
		line := "{TRACE_MARK}\t" + assayMutantTrace + "\t" + assaystrconv.Itoa(n) + "\t" + assayMutantTest + "\n"
		if f, err := assayos.OpenFile(assayMutantTraceFile, assayos.O_APPEND|assayos.O_CREATE|assayos.O_WRONLY, 0600); err == nil {{
			f.WriteString(line)
			f.Close()
		}}
	}}
	return n == assayMutantNumber
}}
"#,
        size = u64::from(highest) + 1,
    )
}

/// What a failed schema build's errors take out of the schema, by switch number.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Blamed {
    /// Errors inside these mutants' own variant: each would not compile alone either.
    pub unviable: BTreeMap<u32, String>,
    /// Errors in the switch around these (the original beside them): they build alone.
    pub alone: BTreeSet<u32>,
    /// The first error no mutant is blamed for, if any.
    pub unblamed: Option<String>,
}

/// Reads the Go compiler's errors (`PATH:LINE:COL: MESSAGE` lines on stderr) against the
/// rewritten files (`schemas`, by tree path): an error inside a mutant's own variant makes it
/// unviable, one elsewhere in a switched place sends that place's mutants to builds of their
/// own; anything else is unblamed.
pub fn blame(stderr: &str, schemas: &BTreeMap<String, FileSchema>) -> Blamed {
    let mut blamed = Blamed::default();
    for line in stderr.lines() {
        let Some((path, at, message)) = error_line(line) else {
            continue;
        };
        let found = schemas
            .iter()
            .find(|(p, _)| path == p.as_str() || path.ends_with(&format!("/{p}")));
        let Some((_, schema)) = found else {
            blamed.unblamed.get_or_insert_with(|| line.to_owned());
            continue;
        };
        let Some(offset) = offset_of(&schema.text, at) else {
            blamed.unblamed.get_or_insert_with(|| line.to_owned());
            continue;
        };
        if let Some((number, _)) = schema.arms.iter().find(|(_, r)| r.contains(&offset)) {
            blamed
                .unviable
                .entry(*number)
                .or_insert_with(|| message.to_owned());
        } else if let Some((_, held)) = schema.sites.iter().find(|(r, _)| r.contains(&offset)) {
            blamed.alone.extend(held.iter().copied());
        } else {
            blamed.unblamed.get_or_insert_with(|| line.to_owned());
        }
    }
    blamed
}

/// `PATH:LINE:COL: MESSAGE` of a `.go` file, the path without a leading `./`.
fn error_line(line: &str) -> Option<(&str, (usize, usize), &str)> {
    let (path, rest) = line.split_once(".go:")?;
    let mut parts = rest.splitn(3, ':');
    let line_no: usize = parts.next()?.parse().ok()?;
    let column: usize = parts.next()?.parse().ok()?;
    let message = parts.next()?.trim();
    let path = line.get(..path.len() + 3)?;
    let path = path.strip_prefix("./").unwrap_or(path);
    Some((path, (line_no, column), message))
}

/// The byte offset of 1-based `(line, column)` (a byte column, as Go counts it) in `text`.
fn offset_of(text: &str, (line, column): (usize, usize)) -> Option<usize> {
    let start = if line <= 1 {
        0
    } else {
        text.match_indices('\n').nth(line - 2)?.0 + 1
    };
    let offset = start + column.saturating_sub(1);
    (offset <= text.len()).then_some(offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_common::tree_path::TreePath;

    fn edit(source: &str, find: &str, replacement: &str) -> ByteEdit {
        let start = source.find(find).unwrap();
        ByteEdit {
            path: TreePath::new("calc.go").unwrap(),
            start,
            end: start + find.len(),
            replacement: replacement.to_owned(),
        }
    }

    /// Each edit as a mutant numbered from 1, in order.
    fn numbered(edits: &[ByteEdit]) -> Vec<Entry<'_>> {
        edits
            .iter()
            .enumerate()
            .map(|(at, edit)| Entry {
                number: at as u32 + 1,
                edit,
            })
            .collect()
    }

    const SOURCE: &str = "package calc\n\nconst k = 1 + 2\n\nfunc Sum(xs []int) int {\n\ttotal := 0\n\tfor i := 0; i < len(xs); i++ {\n\t\ttotal += xs[i]\n\t}\n\tif total > 10 {\n\t\treturn total - 1\n\t}\n\treturn total\n}\n";

    #[test]
    fn statements_and_conditions_hold_the_switch_on_their_own_lines() {
        let edits = [
            edit(SOURCE, "+=", "-="),
            edit(SOURCE, "i++", "i--"),
            edit(SOURCE, "i < len", "i <= len"),
            edit(SOURCE, "total - 1", "total + 1"),
            edit(SOURCE, "1 + 2", "1 - 2"),
            edit(SOURCE, "total > 10", "total >= 10"),
        ];
        let entries = numbered(&edits);
        let schema = rewrite(SOURCE, &entries);
        let text = &schema.text;
        assert!(
            text.contains("if assayMutantOn(1) { total -= xs[i] } else { total += xs[i] }"),
            "{text}"
        );
        assert!(
            text.contains("func() { if assayMutantOn(2) { i-- } else { i++ } }()"),
            "{text}"
        );
        assert!(
            text.contains(
                "func() bool { if assayMutantOn(3) { return i <= len(xs) }; return i < len(xs) }()"
            ),
            "{text}"
        );
        assert!(
            text.contains("if assayMutantOn(4) { return total + 1 } else { return total - 1 }"),
            "{text}"
        );
        assert_eq!(schema.fallback, [(5, OUTSIDE_FUNCTIONS.to_owned())]);
        assert_eq!(text.lines().count(), SOURCE.lines().count());
        assert!(syntax::parse_clean(text).is_ok(), "{text}");
        assert_eq!(schema.arms.len(), 5);
        assert_eq!(&text[schema.arms[&1].clone()], "total -= xs[i]");
    }

    #[test]
    fn a_mutant_removing_a_last_use_builds_alone() {
        let source = "package p\n\nimport \"strconv\"\n\nfunc F(a int) (string, int) {\n\tn := a * 2\n\tm := a + 1\n\tm = 3\n\treturn strconv.Itoa(n), m\n}\n\nfunc G(a int) int {\n\tk := a\n\tif k > 1 {\n\t\treturn k\n\t}\n\treturn a - 1\n}\n";
        let edits = [
            edit(source, "strconv.Itoa(n), m", "\"\", 0"),
            edit(source, "a * 2", "a / 2"),
            edit(source, "a - 1", "0"),
            edit(source, "k > 1", "k >= 1"),
        ];
        let entries = numbered(&edits);
        let schema = rewrite(source, &entries);
        // `n`, `m` (assigned, never used elsewhere) and `strconv` lose their last use; `a` is
        // a parameter, `k` is used elsewhere; `n := a * 2` is a declaration.
        assert_eq!(schema.unviable.len(), 1, "{:?}", schema.unviable);
        assert_eq!(schema.unviable[0].0, 1);
        assert!(
            schema.unviable[0].1.contains("last use"),
            "{:?}",
            schema.unviable
        );
        // The declaration's mutant runs a copy of `F`.
        assert!(schema.fallback.is_empty(), "{:?}", schema.fallback);
        assert_eq!(schema.arms.len(), 3);
        assert!(
            schema.text.contains(
                "func F(a int) (string, int) { if assayMutantOn(2) { return assayMutant2_F(a) }; \n"
            ),
            "{}",
            schema.text
        );
        assert!(
            schema.text[schema.arms[&2].clone()]
                .starts_with("func assayMutant2_F(a int) (string, int) {\n\tn := a / 2\n"),
            "{}",
            schema.text
        );
        // `matches += …` reads `matches` (gc compiles it): removing the return's use of it
        // leaves a use, so the mutant is held.
        let ratio = "package p\n\nfunc R(xs []int) int {\n\tmatches := 0\n\tfor _, x := range xs {\n\t\tmatches += x\n\t}\n\treturn twice(matches)\n}\n\nfunc twice(n int) int {\n\treturn 2 * n\n}\n";
        let zero = [edit(ratio, "twice(matches)", "0")];
        let held_ratio = rewrite(
            ratio,
            &[Entry {
                number: 1,
                edit: &zero[0],
            }],
        );
        assert!(held_ratio.unviable.is_empty(), "{:?}", held_ratio.unviable);
        assert_eq!(held_ratio.arms.len(), 1);
        // In a function literal: its own `err` loses its last use, though the function
        // around it uses another `err`.
        let closure = "package p\n\nfunc H(w func() (int, error)) error {\n\tf := func() error {\n\t\t_, err := w()\n\t\treturn err\n\t}\n\t_, err := w()\n\tif err != nil {\n\t\treturn err\n\t}\n\treturn f()\n}\n";
        let nil = [edit(closure, "err\n\t}\n\t_,", "nil\n\t}\n\t_,")];
        let fixed = ByteEdit {
            end: nil[0].start + 3,
            replacement: "nil".into(),
            ..nil[0].clone()
        };
        let held = rewrite(
            closure,
            &[Entry {
                number: 1,
                edit: &fixed,
            }],
        );
        assert_eq!(
            held.unviable[0].1,
            "declared and not used: err (the mutant removes its last use)"
        );
        // Without `m`, `strconv` is still the only use removed: it is named.
        let strconv = [edit(source, "strconv.Itoa(n)", "\"\"")];
        let only = rewrite(
            source,
            &[Entry {
                number: 1,
                edit: &strconv[0],
            }],
        );
        assert_eq!(
            only.unviable[0].1,
            "declared and not used: n (the mutant removes its last use)"
        );
    }

    /// Methods, variadic and generic functions, a function without results, and a mutant
    /// nested in another's statement, each behind a dispatch on its body's first line.
    const WAREHOUSE: &str = "package warehouse

type Tally struct{ count int }

func (t *Tally) Record(label string, counts ...int) int {
\ttotal := t.count + len(counts)
\tfor _, c := range counts {
\t\ttotal += c
\t}
\tt.count = total
\treturn total
}

func Largest[T int | float64](xs []T) (best T) {
\tbest = xs[0]
\tfor _, x := range xs[1:] {
\t\tbigger := x > best
\t\tbest = pick(bigger, x, best)
\t}
\treturn
}

func pick[T any](first bool, a, b T) T {
\tswitch first {
\tcase 1 > 0:
\t\treturn a
\t}
\treturn b
}

func Reset(t *Tally) {
\tlimit := 2 * t.count
\tt.count = limit - limit
}

func Skip(_ int, t *Tally) {
\tnext := t.count + 1
\tt.count = next
}

func init() {
\tseed := 3 + 4
\t_ = seed
}
";

    #[test]
    fn mutants_no_statement_holds_run_a_mutated_copy_of_their_function() {
        let edits = [
            edit(WAREHOUSE, "+ len", "- len"),
            edit(WAREHOUSE, "x > best", "x >= best"),
            edit(WAREHOUSE, "1 > 0", "1 < 0"),
            edit(WAREHOUSE, "2 * t", "2 / t"),
            edit(WAREHOUSE, "t.count + 1", "t.count - 1"),
            edit(WAREHOUSE, "3 + 4", "3 - 4"),
            edit(WAREHOUSE, "limit - limit", "limit + limit"),
        ];
        let entries = numbered(&edits);
        let schema = rewrite(WAREHOUSE, &entries);
        let text = &schema.text;
        // The original's lines keep their numbers: the copies come after all of them.
        let original_lines: Vec<&str> = WAREHOUSE.lines().collect();
        let rewritten_lines: Vec<&str> = text.lines().collect();
        for (at, line) in original_lines.iter().enumerate() {
            let kept = rewritten_lines[at];
            assert!(
                kept.contains(line.trim()),
                "line {}: {kept:?} for {line:?}",
                at + 1
            );
        }
        assert!(
            text.contains("func (t *Tally) Record(label string, counts ...int) int { if assayMutantOn(1) { return t.assayMutant1_Record(label, counts...) }; \n"),
            "{text}"
        );
        assert!(
            text.contains("func Largest[T int | float64](xs []T) (best T) { if assayMutantOn(2) { return assayMutant2_Largest[T](xs) }; \n"),
            "{text}"
        );
        // A case value: `pick` holds the switch for its own copy.
        assert!(
            text.contains("{ if assayMutantOn(3) { return assayMutant3_pick[T](first, a, b) }; "),
            "{text}"
        );
        // Without results: the copy runs, then the original returns. Both of `Reset`'s
        // mutants (one a declaration, one a statement) are told apart by number.
        assert!(
            text.contains(
                "func Reset(t *Tally) { if assayMutantOn(4) { assayMutant4_Reset(t); return }; \n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "if assayMutantOn(7) { t.count = limit + limit } else { t.count = limit - limit }"
            ),
            "{text}"
        );
        assert_eq!(&text[schema.arms[&7].clone()], "t.count = limit + limit");
        assert!(
            text[schema.arms[&4].clone()]
                .starts_with("func assayMutant4_Reset(t *Tally) {\n\tlimit := 2 / t.count\n")
        );
        // `_` cannot be passed on and `init` cannot be called: they build alone, saying so.
        let fallback: BTreeMap<u32, &str> = schema
            .fallback
            .iter()
            .map(|(n, why)| (*n, why.as_str()))
            .collect();
        assert_eq!(fallback.keys().copied().collect::<Vec<_>>(), [5, 6]);
        assert!(fallback[&5].contains("`_` parameter"), "{fallback:?}");
        assert!(fallback[&6].contains("`init`"), "{fallback:?}");
        assert_eq!(schema.arms.len(), 5);
        // Each copy's dispatch is a site: an error there sends its mutants to builds alone.
        assert!(
            schema
                .sites
                .iter()
                .any(|(r, held)| held == &[1] && text[r.clone()].contains("t.assayMutant1_Record"))
        );
        assert!(syntax::parse_clean(text).is_ok(), "{text}");
    }

    #[test]
    fn errors_are_blamed_on_the_variant_they_are_in() {
        let edits = [edit(SOURCE, "total - 1", "nil"), edit(SOURCE, "+=", "-=")];
        let entries = [
            Entry {
                number: 7,
                edit: &edits[0],
            },
            Entry {
                number: 8,
                edit: &edits[1],
            },
        ];
        let schema = rewrite(SOURCE, &entries);
        let arm = schema.arms[&7].clone();
        let line = schema.text[..arm.start].matches('\n').count() + 1;
        let column = arm.start - schema.text[..arm.start].rfind('\n').unwrap();
        let schemas = BTreeMap::from([("pkg/calc.go".to_owned(), schema)]);
        let stderr = format!(
            "# example.com/m/pkg [example.com/m/pkg.test]\npkg/calc.go:{line}:{}: cannot use nil as int value in return statement\nother.go:3:1: undefined: x\n",
            column + 7
        );
        let blamed = blame(&stderr, &schemas);
        assert_eq!(
            blamed.unviable,
            BTreeMap::from([(
                7,
                "cannot use nil as int value in return statement".to_owned()
            )])
        );
        assert!(blamed.alone.is_empty());
        assert_eq!(
            blamed.unblamed.as_deref(),
            Some("other.go:3:1: undefined: x")
        );
    }

    #[test]
    fn the_switch_file_names_the_package_and_hostile_names_are_refused() {
        assert_eq!(package_name(SOURCE).as_deref(), Some("calc"));
        assert_eq!(package_name("// no package clause\n"), None);
        let file = switch_file("calc", 3);
        assert!(file.contains("package calc\n"));
        assert!(file.contains("[4]uint32"));
        assert!(syntax::parse_clean(&file).is_ok(), "{file}");
    }
}
