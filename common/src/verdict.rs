//! The verdict rules, as pure functions over a proof's observations. Everything that decides
//! `proven`, `refuted`, `unverified` or `unstable` lives here, and nowhere else.

use crate::criteria::{Criterion, CriterionKind, TestSelector};
use crate::job::{JobKind, JobResult, JobStatus, Side};
use crate::outcome::{CaseResult, Outcome, TestReport};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::fmt;

/// What a proof concluded, for one criterion or for the whole proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The evidence shows what the criterion asks: fail then pass, or pass on both.
    Proven,
    /// The evidence contradicts the criterion.
    Refuted,
    /// Evidence missing, incomplete, timed out or ambiguous.
    Unverified,
    /// Repeats of the same test on the same tree disagreed.
    Unstable,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Proven => "proven",
            Self::Refuted => "refuted",
            Self::Unverified => "unverified",
            Self::Unstable => "unstable",
        })
    }
}

/// What one side's runs say about one criterion's test.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome", content = "detail")]
pub enum SideOutcome {
    /// Every matched case that ran passed (at least one did).
    Passed,
    /// At least one matched case (or variant) ran and failed.
    Failed,
    /// A matched case errored in setup, a fixture hook or teardown.
    Error,
    /// The file the test lives in failed to collect or import.
    CollectionError(String),
    /// Every matched case was skipped, todo or an expected failure.
    Skipped,
    /// Complete, trustworthy reports that do not contain the test.
    NotFound,
    /// No trustworthy report to look in (timed out, missing, malformed, partial, duplicate).
    NoEvidence(String),
}

impl SideOutcome {
    /// Outcomes a repeat can disagree on; missing evidence is not a disagreement.
    fn observed(&self) -> Option<&'static str> {
        match self {
            Self::Passed => Some("passed"),
            Self::Failed => Some("failed"),
            Self::Error | Self::CollectionError(_) => Some("errored"),
            Self::Skipped => Some("skipped"),
            Self::NotFound | Self::NoEvidence(_) => None,
        }
    }

    /// The outcome as evidence names it (`not_found`).
    pub fn label(&self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
            Self::Error => "error",
            Self::CollectionError(_) => "collection_error",
            Self::Skipped => "skipped",
            Self::NotFound => "not_found",
            Self::NoEvidence(_) => "no_evidence",
        }
    }
}

/// One job's result, with the plan facts the rules need.
#[derive(Clone, Copy, Debug)]
pub struct Observation<'a> {
    /// What the job was for.
    pub kind: JobKind,
    /// Which side of the change it ran on.
    pub side: Side,
    /// What its worker reported.
    pub result: &'a JobResult,
}

/// One reported case a criterion's test matched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchedCase {
    /// The plan index of the job that reported it.
    pub job: u32,
    /// The case's file, relative to the tree root.
    pub file: String,
    /// The class, module or describe path that contains it.
    pub suite: String,
    /// The bare test name.
    pub name: String,
    /// Its parametrization or subtest label, if any.
    pub variant: Option<String>,
    /// How it ended.
    pub outcome: Outcome,
    /// The failure or skip message the runner gave, for the reason's hints. Not part of the
    /// evidence.
    #[serde(skip)]
    pub message: Option<String>,
}

/// What one run of a criterion's test said on one side.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunOutcome {
    /// The plan index of the job that ran it.
    pub job: u32,
    /// What that run says of the test.
    #[serde(flatten)]
    pub outcome: SideOutcome,
    /// Why the run has no evidence of the test, when it has none and the job says why (it
    /// timed out, say): what the criterion's reason code names. Not part of the evidence.
    #[serde(skip)]
    pub missing: Option<ReasonCode>,
}

/// What one side's runs say about a criterion's test, with the cases behind it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideEvidence {
    /// Serialized as `"outcome": "failed"` plus `"detail"` where the outcome has one.
    #[serde(flatten)]
    pub outcome: SideOutcome,
    /// Every case of the first run the test matched.
    pub cases: Vec<MatchedCase>,
    /// Every run of the test on this side in plan order: the first run, then the repeats.
    pub runs: Vec<RunOutcome>,
    /// For a collection error: the first line of what the report says of it (the compiler's
    /// first error for a Rust or Go build; `build failed` for a Go build whose error the run
    /// did not print).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Why a criterion got its verdict, as a stable code a script can act on; `reason` says the same
/// for people. The codes and their meanings are documented in docs/FORMATS.md ("Reason codes")
/// and listed in docs/schemas/assay.proof.v1.json: a code is never renamed, only added.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonCode {
    /// proven `test:`: it failed on the base and passes with the change.
    Reproduced,
    /// proven `guard:`: it passes on both sides.
    PassedOnBoth,
    /// proven `test:` under the test-only exception: it passes, stably, on the candidate.
    PassedTestOnly,
    /// refuted: the test fails (or errors) with the change.
    FailsWithChange,
    /// refuted: a `test:` passes on the base too, so it does not reproduce the bug.
    PassesOnBase,
    /// refuted: a guard (or one of its variants) fails on a side.
    GuardFailed,
    /// refuted: the test's file fails to collect, import or build with the change.
    BuildFailed,
    /// unverified: the name matches tests in more than one file.
    Ambiguous,
    /// unverified: no test of that name ran (see `suggestions`).
    NotFound,
    /// unverified: the test's file fails to collect, import or build on the base.
    NeverRanOnBase,
    /// unverified: the test errored in setup, a fixture or teardown on the base.
    ErroredOnBase,
    /// unverified: every matched case was skipped.
    Skipped,
    /// unverified: a job timed out before reporting the test.
    TimedOut,
    /// unverified: a job wrote no trustworthy report (missing, malformed, partial, empty).
    NoReport,
    /// unverified: a job reported the same test more than once.
    DuplicateResult,
    /// unverified: a job never ran (infrastructure failure, cancelled, not planned).
    NotRun,
    /// unverified: one run of the test reported it and another did not.
    NotInEveryRun,
    /// unverified: the test's file spawns another test runner.
    SpawnsRunner,
    /// unverified: the change alters what judges its tests (runner hooks, configuration).
    HarnessChanged,
    /// unverified: a `test:` changed its outcome while the product change is inert (comments,
    /// docstrings only).
    InertProduct,
    /// unstable: runs of the same test on the same tree disagree.
    Unstable,
}

impl ReasonCode {
    /// The code as evidence writes it (`passes_on_base`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reproduced => "reproduced",
            Self::PassedOnBoth => "passed_on_both",
            Self::PassedTestOnly => "passed_test_only",
            Self::FailsWithChange => "fails_with_change",
            Self::PassesOnBase => "passes_on_base",
            Self::GuardFailed => "guard_failed",
            Self::BuildFailed => "build_failed",
            Self::Ambiguous => "ambiguous",
            Self::NotFound => "not_found",
            Self::NeverRanOnBase => "never_ran_on_base",
            Self::ErroredOnBase => "errored_on_base",
            Self::Skipped => "skipped",
            Self::TimedOut => "timed_out",
            Self::NoReport => "no_report",
            Self::DuplicateResult => "duplicate_result",
            Self::NotRun => "not_run",
            Self::NotInEveryRun => "not_in_every_run",
            Self::SpawnsRunner => "spawns_runner",
            Self::HarnessChanged => "harness_changed",
            Self::InertProduct => "inert_product",
            Self::Unstable => "unstable",
        }
    }
}

impl fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One criterion's verdict with the evidence from both sides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriterionVerdict {
    /// The criterion's id (`C1`).
    pub id: String,
    /// Whether it is a `test:` or a `guard:`.
    pub kind: CriterionKind,
    /// The test name it declares.
    pub test: String,
    /// What the evidence concluded of this criterion.
    pub verdict: Verdict,
    /// Why, in one sentence for people.
    pub reason: String,
    /// `reason` as a stable code. Evidence written before codes existed has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_code: Option<ReasonCode>,
    /// When no test of the declared name ran: the closest names that did (by edit distance,
    /// and module-qualified forms such as `tests::full_pages` for `full_pages`), best first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suggestions: Vec<String>,
    /// What the base tree's runs say of the test.
    pub base: SideEvidence,
    /// What the candidate tree's runs say of the test.
    pub candidate: SideEvidence,
}

/// The proof verdict: proven iff every criterion is; refuted if any is; else unverified.
pub fn proof_verdict(criteria: &[CriterionVerdict]) -> Verdict {
    if !criteria.is_empty() && criteria.iter().all(|c| c.verdict == Verdict::Proven) {
        Verdict::Proven
    } else if criteria.iter().any(|c| c.verdict == Verdict::Refuted) {
        Verdict::Refuted
    } else {
        Verdict::Unverified
    }
}

/// A changed test file that may not serve as proof, with its source to find the criteria it
/// declares even when no report lists them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedFile {
    /// Confined like every path on the wire; it travels in a fleet submission.
    pub path: crate::tree_path::TreePath,
    /// What it spawns, e.g. `npx vitest run`.
    pub spawns: String,
    /// The file's source, searched for the criteria's names.
    pub source: String,
}

/// A test in a file that spawns another test runner passes on that runner's exit code, so it
/// proves nothing: every criterion with a matched case in that file becomes unverified. When no
/// report lists the criterion's test at all, a file that spells its name in a string literal
/// is taken to declare it.
pub fn refuse_spawning_files(verdicts: &mut [CriterionVerdict], refused: &[RefusedFile]) {
    for verdict in verdicts.iter_mut() {
        let files: Vec<&str> = verdict
            .base
            .cases
            .iter()
            .chain(&verdict.candidate.cases)
            .map(|case| case.file.as_str())
            .collect();
        let declares = |f: &RefusedFile| {
            if !files.is_empty() {
                files.contains(&f.path.as_str())
            } else {
                ['\'', '"', '`'].iter().any(|quote| {
                    f.source
                        .contains(&format!("{quote}{}{quote}", verdict.test))
                })
            }
        };
        if let Some(file) = refused.iter().find(|f| declares(f)) {
            verdict.verdict = Verdict::Unverified;
            verdict.reason_code = Some(ReasonCode::SpawnsRunner);
            verdict.reason = format!(
                "{} is declared in {}, which spawns another test runner ({}); such a file is refused as proof",
                verdict.test, file.path, file.spawns
            );
        }
    }
}

/// Decides every criterion from the observations of one proof.
pub fn decide(criteria: &[Criterion], observations: &[Observation<'_>]) -> Vec<CriterionVerdict> {
    decide_as(criteria, observations, false)
}

/// [`decide`]; with `test_only` (the person granted the test-only exception to a change
/// without product files), a `test:` is judged on the candidate alone: it must pass there,
/// in every run, and what it does on the base is recorded but not judged.
pub fn decide_as(
    criteria: &[Criterion],
    observations: &[Observation<'_>],
    test_only: bool,
) -> Vec<CriterionVerdict> {
    criteria
        .iter()
        .map(|criterion| decide_one(criterion, observations, test_only))
        .collect()
}

fn decide_one(
    criterion: &Criterion,
    observations: &[Observation<'_>],
    test_only: bool,
) -> CriterionVerdict {
    let selector = &criterion.test;
    let primary = |side: Side| -> Vec<&Observation<'_>> {
        observations
            .iter()
            .filter(|o| o.side == side && matches!(o.kind, JobKind::Targeted | JobKind::Suite))
            .collect()
    };
    let base_jobs = primary(Side::Base);
    let candidate_jobs = primary(Side::Candidate);
    let base_cases = matched_cases(selector, &base_jobs);
    let candidate_cases = matched_cases(selector, &candidate_jobs);
    let known_files: BTreeSet<String> = base_cases
        .iter()
        .chain(&candidate_cases)
        .map(|c| c.file.clone())
        .collect();

    let (base_outcome, base_missing) =
        summarize_coded(&base_jobs, &base_cases, &known_files, selector);
    let (candidate_outcome, candidate_missing) =
        summarize_coded(&candidate_jobs, &candidate_cases, &known_files, selector);
    let repeated_sides: &[Side] = match criterion.kind {
        CriterionKind::Test => &[Side::Base, Side::Candidate],
        CriterionKind::Guard => &[Side::Candidate],
    };
    let runs = |side: Side,
                first: &SideOutcome,
                first_missing: Option<ReasonCode>,
                jobs: &[&Observation<'_>]|
     -> Vec<RunOutcome> {
        let mut runs = Vec::new();
        if let Some(first_job) = jobs.first() {
            runs.push(RunOutcome {
                job: first_job.result.index,
                outcome: first.clone(),
                missing: first_missing,
            });
        }
        if repeated_sides.contains(&side) {
            for repeat in observations
                .iter()
                .filter(|o| o.side == side && o.kind == JobKind::Stability)
            {
                let cases = matched_cases(selector, &[repeat]);
                let (outcome, missing) = summarize_coded(&[repeat], &cases, &known_files, selector);
                runs.push(RunOutcome {
                    job: repeat.result.index,
                    outcome,
                    missing,
                });
            }
        }
        runs
    };
    let base = SideEvidence {
        runs: runs(Side::Base, &base_outcome, base_missing, &base_jobs),
        error: collection_message(&base_outcome, &base_jobs),
        outcome: base_outcome,
        cases: base_cases,
    };
    let candidate = SideEvidence {
        runs: runs(
            Side::Candidate,
            &candidate_outcome,
            candidate_missing,
            &candidate_jobs,
        ),
        error: collection_message(&candidate_outcome, &candidate_jobs),
        outcome: candidate_outcome,
        cases: candidate_cases,
    };
    let missing = Missing {
        base: base_missing,
        candidate: candidate_missing,
    };
    let (verdict, reason_code, reason) = match (criterion.kind, test_only) {
        (CriterionKind::Test, true) => candidate_rule(criterion, &known_files, &candidate, missing),
        _ => rule(criterion, &known_files, &base, &candidate, missing),
    };
    let suggestions = if reason_code == ReasonCode::NotFound {
        let ran = base_jobs
            .iter()
            .chain(&candidate_jobs)
            .filter_map(|job| job.result.report.parsed())
            .flat_map(|report| report.cases.iter().map(|case| case.name.as_str()));
        suggest(selector.display(), ran)
    } else {
        Vec::new()
    };
    CriterionVerdict {
        id: criterion.id.clone(),
        kind: criterion.kind,
        test: selector.display().to_owned(),
        verdict,
        reason,
        reason_code: Some(reason_code),
        suggestions,
        base,
        candidate,
    }
}

/// For each side whose outcome is [`SideOutcome::NoEvidence`], the code of what is missing.
#[derive(Clone, Copy)]
struct Missing {
    base: Option<ReasonCode>,
    candidate: Option<ReasonCode>,
}

impl Missing {
    fn on(self, side: Side) -> Option<ReasonCode> {
        match side {
            Side::Base => self.base,
            Side::Candidate => self.candidate,
        }
    }
}

/// A name that matches tests in two files is ambiguous: unverified, with both named.
fn ambiguity(
    name: &impl fmt::Display,
    known_files: &BTreeSet<String>,
) -> Option<(Verdict, ReasonCode, String)> {
    (known_files.len() > 1).then(|| {
        let files: Vec<&str> = known_files.iter().map(String::as_str).collect();
        (
            Verdict::Unverified,
            ReasonCode::Ambiguous,
            format!("ambiguous: {name} names tests in {}", files.join(" and ")),
        )
    })
}

fn describe_failures(cases: &[MatchedCase]) -> String {
    let failing: BTreeSet<String> = cases
        .iter()
        .filter(|c| matches!(c.outcome, Outcome::Failed | Outcome::Error))
        .map(|c| {
            let variant = c
                .variant
                .as_deref()
                .map(|v| format!("[{v}]"))
                .unwrap_or_default();
            format!("{} {}{variant} in {}", c.outcome, c.name, c.file)
        })
        .collect();
    failing.into_iter().collect::<Vec<_>>().join("; ")
}

/// The first two runs that disagree, for the reason text.
fn disagreement(runs: &[RunOutcome]) -> Option<String> {
    let first = runs
        .iter()
        .find_map(|r| r.outcome.observed().map(|o| (r.job, o)))?;
    runs.iter().find_map(|r| {
        let observed = r.outcome.observed()?;
        (observed != first.1).then(|| {
            format!(
                "{} in job {}, {observed} in job {}",
                first.1, first.0, r.job
            )
        })
    })
}

/// A run that observed nothing of the test while another run of the same side did: its
/// repeats cannot be agreeing if one of them never ran the test.
fn unreported_repeat(runs: &[RunOutcome]) -> Option<(String, Option<ReasonCode>)> {
    runs.iter().find_map(|r| r.outcome.observed())?;
    runs.iter()
        .find(|r| r.outcome.observed().is_none())
        .map(|r| {
            let detail = match &r.outcome {
                SideOutcome::NoEvidence(why) => format!(" ({why})"),
                _ => String::new(),
            };
            (
                format!("job {} reports it {}{detail}", r.job, r.outcome.label()),
                r.missing,
            )
        })
}

/// Every case in the jobs' trustworthy reports whose function name the selector names.
fn matched_cases(selector: &TestSelector, jobs: &[&Observation<'_>]) -> Vec<MatchedCase> {
    let mut cases = Vec::new();
    for job in jobs {
        let Some(report) = job.result.report.parsed() else {
            continue;
        };
        cases.extend(
            report
                .cases
                .iter()
                .filter(|case| selector.matches(&case.name))
                .map(|case| MatchedCase {
                    job: job.result.index,
                    file: case.file.clone(),
                    suite: case.suite.clone(),
                    name: case.name.clone(),
                    variant: case.variant.clone(),
                    outcome: case.outcome,
                    message: case.message.clone(),
                }),
        );
    }
    cases
}

/// Summarizes what `jobs` say of the selector's test on one side.
fn summarize(
    jobs: &[&Observation<'_>],
    cases: &[MatchedCase],
    known_files: &BTreeSet<String>,
    selector: &TestSelector,
) -> SideOutcome {
    summarize_coded(jobs, cases, known_files, selector).0
}

/// [`summarize`], with the code of what is missing when the outcome is
/// [`SideOutcome::NoEvidence`].
fn summarize_coded(
    jobs: &[&Observation<'_>],
    cases: &[MatchedCase],
    known_files: &BTreeSet<String>,
    selector: &TestSelector,
) -> (SideOutcome, Option<ReasonCode>) {
    let found = |outcome: SideOutcome| (outcome, None);
    if jobs.is_empty() {
        return (
            SideOutcome::NoEvidence("no job ran the test on this side".into()),
            Some(ReasonCode::NotRun),
        );
    }
    let duplicates = duplicate_identities(jobs, selector);
    let trusted: Vec<&MatchedCase> = cases
        .iter()
        .filter(|c| !(c.outcome == Outcome::Passed && duplicates.contains(&(c.job, identity(c)))))
        .collect();
    if trusted.iter().any(|c| c.outcome == Outcome::Failed) {
        return found(SideOutcome::Failed);
    }
    if trusted.iter().any(|c| c.outcome == Outcome::Error) {
        return found(SideOutcome::Error);
    }
    if trusted.iter().any(|c| c.outcome == Outcome::Passed) {
        return found(SideOutcome::Passed);
    }
    if !trusted.is_empty() {
        return found(SideOutcome::Skipped);
    }
    if let Some((job, id)) = duplicates.iter().next() {
        return (
            SideOutcome::NoEvidence(format!("job {job} reports {id} more than once")),
            Some(ReasonCode::DuplicateResult),
        );
    }
    for job in jobs {
        if let Some((code, problem)) = incompleteness(job.result) {
            return (
                SideOutcome::NoEvidence(format!(
                    "{} job {}: {problem}",
                    job.kind.label(job.side),
                    job.result.index
                )),
                Some(code),
            );
        }
    }
    for job in jobs {
        if let Some(report) = job.result.report.parsed()
            && let Some(file) = linked_collection_error(report, known_files)
        {
            return found(SideOutcome::CollectionError(file));
        }
    }
    found(SideOutcome::NotFound)
}

fn identity(case: &MatchedCase) -> String {
    CaseResult {
        file: case.file.clone(),
        suite: case.suite.clone(),
        name: case.name.clone(),
        variant: case.variant.clone(),
        outcome: case.outcome,
        message: None,
    }
    .identity()
}

fn duplicate_identities(
    jobs: &[&Observation<'_>],
    selector: &TestSelector,
) -> BTreeSet<(u32, String)> {
    let mut duplicates = BTreeSet::new();
    for job in jobs {
        let Some(report) = job.result.report.parsed() else {
            continue;
        };
        let mut seen: HashMap<String, usize> = HashMap::new();
        for case in report.cases.iter().filter(|c| selector.matches(&c.name)) {
            *seen.entry(case.identity()).or_default() += 1;
        }
        duplicates.extend(
            seen.into_iter()
                .filter(|(_, count)| *count > 1)
                .map(|(id, _)| (job.result.index, id)),
        );
    }
    duplicates
}

/// Why a job's evidence is partial: it timed out, never ran, or its report is untrustworthy.
fn incompleteness(result: &JobResult) -> Option<(ReasonCode, String)> {
    match &result.status {
        JobStatus::TimedOut => Some((
            ReasonCode::TimedOut,
            "timed out before reporting every test".into(),
        )),
        JobStatus::Infrastructure { message, .. } => {
            Some((ReasonCode::NotRun, format!("not run: {message}")))
        }
        JobStatus::Cancelled => Some((ReasonCode::NotRun, "cancelled".into())),
        JobStatus::Completed { .. } => result
            .report
            .problem()
            .map(|problem| (ReasonCode::NoReport, problem)),
    }
}

/// The first line of the collection error a side's outcome names, from the first job that
/// reports it.
fn collection_message(outcome: &SideOutcome, jobs: &[&Observation<'_>]) -> Option<String> {
    let SideOutcome::CollectionError(file) = outcome else {
        return None;
    };
    jobs.iter()
        .filter_map(|job| job.result.report.parsed())
        .flat_map(|report| &report.collection_errors)
        .find(|e| &e.file == file)
        .and_then(|e| e.message.lines().map(str::trim).find(|l| !l.is_empty()))
        .map(str::to_owned)
}

/// A collection error in the file the test is known (from the other side) to live in.
fn linked_collection_error(report: &TestReport, known_files: &BTreeSet<String>) -> Option<String> {
    report
        .collection_errors
        .iter()
        .find(|e| known_files.contains(&e.file))
        .map(|e| e.file.clone())
}

pub mod network;
mod rules;
mod suggest;

use rules::{candidate_rule, rule};
pub use suggest::suggest;

#[cfg(test)]
mod tests;

pub mod harness;
