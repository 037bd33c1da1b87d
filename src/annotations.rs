//! For CI: GitHub workflow commands (`::error file=…,line=…::…`) for refuted criteria, failed
//! cases and surviving mutants, and a Markdown summary for a job's step summary. Pure
//! functions of the reports; the caller supplies the test files' text to find definitions in.

use crate::html::mutation::Tally;
use assay_common::evidence::Evidence;
use assay_common::mutation_check::MutantOutcome;
use assay_common::mutation_report::{MutationReport, Status};
use assay_common::suite::{CaseOutcome, Ending, SuiteReport};
use assay_common::verdict::Verdict;
use std::fmt::Write as _;

/// `--annotations`: which CI's annotation syntax to print.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AnnotationStyle {
    /// GitHub Actions workflow commands.
    Github,
}

/// A workflow command's message: `%`, CR and LF encoded.
fn message(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A workflow command's property value: also `:` and `,`.
fn property(text: &str) -> String {
    message(text).replace(':', "%3A").replace(',', "%2C")
}

fn command(level: &str, file: &str, line: Option<usize>, title: &str, text: &str) -> String {
    let line = line.map_or(String::new(), |n| format!(",line={n}"));
    format!(
        "::{level} file={}{line},title={}::{}\n",
        property(file),
        property(title),
        message(text)
    )
}

/// The 1-based line that defines test `name` in `source`: `def NAME(` (Python), `func NAME(`
/// (Go), or `test('NAME'` / `it("NAME"` (JavaScript). Parameters (`name[1]`) and a class or
/// describe path (`Class::name`, `Suite > name`) are ignored.
pub fn definition_line(source: &str, name: &str) -> Option<usize> {
    let base = name.split('[').next().unwrap_or(name);
    let base = base
        .rsplit("::")
        .next()
        .unwrap_or(base)
        .rsplit(" > ")
        .next()
        .unwrap_or(base)
        .rsplit('.')
        .next()
        .unwrap_or(base)
        .trim();
    if base.is_empty() {
        return None;
    }
    let patterns = [
        format!("def {base}("),
        format!("func {base}("),
        format!("test('{base}'"),
        format!("test(\"{base}\""),
        format!("it('{base}'"),
        format!("it(\"{base}\""),
    ];
    source
        .lines()
        .position(|line| {
            let line = line.trim_start();
            let line = line.strip_prefix("async ").unwrap_or(line);
            patterns.iter().any(|p| line.starts_with(p.as_str()))
        })
        .map(|i| i + 1)
}

/// Annotations for a proof: an error per refuted criterion at its test's definition (`lookup`
/// gives a candidate file's text), a warning per surviving mutant at the mutated line.
pub fn proof_annotations(evidence: &Evidence, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    for c in &evidence.criteria {
        if c.verdict != Verdict::Refuted {
            continue;
        }
        let file = c
            .candidate
            .cases
            .first()
            .or(c.base.cases.first())
            .map(|case| case.file.clone())
            .or_else(|| evidence.changed_test_files.first().cloned());
        let text = format!("{} {}: {} is refuted: {}", c.id, c.kind, c.test, c.reason);
        let title = format!("assay: {} refuted", c.id);
        match file {
            Some(file) => {
                let line = lookup(&file).and_then(|s| definition_line(&s, &c.test));
                out.push_str(&command("error", &file, line, &title, &text));
            }
            None => {
                let _ = writeln!(
                    out,
                    "::error title={}::{}",
                    property(&title),
                    message(&text)
                );
            }
        }
    }
    if let Some(check) = &evidence.mutation_check {
        for record in &check.mutants {
            if record.outcome == MutantOutcome::Survived {
                let m = &record.mutant;
                out.push_str(&command(
                    "warning",
                    m.path.as_str(),
                    Some(m.line as usize),
                    "assay: mutant survived",
                    &format!(
                        "{} survived: the proving tests ({}) still pass with this change",
                        m.label(),
                        check.proving_tests.join(", ")
                    ),
                ));
            }
        }
    }
    out
}

/// Annotations for a suite run: an error per failed or errored case that is not quarantined,
/// at its definition when its file is known.
pub fn suite_annotations(report: &SuiteReport, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    for case in &report.cases {
        if case.quarantined || !matches!(case.outcome, CaseOutcome::Failed | CaseOutcome::Error) {
            continue;
        }
        let outcome = if case.outcome == CaseOutcome::Failed {
            "failed"
        } else {
            "errored"
        };
        let text = match &case.message {
            Some(m) => format!("{} {outcome}: {m}", case.display),
            None => format!("{} {outcome}", case.display),
        };
        let title = format!("assay: test {outcome}");
        match case.display.split_once("::") {
            Some((file, name)) => {
                let line = lookup(file).and_then(|s| definition_line(&s, name));
                out.push_str(&command("error", file, line, &title, &text));
            }
            None => {
                let _ = writeln!(
                    out,
                    "::error title={}::{}",
                    property(&title),
                    message(&text)
                );
            }
        }
    }
    out
}

/// Annotations for `assay mutate`: a warning per surviving mutant at its line.
pub fn mutation_annotations(doc: &MutationReport) -> String {
    let mut out = String::new();
    for (path, file) in &doc.files {
        for m in &file.mutants {
            if m.status == Status::Survived {
                out.push_str(&command(
                    "warning",
                    path,
                    Some(m.location.start.line),
                    "assay: mutant survived",
                    &format!(
                        "mutant {} ({} {}) survived: no test failed with it in place",
                        m.id, m.mutator_name, m.description
                    ),
                ));
            }
        }
    }
    out
}

/// Text for a Markdown table cell or line: no markup, no cell breaks.
fn md(text: &str) -> String {
    // Text between backticks is a code span, where Markdown shows `&gt;` as those four
    // characters: it keeps its `<` and `>` and escapes only what ends a table cell or a line.
    text.split('`')
        .enumerate()
        .map(
            |(i, part)| match i % 2 == 1 && text.matches('`').count().is_multiple_of(2) {
                true => code(part),
                false => part
                    .replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;")
                    .replace('|', "\\|")
                    .replace(['\r', '\n'], " "),
            },
        )
        .collect::<Vec<_>>()
        .join("`")
}

/// Text for inside a code span: entities are not read there, so only a table cell's `|`, a
/// backtick and line breaks are changed.
fn code(text: &str) -> String {
    text.replace('|', "\\|")
        .replace('`', "'")
        .replace(['\r', '\n'], " ")
}

fn verdict_icon(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Proven => "✅",
        Verdict::Refuted => "❌",
        Verdict::Unverified | Verdict::Unstable => "⚠️",
    }
}

/// A proof's step summary: the verdict, a row per criterion, the mutation check.
pub fn proof_summary_md(evidence: &Evidence) -> String {
    let mut out = format!(
        "## {} Proof {}: **{}**\n\n{} runner, {} jobs, {:.1} s · base `{}` · candidate `{}`\n\n\
         | criterion | test | verdict | base | candidate | why |\n|---|---|---|---|---|---|\n",
        verdict_icon(evidence.verdict),
        md(&evidence.proof_id),
        evidence.verdict.to_string().to_uppercase(),
        md(&evidence.runner),
        evidence.jobs.len(),
        evidence.duration_s,
        md(&evidence.base.requested),
        md(&evidence.candidate.requested),
    );
    for c in &evidence.criteria {
        let _ = writeln!(
            out,
            "| {} {} | `{}` | {} {} | {} | {} | {} |",
            md(&c.id),
            c.kind,
            md(&c.test),
            verdict_icon(c.verdict),
            c.verdict,
            c.base.outcome.label(),
            c.candidate.outcome.label(),
            md(&c.reason)
        );
    }
    if let Some(check) = &evidence.mutation_check {
        let _ = write!(
            out,
            "\n**Mutation check:** {} killed, {} survived, {} not run\n",
            check.killed, check.survived, check.not_run
        );
        for survivor in &check.survivors {
            let _ = writeln!(out, "- survivor: {}", md(&survivor.message));
        }
    }
    out
}

/// A suite run's step summary: status, counts, failures, alerts.
pub fn suite_summary_md(report: &SuiteReport) -> String {
    let t = &report.totals;
    let icon = if report.status == Ending::Passed {
        "✅"
    } else {
        "❌"
    };
    let mut out = format!(
        "## {icon} Test run {}: **{}**\n\n| passed | failed | error | quarantined | skipped | not run | total |\n\
         |---|---|---|---|---|---|---|\n| {} | {} | {} | {} | {} | {} | {} |\n",
        md(&report.run_id),
        md(report.status.label()),
        t.passed,
        t.failed,
        t.error,
        t.quarantined,
        t.skipped,
        t.not_run,
        t.total
    );
    let failed: Vec<_> = report
        .cases
        .iter()
        .filter(|c| matches!(c.outcome, CaseOutcome::Failed | CaseOutcome::Error))
        .collect();
    if !failed.is_empty() {
        out.push_str("\n**Failures**\n\n");
        for case in failed {
            let _ = writeln!(
                out,
                "- `{}`{}{}",
                md(&case.display),
                if case.quarantined {
                    " (quarantined)"
                } else {
                    ""
                },
                case.message
                    .as_deref()
                    .map_or(String::new(), |m| format!(": {}", md(m)))
            );
        }
    }
    let alerts = &report.history.alerts;
    if !alerts.is_empty() {
        out.push_str("\n**Alerts**\n\n");
        for alert in alerts {
            let _ = writeln!(
                out,
                "- [{}] {}: {}",
                md(&alert.severity),
                md(&alert.kind),
                md(&alert.detail)
            );
        }
    }
    out
}

/// `assay mutate`'s step summary: the score, a row per file, the survivors.
pub fn mutation_summary_md(doc: &MutationReport) -> String {
    let all = Tally::of(doc.files.values().flat_map(|f| &f.mutants));
    let score = |t: &Tally| {
        t.score()
            .map_or("n/a".to_owned(), |s| format!("{:.1}%", s * 100.0))
    };
    let mut out = format!(
        "## Mutation score: **{}**\n\n{} killed, {} survived, {} no coverage, {} timeout\n\n\
         | file | score | killed | survived | no coverage |\n|---|---|---|---|---|\n",
        score(&all),
        all.killed,
        all.survived,
        all.no_coverage,
        all.timeout
    );
    for (path, file) in &doc.files {
        let t = Tally::of(&file.mutants);
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} |",
            code(path),
            score(&t),
            t.killed,
            t.survived,
            t.no_coverage
        );
    }
    let survivors: Vec<String> = doc
        .files
        .iter()
        .flat_map(|(path, f)| {
            f.mutants
                .iter()
                .filter(|m| m.status == Status::Survived)
                .map(move |m| {
                    format!(
                        "- `{}:{}` {} {}",
                        code(path),
                        m.location.start.line,
                        md(&m.mutator_name),
                        md(&m.description)
                    )
                })
        })
        .collect();
    if !survivors.is_empty() {
        let _ = write!(out, "\n**Survivors**\n\n{}\n", survivors.join("\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_common::runner::RunnerKind;
    use assay_common::suite::SuiteRunner;

    #[test]
    fn finds_a_definition_in_each_language() {
        let py = "import x\n\nclass T:\n    def test_total(self):\n        pass\n";
        assert_eq!(definition_line(py, "T::test_total"), Some(4));
        assert_eq!(definition_line(py, "test_total[1-2]"), Some(4));
        let go = "package p\nfunc TestSum(t *testing.T) {}\n";
        assert_eq!(definition_line(go, "TestSum"), Some(2));
        let js = "describe('x', () => {\n  test('adds up', () => {});\n});\n";
        assert_eq!(definition_line(js, "x > adds up"), Some(2));
        assert_eq!(definition_line(py, "test_missing"), None);
    }

    #[test]
    fn workflow_commands_encode_their_separators() {
        let line = command("error", "tests/a,b.py", Some(3), "t: x", "50% off\nnext");
        assert_eq!(
            line,
            "::error file=tests/a%2Cb.py,line=3,title=t%3A x::50%25 off%0Anext\n"
        );
    }

    #[test]
    fn a_suite_failure_is_annotated_at_its_definition_and_a_quarantined_one_is_not() {
        use assay_common::suite::{CaseReport, Lane, SuiteTotals};
        let case = |display: &str, outcome, quarantined| CaseReport {
            reference: "v1.0".into(),
            display: display.into(),
            outcome,
            lane: Lane::Guest,
            quarantined,
            order_dependent: false,
            message: Some("assert 1 == 2".into()),
            duration_s: None,
            job: None,
            artifacts: Vec::new(),
            cached: None,
        };
        let report = SuiteReport {
            schema: "assay.test/v1".into(),
            run_id: "t-1".into(),
            status: Ending::Failed,
            repository: "/r".into(),
            branch: "main".into(),
            revision: "0".into(),
            runner: SuiteRunner::Kind(RunnerKind::Pytest),
            started_at: "2026-11-29T23:33:49Z".into(),
            duration_s: 1.0,
            totals: SuiteTotals::default(),
            cases: vec![
                case("tests/t.py::test_tax", CaseOutcome::Failed, false),
                case("tests/t.py::test_clock", CaseOutcome::Failed, true),
                case("tests/t.py::test_total", CaseOutcome::Passed, false),
            ],
            jobs: Vec::new(),
            audit: Default::default(),
            history: Default::default(),
            stopped: None,
            cache: None,
        };
        let source = "def test_total():\n    pass\n\n\ndef test_tax():\n    assert 1 == 2\n";
        let lines = suite_annotations(&report, &|path| {
            (path == "tests/t.py").then(|| source.to_owned())
        });
        assert_eq!(
            lines,
            "::error file=tests/t.py,line=5,title=assay%3A test failed::tests/t.py::test_tax failed: assert 1 == 2\n"
        );
        let md = suite_summary_md(&report);
        assert!(
            md.contains("- `tests/t.py::test_clock` (quarantined): assert 1 == 2"),
            "{md}"
        );
    }

    #[test]
    fn markdown_cells_cannot_break_the_table_or_inject_markup() {
        assert_eq!(md("a|b <script>\nc"), "a\\|b &lt;script&gt; c");
        // A code span keeps its comparison: Markdown would show `&gt;` there as written (outside
        // one, the entity shows as `>`).
        assert_eq!(md("`>` -> `>=`"), "`>` -&gt; `>=`");
        assert_eq!(md("`a | b > c` or <b>"), "`a \\| b > c` or &lt;b&gt;");
    }
}
