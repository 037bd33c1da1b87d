//! What `assay mutate` mutates, as people name it: paths (`pager/`), a file's line range
//! (`pager/__init__.py:40-58`), and for CI the lines changed since a revision (`--since
//! origin/main`). Each file's lines are narrowed by its ranges, then by the change.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::RangeInclusive;

/// The paths to mutate and, where given, the lines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Targets {
    /// Files or directories (relative, `/`-separated); empty: every product file.
    pub paths: Vec<String>,
    /// Line ranges of single files: only these lines of them are mutated.
    pub ranges: BTreeMap<String, Vec<RangeInclusive<u32>>>,
    /// The lines changed since `--since REV` (added or modified on the HEAD side), per file:
    /// a file with none is not mutated at all.
    pub changed: Option<BTreeMap<String, BTreeSet<u32>>>,
}

/// Why a target is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error(
        "{target:?}: the line range {range:?} is not START-END with 1 <= START <= END (hint: pager.py:40-58, or pager.py:40 for one line)"
    )]
    /// The line range is not `START-END` with 1 <= START <= END.
    BadRange {
        /// The target as given.
        target: String,
        /// The range part after the `:`.
        range: String,
    },
    /// A line range without a file before it.
    #[error("{0:?}: a line range names no file (hint: PATH:START-END)")]
    NoPath(String),
    /// A path that leaves the repository (absolute, or through `..`).
    #[error(
        "{0:?} is not inside the repository (hint: name files and directories relative to its root, as `git ls-files` shows them)"
    )]
    Outside(String),
}

impl Targets {
    /// `args` as given on the command line: each a path, or `PATH:START-END` / `PATH:LINE`.
    /// A suffix that is not a line range stays part of the path (`a:b.py` is a file).
    pub fn parse(args: &[String]) -> Result<Self, TargetError> {
        let mut targets = Self::default();
        for arg in args {
            let Some((path, range)) = split_range(arg)? else {
                targets.paths.push(in_tree(arg)?);
                continue;
            };
            let path = in_tree(path)?;
            targets.paths.push(path.clone());
            targets.ranges.entry(path).or_default().push(range);
        }
        Ok(targets)
    }

    /// The lines of `path` (a file of `line_count` lines) to mutate: every line, narrowed by
    /// its ranges and by the change. Empty: the file is not mutated.
    pub fn lines_of(&self, path: &str, line_count: u32) -> BTreeSet<u32> {
        let mut lines: BTreeSet<u32> = match self.ranges.get(path) {
            Some(ranges) => ranges
                .iter()
                .flat_map(|r| *r.start()..=(*r.end()).min(line_count))
                .collect(),
            None => (1..=line_count).collect(),
        };
        if let Some(changed) = &self.changed {
            let since = changed.get(path);
            lines.retain(|line| since.is_some_and(|s| s.contains(line)));
        }
        lines
    }
}

/// `path` as the tree names it: `./pager.py` is `pager.py`, `./` is `.`; a path that leaves
/// the repository is refused.
pub(super) fn in_tree(path: &str) -> Result<String, TargetError> {
    let parts: Vec<&str> = path
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect();
    if path.starts_with('/') || parts.contains(&"..") {
        return Err(TargetError::Outside(path.to_owned()));
    }
    match parts.is_empty() {
        true => Ok(".".to_owned()),
        false => Ok(parts.join("/")),
    }
}

/// `Some((PATH, RANGE))` when `arg` ends in `:START-END` or `:LINE`.
fn split_range(arg: &str) -> Result<Option<(&str, RangeInclusive<u32>)>, TargetError> {
    let Some((path, suffix)) = arg.rsplit_once(':') else {
        return Ok(None);
    };
    let looks_like_range =
        !suffix.is_empty() && suffix.chars().all(|c| c.is_ascii_digit() || c == '-');
    if !looks_like_range {
        return Ok(None);
    }
    if path.is_empty() {
        return Err(TargetError::NoPath(arg.to_owned()));
    }
    let bad = || TargetError::BadRange {
        target: arg.to_owned(),
        range: suffix.to_owned(),
    };
    let (start, end) = match suffix.split_once('-') {
        Some((start, end)) => (start, end),
        None => (suffix, suffix),
    };
    let start: u32 = start.parse().map_err(|_| bad())?;
    let end: u32 = end.parse().map_err(|_| bad())?;
    if start == 0 || start > end {
        return Err(bad());
    }
    Ok(Some((path, start..=end)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn paths_are_read_as_the_tree_names_them_and_none_may_leave_it() {
        let targets = Targets::parse(&args(&["./pager.py:3", "./", "src//ledger/", "."]))
            .expect("valid targets");
        assert_eq!(targets.paths, args(&["pager.py", ".", "src/ledger", "."]));
        assert_eq!(targets.lines_of("pager.py", 5), [3].into_iter().collect());
        for outside in ["/etc/passwd", "../bytes/index.js", "src/../../x.py"] {
            assert_eq!(
                Targets::parse(&args(&[outside])),
                Err(TargetError::Outside(outside.to_owned()))
            );
        }
    }

    #[test]
    fn a_range_narrows_its_file_and_a_plain_path_keeps_every_line() {
        let targets = Targets::parse(&args(&[
            "pager/__init__.py:3-5",
            "ledger.py",
            "pager/__init__.py:9",
        ]))
        .expect("valid targets");
        assert_eq!(
            targets.paths,
            args(&["pager/__init__.py", "ledger.py", "pager/__init__.py"])
        );
        assert_eq!(
            targets.lines_of("pager/__init__.py", 12),
            [3, 4, 5, 9].into_iter().collect()
        );
        assert_eq!(
            targets.lines_of("ledger.py", 3),
            [1, 2, 3].into_iter().collect()
        );
        // A range past the end of the file stops at its last line.
        assert_eq!(
            Targets::parse(&args(&["a.py:2-99"]))
                .unwrap()
                .lines_of("a.py", 3),
            [2, 3].into_iter().collect()
        );
    }

    #[test]
    fn changed_lines_narrow_every_file_and_drop_unchanged_ones() {
        let mut targets = Targets::parse(&args(&["pager/__init__.py:1-4"])).unwrap();
        targets.changed = Some(
            [("pager/__init__.py".to_owned(), [4, 7].into_iter().collect())]
                .into_iter()
                .collect(),
        );
        assert_eq!(
            targets.lines_of("pager/__init__.py", 10),
            [4].into_iter().collect()
        );
        assert!(targets.lines_of("ledger.py", 10).is_empty());
    }

    #[test]
    fn bad_ranges_are_refused_with_the_target_and_a_hint() {
        for bad in ["a.py:0-3", "a.py:5-2", "a.py:3-", "a.py:-3", "a.py:1-2-3"] {
            let err = Targets::parse(&args(&[bad])).expect_err(bad);
            assert!(err.to_string().contains("hint:"), "{err}");
        }
        assert!(matches!(
            Targets::parse(&args(&[":3-4"])),
            Err(TargetError::NoPath(_))
        ));
        // Not a range: a path with a colon in it.
        assert_eq!(
            Targets::parse(&args(&["docs:api.py"])).unwrap().paths,
            args(&["docs:api.py"])
        );
    }
}
