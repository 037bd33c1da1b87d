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

impl<'a> Entry<'a> {
    /// The entries of `path`'s mutants among `mutants` (a plan, in order) that `keep` takes by
    /// plan position: mutant `at` is switched on by number `at + 1` (0 is the original).
    pub fn of_file(
        mutants: &'a [super::Mutant],
        path: &str,
        keep: impl Fn(usize) -> bool,
    ) -> Vec<Entry<'a>> {
        mutants
            .iter()
            .enumerate()
            .filter(|(at, m)| m.path.as_str() == path && keep(*at))
            .map(|(at, m)| Entry {
                number: Self::number_of(at),
                edit: &m.edit,
            })
            .collect()
    }

    /// The switch number of the mutant at plan position `at`.
    pub fn number_of(at: usize) -> u32 {
        at as u32 + 1
    }

    /// The plan position of the mutant switch number `number` stands for.
    pub fn position(number: u32) -> usize {
        (number as usize).saturating_sub(1)
    }

    /// This entry's mutant's plan position.
    pub fn at(&self) -> usize {
        Self::position(self.number)
    }
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
