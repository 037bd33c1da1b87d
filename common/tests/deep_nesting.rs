//! Input nested 200,000 deep to every parser that reads what a guest or a submitter wrote:
//! each answers (a report, or a refusal) on an ordinary thread's stack, never overflows it.
//! A stack overflow aborts the whole process, so a failure here is the test binary dying.

use assay_common::outcome::ReportOutcome;
use assay_common::report;

const DEPTH: usize = 200_000;

fn nested(open: &str, close: &str) -> Vec<u8> {
    let mut text = String::with_capacity(DEPTH * (open.len() + close.len()));
    for _ in 0..DEPTH {
        text.push_str(open);
    }
    for _ in 0..DEPTH {
        text.push_str(close);
    }
    text.into_bytes()
}

/// A report nested this deep names no test: whatever the parser says, it is not a report
/// with cases.
fn assert_no_cases(what: &str, outcome: ReportOutcome) {
    if let ReportOutcome::Parsed(report) = &outcome {
        assert!(report.cases.is_empty(), "{what}: {outcome:?}");
    }
}

#[test]
fn junit_xml_nested_200k_deep_is_answered() {
    let mut xml = b"<?xml version=\"1.0\"?>".to_vec();
    xml.extend(nested("<testsuite name=\"s\">", "</testsuite>"));
    assert_no_cases("junit", report::junit::parse(&xml));
}

#[test]
fn json_reports_nested_200k_deep_are_refused() {
    let arrays = nested("[", "]");
    let mut unittest = br#"{"schema": "assay.unittest/v1", "complete": true, "cases": "#.to_vec();
    unittest.extend(&arrays);
    unittest.push(b'}');
    assert!(matches!(
        report::unittest::parse(&unittest),
        ReportOutcome::Malformed(_)
    ));
    let mut vitest = br#"{"testResults": "#.to_vec();
    vitest.extend(nested("{\"a\":", "}"));
    vitest.push(b'}');
    assert!(matches!(
        report::vitest::parse(&vitest),
        ReportOutcome::Malformed(_)
    ));
}

#[test]
fn a_node_report_claiming_200k_levels_of_describe_is_refused_before_it_is_walked() {
    let mut results = Vec::with_capacity(DEPTH);
    // Node reports children first: the deepest test, then each enclosing suite.
    for nesting in (0..DEPTH).rev() {
        results.push(format!(
            r#"{{"file": "/t/pages.test.js", "nesting": {nesting}, "name": "level {nesting}", "passed": true, "suite": {}, "skip": false, "todo": false, "failure_type": null, "message": null}}"#,
            nesting + 1 < DEPTH
        ));
    }
    let report = format!(
        r#"{{"schema": "assay.node/v1", "counts": {{"tests": 1}}, "results": [{}]}}"#,
        results.join(",")
    );
    match report::node::parse(report.as_bytes()) {
        ReportOutcome::Malformed(why) => assert!(why.contains("nested"), "{why}"),
        other => panic!("a 200k-deep node report was not refused: {other:?}"),
    }
    // A huge nesting number alone is refused too, rather than sizing a table by it.
    let huge = r#"{"schema": "assay.node/v1", "counts": {"tests": 1}, "results": [{"file": "/t/a.test.js", "nesting": 18446744073709551614, "name": "n", "passed": true, "suite": false, "skip": false, "todo": false, "failure_type": null, "message": null}]}"#;
    assert!(matches!(
        report::node::parse(huge.as_bytes()),
        ReportOutcome::Malformed(_)
    ));
}

#[test]
fn a_go_subtest_200k_levels_deep_is_answered() {
    let name = format!("TestPages{}", "/partial".repeat(DEPTH));
    let events = format!(
        "{{\"Action\":\"run\",\"Package\":\"pager\",\"Test\":\"{name}\"}}\n{{\"Action\":\"pass\",\"Package\":\"pager\",\"Test\":\"{name}\",\"Elapsed\":0.01}}\n"
    );
    // Whatever it makes of it, it answers.
    let _ = report::go::parse(events.as_bytes());
}

#[test]
fn libtest_output_with_a_200k_deep_module_path_is_answered() {
    let name = "pages::".repeat(DEPTH) + "partial";
    let stdout = format!(
        "\nrunning 1 test\ntest {name} ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\n"
    );
    let _ = report::libtest::parse_cargo_output(&stdout, "");
}

#[test]
fn toml_nested_200k_deep_is_refused_by_the_configuration_reader() {
    let arrays = String::from_utf8(nested("[", "]")).unwrap();
    let tables = String::from_utf8(nested("{a=", "}")).unwrap();
    for text in [format!("x = {arrays}\n"), format!("x = {tables}\n")] {
        assert!(
            assay_common::service_config::ServiceConfig::from_toml(&text, "assay.service.toml")
                .is_err()
        );
    }
}
