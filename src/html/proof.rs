//! The proof report: the verdict, the criteria with each side's runs, a timeline of the jobs
//! per slot, each job's logs, and the mutation check with its survivors' diffs.

use super::{
    Artifacts, artifact_block, badge, count, diff_block, edit_diff, esc, page, seconds, stat,
    ticks, tone,
};
use assay_common::diff_coverage::{DiffCoverage, HunkStatus};
use assay_common::evidence::{Evidence, JobEvidence};
use assay_common::mutation_check::{MutantOutcome, MutationCheck};
use assay_common::verdict::{SideEvidence, SideOutcome};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What the proof report is drawn from: the evidence (with its mutation check), the
/// artifacts that could be read, and candidate files by path (for survivors' diffs).
pub struct ProofInput<'a> {
    pub evidence: &'a Evidence,
    pub artifacts: &'a Artifacts,
    pub sources: &'a BTreeMap<String, String>,
}

pub fn render(input: &ProofInput<'_>) -> String {
    let e = input.evidence;
    let verdict = e.verdict.to_string();
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>Assay proof <span class=\"mono\">{}</span></h1>\
         <div class=\"hero\"><div class=\"verdict {}\" id=\"verdict\">{}</div>\
         <div><div class=\"facts\"><span>runner <b>{}</b></span><span><b>{}</b></span>\
         <span><b>{}</b></span><span>started {}</span></div>\
         <div class=\"facts\"><span>base <b class=\"mono\">{}</b> {}</span>\
         <span>candidate <b class=\"mono\">{}</b> {}</span></div>\
         <div class=\"facts\"><span class=\"mono\">{}</span></div></div></div>",
        esc(&e.proof_id),
        tone(&verdict),
        esc(&verdict.to_uppercase()),
        esc(&e.runner),
        count(e.jobs.len(), "job"),
        seconds(e.duration_s),
        esc(&e.started_at),
        esc(&e.base.requested),
        short(e.base.commit.as_deref().unwrap_or(&e.base.tree)),
        esc(&e.candidate.requested),
        short(e.candidate.commit.as_deref().unwrap_or(&e.candidate.tree)),
        esc(&e.repository),
    );
    body.push_str(&criteria_table(e));
    body.push_str("<h2>Jobs over time</h2>");
    body.push_str(&timeline(&e.jobs));
    if let Some(coverage) = &e.diff_coverage {
        body.push_str(&diff_coverage_section(coverage));
    }
    if let Some(check) = &e.mutation_check {
        body.push_str(&mutation_section(check, input.sources));
    }
    body.push_str(&jobs_section(&e.jobs, input.artifacts));
    page(&format!("Assay proof {}: {verdict}", e.proof_id), &body)
}

fn short(id: &str) -> String {
    esc(&id.chars().take(10).collect::<String>())
}

fn side_outcome_tone(outcome: &SideOutcome) -> &'static str {
    tone(outcome.label())
}

fn detail(outcome: &SideOutcome) -> Option<&str> {
    match outcome {
        SideOutcome::CollectionError(d) | SideOutcome::NoEvidence(d) => Some(d),
        _ => None,
    }
}

fn side_cell(side: &SideEvidence) -> String {
    let mut out = badge(side.outcome.label());
    if !side.runs.is_empty() {
        out.push_str("<span class=\"runs\">");
        for run in &side.runs {
            let _ = write!(
                out,
                "<span class=\"dot {}\" title=\"job {}: {}\"></span>",
                side_outcome_tone(&run.outcome),
                run.job,
                esc(run.outcome.label())
            );
        }
        out.push_str("</span>");
        let labels: Vec<&str> = side.runs.iter().map(|r| r.outcome.label()).collect();
        let _ = write!(
            out,
            "<div class=\"note\">{}: {}</div>",
            count(side.runs.len(), "run"),
            esc(&labels.join(", "))
        );
    }
    if let Some(d) = detail(&side.outcome) {
        let _ = write!(out, "<div class=\"note\">{}</div>", esc(d));
    }
    out
}

fn criteria_table(e: &Evidence) -> String {
    let mut out = String::from(
        "<h2>Criteria</h2><table id=\"criteria\"><tr><th>id</th><th>criterion</th>\
         <th>verdict</th><th>base</th><th>candidate</th></tr>",
    );
    for c in &e.criteria {
        let _ = write!(
            out,
            "<tr class=\"criterion\" data-verdict=\"{}\"><td>{}</td><td><b>{}</b>: <code>{}</code>\
             <div class=\"reason\">{}</div></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            c.verdict,
            esc(&c.id),
            c.kind,
            esc(&c.test),
            esc(&c.reason),
            badge(&c.verdict.to_string()),
            side_cell(&c.base),
            side_cell(&c.candidate)
        );
    }
    out.push_str("</table>");
    if !e.changed_test_files.is_empty() {
        let files: Vec<String> = e.changed_test_files.iter().map(|f| esc(f)).collect();
        let _ = write!(
            out,
            "<p class=\"note\">test files of the change, overlaid on the base: <span class=\"mono\">{}</span></p>",
            files.join(", ")
        );
    }
    out
}

/// A job placed on the timeline: its slot and span in milliseconds after the proof started.
#[derive(Debug, PartialEq)]
pub struct Placed {
    pub job: usize,
    pub slot: usize,
    pub start_ms: u64,
    pub end_ms: u64,
}

/// Puts each job that ran in the first slot free at its start (jobs by start time); a job
/// answered from the result cache ran in no slot and is left out. `None` when the evidence has
/// no start offsets (written before they were recorded).
pub fn place(jobs: &[JobEvidence]) -> Option<Vec<Placed>> {
    let mut spans: Vec<(usize, u64, u64)> = jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| j.cached.is_none())
        .map(|(i, j)| {
            j.started_at_ms
                .map(|s| (i, s, s + (j.duration_s * 1000.0).round() as u64))
        })
        .collect::<Option<_>>()?;
    spans.sort_by_key(|&(i, s, _)| (s, i));
    let mut slot_ends: Vec<u64> = Vec::new();
    let mut placed = Vec::new();
    for (job, start_ms, end_ms) in spans {
        // A few milliseconds of slack: the end is when the engine saw the result.
        let slot = match slot_ends.iter().position(|&end| end <= start_ms + 5) {
            Some(slot) => slot,
            None => {
                slot_ends.push(0);
                slot_ends.len() - 1
            }
        };
        slot_ends[slot] = end_ms;
        placed.push(Placed {
            job,
            slot,
            start_ms,
            end_ms,
        });
    }
    placed.sort_by_key(|p| p.job);
    Some(placed)
}

fn side_colour(side: &str) -> &'static str {
    match side {
        "base" => "#8250df",
        "candidate" => "#0969da",
        _ => "#6e7781",
    }
}

/// The jobs per slot as an SVG: one row per slot, a bar per job, the slowest outlined.
pub fn timeline(jobs: &[JobEvidence]) -> String {
    if jobs.is_empty() {
        return "<p class=\"note\">no jobs ran</p>".into();
    }
    let slowest = jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| j.cached.is_none())
        .max_by(|a, b| a.1.duration_s.total_cmp(&b.1.duration_s))
        .map(|(i, _)| i);
    let (placed, note) = match place(jobs) {
        Some(placed) => (placed, None),
        None => {
            // Old evidence: durations only, laid end to end on one row each.
            let mut at = 0;
            let placed = jobs
                .iter()
                .enumerate()
                .map(|(i, j)| {
                    let end = at + (j.duration_s * 1000.0).round() as u64;
                    let p = Placed {
                        job: i,
                        slot: i,
                        start_ms: at,
                        end_ms: end,
                    };
                    at = end;
                    p
                })
                .collect();
            (
                placed,
                Some("this evidence has no job start times: jobs are drawn one after another"),
            )
        }
    };
    let cached: Vec<(&JobEvidence, u64)> = jobs
        .iter()
        .filter(|j| j.cached.is_some())
        .filter_map(|j| j.started_at_ms.map(|at| (j, at)))
        .collect();
    let slots =
        placed.iter().map(|p| p.slot + 1).max().unwrap_or(0) + usize::from(!cached.is_empty());
    let slots = slots.max(1);
    let span_ms = placed
        .iter()
        .map(|p| p.end_ms)
        .chain(cached.iter().map(|(_, at)| *at))
        .max()
        .unwrap_or(1)
        .max(1);
    let (left, width, row, top) = (70.0, 1140.0, 26.0, 8.0);
    let plot = width - left - 10.0;
    let x = |ms: u64| left + plot * ms as f64 / span_ms as f64;
    let height = top + row * slots as f64 + 26.0;
    let mut svg = format!(
        "<svg id=\"timeline\" viewBox=\"0 0 {width} {height}\" width=\"100%\" role=\"img\" \
         aria-label=\"jobs per slot over time\" style=\"background:#fff;border:1px solid #d0d7de;border-radius:6px\">"
    );
    for slot in 0..slots {
        let y = top + row * slot as f64;
        let name = if !cached.is_empty() && slot == slots - 1 {
            "cached".to_owned()
        } else {
            format!("slot {}", slot + 1)
        };
        let _ = write!(
            svg,
            "<text x=\"8\" y=\"{:.1}\">{name}</text><line x1=\"{left}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#eaeef2\"/>",
            y + row / 2.0 + 4.0,
            left + plot,
            y + row,
            y + row
        );
    }
    let step = nice_step(span_ms as f64 / 1000.0);
    let axis_y = top + row * slots as f64;
    let mut t = 0.0;
    while t <= span_ms as f64 / 1000.0 + 1e-9 {
        let tx = x((t * 1000.0) as u64);
        let _ = write!(
            svg,
            "<line x1=\"{tx:.1}\" x2=\"{tx:.1}\" y1=\"{top}\" y2=\"{:.1}\" stroke=\"#d0d7de\" stroke-dasharray=\"2 3\"/>\
             <text x=\"{tx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            axis_y + 3.0,
            axis_y + 16.0,
            trim_float(t)
        );
        t += step;
    }
    for p in &placed {
        let job = &jobs[p.job];
        let (x0, x1) = (x(p.start_ms), x(p.end_ms).max(x(p.start_ms) + 2.0));
        let y = top + row * p.slot as f64 + 4.0;
        let failed = job.status != "completed";
        let stroke = if Some(p.job) == slowest {
            " stroke=\"#cf222e\" stroke-width=\"2.5\""
        } else if failed {
            " stroke=\"#cf222e\" stroke-width=\"1\" stroke-dasharray=\"3 2\""
        } else {
            ""
        };
        let _ = write!(
            svg,
            "<g class=\"job\" data-job=\"{}\"><title>#{} {} ({}): {}, {}</title>\
             <rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" rx=\"3\" fill=\"{}\"{stroke}/>",
            job.index,
            job.index,
            esc(&job.kind),
            esc(&job.status),
            seconds(job.duration_s),
            esc(&job.worker),
            x1 - x0,
            row - 8.0,
            side_colour(&job.side)
        );
        let label = format!("#{} {}", job.index, job.kind);
        if (x1 - x0) > label.len() as f64 * 6.2 + 8.0 {
            let _ = write!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" style=\"fill:#fff\">{}</text>",
                x0 + 5.0,
                y + row / 2.0,
                esc(&label)
            );
        }
        svg.push_str("</g>");
    }
    let cache_y = top + row * (slots - 1) as f64 + row / 2.0;
    for (job, at) in &cached {
        let cx = x(*at);
        let _ = write!(
            svg,
            "<g class=\"job cached\" data-job=\"{}\"><title>#{} {}: answered from the result cache</title>\
             <path d=\"M{cx:.1} {:.1} l6 7 l-6 7 l-6 -7 z\" fill=\"{}\"/></g>",
            job.index,
            job.index,
            esc(&job.kind),
            cache_y - 7.0,
            side_colour(&job.side)
        );
    }
    svg.push_str("</svg>");
    let slowest_note = match slowest {
        Some(i) => {
            let slow = &jobs[i];
            format!(
                "slowest: job #{} {} ({}, {})",
                slow.index,
                esc(&slow.kind),
                seconds(slow.duration_s),
                esc(&slow.status)
            )
        }
        None => "every job was answered from the result cache".to_owned(),
    };
    let ran_slots = slots - usize::from(!cached.is_empty());
    let shape = match (ran_slots, cached.len()) {
        (_, 0) => format!(
            "{} in {}",
            count(jobs.len(), "job"),
            count(ran_slots, "slot")
        ),
        (0, n) => format!("{}, all answered from the result cache", count(n, "job")),
        (_, n) => format!(
            "{} in {}, {n} answered from the result cache",
            count(jobs.len() - n, "job"),
            count(ran_slots, "slot")
        ),
    };
    let mut out = format!(
        "<div class=\"legend\"><span><i style=\"background:#8250df\"></i>base</span>\
         <span><i style=\"background:#0969da\"></i>candidate</span>\
         <span><i style=\"background:#fff;border:2px solid #cf222e\"></i>slowest</span>\
         <span>{shape} · seconds after the proof started</span></div>{svg}\
         <p class=\"note\" id=\"slowest\">{slowest_note}</p>"
    );
    if let Some(note) = note {
        let _ = write!(out, "<p class=\"note\">{note}</p>");
    }
    out
}

/// An axis step giving about six ticks: 1, 2 or 5 times a power of ten.
pub fn nice_step(span: f64) -> f64 {
    let raw = (span / 6.0).max(1e-3);
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude)
}

fn trim_float(v: f64) -> String {
    let text = format!("{v:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned() + " s"
}

/// The changed hunks with their status; the lines no proving test executed, per hunk.
fn diff_coverage_section(coverage: &DiffCoverage) -> String {
    let mut out = format!(
        "<h2>Diff coverage</h2><p class=\"note\" id=\"diff-coverage\">measured with {}: which \
         changed product lines the proving tests executed (report only)</p>",
        esc(&coverage.tool)
    );
    if let Some(note) = &coverage.note {
        let _ = write!(out, "<p class=\"note\">not measured: {}</p>", esc(note));
        return out;
    }
    out.push_str("<table><tr><th>hunk</th><th>status</th><th>not executed</th></tr>");
    for hunk in &coverage.hunks {
        let status = match hunk.status {
            HunkStatus::Executed => "executed",
            HunkStatus::PartlyExecuted => "partly executed",
            HunkStatus::NotExecuted => "not executed",
            HunkStatus::NoStatements => "no statements",
        };
        let tone = match hunk.status {
            HunkStatus::Executed => "good",
            HunkStatus::PartlyExecuted | HunkStatus::NotExecuted => "bad",
            HunkStatus::NoStatements => "muted",
        };
        let missed: Vec<String> = hunk.missed_lines.iter().map(u32::to_string).collect();
        let _ = write!(
            out,
            "<tr><td class=\"mono\">{}:{}-{}</td><td><span class=\"badge {tone}\">{status}</span></td><td class=\"mono\">{}</td></tr>",
            esc(hunk.hunk.path.as_str()),
            hunk.hunk.start,
            hunk.hunk.end,
            esc(&missed.join(", "))
        );
    }
    out.push_str("</table>");
    if !coverage.unmeasured_files.is_empty() {
        let _ = write!(
            out,
            "<p class=\"note\">not measured: {}</p>",
            esc(&coverage.unmeasured_files.join(", "))
        );
    }
    out
}

fn mutation_section(check: &MutationCheck, sources: &BTreeMap<String, String>) -> String {
    let mut out = format!(
        "<h2>Mutation check</h2><div class=\"stats\" id=\"mutation-check\">{}{}{}{}</div>\
         <p class=\"note\">proving tests: {} · budget {} s{}</p>",
        stat(check.killed, "killed", "good"),
        stat(
            check.survived,
            "survived",
            if check.survived > 0 { "bad" } else { "good" }
        ),
        stat(check.not_run, "not run", "muted"),
        stat(check.mutants.len(), "mutants", "muted"),
        esc(&check.proving_tests.join(", ")),
        check.budget_s,
        check.unmutated_s.map_or(String::new(), |s| format!(
            " · unmutated run {}",
            seconds(s)
        ))
    );
    if !check.mutants.is_empty() {
        out.push_str(
            "<table><tr><th>where</th><th>operator</th><th>change</th><th>outcome</th></tr>",
        );
        for record in &check.mutants {
            let m = &record.mutant;
            let (status, more) = match &record.outcome {
                MutantOutcome::Killed {
                    by,
                    timed_out,
                    reason,
                } => (
                    "killed",
                    format!(
                        "by {}{}{}",
                        esc(&by.join(", ")),
                        if *timed_out { " (timed out)" } else { "" },
                        reason
                            .as_deref()
                            .map_or(String::new(), |r| format!(" · {}", esc(r)))
                    ),
                ),
                MutantOutcome::Survived => ("survived", String::new()),
                MutantOutcome::NotRun { reason } => ("not_run", esc(reason)),
            };
            let diff = sources
                .get(m.edit.path.as_str())
                .and_then(|s| edit_diff(s, m.edit.start, m.edit.end, &m.edit.replacement, 2));
            let change = match (status, diff) {
                ("survived", Some(lines)) => format!(
                    "<details open><summary>{}</summary>{}</details>",
                    ticks(&m.description),
                    diff_block(&lines)
                ),
                (_, Some(lines)) => format!(
                    "<details><summary>{}</summary>{}</details>",
                    ticks(&m.description),
                    diff_block(&lines)
                ),
                (_, None) => ticks(&m.description),
            };
            let _ = write!(
                out,
                "<tr class=\"mutant\" data-status=\"{status}\"><td class=\"mono\">{}:{}</td><td>{}</td>\
                 <td>{change}</td><td>{}<div class=\"note\">{more}</div></td></tr>",
                esc(m.path.as_str()),
                m.line,
                m.operator.name(),
                badge(status)
            );
        }
        out.push_str("</table>");
    }
    for survivor in &check.survivors {
        let _ = write!(
            out,
            "<p class=\"reason\">survivor: {}</p>",
            esc(&survivor.message)
        );
    }
    if check.survived > 0 {
        out.push_str("<p class=\"note\">a survivor may be an equivalent mutant: read the test; the verdict stands</p>");
    }
    for note in &check.notes {
        let _ = write!(out, "<p class=\"note\">note: {}</p>", esc(note));
    }
    out
}

fn jobs_section(jobs: &[JobEvidence], artifacts: &Artifacts) -> String {
    let mut out = String::from("<h2>Jobs and their logs</h2>");
    for job in jobs {
        let outcome = match (job.exit_code, &job.message) {
            (Some(code), _) => format!("exit {code}"),
            (None, Some(m)) => esc(m),
            (None, None) => String::new(),
        };
        let _ = write!(
            out,
            "<details class=\"jobdetail\"><summary><b>#{}</b> {} {} · {} · {} · report {} · {}</summary>\
             <div class=\"note mono\">{}</div>",
            job.index,
            esc(&job.kind),
            badge(&job.status),
            outcome,
            seconds(job.duration_s),
            esc(&job.report),
            count(job.tests_reported, "test"),
            esc(&job.command.join(" "))
        );
        if let Some(from) = &job.cached {
            let _ = write!(
                out,
                "<div class=\"note\"><span class=\"badge muted\">cached</span> answered from the result cache \
                 (entry <span class=\"mono\">{}</span>): the result, duration and logs are those of job \
                 <span class=\"mono\">{}</span> of proof <span class=\"mono\">{}</span></div>",
                esc(&from.entry),
                esc(&from.job_id),
                esc(&from.proof_id)
            );
        }
        for artifact in &job.artifacts {
            out.push_str(&artifact_block(
                &artifact.name,
                &artifact.key,
                &artifact.sha256,
                artifact.bytes,
                artifacts,
            ));
        }
        out.push_str("</details>");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_common::evidence::RevisionInfo;

    fn job(index: u32, side: &str, start: Option<u64>, duration_s: f64) -> JobEvidence {
        JobEvidence {
            index,
            job_id: format!("p-1/{index:04}"),
            kind: format!("{side}-test"),
            side: side.into(),
            tree: "t".into(),
            command: vec!["python3".into(), "-m".into(), "pytest".into()],
            status: "completed".into(),
            exit_code: Some(0),
            message: None,
            cause: None,
            report: "parsed".into(),
            tests_reported: 1,
            duration_s,
            started_at_ms: start,
            worker: "embedded-1".into(),
            artifacts: Vec::new(),
            cached: None,
        }
    }

    #[test]
    fn overlapping_jobs_take_separate_slots_and_a_freed_slot_is_reused() {
        let jobs = [
            job(0, "base", Some(0), 1.0),
            job(1, "candidate", Some(10), 0.5),
            job(2, "base", Some(600), 1.0),
        ];
        let placed = place(&jobs).unwrap();
        let slots: Vec<usize> = placed.iter().map(|p| p.slot).collect();
        assert_eq!(slots, [0, 1, 1]);
        let mut with_a_cached_one = jobs.to_vec();
        with_a_cached_one[0].cached = Some(assay_common::evidence::CachedFrom {
            entry: "e".into(),
            proof_id: "p-0".into(),
            job_id: "p-0/0001".into(),
        });
        let placed = place(&with_a_cached_one).unwrap();
        let ran: Vec<(usize, usize)> = placed.iter().map(|p| (p.job, p.slot)).collect();
        assert_eq!(ran, [(1, 0), (2, 0)], "a cached job takes no slot");
        assert!(timeline(&with_a_cached_one).contains("<g class=\"job cached\" data-job=\"0\">"));
        assert!(place(&[job(0, "base", None, 1.0)]).is_none());
    }

    #[test]
    fn axis_steps_are_round() {
        assert_eq!(nice_step(12.0), 2.0);
        assert_eq!(nice_step(0.6), 0.1);
        assert_eq!(nice_step(100.0), 20.0);
    }

    #[test]
    fn a_test_name_with_markup_renders_as_text() {
        let evidence = Evidence {
            schema: "assay.proof/v1".into(),
            proof_id: "p-1".into(),
            verdict: assay_common::verdict::Verdict::Proven,
            repository: "/r".into(),
            runner: "pytest".into(),
            base: RevisionInfo {
                requested: "main".into(),
                commit: None,
                tree: "b".into(),
                generated_lockfile: None,
            },
            candidate: RevisionInfo {
                requested: "HEAD".into(),
                commit: None,
                tree: "c".into(),
                generated_lockfile: None,
            },
            changed_test_files: vec!["tests/<x>.py".into()],
            test_only: false,
            criteria: Vec::new(),
            jobs: vec![job(0, "base", Some(0), 1.0)],
            mutation_check: None,
            diff_coverage: None,
            harness: None,
            sandbox: None,
            workers: Vec::new(),
            coordinators: Vec::new(),
            started_at: "2026-11-29T23:33:49Z".into(),
            duration_s: 1.0,
        };
        let mut evidence = evidence;
        evidence.jobs[0].kind = "<script>alert(1)</script>".into();
        let html = render(&ProofInput {
            evidence: &evidence,
            artifacts: &Artifacts::new(),
            sources: &BTreeMap::new(),
        });
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("tests/&lt;x&gt;.py"));
        assert!(html.contains("id=\"verdict\">PROVEN<"));
    }
}
