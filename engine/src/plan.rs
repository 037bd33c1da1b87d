//! The planner: turns a proof into its jobs, in plan order. Pure: no git, no I/O.

use assay_common::criteria::{Criterion, CriterionKind, TestSelector};
use assay_common::job::{JobKind, JobSpec, Side};
use assay_common::runner::{ReportFormat, RunnerKind};
use assay_common::{ProofId, TreeId};

/// What the planner needs to know about a proof.
#[derive(Clone, Debug)]
pub struct ProofPlanInput<'a> {
    /// The proof whose jobs these are; every job id derives from it.
    pub proof_id: &'a ProofId,
    /// The test runner the project uses (pytest, cargo, go, …).
    pub runner: RunnerKind,
    /// The runner's argv before any selected tests.
    pub command_prefix: &'a [String],
    /// What the proof must show, in the order the user gave them.
    pub criteria: &'a [Criterion],
    /// Test modules the change adds or modifies (the targeted run's files).
    pub changed_test_modules: &'a [String],
    /// The tree before the change.
    pub base_tree: &'a TreeId,
    /// The tree with the change applied.
    pub candidate_tree: &'a TreeId,
    /// Runs per side in all, counting the targeted (or suite) run.
    pub repeats: u32,
    /// Each job's wall-clock limit, in seconds.
    pub timeout_secs: u64,
    /// The report format each job's run writes (JUnit XML, cargo's JSON, …).
    pub report: ReportFormat,
    /// The candidate with the change's harness files put back as the base has them: one more
    /// job runs the proving tests there, last (see `crate::harness`).
    pub harness_check_tree: Option<&'a TreeId>,
}

/// Plan order: base, candidate (when the change has test modules), base-suite,
/// candidate-suite, then the stability repeats (base repeats for `test:` criteria only), then
/// the harness check when there is one.
pub fn plan_proof(input: &ProofPlanInput<'_>) -> Vec<JobSpec> {
    let mut jobs = Vec::new();
    let mut push = |kind: JobKind, side: Side, files: &[String], names: &[String]| {
        let index = jobs.len();
        let tree = match (kind, side, input.harness_check_tree) {
            (JobKind::HarnessCheck, _, Some(tree)) => tree,
            (_, Side::Base, _) => input.base_tree,
            (_, Side::Candidate, _) => input.candidate_tree,
        };
        jobs.push(JobSpec {
            selected_tests: names.to_vec(),
            ..JobSpec::new(
                input.proof_id,
                index,
                kind,
                side,
                tree,
                input.runner.command(input.command_prefix, files, names),
                input.report.clone(),
                input.timeout_secs,
            )
        });
    };
    if !input.changed_test_modules.is_empty() {
        for side in [Side::Base, Side::Candidate] {
            push(JobKind::Targeted, side, input.changed_test_modules, &[]);
        }
    }
    for side in [Side::Base, Side::Candidate] {
        push(JobKind::Suite, side, &[], &[]);
    }
    // The repeats must run every proving test they repeat. A criterion-id fallback (`C1` →
    // `test_c1_`, Go's `TestC1…`) is a prefix, which only pytest's `-k` and the unittest
    // adapter select by; for other runners such a repeat selects nothing by name and runs all.
    let names_for = |kinds: &[CriterionKind]| -> Option<Vec<String>> {
        let criteria: Vec<&Criterion> = input
            .criteria
            .iter()
            .filter(|c| kinds.contains(&c.kind))
            .collect();
        if criteria.is_empty() {
            return None;
        }
        let prefix_unselectable = !input.runner.selects_by_prefix()
            && criteria
                .iter()
                .any(|c| matches!(c.test, TestSelector::IdPrefix(_)));
        if prefix_unselectable {
            return Some(Vec::new());
        }
        let mut names: Vec<String> = criteria
            .iter()
            .map(|c| c.test.display().to_owned())
            .collect();
        names.sort();
        names.dedup();
        Some(names)
    };
    let base_names = names_for(&[CriterionKind::Test]);
    let candidate_names = names_for(&[CriterionKind::Test, CriterionKind::Guard]);
    for _ in 1..input.repeats.max(1) {
        if let Some(names) = &base_names {
            push(JobKind::Stability, Side::Base, &[], names);
        }
        if let Some(names) = &candidate_names {
            push(JobKind::Stability, Side::Candidate, &[], names);
        }
    }
    // Selected by name over the whole suite, as the repeats are, so a guard outside the
    // change's test modules is observed too.
    if input.harness_check_tree.is_some()
        && let Some(names) = &candidate_names
    {
        push(JobKind::HarnessCheck, Side::Candidate, &[], names);
    }
    jobs
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_common::criteria::parse_criteria;

    fn plan(criteria: &[&str], changed: &[&str], repeats: u32) -> Vec<JobSpec> {
        let criteria =
            parse_criteria(&criteria.iter().map(|c| c.to_string()).collect::<Vec<_>>()).unwrap();
        let changed: Vec<String> = changed.iter().map(|c| c.to_string()).collect();
        plan_proof(&ProofPlanInput {
            proof_id: &ProofId("p-1".into()),
            runner: RunnerKind::Pytest,
            command_prefix: &RunnerKind::Pytest.default_command(),
            criteria: &criteria,
            changed_test_modules: &changed,
            base_tree: &TreeId("b".into()),
            candidate_tree: &TreeId("c".into()),
            repeats,
            timeout_secs: 60,
            report: RunnerKind::Pytest.report_format(),
            harness_check_tree: None,
        })
    }

    fn labels(jobs: &[JobSpec]) -> Vec<String> {
        jobs.iter()
            .map(|j| format!("{}:{}", j.kind.label(j.side), j.side))
            .collect()
    }

    #[test]
    fn jobs_come_in_plan_order_with_stability_repeats() {
        let jobs = plan(
            &["test: test_partial_page", "guard: test_full_pages"],
            &["tests/test_pager.py"],
            3,
        );
        assert_eq!(
            labels(&jobs),
            [
                "base:base",
                "candidate:candidate",
                "base-suite:base",
                "candidate-suite:candidate",
                "stability:base",
                "stability:candidate",
                "stability:base",
                "stability:candidate",
            ]
        );
        assert!(jobs.iter().enumerate().all(|(i, j)| j.index as usize == i));
        assert_eq!(jobs[0].tree, TreeId("b".into()));
        assert_eq!(jobs[4].selected_tests, ["test_partial_page"]);
        assert_eq!(
            jobs[5].selected_tests,
            ["test_full_pages", "test_partial_page"]
        );
        assert!(jobs[0].command.contains(&"tests/test_pager.py".to_string()));
    }

    #[test]
    fn guards_only_change_without_tests_runs_the_suites_and_candidate_repeats() {
        let jobs = plan(&["guard: test_full_pages"], &[], 2);
        assert_eq!(
            labels(&jobs),
            [
                "base-suite:base",
                "candidate-suite:candidate",
                "stability:candidate"
            ]
        );
    }

    #[test]
    fn a_criterion_id_fallback_repeats_the_whole_selection_where_names_are_anchored() {
        let criteria = parse_criteria(&["C1: test: a zero ttl expires".to_string()]).unwrap();
        for (runner, selected) in [
            (RunnerKind::Pytest, vec!["test_c1_".to_string()]),
            (RunnerKind::Go, vec![]),
        ] {
            let jobs = plan_proof(&ProofPlanInput {
                proof_id: &ProofId("p-1".into()),
                runner,
                command_prefix: &runner.default_command(),
                criteria: &criteria,
                changed_test_modules: &[],
                base_tree: &TreeId("b".into()),
                candidate_tree: &TreeId("c".into()),
                repeats: 2,
                timeout_secs: 60,
                report: runner.report_format(),
                harness_check_tree: None,
            });
            let stability: Vec<&JobSpec> = jobs
                .iter()
                .filter(|j| j.kind == JobKind::Stability)
                .collect();
            assert_eq!(stability.len(), 2, "{runner}");
            assert!(
                stability.iter().all(|j| j.selected_tests == selected),
                "{runner}"
            );
            if runner == RunnerKind::Go {
                assert!(!stability[0].command.contains(&"-run".to_string()));
            }
        }
    }

    #[test]
    fn the_harness_check_runs_the_proving_tests_last_on_its_own_tree() {
        let criteria = parse_criteria(&[
            "test: test_partial_page".to_string(),
            "guard: test_full_pages".to_string(),
        ])
        .unwrap();
        let check_tree = TreeId("h".into());
        let jobs = plan_proof(&ProofPlanInput {
            proof_id: &ProofId("p-1".into()),
            runner: RunnerKind::Pytest,
            command_prefix: &RunnerKind::Pytest.default_command(),
            criteria: &criteria,
            changed_test_modules: &["tests/test_pager.py".to_string()],
            base_tree: &TreeId("b".into()),
            candidate_tree: &TreeId("c".into()),
            repeats: 2,
            timeout_secs: 60,
            report: RunnerKind::Pytest.report_format(),
            harness_check_tree: Some(&check_tree),
        });
        let last = jobs.last().expect("jobs");
        assert_eq!(last.kind, JobKind::HarnessCheck);
        assert_eq!(last.index as usize, jobs.len() - 1);
        assert_eq!((last.side, &last.tree), (Side::Candidate, &check_tree));
        assert_eq!(
            last.selected_tests,
            ["test_full_pages", "test_partial_page"]
        );
        assert!(jobs[..jobs.len() - 1].iter().all(|j| j.tree != check_tree));
    }

    #[test]
    fn one_repeat_means_no_stability_jobs() {
        assert_eq!(plan(&["test: test_a"], &["tests/test_a.py"], 1).len(), 4);
    }
}
