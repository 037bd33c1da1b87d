//! A mutant as a unified diff against the file it mutates, for people and for `git apply`.
//! A mutant keeps every line number, so one hunk covers it: the lines its byte range touches,
//! before and after, with up to three lines of context.

use assay_common::job::ByteEdit;
use std::fmt::Write as _;

const CONTEXT: usize = 3;

/// The unified diff of `edit` applied to `original`; `None` when the range is outside it.
pub fn unified_diff(original: &[u8], edit: &ByteEdit) -> Option<String> {
    if edit.start > edit.end || edit.end > original.len() {
        return None;
    }
    let mut mutated = original.to_vec();
    mutated.splice(edit.start..edit.end, edit.replacement.bytes());
    let before = lines(original);
    let after = lines(&mutated);
    if before.len() != after.len() {
        return None;
    }
    let first = line_of(original, edit.start);
    // The last line the range touches (an empty range touches the line it sits on).
    let last = line_of(original, edit.end.max(edit.start + 1) - 1).max(first);
    let from = first.saturating_sub(CONTEXT);
    let to = (last + CONTEXT).min(before.len() - 1);
    let count = to - from + 1;
    let mut out = String::new();
    let _ = writeln!(out, "--- a/{}", edit.path);
    let _ = writeln!(out, "+++ b/{}", edit.path);
    let _ = writeln!(out, "@@ -{0},{count} +{0},{count} @@", from + 1);
    let mut push = |mark: char, line: &[u8]| {
        out.push(mark);
        out.push_str(&String::from_utf8_lossy(line));
        if !line.ends_with(b"\n") {
            out.push_str("\n\\ No newline at end of file\n");
        }
    };
    for line in &before[from..first] {
        push(' ', line);
    }
    for line in &before[first..=last] {
        push('-', line);
    }
    for line in &after[first..=last] {
        push('+', line);
    }
    for line in &before[last + 1..=to] {
        push(' ', line);
    }
    Some(out)
}

/// Lines with their terminators; a file's last line may have none.
fn lines(bytes: &[u8]) -> Vec<&[u8]> {
    let mut lines: Vec<&[u8]> = bytes.split_inclusive(|b| *b == b'\n').collect();
    if lines.is_empty() {
        lines.push(b"");
    }
    lines
}

/// 0-based line of a byte offset.
fn line_of(bytes: &[u8], offset: usize) -> usize {
    bytes[..offset.min(bytes.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGER: &str = "def page_count(total, size):\n    pages = total // size\n    if total % size > 0:\n        pages += 1\n    return pages\n\n\ndef clamp(page, last):\n    if page > last:\n        return last\n    return page\n";

    fn edit(text: &str, at: &str, replacement: &str) -> ByteEdit {
        let start = text.find(at).expect("site in the source");
        ByteEdit {
            path: assay_common::tree_path::TreePath::new("pager/__init__.py").unwrap(),
            start,
            end: start + at.len(),
            replacement: replacement.into(),
        }
    }

    #[test]
    fn a_one_line_mutant_is_one_hunk_with_three_lines_of_context() {
        let diff = unified_diff(PAGER.as_bytes(), &edit(PAGER, "> 0", ">= 0")).unwrap();
        assert_eq!(
            diff,
            "--- a/pager/__init__.py\n+++ b/pager/__init__.py\n@@ -1,6 +1,6 @@\n def page_count(total, size):\n     pages = total // size\n-    if total % size > 0:\n+    if total % size >= 0:\n         pages += 1\n     return pages\n \n"
        );
    }

    #[test]
    fn a_dropped_body_spanning_lines_keeps_the_line_count() {
        let body =
            "pages = total // size\n    if total % size > 0:\n        pages += 1\n    return pages";
        let diff = unified_diff(PAGER.as_bytes(), &edit(PAGER, body, "pass\n\n\n")).unwrap();
        let removed = diff
            .lines()
            .filter(|l| l.starts_with('-') && !l.starts_with("---"));
        let added = diff
            .lines()
            .filter(|l| l.starts_with('+') && !l.starts_with("+++"));
        assert_eq!(removed.count(), 4);
        assert_eq!(added.count(), 4);
        assert!(diff.contains("@@ -1,8 +1,8 @@"), "{diff}");
        assert!(diff.contains("\n+    pass\n"), "{diff}");
    }

    #[test]
    fn the_last_line_without_a_newline_is_marked() {
        let text = "def clamp(page, last):\n    return page > last";
        let diff = unified_diff(text.as_bytes(), &edit(text, ">", ">=")).unwrap();
        assert!(
            diff.ends_with(
                "-    return page > last\n\\ No newline at end of file\n+    return page >= last\n\\ No newline at end of file\n"
            ),
            "{diff}"
        );
    }

    #[test]
    fn an_edit_outside_the_file_has_no_diff() {
        let mut outside = edit(PAGER, "> 0", ">= 0");
        outside.end = PAGER.len() + 1;
        assert_eq!(unified_diff(PAGER.as_bytes(), &outside), None);
    }
}
