//! Running the mutants: first runs in order of expected cost under the budget, the second run
//! that confirms a kill, each run judged, and the trusted verdicts stored in the cache.

use super::*;

impl<'a> Campaign<'a> {
    /// Decides the mutants' order (the most verdicts in the budget); runs and judges each.
    pub(super) async fn run_first(
        &self,
        planned: &Planned,
        baseline: &Baseline,
        choices: &mut Choices,
        caching: &Caching<'_>,
    ) -> Result<FirstRuns, MutateError> {
        let (request, progress) = (self.request, self.progress);
        let mutants = &planned.plan.mutants;
        let compiled = planned.language.compiles();
        let served = caching.outcome.as_ref().map_or(0, |o| o.served);
        // What is settled without a run, counted by its verdict as the summary counts it.
        let running: std::collections::BTreeSet<usize> =
            choices.work.iter().map(|w| w.at).collect();
        let settled = |status: Status| {
            choices
                .results
                .iter()
                .enumerate()
                .filter(|(at, result)| {
                    !running.contains(at)
                        && result
                            .as_ref()
                            .is_some_and(|r| r.cached.is_none() && r.verdict.status == status)
                })
                .count()
        };
        progress.mutate_event(MutateEvent::Started {
            mutants: mutants.len(),
            to_run: choices.work.len(),
            cached: served,
            compile_errors: settled(Status::CompileError),
            no_coverage: settled(Status::NoCoverage),
            baseline: baseline.time,
        });
        // Longest first when everything fits (no straggler at the end), cheapest first when
        // the budget will cut the run short (the most verdicts per second).
        // Saturating: a cost can be `Duration::MAX` when the measured durations are absurd.
        let work = &mut choices.work;
        let total_cost = work
            .iter()
            .fold(Duration::ZERO, |sum, w| sum.saturating_add(w.cost.whole));
        let slots = u32::try_from(request.slots).unwrap_or(u32::MAX).max(1);
        let fits = (total_cost / slots).saturating_add(baseline.time) < request.budget;
        work.sort_by(|a, b| {
            let order = a.cost.whole.cmp(&b.cost.whole).then(a.at.cmp(&b.at));
            if fits { order.reverse() } else { order }
        });
        let work = &*work;

        let tally = std::sync::Mutex::new(Tally {
            done: mutants.len() - work.len(),
            ..Tally::default()
        });
        let mutants_started = Instant::now();
        let stores = caching.cache.is_some();
        let tell = |result: &JobResult, judged: &Judged| {
            let at = work
                .iter()
                .find(|w| w.spec.job_id == result.job_id)
                .map(|w| w.at);
            if let Some(mutant) = at.and_then(|at| mutants.get(at))
                && let Ok(mut tally) = tally.lock()
            {
                let elapsed = mutants_started.elapsed();
                let event = tally.record(judged, mutant, mutants.len(), work.len(), elapsed);
                progress.mutate_event(MutateEvent::MutantFinished(&event));
            }
        };
        // Switched mutants in batches first; what no batch settles runs alone.
        let batched = self
            .run_batches(
                (work, mutants.len()),
                &choices.prefix,
                baseline.time,
                (stores, compiled),
                |_, result, judged| tell(result, judged),
            )
            .await?;
        let alone: Vec<usize> = (0..work.len())
            .filter(|p| !batched.judged.contains_key(p))
            .collect();
        let specs: Vec<JobSpec> = alone.iter().map(|&p| work[p].spec.clone()).collect();
        let costs: BTreeMap<JobId, Cost> = work
            .iter()
            .map(|w| (w.spec.job_id.clone(), w.cost))
            .collect();
        let (judged_alone, mut runs) = self
            .run_judged(&specs, &costs, baseline.time, stores, compiled, tell)
            .await?;
        let settled = (batched.judged.len(), batched.batches);
        let mut judged: Vec<Option<Judged>> = vec![None; work.len()];
        for (position, outcome) in batched.judged {
            judged[position] = Some(outcome);
        }
        for (&position, outcome) in alone.iter().zip(judged_alone) {
            judged[position] = outcome;
        }
        runs.extend(batched.runs);
        choices.batched = settled;
        Ok(FirstRuns { judged, runs })
    }

    /// Runs `specs` at the limits their `costs` give (`baseline_time` for a job of unknown
    /// cost) and judges each result, telling `on_judged`; keeps each run's result for the
    /// cache's entries when verdicts are `stored`.
    pub(super) async fn run_judged(
        &self,
        specs: &[JobSpec],
        costs: &BTreeMap<JobId, Cost>,
        baseline_time: Duration,
        stored: bool,
        compiled: bool,
        on_judged: impl Fn(&JobResult, &Judged) + Send + Sync,
    ) -> Result<(Vec<Option<Judged>>, BTreeMap<JobId, JobResult>), MutateError> {
        let runs: std::sync::Mutex<BTreeMap<JobId, JobResult>> = Default::default();
        let judged = run_mutants(
            self.queue,
            specs,
            self.request.slots,
            Some(self.deadline()),
            |spec: &mut JobSpec| self.admit(spec, costs, baseline_time),
            |result, timeout| {
                if stored && let Ok(mut runs) = runs.lock() {
                    runs.insert(result.job_id.clone(), result.clone());
                }
                let judged = judge(result, timeout, compiled);
                on_judged(result, &judged);
                Some(judged)
            },
            |reason| Some(pending(reason)),
            |_, _, _| {},
        )
        .await
        .map_err(MutateError::Stopped)?;
        Ok((judged, runs.into_inner().unwrap_or_default()))
    }

    /// Records the first verdicts; decides by a second run whether an unconfirmed kill is flaky.
    pub(super) async fn confirm_kills(
        &self,
        planned: &Planned,
        baseline: &Baseline,
        choices: &mut Choices,
        first: FirstRuns,
        caching: &Caching<'_>,
    ) -> Result<Runs, MutateError> {
        let request = self.request;
        let mutants = planned.plan.mutants.len();
        let compiled = planned.language.compiles();
        // A kill is confirmed by one more run of the same selection (`-x` stops at the
        // killer); the second run's limit follows the same rules as the first. A kill the
        // mutant's own run already re-ran (see `mutants::rerun`) needs no second run, and a
        // timeout gets none (see `needs_second_run`).
        let mut again_specs = Vec::new();
        let mut again_at = Vec::new();
        for (w, outcome) in choices.work.iter().zip(&first.judged) {
            let Some(outcome) = outcome else { continue };
            if let Some(slot) = choices.results[w.at].as_mut() {
                outcome.apply(slot);
                if needs_second_run(slot.verdict.status, outcome.confirmed) {
                    let mut again = w.spec.clone();
                    let killers = killing_node_ids(&slot.covered_by, &slot.verdict.killed_by);
                    // Go's command names packages, not tests: its second run is the first again.
                    if slot.verdict.status == Status::Killed
                        && !killers.is_empty()
                        && again.binaries.is_none()
                        && request.runner.runner().reruns_named_tests()
                    {
                        let command = request.runner.command(&choices.prefix, &killers, &[]);
                        // A mutant with its edit runs on the project's tree, the rest on the
                        // schema's.
                        again.command = match again.edit {
                            Some(_) => self.on_own_tree(command),
                            None => command,
                        };
                    }
                    again.index += mutants as u32;
                    again.job_id = JobId::for_index(&request.run_id, again.index as usize);
                    again_specs.push(again);
                    again_at.push((w.at, w.cost));
                }
            }
        }
        if !again_specs.is_empty() {
            self.progress.mutate_event(MutateEvent::Confirming {
                kills: again_specs.len(),
            });
        }
        let again_costs: BTreeMap<JobId, Cost> = again_specs
            .iter()
            .zip(&again_at)
            .map(|(spec, (_, cost))| (spec.job_id.clone(), *cost))
            .collect();
        let stores = caching.cache.is_some();
        let (seconds, second_runs) = self
            .run_judged(
                &again_specs,
                &again_costs,
                baseline.time,
                stores,
                compiled,
                |_, _| {},
            )
            .await?;
        let mut second_of: BTreeMap<usize, JobId> = BTreeMap::new();
        for (((at, _), again), spec) in again_at.into_iter().zip(seconds).zip(&again_specs) {
            second_of.insert(at, spec.job_id.clone());
            if let (Some(slot), Some(again)) = (choices.results[at].as_mut(), again) {
                settle(slot, &again);
            }
        }
        Ok(Runs {
            first: first.runs,
            second: second_runs,
            second_of,
        })
    }

    /// Decides which verdicts may answer a later run (see `MutantCache::store`) and stores them.
    pub(super) async fn store_verdicts(
        &self,
        choices: &Choices,
        runs: Runs,
        caching: &mut Caching<'_>,
    ) {
        let (Some(c), Some(outcome)) = (caching.cache, caching.outcome.as_mut()) else {
            return;
        };
        let Runs {
            first: mut first_runs,
            second: mut second_runs,
            second_of,
        } = runs;
        for w in &choices.work {
            let (Some(key), Some(Some(slot))) =
                (choices.keyed.get(&w.at), choices.results.get(w.at))
            else {
                continue;
            };
            let Some(first) = first_runs.remove(&w.spec.job_id) else {
                continue;
            };
            let mut runs = vec![first];
            if let Some(second) = second_of.get(&w.at).and_then(|id| second_runs.remove(id)) {
                runs.push(second);
            }
            let member = w.batch.as_ref().map(|b| b.mutant);
            match c.store(key, &self.request.run_id, slot, runs, member).await {
                Ok(true) => outcome.stored += 1,
                Ok(false) => {}
                Err(e) => {
                    outcome.store_error = Some(error_chain(&e));
                    break;
                }
            }
        }
    }

    /// Each limit fits in what is left of the budget; a result that never comes (a lost job
    /// on a fleet) leaves its mutant pending at the budget's end plus a grace.
    pub(super) fn deadline(&self) -> Instant {
        self.started + self.request.budget + mutants::budget::MIN_TIME_TO_START
    }

    /// Sets a mutant job's limits from its expected cost (`fallback` for a job of unknown
    /// cost) and what is left of the budget.
    pub(super) fn admit(
        &self,
        spec: &mut JobSpec,
        costs: &BTreeMap<JobId, Cost>,
        fallback: Duration,
    ) -> Result<MutantTimeout, NotRunReason> {
        let budget_left = self.request.budget.saturating_sub(self.started.elapsed());
        let cost = costs.get(&spec.job_id).copied();
        limit_job(
            spec,
            budget_left,
            cost.unwrap_or(Cost::whole_suite(fallback)),
        )
    }
}

/// One mutant run's verdict before it is written into its record.
#[derive(Clone)]
pub(super) struct Judged {
    pub(super) verdict: Verdict,
    /// For a kill: what the run's own re-run of its killing tests said (`mutants::rerun`).
    pub(super) confirmed: Option<bool>,
}

impl Judged {
    fn apply(&self, slot: &mut MutantResult) {
        slot.verdict = self.verdict.clone();
        if self.verdict.status == Status::Killed && self.confirmed == Some(false) {
            slot.flaky = true;
            slot.verdict.status_reason =
                Some("flaky kill: the killing tests passed when re-run at once".into());
        }
    }
}

/// The node ids of the killing tests, to confirm a kill with those alone: empty when one
/// killer is not among the covering tests (a collection error, a broken session), so the
/// whole selection re-runs.
/// A mutant that runs no test, for `reason`.
pub(super) fn not_covered(mutant: &Mutant, reason: &str) -> MutantResult {
    MutantResult {
        mutant: mutant.clone(),
        verdict: Verdict {
            tests_completed: Some(0),
            ..Verdict::of(Status::NoCoverage, Some(reason.to_owned()))
        },
        covered_by: Vec::new(),
        flaky: false,
        cached: None,
    }
}

pub(super) fn killing_node_ids(covered_by: &[String], killed_by: &[String]) -> Vec<String> {
    if killed_by.is_empty() || !killed_by.iter().all(|killer| covered_by.contains(killer)) {
        return Vec::new();
    }
    let mut ids = killed_by.to_vec();
    ids.sort();
    ids.dedup();
    ids
}

/// Whether a mutant's verdict needs one more run: a kill its own session did not re-run.
/// A timeout is final at once: its limit was already ten times its expected cost plus 2 s,
/// so a retry would mostly repeat the hang at full price (formerly queued after every other
/// mutant), and either way the mutant counts as detected.
pub(super) fn needs_second_run(status: Status, confirmed: Option<bool>) -> bool {
    status == Status::Killed && confirmed.is_none()
}

/// Folds the second run of a killed mutant into its record: a kill the second run does not
/// repeat is flaky.
pub(super) fn settle(slot: &mut MutantResult, again: &Judged) {
    if (slot.verdict.status, again.verdict.status) == (Status::Killed, Status::Survived) {
        slot.flaky = true;
        slot.verdict.status_reason =
            Some("flaky kill: a second run of the same tests passed".into());
    }
}

pub(super) fn pending(reason: NotRunReason) -> Judged {
    Judged {
        verdict: Verdict {
            duration_s: Some(0.0),
            ..Verdict::of(Status::Pending, Some(reason.to_string()))
        },
        confirmed: None,
    }
}

/// Sets a mutant job's limits: the rule of [`mutants::mutate_timeout`] on its whole expected
/// cost (start-up, collection and its tests: a fresh session), and, when it runs node ids, the
/// same rule on its tests alone for a run in a fork of a collected session, which pays neither
/// start-up nor collection. Returns the fresh limit, which the judgement names.
pub(super) fn limit_job(
    spec: &mut JobSpec,
    budget_left: Duration,
    cost: Cost,
) -> Result<MutantTimeout, NotRunReason> {
    let timeout = mutants::mutate_timeout(budget_left, cost.whole)?;
    spec.timeout_secs = timeout.limit.as_secs().max(1);
    spec.forked_timeout_secs = match cost.forked {
        Some(tests) => Some(
            mutants::mutate_timeout(budget_left, tests)?
                .limit
                .min(timeout.limit)
                .as_secs()
                .max(1),
        ),
        None => None,
    };
    Ok(timeout)
}

/// `assay mutate`'s names for the one judgement (`mutants::judge`): Stryker's statuses, a hang
/// its own `Timeout`, a budget cut `Pending`, anything else that did not run `RuntimeError`;
/// for a `compiled` language, a build that failed before any test ran `CompileError`.
pub(super) fn judge(result: &JobResult, timeout: MutantTimeout, compiled: bool) -> Judged {
    let duration_s = Some(result.duration_ms as f64 / 1000.0);
    let verdict = |status, reason: Option<String>| Judged {
        verdict: Verdict {
            duration_s,
            ..Verdict::of(status, reason)
        },
        confirmed: None,
    };
    if let Some(error) = compile_error(result).filter(|_| compiled) {
        return verdict(
            Status::CompileError,
            Some(format!("does not compile: {error}")),
        );
    }
    match judge_run(result, timeout, Expected::EveryTestRun) {
        Judgement::Killed { by, reason } => Judged {
            verdict: Verdict {
                status: Status::Killed,
                status_reason: reason,
                killed_by: by,
                tests_completed: result
                    .report
                    .parsed()
                    .map(|r| r.cases.iter().filter(|c| !rerun::is_rerun(c)).count()),
                duration_s,
            },
            confirmed: result.report.parsed().and_then(rerun::confirmation),
        },
        Judgement::Survived { tests_run } => Judged {
            verdict: Verdict {
                status: Status::Survived,
                status_reason: None,
                killed_by: Vec::new(),
                tests_completed: Some(tests_run),
                duration_s,
            },
            confirmed: None,
        },
        Judgement::TimedOut { limit } => {
            // Stopped well before the fresh limit: the fork's own, tighter limit (`limit_job`).
            let ran = Duration::from_millis(result.duration_ms);
            let reason = if ran + Duration::from_secs(1) < limit {
                format!(
                    "ran past its {}s limit in a fork of the collected session ({}s in a fresh one)",
                    ran.as_secs_f64().round() as u64,
                    limit.as_secs()
                )
            } else {
                format!("ran past its {}s limit", limit.as_secs())
            };
            verdict(Status::Timeout, Some(reason))
        }
        Judgement::NotRun(reason @ NotRunReason::CutShort { .. }) => {
            verdict(Status::Pending, Some(reason.to_string()))
        }
        Judgement::NotRun(reason) => verdict(Status::RuntimeError, Some(reason.to_string())),
    }
}
