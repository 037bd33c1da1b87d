//! node's V8 coverage: the proving tests run under `NODE_V8_COVERAGE`, which has node (and
//! every process `node --test` starts) write V8's block coverage as JSON on exit; a wrapper
//! gathers those files into the job's one report, and [`measured`] reads it against the
//! changed files' own text ([`ChangedSource`], found where the repository is).
//!
//! V8 gives, per script (`file://` URL), functions with ranges of offsets and counts: a
//! function's first range is its whole body, the next ones its blocks; an inner range
//! overrides the outer ones it lies in. A changed line's code is executed when some part of it
//! lies, innermost, in a range with a count above 0 in any process. The report is the
//! guest's and is read as hostile: bounded, every offset checked against the file's length, a
//! URL outside the tree's root ignored.
//!
//! A TypeScript file runs as the JavaScript its types erase to; the coverage run's erasure
//! writes each file's source map inline, node's coverage carries the maps of the scripts it
//! loaded (`source-map-cache`), and a changed TypeScript line is read at the first place of
//! the JavaScript its map leads to ([`super::source_map`]).

use super::source_map;
use crate::mutation::mutants::javascript::typescript;
use assay_common::diff_coverage::{ChangedSource, CodeLine, MeasuredFile};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

/// Runs node (argv[2..], the proving command's arguments) with `NODE_V8_COVERAGE` set to a
/// fresh temporary directory, then writes to argv[1] one JSON document: the tree's root as a
/// `file://` URL, node's exit status, and per process the scripts under the root with their
/// functions' ranges (node's own modules left out, so the report stays small). It exits 0
/// whatever the tests did, so the coverage is read even when one fails.
const SCRIPT: &str = r#"
const { spawnSync } = require("node:child_process");
const fs = require("node:fs"), os = require("node:os"), path = require("node:path");
const { pathToFileURL } = require("node:url");
const [out, ...args] = process.argv.slice(1);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "v8-coverage-"));
const run = spawnSync(process.execPath, args, {
  stdio: "inherit", env: { ...process.env, NODE_V8_COVERAGE: dir } });
let root = pathToFileURL(process.cwd()).href;
if (!root.endsWith("/")) root += "/";
const processes = [];
for (const name of fs.readdirSync(dir).sort()) {
  let data;
  try { data = JSON.parse(fs.readFileSync(path.join(dir, name), "utf8")); } catch { continue; }
  const result = (Array.isArray(data.result) ? data.result : [])
    .filter((s) => typeof s.url === "string" && s.url.startsWith(root))
    .map((s) => ({ url: s.url, functions: (s.functions || []).map((f) => ({ ranges: f.ranges })) }));
  const cache = data["source-map-cache"] || {};
  const maps = Object.keys(cache)
    .filter((url) => url.startsWith(root) && typeof cache[url]?.data?.mappings === "string")
    .map((url) => ({ url, lineLengths: cache[url].lineLengths, mappings: cache[url].data.mappings }));
  processes.push({ result, maps });
}
fs.writeFileSync(out, JSON.stringify({ root, exit: run.status, processes }));
fs.rmSync(dir, { recursive: true, force: true });
"#;

use super::MAX_REPORT_BYTES;

/// The proving command under V8 coverage: its program (node) runs the wrapper, which runs the
/// same program with the proving arguments, Assay's reporter options left out (the report's
/// place is the coverage's).
pub fn command(proving: &[String]) -> Result<Vec<String>, &'static str> {
    let (program, args) = proving
        .split_first()
        .filter(|(_, args)| args.iter().any(|a| a == "--test"))
        .ok_or("the test command is not `node --test …`, so V8 coverage cannot wrap it")?;
    let mut command = vec![
        program.clone(),
        "-e".into(),
        SCRIPT.into(),
        "{report}".into(),
    ];
    command.extend(
        args.iter()
            .filter(|a| {
                !a.starts_with("--test-reporter=") && !a.starts_with("--test-reporter-destination=")
            })
            .cloned(),
    );
    Ok(command)
}

/// Why a V8 coverage report cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum V8Error {
    /// The report is larger than any real run's.
    #[error("the V8 coverage report has {bytes} bytes, more than the {MAX_REPORT_BYTES} read")]
    TooLarge {
        /// Its size.
        bytes: usize,
    },
    /// The report is not the wrapper's JSON.
    #[error("the V8 coverage report is not the JSON the coverage run writes")]
    Malformed(#[source] serde_json::Error),
    /// The report's root is not a `file://` URL of a directory.
    #[error("the V8 coverage report's root {root:?} is not a file:// URL of a directory")]
    Root {
        /// The root as the report gave it (at most 200 characters).
        root: String,
    },
    /// A range of a changed file is backwards or ends past the file's end: the run did not
    /// measure the candidate's text.
    #[error(
        "V8's coverage of {path} has the range {start}..{end}, which does not fit its {length} characters (UTF-16 code units)"
    )]
    Range {
        /// The changed file.
        path: String,
        /// The range's start offset.
        start: u64,
        /// Its end offset.
        end: u64,
        /// The file's length.
        length: u32,
    },
    /// The source map of a changed TypeScript file's JavaScript cannot be read.
    #[error("the source map of {path}'s JavaScript cannot be read")]
    SourceMap {
        /// The changed TypeScript file.
        path: String,
        /// What is wrong with its `mappings`.
        #[source]
        source: source_map::MappingsError,
    },
    /// A changed TypeScript file's JavaScript, by its map's line lengths, is longer than any
    /// offset V8 counts.
    #[error("{path}'s JavaScript has {characters} characters by its map, more than V8 counts")]
    TooLong {
        /// The changed TypeScript file.
        path: String,
        /// What its line lengths add up to.
        characters: u64,
    },
}

/// The wrapper's report.
#[derive(Deserialize)]
struct Report {
    root: String,
    processes: Vec<Process>,
}

/// One process's coverage: the scripts it loaded, and the source maps of those that had one.
#[derive(Deserialize)]
struct Process {
    result: Vec<Script>,
    #[serde(default)]
    maps: Vec<MappedScript>,
}

/// A loaded script's source map, as node's coverage gives it: the script's lines' lengths
/// (UTF-16 code units, each line ended by one character) and the map's `mappings`.
#[derive(Deserialize)]
struct MappedScript {
    url: String,
    #[serde(rename = "lineLengths")]
    line_lengths: Vec<u32>,
    mappings: String,
}

/// One script and its functions, as V8 gives them.
#[derive(Deserialize)]
struct Script {
    url: String,
    functions: Vec<Function>,
}

/// One function's ranges: its body first, then its blocks.
#[derive(Deserialize)]
struct Function {
    ranges: Vec<Range>,
}

/// A range of offsets and how many times it ran.
#[derive(Clone, Copy, Deserialize)]
struct Range {
    #[serde(rename = "startOffset")]
    start: u64,
    #[serde(rename = "endOffset")]
    end: u64,
    count: u64,
}

/// Per changed JavaScript or TypeScript file the report measured: its changed code lines as
/// statements (a TypeScript file's, those its source map names), and those a process
/// executed. A file no process loaded is absent (the judge lists it as not measured), as is a
/// TypeScript file whose JavaScript came with no map.
pub fn measured(
    bytes: &[u8],
    sources: &[ChangedSource],
) -> Result<BTreeMap<String, MeasuredFile>, V8Error> {
    if bytes.len() > MAX_REPORT_BYTES {
        return Err(V8Error::TooLarge { bytes: bytes.len() });
    }
    let report: Report = serde_json::from_slice(bytes).map_err(V8Error::Malformed)?;
    if !report.root.starts_with("file:///") || !report.root.ends_with('/') {
        return Err(V8Error::Root {
            root: report.root.chars().take(200).collect(),
        });
    }
    // By the JavaScript node runs: a changed JavaScript file itself, a TypeScript file's erasure.
    let by_script: BTreeMap<String, &ChangedSource> = sources
        .iter()
        .filter_map(|s| Some((runs_as(s.path.as_str())?, s)))
        .collect();
    let mut files: BTreeMap<String, MeasuredFile> = BTreeMap::new();
    for process in &report.processes {
        let maps: BTreeMap<String, &MappedScript> = process
            .maps
            .iter()
            .filter_map(|m| Some((tree_path_of(&m.url, &report.root)?, m)))
            .collect();
        for script in &process.result {
            let Some(path) = tree_path_of(&script.url, &report.root) else {
                continue;
            };
            let Some(&changed) = by_script.get(&path) else {
                continue;
            };
            let mapped;
            let source = if changed.path.as_str() == path {
                changed
            } else {
                let Some(map) = maps.get(&path) else {
                    continue;
                };
                mapped = through_map(changed, map)?;
                &mapped
            };
            let ranges: Vec<Range> = script
                .functions
                .iter()
                .flat_map(|f| f.ranges.iter().copied())
                .collect();
            let executed = executed_lines(source, &ranges)?;
            let file = files
                .entry(changed.path.to_string())
                .or_insert_with(|| MeasuredFile {
                    statements: BTreeSet::new(),
                    executed: BTreeSet::new(),
                });
            file.statements.extend(source.lines.iter().map(|l| l.line));
            file.executed.extend(executed);
        }
    }
    Ok(files)
}

/// The JavaScript node runs for the changed file at `path`: `.js`, `.mjs` and `.cjs` as
/// written, TypeScript as its types erase to; `None` for anything else.
fn runs_as(path: &str) -> Option<String> {
    if [".js", ".mjs", ".cjs"]
        .iter()
        .any(|ext| path.ends_with(ext))
    {
        return Some(path.to_owned());
    }
    typescript::erases(path)
}

/// A changed TypeScript file's changed code lines at the places of its JavaScript that `map`
/// leads them to, in the JavaScript's order, with the JavaScript's length: a line the map
/// names no place for is no statement.
fn through_map(changed: &ChangedSource, map: &MappedScript) -> Result<ChangedSource, V8Error> {
    let firsts = source_map::first_places(&map.mappings).map_err(|source| V8Error::SourceMap {
        path: changed.path.to_string(),
        source,
    })?;
    // Each generated line's offset: the lines before it and the one character ending each.
    let mut starts = Vec::with_capacity(map.line_lengths.len());
    let mut at = 0u64;
    for length in &map.line_lengths {
        starts.push(at);
        at += u64::from(*length) + 1;
    }
    let length = u32::try_from(at.saturating_sub(1)).map_err(|_| V8Error::TooLong {
        path: changed.path.to_string(),
        characters: at,
    })?;
    let mut lines: Vec<CodeLine> = changed
        .lines
        .iter()
        .filter_map(|line| {
            let place = firsts.get(&line.line.checked_sub(1)?)?;
            let index = usize::try_from(place.line).ok()?;
            let line_length = *map.line_lengths.get(index)?;
            let start = u32::try_from(starts[index] + u64::from(place.column)).ok()?;
            (place.column <= line_length).then_some(CodeLine {
                line: line.line,
                start,
                end: start,
            })
        })
        .collect();
    lines.sort_by_key(|l| (l.start, l.line));
    Ok(ChangedSource {
        path: changed.path.clone(),
        length,
        lines,
    })
}

/// The tree path a script's URL names under `root`: percent-decoded, its query and fragment
/// dropped; `None` outside the root or where it is no confined path.
fn tree_path_of(url: &str, root: &str) -> Option<String> {
    let rest = url.strip_prefix(root)?;
    let rest = rest.split(['?', '#']).next()?;
    let decoded = percent_decode(rest)?;
    assay_common::tree_path::TreePath::new(&decoded)
        .ok()
        .map(|p| p.to_string())
}

/// `%XX` escapes decoded; `None` for a broken escape or bytes that are not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The changed code lines of `source` that one process's `ranges` executed: a line is
/// executed when some part of its code lies, innermost, in a range with a count above 0. The
/// count of a place is that of the smallest range holding it (of two alike, the later one, as
/// V8 lists inner blocks after outer ones). A line's parts are read at its first character and
/// wherever a range starts or ends inside it: `} else if (n > 10) {` opens with the brace
/// closing a block that did not run, and its condition, after that brace, ran. Each range is
/// checked against the file's length.
fn executed_lines(source: &ChangedSource, ranges: &[Range]) -> Result<Vec<u32>, V8Error> {
    for range in ranges {
        if range.start > range.end || range.end > u64::from(source.length) {
            return Err(V8Error::Range {
                path: source.path.to_string(),
                start: range.start,
                end: range.end,
                length: source.length,
            });
        }
    }
    // The places read, in offset order, each with the line it belongs to (lines are in
    // offset order and do not overlap).
    let spans: Vec<(u64, u64)> = source
        .lines
        .iter()
        .map(|l| (u64::from(l.start), u64::from(l.end)))
        .collect();
    let line_at = |offset: u64| -> Option<usize> {
        let after = spans.partition_point(|&(start, _)| start <= offset);
        let at = after.checked_sub(1)?;
        (offset < spans[at].1).then_some(at)
    };
    let mut places: Vec<(u64, usize)> = spans
        .iter()
        .enumerate()
        .map(|(line, &(start, _))| (start, line))
        .collect();
    for range in ranges {
        for offset in [range.start, range.end] {
            if let Some(line) = line_at(offset) {
                places.push((offset, line));
            }
        }
    }
    places.sort_unstable();
    places.dedup();
    let offsets: Vec<u64> = places.iter().map(|&(offset, _)| offset).collect();
    // Smallest first, later first among equals: the first range to reach a place is its own.
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by_key(|&i| (ranges[i].end - ranges[i].start, std::cmp::Reverse(i)));
    let mut unassigned: BTreeSet<usize> = (0..places.len()).collect();
    let mut executed = BTreeSet::new();
    for i in order {
        if unassigned.is_empty() {
            break;
        }
        let range = ranges[i];
        let first = offsets.partition_point(|&o| o < range.start);
        let past = offsets.partition_point(|&o| o < range.end);
        let reached: Vec<usize> = unassigned.range(first..past.max(first)).copied().collect();
        for place in reached {
            unassigned.remove(&place);
            if range.count > 0 {
                executed.insert(source.lines[places[place].1].line);
            }
        }
    }
    Ok(executed.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_common::diff_coverage::source::changed_source;
    use assay_common::tree_path::TreePath;

    const PAGER: &str = "function pageCount(total, size) {\n  let pages = Math.floor(total / size);\n  if (total % size > 0) {\n    pages += 1;\n  }\n  return pages;\n}\n";

    fn pager(changed: &[u32]) -> ChangedSource {
        changed_source(
            TreePath::new("lib/pager.js").expect("a tree path"),
            PAGER,
            &changed.iter().copied().collect(),
        )
    }

    fn report(url: &str, ranges: &str) -> String {
        format!(
            r#"{{"root":"file:///scratch/tree/","exit":0,"processes":[{{"result":[{{"url":"{url}","functions":[{{"ranges":{ranges}}}]}}]}}]}}"#
        )
    }

    fn executed(bytes: &str, changed: &[u32]) -> Result<Vec<u32>, V8Error> {
        let files = measured(bytes.as_bytes(), &[pager(changed)])?;
        Ok(files
            .get("lib/pager.js")
            .map(|f| f.executed.iter().copied().collect())
            .unwrap_or_default())
    }

    #[test]
    fn an_inner_range_with_no_count_marks_its_lines_not_executed() {
        // The function ran; its `if` block (offsets 98..119, lines 3's brace to 5) did not.
        let ranges = r#"[{"startOffset":0,"endOffset":138,"count":1},{"startOffset":98,"endOffset":119,"count":0}]"#;
        let bytes = report("file:///scratch/tree/lib/pager.js", ranges);
        assert_eq!(
            executed(&bytes, &[1, 2, 3, 4, 5, 6, 7]).expect("read"),
            [1, 2, 3, 6, 7]
        );
    }

    #[test]
    fn a_line_that_opens_with_a_block_that_did_not_run_is_executed_by_what_follows() {
        // node 20's own ranges for `label(11)`: the first block (37..60, from its `{` to the
        // `}` that opens line 4) and the code after the `else if` returned (104..123) did not
        // run; line 4's condition, after that brace, did.
        const LABEL: &str = "function label(n) {\n  if (n >= 1000) {\n    return 'big';\n  } else if (n > 10) {\n    return 'medium';\n  }\n  return 'small';\n}\nmodule.exports = { label };\n";
        let source = changed_source(
            TreePath::new("lib/size.js").expect("a tree path"),
            LABEL,
            &(2..=7).collect(),
        );
        let ranges = r#"[{"startOffset":0,"endOffset":124,"count":1},{"startOffset":37,"endOffset":60,"count":0},{"startOffset":104,"endOffset":123,"count":0}]"#;
        let bytes = report("file:///scratch/tree/lib/size.js", ranges);
        let files = measured(bytes.as_bytes(), &[source]).expect("read");
        let executed: Vec<u32> = files["lib/size.js"].executed.iter().copied().collect();
        assert_eq!(executed, [2, 4, 5, 6]);
    }

    #[test]
    fn urls_outside_the_root_or_not_confined_are_not_the_changed_files() {
        let ranges = r#"[{"startOffset":0,"endOffset":138,"count":1}]"#;
        for url in [
            "file:///elsewhere/lib/pager.js",
            "file:///scratch/tree/../tree/lib/pager.js",
            "file:///scratch/tree/lib/%2e%2e/lib/pager.js",
            "file:///scratch/tree/lib/pager.js%",
            "node:internal/lib/pager.js",
        ] {
            let files = measured(report(url, ranges).as_bytes(), &[pager(&[2])]).expect("read");
            assert!(files.is_empty(), "{url}: {files:?}");
        }
        // Escapes and a query are read as the browser would.
        let files = measured(
            report("file:///scratch/tree/lib/p%61ger.js?v=2", ranges).as_bytes(),
            &[pager(&[2])],
        )
        .expect("read");
        assert!(files.contains_key("lib/pager.js"), "{files:?}");
    }

    #[test]
    fn hostile_reports_are_refused_with_what_is_wrong_and_never_panic() {
        let url = "file:///scratch/tree/lib/pager.js";
        let past_end = report(url, r#"[{"startOffset":0,"endOffset":99999,"count":1}]"#);
        let backwards = report(url, r#"[{"startOffset":50,"endOffset":10,"count":1}]"#);
        let negative = report(url, r#"[{"startOffset":-1,"endOffset":10,"count":1}]"#);
        let huge = report(
            url,
            r#"[{"startOffset":0,"endOffset":18446744073709551616,"count":1}]"#,
        );
        let cases: Vec<(String, &str)> = vec![
            (past_end, "does not fit its 138 characters"),
            (backwards, "the range 50..10"),
            (negative, "not the JSON"),
            (huge, "not the JSON"),
            ("{\"root\":".into(), "not the JSON"),
            ("[]".into(), "not the JSON"),
            (
                r#"{"root":"http://x/","processes":[]}"#.into(),
                "is not a file:// URL",
            ),
            (
                r#"{"root":"file:///scratch/tree","processes":[]}"#.into(),
                "is not a file:// URL",
            ),
        ];
        for (bytes, says) in cases {
            let err = executed(&bytes, &[2]).expect_err(&bytes);
            let text = assay_transport::error_chain::error_chain(&err);
            assert!(text.contains(says), "{bytes}: {text}");
        }
        let big = vec![b' '; MAX_REPORT_BYTES + 1];
        assert!(matches!(
            measured(&big, &[pager(&[2])]),
            Err(V8Error::TooLarge { .. })
        ));
    }

    #[test]
    fn every_process_counts_and_a_typescript_file_is_not_read_by_offsets() {
        let url = "file:///scratch/tree/lib/pager.js";
        let none = r#"[{"startOffset":0,"endOffset":138,"count":0}]"#;
        let all = r#"[{"startOffset":0,"endOffset":138,"count":3}]"#;
        let bytes = format!(
            r#"{{"root":"file:///scratch/tree/","processes":[{{"result":[{{"url":"{url}","functions":[{{"ranges":{none}}}]}}]}},{{"result":[{{"url":"{url}","functions":[{{"ranges":{all}}}]}}]}}]}}"#
        );
        assert_eq!(executed(&bytes, &[2, 6]).expect("read"), [2, 6]);
        let ts = changed_source(
            TreePath::new("lib/pager.ts").expect("a tree path"),
            PAGER,
            &[2].into_iter().collect(),
        );
        let bytes = report("file:///scratch/tree/lib/pager.ts", all);
        assert!(measured(bytes.as_bytes(), &[ts]).expect("read").is_empty());
    }

    /// TypeScript 4.8's erasure of a pager with an interface, its inline map as node's coverage
    /// carries it, and V8's ranges of a run whose partial page never came.
    const TYPED_PAGER: &str = "interface Page { n: number }\nexport function pageCount(total: number, size: number): number {\n  const full: number = Math.floor(total / size);\n  if (total % size > 0) {\n    return full + 1;\n  }\n  return full;\n}\n";
    const TYPED_PAGER_MAP: &str = r#"{"url":"file:///scratch/tree/lib/pager.js","lineLengths":[13,62,27,33,42,27,24,5,16,1,30,474],"mappings":";;;AACA,SAAgB,SAAS,CAAC,KAAa,EAAE,IAAY;IACnD,MAAM,IAAI,GAAW,IAAI,CAAC,KAAK,CAAC,KAAK,GAAG,IAAI,CAAC,CAAC;IAC9C,IAAI,KAAK,GAAG,IAAI,GAAG,CAAC,EAAE;QACpB,OAAO,IAAI,GAAG,CAAC,CAAC;KACjB;IACD,OAAO,IAAI,CAAC;AACd,CAAC;AAND,8BAMC"}"#;
    const TYPED_PAGER_RANGES: &str = r#"[{"startOffset":0,"endOffset":765,"count":1},{"startOffset":105,"endOffset":259,"count":1},{"startOffset":208,"endOffset":240,"count":0}]"#;

    fn typed_report(maps: &str) -> String {
        format!(
            r#"{{"root":"file:///scratch/tree/","processes":[{{"result":[{{"url":"file:///scratch/tree/lib/pager.js","functions":[{{"ranges":{TYPED_PAGER_RANGES}}}]}}],"maps":[{maps}]}}]}}"#
        )
    }

    #[test]
    fn a_typescript_file_is_read_through_its_javascripts_source_map() {
        let ts = changed_source(
            TreePath::new("lib/pager.ts").expect("a tree path"),
            TYPED_PAGER,
            &(1..=8).collect(),
        );
        let files = measured(
            typed_report(TYPED_PAGER_MAP).as_bytes(),
            std::slice::from_ref(&ts),
        )
        .expect("read");
        let file = files
            .get("lib/pager.ts")
            .expect("the TypeScript file, by its own name");
        // The interface erases to nothing: no statement. The partial page's return never ran.
        assert_eq!(
            file.statements.iter().copied().collect::<Vec<_>>(),
            [2, 3, 4, 5, 6, 7, 8]
        );
        assert_eq!(
            file.executed.iter().copied().collect::<Vec<_>>(),
            [2, 3, 4, 6, 7, 8]
        );
        // Without its map the JavaScript's offsets say nothing of the TypeScript: not measured.
        assert!(
            measured(typed_report("").as_bytes(), std::slice::from_ref(&ts))
                .expect("read")
                .is_empty()
        );
        // The map is the guest's: a broken one refuses the record, a place past its line is
        // no statement, and lines too long for offsets are refused.
        let broken = TYPED_PAGER_MAP.replace(";;;AACA", ";;;AA!A");
        let err = measured(typed_report(&broken).as_bytes(), std::slice::from_ref(&ts))
            .expect_err("broken");
        assert!(
            err.to_string().contains("source map of lib/pager.ts"),
            "{err}"
        );
        let short =
            TYPED_PAGER_MAP.replace("33,42,27,24,5,16,1,30,474]", "33,0,27,24,5,16,1,30,516]");
        let files =
            measured(typed_report(&short).as_bytes(), std::slice::from_ref(&ts)).expect("read");
        assert!(!files["lib/pager.ts"].statements.contains(&3), "{files:?}");
        let long = TYPED_PAGER_MAP.replace("[13,", "[4294967295,4294967295,");
        assert!(measured(typed_report(&long).as_bytes(), std::slice::from_ref(&ts)).is_err());
    }

    #[test]
    fn the_wrapper_runs_the_proving_arguments_without_assays_reporter() {
        let proving: Vec<String> = [
            "node",
            "--test",
            "--test-reporter={node_reporter}",
            "--test-reporter-destination={report}",
            "--test-name-pattern",
            "partial",
            "test/pager.test.js",
        ]
        .map(String::from)
        .to_vec();
        let wrapped = command(&proving).expect("a node --test command");
        assert_eq!(wrapped[..2], ["node", "-e"]);
        assert_eq!(
            wrapped[3..],
            [
                "{report}",
                "--test",
                "--test-name-pattern",
                "partial",
                "test/pager.test.js"
            ]
        );
        assert!(command(&["npm".into(), "test".into()]).is_err());
    }
}
