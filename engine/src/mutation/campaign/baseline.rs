//! The unmutated run: the schemata built once (Rust), the baseline the mutants are judged
//! against (under per-test coverage where the runner has it), and what it says of which tests
//! reach which code.

use super::*;
use crate::mutation::check::BaselineProblem;
use crate::mutation::mutants::language::SchemaStrategy;

impl<'a> Campaign<'a> {
    /// Decides which mutants one tree holds behind the switch: built once (Rust, Go) or run
    /// as written (JavaScript).
    pub(super) async fn build_schemata(
        &self,
        planned: &Planned,
        index: &mut usize,
    ) -> Option<Schemata> {
        let request = self.request;
        if planned.plan.mutants.is_empty() {
            return None;
        }
        let (sources, mutants) = (&planned.bytes(), &planned.plan.mutants);
        let (queue, store) = (self.queue, self.store);
        match languages::schema_strategy(request.runner)? {
            SchemaStrategy::CargoBuild => {
                Some(schemata::build(request, sources, mutants, queue, store, index).await)
            }
            SchemaStrategy::GoTestBinary => {
                Some(schemata::build_go(request, sources, mutants, queue, store, index).await)
            }
            SchemaStrategy::Interpret => Some(
                schemata::interpret(
                    request,
                    sources,
                    mutants,
                    (queue, store),
                    index,
                    self.erase_types,
                )
                .await,
            ),
        }
    }

    /// Runs the unmutated tests; decides if the prebuilt ones hold the mutants (they must pass).
    pub(super) async fn run_baseline(
        &self,
        planned: &Planned,
        schemata: Option<&mut Schemata>,
        index: &mut usize,
    ) -> Result<BaselineRun, MutateError> {
        let request = self.request;
        let prebuilt = schemata.as_ref().and_then(|s| s.prebuilt());
        let switched = schemata.as_ref().and_then(|s| s.switched_tree().cloned());
        // The baseline runs under the same sandbox and limits as the mutants, so contention
        // shows in the baseline too and does not fake timeouts.
        if !request.runner.runner().judges_mutants() {
            return Err(MutateError::UnsupportedRunner {
                runner: request.runner,
            });
        }
        let coverage_py = request.runner.runner().coverage() == Some(CoverageTool::CoveragePy);
        let (mut baseline_spec, per_line) = match (&prebuilt, coverage_py) {
            (Some(prebuilt), _) => (
                schemata::run_spec(request, prebuilt, *index, 0, None),
                false,
            ),
            (None, _) if let Some(tree) = &switched => {
                let command = request.runner.command(&request.command_prefix, &[], &[]);
                (
                    schemata::switched_spec(request, tree, *index, 0, command),
                    false,
                )
            }
            // The map is made by the test command's own interpreter, with its own arguments, so
            // the baseline runs what the mutants run. A command that is not `PYTHON -m pytest`
            // gets no map: its baseline is the command itself, and it must pass with a report.
            (None, true) if let Some((python, args)) = python_m_pytest(&request.command_prefix) => {
                let pytest_args = args
                    .iter()
                    .cloned()
                    .chain(["-o".into(), "junit_family=xunit1".into()]);
                let command = coverage::command_with(python, pytest_args);
                let mut spec = self.spec(&planned.tree, *index, command);
                // The mutants' command with no test named: the worker collects a session of
                // it while the baseline runs, so the first mutants find it ready.
                spec.next_command = Some(self.mutant_command(&self.mutant_prefix(true), &[]));
                (spec, true)
            }
            (None, _) => {
                let command = request.runner.command(&request.command_prefix, &[], &[]);
                (self.spec(&planned.tree, *index, command), false)
            }
        };
        *index += 1;
        baseline_spec.timeout_secs = request.budget.as_secs().max(1);
        let setup = self.started.elapsed();
        let mut baseline = run_single(self.queue, &baseline_spec).await;
        if let Some(s) = schemata.filter(|s| s.prebuilt().is_some() || s.switched_tree().is_some())
        {
            let red = judge_baseline(
                request.runner,
                &baseline,
                None,
                Duration::from_secs(baseline_spec.timeout_secs),
            );
            if let Err(reason) = red {
                // Unmutated, the prebuilt tests must pass as `cargo test` does; where they do
                // not (a test that finds its files by the build's own path, say), every mutant
                // builds. A JavaScript schema that fails unmutated (a switched form node
                // refuses at load) is no kill of anything: every mutant runs with its edit.
                let what = match s.switched_tree() {
                    Some(_) => "the schema's tests",
                    None => "the prebuilt tests",
                };
                s.give_up(format!("{what} failed unmutated ({reason})"));
                let command = request.runner.command(&request.command_prefix, &[], &[]);
                baseline_spec = self.spec(&planned.tree, *index, command);
                baseline_spec.timeout_secs = request.budget.as_secs().max(1);
                *index += 1;
                baseline = run_single(self.queue, &baseline_spec).await;
            }
        }
        Ok(BaselineRun {
            result: baseline,
            timeout_secs: baseline_spec.timeout_secs,
            per_line,
            setup,
            done: Instant::now(),
        })
    }

    /// Decides which tests reach each mutant's code; stops the run unless the baseline passed.
    pub(super) async fn map_tests(
        &self,
        planned: &Planned,
        run: BaselineRun,
        schemata: Option<&Schemata>,
        index: &mut usize,
    ) -> Result<Baseline, MutateError> {
        let request = self.request;
        let baseline = run.result;
        let time = Duration::from_millis(baseline.as_ref().map_or(0, |r| r.duration_ms));
        let mut selection_note = None;
        let coverage = match (&baseline, run.per_line) {
            (Ok(result), true) => match CoverageMap::read(self.store, result).await {
                Ok(map) => Some(map),
                Err(why) => {
                    selection_note = Some(format!(
                        "per-test coverage unavailable ({}); each mutant runs the whole suite",
                        error_chain(&why)
                    ));
                    None
                }
            },
            (Err(why), _) => {
                selection_note = Some(error_chain(&why));
                None
            }
            (Ok(_), false) => None,
        };
        // Stops here unless the unmutated suite passed: no mutant is judged against a red one.
        let plain = match (&baseline, &coverage) {
            (Ok(_), None) if run.per_line => {
                // No map (coverage.py missing, or the session broke): the same suite without
                // coverage says whether the baseline passes.
                let command = request.runner.command(&request.command_prefix, &[], &[]);
                let mut plain = self.spec(&planned.tree, *index, command);
                plain.timeout_secs = run.timeout_secs;
                *index += 1;
                Some(run_single(self.queue, &plain).await)
            }
            _ => None,
        };
        judge_baseline(
            request.runner,
            plain.as_ref().unwrap_or(&baseline),
            coverage.as_ref(),
            Duration::from_secs(run.timeout_secs),
        )
        .map_err(|reason| match reason {
            BaselineProblem::Unrun(reason) => MutateError::BaselineUnrun { reason },
            reason => MutateError::RedBaseline { reason },
        })?;
        // Rust: the prebuilt tests' unmutated run traced which tests reach each site.
        let prebuilt = schemata.is_some_and(|s| s.prebuilt().is_some());
        let reached = match (prebuilt, &baseline) {
            (true, Ok(result)) => match reached::from_run(self.store, result).await {
                Ok(reached) => Some(reached),
                Err(why) => {
                    selection_note = Some(format!("{why}; each mutant runs every test"));
                    None
                }
            },
            _ => None,
        };
        // JavaScript: the schema's unmutated run traced which test files reach each site.
        let switched = schemata.is_some_and(|s| s.switched_tree().is_some());
        let reached_files = match (switched, &baseline) {
            (true, Ok(result)) => {
                // The schema's tree: a TypeScript project's test files run erased there.
                let tree = schemata
                    .and_then(|s| s.switched_tree())
                    .unwrap_or(&planned.tree);
                let test_files: std::collections::BTreeSet<String> =
                    source::list_files(&request.repo, tree)?
                        .into_iter()
                        .filter(|path| request.runner.is_test_file(path))
                        .collect();
                match reached_files::from_run(self.store, result, &test_files).await {
                    Ok(reached) => Some(reached),
                    Err(why) => {
                        selection_note = Some(format!("{why}; each mutant runs every test file"));
                        None
                    }
                }
            }
            _ => None,
        };
        let package_tests = match (
            request.runner.runner().reports_tests_by_package(),
            &baseline,
        ) {
            (true, Ok(result)) => go_package_tests(request, result)?,
            _ => None,
        };
        Ok(Baseline {
            time,
            coverage,
            reached,
            reached_files,
            package_tests,
            selection_note,
            setup: run.setup,
            done: run.done,
        })
    }
}

/// Whether the unmutated baseline passed with at least one test: by the per-test coverage map
/// when there is one, else by `result`'s own report.
pub(super) fn judge_baseline(
    runner: RunnerKind,
    result: &Result<JobResult, BaselineError>,
    coverage: Option<&CoverageMap>,
    limit: Duration,
) -> Result<(), BaselineProblem> {
    if let Some(map) = coverage.filter(|_| per_line_wanted(runner)) {
        return map.baseline_problem().map_or(Ok(()), Err);
    }
    let result = result
        .as_ref()
        .map_err(|e| BaselineProblem::Unrun(error_chain(e)))?;
    let judgement = judge_run(
        result,
        MutantTimeout {
            limit,
            set_by_budget: true,
        },
        Expected::EveryTestRun,
    );
    crate::mutation::check::judge_baseline(result, &judgement)
}

/// The directory of a Go file's package, relative to the module root (`""` for the root).
pub(super) fn package_dir(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// Go: the top-level tests of the unmutated run's report (`PACKAGE::TestName`), by the
/// directory of their package (its import path less the module's, from the root `go.mod` of
/// the tree mutated). `None` when that names no module: every mutant then runs every package.
pub(super) fn go_package_tests(
    request: &MutateRequest,
    result: &JobResult,
) -> Result<Option<BTreeMap<String, Vec<String>>>, MutateError> {
    let go_mod = source::read_file(&request.repo, &request.tree, "go.mod")?.unwrap_or_default();
    let module = String::from_utf8_lossy(&go_mod)
        .lines()
        .find_map(|line| {
            let rest = line.trim().strip_prefix("module")?;
            let name = rest.trim().trim_matches('"');
            (rest.starts_with(char::is_whitespace) && !name.is_empty()).then(|| name.to_owned())
        })
        .unwrap_or_default();
    if module.is_empty() {
        return Ok(None);
    }
    let mut tests: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for case in result.report.parsed().map_or(&[][..], |r| &r.cases[..]) {
        let dir = match case.file.strip_prefix(&module) {
            Some("") => String::new(),
            Some(rest) if rest.starts_with('/') => rest[1..].to_owned(),
            _ => continue, // another module's package: not one `./dir` names
        };
        // The function: `-run` selects every subtest of it.
        let function = case.name.split('/').next().unwrap_or(&case.name);
        let function = format!("{}::{function}", case.file);
        let names = tests.entry(dir).or_default();
        if !names.contains(&function) {
            names.push(function);
        }
    }
    Ok(Some(tests))
}

/// Why the baseline gave nothing to plan from; the mutants then run the whole suite.
#[derive(Debug, thiserror::Error)]
pub(super) enum BaselineError {
    #[error("job {job}")]
    Queue {
        job: JobId,
        #[source]
        source: QueueError,
    },
    #[error("job {job}: {message}")]
    Infrastructure { job: JobId, message: String },
}

/// The baseline's one job; an infrastructure failure is an error like a lost queue.
pub(super) async fn run_single(
    queue: &dyn JobQueue,
    spec: &JobSpec,
) -> Result<JobResult, BaselineError> {
    let result = run_one(queue, spec)
        .await
        .map_err(|source| BaselineError::Queue {
            job: spec.job_id.clone(),
            source,
        })?;
    match &result.status {
        JobStatus::Infrastructure { message, .. } => Err(BaselineError::Infrastructure {
            job: spec.job_id.clone(),
            message: message.clone(),
        }),
        _ => Ok(result),
    }
}
