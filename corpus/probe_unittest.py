"""unittest probe of the corpus truth: imports test files, runs the tests named NAME (or all)
with a result that records each outcome, subtests included, as JSON lines.

usage: python probe_unittest.py --out FILE [--name NAME] [--collect-only] FILE.py...
Run from the tree's root; the root (and PYTHONPATH, e.g. src) is on sys.path.
"""
import argparse
import importlib
import json
import os
import sys
import traceback
import unittest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--name")
    ap.add_argument("--collect-only", action="store_true")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    sys.path.insert(0, os.getcwd())
    out = open(a.out, "a")

    def write(rec):
        out.write(json.dumps(rec) + "\n")
        out.flush()

    selected = []
    for path in a.files:
        modname = path[:-3].replace(os.sep, ".")
        try:
            mod = importlib.import_module(modname)
        except BaseException as e:  # an import error is a collection error of the file
            write({"type": "collect-error", "nodeid": path,
                   "message": "".join(traceback.format_exception_only(type(e), e))[-400:]})
            continue
        for t in iter_tests(unittest.defaultTestLoader.loadTestsFromModule(mod)):
            name = getattr(t, "_testMethodName", None)
            if name is None:  # a loader failure standing in for tests
                write({"type": "collect-error", "nodeid": f"{path}::{t.id()}", "message": str(t)})
                continue
            nodeid = f"{path}::{type(t).__name__}::{name}"
            write({"type": "item", "nodeid": nodeid, "file": path, "name": name})
            if a.name is None or name == a.name:
                selected.append((nodeid, t))
    if a.collect_only:
        return
    for nodeid, t in selected:
        t.run(Recorder(nodeid, write))


def iter_tests(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from iter_tests(t)
        else:
            yield t


def kind_of(test, err):
    typ, _, tb = err
    if issubclass(typ, AssertionError):
        return "assertion"
    # Where was it raised: in the test method itself (a failure of the test, SPEC §2), or in
    # setUp/tearDown (a setup error, not a reproduced bug)?
    frames = [f.name for f in traceback.extract_tb(tb)]
    if test._testMethodName in frames:
        return "exception"
    if any(f in ("setUp", "asyncSetUp") for f in frames):
        return "setup-error"
    if any(f in ("tearDown", "asyncTearDown") for f in frames):
        return "teardown-error"
    return "exception"


class Recorder(unittest.TestResult):
    def __init__(self, nodeid, write):
        super().__init__()
        self.nodeid, self.write = nodeid, write

    def _rec(self, outcome, test, err=None, subtest=None):
        rec = {"type": "report", "nodeid": self.nodeid, "when": "call", "outcome": outcome}
        if err is not None:
            rec["exc"] = err[0].__name__
            rec["kind"] = kind_of(test, err)
            if rec["kind"] == "setup-error":
                rec["when"] = "setup"
        if subtest is not None:
            rec["subtest"] = subtest._subDescription()
        self.write(rec)

    def addSuccess(self, test):
        self._rec("passed", test)

    def addFailure(self, test, err):
        self._rec("failed", test, err)

    def addError(self, test, err):
        self._rec("failed", test, err)

    def addSkip(self, test, reason):
        self._rec("skipped", test)

    def addExpectedFailure(self, test, err):
        self._rec("skipped", test)

    def addUnexpectedSuccess(self, test):
        self._rec("failed", test)

    def addSubTest(self, test, subtest, err):
        if err is not None:
            self._rec("failed", test, err, subtest)


if __name__ == "__main__":
    main()
