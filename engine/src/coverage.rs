//! Per-test coverage: one pytest run under coverage.py with a dynamic context per test node id,
//! and the map it writes of which tests execute which lines. `assay mutate` runs each mutant's
//! covering tests only; `assay test --reachability` names the changed lines no executed test
//! reaches. The map's format is in docs/FORMATS.md ("Per-test coverage map").

use crate::mutation::check::{BaselineProblem, with_network_failure};
use assay_common::job::{JobKind, JobResult, JobSpec, Side};
use assay_common::runner::ReportFormat;
use assay_common::{JobId, ProofId, TreeId};
use assay_transport::store::{ArtifactError, ArtifactStore, read_named};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

/// Runs pytest (argv[2:] are its arguments) under coverage.py, switching the dynamic context
/// to each test's node id around its setup, call and teardown (coverage's own `test_function`
/// contexts name only the test function, and miss fixtures), and writes the map to argv[1].
/// `config_file=False`: the project's own coverage settings (`source`, `omit`, `branch`, its
/// contexts or data file) must not narrow or reshape what the map says. Lines executed outside
/// any test (imports, collection) get the context "". The script exits 0 whatever pytest did,
/// so the map is read even when tests fail; pytest's own exit status is in the map.
///
/// The same run records the files each test opens for reading (the selection audit's read
/// sets): an audit hook on `open` events (every `open()`, `io.open_code` and `os.open` raises
/// one) attributes each path under the tree's root to what is running: a fixture's setup to
/// the fixture (so a session fixture's reads count for every test that uses it, not only the
/// first), a collector's collection (a module's top-level code, a directory's conftest) to
/// the collector, anything else inside a test's protocol to the test. Each test's fixture
/// closure (`item.fixturenames`) is recorded with it. Python sources are left out: what code a
/// test runs is coverage's to say, and the read sets are about the data tests load.
const SCRIPT: &str = r#"
import json, os, sys
import coverage, pytest
out = sys.argv[1]
root = os.getcwd()
cov = coverage.Coverage(data_file=None, config_file=False)
durations = {}
failed = set()
messages = {}
collected = []
reads = {"tests": {}, "fixtures": {}, "collectors": {}}
uses = {}
running = []
def _opened(event, args):
    if event != "open" or not running or isinstance(args[0], int):
        return
    mode, flags = args[1], args[2]
    if mode is None:
        if flags & 3 == os.O_WRONLY:
            return
    elif not ("r" in mode or "+" in mode):
        return
    try:
        rel = os.path.relpath(os.path.abspath(os.fsdecode(args[0])), root)
    except (TypeError, ValueError):
        return
    if not rel.startswith("..") and not rel.endswith((".py", ".pyc")):
        kind, name = running[-1]
        reads[kind].setdefault(name, set()).add(rel.replace(os.sep, "/"))
sys.addaudithook(_opened)
class Contexts:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        uses[item.nodeid] = sorted(getattr(item, "fixturenames", ()))
        cov.switch_context(item.nodeid)
        running.append(("tests", item.nodeid))
        yield
        running.pop()
        cov.switch_context("")
    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        running.append(("fixtures", fixturedef.argname))
        yield
        running.pop()
    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(self, collector):
        running.append(("collectors", collector.nodeid))
        yield
        running.pop()
    def pytest_collection_modifyitems(self, items):
        collected.extend(item.nodeid for item in items)
    def pytest_runtest_logreport(self, report):
        durations[report.nodeid] = durations.get(report.nodeid, 0.0) + report.duration
        if report.failed:
            failed.add(report.nodeid)
            crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
            message = getattr(crash, "message", None)
            if isinstance(message, str):
                messages.setdefault(report.nodeid, message[:2000])
cov.start()
code = pytest.main(["-q", "-p", "no:cacheprovider"] + sys.argv[2:], plugins=[Contexts()])
cov.stop()
data = cov.get_data()
root = os.getcwd()
files = {}
for path in data.measured_files():
    rel = os.path.relpath(path, root)
    if rel.startswith(".."):
        continue
    try:
        missing = cov.analysis2(path)[3]
    except coverage.CoverageException:
        # No source to analyse (a file removed since it ran): what ran is still known.
        missing = []
    files[rel.replace(os.sep, "/")] = {
        "lines": {str(n): sorted(c) for n, c in data.contexts_by_lineno(path).items()},
        "missing": sorted(missing),
    }
with open(out, "w") as f:
    json.dump({"exit": int(code), "files": files, "durations": durations,
               "failed": sorted(failed), "messages": messages, "collected": collected,
               "reads": {kind: {name: sorted(paths) for name, paths in by.items()}
                         for kind, by in reads.items()},
               "fixtures": uses}, f)
"#;

/// The command of a job that writes the map as its `report` artifact: pytest with
/// `pytest_args` (options, node ids) under per-test contexts, run by `python3`.
pub fn command(pytest_args: impl IntoIterator<Item = String>) -> Vec<String> {
    command_with("python3", pytest_args)
}

/// [`command`] run by the interpreter `python` (a test command's own, `VENV/bin/python`).
pub fn command_with(python: &str, pytest_args: impl IntoIterator<Item = String>) -> Vec<String> {
    [python, "-c", SCRIPT, "{report}"]
        .map(String::from)
        .into_iter()
        .chain(pytest_args)
        .collect()
}

/// A job that runs [`command`] on `tree` as job 0 of `proof_id`: the map is uploaded as the
/// job's `report` artifact and read with [`CoverageMap::read`]; the worker's JUnit parse of it
/// is not used.
pub fn plan_job(
    proof_id: ProofId,
    side: Side,
    tree: &TreeId,
    pytest_args: &[String],
    timeout_secs: u64,
) -> JobSpec {
    JobSpec {
        selected_tests: pytest_args.to_vec(),
        ..JobSpec::new(
            &proof_id,
            0,
            JobKind::Suite,
            side,
            tree,
            command(pytest_args.iter().cloned()),
            ReportFormat::JunitXml,
            timeout_secs,
        )
    }
}

/// The adapter script's sha256: what a cached read set was recorded with.
pub fn script_sha256() -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(SCRIPT.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What one coverage run measured. Written by the tests' own process, so it is only as
/// trustworthy as the project under test: it steers which tests run and what is reported,
/// never a verdict on its own.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct CoverageMap {
    /// pytest's own exit status: 0 when every test passed unmutated.
    #[serde(default)]
    pub exit: Option<i64>,
    /// Files under the tree's root (relative, `/`-separated) that ran at all.
    pub files: BTreeMap<String, FileCoverage>,
    /// Seconds per node id: setup, call and teardown.
    pub durations: BTreeMap<String, f64>,
    /// Node ids with a failed phase (setup, call or teardown).
    #[serde(default)]
    pub failed: BTreeSet<String>,
    /// The first failed phase's message by node id (`socket.gaierror: …`), where pytest gave
    /// one.
    #[serde(default)]
    pub messages: BTreeMap<String, String>,
    /// Every node id pytest collected, in order.
    #[serde(default)]
    pub collected: Vec<String>,
    /// The files under the tree's root each test and each fixture's setup opened for reading.
    #[serde(default)]
    pub reads: Reads,
    /// Each test's fixture closure, by name.
    #[serde(default)]
    pub fixtures: BTreeMap<String, BTreeSet<String>>,
}

/// Files opened for reading (relative, `/`-separated), attributed while they were open.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct Reads {
    /// By node id: what the test's own setup, call and teardown opened.
    pub tests: BTreeMap<String, BTreeSet<String>>,
    /// By fixture name: what the fixture's setup opened.
    pub fixtures: BTreeMap<String, BTreeSet<String>>,
    /// By collector node id (a directory, a module, a class): what its collection opened.
    #[serde(default)]
    pub collectors: BTreeMap<String, BTreeSet<String>>,
}

/// One file's lines in a coverage map: which tests ran each line, and which never ran.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct FileCoverage {
    /// Every line that ran, with the node ids that ran it ("" for code run outside any test).
    pub lines: BTreeMap<u32, Vec<String>>,
    /// Statement lines that never ran (blank lines and comments are not statements).
    pub missing: BTreeSet<u32>,
}

/// Why a coverage run's map could not be had.
#[derive(Debug, thiserror::Error)]
pub enum CoverageError {
    /// The store failed to hand back job `job`'s map.
    #[error("failed to read the per-test coverage map of job {job}")]
    Store {
        /// The coverage job whose map was asked for.
        job: JobId,
        /// The store's failure.
        #[source]
        source: ArtifactError,
    },
    #[error(
        "the per-test coverage run (job {job}, {status}) wrote no map (hint: {})",
        missing_map_hint(status)
    )]
    /// Job `job` ended (with `status`) without uploading a map.
    Missing {
        /// The coverage job that wrote nothing.
        job: JobId,
        /// How the job ended: its status label (`completed`, `timed_out`, …).
        status: &'static str,
    },
    /// Job `job`'s map is not the JSON the adapter writes.
    #[error("the per-test coverage map of job {job} is malformed")]
    Malformed {
        /// The coverage job whose map this is.
        job: JobId,
        /// Where the JSON parse failed.
        #[source]
        source: serde_json::Error,
    },
}

/// What to do about a coverage run that ended with `status` and wrote no map.
fn missing_map_hint(status: &str) -> &'static str {
    match status {
        "timed_out" => {
            "a test ran past the job's timeout before the map was written; raise --timeout, or find the test that does not end"
        }
        _ => "pytest and coverage.py must be installed where the tests run",
    }
}

impl CoverageMap {
    /// Reads a map from the JSON the adapter script wrote.
    pub fn parse(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// The map a [`command`] job left in the store.
    pub async fn read(
        store: &dyn ArtifactStore,
        result: &JobResult,
    ) -> Result<Self, CoverageError> {
        let job = || result.job_id.clone();
        let bytes = read_named(store, result, "report")
            .await
            .map_err(|source| CoverageError::Store { job: job(), source })?
            .ok_or_else(|| CoverageError::Missing {
                job: job(),
                status: result.status.label(),
            })?;
        Self::parse(&bytes).map_err(|source| CoverageError::Malformed { job: job(), source })
    }

    /// Why this run cannot stand as the unmutated baseline mutants are judged against: pytest
    /// failed (naming the failing tests) or ran no test. `None` when every test passed.
    pub fn baseline_problem(&self) -> Option<BaselineProblem> {
        match self.exit {
            Some(0) if !self.durations.is_empty() => None,
            Some(0) | Some(5) if self.failed.is_empty() => Some(BaselineProblem::RanNoTest),
            _ if !self.failed.is_empty() => Some(with_network_failure(
                BaselineProblem::TestsFailed(format!(
                    "{} failed",
                    self.failed.iter().cloned().collect::<Vec<_>>().join(", ")
                )),
                self.messages.values().map(String::as_str),
            )),
            Some(code) => Some(BaselineProblem::NotPassed(format!("pytest exited {code}"))),
            None => Some(BaselineProblem::NotPassed(
                "the map holds no pytest exit status".into(),
            )),
        }
    }

    /// The tests that execute any of `lines` in `path`: `None` when none of them ran at all,
    /// `Some(empty)` when only code outside any test (imports, collection) ran them.
    pub fn tests_running(
        &self,
        path: &str,
        lines: impl IntoIterator<Item = u32>,
    ) -> Option<BTreeSet<String>> {
        let file = self.files.get(path)?;
        let mut executed = false;
        let mut tests = BTreeSet::new();
        for line in lines {
            if let Some(contexts) = file.lines.get(&line) {
                executed = true;
                tests.extend(contexts.iter().filter(|c| !c.is_empty()).cloned());
            }
        }
        executed.then_some(tests)
    }

    /// [`Self::tests_running`] for an edit on `lines` inside the statement starting at
    /// `statement`. A line of a multi-line statement that holds no code of its own (an item
    /// of a list literal, one piece of an implicitly joined string) is neither executed nor
    /// missing in coverage's terms: the statement's own line stands for it.
    pub fn tests_running_in(
        &self,
        path: &str,
        lines: std::ops::RangeInclusive<u32>,
        statement: u32,
    ) -> Option<BTreeSet<String>> {
        let file = self.files.get(path)?;
        let measured = |line: &u32| file.lines.contains_key(line) || file.missing.contains(line);
        if lines.clone().any(|line| measured(&line)) || statement > *lines.start() {
            return self.tests_running(path, lines);
        }
        // The statement's first measured line: a decorated definition's may follow its start.
        let line = (statement..=*lines.start()).find(measured)?;
        self.tests_running(path, line..=line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = r#"{"exit": 1, "files": {
        "pager.py": {"lines": {"1": [""], "2": ["tests/test_pages.py::test_full_pages"],
                               "3": ["", "tests/test_pages.py::test_full_pages", "tests/test_pages.py::test_bounds[11-5]"]},
                     "missing": [5, 6]}},
        "durations": {"tests/test_pages.py::test_full_pages": 0.25}}"#;

    #[test]
    fn a_map_missing_after_a_timeout_says_so_and_not_that_a_tool_is_missing() {
        let missing = |status| {
            CoverageError::Missing {
                job: JobId("p-1/0008".into()),
                status,
            }
            .to_string()
        };
        let timed_out = missing("timed_out");
        assert!(
            timed_out.contains("ran past the job's timeout"),
            "{timed_out}"
        );
        assert!(!timed_out.contains("installed"), "{timed_out}");
        assert!(missing("completed").contains("coverage.py must be installed"));
    }

    #[test]
    fn tests_running_tell_uncovered_from_import_time_lines() {
        let map = CoverageMap::parse(MAP.as_bytes()).unwrap();
        assert_eq!(map.files["pager.py"].missing, [5, 6].into());
        assert_eq!(map.durations["tests/test_pages.py::test_full_pages"], 0.25);
        assert_eq!(map.tests_running("pager.py", 1..=1), Some(BTreeSet::new()));
        assert_eq!(
            map.tests_running("pager.py", [1, 3]),
            Some(
                [
                    "tests/test_pages.py::test_bounds[11-5]".to_owned(),
                    "tests/test_pages.py::test_full_pages".to_owned()
                ]
                .into()
            )
        );
        assert_eq!(map.tests_running("pager.py", 5..=8), None);
        assert_eq!(map.tests_running("other.py", 1..=1), None);
    }

    #[test]
    fn a_continuation_line_of_a_statement_takes_the_statements_tests() {
        // `PLURALS = [` on line 1 ran at import; lines 2-3 (its items) have no line events.
        // `warn(` on line 8 ran in a test; line 9 continues its string, line 5 never ran.
        let map = CoverageMap::parse(
            br#"{"files": {"inflect.py": {"lines": {"1": [""], "8": ["", "test_inflect.py::test_warns"]},
                "missing": [5]}}, "durations": {}}"#,
        )
        .unwrap();
        assert_eq!(map.tests_running("inflect.py", 2..=2), None);
        assert_eq!(
            map.tests_running_in("inflect.py", 2..=3, 1),
            Some(BTreeSet::new())
        );
        assert_eq!(
            map.tests_running_in("inflect.py", 9..=9, 8),
            Some(["test_inflect.py::test_warns".to_owned()].into())
        );
        // A measured line of its own is read as it is; an unrun statement stays uncovered.
        assert_eq!(map.tests_running_in("inflect.py", 5..=5, 4), None);
        assert_eq!(map.tests_running_in("inflect.py", 6..=6, 5), None);
        assert_eq!(map.tests_running_in("other.py", 2..=2, 1), None);
    }

    #[test]
    fn a_map_the_tests_could_have_forged_badly_is_refused() {
        for hostile in [
            "",
            "[]",
            r#"{"files": {"pager.py": {"lines": {"two": [""]}, "missing": []}}, "durations": {}}"#,
            r#"{"files": {"pager.py": {"lines": {"-1": [""]}, "missing": []}}, "durations": {}}"#,
            r#"{"files": {"pager.py": {"lines": {"4294967296": [""]}, "missing": []}}, "durations": {}}"#,
            r#"{"files": {"pager.py": {"lines": {"1": [7]}, "missing": []}}, "durations": {}}"#,
            r#"{"files": {"pager.py": {"lines": {}, "missing": [1.5]}}, "durations": {}}"#,
            r#"{"files": {}, "durations": {"tests/test_pages.py::test_full_pages": "slow"}}"#,
        ] {
            assert!(CoverageMap::parse(hostile.as_bytes()).is_err(), "{hostile}");
        }
    }

    #[tokio::test]
    async fn a_run_that_left_no_map_or_a_broken_one_says_which_job() {
        use assay_common::{ProofId, TreeId, WorkerId};
        use assay_transport::error_chain::error_chain;
        use assay_transport::store::ObjectArtifactStore;

        let store = ObjectArtifactStore::open("memory://").unwrap();
        let spec = crate::suite::reach::plan_job(
            &ProofId("t-1795995229-3f9a1c00".into()),
            &TreeId("0".repeat(40)),
            &["tests/test_pricing.py::test_net".to_owned()],
            60,
        );
        let mut result = JobResult::infrastructure(
            &spec,
            WorkerId("w-1".into()),
            assay_common::fault::InfraCause::WorkerLost,
            "lost".into(),
        );
        let missing = CoverageMap::read(&store, &result).await.unwrap_err();
        assert!(
            matches!(&missing, CoverageError::Missing { job, .. } if *job == spec.job_id),
            "{missing:?}"
        );
        assert!(error_chain(&missing).contains("coverage.py must be installed"));

        let key = "proofs/t-1795995229-3f9a1c00-reach/jobs/0000/report";
        let truncated = br#"{"exit": 0, "files": {"pricing.py": {"lines": {"1": ["#;
        result.artifacts.push(
            store
                .put_bytes("report", key, truncated.to_vec().into())
                .await
                .unwrap(),
        );
        let malformed = CoverageMap::read(&store, &result).await.unwrap_err();
        assert!(
            matches!(&malformed, CoverageError::Malformed { job, .. } if *job == spec.job_id),
            "{malformed:?}"
        );
        assert!(
            error_chain(&malformed).starts_with(&format!(
                "the per-test coverage map of job {} is malformed: EOF",
                spec.job_id
            )),
            "{}",
            error_chain(&malformed)
        );
    }
}
