//! A changed JavaScript file's text as a coverage tool that counts offsets (V8) locates it:
//! the file's length and, for each changed line that holds code, where its code starts and
//! ends, in UTF-16 code units (V8's offsets count them). Found where the repository is, from
//! the candidate's blob, and carried to where the run is judged (a fleet's coordinator has no
//! repository), so the judge never takes the guest's word for what a file says.

use crate::tree_path::TreePath;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// One changed line's code: offsets `start..end` (UTF-16 code units from the file's start,
/// after a leading byte order mark, which node strips), leading and trailing blanks excluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeLine {
    /// The line (1-based, candidate side).
    pub line: u32,
    /// The offset of its first character of code.
    pub start: u32,
    /// The offset just past its last character of code.
    pub end: u32,
}

/// A changed product file's length and its changed lines that hold code; a changed line that is
/// blank or only comment is not among them (nothing a test could execute).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedSource {
    /// The changed file, relative to the tree root.
    pub path: TreePath,
    /// Its length in UTF-16 code units: no range a run measured of it may end past it.
    pub length: u32,
    /// Its changed lines that hold code, in line order.
    pub lines: Vec<CodeLine>,
}

/// Where a lexer is, between characters: comments are not code, string and template contents
/// are (they are part of an expression).
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Code,
    LineComment,
    BlockComment,
    Quoted(char),
}

/// The code of each of `changed`'s lines of `text`, the JavaScript file at `path`. Comments
/// (`//`, `/* */`, also across lines) and blanks are not code; regular expression literals are
/// not recognized, so a `/*` inside one is read as a comment's start.
pub fn changed_source(path: TreePath, text: &str, changed: &BTreeSet<u32>) -> ChangedSource {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = Vec::new();
    let mut state = State::Code;
    let mut offset: u32 = 0;
    let mut line: u32 = 1;
    // The current line's first and last code characters' offsets.
    let mut code: Option<(u32, u32)> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let next = chars.peek().copied();
        // The characters read as one: an escape and what it escapes, a comment's delimiter.
        let mut width = c.len_utf16() as u32;
        let mut take_next = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| {
            if let Some(taken) = chars.next() {
                width += taken.len_utf16() as u32;
            }
        };
        let mut is_code = false;
        match state {
            State::Code => match (c, next) {
                ('/', Some('/')) => state = State::LineComment,
                ('/', Some('*')) => {
                    state = State::BlockComment;
                    take_next(&mut chars);
                }
                ('\'' | '"' | '`', _) => {
                    state = State::Quoted(c);
                    is_code = true;
                }
                _ => is_code = !c.is_whitespace(),
            },
            State::LineComment => {}
            State::BlockComment => {
                if c == '*' && next == Some('/') {
                    state = State::Code;
                    take_next(&mut chars);
                }
            }
            State::Quoted(quote) => {
                is_code = !c.is_whitespace();
                if c == '\\' && next.is_some_and(|n| n != '\n') {
                    is_code = true;
                    take_next(&mut chars);
                } else if c == quote || (c == '\n' && quote != '`') {
                    state = State::Code;
                }
            }
        }
        if c == '\n' {
            if let Some((start, end)) = code.take()
                && changed.contains(&line)
            {
                lines.push(CodeLine { line, start, end });
            }
            if state == State::LineComment {
                state = State::Code;
            }
            line = line.saturating_add(1);
        } else if is_code {
            let end = offset.saturating_add(width);
            code = Some(code.map_or((offset, end), |(start, _)| (start, end)));
        }
        offset = offset.saturating_add(width);
    }
    if let Some((start, end)) = code
        && changed.contains(&line)
    {
        lines.push(CodeLine { line, start, end });
    }
    ChangedSource {
        path,
        length: offset,
        lines,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(text: &str, changed: &[u32]) -> Vec<(u32, u32, u32)> {
        let source = changed_source(
            TreePath::new("pager.js").expect("a tree path"),
            text,
            &changed.iter().copied().collect(),
        );
        source
            .lines
            .iter()
            .map(|l| (l.line, l.start, l.end))
            .collect()
    }

    #[test]
    fn a_changed_lines_code_is_located_in_utf16_units_and_comments_are_not_code() {
        let text = "// pager\nfunction f(a) {\n  /* a\n     comment */ return a; // why\n\n  const s = \"//é\";\n}\n";
        // Line 2 starts at 9; line 4's code starts after the comment that ends on it.
        assert_eq!(
            lines_of(text, &[1, 2, 3, 4, 5, 6, 7]),
            vec![(2, 9, 24), (4, 48, 57), (6, 68, 84), (7, 85, 86)]
        );
        let source = changed_source(TreePath::new("p.js").unwrap(), text, &BTreeSet::new());
        assert_eq!(source.length, text.encode_utf16().count() as u32);
    }

    #[test]
    fn a_byte_order_mark_and_astral_characters_count_as_v8_counts_them() {
        // node strips the mark; an astral character is two UTF-16 code units.
        let text = "\u{feff}const a = '😀';\nrun();\n";
        assert_eq!(lines_of(text, &[1, 2]), vec![(1, 0, 15), (2, 16, 22)]);
    }

    #[test]
    fn a_template_literal_across_lines_is_code_and_a_comment_inside_a_string_is_not_a_comment() {
        let text = "const t = `a\n\n  b`;\nconst u = '/*';\nx();\n";
        let lines: Vec<u32> = lines_of(text, &[1, 2, 3, 4, 5])
            .into_iter()
            .map(|(line, _, _)| line)
            .collect();
        assert_eq!(lines, vec![1, 3, 4, 5]);
    }
}
