//! Per-test coverage of prebuilt tests: which tests reach each schema site unmutated, read
//! from the baseline run's trace (see `schema::TRACE_VARIABLE`). Rust's names the test by its
//! thread; Go's runs each top-level test alone and names it (`mutants::go::schema`), so every
//! site a Go run reaches is charged to its test. A mutant's run then holds
//! only those tests, and a mutant no test reaches is `NoCoverage` without a run.
//!
//! Why that is sound: a mutant's code is its site's; until a thread reaches the site, the
//! mutated program does what the unmutated one does. libtest runs each test on a thread named
//! after it, so a site first reached on such a thread is that test's. A site reached anywhere
//! else (the main thread, a thread a test spawned, a doc test's process) is charged to every
//! test of that executable, and one reached by an executable the report does not know makes
//! the mutant run everything. What this cannot see: a value a test computes through the site
//! and leaves in shared state (a `static` filled once) for a later test to read; that later
//! test is not chosen, as with any per-test coverage (PIT's, mutmut's).
//!
//! The trace is the guest's own stderr, so a hostile test can forge lines: at worst a mutant
//! then runs fewer tests and survives, which the guest could always arrange by failing to test.

use crate::mutation::mutants::rust::schema::TRACE_MARK;
use assay_common::job::JobResult;
use assay_common::outcome::TestReport;
use assay_common::report::libtest::{DOC_TEST_SUITE, RERUN_VARIANT};
use assay_common::test_binaries::{Selection, TRACE_ON, check_test_name};
use assay_transport::error_chain::error_chain;
use assay_transport::store::{ArtifactError, ArtifactStore, read_named};
use std::collections::{BTreeMap, BTreeSet};

/// Why the baseline run's trace cannot select the tests of a prebuilt mutant; each then runs
/// every test.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error(
        "per-test coverage unavailable (the trace lost {dropped_bytes} bytes at the worker's output cap)"
    )]
    Cut { dropped_bytes: u64 },
    #[error("per-test coverage unavailable (the unmutated run has no report)")]
    NoReport,
    /// Its stderr, where the trace is, could not be read from the store. The message quotes
    /// the cause, since the run's note shows this text alone (`error_chain` does not repeat it).
    #[error("per-test coverage unavailable ({})", error_chain(source))]
    Unread {
        #[source]
        source: ArtifactError,
    },
    #[error("per-test coverage unavailable (the unmutated run was not traced)")]
    NotTraced,
}

/// The trace of the baseline run `result` (its stderr read from the store), or why there is
/// none to trust: a stream cut at the worker's output cap could have lost any line of it.
pub async fn from_run(
    store: &dyn ArtifactStore,
    result: &JobResult,
) -> Result<Reached, TraceError> {
    if let Some(cut) = result
        .artifacts
        .iter()
        .find(|a| a.name == "stderr" && a.dropped_bytes > 0)
    {
        return Err(TraceError::Cut {
            dropped_bytes: cut.dropped_bytes,
        });
    }
    let report = result.report.parsed().ok_or(TraceError::NoReport)?;
    let stderr = read_named(store, result, "stderr")
        .await
        .map_err(|source| TraceError::Unread { source })?
        .unwrap_or_default();
    Reached::read(&String::from_utf8_lossy(&stderr), report).ok_or(TraceError::NotTraced)
}

/// Which tests reach a mutant's site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Only these.
    Tests(Selection),
    /// Something no test can be named for: every test runs.
    Everything,
}

/// The trace of one unmutated run, by mutant number (the switch's).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reached {
    by_mutant: BTreeMap<u32, Reach>,
}

/// The tests a run's report holds, by where they ran.
struct Known<'r> {
    /// Binary id → its tests' names.
    binaries: BTreeMap<&'r str, BTreeSet<&'r str>>,
    doc_tests: BTreeSet<&'r str>,
}

impl<'r> Known<'r> {
    fn of(report: &'r TestReport) -> Self {
        let mut known = Self {
            binaries: BTreeMap::new(),
            doc_tests: BTreeSet::new(),
        };
        for case in &report.cases {
            if case.variant.as_deref() == Some(RERUN_VARIANT) {
                continue;
            }
            if case.suite == DOC_TEST_SUITE {
                known.doc_tests.insert(case.name.as_str());
            } else {
                // A Go subtest (`TestA/expired`) names its function too, which a report of
                // subtests that all passed leaves out, and which its trace names.
                let function = case.name.split('/').next().unwrap_or(&case.name);
                let names = known.binaries.entry(case.file.as_str()).or_default();
                names.insert(case.name.as_str());
                names.insert(function);
            }
        }
        known
    }
}

impl Reached {
    /// Reads the trace in `stderr` against the tests `report` says ran; `None` when the
    /// trace was not on.
    pub fn read(stderr: &str, report: &TestReport) -> Option<Self> {
        if !stderr.lines().any(|line| line == TRACE_ON) {
            return None;
        }
        let known = Known::of(report);
        let mut reached = Self::default();
        for line in stderr.lines() {
            let mut fields = line.splitn(4, '\t');
            let (Some(TRACE_MARK), Some(label), Some(numbers), Some(thread)) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            let numbers: Vec<u32> = numbers
                .split(',')
                .filter_map(|n| n.parse().ok())
                .filter(|n| *n > 0)
                .collect();
            for number in numbers {
                reached.take(number, label, thread, &known);
            }
        }
        Some(reached)
    }

    fn take(&mut self, number: u32, label: &str, thread: &str, known: &Known<'_>) {
        let reach = self
            .by_mutant
            .entry(number)
            .or_insert_with(|| Reach::Tests(Selection::default()));
        let Reach::Tests(selection) = reach else {
            return;
        };
        if let Some(id) = label.strip_prefix("bin:")
            && let Some(names) = known.binaries.get(id)
        {
            let slot = selection
                .binaries
                .entry(id.to_owned())
                .or_insert_with(|| Some(BTreeSet::new()));
            match slot {
                Some(chosen) if names.contains(thread) && check_test_name(thread).is_ok() => {
                    chosen.insert(thread.to_owned());
                }
                // Not a test's own thread: every test of the executable may see it.
                _ => *slot = None,
            }
        } else if let Some(name) = label.strip_prefix("doc:")
            && known.doc_tests.contains(name)
        {
            selection.doc_tests.insert(name.to_owned());
        } else {
            *reach = Reach::Everything;
        }
    }

    /// What reaches mutant `number`; `None`: no test does.
    pub fn of(&self, number: u32) -> Option<&Reach> {
        self.by_mutant.get(&number)
    }
}

impl Reach {
    /// The tests it names, as `file::name` (doc tests as `doc-tests::name`), for the report.
    pub fn covered_by(&self) -> Vec<String> {
        let Self::Tests(selection) = self else {
            return Vec::new();
        };
        let mut names = Vec::new();
        for (id, tests) in &selection.binaries {
            match tests {
                Some(tests) => names.extend(tests.iter().map(|t| format!("{id}::{t}"))),
                None => names.push(format!("{id}::*")),
            }
        }
        names.extend(
            selection
                .doc_tests
                .iter()
                .map(|d| format!("{DOC_TEST_SUITE}::{d}")),
        );
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_common::outcome::{CaseResult, Outcome};

    fn case(file: &str, suite: &str, name: &str) -> CaseResult {
        CaseResult {
            file: file.into(),
            suite: suite.into(),
            name: name.into(),
            variant: None,
            outcome: Outcome::Passed,
            message: None,
        }
    }

    fn report() -> TestReport {
        TestReport {
            cases: vec![
                case("pager", "", "tests::counts_pages"),
                case("pager", "", "tests::partial_page"),
                case("pager::api", "", "listing"),
                case("pager", DOC_TEST_SUITE, "src_lib_rs_3_0"),
            ],
            ..TestReport::default()
        }
    }

    fn only(binaries: &[(&str, Option<&[&str]>)], docs: &[&str]) -> Reach {
        Reach::Tests(Selection {
            binaries: binaries
                .iter()
                .map(|(id, names)| {
                    (
                        (*id).to_owned(),
                        names.map(|n| n.iter().map(|s| (*s).to_owned()).collect()),
                    )
                })
                .collect(),
            doc_tests: docs.iter().map(|d| (*d).to_owned()).collect(),
        })
    }

    #[test]
    fn each_site_is_charged_to_the_tests_whose_threads_reached_it() {
        let stderr = "assay-trace-on\n     Running pager-54c5 (x)\n\
            assay-reached\tbin:pager\t1,2\ttests::counts_pages\n\
            assay-reached\tbin:pager\t2\ttests::partial_page\n\
            assay-reached\tbin:pager::api\t3\tmain\n\
            assay-reached\tdoc:src_lib_rs_3_0\t1\tmain\n";
        let reached = Reached::read(stderr, &report()).unwrap();
        assert_eq!(
            reached.of(1),
            Some(&only(
                &[("pager", Some(&["tests::counts_pages"]))],
                &["src_lib_rs_3_0"]
            ))
        );
        assert_eq!(
            reached.of(2),
            Some(&only(
                &[(
                    "pager",
                    Some(&["tests::counts_pages", "tests::partial_page"])
                )],
                &[]
            ))
        );
        // The main thread of an executable: every test in it.
        assert_eq!(reached.of(3), Some(&only(&[("pager::api", None)], &[])));
        assert_eq!(reached.of(4), None);
        assert_eq!(
            reached.of(1).unwrap().covered_by(),
            ["pager::tests::counts_pages", "doc-tests::src_lib_rs_3_0"]
        );
    }

    #[test]
    fn a_trace_that_was_never_turned_on_says_nothing() {
        let stderr = "assay-reached\tbin:pager\t1\ttests::counts_pages\n";
        assert_eq!(Reached::read(stderr, &report()), None);
    }

    #[test]
    fn hostile_lines_widen_a_selection_and_never_name_an_unknown_test() {
        // Lines the code under test could print: a thread named like no test (a worker
        // thread it spawned, or a name chosen to pass as an option), an executable or doc
        // test the run does not know, and garbage numbers.
        let stderr = "assay-trace-on\n\
            assay-reached\tbin:pager\t1\tworker-0\n\
            assay-reached\tbin:pager\t1\ttests::counts_pages\n\
            assay-reached\tbin:pager\t2\t--nocapture\n\
            assay-reached\tbin:evil\t3\tmain\n\
            assay-reached\tdoc:../../etc\t4\tmain\n\
            assay-reached\tbin:pager\t0,x,-1,\ttests::counts_pages\n\
            assay-reached\tbin:pager\t5\n";
        let reached = Reached::read(stderr, &report()).unwrap();
        assert_eq!(reached.of(1), Some(&only(&[("pager", None)], &[])));
        assert_eq!(reached.of(2), Some(&only(&[("pager", None)], &[])));
        assert_eq!(reached.of(3), Some(&Reach::Everything));
        assert_eq!(reached.of(4), Some(&Reach::Everything));
        assert_eq!(reached.of(0), None);
        assert_eq!(reached.of(5), None);
    }
}
