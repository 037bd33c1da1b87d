//! Runner conventions: which files are tests, how to select tests by name, and which structured
//! report a run writes. The command built here carries `{report}` / `{adapter}` placeholders so
//! the same job runs in any sandbox.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunnerKind {
    Pytest,
    Unittest,
}

impl RunnerKind {
    pub const ALL: [RunnerKind; 2] = [RunnerKind::Pytest, RunnerKind::Unittest];

    pub fn name(self) -> &'static str {
        match self {
            Self::Pytest => "pytest",
            Self::Unittest => "unittest",
        }
    }

    /// The command prefix used when the user gives none.
    pub fn default_command(self) -> Vec<String> {
        match self {
            Self::Pytest => vec!["python3".into(), "-m".into(), "pytest".into()],
            Self::Unittest => vec!["python3".into()],
        }
    }

    pub fn report_format(self) -> ReportFormat {
        match self {
            Self::Pytest => ReportFormat::JunitXml,
            Self::Unittest => ReportFormat::UnittestJson,
        }
    }

    /// Is `path` (relative, `/`-separated) a test file by this runner's conventions? Test
    /// directories count whole, so fixtures, `conftest.py` and goldens travel with the tests.
    pub fn is_test_file(self, path: &str) -> bool {
        let file_name = path.rsplit('/').next().unwrap_or(path);
        let in_test_dir = path
            .split('/')
            .rev()
            .skip(1)
            .any(|dir| matches!(dir, "tests" | "test" | "testing"));
        let python_test = file_name.ends_with(".py")
            && (file_name.starts_with("test_")
                || file_name.ends_with("_test.py")
                || file_name == "conftest.py");
        in_test_dir || python_test
    }

    /// Is this test file one the runner itself loads tests from (rather than a fixture)?
    pub fn is_test_module(self, path: &str) -> bool {
        let file_name = path.rsplit('/').next().unwrap_or(path);
        file_name.ends_with(".py")
            && match self {
                Self::Pytest => file_name.starts_with("test_") || file_name.ends_with("_test.py"),
                Self::Unittest => file_name.starts_with("test"),
            }
    }

    /// The full argv for a run of `files` (all tests when empty), narrowed to `names` (by
    /// substring for pytest's `-k`; exact attribution happens later from the report).
    pub fn command(self, prefix: &[String], files: &[String], names: &[String]) -> Vec<String> {
        let mut argv = prefix.to_vec();
        match self {
            Self::Pytest => {
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
            }
            Self::Unittest => {
                argv.extend(["{adapter}", "--report", "{report}"].map(String::from));
                for name in names {
                    argv.push("--name".into());
                    argv.push(name.clone());
                }
                argv.extend(files.iter().cloned());
            }
        }
        argv
    }

    /// The argv that lists a suite's cases without running them. pytest prints node ids on
    /// stdout; the unittest adapter writes `assay.unittest.cases/v1` to `{report}`.
    pub fn collect_command(self, prefix: &[String]) -> Vec<String> {
        let mut argv = prefix.to_vec();
        match self {
            Self::Pytest => {
                argv.extend(["-p", "no:cacheprovider", "--collect-only", "-q"].map(String::from))
            }
            Self::Unittest => {
                argv.extend(["{adapter}", "--collect", "--report", "{report}"].map(String::from))
            }
        }
        argv
    }

    /// The argv that runs exactly the collected cases `ids` (runner-native ids from
    /// [`Self::collect_command`]), writing the structured report.
    pub fn case_command(self, prefix: &[String], ids: &[String]) -> Vec<String> {
        match self {
            Self::Pytest => self.command(prefix, ids, &[]),
            Self::Unittest => {
                let mut argv = prefix.to_vec();
                argv.extend(["{adapter}", "--report", "{report}"].map(String::from));
                for id in ids {
                    argv.push("--id".into());
                    argv.push(id.clone());
                }
                argv
            }
        }
    }
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

/// The structured report a job writes at `{report}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportFormat {
    JunitXml,
    UnittestJson,
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn unknown_runner_lists_the_known_ones() {
        let err = "jest".parse::<RunnerKind>().unwrap_err();
        assert!(err.contains("pytest, unittest"), "{err}");
    }
}
