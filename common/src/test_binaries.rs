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

/// The artifact a build job stores, and the name its archive goes by.
pub const ARTIFACT: &str = "test-binaries";

/// What the worker replaces in a run job's command with the path of the [`script`].
pub const PLACEHOLDER: &str = "{test_binaries}";

pub const SCHEMA: &str = "assay.test-binaries/v1";

/// Where the build persists its doc tests, relative to the tree, and the file in it that
/// says how each one exits unmutated.
pub const DOC_TESTS_DIR: &str = "target/assay-doctests";
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
    pub schema: String,
    pub binaries: Vec<Binary>,
    /// The library's doc tests, each at `doc/NAME`; run in `doc_crate`'s directory.
    #[serde(default)]
    pub doc_tests: Vec<DocTest>,
    /// The library the doc tests belong to (cargo's `Doc-tests` name), and its directory.
    #[serde(default)]
    pub doc_crate: String,
    #[serde(default)]
    pub doc_dir: String,
}

/// One persisted doc test: its directory's name (`src_lib_rs_348_0`) and whether it exits 0
/// unmutated (a `should_panic` test does not).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocTest {
    pub name: String,
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

/// Why a build's output or an archive's index is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IndexError {
    #[error("the index is not {SCHEMA}: {0}")]
    Malformed(String),
    #[error("test executable {0:?} is not a plain file name")]
    FileName(String),
    #[error("package directory {0:?} is not a plain path inside the tree")]
    PackageDir(String),
}

/// A test executable cargo reported building, in the guest's paths.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Built {
    pub executable: String,
    pub manifest_path: String,
    /// The message the run's report will read: the target and package only.
    pub message: String,
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
        let message = serde_json::json!({
            "reason": "compiler-artifact",
            "package_id": artifact.package_id,
            "target": {"kind": target["kind"], "name": target["name"]},
            "executable": file,
        });
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
            let message: serde_json::Value = serde_json::from_str(&binary.message)
                .map_err(|e| IndexError::Malformed(format!("{}: {e}", binary.file)))?;
            if message["executable"] != binary.file.as_str() || binary.message.contains('\n') {
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
/// ([`crate::report::libtest::RERUN_VARIANT`]), so no job of its own is needed for it. Every name was checked by
/// [`Index::read`]; they are quoted all the same.
pub fn script(index: &Index) -> String {
    let mut script = String::from(
        "# Runs the prebuilt test executables beside this script as `cargo test` would.\n\
         here=$(cd \"$(dirname \"$0\")\" && pwd) || exit 101\n\
         root=$(pwd)\n",
    );
    for binary in &index.binaries {
        script.push_str(&format!("printf '%s\\n' {}\n", quote(&binary.message)));
    }
    for binary in &index.binaries {
        let file = quote(&binary.file);
        let dir = quote(&binary.package_dir);
        script.push_str(&format!(
            "run() {{ printf '     Running %s (%s)\\n' {file} \"$here/bin/\"{file} >&2\n\
             (cd \"$root/\"{dir} && CARGO_MANIFEST_DIR=\"$root/\"{dir} exec \"$here/bin/\"{file} \"$@\"); }}\n\
             run \"$@\" || {{ code=$?; run \"$@\"; exit $code; }}\n"
        ));
    }
    // Each doc test is a block of one, written here from its exit code (its own output is
    // thrown away, so it cannot print a result), after the binaries as cargo orders them.
    // A doc test is selected by no name: with arguments (a selection), none runs.
    if !index.doc_tests.is_empty() {
        let krate = quote(&index.doc_crate);
        let dir = quote(&index.doc_dir);
        script.push_str("[ $# -eq 0 ] || exit 0\n");
        for doc in &index.doc_tests {
            let name = quote(&doc.name);
            let test = if doc.passes { "-eq" } else { "-ne" };
            script.push_str(&format!(
                "printf 'Doc-tests %s\\n' {krate} >&2\n\
                 (cd \"$root/\"{dir} && exec \"$here/doc/\"{name}) </dev/null >/dev/null 2>&1\n\
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
        let script = script(&index);
        assert!(script.contains(r#"printf '%s\n' '{"executable":"pager-54c5","note":"it'\''s"}'"#));
        assert!(script.contains(r#"(cd "$root/"'crates/pager' && "#));
        assert!(script.contains(r#"exec "$here/bin/"'pager-54c5' "$@"); }"#));
        assert!(script.contains(r#"run "$@" || { code=$?; run "$@"; exit $code; }"#));
    }
}
