//! `assay mutate`'s hot swap against its fresh-session path, end to end with the real binary
//! and real pytest: the same git project is mutated twice, once with hot swap and once with
//! `ASSAY_MUTATE_HOT_SWAP=0`, and every mutant must end with the same status. The project keeps
//! state at module level (a ledger list the tests append to, asserted by each test to hold only
//! its own session's entries), binds product names with `from ledger import …`, wraps a
//! product function in a decorator, builds a value at collection with a product function, and
//! has module-level constants, so both the swap and each reason to fall back are exercised.
//! One test also writes into its tree and changes a committed file: no later run may see
//! either (mutant trees are reused, reset to the commit).

mod support;

use std::collections::BTreeMap;

const LEDGER: &str = r#"import functools

LIMIT = 100
ENTRIES = []


def logged(function):
    @functools.wraps(function)
    def wrapper(*args):
        return function(*args)

    return wrapper


def record(amount, tag):
    if amount < 0:
        raise ValueError("negative amount")
    ENTRIES.append((tag, amount))
    return len(ENTRIES)


@logged
def fee(amount):
    if amount > LIMIT:
        return amount // 10
    return 1


class Account:
    def __init__(self, owner):
        self.owner = owner
        self.balance = 0

    def deposit(self, amount):
        if amount <= 0:
            return False
        self.balance += amount
        return True


def scaled(factor):
    def apply(value):
        return value * factor

    return apply


def cents(text):
    whole, _, part = text.partition(".")
    return int(whole) * 100 + int(part or 0)
"#;

const TESTS: &str = r#"import os

import pytest

import ledger
from ledger import Account, cents, fee, record, scaled

# Built while collecting: a mutant of `cents` must change it too.
PRICE = cents("1.50")


@pytest.fixture(scope="session")
def session_tag():
    return object()


def only_this_session(tag):
    return all(entry[0] is tag for entry in ledger.ENTRIES)


def test_record_appends_to_the_module_ledger(session_tag):
    before = len(ledger.ENTRIES)
    assert record(5, session_tag) == before + 1
    assert ledger.ENTRIES[-1] == (session_tag, 5)
    assert only_this_session(session_tag)


def test_a_negative_amount_is_refused(session_tag):
    with pytest.raises(ValueError):
        record(-1, session_tag)
    assert only_this_session(session_tag)


def test_the_ledger_holds_only_this_sessions_entries(session_tag):
    record(7, session_tag)
    assert only_this_session(session_tag)
    assert len(ledger.ENTRIES) <= 2


def test_fee():
    assert fee(50) == 1
    assert fee(200) == 20


def test_deposit():
    account = Account("ada")
    assert account.deposit(10)
    assert not account.deposit(-5)
    assert account.balance == 10


def test_scaled():
    assert scaled(3)(2) == 6


def test_cents():
    assert cents("3") == 300


def test_the_price_table_uses_the_same_parser():
    assert cents("1.50") == PRICE


def test_the_tree_is_as_committed():
    # Every run gets the tree as committed, whatever an earlier mutant's run did to its own.
    Account("ada")
    assert not os.path.exists("receipts.log")
    with open("pytest.ini") as ini:
        assert ini.read() == "[pytest]\ntestpaths = tests\n"
    with open("receipts.log", "w") as log:
        log.write("one run\n")
    with open("pytest.ini", "a") as ini:
        ini.write("; one run\n")
"#;

fn ledger_repo() -> support::Repo {
    let repo = support::Repo::new();
    repo.write("ledger/__init__.py", LEDGER)
        .write("tests/test_ledger.py", TESTS)
        .write("pytest.ini", "[pytest]\ntestpaths = tests\n");
    repo.commit("ledger");
    repo
}

fn mutate(repo: &support::Repo, hot_swap: bool) -> support::Run {
    let out = tempfile::tempdir().expect("temp dir");
    let json = out.path().join("mutation.json");
    let mut command = support::assay();
    command
        .arg("mutate")
        .arg("-C")
        .arg(repo.path())
        .args(["--jobs", "2", "--operators", "extended", "--json"])
        .arg(&json)
        .arg("--store")
        .arg(format!("file://{}", out.path().join("store").display()))
        .env("ASSAY_LOG", "assay_worker::sandbox::warm=debug")
        .env("ASSAY_MUTATE_HOT_SWAP", if hot_swap { "1" } else { "0" });
    support::run(command, Some(json))
}

/// The ledger module's mutants in the Stryker report.
fn mutants(run: &support::Run) -> &Vec<serde_json::Value> {
    let report = run.evidence.as_ref().expect("report written");
    report["files"]["ledger/__init__.py"]["mutants"]
        .as_array()
        .expect("mutants")
}

/// Mutant id → (status, description), from the Stryker report.
fn statuses(run: &support::Run) -> BTreeMap<String, (String, String)> {
    mutants(run)
        .iter()
        .map(|m| {
            (
                m["id"].as_str().unwrap_or_default().to_owned(),
                (
                    m["status"].as_str().unwrap_or_default().to_owned(),
                    format!(
                        "line {}: {}",
                        m["location"]["start"]["line"],
                        m["description"].as_str().unwrap_or_default()
                    ),
                ),
            )
        })
        .collect()
}

/// The mutants (by line) that `test` killed.
fn killed_by(run: &support::Run, test: &str) -> Vec<u64> {
    mutants(run)
        .iter()
        .filter(|m| {
            m["killedBy"].as_array().is_some_and(|by| {
                by.iter()
                    .any(|t| t.as_str().is_some_and(|t| t.contains(test)))
            })
        })
        .filter_map(|m| m["location"]["start"]["line"].as_u64())
        .collect()
}

#[test]
fn hot_swapped_mutants_end_as_in_fresh_sessions_and_never_see_each_others_state() {
    let repo = ledger_repo();
    let hot = mutate(&repo, true);
    let cold = mutate(&repo, false);
    assert_eq!(hot.code, 5, "{}", hot.explain());
    assert_eq!(cold.code, 5, "{}", cold.explain());

    let swapped = hot.stderr.matches("hot swap: ran in a fork").count();
    assert!(
        swapped >= 10,
        "few mutants were hot-swapped:\n{}",
        hot.explain()
    );
    // `cents` built PRICE while collecting; `return function(*args)` -> `return None` drops
    // the wrapper's free variable. (A module-level line runs only at import: its mutants run
    // the whole suite, with no node ids to serve.)
    for reason in [
        "cents ran during collection",
        "the free variables of logged change",
    ] {
        assert!(
            hot.stderr.contains(reason),
            "no fallback because {reason}:\n{}",
            hot.explain()
        );
    }
    assert!(
        !cold.stderr.contains("hot swap: ran"),
        "ASSAY_MUTATE_HOT_SWAP=0 still swapped:\n{}",
        cold.explain()
    );

    for run in [&hot, &cold] {
        let stained = killed_by(run, "test_the_tree_is_as_committed");
        assert!(
            stained.is_empty(),
            "runs saw what an earlier run wrote into its tree: {stained:?}"
        );
    }

    let (hot, cold) = (statuses(&hot), statuses(&cold));
    assert_eq!(
        hot.keys().collect::<Vec<_>>(),
        cold.keys().collect::<Vec<_>>()
    );
    let differ: Vec<String> = hot
        .iter()
        .filter(|(id, (status, _))| cold[*id].0 != *status)
        .map(|(id, (status, what))| format!("{what}: hot {status}, fresh {}", cold[id].0))
        .collect();
    assert!(differ.is_empty(), "statuses differ:\n{}", differ.join("\n"));
    // Both kinds of verdict are there, so equal statuses are not all one status.
    let count = |s: &str| hot.values().filter(|(status, _)| status == s).count();
    assert!(count("Killed") >= 5 && count("Survived") >= 2, "{hot:#?}");
}
