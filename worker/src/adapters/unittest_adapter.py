"""Assay's unittest adapter: runs unittest and writes a structured per-test report.

Usage: python3 unittest_adapter.py --report PATH [--name TEST ...] [--id ID ...] [FILE ...]
       python3 unittest_adapter.py --collect --report PATH
       python3 unittest_adapter.py --partition PART PARTS --report PATH
Without files or ids it discovers tests*.py from the current directory. --collect lists the
cases (schema assay.unittest.cases/v1) and runs nothing; --id runs exactly one collected case;
--partition discovers the suite, runs the test modules whose part of PARTS is PART (the first 8
bytes of the sha256 of the module's file, big-endian, modulo PARTS: a module's cases share one
process, as under `python -m unittest`) and records the whole collection in the report's
"collected", so a first run needs no listing process of its own. Load and import errors are
reported as collection errors, never as test failures; an exception raised inside the test
method is a failure, one raised by setUp, tearDown or a cleanup an error. The report is written only at the end,
with "complete": true, so a killed run leaves no trustworthy report behind.
"""

import argparse
import doctest
import hashlib
import importlib
import json
import os
import sys
import unittest


def relative(path):
    if path:
        path = os.path.relpath(os.path.abspath(path), os.getcwd())
    return path.replace(os.sep, "/")


def case_file(test):
    if isinstance(test, doctest.DocTestCase):
        return relative(test._dt_test.filename or "")
    module = sys.modules.get(type(test).__module__)
    return relative(getattr(module, "__file__", None) or "")


def case_names(test):
    """(suite, method) naming `test` the same way in the collection and in the report, so that
    `suite + "." + method` is its id. A doctest (added by a module's `load_tests`) is named by
    the object whose docstring it runs, not by doctest's own `DocTestCase.runTest`."""
    if isinstance(test, doctest.DocTestCase):
        suite, _, name = test.id().rpartition(".")
        return suite, name
    cls = type(test)
    return f"{cls.__module__}.{cls.__qualname__}", test._testMethodName


class Recorder(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.cases = []
        self.collection_errors = []

    def _record(self, test, outcome, err=None, variant=None):
        if isinstance(test, unittest.loader._FailedTest) or type(test).__name__ == "ModuleImportFailure":
            self.collection_errors.append({"file": load_failure_file(test), "message": self._text(err)})
            return
        if isinstance(test, unittest.case._SubTest):
            variant = test._subDescription()
            test = test.test_case
        if isinstance(test, unittest.suite._ErrorHolder):
            # setUpClass / setUpModule failures: a fixture error, not a test failure.
            self.collection_errors.append({"file": "", "message": f"{test.description}: {self._text(err)}"})
            return
        suite, name = case_names(test)
        self.cases.append({
            "file": case_file(test),
            "suite": suite,
            "name": name,
            "variant": variant,
            "outcome": outcome,
            "message": self._traceback(test, err) if err else None,
        })

    def _traceback(self, test, err):
        # What `python -m unittest` prints for a failure: the traceback without unittest's own
        # frames, ending in the exception. A long one keeps its end, where the exception is.
        try:
            text = self._exc_info_to_string(err, test).rstrip("\n")
        except Exception:
            return self._text(err)
        return text if len(text) <= 4000 else "…" + text[-4000:]

    def _text(self, err):
        if not err:
            return ""
        return "".join(str(part) for part in err[1].args)[:2000] or err[0].__name__

    def addSuccess(self, test):
        super().addSuccess(test)
        if not getattr(test, "_assay_had_subtests", False):
            self._record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", err)

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "failed" if raised_in_body(test, err) else "error", err)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", None)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "skipped", err)

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "failed", None)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        test._assay_had_subtests = True
        if err is None:
            self._record(subtest, "passed")
        elif issubclass(err[0], test.failureException) or raised_in_body(test, err):
            self._record(subtest, "failed", err)
        else:
            self._record(subtest, "error", err)


def raised_in_body(test, err):
    """unittest reports every exception but an AssertionError through addError, from setUp,
    the test method, tearDown and cleanups alike. An exception whose traceback passes through
    the test method's own frame is a failure of the test (the code under test raised it); one
    that never entered the method came from a fixture."""
    if isinstance(test, unittest.case._SubTest):
        test = test.test_case
    method = getattr(type(test), getattr(test, "_testMethodName", ""), None)
    code = getattr(method, "__code__", None)
    if code is None or not err:
        return False
    tb = err[2]
    while tb is not None:
        if tb.tb_frame.f_code is code:
            return True
        tb = tb.tb_next
    return False


def flatten(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from flatten(item)
        else:
            yield item


def keep(test, names):
    if not names:
        return True
    if isinstance(test, unittest.loader._FailedTest) or type(test).__name__ == "ModuleImportFailure":
        return True
    method = getattr(test, "_testMethodName", "")
    return any(method == n or method.startswith(n) for n in names)


def load(files, loader):
    if not files:
        return loader.discover(".", pattern="test*.py", top_level_dir=".")
    suite = unittest.TestSuite()
    for path in files:
        module = os.path.splitext(path)[0].replace("/", ".").replace(os.sep, ".")
        suite.addTests(loader.loadTestsFromName(module))
    return suite


def names_a_test_method(test_id):
    """Whether `test_id` is MODULE.CLASS.METHOD of a TestCase, found by importing and looking
    up attributes only. `loadTestsFromName` would call any other callable it names (a doctest's
    id names the product function whose docstring it runs) to ask it for tests."""
    parts = test_id.split(".")
    if len(parts) < 3:
        return False
    for split in range(len(parts) - 2, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        except Exception:
            return True  # the module itself is broken: loading by name reports it as unittest does
        owner = None
        for part in parts[split:]:
            owner, obj = obj, getattr(obj, part, None)
            if obj is None:
                return False
        return isinstance(owner, type) and issubclass(owner, unittest.TestCase)
    return True  # no module imports: loading by name reports the import error


def load_ids(test_ids, loader):
    """The cases `test_ids` name, in that order, and an error line for each that names none. A
    TestCase method loads by name; any other id (a doctest's) is looked up in the discovered
    suite, discovered once, so what runs is exactly what the collection listed."""
    loaded, unloadable, discovered = unittest.TestSuite(), [], None
    for test_id in test_ids:
        if names_a_test_method(test_id):
            # An id that does not load is that case's error alone: the batch's other cases
            # still run and are reported.
            try:
                loaded.addTest(loader.loadTestsFromName(test_id))
            except Exception as error:
                unloadable.append(f"{test_id} does not load: {type(error).__name__}: {error}")
            continue
        if discovered is None:
            discovered = {}
            for test in flatten(load([], loader)):
                if not is_load_failure(test):
                    discovered.setdefault(test.id(), test)
        if test_id in discovered:
            loaded.addTest(discovered[test_id])
        else:
            unloadable.append(f"{test_id} is not a collected case")
    return loaded, unloadable


def load_failure_file(test):
    """The file of the module a load failure stands for: unittest names the failure by the
    module's dotted name (`_FailedTest`'s method name; older Pythons' last id component)."""
    name = getattr(test, "_testMethodName", None) or test.id().rsplit(".", 1)[-1]
    return name.replace(".", "/") + ".py"


def is_load_failure(test):
    return isinstance(test, unittest.loader._FailedTest) or type(test).__name__ == "ModuleImportFailure"


def collection(tests, loader):
    """The cases `tests` hold and the modules that failed to load, as --collect lists them."""
    cases, errors = [], []
    for test in tests:
        if is_load_failure(test):
            errors.append({"file": load_failure_file(test), "message": str(getattr(test, "_exception", ""))[:2000]})
            continue
        suite, name = case_names(test)
        if isinstance(test, doctest.DocTestCase):
            # Its whole dotted owner is its class: it ends the reported suite exactly.
            cls = suite
        else:
            cls = type(test).__qualname__
        cases.append({"id": test.id(), "file": case_file(test), "class": cls, "name": name})
    for error in loader.errors:
        errors.append({"file": "", "message": error[:2000]})
    return {"schema": "assay.unittest.cases/v1", "cases": cases, "collection_errors": errors}


def collect(loader, report_path):
    listed = collection(flatten(load([], loader)), loader)
    with open(report_path, "w", encoding="utf-8") as out:
        json.dump(listed, out)
    print(f"unittest: {len(listed['cases'])} cases collected, {len(listed['collection_errors'])} collection errors")
    sys.exit(0)


def part_of(key, parts):
    """The part of `parts` a test module falls in: as Assay computes it for the same file."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") % max(parts, 1)


def partition(loader, part, parts):
    """The discovered suite's tests in part `part` of `parts`, by their module's file, and the
    whole suite's collection. A module that failed to load is reported by the part its file falls
    in, so exactly one batch reports it."""
    tests = list(flatten(load([], loader)))
    listed = collection(tests, loader)

    def key(test):
        return load_failure_file(test) if is_load_failure(test) else case_file(test)

    return [t for t in tests if part_of(key(t), parts) == part], listed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--report", required=True)
    parser.add_argument("--name", action="append", default=[])
    parser.add_argument("--id", action="append", default=[])
    parser.add_argument("--collect", action="store_true")
    parser.add_argument("--partition", nargs=2, type=int, metavar=("PART", "PARTS"))
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    sys.path.insert(0, os.getcwd())
    loader = unittest.TestLoader()
    if args.collect:
        collect(loader, args.report)
    unloadable, listed = [], None
    if args.partition:
        loaded, listed = partition(loader, *args.partition)
    elif args.id:
        loaded, unloadable = load_ids(args.id, loader)
    else:
        loaded = load(args.files, loader)
    suite = unittest.TestSuite(t for t in flatten(loaded) if keep(t, args.name))
    result = Recorder()
    # A partition's load errors are in its collection, reported by one batch: its own part's.
    load_errors = [] if listed is not None else loader.errors
    for error in load_errors + unloadable:
        result.collection_errors.append({"file": "", "message": error[:2000]})
    suite.run(result)
    report = {
        "schema": "assay.unittest/v1",
        "complete": True,
        "total": len(result.cases),
        "cases": result.cases,
        "collection_errors": result.collection_errors,
    }
    if listed is not None:
        report["collected"] = listed
    with open(args.report, "w", encoding="utf-8") as out:
        json.dump(report, out)
    print(f"unittest: {result.testsRun} run, {len(result.failures)} failed, {len(result.errors)} errors, {len(result.skipped)} skipped")
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
