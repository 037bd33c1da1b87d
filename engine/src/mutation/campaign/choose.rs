//! Choosing each mutant's run: the tests that cover it, its expected cost and limit, and the
//! verdicts the cache answers before anything runs.

use super::*;
use crate::mutation::mutants::switch::Entry;
use reached_files::FileReach;

impl<'a> Campaign<'a> {
    /// Decides whether the cache answers and stores verdicts: never for a compiled language.
    pub(super) fn caching(&self, planned: &Planned) -> Caching<'a> {
        let request = self.request;
        // A compiled language's unit tests live in its product files, which the cache's keys
        // do not digest as test files: a verdict it stored could outlive a changed test.
        let compiled = planned.language.compiles();
        let requested = request
            .cache
            .as_ref()
            .filter(|c| c.cache.stores() && !compiled);
        let outcome = match (&request.cache, requested) {
            (Some(_), None) if compiled => Some(mutant_cache::CacheOutcome {
                not_used: Some(format!(
                    "{} mutants are not cached: its tests share the product files the keys digest",
                    planned.language.name()
                )),
                ..mutant_cache::CacheOutcome::default()
            }),
            (_, requested) => requested.map(|_| mutant_cache::CacheOutcome::default()),
        };
        Caching {
            cache: requested,
            outcome,
        }
    }

    /// Decides what each mutant runs and what that costs, or its verdict when it needs no run.
    pub(super) fn choose_runs(
        &self,
        planned: &Planned,
        schemata: Option<&Schemata>,
        baseline: &Baseline,
        cache: Option<&mutant_cache::MutantCache>,
        index: usize,
    ) -> Result<Choices, MutateError> {
        let request = self.request;
        let (tree, mutants) = (&planned.tree, &planned.plan.mutants);
        let bytes = planned.bytes();
        let baseline_time = baseline.time;
        let coverage = &baseline.coverage;
        let prebuilt = schemata.and_then(|s| s.prebuilt());
        // A mutant built on its own pays a build on top of the prebuilt tests' run.
        let built_alone_time = match (schemata, &prebuilt) {
            (Some(s), Some(_)) => baseline_time.saturating_add(s.schema.one_build),
            _ => baseline_time,
        };
        // Process start-up and collection: the part of the baseline no single test accounts
        // for.
        let overhead = coverage.as_ref().map_or(baseline_time, |map| {
            // The durations are the conftest's, which the project under test controls.
            baseline_time.saturating_sub(assay_common::reported_secs(
                map.durations.values().sum::<f64>(),
            ))
        });

        let prefix = self.mutant_prefix(coverage.is_some());
        let mut results: Vec<Option<MutantResult>> = vec![None; mutants.len()];
        let mut work = Vec::new();
        let scopes = scopes_of(mutants, &bytes);
        let mut keys = cache.map(|c| mutant_cache::Keys::new(request, tree, &c.context, &prefix));
        let mut keyed: BTreeMap<usize, String> = BTreeMap::new();
        for (at, mutant) in mutants.iter().enumerate() {
            if let Some(error) = schemata.and_then(|s| s.schema.unviable.get(&at)) {
                results[at] = Some(MutantResult {
                    verdict: Verdict::of(
                        Status::CompileError,
                        Some(format!("does not compile: {error}")),
                    ),
                    ..not_covered(mutant, "")
                });
                continue;
            }
            let held = schemata.is_some_and(|s| s.holds(at));
            let reach = match baseline.reached.as_ref().filter(|_| held) {
                Some(reached) => match reached.of(Entry::number_of(at)) {
                    Some(reach) => Some(reach),
                    None => {
                        results[at] = Some(not_covered(
                            mutant,
                            "no test reaches this code in the unmutated run",
                        ));
                        continue;
                    }
                },
                None => None,
            };
            // JavaScript: the test files that reach the mutant's site, as the schema traced them.
            let switched = schemata.and_then(|s| s.switched_tree()).filter(|_| held);
            let file_reach = match (switched, baseline.reached_files.as_ref()) {
                (Some(_), Some(reached)) => match reached.of(Entry::number_of(at)) {
                    Some(reach) => Some(reach),
                    None => {
                        results[at] = Some(not_covered(
                            mutant,
                            "no test file reaches this code in the unmutated run",
                        ));
                        continue;
                    }
                },
                _ => None,
            };
            let file_bytes = bytes.get(mutant.path.as_str()).copied().unwrap_or_default();
            let (covered_by, cost) = match coverage {
                Some(map) => {
                    let statement = scopes.get(at).map_or(mutant.line, |s| s.statement_line);
                    let lines = line_range(file_bytes, mutant);
                    match map.tests_running_in(mutant.path.as_str(), lines, statement) {
                        None => {
                            results[at] = Some(not_covered(mutant, "no test executes this line"));
                            continue;
                        }
                        // Only import-time code runs it: every test may observe it.
                        Some(tests) if tests.is_empty() => {
                            (Vec::new(), Cost::whole_suite(baseline_time))
                        }
                        Some(tests) => {
                            let mut tests: Vec<(f64, String)> = tests
                                .into_iter()
                                .map(|t| (map.durations.get(&t).copied().unwrap_or(0.0), t))
                                .collect();
                            // Fastest first, so `-x` stops at the cheapest kill.
                            tests.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
                            let forked =
                                assay_common::reported_secs(tests.iter().map(|t| t.0).sum());
                            let cost = Cost {
                                whole: overhead.saturating_add(forked),
                                forked: Some(forked),
                            };
                            (tests.into_iter().map(|t| t.1).collect(), cost)
                        }
                    }
                }
                None => (Vec::new(), Cost::whole_suite(baseline_time)),
            };
            let (covered_by, command) = match &baseline.package_tests {
                // Go: the mutant's package, built with the edit, runs the tests it ran
                // unmutated (`go test` takes packages, and `-count=1` keeps its cache from
                // answering).
                Some(by_package) => {
                    let dir = package_dir(mutant.path.as_str());
                    let Some(tests) = by_package.get(dir).filter(|t| !t.is_empty()) else {
                        results[at] = Some(not_covered(
                            mutant,
                            "no test of its package ran in the unmutated run",
                        ));
                        continue;
                    };
                    let names: Vec<String> = tests
                        .iter()
                        .map(|id| id.rsplit("::").next().unwrap_or(id).to_owned())
                        .collect();
                    let command =
                        request
                            .runner
                            .command(&prefix, &[mutant.path.as_str().to_owned()], &names);
                    (tests.clone(), command)
                }
                None => {
                    let command = self.mutant_command(&prefix, &covered_by);
                    (covered_by, command)
                }
            };
            if let (Some(keys), Some(scope)) = (keys.as_mut(), scopes.get(at)) {
                let source = std::str::from_utf8(file_bytes).unwrap_or_default();
                keyed.insert(at, keys.key(mutant, source, scope, &covered_by, &command)?);
            }
            let reached_files: Vec<String> = match file_reach {
                Some(FileReach::Files(files)) => files.iter().cloned().collect(),
                _ => Vec::new(),
            };
            let package_tests = covered_by;
            let covered_by = match (reach, file_reach) {
                (Some(reach), _) => reach.covered_by(),
                (None, Some(FileReach::Files(_))) => reached_files.clone(),
                (None, _) => package_tests.clone(),
            };
            let only = match reach {
                Some(Reach::Tests(selection)) => Some(selection.clone()),
                _ => None,
            };
            let (only, covered_by) = match schemata.filter(|_| held) {
                Some(s) => match s.selection(mutant.path.as_str(), only) {
                    // Go: the tests its run names, or every test its package ran.
                    Some(only) if s.is_go() => {
                        let named = only.as_ref().and_then(|o| {
                            let names = Reach::Tests(o.clone()).covered_by();
                            (!names.iter().any(|n| n.ends_with("::*"))).then_some(names)
                        });
                        (only, named.unwrap_or(package_tests))
                    }
                    Some(only) => (only, covered_by),
                    None => {
                        results[at] = Some(not_covered(
                            mutant,
                            "no test of its package reaches this code in the unmutated run",
                        ));
                        continue;
                    }
                },
                None => (only, covered_by),
            };
            let mut batch = None;
            let (job, cost) = match (&prebuilt, switched) {
                (Some(prebuilt), _) if held => (
                    schemata::run_spec(request, prebuilt, index + at, at + 1, only),
                    cost,
                ),
                (None, Some(tree)) => {
                    let runner = request.runner.runner();
                    let command =
                        runner.rerunning_failures(runner.mutant_command(&prefix, &reached_files));
                    // Its limit follows from the files it runs, where the unmutated run
                    // measured each one.
                    let cost = match (file_reach, baseline.reached_files.as_ref()) {
                        (Some(FileReach::Files(files)), Some(reached)) => {
                            reached.cost_of(files).map_or(cost, Cost::whole_suite)
                        }
                        _ => cost,
                    };
                    batch = (!reached_files.is_empty()).then(|| BatchMember {
                        mutant: Entry::number_of(at),
                        files: reached_files.clone(),
                        limit_ms: 0,
                    });
                    (
                        schemata::switched_spec(request, tree, index + at, at + 1, command),
                        cost,
                    )
                }
                _ => {
                    let mut job = self.spec(tree, index + at, command);
                    job.edit = Some(mutant.edit.clone());
                    let cost = match schemata {
                        Some(_) => Cost::whole_suite(built_alone_time),
                        None => cost,
                    };
                    (job, cost)
                }
            };
            results[at] = Some(MutantResult {
                mutant: mutant.clone(),
                verdict: Verdict::of(Status::Pending, None),
                covered_by,
                flaky: false,
                cached: None,
            });
            work.push(Work {
                at,
                spec: job,
                cost,
                batch,
            });
        }
        // The keys borrow the prefix, which the choices keep.
        drop(keys);
        // Two mutants with one key (identical functions, say) cannot be told apart by it:
        // neither is answered or stored.
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for key in keyed.values() {
            *seen.entry(key.clone()).or_default() += 1;
        }
        keyed.retain(|_, key| seen.get(key) == Some(&1));
        Ok(Choices {
            results,
            work,
            keyed,
            prefix,
            batched: (0, 0),
        })
    }

    /// Decides which mutants a stored verdict answers; those no longer run.
    pub(super) async fn answer_from_cache(&self, choices: &mut Choices, caching: &mut Caching<'_>) {
        let (Some(c), Some(outcome)) = (caching.cache, caching.outcome.as_mut()) else {
            return;
        };
        outcome.eligible = choices.work.len();
        let format = self.request.runner.report_format();
        let mut left = Vec::with_capacity(choices.work.len());
        for w in std::mem::take(&mut choices.work) {
            let Some(key) = choices.keyed.get(&w.at) else {
                left.push(w);
                continue;
            };
            match c.lookup(key, &format).await {
                mutant_cache::Lookup::Hit(entry) => {
                    if let Some(slot) = choices.results[w.at].as_mut() {
                        let answer = entry.answer(&slot.mutant, slot.covered_by.clone());
                        *slot = answer;
                    }
                    outcome.served += 1;
                }
                mutant_cache::Lookup::Refused(why) => {
                    tracing::warn!(
                        key,
                        %why,
                        "refusing a mutant cache entry that failed its checks"
                    );
                    outcome.refused.push((key.clone(), why.to_string()));
                    left.push(w);
                }
                mutant_cache::Lookup::Miss => left.push(w),
            }
        }
        choices.work = left;
    }
}
