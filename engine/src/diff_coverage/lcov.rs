//! `cargo llvm-cov`'s lcov report: the proving tests run under `cargo llvm-cov --lcov`
//! where it is installed, and [`measured`] reads the lines it counted of the changed files.
//! Where it is not, cargo says there is no such command and the record says the tool is
//! missing. The report is the guest's and is read as hostile: bounded, each record checked,
//! a file outside the tree ignored.

use assay_common::diff_coverage::{ChangedHunk, MeasuredFile};
use assay_common::runner::cargo::NEXTEST_PROFILE;
use std::collections::{BTreeMap, BTreeSet};

use super::MAX_REPORT_BYTES;

/// What cargo prints when a subcommand is not installed.
const NO_SUCH_COMMAND: &str = "no such command: `llvm-cov`";

/// The proving command under `cargo llvm-cov`: `cargo test …` becomes `cargo llvm-cov --lcov
/// --output-path {report} …`, `cargo nextest run …` becomes `cargo llvm-cov nextest --lcov
/// --output-path {report} …`, the selection and options kept; cargo's JSON messages, which only
/// frame the proving run's report, are left out, as is Assay's nextest profile, whose JUnit
/// report would be written where the lcov report goes.
pub fn command(proving: &[String]) -> Result<Vec<String>, &'static str> {
    let not_cargo = "the test command is not `cargo test …` or `cargo nextest run …`, so `cargo llvm-cov` cannot run it";
    let at = proving
        .iter()
        .position(|w| w == "test" || w == "nextest")
        .filter(|&at| at > 0 && proving[at - 1].rsplit('/').next() == Some("cargo"))
        .ok_or(not_cargo)?;
    let mut command = proving[..at].to_vec();
    command.push("llvm-cov".into());
    let mut rest = proving[at + 1..].iter().peekable();
    if proving[at] == "nextest" {
        if rest.next_if(|w| *w == "run").is_none() {
            return Err(not_cargo);
        }
        command.push("nextest".into());
    }
    command.extend(["--lcov", "--output-path", "{report}"].map(String::from));
    while let Some(word) = rest.next() {
        match word.as_str() {
            "--message-format=json" => {}
            "--cargo-message-format" if rest.peek().is_some_and(|w| *w == "json") => {
                rest.next();
            }
            "--tool-config-file"
                if rest
                    .peek()
                    .is_some_and(|w| w.starts_with("assay:{nextest_config}")) =>
            {
                rest.next();
            }
            "--profile" if rest.peek().is_some_and(|w| *w == NEXTEST_PROFILE) => {
                rest.next();
            }
            _ => command.push(word.clone()),
        }
    }
    Ok(command)
}

/// Whether the run's stderr says `cargo llvm-cov` is not installed where the tests ran.
pub fn says_not_installed(stderr: &[u8]) -> bool {
    String::from_utf8_lossy(stderr).contains(NO_SUCH_COMMAND)
}

/// Why an lcov report cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum LcovError {
    /// The report is larger than any real run's.
    #[error("the lcov report has {bytes} bytes, more than the {MAX_REPORT_BYTES} read")]
    TooLarge {
        /// Its size.
        bytes: usize,
    },
    /// A record is not lcov's.
    #[error("line {line} of the lcov report is malformed: {why}")]
    Malformed {
        /// The report's line (1-based).
        line: usize,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// Per changed file the report measured: the lines it counted (`DA:LINE,COUNT`) as statements,
/// and those with a count above 0 as executed. lcov names files by absolute path in the
/// sandbox: the tree's root is the prefix that, cut from the most source files, leaves a
/// changed file's path (of two such, the shorter); a file outside it is not the tree's.
pub fn measured(
    bytes: &[u8],
    hunks: &[ChangedHunk],
) -> Result<BTreeMap<String, MeasuredFile>, LcovError> {
    if bytes.len() > MAX_REPORT_BYTES {
        return Err(LcovError::TooLarge { bytes: bytes.len() });
    }
    let text = String::from_utf8_lossy(bytes);
    let records = records(&text)?;
    let changed: BTreeSet<&str> = hunks.iter().map(|h| h.path.as_str()).collect();
    let root = root_of(records.keys().map(String::as_str), &changed);
    let mut files = BTreeMap::new();
    for (source, lines) in records {
        let path = match &root {
            Some(root) => source.strip_prefix(root.as_str()),
            None => Some(source.as_str()).filter(|s| !s.starts_with('/')),
        };
        let Some(path) = path.filter(|p| changed.contains(p)) else {
            continue;
        };
        let file: &mut MeasuredFile = files.entry(path.to_owned()).or_default();
        for (line, count) in lines {
            file.statements.insert(line);
            if count > 0 {
                file.executed.insert(line);
            }
        }
    }
    Ok(files)
}

/// Each source file's `DA` records: (line, count).
fn records(text: &str) -> Result<BTreeMap<String, Vec<(u32, u64)>>, LcovError> {
    let mut records: BTreeMap<String, Vec<(u32, u64)>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for (at, line) in text.lines().enumerate() {
        let malformed = |why| LcovError::Malformed { line: at + 1, why };
        let line = line.trim_end();
        if let Some(file) = line.strip_prefix("SF:") {
            current = Some(file.to_owned());
        } else if line == "end_of_record" {
            current = None;
        } else if let Some(data) = line.strip_prefix("DA:") {
            let file = current
                .as_ref()
                .ok_or_else(|| malformed("a DA record outside a file's record"))?;
            let mut fields = data.split(',');
            let number = fields
                .next()
                .and_then(|n| n.parse::<u32>().ok())
                .filter(|&n| n > 0)
                .ok_or_else(|| malformed("DA needs a line number from 1"))?;
            let count = fields
                .next()
                .and_then(|c| c.parse::<u64>().ok())
                .ok_or_else(|| malformed("DA needs a count from 0"))?;
            records
                .entry(file.clone())
                .or_default()
                .push((number, count));
        }
    }
    Ok(records)
}

/// The sandbox's tree root in the report's absolute paths (see [`measured`]); `None` when no
/// absolute path ends with a changed file's.
fn root_of<'a>(
    sources: impl Iterator<Item = &'a str> + Clone,
    changed: &BTreeSet<&str>,
) -> Option<String> {
    let mut roots: BTreeSet<&str> = BTreeSet::new();
    for source in sources.clone().filter(|s| s.starts_with('/')) {
        for path in changed {
            if let Some(root) = source.strip_suffix(path)
                && root.ends_with('/')
            {
                roots.insert(root);
            }
        }
    }
    roots
        .into_iter()
        .max_by_key(|root| {
            let under = sources.clone().filter(|s| s.starts_with(root)).count();
            (under, std::cmp::Reverse(root.len()))
        })
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_common::tree_path::TreePath;

    fn hunk(path: &str) -> ChangedHunk {
        ChangedHunk {
            path: TreePath::new(path).expect("a tree path"),
            start: 1,
            end: 20,
        }
    }

    #[test]
    fn counted_lines_of_the_changed_files_under_the_tree_root_are_read() {
        let lcov = "TN:\n\
            SF:/s/tree/pager/src/lib.rs\nFN:3,pages\nDA:3,4\nDA:4,0\nDA:5,1\nLF:3\nLH:2\nend_of_record\n\
            SF:/s/tree/crates/other/src/lib.rs\nDA:1,1\nend_of_record\n\
            SF:/s/tree/ledger/src/lib.rs\nDA:2,0\nend_of_record\n\
            SF:/home/u/.cargo/registry/src/lib.rs\nDA:9,9\nend_of_record\n";
        let measured = measured(
            lcov.as_bytes(),
            &[hunk("pager/src/lib.rs"), hunk("src/lib.rs")],
        )
        .expect("read");
        // The root is /s/tree/: `crates/other/src/lib.rs` and the registry's file end with
        // `/src/lib.rs` but are not the root package's.
        assert_eq!(measured.keys().collect::<Vec<_>>(), ["pager/src/lib.rs"]);
        let file = &measured["pager/src/lib.rs"];
        assert_eq!(
            file.statements.iter().copied().collect::<Vec<_>>(),
            [3, 4, 5]
        );
        assert_eq!(file.executed.iter().copied().collect::<Vec<_>>(), [3, 5]);
    }

    #[test]
    fn hostile_lcov_is_refused_with_the_line_at_fault() {
        let cases = [
            ("DA:3,1\n", 1, "outside a file's record"),
            ("SF:/s/a.rs\nDA:x,1\n", 2, "line number"),
            ("SF:/s/a.rs\nDA:0,1\n", 2, "line number"),
            ("SF:/s/a.rs\nDA:99999999999,1\n", 2, "line number"),
            ("SF:/s/a.rs\nDA:3\n", 2, "count"),
            ("SF:/s/a.rs\nDA:3,-1\n", 2, "count"),
        ];
        for (lcov, at, says) in cases {
            let err = measured(lcov.as_bytes(), &[hunk("a.rs")]).expect_err(lcov);
            assert!(
                matches!(&err, LcovError::Malformed { line, .. } if *line == at),
                "{lcov}: {err}"
            );
            assert!(err.to_string().contains(says), "{lcov}: {err}");
        }
        let binary = b"SF:/s/\xff\xfe.rs\nDA:1,1\nend_of_record\n\0\0";
        assert!(measured(binary, &[hunk("a.rs")]).expect("read").is_empty());
        let big = vec![b'\n'; MAX_REPORT_BYTES + 1];
        assert!(matches!(
            measured(&big, &[hunk("a.rs")]),
            Err(LcovError::TooLarge { .. })
        ));
    }

    #[test]
    fn cargo_test_and_nextest_become_llvm_cov_with_the_selection_kept() {
        let words = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            command(&words(
                "cargo test --no-fail-fast --message-format=json -- --exact tests::a"
            ))
            .expect("cargo test"),
            words(
                "cargo llvm-cov --lcov --output-path {report} --no-fail-fast -- --exact tests::a"
            )
        );
        assert_eq!(
            command(&words(
                "cargo nextest run --no-fail-fast --retries 0 --tool-config-file assay:{nextest_config} --profile assay --cargo-message-format json -- --exact tests::a"
            ))
            .expect("cargo nextest"),
            words("cargo llvm-cov nextest --lcov --output-path {report} --no-fail-fast --retries 0 -- --exact tests::a")
        );
        assert!(command(&words("make test")).is_err());
        assert!(says_not_installed(
            b"error: no such command: `llvm-cov`\n\n\tView all installed commands with `cargo --list`"
        ));
    }
}
