//! Runner conventions, one module per runner behind the [`Runner`] trait: which files are
//! tests, how a run selects tests by name, where its structured report comes from, how
//! `assay test` lists and batches its cases, and how a tree shows that it uses the runner.
//! The rest of Assay asks a [`RunnerKind`] (the name that travels in plans and on the wire)
//! for its [`Runner`] and never matches on runners itself, so a new runner is one module here
//! plus its line in [`RunnerKind::runner`]. Commands carry `{report}`, `{adapter}` and
//! `{node_reporter}` placeholders so the same job runs in any sandbox.

pub mod cargo;
pub mod go;
pub mod junit;
pub mod manifest;
pub mod node;
pub mod pytest;
pub mod suite_runner;
pub mod unittest;
pub mod vitest;

pub use pytest::{
    PYTEST_COLLECTED_PROPERTY, PYTEST_PARTITION_FLAG, PYTEST_SELECT_FLAG, PYTEST_SELECT_SCRIPT,
    is_pytest_session, partition_of, pytest_select_prefix, python_m_pytest,
};

use crate::criteria::{Criterion, CriterionError};
use crate::outcome::CaseResult;
pub use crate::report_format::{ReportFormat, ReportLocation, TestReportError};
use crate::suite_case::{CaseScope, SuiteCase};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
pub use suite_runner::SuiteRunner;

/// A runner's name, as plans, configuration and wire messages carry it. Its behaviour is its
/// [`Runner`]: [`RunnerKind::runner`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunnerKind {
    /// pytest, with the JUnit XML it writes itself.
    Pytest,
    /// unittest, through the adapter Assay ships.
    Unittest,
    /// `go test -json`; tests and subtests by path.
    Go,
    /// `node --test` with the reporter Assay ships (results with their files).
    Node,
    /// Vitest 4 with its JSON reporter.
    Vitest,
    /// An explicit command that writes one JUnit XML file inside the tree
    /// (`--test-report junit:RELATIVE/PATH.xml`); see [`ReportFormat::parse_test_report`].
    Junit,
    /// A `manifest.tsv` corpus, one interpreter run per row; see [`crate::manifest`].
    Manifest,
    /// Rust through `cargo nextest run` (JUnit) or `cargo test` (libtest's output).
    Cargo,
}

/// What a tree offers a runner's detection: its file list and a reader for one file's text
/// (`None` when absent or unreadable; the caller keeps the reason).
pub struct TreeFiles<'a> {
    /// Every file of the tree, relative to its root, `/`-separated.
    pub files: &'a [String],
    /// The text of the file at a path, `None` when absent or unreadable.
    pub read: &'a mut dyn FnMut(&str) -> Option<String>,
}

impl TreeFiles<'_> {
    /// Whether the tree has a file at `path`.
    pub fn has(&self, path: &str) -> bool {
        self.files.iter().any(|f| f == path)
    }

    /// Whether the file at `path` exists and contains `needle`.
    pub fn mentions(&mut self, path: &str, needle: &str) -> bool {
        (self.read)(path).is_some_and(|text| text.contains(needle))
    }
}

/// Where `assay test` takes a suite's cases from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SuiteCases {
    /// Run `command` as a job and read the cases from its output in `format`.
    Listed {
        /// The listing job's argv.
        command: Vec<String>,
        /// How to read the cases from its output.
        format: ListingFormat,
    },
    /// One case per test module in the tree ([`Runner::is_test_module`]).
    TestModules,
    /// One case: the whole command, owning what `scope` says.
    WholeCommand(CaseScope),
    /// One case per row of the configured manifest corpus.
    CorpusRows,
}

/// The output of a listing job, so the suite knows which reader to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListingFormat {
    /// pytest's `--collect-only` node ids on stdout (exit 5: nothing collected).
    PytestNodeIds,
    /// The unittest adapter's `assay.unittest.cases/v1` at `{report}`.
    UnittestCases,
    /// `go test -list` output: package result lines and test names.
    GoTestList,
}

/// One mutant of a batch ([`Runner::mutant_batch_command`]): its switch number, the test
/// files it runs, and its own limit (the batch stops it there and goes on with the next).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchMember {
    /// The schema's number for it.
    pub mutant: u32,
    /// Its test files, relative to the tree's root, in the order they run.
    pub files: Vec<String>,
    /// Its limit, in milliseconds.
    pub limit_ms: u64,
}

/// One runner's conventions. Every method is pure: commands are argv with placeholders, and
/// detection reads the tree only through [`TreeFiles`].
pub trait Runner: Sync {
    /// The name users type (`--runner NAME`) and reports show.
    fn name(&self) -> &'static str;

    /// The command prefix used when the user gives none; empty when the runner's command (or
    /// interpreter) must be configured.
    fn default_command(&self) -> &'static [&'static str];

    /// Is `path` (relative, `/`-separated) a test file by this runner's conventions? Test
    /// directories count whole, so fixtures, helpers and goldens travel with the tests.
    fn is_test_file(&self, path: &str) -> bool;

    /// Is this test file one the runner itself loads tests from (rather than a fixture)?
    fn is_test_module(&self, path: &str) -> bool;

    /// The full argv for a run of `files` (all tests when empty), narrowed to `names`.
    /// Selection may run more than was named; exact attribution happens later from the report.
    fn command(&self, prefix: &[String], files: &[String], names: &[String]) -> Vec<String>;

    /// Where the structured report of a run comes from. The generic JUnit runner's report lives
    /// in the tree at a configured path ([`ReportFormat::parse_test_report`]); its default (the
    /// scratch `{report}` file) only serves commands that spell `{report}`.
    fn report_format(&self) -> ReportFormat;

    /// The default command on a machine where `installed` says which programs are on the
    /// `PATH` (embedded runs, whose jobs run where they are planned); a fleet plans with
    /// [`Runner::default_command`], the portable choice.
    fn default_command_where(&self, _installed: &dyn Fn(&str) -> bool) -> Vec<String> {
        strings(self.default_command())
    }

    /// The report a run of `prefix` writes, when the runner's command chooses it.
    fn report_format_for(&self, _prefix: &[String]) -> ReportFormat {
        self.report_format()
    }

    /// Whether selecting by a name also selects every test whose name starts with it (pytest's
    /// `-k` matches substrings); the other runners anchor their patterns to whole names.
    fn selects_by_prefix(&self) -> bool {
        false
    }

    /// Criteria as this runner names its tests (bare names by default).
    fn parse_criteria(&self, texts: &[String]) -> Result<Vec<Criterion>, CriterionError> {
        match self.names_tests_by_sentences() {
            true => crate::criteria::parse_sentence_criteria(texts),
            false => crate::criteria::parse_criteria(texts),
        }
    }

    /// Whether its tests are named by sentences (`test('partial last page is counted', …)`),
    /// which a criterion quotes.
    fn names_tests_by_sentences(&self) -> bool {
        false
    }

    /// Whether the tree uses this runner. Runners are asked in [`RunnerKind::DETECTION_ORDER`];
    /// one that is never detected (it needs a command) says `false`.
    fn detect(&self, _tree: &mut TreeFiles<'_>) -> bool {
        false
    }

    /// Whether the proof runs a corpus of named cases rather than test modules: the engine
    /// loads the corpus and overlays no modules of its own.
    fn runs_a_corpus(&self) -> bool {
        false
    }

    /// The check of a changed test file's source that names what it spawns that is itself a
    /// test runner, which makes the file's passes no evidence (see
    /// [`node::spawns_test_runner`]); `None` for a runner whose files need no such check.
    fn spawned_test_runner_check(&self) -> Option<fn(&str) -> Option<String>> {
        None
    }

    /// Why `assay test` cannot run this runner's suites, if it cannot.
    fn suite_unsupported(&self) -> Option<&'static str> {
        None
    }

    /// Where `assay test` takes the cases from, given the configured prefix.
    fn suite_cases(&self, prefix: &[String]) -> SuiteCases;

    /// The argv running `cases`, which share a job.
    fn suite_command(&self, prefix: &[String], cases: &[&SuiteCase]) -> Vec<String>;

    /// Whether a batch's output splits back into its cases, so `--shards auto` may batch
    /// them; other runners' batches share one output and run one case per job by default.
    fn batches_by_default(&self) -> bool {
        false
    }

    /// Whether two cases may share a job: the runner can select both in one run and nothing
    /// else with them.
    fn may_share_a_job(&self, _a: &SuiteCase, _b: &SuiteCase) -> bool {
        true
    }

    /// The session a case must share with the other cases of the same group, in plan order,
    /// when the runner's own whole-suite run keeps state across them; `None`: any batch.
    fn session_group(&self, _case: &SuiteCase) -> Option<String> {
        None
    }

    /// Why a suite's passing cases cannot be answered from the result cache, if they cannot.
    fn suite_uncacheable(&self) -> Option<&'static str> {
        None
    }

    /// The argv of a batch that collects the whole suite itself, runs the cases named by
    /// `spec` and records what it collected in its report; `None` when the runner's batches
    /// cannot (or not when run as `prefix`). A batch so selected needs no listing job first.
    fn select_command(&self, _prefix: &[String], _spec: &[String]) -> Option<Vec<String>> {
        None
    }

    /// The argv of part `part` of `parts` of a first run: a batch that collects the whole
    /// suite, runs the cases whose [`Runner::partition_key`] falls in its part by
    /// [`partition_of`], and records what it collected in its report; `None` when it cannot.
    fn partition_command(
        &self,
        _prefix: &[String],
        _part: usize,
        _parts: usize,
    ) -> Option<Vec<String>> {
        None
    }

    /// What decides a case's part in a partitioned first run: its id, unless the runner keeps
    /// a group of cases in one session (then the group's key, so the group stays whole).
    fn partition_key<'a>(&self, case: &'a SuiteCase) -> &'a str {
        &case.id
    }

    /// A reported result as this runner names a test (a pytest node id, a unittest dotted id),
    /// the form a listing shows and a selection audit compares; the report's identity by
    /// default.
    fn native_id(&self, result: &CaseResult) -> String {
        result.identity()
    }

    /// The coverage tool this runner's tests can run under, which maps lines to the tests
    /// that execute them (reachability, diff coverage, the mutation baseline's map).
    fn coverage(&self) -> Option<CoverageTool> {
        None
    }

    /// The language of this runner's tests and of the product they test, when it is one
    /// Assay reads (test bodies, mutation).
    fn language(&self) -> Option<SourceLanguage> {
        None
    }

    /// Whether the runner runs JavaScript only, so a TypeScript tree's types are erased to the
    /// JavaScript beside each file before its tests run (node 20; Vitest compiles TypeScript
    /// itself).
    fn runs_typescript_erased(&self) -> bool {
        false
    }

    /// Whether `assay mutate` and the proof's mutation check can judge mutants by this
    /// runner's tests.
    fn judges_mutants(&self) -> bool {
        self.language().is_some()
    }

    /// Whether the runner's whole-suite run keeps state across cases in one process, so that a
    /// case failing only when the suite is split may be order-dependent.
    fn shares_a_process_across_cases(&self) -> bool {
        false
    }

    /// Whether a batch's report carries each case's own output and duration, so the batch's
    /// output splits back into its cases.
    fn reports_output_per_case(&self) -> bool {
        false
    }

    /// Whether the host resolves and fetches the tree's dependencies before any job, so that
    /// jobs build offline (cargo).
    fn pins_dependencies_on_host(&self) -> bool {
        false
    }

    /// What of the tree's dependencies travels to a fleet's workers as an archive, so they
    /// build from the submitter's resolution and need no network (see
    /// [`crate::dependency_archive`]); `None`: the workers' own caches serve the jobs.
    fn dependency_archive(&self) -> Option<crate::dependency_archive::DependencyKind> {
        None
    }

    /// Extra arguments for a mutant's run: what makes a kill cheaper to report. `mapped`: the
    /// baseline mapped lines to tests, so the run holds only the tests that reach the mutant.
    fn mutant_run_arguments(&self, _mapped: bool) -> &'static [&'static str] {
        &[]
    }

    /// The command a switched mutant's run of `files` takes (no test names): the runner's
    /// own [`Runner::command`] unless it has a cheaper one that reports the same.
    fn mutant_command(&self, prefix: &[String], files: &[String]) -> Vec<String> {
        self.command(prefix, files, &[])
    }

    /// One job's command for several switched mutants, each a run of its own test files in
    /// one process where the runner can isolate them there (node: every file of the tree loads
    /// afresh per mutant), with its kills confirmed in the same job; `None` where each mutant
    /// needs a job of its own. Its report is read by [`crate::report::mutant_batch`].
    fn mutant_batch_command(
        &self,
        _prefix: &[String],
        _members: &[BatchMember],
    ) -> Option<Vec<String>> {
        None
    }

    /// A mutant's command that runs the failing tests once more, at once and in the same job,
    /// its second run's cases reported with the variant
    /// [`crate::report::libtest::RERUN_VARIANT`]: a kill then needs no job of its own to
    /// confirm it. Unchanged where the runner cannot (its kills are confirmed by a job).
    fn rerunning_failures(&self, command: Vec<String>) -> Vec<String> {
        command
    }

    /// Whether [`Runner::command`]'s files may name single tests (node ids), so that a killed
    /// mutant's second run holds only the tests that killed it; Go's command names packages.
    fn reruns_named_tests(&self) -> bool {
        true
    }

    /// Whether the runner's report of a whole run says which tests each package holds, so
    /// that a mutant runs only its own package's tests (Go).
    fn reports_tests_by_package(&self) -> bool {
        false
    }

    /// Whether a run's counts come from its output's summary line (a bare command's), not
    /// from a report.
    fn counts_from_output(&self) -> bool {
        false
    }

    /// Whether the report a suite's jobs write is the one configured with the command
    /// (`--test-report`), not the runner's own.
    fn report_is_configured(&self) -> bool {
        false
    }
}

/// The runner `assay mutate` uses for a Python project, or one whose runner judges no mutants:
/// pytest under coverage.py maps lines to the tests that reach them.
pub const MUTATION_DEFAULT: RunnerKind = RunnerKind::Pytest;

/// A coverage tool a runner's tests can run under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoverageTool {
    /// coverage.py, whose per-test contexts say which test executed each line.
    CoveragePy,
    /// `go test -coverprofile`: which statements a run executed, for the run as a whole.
    GoCoverProfile,
    /// node's V8 coverage (`NODE_V8_COVERAGE`): each process's block ranges by offset, for the
    /// run as a whole.
    NodeV8,
    /// `cargo llvm-cov` where it is installed: its lcov report, for the run as a whole.
    CargoLlvmCov,
}

impl CoverageTool {
    /// The tool's name as evidence shows it.
    pub fn name(self) -> &'static str {
        match self {
            Self::CoveragePy => "coverage.py",
            Self::GoCoverProfile => "go test -coverprofile",
            Self::NodeV8 => "node V8 coverage",
            Self::CargoLlvmCov => "cargo llvm-cov",
        }
    }

    /// Whether the tool locates what ran by offsets into a file's text, not by lines, so that
    /// the changed files' text must be known where the run is judged (see
    /// [`crate::diff_coverage::ChangedSource`]).
    pub fn counts_offsets(self) -> bool {
        matches!(self, Self::NodeV8)
    }
}

/// A language Assay reads: test bodies, mutation sites.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceLanguage {
    /// Python source (`.py`).
    Python,
    /// Rust source (`.rs`).
    Rust,
    /// Go source (`.go`).
    Go,
    /// JavaScript and TypeScript source.
    JavaScript,
}

/// The runner the tree uses: the first of [`RunnerKind::DETECTION_ORDER`] that detects itself,
/// otherwise [`RunnerKind::FALLBACK`].
pub fn detect(tree: &mut TreeFiles<'_>) -> RunnerKind {
    RunnerKind::DETECTION_ORDER
        .into_iter()
        .find(|kind| kind.runner().detect(tree))
        .unwrap_or(RunnerKind::FALLBACK)
}

/// Whether `path` is a test file for any runner a tree may be detected as: before the runner
/// is known, overlaying a file that is a test elsewhere is harmless, missing a test file is not.
pub fn is_test_file_for_any_detectable(path: &str) -> bool {
    RunnerKind::DETECTION_ORDER
        .into_iter()
        .chain([RunnerKind::FALLBACK])
        .any(|kind| kind.is_test_file(path))
}

impl RunnerKind {
    /// Every runner, in the order help and errors list them.
    pub const ALL: [RunnerKind; 8] = [
        RunnerKind::Pytest,
        RunnerKind::Unittest,
        RunnerKind::Go,
        RunnerKind::Node,
        RunnerKind::Vitest,
        RunnerKind::Junit,
        RunnerKind::Manifest,
        RunnerKind::Cargo,
    ];

    /// The runners a tree can show it uses, most specific first; a tree none of them claims
    /// runs [`Self::FALLBACK`], which needs nothing installed.
    pub const DETECTION_ORDER: [RunnerKind; 5] = [
        RunnerKind::Go,
        RunnerKind::Vitest,
        RunnerKind::Node,
        RunnerKind::Cargo,
        RunnerKind::Pytest,
    ];

    /// The runner of a tree no runner detects itself in: it needs nothing installed.
    pub const FALLBACK: RunnerKind = RunnerKind::Unittest;

    /// This runner's conventions: the one place a runner is registered.
    pub fn runner(self) -> &'static dyn Runner {
        match self {
            Self::Pytest => &pytest::Pytest,
            Self::Unittest => &unittest::Unittest,
            Self::Go => &go::Go,
            Self::Node => &node::Node,
            Self::Vitest => &vitest::Vitest,
            Self::Junit => &junit::Junit,
            Self::Manifest => &manifest::Manifest,
            Self::Cargo => &cargo::Cargo,
        }
    }

    /// The name users type (`--runner NAME`) and reports show.
    pub fn name(self) -> &'static str {
        self.runner().name()
    }

    /// The command prefix used when the user gives none; empty when it must be configured.
    pub fn default_command(self) -> Vec<String> {
        strings(self.runner().default_command())
    }

    /// Whether selecting a name also selects every test whose name starts with it.
    pub fn selects_by_prefix(self) -> bool {
        self.runner().selects_by_prefix()
    }

    /// Whether the runner can run at all without a configured command.
    pub fn needs_explicit_command(self) -> bool {
        self.runner().default_command().is_empty()
    }

    /// The structured report a run writes, by default.
    pub fn report_format(self) -> ReportFormat {
        self.runner().report_format()
    }

    /// The report a run of `prefix` writes.
    pub fn report_format_for(self, prefix: &[String]) -> ReportFormat {
        self.runner().report_format_for(prefix)
    }

    /// The default command on a machine where `installed` says which programs are on `PATH`.
    pub fn default_command_where(self, installed: &dyn Fn(&str) -> bool) -> Vec<String> {
        self.runner().default_command_where(installed)
    }

    /// Whether `path` is a test file (or part of a test directory) by this runner's conventions.
    pub fn is_test_file(self, path: &str) -> bool {
        self.runner().is_test_file(path)
    }

    /// Whether `path` is a test file the runner loads tests from, not a fixture.
    pub fn is_test_module(self, path: &str) -> bool {
        self.runner().is_test_module(path)
    }

    /// The argv for a run of `files` (all tests when empty), narrowed to `names`.
    pub fn command(self, prefix: &[String], files: &[String], names: &[String]) -> Vec<String> {
        self.runner().command(prefix, files, names)
    }

    /// Criteria as this runner names its tests.
    pub fn parse_criteria(self, texts: &[String]) -> Result<Vec<Criterion>, CriterionError> {
        self.runner().parse_criteria(texts)
    }

    /// The hint for each criterion whose words name a test without the quotes this runner's
    /// sentence names need: it fell back to its id, which is most likely not what was meant.
    pub fn unquoted_sentence_hints(self, texts: &[String], criteria: &[Criterion]) -> Vec<String> {
        if !self.runner().names_tests_by_sentences() {
            return Vec::new();
        }
        texts
            .iter()
            .zip(criteria)
            .filter_map(|(text, criterion)| {
                let words = crate::criteria::unquoted_sentence(text, criterion)?;
                Some(format!(
                    "{} names no test: unquoted words fall back to the criterion's id (tests named {}…); to name the {} test {words:?}, quote it: {}: {words:?}",
                    criterion.id,
                    criterion.test.display(),
                    self.name(),
                    criterion.kind,
                ))
            })
            .collect()
    }
}

/// Owned argv words.
pub(crate) fn strings(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

/// The file name of a `/`-separated path, and its directories from the innermost out.
pub(crate) fn split_path(path: &str) -> (&str, impl Iterator<Item = &str>) {
    let file_name = path.rsplit('/').next().unwrap_or(path);
    (file_name, path.split('/').rev().skip(1))
}

impl fmt::Display for RunnerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RunnerKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = Self::ALL.iter().map(|r| r.name()).collect();
                format!("unknown runner {s:?} (known: {})", known.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn the_select_script_and_assay_put_each_node_id_in_the_same_part() {
        let ids = [
            "tests/test_more.py::LastTests::test_basic",
            "tests/test_recipes.py::TakeTests::test_simple_take",
            "tests/test_pages.py::test_partial[3-page \u{e9}t\u{e9}]",
            "tests/test_pages.py::test_partial[]",
        ];
        // The script's own `wanted`, run once by the real interpreter over every id and part
        // count: it prints, per line, the part each id falls in.
        let head = PYTEST_SELECT_SCRIPT
            .split("\nchosen = set(spec)")
            .next()
            .expect("the script defines wanted first")
            .replace("cut = argv.index(\"--assay-select\")", "cut = 0");
        let probe = format!(
            "{head}\nids = sys.stdin.read().split('\\n')\nfor parts in (2, 3):\n    for nodeid in ids:\n        found = []\n        for part in range(parts):\n            spec = ['--assay-partition', str(part), str(parts)]\n            if wanted(nodeid):\n                found.append(part)\n        print(*found)\n"
        );
        let mut child = std::process::Command::new("python3")
            .args(["-c", &probe])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs");
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(ids.join("\n").as_bytes())
            .expect("write");
        let out = child.wait_with_output().expect("python3 ends");
        let expected: Vec<String> = [2usize, 3]
            .iter()
            .flat_map(|&parts| {
                ids.iter()
                    .map(move |id| partition_of(id, parts).to_string())
            })
            .collect();
        let found: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        assert_eq!(found, expected, "each id in exactly one part, the same one");
        assert_eq!(partition_of("any", 0), 0, "no parts is one part");
    }

    #[test]
    fn test_files_follow_python_conventions() {
        let pytest = RunnerKind::Pytest;
        assert!(pytest.is_test_file("tests/test_pager.py"));
        assert!(pytest.is_test_file("tests/fixtures/page.json"));
        assert!(pytest.is_test_file("pkg/pager_test.py"));
        assert!(pytest.is_test_file("conftest.py"));
        assert!(!pytest.is_test_file("pager/__init__.py"));
        assert!(!pytest.is_test_file("tests.py.bak"));
        assert!(pytest.is_test_module("tests/test_pager.py"));
        assert!(!pytest.is_test_module("tests/fixtures/page.json"));
    }

    #[test]
    fn test_files_follow_go_and_node_conventions() {
        let go = RunnerKind::Go;
        assert!(go.is_test_file("cache/cache_test.go"));
        assert!(go.is_test_file("cache/testdata/golden.json"));
        assert!(!go.is_test_file("cache/cache.go"));
        assert!(!go.is_test_file("tests/helper.go"));
        assert!(go.is_test_module("cache/cache_test.go"));
        assert!(!go.is_test_module("cache/testdata/golden.json"));
        for runner in [RunnerKind::Node, RunnerKind::Vitest] {
            assert!(runner.is_test_file("test/invoice.test.js"));
            assert!(runner.is_test_file("src/invoice.spec.ts"));
            assert!(runner.is_test_file("test/fixtures/invoice.json"));
            assert!(!runner.is_test_file("src/invoice.js"));
            assert!(runner.is_test_module("src/invoice.spec.ts"));
            assert!(!runner.is_test_module("test/fixtures/invoice.json"));
        }
    }

    #[test]
    fn pytest_selects_by_name_and_writes_junit() {
        let argv = RunnerKind::Pytest.command(
            &RunnerKind::Pytest.default_command(),
            &["tests/test_pager.py".into()],
            &["test_a".into(), "test_b".into()],
        );
        assert!(argv.contains(&"--junitxml={report}".to_string()));
        assert_eq!(
            argv[argv.len() - 2..],
            ["-k".to_string(), "test_a or test_b".into()]
        );
    }

    #[test]
    fn go_runs_fresh_json_by_package_with_an_anchored_run_pattern() {
        let argv = RunnerKind::Go.command(
            &RunnerKind::Go.default_command(),
            &strings(&["cache/cache_test.go", "cache/ttl_test.go", "store_test.go"]),
            &strings(&["TestCacheExpiry/expired"]),
        );
        assert_eq!(
            argv,
            strings(&[
                "go",
                "test",
                "-json",
                "-count=1",
                "-vet=off",
                "-run",
                "^(TestCacheExpiry)$/^(expired)$",
                "./cache",
                "."
            ])
        );
        assert_eq!(
            RunnerKind::Go.report_format().location(),
            ReportLocation::Stdout
        );
        let all = RunnerKind::Go.command(&RunnerKind::Go.default_command(), &[], &[]);
        assert_eq!(all.last().map(String::as_str), Some("./..."));
    }

    #[test]
    fn node_and_vitest_write_their_structured_reports_to_the_scratch_file() {
        let node = RunnerKind::Node.command(
            &RunnerKind::Node.default_command(),
            &strings(&["test/invoice.test.js"]),
            &strings(&["test_c1_totals"]),
        );
        assert_eq!(
            node,
            strings(&[
                "node",
                "--test",
                "--test-reporter={node_reporter}",
                "--test-reporter-destination={report}",
                "--test-name-pattern",
                "test_c1_totals",
                "test/invoice.test.js"
            ])
        );
        let vitest = RunnerKind::Vitest.command(
            &RunnerKind::Vitest.default_command(),
            &strings(&["tests/invoice.test.js"]),
            &[],
        );
        assert_eq!(
            vitest,
            strings(&[
                "npx",
                "--no",
                "--offline",
                "vitest",
                "run",
                "--reporter=json",
                "--outputFile={report}",
                "tests/invoice.test.js"
            ])
        );
    }

    #[test]
    fn the_generic_junit_report_is_a_confined_tree_path() {
        let format =
            ReportFormat::parse_test_report("junit:target/surefire-reports/TEST-x.xml").unwrap();
        let ReportLocation::Tree(path) = format.location() else {
            panic!("expected an in-tree report")
        };
        assert_eq!(path.as_str(), "target/surefire-reports/TEST-x.xml");
        let explicit = strings(&["mvn", "-o", "-Dtest=PageCountTest", "test"]);
        assert_eq!(
            RunnerKind::Junit.command(&explicit, &strings(&["src/test/x.java"]), &strings(&["a"])),
            explicit
        );
        for (spec, expected) in [
            ("junit:/tmp/x.xml", "not confined"),
            ("junit:../x.xml", "not confined"),
            ("junit:", "not confined"),
            ("trx:x.trx", "not supported"),
            ("x.xml", "does not name a format"),
        ] {
            let err = ReportFormat::parse_test_report(spec)
                .unwrap_err()
                .to_string();
            assert!(err.contains(expected), "{spec}: {err}");
        }
    }

    #[test]
    fn a_corpus_is_test_data_and_its_interpreter_is_the_product() {
        let manifest = RunnerKind::Manifest;
        assert!(manifest.is_test_file("corpus/manifest.tsv"));
        assert!(manifest.is_test_file("corpus/integer/add-small.inv"));
        assert!(manifest.is_test_file("tests/conformance/boolean/paid.inv"));
        assert!(!manifest.is_test_file("interpreter.py"));
        assert!(!manifest.is_test_file("src/eval.rs"));
        let format = manifest.report_format();
        let ReportLocation::Cases(job) = format.location() else {
            panic!("a manifest job reports per case")
        };
        assert!(job.cases.is_empty(), "the engine fills in the cases");
        let prefix = strings(&["python3", "interpreter.py"]);
        assert_eq!(manifest.command(&prefix, &strings(&["x.inv"]), &[]), prefix);
    }

    #[test]
    fn runners_without_a_default_command_say_so() {
        for runner in RunnerKind::ALL {
            assert_eq!(
                runner.default_command().is_empty(),
                runner.needs_explicit_command(),
                "{runner}"
            );
        }
    }

    fn detect(files: &[(&str, &str)]) -> RunnerKind {
        let names: Vec<String> = files.iter().map(|(path, _)| (*path).to_owned()).collect();
        let mut read = |path: &str| {
            files
                .iter()
                .find(|(p, _)| *p == path)
                .map(|(_, text)| (*text).to_owned())
        };
        super::detect(&mut TreeFiles {
            files: &names,
            read: &mut read,
        })
    }

    #[test]
    fn detection_asks_each_runner_in_order_and_falls_back_to_unittest() {
        let vitest = r#"{"devDependencies":{"vitest":"^4"}}"#;
        assert_eq!(
            detect(&[("go.mod", ""), ("package.json", vitest)]),
            RunnerKind::Go
        );
        assert_eq!(detect(&[("package.json", vitest)]), RunnerKind::Vitest);
        assert_eq!(detect(&[("package.json", "{}")]), RunnerKind::Node);
        assert_eq!(
            detect(&[("pyproject.toml", "[tool.pytest.ini_options]\n")]),
            RunnerKind::Pytest
        );
        assert_eq!(
            detect(&[("tests/test_pages.py", "from pytest import raises\n")]),
            RunnerKind::Pytest
        );
        assert_eq!(
            detect(&[
                ("pyproject.toml", "[project]\n"),
                ("tests/test_x.py", "import unittest\n")
            ]),
            RunnerKind::Unittest
        );
        assert_eq!(detect(&[]), RunnerKind::FALLBACK);
    }

    /// Test functions at a module's top level are pytest's (`python -m unittest` collects
    /// `TestCase` classes only and would find nothing), unless the module is unittest's.
    #[test]
    fn bare_test_functions_are_detected_as_pytest() {
        let bare = "from pager import page_count\n\ndef test_full_pages():\n    assert page_count(20, 10) == 2\n";
        assert_eq!(detect(&[("test_pager.py", bare)]), RunnerKind::Pytest);
        let coroutine = "async def test_fetch():\n    assert True\n";
        assert_eq!(
            detect(&[("tests/test_io.py", coroutine)]),
            RunnerKind::Pytest
        );
        let unittest_module = "import unittest\n\ndef test_helper():\n    pass\n\nclass PagerTest(unittest.TestCase):\n    def test_full(self):\n        pass\n";
        assert_eq!(
            detect(&[("test_pager.py", unittest_module)]),
            RunnerKind::Unittest
        );
        // A method is no bare function, nor is a helper module outside the test files.
        let methods = "class TestPager:\n    def test_full(self):\n        pass\n";
        assert_eq!(detect(&[("pager_tests.py", methods)]), RunnerKind::Unittest);
    }

    #[test]
    fn every_runner_is_registered_under_its_own_name() {
        for kind in RunnerKind::ALL {
            assert_eq!(kind.name().parse::<RunnerKind>(), Ok(kind));
            let json = serde_json::to_string(&kind).expect("a runner serializes");
            assert_eq!(
                json,
                format!("\"{}\"", kind.name()),
                "wire name is the user's"
            );
        }
        for kind in RunnerKind::DETECTION_ORDER {
            assert!(
                !kind.needs_explicit_command(),
                "{kind} is detected, so runs unconfigured"
            );
        }
    }

    #[test]
    fn unknown_runner_lists_the_known_ones() {
        let err = "jest".parse::<RunnerKind>().unwrap_err();
        assert!(
            err.contains("pytest, unittest, go, node, vitest, junit, manifest, cargo"),
            "{err}"
        );
        assert_eq!("go".parse::<RunnerKind>(), Ok(RunnerKind::Go));
    }
}
