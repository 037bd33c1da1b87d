//! The selection audit's scope gates, pure: the read-set closure (a collected test that reads a
//! file the change touches must have run), the inventory (a test collected at the base must
//! still be collected, unless it was renamed or moved with its body unchanged), and the
//! checked-in scope exceptions that excuse a named gap until they expire. What the base's tests
//! read comes from `suite::reads` (recorded) and the read registry (declared).

use super::ledger::is_date;
use super::reads::RecordedReads;
use assay_common::suite::SuiteCase;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

pub use assay_common::suite_audit::{
    ChangedRead, ClosureGap, ExceptionUse, Inventory, ReadSource, Relocated, Relocation, Removed,
    ScopeException,
};

/// The scope exceptions file, relative to the repository root.
pub const EXCEPTIONS_PATH: &str = ".assay/scope_exceptions.toml";
/// The read registry: files tests read outside the test process, relative to the root.
pub const REGISTRY_PATH: &str = ".assay/fixture_reads.toml";

/// `.assay/scope_exceptions.toml`: `[[exception]]` tables.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScopeExceptions {
    /// The exceptions, one `[[exception]]` table each.
    #[serde(default)]
    pub exception: Vec<ScopeException>,
}

/// `.assay/fixture_reads.toml`: what tests read where no recording sees it (a subprocess, a
/// database seed), by pytest fixture (every test whose fixture closure holds it) or by test id.
/// A path ending in `/` stands for everything under it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadRegistry {
    /// What each pytest fixture reads, by fixture name.
    #[serde(default)]
    pub fixtures: BTreeMap<String, Declared>,
    /// What each test reads, by test id.
    #[serde(default)]
    pub tests: BTreeMap<String, Declared>,
}

/// The files one fixture or test is declared to read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Declared {
    /// Paths relative to the root; one ending in `/` stands for everything under it.
    pub files: Vec<String>,
}

/// Why a scope exceptions file or read registry cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ScopeError {
    /// The file is not the expected TOML.
    #[error("failed to parse {path} at {side}")]
    Parse {
        /// The file's path, relative to the root.
        path: String,
        /// Which tree it was read from.
        side: String,
        /// The TOML parser's failure.
        #[source]
        source: Box<toml::de::Error>,
    },
    /// An exception's `expires` is not `YYYY-MM-DD`.
    #[error("{path}: the exception for {test:?} has expires {value:?}, not YYYY-MM-DD")]
    BadDate {
        /// The file's path, relative to the root.
        path: String,
        /// The exception's test id.
        test: String,
        /// The `expires` value as written.
        value: String,
    },
    #[error(
        "{path} at {side}: {entry} declares {value:?}, which is not a relative path in the tree"
    )]
    /// A declared file is not a relative path inside the tree.
    BadPath {
        /// The file's path, relative to the root.
        path: String,
        /// Which tree it was read from.
        side: String,
        /// The fixture or test that declares it (`fixture "db"`, `test "t::x"`).
        entry: String,
        /// The declared path as written.
        value: String,
    },
}

/// Parses the scope exceptions file (read from the candidate) and checks its dates.
pub fn parse_exceptions(bytes: &[u8], path: &str) -> Result<ScopeExceptions, ScopeError> {
    let parsed: ScopeExceptions = parse_toml(bytes, path, "candidate")?;
    for entry in &parsed.exception {
        if !is_date(&entry.expires) {
            return Err(ScopeError::BadDate {
                path: path.into(),
                test: entry.test.clone(),
                value: entry.expires.clone(),
            });
        }
    }
    Ok(parsed)
}

/// Parses a read registry; its paths must be relative and stay inside the tree.
pub fn parse_registry(bytes: &[u8], path: &str, side: &str) -> Result<ReadRegistry, ScopeError> {
    let parsed: ReadRegistry = parse_toml(bytes, path, side)?;
    let entries = parsed
        .fixtures
        .iter()
        .map(|(name, d)| (format!("fixture {name:?}"), d))
        .chain(
            parsed
                .tests
                .iter()
                .map(|(id, d)| (format!("test {id:?}"), d)),
        );
    for (entry, declared) in entries {
        for value in &declared.files {
            let inside = !value.is_empty()
                && !value.starts_with('/')
                && !value.contains('\\')
                && value
                    .trim_end_matches('/')
                    .split('/')
                    .all(|part| !part.is_empty() && part != "." && part != "..");
            if !inside {
                return Err(ScopeError::BadPath {
                    path: path.into(),
                    side: side.into(),
                    entry,
                    value: value.clone(),
                });
            }
        }
    }
    Ok(parsed)
}

fn parse_toml<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    path: &str,
    side: &str,
) -> Result<T, ScopeError> {
    toml::from_str(&String::from_utf8_lossy(bytes)).map_err(|source| ScopeError::Parse {
        path: path.into(),
        side: side.into(),
        source: Box::new(source),
    })
}

impl ReadRegistry {
    /// Both sides' declarations: a change may add reads, never drop the base's.
    pub fn union(mut self, other: ReadRegistry) -> Self {
        for (name, declared) in other.fixtures {
            self.fixtures
                .entry(name)
                .or_default()
                .files
                .extend(declared.files);
        }
        for (id, declared) in other.tests {
            self.tests
                .entry(id)
                .or_default()
                .files
                .extend(declared.files);
        }
        self
    }

    /// The declared paths `test` reads, given its fixture closure.
    fn declared_for<'a>(
        &'a self,
        test: &str,
        fixtures: Option<&'a BTreeSet<String>>,
    ) -> impl Iterator<Item = &'a String> {
        let by_fixture = fixtures
            .into_iter()
            .flatten()
            .filter_map(|name| self.fixtures.get(name));
        self.tests
            .get(test)
            .into_iter()
            .chain(by_fixture)
            .flat_map(|d| d.files.iter())
    }
}

/// The collected tests (`collected`, candidate ids) not in `executed` that read a file in
/// `changed`, by the base's recorded reads and the registry.
pub fn closure(
    changed: &BTreeSet<String>,
    recorded: Option<&RecordedReads>,
    registry: &ReadRegistry,
    collected: &[String],
    executed: &BTreeSet<String>,
) -> Vec<ClosureGap> {
    let mut gaps = Vec::new();
    for test in collected {
        if executed.contains(test) {
            continue;
        }
        let mut reads: BTreeMap<&str, ReadSource> = BTreeMap::new();
        if let Some(recorded) = recorded {
            for file in recorded.files_read_by(test) {
                if changed.contains(file) {
                    reads.insert(file, ReadSource::Recorded);
                }
            }
        }
        let fixtures = recorded.and_then(|r| r.fixtures.get(test));
        for declared in registry.declared_for(test, fixtures) {
            for file in changed.iter().filter(|file| covers(declared, file)) {
                reads.entry(file).or_insert(ReadSource::Declared);
            }
        }
        if !reads.is_empty() {
            gaps.push(ClosureGap {
                test: test.clone(),
                reads: reads
                    .into_iter()
                    .map(|(file, source)| ChangedRead {
                        file: file.to_owned(),
                        source,
                    })
                    .collect(),
                excused_by: None,
            });
        }
    }
    gaps
}

/// `tests/data/` covers everything under it; any other declared path only itself.
fn covers(declared: &str, file: &str) -> bool {
    match declared.strip_suffix('/') {
        Some(dir) => file.strip_prefix(dir).is_some_and(|r| r.starts_with('/')),
        None => declared == file,
    }
}

/// Diffs the collections. `body` gives a case's function body (normalized) on its side, when
/// the runner's sources can be read; a base case gone from the candidate whose body and
/// variant reappear under a new id is relocated, not removed.
pub fn inventory(
    base: &[SuiteCase],
    candidate: &[SuiteCase],
    mut body: impl FnMut(Side, &SuiteCase) -> Option<String>,
) -> Inventory {
    let base_ids: BTreeSet<&str> = base.iter().map(|c| c.id.as_str()).collect();
    let candidate_ids: BTreeSet<&str> = candidate.iter().map(|c| c.id.as_str()).collect();
    let mut added: Vec<(&SuiteCase, Option<String>)> = candidate
        .iter()
        .filter(|c| !base_ids.contains(c.id.as_str()))
        .map(|c| (c, None))
        .collect();
    let mut bodies_read = false;
    let mut inventory = Inventory {
        base_collected: base.len(),
        candidate_collected: candidate.len(),
        ..Inventory::default()
    };
    for gone in base
        .iter()
        .filter(|c| !candidate_ids.contains(c.id.as_str()))
    {
        if !bodies_read {
            for (case, slot) in added.iter_mut() {
                *slot = body(Side::Candidate, case);
            }
            bodies_read = true;
        }
        let old = body(Side::Base, gone);
        let found = old.as_ref().and_then(|old| {
            added
                .iter()
                .position(|(c, new)| new.as_ref() == Some(old) && c.variant == gone.variant)
        });
        match found {
            Some(at) => {
                let (to, _) = added.remove(at);
                inventory.relocated.push(Relocated {
                    from: gone.id.clone(),
                    to: to.id.clone(),
                    kind: if to.file == gone.file && to.class == gone.class {
                        Relocation::Renamed
                    } else {
                        Relocation::Moved
                    },
                });
            }
            None => inventory.removed.push(Removed {
                test: gone.id.clone(),
                excused_by: None,
            }),
        }
    }
    inventory
}

/// Which tree a source is read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The tree before the change.
    Base,
    /// The tree with the change.
    Candidate,
}

/// The text of Python function `name` (inside classes `class`, `::`-joined) in `source`: its
/// parameters and body, each line stripped of its indentation, so a method moved out of a
/// class still matches. `None` when the function is not found.
pub fn python_body(source: &str, class: &str, name: &str) -> Option<String> {
    let tree = crate::mutation::mutants::python::syntax::parse(source)?;
    let mut scope = tree.root_node();
    let classes: Vec<&str> = class.split("::").filter(|c| !c.is_empty()).collect();
    for class in classes {
        scope = find_definition(scope, "class_definition", class, source)?
            .child_by_field_name("body")?;
    }
    let function = find_definition(scope, "function_definition", name, source)?;
    let text = |field: &str| {
        function
            .child_by_field_name(field)
            .and_then(|n| source.get(n.byte_range()))
            .unwrap_or_default()
    };
    let joined = format!("{}\n{}", text("parameters"), text("body"));
    let lines: Vec<&str> = joined
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    Some(lines.join("\n"))
}

/// The definition of `kind` named `name` directly in `scope`, decorated or not.
fn find_definition<'t>(
    scope: tree_sitter::Node<'t>,
    kind: &str,
    name: &str,
    source: &str,
) -> Option<tree_sitter::Node<'t>> {
    let mut cursor = scope.walk();
    let children: Vec<tree_sitter::Node<'t>> = scope.named_children(&mut cursor).collect();
    children.into_iter().find_map(|child| {
        let definition = match child.kind() {
            "decorated_definition" => child.child_by_field_name("definition")?,
            _ => child,
        };
        let named = definition.kind() == kind
            && definition
                .child_by_field_name("name")
                .and_then(|n| source.get(n.byte_range()))
                == Some(name);
        named.then_some(definition)
    })
}

/// Excuses each gap an unexpired exception names, and says which exceptions were used and
/// which would have been but have expired (`today` is `YYYY-MM-DD`).
pub fn excuse(
    exceptions: &ScopeExceptions,
    today: &str,
    closure: &mut [ClosureGap],
    inventory: &mut Inventory,
) -> ExceptionUse {
    let mut used = ExceptionUse::default();
    let mut find = |test: &str| -> Option<ScopeException> {
        let entry = exceptions.exception.iter().find(|e| e.test == test)?;
        // ISO dates order as strings; an exception is good through its expiry day.
        if entry.expires.as_str() < today {
            if !used.expired.contains(entry) {
                used.expired.push(entry.clone());
            }
            return None;
        }
        if !used.used.contains(entry) {
            used.used.push(entry.clone());
        }
        Some(entry.clone())
    };
    for gap in closure.iter_mut() {
        gap.excused_by = find(&gap.test);
    }
    for removed in &mut inventory.removed {
        removed.excused_by = find(&removed.test);
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coverage::CoverageMap;
    use assay_common::TreeId;
    use assay_common::suite::parse_pytest_collection;

    fn recorded() -> RecordedReads {
        let map = CoverageMap::parse(
            br#"{"exit": 0, "files": {}, "durations": {},
                "reads": {"tests": {}, "fixtures": {"rates": ["tests/data/rates.json"]}},
                "fixtures": {"tests/test_rates.py::test_rates_loaded": ["rates"],
                             "tests/test_rates.py::test_spring": [],
                             "tests/test_seed.py::test_seeded": ["db"]}}"#,
        )
        .unwrap();
        RecordedReads::from_map(&TreeId("a".repeat(40)), map)
    }

    fn ids(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn a_test_that_reads_a_changed_file_and_did_not_run_is_a_gap() {
        let changed: BTreeSet<String> =
            ["tests/data/rates.json".into(), "seeds/db.sql".into()].into();
        let registry = parse_registry(
            b"[fixtures.db]\nfiles = [\"seeds/\"]\n[tests.\"tests/test_cli.py::test_run\"]\nfiles = [\"seeds/db.sql\"]\n",
            REGISTRY_PATH,
            "base",
        )
        .unwrap();
        let collected = ids(&[
            "tests/test_rates.py::test_rates_loaded",
            "tests/test_rates.py::test_spring",
            "tests/test_seed.py::test_seeded",
            "tests/test_cli.py::test_run",
        ]);
        let executed: BTreeSet<String> = ["tests/test_rates.py::test_spring".into()].into();
        let gaps = closure(
            &changed,
            Some(&recorded()),
            &registry,
            &collected,
            &executed,
        );
        let named: Vec<(&str, Vec<(&str, ReadSource)>)> = gaps
            .iter()
            .map(|g| {
                (
                    g.test.as_str(),
                    g.reads
                        .iter()
                        .map(|r| (r.file.as_str(), r.source))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(
            named,
            [
                (
                    "tests/test_rates.py::test_rates_loaded",
                    vec![("tests/data/rates.json", ReadSource::Recorded)]
                ),
                (
                    "tests/test_seed.py::test_seeded",
                    vec![("seeds/db.sql", ReadSource::Declared)]
                ),
                (
                    "tests/test_cli.py::test_run",
                    vec![("seeds/db.sql", ReadSource::Declared)]
                ),
            ]
        );
        // Every reader ran: no gap.
        let all: BTreeSet<String> = collected.iter().cloned().collect();
        assert!(closure(&changed, Some(&recorded()), &registry, &collected, &all).is_empty());
    }

    #[test]
    fn a_registry_path_outside_the_tree_is_refused() {
        for hostile in [
            "/etc/passwd",
            "../secrets",
            "a/../../b",
            "",
            "a\\b",
            "./x",
            "a//b",
        ] {
            let text = format!("[fixtures.db]\nfiles = [{hostile:?}]\n");
            assert!(
                matches!(
                    parse_registry(text.as_bytes(), REGISTRY_PATH, "candidate"),
                    Err(ScopeError::BadPath { .. })
                ),
                "{hostile:?}"
            );
        }
        assert!(matches!(
            parse_registry(b"[fixtures.db]\npaths = []\n", REGISTRY_PATH, "base"),
            Err(ScopeError::Parse { .. })
        ));
        let union = parse_registry(b"[fixtures.db]\nfiles = [\"a\"]\n", REGISTRY_PATH, "base")
            .unwrap()
            .union(
                parse_registry(b"[fixtures.db]\nfiles = [\"b\"]\n", REGISTRY_PATH, "c").unwrap(),
            );
        assert_eq!(union.fixtures["db"].files, ["a", "b"]);
    }

    const BASE_TESTS: &str = "import pytest\n\n\ndef test_ingest():\n    assert load() == 3\n\n\n@pytest.mark.parametrize('n', [1, 2])\ndef test_rows(n):\n    assert n\n\n\nclass TestTax:\n    def test_vat(self):\n        assert vat(10) == 2\n";

    fn inventory_of(
        base_ids: &str,
        candidate_ids: &str,
        sources: &[(Side, &str, &str)],
    ) -> Inventory {
        let base = parse_pytest_collection(base_ids);
        let candidate = parse_pytest_collection(candidate_ids);
        inventory(&base, &candidate, |side, case| {
            let (_, _, text) = sources
                .iter()
                .find(|(s, file, _)| *s == side && *file == case.file)?;
            python_body(text, &case.class, &case.name)
        })
    }

    #[test]
    fn a_test_gone_at_the_candidate_is_removed_unless_its_body_moved() {
        let base_ids = "tests/test_ingest.py::test_ingest\ntests/test_ingest.py::test_rows[1]\ntests/test_ingest.py::test_rows[2]\ntests/test_ingest.py::TestTax::test_vat\n\n";
        // test_ingest deleted; test_rows renamed in place; TestTax.test_vat moved to a module
        // function of another file (its indentation changes, its body does not).
        let candidate_src = "import pytest\n\n\n@pytest.mark.parametrize('n', [1, 2])\ndef test_row_counts(n):\n    assert n\n";
        let moved_src = "def test_vat(self):\n    assert vat(10) == 2\n";
        let candidate_ids = "tests/test_ingest.py::test_row_counts[1]\ntests/test_ingest.py::test_row_counts[2]\ntests/test_vat.py::test_vat\n\n";
        let found = inventory_of(
            base_ids,
            candidate_ids,
            &[
                (Side::Base, "tests/test_ingest.py", BASE_TESTS),
                (Side::Candidate, "tests/test_ingest.py", candidate_src),
                (Side::Candidate, "tests/test_vat.py", moved_src),
            ],
        );
        assert_eq!(
            found.removed,
            [Removed {
                test: "tests/test_ingest.py::test_ingest".into(),
                excused_by: None
            }]
        );
        let relocated: Vec<(&str, &str, Relocation)> = found
            .relocated
            .iter()
            .map(|r| (r.from.as_str(), r.to.as_str(), r.kind))
            .collect();
        assert_eq!(
            relocated,
            [
                (
                    "tests/test_ingest.py::test_rows[1]",
                    "tests/test_ingest.py::test_row_counts[1]",
                    Relocation::Renamed
                ),
                (
                    "tests/test_ingest.py::test_rows[2]",
                    "tests/test_ingest.py::test_row_counts[2]",
                    Relocation::Renamed
                ),
                (
                    "tests/test_ingest.py::TestTax::test_vat",
                    "tests/test_vat.py::test_vat",
                    Relocation::Moved
                ),
            ]
        );
        assert_eq!((found.base_collected, found.candidate_collected), (4, 3));
    }

    #[test]
    fn a_new_test_with_another_body_does_not_hide_a_removal() {
        // The failing test replaced by one that asserts nothing under the same file.
        let found = inventory_of(
            "tests/test_ingest.py::test_ingest\n\n",
            "tests/test_ingest.py::test_ingest_ok\n\n",
            &[
                (Side::Base, "tests/test_ingest.py", BASE_TESTS),
                (
                    Side::Candidate,
                    "tests/test_ingest.py",
                    "def test_ingest_ok():\n    assert True\n",
                ),
            ],
        );
        assert_eq!(found.removed.len(), 1);
        assert!(found.relocated.is_empty());
    }

    #[test]
    fn an_exception_excuses_until_it_expires_and_says_so() {
        let exceptions = parse_exceptions(
            b"[[exception]]\ntest = \"tests/test_ingest.py::test_ingest\"\nreason = \"ingest moves to the loader service\"\nexpires = \"2026-12-31\"\n\n[[exception]]\ntest = \"tests/test_rates.py::test_rates_loaded\"\nreason = \"rates reload nightly\"\nexpires = \"2026-11-30\"\n",
            EXCEPTIONS_PATH,
        )
        .unwrap();
        let mut gaps = vec![ClosureGap {
            test: "tests/test_rates.py::test_rates_loaded".into(),
            reads: vec![],
            excused_by: None,
        }];
        let mut inventory = Inventory {
            removed: vec![Removed {
                test: "tests/test_ingest.py::test_ingest".into(),
                excused_by: None,
            }],
            ..Inventory::default()
        };
        let used = excuse(&exceptions, "2026-12-02", &mut gaps, &mut inventory);
        assert_eq!(gaps[0].excused_by, None, "expired the day before");
        assert_eq!(
            inventory.removed[0]
                .excused_by
                .as_ref()
                .map(|e| e.expires.as_str()),
            Some("2026-12-31")
        );
        assert_eq!(used.used, [exceptions.exception[0].clone()]);
        assert_eq!(used.expired, [exceptions.exception[1].clone()]);
        // Good through its expiry day.
        let used = excuse(&exceptions, "2026-11-30", &mut gaps, &mut inventory);
        assert!(gaps[0].excused_by.is_some() && used.expired.is_empty());
        for bad in [
            "[[exception]]\ntest = \"t\"\nreason = \"r\"\n",
            "[[exception]]\ntest = \"t\"\nreason = \"r\"\nexpires = \"soon\"\n",
            "[[exception]]\ntest = \"t\"\nreason = \"r\"\nexpires = \"2026-12-31\"\nsilent = true\n",
        ] {
            assert!(
                parse_exceptions(bad.as_bytes(), EXCEPTIONS_PATH).is_err(),
                "{bad}"
            );
        }
    }
}
