//! The run's report: each mutant's record with its scope and lines, the summary and the exit
//! code.

use super::*;

impl<'a> Campaign<'a> {
    /// Assembles the report: every mutant's record in plan order, and where the time went.
    pub(super) fn report(
        &self,
        planned: Planned,
        schemata: Option<Schemata>,
        baseline: Baseline,
        choices: Choices,
        caching: Caching<'_>,
    ) -> MutateReport {
        let Planned {
            tree, files, plan, ..
        } = planned;
        let mut results: Vec<MutantResult> = choices.results.into_iter().flatten().collect();
        if self.erase_types {
            self.name_tests_by_their_sources(&tree, &mut results);
        }
        MutateReport {
            tree: tree.to_string(),
            per_line_selection: baseline.coverage.is_some()
                || baseline.reached.is_some()
                || baseline.reached_files.is_some(),
            selection_note: baseline.selection_note,
            files: files
                .iter()
                .map(|f| {
                    (
                        f.path.clone(),
                        String::from_utf8_lossy(&f.bytes).into_owned(),
                    )
                })
                .collect(),
            results,
            plan,
            elapsed_s: self.started.elapsed().as_secs_f64(),
            phases: Phases {
                setup: baseline.setup,
                initial_run: baseline
                    .done
                    .duration_since(self.started)
                    .saturating_sub(baseline.setup),
                mutation: baseline.done.elapsed(),
            },
            cache: caching.outcome,
            schemata: schemata.map(|s| assay_common::mutation_report::SchemataOutcome {
                batched: choices.batched.0,
                batches: choices.batched.1,
                ..s.outcome()
            }),
        }
    }
}

impl Campaign<'_> {
    /// A TypeScript tree's tests ran as their JavaScript: each covering and killing test is
    /// named by the file the project wrote. Unlisted (the repository cannot be read), they
    /// keep their JavaScript names.
    fn name_tests_by_their_sources(&self, tree: &TreeId, results: &mut [MutantResult]) {
        let Ok(paths) = source::list_files(&self.request.repo, tree) else {
            return;
        };
        let names = typescript::SourceNames::of(paths.iter().map(String::as_str));
        for result in results {
            for id in result
                .covered_by
                .iter_mut()
                .chain(result.verdict.killed_by.iter_mut())
            {
                *id = names.source_of(id);
            }
        }
    }
}

impl MutateReport {
    /// How many mutants ended with each status, and the flaky kills.
    pub fn summary(&self) -> Summary {
        let count = |s: Status| {
            self.results
                .iter()
                .filter(|r| r.verdict.status == s)
                .count()
        };
        let detected = count(Status::Killed) + count(Status::Timeout);
        let valid = detected + count(Status::Survived) + count(Status::NoCoverage);
        let (score, interval) = if valid == 0 {
            (None, None)
        } else {
            let n = valid as f64;
            let p = detected as f64 / n;
            let z = 1.96_f64;
            let denominator = 1.0 + z * z / n;
            let centre = (p + z * z / (2.0 * n)) / denominator;
            let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denominator;
            (
                Some(p),
                Some(((centre - half).max(0.0), (centre + half).min(1.0))),
            )
        };
        let evaluated = self.results.len() - count(Status::Pending);
        Summary {
            mutants: self.results.len(),
            killed: count(Status::Killed),
            survived: count(Status::Survived),
            no_coverage: count(Status::NoCoverage),
            timeout: count(Status::Timeout),
            runtime_error: count(Status::RuntimeError),
            compile_error: count(Status::CompileError),
            pending: count(Status::Pending),
            flaky_kills: self.results.iter().filter(|r| r.flaky).count(),
            mutation_score: score,
            confidence_interval: interval,
            elapsed_s: self.elapsed_s,
            mutants_per_minute: if self.elapsed_s > 0.0 {
                evaluated as f64 * 60.0 / self.elapsed_s
            } else {
                0.0
            },
        }
    }

    /// Whether the mutation score (a percentage) is below `threshold`; `None` without a score
    /// (no mutant with a verdict).
    pub fn score_below(&self, threshold: f64) -> Option<bool> {
        self.summary()
            .mutation_score
            .map(|score| score * 100.0 < threshold)
    }

    /// The exit code: 0 when every mutant with a verdict was detected and none is pending (a
    /// mutant that does not compile has none and keeps none from the rest),
    /// [`EXIT_SURVIVORS`] when one survived or no test covers it, 4 when only the budget or
    /// errors kept a verdict from some mutants.
    pub fn exit_code(&self) -> u8 {
        self.exit_code_under(None)
    }

    /// [`Self::exit_code`] where survivors fail the run only when the mutation score (a
    /// percentage) is below `fail_under`: 5 then, else 0 (4 still when mutants have no verdict).
    pub fn exit_code_under(&self, fail_under: Option<f64>) -> u8 {
        let summary = self.summary();
        let below = fail_under.is_none_or(|threshold| self.score_below(threshold) == Some(true));
        if summary.survived + summary.no_coverage > 0 && below {
            EXIT_SURVIVORS
        } else if summary.pending + summary.runtime_error > 0 {
            4
        } else {
            0
        }
    }

    /// One mutant's unified diff against the HEAD file.
    pub fn diff(&self, result: &MutantResult) -> Option<String> {
        let source = self.files.get(result.mutant.path.as_str())?;
        mutants::diff::unified_diff(source.as_bytes(), &result.mutant.edit)
    }

    /// Every mutant's diff in plan order, each after a `# mutant ID STATUS: LABEL` line, so
    /// one can be cut out and applied with `git apply`.
    pub fn diffs(&self) -> String {
        let mut out = String::new();
        for result in &self.results {
            let Some(diff) = self.diff(result) else {
                continue;
            };
            out.push_str(&format!(
                "# mutant {} {:?}: {}\n{diff}",
                result.mutant.id,
                result.verdict.status,
                result.mutant.label()
            ));
        }
        out
    }
}
