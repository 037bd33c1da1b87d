//! TypeScript runs as the JavaScript its types erase to. [`ERASE_SCRIPT`] (run by node where the
//! tests run, never on Assay's host) transpiles every `.ts`, `.mts`, `.cts` and `.tsx` file of a
//! tree to the `.js`, `.mjs` or `.cjs` file beside it (JSX as calls of its factory), file by file and without a type check (as tsx,
//! node's type stripping and Stryker's default do), with the project's own compiler or the
//! system's (Debian's node-typescript). Beside its sources, the output is what the tests'
//! imports name: `../src/pager.js` in an ES module, `../src/pager` in CommonJS.
//!
//! `assay mutate` erases a TypeScript tree's types once for the schema ([`emit_command`]: the
//! files come back on the job's stdout and become part of the schema's tree), and in place,
//! before the tests, in every job on a tree of the project's own ([`erasing`]).

use super::syntax::{is_declaration, is_typescript};
use crate::source::{self, SourceError};
use assay_common::TreeId;
use assay_common::runner::{Runner, node};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The node script that erases a tree's types: `node -e SCRIPT assay-erase-types MODE`.
pub const ERASE_SCRIPT: &str = include_str!("erase_types.cjs");

/// The `schema` of the document [`emit_command`] prints.
pub const SCHEMA: &str = "assay.erased-types/v1";

/// Erases `$0`'s types with node `$1` in the erasure's `MODE`, then runs the rest: the
/// command the tests run.
macro_rules! erasing_script {
    ($mode:literal) => {
        concat!(
            "node=$1; shift\n\"$node\" -e \"$0\" assay-erase-types ",
            $mode,
            " || exit $?\nexec \"$@\""
        )
    };
}

/// The erasure before a job's command.
const ERASING_SCRIPT: &str = erasing_script!("write");

/// [`ERASING_SCRIPT`] with each JavaScript file's source map inline, for the diff coverage run.
const ERASING_MAPPED_SCRIPT: &str = erasing_script!("write-mapped");

/// Whether a tree holding `paths` has TypeScript node must run erased: a source file that is
/// not a declaration file, outside `node_modules/`.
pub fn has_typescript<'p>(mut paths: impl Iterator<Item = &'p str>) -> bool {
    paths.any(|path| erases(path).is_some())
}

/// Whether `runner`'s jobs on any of `trees` of `repo` run erased: it runs no TypeScript of its
/// own, and a tree has some.
pub fn runs_erased(
    runner: &dyn Runner,
    repo: &Path,
    trees: &[&TreeId],
) -> Result<bool, SourceError> {
    if !runner.runs_typescript_erased() {
        return Ok(false);
    }
    for tree in trees {
        let paths = source::list_files(repo, tree)?;
        if has_typescript(paths.iter().map(String::as_str)) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether `command` erases its tree's types first ([`erasing`]).
pub fn is_erasing(command: &[String]) -> bool {
    erased_from(command).is_some()
}

/// The command an [`erasing`] one runs once the types are erased; `None` for any other.
pub fn erased_from(command: &[String]) -> Option<&[String]> {
    let erasing = command
        .get(2)
        .is_some_and(|a| a == ERASING_SCRIPT || a == ERASING_MAPPED_SCRIPT)
        && command.get(3).is_some_and(|a| a == ERASE_SCRIPT);
    command.get(5..).filter(|_| erasing)
}

/// The JavaScript file the TypeScript source at `path` erases to (`pager.ts` and `badge.tsx`
/// → `pager.js` and `badge.js`, `.mts` → `.mjs`, `.cts` → `.cjs`); `None` for any other file.
pub fn erases(path: &str) -> Option<String> {
    if !is_typescript(path)
        || is_declaration(path)
        || path.split('/').any(|part| part == "node_modules")
    {
        return None;
    }
    let (stem, extension) = path.rsplit_once('.')?;
    let erased = match extension {
        "mts" => "mjs",
        "cts" => "cjs",
        _ => "js",
    };
    Some(format!("{stem}.{erased}"))
}

/// The TypeScript source of each JavaScript file a tree's types erase to, by the erased path:
/// what a test run names (`test/pager.test.js`) is shown as what the project wrote
/// (`test/pager.test.ts`). A JavaScript file the tree holds itself keeps its own name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceNames(BTreeMap<String, String>);

impl SourceNames {
    /// The names of a tree holding `paths`.
    pub fn of<'p>(paths: impl Iterator<Item = &'p str> + Clone) -> Self {
        let own: BTreeSet<&str> = paths.clone().collect();
        let names = paths
            .filter_map(|path| {
                let erased = erases(path)?;
                (!own.contains(erased.as_str())).then(|| (erased, path.to_owned()))
            })
            .collect();
        Self(names)
    }

    /// `id` (a file, or `FILE::name`) with its file named by its TypeScript source.
    pub fn source_of(&self, id: &str) -> String {
        let (file, name) = match id.split_once("::") {
            Some((file, name)) => (file, Some(name)),
            None => (id, None),
        };
        match (self.0.get(file), name) {
            (Some(source), Some(name)) => format!("{source}::{name}"),
            (Some(source), None) => source.clone(),
            (None, _) => id.to_owned(),
        }
    }
}

/// The node of a command `prefix`: its program when that is node, else `node` on PATH.
fn node_of(prefix: &[String]) -> String {
    match prefix.first() {
        Some(program) if node::is_node(program) => program.clone(),
        _ => "node".to_owned(),
    }
}

/// The job that prints the erased files of its tree (`assay.erased-types/v1` on stdout), with
/// the node `prefix` names.
pub fn emit_command(prefix: &[String]) -> Vec<String> {
    vec![
        node_of(prefix),
        "-e".into(),
        ERASE_SCRIPT.into(),
        "assay-erase-types".into(),
        "emit".into(),
    ]
}

/// `command`, after the tree's types are erased in place by the node it runs (or node on PATH).
pub fn erasing(command: Vec<String>) -> Vec<String> {
    erasing_with(ERASING_SCRIPT, command)
}

/// [`erasing`], each JavaScript file with its source map inline: node's V8 coverage then
/// carries the maps (`source-map-cache`), which lead its offsets back to TypeScript lines.
pub fn erasing_mapped(command: Vec<String>) -> Vec<String> {
    erasing_with(ERASING_MAPPED_SCRIPT, command)
}

fn erasing_with(script: &str, command: Vec<String>) -> Vec<String> {
    let mut argv = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        script.to_owned(),
        ERASE_SCRIPT.to_owned(),
        node_of(&command),
    ];
    argv.extend(command);
    argv
}

/// Why an erasure's document was refused.
#[derive(Debug, thiserror::Error)]
pub enum ErasedError {
    /// Not the document (the job's stdout is the guest's, and may be anything).
    #[error("the erased files are not an `{SCHEMA}` document ({0})")]
    Malformed(String),
    /// A TypeScript file of the tree has no JavaScript in it.
    #[error("TypeScript's {path} was not erased")]
    Missing {
        /// The TypeScript file.
        path: String,
    },
}

#[derive(Deserialize)]
struct Erased {
    schema: String,
    files: BTreeMap<String, String>,
}

/// The erased file of each TypeScript source in `sources`, read from the document `stdout`:
/// `(JavaScript path, text)`. Only the paths the sources erase to are taken; any other entry
/// is ignored, so the document cannot write anywhere else in the tree.
pub fn read_erased(
    stdout: &[u8],
    sources: &BTreeSet<String>,
) -> Result<Vec<(String, String)>, ErasedError> {
    let mut erased: Erased =
        serde_json::from_slice(stdout).map_err(|e| ErasedError::Malformed(e.to_string()))?;
    if erased.schema != SCHEMA {
        return Err(ErasedError::Malformed(format!(
            "its schema is {:?}",
            erased.schema
        )));
    }
    sources
        .iter()
        .filter_map(|source| Some((source, erases(source)?)))
        .map(|(source, target)| match erased.files.remove(&target) {
            Some(text) => Ok((target, text)),
            None => Err(ErasedError::Missing {
                path: source.clone(),
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_run_as_its_javascript_is_named_by_its_typescript_file() {
        let tree = [
            "src/pager.ts",
            "test/pager.test.ts",
            "test/money.test.cts",
            "test/legacy.test.js",
            "test/both.test.ts",
            "test/both.test.js",
            "types/pager.d.ts",
        ];
        let names = SourceNames::of(tree.into_iter());
        assert_eq!(
            names.source_of("test/pager.test.js::partial page"),
            "test/pager.test.ts::partial page"
        );
        assert_eq!(names.source_of("test/pager.test.js"), "test/pager.test.ts");
        assert_eq!(
            names.source_of("test/money.test.cjs::rounds"),
            "test/money.test.cts::rounds"
        );
        // JavaScript the project wrote itself, and names of no file, stay as they are.
        assert_eq!(
            names.source_of("test/legacy.test.js"),
            "test/legacy.test.js"
        );
        assert_eq!(
            names.source_of("test/both.test.js::x"),
            "test/both.test.js::x"
        );
        assert_eq!(names.source_of("types/pager.d.js"), "types/pager.d.js");
        assert_eq!(names.source_of("::odd"), "::odd");
    }

    #[test]
    fn the_erasing_scripts_differ_only_in_the_erasures_mode() {
        assert_eq!(
            ERASING_SCRIPT,
            "node=$1; shift\n\"$node\" -e \"$0\" assay-erase-types write || exit $?\nexec \"$@\""
        );
        assert_eq!(
            ERASING_MAPPED_SCRIPT.replace("write-mapped", "write"),
            ERASING_SCRIPT
        );
    }

    #[test]
    fn only_typescript_sources_erase_and_each_to_its_own_javascript() {
        assert_eq!(erases("src/pager.ts").as_deref(), Some("src/pager.js"));
        assert_eq!(erases("lib/pager.mts").as_deref(), Some("lib/pager.mjs"));
        assert_eq!(erases("lib/pager.cts").as_deref(), Some("lib/pager.cjs"));
        assert_eq!(erases("src/badge.tsx").as_deref(), Some("src/badge.js"));
        for other in [
            "src/pager.d.ts",
            "types/index.d.mts",
            "node_modules/left-pad/index.ts",
            "src/pager.js",
            "src/badge.jsx",
            "README.md",
        ] {
            assert_eq!(erases(other), None, "{other}");
        }
        assert!(has_typescript(["README.md", "src/pager.ts"].into_iter()));
        assert!(!has_typescript(
            ["index.js", "index.d.ts", "node_modules/x/y.ts"].into_iter()
        ));
    }

    #[test]
    fn the_erasure_runs_with_the_commands_own_node_before_it() {
        let command: Vec<String> = ["/opt/node20/bin/node", "--test", "test/pager.test.js"]
            .map(String::from)
            .into();
        let argv = erasing(command.clone());
        assert_eq!(&argv[..3], ["sh", "-c", ERASING_SCRIPT]);
        assert_eq!(argv[3], ERASE_SCRIPT);
        assert_eq!(argv[4], "/opt/node20/bin/node");
        assert_eq!(&argv[5..], &command[..]);
        assert_eq!(erased_from(&argv), Some(&command[..]));
        assert!(is_erasing(&argv));
        assert_eq!(erased_from(&command), None);
        let npm: Vec<String> = ["npm", "test"].map(String::from).into();
        assert_eq!(erasing(npm)[4], "node");
        assert_eq!(emit_command(&["nodejs".to_owned()])[0], "nodejs");
    }

    #[test]
    fn an_erased_document_yields_only_the_sources_outputs_and_hostile_ones_are_refused() {
        let sources: BTreeSet<String> = ["src/pager.ts", "test/pager.test.ts", "src/types.d.ts"]
            .map(String::from)
            .into();
        let document = br#"{"schema":"assay.erased-types/v1","compiler":"4.8.4","files":{
            "src/pager.js":"export const size = 10;\n",
            "test/pager.test.js":"import '../src/pager.js';\n",
            "../outside.js":"forged",
            ".git/hooks/pre-commit":"forged",
            "src/pager.d.js":"forged"}}"#;
        let erased = read_erased(document, &sources).expect("a document");
        assert_eq!(
            erased,
            vec![
                (
                    "src/pager.js".to_owned(),
                    "export const size = 10;\n".to_owned()
                ),
                (
                    "test/pager.test.js".to_owned(),
                    "import '../src/pager.js';\n".to_owned()
                ),
            ]
        );
        let missing =
            br#"{"schema":"assay.erased-types/v1","files":{"src/pager.js":"x"}}"#.as_slice();
        assert!(matches!(
            read_erased(missing, &sources),
            Err(ErasedError::Missing { path }) if path == "test/pager.test.ts"
        ));
        for hostile in [
            b"".as_slice(),
            b"assay: TypeScript cannot run here".as_slice(),
            br#"{"schema":"assay.erased-types/v2","files":{}}"#.as_slice(),
            br#"{"schema":"assay.erased-types/v1","files":{"src/pager.js":7}}"#.as_slice(),
            br#"{"schema":"assay.erased-types/v1","files":[]}"#.as_slice(),
        ] {
            assert!(
                matches!(
                    read_erased(hostile, &sources),
                    Err(ErasedError::Malformed(_))
                ),
                "{}",
                String::from_utf8_lossy(hostile)
            );
        }
    }
}
