//! What a person reads: progress lines on stderr while a proof runs, then a summary. Also the
//! optional JUnit XML for CI. Nothing else in Assay prints for humans.

use crate::progress::{ProgressMode, Terminal, clock};
use assay_common::diff_coverage::{DiffCoverage, HunkStatus};
use assay_common::evidence::Evidence;
use assay_common::job::{JobResult, JobStatus};
use assay_common::mutation_check::MutationCheck;
use assay_common::suite::{CaseOutcome, SuiteReport};
use assay_common::verdict::{SideEvidence, Verdict};
use assay_engine::mutation::campaign::{
    MutantProgress, MutateEvent, MutateProgress, MutateReport, Status as MutateStatus,
};
use assay_engine::progress::{ProgressSink, ProofEvent};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a document (`--json -`) took stdout: what people read goes to stderr from then on.
static HUMAN_ON_STDERR: AtomicBool = AtomicBool::new(false);
/// Set when stdout's reader went away (`assay history | head -1`).
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
/// Set when stderr's reader went away (`assay mutate 2>&1 | head -1`).
static STDERR_CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes to stdout. A reader that closed the pipe is not an error of the command: what is left
/// to print is dropped, quietly, and the command still finishes its work and cleans up (std's
/// `print!` would panic there, since Rust ignores SIGPIPE).
pub fn out(text: std::fmt::Arguments<'_>) {
    write_unless_closed(&mut std::io::stdout().lock(), &STDOUT_CLOSED, text);
}

/// Writes to stderr, as [`out`] to stdout (std's `eprint!` would panic).
pub fn err(text: std::fmt::Arguments<'_>) {
    write_unless_closed(&mut std::io::stderr().lock(), &STDERR_CLOSED, text);
}

/// Writes `text` to `stream` unless `closed`; the first write that fails sets it.
fn write_unless_closed(
    stream: &mut impl std::io::Write,
    closed: &AtomicBool,
    text: std::fmt::Arguments<'_>,
) {
    if closed.load(Ordering::Relaxed) {
        return;
    }
    if stream
        .write_fmt(text)
        .and_then(|()| stream.flush())
        .is_err()
    {
        closed.store(true, Ordering::Relaxed);
    }
}

/// [`out`] and a newline.
pub fn outln(text: std::fmt::Arguments<'_>) {
    out(format_args!("{text}\n"));
}

/// Bytes for stdout (a document written with `--json -`); what people read goes to stderr from
/// then on, so the document stays alone on stdout.
pub fn document(bytes: &[u8]) {
    HUMAN_ON_STDERR.store(true, Ordering::Relaxed);
    out(format_args!("{}\n", String::from_utf8_lossy(bytes)));
}

/// What people read at the end of a command (a summary, a trend line): stdout, or stderr when a
/// document took stdout.
pub fn human(text: std::fmt::Arguments<'_>) {
    if HUMAN_ON_STDERR.load(Ordering::Relaxed) {
        err(text);
    } else {
        out(text);
    }
}

/// Cache entries refused in a run, in one line: how many, and each reason with its count, in
/// the order first seen; `None` when none was. `what` names what ran instead (`jobs`).
pub fn refusals_line(refused: &[(String, String)], what: &str) -> Option<String> {
    let mut reasons: Vec<(&str, usize)> = Vec::new();
    for (_, why) in refused {
        match reasons.iter_mut().find(|(known, _)| *known == why) {
            Some((_, count)) => *count += 1,
            None => reasons.push((why, 1)),
        }
    }
    let reasons: Vec<String> = reasons
        .iter()
        .map(|(why, count)| format!("{why} ({count})"))
        .collect();
    match refused.len() {
        0 => None,
        1 => Some(format!(
            "[cache] 1 entry refused, its {} ran instead: {}",
            what.trim_end_matches('s'),
            reasons.join("; ")
        )),
        n => Some(format!(
            "[cache] {n} entries refused, their {what} ran instead: {}",
            reasons.join("; ")
        )),
    }
}

/// [`human`] and a newline.
pub fn humanln(text: std::fmt::Arguments<'_>) {
    human(format_args!("{text}\n"));
}

/// A proof's or a mutation run's progress, as lines and, on a terminal, a live bar.
pub struct StderrProgress {
    pub terminal: Terminal,
}

impl StderrProgress {
    pub fn new(mode: ProgressMode, quiet: bool, slots: usize) -> Self {
        Self {
            terminal: Terminal::new(mode, quiet, slots, "jobs"),
        }
    }
}

impl ProgressSink for StderrProgress {
    fn event(&self, event: ProofEvent<'_>) {
        let terminal = &self.terminal;
        match event {
            ProofEvent::Planned { jobs } => {
                terminal.line(&format!("[prove] {} jobs planned", jobs.len()));
                terminal.update(0, jobs.len());
            }
            ProofEvent::JobFinished {
                done,
                total,
                spec,
                result,
                cached,
                check_label,
            } => {
                // The mutation check's jobs are their own phase, after (or instead of) the
                // proof's jobs.
                let (phase, label) = match check_label {
                    Some(label) => ("mutation", label.to_owned()),
                    None => ("prove", spec.kind.label(spec.side)),
                };
                if !matches!(result.status, JobStatus::Completed { .. }) {
                    terminal.failed();
                }
                terminal.line(&job_line(
                    phase,
                    &label,
                    done,
                    total,
                    result,
                    Some(spec.timeout_secs),
                    cached,
                ));
                terminal.update(done, total);
            }
        }
    }
}

impl MutateProgress for StderrProgress {
    fn mutate_event(&self, event: MutateEvent<'_>) {
        let terminal = &self.terminal;
        match event {
            MutateEvent::Started {
                mutants,
                to_run,
                cached,
                compile_errors,
                no_coverage,
                baseline,
            } => {
                let from_cache = if cached > 0 {
                    format!("{cached} from the cache, ")
                } else {
                    String::new()
                };
                // Named as the summary names them, which counts these too.
                let not_compiled = if compile_errors > 0 {
                    format!("{compile_errors} compile error, ")
                } else {
                    String::new()
                };
                terminal.line(&format!(
                    "[mutate] {mutants} mutants: {to_run} to run, {from_cache}{not_compiled}{no_coverage} no coverage (baseline {:.1} s)",
                    baseline.as_secs_f64()
                ));
                // No coverage and cached verdicts are settled already: the lines count them too.
                terminal.update_with_eta(
                    mutants.saturating_sub(to_run),
                    mutants,
                    "mutants",
                    "0 killed · 0 survived".into(),
                    None,
                );
            }
            MutateEvent::Confirming { kills } => {
                terminal.line(&format!(
                    "[mutate] confirming {} by a second run",
                    count(kills, "kill")
                ));
            }
            MutateEvent::MutantFinished(progress) => {
                terminal.line(&mutant_line(progress));
                terminal.update_with_eta(
                    progress.done,
                    progress.total,
                    "mutants",
                    format!(
                        "{} killed · {} survived",
                        progress.killed, progress.survived
                    ),
                    progress.eta.filter(|_| progress.done < progress.total),
                );
            }
        }
    }
}

/// `[mutate] 12/317 parse/__init__.py:345 arithmetic `+` -> `-`: killed (0.3 s); 9 killed,
/// 2 survived; ETA 1m40s`: one mutant's verdict and the run so far.
pub fn mutant_line(progress: &MutantProgress<'_>) -> String {
    let verdict = match progress.status {
        MutateStatus::Killed => "killed".to_owned(),
        MutateStatus::Survived => "SURVIVED".to_owned(),
        MutateStatus::Timeout => format!(
            "TIMEOUT, {}",
            progress.reason.as_deref().unwrap_or("ran past its limit")
        ),
        MutateStatus::RuntimeError => format!(
            "error, {}",
            progress.reason.as_deref().unwrap_or("no verdict")
        ),
        // The reason says so, with the compiler's first error.
        MutateStatus::CompileError => progress
            .reason
            .clone()
            .unwrap_or_else(|| "does not compile".to_owned()),
        MutateStatus::Pending => format!(
            "pending, {}",
            progress.reason.as_deref().unwrap_or("not run")
        ),
        MutateStatus::NoCoverage => "no coverage".to_owned(),
    };
    let eta = match progress.eta {
        Some(eta) if progress.done < progress.total => format!("; ETA {}", clock(eta)),
        _ => String::new(),
    };
    format!(
        "[mutate] {}/{} {}:{} {} {}: {verdict} ({:.1} s); {} killed, {} survived{eta}",
        progress.done,
        progress.total,
        progress.mutant.path,
        progress.mutant.line,
        progress.mutant.operator,
        progress.mutant.description,
        progress.duration.as_secs_f64(),
        progress.killed,
        progress.survived,
    )
}

/// `[prove] 3/8 base-suite (1.2 s): 12 tests reported, exit 0`: one finished job. A job the
/// result cache answered says `(cached)` where the time would be: it ran for no time in this
/// run, and the result's own duration is the run that produced it.
pub fn job_line(
    phase: &str,
    label: &str,
    done: usize,
    total: usize,
    result: &JobResult,
    timeout_secs: Option<u64>,
    cached: bool,
) -> String {
    let what = match &result.status {
        JobStatus::Completed { exit_code } => match result.report.problem() {
            None => format!(
                "{} reported, exit {exit_code}",
                count(result.report.parsed().map_or(0, |r| r.cases.len()), "test")
            ),
            Some(problem) => format!("exit {exit_code}, {problem}"),
        },
        JobStatus::TimedOut => match timeout_secs {
            Some(secs) => format!("TIMEOUT after {secs} s"),
            None => "TIMEOUT".into(),
        },
        JobStatus::Infrastructure { message, .. } => format!("INFRA {message}"),
        JobStatus::Cancelled => "cancelled".into(),
    };
    let took = match cached {
        true => "cached".to_owned(),
        false => format!("{:.1} s", result.duration_ms as f64 / 1000.0),
    };
    format!("[{phase}] {done}/{total} {label} ({took}): {what}")
}

/// `1 test`, `2 tests`: a count with its noun agreeing.
fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn side_text(side: &SideEvidence) -> String {
    let runs: Vec<&str> = side.runs.iter().map(|r| r.outcome.label()).collect();
    if runs.len() > 1 {
        format!("{} (runs: {})", side.outcome.label(), runs.join(", "))
    } else {
        side.outcome.label().to_owned()
    }
}

/// The terminal summary: the verdict, then each criterion with why and per-side outcomes.
pub fn summary(evidence: &Evidence) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "proof {}: {} ({} runner, {} jobs, {:.1} s)",
        evidence.proof_id,
        evidence.verdict.to_string().to_uppercase(),
        evidence.runner,
        evidence.jobs.len(),
        evidence.duration_s
    );
    for c in &evidence.criteria {
        let _ = writeln!(
            out,
            "  {} {}: {}  {}",
            c.id,
            c.kind,
            c.test,
            c.verdict.to_string().to_uppercase()
        );
        let _ = writeln!(out, "      {}", c.reason);
        if !c.suggestions.is_empty() {
            // A name with spaces (node:test, Vitest) is quoted as a criterion must quote it.
            let names: Vec<String> = c
                .suggestions
                .iter()
                .map(|name| match name.contains(' ') {
                    true => format!("{name:?}"),
                    false => name.clone(),
                })
                .collect();
            let _ = writeln!(out, "      did you mean {}?", names.join(" or "));
        }
        let _ = writeln!(
            out,
            "      base: {}; candidate: {}",
            side_text(&c.base),
            side_text(&c.candidate)
        );
    }
    if let Some(harness) = &evidence.harness {
        harness_summary(&mut out, harness);
    }
    out
}

/// The change's harness in the summary: its findings, how they were checked, and trust.
fn harness_summary(out: &mut String, harness: &assay_common::harness::HarnessEvidence) {
    if !harness.findings.is_empty() {
        let _ = writeln!(
            out,
            "  harness: the change runs its own code around the tests ({} finding{}){}",
            harness.findings.len(),
            if harness.findings.len() == 1 { "" } else { "s" },
            match (harness.trusted, harness.check_job) {
                (true, _) => "; TRUSTED by --trust-harness-change",
                (false, Some(_)) => "; checked with the base's harness in its place",
                (false, None) => "; cannot be checked apart from the tests",
            }
        );
        for finding in &harness.findings {
            let _ = writeln!(out, "      {} ({})", finding.place(), finding.kind);
        }
    }
    if let Some(inert) = &harness.inert_product {
        let _ = writeln!(
            out,
            "  product change is inert: {} differs from the base only in comments and docstrings",
            inert.files.join(", ")
        );
    }
}

/// JUnit XML with one test case per criterion, for CI dashboards.
pub fn junit(evidence: &Evidence) -> String {
    let failures = evidence
        .criteria
        .iter()
        .filter(|c| c.verdict == Verdict::Refuted)
        .count();
    let errors = evidence.criteria.len()
        - failures
        - evidence
            .criteria
            .iter()
            .filter(|c| c.verdict == Verdict::Proven)
            .count();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuite name=\"assay proof {}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{:.3}\">",
        escape(&evidence.proof_id),
        evidence.criteria.len(),
        evidence.duration_s
    );
    for c in &evidence.criteria {
        let _ = write!(
            xml,
            "  <testcase classname=\"assay.{}\" name=\"{} {}\"",
            c.kind,
            escape(&c.id),
            escape(&c.test)
        );
        match c.verdict {
            Verdict::Proven => xml.push_str("/>\n"),
            Verdict::Refuted => {
                let _ = writeln!(
                    xml,
                    "><failure message=\"{}\"/></testcase>",
                    escape(&c.reason)
                );
            }
            Verdict::Unverified | Verdict::Unstable => {
                let _ = writeln!(
                    xml,
                    "><error type=\"{}\" message=\"{}\"/></testcase>",
                    c.verdict,
                    escape(&c.reason)
                );
            }
        }
    }
    xml.push_str("</testsuite>\n");
    xml
}

/// An `assay test` run as JUnit XML, one testcase per case in plan order. Quarantined
/// failures and cases never admitted are skipped, with why, so CI counts what the exit code does.
pub fn suite_junit(report: &SuiteReport) -> String {
    let t = &report.totals;
    let runner = report.runner.to_string();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuite name=\"assay test {}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3}\">",
        escape(&report.run_id),
        t.total,
        t.failed,
        t.error,
        t.skipped + t.not_run + t.quarantined,
        report.duration_s
    );
    for case in &report.cases {
        let (classname, name) = match case.display.split_once("::") {
            Some((file, rest)) => (file, rest),
            None => (runner.as_str(), case.display.as_str()),
        };
        let _ = write!(
            xml,
            "  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            escape(classname),
            escape(name),
            case.duration_s.unwrap_or(0.0)
        );
        let message = escape(case.message.as_deref().unwrap_or(""));
        let inner = match case.outcome {
            _ if case.quarantined => format!("<skipped message=\"quarantined: {message}\"/>"),
            CaseOutcome::Passed => String::new(),
            CaseOutcome::Failed => format!("<failure message=\"{message}\"/>"),
            CaseOutcome::Error => format!("<error message=\"{message}\"/>"),
            CaseOutcome::Skipped => format!("<skipped message=\"{message}\"/>"),
            CaseOutcome::NotRun => format!("<skipped message=\"not run: {message}\"/>"),
        };
        if inner.is_empty() {
            xml.push_str("/>\n");
        } else {
            let _ = writeln!(xml, ">{inner}</testcase>");
        }
    }
    xml.push_str("</testsuite>\n");
    xml
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The first infrastructure failure among the jobs, if the proof could not be decided.
pub fn infrastructure_failure(evidence: &Evidence) -> Option<String> {
    evidence
        .jobs
        .iter()
        .find(|j| j.status == "infrastructure")
        .map(|j| {
            format!(
                "job {} ({}): {}",
                j.index,
                j.kind,
                j.message.as_deref().unwrap_or("")
            )
        })
}

/// Diff coverage in a line or two: how many changed hunks the proving tests executed, then the
/// ones they did not and the files nothing measured.
pub fn diff_coverage_summary(coverage: &DiffCoverage) -> String {
    let mut out = String::new();
    if let Some(note) = &coverage.note {
        let _ = match coverage.tool.is_empty() {
            true => writeln!(out, "diff coverage: not measured ({note})"),
            false => writeln!(
                out,
                "diff coverage ({}): not measured ({note})",
                coverage.tool
            ),
        };
        return out;
    }
    let measurable: Vec<_> = coverage
        .hunks
        .iter()
        .filter(|h| h.status != HunkStatus::NoStatements)
        .collect();
    let executed = measurable
        .iter()
        .filter(|h| h.status == HunkStatus::Executed)
        .count();
    let _ = writeln!(
        out,
        "diff coverage ({}): the proving tests executed {executed} of {} changed hunks whole",
        coverage.tool,
        measurable.len()
    );
    let missed = coverage.missed_spans();
    if !missed.is_empty() {
        let _ = writeln!(out, "  not executed: {}", missed.join(", "));
    }
    if !coverage.unmeasured_files.is_empty() {
        let _ = writeln!(
            out,
            "  not measured: {}",
            coverage.unmeasured_files.join(", ")
        );
    }
    out
}

/// The mutation check in a few lines: counts, then each survivor with the proving tests that
/// passed with it.
pub fn mutation_summary(check: &MutationCheck) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "mutation check: {} killed, {} survived, {} not run ({}, {} skipped, {} excluded)",
        check.killed,
        check.survived,
        check.not_run,
        count(check.mutants.len(), "mutant"),
        count(check.skipped.len(), "site"),
        count(check.excluded_files.len(), "file")
    );
    // One line per surviving mutant, naming every proving test that passed with it.
    let mut by_mutant: Vec<(&assay_common::mutation_check::Survivor, Vec<&str>)> = Vec::new();
    for survivor in &check.survivors {
        match by_mutant
            .iter_mut()
            .find(|(first, _)| first.mutant_id == survivor.mutant_id)
        {
            Some((_, tests)) => tests.push(&survivor.test),
            None => by_mutant.push((survivor, vec![&survivor.test])),
        }
    }
    for (survivor, tests) in by_mutant {
        match tests.as_slice() {
            [_] => {
                let _ = writeln!(out, "  survivor: {survivor}");
            }
            _ => {
                let _ = writeln!(
                    out,
                    "  survivor: {} pass with {}",
                    tests.join(" and "),
                    survivor.label()
                );
            }
        }
    }
    for note in &check.notes {
        let _ = writeln!(out, "  note: {note}");
    }
    if check.survived > 0 {
        let _ = writeln!(
            out,
            "  (a survivor may be an equivalent mutant: read the test; the verdict stands)"
        );
    }
    out
}

/// The `assay mutate` summary: counts, score with its interval, then each surviving mutant.
/// Which runs stored what a cache answered, for its `[cache]` line: ` (stored by run ID)`,
/// ` (stored by N runs)`, or nothing when it answered nothing.
pub fn stored_by<'a>(runs: impl IntoIterator<Item = &'a str>) -> String {
    let runs: std::collections::BTreeSet<&str> = runs.into_iter().collect();
    match (runs.len(), runs.first()) {
        (1, Some(run)) => format!(" (stored by run {run})"),
        (0, _) => String::new(),
        (n, _) => format!(" (stored by {n} runs)"),
    }
}

pub fn mutate_summary(report: &MutateReport) -> String {
    let summary = report.summary();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "mutate: {} mutants: {} killed, {} survived, {} no coverage, {} timeout, {} compile error, {} error, {} pending ({:.1} s, {:.1} mutants/min)",
        summary.mutants,
        summary.killed,
        summary.survived,
        summary.no_coverage,
        summary.timeout,
        summary.compile_error,
        summary.runtime_error,
        summary.pending,
        summary.elapsed_s,
        summary.mutants_per_minute
    );
    if let (Some(score), Some((low, high))) = (summary.mutation_score, summary.confidence_interval)
    {
        let _ = writeln!(
            out,
            "  mutation score {:.1}% (95% interval {:.1}%–{:.1}%)",
            score * 100.0,
            low * 100.0,
            high * 100.0
        );
    }
    if let Some(note) = &report.selection_note {
        let _ = writeln!(out, "  note: {note}");
    }
    if let Some(schemata) = &report.schemata {
        let alone: usize = schemata.built_alone.values().sum();
        // An interpreted language's schema is switched without a build; a schema given up
        // before its first build has only its reason to tell, below.
        match (schemata.builds, schemata.held) {
            (0, 0) => {}
            (0, held) => {
                let _ = writeln!(out, "  switched in one tree: {held} mutants, no build");
            }
            (builds, held) => {
                let _ = writeln!(
                    out,
                    "  built once: {held} mutants in {builds} schema build(s) ({:.1} s); {alone} built on their own",
                    schemata.build_s
                );
            }
        }
        for (why, count) in &schemata.built_alone {
            let _ = writeln!(out, "    {count} built on their own: {why}");
        }
        if schemata.batches > 0 {
            let _ = writeln!(
                out,
                "  {} mutants ran in {} shared processes",
                schemata.batched, schemata.batches
            );
        }
    }
    for result in &report.results {
        let what = match result.verdict.status {
            MutateStatus::Survived => "survived",
            MutateStatus::NoCoverage => "no coverage",
            _ => continue,
        };
        let _ = writeln!(out, "  {what}: {}", result.mutant.label());
        if result.verdict.status == MutateStatus::Survived
            && let Some(diff) = report.diff(result)
        {
            for line in diff.lines().skip(2) {
                let _ = writeln!(out, "      {line}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_common::mutation_check::Survivor;
    use assay_common::suite::{CaseReport, Lane, SuiteTotals};

    #[test]
    fn a_survivor_is_one_line_naming_every_proving_test_that_passed_with_it() {
        let survivor = |test: &str, id: &str, line: u32| Survivor {
            test: test.into(),
            mutant_id: id.into(),
            path: "pager.py".into(),
            line,
            description: "`>` -> `>=`".into(),
            message: format!("{test} passes with pager.py:{line} changed (`>` -> `>=`)"),
        };
        let check = MutationCheck {
            budget_s: 900,
            unmutated_s: Some(0.4),
            proving_tests: vec!["test_partial".into(), "test_full".into()],
            killed: 3,
            survived: 2,
            not_run: 0,
            mutants: Vec::new(),
            survivors: vec![
                survivor("test_partial", "m1", 9),
                survivor("test_partial", "m2", 12),
                survivor("test_full", "m1", 9),
            ],
            skipped: Vec::new(),
            excluded_files: Vec::new(),
            notes: Vec::new(),
        };
        let summary = mutation_summary(&check);
        let lines: Vec<&str> = summary
            .lines()
            .filter(|line| line.starts_with("  survivor: "))
            .collect();
        assert_eq!(
            lines,
            [
                "  survivor: test_partial and test_full pass with pager.py:9 changed (`>` -> `>=`)",
                "  survivor: test_partial passes with pager.py:12 changed (`>` -> `>=`)",
            ]
        );
    }

    fn case(display: &str, outcome: CaseOutcome, quarantined: bool) -> CaseReport {
        CaseReport {
            reference: "v1.0123456789abcdef".into(),
            display: display.into(),
            outcome,
            lane: Lane::Guest,
            quarantined,
            order_dependent: false,
            message: Some("expected <20.0> & got 21.0".into()),
            duration_s: Some(0.25),
            job: Some(0),
            artifacts: Vec::new(),
            cached: None,
        }
    }

    #[test]
    fn a_job_the_cache_answered_says_cached_where_its_time_would_be() {
        let result = JobResult {
            job_id: assay_common::JobId("p-1/0002".into()),
            index: 2,
            status: JobStatus::Completed { exit_code: 1 },
            report: assay_common::outcome::ReportOutcome::ZeroTests,
            artifacts: Vec::new(),
            duration_ms: 2300,
            worker: assay_common::WorkerId("w-1".into()),
            sandbox: None,
        };
        let line = |cached| job_line("prove", "base", 3, 8, &result, Some(60), cached);
        assert_eq!(
            line(false),
            "[prove] 3/8 base (2.3 s): exit 1, the report names no test"
        );
        assert_eq!(
            line(true),
            "[prove] 3/8 base (cached): exit 1, the report names no test"
        );
    }

    #[test]
    fn suite_junit_counts_what_the_exit_code_counts_and_escapes_messages() {
        let report = SuiteReport {
            schema: "assay.test/v1".into(),
            run_id: "t-1795995229-3f9a1c00".into(),
            status: assay_common::suite::Ending::Failed,
            repository: "/src/invoice".into(),
            branch: "main".into(),
            revision: "0".repeat(40),
            runner: assay_common::suite::SuiteRunner::Kind(
                assay_common::runner::RunnerKind::Pytest,
            ),
            started_at: "2026-11-29T23:33:49Z".into(),
            duration_s: 1.5,
            totals: SuiteTotals {
                total: 4,
                passed: 1,
                failed: 1,
                not_run: 1,
                quarantined: 1,
                ..SuiteTotals::default()
            },
            cases: vec![
                case("tests/test_tax.py::test_total", CaseOutcome::Passed, false),
                case(
                    "tests/test_tax.py::test_rounding",
                    CaseOutcome::Failed,
                    false,
                ),
                case("tests/test_tax.py::test_flaky", CaseOutcome::Failed, true),
                case("make check", CaseOutcome::NotRun, false),
            ],
            jobs: Vec::new(),
            audit: Default::default(),
            history: Default::default(),
            stopped: None,
            cache: None,
        };
        let xml = suite_junit(&report);
        assert!(
            xml.contains("tests=\"4\" failures=\"1\" errors=\"0\" skipped=\"2\""),
            "{xml}"
        );
        assert!(
            xml.contains(
                "<testcase classname=\"tests/test_tax.py\" name=\"test_total\" time=\"0.250\"/>"
            ),
            "{xml}"
        );
        assert!(xml.contains("name=\"test_rounding\" time=\"0.250\"><failure message=\"expected &lt;20.0&gt; &amp; got 21.0\"/>"), "{xml}");
        assert!(xml.contains("<skipped message=\"quarantined: "), "{xml}");
        assert!(
            xml.contains("classname=\"pytest\" name=\"make check\""),
            "{xml}"
        );
        assert!(xml.contains("<skipped message=\"not run: "), "{xml}");
    }
}
