//! Prebuilt Rust test executables (`assay.test-binaries/v1`): what a build job keeps (see
//! [`crate::job::TestBinaries`]) and how a run job runs it. The archive is a tar of
//! `index.json` ([`Index`]) and one `bin/FILE` per executable. The worker writes it from a
//! build it watched, so nothing in it is the guest's text but paths it checked: file names
//! and package directories are confined to plain relative paths, and cargo's message for each
//! executable is rebuilt from the fields the report reads, never copied.
//!
//! A run job's command starts `sh {test_binaries}`: [`script`] prints those messages on stdout
//! and runs each executable in its package's directory, announcing it on stderr the way cargo
//! does, so [`crate::report::libtest::parse_cargo_output`] reads the run like `cargo test`'s.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The artifact a build job stores, and the name its archive goes by.
pub const ARTIFACT: &str = "test-binaries";

/// What the worker replaces in a run job's command with the path of the [`script`].
pub const PLACEHOLDER: &str = "{test_binaries}";

/// The `schema` an archive's index declares.
pub const SCHEMA: &str = "assay.test-binaries/v1";

/// Where the build persists its doc tests, relative to the tree, and the file in it that
/// says how each one exits unmutated.
pub const DOC_TESTS_DIR: &str = "target/assay-doctests";
/// The file in [`DOC_TESTS_DIR`] of each doc test's unmutated exit code (`NAME CODE` lines).
pub const DOC_TESTS_EXPECTED: &str = "expected";

/// The build job's shell script, run as `sh -c SCRIPT assay-build ARGS…` with `cargo test`'s
/// arguments: the tests built (cargo's messages on stdout), then the library's doc tests
/// compiled once and each kept as an executable of its own (rustdoc's `--persist-doctests`,
/// which a stable toolchain allows under `RUSTC_BOOTSTRAP`), then each run once unmutated to
/// learn how it must exit (a `should_panic` test fails on purpose; one that hangs is dropped).
/// A crate whose doc tests do not build still builds its tests: its doc tests are left out.
const BUILD_SCRIPT: &str = r#"cargo test --no-run --message-format=json "$@" || exit $?
out="$PWD/target/assay-doctests"
rm -rf "$out"
RUSTC_BOOTSTRAP=1 RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -Z unstable-options --persist-doctests $out"     cargo test --doc "$@" </dev/null >/dev/null 2>&1 || true
for exe in "$out"/*/rust_out; do
    [ -f "$exe" ] || continue
    dir=${exe%/rust_out}
    timeout 60 "$exe" </dev/null >/dev/null 2>&1
    echo "${dir##*/} $?"
done > "$out/../assay-doctests.expected" 2>/dev/null
mv "$out/../assay-doctests.expected" "$out/expected" 2>/dev/null
exit 0
"#;

/// The build job's command for `cargo test` with `args` (`--workspace`, `-p ledger`, …).
pub fn build_command(args: &[String]) -> Vec<String> {
    let mut argv: Vec<String> = ["sh", "-c", BUILD_SCRIPT, "assay-build"]
        .map(String::from)
        .into();
    argv.extend(args.iter().cloned());
    argv
}

/// The doc tests' exit codes the build recorded (`NAME CODE` lines), those that ran to an end
/// of their own: `timeout`'s 124 (hung) and the shell's 125–127 (never ran) are dropped.
pub fn doc_test_expectations(text: &str) -> Vec<DocTest> {
    text.lines()
        .filter_map(|line| {
            let (name, code) = line.split_once(' ')?;
            let code: i32 = code.trim().parse().ok()?;
            (check_file(name).is_ok() && !(124..=127).contains(&code)).then(|| DocTest {
                name: name.to_owned(),
                passes: code == 0,
            })
        })
        .collect()
}

/// The archive's table of contents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Index {
    /// The index's format: always [`SCHEMA`].
    pub schema: String,
    /// Every test executable the archive holds, in build order.
    pub binaries: Vec<Binary>,
    /// The library's doc tests, each at `doc/NAME`; run in `doc_crate`'s directory.
    #[serde(default)]
    pub doc_tests: Vec<DocTest>,
    /// The library the doc tests belong to (cargo's `Doc-tests` name), and its directory.
    #[serde(default)]
    pub doc_crate: String,
    /// The doc tests' library's package directory, relative to the tree.
    #[serde(default)]
    pub doc_dir: String,
}

/// One persisted doc test: its directory's name (`src_lib_rs_348_0`) and whether it exits 0
/// unmutated (a `should_panic` test does not).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocTest {
    /// The doc test's directory name in the archive (`src_lib_rs_348_0`).
    pub name: String,
    /// Whether it exits 0 unmutated.
    pub passes: bool,
}

/// One test executable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binary {
    /// Its file name, as cargo built it (`pager-54c5b536b5039199`); the archive holds it at
    /// `bin/FILE`.
    pub file: String,
    /// Its package's directory relative to the tree (empty for the root), where cargo runs it.
    pub package_dir: String,
    /// Cargo's `compiler-artifact` message for it, as one JSON line naming `file`.
    pub message: String,
}

/// Which of the prebuilt tests a run job runs: for a mutant, those that reach its code in the
/// unmutated run's trace. Tests absent from it do not run at all.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selection {
    /// By binary id (a report's `file`: `pager`, `pager::api`): every test of it when `None`,
    /// else these names, each run with `--exact`.
    pub binaries: BTreeMap<String, Option<BTreeSet<String>>>,
    /// Doc tests, by name (`src_lib_rs_348_0`).
    pub doc_tests: BTreeSet<String>,
}

impl Selection {
    /// Checks every name a selection holds: test names as libtest prints them, doc test names
    /// as plain file names.
    pub fn check(&self) -> Result<(), IndexError> {
        for name in self.binaries.values().flatten().flatten() {
            check_test_name(name)?;
        }
        for name in &self.doc_tests {
            check_file(name)?;
        }
        Ok(())
    }
}

/// Checks a test's name as libtest prints it and takes it as an argument: a Rust path
/// (`tests::counts_pages`), so nothing a shell or libtest's option parser reads differently.
pub fn check_test_name(name: &str) -> Result<(), IndexError> {
    let plain = !name.is_empty()
        && name.len() <= 1024
        && !name.starts_with(':')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':'));
    if plain {
        Ok(())
    } else {
        Err(IndexError::TestName(name.to_owned()))
    }
}

/// Why a build's output or an archive's index is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IndexError {
    /// The index is not JSON of this schema, or a binary's message does not parse.
    #[error("the index is not {SCHEMA}: {0}")]
    Malformed(String),
    /// An executable's file name has a directory or is not plain.
    #[error("test executable {0:?} is not a plain file name")]
    FileName(String),
    /// A package directory is absolute or leaves the tree.
    #[error("package directory {0:?} is not a plain path inside the tree")]
    PackageDir(String),
    /// A test name to select is not a plain Rust path.
    #[error("test name {0:?} is not a plain Rust path")]
    TestName(String),
}

/// A test executable cargo reported building, in the guest's paths.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Built {
    /// The executable's path, as cargo reported it.
    pub executable: String,
    /// The `Cargo.toml` of its package, as cargo reported it.
    pub manifest_path: String,
    /// The message the run's report will read: the target and package only.
    pub message: String,
}

/// What is read back of a built binary's message (cargo's `compiler-artifact` line, as
/// [`Built::message`] keeps it): its executable and its target.
#[derive(Debug, Default, Deserialize)]
pub struct BuiltMessage {
    /// The executable cargo built.
    #[serde(default)]
    pub executable: Option<String>,
    /// The target it was built for.
    #[serde(default)]
    pub target: BuiltTarget,
    /// A Go build's tool directory (`go env GOTOOLDIR`), where its test2json is.
    #[serde(default)]
    pub go_tool_dir: Option<String>,
}

/// A built binary's target, as cargo names it.
#[derive(Debug, Default, Deserialize)]
pub struct BuiltTarget {
    /// The target's name (the crate's, for its library).
    #[serde(default)]
    pub name: String,
    /// Its kinds: `lib`, `bin`, `test`, …
    #[serde(default)]
    pub kind: Vec<String>,
}

impl BuiltMessage {
    /// `message` read, or why it cannot be.
    pub fn parse(message: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(message)
    }
}

#[derive(Deserialize)]
struct Artifact {
    reason: String,
    #[serde(default)]
    package_id: String,
    #[serde(default)]
    manifest_path: String,
    #[serde(default)]
    target: Option<serde_json::Value>,
    #[serde(default)]
    profile: Option<Profile>,
    #[serde(default)]
    executable: Option<String>,
    #[serde(default)]
    go_tool_dir: Option<String>,
}

#[derive(Deserialize)]
struct Profile {
    #[serde(default)]
    test: bool,
}

/// The test executables in `cargo test --no-run --message-format=json`'s stdout, in build
/// order; lines that are not cargo's messages are skipped (the worker checks every path).
pub fn built(stdout: &str) -> Vec<Built> {
    let mut built = Vec::new();
    for line in stdout.lines().filter(|l| l.starts_with('{')) {
        let Ok(artifact) = serde_json::from_str::<Artifact>(line) else {
            continue;
        };
        let (Some(executable), Some(target), true) = (
            artifact.executable,
            artifact.target,
            artifact.reason == "compiler-artifact" && artifact.profile.is_some_and(|p| p.test),
        ) else {
            continue;
        };
        let file = executable.rsplit('/').next().unwrap_or(&executable);
        let mut message = serde_json::json!({
            "reason": "compiler-artifact",
            "package_id": artifact.package_id,
            "target": {"kind": target["kind"], "name": target["name"]},
            "executable": file,
        });
        if let Some(dir) = artifact.go_tool_dir.filter(|dir| check_go_tool_dir(dir)) {
            message["go_tool_dir"] = dir.into();
        }
        built.push(Built {
            executable: executable.clone(),
            manifest_path: artifact.manifest_path,
            message: message.to_string(),
        });
    }
    built
}

/// Checks a file name: no directory, nothing a shell or the archive could read differently.
pub fn check_file(file: &str) -> Result<(), IndexError> {
    let plain = !file.is_empty()
        && file != "."
        && file != ".."
        && file
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if plain {
        Ok(())
    } else {
        Err(IndexError::FileName(file.to_owned()))
    }
}

/// Checks a package directory: relative, no `..`, no empty or odd component.
pub fn check_package_dir(dir: &str) -> Result<(), IndexError> {
    if dir.is_empty() {
        return Ok(());
    }
    let plain = !dir.starts_with('/')
        && dir.split('/').all(|part| {
            !part.is_empty()
                && part != "."
                && part != ".."
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+'))
        });
    if plain {
        Ok(())
    } else {
        Err(IndexError::PackageDir(dir.to_owned()))
    }
}

impl Index {
    /// An index of `binaries` and no doc tests.
    pub fn new(binaries: Vec<Binary>) -> Self {
        Self {
            schema: SCHEMA.to_owned(),
            binaries,
            doc_tests: Vec::new(),
            doc_crate: String::new(),
            doc_dir: String::new(),
        }
    }

    /// Reads and checks an index: its schema, every file name and package directory, and
    /// every message naming its own file.
    pub fn read(bytes: &[u8]) -> Result<Self, IndexError> {
        let index: Self =
            serde_json::from_slice(bytes).map_err(|e| IndexError::Malformed(e.to_string()))?;
        if index.schema != SCHEMA {
            return Err(IndexError::Malformed(format!("schema {:?}", index.schema)));
        }
        for doc in &index.doc_tests {
            check_file(&doc.name)?;
        }
        if !index.doc_tests.is_empty() {
            check_file(&index.doc_crate)?;
            check_package_dir(&index.doc_dir)?;
        }
        for binary in &index.binaries {
            check_file(&binary.file)?;
            check_package_dir(&binary.package_dir)?;
            let message = BuiltMessage::parse(&binary.message)
                .map_err(|e| IndexError::Malformed(format!("{}: {e}", binary.file)))?;
            if message.executable.as_deref() != Some(binary.file.as_str())
                || binary.message.contains('\n')
            {
                return Err(IndexError::Malformed(format!(
                    "the message of {} names another executable",
                    binary.file
                )));
            }
        }
        Ok(index)
    }
}

/// The run job's script: cargo's messages on stdout, then each executable in its package's
/// directory with the job's arguments, announced on stderr as cargo announces it, stopping at
/// the first that fails (its exit code is the script's). The one that failed runs once more at
/// once, announced again: its second block is the kill's confirmation
/// ([`crate::report::libtest::RERUN_VARIANT`]), so no job of its own is needed for it. With a
/// `selection`, only what it names runs. Where the job sets the schema's trace variable, each
/// executable runs with it set to its own label (`bin:ID`, `doc:NAME`), so the trace says
/// which one reached a site. Every name was checked by [`Index::read`] or
/// [`Selection::check`]; they are quoted all the same.
pub fn script(index: &Index, selection: Option<&Selection>) -> String {
    let mut script = format!(
        "# Runs the prebuilt test executables beside this script as `cargo test` would.\n\
         case $0 in /*) here=${{0%/*}} ;; */*) here=$PWD/${{0%/*}} ;; *) here=$PWD ;; esac\n\
         root=$PWD\n\
         if [ -n \"${{{TRACE_VARIABLE}:-}}\" ]; then exec 3>&2; echo {TRACE_ON} >&2; \
         else exec 3>/dev/null; fi\n"
    );
    for binary in index
        .binaries
        .iter()
        .filter(|b| go_package(&b.message).is_none())
    {
        script.push_str(&format!("printf '%s\\n' {}\n", quote(&binary.message)));
    }
    for binary in &index.binaries {
        if let Some(import_path) = go_package(&binary.message) {
            go_script(&mut script, binary, &import_path, selection);
            continue;
        }
        let id = crate::report::libtest::binary_id_of(&binary.message).unwrap_or_default();
        let exact = match selection.map(|s| s.binaries.get(&id)) {
            None | Some(Some(None)) => String::new(),
            Some(None) => continue,
            Some(Some(Some(names))) => std::iter::once("--exact".to_owned())
                .chain(names.iter().map(|n| quote(n)))
                .fold(String::new(), |line, word| line + " " + &word),
        };
        let file = quote(&binary.file);
        let dir = quote(&binary.package_dir);
        let label = quote(&format!("bin:{id}"));
        script.push_str(&format!(
            "run() {{ printf '     Running %s (%s)\\n' {file} \"$here/bin/\"{file} >&2\n\
             (cd \"$root/\"{dir} && CARGO_MANIFEST_DIR=\"$root/\"{dir} {TRACE_VARIABLE}=${{{TRACE_VARIABLE}:+{label}}} exec \"$here/bin/\"{file} \"$@\"{exact}) 3>&-; }}\n\
             run \"$@\" || {{ code=$?; run \"$@\"; exit $code; }}\n"
        ));
    }
    // Each doc test is a block of one, written here from its exit code (its own output is
    // thrown away, so it cannot print a result; its stderr carries the trace when traced),
    // after the binaries as cargo orders them. A doc test is selected by no name: with
    // arguments (a selection of binaries' tests), none runs.
    let docs: Vec<&DocTest> = index
        .doc_tests
        .iter()
        .filter(|doc| selection.is_none_or(|s| s.doc_tests.contains(&doc.name)))
        .collect();
    if !docs.is_empty() {
        let krate = quote(&index.doc_crate);
        let dir = quote(&index.doc_dir);
        script.push_str("[ $# -eq 0 ] || exit 0\n");
        for doc in docs {
            let name = quote(&doc.name);
            let label = quote(&format!("doc:{}", doc.name));
            let test = if doc.passes { "-eq" } else { "-ne" };
            script.push_str(&format!(
                "printf 'Doc-tests %s\\n' {krate} >&2\n\
                 (cd \"$root/\"{dir} && {TRACE_VARIABLE}=${{{TRACE_VARIABLE}:+{label}}} exec \"$here/doc/\"{name}) </dev/null >/dev/null 2>&3\n\
                 if [ $? {test} 0 ]; then\n\
                 printf 'running 1 test\\ntest %s ... ok\\n\\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\\n\\n' {name}\n\
                 else\n\
                 printf 'running 1 test\\ntest %s ... FAILED\\n\\nfailures:\\n\\nfailures:\\n    %s\\n\\ntest result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\\n\\n' {name} {name}\n\
                 exit 101\n\
                 fi\n"
            ));
        }
    }
    script
}

/// The target kind of a Go package's test executable (`go test -c`) in its build message.
pub const GO_TEST_KIND: &str = "go-test";

/// The file a Go test executable appends its trace to: test2json reads the executable's
/// stderr as its output, so the script copies the file to its own stderr after each test.
pub const TRACE_FILE_VARIABLE: &str = "ASSAY_MUTANT_TRACE_FILE";

/// The variable naming the test a Go trace run runs alone: the schema writes it beside each
/// site the test reaches.
pub const TRACE_TEST_VARIABLE: &str = "ASSAY_MUTANT_TRACE_TEST";

/// The build message of a Go package's test executable: what [`built`] reads back (the
/// package's directory is the manifest path's), naming the package by import path.
pub fn go_message(import_path: &str, executable: &str, package_dir: &str) -> String {
    serde_json::json!({
        "reason": "compiler-artifact",
        "package_id": format!("go {import_path}"),
        "manifest_path": format!("{}/go-package", package_dir.trim_end_matches('/')),
        "target": {"kind": [GO_TEST_KIND], "name": import_path},
        "profile": {"test": true},
        "executable": executable,
    })
    .to_string()
}

/// The import path of a Go package's test executable, from its message; `None` for cargo's.
pub fn go_package(message: &str) -> Option<String> {
    let message = BuiltMessage::parse(message).ok()?;
    (message.target.kind.iter().any(|k| k == GO_TEST_KIND)
        && check_import_path(&message.target.name))
    .then_some(message.target.name)
}

/// Whether `path` is a plain Go import path: what a shell, a regexp or JSON reads as written.
pub fn check_import_path(path: &str) -> bool {
    !path.is_empty() && !path.starts_with(['-', '/']) && plain_path(path)
}

/// Whether `path` is short and of characters a shell, a regexp or JSON reads as written.
fn plain_path(path: &str) -> bool {
    path.len() <= 1024
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | '~' | '+'))
}

/// Whether `dir` is a plain absolute directory a Go build may name as its tool directory.
fn check_go_tool_dir(dir: &str) -> bool {
    dir.starts_with('/') && !dir.split('/').any(|part| part == "..") && plain_path(dir)
}

/// The id a selection names an executable by: a Go package's import path, else the libtest
/// binary id.
pub fn binary_id(message: &str) -> Option<String> {
    go_package(message).or_else(|| crate::report::libtest::binary_id_of(message))
}

/// A Go package's test executable run as `go test -json` runs it: under test2json, in its
/// package's directory, `-test.v` and `-test.paniconexit0`, the selected top-level tests by
/// `-test.run`. Traced, each top-level test it lists runs alone in a process of its own with
/// its name in [`TRACE_TEST_VARIABLE`], so every site a process reaches is that test's. A run
/// that fails runs once more at once, its events under the package's name with
/// [`crate::report::go::RERUN_PACKAGE_SUFFIX`]: those cases confirm the kill, as a cargo run's
/// re-run block does, so no second job is needed. An executable that exits non-zero gets the
/// package's `fail` event the go command would add (a panic ends it before it prints `FAIL`).
/// test2json is found beside the `go` on the
/// `PATH` (the go command itself starts slowly), else asked of it.
fn go_script(
    script: &mut String,
    binary: &Binary,
    import_path: &str,
    selection: Option<&Selection>,
) {
    let pattern = match selection.map(|s| s.binaries.get(import_path)) {
        None | Some(Some(None)) => String::new(),
        Some(None) => return,
        Some(Some(Some(names))) if names.is_empty() => return,
        Some(Some(Some(names))) => {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            format!(" -test.run {}", quote(&format!("^({})$", names.join("|"))))
        }
    };
    let file = quote(&binary.file);
    let dir = quote(&binary.package_dir);
    let import = quote(import_path);
    let rerun = quote(&format!(
        "{import_path}{}",
        crate::report::go::RERUN_PACKAGE_SUFFIX
    ));
    let label = quote(&format!("bin:{import_path}"));
    // The build's own test2json, where this machine has it at the same place: no lookup.
    let recorded = BuiltMessage::parse(&binary.message)
        .ok()
        .and_then(|m| m.go_tool_dir)
        .filter(|dir| check_go_tool_dir(dir))
        .map_or_else(|| "''".to_owned(), |dir| quote(&format!("{dir}/test2json")));
    script.push_str(&format!(
        "t2j={recorded}; [ -x \"$t2j\" ] || {{ t2j=''; g=$(command -v go) && g=$(readlink -f \"$g\") && for t in \"${{g%/bin/go}}\"/pkg/tool/*/test2json; do [ -x \"$t\" ] && t2j=$t; done; }}\n\
         [ -n \"$t2j\" ] || t2j=$(go env GOTOOLDIR 2>/dev/null)/test2json\n\
         [ -x \"$t2j\" ] || t2j=''\n\
         gorun() {{ p=$1; shift; (cd \"$root/\"{dir} && if [ -n \"$t2j\" ]; then exec \"$t2j\" -p \"$p\" \"$here/bin/\"{file} -test.v -test.paniconexit0 \"$@\"; \
         else exec go tool test2json -p \"$p\" \"$here/bin/\"{file} -test.v -test.paniconexit0 \"$@\"; fi) 3>&-; \
         c=$?; [ $c -eq 0 ] || printf '{{\"Action\":\"fail\",\"Package\":\"%s\"}}\\n' \"$p\"; return $c; }}\n\
         if [ -n \"${{{TRACE_VARIABLE}:-}}\" ]; then\n\
         set -f; code=0; trace=$(mktemp) || exit 1\n\
         for name in $(cd \"$root/\"{dir} && \"$here/bin/\"{file} -test.list '.*' 2>/dev/null); do\n\
         case \"$name\" in Test*|Example*|Fuzz*) ;; *) continue ;; esac\n\
         export {TRACE_VARIABLE}={label} {TRACE_TEST_VARIABLE}=\"$name\" {TRACE_FILE_VARIABLE}=\"$trace\"\n\
         gorun {import} -test.run \"^$name\\$\" || code=$?\n\
         cat \"$trace\" >&2; : > \"$trace\"\n\
         done\n\
         rm -f \"$trace\"\n\
         [ $code -eq 0 ] || exit $code\n\
         else\n\
         gorun {import}{pattern} || {{ code=$?; gorun {rerun}{pattern}; exit $code; }}\n\
         fi\n"
    ));
}

/// The schema's trace variable (`mutants::rust::schema`'s, which sets what each site writes).
pub const TRACE_VARIABLE: &str = "ASSAY_MUTANT_TRACE";

/// The line the script writes to stderr first when the trace is on: without it, a run's
/// stderr says nothing of coverage (an empty trace would mean that no test reaches anything).
pub const TRACE_ON: &str = "assay-trace-on";

/// `text` in single quotes for sh.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUILD: &str = r#"{"reason":"compiler-artifact","package_id":"path+file:///work/tree#pager@0.1.0","manifest_path":"/work/tree/Cargo.toml","target":{"kind":["lib"],"crate_types":["lib"],"name":"pager","src_path":"/work/tree/src/lib.rs","edition":"2021","doc":true,"doctest":true,"test":true},"profile":{"opt_level":"0","debuginfo":0,"debug_assertions":true,"overflow_checks":true,"test":true},"features":[],"filenames":["/work/tree/target/debug/deps/pager-54c5"],"executable":"/work/tree/target/debug/deps/pager-54c5","fresh":false}
{"reason":"compiler-artifact","package_id":"path+file:///work/tree#pager@0.1.0","manifest_path":"/work/tree/Cargo.toml","target":{"kind":["lib"],"name":"pager"},"profile":{"test":false},"executable":null}
not a message
{"reason":"build-finished","success":true}
"#;

    #[test]
    fn only_test_executables_are_kept_with_a_message_rebuilt_from_their_target() {
        let built = built(BUILD);
        assert_eq!(built.len(), 1);
        assert_eq!(
            built[0].executable,
            "/work/tree/target/debug/deps/pager-54c5"
        );
        assert_eq!(built[0].manifest_path, "/work/tree/Cargo.toml");
        let message: serde_json::Value = serde_json::from_str(&built[0].message).unwrap();
        assert_eq!(message["executable"], "pager-54c5");
        assert_eq!(message["target"]["name"], "pager");
        assert!(message.get("filenames").is_none());
    }

    #[test]
    fn a_go_build_keeps_its_tool_directory_only_when_it_is_a_plain_absolute_path() {
        let line = |dir: &str| {
            let mut message: serde_json::Value = serde_json::from_str(&go_message(
                "example.com/m/calc",
                "/work/tree/.assay-go-tests/1.test",
                "/work/tree/calc",
            ))
            .unwrap();
            message["go_tool_dir"] = dir.into();
            message.to_string()
        };
        let kept = |dir: &str| {
            let built = built(&line(dir));
            assert_eq!(built.len(), 1, "{dir}");
            BuiltMessage::parse(&built[0].message).unwrap().go_tool_dir
        };
        let plain = "/usr/lib/go-1.19/pkg/tool/linux_amd64";
        assert_eq!(kept(plain).as_deref(), Some(plain));
        for hostile in [
            "pkg/tool",
            "/usr/lib/go/../../tmp",
            "/tmp/x'; id; '",
            "/tmp/$(id)",
            "/tmp/a\nb",
        ] {
            assert_eq!(kept(hostile), None, "{hostile}");
        }
    }

    #[test]
    fn names_that_could_leave_the_directory_or_the_quotes_are_refused() {
        for file in ["", "..", "a/b", "x'y", "x\ny", "$(id)"] {
            assert_eq!(check_file(file), Err(IndexError::FileName(file.into())));
        }
        for dir in ["/etc", "a/../..", "..", "a//b", "a/./b", "x'; id; '"] {
            assert_eq!(
                check_package_dir(dir),
                Err(IndexError::PackageDir(dir.into()))
            );
        }
        assert!(check_package_dir("crates/pager-core").is_ok());
        assert!(check_file("pager-54c5").is_ok());
    }

    #[test]
    fn an_index_whose_message_names_another_executable_is_refused() {
        let mut index = Index::new(vec![Binary {
            file: "pager-54c5".into(),
            package_dir: String::new(),
            message: built(BUILD)[0].message.clone(),
        }]);
        let bytes = serde_json::to_vec(&index).unwrap();
        assert_eq!(Index::read(&bytes).unwrap(), index);
        index.binaries[0].file = "other-1".into();
        let bytes = serde_json::to_vec(&index).unwrap();
        assert!(matches!(Index::read(&bytes), Err(IndexError::Malformed(_))));
        let wrong = br#"{"schema":"assay.test-binaries/v0","binaries":[]}"#;
        assert!(matches!(Index::read(wrong), Err(IndexError::Malformed(_))));
    }

    #[test]
    fn a_doc_test_record_the_build_wrote_keeps_plain_names_that_ran_to_an_end() {
        // The build job's guest writes this file: names that could leave the directory, hung
        // or unrunnable tests and garbage are dropped.
        let text =
            "src_lib_rs_3_0 0\nsrc_lib_rs_9_0 101\n../../etc 0\nhung 124\nmissing 127\nx y z\n";
        let kept = doc_test_expectations(text);
        assert_eq!(
            kept,
            [
                DocTest {
                    name: "src_lib_rs_3_0".into(),
                    passes: true
                },
                DocTest {
                    name: "src_lib_rs_9_0".into(),
                    passes: false
                },
            ]
        );
    }

    #[test]
    fn the_script_quotes_every_name_and_stops_at_the_first_failure() {
        let index = Index::new(vec![Binary {
            file: "pager-54c5".into(),
            package_dir: "crates/pager".into(),
            message: r#"{"executable":"pager-54c5","note":"it's"}"#.into(),
        }]);
        let script = script(&index, None);
        assert!(script.contains(r#"printf '%s\n' '{"executable":"pager-54c5","note":"it'\''s"}'"#));
        assert!(script.contains(r#"(cd "$root/"'crates/pager' && "#));
        assert!(script.contains(r#"exec "$here/bin/"'pager-54c5' "$@") 3>&-; }"#));
        assert!(script.contains(r#"run "$@" || { code=$?; run "$@"; exit $code; }"#));
    }

    /// Runs the script for real, over stand-in executables that print what they were given.
    fn run_script(index: &Index, selection: Option<&Selection>, trace: bool) -> (String, String) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let here = dir.path().join("test-binaries");
        for sub in ["bin", "doc"] {
            std::fs::create_dir_all(here.join(sub)).unwrap();
        }
        let stand_in =
            "#!/bin/sh\necho \"ran $(basename \"$0\") [$*] trace=${ASSAY_MUTANT_TRACE:-}\" >&2\n";
        let files = index
            .binaries
            .iter()
            .map(|b| here.join("bin").join(&b.file))
            .chain(
                index
                    .doc_tests
                    .iter()
                    .map(|d| here.join("doc").join(&d.name)),
            );
        for path in files {
            std::fs::write(&path, stand_in).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::write(here.join("run.sh"), script(index, selection)).unwrap();
        let mut command = std::process::Command::new("sh");
        command.arg(here.join("run.sh")).current_dir(dir.path());
        command.env_remove(TRACE_VARIABLE);
        if trace {
            command.env(TRACE_VARIABLE, "on");
        }
        let out = command.output().unwrap();
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn two_binaries_and_a_doc_test() -> Index {
        let message = |file: &str, kind: &str, name: &str| {
            format!(
                r#"{{"reason":"compiler-artifact","package_id":"path+file:///t/pager#0.1.0","target":{{"kind":["{kind}"],"name":"{name}"}},"executable":"{file}"}}"#
            )
        };
        let mut index = Index::new(vec![
            Binary {
                file: "pager-1".into(),
                package_dir: String::new(),
                message: message("pager-1", "lib", "pager"),
            },
            Binary {
                file: "api-2".into(),
                package_dir: String::new(),
                message: message("api-2", "test", "api"),
            },
        ]);
        index.doc_tests = vec![
            DocTest {
                name: "src_lib_rs_3_0".into(),
                passes: true,
            },
            DocTest {
                name: "src_lib_rs_9_0".into(),
                passes: true,
            },
        ];
        index.doc_crate = "pager".into();
        index
    }

    #[test]
    fn a_selection_runs_only_its_tests_by_exact_name_and_skips_the_rest() {
        let index = two_binaries_and_a_doc_test();
        let selection = Selection {
            binaries: [(
                "pager".to_owned(),
                Some(
                    [
                        "tests::counts_pages".to_owned(),
                        "tests::partial_page".to_owned(),
                    ]
                    .into(),
                ),
            )]
            .into(),
            doc_tests: ["src_lib_rs_9_0".to_owned()].into(),
        };
        let (stdout, stderr) = run_script(&index, Some(&selection), false);
        assert!(
            stderr
                .contains("ran pager-1 [--exact tests::counts_pages tests::partial_page] trace=\n"),
            "{stderr}"
        );
        assert!(!stderr.contains("api-2"), "{stderr}");
        assert!(!stderr.contains(TRACE_ON), "{stderr}");
        assert!(stdout.contains("test src_lib_rs_9_0 ... ok"), "{stdout}");
        assert!(!stdout.contains("src_lib_rs_3_0"), "{stdout}");
        // Without a selection, everything runs, with no argument.
        let (stdout, stderr) = run_script(&index, None, false);
        assert!(stderr.contains("ran pager-1 [] trace=\n"), "{stderr}");
        assert!(stderr.contains("ran api-2 [] trace=\n"), "{stderr}");
        assert_eq!(stdout.matches("... ok").count(), 2, "{stdout}");
    }

    #[test]
    fn a_traced_run_labels_each_executable_and_says_the_trace_is_on() {
        let index = two_binaries_and_a_doc_test();
        let (_, stderr) = run_script(&index, None, true);
        assert!(stderr.starts_with(&format!("{TRACE_ON}\n")), "{stderr}");
        assert!(
            stderr.contains("ran pager-1 [] trace=bin:pager\n"),
            "{stderr}"
        );
        assert!(
            stderr.contains("ran api-2 [] trace=bin:pager::api\n"),
            "{stderr}"
        );
        // A doc test's stderr is kept only when traced: it carries the trace.
        assert!(
            stderr.contains("ran src_lib_rs_3_0 [] trace=doc:src_lib_rs_3_0\n"),
            "{stderr}"
        );
        let (_, untraced) = run_script(&index, None, false);
        assert!(!untraced.contains("trace=doc:"), "{untraced}");
    }

    /// Runs the script over a stand-in Go test executable (a shell script that lists two
    /// tests, fails `TestB` when `FAIL_B` is set and says what it was asked) under the real
    /// test2json.
    fn run_go_script(selection: Option<&Selection>, env: &[(&str, &str)]) -> (String, String) {
        let message = go_message("example.com/m/calc", "1.test", "");
        run_go_script_built(&message, selection, env)
    }

    /// [`run_go_script`] with the executable's build message `message`.
    fn run_go_script_built(
        message: &str,
        selection: Option<&Selection>,
        env: &[(&str, &str)],
    ) -> (String, String) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let here = dir.path().join("test-binaries");
        std::fs::create_dir_all(here.join("bin")).unwrap();
        std::fs::create_dir_all(dir.path().join("calc")).unwrap();
        let stand_in = r#"#!/bin/sh
for a in "$@"; do case "$a" in -test.list) echo TestA; echo TestB; echo BenchmarkC; echo 'Test$(touch${IFS}pwned)*'; exit 0 ;; esac; done
echo "args [$*] in ${PWD##*/} trace=${ASSAY_MUTANT_TRACE:-}/${ASSAY_MUTANT_TRACE_TEST:-}" >&2
[ -n "${ASSAY_MUTANT_TRACE_FILE:-}" ] && printf 'assay-reached\t%s\t1\t%s\n' "$ASSAY_MUTANT_TRACE" "$ASSAY_MUTANT_TRACE_TEST" >> "$ASSAY_MUTANT_TRACE_FILE"
echo "=== RUN   TestA"; echo "--- PASS: TestA (0.00s)"
if [ -n "${FAIL_B:-}" ]; then echo "=== RUN   TestB"; echo "panic: boom"; exit 2; fi
echo PASS
"#;
        let file = here.join("bin").join("1.test");
        std::fs::write(&file, stand_in).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        let index = Index::new(vec![Binary {
            file: "1.test".into(),
            package_dir: "calc".into(),
            message: message.to_owned(),
        }]);
        std::fs::write(here.join("run.sh"), script(&index, selection)).unwrap();
        let mut command = std::process::Command::new("sh");
        command.arg(here.join("run.sh")).current_dir(dir.path());
        command.env_remove(TRACE_VARIABLE);
        command.envs(env.iter().copied());
        let out = command.output().unwrap();
        for place in [dir.path().to_owned(), dir.path().join("calc")] {
            assert!(
                !place.join("pwned").exists(),
                "a listed name ran as a command"
            );
        }
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    #[test]
    fn a_go_executable_runs_its_selection_under_test2json_and_re_runs_a_failure() {
        let selection = Selection {
            binaries: [(
                "example.com/m/calc".to_owned(),
                Some(["TestA".to_owned(), "TestB".to_owned()].into()),
            )]
            .into(),
            doc_tests: BTreeSet::new(),
        };
        // test2json reads the executable's stderr as its output too.
        let (stdout, _) = run_go_script(Some(&selection), &[]);
        assert!(
            stdout.contains(
                "args [-test.v -test.paniconexit0 -test.run ^(TestA|TestB)$] in calc trace=/"
            ),
            "{stdout}"
        );
        assert!(
            stdout.contains(r#""Action":"pass","Package":"example.com/m/calc","Test":"TestA""#),
            "{stdout}"
        );
        assert!(!stdout.contains("[assay-rerun]"), "{stdout}");
        // A panic: the package's fail event is added, and the run is repeated under the
        // re-run's package name.
        let (stdout, _) = run_go_script(Some(&selection), &[("FAIL_B", "1")]);
        assert!(
            stdout.contains(r#"{"Action":"fail","Package":"example.com/m/calc"}"#),
            "{stdout}"
        );
        assert!(
            stdout.contains(r#""Package":"example.com/m/calc [assay-rerun]","Test":"TestB""#),
            "{stdout}"
        );
        // A selection without its package runs nothing of it.
        let other = Selection {
            binaries: [("example.com/m/other".to_owned(), None)].into(),
            doc_tests: BTreeSet::new(),
        };
        let (stdout, _) = run_go_script(Some(&other), &[]);
        assert!(stdout.is_empty(), "{stdout}");
    }

    #[test]
    fn a_go_run_uses_the_test2json_its_build_recorded_and_ignores_a_hostile_record() {
        use std::os::unix::fs::PermissionsExt;
        let tools = tempfile::tempdir().unwrap();
        let recorded = tools.path().join("test2json");
        std::fs::write(&recorded, "#!/bin/sh\necho 'the recorded test2json ran'\n").unwrap();
        std::fs::set_permissions(&recorded, std::fs::Permissions::from_mode(0o755)).unwrap();
        let built = |tool_dir: &str| {
            let mut message: serde_json::Value =
                serde_json::from_str(&go_message("example.com/m/calc", "1.test", "")).unwrap();
            message["go_tool_dir"] = tool_dir.into();
            message.to_string()
        };
        let dir = tools.path().to_str().unwrap();
        let (stdout, _) = run_go_script_built(&built(dir), None, &[]);
        assert_eq!(stdout, "the recorded test2json ran\n");
        // A record naming no test2json here falls back to the one beside `go`.
        let (stdout, _) = run_go_script_built(&built("/nonexistent/tools"), None, &[]);
        assert!(
            stdout.contains(r#""Action":"pass","Package":"example.com/m/calc","Test":"TestA""#),
            "{stdout}"
        );
        // Neither a relative directory, a `..` nor a shell's characters are taken.
        for hostile in [
            "tools",
            &format!(
                "{dir}/../{}",
                tools.path().file_name().unwrap().to_str().unwrap()
            ),
            &format!("{dir}'; touch pwned; '"),
            &format!("{dir}$(touch pwned)"),
        ] {
            let script = script(
                &Index::new(vec![Binary {
                    file: "1.test".into(),
                    package_dir: "calc".into(),
                    message: built(hostile),
                }]),
                None,
            );
            assert!(script.starts_with("# Runs"), "{script}");
            assert!(
                script.contains("\nt2j=''; "),
                "{hostile} was taken: {script}"
            );
        }
    }

    #[test]
    fn a_traced_go_run_runs_each_listed_test_alone_and_copies_its_trace() {
        let (stdout, stderr) = run_go_script(None, &[(TRACE_VARIABLE, "on")]);
        assert!(stderr.starts_with(&format!("{TRACE_ON}\n")), "{stderr}");
        for test in ["TestA", "TestB"] {
            assert!(
                stdout.contains(&format!(
                    "args [-test.v -test.paniconexit0 -test.run ^{test}$] in calc trace=bin:example.com/m/calc/{test}"
                )),
                "{stdout}"
            );
            assert!(
                stderr.contains(&format!(
                    "assay-reached\tbin:example.com/m/calc\t1\t{test}\n"
                )),
                "{stderr}"
            );
        }
        assert!(!stdout.contains("BenchmarkC"), "{stdout}");
        // A listed name is the executable's output: it reaches `-test.run` as one word, never
        // a shell (the stand-in runs in `calc/`, the script in the tree's root).
        assert!(
            stdout.contains(r#"-test.run ^Test$(touch${IFS}pwned)*$] in calc"#),
            "{stdout}"
        );
        assert!(
            stdout.contains(r#""Action":"pass","Package":"example.com/m/calc""#),
            "{stdout}"
        );
    }

    #[test]
    fn a_selection_naming_something_other_than_a_test_is_refused() {
        for name in ["--nocapture", "a b", "x'y", "::root", ""] {
            let selection = Selection {
                binaries: [("pager".to_owned(), Some([name.to_owned()].into()))].into(),
                doc_tests: Default::default(),
            };
            assert_eq!(selection.check(), Err(IndexError::TestName(name.into())));
        }
        let doc = Selection {
            binaries: Default::default(),
            doc_tests: ["../x".to_owned()].into(),
        };
        assert!(doc.check().is_err());
    }
}
