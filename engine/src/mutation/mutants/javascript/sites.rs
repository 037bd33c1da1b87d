//! JavaScript's mutation sites, Stryker's mutator families: arithmetic (`+` ↔ `-`, `*` ↔ `/`,
//! `%` → `*`), equality (`<` → `<=`, `>=`; `===` ↔ `!==`, …), logical (`&&` ↔ `||`, `??` →
//! `&&`), conditions replaced by `true` and `false`, blocks emptied, boolean literals swapped
//! and `!` removed, unary `+` ↔ `-`, `++` ↔ `--`, compound assignments, strings emptied (or
//! filled), array and object literals emptied, and optional chaining made plain. Comments,
//! regular expressions, imports, `require` paths, directives and object keys hold no site.
//!
//! The walk is a loop over an explicit stack, and no site climbs its ancestors: the source
//! chooses the depth.

use super::syntax::{self, Dialect, text};
use crate::mutation::mutants::Operator;
use crate::mutation::mutants::sites::{
    Candidate, Reparsed, c_like_binary_swaps, candidate, newlines, short, token_swap,
};
use crate::mutation::mutants::syntax::{changed_operator, touches};
use std::collections::BTreeSet;
use tree_sitter::Node;

/// Every site on `changed` lines of `source`, in tree order. What a mutated file must be: it
/// parses in its dialect's grammar, and with [`Reparsed::token`], an operator swapped in place
/// reads as that operator.
pub(super) fn find(dialect: Dialect, source: &str, changed: &BTreeSet<u32>) -> Vec<Candidate> {
    let Some(tree) = syntax::parse(dialect, source) else {
        return Vec::new();
    };
    let check = dialect.reparsed();
    let mut found = Vec::new();
    let mut stack = vec![(tree.root_node(), Text::Read)];
    while let Some((node, read)) = stack.pop() {
        if syntax::is_type(node) {
            continue;
        }
        match node.kind() {
            "comment" | "regex" | "import_statement" | "hash_bang_line" => continue,
            "string" => {
                if read != Text::Quiet {
                    string(node, source, changed, check, &mut found);
                }
                continue;
            }
            _ => {}
        }
        visit(node, source, changed, check, &mut found);
        let quiet = quiet_child(node);
        let loads = is_load(node, source);
        let tag = jsx_tag_name(node);
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
        let children = children.into_iter().filter(|c| Some(c.id()) != tag);
        stack.extend(children.rev().map(|child| {
            let text = if read == Text::QuietArguments || Some(child.id()) == quiet {
                Text::Quiet
            } else if loads && child.kind() == "arguments" {
                Text::QuietArguments
            } else {
                Text::Read
            };
            (child, text)
        }));
    }
    found
}

/// Whether a string is text the program reads, as the walk carries it down.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Text {
    Read,
    /// A string no program reads as text: an export's source, a directive (`'use strict'`),
    /// an object's key, the path a `require` loads.
    Quiet,
    /// The arguments of `require(…)` or `import(…)`: their strings are quiet.
    QuietArguments,
}

/// The child of `node` that is a quiet string's place, if any. A JSX attribute's string is
/// markup whose place takes no expression without braces (`className="badge"`).
fn quiet_child(node: Node<'_>) -> Option<usize> {
    match node.kind() {
        "export_statement" => node.child_by_field_name("source").map(|n| n.id()),
        "pair" => node.child_by_field_name("key").map(|n| n.id()),
        "expression_statement" => node.named_child(0).map(|n| n.id()),
        "jsx_attribute" => {
            let count = node.named_child_count();
            let value = node.named_child(count.checked_sub(1)?)?;
            (value.kind() == "string").then_some(value.id())
        }
        _ => None,
    }
}

/// A JSX tag's name (`<Menu.Item>`): a name, not an expression, so none of it is a site.
fn jsx_tag_name(node: Node<'_>) -> Option<usize> {
    match node.kind() {
        "jsx_opening_element" | "jsx_closing_element" | "jsx_self_closing_element" => {
            node.child_by_field_name("name").map(|n| n.id())
        }
        _ => None,
    }
}

/// `require(…)` or `import(…)`: a module's path in its arguments.
fn is_load(node: Node<'_>, source: &str) -> bool {
    node.kind() == "call_expression"
        && node
            .child_by_field_name("function")
            .is_some_and(|f| matches!(text(f, source), "require" | "import"))
}

fn visit(
    node: Node<'_>,
    source: &str,
    changed: &BTreeSet<u32>,
    check: Reparsed,
    found: &mut Vec<Candidate>,
) {
    match node.kind() {
        "binary_expression" => binary(node, changed, check, found),
        "augmented_assignment_expression" => assignment(node, changed, check, found),
        "update_expression" => update(node, changed, check, found),
        "unary_expression" => unary(node, source, changed, check, found),
        "true" | "false" => boolean(node, changed, check, found),
        "if_statement" | "while_statement" | "do_statement" => {
            let condition = node
                .child_by_field_name("condition")
                .and_then(|c| c.named_child(0));
            conditions(condition, &["true", "false"], source, changed, check, found);
        }
        "for_statement" => {
            let condition = node
                .child_by_field_name("condition")
                .filter(|c| !matches!(c.kind(), ";" | "empty_statement"));
            // Stryker's: a loop that never runs; `true` would never end.
            let condition = condition.map(|c| match c.kind() {
                "expression_statement" => c.named_child(0).unwrap_or(c),
                _ => c,
            });
            conditions(condition, &["false"], source, changed, check, found);
        }
        "ternary_expression" => {
            let condition = node.child_by_field_name("condition");
            conditions(condition, &["true", "false"], source, changed, check, found);
        }
        "statement_block" => block(node, source, changed, check, found),
        "array" | "object" => literal(node, source, changed, check, found),
        "member_expression" | "subscript_expression" | "call_expression" => {
            optional(node, changed, check, found);
        }
        _ => {}
    }
}

/// Stryker's replacements of a binary operator, by family: the C-like ones, strict equality
/// and nullish coalescing.
fn binary_swaps(operator: &str) -> &'static [(Operator, &'static str)] {
    match operator {
        "===" => &[(Operator::Comparison, "!==")],
        "!==" => &[(Operator::Comparison, "===")],
        "??" => &[(Operator::Boolean, "&&")],
        _ => c_like_binary_swaps(operator),
    }
}

fn is_text(node: Option<Node<'_>>) -> bool {
    node.is_some_and(|n| matches!(n.kind(), "string" | "template_string"))
}

fn binary(node: Node<'_>, changed: &BTreeSet<u32>, check: Reparsed, found: &mut Vec<Candidate>) {
    let Some(op) = changed_operator(node, changed) else {
        return;
    };
    for &(operator, to) in binary_swaps(op.kind()) {
        let mut site = token_swap(operator, op, to, check.token(to, "binary_expression"));
        // Stryker's rule: a `+` with a string operand joins text.
        if op.kind() == "+"
            && (is_text(node.child_by_field_name("left"))
                || is_text(node.child_by_field_name("right")))
        {
            site.unfit = Some("joins strings: `-` would only make `NaN`".into());
        }
        found.push(site);
    }
}

fn assignment(
    node: Node<'_>,
    changed: &BTreeSet<u32>,
    check: Reparsed,
    found: &mut Vec<Candidate>,
) {
    let Some(op) = changed_operator(node, changed) else {
        return;
    };
    let to = match op.kind() {
        "+=" => "-=",
        "-=" => "+=",
        "*=" => "/=",
        "/=" => "*=",
        "%=" => "*=",
        "<<=" => ">>=",
        ">>=" => "<<=",
        "&=" => "|=",
        "|=" => "&=",
        "&&=" => "||=",
        "||=" => "&&=",
        "??=" => "&&=",
        _ => return,
    };
    let mut site = token_swap(
        Operator::AugmentedAssignment,
        op,
        to,
        check.token(to, "augmented_assignment_expression"),
    );
    if op.kind() == "+=" && is_text(node.child_by_field_name("right")) {
        site.unfit = Some("joins strings: `-=` would only make `NaN`".into());
    }
    found.push(site);
}

/// `x++` ↔ `x--`, `++x` ↔ `--x`.
fn update(node: Node<'_>, changed: &BTreeSet<u32>, check: Reparsed, found: &mut Vec<Candidate>) {
    let Some(op) = changed_operator(node, changed) else {
        return;
    };
    let to = if op.kind() == "++" { "--" } else { "++" };
    found.push(token_swap(
        Operator::IncrementDecrement,
        op,
        to,
        check.token(to, "update_expression"),
    ));
}

/// `+x` ↔ `-x`; `~x` → `x` and `!x` → `x` (the operator's byte becomes a space, so columns
/// stay).
fn unary(
    node: Node<'_>,
    source: &str,
    changed: &BTreeSet<u32>,
    check: Reparsed,
    found: &mut Vec<Candidate>,
) {
    let (Some(op), Some(argument)) = (
        node.child_by_field_name("operator"),
        node.child_by_field_name("argument"),
    ) else {
        return;
    };
    if !touches(op, changed) {
        return;
    }
    let argument_text = text(argument, source);
    match op.kind() {
        kind @ ("+" | "-") => {
            let to = if kind == "+" { "-" } else { "+" };
            found.push(candidate(
                Operator::Unary,
                op,
                to.into(),
                format!(
                    "`{kind}{}` -> `{to}{}`",
                    short(argument_text),
                    short(argument_text)
                ),
                check.token(to, "unary_expression"),
            ));
        }
        kind @ ("!" | "~") => {
            let operator = if kind == "!" {
                Operator::Boolean
            } else {
                Operator::Unary
            };
            found.push(candidate(
                operator,
                op,
                " ".into(),
                format!(
                    "`{kind}{}` -> `{}`",
                    short(argument_text),
                    short(argument_text)
                ),
                check,
            ));
        }
        _ => {}
    }
}

fn boolean(node: Node<'_>, changed: &BTreeSet<u32>, check: Reparsed, found: &mut Vec<Candidate>) {
    if !touches(node, changed) {
        return;
    }
    let (from, to) = match node.kind() {
        "true" => ("true", "false"),
        _ => ("false", "true"),
    };
    found.push(candidate(
        Operator::Boolean,
        node,
        to.into(),
        format!("`{from}` -> `{to}`"),
        check,
    ));
}

/// A condition replaced by each of `values`, its line breaks kept after the value.
fn conditions(
    condition: Option<Node<'_>>,
    values: &[&str],
    source: &str,
    changed: &BTreeSet<u32>,
    check: Reparsed,
    found: &mut Vec<Candidate>,
) {
    let Some(condition) = condition else {
        return;
    };
    if !touches(condition, changed) {
        return;
    }
    let original = text(condition, source);
    for value in values {
        found.push(candidate(
            Operator::ConditionalExpression,
            condition,
            format!("{value}{}", "\n".repeat(newlines(original))),
            format!("`{}` -> `{value}`", short(original)),
            check,
        ));
    }
}

/// Whether a block or literal holds nothing but comments.
fn is_empty(node: Node<'_>) -> bool {
    let mut cursor = node.walk();
    node.named_children(&mut cursor)
        .all(|c| c.kind() == "comment")
}

/// A non-empty block emptied, its line breaks kept inside the braces.
fn block(
    node: Node<'_>,
    source: &str,
    changed: &BTreeSet<u32>,
    check: Reparsed,
    found: &mut Vec<Candidate>,
) {
    let emptied = Emptied {
        operator: Operator::DropBranch,
        open: "{",
        close: "}",
    };
    emptied.push(node, source, changed, check, found);
}

/// A non-empty array or object literal emptied, its line breaks kept inside.
fn literal(
    node: Node<'_>,
    source: &str,
    changed: &BTreeSet<u32>,
    check: Reparsed,
    found: &mut Vec<Candidate>,
) {
    let (open, close) = if node.kind() == "array" {
        ("[", "]")
    } else {
        ("{", "}")
    };
    let emptied = Emptied {
        operator: Operator::Collection,
        open,
        close,
    };
    emptied.push(node, source, changed, check, found);
}

/// A bracketed node (block, array, object) emptied: its line breaks stay between the
/// brackets, so every later line keeps its number.
struct Emptied {
    operator: Operator,
    open: &'static str,
    close: &'static str,
}

impl Emptied {
    fn push(
        &self,
        node: Node<'_>,
        source: &str,
        changed: &BTreeSet<u32>,
        check: Reparsed,
        found: &mut Vec<Candidate>,
    ) {
        if is_empty(node) || !touches(node, changed) {
            return;
        }
        let (open, close) = (self.open, self.close);
        let breaks = "\n".repeat(newlines(text(node, source)));
        found.push(candidate(
            self.operator,
            node,
            format!("{open}{breaks}{close}"),
            format!("`{}` -> `{open}{close}`", short(text(node, source))),
            check,
        ));
    }
}

/// Stryker's string literal mutants: a non-empty string emptied, an empty one filled.
fn string(
    node: Node<'_>,
    source: &str,
    changed: &BTreeSet<u32>,
    check: Reparsed,
    found: &mut Vec<Candidate>,
) {
    if !touches(node, changed) {
        return;
    }
    let original = text(node, source);
    let quote = &original[..original.len().min(1)];
    let replacement = if original.len() <= 2 {
        format!("{quote}Stryker was here!{quote}")
    } else {
        format!("{quote}{quote}")
    };
    let mut site = candidate(
        Operator::String,
        node,
        replacement.clone(),
        format!("`{}` -> `{replacement}`", short(original)),
        check,
    );
    if original.contains('\n') {
        site.unfit = Some("a string continued over lines".into());
    }
    found.push(site);
}

/// `a?.b` → `a.b`; `a?.[i]` → `a[i]`; `f?.()` → `f()`.
fn optional(node: Node<'_>, changed: &BTreeSet<u32>, check: Reparsed, found: &mut Vec<Candidate>) {
    let Some(chain) = node.child_by_field_name("optional_chain") else {
        return;
    };
    if !touches(chain, changed) {
        return;
    }
    let to = if node.kind() == "member_expression" {
        "."
    } else {
        ""
    };
    found.push(candidate(
        Operator::OptionalChaining,
        chain,
        to.into(),
        format!("`?.` -> `{to}`"),
        check,
    ));
}
