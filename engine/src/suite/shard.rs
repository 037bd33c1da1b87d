//! Sharding a suite into jobs by recorded durations: longest processing time first onto the
//! least-loaded shard, so one long shard does not set the finish time. Shards keep plan order
//! inside themselves; only their membership depends on durations.
//!
//! By default ([`ShardMode::Auto`]) a suite runs as a few batches per slot: each job is a whole
//! runner session (interpreter start-up, imports, collection), which costs more than most
//! tests do, so one job per case spends most of a run starting sessions.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// How `assay test` splits cases into jobs (`--shards`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShardMode {
    /// One batch per slot when every case has a recorded duration, else [`UNSURE_FACTOR`]
    /// per slot, so that a misjudged batch is not the last one left running.
    #[default]
    Auto,
    /// One case per job: each case its own runner session.
    PerCase,
    /// Exactly this many batches (fewer when there are fewer cases).
    Count(usize),
}

/// Batches per slot when some durations are unknown: enough that a batch holding an unknown
/// slow case finishes while the other slots work through the rest, few enough that the extra
/// session start-ups cost little.
pub const UNSURE_FACTOR: usize = 2;

/// A suite gets at least one batch per this many cases, so that a batch's argv (its node ids)
/// does not grow with the suite towards the kernel's limit.
pub const MAX_BATCH_CASES: usize = 2000;

impl FromStr for ShardMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "auto" => Ok(Self::Auto),
            "per-case" => Ok(Self::PerCase),
            _ if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => {
                match text.parse::<usize>() {
                    Ok(0) => Err("must be greater than zero".into()),
                    Ok(n) => Ok(Self::Count(n)),
                    Err(_) => Err(format!("{text} is too large")),
                }
            }
            _ => Err(format!(
                "{text:?} is not auto, per-case or a decimal number greater than zero"
            )),
        }
    }
}

impl fmt::Display for ShardMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::PerCase => f.write_str("per-case"),
            Self::Count(n) => write!(f, "{n}"),
        }
    }
}

/// The batches of a run: `durations` are the estimates, `known` whether every one was
/// recorded, `slots` the jobs in flight. Heaviest batch first, so the longest one starts first
/// and the rest fill in around it.
pub fn plan_batches(
    mode: ShardMode,
    durations: &[f64],
    known: bool,
    slots: usize,
) -> Vec<Vec<usize>> {
    let n = durations.len();
    let count = match mode {
        ShardMode::PerCase => return (0..n).map(|i| vec![i]).collect(),
        ShardMode::Count(k) => k,
        ShardMode::Auto => {
            let per_slot = if known { 1 } else { UNSURE_FACTOR };
            (slots.max(1) * per_slot).max(n.div_ceil(MAX_BATCH_CASES))
        }
    };
    heaviest_first(lpt_shards(durations, count), durations)
}

/// [`plan_batches`] for cases of which some must share a session: `groups[i]` names case
/// `i`'s group, and a group's cases land in one batch, in plan order (an explicit per-case run
/// is still one case per job). Cases without a group are batched as `plan_batches` does.
pub fn plan_grouped_batches(
    mode: ShardMode,
    durations: &[f64],
    known: bool,
    slots: usize,
    groups: &[Option<String>],
) -> Vec<Vec<usize>> {
    if mode == ShardMode::PerCase || groups.iter().all(Option::is_none) {
        return plan_batches(mode, durations, known, slots);
    }
    let mut units: Vec<Vec<usize>> = Vec::new();
    let mut unit_of: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (case, group) in groups.iter().enumerate() {
        match group.as_deref() {
            Some(group) => match unit_of.get(group) {
                Some(&unit) => units[unit].push(case),
                None => {
                    unit_of.insert(group, units.len());
                    units.push(vec![case]);
                }
            },
            None => units.push(vec![case]),
        }
    }
    let unit_durations: Vec<f64> = units
        .iter()
        .map(|unit| unit.iter().map(|&i| durations[i].max(0.0)).sum())
        .collect();
    let shards = plan_batches(mode, &unit_durations, known, slots)
        .into_iter()
        .map(|shard| {
            let mut cases: Vec<usize> = shard.iter().flat_map(|&u| units[u].clone()).collect();
            cases.sort_unstable();
            cases
        })
        .collect();
    heaviest_first(shards, durations)
}

/// Orders batches by estimated load, heaviest first; equal loads keep plan order.
pub fn heaviest_first(mut shards: Vec<Vec<usize>>, durations: &[f64]) -> Vec<Vec<usize>> {
    let load = |s: &Vec<usize>| s.iter().map(|&i| durations[i].max(0.0)).sum::<f64>();
    shards.sort_by(|a, b| load(b).total_cmp(&load(a)).then(a[0].cmp(&b[0])));
    shards
}

/// Splits cases with these (estimated) durations into at most `shards` non-empty shards.
pub fn lpt_shards(durations: &[f64], shards: usize) -> Vec<Vec<usize>> {
    let shards = shards.clamp(1, durations.len().max(1));
    let mut order: Vec<usize> = (0..durations.len()).collect();
    // Longest first; ties in plan order so the same input always gives the same shards.
    order.sort_by(|&a, &b| durations[b].total_cmp(&durations[a]).then(a.cmp(&b)));
    let mut loads = vec![0.0_f64; shards];
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); shards];
    for case in order {
        let lightest = (0..shards)
            .min_by(|&a, &b| loads[a].total_cmp(&loads[b]).then(a.cmp(&b)))
            .unwrap_or(0);
        loads[lightest] += durations[case].max(0.0);
        members[lightest].push(case);
    }
    let mut result: Vec<Vec<usize>> = members
        .into_iter()
        .filter(|m| !m.is_empty())
        .map(|mut m| {
            m.sort_unstable();
            m
        })
        .collect();
    result.sort_by_key(|m| m[0]);
    result
}

/// Durations for the planned cases from history: a recorded duration, else the median of the
/// recorded ones, else one second. The flag says whether every case had one recorded.
pub fn estimate_durations(refs: &[String], recorded: &BTreeMap<String, f64>) -> (Vec<f64>, bool) {
    let mut known: Vec<f64> = refs
        .iter()
        .filter_map(|r| recorded.get(r).copied())
        .collect();
    known.sort_by(f64::total_cmp);
    let fallback = known.get(known.len() / 2).copied().unwrap_or(1.0);
    let estimates = refs
        .iter()
        .map(|r| recorded.get(r).copied().unwrap_or(fallback))
        .collect();
    (estimates, known.len() == refs.len())
}

/// What each case of a finished batch costs a batch, for balancing the next run: its own time
/// (`own`, from the report) plus an even share of what the batch spent beyond its session's
/// start-up (`startup_s`) and its tests' own times: collecting, reporting and writing each
/// case. Without it a batch of many tiny tests looks free and is given far more than its share.
pub fn batch_costs(job_s: f64, startup_s: f64, own: &[Option<f64>]) -> Vec<Option<f64>> {
    let known: f64 = own.iter().flatten().sum();
    let per_case = ((job_s - startup_s - known).max(0.0) / own.len().max(1) as f64).max(0.0);
    own.iter()
        .map(|o| o.map(|s| ((s + per_case) * 1000.0).round() / 1000.0))
        .collect()
}

/// The finish time of a set of shards if each ran on its own slot.
pub fn makespan(durations: &[f64], shards: &[Vec<usize>]) -> f64 {
    shards
        .iter()
        .map(|s| s.iter().map(|&i| durations[i]).sum::<f64>())
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (case durations, shard count, expected shards, expected longest shard)
    type ShardCase<'a> = (&'a [f64], usize, &'a [&'a [usize]], f64);

    #[test]
    fn longest_cases_spread_across_shards_and_plan_order_is_kept() {
        let table: &[ShardCase<'_>] = &[
            (
                &[1.0, 1.0, 8.0, 1.0, 1.0, 4.0, 4.0],
                2,
                &[&[0, 2, 3], &[1, 4, 5, 6]],
                10.0,
            ),
            (&[5.0, 5.0, 5.0], 3, &[&[0], &[1], &[2]], 5.0),
            (&[5.0, 5.0, 5.0], 10, &[&[0], &[1], &[2]], 5.0),
            (&[2.0, 3.0], 1, &[&[0, 1]], 5.0),
            (&[], 4, &[], 0.0),
        ];
        for &(durations, shards, want, span) in table {
            let got = lpt_shards(durations, shards);
            let want: Vec<Vec<usize>> = want.iter().map(|s| s.to_vec()).collect();
            assert_eq!(got, want, "{durations:?} into {shards}");
            assert_eq!(makespan(durations, &got), span);
        }
    }

    #[test]
    fn lpt_beats_plan_order_chunking_on_uneven_suites() {
        // Plan-order chunks would put both long cases together: a 16s shard.
        let durations = [8.0, 8.0, 1.0, 1.0, 1.0, 1.0];
        let shards = lpt_shards(&durations, 2);
        assert_eq!(makespan(&durations, &shards), 10.0);
    }

    #[test]
    fn unknown_durations_default_to_the_median_of_recorded_ones() {
        let recorded: BTreeMap<String, f64> =
            [("a".into(), 1.0), ("b".into(), 3.0), ("c".into(), 9.0)].into();
        let refs: Vec<String> = ["a", "new", "c"].map(String::from).to_vec();
        assert_eq!(
            estimate_durations(&refs, &recorded),
            (vec![1.0, 9.0, 9.0], false)
        );
        assert_eq!(
            estimate_durations(&refs, &BTreeMap::new()),
            (vec![1.0, 1.0, 1.0], false)
        );
        assert!(estimate_durations(&refs[..1], &recorded).1);
    }

    #[test]
    fn auto_runs_one_batch_per_slot_when_durations_are_known_and_two_when_not() {
        let durations = [0.1, 0.1, 3.0, 0.1, 0.1, 0.1, 0.1, 0.1];
        let known = plan_batches(ShardMode::Auto, &durations, true, 2);
        // The 3s case alone first, everything else in the other batch.
        assert_eq!(known, [vec![2], vec![0, 1, 3, 4, 5, 6, 7]]);
        let unsure = plan_batches(ShardMode::Auto, &[1.0; 8], false, 2);
        assert_eq!(
            unsure,
            [vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]],
            "{UNSURE_FACTOR} per slot"
        );
        // Never more batches than cases, never an empty one.
        assert_eq!(plan_batches(ShardMode::Auto, &[1.0; 3], false, 8).len(), 3);
        assert!(plan_batches(ShardMode::Auto, &[], true, 2).is_empty());
        // A huge suite is cut so that no batch's argv grows without bound.
        let huge = plan_batches(ShardMode::Auto, &vec![0.01; 9000], true, 2);
        assert_eq!(huge.len(), 5);
        assert!(huge.iter().all(|b| b.len() <= MAX_BATCH_CASES));
    }

    #[test]
    fn a_groups_cases_share_one_batch_in_plan_order() {
        let module = |m: &str| Some(m.to_owned());
        let groups = [
            module("tests/test_util.py"),
            module("tests/test_gitignore.py"),
            module("tests/test_util.py"),
            module("tests/test_util.py"),
            module("tests/test_gitignore.py"),
            None,
        ];
        let batches = plan_grouped_batches(ShardMode::Auto, &[1.0; 6], true, 2, &groups);
        let mut sorted = batches.clone();
        sorted.sort();
        assert_eq!(sorted, [vec![0, 2, 3], vec![1, 4, 5]]);
        assert_eq!(batches[0], [0, 2, 3], "heaviest first");
        // Asked for one case per job, each case runs alone.
        assert_eq!(
            plan_grouped_batches(ShardMode::PerCase, &[1.0; 6], true, 2, &groups).len(),
            6
        );
    }

    #[test]
    fn a_batch_spreads_its_per_case_overhead_over_its_cases() {
        // 2.0s of batch, 0.5s of start-up, 0.5s of tests: 1.0s spread over four cases.
        assert_eq!(
            batch_costs(2.0, 0.5, &[Some(0.0), Some(0.5), Some(0.0), None]),
            [Some(0.25), Some(0.75), Some(0.25), None]
        );
        // A batch quicker than the listing costs its tests' own times.
        assert_eq!(batch_costs(0.4, 0.5, &[Some(0.1)]), [Some(0.1)]);
        assert!(batch_costs(1.0, 0.0, &[]).is_empty());
    }

    #[test]
    fn per_case_and_a_count_are_honoured_as_asked() {
        let durations = [1.0, 2.0, 3.0];
        assert_eq!(
            plan_batches(ShardMode::PerCase, &durations, true, 2),
            [vec![0], vec![1], vec![2]]
        );
        assert_eq!(
            plan_batches(ShardMode::Count(1), &durations, true, 8),
            [vec![0, 1, 2]]
        );
        for (text, want) in [
            ("auto", Ok(ShardMode::Auto)),
            ("per-case", Ok(ShardMode::PerCase)),
            ("3", Ok(ShardMode::Count(3))),
        ] {
            assert_eq!(text.parse::<ShardMode>(), want);
            assert_eq!(want.map(|m| m.to_string()).as_deref(), Ok(text));
        }
        for bad in ["0", "", "-1", "+2", "percase", "2 "] {
            assert!(bad.parse::<ShardMode>().is_err(), "{bad:?}");
        }
    }
}
