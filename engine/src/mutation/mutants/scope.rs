//! A mutant's scope: the function around its edit, or its whole file outside any function. The
//! incremental run's cache key digests the scope's text, so an edit elsewhere in the file
//! leaves the key alone. Each language finds its own ([`super::language::Language::scopes`], asked by
//! [`super::languages::scopes`]).

use tree_sitter::{Node, Tree};

/// Where a mutant's scope lies in its file, and its dotted name (`Version.compare`; empty for
/// the whole file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scope {
    /// The scope's first byte in the file.
    pub start: usize,
    /// The byte after the scope's last.
    pub end: usize,
    /// Its dotted name; empty for the whole file.
    pub name: String,
    /// The 1-based first line of the innermost statement holding the edit (an item of a
    /// multi-line list literal: the assignment's line).
    pub statement_line: u32,
}

impl Scope {
    /// An edit's scope from what its language found around it (the edit starts at byte
    /// `start`): the `function` holding it, with its name, or the whole file outside any; and
    /// the first line of the statement holding it, or the edit's own line where none does.
    pub(crate) fn around(
        source: &str,
        start: usize,
        function: Option<(Node<'_>, String)>,
        statement_line: Option<u32>,
    ) -> Self {
        let mut scope = match function {
            Some((function, name)) => Self {
                start: function.start_byte(),
                end: function.end_byte(),
                name,
                statement_line: 0,
            },
            None => Self::whole_file(source, start),
        };
        scope.statement_line = statement_line.unwrap_or_else(|| line_of(source, start));
        scope
    }

    /// The whole of `source`, for an edit starting at byte `start` outside every function.
    pub(crate) fn whole_file(source: &str, start: usize) -> Self {
        Self {
            start: 0,
            end: source.len(),
            name: String::new(),
            statement_line: line_of(source, start),
        }
    }
}

/// The scope of each byte range `(start, end)` of `source`, in order, as `scope_of` finds it
/// from the root of the file's `tree`. Every range gets the whole file when the source did not
/// parse (the caller excluded such files already).
pub(crate) fn in_tree(
    tree: Option<Tree>,
    source: &str,
    ranges: &[(usize, usize)],
    scope_of: impl Fn(Node<'_>, usize, usize) -> Scope,
) -> Vec<Scope> {
    let Some(tree) = tree else {
        return whole_files(source, ranges);
    };
    let root = tree.root_node();
    ranges
        .iter()
        .map(|&(start, end)| scope_of(root, start, end))
        .collect()
}

/// Each range's scope in a file that does not parse, or of no language Assay mutates: the
/// whole file.
pub(crate) fn whole_files(source: &str, ranges: &[(usize, usize)]) -> Vec<Scope> {
    ranges
        .iter()
        .map(|&(start, _)| Scope::whole_file(source, start))
        .collect()
}

/// The 1-based line of byte `at` of `source`.
pub(crate) fn line_of(source: &str, at: usize) -> u32 {
    let before = source.get(..at).unwrap_or(source);
    u32::try_from(before.bytes().filter(|b| *b == b'\n').count())
        .unwrap_or(u32::MAX - 1)
        .saturating_add(1)
}
