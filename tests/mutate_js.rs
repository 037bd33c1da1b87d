//! JavaScript mutation end to end with the real `node`, on node:test projects built in the
//! test: a proven CommonJS fix whose mutation check kills some mutants of its changed lines
//! and lets others survive, and `assay mutate` on an ES module and a CommonJS module mutated
//! with Stryker's mutator families, every mutant a run of the suite with its edit applied, and
//! the Stryker document checked.

mod support;

use support::{Repo, Run, assay, prove, run};

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
    let run = prove(
        &repo,
        &[
            "--base",
            "main~1",
            "--criterion",
            "test: test_partial_last_page_is_counted",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.explain());
    let evidence = run.evidence.as_ref().expect("evidence written");
    let check = &evidence["mutation_check"];
    let outcomes: Vec<(&str, &str)> = check["mutants"]
        .as_array()
        .expect("mutants")
        .iter()
        .map(|m| {
            (
                m["mutant"]["description"].as_str().unwrap_or(""),
                m["outcome"]["status"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(outcomes.len(), 6, "{check:#}");
    assert_eq!(check["killed"], 4, "{check:#}");
    // 11 % 5 is 1: a condition of `true` or `>=` still counts the partial page.
    assert!(
        outcomes.contains(&("`>` -> `>=`", "survived")),
        "{outcomes:?}"
    );
    assert!(
        outcomes.contains(&("`items % per > 0` -> `true`", "survived")),
        "{outcomes:?}"
    );
    assert_eq!(check["excluded_files"][0]["path"], "test/pager.test.js");
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
    let json = out_dir.path().join("mutation.json");
    let mut command = assay();
    command
        .arg("mutate")
        .arg("-C")
        .arg(repo.path())
        .args(["--jobs", "2", "--json"])
        .arg(&json)
        .arg("--store")
        .arg(format!("file://{}", out_dir.path().join("store").display()))
        .env("ASSAY_STATE_DIR", out_dir.path().join("state"))
        .env("XDG_CACHE_HOME", out_dir.path().join("cache"));
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
    assert_eq!(status("src/invoice.mjs", 17, "''"), "Survived");
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
}
