//! The mutants chosen for a change, as data: which operator changed which bytes of which file,
//! the sites left out and the files never mutated. The coordinator's planner fills it in where
//! the repository is; it travels in a fleet submission so the coordinator runs the same mutants.

use crate::job::ByteEdit;
use crate::tree_path::TreePath;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The mutation operators: Python's five of the proof's check (and `assay mutate`'s default),
/// in the order the round-robin visits them, then its ten more of `assay mutate --operators
/// extended`, then Rust's own. Each language picks its operators and says what they replace
/// in its syntax (docs/mutation.md); the examples below are Python's. New ones are only ever
/// appended, so older encoded plans still decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operator {
    /// A condition (`if`, `while`, `assert`, …) wrapped in `not (…)`.
    NegateCondition,
    /// `<` <-> `<=`, `>` <-> `>=`.
    SwapBound,
    /// The body of an `if`, `elif` or `else` replaced by `pass`.
    DropBranch,
    /// A `return`'s value replaced by a constant (`True` <-> `False`, `0` -> `1`, else `None`).
    ReturnConstant,
    /// An integer bound of an ordering comparison plus one.
    ShiftBound,
    /// `+` <-> `-`, `*` <-> `/`, `//` -> `/`, `%` -> `/`, `**` -> `*`, and the bitwise ones.
    Arithmetic,
    /// `==` <-> `!=`, `is` <-> `is not`, `in` <-> `not in`.
    Comparison,
    /// `and` <-> `or`, `True` <-> `False`.
    Boolean,
    /// `not x` -> `x`, `-x` -> `x`, `~x` -> `x`.
    Unary,
    /// An integer or float literal plus one.
    Number,
    /// `"s"` -> `"XXsXX"`, `""` -> `"XX"`.
    String,
    /// One argument of a call removed.
    Argument,
    /// `break` <-> `continue`.
    LoopControl,
    /// `+=` -> `-=` (and the like), or -> `=`.
    AugmentedAssignment,
    /// A non-empty list, tuple, dict or set display emptied.
    Collection,
    /// Rust: a function's body replaced by a value of its return type (`0`, `true`, `None`,
    /// `String::new()`, `Default::default()`, …).
    FunctionBody,
    /// Rust: one arm of a `match` that has a wildcard arm deleted.
    MatchArm,
    /// Go and JavaScript: `x++` <-> `x--`.
    IncrementDecrement,
    /// Go: `&` <-> `|`, `^` -> `&`, `&^` -> `&`, `<<` <-> `>>`.
    Bitwise,
    /// JavaScript: a condition (`if`, `while`, `for`, `?:`) replaced by `true` or `false`.
    ConditionalExpression,
    /// JavaScript: `a?.b` -> `a.b`, `a?.[i]` -> `a[i]`, `f?.()` -> `f()`.
    OptionalChaining,
}

impl Operator {
    /// The default five, in the order the round-robin visits them.
    pub const ALL: [Operator; 5] = [
        Self::NegateCondition,
        Self::SwapBound,
        Self::DropBranch,
        Self::ReturnConstant,
        Self::ShiftBound,
    ];

    /// Every operator, the default five first.
    pub const EXTENDED: [Operator; 15] = [
        Self::NegateCondition,
        Self::SwapBound,
        Self::DropBranch,
        Self::ReturnConstant,
        Self::ShiftBound,
        Self::Arithmetic,
        Self::Comparison,
        Self::Boolean,
        Self::Unary,
        Self::Number,
        Self::String,
        Self::Argument,
        Self::LoopControl,
        Self::AugmentedAssignment,
        Self::Collection,
    ];

    /// The operator as plans, flags and reports name it (`swap_bound`).
    pub fn name(self) -> &'static str {
        match self {
            Self::NegateCondition => "negate_condition",
            Self::SwapBound => "swap_bound",
            Self::DropBranch => "drop_branch",
            Self::ReturnConstant => "return_constant",
            Self::ShiftBound => "shift_bound",
            Self::Arithmetic => "arithmetic",
            Self::Comparison => "comparison",
            Self::Boolean => "boolean",
            Self::Unary => "unary",
            Self::Number => "number",
            Self::String => "string",
            Self::Argument => "argument",
            Self::LoopControl => "loop_control",
            Self::AugmentedAssignment => "augmented_assignment",
            Self::Collection => "collection",
            Self::FunctionBody => "function_body",
            Self::MatchArm => "match_arm",
            Self::IncrementDecrement => "increment_decrement",
            Self::Bitwise => "bitwise",
            Self::ConditionalExpression => "conditional_expression",
            Self::OptionalChaining => "optional_chaining",
        }
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One small change to one product file: the bytes of one syntax node replaced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mutant {
    /// Stable across runs: derived from the path, operator, byte range and replacement.
    pub id: String,
    /// Confined like every path on the wire: mutants travel in a fleet submission.
    pub path: TreePath,
    /// 1-based line of the replaced node's first byte (the same before and after the edit).
    pub line: u32,
    /// The operator that made it.
    pub operator: Operator,
    /// What changed, e.g. ``` `>` -> `>=` ```.
    pub description: String,
    /// The replacement applied to the candidate tree.
    pub edit: ByteEdit,
}

impl Mutant {
    /// `pager/__init__.py:9 changed (`>` -> `>=`)`, the wording survivors are reported with.
    pub fn label(&self) -> String {
        changed_label(&self.path, self.line, &self.description)
    }
}

/// `PATH:LINE changed (DESCRIPTION)`: how a mutant is named wherever it is reported.
pub fn changed_label(path: &impl std::fmt::Display, line: u32, description: &str) -> String {
    format!("{path}:{line} changed ({description})")
}

/// A site on a changed line that did not become a mutant, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedSite {
    /// The file, relative to the tree root.
    pub path: String,
    /// 1-based line of the site.
    pub line: u32,
    /// The operator that would have changed it.
    pub operator: Operator,
    /// What it would have changed, e.g. ``` `>` -> `>=` ```.
    pub description: String,
    /// Why it was left out, in words.
    pub reason: String,
}

/// Why a changed file is never mutated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExclusionReason {
    /// A path a job cannot name (a backslash, say): a worker would refuse the edit.
    PathNotConfined,
    /// Not a source file of the language mutated (the name predates languages other than
    /// Python, and stays so encoded plans still decode).
    NotPython,
    /// A test file: the tests are not the product.
    TestFile,
    /// A type stub (Python's `.pyi`, a TypeScript declaration file): it holds no code that runs.
    TypeStub,
    /// The file is not UTF-8.
    NotUtf8,
    /// A coding cookie names another encoding and the file is not plain ASCII.
    DeclaredEncoding,
    /// Python and git number lines differently when a carriage return stands alone.
    BareCarriageReturn,
    /// The file does not parse in its language.
    DoesNotParse,
    /// Written by a tool (Go's `// Code generated … DO NOT EDIT.`): its tests are the
    /// generator's, and a regeneration would undo any fix a survivor suggests.
    Generated,
}

/// A changed file the plan never mutates, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExcludedFile {
    /// The file, relative to the tree root.
    pub path: String,
    /// Why it is never mutated.
    pub reason: ExclusionReason,
    /// The reason in words, with the line where it applies.
    pub note: String,
}

/// The mutants chosen for a change, in file-path then line order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MutationPlan {
    /// The mutants, in file-path then line order.
    pub mutants: Vec<Mutant>,
    /// Changed sites that did not become mutants, and why.
    pub skipped: Vec<SkippedSite>,
    /// Changed files never mutated, and why.
    pub excluded_files: Vec<ExcludedFile>,
}

/// What a proof's mutation check is given: its budget and the mutants planned where the
/// repository was, or why none could be planned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MutationSetup {
    /// Seconds the check may take in all, the unmutated run included.
    pub budget_secs: u64,
    /// The mutants planned.
    pub plan: MutationPlan,
    /// Why planning failed, when it did (the plan is then empty).
    pub planning_error: Option<String>,
    /// The candidate's text of each file holding a mutant, when the check builds its mutants
    /// once behind a runtime switch (Rust's mutant schemata); empty otherwise, and every
    /// mutant then builds on its own. The coordinator rewrites these texts: it has the trees
    /// but not the repository.
    pub schema_sources: Vec<SchemaSource>,
}

/// One file the check's schema rewrites.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaSource {
    /// The file, relative to the tree root.
    pub path: TreePath,
    /// The candidate's text of the file. A text that is not the tree's only spoils the
    /// submitter's own report: the build that replaces the file fails or builds other code.
    pub text: String,
    /// The file belongs to a proc-macro crate, whose code runs inside the compiler, where the
    /// switch is never read: its mutants build on their own.
    pub proc_macro: bool,
}

/// The largest schema source a submission may carry, and all of them together. A source file
/// of a crate is rarely above a few hundred kilobytes; the coordinator parses and rewrites
/// each one, so what it accepts is bounded before any parser sees it.
pub const MAX_SCHEMA_SOURCE_BYTES: usize = 4 << 20;
/// The most bytes all schema sources of one submission may hold together.
pub const MAX_SCHEMA_SOURCES_BYTES: usize = 32 << 20;

impl MutationSetup {
    /// Checks what the plan's mutants cannot: each schema source names a file some mutant
    /// changes, once, and the sources are within [`MAX_SCHEMA_SOURCE_BYTES`] each and
    /// [`MAX_SCHEMA_SOURCES_BYTES`] in all.
    pub fn check_schema_sources(&self) -> Result<(), SchemaSourceError> {
        let mut seen = std::collections::BTreeSet::new();
        let total: usize = self.schema_sources.iter().map(|s| s.text.len()).sum();
        if total > MAX_SCHEMA_SOURCES_BYTES {
            return Err(SchemaSourceError::TooLargeInAll { bytes: total });
        }
        for source in &self.schema_sources {
            let path = source.path.as_str();
            if source.text.len() > MAX_SCHEMA_SOURCE_BYTES {
                return Err(SchemaSourceError::TooLarge {
                    path: path.to_owned(),
                    bytes: source.text.len(),
                });
            }
            if !self.plan.mutants.iter().any(|m| m.path.as_str() == path) {
                return Err(SchemaSourceError::NoMutant(path.to_owned()));
            }
            if !seen.insert(path) {
                return Err(SchemaSourceError::Twice(path.to_owned()));
            }
        }
        Ok(())
    }
}

/// Why a mutation setup's schema sources are refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SchemaSourceError {
    /// A source names a file no planned mutant changes.
    #[error("schema source {0:?} is not a file any planned mutant changes")]
    NoMutant(String),
    /// A source names a file another source already names.
    #[error("schema source {0:?} is given twice")]
    Twice(String),
    /// One source is over [`MAX_SCHEMA_SOURCE_BYTES`].
    #[error(
        "schema source {path:?} is {bytes} bytes, over the {MAX_SCHEMA_SOURCE_BYTES} a source may be"
    )]
    TooLarge {
        /// The source's file.
        path: String,
        /// Its size, in bytes.
        bytes: usize,
    },
    /// The sources together are over [`MAX_SCHEMA_SOURCES_BYTES`].
    #[error(
        "the schema sources are {bytes} bytes in all, over the {MAX_SCHEMA_SOURCES_BYTES} a submission may carry"
    )]
    TooLargeInAll {
        /// Their size together, in bytes.
        bytes: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(path: &str) -> SchemaSource {
        SchemaSource {
            path: TreePath::new(path).unwrap(),
            text: "pub fn pages(items: u32, per: u32) -> u32 {\n    items / per\n}\n".into(),
            proc_macro: false,
        }
    }

    #[test]
    fn a_schema_source_must_be_a_mutated_file_named_once() {
        let mutant = Mutant {
            id: "m-1".into(),
            path: TreePath::new("pager/src/lib.rs").unwrap(),
            line: 2,
            operator: Operator::Arithmetic,
            description: "`/` -> `*`".into(),
            edit: ByteEdit {
                path: TreePath::new("pager/src/lib.rs").unwrap(),
                start: 54,
                end: 55,
                replacement: "*".into(),
            },
        };
        let setup = |sources: Vec<SchemaSource>| MutationSetup {
            budget_secs: 60,
            plan: MutationPlan {
                mutants: vec![mutant.clone()],
                ..MutationPlan::default()
            },
            planning_error: None,
            schema_sources: sources,
        };
        assert_eq!(
            setup(vec![source("pager/src/lib.rs")]).check_schema_sources(),
            Ok(())
        );
        assert_eq!(setup(Vec::new()).check_schema_sources(), Ok(()));
        let mut huge = source("pager/src/lib.rs");
        huge.text = "/".repeat(MAX_SCHEMA_SOURCE_BYTES + 1);
        assert!(matches!(
            setup(vec![huge]).check_schema_sources(),
            Err(SchemaSourceError::TooLarge { .. })
        ));
        assert_eq!(
            setup(vec![source("pager/src/lib.rs"), source("pager/src/lib.rs")])
                .check_schema_sources(),
            Err(SchemaSourceError::Twice("pager/src/lib.rs".into()))
        );
        let stray = setup(vec![source("ledger/build.rs")]).check_schema_sources();
        assert_eq!(
            stray,
            Err(SchemaSourceError::NoMutant("ledger/build.rs".into()))
        );
    }
}
