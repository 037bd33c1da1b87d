//! The Go tests a tree declares, read from its `_test.go` files before the tests run, and the
//! check that a `go test -json` run reported each one it selected.
//!
//! The event stream is the guest's own output: a test can print `--- PASS: TestX` and leave
//! with `syscall.Exit(0)` (which `-test.paniconexit0` does not catch), and test2json reads the
//! printed line as a pass while every test after it never runs. The source, read on the host
//! before the guest starts, says which top-level tests the run should have reported; one that
//! a package's report lacks means the run ended early, so the report is not evidence.

use crate::outcome::TestReport;
use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

/// Top-level test functions by package import path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeclaredTests {
    by_package: BTreeMap<String, BTreeSet<String>>,
    /// Packages with a test file whose declarations could not be read: the first such file
    /// and why. A run that reports such a package cannot be checked against its tests.
    unreadable: BTreeMap<String, Unreadable>,
    /// A test file whose package cannot be named, since the `go.mod` above it could not be
    /// read: no package of the run can be told apart from it.
    unplaced: Option<Unreadable>,
}

/// A `go.mod` or `_test.go` file of the tree as the reader found it.
#[derive(Clone, Copy, Debug)]
pub enum TreeFile<'a> {
    /// Its content (through a link that stays inside the tree, the link's target's).
    Read(&'a [u8]),
    /// It is there, but what the go command would read of it cannot be vouched for: a link
    /// that leads out of the tree, dangles or loops, or a file that could not be read. Why.
    Unreadable(&'a str),
}

/// A file whose declarations could not be read, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Unreadable {
    path: String,
    why: String,
}

/// What a directory's nearest `go.mod` says.
enum Module {
    Path(String),
    Unreadable(Unreadable),
}

/// Operating systems and architectures Go reads from a file name's last `_` elements; a file
/// named for another platform than this one's is not built here.
const GOOS: &[&str] = &[
    "aix",
    "android",
    "darwin",
    "dragonfly",
    "freebsd",
    "hurd",
    "illumos",
    "ios",
    "js",
    "linux",
    "nacl",
    "netbsd",
    "openbsd",
    "plan9",
    "solaris",
    "wasip1",
    "windows",
    "zos",
];
const GOARCH: &[&str] = &[
    "386", "amd64", "arm", "arm64", "loong64", "mips", "mips64", "mips64le", "mipsle", "ppc64",
    "ppc64le", "riscv64", "s390x", "sparc64", "wasm",
];

impl DeclaredTests {
    /// Reads `files` (tree-relative paths and their contents: every `go.mod` and `_test.go`
    /// file of the tree). A file with a build constraint, or named for another platform, is
    /// left out: whether it is built is not known here, and a test left out is only a test
    /// not checked.
    pub fn read<'a>(files: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Self {
        Self::read_found(
            files
                .into_iter()
                .map(|(path, bytes)| (path, TreeFile::Read(bytes))),
        )
    }

    /// [`DeclaredTests::read`] over the files as the reader found them: a test file that
    /// could not be read leaves its package's declarations unknown (a report of that package
    /// is then not evidence), a `go.mod` that could not be read every package under it.
    pub fn read_found<'a>(files: impl IntoIterator<Item = (&'a str, TreeFile<'a>)>) -> Self {
        let mut modules: BTreeMap<String, Module> = BTreeMap::new(); // directory -> module
        let mut tests: Vec<(String, Result<Vec<String>, Unreadable>)> = Vec::new(); // by directory
        for (path, file) in files {
            let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
            let unreadable = |why: &str| Unreadable {
                path: path.to_owned(),
                why: why.to_owned(),
            };
            if name == "go.mod" {
                match file {
                    TreeFile::Read(bytes) => {
                        if let Some(module) = std::str::from_utf8(bytes).ok().and_then(module_path)
                        {
                            modules.insert(dir.to_owned(), Module::Path(module));
                        }
                    }
                    TreeFile::Unreadable(why) => {
                        modules.insert(dir.to_owned(), Module::Unreadable(unreadable(why)));
                    }
                }
            } else if name.ends_with("_test.go") && built_here(dir, name) {
                match file {
                    TreeFile::Read(bytes) => {
                        let Ok(text) = std::str::from_utf8(bytes) else {
                            continue;
                        };
                        if !constrained(text) {
                            tests.push((dir.to_owned(), Ok(test_functions(text))));
                        }
                    }
                    // Whether it is constrained is not known either: it counts.
                    TreeFile::Unreadable(why) => tests.push((dir.to_owned(), Err(unreadable(why)))),
                }
            }
        }
        let mut declared = Self::default();
        for (dir, names) in tests {
            let package = match import_path(&modules, &dir) {
                None => continue,
                Some(Module::Path(package)) => package,
                Some(Module::Unreadable(module)) => {
                    declared.unplaced.get_or_insert(module);
                    continue;
                }
            };
            match names {
                Ok(names) => declared
                    .by_package
                    .entry(package)
                    .or_default()
                    .extend(names),
                Err(file) => {
                    declared.unreadable.entry(package).or_insert(file);
                }
            }
        }
        declared
    }

    /// Whether no test was declared and no test file was left unread.
    pub fn is_empty(&self) -> bool {
        self.by_package.values().all(BTreeSet::is_empty)
            && self.unreadable.is_empty()
            && self.unplaced.is_none()
    }

    /// Why `report`, from a run of `command` (a `go test` command line), is not a whole run:
    /// a package it reports lacks a top-level test the run selected. `None` when every one is
    /// there, or when the command's selection cannot be told (`-failfast` stops at the first
    /// failure, a `-skip`, a `-run` pattern this check cannot compile).
    pub fn missing(&self, report: &TestReport, command: &[String]) -> Option<String> {
        let pattern = match selection(command)? {
            Some(pattern) => Some(Regex::new(&pattern).ok()?),
            None => None,
        };
        let mut reported: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for case in &report.cases {
            let top = case.name.split('/').next().unwrap_or(&case.name);
            reported.entry(case.file.as_str()).or_default().insert(top);
        }
        let cannot_check = |file: &Unreadable, whose: &str| {
            format!(
                "{whose} test file {} {}: the tests it declares cannot be read, so the run cannot be checked against them (the go command reads what the link leads to)",
                file.path, file.why
            )
        };
        if let Some(module) = &self.unplaced
            && !reported.is_empty()
        {
            return Some(format!(
                "{} {}: the packages under it cannot be named, so the run cannot be checked against the tests they declare",
                module.path, module.why
            ));
        }
        for package in reported.keys() {
            if let Some(file) = self.unreadable.get(*package) {
                return Some(cannot_check(file, &format!("package {package}'s")));
            }
        }
        for (package, names) in &reported {
            let Some(declared) = self.by_package.get(*package) else {
                continue;
            };
            let absent: Vec<&str> = declared
                .iter()
                .map(String::as_str)
                .filter(|name| pattern.as_ref().is_none_or(|p| p.is_match(name)))
                .filter(|name| !names.contains(name))
                .collect();
            if let Some(first) = absent.first() {
                let more = match absent.len() {
                    1 => String::new(),
                    n => format!(" and {} more", n - 1),
                };
                return Some(format!(
                    "package {package} never reported {first}{more}, which its test files declare and the run selected: the test process ended before it ran (a test that exits the process, as `syscall.Exit` does, ends the run early)"
                ));
            }
        }
        None
    }
}

/// The first level of the run's `-run` pattern (`None`: every test), or `None` outright when
/// the selection cannot be told from the command line.
fn selection(command: &[String]) -> Option<Option<String>> {
    let mut pattern = None;
    let mut args = command.iter();
    while let Some(arg) = args.next() {
        let flag = arg.trim_start_matches('-');
        let (name, value) = match flag.split_once('=') {
            Some((name, value)) => (name, Some(value.to_owned())),
            None => (flag, None),
        };
        let name = name.strip_prefix("test.").unwrap_or(name);
        if !arg.starts_with('-') {
            continue;
        }
        match name {
            "failfast" | "skip" | "list" => return None,
            "run" => {
                let value = match value {
                    Some(value) => value,
                    None => args.next()?.clone(),
                };
                pattern = Some(first_level(&value));
            }
            _ => {}
        }
    }
    Some(pattern.filter(|p| !p.is_empty()))
}

/// What Go matches a top-level test's name against: the pattern up to its first `/` outside
/// brackets and parentheses.
fn first_level(pattern: &str) -> String {
    let mut depth = 0i32;
    let mut escaped = false;
    for (at, c) in pattern.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '/' if depth == 0 => return pattern[..at].to_owned(),
            _ => {}
        }
    }
    pattern.to_owned()
}

fn module_path(go_mod: &str) -> Option<String> {
    go_mod.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("module")?;
        let path = rest.trim().trim_matches('"');
        (!path.is_empty() && rest.starts_with(char::is_whitespace)).then(|| path.to_owned())
    })
}

/// The import path of the package in `dir`: its nearest module's path and the rest; or that
/// module's `go.mod`, when it could not be read.
fn import_path(modules: &BTreeMap<String, Module>, dir: &str) -> Option<Module> {
    let mut at = dir;
    loop {
        if let Some(module) = modules.get(at) {
            let module = match module {
                Module::Path(module) => module,
                Module::Unreadable(file) => return Some(Module::Unreadable(file.clone())),
            };
            let rest = dir[at.len()..].trim_start_matches('/');
            return Some(Module::Path(match rest {
                "" => module.clone(),
                rest => format!("{module}/{rest}"),
            }));
        }
        if at.is_empty() {
            return None;
        }
        at = at.rsplit_once('/').map_or("", |(parent, _)| parent);
    }
}

/// Whether the go command builds this test file here: not under `testdata`, `vendor` or a
/// directory Go ignores, and not named for another platform.
fn built_here(dir: &str, name: &str) -> bool {
    let ignored = |part: &str| {
        part == "testdata" || part == "vendor" || part.starts_with('_') || part.starts_with('.')
    };
    if dir.split('/').filter(|p| !p.is_empty()).any(ignored) || ignored(name) {
        return false;
    }
    let here_arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    };
    let stem = name.trim_end_matches("_test.go");
    let parts: Vec<&str> = stem.split('_').skip(1).collect();
    let platform = |part: &str| GOOS.contains(&part) || GOARCH.contains(&part);
    parts
        .iter()
        .rev()
        .take(2)
        .filter(|part| platform(part))
        .all(|part| *part == "linux" || *part == here_arch)
}

/// Whether a build constraint comes before the package clause.
fn constrained(text: &str) -> bool {
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("package ") {
            return false;
        }
        if line.starts_with("//go:build") || line.starts_with("// +build") {
            return true;
        }
    }
    false
}

/// A test function's first line, compiled once for every file of every job.
static TEST_DECLARATION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^func\s+(Test[^\s(]*)\s*\(\s*\w+\s+\*testing\.T\s*\)").expect("a valid pattern")
});

/// The names of the top-level `func TestXxx(t *testing.T)` declarations, outside comments and
/// string literals (a test that writes Go source holds such lines in a raw string).
fn test_functions(text: &str) -> Vec<String> {
    let declaration = &*TEST_DECLARATION;
    let mut names = Vec::new();
    let mut state = Lexed::Code;
    let mut line_start = true;
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let c = bytes[at];
        if line_start && state == Lexed::Code && text[at..].starts_with("func ") {
            let line = text[at..].lines().next().unwrap_or("");
            if let Some(name) = declaration.captures(line).and_then(|c| c.get(1))
                && is_test_name(name.as_str())
            {
                names.push(name.as_str().to_owned());
            }
        }
        line_start = c == b'\n';
        state = match (state, c) {
            (Lexed::Code, b'/') if bytes.get(at + 1) == Some(&b'/') => Lexed::LineComment,
            (Lexed::Code, b'/') if bytes.get(at + 1) == Some(&b'*') => {
                at += 1;
                Lexed::BlockComment
            }
            (Lexed::Code, b'"') => Lexed::Interpreted,
            (Lexed::Code, b'\'') => Lexed::Rune,
            (Lexed::Code, b'`') => Lexed::Raw,
            (Lexed::LineComment, b'\n') => Lexed::Code,
            (Lexed::BlockComment, b'*') if bytes.get(at + 1) == Some(&b'/') => {
                at += 1;
                Lexed::Code
            }
            (Lexed::Interpreted | Lexed::Rune, b'\\') => {
                at += 1;
                state
            }
            (Lexed::Interpreted, b'"') | (Lexed::Rune, b'\'') | (Lexed::Raw, b'`') => Lexed::Code,
            (Lexed::Interpreted | Lexed::Rune, b'\n') => Lexed::Code,
            (state, _) => state,
        };
        at += 1;
    }
    names
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Lexed {
    Code,
    LineComment,
    BlockComment,
    Interpreted,
    Rune,
    Raw,
}

/// Go's rule: `Test`, or `Test` followed by anything but a lower-case letter.
fn is_test_name(name: &str) -> bool {
    name.strip_prefix("Test")
        .and_then(|rest| rest.chars().next())
        .is_none_or(|c| !c.is_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{CaseResult, Outcome};

    fn report(cases: &[(&str, &str)]) -> TestReport {
        TestReport {
            cases: cases
                .iter()
                .map(|(package, name)| CaseResult {
                    file: (*package).into(),
                    suite: String::new(),
                    name: (*name).into(),
                    variant: None,
                    outcome: Outcome::Passed,
                    message: None,
                })
                .collect(),
            ..TestReport::default()
        }
    }

    fn argv(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    const LEDGER_TEST: &str = r#"package ledger

import "testing"

func TestBalance(t *testing.T) {
	src := `
func TestInsideARawString(t *testing.T) {}
`
	_ = src
}

/*
func TestCommentedOut(t *testing.T) {}
*/

func Testify(t *testing.T) {}

func TestTotal_rounding(t *testing.T) {}

func helper(t *testing.T) {}
"#;

    fn tree() -> DeclaredTests {
        DeclaredTests::read([
            ("go.mod", b"module example.com/ledger\n\ngo 1.19\n".as_slice()),
            ("ledger_test.go", LEDGER_TEST.as_bytes()),
            (
                "cache/cache_test.go",
                b"package cache_test\n\nimport \"testing\"\n\nfunc TestExpiry(t *testing.T) {}\n"
                    .as_slice(),
            ),
            (
                "cache/cache_windows_test.go",
                b"package cache\n\nimport \"testing\"\n\nfunc TestWindowsPaths(t *testing.T) {}\n"
                    .as_slice(),
            ),
            (
                "cache/slow_test.go",
                b"//go:build integration\n\npackage cache\n\nimport \"testing\"\n\nfunc TestSlow(t *testing.T) {}\n"
                    .as_slice(),
            ),
            (
                "testdata/x_test.go",
                b"package x\n\nimport \"testing\"\n\nfunc TestFixture(t *testing.T) {}\n".as_slice(),
            ),
        ])
    }

    #[test]
    fn declarations_are_read_as_go_builds_and_runs_them() {
        let declared = tree();
        let names = |package: &str| -> Vec<&str> {
            declared.by_package[package]
                .iter()
                .map(String::as_str)
                .collect()
        };
        assert_eq!(
            names("example.com/ledger"),
            ["TestBalance", "TestTotal_rounding"]
        );
        assert_eq!(names("example.com/ledger/cache"), ["TestExpiry"]);
        assert_eq!(declared.by_package.len(), 2, "{declared:?}");
    }

    #[test]
    fn a_run_that_ended_before_a_selected_test_is_not_whole() {
        let declared = tree();
        let full = argv(&["go", "test", "-json", "-count=1", "./..."]);
        // The forged run: one test printed its own pass and left; the other never ran.
        let forged = report(&[("example.com/ledger", "TestTotal_rounding")]);
        let why = declared.missing(&forged, &full).expect("a test is missing");
        assert!(why.contains("never reported TestBalance"), "{why}");
        let whole = report(&[
            ("example.com/ledger", "TestBalance/subtest"),
            ("example.com/ledger", "TestTotal_rounding"),
            ("example.com/ledger/cache", "TestExpiry"),
        ]);
        assert_eq!(declared.missing(&whole, &full), None);
    }

    #[test]
    fn only_the_tests_the_run_pattern_selects_are_expected() {
        let declared = tree();
        let forged = report(&[("example.com/ledger", "TestTotal_rounding")]);
        let selected = argv(&["go", "test", "-run", "^(TestTotal_rounding)$/^(x)$", "."]);
        assert_eq!(declared.missing(&forged, &selected), None);
        let both = argv(&["go", "test", "-run=^(TestBalance|TestTotal_rounding)$", "."]);
        assert!(declared.missing(&forged, &both).is_some());
        // A selection this check cannot tell: nothing is claimed.
        for unknown in [
            argv(&["go", "test", "-failfast", "."]),
            argv(&["go", "test", "-run", "(unclosed", "."]),
        ] {
            assert_eq!(declared.missing(&forged, &unknown), None, "{unknown:?}");
        }
    }

    #[test]
    fn a_test_file_that_cannot_be_read_leaves_its_packages_report_unchecked() {
        let link_out = "is a link that leads out of the tree (to /etc/hostname)";
        let declared = DeclaredTests::read_found([
            (
                "go.mod",
                TreeFile::Read(b"module example.com/ledger\n\ngo 1.19\n"),
            ),
            ("ledger_test.go", TreeFile::Read(LEDGER_TEST.as_bytes())),
            ("cache/expiry_test.go", TreeFile::Unreadable(link_out)),
            // Another platform's file is not built here, readable or not.
            (
                "cache/paths_windows_test.go",
                TreeFile::Unreadable("is a dangling link"),
            ),
        ]);
        assert!(!declared.is_empty());
        let full = argv(&["go", "test", "-json", "-count=1", "./..."]);
        let cache = report(&[
            ("example.com/ledger", "TestBalance"),
            ("example.com/ledger", "TestTotal_rounding"),
            ("example.com/ledger/cache", "TestExpiry"),
        ]);
        let why = declared.missing(&cache, &full).expect("not checkable");
        assert!(
            why.contains("package example.com/ledger/cache's test file cache/expiry_test.go")
                && why.contains(link_out),
            "{why}"
        );
        // A report of the other package alone is checked as before.
        let ledger = report(&[
            ("example.com/ledger", "TestBalance"),
            ("example.com/ledger", "TestTotal_rounding"),
        ]);
        assert_eq!(declared.missing(&ledger, &full), None);
    }

    #[test]
    fn a_go_mod_that_cannot_be_read_leaves_every_package_under_it_unchecked() {
        let declared = DeclaredTests::read_found([
            ("go.mod", TreeFile::Unreadable("is a dangling link")),
            ("ledger_test.go", TreeFile::Read(LEDGER_TEST.as_bytes())),
        ]);
        let full = argv(&["go", "test", "-json", "./..."]);
        let any = report(&[("example.com/ledger", "TestBalance")]);
        let why = declared.missing(&any, &full).expect("not checkable");
        assert!(why.starts_with("go.mod is a dangling link"), "{why}");
        assert_eq!(declared.missing(&report(&[]), &full), None);
    }

    #[test]
    fn patterns_split_at_their_first_top_level_slash() {
        assert_eq!(first_level("^(TestA|TestB)$/^(x/y)$"), "^(TestA|TestB)$");
        assert_eq!(first_level("Test[/]A/x"), "Test[/]A");
        assert_eq!(first_level("TestA"), "TestA");
    }
}
