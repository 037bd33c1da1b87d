//! The one build of a Go mutant schema: each package holding mutants compiled once into its
//! test executable (`go test -c`, one package at a time as Go 1.19 requires), kept in the store
//! as prebuilt Rust tests are ([`TestBinaries::Keep`]), and run per mutant with the switch at
//! its number ([`TestBinaries::Use`]) under test2json, so the run reads as `go test -json`'s.
//! A failed build's compiler errors are read back ([`schema::blame`]): a mutant whose own
//! variant does not compile is a compile error without a build of its own, one whose switch
//! does not compile builds alone, and the schema builds again, at most
//! [`MAX_BUILDS`] times.
//!
//! The schema is a tree of its own (the rewritten files and one switch file per package), not
//! an `-overlay`: a job's tree is written fresh for every job anyway, and a git tree is what
//! travels to a fleet's workers; it shares every object with the tree mutated but the files it
//! rewrites.

use super::schema::{self, Entry, FileSchema};
use crate::mutation::mutants::Mutant;
use crate::mutation::mutants::rust::prebuilt::{
    Built, MAX_BUILDS, NoSchemaBuild, Schema, build_output,
};
use assay_common::job::{ArtifactRef, JobResult, JobSpec, TestBinaries};
use assay_common::runner::ReportFormat;
use assay_common::test_binaries::{Selection, check_import_path, check_package_dir};
use assay_transport::error_chain::error_chain;
use assay_transport::store::ArtifactStore;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Why a mutant blamed for its switch's compile error builds on its own.
const BLAMED: &str = "its switch did not compile in the schema";

/// The build job's script, run as `sh -c SCRIPT assay-build DIR IMPORT_PATH …`: each package's
/// test executable built (`go test -c`), its compiler errors on stderr, and for each built one
/// a build message on stdout naming it, its package's directory and import path (what the
/// worker keeps; a package with no test file builds none), and the go command's tool
/// directory, so each run finds test2json without asking the go command again. Every package
/// is built even after one fails, and `-gcflags=-e` lifts the compiler's limit of ten errors
/// per package, so one round's errors name as many unviable mutants as the compiler reports
/// at once. `-vet=off`, as every Go run of Assay's (`runner::go`): a vet finding
/// (`c == 'r' && c == 'd'` is "suspect") is no compile error of a mutant built alone, so none
/// in the schema either, and vet would only speak once the code compiles, a build round of its
/// own.
const BUILD_SCRIPT: &str = r#"out="$PWD/.assay-go-tests"
mkdir -p "$out" || exit 1
tools=$(go env GOTOOLDIR 2>/dev/null)
case $tools in /*) ;; *) tools='' ;; esac
case $tools in *[!A-Za-z0-9/._+~-]*) tools='' ;; esac
failed=0
i=0
while [ $# -ge 2 ]; do
    dir=$1; import=$2; shift 2; i=$((i + 1))
    if [ -z "$dir" ]; then pkg=.; base="$PWD"; else pkg="./$dir"; base="$PWD/$dir"; fi
    if go test -c -vet=off -gcflags=-e -o "$out/$i.test" "$pkg" </dev/null; then
        [ -f "$out/$i.test" ] || continue
        printf '{"reason":"compiler-artifact","package_id":"go %s","manifest_path":"%s/go-package","target":{"kind":["go-test"],"name":"%s"},"profile":{"test":true},"executable":"%s/%s.test","go_tool_dir":"%s"}\n' "$import" "$base" "$import" "$out" "$i" "$tools"
    else
        failed=1
    fi
done
exit $failed
"#;

/// The build command for `packages` (directory, import path), each checked: `None` when one
/// is not a plain directory or import path.
pub fn build_command(packages: &[(String, String)]) -> Option<Vec<String>> {
    let mut argv: Vec<String> = ["sh", "-c", BUILD_SCRIPT, "assay-build"]
        .map(String::from)
        .into();
    for (dir, import) in packages {
        if check_package_dir(dir).is_err() || !check_import_path(import) {
            return None;
        }
        argv.push(dir.clone());
        argv.push(import.clone());
    }
    Some(argv)
}

/// Makes `job` the schema's build job: it keeps its executables, within `timeout_secs`.
pub fn make_build_job(job: &mut JobSpec, command: Vec<String>, timeout_secs: u64) {
    job.command = command;
    job.report = ReportFormat::GoTestJson;
    job.timeout_secs = timeout_secs.max(1);
    job.binaries = Some(TestBinaries::Keep);
}

/// Makes `job` a run of the executables in `archive` with the switch at `number`, of those
/// `only` selects. The unmutated run (0) runs each test alone, traced.
pub fn make_run_job(
    job: &mut JobSpec,
    archive: &ArtifactRef,
    number: usize,
    only: Option<Selection>,
) {
    crate::mutation::mutants::rust::prebuilt::make_switched_run(
        job,
        ReportFormat::GoTestJson,
        archive,
        number,
        only,
    );
}

/// The directory of a Go file's package, relative to the module root (`""` for the root).
pub fn package_dir(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// The import path of the package in `dir` of module `module`.
pub fn import_path(module: &str, dir: &str) -> String {
    match dir {
        "" => module.to_owned(),
        dir => format!("{module}/{dir}"),
    }
}

/// How the schema's user runs one build: `files` (tree path → text: the rewritten files and
/// the switch files) written over the tree, `command` run on it.
#[async_trait::async_trait]
pub trait GoBuildJob: Send {
    /// Runs the build: its result, or why none could run (the schema is then given up).
    async fn run(
        &mut self,
        files: &BTreeMap<String, String>,
        command: Vec<String>,
    ) -> Result<JobResult, NoSchemaBuild>;
}

/// Builds the schema of `mutants` over the files' texts `texts` (path → text) of the module
/// `module`: each failed build's errors take their mutants out and it builds again. Switch
/// numbers are plan positions plus one: 0 is the unmutated code.
pub async fn build(
    texts: &BTreeMap<&str, &str>,
    mutants: &[Mutant],
    module: &str,
    job: &mut (dyn GoBuildJob + '_),
    store: &dyn ArtifactStore,
) -> Schema {
    let mut schema = Schema::default();
    let why = loop {
        if schema.builds >= MAX_BUILDS {
            break format!("the schema did not build in {MAX_BUILDS} attempts");
        }
        let mut schemas: BTreeMap<String, FileSchema> = BTreeMap::new();
        // Package directory → (package name, highest switch number).
        let mut packages: BTreeMap<&str, (String, u32)> = BTreeMap::new();
        for (path, text) in texts {
            let entries = Entry::of_file(mutants, path, |at| schema.in_schema(at));
            if entries.is_empty() {
                continue;
            }
            let dir = package_dir(path);
            let package = match schema::package_name(text) {
                Some(name) if check_package_dir(dir).is_ok() => name,
                _ => {
                    schema.send_alone(&entries, "its package has no plain name or directory");
                    continue;
                }
            };
            let rewritten = schema::rewrite(text, &entries);
            for (number, why) in &rewritten.fallback {
                schema.alone.insert(Entry::position(*number), why.clone());
            }
            for (number, error) in &rewritten.unviable {
                schema
                    .unviable
                    .insert(Entry::position(*number), error.clone());
            }
            if rewritten.arms.is_empty() {
                continue;
            }
            let highest = rewritten.arms.keys().copied().max().unwrap_or(0);
            let slot = packages.entry(dir).or_insert_with(|| (package.clone(), 0));
            slot.1 = slot.1.max(highest);
            schemas.insert((*path).to_owned(), rewritten);
        }
        if schemas.is_empty() {
            break "no mutant fits a schema".to_owned();
        }
        let mut files: BTreeMap<String, String> = schemas
            .iter()
            .map(|(path, s)| (path.clone(), s.text.clone()))
            .collect();
        for (dir, (package, highest)) in &packages {
            let path = match *dir {
                "" => schema::SWITCH_FILE.to_owned(),
                dir => format!("{dir}/{}", schema::SWITCH_FILE),
            };
            files.insert(path, schema::switch_file(package, *highest));
        }
        let dirs: Vec<(String, String)> = packages
            .keys()
            .map(|dir| ((*dir).to_owned(), import_path(module, dir)))
            .collect();
        let Some(command) = build_command(&dirs) else {
            break format!("the module path {module:?} or a package directory is not plain");
        };
        schema.builds += 1;
        let result = match job.run(&files, command).await {
            Ok(result) => result,
            Err(why) => break why.to_string(),
        };
        schema.one_build = Duration::from_millis(result.duration_ms);
        schema.build_time += schema.one_build;
        match Built::of(&result) {
            Built::Kept(archive) => {
                schema.archive = Some(archive);
                return schema;
            }
            Built::Other(why) => break why,
            Built::Failed => {}
        }
        let stderr = match build_output(store, &result, "stderr", "errors").await {
            Ok(stderr) => stderr,
            Err(why) => break error_chain(&why),
        };
        let blamed = schema::blame(&stderr, &schemas);
        if blamed.unviable.is_empty() && blamed.alone.is_empty() {
            let first = blamed.unblamed.unwrap_or_else(|| {
                let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
                lines[lines.len().saturating_sub(3)..].join(" / ")
            });
            break format!("the schema build failed on an error no mutant is blamed for ({first})");
        }
        for (number, error) in blamed.unviable {
            schema.unviable.insert(Entry::position(number), error);
        }
        let alone: BTreeSet<u32> = blamed.alone;
        for number in alone {
            schema
                .alone
                .entry(Entry::position(number))
                .or_insert_with(|| BLAMED.into());
        }
    };
    schema.give_up(mutants.len(), why);
    schema
}

/// The module path in a `go.mod`'s text (`module example.com/m`), if it names one.
pub fn module_path(go_mod: &str) -> Option<String> {
    go_mod.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("module")?;
        let name = rest.trim().trim_matches('"');
        (rest.starts_with(char::is_whitespace) && !name.is_empty()).then(|| name.to_owned())
    })
}

/// A held mutant's selection narrowed to its own package's executable, as a `go test` of its
/// package runs (`only`: the tests the trace names, `None`: every test). `None` when no test
/// of its package reaches it.
pub fn own_package(import: &str, only: Option<&Selection>) -> Option<Selection> {
    let tests = match only {
        Some(selection) => selection.binaries.get(import)?.clone(),
        None => None,
    };
    Some(Selection {
        binaries: BTreeMap::from([(import.to_owned(), tests)]),
        doc_tests: BTreeSet::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_command_refuses_what_a_shell_or_json_could_read_differently() {
        let plain = [("calc".to_owned(), "example.com/m/calc".to_owned())];
        let argv = build_command(&plain).unwrap();
        assert_eq!(argv[3..], ["assay-build", "calc", "example.com/m/calc"]);
        for (dir, import) in [
            ("../x", "example.com/m"),
            ("calc", "example.com/\"m"),
            ("calc", "-x"),
            ("a b", "example.com/m"),
            ("calc", "example.com/m$(id)"),
        ] {
            assert!(
                build_command(&[(dir.to_owned(), import.to_owned())]).is_none(),
                "{dir} {import}"
            );
        }
    }

    #[test]
    fn a_selection_keeps_only_the_mutants_own_package() {
        let selection = Selection {
            binaries: BTreeMap::from([
                ("m/a".to_owned(), Some(BTreeSet::from(["TestA".to_owned()]))),
                ("m/b".to_owned(), None),
            ]),
            doc_tests: BTreeSet::new(),
        };
        let own = own_package("m/a", Some(&selection)).unwrap();
        assert_eq!(own.binaries.len(), 1);
        assert_eq!(
            own.binaries["m/a"],
            Some(BTreeSet::from(["TestA".to_owned()]))
        );
        assert_eq!(own_package("m/c", Some(&selection)), None);
        assert_eq!(own_package("m/c", None).unwrap().binaries["m/c"], None);
        assert_eq!(
            module_path("// x\nmodule \"example.com/m\"\n").as_deref(),
            Some("example.com/m")
        );
    }
}
