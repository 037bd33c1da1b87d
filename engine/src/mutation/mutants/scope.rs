//! A mutant's scope: the function around its edit, or its whole file outside any function. The
//! incremental run's cache key digests the scope's text, so an edit elsewhere in the file
//! leaves the key alone. Each language finds its own ([`super::language::Language::scopes`], asked by
//! [`super::languages::scopes`]).

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

/// Each range's scope in a file that does not parse: the whole file.
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
