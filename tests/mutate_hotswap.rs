//! `assay mutate`'s hot swap against its fresh-session path, end to end with the real binary
//! and real pytest: the same git project is mutated twice, once with hot swap and once with
//! `ASSAY_MUTATE_HOT_SWAP=0`, and every mutant must end with the same status. The project keeps
//! state at module level (a ledger list the tests append to, asserted by each test to hold only
//! its own session's entries), binds product names with `from ledger import …`, wraps a
//! product function in a decorator, builds a value at collection with a product function, and
//! has module-level constants, so both the swap and each reason to fall back are exercised.
//! One test also writes into its tree and changes a committed file: no later run may see
//! either (mutant trees are reused, reset to the commit). A second project keeps import-time
//! tables (as inflection does): their mutants run the module's top-level code again in the
//! fork, except where a fresh import could differ (a table read while collecting, an import
//! that registers itself in another module's list), and must still end as in fresh sessions.

use crate::support;

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
    let (mut command, json) = support::mutate_command(repo, out.path());
    command
        .args(["--operators", "extended"])
        .arg("--store")
        .arg(format!("file://{}", out.path().join("store").display()))
        .env("ASSAY_LOG", "assay_worker::sandbox::warm=debug")
        .env("ASSAY_MUTATE_HOT_SWAP", if hot_swap { "1" } else { "0" });
    support::run(command, Some(json))
}

/// The project mutated with hot swap, then without; both runs end with survivors (exit 5).
fn hot_and_cold(repo: &support::Repo) -> (support::Run, support::Run) {
    let hot = mutate(repo, true);
    let cold = mutate(repo, false);
    assert_eq!(hot.code, 5, "{}", hot.explain());
    assert_eq!(cold.code, 5, "{}", cold.explain());
    (hot, cold)
}

/// The ledger module's mutants in the Stryker report.
fn mutants(run: &support::Run) -> &Vec<serde_json::Value> {
    let report = run.evidence.as_ref().expect("report written");
    report["files"]["ledger/__init__.py"]["mutants"]
        .as_array()
        .expect("mutants")
}

/// Mutant id → (status, `FILE:LINE: description`), every file of the Stryker report.
fn statuses(run: &support::Run) -> BTreeMap<String, (String, String)> {
    let report = run.evidence.as_ref().expect("report written");
    let files = report["files"].as_object().expect("files");
    let mut statuses = BTreeMap::new();
    for (file, entry) in files {
        for m in entry["mutants"].as_array().into_iter().flatten() {
            statuses.insert(
                m["id"].as_str().unwrap_or_default().to_owned(),
                (
                    m["status"].as_str().unwrap_or_default().to_owned(),
                    format!(
                        "{file}:{}: {}",
                        m["location"]["start"]["line"],
                        m["description"].as_str().unwrap_or_default()
                    ),
                ),
            );
        }
    }
    statuses
}

/// The same mutants with the same statuses in both runs; returns the hot run's.
fn assert_same_statuses(
    hot: &support::Run,
    cold: &support::Run,
) -> BTreeMap<String, (String, String)> {
    let (hot, cold) = (statuses(hot), statuses(cold));
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
    hot
}

/// Each reason is among the run's logged fallbacks.
fn assert_fell_back(run: &support::Run, reasons: &[&str]) {
    for reason in reasons {
        assert!(
            run.stderr.contains(reason),
            "no fallback because {reason}:\n{}",
            run.explain()
        );
    }
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
    let (hot, cold) = hot_and_cold(&repo);

    let swapped = hot.stderr.matches("hot swap: ran in a fork").count();
    assert!(
        swapped >= 10,
        "few mutants were hot-swapped:\n{}",
        hot.explain()
    );
    // `cents` built PRICE while collecting `tests/test_ledger.py`, whose items a fork must
    // hold back, and no other module's test covers it; `return function(*args)` -> `return
    // None` drops the wrapper's free variable. (Module-level mutants are the next test's.)
    assert_fell_back(
        &hot,
        &[
            "collecting test_ledger.py ran the mutated code: no other test covers it",
            "the free variables of logged change",
        ],
    );
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

    let hot = assert_same_statuses(&hot, &cold);
    // Both kinds of verdict are there, so equal statuses are not all one status.
    let count = |s: &str| hot.values().filter(|(status, _)| status == s).count();
    assert!(count("Killed") >= 5 && count("Survived") >= 2, "{hot:#?}");
}

/// A module of import-time tables, as inflection keeps them: rules a helper inserts into at
/// import, a default argument bound to a table, a set the tests parametrize over, and a
/// module-level side effect the tests count.
const RULES: &str = r#"import re

SUFFIX_RULES = [
    (r"(quiz)$", r"\1zes"),
    (r"^(ox)$", r"\1en"),
    (r"(ch|sh|ss|x)$", r"\1es"),
    (r"s$", "s"),
    (r"$", "s"),
]
UNCOUNTABLE = {"fish", "sheep"}
LOADED = []
LOADED.append(__name__)
MAX_WORD = 40


def _irregular(singular, plural):
    SUFFIX_RULES.insert(0, ("(?i)^" + singular + "$", plural))


def pluralize(word, rules=SUFFIX_RULES):
    if len(word) > MAX_WORD:
        raise ValueError("word too long")
    if word in UNCOUNTABLE:
        return word
    for pattern, replacement in rules:
        if re.search(pattern, word):
            return re.sub(pattern, replacement, word)
    return word


def shout(word, marks="!"):
    return word.upper() + marks


_irregular("person", "people")
_irregular("child", "children")
"#;

/// A module whose import appends to another module's registry: running its top-level code
/// again would register it twice, so its module-level mutants must run in fresh sessions.
const PLUGIN: &str = r#"from registry import HANDLERS

NAME = "plural-plugin"
PRIORITY = 10
# No test reads it: its mutants survive in a fresh session.
HOMEPAGE = "https://plugins.example.com/plural"
HANDLERS.append(NAME)


def describe():
    return f"{NAME}:{PRIORITY}"
"#;

const RULES_TESTS: &str = r#"import pytest

import plugin
import registry
import rules


def test_regular_words():
    assert rules.pluralize("box") == "boxes"
    assert rules.pluralize("quiz") == "quizzes"
    assert rules.pluralize("ox") == "oxen"
    assert rules.pluralize("book") == "books"


def test_irregular_words():
    assert rules.pluralize("person") == "people"
    assert rules.pluralize("child") == "children"


def test_the_module_was_imported_once():
    assert rules.LOADED == ["rules"]


def test_a_long_word_is_refused():
    with pytest.raises(ValueError):
        rules.pluralize("x" * 41)


def test_shout():
    assert rules.shout("hi") == "HI!"


# Parametrized from a table while collecting: a mutant of the table changes the items.
@pytest.mark.parametrize("word", sorted(rules.UNCOUNTABLE))
def test_uncountable_words_stay(word):
    assert rules.pluralize(word) == word


def test_the_plugin_registered_once():
    assert registry.HANDLERS == ["plural-plugin"]
    assert plugin.describe() == "plural-plugin:10"
"#;

#[test]
fn module_level_mutants_run_their_module_again_only_where_a_fresh_import_would_agree() {
    let repo = support::Repo::new();
    repo.write("rules/__init__.py", RULES)
        .write("plugin.py", PLUGIN)
        .write("registry.py", "HANDLERS = []\n")
        .write("tests/test_rules.py", RULES_TESTS)
        .write("pytest.ini", "[pytest]\ntestpaths = tests\n");
    repo.commit("rules");
    let (hot, cold) = hot_and_cold(&repo);

    let again = hot.stderr.matches("top-level code runs again").count();
    assert!(
        again >= 8,
        "few module-level mutants ran their module again:\n{}",
        hot.explain()
    );
    assert_fell_back(
        &hot,
        &[
            // `sorted(rules.UNCOUNTABLE)` built the parametrize arguments.
            "UNCOUNTABLE was read while collecting",
            // plugin's import appends to registry's list, which existed before.
            "it calls append of a list that existed before",
        ],
    );

    let hot = assert_same_statuses(&hot, &cold);
    let count = |s: &str| hot.values().filter(|(status, _)| status == s).count();
    assert!(count("Killed") >= 8 && count("Survived") >= 2, "{hot:#?}");
    // The constant no test reads survives: the plugin was registered once, as in a fresh
    // session, and the baseline passed.
    let homepage: Vec<&String> = hot
        .values()
        .filter(|(_, what)| what.contains("plugins.example.com"))
        .map(|(status, _)| status)
        .collect();
    assert_eq!(homepage, ["Survived"], "{hot:#?}");
}

/// Imports that change what existed before them, one way each (the last advances another
/// module's iterator); every module also has a
/// constant no test reads (a name of its own: a name another module's code reads counts as
/// read), whose mutants survive in a fresh session and would be killed if the import ran twice.
const HOSTILE_IMPORTS: [(&str, &str, &str); 6] = [
    (
        "path_entry.py",
        "import sys\n\nVENDOR_LABEL = \"vendor\"\nsys.path.append(\"/opt/vendor-libs\")\n",
        "it calls append of a list that existed before",
    ),
    (
        "environment.py",
        "import os\n\nENV_LABEL = \"env\"\nos.environ[\"CATALOG_MODE\"] = os.environ.get(\"CATALOG_MODE\", \"\") + \"x\"\n",
        "stores into the result of an expression",
    ),
    (
        "counter.py",
        "import registry\n\nCOUNTER_LABEL = \"counter\"\nregistry.IMPORTS = registry.IMPORTS + 1\n",
        "stores into registry",
    ),
    (
        "exit_hook.py",
        "import atexit\n\nHOOK_LABEL = \"hook\"\natexit.register(print, \"bye\")\n",
        "it calls atexit.register",
    ),
    (
        "journal.py",
        "# One line per import.\n\nJOURNAL_LABEL = \"journal\"\nwith open(__file__ + \".journal\", \"a\") as out:\n    out.write(\"imported\\n\")\n",
        "it calls io.open",
    ),
    (
        "ticket.py",
        "import registry\n\nTICKET_LABEL = \"ticket\"\nFIRST = next(registry.TICKETS)\n",
        "it calls next",
    ),
];

const HOSTILE_TESTS: &str = r#"import atexit
import os
import sys

import counter
import environment
import exit_hook
import journal
import path_entry
import registry
import ticket


def test_each_import_ran_once():
    assert sys.path.count("/opt/vendor-libs") == 1
    assert os.environ["CATALOG_MODE"] == "x"
    assert registry.IMPORTS == 1
    assert ticket.FIRST == 1
    with open(journal.__file__ + ".journal") as log:
        assert log.read() == "imported\n"


def test_the_exit_hook_is_registered_once():
    assert atexit._ncallbacks() == int(os.environ["EXIT_HOOKS_BEFORE"]) + 1
"#;

#[test]
fn imports_that_change_what_existed_before_never_run_again_in_a_fork() {
    let repo = support::Repo::new();
    for (file, source, _) in HOSTILE_IMPORTS {
        repo.write(file, source);
    }
    // The conftest counts the exit hooks pytest registered before the product's imports.
    repo.write(
        "registry.py",
        "import itertools\n\nIMPORTS = 0\nTICKETS = itertools.count(1)\n",
    )
        .write(
            "tests/conftest.py",
            "import atexit\nimport os\n\nos.environ[\"EXIT_HOOKS_BEFORE\"] = str(atexit._ncallbacks())\n",
        )
        .write("tests/test_imports.py", HOSTILE_TESTS)
        .write("pytest.ini", "[pytest]\ntestpaths = tests\n");
    repo.commit("imports");
    let (hot, cold) = hot_and_cold(&repo);
    let reasons: Vec<&str> = HOSTILE_IMPORTS.iter().map(|(_, _, why)| *why).collect();
    assert_fell_back(&hot, &reasons);
    // Line 3 of each hostile module is its unread constant.
    let labels = |run: &support::Run| -> Vec<(String, String)> {
        let mut labels: Vec<(String, String)> = statuses(run)
            .into_values()
            .filter_map(|(status, what)| {
                let (file, _) = what.split_once(":3: ")?;
                HOSTILE_IMPORTS
                    .iter()
                    .any(|(hostile, _, _)| *hostile == file)
                    .then(|| (file.to_owned(), status))
            })
            .collect();
        labels.sort();
        labels
    };
    let expected: Vec<(String, String)> = HOSTILE_IMPORTS
        .iter()
        .map(|(file, _, _)| (file.to_string(), "Survived".to_owned()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(labels(&cold), expected, "{}", cold.explain());
    assert_eq!(labels(&hot), expected, "{}", hot.explain());
}

#[test]
fn a_file_a_test_writes_beside_the_product_never_reaches_another_mutant() {
    // Every mutant's fresh session starts from an unwritten tree; so must every fork.
    let repo = support::Repo::new();
    repo.write(
        "inventory/__init__.py",
        "def restock(count, batch):\n    if count < batch:\n        return count + batch\n    return count\n",
    )
    .write(
        "tests/test_inventory.py",
        "import pathlib\n\nimport inventory\n\n\ndef test_first_visit_leaves_its_mark():\n    assert inventory.restock(0, 1) == 1\n    marker = pathlib.Path(inventory.__file__).with_name(\"visited.txt\")\n    assert not marker.exists(), \"another run's file\"\n    marker.write_text(\"seen\")\n\n\ndef test_restock():\n    assert inventory.restock(1, 5) == 6\n    assert inventory.restock(7, 5) == 7\n",
    )
    .write("pytest.ini", "[pytest]\ntestpaths = tests\n");
    repo.commit("inventory");
    let (hot, cold) = hot_and_cold(&repo);
    assert_fell_back(
        &hot,
        &["a test changed the session's tree (inventory/visited.txt"],
    );
    let statuses = assert_same_statuses(&hot, &cold);
    assert!(
        statuses.values().any(|(status, _)| status == "Survived"),
        "{statuses:?}"
    );
}
