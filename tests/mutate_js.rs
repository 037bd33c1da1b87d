//! JavaScript mutation end to end with the real `node`, on node:test projects built in the
//! test: a proven CommonJS fix whose mutation check kills some mutants of its changed lines
//! and lets others survive, and `assay mutate` on an ES module and a CommonJS module mutated
//! with Stryker's mutator families, every mutant behind one schema's switch and run against
//! the test files that reach it, with the Stryker document checked; the statuses of the schema
//! equal those of a run per mutant with its edit applied (`ASSAY_MUTATE_SCHEMATA=0`), a
//! schema that node refuses at load is never a kill, and a kill is confirmed by a re-run in
//! its own job.

use crate::support;

use support::{Repo, Run, proven_fix, run};

const PAGER_TESTS: &str = "const { test } = require('node:test');
const assert = require('node:assert/strict');
const { pages } = require('../src/pager.js');

test('test_full_pages', () => {
  assert.equal(pages(10, 5), 2);
});
";

#[test]
fn a_javascript_fix_is_proven_and_its_mutation_check_kills_and_lets_survive() {
    let repo = Repo::new();
    repo.write("package.json", "{ \"name\": \"pager\", \"version\": \"1.0.0\" }\n")
        .write(
            "src/pager.js",
            "'use strict';\n\nfunction pages(items, per) {\n  return Math.floor(items / per);\n}\n\nmodule.exports = { pages };\n",
        )
        .write("test/pager.test.js", PAGER_TESTS);
    repo.commit("pager");
    repo.write(
        "src/pager.js",
        "'use strict';\n\nfunction pages(items, per) {\n  let count = Math.floor(items / per);\n  if (items % per > 0) {\n    count++;\n  }\n  return count;\n}\n\nmodule.exports = { pages };\n",
    )
    .write(
        "test/pager.test.js",
        &format!("{PAGER_TESTS}\ntest('test_partial_last_page_is_counted', () => {{\n  assert.equal(pages(11, 5), 3);\n}});\n"),
    );
    repo.commit("pager: count the last partial page");
    let evidence = &proven_fix(&repo, "test: test_partial_last_page_is_counted");
    // 11 % 5 is 1: a condition of `true` or `>=` still counts the partial page.
    let outcomes = assert_partial_page_check(evidence, "test/pager.test.js");
    assert!(
        outcomes.contains(&("`++` -> `--`".into(), "killed".into())),
        "{outcomes:?}"
    );
}

/// The mutation check of the partial-page fix: six mutants, four killed, `>` → `>=` and the
/// condition made `true` surviving, the test file excluded; each mutant's description and
/// status.
fn assert_partial_page_check(
    evidence: &serde_json::Value,
    test_file: &str,
) -> Vec<(String, String)> {
    let check = &evidence["mutation_check"];
    let outcomes: Vec<(String, String)> = check["mutants"]
        .as_array()
        .expect("mutants")
        .iter()
        .map(|m| {
            (
                m["mutant"]["description"].as_str().unwrap_or("").to_owned(),
                m["outcome"]["status"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(outcomes.len(), 6, "{check:#}");
    assert_eq!(check["killed"], 4, "{check:#}");
    for survivor in ["`>` -> `>=`", "`items % per > 0` -> `true`"] {
        assert!(
            outcomes.contains(&(survivor.into(), "survived".into())),
            "{outcomes:?}"
        );
    }
    assert_eq!(check["excluded_files"][0]["path"], test_file);
    outcomes
}

#[test]
fn a_typescript_fix_is_proven_with_its_types_erased_and_its_mutation_check_judges_it() {
    let repo = support::typed_pager_repo();
    repo.write(
        "src/pager.ts",
        "export interface Listing { items: number; per: number }\n\nexport function pages({ items, per }: Listing): number {\n  let count: number = Math.floor(items / per);\n  if (items % per > 0) {\n    count++;\n  }\n  return count;\n}\n",
    )
    .write(
        "test/pager.test.ts",
        &format!("{}\ntest('a partial last page is counted', () => {{\n  assert.equal(pages({{ items: 11, per: 5 }}), 3);\n}});\n", support::TYPED_PAGER_TESTS),
    );
    repo.commit("pager: count the last partial page");
    // The new test failed on the base and passed on the candidate: both ran, erased.
    let evidence = &proven_fix(&repo, "test: \"a partial last page is counted\"");
    // The mutants of the changed TypeScript ran with their edits erased, with the verdicts
    // of the same fix in JavaScript.
    let outcomes = assert_partial_page_check(evidence, "test/pager.test.ts");
    assert!(
        outcomes.contains(&("`++` -> `--`".into(), "killed".into())),
        "{outcomes:?}"
    );
}

/// ES module: `isLarge`'s test never asks the limit itself (`>` survives), and nothing asks
/// for an invoice without a customer.
const INVOICE: &str = "// Invoice arithmetic.
import tax from './tax.cjs';

export function total(lines) {
  let sum = 0;
  for (const line of lines) {
    sum += line.price * line.quantity;
  }
  return tax.withVat(sum);
}

export function isLarge(lines, limit) {
  return total(lines) >= limit;
}

export function customerName(invoice) {
  return invoice.customer?.name ?? 'anonymous';
}
";

/// CommonJS, loaded by the ES module.
const TAX: &str = "'use strict';

function withVat(amount) {
  return amount + amount / 5;
}

module.exports = { withVat };
";

const TESTS: &str = "import { test } from 'node:test';
import assert from 'node:assert/strict';
import { total, isLarge, customerName } from '../src/invoice.mjs';

test('total adds the VAT to price times quantity', () => {
  assert.equal(total([{ price: 3, quantity: 5 }, { price: 5, quantity: 1 }]), 24);
});

test('an invoice over the limit is large', () => {
  assert.equal(isLarge([{ price: 50, quantity: 3 }], 100), true);
});

test('the customer names the invoice', () => {
  assert.equal(customerName({ customer: { name: 'Ada' } }), 'Ada');
});
";

fn mutate(repo: &Repo, out_dir: &tempfile::TempDir) -> Run {
    mutate_with(repo, out_dir, &[])
}

fn mutate_with(repo: &Repo, out_dir: &tempfile::TempDir, env: &[(&str, &str)]) -> Run {
    mutate_args(repo, out_dir, env, &[])
}

fn mutate_args(
    repo: &Repo,
    out_dir: &tempfile::TempDir,
    env: &[(&str, &str)],
    args: &[&str],
) -> Run {
    let (mut command, json) = support::mutate_command(repo, out_dir.path());
    command
        .args(args)
        .arg("--store")
        .arg(format!("file://{}", out_dir.path().join("store").display()))
        .env("ASSAY_STATE_DIR", out_dir.path().join("state"))
        .env("XDG_CACHE_HOME", out_dir.path().join("cache"))
        .envs(env.iter().copied());
    run(command, Some(json))
}

#[test]
fn mutate_on_a_node_test_project_mutates_es_and_commonjs_modules() {
    let repo = Repo::new();
    repo.write(
        "package.json",
        "{ \"name\": \"invoice\", \"version\": \"1.0.0\" }\n",
    )
    .write("src/invoice.mjs", INVOICE)
    .write("src/tax.cjs", TAX)
    .write("test/invoice.test.mjs", TESTS);
    repo.commit("invoice");
    let out_dir = tempfile::tempdir().expect("temp dir");
    let run = mutate(&repo, &out_dir);
    assert_eq!(run.code, 5, "survivors: exit 5\n{}", run.explain());
    let doc = run.evidence.as_ref().expect("the Stryker document");
    assert_eq!(doc["schemaVersion"], "1");
    let files = doc["files"].as_object().expect("files");
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        ["src/invoice.mjs", "src/tax.cjs"],
        "never a test file: {doc:#}"
    );
    let status = |path: &str, line: u64, replacement: &str| -> String {
        let file = &doc["files"][path];
        assert_eq!(file["language"], "javascript");
        let mutant = file["mutants"]
            .as_array()
            .expect("mutants")
            .iter()
            .find(|m| m["location"]["start"]["line"] == line && m["replacement"] == replacement)
            .unwrap_or_else(|| panic!("no mutant {replacement:?} on line {line}: {file:#}"));
        mutant["status"].as_str().unwrap_or("").to_owned()
    };
    assert_eq!(status("src/invoice.mjs", 7, "/"), "Killed");
    assert_eq!(status("src/invoice.mjs", 7, "-="), "Killed");
    assert_eq!(status("src/invoice.mjs", 13, "<"), "Killed");
    assert_eq!(status("src/invoice.mjs", 13, ">"), "Survived");
    assert_eq!(status("src/invoice.mjs", 17, "."), "Survived");
    // `??` never evaluates its right side here: no test reaches the string.
    assert_eq!(status("src/invoice.mjs", 17, "''"), "NoCoverage");
    assert_eq!(status("src/tax.cjs", 4, "-"), "Killed");
    assert_eq!(status("src/tax.cjs", 4, "*"), "Killed");
    // The directive and the export object's keys are no text the program reads.
    let tax_mutants = doc["files"]["src/tax.cjs"]["mutants"]
        .as_array()
        .expect("mutants");
    assert!(
        tax_mutants
            .iter()
            .all(|m| m["location"]["start"]["line"] != 1),
        "{tax_mutants:#?}"
    );
    assert!(
        run.stdout.contains("0 error, 0 pending"),
        "{}",
        run.explain()
    );
    let schemata = &doc["assay"]["schemata"];
    assert_eq!(
        schemata["held"], doc["assay"]["summary"]["mutants"],
        "every mutant behind the switch: {schemata:#}"
    );
}

/// Each mutant's id and status, and how many tests its run completed, in report order.
fn statuses(doc: &serde_json::Value) -> Statuses {
    doc["files"]
        .as_object()
        .expect("files")
        .iter()
        .flat_map(|(path, file)| {
            file["mutants"]
                .as_array()
                .expect("mutants")
                .iter()
                .map(move |m| {
                    (
                        format!(
                            "{path}:{} {}",
                            m["location"]["start"]["line"], m["replacement"]
                        ),
                        m["id"].as_str().expect("id").to_owned(),
                        m["status"].as_str().expect("status").to_owned(),
                        m["testsCompleted"].as_u64(),
                    )
                })
        })
        .collect()
}

/// An ES module package (`"type": "module"`, `.js` files) with a CommonJS file beside it, and
/// two test files, each reaching one module only.
fn shop() -> Repo {
    let repo = Repo::new();
    repo.write(
        "package.json",
        "{ \"name\": \"shop\", \"version\": \"1.0.0\", \"type\": \"module\" }\n",
    )
    .write(
        "src/cart.js",
        "import { createRequire } from 'node:module';\nconst require = createRequire(import.meta.url);\nconst { round } = require('./money.cjs');\n\nexport function subtotal(items) {\n  let sum = 0\n  for (const item of items) {\n    sum += item.price * item.count\n  }\n  return round(sum)\n}\n\nexport function isEmpty(items) {\n  return items.length === 0 || !items.some((i) => i.count > 0);\n}\n\nexport function label(items) {\n  const first = items[0]?.name ?? 'nothing';\n  return isEmpty(items) ? 'empty' : `${first} and ${items.length - 1} more`;\n}\n",
    )
    .write(
        "src/money.cjs",
        "'use strict';\n\nfunction round(amount) {\n  return Math.round(amount * 100) / 100;\n}\n\nmodule.exports = { round };\n",
    )
    .write(
        "src/shipping.js",
        "export const FREE_FROM = 50;\n\nexport function shipping(total, express) {\n  if (total >= FREE_FROM && !express) {\n    return 0;\n  }\n  let fee = express ? 9 : 4;\n  fee++;\n  return fee;\n}\n",
    )
    .write(
        "test/cart.test.js",
        "import { test } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { subtotal, isEmpty } from '../src/cart.js';\n\ntest('subtotal is price times count, rounded', () => {\n  assert.equal(subtotal([{ price: 1.005, count: 2 }, { price: 3, count: 1 }]), 5.01);\n});\n\ntest('a cart of nothing is empty', () => {\n  assert.equal(isEmpty([]), true);\n  assert.equal(isEmpty([{ count: 1 }]), false);\n});\n",
    )
    .write(
        "test/shipping.test.js",
        "import { test } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { shipping } from '../src/shipping.js';\n\ntest('shipping is free from fifty', () => {\n  assert.equal(shipping(60, false), 0);\n});\n\ntest('express costs more', () => {\n  assert.equal(shipping(10, true), 10);\n});\n\ntest('standard costs five', () => {\n  assert.equal(shipping(10, false), 5);\n});\n",
    );
    repo.commit("shop");
    repo
}

/// Whether the schema's status agrees with the per-mutant one: the same, or no test reaching
/// code that the whole suite did not kill either.
fn agrees(schema: &str, per_mutant: &str) -> bool {
    schema == per_mutant || (schema == "NoCoverage" && per_mutant == "Survived")
}

type Statuses = Vec<(String, String, String, Option<u64>)>;

/// The schema run's statuses, once each agrees with the run per mutant's, mutant by mutant.
fn agreeing(schema_doc: &serde_json::Value, alone_doc: &serde_json::Value) -> Statuses {
    let (with_schema, each_alone) = (statuses(schema_doc), statuses(alone_doc));
    assert_eq!(with_schema.len(), each_alone.len());
    for (s, a) in with_schema.iter().zip(&each_alone) {
        assert_eq!(
            (&s.0, &s.1),
            (&a.0, &a.1),
            "the same mutants in the same order"
        );
        assert!(
            agrees(&s.2, &a.2),
            "{} ({}): schema {} but alone {}",
            s.0,
            s.1,
            s.2,
            a.2
        );
    }
    with_schema
}

#[test]
fn schema_statuses_equal_per_mutant_statuses_and_only_the_files_that_reach_a_mutant_run() {
    let repo = shop();
    let schema_dir = tempfile::tempdir().expect("temp dir");
    let schema = mutate(&repo, &schema_dir);
    assert_eq!(schema.code, 5, "{}", schema.explain());
    let alone_dir = tempfile::tempdir().expect("temp dir");
    let alone = mutate_with(&repo, &alone_dir, &[("ASSAY_MUTATE_SCHEMATA", "0")]);
    assert_eq!(alone.code, 5, "{}", alone.explain());
    let (schema_doc, alone_doc) = (
        schema.evidence.as_ref().expect("report"),
        alone.evidence.as_ref().expect("report"),
    );
    assert_eq!(
        schema_doc["assay"]["schemata"]["held"], schema_doc["assay"]["summary"]["mutants"],
        "{:#}",
        schema_doc["assay"]
    );
    assert!(
        alone_doc["assay"]["schemata"].is_null(),
        "{:#}",
        alone_doc["assay"]
    );
    let with_schema = agreeing(schema_doc, alone_doc);
    let each_alone = statuses(alone_doc);
    assert!(with_schema.len() >= 20, "{with_schema:#?}");
    let kinds: std::collections::BTreeSet<String> =
        with_schema.iter().map(|s| s.2.clone()).collect();
    for status in ["Killed", "Survived", "NoCoverage"] {
        assert!(kinds.contains(status), "no {status}: {with_schema:#?}");
    }
    // Only the file that reaches a mutant runs: shipping's survivors run its three tests,
    // never the cart's two; alone, every mutant runs all five.
    let file = &schema_doc["files"]["src/shipping.js"]["mutants"];
    let survivors: Vec<&serde_json::Value> = file
        .as_array()
        .expect("mutants")
        .iter()
        .filter(|m| m["status"] == "Survived")
        .collect();
    assert!(!survivors.is_empty(), "{file:#}");
    for mutant in survivors {
        assert_eq!(mutant["testsCompleted"], 3, "{mutant:#}");
        let covered = mutant["coveredBy"].to_string();
        assert!(!covered.contains("cart"), "{mutant:#}");
    }
    for (_, _, status, completed) in &each_alone {
        if status == "Survived" {
            assert_eq!(*completed, Some(5));
        }
    }
}

/// A meter with state at module level in an ES module and a CommonJS one: a mutant that sees
/// another's readings or cache fails tests it should pass.
fn meter() -> Repo {
    let repo = Repo::new();
    repo.write(
        "package.json",
        "{ \"name\": \"meter\", \"version\": \"1.0.0\", \"type\": \"module\" }\n",
    )
    .write(
        "src/meter.js",
        "let readings = 0;\n\nexport function record(value) {\n  if (value < 0) {\n    process.exit(2);\n  }\n  readings += 1;\n  return readings;\n}\n\nexport function total(values) {\n  let sum = 0;\n  for (let i = 0; i < values.length; i++) {\n    sum += values[i];\n  }\n  return sum;\n}\n\nexport function count() {\n  return readings;\n}\n",
    )
    .write(
        "src/units.cjs",
        "'use strict';\n\nconst seen = new Map();\n\nfunction toWatts(kilowatts) {\n  if (!seen.has(kilowatts)) {\n    seen.set(kilowatts, kilowatts * 1000);\n  }\n  return seen.get(kilowatts);\n}\n\nmodule.exports = { toWatts, cached: () => seen.size };\n",
    )
    .write(
        "test/meter.test.js",
        "import { test, describe } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { record, total, count } from '../src/meter.js';\nimport { each } from './support/table.js';\n\ntest('the first reading is one', () => {\n  assert.equal(record(5), 1);\n  assert.equal(count(), 1);\n});\n\ndescribe('totals', () => {\n  each([[1, 2, 3], [6]], 'readings add up to six', (values) => {\n    assert.equal(total(values), 6);\n  });\n});\n",
    )
    // mocha's globals from a preload, with a `this` per suite, as older suites are written.
    .write(
        "test/support/globals.cjs",
        "const t = require('node:test');\nlet context = {};\nglobalThis.describe = (name, fn) => t.describe(name, () => {\n  const parent = context;\n  context = Object.create(parent);\n  try { fn.call(context); } finally { context = parent; }\n});\nglobalThis.it = (name, fn) => { const self = context; return t.it(name, () => fn.call(self)); };\nglobalThis.before = (fn) => { const self = context; return t.before(() => fn.call(self)); };\n",
    )
    .write(
        "test/heater.test.cjs",
        "const assert = require('node:assert/strict');\nconst { toWatts } = require('../src/units.cjs');\n\ndescribe('a heater', function () {\n  before(function () {\n    this.watts = toWatts(3);\n  });\n\n  it('draws three thousand watts', function () {\n    assert.equal(this.watts, 3000);\n  });\n});\n",
    )
    // Tests a helper defines: node names the helper's file, `node --test` the test file.
    .write(
        "test/support/table.js",
        "import { test } from 'node:test';\n\nexport function each(rows, name, check) {\n  for (const row of rows) {\n    test(`${name}: ${row.join(' + ')}`, () => check(row));\n  }\n}\n",
    )
    .write(
        "test/units.test.cjs",
        "const { test } = require('node:test');\nconst assert = require('node:assert/strict');\nconst { toWatts, cached } = require('../src/units.cjs');\n\ntest('kilowatts are a thousand watts', () => {\n  assert.equal(toWatts(2), 2000);\n  assert.equal(cached(), 1);\n});\n",
    );
    repo.commit("meter");
    repo
}

/// `assay mutate` on [`meter`] with its mocha-style preload, `env` added.
fn mutate_meter(repo: &Repo, out_dir: &tempfile::TempDir, env: &[(&str, &str)]) -> Run {
    let preload = [
        "--test-command",
        "node --require ./test/support/globals.cjs",
    ];
    mutate_args(repo, out_dir, env, &preload)
}

/// The run's Stryker document; the run's output when it wrote none.
fn report_of(run: &Run) -> &serde_json::Value {
    run.evidence
        .as_ref()
        .unwrap_or_else(|| panic!("{}", run.explain()))
}

#[test]
fn switched_mutants_share_a_process_and_reach_the_verdicts_of_a_run_per_mutant() {
    let repo = meter();
    let schema_dir = tempfile::tempdir().expect("temp dir");
    let schema = mutate_meter(&repo, &schema_dir, &[]);
    let doc = report_of(&schema);
    let alone_dir = tempfile::tempdir().expect("temp dir");
    let alone = mutate_meter(&repo, &alone_dir, &[("ASSAY_MUTATE_SCHEMATA", "0")]);
    let alone_doc = report_of(&alone);
    let schemata = &doc["assay"]["schemata"];
    let batched = schemata["batched"].as_u64().unwrap_or(0);
    assert!(batched >= 4, "{schemata:#}");
    assert!(
        schemata["batches"].as_u64().unwrap_or(0) >= 1,
        "{schemata:#}"
    );
    assert!(
        schema.stdout.contains(&format!("{batched} mutants ran in")),
        "{}",
        schema.explain()
    );
    let with_schema = agreeing(doc, alone_doc);
    let status_of = |mutant: &str| {
        with_schema
            .iter()
            .find(|s| s.0 == mutant)
            .map(|s| s.2.clone())
            .unwrap_or_else(|| panic!("no {mutant}: {with_schema:#?}"))
    };
    // A loop that never ends stops at its own limit; the batch goes on with the rest.
    assert_eq!(status_of(r#"src/meter.js:13 "--""#), "Timeout");
    // A mutant whose tests end node runs alone, where ending the session kills it.
    assert_eq!(status_of(r#"src/meter.js:4 ">=""#), "Killed");
    // Each mutant sees its own module state: a reading is the first, a cache holds one entry.
    assert_eq!(status_of(r#"src/meter.js:4 "<=""#), "Survived");
    assert_eq!(status_of(r#"src/units.cjs:6 "true""#), "Survived");
}

#[test]
fn a_schema_node_refuses_at_load_is_never_a_kill_and_its_mutants_run_alone() {
    // The file declares the schema's own tracer: tree-sitter parses the schema, node refuses
    // it ("already been declared") when it loads, so every test of the unmutated schema fails.
    let repo = Repo::new();
    repo.write(
        "package.json",
        "{ \"name\": \"clash\", \"version\": \"1.0.0\" }\n",
    )
    .write(
        "src/clash.js",
        "'use strict';\n\nlet __assay_t = 0;\n\nclass Counter {\n  'next'(n) {\n    return n + 1;\n  }\n}\n\nfunction twice(n) {\n  return n * 2 > __assay_t;\n}\n\nmodule.exports = { Counter, twice };\n",
    )
    .write(
        "test/clash.test.js",
        "const { test } = require('node:test');\nconst assert = require('node:assert/strict');\nconst { Counter, twice } = require('../src/clash.js');\n\ntest('next counts on', () => {\n  assert.equal(new Counter().next(1), 2);\n});\n\ntest('twice is positive', () => {\n  assert.equal(twice(1), true);\n});\n",
    );
    repo.commit("clash");
    let schema_dir = tempfile::tempdir().expect("temp dir");
    let schema = mutate(&repo, &schema_dir);
    let alone_dir = tempfile::tempdir().expect("temp dir");
    let alone = mutate_with(&repo, &alone_dir, &[("ASSAY_MUTATE_SCHEMATA", "0")]);
    assert_eq!(
        schema.code,
        alone.code,
        "{}\n{}",
        schema.explain(),
        alone.explain()
    );
    let doc = schema.evidence.as_ref().expect("report");
    let schemata = &doc["assay"]["schemata"];
    assert_eq!(schemata["held"], 0, "{schemata:#}");
    let note = schemata["note"].as_str().unwrap_or_default();
    assert!(note.contains("failed unmutated"), "{schemata:#}");
    // The method named by a string has no switched form that parses: it left the schema first.
    let built_alone = schemata["builtAlone"].to_string();
    assert!(built_alone.contains("does not parse"), "{schemata:#}");
    let (with_schema, each_alone) = (
        statuses(doc),
        statuses(alone.evidence.as_ref().expect("report")),
    );
    assert_eq!(with_schema.len(), each_alone.len());
    for (s, a) in with_schema.iter().zip(&each_alone) {
        assert_eq!(
            (&s.0, &s.2),
            (&a.0, &a.2),
            "the schema's failure is no kill"
        );
    }
    assert!(
        with_schema.iter().any(|s| s.2 == "Survived"),
        "{with_schema:#?}"
    );
}

/// A kill is re-run at once in the mutant's own job: a test that checks only on a job's first
/// run (it leaves a file in the tree) passes when re-run there, a flaky kill, while a steady
/// kill fails again; neither costs a second job.
#[test]
fn a_kill_is_confirmed_in_its_own_job_and_one_that_passes_when_re_run_is_flaky() {
    let repo = Repo::new();
    repo.write(
        "package.json",
        "{ \"name\": \"pages\", \"version\": \"1.0.0\", \"type\": \"module\" }\n",
    )
    .write(
        "src/pages.js",
        "export function isPastEnd(page, last) {\n  return page > last;\n}\n\nexport function isFirst(page) {\n  return page <= 1;\n}\n",
    )
    .write(
        "test/pages.test.js",
        "import { test } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { existsSync, writeFileSync } from 'node:fs';\nimport { isFirst, isPastEnd } from '../src/pages.js';\n\nconst checked = new URL('../.checked-once', import.meta.url);\n\ntest('the last page is not past the end', () => {\n  if (existsSync(checked)) return;\n  writeFileSync(checked, '');\n  assert.equal(isPastEnd(3, 3), false);\n});\n\ntest('only page one is first', () => {\n  assert.equal(isFirst(1), true);\n  assert.equal(isFirst(2), false);\n});\n",
    );
    repo.commit("pages: end and first page checks");
    let out_dir = tempfile::tempdir().expect("temp dir");
    let run = mutate(&repo, &out_dir);
    let doc = run.evidence.as_ref().expect("the Stryker document");
    // isPastEnd's mutants (its body on lines 1-3) against isFirst's (lines 5-7).
    support::assert_flaky_and_steady_kills(doc, "src/pages.js", 1..=3, 5..=7);
    assert!(
        !run.stderr.contains("by a second run"),
        "every kill was confirmed in its own job\n{}",
        run.explain()
    );
}

#[test]
fn an_endless_mutant_stops_at_a_limit_from_its_own_test_files_time_not_the_whole_runs() {
    // The unmutated run takes over 2.5 s (the settlement test waits), so a limit from the
    // whole run would be over 27 s; the counter's test file takes a fraction of a second.
    let repo = Repo::new();
    repo.write(
        "package.json",
        "{ \"name\": \"ledger\", \"version\": \"1.0.0\", \"type\": \"module\" }\n",
    )
    .write(
        "src/count.js",
        "export function countUp(n) {\n  let i = 0;\n  while (i < n) {\n    i++;\n  }\n  return i;\n}\n",
    )
    .write(
        "src/settle.js",
        "export function settle() {\n  return 'settled';\n}\n",
    )
    .write(
        "test/count.test.js",
        "import { test } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { countUp } from '../src/count.js';\n\ntest('counts up to three', () => {\n  assert.equal(countUp(3), 3);\n});\n",
    )
    .write(
        "test/settle.test.js",
        "import { test } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { settle } from '../src/settle.js';\n\ntest('a settlement waits for the bank', async () => {\n  await new Promise((resolve) => setTimeout(resolve, 2500));\n  assert.equal(settle(), 'settled');\n});\n",
    );
    repo.commit("ledger");
    let out_dir = tempfile::tempdir().expect("temp dir");
    let run = mutate(&repo, &out_dir);
    let doc = run.evidence.as_ref().expect("report");
    let counter = doc["files"]["src/count.js"]["mutants"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", run.explain()));
    let endless: Vec<&serde_json::Value> = counter
        .iter()
        .filter(|m| m["status"] == "Timeout")
        .collect();
    // `i++` -> `i--` never reaches n.
    assert!(!endless.is_empty(), "{counter:#?}");
    for mutant in endless {
        let reason = mutant["statusReason"].as_str().expect("a reason");
        let limit: u64 = reason
            .strip_prefix("ran past its ")
            .and_then(|r| r.strip_suffix("s limit"))
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{mutant:#}"));
        assert!(limit <= 6, "{mutant:#}");
        assert!(
            mutant["coveredBy"].to_string().contains("count.test.js")
                && !mutant["coveredBy"].to_string().contains("settle"),
            "{mutant:#}"
        );
    }
    // The settlement's own mutant runs its slow file, within the limit that file's time gives.
    let settle = &doc["files"]["src/settle.js"]["mutants"];
    assert!(
        settle
            .as_array()
            .expect("mutants")
            .iter()
            .all(|m| m["status"] == "Killed"),
        "{settle:#}"
    );
}

/// A component in TSX, built by the project's own factory (`"jsxFactory": "h"`, as Preact's
/// projects set it), tested by a TSX test module: its JSX is erased to calls of `h`, its
/// markup is never a mutant, and the schema's statuses equal a run per mutant's.
#[test]
fn a_tsx_component_is_mutated_with_its_jsx_erased_and_agrees_with_a_run_per_mutant() {
    let repo = Repo::new();
    repo.write(
        "package.json",
        "{ \"name\": \"badges\", \"version\": \"1.0.0\", \"type\": \"module\" }\n",
    )
    .write(
        "tsconfig.json",
        "{ \"compilerOptions\": { \"strict\": true, \"jsx\": \"react\", \"jsxFactory\": \"h\" } }\n",
    )
    .write(
        "src/h.ts",
        "export type Child = string | number | boolean | null | undefined;\n\nexport function h(tag: string, props: Record<string, string> | null, ...children: Child[]): string {\n  const attributes = Object.entries(props ?? {}).map(([name, value]) => ` ${name}=\"${value}\"`).join('');\n  const inner = children.filter((c) => c !== false && c !== null && c !== undefined).join('');\n  return `<${tag}${attributes}>${inner}</${tag}>`;\n}\n",
    )
    .write(
        "src/badge.tsx",
        "import { h } from './h.js';\n\nexport interface BadgeProps { count: number; label: string }\n\nexport function Badge({ count, label }: BadgeProps): string {\n  const shown = count > 99 ? '99+' : String(count);\n  return (\n    <span className=\"badge\" title={label}>\n      {count > 0 && <b>{shown}</b>}\n      {label}\n    </span>\n  );\n}\n",
    )
    .write(
        "test/badge.test.tsx",
        "import { test } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { h } from '../src/h.js';\nimport { Badge } from '../src/badge.js';\n\ntest('a badge shows its count and label', () => {\n  assert.equal(Badge({ count: 3, label: 'inbox' }), '<span className=\"badge\" title=\"inbox\"><b>3</b>inbox</span>');\n});\n\ntest('an empty badge shows its label only', () => {\n  assert.equal(Badge({ count: 0, label: 'inbox' }), <span className=\"badge\" title=\"inbox\">inbox</span>);\n});\n",
    );
    repo.commit("badges");
    let schema_dir = tempfile::tempdir().expect("temp dir");
    let schema = mutate(&repo, &schema_dir);
    assert_eq!(schema.code, 5, "{}", schema.explain());
    let doc = schema.evidence.as_ref().expect("report");
    let files: Vec<&String> = doc["files"].as_object().expect("files").keys().collect();
    assert_eq!(files, ["src/badge.tsx", "src/h.ts"], "{:#}", doc["assay"]);
    assert_eq!(
        doc["assay"]["schemata"]["held"], doc["assay"]["summary"]["mutants"],
        "{:#}",
        doc["assay"]
    );
    let badge = doc["files"]["src/badge.tsx"]["mutants"]
        .as_array()
        .expect("mutants");
    for mutant in badge {
        let original = mutant["mutatorName"].as_str().unwrap_or("");
        let replacement = mutant["replacement"].as_str().unwrap_or("");
        assert!(
            !replacement.contains("badge") && !original.is_empty(),
            "markup mutated: {mutant:#}"
        );
    }
    let killed = |line: u64| {
        badge
            .iter()
            .any(|m| m["location"]["start"]["line"] == line && m["status"] == "Killed")
    };
    assert!(killed(9), "the count's guard inside the JSX: {badge:#?}");
    assert!(
        badge
            .iter()
            .any(|m| m["location"]["start"]["line"] == 6 && m["status"] == "Survived"),
        "no test shows a count over 99: {badge:#?}"
    );
    let alone_dir = tempfile::tempdir().expect("temp dir");
    let alone = mutate_with(&repo, &alone_dir, &[("ASSAY_MUTATE_SCHEMATA", "0")]);
    assert_eq!(alone.code, 5, "{}", alone.explain());
    agreeing(doc, alone.evidence.as_ref().expect("report"));
    let test_files: Vec<&String> = doc["testFiles"]
        .as_object()
        .expect("testFiles")
        .keys()
        .collect();
    assert_eq!(
        test_files,
        ["test/badge.test.tsx"],
        "{:#}",
        doc["testFiles"]
    );
}

/// A TypeScript package (`"type": "module"`, node16 resolution, an `outDir` the erasure
/// ignores): an ES module with types of every kind, a CommonJS `.cts` module, a declaration
/// file, and tests in TypeScript that import the sources' JavaScript names.
fn typed_shop() -> Repo {
    let repo = Repo::new();
    repo.write(
        "package.json",
        "{ \"name\": \"typed-shop\", \"version\": \"1.0.0\", \"type\": \"module\" }\n",
    )
    .write(
        "tsconfig.json",
        "{\n  // the project's own build writes dist/; the tests never import it\n  \"compilerOptions\": { \"strict\": true, \"module\": \"node16\", \"moduleResolution\": \"node16\", \"outDir\": \"dist\", \"target\": \"es2022\" }\n}\n",
    )
    .write(
        "src/cart.ts",
        "import { round } from './money.cjs';\nimport type { Currency } from './currency.js';\n\nexport interface Item { name: string; price: number; count: number }\nexport type Mode = \"standard\" | \"express\";\n\nexport class Cart<T extends Item = Item> {\n  constructor(private readonly items: T[], public currency: Currency = 'EUR') {}\n\n  subtotal(): number {\n    let sum: number = 0;\n    for (const item of this.items) {\n      sum += item.price * item.count;\n    }\n    return round(sum);\n  }\n\n  isEmpty(): boolean {\n    return this.items.length === 0 || !this.items.some((i: T) => i.count > 0);\n  }\n}\n\nexport function shipping(total: number, mode: Mode): number {\n  if (total >= 50 && mode !== \"express\") {\n    return 0;\n  }\n  const fee = (mode === \"express\" ? 9 : 4) as number;\n  return fee + 1;\n}\n",
    )
    .write(
        "src/currency.d.ts",
        "export type Currency = 'EUR' | 'USD';\n",
    )
    .write(
        "src/money.cts",
        "export function round(amount: number): number {\n  return Math.round(amount * 100) / 100;\n}\n",
    )
    .write(
        "test/cart.test.ts",
        "import { test } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { Cart, shipping } from '../src/cart.js';\n\ntest('subtotal is price times count, rounded', () => {\n  const cart = new Cart([{ name: 'tea', price: 1.005, count: 2 }, { name: 'jam', price: 3, count: 1 }]);\n  assert.equal(cart.subtotal(), 5.01);\n});\n\ntest('a cart of nothing is empty', () => {\n  assert.equal(new Cart([]).isEmpty(), true);\n  assert.equal(new Cart([{ name: 'tea', price: 1, count: 1 }]).isEmpty(), false);\n});\n\ntest('express costs ten', () => {\n  assert.equal(shipping(10, 'express'), 10);\n});\n",
    );
    repo.commit("typed shop");
    repo
}

#[test]
fn typescript_is_mutated_behind_one_schema_run_erased_and_agrees_with_a_run_per_mutant() {
    let repo = typed_shop();
    let schema_dir = tempfile::tempdir().expect("temp dir");
    let schema = mutate(&repo, &schema_dir);
    assert_eq!(schema.code, 5, "{}", schema.explain());
    let doc = schema.evidence.as_ref().expect("report");
    // The TypeScript files are the ones mutated, never their erased JavaScript or the
    // declaration file; every mutant ran from the schema.
    let files: Vec<&String> = doc["files"].as_object().expect("files").keys().collect();
    assert_eq!(
        files,
        ["src/cart.ts", "src/money.cts"],
        "{:#}",
        doc["assay"]
    );
    assert_eq!(
        doc["assay"]["schemata"]["held"], doc["assay"]["summary"]["mutants"],
        "{:#}",
        doc["assay"]
    );
    let source = |line: u64| {
        let text = std::fs::read_to_string(repo.path().join("src/cart.ts")).expect("source");
        text.lines().nth(line as usize - 1).unwrap_or("").to_owned()
    };
    let with_schema = statuses(doc);
    assert!(with_schema.len() >= 15, "{with_schema:#?}");
    for mutant in doc["files"]["src/cart.ts"]["mutants"]
        .as_array()
        .expect("mutants")
    {
        let line = mutant["location"]["start"]["line"].as_u64().expect("line");
        let text = source(line);
        // Types hold no site: not the interface, the alias of string literals, an annotation
        // or a type argument.
        assert!(
            !text.starts_with("export interface") && !text.starts_with("export type"),
            "a mutant on a type: {mutant:#}"
        );
        let replacement = mutant["replacement"].as_str().unwrap_or("");
        assert!(
            !["number", "boolean", "T", "Item"].contains(&replacement),
            "{mutant:#}"
        );
    }
    let alone_dir = tempfile::tempdir().expect("temp dir");
    let alone = mutate_with(&repo, &alone_dir, &[("ASSAY_MUTATE_SCHEMATA", "0")]);
    assert_eq!(alone.code, 5, "{}", alone.explain());
    agreeing(doc, alone.evidence.as_ref().expect("report"));
    let kinds: std::collections::BTreeSet<String> =
        with_schema.iter().map(|s| s.2.clone()).collect();
    for status in ["Killed", "Survived"] {
        assert!(kinds.contains(status), "no {status}: {with_schema:#?}");
    }
    // The `.cts` module's rounding is killed by the cart's test through the ES module.
    let money = &doc["files"]["src/money.cts"]["mutants"];
    assert!(
        money
            .as_array()
            .expect("mutants")
            .iter()
            .any(|m| m["status"] == "Killed"),
        "{money:#}"
    );
    // Tests are named by the files the project wrote, never by their erased JavaScript.
    let names: Vec<String> = doc["files"]
        .as_object()
        .expect("files")
        .values()
        .flat_map(|f| f["mutants"].as_array().cloned().unwrap_or_default())
        .flat_map(|m| {
            let listed = |key: &str| m[key].as_array().cloned().unwrap_or_default();
            let mut ids = listed("coveredBy");
            ids.extend(listed("killedBy"));
            ids
        })
        .filter_map(|id| id.as_str().map(str::to_owned))
        .collect();
    assert!(!names.is_empty(), "{doc:#}");
    for name in &names {
        let file = name.split("::").next().unwrap_or(name);
        assert!(file.ends_with(".test.ts"), "{name}: {doc:#}");
    }
    let test_files: Vec<&String> = doc["testFiles"]
        .as_object()
        .expect("testFiles")
        .keys()
        .collect();
    assert!(
        test_files.iter().all(|f| f.ends_with(".test.ts")),
        "{test_files:?}"
    );
}

#[test]
fn a_second_run_answers_every_batched_mutant_from_the_cache_and_refuses_none() {
    let repo = meter();
    let out_dir = tempfile::tempdir().expect("temp dir");
    let cold = mutate_meter(&repo, &out_dir, &[]);
    let cold_doc = report_of(&cold);
    assert!(
        cold_doc["assay"]["schemata"]["batched"]
            .as_u64()
            .unwrap_or(0)
            >= 4,
        "{}",
        cold.explain()
    );
    let stored = cold_doc["assay"]["cache"]["stored"].as_u64().unwrap_or(0);
    assert!(stored >= 4, "{:#}", cold_doc["assay"]["cache"]);
    let warm = mutate_meter(&repo, &out_dir, &[]);
    let warm_doc = report_of(&warm);
    let cache = &warm_doc["assay"]["cache"];
    assert_eq!(
        cache["refused"].as_array().map_or(0, Vec::len),
        0,
        "{cache:#}"
    );
    assert_eq!(cache["served"].as_u64(), Some(stored), "{cache:#}");
    // Served or run again, every mutant keeps its status.
    assert_eq!(statuses(warm_doc), statuses(cold_doc));
}

#[test]
fn a_file_the_test_command_preloads_is_harness_never_a_product_file() {
    let repo = Repo::new();
    repo.write(
        "package.json",
        "{ \"name\": \"clamp\", \"version\": \"1.0.0\" }\n",
    )
    .write(
        "lib.js",
        "function clamp(x, lo, hi) {\n  if (x < lo) return lo;\n  if (x > hi) return hi;\n  return x;\n}\nmodule.exports = { clamp };\n",
    )
    // mocha's globals for node:test, outside every test directory.
    .write(
        "support/globals.cjs",
        "const t = require('node:test');\nlet depth = 0;\nglobalThis.it = (name, fn) => t.it(name, () => {\n  depth += 1;\n  try {\n    return fn();\n  } finally {\n    depth -= 1;\n  }\n});\nglobalThis.nested = () => depth > 1;\n",
    )
    .write(
        "test/lib.test.js",
        "const assert = require('node:assert');\nconst { clamp } = require('../lib.js');\n\nit('raises a low value', () => assert.strictEqual(clamp(-1, 0, 10), 0));\nit('lowers a high value', () => assert.strictEqual(clamp(11, 0, 10), 10));\n",
    );
    repo.commit("clamp");
    let out_dir = tempfile::tempdir().expect("temp dir");
    let run = mutate_args(
        &repo,
        &out_dir,
        &[],
        &["--test-command", "node --require ./support/globals.cjs"],
    );
    let doc = report_of(&run);
    let files: Vec<&String> = doc["files"].as_object().expect("files").keys().collect();
    assert_eq!(files, ["lib.js"], "{}", run.explain());
}
