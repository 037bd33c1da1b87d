//! pytest: JUnit XML it writes itself, selection with `-k`, listing with `--collect-only`, and
//! the select script that lets one batch collect the suite and run its share.

use super::{CoverageTool, SourceLanguage};
use super::{ListingFormat, ReportFormat, Runner, SuiteCases, TreeFiles, split_path};
use crate::outcome::CaseResult;
use crate::suite_case::SuiteCase;
use sha2::{Digest, Sha256};

/// The pytest runner: its own JUnit XML, selection with `-k`.
pub struct Pytest;

impl Runner for Pytest {
    fn name(&self) -> &'static str {
        "pytest"
    }

    /// Through [`PYTEST_SELECT_SCRIPT`], when the suite runs as `PYTHON -m pytest`, whose
    /// arguments the script takes over.
    fn select_command(&self, prefix: &[String], spec: &[String]) -> Option<Vec<String>> {
        let mut prefix = pytest_select_prefix(prefix)?;
        prefix.extend(["-o", "junit_logging=all"].map(String::from));
        let mut argv = self.command(&prefix, &[], &[]);
        argv.push(PYTEST_SELECT_FLAG.into());
        argv.extend(spec.iter().cloned());
        Some(argv)
    }

    /// A node id: the file, its classes and the name, with the variant in brackets. A result
    /// reported without a `file` (a forged `<testcase>`, say) has its path worked out from the
    /// dotted class name, whose capitalized trailing parts are taken as classes.
    fn native_id(&self, result: &CaseResult) -> String {
        let variant = result
            .variant
            .as_ref()
            .map_or_else(String::new, |v| format!("[{v}]"));
        let parts: Vec<&str> = result.suite.split('.').filter(|p| !p.is_empty()).collect();
        let (file, classes) = match result.file.strip_suffix(".py") {
            Some(module) => {
                let depth = module.split('/').count().min(parts.len());
                (result.file.clone(), parts[depth..].to_vec())
            }
            None => {
                let split = parts
                    .iter()
                    .rposition(|p| !p.starts_with(|c: char| c.is_ascii_uppercase()))
                    .map_or(0, |at| at + 1);
                let file = match &parts[..split] {
                    [] => result.file.clone(),
                    module => format!("{}.py", module.join("/")),
                };
                (file, parts[split..].to_vec())
            }
        };
        let mut id = file;
        for class in classes {
            id.push_str("::");
            id.push_str(class);
        }
        format!("{id}::{}{variant}", result.name)
    }

    fn coverage(&self) -> Option<CoverageTool> {
        Some(CoverageTool::CoveragePy)
    }

    fn language(&self) -> Option<SourceLanguage> {
        Some(SourceLanguage::Python)
    }

    fn shares_a_process_across_cases(&self) -> bool {
        true
    }

    /// Its JUnit report holds each test's captured output and time.
    fn reports_output_per_case(&self) -> bool {
        true
    }

    /// With the map, the first failure ends the run (`-x`); and a kill needs the failing
    /// test's name and where it failed, not a traceback: pytest's long one (every frame's
    /// source re-parsed) cost a killed semver mutant as much as its tests, and even Python's
    /// own (`native`, every pytest and pluggy frame with its position markers) cost 3.6 ms of
    /// a 28 ms kill, paid for the run and again for its re-run. `line` keeps `FILE:LINE:
    /// ERROR` per failure. Later options win over the project's addopts.
    fn mutant_run_arguments(&self, mapped: bool) -> &'static [&'static str] {
        match mapped {
            true => &["-x", "--tb=line"],
            false => &["--tb=line"],
        }
    }

    /// `PYTHON -m pytest ARGS…` as `PYTHON -c PYTEST_RERUN_SCRIPT ARGS…`, whose plugin re-runs
    /// each failing test at once in the same session; any other command is kept.
    fn rerunning_failures(&self, command: Vec<String>) -> Vec<String> {
        let Some((python, args)) = python_m_pytest(&command) else {
            return command;
        };
        let mut argv = vec![python.clone(), "-c".into(), PYTEST_RERUN_SCRIPT.into()];
        argv.extend(args.iter().cloned());
        argv
    }

    fn partition_command(
        &self,
        prefix: &[String],
        part: usize,
        parts: usize,
    ) -> Option<Vec<String>> {
        let spec = [part, parts.max(1)].map(|n| n.to_string());
        let mut argv = self.select_command(prefix, &[PYTEST_PARTITION_FLAG.to_owned()])?;
        argv.extend(spec);
        Some(argv)
    }

    fn default_command(&self) -> &'static [&'static str] {
        &["python3", "-m", "pytest"]
    }

    fn is_test_file(&self, path: &str) -> bool {
        is_python_test_file(path)
    }

    fn is_test_module(&self, path: &str) -> bool {
        let (file_name, _) = split_path(path);
        file_name.ends_with(".py")
            && (file_name.starts_with("test_") || file_name.ends_with("_test.py"))
    }

    fn command(&self, prefix: &[String], files: &[String], names: &[String]) -> Vec<String> {
        let mut argv = prefix.to_vec();
        argv.extend(
            [
                "-p",
                "no:cacheprovider",
                "-o",
                "junit_family=xunit1",
                "--junitxml={report}",
                "--continue-on-collection-errors",
                "-q",
            ]
            .map(String::from),
        );
        argv.extend(files.iter().cloned());
        if !names.is_empty() {
            argv.push("-k".into());
            argv.push(names.join(" or "));
        }
        argv
    }

    fn report_format(&self) -> ReportFormat {
        ReportFormat::JunitXml
    }

    fn selects_by_prefix(&self) -> bool {
        true
    }

    /// pytest when the tree shows it: its config, a conftest, or a test module importing it.
    fn detect(&self, tree: &mut TreeFiles<'_>) -> bool {
        for file in tree.files {
            let (name, _) = split_path(file);
            let uses_pytest = match name {
                "pytest.ini" | "conftest.py" => true,
                "pyproject.toml" => tree.mentions(file, "[tool.pytest"),
                "setup.cfg" => tree.mentions(file, "[tool:pytest]"),
                "tox.ini" => tree.mentions(file, "[pytest]"),
                _ if self.is_test_module(file) => (tree.read)(file).is_some_and(|text| {
                    text.contains("import pytest")
                        || text.contains("from pytest")
                        || has_bare_test_functions(&text)
                }),
                _ => false,
            };
            if uses_pytest {
                return true;
            }
        }
        false
    }

    fn suite_cases(&self, prefix: &[String]) -> SuiteCases {
        let mut command = prefix.to_vec();
        // `--verbosity=-1`, not `-q`: it overrides a project's `addopts = -v`, which with `-q`
        // would print the collection tree instead of node ids.
        command.extend(
            ["-p", "no:cacheprovider", "--collect-only", "--verbosity=-1"].map(String::from),
        );
        SuiteCases::Listed {
            command,
            format: ListingFormat::PytestNodeIds,
        }
    }

    /// Each test's captured output goes into the report, so a batch's output can be split
    /// back into its cases.
    fn suite_command(&self, prefix: &[String], cases: &[&SuiteCase]) -> Vec<String> {
        let mut prefix = prefix.to_vec();
        prefix.extend(["-o", "junit_logging=all"].map(String::from));
        let ids: Vec<String> = cases.iter().map(|c| c.id.clone()).collect();
        self.command(&prefix, &ids, &[])
    }

    fn batches_by_default(&self) -> bool {
        true
    }
}

/// Python's conventions, shared by pytest and unittest: `test_*.py`, `*_test.py`,
/// `conftest.py`, and everything under `tests`, `test` or `testing`.
pub(crate) fn is_python_test_file(path: &str) -> bool {
    let (file_name, mut dirs) = split_path(path);
    let in_test_dir = dirs.any(|dir| matches!(dir, "tests" | "test" | "testing"));
    let python_test = file_name.ends_with(".py")
        && (file_name.starts_with("test_")
            || file_name.ends_with("_test.py")
            || file_name == "conftest.py");
    in_test_dir || python_test
}

/// The interpreter and pytest arguments of `PYTHON -m pytest ARGS…`; `None` for any other
/// command (a wrapper such as `uv run pytest` included).
pub fn python_m_pytest(command: &[String]) -> Option<(&String, &[String])> {
    match command {
        [python, m, pytest, args @ ..] if m == "-m" && pytest == "pytest" => Some((python, args)),
        _ => None,
    }
}

/// Runs pytest with the re-run plugin: `PYTHON -c PYTEST_RERUN_SCRIPT PYTEST_ARGS…`. A failing
/// test runs once more at once; a test module that fails to import is collected once more at
/// once (Python forgets a module whose import failed, so it runs again) and, when it fails
/// again, reported as the collection error of `FILE[assay-rerun]`. A second import that passes
/// reports nothing: the kill is then confirmed by a job of its own, as before.
const PYTEST_RERUN_SCRIPT: &str = r#"
import sys
import pytest
from _pytest.reports import CollectReport
from _pytest.runner import runtestprotocol


class Rerun:
    def __init__(self):
        self.failed_modules = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(self, collector):
        outcome = yield
        report = outcome.get_result()
        if report.failed and isinstance(collector, pytest.Module):
            self.failed_modules.setdefault(report.nodeid, collector)

    @pytest.hookimpl(trylast=True)
    def pytest_collectreport(self, report):
        collector = self.failed_modules.get(report.nodeid)
        if collector is None:
            return
        # Kept as None, not removed: the second collection's own failure must not queue a third.
        self.failed_modules[report.nodeid] = None
        try:
            again = collector.ihook.pytest_make_collect_report(collector=collector)
        except Exception:
            return
        if again.failed:
            collector.ihook.pytest_collectreport(report=CollectReport(
                report.nodeid + "[assay-rerun]", "failed", again.longrepr, [], again.sections))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        ihook = item.ihook
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        for report in reports:
            ihook.pytest_runtest_logreport(report=report)
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        if any(report.failed for report in reports):
            if item.nodeid.endswith("]"):
                nodeid = item.nodeid[:-1] + "-assay-rerun]"
            else:
                nodeid = item.nodeid + "[assay-rerun]"
            ihook.pytest_runtest_logstart(nodeid=nodeid, location=item.location)
            for report in runtestprotocol(item, nextitem=nextitem, log=False):
                report.nodeid = nodeid
                ihook.pytest_runtest_logreport(report=report)
            ihook.pytest_runtest_logfinish(nodeid=nodeid, location=item.location)
        return True


sys.exit(pytest.main(sys.argv[1:], plugins=[Rerun()]))
"#;

/// The pytest session of a suite batch that chooses its own cases: run as `PYTHON -c SCRIPT
/// ARGS… --assay-select SPEC…` in place of `PYTHON -m pytest ARGS…` (the same interpreter, the
/// same arguments, the working directory first on `sys.path` as with `-m`). The session collects
/// the whole suite, as `pytest --collect-only` would, records every collected node id in its
/// JUnit report (one `assay.collected` property each, in collection order), and runs only the
/// node ids SPEC names (the others are deselected). So a batch needs no separate listing
/// session, and a node id the tree no longer has costs nothing.
pub const PYTEST_SELECT_SCRIPT: &str = r#"import hashlib
import sys
import pytest

argv = sys.argv[1:]
cut = argv.index("--assay-select")
args, spec = argv[:cut], argv[cut + 1:]


def wanted(nodeid):
    if spec[:1] == ["--assay-partition"]:
        digest = hashlib.sha256(nodeid.encode("utf-8", "surrogateescape")).digest()
        return int.from_bytes(digest[:8], "big") % int(spec[2]) == int(spec[1])
    return nodeid in chosen


chosen = set(spec)


class AssaySelect:
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        for plugin in config.pluginmanager.get_plugins():
            if hasattr(plugin, "add_global_property") and hasattr(plugin, "node_reporters"):
                for item in items:
                    plugin.add_global_property("assay.collected", item.nodeid)
        keep = [item for item in items if wanted(item.nodeid)]
        if len(keep) < len(items):
            kept = set(map(id, keep))
            config.hook.pytest_deselected(items=[i for i in items if id(i) not in kept])
            items[:] = keep


sys.exit(pytest.main(args, plugins=[AssaySelect()]))
"#;

/// The argument after which [`PYTEST_SELECT_SCRIPT`] reads what its batch runs.
pub const PYTEST_SELECT_FLAG: &str = "--assay-select";

/// What follows [`PYTEST_SELECT_FLAG`] to run one part of the whole collection: the cases
/// whose [`partition_of`] is the part's number.
pub const PYTEST_PARTITION_FLAG: &str = "--assay-partition";

/// The part of `parts` a case's partition key (a pytest node id, a unittest module's file) falls
/// in, as [`PYTEST_SELECT_SCRIPT`] and the unittest adapter compute it: the first 8 bytes of the
/// key's sha256, big-endian, modulo `parts`. Stable across runs and machines, so every batch of
/// a first run takes its own cases from the same collection.
pub fn partition_of(key: &str, parts: usize) -> usize {
    let digest = Sha256::digest(key.as_bytes());
    let mut head = [0u8; 8];
    head.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(head) % parts.max(1) as u64) as usize
}

/// The JUnit property under which [`PYTEST_SELECT_SCRIPT`] records each collected node id.
pub const PYTEST_COLLECTED_PROPERTY: &str = "assay.collected";

/// `PYTHON -m pytest ARGS…` rewritten to run [`PYTEST_SELECT_SCRIPT`] with the same
/// interpreter and arguments; `None` for any other command (a wrapper such as `uv run pytest`).
pub fn pytest_select_prefix(command: &[String]) -> Option<Vec<String>> {
    let (python, args) = python_m_pytest(command)?;
    let mut argv = vec![python.clone(), "-c".into(), PYTEST_SELECT_SCRIPT.into()];
    argv.extend(args.iter().cloned());
    Some(argv)
}

/// Is this command a whole pytest session: `PYTHON -m pytest …` or a batch run through
/// [`PYTEST_SELECT_SCRIPT`]?
pub fn is_pytest_session(command: &[String]) -> bool {
    python_m_pytest(command).is_some()
        || matches!(command, [_, c, script, ..] if c == "-c" && script == PYTEST_SELECT_SCRIPT)
}

/// Whether a test module is written for pytest without saying so: test functions at module
/// level and no `unittest` in sight. `python -m unittest` finds no such test (it collects
/// `TestCase` classes only), so a tree of them is pytest's.
fn has_bare_test_functions(text: &str) -> bool {
    let bare = text
        .lines()
        .any(|line| line.starts_with("def test") || line.starts_with("async def test"));
    bare && !text.contains("unittest")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mutation run's baseline hints its mutants' command with no test named
    /// (`JobSpec::next_command`), and the warm runner keys the session it collects by what
    /// precedes a command's trailing node ids: a mutant's command must be that hint followed by
    /// its tests, or no mutant would find the session collected for it.
    #[test]
    fn a_mutants_command_is_the_one_with_no_test_named_followed_by_its_node_ids() {
        let prefix: Vec<String> = ["python3", "-m", "pytest", "-q", "-x", "--tb=line"]
            .map(String::from)
            .to_vec();
        let ids = [
            "tests/test_pager.py::test_partial_last_page_is_counted".to_owned(),
            "tests/test_pager.py::PagesTests::test_empty[0-10]".to_owned(),
        ];
        let hint = Pytest.rerunning_failures(Pytest.command(&prefix, &[], &[]));
        let mutant = Pytest.rerunning_failures(Pytest.command(&prefix, &ids, &[]));
        assert_eq!(mutant[..hint.len()], hint[..], "{mutant:?}");
        assert_eq!(mutant[hint.len()..], ids[..], "{mutant:?}");
        assert_eq!(
            hint[1], "-c",
            "the hint runs the re-run plugin as mutants do: {hint:?}"
        );
    }

    #[test]
    fn only_python_dash_m_pytest_gains_the_rerun_plugin() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let command = Pytest.rerunning_failures(argv(&[
            "python3",
            "-m",
            "pytest",
            "-x",
            "tests/test_pager.py",
        ]));
        assert_eq!(command[..2], argv(&["python3", "-c"]));
        assert!(command[2].contains("runtestprotocol"));
        assert_eq!(command[3..], argv(&["-x", "tests/test_pager.py"]));
        let other = argv(&["uv", "run", "pytest", "-x"]);
        assert_eq!(Pytest.rerunning_failures(other.clone()), other);
    }
}
