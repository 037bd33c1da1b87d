"""Re-proving after a product-only edit, with the result cache, against the first proof.

usage: python3 bench/cache-reprove.py [--case ID] [--rounds N]
Takes a conformance-corpus case (corpus/manifest.json; default pp-common-expressions-pytest8,
a pyparsing fix with a ~1,700-test suite, under pytest 8.4.2: under pytest 9.0.2 the base
side's whole-file runs end in pytest's own INTERNALERROR, a RecursionError in its JUnit
plugin comparing subtest reports that hold pyparsing objects, so they are never cached and
the case is unverified; see the README, "Benchmark"), proves it once with an empty store, then edits a
product file of the candidate (a comment appended, committed on top) and proves again with the
same store. The second proof should run only the candidate side: its base jobs are answered
from the cache. Prints both wall times and their ratio (target <= 0.55), per round, and the
median. The mutation check is off in both proofs: it runs on the candidate tree, which the edit
changes, so it would re-run in full either way.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "corpus"))
import lib  # noqa: E402
import driver  # noqa: E402


def prove(assay, repo, case, proj, store, out):
    runner = case.get("runner", proj.get("runner", "pytest"))
    py = lib.venv_for(lib.load_manifest(), case.get("pytest", proj.get("pytest", "9")), proj.get("extras", []))
    cmd = [str(assay), "prove", "-C", str(repo), "--base", "base", "--candidate", "HEAD",
           "--criterion", case["criterion"], "--runner", runner, "--no-mutation", "--jobs", "2",
           "--json", str(out), "--store", f"file://{store}",
           "--test-command", f"{py} -m pytest" if runner == "pytest" else str(py)]
    env = dict(os.environ)
    if proj.get("pythonpath"):
        env["PYTHONPATH"] = proj["pythonpath"]
        cmd += ["--pass-env", "PYTHONPATH"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    took = time.monotonic() - t0
    evidence = json.loads(out.read_text())
    jobs = evidence["jobs"]
    cached = sum(1 for j in jobs if j.get("cached"))
    return took, cached, len(jobs), evidence["criteria"][0]["verdict"], p.returncode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="pp-common-expressions-pytest8")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    m = lib.load_manifest()
    case = next((c for c in m["cases"] if c["id"] == a.case), None)
    if case is None:
        sys.exit(f"cache-reprove: no case {a.case!r} in corpus/manifest.json")
    proj = lib.projects_by_id(m)[case["project"]]
    assay = driver.assay_bin()
    ratios = []
    for round_ in range(1, a.rounds + 1):
        work = Path(tempfile.mkdtemp(prefix="assay-cache-bench-"))
        try:
            repo = work / "repo"
            shutil.copytree(lib.release_repo(proj), repo, symlinks=True)
            lib.git(repo, "checkout", "-q", "candidate")
            store = work / "store"
            first = prove(assay, repo, case, proj, store, work / "first.json")
            # A product-only edit: the first module of the candidate's package (a directory
            # with an __init__.py), a comment appended.
            product = next(p for p in sorted(repo.rglob("*.py"))
                           if ".git" not in p.parts and (p.parent / "__init__.py").is_file()
                           and not lib.is_test_file(str(p.relative_to(repo))))
            product.write_text(product.read_text() + "\n# reviewed\n")
            lib.git(repo, "commit", "-q", "-am", "a product-only edit")
            second = prove(assay, repo, case, proj, store, work / "second.json")
            ratio = second[0] / first[0]
            ratios.append(ratio)
            print(f"round {round_}: first {first[0]:.1f} s ({first[1]}/{first[2]} cached, {first[3]}), "
                  f"re-proof {second[0]:.1f} s ({second[1]}/{second[2]} cached, {second[3]}), "
                  f"ratio {ratio:.2f} (edited {product.relative_to(repo)})", flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    median = statistics.median(ratios)
    print(f"median ratio {median:.2f} over {len(ratios)} rounds (target <= 0.55)")
    sys.exit(0 if median <= 0.55 else 1)


if __name__ == "__main__":
    main()
