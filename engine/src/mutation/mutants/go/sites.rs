//! Go's mutation sites, gremlins' operator families and one more: arithmetic (`+` ↔ `-`,
//! `*` ↔ `/`, `%` → `*`), conditional boundaries (`<` ↔ `<=`, `>` ↔ `>=`) and negations
//! (`==` ↔ `!=`, `<` ↔ `>=`, `>` ↔ `<=`), `x++` ↔ `x--`, inverted assignments (`+=` ↔ `-=`,
//! …) and removed self-assignments (`+=` → `=`), bitwise operators, `&&` ↔ `||`, `break` ↔
//! `continue` inside a loop, negatives (`-x` → `+x`), and a `return`'s values replaced by
//! the zero values of the function's results. Comments and string literals hold no site.
//!
//! The walk is a loop over an explicit stack that carries what each node is inside of (a loop,
//! a function), so no site ever climbs its ancestors: the source chooses the depth.

use super::syntax::{self, text};
use crate::mutation::mutants::Operator;
use crate::mutation::mutants::sites::{
    Candidate, Reparsed, c_like_binary_swaps, candidate, newlines, short, token_swap,
};
use crate::mutation::mutants::syntax::{changed_operator, touches};
use std::collections::BTreeSet;
use tree_sitter::Node;

/// What a mutated Go file must be: it parses, and with [`Reparsed::token`], an operator
/// swapped in place reads as that operator.
const GO: Reparsed = Reparsed::parses(" as Go", syntax::grammar);

/// What a node is inside of, carried down the walk.
#[derive(Clone, Copy)]
struct Context<'t> {
    /// Inside a `for` loop's body, in the same function: `break` and `continue` both compile.
    in_loop: bool,
    /// The innermost function declaration, method or function literal.
    function: Option<Node<'t>>,
}

/// Every site on `changed` lines of `source`, in tree order.
pub(super) fn find(source: &str, changed: &BTreeSet<u32>) -> Vec<Candidate> {
    let Some(tree) = syntax::parse(source) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let top = Context {
        in_loop: false,
        function: None,
    };
    let mut stack = vec![(tree.root_node(), top)];
    while let Some((node, context)) = stack.pop() {
        if matches!(
            node.kind(),
            "comment"
                | "interpreted_string_literal"
                | "raw_string_literal"
                | "import_declaration"
                | "package_clause"
        ) {
            continue;
        }
        visit(node, source, changed, context, &mut found);
        let inner = match node.kind() {
            "function_declaration" | "method_declaration" | "func_literal" => Context {
                in_loop: false,
                function: Some(node),
            },
            "for_statement" => Context {
                in_loop: true,
                ..context
            },
            _ => context,
        };
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
        stack.extend(children.into_iter().rev().map(|child| (child, inner)));
    }
    found
}

fn visit(
    node: Node<'_>,
    source: &str,
    changed: &BTreeSet<u32>,
    context: Context<'_>,
    found: &mut Vec<Candidate>,
) {
    match node.kind() {
        "binary_expression" => binary(node, changed, found),
        "assignment_statement" => assignment(node, changed, found),
        "inc_statement" | "dec_statement" => step(node, changed, found),
        "unary_expression" => negative(node, source, changed, found),
        "break_statement" | "continue_statement" if context.in_loop => {
            loop_control(node, changed, found);
        }
        "return_statement" => {
            if let Some(function) = context.function {
                zero_return(node, function, source, changed, found);
            }
        }
        _ => {}
    }
}

/// gremlins' replacements of a binary operator, by family: the C-like ones and Go's bitwise.
fn binary_swaps(operator: &str) -> &'static [(Operator, &'static str)] {
    match operator {
        "&" => &[(Operator::Bitwise, "|")],
        "|" => &[(Operator::Bitwise, "&")],
        "^" => &[(Operator::Bitwise, "&")],
        "&^" => &[(Operator::Bitwise, "&")],
        "<<" => &[(Operator::Bitwise, ">>")],
        ">>" => &[(Operator::Bitwise, "<<")],
        _ => c_like_binary_swaps(operator),
    }
}

fn is_string_literal(node: Option<Node<'_>>) -> bool {
    node.is_some_and(|n| {
        matches!(
            n.kind(),
            "interpreted_string_literal" | "raw_string_literal"
        )
    })
}

/// Whether a `+` chain (`a + " " + b`, read down its left operands) has a string literal
/// operand: it joins strings, and no other arithmetic operator applies to them.
fn joins_strings(node: Node<'_>) -> bool {
    let mut at = Some(node);
    while let Some(sum) = at.filter(|n| {
        n.kind() == "binary_expression"
            && n.child_by_field_name("operator")
                .is_some_and(|op| op.kind() == "+")
    }) {
        if is_string_literal(sum.child_by_field_name("right")) {
            return true;
        }
        let left = sum.child_by_field_name("left");
        if is_string_literal(left) {
            return true;
        }
        at = left;
    }
    false
}

fn binary(node: Node<'_>, changed: &BTreeSet<u32>, found: &mut Vec<Candidate>) {
    let Some(op) = changed_operator(node, changed) else {
        return;
    };
    let joins_strings = op.kind() == "+" && joins_strings(node);
    for &(operator, to) in binary_swaps(op.kind()) {
        let mut site = token_swap(operator, op, to, GO.token(to, "binary_expression"));
        if joins_strings {
            site.unfit = Some("joins strings: `-` does not apply to them".into());
        }
        found.push(site);
    }
}

/// gremlins' inverted assignments (`+=` ↔ `-=`, …) and removed self-assignments (`+=` → `=`).
fn assignment(node: Node<'_>, changed: &BTreeSet<u32>, found: &mut Vec<Candidate>) {
    let Some(op) = changed_operator(node, changed) else {
        return;
    };
    if op.kind() == "=" {
        return;
    }
    let inverted: Option<&'static str> = match op.kind() {
        "+=" => Some("-="),
        "-=" => Some("+="),
        "*=" => Some("/="),
        "/=" => Some("*="),
        "%=" => Some("*="),
        "&=" => Some("|="),
        "|=" => Some("&="),
        "^=" => Some("&="),
        "&^=" => Some("&="),
        "<<=" => Some(">>="),
        ">>=" => Some("<<="),
        _ => None,
    };
    let joins_strings = op.kind() == "+=" && is_string_literal(right_value(node));
    for to in inverted.into_iter().chain(["="]) {
        let mut site = token_swap(
            Operator::AugmentedAssignment,
            op,
            to,
            GO.token(to, "assignment_statement"),
        );
        if joins_strings && to == "-=" {
            site.unfit = Some("joins strings: `-=` does not apply to them".into());
        }
        found.push(site);
    }
}

/// The single value on the right of an assignment, if there is one.
fn right_value(node: Node<'_>) -> Option<Node<'_>> {
    let right = node.child_by_field_name("right")?;
    (right.named_child_count() == 1)
        .then(|| right.named_child(0))
        .flatten()
}

/// `x++` ↔ `x--`.
fn step(node: Node<'_>, changed: &BTreeSet<u32>, found: &mut Vec<Candidate>) {
    let mut cursor = node.walk();
    let Some(op) = node
        .children(&mut cursor)
        .find(|c| matches!(c.kind(), "++" | "--"))
    else {
        return;
    };
    if !touches(op, changed) {
        return;
    }
    let (to, parent) = match op.kind() {
        "++" => ("--", "dec_statement"),
        _ => ("++", "inc_statement"),
    };
    found.push(token_swap(
        Operator::IncrementDecrement,
        op,
        to,
        GO.token(to, parent),
    ));
}

/// gremlins' inverted negatives: `-x` → `+x`.
fn negative(node: Node<'_>, source: &str, changed: &BTreeSet<u32>, found: &mut Vec<Candidate>) {
    let (Some(op), Some(operand)) = (
        node.child_by_field_name("operator"),
        node.child_by_field_name("operand"),
    ) else {
        return;
    };
    if op.kind() != "-" || !touches(op, changed) {
        return;
    }
    let operand_text = text(operand, source);
    let mut site = candidate(
        Operator::Unary,
        op,
        "+".into(),
        format!("`-{}` -> `+{}`", short(operand_text), short(operand_text)),
        GO.token("+", "unary_expression"),
    );
    if matches!(operand.kind(), "int_literal" | "float_literal")
        && operand_text.trim_start_matches(['0', '.', '_']).is_empty()
    {
        site.unfit = Some("likely equivalent: `-0` equals `+0`".into());
    }
    found.push(site);
}

/// `break` ↔ `continue`, unlabelled, inside a loop of the same function (where both compile).
fn loop_control(node: Node<'_>, changed: &BTreeSet<u32>, found: &mut Vec<Candidate>) {
    if node.named_child_count() > 0 || !touches(node, changed) {
        return; // a label names what to leave: it may not be a loop
    }
    let (from, to, kind) = match node.kind() {
        "break_statement" => ("break", "continue", "continue_statement"),
        _ => ("continue", "break", "break_statement"),
    };
    found.push(candidate(
        Operator::LoopControl,
        node,
        to.to_string(),
        format!("`{from}` -> `{to}`"),
        GO.token(to, kind),
    ));
}

/// A `return`'s values replaced by the zero value of each of the function's results (`0`,
/// `false`, `""`, `nil`, or `*new(T)`, which is any type's zero value).
fn zero_return(
    node: Node<'_>,
    function: Node<'_>,
    source: &str,
    changed: &BTreeSet<u32>,
    found: &mut Vec<Candidate>,
) {
    let Some(values) = node
        .named_child(0)
        .filter(|v| v.kind() == "expression_list")
    else {
        return; // a bare `return`: named results, or none
    };
    if !touches(node, changed) {
        return;
    }
    let Some(result) = function.child_by_field_name("result") else {
        return;
    };
    let zeros = match zero_values(result, source) {
        Ok(zeros) => zeros.join(", "),
        Err(why) => {
            let mut site = candidate(
                Operator::ReturnConstant,
                values,
                String::new(),
                format!("`return {}` -> zero values", short(text(values, source))),
                GO,
            );
            site.unfit = Some(why.into());
            found.push(site);
            return;
        }
    };
    // Line breaks of a value spanning lines stay after the zeros: Go ends the statement at the
    // first, and the rest are blank lines.
    let original = text(values, source);
    let replacement = format!("{zeros}{}", "\n".repeat(newlines(original)));
    found.push(candidate(
        Operator::ReturnConstant,
        values,
        replacement,
        format!("`return {}` -> `return {zeros}`", short(original)),
        GO,
    ));
}

/// The zero value of each result of a function, in order.
fn zero_values(result: Node<'_>, source: &str) -> Result<Vec<String>, &'static str> {
    if result.kind() != "parameter_list" {
        return Ok(vec![zero_value(result, source)?]);
    }
    let mut zeros = Vec::new();
    let mut cursor = result.walk();
    for declaration in result.named_children(&mut cursor) {
        if declaration.kind() != "parameter_declaration" {
            continue;
        }
        let Some(ty) = declaration.child_by_field_name("type") else {
            return Err("a result without a type");
        };
        let mut names = declaration.walk();
        let count = declaration
            .children_by_field_name("name", &mut names)
            .count()
            .max(1);
        let zero = zero_value(ty, source)?;
        zeros.extend(std::iter::repeat_n(zero, count));
    }
    match zeros.is_empty() {
        true => Err("the function returns nothing"),
        false => Ok(zeros),
    }
}

fn zero_value(ty: Node<'_>, source: &str) -> Result<String, &'static str> {
    let written = text(ty, source);
    Ok(match ty.kind() {
        "pointer_type" | "slice_type" | "map_type" | "channel_type" | "function_type"
        | "interface_type" => "nil".into(),
        "type_identifier" => match written {
            "bool" => "false".into(),
            "string" => "\"\"".into(),
            "error" | "any" => "nil".into(),
            "int" | "int8" | "int16" | "int32" | "int64" | "uint" | "uint8" | "uint16"
            | "uint32" | "uint64" | "uintptr" | "byte" | "rune" | "float32" | "float64"
            | "complex64" | "complex128" => "0".into(),
            _ => format!("*new({written})"),
        },
        _ if written.contains('\n') => return Err("a result type written over several lines"),
        _ => format!("*new({written})"),
    })
}
