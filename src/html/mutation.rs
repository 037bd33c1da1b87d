//! The mutation report, from Stryker's mutation-testing-report-schema document: a score per
//! file and overall, then each file's source with every mutant marked by status; a mutant
//! opens (`<details>`) to its diff, the tests that killed it and the tests that cover it.

use super::{badge, diff_block, edit_diff, esc, offset_of, page, seconds, stat, ticks, tone};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

#[derive(Debug, Deserialize)]
pub struct Doc {
    pub files: BTreeMap<String, File>,
    #[serde(default)]
    pub assay: Option<AssayPart>,
}

#[derive(Debug, Deserialize)]
pub struct File {
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub mutants: Vec<Mutant>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mutant {
    pub id: String,
    pub mutator_name: String,
    #[serde(default)]
    pub replacement: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    pub location: Location,
    pub status: String,
    #[serde(default)]
    pub status_reason: Option<String>,
    #[serde(default)]
    pub killed_by: Vec<String>,
    #[serde(default)]
    pub covered_by: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub struct Location {
    pub start: Position,
    pub end: Position,
}

#[derive(Debug, Deserialize)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

#[derive(Debug, Deserialize)]
pub struct AssayPart {
    #[serde(default)]
    pub tree: Option<String>,
    #[serde(default, rename = "selectionNote")]
    pub selection_note: Option<String>,
    #[serde(default)]
    pub summary: Option<serde_json::Value>,
}

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
    pub fn of<'a>(mutants: impl IntoIterator<Item = &'a Mutant>) -> Self {
        let mut t = Tally::default();
        for m in mutants {
            match m.status.as_str() {
                "Killed" => t.killed += 1,
                "Survived" => t.survived += 1,
                "NoCoverage" => t.no_coverage += 1,
                "Timeout" => t.timeout += 1,
                "CompileError" => t.compile_error += 1,
                _ => t.other += 1,
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

fn status_label(status: &str) -> &str {
    match status {
        "NoCoverage" => "no coverage",
        "RuntimeError" => "error",
        "CompileError" => "compile error",
        other => other,
    }
}

fn status_tone(status: &str) -> &'static str {
    tone(&status_label(status).to_ascii_lowercase())
}

/// How bad a status is, for the colour of a line holding several mutants.
fn severity(status: &str) -> u8 {
    match status {
        "Survived" => 4,
        "NoCoverage" => 3,
        "Timeout" => 2,
        "Killed" => 1,
        _ => 0,
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

pub fn render(doc: &Doc) -> String {
    let all = Tally::of(doc.files.values().flat_map(|f| &f.mutants));
    let total: usize = doc.files.values().map(|f| f.mutants.len()).sum();
    let score = all.score();
    let mut body = String::new();
    let summary = doc.assay.as_ref().and_then(|a| a.summary.as_ref());
    let elapsed = summary
        .and_then(|s| s.get("elapsed_s"))
        .and_then(|v| v.as_f64());
    let interval = summary
        .and_then(|s| s.get("confidence_interval"))
        .and_then(|v| v.as_array())
        .and_then(|a| Some((a.first()?.as_f64()?, a.get(1)?.as_f64()?)));
    let _ = write!(
        body,
        "<h1>Assay mutation testing{}</h1><div class=\"hero\">\
         <div class=\"verdict {}\" id=\"score\">{}</div><div><div class=\"facts\">\
         <span>mutation score over <b>{}</b> in <b>{}</b></span>{}{}</div>\
         <div class=\"stats\">{}{}{}{}{}{}</div></div></div>",
        doc.assay
            .as_ref()
            .and_then(|a| a.tree.as_deref())
            .map_or(String::new(), |t| format!(
                " of tree <span class=\"mono\">{}</span>",
                esc(&t.chars().take(10).collect::<String>())
            )),
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
    if let Some(note) = doc.assay.as_ref().and_then(|a| a.selection_note.as_deref()) {
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

fn file_section(path: &str, file: &File) -> String {
    let t = Tally::of(&file.mutants);
    let mut by_line: BTreeMap<usize, Vec<&Mutant>> = BTreeMap::new();
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
            .and_then(|ms| ms.iter().max_by_key(|m| severity(&m.status)))
            .map_or("", |m| status_tone(&m.status));
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

fn mutant_details(source: &str, m: &Mutant) -> String {
    let label = status_label(&m.status);
    // A survivor is what to read first: it opens with its diff.
    let open = if m.status == "Survived" { " open" } else { "" };
    let mut out = format!(
        "<details class=\"mutant\" data-status=\"{}\"{open}><summary>{} <span class=\"note\">{}</span> {} \
         <span class=\"note mono\">{}</span></summary>",
        esc(&m.status),
        badge(label),
        esc(&m.mutator_name),
        ticks(m.description.as_deref().unwrap_or("")),
        esc(&m.id)
    );
    let range = (
        offset_of(source, m.location.start.line, m.location.start.column),
        offset_of(source, m.location.end.line, m.location.end.column),
    );
    if let (Some(start), Some(end), Some(replacement)) = (range.0, range.1, &m.replacement)
        && let Some(lines) = edit_diff(source, start, end, replacement, 2)
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

    fn doc() -> Doc {
        serde_json::from_value(serde_json::json!({
            "schemaVersion": "1",
            "files": {"pager.py": {
                "language": "python",
                "source": "def f(t, s):\n    if t % s > 0:\n        return 1\n    return 0\n",
                "mutants": [
                    {"id": "a1", "mutatorName": "swap_bound", "replacement": ">=",
                     "description": "`>` -> `>=`",
                     "location": {"start": {"line": 2, "column": 14}, "end": {"line": 2, "column": 15}},
                     "status": "Survived", "killedBy": [], "coveredBy": ["tests/t.py::test_<b>"]},
                    {"id": "b2", "mutatorName": "return_constant", "replacement": "None",
                     "description": "`return None`",
                     "location": {"start": {"line": 3, "column": 16}, "end": {"line": 3, "column": 17}},
                     "status": "Killed", "killedBy": ["test_one"], "coveredBy": []},
                    {"id": "c3", "mutatorName": "negate_condition", "replacement": "not (t % s > 0)",
                     "location": {"start": {"line": 2, "column": 8}, "end": {"line": 2, "column": 17}},
                     "status": "NoCoverage"}
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
