//! Case selection for `assay test`: `--case`, `--file` and `--directory` filter the collected
//! plan (never discover anything), combine as a union, and keep plan order. Every selector must
//! match something, so a typo fails before anything runs.

use assay_common::suite::{SuiteCase, is_well_formed_ref};
use std::collections::BTreeSet;

/// Selectors as given, with paths already relative to the tree root (`/`-separated).
#[derive(Clone, Debug, Default)]
pub struct Selectors {
    /// Case refs or displays (`--case`), as listed by `--list-cases`.
    pub cases: Vec<String>,
    /// Test files whose cases run (`--file`).
    pub files: Vec<String>,
    /// Directories whose cases run (`--directory`).
    pub directories: Vec<String>,
}

impl Selectors {
    /// Whether no selector was given, so every case runs.
    pub fn is_empty(&self) -> bool {
        self.cases.is_empty() && self.files.is_empty() && self.directories.is_empty()
    }
}

/// Why the selectors do not select from the collected cases.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SelectError {
    #[error(
        "case {0:?} is neither a case ref nor a case's display from `assay test --list-cases` (hint: copy either from that listing)"
    )]
    /// A `--case` value is neither a case ref nor a listed display.
    MalformedRef(String),
    /// A case ref is given twice.
    #[error("case ref {0:?} is given twice")]
    RepeatedRef(String),
    #[error(
        "case ref {0:?} matches no collected case (stale or unknown; hint: list refs again with --list-cases)"
    )]
    /// A case ref matches no collected case.
    UnknownRef(String),
    /// A `--file` holds no collected case.
    #[error("--file {0} matches no collected case")]
    NoCaseInFile(String),
    /// A `--directory` holds no collected case.
    #[error("--directory {0} matches no collected case")]
    NoCaseInDirectory(String),
}

/// Indices of the selected cases in plan order; every case when no selector is given.
pub fn select(cases: &[SuiteCase], selectors: &Selectors) -> Result<Vec<usize>, SelectError> {
    if selectors.is_empty() {
        return Ok((0..cases.len()).collect());
    }
    let mut chosen = BTreeSet::new();
    let mut seen_refs = BTreeSet::new();
    for reference in &selectors.cases {
        if !seen_refs.insert(reference.as_str()) {
            return Err(SelectError::RepeatedRef(reference.clone()));
        }
        // A case is named by its ref or by what --list-cases displays for it (a pytest node
        // id such as `tests/test_pager.py::test_first_page`).
        let matched: Vec<usize> = cases
            .iter()
            .enumerate()
            .filter(|(_, c)| &c.reference() == reference || &c.display() == reference)
            .map(|(i, _)| i)
            .collect();
        if matched.is_empty() {
            return Err(match is_well_formed_ref(reference) {
                true => SelectError::UnknownRef(reference.clone()),
                false => SelectError::MalformedRef(reference.clone()),
            });
        }
        chosen.extend(matched);
    }
    for file in &selectors.files {
        let file = normalize(file);
        let matched: Vec<usize> = (0..cases.len())
            .filter(|&i| cases[i].file == file)
            .collect();
        if matched.is_empty() {
            return Err(SelectError::NoCaseInFile(file));
        }
        chosen.extend(matched);
    }
    for directory in &selectors.directories {
        let directory = normalize(directory);
        let matched: Vec<usize> = (0..cases.len())
            .filter(|&i| {
                directory.is_empty()
                    || cases[i]
                        .file
                        .strip_prefix(&directory)
                        .is_some_and(|rest| rest.starts_with('/'))
            })
            .collect();
        if matched.is_empty() {
            return Err(SelectError::NoCaseInDirectory(if directory.is_empty() {
                ".".into()
            } else {
                directory
            }));
        }
        chosen.extend(matched);
    }
    Ok(chosen.into_iter().collect())
}

/// `./tests//unit/` → `tests/unit`; `.` → the root (empty).
pub fn normalize(path: &str) -> String {
    path.split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_common::suite::parse_pytest_collection;

    fn plan() -> Vec<SuiteCase> {
        parse_pytest_collection(
            "tests/api/test_invoice.py::test_total\ntests/api/test_invoice.py::test_tax\ntests/test_pager.py::test_first_page\ntests/unit/test_money.py::test_round\n\n",
        )
    }

    fn sel(cases: &[&str], files: &[&str], directories: &[&str]) -> Selectors {
        let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        Selectors {
            cases: owned(cases),
            files: owned(files),
            directories: owned(directories),
        }
    }

    #[test]
    fn selectors_combine_as_a_union_in_plan_order() {
        let cases = plan();
        let money = cases[3].reference();
        let table: Vec<(Selectors, Vec<usize>)> = vec![
            (Selectors::default(), vec![0, 1, 2, 3]),
            (sel(&[&money], &["tests/test_pager.py"], &[]), vec![2, 3]),
            (
                sel(&[], &["./tests/test_pager.py"], &["tests/api/"]),
                vec![0, 1, 2],
            ),
            (
                sel(&[], &["tests/test_pager.py", "tests/test_pager.py"], &[]),
                vec![2],
            ),
            (sel(&[], &[], &["."]), vec![0, 1, 2, 3]),
            (sel(&[&money], &[], &["tests/unit"]), vec![3]),
        ];
        for (selectors, want) in table {
            assert_eq!(select(&cases, &selectors).unwrap(), want, "{selectors:?}");
        }
    }

    #[test]
    fn a_case_is_selected_by_the_node_id_the_listing_displays_as_by_its_ref() {
        let cases = plan();
        let display = cases[2].display();
        assert_eq!(display, "tests/test_pager.py::test_first_page");
        assert_eq!(select(&cases, &sel(&[&display], &[], &[])).unwrap(), [2]);
        assert_eq!(
            select(&cases, &sel(&[&cases[2].reference()], &[], &[])).unwrap(),
            [2]
        );
    }

    #[test]
    fn a_selector_that_matches_nothing_is_an_error() {
        let cases = plan();
        let pager = cases[2].reference();
        let stale = assay_common::suite::case_ref("tests/test_pager.py::test_removed");
        let table: Vec<(Selectors, SelectError)> = vec![
            (
                sel(&["test_first_page"], &[], &[]),
                SelectError::MalformedRef("test_first_page".into()),
            ),
            (
                sel(&[&pager, &pager], &[], &[]),
                SelectError::RepeatedRef(pager.clone()),
            ),
            (
                sel(&[&stale], &[], &[]),
                SelectError::UnknownRef(stale.clone()),
            ),
            (
                sel(&[], &["tests/test_missing.py"], &[]),
                SelectError::NoCaseInFile("tests/test_missing.py".into()),
            ),
            (
                sel(&[], &["tests/test_pager.py"], &["tests/ap"]),
                SelectError::NoCaseInDirectory("tests/ap".into()),
            ),
        ];
        for (selectors, want) in table {
            assert_eq!(select(&cases, &selectors).unwrap_err(), want);
        }
    }
}
