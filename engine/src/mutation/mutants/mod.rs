//! Choosing mutants for the mutation check: which files of a change may be mutated, which sites
//! on their changed lines, and which at most N of those become mutants. Pure (no I/O) so the
//! choice is exhaustively testable and the same change always yields byte-identical mutants.
//! The budget and outcome rules that judge the mutants once they ran live in [`budget`].

pub mod budget;
pub mod diff;
pub mod go;
pub mod javascript;
pub mod judge;
pub(crate) mod language;
pub(crate) mod languages;
pub(crate) mod python;
pub mod rerun;
pub mod rust;
pub mod scope;
mod sites;
pub mod switch;
mod syntax;

use assay_common::job::ByteEdit;
use assay_common::tree_path::TreePath;
use language::Language;
use sha2::{Digest, Sha256};
use std::collections::{BTreeSet, VecDeque};

pub use assay_common::mutation_plan::{
    ExcludedFile, ExclusionReason, Mutant, MutationPlan, MutationSetup, Operator, SkippedSite,
};
pub use budget::{
    DEFAULT_MUTATION_BUDGET, MIN_TIME_TO_START, MUTANT_TIMEOUT_FACTOR, MUTANT_TIMEOUT_FLOOR,
    MUTATE_TIMEOUT_FACTOR, MUTATE_TIMEOUT_SLACK, MutantOutcome, MutantRecord, MutationCheck,
    NotRunReason, Survivor, mutant_timeout, mutate_timeout, survivors,
};

/// The seed's per-file limit; `assay mutate` passes `None` to mutate every site.
pub const DEFAULT_MUTANTS_PER_FILE: usize = 6;

/// One product file the change touches, as it is on the candidate side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangedFile {
    /// Relative, `/`-separated.
    pub path: String,
    /// The file's contents on the candidate.
    pub bytes: Vec<u8>,
    /// 1-based line numbers on the candidate side that the change adds or modifies.
    pub changed_lines: BTreeSet<u32>,
}

/// Which operators a plan uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OperatorSet {
    /// The five of SPEC §3: the proof's check, and `assay mutate` unless told otherwise.
    #[default]
    Default,
    /// The five and ten more ([`Operator::EXTENDED`]): `assay mutate --operators extended`.
    Extended,
}

impl std::str::FromStr for OperatorSet {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "default" => Ok(Self::Default),
            "extended" => Ok(Self::Extended),
            other => Err(format!(
                "unknown operator set {other:?} (expected \"default\" or \"extended\")"
            )),
        }
    }
}

/// Chooses at most `cap` mutants per Python file (`None`: every valid site) on the changed
/// lines of `files`, with the default operators. Deterministic: files are taken in path order
/// whatever order they come in.
pub fn plan_mutants(files: &[ChangedFile], cap: Option<usize>) -> MutationPlan {
    plan_mutants_with(files, cap, OperatorSet::Default)
}

/// [`plan_mutants`] with the given operators.
pub fn plan_mutants_with(
    files: &[ChangedFile],
    cap: Option<usize>,
    operators: OperatorSet,
) -> MutationPlan {
    plan_mutants_in(languages::DEFAULT, files, cap, operators)
}

/// [`plan_mutants_with`] for the files of `language`; every other file is excluded.
pub(crate) fn plan_mutants_in(
    language: &dyn Language,
    files: &[ChangedFile],
    cap: Option<usize>,
    operators: OperatorSet,
) -> MutationPlan {
    let mut ordered: Vec<&ChangedFile> = files.iter().collect();
    ordered.sort_by(|a, b| a.path.cmp(&b.path));
    ordered.dedup_by(|a, b| a.path == b.path);

    let mut plan = MutationPlan::default();
    for file in ordered {
        match exclusion(language, file) {
            Some((reason, note)) => plan.excluded_files.push(ExcludedFile {
                path: file.path.clone(),
                reason,
                note,
            }),
            None => plan_file(language, file, cap, operators, &mut plan),
        }
    }
    plan
}

fn plan_file(
    language: &dyn Language,
    file: &ChangedFile,
    cap: Option<usize>,
    operators: OperatorSet,
    plan: &mut MutationPlan,
) {
    let Ok(source) = std::str::from_utf8(&file.bytes) else {
        return;
    };
    // `exclusion` refused a path no job can name.
    let Ok(path) = TreePath::new(&file.path) else {
        return;
    };
    let candidates = language.sites(&file.path, source, &file.changed_lines, operators);

    // One queue per operator; within one, distinct lines come before a second site on a line.
    let mut queues: Vec<VecDeque<sites::Candidate>> = language
        .operators(operators)
        .iter()
        .map(|op| {
            let mut of_op: Vec<sites::Candidate> = candidates
                .iter()
                .filter(|c| c.operator == *op)
                .cloned()
                .collect();
            of_op.sort_by_key(|c| (c.rank, c.line, c.start));
            let mut seen_on_line: std::collections::BTreeMap<(u8, u32), usize> = Default::default();
            let mut keyed: Vec<(usize, sites::Candidate)> = of_op
                .into_iter()
                .map(|c| {
                    let n = seen_on_line.entry((c.rank, c.line)).or_default();
                    *n += 1;
                    (*n, c)
                })
                .collect();
            keyed.sort_by_key(|(n, c)| (c.rank, *n, c.line, c.start));
            keyed.into_iter().map(|(_, c)| c).collect()
        })
        .collect();

    let limit = cap.unwrap_or(usize::MAX);
    let mut file_parser = syntax::Reparser::new(source);
    let mut chosen: Vec<Mutant> = Vec::new();
    let mut ids = BTreeSet::new();
    // Two operators can make the same edit (`return 0` -> `return 1` is also a number
    // mutant): the first keeps it.
    let mut edits = BTreeSet::new();
    let mut lines = BTreeSet::new();
    'rounds: while chosen.len() < limit && queues.iter().any(|q| !q.is_empty()) {
        for queue in queues.iter_mut() {
            if chosen.len() >= limit {
                break 'rounds;
            }
            // A failing site gives its place to the next one of the same operator; a site on a
            // line no mutant uses yet goes before one on a line already taken.
            loop {
                let fresh = queue.iter().position(|c| !lines.contains(&c.line));
                let Some(candidate) = queue.remove(fresh.unwrap_or(0)) else {
                    break;
                };
                let edit = (
                    candidate.start,
                    candidate.end,
                    candidate.replacement.clone(),
                );
                if edits.contains(&edit) {
                    continue;
                }
                match sites::check(source, &mut file_parser, &candidate) {
                    Ok(()) => {
                        edits.insert(edit);
                        let mutant = to_mutant(&path, &candidate);
                        if ids.insert(mutant.id.clone()) {
                            lines.insert(mutant.line);
                            chosen.push(mutant);
                            break;
                        }
                    }
                    Err(reason) => plan.skipped.push(SkippedSite {
                        path: file.path.clone(),
                        line: candidate.line,
                        operator: candidate.operator,
                        description: candidate.description.clone(),
                        reason: reason.to_string(),
                    }),
                }
            }
        }
    }
    chosen.sort_by(|a, b| {
        (a.line, a.edit.start, a.operator).cmp(&(b.line, b.edit.start, b.operator))
    });
    plan.mutants.extend(chosen);
}

fn to_mutant(path: &TreePath, candidate: &sites::Candidate) -> Mutant {
    let mut hasher = Sha256::new();
    hasher.update(path.as_str().as_bytes());
    hasher.update([0]);
    hasher.update(candidate.operator.name().as_bytes());
    hasher.update([0]);
    hasher.update(candidate.start.to_string().as_bytes());
    hasher.update([0]);
    hasher.update(candidate.end.to_string().as_bytes());
    hasher.update([0]);
    hasher.update(candidate.replacement.as_bytes());
    let digest = hex::encode(hasher.finalize());
    Mutant {
        id: digest[..12].to_string(),
        path: path.clone(),
        line: candidate.line,
        operator: candidate.operator,
        description: candidate.description.clone(),
        edit: ByteEdit {
            path: path.clone(),
            start: candidate.start,
            end: candidate.end,
            replacement: candidate.replacement.clone(),
        },
    }
}

/// Applies one edit to a file's bytes; `None` when the range does not fit the file.
pub fn apply_edit(bytes: &[u8], edit: &ByteEdit) -> Option<Vec<u8>> {
    if edit.start > edit.end || edit.end > bytes.len() {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() + edit.replacement.len());
    out.extend_from_slice(&bytes[..edit.start]);
    out.extend_from_slice(edit.replacement.as_bytes());
    out.extend_from_slice(&bytes[edit.end..]);
    Some(out)
}

/// Why `file` is never mutated by `language`, if it is not.
fn exclusion(language: &dyn Language, file: &ChangedFile) -> Option<(ExclusionReason, String)> {
    let path = file.path.as_str();
    if let Err(e) = TreePath::new(path) {
        return Some((ExclusionReason::PathNotConfined, e.to_string()));
    }
    if !language.owns(path) {
        return Some((
            ExclusionReason::NotPython,
            format!("not a {} source file", language.name()),
        ));
    }
    language.exclusion(path, &file.bytes)
}

/// The source as text, or the exclusion of a file that is not UTF-8.
pub(crate) fn not_utf8(bytes: &[u8]) -> Result<&str, (ExclusionReason, String)> {
    std::str::from_utf8(bytes).map_err(|e| {
        let line = line_of(bytes, e.valid_up_to());
        (
            ExclusionReason::NotUtf8,
            format!("not UTF-8 (first invalid byte on line {line})"),
        )
    })
}

/// The exclusion of a file with a carriage return that no line feed follows; `consequence`
/// says what such a line does in the file's language.
pub(crate) fn bare_carriage_return(
    bytes: &[u8],
    consequence: &str,
) -> Option<(ExclusionReason, String)> {
    let at = bytes
        .iter()
        .enumerate()
        .find(|(i, b)| **b == b'\r' && bytes.get(i + 1) != Some(&b'\n'))
        .map(|(i, _)| i)?;
    let line = line_of(bytes, at);
    Some((
        ExclusionReason::BareCarriageReturn,
        format!("a carriage return without a line feed on line {line}: {consequence}"),
    ))
}

/// The exclusion of a file that does not parse as `language`, its first error on `line`.
pub(crate) fn does_not_parse(language: &str, line: u32) -> (ExclusionReason, String) {
    (
        ExclusionReason::DoesNotParse,
        format!("does not parse as {language} (first error on line {line})"),
    )
}

pub(crate) fn line_of(bytes: &[u8], offset: usize) -> u32 {
    let newlines = bytes[..offset.min(bytes.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count();
    u32::try_from(newlines).unwrap_or(u32::MAX - 1) + 1
}

#[cfg(test)]
mod plan_checks;
#[cfg(test)]
mod tests;
