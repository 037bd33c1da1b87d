//! Mutant schemata: every mutant of a crate compiled into it at once, each behind a runtime
//! switch, so the crate builds once and each mutant is a run of the already built tests with
//! [`SWITCH_VARIABLE`] set to its number. Each mutated expression becomes a `match` on the
//! number, read once per site from the environment; a deleted match arm gets a guard instead.
//! What a runtime `match` cannot hold (a const context) is left to a build of its own, and
//! [`blame`] maps a failed schema build's errors back to the mutants that caused them, so they
//! can leave the schema too. Pure: the caller runs the builds.

use super::syntax::{self, const_context};
pub use crate::mutation::mutants::switch::Entry;
use crate::mutation::mutants::switch::{SwitchedSite, shallow_sites};
use assay_common::job::ByteEdit;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use tree_sitter::Node;

/// The variable naming the mutant a schema build runs: `0` or unset runs the unmutated code.
pub const SWITCH_VARIABLE: &str = "ASSAY_MUTANT";

/// Where the switch finds the standard library.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Std {
    /// `::std`, in the extern prelude of every crate that is not `#![no_std]`.
    #[default]
    Prelude,
    /// A `#![no_std]` crate (its tests still link std): the schema adds
    /// `extern crate std as __assay_std;` to the crate's root, the file declaring `no_std`.
    Alias,
}

const STD_ALIAS: &str = "__assay_std";

impl Std {
    /// The `Std` of a crate whose files are `sources`.
    pub fn of_crate<'s>(sources: impl IntoIterator<Item = &'s str>) -> Self {
        if sources.into_iter().any(|s| root_preamble_end(s).1) {
            Self::Alias
        } else {
            Self::Prelude
        }
    }

    fn path(self) -> &'static str {
        match self {
            Self::Prelude => "::std",
            Self::Alias => "::__assay_std",
        }
    }
}

/// Where a crate root's inner attributes and inner doc comments end (an item may follow),
/// and whether they declare `no_std` (or `cfg_attr(…, no_std)`).
fn root_preamble_end(source: &str) -> (usize, bool) {
    let Some(tree) = syntax::parse(source) else {
        return (0, false);
    };
    let root = tree.root_node();
    let mut cursor = root.walk();
    let mut end = 0;
    let mut no_std = false;
    let mut last_is_line_comment = false;
    for node in root.children(&mut cursor) {
        let text = &source[node.byte_range()];
        match node.kind() {
            "inner_attribute_item" => {
                no_std |= text.contains("no_std");
                end = node.end_byte();
                last_is_line_comment = false;
            }
            "line_comment" | "block_comment" => {
                if text.starts_with("//!") || text.starts_with("/*!") {
                    end = node.end_byte();
                    last_is_line_comment = node.kind() == "line_comment";
                }
            }
            _ => break,
        }
    }
    // A line comment runs to the end of its line: the item goes at the start of the next.
    if last_is_line_comment
        && !source[..end].ends_with('\n')
        && let Some(newline) = source[end..].find('\n')
    {
        end += newline + 1;
    }
    (end, no_std)
}

/// The variable that turns on the unmutated run's trace: set (to the test executable's
/// label, by the prebuilt tests' script) where the switch reads 0, each site writes one
/// [`TRACE_MARK`] line to stderr the first time each thread reaches it:
/// `MARK\tLABEL\tNUMBERS\tTHREAD`, the thread named as libtest names the thread of each
/// test. That is the per-test coverage a mutant's run is chosen by (`campaign::reached`).
pub use assay_common::test_binaries::TRACE_VARIABLE;

/// The first field of a trace line.
pub const TRACE_MARK: &str = "assay-reached";

/// The expression a schema site (its mutants `numbers`) switches on: a `static` of its own
/// block, so it reads the variable once per site and needs no item anywhere else in the crate.
/// Unmutated (0), a thread-local flag of the site's own says whether this thread has traced
/// it yet; a mutant's run never touches the trace.
fn switch(std: Std, numbers: &str) -> String {
    // A template, not `format!`: the generated code is full of braces.
    const TEMPLATE: &str = "({ static ASSAY_MUTANT: STD::sync::OnceLock<u32> = STD::sync::OnceLock::new(); \
         let m = *ASSAY_MUTANT.get_or_init(|| STD::env::var(\"SWITCH\").ok()\
         .and_then(|v| v.parse().ok()).unwrap_or(0)); \
         if m == 0 { STD::thread_local!(static REACHED: STD::cell::Cell<bool> = \
         const { STD::cell::Cell::new(false) }); \
         if !REACHED.with(|r| r.replace(true)) { \
         if let STD::option::Option::Some(label) = STD::env::var_os(\"TRACE\") { \
         if !label.is_empty() { let _ = STD::io::Write::write_all(&mut STD::io::stderr(), \
         STD::format!(\"\\nMARK\\t{}\\tNUMBERS\\t{}\\n\", label.to_string_lossy(), \
         STD::thread::current().name().unwrap_or(\"-\")).as_bytes()); } } } } \
         m })";
    TEMPLATE
        .replace("STD", std.path())
        .replace("SWITCH", SWITCH_VARIABLE)
        .replace("TRACE", TRACE_VARIABLE)
        .replace("MARK", TRACE_MARK)
        .replace("NUMBERS", numbers)
}

/// A site's mutant numbers as its trace names them: `3,4,7`.
fn site_numbers(entries: &[Entry<'_>]) -> String {
    entries
        .iter()
        .map(|e| e.number.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// A file rewritten with its mutants behind the switch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileSchema {
    /// The rewritten file.
    pub text: String,
    /// The mutants it holds behind the switch.
    pub held: Vec<Held>,
    /// Mutants left to a build of their own, with why.
    pub fallback: Vec<(u32, String)>,
}

/// A mutant the schema holds, and where in the rewritten text its own code and its site's
/// whole `match` lie (to blame a build error on it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// The mutant's number in the switch.
    pub number: u32,
    /// Bytes of the rewritten text holding the mutant's own code (its `match` arm).
    pub arm: Range<usize>,
    /// Bytes of the rewritten text holding the site's whole `match`.
    pub site: Range<usize>,
}

/// How one site's mutants are switched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// An expression: `(match SWITCH { n => mutated, _ => original })`.
    Expression,
    /// A function body: `{ match SWITCH { n => { value }, _ => { original } } }`.
    Body,
    /// A match arm deleted: the arm gets the guard `if SWITCH != n`.
    Guard,
}

struct Site<'e> {
    range: Range<usize>,
    form: Form,
    /// For [`Form::Guard`]: where the guard goes, and the arm's own guard if it has one.
    guard: Option<(usize, Option<Range<usize>>)>,
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

/// Rewrites `source`, a file of a crate whose standard library is `std`, with `entries` behind
/// the switch; what it cannot hold goes to `fallback`.
pub fn rewrite(source: &str, entries: &[Entry<'_>], std: Std) -> FileSchema {
    let Some(tree) = syntax::parse(source) else {
        return all_fallback(source, entries, "the file does not parse as Rust");
    };
    let root = tree.root_node();
    let mut fallback = Vec::new();
    let mut sites: BTreeMap<(usize, std::cmp::Reverse<usize>), Site<'_>> = BTreeMap::new();
    for entry in entries {
        match place(root, entry.edit) {
            Ok((node, form)) => {
                if let Some(why) = const_context(node) {
                    fallback.push((
                        entry.number,
                        format!(
                            "in {why}: evaluated at compile time, where a runtime switch cannot go"
                        ),
                    ));
                    continue;
                }
                let guard = (form == Form::Guard).then(|| guard_place(node));
                sites
                    .entry((node.start_byte(), std::cmp::Reverse(node.end_byte())))
                    .or_insert_with(|| Site {
                        range: node.byte_range(),
                        form,
                        guard: guard.flatten(),
                        entries: Vec::new(),
                    })
                    .entries
                    .push(*entry);
            }
            Err(why) => fallback.push((entry.number, why.to_string())),
        }
    }
    let sites = shallow_sites(sites.into_values().collect(), &mut fallback);
    let mut out = String::with_capacity(source.len() * 2);
    let mut held = Vec::new();
    let emitter = Emitter {
        source,
        sites: &sites,
        std,
    };
    let (preamble_end, declares_no_std) = root_preamble_end(source);
    if std == Std::Alias && declares_no_std {
        emitter.emit(0..preamble_end, None, &mut out, &mut held);
        out.push_str(&format!("extern crate std as {STD_ALIAS}; "));
        emitter.emit(preamble_end..source.len(), None, &mut out, &mut held);
    } else {
        emitter.emit(0..source.len(), None, &mut out, &mut held);
    }
    if let Err(line) = syntax::parse_clean(&out) {
        return all_fallback(
            source,
            entries,
            &format!("the rewritten file does not parse (line {line})"),
        );
    }
    fallback.sort();
    FileSchema {
        text: out,
        held,
        fallback,
    }
}

fn all_fallback(source: &str, entries: &[Entry<'_>], why: &str) -> FileSchema {
    FileSchema {
        text: source.to_owned(),
        held: Vec::new(),
        fallback: entries.iter().map(|e| (e.number, why.to_owned())).collect(),
    }
}

/// Why a mutant's edit cannot go behind the switch: no node spans exactly its bytes, or the
/// one that does is not an expression, an operator, a function body or a match arm. The
/// message is the reason the report counts such mutants under, so it names no edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the schema has no place for this edit")]
struct Unplaced;

/// The node a mutant's switch goes around, and how.
fn place<'t>(root: Node<'t>, edit: &ByteEdit) -> Result<(Node<'t>, Form), Unplaced> {
    let mut node = root
        .descendant_for_byte_range(edit.start, edit.end)
        .ok_or(Unplaced)?;
    while node.byte_range() != (edit.start..edit.end) {
        node = node.parent().ok_or(Unplaced)?;
    }
    // The widest node of that range: a token's parent may share it.
    let parent = node.parent();
    match (node.kind(), parent.map(|p| p.kind())) {
        ("match_arm", _) => Ok((node, Form::Guard)),
        ("block", Some("function_item")) => Ok((node, Form::Body)),
        ("unary_expression", _) => Ok((node, Form::Expression)),
        (_, Some("binary_expression" | "compound_assignment_expr"))
            if parent.and_then(|p| p.child_by_field_name("operator")) == Some(node) =>
        {
            parent.map(|p| (p, Form::Expression)).ok_or(Unplaced)
        }
        _ => Err(Unplaced),
    }
}

/// Where an arm's guard goes: after its pattern, or around the guard it has.
fn guard_place(arm: Node<'_>) -> Option<(usize, Option<Range<usize>>)> {
    let pattern = arm.child_by_field_name("pattern")?;
    match pattern.child_by_field_name("condition") {
        Some(condition) => Some((condition.start_byte(), Some(condition.byte_range()))),
        None => Some((pattern.end_byte(), None)),
    }
}

/// Writes a file's schema: its text with its sites rewritten.
struct Emitter<'a, 'e> {
    source: &'a str,
    sites: &'a [Site<'e>],
    std: Std,
}

impl Emitter<'_, '_> {
    /// Writes `range` of the source, each site inside it (but `skip`) rewritten.
    fn emit(
        &self,
        range: Range<usize>,
        skip: Option<usize>,
        out: &mut String,
        held: &mut Vec<Held>,
    ) {
        let (source, sites) = (self.source, self.sites);
        let mut at = range.start;
        for (index, site) in sites.iter().enumerate() {
            let inside = range.start <= site.range.start && site.range.end <= range.end;
            if !inside || Some(index) == skip || site.range.start < at {
                continue;
            }
            out.push_str(&source[at..site.range.start]);
            self.emit_site(index, out, held);
            at = site.range.end;
        }
        out.push_str(&source[at..range.end]);
    }

    fn emit_site(&self, index: usize, out: &mut String, held: &mut Vec<Held>) {
        let (source, sites) = (self.source, self.sites);
        let site = &sites[index];
        let switch = switch(self.std, &site_numbers(&site.entries));
        let start = out.len();
        let first = held.len();
        match (site.form, site.guard.clone()) {
            (Form::Guard, Some((at, own))) => {
                let condition = site
                    .entries
                    .iter()
                    .map(|e| format!("{switch} != {}", e.number))
                    .collect::<Vec<_>>()
                    .join(" && ");
                match own {
                    Some(own) => {
                        self.emit(site.range.start..at, Some(index), out, held);
                        let arm = out.len();
                        out.push_str(&condition);
                        out.push_str(" && (");
                        let arm_end = out.len();
                        self.emit(own.clone(), Some(index), out, held);
                        out.push(')');
                        self.emit(own.end..site.range.end, Some(index), out, held);
                        push_held(site, arm..arm_end, held);
                    }
                    None => {
                        self.emit(site.range.start..at, Some(index), out, held);
                        let arm = out.len();
                        out.push_str(" if ");
                        out.push_str(&condition);
                        let arm_end = out.len();
                        self.emit(at..site.range.end, Some(index), out, held);
                        push_held(site, arm..arm_end, held);
                    }
                }
            }
            (form, _) => {
                let (open, close) = if form == Form::Body {
                    ("{ match ", " } }")
                } else {
                    ("(match ", " })")
                };
                out.push_str(open);
                out.push_str(&switch);
                out.push_str(" { ");
                let original = &source[site.range.clone()];
                for entry in &site.entries {
                    out.push_str(&format!("{} => ", entry.number));
                    let arm = out.len();
                    let from = entry.edit.start - site.range.start;
                    let to = entry.edit.end - site.range.start;
                    out.push_str(&original[..from]);
                    out.push_str(&entry.edit.replacement);
                    out.push_str(&original[to..]);
                    let arm_end = out.len();
                    out.push_str(", ");
                    held.push(Held {
                        number: entry.number,
                        arm: arm..arm_end,
                        site: 0..0,
                    });
                }
                out.push_str("_ => ");
                self.emit(site.range.clone(), Some(index), out, held);
                out.push_str(close);
            }
        }
        let end = out.len();
        for entry in held.iter_mut().skip(first) {
            if entry.site == (0..0) && site.entries.iter().any(|e| e.number == entry.number) {
                entry.site = start..end;
            }
        }
    }
}

fn push_held(site: &Site<'_>, arm: Range<usize>, held: &mut Vec<Held>) {
    for entry in &site.entries {
        held.push(Held {
            number: entry.number,
            arm: arm.clone(),
            site: 0..0,
        });
    }
}

/// One error span of a failed build: the file as the compiler names it and its byte range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorSpan {
    /// The file as the compiler names it.
    pub file: String,
    /// The error's byte range in that file.
    pub bytes: Range<usize>,
    /// The compiler's message.
    pub message: String,
}

/// A line of cargo's `--message-format=json` output, as far as [`error_spans`] reads it.
#[derive(serde::Deserialize)]
struct CargoLine {
    reason: String,
    #[serde(default)]
    message: Option<CompilerMessage>,
}

/// rustc's diagnostic in a `compiler-message` line.
#[derive(serde::Deserialize)]
struct CompilerMessage {
    #[serde(default)]
    level: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    code: Option<DiagnosticCode>,
    #[serde(default)]
    spans: Vec<DiagnosticSpan>,
}

#[derive(serde::Deserialize)]
struct DiagnosticCode {
    code: String,
}

#[derive(serde::Deserialize)]
struct DiagnosticSpan {
    file_name: String,
    byte_start: usize,
    byte_end: usize,
}

/// The error spans in cargo's `--message-format=json` output.
pub fn error_spans(cargo_json: &str) -> Vec<ErrorSpan> {
    let mut spans = Vec::new();
    for line in cargo_json.lines() {
        let Ok(line) = serde_json::from_str::<CargoLine>(line) else {
            continue;
        };
        let Some(diagnostic) = line.message.filter(|m| m.level == "error") else {
            continue;
        };
        if line.reason != "compiler-message" {
            continue;
        }
        // As the compiler heads it: `error[E0277]: the trait bound …`.
        let message = match &diagnostic.code {
            Some(code) => format!("error[{}]: {}", code.code, diagnostic.message),
            None => format!("error: {}", diagnostic.message),
        };
        for span in diagnostic.spans {
            spans.push(ErrorSpan {
                file: span.file_name,
                bytes: span.byte_start..span.byte_end,
                message: message.clone(),
            });
        }
    }
    spans
}

/// Which mutants a failed schema build's errors are theirs: an error inside a mutant's own
/// code is that mutant's; one elsewhere in a site's `match` is every mutant of that site's;
/// one a schema site does not hold blames every mutant of its file. `None`: an error outside
/// every rewritten file (or no error span at all), which no mutant can be blamed for alone.
pub fn blame(spans: &[ErrorSpan], schemas: &BTreeMap<String, FileSchema>) -> Option<BTreeSet<u32>> {
    if spans.is_empty() {
        return None;
    }
    let mut blamed = BTreeSet::new();
    for span in spans {
        let (_, schema) = schemas
            .iter()
            .find(|(path, _)| same_file(&span.file, path))?;
        let inside =
            |range: &Range<usize>| range.start <= span.bytes.start && span.bytes.end <= range.end;
        let own: Vec<u32> = schema
            .held
            .iter()
            .filter(|h| inside(&h.arm))
            .map(|h| h.number)
            .collect();
        if !own.is_empty() {
            blamed.extend(own);
            continue;
        }
        // The innermost site holding the span.
        let innermost = schema
            .held
            .iter()
            .filter(|h| inside(&h.site))
            .min_by_key(|h| h.site.len())
            .map(|h| h.site.clone());
        match innermost {
            Some(site) => blamed.extend(
                schema
                    .held
                    .iter()
                    .filter(|h| h.site == site)
                    .map(|h| h.number),
            ),
            None => blamed.extend(schema.held.iter().map(|h| h.number)),
        }
    }
    Some(blamed)
}

/// The mutants a failed schema build's errors lie inside of, each with its first error: an
/// error inside a mutant's own code (its replacement, type-checked where the original stood,
/// as in a build of its own) says that mutant does not compile, and no build of its own is
/// needed to say so. Errors elsewhere are left to the next build: most are echoes of those
/// mutants (an inference the broken arm left open), and what remains is blamed then.
pub fn own_errors(
    spans: &[ErrorSpan],
    schemas: &BTreeMap<String, FileSchema>,
) -> BTreeMap<u32, String> {
    let mut own: BTreeMap<u32, String> = BTreeMap::new();
    for span in spans {
        let Some((_, schema)) = schemas.iter().find(|(path, _)| same_file(&span.file, path)) else {
            continue;
        };
        if let Some(holder) = schema
            .held
            .iter()
            .find(|h| h.arm.start <= span.bytes.start && span.bytes.end <= h.arm.end)
        {
            own.entry(holder.number)
                .or_insert_with(|| span.message.clone());
        }
    }
    own
}

/// The compiler names files relative to the workspace root (or absolutely); `path` is relative
/// to the repository.
fn same_file(compiler: &str, path: &str) -> bool {
    compiler == path
        || compiler.ends_with(&format!("/{path}"))
        || path.ends_with(&format!("/{compiler}"))
}
