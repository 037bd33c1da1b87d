//! The reports people and CI read besides the terminal summary: `--html`, `--annotations` and
//! `--summary-md` on `assay prove`, `assay test` and `assay mutate`, and `assay report`, which
//! renders a saved JSON report. Reads what the renderers show (logs from the artifact store,
//! files from the repository); the rendering itself is in `html` and `annotations`.

use crate::annotations::{self, AnnotationStyle};
use crate::atomic_file::write_atomically;
use crate::config;
use crate::embedded;
use crate::exit::{Failure, ResultExt as _};
use crate::html::{self, Artifacts, Kind};
use anyhow::{Context, anyhow};
use assay_common::evidence::Evidence;
use assay_common::job::ArtifactRef;
use assay_common::mutation_report::MutationReport;
use assay_common::suite::SuiteReport;
use assay_transport::store::{ArtifactStore, read_artifact};
use clap::Args;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Artifacts larger than this are not read for a report (it shows the first 16 KiB anyway).
const READ_LIMIT_BYTES: u64 = 8 * 1024 * 1024;

#[derive(Args, Debug, Clone, Default)]
pub struct OutputArgs {
    /// Write a self-contained HTML report here (no network needed to view it).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Print CI annotations on stdout: github (workflow commands at the failing test's or the
    /// surviving mutant's line).
    #[arg(long, value_name = "STYLE", value_enum)]
    pub annotations: Option<AnnotationStyle>,
    /// Write a Markdown summary here (e.g. "$GITHUB_STEP_SUMMARY").
    #[arg(long, value_name = "FILE")]
    pub summary_md: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// A saved report: `assay prove --json` evidence, `assay test --json` suite report, or
    /// `assay mutate --json` mutation report (detected from its contents).
    #[arg(value_name = "SAVED.json")]
    pub input: PathBuf,
    /// Artifact store to read the jobs' logs from [default: the default store directory].
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `assay report`: renders a saved JSON report.
pub async fn run(args: &ReportArgs) -> Result<u8, Failure> {
    let out = &args.output;
    if out.html.is_none() && out.annotations.is_none() && out.summary_md.is_none() {
        return Err(Failure::usage(anyhow!(
            "nothing to write (hint: pass --html FILE, --summary-md FILE or --annotations github)"
        )));
    }
    let bytes = std::fs::read(&args.input)
        .with_context(|| format!("failed to read {}", args.input.display()))
        .usage()?;
    let doc: serde_json::Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not JSON", args.input.display()))
        .usage()?;
    let kind = html::detect(&doc).ok_or_else(|| {
        Failure::usage(anyhow!(
            "{} is none of the reports Assay writes (proof evidence, suite report, mutation report)",
            args.input.display()
        ))
    })?;
    let store_url = args.store.clone().unwrap_or_else(config::default_store_url);
    match kind {
        Kind::Proof => {
            let evidence: Evidence = serde_json::from_value(doc)
                .context("the proof evidence does not match assay.proof/v1")
                .usage()?;
            let store = embedded::open_store(&store_url)?;
            emit_proof(out, &evidence, store.as_ref()).await
        }
        Kind::Suite => {
            let report: SuiteReport = serde_json::from_value(doc)
                .context("the suite report does not match assay.test/v1")
                .usage()?;
            let store = embedded::open_store(&store_url)?;
            emit_suite(out, &report, store.as_ref()).await
        }
        Kind::Mutation => {
            let report: MutationReport = serde_json::from_value(doc)
                .context("the mutation report does not match mutation-testing-report-schema v1 with Assay's block")
                .usage()?;
            emit_mutation(out, &report)
        }
    }?;
    Ok(0)
}

/// A file of a git tree or commit, as text; `None` when the repository, revision or file is
/// not there.
fn read_in_git(repo: &str, rev: &str, path: &str) -> Option<String> {
    let git = git2::Repository::open(repo).ok()?;
    let tree = git.revparse_single(rev).ok()?.peel_to_tree().ok()?;
    let entry = tree.get_path(Path::new(path)).ok()?;
    let blob = entry.to_object(&git).ok()?.peel_to_blob().ok()?;
    String::from_utf8(blob.content().to_vec()).ok()
}

/// Reads each artifact whose bytes match its sha256; one that is missing, too large or does
/// not match is left out, and the report names it by key and sha256 instead.
async fn read_artifacts<'a>(
    store: &dyn ArtifactStore,
    refs: impl IntoIterator<Item = &'a ArtifactRef>,
) -> Artifacts {
    let mut artifacts = Artifacts::new();
    for artifact in refs {
        if artifact.bytes > READ_LIMIT_BYTES || artifacts.contains_key(&artifact.key) {
            continue;
        }
        if let Ok(bytes) = read_artifact(store, artifact).await {
            artifacts.insert(artifact.key.clone(), bytes.to_vec());
        }
    }
    artifacts
}

fn write(path: &Path, text: &str) -> Result<(), Failure> {
    write_atomically(path, text.as_bytes()).infrastructure()
}

pub async fn emit_proof(
    out: &OutputArgs,
    evidence: &Evidence,
    store: &dyn ArtifactStore,
) -> Result<(), Failure> {
    let lookup = |path: &str| read_in_git(&evidence.repository, &evidence.candidate.tree, path);
    if let Some(path) = &out.html {
        let artifacts =
            read_artifacts(store, evidence.jobs.iter().flat_map(|j| &j.artifacts)).await;
        let mut sources: BTreeMap<String, String> = BTreeMap::new();
        for record in evidence.mutation_check.iter().flat_map(|c| &c.mutants) {
            let file = record.mutant.edit.path.as_str();
            if !sources.contains_key(file)
                && let Some(text) = lookup(file)
            {
                sources.insert(file.to_owned(), text);
            }
        }
        let page = html::proof::render(&html::proof::ProofInput {
            evidence,
            artifacts: &artifacts,
            sources: &sources,
        });
        write(path, &page)?;
    }
    if let Some(path) = &out.summary_md {
        write(path, &annotations::proof_summary_md(evidence))?;
    }
    if out.annotations == Some(AnnotationStyle::Github) {
        crate::console::human(format_args!(
            "{}",
            annotations::proof_annotations(evidence, &lookup)
        ));
    }
    Ok(())
}

pub async fn emit_suite(
    out: &OutputArgs,
    report: &SuiteReport,
    store: &dyn ArtifactStore,
) -> Result<(), Failure> {
    if let Some(path) = &out.html {
        let refs = report
            .cases
            .iter()
            .flat_map(|c| &c.artifacts)
            .chain(report.jobs.iter().flat_map(|j| &j.artifacts));
        let artifacts = read_artifacts(store, refs).await;
        write(path, &html::suite::render(report, &artifacts))?;
    }
    if let Some(path) = &out.summary_md {
        write(path, &annotations::suite_summary_md(report))?;
    }
    if out.annotations == Some(AnnotationStyle::Github) {
        let lookup = |path: &str| read_in_git(&report.repository, &report.revision, path);
        crate::console::human(format_args!(
            "{}",
            annotations::suite_annotations(report, &lookup)
        ));
    }
    Ok(())
}

/// Renders Stryker's mutation-testing-report document.
pub fn emit_mutation(out: &OutputArgs, parsed: &MutationReport) -> Result<(), Failure> {
    if let Some(path) = &out.html {
        write(path, &html::mutation::render(parsed))?;
    }
    if let Some(path) = &out.summary_md {
        write(path, &annotations::mutation_summary_md(parsed))?;
    }
    if out.annotations == Some(AnnotationStyle::Github) {
        crate::console::human(format_args!(
            "{}",
            annotations::mutation_annotations(parsed)
        ));
    }
    Ok(())
}
