"""Assay's pytest observer, loaded first with ``-p assay_observer``.

For each test's call phase it records, as the innermost wrapper (so before any hook of the
project sees or changes the outcome), whether the test's function raised and which function
ran. The worker compares the JUnit report with this record: a pass the record contradicts
(its call raised, or what ran is not the function collected for it) is no pass.
"""

import json
import os

import pytest

# Left in the environment: pytest-xdist's workers inherit it and record their own calls.
_PATH = os.environ.get("ASSAY_OBSERVE_RECORD")
_OUT = open(_PATH, "a", encoding="utf-8") if _PATH else None  # noqa: SIM115
_COLLECTED = {}


def pytest_itemcollected(item):
    _COLLECTED[item.nodeid] = getattr(getattr(item, "obj", None), "__code__", None)


def _own(item):
    """Whether what is about to run is what was collected for this test."""
    if "runtest" in vars(item):
        return False
    code = getattr(getattr(item, "obj", None), "__code__", None)
    collected = _COLLECTED.get(item.nodeid)
    return collected is None or code is collected


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_call(item):
    own = _own(item)
    outcome = yield
    if _OUT is None:
        return
    code = getattr(getattr(item, "obj", None), "__code__", None)
    record = {"nodeid": item.nodeid, "raised": outcome.excinfo is not None, "own": own}
    if code is not None:
        record["file"], record["line"] = code.co_filename, code.co_firstlineno
    _OUT.write(json.dumps(record) + "\n")
    _OUT.flush()
