//! Sharding a suite into jobs by recorded durations: longest processing time first onto the
//! least-loaded shard, so one long shard does not set the finish time. Shards keep plan order
//! inside and among themselves; only their membership depends on durations.

use std::collections::BTreeMap;

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
/// recorded ones, else one second.
pub fn estimate_durations(refs: &[String], recorded: &BTreeMap<String, f64>) -> Vec<f64> {
    let mut known: Vec<f64> = refs
        .iter()
        .filter_map(|r| recorded.get(r).copied())
        .collect();
    known.sort_by(f64::total_cmp);
    let fallback = known.get(known.len() / 2).copied().unwrap_or(1.0);
    refs.iter()
        .map(|r| recorded.get(r).copied().unwrap_or(fallback))
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
        assert_eq!(estimate_durations(&refs, &recorded), [1.0, 9.0, 9.0]);
        assert_eq!(estimate_durations(&refs, &BTreeMap::new()), [1.0, 1.0, 1.0]);
    }
}
