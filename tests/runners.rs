//! End-to-end proofs for the other ecosystems: Go and node:test, with real toolchains.

mod support;

use support::{Repo, prove};

#[test]
fn a_go_fix_is_proven_by_subtest_path_and_a_failing_subtest_breaks_its_guard() {
    let repo = Repo::new();
    repo.write("go.mod", "module example.com/cache\n\ngo 1.19\n").write(
        "cache.go",
        "package cache\n\nfunc Expired(age, ttl int) bool { return age > ttl+1 }\n\nfunc Size(n int) int { return n }\n",
    ).write(
        "cache_test.go",
        "package cache\n\nimport \"testing\"\n\nfunc TestSize(t *testing.T) {\n\tif Size(3) != 3 {\n\t\tt.Fatal(\"size\")\n\t}\n}\n",
    );
    repo.commit("cache");
    repo.write(
        "cache.go",
        "package cache\n\nfunc Expired(age, ttl int) bool { return age > ttl }\n\nfunc Size(n int) int { return n }\n",
    )
    .write(
        "cache_test.go",
        "package cache\n\nimport \"testing\"\n\nfunc TestSize(t *testing.T) {\n\tif Size(3) != 3 {\n\t\tt.Fatal(\"size\")\n\t}\n}\n\nfunc TestCacheExpiry(t *testing.T) {\n\tt.Run(\"expired\", func(t *testing.T) {\n\t\tif !Expired(11, 10) {\n\t\t\tt.Fatal(\"11s old with a 10s ttl is expired\")\n\t\t}\n\t})\n\tt.Run(\"fresh\", func(t *testing.T) {\n\t\tif Expired(5, 10) {\n\t\t\tt.Fatal(\"fresh\")\n\t\t}\n\t})\n}\n",
    );
    repo.commit("cache: expire at the ttl");
    let run = prove(
        &repo,
        &[
            "--base",
            "main~1",
            "--criterion",
            "test: TestCacheExpiry/expired",
            "--criterion",
            "guard: TestSize",
            "--pass-env",
            "HOME",
            "--pass-env",
            "GOCACHE",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.evidence.as_ref().unwrap()["runner"], "go");
    assert_eq!(run.verdict_of("C1"), "proven");
    assert_eq!(run.verdict_of("C2"), "proven");
}

#[test]
fn a_node_test_file_that_spawns_another_runner_is_refused_naming_the_file() {
    let repo = Repo::new();
    repo.write("package.json", "{\"name\": \"invoice\", \"private\": true}\n")
        .write("invoice.js", "exports.total = (lines) => lines.reduce((a, b) => a + b, 0) - 1;\n")
        .write(
            "test/total.test.js",
            "const {test} = require('node:test');\nconst assert = require('node:assert/strict');\nconst {total} = require('../invoice.js');\n\ntest('test_empty_invoice_is_zero', () => {\n  assert.equal(total([]), -1);\n});\n",
        );
    repo.commit("invoice");
    repo.write("invoice.js", "exports.total = (lines) => lines.reduce((a, b) => a + b, 0);\n")
        .write(
            "test/total.test.js",
            "const {test} = require('node:test');\nconst assert = require('node:assert/strict');\nconst {total} = require('../invoice.js');\n\ntest('test_sums_lines', () => {\n  assert.equal(total([2, 3]), 5);\n});\n",
        )
        .write(
            "test/delegate.test.js",
            "const {test} = require('node:test');\nconst assert = require('node:assert/strict');\nconst {spawnSync} = require('node:child_process');\n\ntest('test_vitest_suite_passes', () => {\n  assert.equal(spawnSync('npx', ['vitest', 'run'], {timeout: 2000}).status, 0);\n});\n",
        );
    repo.commit("invoice: no off-by-one");
    let run = prove(
        &repo,
        &[
            "--base",
            "main~1",
            "--criterion",
            "test: test_sums_lines",
            "--criterion",
            "guard: test_vitest_suite_passes",
        ],
    );
    assert_eq!(
        run.evidence.as_ref().map(|e| e["runner"].clone()),
        Some("node".into()),
        "{}",
        run.explain()
    );
    assert_eq!(run.verdict_of("C1"), "proven", "{}", run.explain());
    assert_eq!(run.verdict_of("C2"), "unverified");
    let reason = run.criterion("C2")["reason"].as_str().unwrap().to_owned();
    assert!(
        reason.contains("test/delegate.test.js") && reason.contains("npx vitest"),
        "{reason}"
    );
    assert_eq!(run.code, 4, "{}", run.explain());
}
