//! The values a function's body is replaced by, from its return type's syntax alone, as
//! cargo-mutants chooses them: each kind of type gets the few values a test most likely tells
//! apart from the real result, and an unknown type gets `Default::default()`.

use super::syntax::text;
use tree_sitter::Node;

/// Why a function's body has no replacement value the syntax can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum NoValue {
    #[error("returns an opaque `impl` type")]
    Opaque,
    #[error("never returns (`!`)")]
    Never,
}

/// How deep inside a return type (`Option<Vec<(u8, String)>>` is 3 deep) values are still
/// built from the inner types; deeper, an inner type's value is `Default::default()`. The
/// source chooses the nesting, and each level is a call deeper on the stack.
const MAX_TYPE_DEPTH: usize = 16;

/// The replacement values for a function returning `return_type` (`None`: returns `()`), or
/// why its body cannot be replaced: an opaque or never type has no value the syntax can name.
pub(super) fn replacements(
    return_type: Option<Node<'_>>,
    source: &str,
) -> Result<Vec<String>, NoValue> {
    replacements_within(return_type, source, 0)
}

/// [`replacements`] for a type `depth` levels inside the return type.
fn replacements_within(
    return_type: Option<Node<'_>>,
    source: &str,
    depth: usize,
) -> Result<Vec<String>, NoValue> {
    let Some(ty) = return_type else {
        return Ok(vec!["()".into()]);
    };
    if depth > MAX_TYPE_DEPTH {
        return Ok(vec![default()]);
    }
    Ok(match ty.kind() {
        "abstract_type" => return Err(NoValue::Opaque),
        "never_type" => return Err(NoValue::Never),
        "unit_type" => vec!["()".into()],
        "primitive_type" => primitive(text(ty, source)),
        "reference_type" => reference(ty, source),
        "generic_type" => generic(ty, source, depth),
        "type_identifier" if text(ty, source) == "String" => {
            vec!["String::new()".into(), "\"xyzzy\".into()".into()]
        }
        "scoped_type_identifier" if text(ty, source).ends_with("::String") => {
            vec!["String::new()".into(), "\"xyzzy\".into()".into()]
        }
        // A `Result` alias with its types fixed (`fmt::Result`, a crate's own `Result`).
        "type_identifier" | "scoped_type_identifier"
            if text(ty, source).rsplit("::").next() == Some("Result") =>
        {
            vec![format!("Ok({})", default())]
        }
        "tuple_type" => {
            let mut cursor = ty.walk();
            let items: Vec<Node<'_>> = ty.named_children(&mut cursor).collect();
            let mut values = Vec::new();
            for item in items {
                let first = replacements_within(Some(item), source, depth + 1)?;
                values.push(first.into_iter().next().unwrap_or_else(default));
            }
            vec![format!("({})", values.join(", "))]
        }
        _ => vec![default()],
    })
}

fn default() -> String {
    "Default::default()".into()
}

fn primitive(name: &str) -> Vec<String> {
    match name {
        "bool" => vec!["true".into(), "false".into()],
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => {
            vec!["0".into(), "1".into(), "-1".into()]
        }
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => vec!["0".into(), "1".into()],
        "f32" | "f64" => vec!["0.0".into(), "1.0".into(), "-1.0".into()],
        _ => vec![default()],
    }
}

fn reference(ty: Node<'_>, source: &str) -> Vec<String> {
    let mutable = {
        let mut cursor = ty.walk();
        ty.children(&mut cursor)
            .any(|c| c.kind() == "mutable_specifier")
    };
    let inner = ty.child_by_field_name("type");
    match inner.map(|inner| (inner.kind(), text(inner, source))) {
        Some(("primitive_type", "str")) if !mutable => vec!["\"\"".into(), "\"xyzzy\"".into()],
        Some(("array_type", _)) if !mutable => vec!["&[]".into()],
        _ if mutable => vec!["Box::leak(Box::new(Default::default()))".into()],
        _ => vec!["&Default::default()".into()],
    }
}

fn generic(ty: Node<'_>, source: &str, depth: usize) -> Vec<String> {
    let name = ty
        .child_by_field_name("type")
        .map(|name| text(name, source))
        .unwrap_or("");
    let name = name.rsplit("::").next().unwrap_or(name);
    let arguments: Vec<Node<'_>> = ty
        .child_by_field_name("type_arguments")
        .map(|args| {
            let mut cursor = args.walk();
            args.named_children(&mut cursor)
                .filter(|a| !matches!(a.kind(), "lifetime" | "type_binding"))
                .collect()
        })
        .unwrap_or_default();
    let first = |values: Result<Vec<String>, NoValue>| {
        values
            .ok()
            .and_then(|v| v.into_iter().next())
            .unwrap_or_else(default)
    };
    let inner = || {
        first(replacements_within(
            arguments.first().copied(),
            source,
            depth + 1,
        ))
    };
    match name {
        "Option" => vec!["None".into(), format!("Some({})", inner())],
        "Result" => vec![format!("Ok({})", inner())],
        "Vec" => vec!["vec![]".into(), format!("vec![{}]", inner())],
        "Box" | "Rc" | "Arc" => vec![format!("{name}::new({})", inner())],
        _ => vec![default()],
    }
}
