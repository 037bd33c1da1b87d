//! How `assay test` drives each runner: where its cases come from (the runner's own listing
//! run as a job, the tree's test files, manifest rows, or the whole command), the argv that
//! runs a batch of them, and which report judges them. Cases of one job always share what the
//! runner can select together: one Go package; node files and manifest rows batch freely, since
//! their reports name each result's file or row.

use super::CollectError;
use crate::mutation::mutants::javascript::typescript;
use crate::source;
use assay_common::TreeId;
use assay_common::manifest::ManifestJob;
use assay_common::outcome::{CollectionError, TestReport};
use assay_common::runner::{CoverageTool, ListingFormat, ReportFormat, SourceLanguage, SuiteCases};
use assay_common::suite::{
    CollectionProblem, SuiteCase, parse_pytest_collection, parse_unittest_batch_collection,
};
use std::collections::BTreeMap;
use std::path::Path;

pub use assay_common::suite::SuiteRunner;

/// What a first-round batch recorded of the suite's collection.
pub enum BatchCollection {
    /// Nothing: it never finished collecting, or its report is unreadable.
    Unrecorded,
    /// The whole suite's cases, in collection order.
    Cases(Vec<SuiteCase>),
    /// A test module failed to load: the run fails as its listing would have.
    Broken {
        /// The module's collection error.
        error: CollectionError,
        /// Whether the batch's output tells the failure (pytest prints the module's
        /// traceback); else the error's message is the whole account.
        told_in_output: bool,
    },
}

/// Where a runner's cases come from.
pub enum Listing {
    /// Run this argv as a job and read its output in this format.
    Job(Vec<String>, ListingFormat),
    /// Read from the tree here, without running anything.
    Tree,
}

/// A runner with its configured command, ready to list and run cases.
#[derive(Clone, Debug)]
pub struct SuiteSetup {
    /// The suite's runner.
    pub runner: SuiteRunner,
    /// The runner's command before any selected cases.
    pub prefix: Vec<String>,
    /// The generic JUnit runner's report (`--test-report junit:PATH`, or `{report}`).
    pub report: ReportFormat,
    /// The manifest corpus, relative to the tree root.
    pub manifest: String,
    /// The tree is TypeScript its runner runs erased (node): each job erases the types first,
    /// and a test module is its JavaScript (`mutants::javascript::typescript`).
    pub erase_types: bool,
}

impl SuiteSetup {
    /// Refuses what `assay test` cannot run, before anything runs.
    pub fn check(&self) -> Result<(), CollectError> {
        let runner = self.runner;
        let unsupported = runner.runner().suite_unsupported();
        if let Some(why) = unsupported {
            return Err(CollectError::Unsupported {
                runner,
                why: why.into(),
            });
        }
        let needs_command = runner.runner().default_command().is_empty();
        if needs_command && self.prefix.is_empty() {
            return Err(CollectError::Unsupported {
                runner,
                why: "it needs a command (hint: --test-command \"…\"; for a manifest, the \
                      interpreter)"
                    .into(),
            });
        }
        Ok(())
    }

    /// How this runner's cases are listed: a listing job, or read from the tree.
    pub fn listing(&self) -> Listing {
        match self.runner.runner().suite_cases(&self.prefix) {
            SuiteCases::Listed { command, format } => Listing::Job(command, format),
            SuiteCases::TestModules | SuiteCases::WholeCommand(_) | SuiteCases::CorpusRows => {
                Listing::Tree
            }
        }
    }

    /// The report a case job yields.
    pub fn report_format(&self) -> ReportFormat {
        let runner = self.runner.runner();
        match runner.report_is_configured() {
            true => self.report.clone(),
            false => runner.report_format_for(&self.prefix),
        }
    }

    /// The argv running `cases`, which share a job.
    pub fn case_command(&self, cases: &[&SuiteCase]) -> Vec<String> {
        let command = self.runner.runner().suite_command(&self.prefix, cases);
        match self.erase_types {
            true => typescript::erasing(command),
            false => command,
        }
    }

    /// The argv of a batch that collects the suite itself and runs the cases `spec` names,
    /// recording what it collected in its report (see [`assay_common::runner::Runner::select_command`]);
    /// `None` when the runner's batches cannot.
    pub fn select_command(&self, spec: &[String]) -> Option<Vec<String>> {
        self.runner.runner().select_command(&self.prefix, spec)
    }

    /// The command of part `part` of `parts` of a first run: a session that collects the whole
    /// suite and runs the cases whose [`Self::partition_key`] [`assay_common::runner::partition_of`] puts in
    /// its part, recording what it collected; `None` when the runner's batches cannot.
    pub fn partition_command(&self, part: usize, parts: usize) -> Option<Vec<String>> {
        self.runner
            .runner()
            .partition_command(&self.prefix, part, parts)
    }

    /// What decides `case`'s part in a partitioned first run ([`assay_common::runner::Runner::partition_key`]).
    pub fn partition_key<'a>(&self, case: &'a SuiteCase) -> &'a str {
        self.runner.runner().partition_key(case)
    }

    /// What a batch run by [`Self::select_command`] or [`Self::partition_command`] recorded of
    /// the suite's collection, from its parsed report and its report's bytes.
    pub fn batch_collection(
        &self,
        parsed: Option<&TestReport>,
        report: Option<&[u8]>,
    ) -> BatchCollection {
        match self.listing() {
            Listing::Job(_, ListingFormat::UnittestCases) => {
                let Some(report) = report else {
                    return BatchCollection::Unrecorded;
                };
                match parse_unittest_batch_collection(report) {
                    Ok(Some(cases)) if !cases.is_empty() => BatchCollection::Cases(cases),
                    Ok(_) => BatchCollection::Unrecorded,
                    Err(CollectionProblem::Broken { file, message }) => BatchCollection::Broken {
                        error: CollectionError { file, message },
                        told_in_output: false,
                    },
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read a batch's collection");
                        BatchCollection::Unrecorded
                    }
                }
            }
            _ => {
                // pytest reports a module that failed to import as a collection error.
                if let Some(error) = parsed.and_then(|r| r.collection_errors.first()) {
                    return BatchCollection::Broken {
                        error: error.clone(),
                        told_in_output: true,
                    };
                }
                match super::split::collected_ids(report.unwrap_or_default()) {
                    Ok(ids) if !ids.is_empty() => {
                        BatchCollection::Cases(parse_pytest_collection(&ids.join("\n")))
                    }
                    Ok(_) => BatchCollection::Unrecorded,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read a batch's collection");
                        BatchCollection::Unrecorded
                    }
                }
            }
        }
    }

    /// The cases a batch's report names, as the suite's cases: what a first run's progress
    /// shows before the batches' collections settle the run's cases.
    pub fn reported_cases(&self, report: &TestReport) -> Vec<SuiteCase> {
        match self.listing() {
            Listing::Job(_, ListingFormat::UnittestCases) => report
                .cases
                .iter()
                .map(|c| {
                    let class = c.suite.rsplit('.').next().unwrap_or_default();
                    SuiteCase {
                        variant: c.variant.clone(),
                        ..SuiteCase::test(
                            &format!("{}.{}", c.suite, c.name),
                            &c.file,
                            class,
                            &c.name,
                        )
                    }
                })
                .collect(),
            _ => report
                .cases
                .iter()
                .flat_map(|c| parse_pytest_collection(&crate::mutation::mutants::judge::node_id(c)))
                .collect(),
        }
    }

    /// Whether a batch's output splits back into its cases (pytest's report carries each
    /// test's output, a manifest row runs in its own process), so that `--shards auto` may
    /// batch them. The other runners' batches share one output, so by default they run one
    /// case per job.
    pub fn batches_by_default(&self) -> bool {
        self.runner.runner().batches_by_default()
    }

    /// The cases that must share a session with `case` (the runner's
    /// [`assay_common::runner::Runner::session_group`]); `None`: any batch.
    pub fn session_group(&self, case: &SuiteCase) -> Option<String> {
        self.runner.runner().session_group(case)
    }

    /// Whether two cases may share a job: the runner can select both in one run and
    /// nothing else with them.
    pub fn may_share_a_job(&self, a: &SuiteCase, b: &SuiteCase) -> bool {
        self.runner.runner().may_share_a_job(a, b)
    }

    /// The coverage tool the runner's tests can run under ([`assay_common::runner::Runner::coverage`]).
    pub fn coverage(&self) -> Option<CoverageTool> {
        self.runner.runner().coverage()
    }

    /// The language of the runner's tests ([`assay_common::runner::Runner::language`]).
    pub fn language(&self) -> Option<SourceLanguage> {
        self.runner.runner().language()
    }

    /// Whether the runner's whole-suite run keeps state across cases in one process
    /// ([`assay_common::runner::Runner::shares_a_process_across_cases`]).
    pub fn shares_a_process_across_cases(&self) -> bool {
        self.runner.runner().shares_a_process_across_cases()
    }

    /// Cases read from the tree (node files, manifest rows, the whole command), with a
    /// manifest suite's whole corpus.
    pub fn tree_cases(
        &self,
        repo: &Path,
        tree: &TreeId,
    ) -> Result<(Vec<SuiteCase>, Option<ManifestJob>), CollectError> {
        let runner = self.runner;
        let source_err = |source| CollectError::Source { runner, source };
        let command_text = shell_words(&self.prefix);
        let from = runner.runner().suite_cases(&self.prefix);
        match from {
            SuiteCases::WholeCommand(scope) => {
                Ok((vec![SuiteCase::whole_command(&command_text, scope)], None))
            }
            SuiteCases::CorpusRows => {
                let files = source::list_files(repo, tree).map_err(source_err)?;
                if !files.contains(&self.manifest) {
                    return Err(CollectError::Guest {
                        runner,
                        how: format!("{} is not in the tree", self.manifest),
                        detail: " (hint: --manifest PATH, relative to the repository root)".into(),
                    });
                }
                let corpus = crate::proof::read_corpus(repo, tree, &self.manifest, &files)
                    .map_err(|source| CollectError::Corpus { runner, source })?;
                let cases = corpus
                    .cases
                    .iter()
                    .map(|row| SuiteCase::manifest_row(&corpus, row))
                    .collect();
                Ok((cases, Some(corpus)))
            }
            SuiteCases::TestModules | SuiteCases::Listed { .. } => {
                let files = source::list_files(repo, tree).map_err(source_err)?;
                // An erased tree's TypeScript test module runs, and reports, as its JavaScript.
                let run_as = |file: &String| match self.erase_types {
                    true => typescript::erases(file).unwrap_or_else(|| file.clone()),
                    false => file.clone(),
                };
                let modules: std::collections::BTreeSet<String> = files
                    .iter()
                    .filter(|f| runner.runner().is_test_module(f))
                    .map(run_as)
                    .collect();
                let cases = modules.iter().map(|f| SuiteCase::whole_file(f)).collect();
                Ok((cases, None))
            }
        }
    }
}

/// The argv as a shell would read it back: words with spaces or quotes single-quoted.
fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|word| {
            let plain = !word.is_empty()
                && word
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
            if plain {
                word.clone()
            } else {
                format!("'{}'", word.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Go cases from `(import path, test name)` pairs: each placed in the `_test.go` file of its
/// package that declares it, so `--file` and `--directory` select Go cases like any other.
pub fn go_cases(
    runner: SuiteRunner,
    repo: &Path,
    tree: &TreeId,
    listed: &[(String, String)],
) -> Result<Vec<SuiteCase>, CollectError> {
    let source_err = |source| CollectError::Source { runner, source };
    let module = source::read_file(repo, tree, "go.mod")
        .map_err(source_err)?
        .and_then(|bytes| {
            String::from_utf8_lossy(&bytes).lines().find_map(|l| {
                l.trim()
                    .strip_prefix("module ")
                    .map(|m| m.trim().to_owned())
            })
        })
        .ok_or_else(|| CollectError::Guest {
            runner,
            how: "go.mod at the repository root names no module".into(),
            detail: String::new(),
        })?;
    let files = source::list_files(repo, tree).map_err(source_err)?;
    let mut sources: BTreeMap<&str, String> = BTreeMap::new();
    let mut cases = Vec::new();
    for (package, name) in listed {
        let dir = match package.strip_prefix(&module) {
            Some("") => "",
            Some(rest) => rest.trim_start_matches('/'),
            None => package.as_str(),
        };
        let in_dir = |f: &&String| {
            f.ends_with("_test.go") && f.rsplit_once('/').map_or("", |(d, _)| d) == dir
        };
        let mut file = None;
        let mut first_in_dir = None;
        for candidate in files.iter().filter(in_dir) {
            first_in_dir.get_or_insert_with(|| candidate.clone());
            if !sources.contains_key(candidate.as_str()) {
                let bytes = source::read_file(repo, tree, candidate)
                    .map_err(source_err)?
                    .unwrap_or_default();
                sources.insert(candidate, String::from_utf8_lossy(&bytes).into_owned());
            }
            if sources[candidate.as_str()].contains(&format!("func {name}(")) {
                file = Some(candidate.clone());
                break;
            }
        }
        // A test declared where no source says `func Name(` (generated, say) is placed in its
        // package's first test file, or the package directory when it has none in the tree.
        let file = file.or(first_in_dir).unwrap_or_else(|| dir.to_owned());
        let mut case = SuiteCase::test(&format!("{package}.{name}"), &file, "", name);
        case.package = Some(package.clone());
        cases.push(case);
    }
    Ok(cases)
}

/// Splits shards so that cases that may not share a job never do; plan order is kept.
pub fn split_shards(
    setup: &SuiteSetup,
    cases: &[SuiteCase],
    shards: Vec<Vec<usize>>,
) -> Vec<Vec<usize>> {
    let mut result: Vec<Vec<usize>> = Vec::new();
    for shard in shards {
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for i in shard {
            match groups
                .iter_mut()
                .find(|g| setup.may_share_a_job(&cases[g[0]], &cases[i]))
            {
                Some(group) => group.push(i),
                None => groups.push(vec![i]),
            }
        }
        result.extend(groups);
    }
    result.sort_by_key(|m| m[0]);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_common::manifest;
    use assay_common::runner::RunnerKind;

    fn setup(runner: SuiteRunner, prefix: &[&str]) -> SuiteSetup {
        SuiteSetup {
            erase_types: false,
            runner,
            prefix: prefix.iter().map(|w| (*w).to_owned()).collect(),
            report: ReportFormat::JunitXml,
            manifest: "manifest.tsv".into(),
        }
    }

    fn go_case(package: &str, name: &str) -> SuiteCase {
        let mut case = SuiteCase::test(&format!("{package}.{name}"), "x_test.go", "", name);
        case.package = Some(package.into());
        case
    }

    #[test]
    fn go_cases_run_anchored_in_their_own_package() {
        let go = setup(SuiteRunner::Kind(RunnerKind::Go), &["go", "test"]);
        let a = go_case("example.com/ledger/cache", "TestExpiry");
        let b = go_case("example.com/ledger/cache", "TestEvict");
        assert_eq!(
            go.case_command(&[&a, &b]),
            [
                "go",
                "test",
                "-json",
                "-count=1",
                "-vet=off",
                "-run",
                "^(TestExpiry|TestEvict)$",
                "example.com/ledger/cache"
            ]
        );
        let c = go_case("example.com/ledger", "TestBalance");
        let cases = [a, b, c];
        assert_eq!(
            split_shards(&go, &cases, vec![vec![0, 2], vec![1]]),
            [vec![0], vec![1], vec![2]]
        );
        assert_eq!(
            split_shards(&go, &cases, vec![vec![0, 1, 2]]),
            [vec![0, 1], vec![2]]
        );
    }

    #[test]
    fn runners_that_need_a_command_or_cannot_list_are_refused_up_front() {
        for (runner, prefix, needle) in [
            (SuiteRunner::Command, &[][..], "needs a command"),
            (
                SuiteRunner::Kind(RunnerKind::Manifest),
                &[][..],
                "needs a command",
            ),
            (
                SuiteRunner::Kind(RunnerKind::Vitest),
                &["npx", "vitest"][..],
                "Vitest",
            ),
        ] {
            let err = setup(runner, prefix).check().unwrap_err().to_string();
            assert!(err.contains(needle), "{runner}: {err}");
        }
        assert!(
            setup(SuiteRunner::Command, &["make", "check"])
                .check()
                .is_ok()
        );
        assert_eq!("command".parse::<SuiteRunner>(), Ok(SuiteRunner::Command));
        assert!(
            "jest"
                .parse::<SuiteRunner>()
                .unwrap_err()
                .contains("or command")
        );
    }

    #[test]
    fn manifest_rows_share_a_job_that_carries_them_to_the_worker() {
        let manifest = setup(
            SuiteRunner::Kind(RunnerKind::Manifest),
            &["python3", "run.py"],
        );
        let rows = manifest::parse_manifest(
            "integer/add.inv\tinteger\t2\nboolean/paid.inv\ttrue\nnull/none.inv\tnull\t-\n",
        )
        .unwrap();
        let corpus = ManifestJob {
            corpus: assay_common::tree_path::TreeDir::new("corpus").unwrap(),
            cases: rows,
        };
        let cases: Vec<SuiteCase> = corpus
            .cases
            .iter()
            .map(|row| SuiteCase::manifest_row(&corpus, row))
            .collect();
        assert!(manifest.may_share_a_job(&cases[0], &cases[2]));
        let plan = super::super::plan_suite(
            &assay_common::ProofId("t-1".into()),
            &manifest,
            &TreeId("0".repeat(40)),
            (&cases, Some(&corpus)),
            &[vec![0, 2], vec![1]],
            60,
        );
        assert_eq!(plan[0].command, ["python3", "run.py"]);
        assert_eq!(
            plan[0].selected_tests,
            ["corpus/integer/add.inv", "corpus/null/none.inv"]
        );
        let ReportFormat::ManifestCases(job) = &plan[0].report else {
            panic!("a manifest job reports per row: {:?}", plan[0].report)
        };
        assert_eq!(job.corpus.as_str(), "corpus");
        let carried: Vec<&str> = job.cases.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(carried, ["integer/add.inv", "null/none.inv"]);
    }

    #[test]
    fn a_whole_command_case_reads_back_as_typed() {
        let argv: Vec<String> = ["sh", "-c", "pytest -q && coverage report", "it's"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            shell_words(&argv),
            r"sh -c 'pytest -q && coverage report' 'it'\''s'"
        );
    }
}
