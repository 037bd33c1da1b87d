//! The mutation report, from Stryker's mutation-testing-report-schema document: a score per
//! file and overall, then each file's source with every mutant marked by status; a mutant
//! opens (`<details>`) to its diff, the tests that killed it and the tests that cover it.

use super::{badge, diff_block, edit_diff, esc, offset_of, page, seconds, stat, ticks, tone};
use assay_common::mutation_report::{FileReport, MutantReport, MutationReport, Status};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Counts of one set of mutants by status.
#[derive(Debug, Default, PartialEq)]
pub struct Tally {
    pub killed: usize,
    pub survived: usize,
    pub no_coverage: usize,
    pub timeout: usize,
    /// Mutants whose build failed (Stryker's `CompileError`): outside the score.
    pub compile_error: usize,
    pub other: usize,
}

impl Tally {
    pub fn of<'a>(mutants: impl IntoIterator<Item = &'a MutantReport>) -> Self {
        let mut t = Tally::default();
        for m in mutants {
            match m.status {
                Status::Killed => t.killed += 1,
                Status::Survived => t.survived += 1,
                Status::NoCoverage => t.no_coverage += 1,
                Status::Timeout => t.timeout += 1,
                Status::CompileError => t.compile_error += 1,
                Status::RuntimeError | Status::Pending => t.other += 1,
            }
        }
        t
    }

    /// Detected (killed, timeout) over detected plus undetected, as `assay mutate` scores.
    pub fn score(&self) -> Option<f64> {
        let detected = self.killed + self.timeout;
        let valid = detected + self.survived + self.no_coverage;
        (valid > 0).then(|| detected as f64 / valid as f64)
    }
}

fn status_label(status: Status) -> &'static str {
    match status {
        Status::NoCoverage => "no coverage",
        Status::RuntimeError => "error",
        Status::CompileError => "compile error",
        other => other.name(),
    }
}

fn status_tone(status: Status) -> &'static str {
    tone(&status_label(status).to_ascii_lowercase())
}

/// How bad a status is, for the colour of a line holding several mutants.
fn severity(status: Status) -> u8 {
    match status {
        Status::Survived => 4,
        Status::NoCoverage => 3,
        Status::Timeout => 2,
        Status::Killed => 1,
        Status::RuntimeError | Status::CompileError | Status::Pending => 0,
    }
}

fn score_text(score: Option<f64>) -> String {
    score.map_or_else(|| "n/a".into(), |s| format!("{:.1}%", s * 100.0))
}

fn score_tone(score: Option<f64>) -> &'static str {
    match score {
        Some(s) if s >= 0.8 => "good",
        Some(s) if s >= 0.6 => "warn",
        Some(_) => "bad",
        None => "muted",
    }
}

pub fn render(doc: &MutationReport) -> String {
    let all = Tally::of(doc.files.values().flat_map(|f| &f.mutants));
    let total: usize = doc.files.values().map(|f| f.mutants.len()).sum();
    let score = all.score();
    let mut body = String::new();
    let summary = &doc.assay.summary;
    let elapsed = Some(summary.elapsed_s);
    let interval = summary.confidence_interval;
    let _ = write!(
        body,
        "<h1>Assay mutation testing{}</h1><div class=\"hero\">\
         <div class=\"verdict {}\" id=\"score\">{}</div><div><div class=\"facts\">\
         <span>mutation score over <b>{}</b> in <b>{}</b></span>{}{}</div>\
         <div class=\"stats\">{}{}{}{}{}{}</div></div></div>",
        match doc.assay.tree.as_str() {
            "" => String::new(),
            t => format!(
                " of tree <span class=\"mono\">{}</span>",
                esc(&t.chars().take(10).collect::<String>())
            ),
        },
        score_tone(score),
        score_text(score),
        super::count(total, "mutant"),
        super::count(doc.files.len(), "file"),
        interval.map_or(String::new(), |(lo, hi)| format!(
            "<span>95% interval {:.1}%–{:.1}%</span>",
            lo * 100.0,
            hi * 100.0
        )),
        elapsed.map_or(String::new(), |s| format!("<span>{}</span>", seconds(s))),
        stat(all.killed, "killed", "good"),
        stat(
            all.survived,
            "survived",
            if all.survived > 0 { "bad" } else { "muted" }
        ),
        stat(
            all.no_coverage,
            "no coverage",
            if all.no_coverage > 0 { "warn" } else { "muted" }
        ),
        stat(all.timeout, "timeout", "muted"),
        stat(all.compile_error, "compile error", "muted"),
        stat(all.other, "error or pending", "muted"),
    );
    if let Some(note) = doc.assay.selection_note.as_deref() {
        let _ = write!(body, "<p class=\"note\">{}</p>", esc(note));
    }
    body.push_str(
        "<h2>Files</h2><table id=\"files\"><tr><th>file</th><th>score</th><th>killed</th>\
         <th>survived</th><th>no coverage</th><th>timeout</th><th>compile error</th><th>other</th></tr>",
    );
    for (path, file) in &doc.files {
        let t = Tally::of(&file.mutants);
        let s = t.score();
        let _ = write!(
            body,
            "<tr class=\"file\"><td class=\"mono\"><a href=\"#f-{}\">{}</a></td>\
             <td><span class=\"bar\"><i style=\"width:{:.0}%;background:var(--{})\"></i></span> {}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            anchor(path),
            esc(path),
            s.unwrap_or(0.0) * 100.0,
            score_tone(s),
            score_text(s),
            t.killed,
            t.survived,
            t.no_coverage,
            t.timeout,
            t.compile_error,
            t.other
        );
    }
    body.push_str("</table>");
    body.push_str(
        "<div class=\"legend\" style=\"margin-top:14px\"><span><i style=\"background:var(--bad-bg);border:1px solid var(--bad)\"></i>survived</span>\
         <span><i style=\"background:var(--warn-bg);border:1px solid var(--warn)\"></i>no coverage or timeout</span>\
         <span><i style=\"background:var(--good-bg);border:1px solid var(--good)\"></i>killed</span>\
         <span>open a mutant for its diff and tests</span></div>",
    );
    for (path, file) in &doc.files {
        body.push_str(&file_section(path, file));
    }
    page(
        &format!("Assay mutation testing: {}", score_text(score)),
        &body,
    )
}

fn anchor(path: &str) -> String {
    path.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

fn file_section(path: &str, file: &FileReport) -> String {
    let t = Tally::of(&file.mutants);
    let mut by_line: BTreeMap<usize, Vec<&MutantReport>> = BTreeMap::new();
    for m in &file.mutants {
        by_line.entry(m.location.start.line).or_default().push(m);
    }
    let mut out = format!(
        "<h2 id=\"f-{}\" class=\"mono\">{} <span class=\"badge {}\">{}</span></h2><div class=\"src\">",
        anchor(path),
        esc(path),
        score_tone(t.score()),
        score_text(t.score())
    );
    for (i, text) in file.source.split('\n').enumerate() {
        let n = i + 1;
        if n == file.source.split('\n').count() && text.is_empty() {
            break;
        }
        let marks = by_line.get(&n);
        let class = marks
            .and_then(|ms| ms.iter().max_by_key(|m| severity(m.status)))
            .map_or("", |m| status_tone(m.status));
        let _ = write!(
            out,
            "<div class=\"ln {class}\"><span class=\"no\">{n}</span><code>{}</code></div>",
            esc(text)
        );
        if let Some(ms) = marks {
            out.push_str("<div class=\"marks\">");
            for m in ms {
                out.push_str(&mutant_details(&file.source, m));
            }
            out.push_str("</div>");
        }
    }
    out.push_str("</div>");
    out
}

fn mutant_details(source: &str, m: &MutantReport) -> String {
    let label = status_label(m.status);
    // A survivor is what to read first: it opens with its diff.
    let open = if m.status == Status::Survived {
        " open"
    } else {
        ""
    };
    let mut out = format!(
        "<details class=\"mutant\" data-status=\"{}\"{open}><summary>{} <span class=\"note\">{}</span> {} \
         <span class=\"note mono\">{}</span></summary>",
        m.status.name(),
        badge(label),
        esc(&m.mutator_name),
        ticks(&m.description),
        esc(&m.id)
    );
    let range = (
        offset_of(source, m.location.start.line, m.location.start.column),
        offset_of(source, m.location.end.line, m.location.end.column),
    );
    if let (Some(start), Some(end)) = range
        && let Some(lines) = edit_diff(source, start, end, &m.replacement, 2)
    {
        out.push_str(&diff_block(&lines));
    }
    if let Some(reason) = &m.status_reason {
        let _ = write!(out, "<div class=\"note\">{}</div>", esc(reason));
    }
    if !m.killed_by.is_empty() {
        let _ = write!(
            out,
            "<div>killed by <code>{}</code></div>",
            esc(&m.killed_by.join(", "))
        );
    }
    let _ = write!(
        out,
        "<div class=\"note\">covered by: {}</div></details>",
        if m.covered_by.is_empty() {
            "the whole suite (no per-test selection)".to_owned()
        } else {
            esc(&m.covered_by.join(", "))
        }
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> MutationReport {
        serde_json::from_value(serde_json::json!({
            "schemaVersion": "1",
            "thresholds": {"high": 80, "low": 60},
            "testFiles": {},
            "framework": {"name": "pytest", "version": "8.3.5"},
            "performance": {"setup": 120, "initialRun": 340, "mutation": 2100},
            "assay": {
                "tree": "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
                "perLineSelection": true,
                "selectionNote": null,
                "summary": {
                    "mutants": 3, "killed": 1, "survived": 1, "no_coverage": 1, "timeout": 0,
                    "runtime_error": 0, "compile_error": 0, "pending": 0, "flaky_kills": 0,
                    "mutation_score": 0.3333, "confidence_interval": [0.06, 0.79],
                    "elapsed_s": 2.6, "mutants_per_minute": 69.2
                },
                "skipped": [], "excludedFiles": [], "cache": null, "schemata": null
            },
            "files": {"pager.py": {
                "language": "python",
                "source": "def f(t, s):\n    if t % s > 0:\n        return 1\n    return 0\n",
                "mutants": [
                    {"id": "a1", "mutatorName": "swap_bound", "replacement": ">=",
                     "description": "`>` -> `>=`",
                     "location": {"start": {"line": 2, "column": 14}, "end": {"line": 2, "column": 15}},
                     "status": "Survived", "killedBy": [], "coveredBy": ["tests/t.py::test_<b>"],
                     "static": false},
                    {"id": "b2", "mutatorName": "return_constant", "replacement": "None",
                     "description": "`return None`",
                     "location": {"start": {"line": 3, "column": 16}, "end": {"line": 3, "column": 17}},
                     "status": "Killed", "killedBy": ["test_one"], "coveredBy": [], "static": false},
                    {"id": "c3", "mutatorName": "negate_condition", "replacement": "not (t % s > 0)",
                     "description": "`t % s > 0` -> `not (t % s > 0)`",
                     "location": {"start": {"line": 2, "column": 8}, "end": {"line": 2, "column": 17}},
                     "status": "NoCoverage", "killedBy": [], "coveredBy": [], "static": false}
                ]}}
        }))
        .unwrap()
    }

    #[test]
    fn scores_count_no_coverage_as_undetected() {
        let d = doc();
        let t = Tally::of(&d.files["pager.py"].mutants);
        assert_eq!((t.killed, t.survived, t.no_coverage), (1, 1, 1));
        assert!((t.score().unwrap() - 1.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn each_mutant_is_marked_on_its_line_with_its_diff() {
        let html = render(&doc());
        assert!(html.contains("id=\"score\">33.3%<"), "{html}");
        assert!(html.contains("class=\"ln bad\"><span class=\"no\">2</span>"));
        assert!(html.contains("class=\"ln good\"><span class=\"no\">3</span>"));
        assert!(html.contains("<span class=\"add\">   2 +     if t % s &gt;= 0:</span>"));
        assert!(html.contains("tests/t.py::test_&lt;b&gt;"));
        assert!(html.contains("killed by <code>test_one</code>"));
    }
}
