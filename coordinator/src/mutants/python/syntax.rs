//! The Python parser behind the mutation check: tree-sitter's Python grammar, which gives the
//! byte ranges a mutant replaces, plus the few source-level rules (coding cookies) it lacks.

use tree_sitter::{Node, Parser, Tree};

/// Parses `source`; `None` only if the parser could not be set up or was cancelled.
pub(crate) fn parse(source: &str) -> Option<Tree> {
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_python::LANGUAGE.into())
        .ok()?;
    parser.parse(source, None)
}

/// `Ok` when `source` parses without error or missing nodes; otherwise the 1-based line of the
/// first problem.
pub(crate) fn parses(source: &str) -> Result<(), u32> {
    parse_clean(source).map(|_| ())
}

/// The tree of `source` when it parses cleanly; otherwise the 1-based line of the first problem.
pub(crate) fn parse_clean(source: &str) -> Result<Tree, u32> {
    let tree = parse(source).ok_or(1u32)?;
    match first_error(tree.root_node()) {
        None => Ok(tree),
        Some(node) => Err(line(node)),
    }
}

fn first_error(node: Node<'_>) -> Option<Node<'_>> {
    if node.is_error() || node.is_missing() {
        return Some(node);
    }
    if !node.has_error() {
        return None;
    }
    let mut cursor = node.walk();
    let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
    children.into_iter().find_map(first_error).or(Some(node))
}

/// 1-based line of a node's first byte.
pub(crate) fn line(node: Node<'_>) -> u32 {
    u32::try_from(node.start_position().row)
        .unwrap_or(u32::MAX - 1)
        .saturating_add(1)
}

/// 1-based line of a node's last byte.
pub(crate) fn end_line(node: Node<'_>) -> u32 {
    let end = node.end_position();
    // A node ending at column 0 ends with the newline of the line before.
    let row = if end.column == 0 && end.row > node.start_position().row {
        end.row - 1
    } else {
        end.row
    };
    u32::try_from(row).unwrap_or(u32::MAX - 1).saturating_add(1)
}

/// The encoding a PEP 263 coding cookie on the first two lines names, unless it is UTF-8.
pub(crate) fn declared_encoding(source: &str) -> Option<String> {
    for line in source.lines().take(2) {
        let trimmed = line.trim_start_matches([' ', '\t', '\x0c']);
        if !trimmed.starts_with('#') {
            continue;
        }
        let Some(at) = trimmed.find("coding") else {
            continue;
        };
        let rest = &trimmed[at + "coding".len()..];
        let Some(rest) = rest.strip_prefix([':', '=']) else {
            continue;
        };
        let name: String = rest
            .trim_start_matches([' ', '\t'])
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            .collect();
        if name.is_empty() {
            continue;
        }
        let normalized = name.to_ascii_lowercase().replace('_', "-");
        if normalized == "utf-8" || normalized == "utf8" || normalized.starts_with("utf-8-") {
            return None;
        }
        return Some(name);
    }
    None
}
