//! Which test files reach each JavaScript schema site unmutated, read from the baseline run's
//! trace: each site writes [`TRACE_MARK`] on its process's stderr the first time it is reached,
//! and Assay's node:test reporter forwards the line tagged with the test file node ran it in
//! (`assay-reached-in\tFILE\tNUMBERS`, the file as JSON). A mutant's run then holds only those
//! files, and a mutant no file reaches is `NoCoverage` without a run.
//!
//! Why that is sound: until a process reaches a site, the mutated program does what the
//! unmutated one does; node:test runs each test file in a process of its own, and a process a
//! test starts inherits its stderr, so the file is charged. A line naming a file that is not
//! one of the tree's test files (a forged one, a path outside the tree) makes its mutants run
//! every file. What this cannot see: a child process whose stderr a test swallows.
//!
//! The trace is the guest's own stderr, so a hostile test can forge lines: at worst a mutant
//! then runs fewer files and survives, which the guest could always arrange by failing to test.
//! A trace that is missing or cut runs every mutant against every file.
//!
//! The reporter also writes each test file's own time, as node's runner measured its process
//! (`assay-file-ms\tFILE\tMS`): a mutant's limit then follows from the files it runs, not
//! from the whole unmutated run. The largest time a file is given counts, so a forged line can
//! only loosen a limit, never tighten it below what the runner measured.
//!
//! [`TRACE_MARK`]: crate::mutation::mutants::javascript::schema::TRACE_MARK

use assay_common::job::JobResult;
use assay_transport::store::{ArtifactStore, read_named};
use std::collections::{BTreeMap, BTreeSet};

/// The first line of a traced run, which the reporter writes.
const TRACE_ON: &str = "assay-reached-on";
/// The first field of a line the reporter forwards.
const FORWARDED: &str = "assay-reached-in";
/// The first field of a test file's own time, in milliseconds.
const FILE_TIME: &str = "assay-file-ms";
/// The longest time a file is taken to have: a day (anything longer is not a measurement).
const MAX_FILE_SECONDS: f64 = 86_400.0;

/// Which test files reach a mutant's site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileReach {
    /// Only these, by path in the tree.
    Files(BTreeSet<String>),
    /// Something no file of the tree can be named for: every file runs.
    Everything,
}

/// The trace of one unmutated run, by mutant number (the switch's), and each test file's own
/// time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReachedFiles {
    by_mutant: BTreeMap<u32, FileReach>,
    seconds: BTreeMap<String, f64>,
}

impl ReachedFiles {
    /// Reads the trace in `stderr` against the tree's `test_files`; `None` when the trace
    /// was not on.
    pub fn read(stderr: &str, test_files: &BTreeSet<String>) -> Option<Self> {
        if !stderr.lines().any(|line| line == TRACE_ON) {
            return None;
        }
        let mut reached = Self::default();
        for line in stderr.lines() {
            let mut fields = line.splitn(3, '\t');
            let (Some(kind), Some(file), Some(numbers)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            match kind {
                FORWARDED => {}
                FILE_TIME => {
                    reached.read_file_time(file, numbers, test_files);
                    continue;
                }
                _ => continue,
            }
            let file = serde_json::from_str::<String>(file)
                .ok()
                .filter(|f| test_files.contains(f));
            for number in numbers.split(',').filter_map(|n| n.parse::<u32>().ok()) {
                if number == 0 {
                    continue;
                }
                let reach = reached
                    .by_mutant
                    .entry(number)
                    .or_insert_with(|| FileReach::Files(BTreeSet::new()));
                match (reach, &file) {
                    (FileReach::Files(files), Some(file)) => {
                        files.insert(file.clone());
                    }
                    (reach, None) => *reach = FileReach::Everything,
                    (FileReach::Everything, Some(_)) => {}
                }
            }
        }
        Some(reached)
    }

    /// Which files reach mutant `number`; `None`: none does.
    pub fn of(&self, number: u32) -> Option<&FileReach> {
        self.by_mutant.get(&number)
    }

    /// What running `files` costs, each in a process of its own: the sum of their own times;
    /// `None` when one was not measured.
    pub fn cost_of(&self, files: &BTreeSet<String>) -> Option<std::time::Duration> {
        let mut total = 0.0;
        for file in files {
            total += self.seconds.get(file)?;
        }
        Some(std::time::Duration::from_secs_f64(total))
    }

    /// Keeps a file's time when the file is one of the tree's test files and the time is a
    /// plain number of milliseconds; the largest time given counts.
    fn read_file_time(&mut self, file: &str, ms: &str, test_files: &BTreeSet<String>) {
        let Some(file) = serde_json::from_str::<String>(file)
            .ok()
            .filter(|f| test_files.contains(f))
        else {
            return;
        };
        let Some(seconds) = ms
            .trim()
            .parse::<f64>()
            .ok()
            .map(|ms| ms / 1000.0)
            .filter(|s| s.is_finite() && *s >= 0.0 && *s <= MAX_FILE_SECONDS)
        else {
            return;
        };
        let kept = self.seconds.entry(file).or_insert(seconds);
        *kept = kept.max(seconds);
    }
}

/// Why the baseline run's trace cannot select a mutant's test files; each then runs every one.
#[derive(Debug, thiserror::Error)]
pub enum FileTraceError {
    #[error(
        "per-file coverage unavailable (the trace lost {dropped_bytes} bytes at the worker's output cap)"
    )]
    Cut { dropped_bytes: u64 },
    #[error("per-file coverage unavailable ({0})")]
    Unread(String),
    #[error("per-file coverage unavailable (the unmutated run was not traced)")]
    NotTraced,
}

/// The trace of the baseline run `result` (its stderr read from the store).
pub async fn from_run(
    store: &dyn ArtifactStore,
    result: &JobResult,
    test_files: &BTreeSet<String>,
) -> Result<ReachedFiles, FileTraceError> {
    if let Some(cut) = result
        .artifacts
        .iter()
        .find(|a| a.name == "stderr" && a.dropped_bytes > 0)
    {
        return Err(FileTraceError::Cut {
            dropped_bytes: cut.dropped_bytes,
        });
    }
    let stderr = read_named(store, result, "stderr")
        .await
        .map_err(|e| FileTraceError::Unread(assay_transport::error_chain::error_chain(&e)))?
        .unwrap_or_default();
    ReachedFiles::read(&String::from_utf8_lossy(&stderr), test_files)
        .ok_or(FileTraceError::NotTraced)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> BTreeSet<String> {
        ["test/a.test.js", "test/b.test.js"]
            .map(String::from)
            .into()
    }

    #[test]
    fn lines_name_the_files_that_reach_each_mutant() {
        let stderr = "noise\nassay-reached-on\nassay-reached-in\t\"test/a.test.js\"\t1,2\n\
                      assay-reached-in\t\"test/b.test.js\"\t2\n";
        let reached = ReachedFiles::read(stderr, &files()).expect("traced");
        let only = |names: &[&str]| FileReach::Files(names.iter().map(|n| (*n).into()).collect());
        assert_eq!(reached.of(1), Some(&only(&["test/a.test.js"])));
        assert_eq!(
            reached.of(2),
            Some(&only(&["test/a.test.js", "test/b.test.js"]))
        );
        assert_eq!(reached.of(3), None);
    }

    #[test]
    fn a_mutants_cost_is_its_files_own_times_and_a_forged_time_only_loosens_it() {
        let stderr = "assay-reached-on\n\
                      assay-reached-in\t\"test/a.test.js\"\t1\n\
                      assay-file-ms\t\"test/a.test.js\"\t82.5\n\
                      assay-file-ms\t\"test/b.test.js\"\t1500\n\
                      assay-file-ms\t\"test/b.test.js\"\t3\n\
                      assay-file-ms\t\"test/a.test.js\"\tNaN\n\
                      assay-file-ms\t\"test/a.test.js\"\t-5\n\
                      assay-file-ms\t\"test/a.test.js\"\t1e300\n\
                      assay-file-ms\t\"../../etc/passwd\"\t1\n\
                      assay-file-ms\tnot json\t1\n";
        let reached = ReachedFiles::read(stderr, &files()).expect("traced");
        let seconds = |names: &[&str]| {
            reached
                .cost_of(&names.iter().map(|n| (*n).to_owned()).collect())
                .map(|d| d.as_secs_f64())
        };
        assert_eq!(seconds(&["test/a.test.js"]), Some(0.0825));
        // The forged 3 ms does not undercut the runner's 1.5 s.
        assert_eq!(seconds(&["test/b.test.js"]), Some(1.5));
        assert_eq!(seconds(&["test/a.test.js", "test/b.test.js"]), Some(1.5825));
        // A file without a time of its own: the cost is not known.
        assert_eq!(seconds(&["test/a.test.js", "test/c.test.js"]), None);
        // A hostile line changes nothing else: the reach is as before.
        assert!(matches!(reached.of(1), Some(FileReach::Files(f)) if f.len() == 1));
    }

    #[test]
    fn a_hostile_file_runs_everything_and_an_untraced_run_reads_as_none() {
        let stderr = "assay-reached-on\n\
                      assay-reached-in\t\"../../etc/passwd\"\t1\n\
                      assay-reached-in\t\"test/a.test.js\"\t1\n\
                      assay-reached-in\tnot json\t2\n\
                      assay-reached-in\t\"test/a.test.js\"\t0,x,4294967296,3\n";
        let reached = ReachedFiles::read(stderr, &files()).expect("traced");
        assert_eq!(reached.of(1), Some(&FileReach::Everything));
        assert_eq!(reached.of(2), Some(&FileReach::Everything));
        assert!(matches!(reached.of(3), Some(FileReach::Files(f)) if f.len() == 1));
        assert_eq!(reached.of(0), None);
        assert_eq!(
            ReachedFiles::read("assay-reached-in\t\"test/a.test.js\"\t1\n", &files()),
            None
        );
    }
}
