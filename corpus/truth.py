"""Establish each corpus case's truth without Assay, and write corpus/truth.json.

For each case: build the base tree (base release + the candidate's test files, SPEC §2) and the
candidate tree from the pinned sdists, find the tests named NAME by collecting the suite with
the runner itself (pytest --collect-only, or importing the unittest modules), run exactly those
tests three times on each tree (pytest node ids; unittest test methods) with a probe that
records each outcome and its kind (assertion failure, exception in the body, setup error,
collection/import error, skipped, passed), and derive the expected verdict from SPEC §2.

usage: python corpus/truth.py [--case ID]... [--jobs 2]
"""
import argparse
import concurrent.futures
import datetime
import json
import platform
import shutil
import subprocess
import sys

import lib
import runs

REPEATS = 3


def pytest_version(py):
    return subprocess.run([str(py), "-m", "pytest", "--version"], capture_output=True,
                          text=True).stdout.strip() or "?"


def side_truth(py, tree, proj, runner, name, want_files):
    """Collect TREE, find NAME, run it REPEATS times: (files, runs, collection errors)."""
    if runner == "pytest":
        recs, _, _, _ = runs.run_probe(py, tree, proj, runner,
                                       ["--collect-only", "--continue-on-collection-errors"])
    else:
        recs, _, _, _ = runs.run_probe(py, tree, proj, runner,
                                       ["--collect-only", *runs.unittest_files(tree)])
    matched = [it for it in runs.items(recs) if it["name"] == name]
    files = sorted({it["file"] for it in matched})
    # A file of the test that does not even import on this tree: a collection error.
    broken = sorted({e["nodeid"].split("::")[0] for e in runs.collect_errors(recs)}
                    & set(want_files or files))
    out = []
    for _ in range(REPEATS):
        if matched:
            if runner == "pytest":
                ids = sorted({it["nodeid"].split("[")[0] for it in matched})
                recs, _, _, _ = runs.run_probe(py, tree, proj, runner, ids)
            else:
                recs, _, _, _ = runs.run_probe(py, tree, proj, runner, ["--name", name, *files])
            outc = runs.node_outcomes(recs)
            # Parametrizations, subtests (same node id) and other classes are variants.
            res = runs.aggregate([outc.get(it["nodeid"], ("missing", "not run")) for it in matched])
            res = (res[0], res[1], len(matched))
        elif broken:
            # Re-run the broken file itself: the import error must repeat.
            recs, _, _, _ = runs.run_probe(py, tree, proj, runner, broken)
            errs = runs.collect_errors(recs)
            res = ("error", "collection-error", 0) if errs else ("missing", "not collected", 0)
        else:
            res = ("missing", "not collected", 0)
        out.append(res)
    return files, out, broken


def verdict(kind, base, cand, cfiles, bfiles):
    """SPEC §2's rules, applied to what the runs showed."""
    files = sorted(set(cfiles) | set(bfiles))
    if len(files) > 1:
        return "unverified", "ambiguous: the name matches tests in " + " and ".join(files)
    for label, rs in (("candidate", cand), ("base", base)):
        if len({o for o, _, _ in rs}) > 1:
            return "unstable", f"{label} runs disagree: {[o for o, _, _ in rs]}"
    c, ck = cand[0][0], cand[0][1]
    b, bk = base[0][0], base[0][1]
    if kind == "test":
        if c == "failed":
            return "refuted", f"fails on the candidate ({ck})"
        if b == "passed":
            return "refuted", "already passes on the base"
        if c != "passed":
            return "unverified", f"no pass on the candidate ({c}: {ck})"
        if b == "failed":
            return "proven", f"fails on the base ({bk}), passes on the candidate"
        return "unverified", f"never ran on the base ({b}: {bk})"
    # guard
    if c == "failed" or b == "failed":
        side = "candidate" if c == "failed" else "base"
        return "refuted", f"a variant fails on the {side} ({ck if c == 'failed' else bk})"
    if c == "passed" and b == "passed":
        return "proven", "passes on both"
    return "unverified", f"no pass on both (base {b}: {bk}; candidate {c}: {ck})"


def case_truth(m, case):
    proj = lib.projects_by_id(m)[case["project"]]
    runner = case.get("runner", proj.get("runner", "pytest"))
    major = case.get("pytest", proj.get("pytest", "9"))
    py = lib.venv_for(m, major, proj.get("extras", []))
    kind, name = [s.strip() for s in case["criterion"].split(":", 1)]
    work = lib.tempdir(f"truth-{case['id']}-")
    try:
        base, cand, _ = lib.build_trees(proj, work)
        cfiles, cruns, _ = side_truth(py, cand, proj, runner, name, None)
        bfiles, bruns, bbroken = side_truth(py, base, proj, runner, name, cfiles)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    v, why = verdict(kind, bruns, cruns, cfiles, bfiles)
    lib.log(f"[truth] {case['id']}: {v} — {why}")
    return {
        "id": case["id"], "project": proj["id"], "criterion": case["criterion"], "runner": runner,
        "pytest": m["pytest_versions"][major],
        "files": cfiles or bfiles,
        "base": [{"outcome": o, "kind": k, "results": n} for o, k, n in bruns],
        "candidate": [{"outcome": o, "kind": k, "results": n} for o, k, n in cruns],
        "expected": v, "why": why,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", action="append")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    m = lib.load_manifest()
    cases = [c for c in m["cases"] if not a.case or c["id"] in a.case]
    old = {}
    if lib.TRUTH.exists():
        old = {c["id"]: c for c in json.loads(lib.TRUTH.read_text())["cases"]}
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        got = {r["id"]: r for r in ex.map(lambda c: case_truth(m, c), cases)}
    old.update(got)
    ordered = [old[c["id"]] for c in m["cases"] if c["id"] in old]
    versions = {major: pytest_version(lib.venv_for(m, major, [])) for major in m["pytest_versions"]}
    doc = {
        "schema": "assay.corpus-truth/v1",
        "how": {
            "command": "python3 corpus/truth.py",
            "method": "per case: base tree = base sdist + the candidate sdist's test files "
                      "(test_*.py, *_test.py, conftest.py, anything under tests/ or test/; "
                      "deleted ones deleted); candidate tree = candidate sdist; the name is "
                      "found by collecting each tree with the runner itself; the matching tests "
                      f"run {REPEATS} times per tree, pytest by node id (-p corpus_probe_pytest), "
                      "unittest through corpus/probe_unittest.py; never through Assay",
            "python": platform.python_version(),
            "pytest": versions,
            "recorded": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "cases": ordered,
    }
    lib.TRUTH.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(ordered)} truths in {lib.TRUTH}")


if __name__ == "__main__":
    sys.exit(main())
