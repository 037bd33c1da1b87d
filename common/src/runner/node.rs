//! node:test with the reporter Assay ships (`{node_reporter}`), selection by name pattern,
//! and the refusal of node:test files that spawn another test runner: such a case passes on
//! that runner's exit code (Vitest exits 0 when `-t` matches nothing), so a misspelt or
//! renamed case would pass without running.

use super::{BatchMember, ReportFormat, Runner, SuiteCases, TreeFiles, split_path, strings};
use crate::suite_case::SuiteCase;

/// The node:test runner, with the reporter Assay ships.
pub struct Node;

impl Runner for Node {
    fn name(&self) -> &'static str {
        "node"
    }

    fn language(&self) -> Option<super::SourceLanguage> {
        Some(super::SourceLanguage::JavaScript)
    }

    fn default_command(&self) -> &'static [&'static str] {
        &["node"]
    }

    fn coverage(&self) -> Option<super::CoverageTool> {
        Some(super::CoverageTool::NodeV8)
    }

    fn is_test_file(&self, path: &str) -> bool {
        is_js_test_file(path)
    }

    fn is_test_module(&self, path: &str) -> bool {
        is_js_test_name(split_path(path).0)
    }

    fn command(&self, prefix: &[String], files: &[String], names: &[String]) -> Vec<String> {
        let mut argv = prefix.to_vec();
        argv.extend(
            [
                "--test",
                "--test-reporter={node_reporter}",
                "--test-reporter-destination={report}",
            ]
            .map(String::from),
        );
        if !names.is_empty() {
            argv.push("--test-name-pattern".into());
            argv.push(name_pattern(names));
        }
        argv.extend(files.iter().cloned());
        argv
    }

    /// Each test file runs in node itself (`node FILE`, the reporter on node:test's own
    /// harness), one after another, not under `node --test`, which starts a runner process
    /// and then a child per file: the same report from one process per file instead of one
    /// more. The last run's report holds the earlier runs' results (`ASSAY_NODE_PARTS`). A run
    /// that writes no report (its file threw while loading, called `process.exit`, crashed),
    /// where `--test` would have reported that file's failure, sends all the files to
    /// `--test` (`NODE_DIRECT_SCRIPT`). A command whose program is not node keeps `--test`.
    fn mutant_command(&self, prefix: &[String], files: &[String]) -> Vec<String> {
        let runs_node = prefix.first().is_some_and(|program| is_node(program));
        if files.is_empty() || !runs_node {
            return self.command(prefix, files, &[]);
        }
        let mut argv = strings(&[
            "sh",
            "-c",
            NODE_DIRECT_SCRIPT,
            "assay-node-direct",
            "{report}",
        ]);
        argv.push(files.len().to_string());
        argv.extend(prefix.iter().cloned());
        argv.push("--test-reporter={node_reporter}".into());
        argv.extend(files.iter().cloned());
        argv
    }

    /// `sh -c NODE_BATCH_SCRIPT assay-node-batch {report} COUNT NODE ARGS… -e BATCH_SCRIPT
    /// assay-node-batch {report} PLAN`: the mutants in one node process
    /// ([`BATCH_SCRIPT`]), started again after one outlives its limit or ends the process,
    /// then the failed ones once more to confirm their kills. A command whose program is not
    /// node has no batch.
    fn mutant_batch_command(
        &self,
        prefix: &[String],
        members: &[BatchMember],
    ) -> Option<Vec<String>> {
        let program = prefix.first().filter(|program| is_node(program))?;
        let plan = serde_json::to_string(members).ok()?;
        let mut argv = strings(&[
            "sh",
            "-c",
            NODE_BATCH_SCRIPT,
            "assay-node-batch",
            "{report}",
        ]);
        argv.push(members.len().to_string());
        argv.push(program.clone());
        argv.extend(prefix[1..].iter().cloned());
        argv.extend(strings(&[
            "--test-reporter={node_reporter}",
            "--test-reporter-destination=stdout",
            "-e",
            BATCH_SCRIPT,
            "assay-node-batch",
            "{report}",
        ]));
        argv.push(plan);
        Some(argv)
    }

    /// `sh -c NODE_RERUN_SCRIPT assay-node-rerun {report} COMMAND…`: a run that fails and
    /// wrote its report runs again with `ASSAY_NODE_RERUN=1`, and its report follows the
    /// first's in the same file (see [`crate::report::node`]).
    fn rerunning_failures(&self, command: Vec<String>) -> Vec<String> {
        let mut argv = strings(&[
            "sh",
            "-c",
            NODE_RERUN_SCRIPT,
            "assay-node-rerun",
            "{report}",
        ]);
        argv.extend(command);
        argv
    }

    /// node 20 runs no TypeScript of its own.
    fn runs_typescript_erased(&self) -> bool {
        true
    }

    /// Its tests are named by sentences: `test: "partial last page is counted"`.
    fn names_tests_by_sentences(&self) -> bool {
        true
    }

    fn report_format(&self) -> ReportFormat {
        ReportFormat::NodeJson
    }

    /// A `package.json` that is not Vitest's (asked first).
    fn detect(&self, tree: &mut TreeFiles<'_>) -> bool {
        tree.has("package.json")
    }

    fn spawned_test_runner_check(&self) -> Option<fn(&str) -> Option<String>> {
        Some(spawns_test_runner)
    }

    /// One case per test file: the reporter names each result's file.
    fn suite_cases(&self, _prefix: &[String]) -> SuiteCases {
        SuiteCases::TestModules
    }

    fn suite_command(&self, prefix: &[String], cases: &[&SuiteCase]) -> Vec<String> {
        self.command(prefix, &files_of(cases), &[])
    }
}

/// Runs `COMMAND…` (after `REPORT`); when it fails having written its report, runs it once
/// more with `ASSAY_NODE_RERUN=1` (the reporter then marks its document as a re-run) and joins
/// the two reports, first run first. Without a first report (node did not start) there is
/// nothing to confirm; without a second, the first stays alone and the kill is confirmed by a
/// job. The exit status is always the first run's.
const NODE_RERUN_SCRIPT: &str = r#"report=$1; shift
"$@" && exit 0
code=$?
[ -s "$report" ] || exit $code
mv -f "$report" "$report.first" || exit $code
ASSAY_NODE_RERUN=1 "$@"
if [ -s "$report" ] && cat "$report.first" "$report" > "$report.both"; then
    mv -f "$report.both" "$report"
else
    mv -f "$report.first" "$report"
fi
rm -f "$report.first" "$report.both"
exit $code
"#;

/// Several switched mutants in one node process: see the script's own heading.
pub const BATCH_SCRIPT: &str = include_str!("node_batch.cjs");

/// Runs `COMMAND…` (after `REPORT COUNT`, COUNT the number of mutants), the batch script,
/// until it exits 3 (no mutant left to run): each run goes on after the mutants `REPORT`
/// already settles, so a mutant that outlived its limit or ended node costs one run, not the
/// batch. A batch whose first runs all ran in one process confirmed its kills there too
/// (`confirmed`); otherwise the same again with `ASSAY_NODE_RERUN=1`, which runs the failed
/// mutants once more. At most COUNT + 1 runs a pass; the exit status is always 0 (each
/// mutant's outcome is in `REPORT`).
const NODE_BATCH_SCRIPT: &str = r#"report=$1; count=$2; shift 2
rm -f "$report"
export ASSAY_NODE_BATCH="$report"
for pass in first rerun; do
    if [ "$pass" = rerun ]; then
        grep -q '"confirmed":true' "$report" 2>/dev/null && break
        export ASSAY_NODE_RERUN=1
    fi
    i=0
    while [ "$i" -le "$count" ]; do
        "$@"
        [ $? -eq 3 ] && break
        i=$((i + 1))
    done
done
exit 0
"#;

/// Runs `NODE ARGS… FILE…` (after `REPORT COUNT`, COUNT the number of files) as one
/// `NODE ARGS… --test-reporter-destination=… FILE` per file, in order, in node's own process:
/// each run but the last writes its report to `REPORT.I`, and the last, told of those
/// (`ASSAY_NODE_PARTS`), writes all of them to `REPORT`. The exit status is the last failing
/// run's. When a run writes no report, the parts are dropped and `NODE --test ARGS… FILE…`
/// runs instead, whose runner reports a file that failed to load or exited early as that
/// file's failure. Arguments are only ever expanded as `"${N}"`, never re-read as code.
const NODE_DIRECT_SCRIPT: &str = r#"report=$1; n=$2; shift 2
p=$(($# - n))
rest=''; files=''; j=2
while [ "$j" -le "$p" ]; do rest="$rest \"\${$j}\""; j=$((j + 1)); done
j=1
while [ "$j" -le "$n" ]; do files="$files \"\${$((p + j))}\""; j=$((j + 1)); done
drop() { j=1; while [ "$j" -lt "$n" ]; do rm -f "$report.$j"; j=$((j + 1)); done; }
rm -f "$report"
code=0; parts=''; i=1
while [ "$i" -le "$n" ]; do
    out=$report.$i; joined=''
    [ "$i" -eq "$n" ] && out=$report && joined=$parts
    rm -f "$out"
    export ASSAY_NODE_PARTS="$joined"
    eval "\"\${1}\"$rest \"--test-reporter-destination=\$out\" \"\${$((p + i))}\""
    status=$?
    if [ ! -s "$out" ]; then
        drop; rm -f "$report"; unset ASSAY_NODE_PARTS
        eval "exec \"\${1}\" --test $rest \"--test-reporter-destination=\$report\" $files"
    fi
    [ "$status" -eq 0 ] || code=$status
    parts="$parts$out
"
    i=$((i + 1))
done
drop
exit $code
"#;

/// Whether `program` (a command's first word, a path or a name) is node itself.
pub fn is_node(program: &str) -> bool {
    matches!(
        program.rsplit('/').next().unwrap_or(program),
        "node" | "nodejs"
    )
}

/// The files of whole-file cases, which a JavaScript runner takes as its arguments.
pub(crate) fn files_of(cases: &[&SuiteCase]) -> Vec<String> {
    cases.iter().map(|c| c.file.clone()).collect()
}

/// JavaScript test conventions, shared with Vitest: test directories and fixtures, and
/// `*.test.*`, `*.spec.*`, `*_test.*` files.
pub(crate) fn is_js_test_file(path: &str) -> bool {
    let (file_name, mut dirs) = split_path(path);
    let in_test_dir = dirs.any(|dir| {
        matches!(
            dir,
            "test" | "tests" | "__tests__" | "__fixtures__" | "fixtures"
        )
    });
    in_test_dir || is_js_test_name(file_name)
}

/// `pager.test.js`, `pager.spec.ts`, `pager.test.mjs`, …
pub(crate) fn is_js_test_name(file_name: &str) -> bool {
    let Some((stem, ext)) = file_name.rsplit_once('.') else {
        return false;
    };
    matches!(
        ext,
        "js" | "mjs" | "cjs" | "ts" | "mts" | "cts" | "jsx" | "tsx"
    ) && (stem.ends_with(".test") || stem.ends_with(".spec") || stem.ends_with("_test"))
}

/// A JavaScript regular expression matching any of `names` (unanchored: Vitest matches it
/// against the full name with describe titles, and over-selection is harmless).
pub fn name_pattern(names: &[String]) -> String {
    names
        .iter()
        .map(|name| {
            let mut quoted = String::with_capacity(name.len());
            for c in name.chars() {
                if r"\^$.*+?()[]{}|/".contains(c) {
                    quoted.push('\\');
                }
                quoted.push(c);
            }
            quoted
        })
        .collect::<Vec<_>>()
        .join("|")
}

/// What a test file spawns through `child_process` that is itself a test runner, if anything
/// (`npx vitest`, `npm test`, `jest`, `mocha`, `node --test`). The product's own CLI
/// (`node cli.js add x`) is fine.
///
/// Only commands the file spells out in string literals are seen: the literals of the file are
/// read in order, and consecutive ones joined, so `spawnSync('npx', ['vitest', 'run'])` reads as
/// `npx vitest run`. A wrapper script or a computed command is not seen.
pub fn spawns_test_runner(source: &str) -> Option<String> {
    if !source.contains("child_process") {
        return None;
    }
    let words: Vec<String> = string_literals(source)
        .iter()
        .flat_map(|literal| {
            literal
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    for (i, word) in words.iter().enumerate() {
        let program = word.rsplit('/').next().unwrap_or(word);
        let program = program.trim_end_matches(".cmd").trim_end_matches(".js");
        let next = words.get(i + 1).map(String::as_str);
        match program {
            "vitest" | "jest" | "mocha" => {
                let launcher = i
                    .checked_sub(1)
                    .and_then(|p| words.get(p))
                    .filter(|w| matches!(w.as_str(), "npx" | "pnpx" | "yarn" | "pnpm" | "bunx"));
                return Some(match launcher {
                    Some(launcher) => format!("{launcher} {word}"),
                    None => word.clone(),
                });
            }
            "npm" | "yarn" | "pnpm" | "bun" => {
                let script = match next {
                    Some("run" | "run-script") => words.get(i + 2).map(String::as_str),
                    other => other,
                };
                if let Some(script) = script
                    && (matches!(script, "t" | "tst" | "test") || script.starts_with("test:"))
                {
                    return Some(format!("{word} test"));
                }
            }
            // `node --test`, also as `spawn(process.execPath, ['--test', …])` where the
            // program is not a literal: a `--test` flag counts unless it follows a script,
            // where it is that script's own argument.
            _ if word == "--test" || word.starts_with("--test=") => {
                let owner = words[..i].iter().rev().find(|w| !w.starts_with('-'));
                let is_script = owner.is_some_and(|w| {
                    [".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".tsx"]
                        .iter()
                        .any(|ext| w.ends_with(ext))
                });
                if !is_script {
                    return Some("node --test".into());
                }
            }
            _ => {}
        }
    }
    None
}

/// The contents of the source's string literals, in order, skipping comments. Template
/// literals are taken whole, placeholders included; regex literals are not recognized.
fn string_literals(source: &str) -> Vec<String> {
    let chars: Vec<char> = source.chars().collect();
    let mut literals = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '/' if chars.get(i + 1) == Some(&'/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if chars.get(i + 1) == Some(&'*') => {
                i += 2;
                while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                    i += 1;
                }
                i += 2;
            }
            quote @ ('\'' | '"' | '`') => {
                let mut literal = String::new();
                i += 1;
                while i < chars.len() && chars[i] != quote {
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        i += 1;
                    }
                    literal.push(chars[i]);
                    i += 1;
                }
                literals.push(literal);
                i += 1;
            }
            _ => i += 1,
        }
    }
    literals
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_one_escaped_alternation() {
        assert_eq!(
            name_pattern(&["test_c1_totals".into(), "rounds (half-up)".into()]),
            r"test_c1_totals|rounds \(half-up\)"
        );
    }

    #[test]
    fn spawned_test_runners_are_named() {
        let cases = [
            (
                "const { execSync } = require('child_process');\nexecSync('npx vitest run -t test_c1_totals');",
                "npx vitest",
            ),
            (
                "import { spawnSync } from 'node:child_process';\nspawnSync('npx', ['vitest', 'run']);",
                "npx vitest",
            ),
            (
                "const cp = require('child_process'); cp.execSync(\"npm test -- -t totals\");",
                "npm test",
            ),
            (
                "const cp = require('child_process'); cp.spawnSync('npm', ['run', 'test:unit']);",
                "npm test",
            ),
            (
                "const cp = require('node:child_process'); cp.execFileSync('node_modules/.bin/jest', []);",
                "node_modules/.bin/jest",
            ),
            (
                "const cp = require('child_process'); cp.execSync(`mocha ${dir}`);",
                "mocha",
            ),
            (
                "const cp = require('child_process'); cp.spawnSync(process.execPath, ['--test', 'other.test.js']);",
                "node --test",
            ),
            (
                "const cp = require('child_process'); cp.execSync('node --test other.test.js');",
                "node --test",
            ),
        ];
        for (source, expected) in cases {
            assert_eq!(
                spawns_test_runner(source).as_deref(),
                Some(expected),
                "{source}"
            );
        }
    }

    #[test]
    fn running_the_products_own_cli_is_not_a_test_runner() {
        let sources = [
            "const { execFileSync } = require('node:child_process');\nexecFileSync('node', ['cli.js', 'add', 'x']);",
            "const cp = require('child_process'); cp.execSync('node bin/invoice.js test-mode');",
            "const cp = require('child_process'); cp.spawnSync('node', ['cli.js', '--test']);",
            // Comments and files without child_process say nothing about what runs.
            "const cp = require('child_process'); // unlike `npx vitest`, this runs the CLI\ncp.execSync('node cli.js');",
            "const { test } = require('node:test'); test('runs npx vitest in docs', () => {});",
        ];
        for source in sources {
            assert_eq!(spawns_test_runner(source), None, "{source}");
        }
    }
}
