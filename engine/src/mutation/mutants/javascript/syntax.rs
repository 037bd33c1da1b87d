//! The parsers behind JavaScript mutation: tree-sitter's JavaScript grammar (ES modules and
//! CommonJS alike) and, for TypeScript files, its TypeScript grammar (its TSX grammar for
//! `.tsx`). They name expressions and statements alike, so one walk finds the sites of any;
//! TypeScript's types are subtrees of their own ([`is_type`]) that hold no site.

use crate::mutation::mutants::sites::Reparsed;
use crate::mutation::mutants::syntax;

pub(crate) use crate::mutation::mutants::syntax::text;
use tree_sitter::{Node, Tree};

/// Which grammar a file of the language is parsed with, chosen by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// `.js`, `.mjs`, `.cjs`.
    JavaScript,
    /// `.ts`, `.mts`, `.cts` (types are erased before node runs them).
    TypeScript,
    /// `.tsx`: TypeScript with JSX, which the erasure turns into calls too.
    Tsx,
}

impl Dialect {
    /// The dialect of the file at `path`.
    pub(crate) fn of(path: &str) -> Self {
        if path.ends_with(".tsx") {
            Self::Tsx
        } else if is_typescript(path) {
            Self::TypeScript
        } else {
            Self::JavaScript
        }
    }

    /// Its name, for notes and errors.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::JavaScript => "JavaScript",
            Self::TypeScript => "TypeScript",
            Self::Tsx => "TypeScript (TSX)",
        }
    }

    pub(crate) fn grammar(self) -> tree_sitter::Language {
        match self {
            Self::JavaScript => javascript(),
            Self::TypeScript => typescript(),
            Self::Tsx => tsx(),
        }
    }

    /// The check a mutated file of this dialect passes: it parses in the same grammar.
    pub(crate) fn reparsed(self) -> Reparsed {
        match self {
            Self::JavaScript => JAVASCRIPT,
            Self::TypeScript => TYPESCRIPT,
            Self::Tsx => TSX,
        }
    }
}

const JAVASCRIPT: Reparsed = Reparsed::parses(" as JavaScript", javascript);
const TYPESCRIPT: Reparsed = Reparsed::parses(" as TypeScript", typescript);
const TSX: Reparsed = Reparsed::parses(" as TypeScript (TSX)", tsx);

fn javascript() -> tree_sitter::Language {
    tree_sitter_javascript::LANGUAGE.into()
}

fn typescript() -> tree_sitter::Language {
    tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into()
}

fn tsx() -> tree_sitter::Language {
    tree_sitter_typescript::LANGUAGE_TSX.into()
}

/// A TypeScript source file: `.ts`, `.mts`, `.cts` or `.tsx` (declaration files among them).
pub(crate) fn is_typescript(path: &str) -> bool {
    [".ts", ".mts", ".cts", ".tsx"]
        .iter()
        .any(|ext| path.ends_with(ext))
}

/// A TypeScript declaration file (`.d.ts`, `.d.mts`, `.d.cts`): types only, no code runs.
pub(crate) fn is_declaration(path: &str) -> bool {
    path.ends_with(".d.ts") || path.ends_with(".d.mts") || path.ends_with(".d.cts")
}

/// Parses `source`; `None` only if the parser could not be set up or was cancelled.
pub(crate) fn parse(dialect: Dialect, source: &str) -> Option<Tree> {
    syntax::parse(dialect.grammar(), source)
}

/// The tree of `source` when it parses cleanly; otherwise the 1-based line of the first problem.
pub(crate) fn parse_clean(dialect: Dialect, source: &str) -> Result<Tree, u32> {
    syntax::parse_clean(dialect.grammar(), source)
}

/// Whether `node` is TypeScript's type-level syntax, which erasure removes: an annotation, a
/// type, a declaration of types only. No site is in one, and no switch goes around one.
pub(crate) fn is_type(node: Node<'_>) -> bool {
    matches!(
        node.kind(),
        "type_annotation"
            | "opting_type_annotation"
            | "omitting_type_annotation"
            | "adding_type_annotation"
            | "asserts_annotation"
            | "type_predicate_annotation"
            | "type_arguments"
            | "type_parameters"
            | "interface_declaration"
            | "type_alias_declaration"
            | "ambient_declaration"
            | "abstract_method_signature"
            | "function_signature"
            | "method_signature"
            | "property_signature"
            | "index_signature"
            | "implements_clause"
            | "enum_declaration"
            | "literal_type"
            | "union_type"
            | "intersection_type"
            | "generic_type"
            | "object_type"
            | "tuple_type"
            | "array_type"
            | "function_type"
            | "constructor_type"
            | "conditional_type"
            | "lookup_type"
            | "index_type_query"
            | "type_query"
            | "template_literal_type"
            | "predefined_type"
            | "type_identifier"
            | "nested_type_identifier"
            | "parenthesized_type"
            | "readonly_type"
            | "infer_type"
            | "type_predicate"
            | "type_parameter"
            | "call_signature"
            | "construct_signature"
            | "default_type"
            | "existential_type"
            | "extends_type_clause"
            | "flow_maybe_type"
            | "mapped_type_clause"
            | "optional_type"
            | "rest_type"
            | "template_type"
            | "this_type"
    )
}
