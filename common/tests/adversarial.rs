//! Hostile input to the pure parsers: whatever bytes a guest writes as its report, and whatever
//! bytes arrive on the bus, parsing returns a value or an error, never a panic. Each property
//! runs a bounded number of cases so the suite stays quick on a small machine.

use assay_common::fleet::{ProgressEvent, ProofRecord, SubmitReply, SubmitRequest};
use assay_common::job::{JobResult, JobSpec};
use assay_common::report;
use assay_common::runner::ReportFormat;
use assay_common::wire;
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Report-shaped text: fragments of the formats glued together at random, so the parsers get
/// past their first check and into the code that reads numbers, names and nesting.
fn report_like() -> impl Strategy<Value = Vec<u8>> {
    let fragments = prop::sample::select(vec![
        "<?xml version=\"1.0\"?>",
        "<testsuites>",
        "<testsuite name=\"s\" tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"0\" time=\"1e20\">",
        "<testcase classname=\"t\" name=\"test_x\" file=\"../../etc/passwd\" time=\"-1\">",
        "<testcase name=\"\" time=\"NaN\"/>",
        "<failure message=\"m\">",
        "</failure>",
        "</testcase>",
        "</testsuite>",
        "</testsuites>",
        "<!DOCTYPE x [<!ENTITY e \"e\">]>",
        "&e;",
        "{\"schema\": \"assay.unittest/v1\", \"complete\": true, \"total\": 18446744073709551615, \"cases\": [",
        "{\"schema\": \"assay.node/v1\", \"counts\": {\"tests\": -1}, \"results\": [",
        "{\"file\": \"/t/a.js\", \"nesting\": 4294967296, \"name\": \"n\", \"passed\": true, \"suite\": false}",
        "{\"Action\":\"run\",\"Package\":\"p\",\"Test\":\"T\"}\n",
        "{\"Action\":\"fail\",\"Package\":\"p\",\"Test\":\"T/\",\"Elapsed\":1e308}\n",
        "{\"numTotalTests\": 1e20, \"testResults\": [{\"name\": \"\", \"assertionResults\": [",
        "]}",
        "]",
        "}",
        ",",
        "\u{0}",
        "\u{feff}",
    ]);
    prop::collection::vec(fragments, 0..24).prop_map(|parts| parts.concat().into_bytes())
}

fn every_format() -> Vec<ReportFormat> {
    vec![
        ReportFormat::JunitXml,
        ReportFormat::UnittestJson,
        ReportFormat::GoTestJson,
        ReportFormat::NodeJson,
        ReportFormat::VitestJson,
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn no_report_bytes_make_a_parser_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        for format in every_format() {
            let _ = report::parse_in_tree(&format, Some(&bytes), "/tree");
        }
    }

    #[test]
    fn no_report_shaped_text_makes_a_parser_panic(bytes in report_like()) {
        for format in every_format() {
            let _ = report::parse_in_tree(&format, Some(&bytes), "/tree");
        }
    }

    #[test]
    fn no_output_makes_the_summary_parsers_panic(text in "[ -~\\n]{0,300}") {
        let _ = report::summary::parse_counts(&text);
        let _ = report::summary::parse_coverage(&text);
    }

    #[test]
    fn no_corpus_or_collection_output_makes_a_parser_panic(
        text in "[ -~\t\n]{0,300}",
        bytes in prop::collection::vec(any::<u8>(), 0..256),
        exit in any::<Option<i32>>(),
    ) {
        if let Ok(cases) = assay_common::manifest::parse_manifest(&text) {
            for case in &cases {
                let _ = assay_common::manifest::judge(&case.expectation, exit, &bytes);
            }
        }
        let _ = assay_common::suite::parse_pytest_collection(&text);
        let _ = assay_common::suite::parse_unittest_collection(&bytes);
        let _ = assay_common::suite::parse_unittest_collection(text.as_bytes());
        let _ = assay_common::suite::parse_go_list(&text);
    }

    #[test]
    fn no_bytes_make_the_wire_decoder_panic(body in prop::collection::vec(any::<u8>(), 0..512)) {
        // A well-formed envelope around arbitrary bytes reaches the bincode decoder itself.
        let mut bytes = b"ASY1".to_vec();
        bytes.extend_from_slice(&wire::PROTOCOL_VERSION.to_le_bytes());
        bytes.extend_from_slice(&body);
        for message in [&bytes[..], &body[..]] {
            let _ = wire::decode::<JobSpec>("job", message);
            let _ = wire::decode::<JobResult>("job result", message);
            let _ = wire::decode::<SubmitRequest>("submit request", message);
            let _ = wire::decode::<SubmitReply>("submit reply", message);
            let _ = wire::decode::<ProofRecord>("proof record", message);
            let _ = wire::decode::<ProgressEvent>("progress", message);
        }
    }
}

/// A length prefix claiming far more than the message holds must be an error, not an
/// allocation of that size: bincode 1 caps what it reserves by the bytes that remain.
#[test]
fn a_huge_length_prefix_is_a_decode_error() {
    let mut bytes = b"ASY1".to_vec();
    bytes.extend_from_slice(&wire::PROTOCOL_VERSION.to_le_bytes());
    bytes.extend_from_slice(&u64::MAX.to_le_bytes());
    assert!(wire::decode::<JobSpec>("job", &bytes).is_err());
    assert!(wire::decode::<SubmitRequest>("submit request", &bytes).is_err());
}

/// A job as a peer that skips the checks would encode it: `JobSpec`'s fields in order, with
/// the edit's path and the tree id plain strings (the same bincode as the checked types).
#[derive(serde::Serialize)]
struct UncheckedJob {
    proof_id: String,
    job_id: String,
    index: u32,
    kind: assay_common::job::JobKind,
    side: assay_common::job::Side,
    tree: String,
    command: Vec<String>,
    report: ReportFormat,
    selected_tests: Vec<String>,
    timeout_secs: u64,
    forked_timeout_secs: Option<u64>,
    env: Vec<(String, String)>,
    edit: Option<(String, usize, usize, String)>,
    rewrites: Vec<(String, usize, usize, String)>,
    binaries: Option<assay_common::job::TestBinaries>,
    /// The lockfile's and the archive's sha256, and its size.
    /// The archive's digests, size and kind (its variant's index: cargo 0, go 1).
    dependencies: Option<(String, String, u64, u32)>,
    next_command: Option<Vec<String>>,
}

fn unchecked(tree: &str, edit_path: Option<&str>) -> UncheckedJob {
    UncheckedJob {
        proof_id: "p-1".into(),
        job_id: "p-1/0000".into(),
        index: 0,
        kind: assay_common::job::JobKind::Mutant,
        side: assay_common::job::Side::Candidate,
        tree: tree.into(),
        command: vec!["true".into()],
        report: ReportFormat::JunitXml,
        selected_tests: vec![],
        timeout_secs: u64::MAX,
        forked_timeout_secs: Some(u64::MAX),
        env: vec![],
        edit: edit_path.map(|p| (p.to_owned(), 0, 1, "x".into())),
        rewrites: Vec::new(),
        binaries: None,
        dependencies: None,
        next_command: None,
    }
}

#[test]
fn a_job_naming_a_path_outside_its_tree_does_not_decode() {
    let tree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
    let ok = wire::encode("job", &unchecked(tree, Some("pager/__init__.py"))).unwrap();
    let job: JobSpec = wire::decode("job", &ok).unwrap();
    assert_eq!(job.edit.unwrap().path.as_str(), "pager/__init__.py");
    for path in [
        "/etc/hosts",
        "../../victim.txt",
        "pager/../../x",
        "a\\b",
        "",
    ] {
        let bytes = wire::encode("job", &unchecked(tree, Some(path))).unwrap();
        let err = wire::decode::<JobSpec>("job", &bytes).unwrap_err();
        assert!(
            matches!(err, wire::WireError::Decode { .. }),
            "{path:?}: {err}"
        );
    }
    // A schema build's whole-file rewrites are confined as the edit is.
    let mut rewritten = unchecked(tree, None);
    rewritten.rewrites = vec![("pager/src/lib.rs".into(), 0, 4, "pub fn".into())];
    let job: JobSpec = wire::decode("job", &wire::encode("job", &rewritten).unwrap()).unwrap();
    assert_eq!(job.rewrites[0].path.as_str(), "pager/src/lib.rs");
    for path in ["/root/.cargo/credentials.toml", "pager/../../build.rs"] {
        let mut hostile = unchecked(tree, None);
        hostile.rewrites = vec![
            ("pager/src/lib.rs".into(), 0, 4, "pub fn".into()),
            (path.into(), 0, 0, "[registry]".into()),
        ];
        let bytes = wire::encode("job", &hostile).unwrap();
        let err = wire::decode::<JobSpec>("job", &bytes).unwrap_err();
        assert!(
            matches!(err, wire::WireError::Decode { .. }),
            "{path:?}: {err}"
        );
    }
    for tree in ["../../../tmp/evil", "", "ABCDEF"] {
        let bytes = wire::encode("job", &unchecked(tree, None)).unwrap();
        assert!(wire::decode::<JobSpec>("job", &bytes).is_err(), "{tree:?}");
    }
    // A dependency archive's digests name a directory on the worker: hex or nothing.
    let digest = "ab".repeat(32);
    let mut named = unchecked(tree, None);
    named.dependencies = Some((digest.clone(), digest.clone(), 7, 1));
    let job: JobSpec = wire::decode("job", &wire::encode("job", &named).unwrap()).unwrap();
    assert_eq!(
        job.dependencies.map(|d| d.key()),
        Some(format!("dependencies/go/{digest}/{digest}.tar"))
    );
    for hostile in [
        "../../../tmp/evil",
        "",
        &"AB".repeat(32),
        &format!("{}/", &digest[1..]),
    ] {
        for dependencies in [
            (hostile.to_owned(), digest.clone(), 7, 1),
            (digest.clone(), hostile.to_owned(), 7, 0),
        ] {
            let mut job = unchecked(tree, None);
            job.dependencies = Some(dependencies);
            let bytes = wire::encode("job", &job).unwrap();
            let err = wire::decode::<JobSpec>("job", &bytes).unwrap_err();
            assert!(
                matches!(err, wire::WireError::Decode { .. }),
                "{hostile:?}: {err}"
            );
        }
    }
    // The kind names the store's directory and the worker's: a known one only.
    for kind in [2, u32::MAX] {
        let mut job = unchecked(tree, None);
        job.dependencies = Some((digest.clone(), digest.clone(), 7, kind));
        let bytes = wire::encode("job", &job).unwrap();
        let err = wire::decode::<JobSpec>("job", &bytes).unwrap_err();
        assert!(
            matches!(err, wire::WireError::Decode { .. }),
            "kind {kind}: {err}"
        );
    }
}
