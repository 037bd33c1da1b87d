"""Assay's pytest observer, loaded first with ``-p assay_observer``.

For each test's call phase it records, as the innermost wrapper (so before any hook of the
project sees or changes the outcome), whether the test's function ran, whether it raised and
which function ran. The worker compares the JUnit report with this record: a pass the record
contradicts (its function never ran or raised, or what ran is not the function collected for
it) is no pass.

What raised is read three ways, since each can be hidden by code the change brings: the
exception pytest caught from the call; the failures a ``unittest.TestCase`` test reports to
the item (pytest attaches them only when it makes the report); and how the test function's
own frame ended, by its return or by an exception leaving it. The frame is found by watching
calls (``sys.setprofile``) from the start of the call phase until the collected function is
entered, then not at all: a test's own calls are never watched.
"""

import dis
import json
import os
import sys

import pytest

# Left in the environment: pytest-xdist's workers inherit it and record their own calls.
_PATH = os.environ.get("ASSAY_OBSERVE_RECORD")
_OUT = open(_PATH, "a", encoding="utf-8") if _PATH else None  # noqa: SIM115
_COLLECTED = {}
# The instructions a frame ends with when it returns; any other last instruction raised.
_RETURNS = {dis.opmap[name] for name in ("RETURN_VALUE", "RETURN_CONST") if name in dis.opmap}


def pytest_itemcollected(item):
    _COLLECTED[item.nodeid] = _code_of(item)


def _code_of(item):
    return getattr(getattr(item, "obj", None), "__code__", None)


def _own(item):
    """Whether what is about to run is what was collected for this test."""
    if "runtest" in vars(item):
        return False
    code = _code_of(item)
    collected = _COLLECTED.get(item.nodeid)
    return collected is None or code is collected


def _watch(code):
    """Watches this thread's calls until CODE is entered: the list gets its frame. Returns
    the list and the profiler to put back."""
    previous = sys.getprofile()
    entered = []

    def profile(frame, event, _arg):
        if event == "call" and frame.f_code is code:
            entered.append(frame)
            sys.setprofile(None)

    sys.setprofile(profile)
    return entered, previous


def _ended_by_exception(frame):
    """Whether FRAME, finished, was left by an exception rather than its return."""
    code = frame.f_code.co_code
    return 0 <= frame.f_lasti < len(code) and code[frame.f_lasti] not in _RETURNS


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_call(item):
    own = _own(item)
    code = _code_of(item)
    watched = code is not None and _OUT is not None
    if watched:
        entered, previous = _watch(code)
    outcome = yield
    if _OUT is None:
        return
    record = {"nodeid": item.nodeid, "raised": outcome.excinfo is not None, "own": own}
    # A unittest test's failures, errors and skips wait on the item for its report.
    if getattr(item, "_excinfo", None):
        record["raised"] = True
    if watched:
        sys.setprofile(previous if callable(previous) else None)
        record["ran"] = bool(entered)
        if entered and _ended_by_exception(entered[0]):
            record["raised"] = True
        record["file"], record["line"] = code.co_filename, code.co_firstlineno
    _OUT.write(json.dumps(record) + "\n")
    _OUT.flush()
