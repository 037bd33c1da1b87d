//! The suite report: the run's status and counts, the trend of the last runs (passed and
//! failed, duration, coverage) with the alerts, then the cases by status with their output.

use super::{Artifacts, artifact_block, badge, count, esc, page, seconds, stat, tone};
use assay_common::suite::{CaseOutcome, CaseReport, SuiteReport};
use assay_common::suite_history::RunRecord;
use std::fmt::Write as _;

fn case_status(case: &CaseReport) -> &'static str {
    if case.quarantined {
        return "quarantined";
    }
    match case.outcome {
        CaseOutcome::Passed => "passed",
        CaseOutcome::Failed => "failed",
        CaseOutcome::Error => "error",
        CaseOutcome::Skipped => "skipped",
        CaseOutcome::NotRun => "not_run",
    }
}

pub fn render(report: &SuiteReport, artifacts: &Artifacts) -> String {
    let t = &report.totals;
    // Oldest first, this run last (empty for reports written before they were kept).
    let runs = &report.history.recent;
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>Assay test run <span class=\"mono\">{}</span></h1><div class=\"hero\">\
         <div class=\"verdict {}\" id=\"verdict\">{}</div><div><div class=\"facts\">\
         <span><b>{}</b> on <b>{}</b></span><span>revision <b class=\"mono\">{}</b></span>\
         <span>runner <b>{}</b></span><span>{}</span><span>started {}</span></div>\
         <div class=\"stats\" id=\"totals\">{}{}{}{}{}{}</div></div></div>",
        esc(&report.run_id),
        tone(report.status.label()),
        esc(&report.status.label().to_uppercase().replace('_', " ")),
        esc(&report.repository),
        esc(&report.branch),
        esc(&report.revision.chars().take(10).collect::<String>()),
        esc(&report.runner.to_string()),
        seconds(report.duration_s),
        esc(&report.started_at),
        stat(t.passed, "passed", "good"),
        stat(
            t.failed,
            "failed",
            if t.failed > 0 { "bad" } else { "muted" }
        ),
        stat(t.error, "error", if t.error > 0 { "bad" } else { "muted" }),
        stat(
            t.quarantined,
            "quarantined",
            if t.quarantined > 0 { "warn" } else { "muted" }
        ),
        stat(t.skipped, "skipped", "muted"),
        stat(t.not_run, "not run", "muted"),
    );
    if let Some(stopped) = &report.stopped {
        let _ = write!(
            body,
            "<p class=\"reason\">admission stopped: {}</p>",
            esc(stopped)
        );
    }
    body.push_str(&alerts(report));
    body.push_str("<h2>Trend of the last runs</h2>");
    body.push_str(&trend(runs));
    body.push_str(&cases_section(report, artifacts));
    page(
        &format!("Assay test run {}: {}", report.run_id, report.status),
        &body,
    )
}

fn alerts(report: &SuiteReport) -> String {
    let list = &report.history.alerts;
    if list.is_empty() {
        return "<p class=\"note\" id=\"alerts\">no alerts against the previous run</p>".into();
    }
    let mut out = String::from("<h2>Alerts</h2><table id=\"alerts\">");
    for alert in list {
        let severity = alert.severity.as_str();
        let _ = write!(
            out,
            "<tr class=\"alert\"><td><span class=\"badge {}\">{}</span></td><td><b>{}</b></td><td>{}</td></tr>",
            if severity == "critical" {
                "bad"
            } else {
                "warn"
            },
            esc(severity),
            esc(&alert.kind),
            esc(&alert.detail)
        );
    }
    out.push_str("</table>");
    out
}

/// Two SVG charts over the runs: passed and failed counts as stacked bars, and the duration
/// and coverage as lines.
pub fn trend(runs: &[RunRecord]) -> String {
    if runs.is_empty() {
        return "<p class=\"note\">no runs recorded yet</p>".into();
    }
    let (w, h, left, bottom, top) = (560.0, 190.0, 40.0, 22.0, 28.0);
    let plot_w = w - left - 40.0;
    let plot_h = h - bottom - top;
    let n = runs.len();
    let slot = plot_w / n as f64;
    let max_total = runs.iter().map(|r| r.total).max().unwrap_or(1).max(1) as f64;
    let mut bars = format!(
        "<svg id=\"trend-counts\" viewBox=\"0 0 {w} {h}\" width=\"49%\" role=\"img\" aria-label=\"passed and failed per run\" style=\"background:#fff;border:1px solid #d0d7de;border-radius:6px\">\
         <text x=\"{left}\" y=\"15\">tests per run: <tspan style=\"fill:#1a7f37\">passed</tspan>, \
         <tspan style=\"fill:#cf222e\">failed</tspan>, <tspan style=\"fill:#6e7781\">skipped</tspan></text>"
    );
    let y_of = |v: f64| top + plot_h - plot_h * v / max_total;
    let _ = write!(
        bars,
        "<text x=\"4\" y=\"{:.1}\">{}</text><text x=\"4\" y=\"{:.1}\">0</text>\
         <line x1=\"{left}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#d0d7de\"/>",
        y_of(max_total) + 4.0,
        max_total,
        y_of(0.0),
        left + plot_w,
        y_of(0.0),
        y_of(0.0)
    );
    for (i, run) in runs.iter().enumerate() {
        let bw = (slot * 0.7).min(44.0);
        let x = left + slot * i as f64 + (slot - bw) / 2.0;
        let mut base = 0.0;
        for (value, colour, what) in [
            (run.passed as f64, "#1a7f37", "passed"),
            (run.failed as f64, "#cf222e", "failed"),
            (run.skipped as f64, "#8c959f", "skipped"),
        ] {
            if value > 0.0 {
                let _ = write!(
                    bars,
                    "<rect class=\"run-{what}\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{bw:.1}\" height=\"{:.1}\" fill=\"{colour}\"><title>{} {what}: {value}</title></rect>",
                    y_of(base + value),
                    y_of(base) - y_of(base + value),
                    esc(&run.run_id)
                );
                base += value;
            }
        }
        if run.status.label() == "error" {
            let _ = write!(
                bars,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" style=\"fill:#cf222e\">error</text>",
                x + bw / 2.0,
                y_of(0.0) - 4.0
            );
        }
        if n <= 12 || i % n.div_ceil(12) == 0 || i == n - 1 {
            let _ = write!(
                bars,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                x + bw / 2.0,
                h - 6.0,
                if i == n - 1 {
                    "now".to_owned()
                } else {
                    format!("-{}", n - 1 - i)
                }
            );
        }
    }
    bars.push_str("</svg>");
    // Duration (left axis, seconds) and coverage (right axis, 0–100 %).
    let max_duration = runs
        .iter()
        .filter_map(|r| r.duration_s)
        .fold(0.0_f64, f64::max)
        .max(0.001);
    let x_of = |i: usize| left + slot * i as f64 + slot / 2.0;
    let mut lines = format!(
        "<svg id=\"trend-lines\" viewBox=\"0 0 {w} {h}\" width=\"49%\" role=\"img\" aria-label=\"duration and coverage per run\" style=\"background:#fff;border:1px solid #d0d7de;border-radius:6px;margin-left:1%\">\
         <text x=\"{left}\" y=\"15\"><tspan style=\"fill:#0969da\">duration</tspan> (left) · <tspan style=\"fill:#8250df\">coverage</tspan> (right)</text>\
         <text x=\"4\" y=\"{:.1}\" style=\"fill:#0969da\">{}</text><text x=\"4\" y=\"{:.1}\" style=\"fill:#0969da\">0</text>\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" style=\"fill:#8250df\">100%</text><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" style=\"fill:#8250df\">0%</text>\
         <line x1=\"{left}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#d0d7de\"/>",
        top + 4.0,
        seconds(max_duration),
        top + plot_h,
        w - 4.0,
        top + 4.0,
        w - 4.0,
        top + plot_h,
        left + plot_w,
        top + plot_h,
        top + plot_h
    );
    let series = |values: Vec<Option<f64>>, max: f64, colour: &str, class: &str| {
        let points: Vec<String> = values
            .iter()
            .enumerate()
            .filter_map(|(i, v)| {
                v.map(|v| format!("{:.1},{:.1}", x_of(i), top + plot_h - plot_h * v / max))
            })
            .collect();
        let mut out = String::new();
        if points.len() > 1 {
            let _ = write!(
                out,
                "<polyline class=\"{class}\" points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"/>",
                points.join(" ")
            );
        }
        for p in &points {
            let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
            let _ = write!(
                out,
                "<circle class=\"{class}\" cx=\"{x}\" cy=\"{y}\" r=\"3\" fill=\"{colour}\"/>"
            );
        }
        out
    };
    lines.push_str(&series(
        runs.iter().map(|r| r.duration_s).collect(),
        max_duration,
        "#0969da",
        "duration",
    ));
    lines.push_str(&series(
        runs.iter().map(|r| r.coverage_pct).collect(),
        100.0,
        "#8250df",
        "coverage",
    ));
    if runs.iter().all(|r| r.coverage_pct.is_none()) {
        let _ = write!(
            lines,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" style=\"fill:#57606a\">coverage: n/a (the output names no total)</text>",
            left + plot_w / 2.0,
            top + plot_h / 2.0
        );
    }
    lines.push_str("</svg>");
    let last = &runs[n - 1];
    format!(
        "<div>{bars}{lines}</div><p class=\"note\" id=\"trend-note\">{} · last: {}/{} passed, {} failed{}</p>",
        count(n, "run"),
        last.passed,
        last.total,
        last.failed,
        last.coverage_pct
            .map_or(String::new(), |c| format!(", {c:.1}% coverage"))
    )
}

fn cases_section(report: &SuiteReport, artifacts: &Artifacts) -> String {
    let mut out = String::from("<h2>Cases</h2>");
    for status in [
        "failed",
        "error",
        "quarantined",
        "not_run",
        "skipped",
        "passed",
    ] {
        let cases: Vec<&CaseReport> = report
            .cases
            .iter()
            .filter(|c| case_status(c) == status)
            .collect();
        if cases.is_empty() {
            continue;
        }
        let _ = write!(
            out,
            "<h3>{} <span class=\"note\">({})</span></h3>",
            badge(status),
            cases.len()
        );
        for case in cases {
            let open = if matches!(status, "failed" | "error") {
                " open"
            } else {
                ""
            };
            // A case the result cache answered ran in an earlier run, which the page names.
            let cached = case.cached.as_ref().map_or(String::new(), |from| {
                format!(
                    " <span class=\"note\">from the cache (run {})</span>",
                    esc(&from.run_id)
                )
            });
            // Passed in the whole suite's order, failed apart: its message says both.
            let order = if case.order_dependent {
                " <span class=\"note\">order-dependent</span>"
            } else {
                ""
            };
            let _ = write!(
                out,
                "<details class=\"case\" data-status=\"{status}\"{open}><summary><code>{}</code> {} <span class=\"note\">{}</span>{cached}{order}</summary>",
                esc(&case.display),
                badge(status),
                case.duration_s.map_or(String::new(), seconds)
            );
            if let Some(message) = &case.message {
                let _ = write!(out, "<pre>{}</pre>", esc(message));
            }
            let own: Vec<_> = if case.artifacts.is_empty() {
                // One case per job: the job's output is the case's.
                report
                    .jobs
                    .iter()
                    .filter(|j| Some(j.index) == case.job && j.cases.len() == 1)
                    .flat_map(|j| j.artifacts.iter())
                    .filter(|a| a.name.ends_with("stdout") || a.name.ends_with("stderr"))
                    .collect()
            } else {
                case.artifacts.iter().collect()
            };
            for a in own {
                out.push_str(&artifact_block(
                    &a.name, &a.key, &a.sha256, a.bytes, artifacts,
                ));
            }
            out.push_str("</details>");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_common::runner::RunnerKind;
    use assay_common::suite::{Ending, Lane, SuiteRunner, SuiteTotals};
    use assay_common::suite_history::HistoryReport;

    fn case(display: &str, outcome: CaseOutcome, quarantined: bool) -> CaseReport {
        CaseReport {
            reference: "v1.0123456789abcdef".into(),
            display: display.into(),
            outcome,
            lane: Lane::Guest,
            quarantined,
            order_dependent: false,
            message: Some("expected <b>Invoice</b>".into()),
            duration_s: Some(0.25),
            job: Some(0),
            artifacts: Vec::new(),
            cached: None,
        }
    }

    fn report(history: HistoryReport) -> SuiteReport {
        SuiteReport {
            schema: "assay.test/v1".into(),
            run_id: "t-1".into(),
            status: Ending::Failed,
            repository: "/src/invoice".into(),
            branch: "main".into(),
            revision: "0".repeat(40),
            runner: SuiteRunner::Kind(RunnerKind::Pytest),
            started_at: "2026-11-29T23:33:49Z".into(),
            duration_s: 1.5,
            totals: SuiteTotals {
                total: 3,
                passed: 1,
                failed: 1,
                quarantined: 1,
                ..SuiteTotals::default()
            },
            cases: vec![
                case("tests/t.py::test_<script>", CaseOutcome::Failed, false),
                case("tests/t.py::test_clock", CaseOutcome::Failed, true),
                case("tests/t.py::test_total", CaseOutcome::Passed, false),
            ],
            jobs: Vec::new(),
            audit: Default::default(),
            history,
            stopped: None,
            cache: None,
        }
    }

    #[test]
    fn cases_group_by_status_with_a_quarantined_failure_apart_and_names_escaped() {
        let mut report = report(HistoryReport::default());
        report.cases[2].cached = Some(assay_common::suite::CachedCase {
            entry: "7c".repeat(32),
            run_id: "t-1796113691-2063badd71c04e95".into(),
            job_id: "t-1796113691-2063badd71c04e95/0001".into(),
        });
        report.cases[0].order_dependent = true;
        let html = render(&report, &Artifacts::new());
        assert!(
            html.contains("from the cache (run t-1796113691-2063badd71c04e95)"),
            "{html}"
        );
        assert_eq!(
            html.matches("<span class=\"note\">order-dependent</span>")
                .count(),
            1,
            "{html}"
        );
        assert!(
            html.contains(
                "data-status=\"failed\" open><summary><code>tests/t.py::test_&lt;script&gt;</code>"
            ),
            "{html}"
        );
        assert!(html.contains("class=\"case\" data-status=\"quarantined\""));
        assert!(html.contains("expected &lt;b&gt;Invoice&lt;/b&gt;"));
        assert_eq!(
            html.matches("<script>").count(),
            1,
            "only the page's own script"
        );
        assert!(html.contains("no runs recorded yet"));
    }

    #[test]
    fn the_trend_draws_each_recent_run() {
        let run = |passed: u64, failed: u64, duration: f64| {
            serde_json::json!({
                "timestamp": "2026-11-29T10:00:00Z", "run_id": "t-0", "total": passed + failed,
                "passed": passed, "failed": failed, "skipped": 0, "coverage_pct": 80.0,
                "duration_s": duration, "status": if failed > 0 { "failing" } else { "passing" },
                "status_detail": null, "new_failures": 0, "coverage_drop": 0.0,
                "failed_cases": [], "newly_failing": [], "alerts": []
            })
        };
        let history = serde_json::json!({
            "file": "/state/history/invoice/main.json", "new_failures": 0, "newly_failing": [],
            "coverage_drop": 0.0,
            "alerts": [{"severity": "warning", "type": "regression", "detail": "1 new <failure>"}],
            "recent": [run(3, 0, 1.0), run(2, 1, 2.0), run(3, 0, 1.5)],
        });
        let report = report(serde_json::from_value(history).unwrap());
        assert_eq!(report.history.recent.len(), 3);
        let html = render(&report, &Artifacts::new());
        assert_eq!(html.matches("class=\"run-passed\"").count(), 3);
        assert_eq!(html.matches("class=\"run-failed\"").count(), 1);
        assert_eq!(html.matches("<circle class=\"coverage\"").count(), 3);
        assert!(html.contains("<polyline class=\"duration\""));
        assert!(html.contains("1 new &lt;failure&gt;"));
    }
}
