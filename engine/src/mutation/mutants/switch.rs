//! What every language's mutant schema shares: a mutant put behind the runtime switch
//! ([`Entry`]) and the bound on how deeply switched sites may nest ([`shallow_sites`]).

use assay_common::job::ByteEdit;
use std::ops::Range;

/// One mutant of a file: its number in the switch (never 0) and its edit.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    /// The mutant's number in the switch, from 1.
    pub number: u32,
    /// The mutant's edit of the file, in the file's original bytes.
    pub edit: &'a ByteEdit,
}

/// How many sites may enclose a site: writing a site writes the sites inside it first, and a
/// chain of operators nests one site in the next, as deep as the source likes.
pub const MAX_SITE_NESTING: usize = 64;

/// A place of a schema that switches between its mutants.
pub(crate) trait SwitchedSite<'e> {
    /// The bytes of the original file the site replaces.
    fn range(&self) -> &Range<usize>;
    /// The mutants it switches between.
    fn entries(&self) -> &[Entry<'e>];
}

/// `sites` (in source order, an enclosing site before those inside it) without the ones nested
/// deeper than [`MAX_SITE_NESTING`]: their mutants go to `fallback`, to run on their own.
pub(crate) fn shallow_sites<'e, S: SwitchedSite<'e>>(
    sites: Vec<S>,
    fallback: &mut Vec<(u32, String)>,
) -> Vec<S> {
    let mut open: Vec<usize> = Vec::new();
    let mut kept = Vec::with_capacity(sites.len());
    for site in sites {
        while open.last().is_some_and(|end| *end <= site.range().start) {
            open.pop();
        }
        if open.len() >= MAX_SITE_NESTING {
            fallback.extend(site.entries().iter().map(|e| {
                (
                    e.number,
                    format!("nested inside {MAX_SITE_NESTING} other mutants' sites"),
                )
            }));
            continue;
        }
        open.push(site.range().end);
        kept.push(site);
    }
    kept
}
