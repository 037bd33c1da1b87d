//! One collected case of a suite, as a runner names it, and its stable opaque reference:
//! what runners produce and suite runs, caches and reports name cases by.

use crate::job::ArtifactRef;
use crate::manifest::{ManifestCase, ManifestJob};
use crate::outcome::CaseResult;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

const REF_PREFIX: &str = "v1.";

/// One collected case, in plan (collection) order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuiteCase {
    /// The runner's own selector for this case (a pytest node id, a unittest dotted id).
    pub id: String,
    /// The file the case lives in, relative to the tree root.
    pub file: String,
    /// Class (or classes) around the test, `::`-joined; empty for a bare function.
    pub class: String,
    /// The bare test function name.
    pub name: String,
    /// The parametrization, when the case is one variant.
    pub variant: Option<String>,
    /// Go: the package's import path, which is how `go test -json` names a result's file.
    #[serde(default)]
    pub package: Option<String>,
    /// What the case stands for: one test, a whole file, or the whole command.
    #[serde(default)]
    pub scope: CaseScope,
}

/// How much of a run one case covers, and so which reported results it owns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseScope {
    /// One test (with its variants and subtests).
    #[default]
    Test,
    /// Every test in one file: a node:test file.
    File,
    /// One manifest row, named by its case file. The manifest job reports it under the
    /// corpus's `manifest.tsv` with the row's path as the name.
    Row,
    /// Every test the command reports: a generic JUnit command.
    Report,
    /// The whole command, judged by its exit status: `--runner command`.
    ExitStatus,
}

impl SuiteCase {
    /// The stable, opaque reference users copy from `--list-cases`.
    pub fn reference(&self) -> String {
        case_ref(&self.id)
    }

    /// One test named by the runner.
    pub fn test(id: &str, file: &str, class: &str, name: &str) -> Self {
        Self {
            id: id.to_owned(),
            file: file.to_owned(),
            class: class.to_owned(),
            name: name.to_owned(),
            variant: None,
            package: None,
            scope: CaseScope::Test,
        }
    }

    /// A whole file (a node:test file).
    pub fn whole_file(file: &str) -> Self {
        Self {
            scope: CaseScope::File,
            ..Self::test(file, file, "", "")
        }
    }

    /// A manifest row: its case file (relative to the tree root) is its id and file, the
    /// row's path (relative to the corpus) its name.
    pub fn manifest_row(corpus: &ManifestJob, row: &ManifestCase) -> Self {
        let file = corpus.run_path(row);
        Self {
            scope: CaseScope::Row,
            ..Self::test(&file, &file, "", row.path.as_str())
        }
    }

    /// A whole command: judged by its JUnit report, or by its exit status alone.
    pub fn whole_command(command: &str, scope: CaseScope) -> Self {
        Self {
            scope,
            ..Self::test(command, "", "", command)
        }
    }

    /// Presentation only; never parsed.
    pub fn display(&self) -> String {
        match self.scope {
            CaseScope::File | CaseScope::Row => return self.file.clone(),
            CaseScope::Report | CaseScope::ExitStatus => return self.name.clone(),
            CaseScope::Test => {}
        }
        let mut text = self.file.clone();
        for part in self.class.split("::").filter(|p| !p.is_empty()) {
            text.push_str("::");
            text.push_str(part);
        }
        text.push_str("::");
        text.push_str(&self.name);
        if let Some(variant) = &self.variant {
            text.push_str(&format!("[{variant}]"));
        }
        text
    }

    /// Which of its job's artifacts are this case's: a manifest row's own outputs (the
    /// worker names them `ROW:stdout`, `ROW:stderr`); any other case shares its job's.
    pub fn own_artifacts(&self, artifacts: &[ArtifactRef]) -> Vec<ArtifactRef> {
        if self.scope != CaseScope::Row {
            return artifacts.to_vec();
        }
        artifacts
            .iter()
            .filter(|a| {
                a.name
                    .strip_prefix(self.name.as_str())
                    .is_some_and(|stream| stream.starts_with(':'))
            })
            .cloned()
            .collect()
    }

    /// Does a reported result belong to this case? Subtests (variants the collection did
    /// not list, Go's `TestA/sub`) belong to their test.
    pub fn owns(&self, result: &CaseResult) -> bool {
        match self.scope {
            CaseScope::Report | CaseScope::ExitStatus => return true,
            CaseScope::File => return result.file == self.file,
            CaseScope::Row => {
                let corpus = result.file.rsplit_once('/').map_or("", |(dir, _)| dir);
                let file = match corpus {
                    "" => result.name.clone(),
                    dir => format!("{dir}/{}", result.name),
                };
                return result.name == self.name && file == self.file;
            }
            CaseScope::Test => {}
        }
        // Cheapest first: a suite's run matches every case against every result, so most
        // pairs must part at a string comparison, before the class's allocations.
        let name_matches = result.name == self.name
            || result
                .name
                .strip_prefix(self.name.as_str())
                .is_some_and(|rest| rest.starts_with('/'));
        let file_matches =
            result.file == self.file || self.package.as_deref() == Some(result.file.as_str());
        if !(name_matches
            && file_matches
            && (self.variant.is_none() || self.variant == result.variant))
        {
            return false;
        }
        // The class ends the reported suite at a component boundary: `LastTests` must not own
        // `tests.test_more.RepeatLastTests`'s results.
        self.class.is_empty()
            || ends_with_component(&result.suite.replace('.', "::"), &self.class, "::")
            || ends_with_component(&result.suite, &self.class.replace("::", "."), ".")
    }
}

/// Is `tail` the whole of `text`, or its last `separator`-delimited components?
fn ends_with_component(text: &str, tail: &str, separator: &str) -> bool {
    text.strip_suffix(tail)
        .is_some_and(|head| head.is_empty() || head.ends_with(separator))
}

/// `v1.` and 16 hex digits of the id's sha256: stable across runs, opaque to users.
pub fn case_ref(id: &str) -> String {
    let digest = Sha256::digest(id.as_bytes());
    format!("{REF_PREFIX}{}", &hex::encode(digest)[..16])
}

/// Is this string shaped like a case ref at all (whether or not any case has it)?
pub fn is_well_formed_ref(reference: &str) -> bool {
    reference.strip_prefix(REF_PREFIX).is_some_and(|hex| {
        hex.len() == 16
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}
