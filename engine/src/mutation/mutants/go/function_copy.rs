//! A mutant's own copy of its function, for the mutants no statement of the schema can hold
//! (a declaration `x := …`, a `case` value, a mutant inside another's switched statement).
//!
//! The function declared as `func (r *T) Name(a int, rest ...string) (int, error) { … }`
//! gains, right after its body's `{` and on that line, `if assayMutantOn(N) { return
//! r.assayMutantN_Name(a, rest...) }`; the mutated copy, `func (r *T) assayMutantN_Name(…)
//! … { … }` with the mutant's edit, goes to the end of the file, so no line of the original
//! moves. The copy has the same receiver, type parameters, parameters and results, so it
//! compiles wherever the mutant would compile alone; recursion goes through the original and
//! back into the copy. A function whose arguments cannot all be passed on (an unnamed or `_`
//! parameter or receiver), `init`, and a mutant outside the body are left to a build of their
//! own.

use super::syntax;
use assay_common::job::ByteEdit;
use std::ops::Range;
use tree_sitter::Node;

/// The function around a mutant, as its copy needs it.
#[derive(Debug, Clone)]
pub(super) struct Function {
    /// Where the dispatch goes: just after the body's `{`.
    pub(super) body_open: usize,
    /// The whole declaration, `func` to the body's `}`.
    declaration: Range<usize>,
    /// The function's name.
    name: Range<usize>,
    /// The body, braces included.
    body: Range<usize>,
    /// `r.` for a method, else empty.
    receiver: String,
    /// `[T, U]` for a generic function, else empty.
    type_arguments: String,
    /// The call's arguments, `a, rest...`.
    arguments: String,
    /// Whether the function has results (the dispatch returns the copy's).
    returns: bool,
}

/// Why the mutant's function cannot be copied: `None` when no function declaration holds it.
pub(super) type NotCopyable = Option<&'static str>;

impl Function {
    /// The declared function (or method) whose body holds `edit`.
    pub(super) fn around(
        root: Node<'_>,
        source: &str,
        edit: &ByteEdit,
    ) -> Result<Self, NotCopyable> {
        let mut cursor = root.walk();
        let declaration = root
            .named_children(&mut cursor)
            .find(|n| n.start_byte() <= edit.start && edit.end <= n.end_byte())
            .filter(|n| matches!(n.kind(), "function_declaration" | "method_declaration"))
            .ok_or(None)?;
        let field = |name: &str| declaration.child_by_field_name(name);
        let (Some(name), Some(body), Some(parameters)) =
            (field("name"), field("body"), field("parameters"))
        else {
            return Err(Some("its declaration has no name, body or parameter list"));
        };
        if !(body.start_byte() < edit.start && edit.end < body.end_byte()) {
            return Err(Some("the mutant is outside the function's body"));
        }
        if matches!(syntax::text(name, source), "init" | "_") {
            return Err(Some("`init` and `_` cannot be called"));
        }
        let receiver = match field("receiver") {
            Some(list) => format!("{}.", only_name(list, source)?),
            None => String::new(),
        };
        let type_arguments = match field("type_parameters") {
            Some(list) => format!("[{}]", names(list, "type_parameter_declaration", source)?),
            None => String::new(),
        };
        Ok(Self {
            body_open: body.start_byte() + 1,
            declaration: declaration.byte_range(),
            name: name.byte_range(),
            body: body.byte_range(),
            receiver,
            type_arguments,
            arguments: arguments(parameters, source)?,
            returns: field("result").is_some(),
        })
    }

    /// What goes after the body's `{`: each mutant's switch to its copy.
    pub(super) fn dispatch(&self, source: &str, numbers: &[u32]) -> String {
        let (before, after) = if self.returns {
            ("return ", "")
        } else {
            ("", "; return")
        };
        let arms: Vec<String> = numbers
            .iter()
            .map(|number| {
                format!(
                    "if assayMutantOn({number}) {{ {before}{}{}{}({}){after} }}",
                    self.receiver,
                    copy_name(source, self, *number),
                    self.type_arguments,
                    self.arguments
                )
            })
            .collect();
        format!(" {}; ", arms.join(" else "))
    }

    /// The mutant's copy of the whole declaration, renamed, with `edit` made in its body.
    pub(super) fn copy(&self, source: &str, number: u32, edit: &ByteEdit) -> String {
        let declaration = &source[self.declaration.clone()];
        let at = |offset: usize| offset - self.declaration.start;
        debug_assert!(self.body.start < edit.start && edit.end < self.body.end);
        format!(
            "{}{}{}{}{}",
            &declaration[..at(self.name.start)],
            copy_name(source, self, number),
            &declaration[at(self.name.end)..at(edit.start)],
            edit.replacement,
            &declaration[at(edit.end)..],
        )
    }
}

fn copy_name(source: &str, function: &Function, number: u32) -> String {
    format!("assayMutant{number}_{}", &source[function.name.clone()])
}

/// The one name a receiver list declares.
fn only_name<'s>(list: Node<'_>, source: &'s str) -> Result<&'s str, NotCopyable> {
    let mut cursor = list.walk();
    let mut declarations = list
        .named_children(&mut cursor)
        .filter(|n| n.kind() != "comment");
    let (Some(declaration), None) = (declarations.next(), declarations.next()) else {
        return Err(Some("its receiver is not one declaration"));
    };
    let name = declaration
        .child_by_field_name("name")
        .map(|n| syntax::text(n, source))
        .filter(|n| *n != "_")
        .ok_or(Some("its receiver has no name to call the copy on"))?;
    Ok(name)
}

/// `a, b, rest...`: every parameter passed on, a variadic one spread.
fn arguments(list: Node<'_>, source: &str) -> Result<String, NotCopyable> {
    let mut passed = Vec::new();
    let mut cursor = list.walk();
    for declaration in list.named_children(&mut cursor) {
        let spread = match declaration.kind() {
            "parameter_declaration" => "",
            "variadic_parameter_declaration" => "...",
            "comment" => continue,
            _ => return Err(Some("a parameter the copy cannot be passed")),
        };
        let mut inner = declaration.walk();
        let names: Vec<&str> = declaration
            .children_by_field_name("name", &mut inner)
            .map(|n| syntax::text(n, source))
            .collect();
        if names.is_empty() || names.contains(&"_") {
            return Err(Some("an unnamed or `_` parameter cannot be passed on"));
        }
        passed.extend(names.iter().map(|n| format!("{n}{spread}")));
    }
    Ok(passed.join(", "))
}

/// The names `kind` declarations of `list` declare, joined by `, `.
fn names(list: Node<'_>, kind: &str, source: &str) -> Result<String, NotCopyable> {
    let mut found = Vec::new();
    let mut cursor = list.walk();
    for declaration in list
        .named_children(&mut cursor)
        .filter(|n| n.kind() == kind)
    {
        let mut inner = declaration.walk();
        for name in declaration.children_by_field_name("name", &mut inner) {
            match syntax::text(name, source) {
                "_" => return Err(Some("a `_` type parameter cannot be named")),
                name => found.push(name),
            }
        }
    }
    Ok(found.join(", "))
}
