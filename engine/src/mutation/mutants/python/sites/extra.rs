//! The extended operators' sites (`assay mutate --operators extended`). Like the default five,
//! each replaces one syntax node's bytes and keeps every line break; sites whose mutant is
//! cheaply seen to be equivalent (`x * 1` -> `x / 1`) carry the reason and are skipped.

use super::{Expect, Unshifted, named, shifted, text};
use crate::mutation::mutants::Operator;
use crate::mutation::mutants::sites::{Candidate, candidate, newlines, short, token_swap};
use crate::mutation::mutants::syntax::{changed_operator, touches};
use std::collections::BTreeSet;
use tree_sitter::Node;

/// A token swapped for another in place, e.g. `+` -> `-` inside a `binary_operator`.
fn token(operator: Operator, node: Node<'_>, to: &'static str, parent: &'static str) -> Candidate {
    token_swap(operator, node, to, Expect::Token(to, parent))
}

pub(super) fn visit(
    node: Node<'_>,
    source: &str,
    changed: &BTreeSet<u32>,
    found: &mut Vec<Candidate>,
) {
    if in_dunder_list(node, source) {
        return;
    }
    match node.kind() {
        "binary_operator" => arithmetic(node, source, changed, found),
        "comparison_operator" => equality(node, changed, found),
        "boolean_operator" => {
            if let Some(op) = node.child_by_field_name("operator")
                && touches(op, changed)
            {
                let to = if op.kind() == "and" { "or" } else { "and" };
                found.push(token(Operator::Boolean, op, to, "boolean_operator"));
            }
        }
        kind @ ("true" | "false") if touches(node, changed) => {
            let (to, expect) = if kind == "true" {
                ("False", "false")
            } else {
                ("True", "true")
            };
            found.push(candidate(
                Operator::Boolean,
                node,
                to.into(),
                format!("`{}` -> `{to}`", text(node, source)),
                Expect::Node(expect),
            ));
        }
        "not_operator" | "unary_operator" => unary(node, source, changed, found),
        "integer" | "float" if touches(node, changed) => found.push(number(node, source)),
        "call" => arguments(node, source, changed, found),
        kind @ ("break_statement" | "continue_statement") if touches(node, changed) => {
            let (from, to, expect) = if kind == "break_statement" {
                ("break", "continue", "continue_statement")
            } else {
                ("continue", "break", "break_statement")
            };
            found.push(candidate(
                Operator::LoopControl,
                node,
                to.into(),
                format!("`{from}` -> `{to}`"),
                Expect::Node(expect),
            ));
        }
        "augmented_assignment" => augmented(node, changed, found),
        "list" | "tuple" | "dictionary" | "set" => collection(node, source, changed, found),
        _ => {}
    }
}

/// A string inside `Union[…]`, `Optional[…]` and the like is a forward reference to a type:
/// changing it changes nothing at run time.
fn in_type_subscript(node: Node<'_>, source: &str) -> bool {
    const TYPING: [&str; 14] = [
        "Union",
        "Optional",
        "Callable",
        "List",
        "Dict",
        "Tuple",
        "Type",
        "Set",
        "FrozenSet",
        "ClassVar",
        "Final",
        "Iterable",
        "Sequence",
        "Mapping",
    ];
    let mut at = node.parent();
    while let Some(parent) = at {
        if parent.kind() == "subscript"
            && let Some(value) = parent.child_by_field_name("value")
        {
            let name = text(value, source);
            let name = name.rsplit('.').next().unwrap_or(name);
            if TYPING.contains(&name) {
                return true;
            }
        }
        if matches!(parent.kind(), "block" | "module" | "call") {
            return false;
        }
        at = parent.parent();
    }
    false
}

/// `__all__` and `__slots__` name things; emptying or renaming their entries tests nothing.
fn in_dunder_list(node: Node<'_>, source: &str) -> bool {
    let mut at = Some(node);
    while let Some(node) = at {
        if node.kind() == "assignment" {
            return node
                .child_by_field_name("left")
                .is_some_and(|left| matches!(text(left, source), "__all__" | "__slots__"));
        }
        if matches!(node.kind(), "block" | "module") {
            return false;
        }
        at = node.parent();
    }
    false
}

fn arithmetic(node: Node<'_>, source: &str, changed: &BTreeSet<u32>, found: &mut Vec<Candidate>) {
    let Some(op) = changed_operator(node, changed) else {
        return;
    };
    let to = match op.kind() {
        "+" => "-",
        "-" => "+",
        "*" => "/",
        "/" => "*",
        "//" => "/",
        "%" => "/",
        "**" => "*",
        "<<" => ">>",
        ">>" => "<<",
        "&" => "|",
        "|" => "&",
        "^" => "&",
        _ => return,
    };
    let mut site = token(Operator::Arithmetic, op, to, "binary_operator");
    // A neutral right operand makes both operators give the same value.
    let right = node
        .child_by_field_name("right")
        .map(|r| text(r, source).replace('_', ""));
    let neutral = matches!(
        (op.kind(), right.as_deref()),
        ("+" | "-", Some("0" | "0.0")) | ("*" | "/" | "**", Some("1" | "1.0"))
    );
    if neutral {
        site.unfit = Some(format!(
            "likely equivalent: `x {} {}` and `x {to} {}` give the same value",
            op.kind(),
            right.as_deref().unwrap_or(""),
            right.as_deref().unwrap_or("")
        ));
    }
    found.push(site);
}

fn equality(node: Node<'_>, changed: &BTreeSet<u32>, found: &mut Vec<Candidate>) {
    for i in 0..node.child_count() {
        let Some(child) = node.child(i) else { continue };
        let is_operator = u32::try_from(i)
            .ok()
            .and_then(|i| node.field_name_for_child(i))
            == Some("operators");
        if !is_operator || !touches(child, changed) {
            continue;
        }
        let to = match child.kind() {
            "==" => "!=",
            "!=" => "==",
            "is" => "is not",
            "is not" => "is",
            "in" => "not in",
            "not in" => "in",
            _ => continue,
        };
        found.push(token(
            Operator::Comparison,
            child,
            to,
            "comparison_operator",
        ));
    }
}

/// `not x` -> `x`, `-x` -> `x`, `~x` -> `x`; a unary `+` is left alone (on numbers it changes
/// nothing), and so is `-0`.
fn unary(node: Node<'_>, source: &str, changed: &BTreeSet<u32>, found: &mut Vec<Candidate>) {
    if !touches(node, changed) {
        return;
    }
    let sign = if node.kind() == "not_operator" {
        "not"
    } else {
        match node.child_by_field_name("operator").map(|op| op.kind()) {
            Some(sign @ ("-" | "~")) => sign,
            _ => return,
        }
    };
    let Some(argument) = node.child_by_field_name("argument") else {
        return;
    };
    let inner = text(argument, source);
    let mut site = candidate(
        Operator::Unary,
        node,
        inner.to_string(),
        format!("`{}` -> `{}`", short(text(node, source)), short(inner)),
        Expect::Expression,
    );
    // What lay between the sign and its argument (a line break, a comment) must stay.
    let between = source
        .get(node.start_byte()..argument.start_byte())
        .unwrap_or("");
    if newlines(between) > 0 || between.contains('#') {
        site.unfit = Some("a line break between the sign and its argument".into());
    } else if sign == "-" && matches!(inner.replace('_', "").as_str(), "0" | "0.0") {
        site.unfit = Some("likely equivalent: `-0` equals `0`".into());
    }
    found.push(site);
}

/// An integer plus one, written in its base; a float plus one.
fn number(node: Node<'_>, source: &str) -> Candidate {
    let original = text(node, source);
    let next = if original.ends_with(['j', 'J']) {
        Err(Unshifted::Complex(short(original)))
    } else if node.kind() == "integer" {
        shifted(original)
    } else {
        float_plus_one(original)
    };
    let (replacement, unfit) = match next {
        Ok(next) => (next, None),
        Err(reason) => (original.to_string(), Some(reason.to_string())),
    };
    let mut site = candidate(
        Operator::Number,
        node,
        replacement.clone(),
        format!("`{}` -> `{}`", short(original), short(&replacement)),
        Expect::Node(if node.kind() == "integer" {
            "integer"
        } else {
            "float"
        }),
    );
    site.unfit = unfit;
    site
}

fn float_plus_one(literal: &str) -> Result<String, Unshifted> {
    let plain = literal.replace('_', "");
    match plain.parse::<f64>() {
        Ok(value) if value.is_finite() && (value + 1.0).is_finite() => {
            Ok(format!("{:?}", value + 1.0))
        }
        _ => Err(Unshifted::FloatTooLarge(short(literal))),
    }
}

/// Each argument of a call removed in turn (`f(a, b)` -> `f(b)`, `f(a)`); the argument list is
/// the node replaced, and line breaks inside the removed part stay inside the parentheses.
fn arguments(node: Node<'_>, source: &str, changed: &BTreeSet<u32>, found: &mut Vec<Candidate>) {
    let Some(list) = node.child_by_field_name("arguments") else {
        return;
    };
    if list.kind() != "argument_list" {
        return;
    }
    let items = named(list);
    let callee = node
        .child_by_field_name("function")
        .map_or("", |f| text(f, source));
    let Some(close) = list.end_byte().checked_sub(1) else {
        return;
    };
    for (i, item) in items.iter().enumerate() {
        if !touches(*item, changed) {
            continue;
        }
        let (from, to) = if items.len() == 1 {
            (item.start_byte(), close)
        } else if let Some(next) = items.get(i + 1) {
            (item.start_byte(), next.start_byte())
        } else {
            (items[i - 1].end_byte(), item.end_byte())
        };
        let (Some(before), Some(removed), Some(after)) = (
            source.get(list.start_byte()..from),
            source.get(from..to),
            source.get(to..list.end_byte()),
        ) else {
            continue;
        };
        let replacement = format!("{before}{}{after}", "\n".repeat(newlines(removed)));
        found.push(candidate(
            Operator::Argument,
            list,
            replacement,
            format!(
                "`{}` removed from `{}(…)`",
                short(text(*item, source)),
                short(callee)
            ),
            Expect::Arguments(items.len() - 1),
        ));
    }
}

fn augmented(node: Node<'_>, changed: &BTreeSet<u32>, found: &mut Vec<Candidate>) {
    let Some(op) = changed_operator(node, changed) else {
        return;
    };
    let swapped = match op.kind() {
        "+=" => "-=",
        "-=" => "+=",
        "*=" => "/=",
        "/=" => "*=",
        "//=" => "/=",
        "%=" => "/=",
        "**=" => "*=",
        "<<=" => ">>=",
        ">>=" => "<<=",
        "&=" => "|=",
        "|=" => "&=",
        "^=" => "&=",
        _ => return,
    };
    found.push(token(
        Operator::AugmentedAssignment,
        op,
        swapped,
        "augmented_assignment",
    ));
    found.push(token(Operator::AugmentedAssignment, op, "=", "assignment"));
}

/// A non-empty display emptied, keeping its line breaks: `[a, b]` -> `[]`, `{a}` -> `set()`.
fn collection(node: Node<'_>, source: &str, changed: &BTreeSet<u32>, found: &mut Vec<Candidate>) {
    if named(node).is_empty() || !touches(node, changed) {
        return;
    }
    let original = text(node, source);
    let (open, close, expect) = match node.kind() {
        "list" => ("[", "]", "list"),
        "dictionary" => ("{", "}", "dictionary"),
        "set" => ("set(", ")", "call"),
        // A bare `a, b` tuple has no parentheses to keep.
        _ if original.starts_with('(') => ("(", ")", "tuple"),
        _ => return,
    };
    let replacement = format!("{open}{}{close}", "\n".repeat(newlines(original)));
    found.push(candidate(
        Operator::Collection,
        node,
        replacement.clone(),
        format!("`{}` -> `{}`", short(original), short(&replacement)),
        Expect::Node(expect),
    ));
}

/// `"s"` -> `"XXsXX"`, `""` -> `"XX"`, for each plain string (each part of an implicit
/// concatenation); docstrings and other bare string statements, f-strings and the entries of
/// `__all__` are left alone.
pub(super) fn strings(
    node: Node<'_>,
    source: &str,
    changed: &BTreeSet<u32>,
    found: &mut Vec<Candidate>,
) {
    if node
        .parent()
        .is_some_and(|parent| parent.kind() == "expression_statement")
        || in_dunder_list(node, source)
        || in_type_subscript(node, source)
    {
        return;
    }
    let parts: Vec<Node<'_>> = if node.kind() == "concatenated_string" {
        named(node)
            .into_iter()
            .filter(|part| part.kind() == "string")
            .collect()
    } else {
        vec![node]
    };
    for part in parts {
        if !touches(part, changed) {
            continue;
        }
        let mut cursor = part.walk();
        let children: Vec<Node<'_>> = part.children(&mut cursor).collect();
        if children.iter().any(|c| c.kind() == "interpolation") {
            continue;
        }
        let (Some(start), Some(end)) = (
            children.iter().find(|c| c.kind() == "string_start"),
            children.iter().find(|c| c.kind() == "string_end"),
        ) else {
            continue;
        };
        let (Some(open), Some(content), Some(close)) = (
            source.get(start.byte_range()),
            source.get(start.end_byte()..end.start_byte()),
            source.get(end.byte_range()),
        ) else {
            continue;
        };
        let replacement = if content.is_empty() {
            format!("{open}XX{close}")
        } else {
            format!("{open}XX{content}XX{close}")
        };
        found.push(candidate(
            Operator::String,
            part,
            replacement.clone(),
            format!(
                "`{}` -> `{}`",
                short(text(part, source)),
                short(&replacement)
            ),
            Expect::Node("string"),
        ));
    }
}
