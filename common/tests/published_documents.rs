//! The documents Assay publishes, read as files written before their fields had types of
//! their own (fixtures written by `assay prove --json` and `assay test --json`): each reads and
//! is written back byte for byte, and what does not match its type is refused, naming the
//! field.

use assay_common::evidence::Evidence;

const EVIDENCE: &str = include_str!("fixtures/evidence-with-mutation-check.json");

fn edited(document: &str, edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut value: serde_json::Value = serde_json::from_str(document).unwrap();
    edit(&mut value);
    value.to_string()
}

#[test]
fn evidence_with_a_mutation_check_reads_and_writes_back_byte_for_byte() {
    let evidence: Evidence = serde_json::from_str(EVIDENCE).expect("the evidence reads");
    let check = evidence.mutation_check.as_ref().expect("it has a check");
    assert_eq!((check.killed, check.mutants.len()), (5, 5));
    assert_eq!(serde_json::to_string_pretty(&evidence).unwrap(), EVIDENCE);
    let without = edited(EVIDENCE, |v| {
        v.as_object_mut().unwrap().remove("mutation_check");
    });
    let evidence: Evidence = serde_json::from_str(&without).expect("a check is optional");
    assert!(evidence.mutation_check.is_none());
    assert!(
        !serde_json::to_string(&evidence)
            .unwrap()
            .contains("mutation_check")
    );
}

#[test]
fn evidence_whose_mutation_check_does_not_match_is_refused_naming_it() {
    let refused = |edit: fn(&mut serde_json::Value)| {
        serde_json::from_str::<Evidence>(&edited(EVIDENCE, edit))
            .unwrap_err()
            .to_string()
    };
    let wrong_type = refused(|v| v["mutation_check"] = "all killed".into());
    assert!(
        wrong_type.starts_with(
            "mutation_check: invalid type: string \"all killed\", expected struct MutationCheck"
        ),
        "{wrong_type}"
    );
    let unknown_outcome = refused(|v| {
        v["mutation_check"]["mutants"][0]["outcome"]["status"] = "exploded".into();
    });
    assert!(
        unknown_outcome.starts_with("mutation_check: unknown variant `exploded`"),
        "{unknown_outcome}"
    );
    let missing = refused(|v| {
        v["mutation_check"]
            .as_object_mut()
            .unwrap()
            .remove("killed");
    });
    assert!(
        missing.starts_with("mutation_check: missing field `killed`"),
        "{missing}"
    );
    let negative = refused(|v| v["mutation_check"]["budget_s"] = (-1).into());
    assert!(
        negative.starts_with("mutation_check: invalid value"),
        "{negative}"
    );
}

#[test]
fn evidence_of_another_schema_is_refused_naming_it() {
    let err = serde_json::from_str::<Evidence>(&edited(EVIDENCE, |v| {
        v["schema"] = "assay.proof/v2".into();
    }))
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with(r#"schema: "assay.proof/v2" is not "assay.proof/v1""#),
        "{err}"
    );
}

const SUITE_REPORT: &str = include_str!("fixtures/suite-report-failed.json");

#[test]
fn a_suite_report_reads_typed_and_writes_back_byte_for_byte() {
    use assay_common::runner::RunnerKind;
    use assay_common::suite::{Ending, SuiteReport, SuiteRunner};
    let report: SuiteReport = serde_json::from_str(SUITE_REPORT).expect("the report reads");
    assert_eq!(report.status, Ending::Failed);
    assert_eq!(report.runner, SuiteRunner::Kind(RunnerKind::Unittest));
    assert_eq!(report.history.alerts[0].kind, "regression");
    assert_eq!(report.history.recent.len(), 2);
    assert_eq!(serde_json::to_string_pretty(&report).unwrap(), SUITE_REPORT);
    for (status, ending) in [
        ("passed", Ending::Passed),
        ("failed", Ending::Failed),
        ("infrastructure_aborted", Ending::Aborted),
    ] {
        let text = edited(SUITE_REPORT, |v| v["status"] = status.into());
        let report: SuiteReport = serde_json::from_str(&text).unwrap();
        assert_eq!(report.status, ending);
        assert_eq!(serde_json::to_value(&report).unwrap()["status"], status);
    }
    let command = edited(SUITE_REPORT, |v| v["runner"] = "command".into());
    let report: SuiteReport = serde_json::from_str(&command).unwrap();
    assert_eq!(report.runner, SuiteRunner::Command);
    assert_eq!(serde_json::to_value(&report).unwrap()["runner"], "command");
}

#[test]
fn a_suite_report_that_does_not_match_is_refused_naming_the_field() {
    let refused = |edit: fn(&mut serde_json::Value)| {
        serde_json::from_str::<assay_common::suite::SuiteReport>(&edited(SUITE_REPORT, edit))
            .unwrap_err()
            .to_string()
    };
    let status = refused(|v| v["status"] = "passing".into());
    assert!(
        status.starts_with(
            "status: unknown variant `passing`, expected one of `passed`, `failed`, `infrastructure_aborted`"
        ),
        "{status}"
    );
    let not_a_string = refused(|v| v["status"] = 0.into());
    assert!(
        not_a_string.starts_with("status: invalid type"),
        "{not_a_string}"
    );
    let runner = refused(|v| v["runner"] = "maven".into());
    assert!(
        runner.starts_with("runner: ") && runner.contains("maven") && runner.contains("or command"),
        "{runner}"
    );
    let history = refused(|v| v["history"] = "none".into());
    assert!(
        history
            .starts_with(r#"history: invalid type: string "none", expected struct HistoryReport"#),
        "{history}"
    );
    let alert = refused(|v| v["history"]["alerts"][0]["colour"] = "red".into());
    assert!(
        alert.starts_with("history: unknown field `colour`"),
        "{alert}"
    );
    let schema = refused(|v| v["schema"] = "assay.test/v2".into());
    assert!(
        schema.starts_with(r#"schema: "assay.test/v2" is not "assay.test/v1""#),
        "{schema}"
    );
}

/// A report whose `audit` has every part (outliers, both ledger violations, reachability, scope
/// gaps, removals, relocations, used and expired exceptions), as `assay test --json` wrote it
/// while `audit` was a `serde_json::Value`.
const AUDITED_REPORT: &str = include_str!("fixtures/suite-report-audited.json");

#[test]
fn a_suite_report_s_audit_reads_typed_and_writes_back_byte_for_byte() {
    use assay_common::suite::SuiteReport;
    use assay_common::suite_audit::{LedgerViolation, Provenance, ReadSource, Relocation};
    let report: SuiteReport = serde_json::from_str(AUDITED_REPORT).expect("the report reads");
    let audit = &report.audit;
    assert!(!audit.selection.contained);
    assert_eq!(audit.selection.executed_not_selected[0].job, 0);
    let ledger = audit.quarantine_ledger.as_ref().expect("a ledger gate");
    assert!(!ledger.passed());
    assert!(matches!(
        &ledger.violations[1],
        LedgerViolation::ExpiryExtended {
            candidate: None,
            ..
        }
    ));
    assert_eq!(audit.reachability.as_ref().map(Vec::len), Some(2));
    let scope = audit.scope.as_ref().expect("a scope");
    assert!(!scope.passed());
    assert_eq!(scope.closure.recorded, Some(Provenance::Stored));
    assert_eq!(scope.closure.gaps[0].reads[1].source, ReadSource::Declared);
    assert_eq!(scope.inventory.found.relocated[1].kind, Relocation::Moved);
    assert_eq!(scope.inventory.found.removed.len(), 2);
    assert_eq!(scope.exceptions.usage.expired.len(), 1);
    assert_eq!(
        serde_json::to_string_pretty(&report).unwrap(),
        AUDITED_REPORT
    );

    // The report without `--audit-base`: the gates' parts are null.
    let plain: SuiteReport = serde_json::from_str(SUITE_REPORT).unwrap();
    assert!(plain.audit.selection.contained && plain.audit.reachability.is_none());
}

#[test]
fn a_suite_report_whose_audit_does_not_match_is_refused_naming_it() {
    let refused = |edit: fn(&mut serde_json::Value)| {
        serde_json::from_str::<assay_common::suite::SuiteReport>(&edited(AUDITED_REPORT, edit))
            .unwrap_err()
            .to_string()
    };
    let wrong_type = refused(|v| v["audit"] = "contained".into());
    assert!(
        wrong_type
            .starts_with(r#"audit: invalid type: string "contained", expected struct AuditReport"#),
        "{wrong_type}"
    );
    let null = refused(|v| v["audit"] = serde_json::Value::Null);
    assert!(
        null.starts_with("audit: invalid type: null, expected struct AuditReport"),
        "{null}"
    );
    let missing = refused(|v| {
        v["audit"].as_object_mut().unwrap().remove("selection");
    });
    assert!(
        missing.starts_with("audit: missing field `selection`"),
        "{missing}"
    );
    let unknown = refused(|v| v["audit"]["verdict"] = "fine".into());
    assert!(
        unknown.starts_with("audit: unknown field `verdict`"),
        "{unknown}"
    );
    let nested =
        refused(|v| v["audit"]["selection"]["selected_not_collected"][0]["why"] = 1.into());
    assert!(nested.starts_with("audit: unknown field `why`"), "{nested}");
    let not_a_bool = refused(|v| v["audit"]["selection"]["contained"] = "yes".into());
    assert!(
        not_a_bool.starts_with(r#"audit: invalid type: string "yes", expected a boolean"#),
        "{not_a_bool}"
    );
    let negative = refused(|v| v["audit"]["selection"]["collected"] = (-1).into());
    assert!(
        negative.starts_with("audit: invalid value: integer `-1`"),
        "{negative}"
    );
    let kind =
        refused(|v| v["audit"]["quarantine_ledger"]["violations"][0]["kind"] = "renamed".into());
    assert!(
        kind.starts_with("audit: unknown variant `renamed`, expected `added` or `expiry_extended`"),
        "{kind}"
    );
    let violation_field =
        refused(|v| v["audit"]["quarantine_ledger"]["violations"][0]["base"] = "2026-01-01".into());
    assert!(
        violation_field.starts_with("audit: unknown field `base`"),
        "{violation_field}"
    );
    let source = refused(|v| {
        v["audit"]["scope"]["closure"]["gaps"][0]["reads"][0]["source"] = "guessed".into()
    });
    assert!(
        source.starts_with("audit: unknown variant `guessed`, expected `recorded` or `declared`"),
        "{source}"
    );
    let provenance = refused(|v| v["audit"]["scope"]["closure"]["recorded"] = true.into());
    assert!(
        provenance.starts_with("audit: invalid type: boolean `true`"),
        "{provenance}"
    );
    let lines = refused(|v| v["audit"]["reachability"][0]["unreached"] = "8-10".into());
    assert!(
        lines.starts_with(r#"audit: invalid type: string "8-10", expected a sequence"#),
        "{lines}"
    );
    // The two sections written flattened refuse unknown fields too.
    let inventory = refused(|v| v["audit"]["scope"]["inventory"]["added"] = serde_json::json!([]));
    assert!(
        inventory.starts_with("audit: unknown field `added`"),
        "{inventory}"
    );
    let inventory_count =
        refused(|v| v["audit"]["scope"]["inventory"]["base_collected"] = "nine".into());
    assert!(
        inventory_count.starts_with(r#"audit: invalid type: string "nine""#),
        "{inventory_count}"
    );
    let exceptions =
        refused(|v| v["audit"]["scope"]["exceptions"]["ignored"] = serde_json::json!([]));
    assert!(
        exceptions.starts_with("audit: unknown field `ignored`"),
        "{exceptions}"
    );
    let exception =
        refused(|v| v["audit"]["scope"]["exceptions"]["used"][0]["owner"] = "qa".into());
    assert!(
        exception.starts_with("audit: unknown field `owner`"),
        "{exception}"
    );
}

/// `assay mutate --json` of a small Python project, its second run answered from the cache,
/// and of the `cargo-pager` workspace built once behind the schema switch.
const MUTATION_REPORT_CACHED: &str = include_str!("fixtures/mutation-report-cached.json");
const MUTATION_REPORT_RUST: &str = include_str!("fixtures/mutation-report-rust.json");

/// As the CLI writes it: JSON with each object's keys in order. Compared as values: reading
/// a float back may lose its last digit (serde_json's default parser), on both sides alike.
fn as_written(report: &assay_common::mutation_report::MutationReport) -> serde_json::Value {
    serde_json::to_value(report).unwrap()
}

#[test]
fn a_mutation_report_reads_typed_and_writes_back_byte_for_byte() {
    use assay_common::mutation_report::{MutationReport, Status};
    for (document, language) in [
        (MUTATION_REPORT_CACHED, "python"),
        (MUTATION_REPORT_RUST, "rust"),
    ] {
        let report: MutationReport = serde_json::from_str(document).expect("the report reads");
        assert_eq!(report.schema_version, "1");
        assert!(
            report.files.values().all(|f| f.language == language),
            "{document}"
        );
        assert!(
            report
                .files
                .values()
                .flat_map(|f| &f.mutants)
                .any(|m| m.status == Status::Killed)
        );
        let read: serde_json::Value = serde_json::from_str(document).unwrap();
        assert_eq!(as_written(&report), read);
        // Every key the document has, the typed report writes, in the same order.
        let text = serde_json::to_string_pretty(&as_written(&report)).unwrap();
        let keys = |text: &str| -> Vec<String> {
            text.lines()
                .filter_map(|l| l.trim_start().split_once("\": ").map(|(k, _)| k.to_owned()))
                .collect()
        };
        assert_eq!(keys(&text), keys(document));
    }
    let cached: MutationReport = serde_json::from_str(MUTATION_REPORT_CACHED).unwrap();
    let cache = cached.assay.cache.expect("the second run used the cache");
    assert!(
        cache.served > 0 && cache.mutants.len() == cache.served,
        "{cache:?}"
    );
    let rust: MutationReport = serde_json::from_str(MUTATION_REPORT_RUST).unwrap();
    let schemata = rust.assay.schemata.expect("the crate built once");
    assert_eq!(schemata.builds, 1);
    assert!(schemata.held > 0);
}

#[test]
fn a_mutation_report_that_does_not_match_is_refused_naming_the_field() {
    let refused = |edit: fn(&mut serde_json::Value)| {
        serde_json::from_str::<assay_common::mutation_report::MutationReport>(&edited(
            MUTATION_REPORT_RUST,
            edit,
        ))
        .unwrap_err()
        .to_string()
    };
    let status =
        refused(|v| v["files"]["pager/src/lib.rs"]["mutants"][0]["status"] = "Dead".into());
    assert!(status.contains("unknown variant `Dead`"), "{status}");
    let stray = refused(|v| v["assay"]["verdict"] = "proven".into());
    assert!(stray.contains("unknown field `verdict`"), "{stray}");
    let location = refused(|v| {
        v["files"]["pager/src/lib.rs"]["mutants"][0]["location"]["start"]["line"] = "9".into()
    });
    assert!(
        location.contains("invalid type: string \"9\""),
        "{location}"
    );
}
