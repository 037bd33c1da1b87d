//! Incremental `assay mutate`: a mutant whose key was seen before takes the stored verdict of
//! that earlier run instead of running again. The key digests the mutant's own function (not
//! the file, not the tree), so a one-function edit re-runs only that function's mutants and
//! those whose tests changed. What the key holds and leaves out is in docs/FORMATS.md
//! ("Mutant results").
//!
//! Trust: only a verdict that would come out the same again is stored (a kill confirmed by a
//! re-run, a survivor), from a run whose baseline passed; never a timeout, a runtime error, a
//! budget cut or a flaky kill. An entry holds the runs themselves, so every read re-checks
//! their artifacts against their sha256, re-parses the pinned report and judges the runs again:
//! an entry whose runs do not give its verdict is refused, reported, and the mutant runs.

use super::{Judged, MutantResult, MutateRequest, Status, Verdict, judge};
use crate::mutation::mutants::budget::{
    FORKED_LIMIT_RULE, MUTATE_TIMEOUT_FACTOR, MUTATE_TIMEOUT_SLACK, MutantTimeout,
};
use crate::mutation::mutants::scope::Scope;
use crate::mutation::mutants::{Mutant, OperatorSet};
use crate::result_cache::{Producer, Refusal, ResultCache, RunContext, check_pinned_as, reparse};
use crate::source::{self, SourceError};
use assay_common::job::JobResult;
use assay_common::outcome::ReportOutcome;
use assay_common::report::mutant_batch::{self, MemberRun};
use assay_common::runner::ReportFormat;
use assay_common::sandbox::SandboxEvidence;
use assay_common::{ProofId, TreeId};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::time::Duration;

/// The entries' schema; a new one starts a new key space.
pub const SCHEMA: &str = "assay.cache.mutant/v2";
/// Where entries live in the artifact store, inside the result cache's own prefix, so
/// `assay cache stats` and `prune` see them.
pub const PREFIX: &str = "cache/v1/mutants";

/// Test configuration at the tree's root that every selection reads.
const CONFIG_FILES: [&str; 4] = ["pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini"];

/// The cache as `assay mutate` uses it: where entries live, and what decides a result where
/// the mutants run.
#[derive(Clone)]
pub struct MutantCache {
    /// The result cache the verdicts are stored in.
    pub cache: ResultCache,
    /// What beside the mutant decides its verdict here (sandbox, environment).
    pub context: RunContext,
}

impl std::fmt::Debug for MutantCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MutantCache")
            .field("mode", &self.cache.mode)
            .field("context", &self.context)
            .finish()
    }
}

pub use assay_common::mutation_report::CachedFrom;

/// What the cache did in one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CacheOutcome {
    /// Mutants answered from the cache.
    pub served: usize,
    /// Mutants that needed a run (no-coverage ones need none): what `served` is out of.
    pub eligible: usize,
    /// Entries written after the run.
    pub stored: usize,
    /// Entries found but refused: `(key, why)`.
    pub refused: Vec<(String, String)>,
    /// Why the cache was not used, when so.
    pub not_used: Option<String>,
    /// Why the verdicts could not be stored, when so.
    pub store_error: Option<String>,
}

/// Everything a key digests, in the order written; documented in docs/FORMATS.md.
#[derive(Serialize)]
struct KeyInputs<'a> {
    schema: &'static str,
    path: &'a str,
    scope_name: &'a str,
    scope_text: &'a str,
    operator: &'static str,
    replacement: &'a str,
    /// The edit's byte range relative to the scope's start.
    offset: (usize, usize),
    operators: &'static str,
    runner: &'static str,
    command_prefix: &'a [String],
    report: &'a ReportFormat,
    /// The covering node ids, sorted; `None`: the whole suite runs.
    selection: Option<Vec<&'a str>>,
    /// `(path, sha256 of its bytes or "absent")` of every test file the selection reads.
    test_files: Vec<(&'a str, String)>,
    /// The mutant timeout's rule: factor, slack in milliseconds, and what a fork's limit
    /// counts ([`FORKED_LIMIT_RULE`]).
    timeout_rule: (u32, u128, &'static str),
    sandbox: &'a SandboxEvidence,
    interpreter: Option<String>,
    env: &'a [(String, String)],
}

/// Builds keys for one run, reading each test file once from the mutated tree.
pub(super) struct Keys<'a> {
    request: &'a MutateRequest,
    tree: &'a TreeId,
    context: &'a RunContext,
    prefix: &'a [String],
    digests: BTreeMap<String, String>,
    /// Every test file and conftest.py of the tree, for whole-suite selections.
    suite_files: Option<Vec<String>>,
}

impl<'a> Keys<'a> {
    pub(super) fn new(
        request: &'a MutateRequest,
        tree: &'a TreeId,
        context: &'a RunContext,
        prefix: &'a [String],
    ) -> Self {
        Self {
            request,
            tree,
            context,
            prefix,
            digests: BTreeMap::new(),
            suite_files: None,
        }
    }

    /// The key of `mutant` in `scope` of `source`, selecting `covered_by` (empty: the whole
    /// suite) and run as `command`.
    pub(super) fn key(
        &mut self,
        mutant: &Mutant,
        source: &str,
        scope: &Scope,
        covered_by: &[String],
        command: &[String],
    ) -> Result<String, SourceError> {
        let mut selection: Option<Vec<&str>> =
            (!covered_by.is_empty()).then(|| covered_by.iter().map(String::as_str).collect());
        if let Some(ids) = selection.as_mut() {
            ids.sort_unstable();
            ids.dedup();
        }
        let files = match &selection {
            Some(ids) => self.files_of(ids),
            None => self.suite_files()?,
        };
        let mut test_files = Vec::with_capacity(files.len());
        for file in &files {
            test_files.push(self.digest(file)?);
        }
        let inputs = KeyInputs {
            schema: SCHEMA,
            path: mutant.path.as_str(),
            scope_name: &scope.name,
            scope_text: source.get(scope.start..scope.end).unwrap_or(source),
            operator: mutant.operator.name(),
            replacement: &mutant.edit.replacement,
            offset: (
                mutant.edit.start.saturating_sub(scope.start),
                mutant.edit.end.saturating_sub(scope.start),
            ),
            operators: match self.request.operators {
                OperatorSet::Default => "default",
                OperatorSet::Extended => "extended",
            },
            runner: self.request.runner.name(),
            command_prefix: self.prefix,
            report: &self.request.runner.report_format(),
            selection,
            test_files: files.iter().map(String::as_str).zip(test_files).collect(),
            timeout_rule: (
                MUTATE_TIMEOUT_FACTOR,
                MUTATE_TIMEOUT_SLACK.as_millis(),
                FORKED_LIMIT_RULE,
            ),
            sandbox: &self.context.sandbox,
            interpreter: command
                .first()
                .and_then(|program| self.context.interpreter(program)),
            env: &self.context.env,
        };
        // Serializing plain data cannot fail.
        let bytes = serde_json::to_vec(&inputs).unwrap_or_default();
        Ok(hex::encode(Sha256::digest(&bytes)))
    }

    /// The files the tests `ids` live in, each conftest.py on their paths, and the root's
    /// test configuration, sorted.
    fn files_of(&self, ids: &[&str]) -> Vec<String> {
        let mut files: Vec<String> = CONFIG_FILES.iter().map(|f| (*f).to_owned()).collect();
        for id in ids {
            let file = id.split_once("::").map_or(*id, |(file, _)| file);
            files.push(file.to_owned());
            let mut dir = file;
            while let Some((parent, _)) = dir.rsplit_once('/') {
                files.push(format!("{parent}/conftest.py"));
                dir = parent;
            }
            files.push("conftest.py".into());
        }
        files.sort();
        files.dedup();
        files
    }

    fn suite_files(&mut self) -> Result<Vec<String>, SourceError> {
        if let Some(files) = &self.suite_files {
            return Ok(files.clone());
        }
        let runner = self.request.runner;
        let mut files: Vec<String> = source::list_files(&self.request.repo, self.tree)?
            .into_iter()
            .filter(|path| {
                runner.is_test_file(path) || path == "conftest.py" || path.ends_with("/conftest.py")
            })
            .chain(CONFIG_FILES.iter().map(|f| (*f).to_owned()))
            .collect();
        files.sort();
        files.dedup();
        self.suite_files = Some(files.clone());
        Ok(files)
    }

    fn digest(&mut self, path: &str) -> Result<String, SourceError> {
        if let Some(known) = self.digests.get(path) {
            return Ok(known.clone());
        }
        let digest = match source::read_file(&self.request.repo, self.tree, path)? {
            Some(bytes) => hex::encode(Sha256::digest(&bytes)),
            None => "absent".to_owned(),
        };
        self.digests.insert(path.to_owned(), digest.clone());
        Ok(digest)
    }
}

/// A stored mutant verdict with the runs that gave it: the mutant's run and, for a kill its
/// own session did not re-run, the confirming run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MutantEntry {
    /// The entry's schema; an entry of another is never served.
    pub schema: String,
    /// The cache key the entry answers.
    pub key: String,
    /// The run that produced the verdict.
    pub produced_by: Producer,
    /// Seconds since the epoch.
    pub created_at: u64,
    /// The verdict the entry claims, as the report shows it.
    pub verdict: Verdict,
    /// The runs that gave the verdict: the mutant's and, for a kill, any confirming one.
    pub runs: Vec<JobResult>,
    /// The number a batch's report names the mutant by, when it ran in a batch of several
    /// (`campaign::batches`): a run settled there pins the whole batch's report, of which the
    /// run's report is this member's part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_member: Option<u32>,
    /// Hex HMAC-SHA256 of the entry without this field, under the key of whoever may write
    /// the cache (see `cache::SigningKey`); an entry without one is never served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

crate::result_cache::signed_entry!(MutantEntry, SCHEMA);

pub(super) enum Lookup {
    Hit(Box<MutantEntry>),
    Miss,
    Refused(Refusal),
}

fn entry_key(key: &str) -> String {
    format!("{PREFIX}/{key}.json")
}

/// Judges `runs` as the run that produced them did: `Some` verdict only when they make a
/// trusted one (a survivor, or a kill confirmed by its session's re-run or by a second run).
fn trusted_verdict(runs: &[JobResult]) -> Option<Verdict> {
    // Only completed runs are ever stored, and the limit only names a timeout.
    let timeout = MutantTimeout {
        limit: Duration::ZERO,
        set_by_budget: false,
    };
    let (first, rest) = runs.split_first()?;
    // Only interpreted languages' verdicts are stored (`mutate::run`): no compile errors.
    let judged: Judged = judge(first, timeout, false);
    let trusted = match (judged.verdict.status, judged.confirmed, rest) {
        (Status::Survived, _, []) => true,
        (Status::Killed, Some(true), []) => true,
        (Status::Killed, None, [second]) => {
            judge(second, timeout, false).verdict.status == Status::Killed
        }
        _ => false,
    };
    trusted.then_some(judged.verdict)
}

impl MutantCache {
    /// The entry for `key`, checked: it must name this key and schema, every artifact of its
    /// runs must be in the store with its sha256, each pinned report must re-parse to its run's
    /// report, and judging the runs again must give the verdict the entry claims.
    pub(super) async fn lookup(&self, key: &str, format: &ReportFormat) -> Lookup {
        if !self.cache.serves() {
            return Lookup::Miss;
        }
        let entry: MutantEntry = match self.cache.fetch(&entry_key(key), key).await {
            Ok(Some(entry)) => entry,
            Ok(None) => return Lookup::Miss,
            Err(why) => return Lookup::Refused(why),
        };
        for run in &entry.runs {
            let reread = |bytes: Option<&[u8]>, stderr: &[u8]| {
                let whole = reparse(format, bytes, stderr, &run.report);
                match (entry.batch_member, bytes) {
                    (Some(member), Some(bytes)) if whole != run.report => {
                        member_report(bytes, member).unwrap_or(whole)
                    }
                    _ => whole,
                }
            };
            if let Err(why) = check_pinned_as(self.cache.store(), run, format, reread).await {
                return Lookup::Refused(why);
            }
        }
        if trusted_verdict(&entry.runs).as_ref() != Some(&entry.verdict) {
            return Lookup::Refused(Refusal::VerdictDiffers);
        }
        Lookup::Hit(Box::new(entry))
    }

    /// Stores `result`'s verdict under `key` when `runs` make it a trusted one; `Ok(false)`
    /// when they do not (nothing is written). `batch_member` is the mutant's number in its
    /// batch, when it was one's member.
    pub(super) async fn store(
        &self,
        key: &str,
        run_id: &ProofId,
        result: &MutantResult,
        runs: Vec<JobResult>,
        batch_member: Option<u32>,
    ) -> Result<bool, crate::result_cache::CacheError> {
        let Some(verdict) = trusted_verdict(&runs) else {
            return Ok(false);
        };
        // The record must say what its runs say (a flaky mark comes from elsewhere).
        if result.flaky || verdict.status != result.verdict.status {
            return Ok(false);
        }
        let Some(first) = runs.first() else {
            return Ok(false);
        };
        let mut entry = MutantEntry {
            schema: SCHEMA.into(),
            key: key.to_owned(),
            produced_by: Producer {
                proof_id: run_id.clone(),
                job_id: first.job_id.clone(),
            },
            created_at: crate::result_cache::epoch_secs(),
            verdict,
            runs,
            batch_member,
            signature: None,
        };
        self.cache.seal(&mut entry);
        let json = serde_json::to_vec(&entry).map_err(|source| {
            crate::result_cache::CacheError::Encode {
                key: key.to_owned(),
                source,
            }
        })?;
        self.cache
            .store()
            .put_bytes("cache-entry", &entry_key(key), json.into())
            .await
            .map_err(|source| crate::result_cache::CacheError::Write {
                key: key.to_owned(),
                source,
            })?;
        Ok(true)
    }
}

/// Member `member`'s report in a batch's report `bytes`, read as the batch's run read it
/// (`campaign::batches`); `None` when the batch settled no run of it.
fn member_report(bytes: &[u8], member: u32) -> Option<ReportOutcome> {
    match mutant_batch::read(bytes, &[member]).remove(&member)? {
        MemberRun::Ran { report, .. } => Some(report),
        MemberRun::TimedOut { .. } | MemberRun::Unsettled(_) => None,
    }
}

impl MutantEntry {
    /// The record of `mutant`, covered by `covered_by` in this run, from this entry.
    pub(super) fn answer(&self, mutant: &Mutant, covered_by: Vec<String>) -> MutantResult {
        MutantResult {
            mutant: mutant.clone(),
            verdict: self.verdict.clone(),
            covered_by,
            flaky: false,
            cached: Some(CachedFrom {
                key: self.key.clone(),
                run_id: self.produced_by.proof_id.clone(),
                job_id: self.produced_by.job_id.clone(),
                stored_at: self.created_at,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_common::job::JobStatus;
    use assay_common::outcome::{CaseResult, Outcome, ReportOutcome, TestReport};
    use assay_common::{JobId, WorkerId};

    fn run(cases: &[(&str, Outcome)]) -> JobResult {
        JobResult {
            job_id: JobId("m-1796113691-2063badd71c04e95/0003".into()),
            index: 3,
            status: JobStatus::Completed { exit_code: 1 },
            report: ReportOutcome::Parsed(TestReport {
                cases: cases
                    .iter()
                    .map(|(name, outcome)| CaseResult {
                        file: "tests/test_version.py".into(),
                        suite: "tests.test_version".into(),
                        name: (*name).into(),
                        variant: None,
                        outcome: *outcome,
                        message: None,
                    })
                    .collect(),
                ..TestReport::default()
            }),
            artifacts: Vec::new(),
            duration_ms: 420,
            worker: WorkerId("embedded".into()),
            sandbox: None,
        }
    }

    #[test]
    fn only_survivors_and_confirmed_kills_are_trusted() {
        let survived = run(&[("test_bump", Outcome::Passed)]);
        assert_eq!(
            trusted_verdict(std::slice::from_ref(&survived)).map(|v| v.status),
            Some(Status::Survived)
        );
        // A kill with no re-run in its session needs a second run that kills again.
        let killed = run(&[("test_bump", Outcome::Failed)]);
        assert!(trusted_verdict(std::slice::from_ref(&killed)).is_none());
        assert!(trusted_verdict(&[killed.clone(), survived.clone()]).is_none());
        let confirmed = trusted_verdict(&[killed.clone(), killed.clone()]).unwrap();
        assert_eq!(confirmed.status, Status::Killed);
        assert_eq!(confirmed.killed_by, ["tests/test_version.py::test_bump"]);
        // A timeout is never trusted.
        let mut hung = killed;
        hung.status = JobStatus::TimedOut;
        assert!(trusted_verdict(&[hung]).is_none());
    }
}
