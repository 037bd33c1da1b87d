//! Python's mutation sites: the syntax nodes on changed lines each operator may replace, and
//! the check that a mutated file parses and changes its statement as intended.

use super::syntax;
use crate::mutation::mutants::Operator;
use crate::mutation::mutants::sites::{Candidate, Skip, Verify, newlines, short};
use crate::mutation::mutants::syntax::{Reparser, text};

mod extra;
use std::collections::BTreeSet;
use std::sync::Arc;
use tree_sitter::Node;

/// What the replaced node must be once the mutant is re-parsed.
#[derive(Clone, Copy, Debug)]
pub(super) enum Expect {
    /// `not (…)` around the original condition.
    Negation,
    /// A block holding nothing but `pass`.
    PassBlock,
    /// A lone `pass` statement where a definition stood.
    PassStatement,
    /// A comparison operator token of this kind.
    ComparisonToken(&'static str),
    /// An integer operand of a comparison.
    ComparisonInteger,
    /// The value of a `return` statement.
    ReturnValue,
    /// A token of this kind whose parent is of the other kind (an operator swapped in place).
    Token(&'static str, &'static str),
    /// A node of this kind spanning exactly the replacement.
    Node(&'static str),
    /// Any expression spanning exactly the replacement (what `not x` or `-x` unwraps to).
    Expression,
    /// An argument list, one argument shorter, of a call.
    Arguments(usize),
}

/// Every site on `changed` lines of `source`, in tree order; `extended` adds the sites of the
/// extended operators. Unparsable sources give none; the caller excludes them first.
pub(super) fn find(source: &str, changed: &BTreeSet<u32>, extended: bool) -> Vec<Candidate> {
    let Some(tree) = syntax::parse(source) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        if is_left_alone(node, source) {
            // A string's text is a site of its own, but nothing inside it is.
            if extended && matches!(node.kind(), "string" | "concatenated_string") {
                extra::strings(node, source, changed, &mut found);
            }
            continue;
        }
        visit(node, source, changed, &mut found);
        if extended {
            extra::visit(node, source, changed, &mut found);
        }
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    found
}

/// Strings (f-strings among them), annotations, comments and the TYPE_CHECKING and `__main__`
/// guards are never mutated, nor is anything inside them.
fn is_left_alone(node: Node<'_>, source: &str) -> bool {
    match node.kind() {
        "string" | "concatenated_string" | "type" | "comment" => true,
        "if_statement" => node
            .child_by_field_name("condition")
            .is_some_and(|condition| is_guard(text(condition, source))),
        _ => false,
    }
}

fn is_guard(condition: &str) -> bool {
    let squeezed: String = condition.chars().filter(|c| !c.is_whitespace()).collect();
    squeezed == "TYPE_CHECKING"
        || squeezed.ends_with(".TYPE_CHECKING")
        || matches!(
            squeezed.as_str(),
            "__name__==\"__main__\""
                | "__name__=='__main__'"
                | "\"__main__\"==__name__"
                | "'__main__'==__name__"
        )
}

fn visit(node: Node<'_>, source: &str, changed: &BTreeSet<u32>, found: &mut Vec<Candidate>) {
    let on_changed = |anchor_start: Node<'_>, anchor_end: Node<'_>| {
        changed
            .range(syntax::line(anchor_start)..=syntax::end_line(anchor_end))
            .next()
            .is_some()
    };
    let mut push = |candidate: Option<Candidate>| {
        if let Some(candidate) = candidate {
            found.push(candidate);
        }
    };
    match node.kind() {
        kind @ ("if_statement" | "elif_clause" | "while_statement") => {
            let keyword = match kind {
                "if_statement" => "if",
                "elif_clause" => "elif",
                _ => "while",
            };
            if let Some(condition) = node.child_by_field_name("condition")
                && on_changed(condition, condition)
            {
                push(Some(negate(condition, source, keyword)));
            }
            if kind == "while_statement" {
                return;
            }
            if let Some(body) = node.child_by_field_name("consequence")
                && on_changed(body, body)
            {
                push(drop_block(body, source, keyword));
            }
            let mut cursor = node.walk();
            let else_bodies: Vec<Node<'_>> = node
                .children_by_field_name("alternative", &mut cursor)
                .filter(|alt| alt.kind() == "else_clause")
                .filter_map(|alt| alt.child_by_field_name("body"))
                .collect();
            for body in else_bodies {
                if on_changed(body, body) {
                    push(drop_block(body, source, "else"));
                }
            }
        }
        "conditional_expression" => {
            if let Some(condition) = named(node).get(1).copied()
                && on_changed(condition, condition)
            {
                push(Some(negate(condition, source, "if")));
            }
        }
        kind @ ("assert_statement" | "if_clause") => {
            let keyword = if kind == "assert_statement" {
                "assert"
            } else {
                "if"
            };
            if let Some(condition) = named(node).first().copied()
                && on_changed(condition, condition)
            {
                push(Some(negate(condition, source, keyword)));
            }
        }
        "comparison_operator" => comparison(node, source, &on_changed, found),
        "return_statement" => {
            if let Some(value) = named(node).first().copied()
                && on_changed(node, node)
            {
                push(Some(return_constant(value, source)));
            }
        }
        "decorated_definition" => {
            let header_end = node
                .child_by_field_name("definition")
                .and_then(|definition| definition.child_by_field_name("name"));
            if let Some(header_end) = header_end
                && on_changed(node, header_end)
            {
                push(Some(drop_definition(node, header_end, source)));
            }
        }
        _ => {}
    }
}

fn negate(condition: Node<'_>, source: &str, keyword: &str) -> Candidate {
    let original = text(condition, source);
    let replacement = format!("not ({original})");
    Candidate {
        operator: Operator::NegateCondition,
        rank: 0,
        start: condition.start_byte(),
        end: condition.end_byte(),
        description: format!(
            "`{keyword} {}` -> `{keyword} not ({})`",
            short(original),
            short(original)
        ),
        replacement,
        line: syntax::line(condition),
        verify: Arc::new(Expect::Negation),
        unfit: None,
    }
}

fn drop_block(body: Node<'_>, source: &str, keyword: &str) -> Option<Candidate> {
    if does_nothing(body) {
        return None;
    }
    let original = text(body, source);
    Some(Candidate {
        operator: Operator::DropBranch,
        rank: 0,
        start: body.start_byte(),
        end: body.end_byte(),
        replacement: pass_keeping_lines(original),
        line: syntax::line(body),
        description: format!("`{keyword}` body -> `pass`"),
        verify: Arc::new(Expect::PassBlock),
        unfit: None,
    })
}

fn drop_definition(node: Node<'_>, name: Node<'_>, source: &str) -> Candidate {
    let original = text(node, source);
    Candidate {
        operator: Operator::DropBranch,
        rank: 1,
        start: node.start_byte(),
        end: node.end_byte(),
        replacement: pass_keeping_lines(original),
        line: syntax::line(node),
        description: format!("decorated `{}` -> `pass`", text(name, source)),
        verify: Arc::new(Expect::PassStatement),
        unfit: None,
    }
}

/// `pass` followed by as many newlines as the dropped text held, so every later line keeps its
/// number; the freed lines become blank lines, which Python ignores.
fn pass_keeping_lines(original: &str) -> String {
    let mut replacement = String::from("pass");
    replacement.extend(std::iter::repeat_n('\n', newlines(original)));
    replacement
}

/// A block of only `pass`, `...` and comments.
fn does_nothing(block: Node<'_>) -> bool {
    named(block).iter().all(|statement| match statement.kind() {
        "pass_statement" => true,
        "expression_statement" => {
            let parts = named(*statement);
            parts.len() == 1 && parts[0].kind() == "ellipsis"
        }
        _ => false,
    })
}

fn comparison(
    node: Node<'_>,
    source: &str,
    on_changed: &dyn Fn(Node<'_>, Node<'_>) -> bool,
    found: &mut Vec<Candidate>,
) {
    // Children alternate operand, operator, operand, …; operators carry the `operators` field.
    let mut parts: Vec<(Node<'_>, bool)> = Vec::new();
    for i in 0..node.child_count() {
        let Some(child) = node.child(i) else { continue };
        if child.kind() == "comment" {
            continue;
        }
        let is_operator = u32::try_from(i)
            .ok()
            .and_then(|i| node.field_name_for_child(i))
            == Some("operators");
        parts.push((child, is_operator));
    }
    for (index, (part, is_operator)) in parts.iter().enumerate() {
        if *is_operator {
            let swapped = match part.kind() {
                "<" => "<=",
                "<=" => "<",
                ">" => ">=",
                ">=" => ">",
                _ => continue,
            };
            if !on_changed(*part, *part) {
                continue;
            }
            found.push(Candidate {
                operator: Operator::SwapBound,
                rank: 0,
                start: part.start_byte(),
                end: part.end_byte(),
                replacement: swapped.to_string(),
                line: syntax::line(*part),
                description: format!("`{}` -> `{swapped}`", part.kind()),
                verify: Arc::new(Expect::ComparisonToken(swapped)),
                unfit: None,
            });
            continue;
        }
        // A negative bound is a unary minus over an integer; the integer is the node replaced.
        let (literal, sign) = match part.kind() {
            "integer" => (*part, ""),
            "unary_operator" => match (
                part.child_by_field_name("operator").map(|op| op.kind()),
                part.child_by_field_name("argument"),
            ) {
                (Some(sign @ ("-" | "+")), Some(argument)) if argument.kind() == "integer" => {
                    (argument, sign)
                }
                _ => continue,
            },
            _ => continue,
        };
        if !on_changed(*part, *part) {
            continue;
        }
        // A bound is an operand whose every neighbouring operator is <, <=, > or >=.
        let neighbours: Vec<&str> = [index.checked_sub(1), Some(index + 1)]
            .into_iter()
            .flatten()
            .filter_map(|i| parts.get(i))
            .filter(|(_, is_operator)| *is_operator)
            .map(|(op, _)| op.kind())
            .collect();
        let is_bound = !neighbours.is_empty()
            && neighbours
                .iter()
                .all(|op| matches!(*op, "<" | "<=" | ">" | ">="));
        if is_bound {
            found.push(shift_integer(literal, sign, source));
        }
    }
}

fn shift_integer(literal: Node<'_>, sign: &str, source: &str) -> Candidate {
    let original = text(literal, source);
    let (replacement, unfit) = match shifted(original) {
        Ok(replacement) => (replacement, None),
        Err(reason) => (original.to_string(), Some(reason.to_string())),
    };
    Candidate {
        operator: Operator::ShiftBound,
        rank: 0,
        start: literal.start_byte(),
        end: literal.end_byte(),
        description: format!(
            "`{sign}{}` -> `{sign}{}`",
            short(original),
            short(&replacement)
        ),
        replacement,
        line: syntax::line(literal),
        verify: Arc::new(Expect::ComparisonInteger),
        unfit,
    }
}

/// Why a number literal has no literal plus one (the literal, shortened).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum Unshifted {
    #[error("`{0}` is not a Python 3 integer")]
    NotPython3(String),
    #[error("`{0}` is an integer too long to shift")]
    IntegerTooLong(String),
    #[error("`{0}` is a complex literal")]
    Complex(String),
    #[error("`{0}` is a float too large to shift")]
    FloatTooLarge(String),
}

/// The literal plus one, written in the literal's base.
fn shifted(literal: &str) -> Result<String, Unshifted> {
    let lower = literal.to_ascii_lowercase().replace('_', "");
    if lower.ends_with('l') {
        return Err(Unshifted::NotPython3(short(literal)));
    }
    let (radix, digits, prefix) = match lower.get(..2) {
        Some("0x") => (16, &lower[2..], "0x"),
        Some("0o") => (8, &lower[2..], "0o"),
        Some("0b") => (2, &lower[2..], "0b"),
        _ => (10, lower.as_str(), ""),
    };
    let value = u128::from_str_radix(digits, radix)
        .ok()
        .and_then(|value| value.checked_add(1))
        .ok_or_else(|| Unshifted::IntegerTooLong(short(literal)))?;
    Ok(match radix {
        16 => format!("{prefix}{value:x}"),
        8 => format!("{prefix}{value:o}"),
        2 => format!("{prefix}{value:b}"),
        _ => value.to_string(),
    })
}

/// The constant a returned value becomes: booleans flip, `0` becomes `1`, another integer `0`,
/// anything else `None`. A value spanning lines becomes `(None)` with the line breaks kept
/// inside the parentheses.
fn return_constant(value: Node<'_>, source: &str) -> Candidate {
    let original = text(value, source);
    let (constant, unfit) = match value.kind() {
        "true" => ("False", None),
        "false" => ("True", None),
        "none" => ("None", Some("returns `None` already".to_string())),
        "integer" if shifted(original).is_ok_and(|next| next == "1") => ("1", None),
        "integer" => ("0", None),
        _ => ("None", None),
    };
    let breaks = newlines(original);
    let replacement = if breaks == 0 {
        constant.to_string()
    } else {
        format!("({constant}{})", "\n".repeat(breaks))
    };
    Candidate {
        operator: Operator::ReturnConstant,
        rank: 0,
        start: value.start_byte(),
        end: value.end_byte(),
        replacement,
        line: syntax::line(value),
        description: format!("`return {}` -> `return {constant}`", short(original)),
        verify: Arc::new(Expect::ReturnValue),
        unfit,
    }
}

impl Verify for Expect {
    /// The mutated file parses cleanly and the node at the replacement is the one intended.
    fn verify(&self, file: &mut Reparser<'_>, candidate: &Candidate) -> Result<(), Skip> {
        let tree = file
            .mutated_clean(syntax::grammar(), candidate)
            .map_err(|line| Skip::DoesNotParse { language: "", line })?;
        let new_end = candidate.start + candidate.replacement.len();
        let root = tree.root_node();
        let mut node = root
            .descendant_for_byte_range(candidate.start, candidate.start)
            .ok_or(Skip::NodeNotFound)?;
        // Walk up through the nodes that begin where the replacement begins.
        loop {
            if intended(
                node,
                *self,
                candidate.start,
                new_end,
                &candidate.replacement,
            ) {
                return Ok(());
            }
            match node.parent() {
                Some(parent) if parent.start_byte() == candidate.start => node = parent,
                _ => break,
            }
        }
        Err(Skip::NotAsIntended { what: "statement" })
    }
}

fn intended(node: Node<'_>, expect: Expect, start: usize, end: usize, replacement: &str) -> bool {
    let exact = node.start_byte() == start && node.end_byte() == end;
    let parent_kind = node.parent().map(|parent| parent.kind());
    match expect {
        Expect::Negation => {
            exact
                && node.kind() == "not_operator"
                && node
                    .child_by_field_name("argument")
                    .is_some_and(|argument| argument.kind() == "parenthesized_expression")
        }
        Expect::PassBlock => {
            let statements = named(node);
            node.kind() == "block"
                && node.start_byte() == start
                && statements.len() == 1
                && statements[0].kind() == "pass_statement"
        }
        Expect::PassStatement => {
            node.kind() == "pass_statement" && node.end_byte() == start + "pass".len()
        }
        Expect::ComparisonToken(token) => {
            exact && node.kind() == token && parent_kind == Some("comparison_operator")
        }
        Expect::ComparisonInteger => {
            let operand = match node.parent() {
                Some(parent) if parent.kind() == "unary_operator" => parent.parent(),
                parent => parent,
            };
            exact
                && node.kind() == "integer"
                && operand.is_some_and(|operand| operand.kind() == "comparison_operator")
        }
        Expect::ReturnValue => {
            exact && parent_kind == Some("return_statement") && !replacement.is_empty()
        }
        Expect::Token(token, parent) => {
            exact && node.kind() == token && parent_kind == Some(parent)
        }
        Expect::Node(kind) => exact && node.kind() == kind,
        Expect::Expression => exact && node.is_named() && !node.has_error(),
        Expect::Arguments(count) => {
            exact
                && node.kind() == "argument_list"
                && parent_kind == Some("call")
                && named(node).len() == count
        }
    }
}

/// Named children other than comments.
fn named(node: Node<'_>) -> Vec<Node<'_>> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor)
        .filter(|child| child.kind() != "comment")
        .collect()
}
