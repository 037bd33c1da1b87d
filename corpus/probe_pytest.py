"""pytest plugin of the corpus truth: records what pytest itself saw, as JSON lines.

Loaded with `-p corpus_probe_pytest` (truth.py copies it to a directory of its own so that
nothing else of corpus/ lands on sys.path). Independent of Assay: it reads pytest's own hook
objects, not a JUnit report.
"""
import json
import os

OUT = os.environ["CORPUS_PROBE_OUT"]


def _write(rec):
    with open(OUT, "a") as f:
        f.write(json.dumps(rec) + "\n")


def _exc_kind(typ):
    # An AssertionError (plain assert, unittest's failureException, pytest.fail's Failed is
    # not one) is an assertion failure; anything else raised in the body is an exception.
    return "assertion" if typ is not None and issubclass(typ, AssertionError) else "exception"


def pytest_collectreport(report):
    if report.failed:
        _write({"type": "collect-error", "nodeid": report.nodeid,
                "message": str(report.longrepr)[-400:]})


def pytest_collection_finish(session):
    for item in session.items:
        name = getattr(item, "originalname", None) or item.name.split("[")[0]
        _write({"type": "item", "nodeid": item.nodeid, "file": item.nodeid.split("::")[0],
                "name": name})


def pytest_runtest_makereport(item, call):
    # The exception's own type, before pytest turns it into a report.
    if call.excinfo is not None and not call.excinfo.errisinstance(
            __import__("_pytest.outcomes", fromlist=["Skipped"]).Skipped):
        _write({"type": "exc", "nodeid": item.nodeid, "when": call.when,
                "exc": call.excinfo.typename, "kind": _exc_kind(call.excinfo.type)})
    return None


def pytest_runtest_logreport(report):
    rec = {"type": "report", "nodeid": report.nodeid, "when": report.when,
           "outcome": report.outcome}
    ctx = getattr(report, "context", None)  # pytest 9's SubtestReport (subtests, unittest subTest)
    if ctx is not None:
        rec["subtest"] = repr((getattr(ctx, "msg", None), getattr(ctx, "kwargs", None)))
        crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
        if report.failed and crash is not None:
            typename = crash.message.split(":")[0].strip()
            rec["exc"] = typename
            rec["kind"] = "assertion" if typename in ("AssertionError", "assert") or \
                crash.message.startswith("assert ") else "exception"
    if hasattr(report, "wasxfail"):
        rec["xfail"] = True
    _write(rec)
