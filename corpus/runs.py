"""Running the probes (probe_pytest.py, probe_unittest.py) on a tree and reading outcomes."""
import json
import os
import shutil
import subprocess
from pathlib import Path

from lib import CACHE, CORPUS, case_env, files_of, is_test_file

RANK = {"error": 3, "failed": 2, "passed": 1, "skipped": 0, "missing": -1}


def probe_dir():
    """The pytest plugin alone in a directory, so that only it is added to sys.path."""
    d = CACHE / "probe"
    d.mkdir(parents=True, exist_ok=True)
    shutil.copy(CORPUS / "probe_pytest.py", d / "corpus_probe_pytest.py")
    return d


def unittest_files(tree):
    """Test modules by the unittest conventions (test_*.py / *_test.py), sorted."""
    return sorted(f for f in files_of(tree)
                  if f.endswith(".py") and is_test_file(f) and Path(f).name != "conftest.py")


def run_probe(py, tree, project, runner, args, timeout=900):
    """Run the probe in TREE; return (records, command line, exit code)."""
    tree = Path(tree)
    out = tree / ".corpus-probe.jsonl"
    if out.exists():
        out.unlink()
    env = case_env(project, {"CORPUS_PROBE_OUT": str(out), "PYTHONDONTWRITEBYTECODE": "1"})
    if runner == "pytest":
        pp = [str(probe_dir())] + ([env["PYTHONPATH"]] if "PYTHONPATH" in env else [])
        env["PYTHONPATH"] = os.pathsep.join(pp)
        cmd = [str(py), "-m", "pytest", "-p", "corpus_probe_pytest", "-p", "no:cacheprovider",
               "-q", *args]
    else:
        cmd = [str(py), str(CORPUS / "probe_unittest.py"), "--out", str(out), *args]
    p = subprocess.run(cmd, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    recs = []
    if out.exists():
        recs = [json.loads(l) for l in out.read_text().splitlines() if l.strip()]
        out.unlink()
    return recs, cmd, p.returncode, p.stdout


def node_outcomes(recs):
    """nodeid -> (outcome, kind): outcome passed | failed | error | skipped."""
    res = {}
    excs = {(r["nodeid"], r["when"]): r["kind"] for r in recs if r["type"] == "exc"}

    def put(nodeid, outcome, kind):
        old = res.get(nodeid)
        if old is None or RANK[outcome] > RANK[old[0]]:
            res[nodeid] = (outcome, kind)

    for r in recs:
        if r["type"] != "report":
            continue
        nid, when, outcome = r["nodeid"], r["when"], r["outcome"]
        if outcome == "failed":
            kind = r.get("kind") or excs.get((nid, when)) or "exception"
            if when == "call" and kind != "setup-error":
                put(nid, "failed", kind)  # a failure in the test's body, or a failing subtest
            else:
                put(nid, "error", f"{when}-error" if kind != "setup-error" else kind)
        elif outcome == "passed" and when == "call":
            put(nid, "passed", "passed")
        elif outcome == "skipped" and when in ("setup", "call"):
            put(nid, "skipped", "xfail" if r.get("xfail") else "skipped")
    return res


def items(recs):
    return [r for r in recs if r["type"] == "item"]


def collect_errors(recs):
    return [r for r in recs if r["type"] == "collect-error"]


def aggregate(outcomes):
    """One test = all its variants (parametrizations, subtests, classes): the worst one wins."""
    if not outcomes:
        return ("missing", "not run")
    worst = max(outcomes, key=lambda o: RANK[o[0]])
    if worst[0] == "failed":
        kinds = sorted({k for o, k in outcomes if o == "failed"})
        return ("failed", "+".join(kinds))
    return worst
