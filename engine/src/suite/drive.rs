//! One suite run from its cases to its jobs' results, for embedded and fleet runs alike: where
//! the cases come from, how they are batched, and the rounds of jobs.
//!
//! A run lists its cases first (the runner's listing job, or the tree) unless history already
//! knows them: a pytest suite run as `PYTHON -m pytest` whose last run recorded its collected
//! cases is batched from that list at once, each batch collecting the suite itself and running
//! only its own cases (see [`assay_common::runner::PYTEST_SELECT_SCRIPT`]), so no listing session
//! runs before the batches. The batches' reports say what the tree collects now: a case no
//! longer collected is dropped, as a listing would have dropped it, and a case history did not
//! know runs in one more round of batches. A first run of such a suite runs no listing either:
//! one batch per slot collects the suite and runs its part of it, split by node id
//! ([`assay_common::runner::partition_of`]).
//!
//! Before batching, a run with a result cache has it answer what it can ([`super::cache`]):
//! only the other cases are batched, and a run whose every case is answered runs no job.

use super::case_cache::CaseCache;
use super::conclude::{self, CaseVerdict};
use super::driven::Answers;
use super::driven::{CaseSource, Driven};
use super::halt::AdmissionGate;
use super::history::{CaseList, History};
use super::ledger::Ledger;
use super::runners::{self, BatchCollection, SuiteSetup};
use super::select::{self, SelectError, Selectors};
use super::shard::{self, ShardMode};
use super::{
    CollectError, Collection, StopReason, SuiteEvent, SuiteProgress, SuiteRun, collect, plan_suite,
    run_admitted,
};
use assay_common::job::{JobResult, JobSpec};
use assay_common::outcome::ReportOutcome;
use assay_common::runner;
use assay_common::suite::{CaseOutcome, SuiteCase, parse_pytest_collection};
use assay_common::{JobId, ProofId, TreeId};
use assay_transport::queue::{JobQueue, QueueError};
use assay_transport::store::{ArtifactStore, read_named};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

/// What a suite run needs besides its queue, store, gate and progress.
pub struct DriveRequest<'a> {
    /// The run's id, which names its jobs.
    pub run_id: &'a ProofId,
    /// The runner and its configured command.
    pub setup: &'a SuiteSetup,
    /// The repository's root.
    pub repo: &'a Path,
    /// The tree the jobs run on.
    pub tree: &'a TreeId,
    /// Each job's wall-clock limit, in seconds.
    pub timeout_secs: u64,
    /// Jobs in flight at once (`--jobs`).
    pub slots: usize,
    /// How the cases are split into jobs (`--shards`).
    pub shards: ShardMode,
    /// Which cases to run, as given.
    pub selectors: &'a Selectors,
    /// The branch's history: recorded durations balance the batches; recorded cases may spare
    /// the listing.
    pub history: &'a History,
    /// Failures the ledger excuses are reported to the progress as quarantined.
    pub ledger: &'a Ledger,
    /// `YYYY-MM-DD`, for the ledger's expiries.
    pub today: &'a str,
    /// The result cache, when this run may use it: cases it answers run no job.
    pub cache: Option<&'a CaseCache>,
}

/// Why a suite's cases could not be collected, selected or run.
#[derive(Debug, thiserror::Error)]
pub enum DriveError {
    /// Listing the cases failed.
    #[error(transparent)]
    Collect(#[from] CollectError),
    /// A selector is malformed, repeated, or matches no collected case.
    #[error(transparent)]
    Select(#[from] SelectError),
    /// Submitting the jobs or waiting for their results failed.
    #[error("running the suite's jobs failed")]
    Queue(#[source] QueueError),
}

/// What the progress hears while a suite runs, in cases.
pub enum RunEvent<'a> {
    /// The cases known before the first job (`None`: a first run's batches count them as
    /// they report); the history-planned count may change once the batches say what the tree
    /// collects.
    Planned {
        /// Cases known before the first job; `None` on a first run.
        cases: Option<usize>,
    },
    /// A job finished: its cases, each with its outcome.
    Finished {
        /// The job's cases, each with its verdict.
        cases: &'a [CaseVerdict<'a>],
        /// Cases of the job whose outcome waits for the run's end (history-planned cases the
        /// report does not name: removed from the tree, or run again in a later round).
        pending: usize,
    },
    /// Admission stopped before every job was admitted.
    Stopped {
        /// Why it stopped.
        reason: &'a StopReason,
    },
}

/// Whoever follows a suite run case by case (a terminal display, a log).
pub trait RunProgress: Send + Sync {
    /// Told of each event as it happens; must not block the run for long.
    fn event(&self, event: RunEvent<'_>);

    /// The suite's jobs are done; what follows (the audits' jobs, the conclusion) reports no
    /// more cases.
    fn driven(&self) {}
}

/// Collects the suite and applies the selectors: the cases a listing run shows.
pub async fn collect_selected(
    request: &DriveRequest<'_>,
    queue: &dyn JobQueue,
    store: &dyn ArtifactStore,
) -> Result<(Collection, Vec<SuiteCase>), DriveError> {
    let collection = collect(
        request.run_id,
        request.setup,
        request.repo,
        request.tree,
        request.timeout_secs,
        queue,
        store,
    )
    .await?;
    let chosen = select::select(&collection.cases, request.selectors)?;
    let cases = chosen
        .iter()
        .map(|&i| collection.cases[i].clone())
        .collect();
    Ok((collection, cases))
}

/// The recorded cases this run may be batched from without a listing: a pytest suite run as
/// `PYTHON -m pytest` with its default batching, no selector, and cases recorded for the same
/// command.
pub fn recorded_cases<'h>(request: &DriveRequest<'h>) -> Option<&'h CaseList> {
    let list = request.history.cases.as_ref()?;
    let usable = request.shards == ShardMode::Auto
        && request.selectors.is_empty()
        && request.setup.select_command(&[]).is_some()
        && list.command == request.setup.prefix
        && !list.ids.is_empty();
    usable.then_some(list)
}

/// Runs the suite: cases from history when it knows them (see [`recorded_cases`]), else from
/// the listing; batches by `request.shards`; the jobs admitted under the slots and the gate.
pub async fn run(
    request: &DriveRequest<'_>,
    queue: &dyn JobQueue,
    store: &dyn ArtifactStore,
    gate: &dyn AdmissionGate,
    progress: &dyn RunProgress,
) -> Result<Driven, DriveError> {
    if let Some(list) = recorded_cases(request) {
        return run_recorded(request, list, queue, store, gate, progress).await;
    }
    if partitionable(request)
        && let Some(driven) = run_partitioned(request, queue, store, gate, progress).await?
    {
        return Ok(driven);
    }
    let (collection, cases) = collect_selected(request, queue, store).await?;
    let setup = request.setup;
    let mode = match request.shards {
        ShardMode::Auto if !setup.batches_by_default() => ShardMode::PerCase,
        mode => mode,
    };
    let answers = answer(request, &cases).await;
    let (missed, missed_cases) = unanswered(&cases, &answers);
    let refs: Vec<String> = missed_cases.iter().map(SuiteCase::reference).collect();
    let (estimates, known) = shard::estimate_durations(&refs, &request.history.durations);
    let shards = remap(
        shard::heaviest_first(
            runners::split_shards(
                setup,
                &missed_cases,
                shard::plan_grouped_batches(
                    mode,
                    &estimates,
                    known,
                    request.slots,
                    &missed_cases
                        .iter()
                        .map(|case| setup.session_group(case))
                        .collect::<Vec<_>>(),
                ),
            ),
            &estimates,
        ),
        &missed,
    );
    let plan = plan_suite(
        request.run_id,
        setup,
        request.tree,
        (&cases, collection.corpus.as_ref()),
        &shards,
        request.timeout_secs,
    );
    progress.event(RunEvent::Planned {
        cases: Some(cases.len()),
    });
    tell_answered(&cases, &answers, progress);
    let relay = Relay {
        request,
        cases: &cases,
        shards: &shards,
        base: 0,
        defer_unnamed: false,
        progress,
    };
    let run = run_admitted(&plan, queue, request.slots, gate, &relay)
        .await
        .map_err(DriveError::Queue)?;
    let source = match collection.listing_s {
        Some(_) => CaseSource::Listing,
        None => CaseSource::Tree,
    };
    Ok(Driven {
        collected: collection.cases,
        cases,
        corpus: collection.corpus,
        plan,
        shards,
        run,
        source,
        startup_s: collection.listing_s,
        answers,
    })
}

/// A run batched from the recorded cases: one round over them, then what the batches collected
/// decides the cases, and cases the record did not know run in one more round.
async fn run_recorded(
    request: &DriveRequest<'_>,
    list: &CaseList,
    queue: &dyn JobQueue,
    store: &dyn ArtifactStore,
    gate: &dyn AdmissionGate,
    progress: &dyn RunProgress,
) -> Result<Driven, DriveError> {
    let planned = parse_pytest_collection(&list.ids.join("\n"));
    // Only a list collected from this very tree says which cases it has without a batch
    // collecting them; another tree's list may lack some, which only a batch would find.
    let answers = match list.tree.as_ref() == Some(request.tree) {
        true => answer(request, &planned).await,
        false => Answers::default(),
    };
    let (missed, missed_cases) = unanswered(&planned, &answers);
    progress.event(RunEvent::Planned {
        cases: Some(planned.len()),
    });
    tell_answered(&planned, &answers, progress);
    if missed.is_empty() && !planned.is_empty() {
        // Every case answered: nothing runs.
        return Ok(Driven {
            collected: planned.clone(),
            cases: planned,
            corpus: None,
            plan: Vec::new(),
            shards: Vec::new(),
            run: SuiteRun {
                results: Vec::new(),
                stopped: None,
            },
            source: CaseSource::History,
            startup_s: list.startup_s,
            answers,
        });
    }
    let shards = remap(
        batches(
            request,
            &missed_cases,
            ShardMode::Auto,
            &request.history.durations,
        ),
        &missed,
    );
    let plan = selecting_plan(request, &planned, &shards, 0);
    let relay = Relay {
        request,
        cases: &planned,
        shards: &shards,
        base: 0,
        defer_unnamed: true,
        progress,
    };
    let batches = Batches::Recorded {
        cases: &planned,
        shards: &shards,
        answers: &answers,
    };
    let round = FirstRound::run(plan, batches, (queue, gate), request.slots, &relay).await?;
    match settle(request, round, store, gate, progress, queue).await? {
        Settled::Cases(mut driven) => {
            driven.startup_s = list.startup_s;
            Ok(driven)
        }
        Settled::NothingCollected(FirstRound { plan, run, .. }) => {
            // No batch said what the tree collects (every one stopped, timed out or failed to
            // run): the recorded cases stand, each with its job's result.
            Ok(Driven {
                collected: planned.clone(),
                cases: planned,
                corpus: None,
                plan,
                shards,
                run,
                source: CaseSource::History,
                startup_s: list.startup_s,
                answers,
            })
        }
    }
}

/// May this run skip its listing though history knows no cases? A suite whose runner can
/// partition it (pytest run as `PYTHON -m pytest`, unittest through the adapter), with its
/// default batching and no selector: then one batch per slot collects the whole suite and runs
/// its part of it (see [`runners::SuiteSetup::partition_command`]), as each xdist worker
/// collects the suite and runs what it is sent.
///
/// A runner whose later runs cannot be batched from recorded cases (no
/// [`SuiteSetup::select_command`]) lists them instead once history knows the suite, so that the
/// result cache answers what it can before anything runs; without a cache, it always partitions.
fn partitionable(request: &DriveRequest<'_>) -> bool {
    let setup = request.setup;
    let history_knows_suite =
        request.history.cases.is_some() || !request.history.durations.is_empty();
    request.shards == ShardMode::Auto
        && request.selectors.is_empty()
        && setup.partition_command(0, 1).is_some()
        && (setup.select_command(&[]).is_some() || request.cache.is_none() || !history_knows_suite)
}

/// A first run without a listing: `slots` batches, each running the cases
/// [`assay_common::runner::partition_of`] puts in its part; `None` when no batch said what the
/// tree collects, so that the run lists its cases as any other would (and fails as the listing
/// fails).
async fn run_partitioned(
    request: &DriveRequest<'_>,
    queue: &dyn JobQueue,
    store: &dyn ArtifactStore,
    gate: &dyn AdmissionGate,
    progress: &dyn RunProgress,
) -> Result<Option<Driven>, DriveError> {
    let parts = request.slots.max(1);
    let mut plan = plan_suite(
        request.run_id,
        request.setup,
        request.tree,
        (&[], None),
        &vec![Vec::new(); parts],
        request.timeout_secs,
    );
    for spec in &mut plan {
        if let Some(command) = request.setup.partition_command(spec.index as usize, parts) {
            spec.command = command;
        }
    }
    progress.event(RunEvent::Planned { cases: None });
    let relay = ReportRelay { request, progress };
    let batches = Batches::Partitioned { parts };
    let round = FirstRound::run(plan, batches, (queue, gate), request.slots, &relay).await?;
    Ok(
        match settle(request, round, store, gate, progress, queue).await? {
            Settled::Cases(driven) => Some(driven),
            Settled::NothingCollected(_) => None,
        },
    )
}

/// How the first round's batches chose their cases.
enum Batches<'a> {
    /// Each batch ran its shard of these recorded cases; the cache answered the others.
    Recorded {
        cases: &'a [SuiteCase],
        shards: &'a [Vec<usize>],
        answers: &'a Answers,
    },
    /// Batch `k` ran the collected cases whose part of `parts` is `k`.
    Partitioned { parts: usize },
}

/// A first round of batches that each collected the suite themselves, as it ran.
struct FirstRound<'a> {
    plan: Vec<JobSpec>,
    run: SuiteRun,
    batches: Batches<'a>,
}

impl<'a> FirstRound<'a> {
    /// Runs `plan` under the slots and the gate, its progress told by `relay`.
    async fn run(
        plan: Vec<JobSpec>,
        batches: Batches<'a>,
        (queue, gate): (&dyn JobQueue, &dyn AdmissionGate),
        slots: usize,
        relay: &dyn SuiteProgress,
    ) -> Result<FirstRound<'a>, DriveError> {
        let run = run_admitted(&plan, queue, slots, gate, relay)
            .await
            .map_err(DriveError::Queue)?;
        Ok(FirstRound { plan, run, batches })
    }
}

enum Settled<'a> {
    Cases(Driven),
    /// No batch recorded what it collected; the round as it ran.
    NothingCollected(FirstRound<'a>),
}

/// What the first round's batches collected decides the run's cases: the first batch's
/// collection, by plan index, that recorded one. Each batch keeps the cases it was to run and
/// collected; cases no batch took run in one more round.
async fn settle<'a>(
    request: &DriveRequest<'_>,
    round: FirstRound<'a>,
    store: &dyn ArtifactStore,
    gate: &dyn AdmissionGate,
    progress: &dyn RunProgress,
    queue: &dyn JobQueue,
) -> Result<Settled<'a>, DriveError> {
    let suite_runner = request.setup.runner;
    let mut collected_by_job: Vec<Option<Vec<SuiteCase>>> = Vec::with_capacity(round.plan.len());
    for result in round.run.results.iter() {
        let collected = match result {
            Some(result) => batch_collection(request.setup, result, store).await,
            None => BatchCollection::Unrecorded,
        };
        if let (
            Some(result),
            BatchCollection::Broken {
                error,
                told_in_output,
            },
        ) = (result, &collected)
        {
            // The listing would have failed on it before anything ran; so does this run, with
            // the runner's account of it where the batch's output has one.
            let output = match read_named(store, result, "stdout").await {
                Ok(Some(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
                _ => String::new(),
            };
            let detail = match output.trim() {
                out if !out.is_empty() && *told_in_output => super::output_tail(&output),
                _ => format!(":\n{}: {}", error.file, error.message),
            };
            return Err(CollectError::Guest {
                runner: suite_runner,
                how: format!("{} failed to collect", error.file),
                detail,
            }
            .into());
        }
        collected_by_job.push(match collected {
            BatchCollection::Cases(cases) => Some(cases),
            _ => None,
        });
    }
    let Some(reference) = collected_by_job.iter().flatten().next() else {
        return Ok(Settled::NothingCollected(round));
    };
    let cases = reference.clone();
    let position: BTreeMap<&str, usize> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id.as_str(), i))
        .collect();
    let mut taken = vec![false; cases.len()];
    // A case the cache answered is taken: no batch ran it, and no later round runs it.
    let mut answers = Answers::default();
    if let Batches::Recorded {
        cases: planned,
        answers: recorded,
        ..
    } = &round.batches
    {
        answers.looked_up = recorded.looked_up;
        answers.refused = recorded.refused.clone();
        for (&i, report) in &recorded.reports {
            if let Some(&p) = position.get(planned[i].id.as_str()) {
                taken[p] = true;
                answers.reports.insert(p, report.clone());
            }
        }
    }
    let mut members: Vec<Vec<usize>> = Vec::with_capacity(round.plan.len());
    for (k, collected) in collected_by_job.iter().enumerate() {
        let own: Option<HashSet<&str>> = collected
            .as_ref()
            .map(|cases| cases.iter().map(|c| c.id.as_str()).collect());
        let intended: Vec<&str> = match &round.batches {
            Batches::Recorded {
                cases: planned,
                shards,
                ..
            } => shards
                .get(k)
                .into_iter()
                .flatten()
                .map(|&i| planned[i].id.as_str())
                .collect(),
            Batches::Partitioned { parts } => cases
                .iter()
                .filter(|c| runner::partition_of(request.setup.partition_key(c), *parts) == k)
                .map(|c| c.id.as_str())
                .collect(),
        };
        let mut mine: Vec<usize> = intended
            .into_iter()
            // A batch that collected its own list ran only what it collected.
            .filter(|id| own.as_ref().is_none_or(|own| own.contains(id)))
            .filter_map(|id| position.get(id).copied())
            .filter(|&i| !std::mem::replace(&mut taken[i], true))
            .collect();
        mine.sort_unstable();
        members.push(mine);
    }
    let source = match round.batches {
        Batches::Recorded { .. } => CaseSource::History,
        Batches::Partitioned { .. } => CaseSource::Partitions,
    };
    let FirstRound { mut plan, run, .. } = round;
    let mut results = run.results;
    let mut stopped = run.stopped;
    let added: Vec<usize> = (0..cases.len()).filter(|&i| !taken[i]).collect();
    if stopped.is_none() && !added.is_empty() {
        let sub: Vec<SuiteCase> = added.iter().map(|&i| cases[i].clone()).collect();
        let sub_shards = batches(request, &sub, ShardMode::Auto, &request.history.durations);
        let round: Vec<Vec<usize>> = sub_shards
            .iter()
            .map(|s| s.iter().map(|&j| added[j]).collect())
            .collect();
        let round_plan = selecting_plan(request, &cases, &round, plan.len());
        let relay = Relay {
            request,
            cases: &cases,
            shards: &round,
            base: plan.len(),
            defer_unnamed: false,
            progress,
        };
        let second = run_admitted(&round_plan, queue, request.slots, gate, &relay)
            .await
            .map_err(DriveError::Queue)?;
        plan.extend(round_plan);
        members.extend(round);
        results.extend(second.results);
        stopped = second.stopped;
    }
    Ok(Settled::Cases(Driven {
        collected: cases.clone(),
        cases,
        corpus: None,
        plan,
        shards: members,
        run: SuiteRun { results, stopped },
        source,
        startup_s: None,
        answers,
    }))
}

/// The cache's answers for `cases`, when the run has a cache.
async fn answer(request: &DriveRequest<'_>, cases: &[SuiteCase]) -> Answers {
    match request.cache {
        Some(cache) => cache.answer(cases, request.ledger, request.today).await,
        None => Answers::default(),
    }
}

/// The cases the cache did not answer: their indices into `cases`, and the cases.
fn unanswered(cases: &[SuiteCase], answers: &Answers) -> (Vec<usize>, Vec<SuiteCase>) {
    (0..cases.len())
        .filter(|i| !answers.reports.contains_key(i))
        .map(|i| (i, cases[i].clone()))
        .unzip()
}

/// Shards over a subset of the cases (`subset[j]` is the index of its case `j`) as indices
/// into all of them.
fn remap(shards: Vec<Vec<usize>>, subset: &[usize]) -> Vec<Vec<usize>> {
    shards
        .into_iter()
        .map(|shard| shard.into_iter().map(|j| subset[j]).collect())
        .collect()
}

/// Tells the progress the cases the cache answered, as one finished lot.
fn tell_answered(cases: &[SuiteCase], answers: &Answers, progress: &dyn RunProgress) {
    if answers.reports.is_empty() {
        return;
    }
    let verdicts: Vec<CaseVerdict<'_>> = answers
        .reports
        .iter()
        .map(|(&i, report)| CaseVerdict {
            case: &cases[i],
            outcome: report.outcome,
            lane: report.lane,
            quarantined: false,
        })
        .collect();
    progress.event(RunEvent::Finished {
        cases: &verdicts,
        pending: 0,
    });
}

/// Batches for `cases`, balanced by the recorded durations, heaviest first.
fn batches(
    request: &DriveRequest<'_>,
    cases: &[SuiteCase],
    mode: ShardMode,
    durations: &BTreeMap<String, f64>,
) -> Vec<Vec<usize>> {
    let refs: Vec<String> = cases.iter().map(SuiteCase::reference).collect();
    let (estimates, known) = shard::estimate_durations(&refs, durations);
    let groups: Vec<Option<String>> = cases
        .iter()
        .map(|case| request.setup.session_group(case))
        .collect();
    shard::plan_grouped_batches(mode, &estimates, known, request.slots, &groups)
}

/// Jobs for `shards` (indices into `cases`) whose sessions select their own cases, numbered
/// from `base`.
fn selecting_plan(
    request: &DriveRequest<'_>,
    cases: &[SuiteCase],
    shards: &[Vec<usize>],
    base: usize,
) -> Vec<JobSpec> {
    let mut plan = plan_suite(
        request.run_id,
        request.setup,
        request.tree,
        (cases, None),
        shards,
        request.timeout_secs,
    );
    for (spec, members) in plan.iter_mut().zip(shards) {
        let ids: Vec<String> = members.iter().map(|&i| cases[i].id.clone()).collect();
        if let Some(command) = request.setup.select_command(&ids) {
            spec.command = command;
        }
        let index = spec.index as usize + base;
        spec.index = index as u32;
        spec.job_id = JobId::for_index(request.run_id, index);
    }
    plan
}

/// What a finished batch's session collected, from its report.
async fn batch_collection(
    setup: &SuiteSetup,
    result: &JobResult,
    store: &dyn ArtifactStore,
) -> BatchCollection {
    let report = match read_named(store, result, "report").await {
        Ok(bytes) => bytes,
        Err(e) => {
            tracing::warn!(job = result.index, error = %e, "cannot read a batch's report");
            None
        }
    };
    setup.batch_collection(result.report.parsed(), report.as_deref())
}

/// The progress of batches whose cases are known only from their reports: each finished
/// batch's reported cases, by node id.
struct ReportRelay<'a> {
    request: &'a DriveRequest<'a>,
    progress: &'a dyn RunProgress,
}

impl SuiteProgress for ReportRelay<'_> {
    fn event(&self, event: SuiteEvent<'_>) {
        match event {
            SuiteEvent::JobFinished { result, .. } => {
                let cases: Vec<SuiteCase> = match &result.report {
                    ReportOutcome::Parsed(report) => self.request.setup.reported_cases(report),
                    _ => Vec::new(),
                };
                let verdicts: Vec<CaseVerdict<'_>> = cases
                    .iter()
                    .map(|case| {
                        conclude::verdict(case, result, self.request.ledger, self.request.today)
                    })
                    .collect();
                self.progress.event(RunEvent::Finished {
                    cases: &verdicts,
                    pending: 0,
                });
            }
            SuiteEvent::Stopped { reason } => self.progress.event(RunEvent::Stopped { reason }),
        }
    }
}

/// Turns the queue's job events into case events for the run's progress.
struct Relay<'a> {
    request: &'a DriveRequest<'a>,
    cases: &'a [SuiteCase],
    shards: &'a [Vec<usize>],
    /// The plan index of `shards[0]`.
    base: usize,
    /// Hold back cases the report does not name: history may list cases the tree dropped.
    defer_unnamed: bool,
    progress: &'a dyn RunProgress,
}

impl SuiteProgress for Relay<'_> {
    fn event(&self, event: SuiteEvent<'_>) {
        match event {
            SuiteEvent::JobFinished { spec, result } => {
                let Some(members) = (spec.index as usize)
                    .checked_sub(self.base)
                    .and_then(|k| self.shards.get(k))
                else {
                    return;
                };
                let mut verdicts = Vec::with_capacity(members.len());
                let mut pending = 0;
                for &i in members {
                    let case = &self.cases[i];
                    let verdict =
                        conclude::verdict(case, result, self.request.ledger, self.request.today);
                    let unnamed = verdict.outcome == CaseOutcome::Error
                        && match &result.report {
                            ReportOutcome::Parsed(report) => {
                                !report.cases.iter().any(|c| case.owns(c))
                            }
                            ReportOutcome::ZeroTests => true,
                            _ => false,
                        };
                    if self.defer_unnamed && unnamed {
                        pending += 1;
                    } else {
                        verdicts.push(verdict);
                    }
                }
                self.progress.event(RunEvent::Finished {
                    cases: &verdicts,
                    pending,
                });
            }
            SuiteEvent::Stopped { reason } => self.progress.event(RunEvent::Stopped { reason }),
        }
    }
}
