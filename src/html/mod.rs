//! HTML reports: one self-contained file per proof, suite run or mutation run (inline CSS and
//! SVG, one tiny inline script, nothing fetched). Each renderer is a pure function from the
//! parsed JSON to a `String`; every string taken from a report is escaped here.

pub mod mutation;
pub mod proof;
pub mod suite;

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Which saved JSON a file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `assay.proof/v1` evidence.
    Proof,
    /// `assay.test/v1` suite report.
    Suite,
    /// Stryker's mutation-testing-report-schema (what `assay mutate --json` writes).
    Mutation,
}

/// Tells the three documents apart by their schema fields.
pub fn detect(doc: &serde_json::Value) -> Option<Kind> {
    match doc.get("schema").and_then(|s| s.as_str()) {
        Some(s) if s.starts_with("assay.proof/") => return Some(Kind::Proof),
        Some(s) if s.starts_with("assay.test/") => return Some(Kind::Suite),
        _ => {}
    }
    (doc.get("schemaVersion").is_some() && doc.get("files").is_some_and(|f| f.is_object()))
        .then_some(Kind::Mutation)
}

/// Stored artifacts the renderer may show, by store key; a key that is absent was not
/// readable, and the report then names it with its sha256.
pub type Artifacts = BTreeMap<String, Vec<u8>>;

/// How much of one log a report shows.
pub const LOG_CAP_BYTES: usize = 16 * 1024;

/// Escapes text for HTML element content and quoted attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Escaped text whose `backticked` spans become `<code>`, as mutant descriptions are written.
pub fn ticks(text: &str) -> String {
    let parts: Vec<&str> = text.split('`').collect();
    if parts.len().is_multiple_of(2) {
        // An unpaired backtick: leave the text as it is.
        return esc(text);
    }
    parts
        .iter()
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 {
                format!("<code>{}</code>", esc(part))
            } else {
                esc(part)
            }
        })
        .collect()
}

/// The colour family of a status word, for badges and marks.
pub fn tone(status: &str) -> &'static str {
    match status.to_ascii_lowercase().as_str() {
        "proven" | "passed" | "killed" | "completed" | "passing" => "good",
        "refuted"
        | "failed"
        | "survived"
        | "error"
        | "failing"
        | "infrastructure"
        | "collection_error"
        | "runtimeerror"
        | "infrastructure_aborted" => "bad",
        "nocoverage" | "no coverage" | "unstable" | "timeout" | "timed_out" | "quarantined" => {
            "warn"
        }
        _ => "muted",
    }
}

/// A small coloured label.
pub fn badge(status: &str) -> String {
    format!(
        "<span class=\"badge {}\">{}</span>",
        tone(status),
        esc(status)
    )
}

/// `1 test`, `2 tests`.
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

const STYLE: &str = r#"
:root{--good:#1a7f37;--good-bg:#dafbe1;--bad:#cf222e;--bad-bg:#ffebe9;--warn:#9a6700;--warn-bg:#fff8c5;--muted:#57606a;--muted-bg:#eaeef2;--line:#d0d7de;--ink:#1f2328}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink);background:#f6f8fa}
main{max-width:1280px;margin:0 auto;padding:20px 28px 48px}
h1{font-size:15px;font-weight:600;color:var(--muted);margin:0 0 6px}
h2{font-size:17px;margin:28px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:14px;margin:16px 0 6px}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
pre{background:#fff;border:1px solid var(--line);border-radius:6px;padding:8px 10px;overflow:auto;max-height:360px;margin:6px 0;white-space:pre-wrap;word-break:break-all}
.hero{display:flex;align-items:center;gap:22px;flex-wrap:wrap;background:#fff;border:1px solid var(--line);border-radius:10px;padding:16px 22px}
.verdict{font-size:40px;font-weight:800;letter-spacing:.02em;padding:4px 20px;border-radius:8px}
.verdict.good{color:#fff;background:var(--good)}.verdict.bad{color:#fff;background:var(--bad)}
.verdict.warn{color:#fff;background:var(--warn)}.verdict.muted{color:#fff;background:var(--muted)}
.facts{display:flex;gap:18px;flex-wrap:wrap;color:var(--muted)}
.facts b{color:var(--ink);font-weight:600}
.stats{display:flex;gap:10px;flex-wrap:wrap;margin-top:12px}
.stat{background:#fff;border:1px solid var(--line);border-radius:8px;padding:6px 14px;min-width:96px}
.stat .n{font-size:22px;font-weight:700}.stat .l{color:var(--muted);font-size:12px}
.stat.good .n{color:var(--good)}.stat.bad .n{color:var(--bad)}.stat.warn .n{color:var(--warn)}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid var(--line);border-radius:6px}
th,td{text-align:left;padding:6px 10px;border-bottom:1px solid var(--line);vertical-align:top}
th{background:#f6f8fa;font-weight:600;font-size:12.5px;color:var(--muted)}
.badge{display:inline-block;padding:1px 8px;border-radius:999px;font-size:12px;font-weight:600;white-space:nowrap}
.badge.good{color:var(--good);background:var(--good-bg)}.badge.bad{color:var(--bad);background:var(--bad-bg)}
.badge.warn{color:var(--warn);background:var(--warn-bg)}.badge.muted{color:var(--muted);background:var(--muted-bg)}
.runs{display:inline-flex;gap:3px;margin-left:6px;vertical-align:middle}
.dot{width:10px;height:10px;border-radius:50%;display:inline-block}
.dot.good{background:var(--good)}.dot.bad{background:var(--bad)}.dot.warn{background:var(--warn)}.dot.muted{background:#8c959f}
.reason{color:var(--muted);font-size:13px}
details{background:#fff;border:1px solid var(--line);border-radius:6px;margin:6px 0;padding:4px 10px}
details>summary{cursor:pointer;padding:2px 0}
.note{color:var(--muted);font-size:12.5px}
.bar{display:inline-block;height:8px;border-radius:4px;background:var(--muted-bg);width:120px;vertical-align:middle;overflow:hidden}
.bar>i{display:block;height:100%}
.src{background:#fff;border:1px solid var(--line);border-radius:6px;overflow:auto}
.src .ln{display:flex;white-space:pre}
.src .no{color:#8c959f;min-width:44px;text-align:right;padding-right:10px;user-select:none}
.src .ln.good{background:var(--good-bg)}.src .ln.bad{background:var(--bad-bg)}.src .ln.warn{background:var(--warn-bg)}
.src .marks{padding:0 0 4px 54px}
.src details{margin:2px 0;padding:1px 8px;font-family:system-ui,sans-serif;white-space:normal}
.src details code{background:var(--muted-bg);padding:0 3px;border-radius:3px}
.diff .del{background:var(--bad-bg);color:#82071e}.diff .add{background:var(--good-bg);color:#116329}
svg text{font:11px system-ui,sans-serif;fill:var(--ink)}
.legend{display:flex;gap:14px;color:var(--muted);font-size:12px;margin:4px 0}
.legend i{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;vertical-align:middle}
"#;

/// A whole document around `body`. The one script only records script errors on the root
/// element (`data-script-error`), where a headless browser's DOM dump shows them.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{}</title><style>{STYLE}</style>\
         <script>window.onerror=function(m){{document.documentElement.setAttribute('data-script-error',String(m));}};</script>\
         </head><body><main>\n{body}\n</main></body></html>\n",
        esc(title)
    )
}

/// A count box for the hero's stats row.
pub fn stat(n: impl std::fmt::Display, label: &str, tone: &str) -> String {
    format!(
        "<div class=\"stat {tone}\"><div class=\"n\">{n}</div><div class=\"l\">{}</div></div>",
        esc(label)
    )
}

/// A log or report artifact: its text (capped) when readable, else its key and sha256.
pub fn artifact_block(
    name: &str,
    key: &str,
    sha256: &str,
    bytes: u64,
    artifacts: &Artifacts,
) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<div class=\"note\"><b>{}</b> · {bytes} bytes · sha256 <span class=\"mono\">{}</span></div>",
        esc(name),
        esc(sha256)
    );
    match artifacts.get(key) {
        Some(content) if content.is_empty() => out.push_str("<div class=\"note\">(empty)</div>"),
        Some(content) => {
            let shown = &content[..content.len().min(LOG_CAP_BYTES)];
            let _ = write!(out, "<pre>{}</pre>", esc(&String::from_utf8_lossy(shown)));
            if content.len() > LOG_CAP_BYTES {
                let _ = write!(
                    out,
                    "<div class=\"note\">first {LOG_CAP_BYTES} of {} bytes shown</div>",
                    content.len()
                );
            }
        }
        None => {
            let _ = write!(
                out,
                "<div class=\"note\">not readable here; store key <span class=\"mono\">{}</span></div>",
                esc(key)
            );
        }
    }
    out
}

/// One line of a mutant's diff: `' '` context, `'-'` removed, `'+'` added, with its line number.
#[derive(Debug, PartialEq)]
pub struct DiffLine {
    pub sign: char,
    pub number: usize,
    pub text: String,
}

/// The lines a byte-range replacement changes, with up to `context` lines around them; `None`
/// when the range is not inside `source` on character boundaries.
pub fn edit_diff(
    source: &str,
    start: usize,
    end: usize,
    replacement: &str,
    context: usize,
) -> Option<Vec<DiffLine>> {
    if start > end
        || end > source.len()
        || !source.is_char_boundary(start)
        || !source.is_char_boundary(end)
    {
        return None;
    }
    let line_start = source[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = source[end..].find('\n').map_or(source.len(), |i| end + i);
    let first = source[..line_start].matches('\n').count() + 1;
    let before = &source[line_start..line_end];
    let after = format!(
        "{}{replacement}{}",
        &source[line_start..start],
        &source[end..line_end]
    );
    let lines: Vec<&str> = source.split('\n').collect();
    let old_count = before.split('\n').count();
    let mut out = Vec::new();
    for n in first.saturating_sub(context).max(1)..first {
        out.push(DiffLine {
            sign: ' ',
            number: n,
            text: lines[n - 1].to_owned(),
        });
    }
    for (i, text) in before.split('\n').enumerate() {
        out.push(DiffLine {
            sign: '-',
            number: first + i,
            text: text.to_owned(),
        });
    }
    for (i, text) in after.split('\n').enumerate() {
        out.push(DiffLine {
            sign: '+',
            number: first + i,
            text: text.to_owned(),
        });
    }
    let last = first + old_count - 1;
    for n in last + 1..=(last + context).min(lines.len()) {
        if n == lines.len() && lines[n - 1].is_empty() {
            break;
        }
        out.push(DiffLine {
            sign: ' ',
            number: n,
            text: lines[n - 1].to_owned(),
        });
    }
    Some(out)
}

/// A diff as a `<pre>` with removed and added lines marked.
pub fn diff_block(lines: &[DiffLine]) -> String {
    let mut out = String::from("<pre class=\"diff\">");
    for line in lines {
        let class = match line.sign {
            '-' => " class=\"del\"",
            '+' => " class=\"add\"",
            _ => "",
        };
        let _ = writeln!(
            out,
            "<span{class}>{:>4} {} {}</span>",
            line.number,
            line.sign,
            esc(&line.text)
        );
    }
    out.push_str("</pre>");
    out
}

/// A byte offset in `source` from a 1-based line and 1-based column counted in characters.
pub fn offset_of(source: &str, line: usize, column: usize) -> Option<usize> {
    let mut start = 0;
    for _ in 1..line {
        start += source[start..].find('\n')? + 1;
    }
    let rest = &source[start..];
    let mut chars = rest.char_indices();
    for _ in 1..column {
        chars.next()?;
    }
    Some(start + chars.next().map_or(rest.len(), |(i, _)| i))
}

/// Seconds in a short human form: `850 ms`, `2.4 s`, `3 min 5 s`.
pub fn seconds(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1000.0)
    } else if s < 120.0 {
        format!("{s:.1} s")
    } else {
        format!("{} min {} s", (s / 60.0) as u64, (s % 60.0) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"y\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;y&quot;"
        );
    }

    #[test]
    fn backticked_spans_become_code_and_stay_escaped() {
        assert_eq!(
            ticks("`>` -> `>=`"),
            "<code>&gt;</code> -&gt; <code>&gt;=</code>"
        );
        assert_eq!(ticks("a `b"), "a `b");
    }

    #[test]
    fn detects_each_document() {
        let proof = serde_json::json!({"schema": "assay.proof/v1"});
        let suite = serde_json::json!({"schema": "assay.test/v1"});
        let mutation = serde_json::json!({"schemaVersion": "1", "files": {}});
        assert_eq!(detect(&proof), Some(Kind::Proof));
        assert_eq!(detect(&suite), Some(Kind::Suite));
        assert_eq!(detect(&mutation), Some(Kind::Mutation));
        assert_eq!(detect(&serde_json::json!({"schema": "other"})), None);
    }

    #[test]
    fn an_edit_diff_shows_the_changed_line_in_context() {
        let source = "def f(a):\n    if a > 0:\n        return 1\n    return 0\n";
        let start = source.find('>').unwrap();
        let diff = edit_diff(source, start, start + 1, ">=", 1).unwrap();
        let text: Vec<String> = diff
            .iter()
            .map(|l| format!("{}{} {}", l.sign, l.number, l.text))
            .collect();
        assert_eq!(
            text,
            [
                " 1 def f(a):",
                "-2     if a > 0:",
                "+2     if a >= 0:",
                " 3         return 1"
            ]
        );
        assert!(edit_diff(source, 10, 500, "x", 1).is_none());
    }

    #[test]
    fn offsets_count_columns_in_characters() {
        let source = "é = 1\nif x > 0:\n";
        assert_eq!(offset_of(source, 2, 6), Some(source.find('>').unwrap()));
        assert_eq!(offset_of(source, 1, 3), Some(3));
        assert_eq!(offset_of(source, 9, 1), None);
    }

    #[test]
    fn an_unreadable_artifact_is_named_by_key_and_sha256() {
        let mut artifacts = Artifacts::new();
        artifacts.insert("k/stdout".into(), b"<b>hi</b>".to_vec());
        let shown = artifact_block("stdout", "k/stdout", "ab12", 9, &artifacts);
        assert!(shown.contains("&lt;b&gt;hi&lt;/b&gt;"), "{shown}");
        let missing = artifact_block("stderr", "k/stderr", "cd34", 3, &artifacts);
        assert!(missing.contains("not readable") && missing.contains("k/stderr"));
        assert!(missing.contains("cd34"));
    }
}
