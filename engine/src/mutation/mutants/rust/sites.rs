//! Rust's mutation sites, as cargo-mutants makes them: a function's body replaced by each value
//! of [`values`](super::values), binary, comparison and boolean operators swapped, `!` and `-`
//! deleted, compound assignments swapped, and an arm of a `match` that has a wildcard arm
//! deleted. Test code, macro bodies (token trees, not syntax) and attributes hold no site;
//! what cannot compile as far as the syntax shows is never planned.

use super::syntax::{self, is_const_fn, is_test_code, text};
use super::values;
use crate::mutation::mutants::Operator;
use crate::mutation::mutants::sites::{
    Candidate, Reparsed, candidate, newlines, short, token_swap,
};
use crate::mutation::mutants::syntax::{changed_operator, touches};
use std::collections::BTreeSet;
use tree_sitter::Node;

/// What a mutated Rust file must be: it parses, and with [`Reparsed::token`], an operator
/// swapped in place reads as that operator.
const RUST: Reparsed = Reparsed::parses(" as Rust", syntax::grammar);

/// Every site on `changed` lines of `source`, in tree order.
pub(super) fn find(source: &str, changed: &BTreeSet<u32>) -> Vec<Candidate> {
    let Some(tree) = syntax::parse(source) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        if matches!(
            node.kind(),
            "attribute_item" | "inner_attribute_item" | "macro_invocation" | "macro_definition"
        ) || is_test_item(node, source)
        {
            continue;
        }
        visit(node, source, changed, &mut found);
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    found
}

/// An item marked as test code; its descendants are never visited.
fn is_test_item(node: Node<'_>, source: &str) -> bool {
    node.kind().ends_with("_item") && is_test_code(node, source)
}

fn visit(node: Node<'_>, source: &str, changed: &BTreeSet<u32>, found: &mut Vec<Candidate>) {
    match node.kind() {
        "function_item" => function_body(node, source, changed, found),
        "binary_expression" => binary(node, changed, found),
        "compound_assignment_expr" => compound(node, changed, found),
        "unary_expression" => unary(node, source, changed, found),
        "match_block" => match_arms(node, source, changed, found),
        _ => {}
    }
}

/// The body replaced by each value of the return type, when the signature's line changed or
/// the body did. The replacement keeps the body's line breaks, so later lines keep their
/// numbers.
fn function_body(
    node: Node<'_>,
    source: &str,
    changed: &BTreeSet<u32>,
    found: &mut Vec<Candidate>,
) {
    let Some(body) = node.child_by_field_name("body") else {
        return;
    };
    let name = node
        .child_by_field_name("name")
        .map_or("", |name| text(name, source));
    if !touches(node, changed) {
        return;
    }
    let values = values::replacements(node.child_by_field_name("return_type"), source);
    let breaks = "\n".repeat(newlines(text(body, source)));
    let values = match values {
        Ok(values) => values,
        Err(reason) => {
            let mut site = candidate(
                Operator::FunctionBody,
                body,
                format!("{{ Default::default(){breaks} }}"),
                format!("`fn {name}` body -> a value of its return type"),
                RUST,
            );
            site.unfit = Some(reason.to_string());
            found.push(site);
            return;
        }
    };
    let does_nothing = is_empty_block(body);
    for value in values {
        let mut site = candidate(
            Operator::FunctionBody,
            body,
            format!("{{ {value}{breaks} }}"),
            format!("`fn {name}` body -> `{value}`"),
            RUST,
        );
        if value == "()" && does_nothing {
            site.unfit = Some("the body does nothing already".into());
        } else if name == "new" && value == "Default::default()" {
            // cargo-mutants' rule: a constructor replaced by `Default::default()` mostly
            // builds the same value or does not compile.
            site.unfit = Some("a constructor: `Default::default()` is likely equivalent".into());
        } else if is_const_fn(node) && value.contains("::new(") {
            site.unfit = Some("a `const fn` cannot call a non-`const` constructor".into());
        }
        found.push(site);
    }
}

fn is_empty_block(block: Node<'_>) -> bool {
    let mut cursor = block.walk();
    block
        .named_children(&mut cursor)
        .all(|c| matches!(c.kind(), "line_comment" | "block_comment"))
}

/// cargo-mutants' replacements of a binary operator.
fn binary_swaps(operator: &str) -> Option<(Operator, &'static [&'static str])> {
    Some(match operator {
        "==" => (Operator::Comparison, &["!="]),
        "!=" => (Operator::Comparison, &["=="]),
        "<" => (Operator::Comparison, &["==", ">"]),
        ">" => (Operator::Comparison, &["==", "<"]),
        "<=" => (Operator::Comparison, &[">"]),
        ">=" => (Operator::Comparison, &["<"]),
        "&&" => (Operator::Boolean, &["||"]),
        "||" => (Operator::Boolean, &["&&"]),
        "+" => (Operator::Arithmetic, &["-", "*"]),
        "-" => (Operator::Arithmetic, &["+", "/"]),
        "*" => (Operator::Arithmetic, &["+", "/"]),
        "/" => (Operator::Arithmetic, &["%", "*"]),
        "%" => (Operator::Arithmetic, &["/", "+"]),
        "<<" => (Operator::Arithmetic, &[">>"]),
        ">>" => (Operator::Arithmetic, &["<<"]),
        "&" => (Operator::Arithmetic, &["|", "^"]),
        "|" => (Operator::Arithmetic, &["&", "^"]),
        "^" => (Operator::Arithmetic, &["&", "|"]),
        _ => return None,
    })
}

fn binary(node: Node<'_>, changed: &BTreeSet<u32>, found: &mut Vec<Candidate>) {
    let Some(op) = changed_operator(node, changed) else {
        return;
    };
    let Some((operator, swaps)) = binary_swaps(op.kind()) else {
        return;
    };
    // `if let … && …` chains parse as `let_chain`, not `binary_expression`; an operand that is
    // itself a `let` has no `||` form.
    let in_let_chain = node.parent().is_some_and(|p| p.kind() == "let_chain");
    for to in swaps.iter().copied() {
        let mut site = token_swap(operator, op, to, RUST.token(to, "binary_expression"));
        if in_let_chain {
            site.unfit = Some("part of an `if let` chain".into());
        }
        found.push(site);
    }
}

fn compound(node: Node<'_>, changed: &BTreeSet<u32>, found: &mut Vec<Candidate>) {
    let Some(op) = changed_operator(node, changed) else {
        return;
    };
    let Some(plain) = op.kind().strip_suffix('=') else {
        return;
    };
    let Some((_, swaps)) = binary_swaps(plain) else {
        return;
    };
    for to in swaps.iter().copied() {
        let to: &'static str = match to {
            "-" => "-=",
            "+" => "+=",
            "*" => "*=",
            "/" => "/=",
            "%" => "%=",
            "<<" => "<<=",
            ">>" => ">>=",
            "&" => "&=",
            "|" => "|=",
            "^" => "^=",
            _ => continue,
        };
        found.push(token_swap(
            Operator::AugmentedAssignment,
            op,
            to,
            RUST.token(to, "compound_assignment_expr"),
        ));
    }
}

/// `!x` and `-x` become `x`; the operand keeps its own bytes.
fn unary(node: Node<'_>, source: &str, changed: &BTreeSet<u32>, found: &mut Vec<Candidate>) {
    let mut cursor = node.walk();
    let parts: Vec<Node<'_>> = node.children(&mut cursor).collect();
    let (Some(op), Some(operand)) = (parts.first(), parts.last()) else {
        return;
    };
    if !matches!(op.kind(), "!" | "-") || !touches(*op, changed) {
        return;
    }
    let operand_text = text(*operand, source);
    // The operand keeps its place: the sign's bytes become spaces, so columns stay too.
    let padding = " ".repeat(operand.start_byte() - node.start_byte());
    let mut site = candidate(
        Operator::Unary,
        node,
        format!("{padding}{operand_text}"),
        format!(
            "`{}` -> `{}`",
            short(text(node, source)),
            short(operand_text)
        ),
        RUST,
    );
    if op.kind() == "-" && operand.kind() == "integer_literal" && operand_text == "0" {
        site.unfit = Some("likely equivalent: `-0` equals `0`".into());
    }
    if newlines(&padding) > 0 || padding.contains('/') {
        site.unfit = Some("a comment or line break between the operator and its operand".into());
    }
    found.push(site);
}

/// Each arm of a `match` with a wildcard arm (`_ =>`, not itself deleted) deleted: the
/// wildcard then takes its values, and the match stays exhaustive.
fn match_arms(block: Node<'_>, source: &str, changed: &BTreeSet<u32>, found: &mut Vec<Candidate>) {
    let mut cursor = block.walk();
    let arms: Vec<Node<'_>> = block
        .named_children(&mut cursor)
        .filter(|n| n.kind() == "match_arm")
        .collect();
    let is_wildcard = |arm: &Node<'_>| {
        arm.child_by_field_name("pattern").is_some_and(|pattern| {
            pattern.child_by_field_name("condition").is_none() && text(pattern, source) == "_"
        })
    };
    if !arms.iter().any(is_wildcard) {
        return;
    }
    for arm in arms.iter().filter(|arm| !is_wildcard(arm)) {
        if !touches(*arm, changed) {
            continue;
        }
        let pattern = arm
            .child_by_field_name("pattern")
            .map_or("", |pattern| text(pattern, source));
        found.push(candidate(
            Operator::MatchArm,
            *arm,
            "\n".repeat(newlines(text(*arm, source))),
            format!("match arm `{} => …` deleted", short(pattern)),
            RUST,
        ));
    }
}
