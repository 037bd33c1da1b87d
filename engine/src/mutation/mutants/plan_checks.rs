//! What the language planners' tests take of a plan alike: a file changed on every line, the
//! plan's mutants in a line each, and a mutant's file that must keep every line number.

use super::{ChangedFile, Mutant, MutationPlan, apply_edit};

/// `source` at `path`, every line of it changed.
pub(super) fn all_lines(path: &str, source: &str) -> ChangedFile {
    let lines = source.lines().count() as u32;
    ChangedFile {
        path: path.into(),
        bytes: source.as_bytes().to_vec(),
        changed_lines: (1..=lines).collect(),
    }
}

/// The plan's mutants as `line:operator description`, in plan order.
pub(super) fn descriptions(plan: &MutationPlan) -> Vec<String> {
    plan.mutants
        .iter()
        .map(|m| format!("{}:{} {}", m.line, m.operator, m.description))
        .collect()
}

/// `source` with `mutant` applied: the edit fits and the file stays UTF-8.
pub(super) fn applied(source: &str, mutant: &Mutant) -> String {
    let bytes = apply_edit(source.as_bytes(), &mutant.edit).expect("the edit fits");
    String::from_utf8(bytes).expect("UTF-8")
}

/// `source` with `mutant` applied ([`applied`]), with as many lines as before.
pub(super) fn applied_keeping_every_line(source: &str, mutant: &Mutant) -> String {
    let text = applied(source, mutant);
    assert_eq!(
        text.matches('\n').count(),
        source.matches('\n').count(),
        "{}",
        mutant.label()
    );
    text
}
