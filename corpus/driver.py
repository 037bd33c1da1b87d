"""Run `assay prove` on every corpus case and compare its verdicts with corpus/truth.json.

usage: python corpus/driver.py [--subset NAME] [--case ID]... [--parallel N] [--jobs N]
                               [--sandbox process|docker] [--strict] [--out DIR] [--prepare]
Called by bench/corpus.sh. Exit 1 when Assay says `proven` where the truth does not (a false
proven), or with --strict when agreement is below 100 %; 2 on a usage error.
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import lib

VERDICTS = ["proven", "refuted", "unverified", "unstable"]
EXIT_VERDICT = {0: "proven", 1: "refuted"}  # 4 is unverified or unstable: read the JSON


def assay_bin():
    if os.environ.get("ASSAY_BIN"):
        return Path(os.environ["ASSAY_BIN"]).resolve()
    root = lib.CORPUS.parent
    for p in (root / "target/release/assay", root / "target/debug/assay"):
        if p.exists():
            return p
    sys.exit("corpus: no assay binary: set ASSAY_BIN or run cargo build --release")


def run_case(m, case, a, out):
    proj = lib.projects_by_id(m)[case["project"]]
    runner = case.get("runner", proj.get("runner", "pytest"))
    repo = lib.release_repo(proj)
    cmd = [str(a.assay), "prove", "-C", str(repo), "--base", "base", "--candidate",
           "candidate", "--criterion", case["criterion"], "--runner", runner, "--quiet",
           "--no-mutation", "--jobs", str(a.jobs), "--json", str(out / f"{case['id']}.json"),
           "--store", f"file://{out / 'store'}", "--state-dir", str(out / "state" / case["id"])]
    env = dict(os.environ)
    if a.sandbox == "docker":
        # The image brings its own python3 and pytest; the venvs of this machine are not there.
        cmd += ["--sandbox", "docker"]
    else:
        py = lib.venv_for(m, case.get("pytest", proj.get("pytest", "9")), proj.get("extras", []))
        cmd += ["--test-command", f"{py} -m pytest" if runner == "pytest" else str(py)]
    if proj.get("pythonpath"):
        # src/ layouts: the tree-relative PYTHONPATH the project's own tox/CI would give.
        env["PYTHONPATH"] = proj["pythonpath"]
        cmd += ["--pass-env", "PYTHONPATH"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    took = time.monotonic() - t0
    (out / f"{case['id']}.log").write_text(" ".join(cmd) + "\n\n" + p.stdout)
    verdict, reason = None, None
    try:
        ev = json.loads((out / f"{case['id']}.json").read_text())
        crit = ev["criteria"][0]
        verdict, reason = crit["verdict"], crit.get("reason", "")
    except (OSError, ValueError, KeyError, IndexError):
        pass
    if verdict is None:
        verdict = EXIT_VERDICT.get(p.returncode, f"exit {p.returncode}")
        reason = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    res = {"id": case["id"], "verdict": verdict, "reason": reason, "exit": p.returncode,
           "seconds": round(took, 1)}
    # One line per finished case, so that an interrupted run still leaves its results.
    with open(out / "results.jsonl", "a") as f:
        f.write(json.dumps(res) + "\n")
    lib.log(f"[corpus] {case['id']}: {verdict} ({took:.0f} s)")
    return res


def summarize(results, truth, took):
    """Print the confusion matrix, false proven, agreement and every disagreement."""
    cols = VERDICTS + sorted({r["verdict"] for r in results} - set(VERDICTS))
    matrix = {(t, v): 0 for t in VERDICTS for v in cols}
    for r in results:
        matrix[(truth[r["id"]]["expected"], r["verdict"])] += 1
    print(f"\nconfusion matrix (rows: truth, columns: assay), {len(results)} cases, {took:.0f} s")
    print(f"{'':12s}" + "".join(f"{v:>12s}" for v in cols))
    for t in VERDICTS:
        print(f"{t:12s}" + "".join(f"{matrix[(t, v)]:12d}" for v in cols))
    agree = [r for r in results if r["verdict"] == truth[r["id"]]["expected"]]
    false_proven = [r for r in results if r["verdict"] == "proven"
                    and truth[r["id"]]["expected"] != "proven"]
    pct = 100.0 * len(agree) / len(results)
    print(f"\nfalse proven: {len(false_proven)}")
    print(f"agreement: {len(agree)}/{len(results)} = {pct:.1f} %")
    disagree = [r for r in results if r not in agree]
    if disagree:
        print("\ndisagreements:")
        for r in disagree:
            t = truth[r["id"]]
            print(f"- {r['id']} ({t['criterion']}): truth {t['expected']} ({t['why']}); "
                  f"assay {r['verdict']}: {r['reason']}")
    return agree, false_proven, disagree


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--subset", help="only cases whose manifest `subsets` list NAME")
    ap.add_argument("--case", action="append", help="only this case id (repeatable)")
    ap.add_argument("--parallel", type=int, default=2, help="cases at once [2: the machine's cores]")
    ap.add_argument("--jobs", type=int, default=1, help="assay --jobs of each case [1]")
    ap.add_argument("--sandbox", choices=["process", "docker"], default="process")
    ap.add_argument("--strict", action="store_true", help="also fail below 100 %% agreement")
    ap.add_argument("--out", help="where evidence and logs go [cache/runs/TIMESTAMP]")
    ap.add_argument("--prepare", action="store_true",
                    help="run nothing: fetch the selected cases' sdists, build their repositories "
                         "and venvs into the cache, then stop (CI does it while Assay builds)")
    ap.add_argument("--report", metavar="RUN_DIR",
                    help="run nothing: summarize the results.jsonl of an earlier (or cut short) run")
    a = ap.parse_args()
    m = lib.load_manifest()
    truth = {c["id"]: c for c in json.loads(lib.TRUTH.read_text())["cases"]}
    if a.report:
        lines = (Path(a.report) / "results.jsonl").read_text().splitlines()
        results = [json.loads(l) for l in lines if l.strip()]
        _, false_proven, disagree = summarize(results, truth, sum(r["seconds"] for r in results))
        return 1 if false_proven or (a.strict and disagree) else 0
    cases = [c for c in m["cases"]
             if (not a.subset or a.subset in c.get("subsets", []))
             and (not a.case or c["id"] in a.case)]
    # Long suites (`slow` projects) last: a run cut short still covers the most cases.
    slow = {p["id"] for p in m["projects"] if p.get("slow")}
    cases.sort(key=lambda c: c["project"] in slow)
    if not cases:
        print(f"corpus: no case selected (subset {a.subset}, cases {a.case})", file=sys.stderr)
        return 2
    missing = [c["id"] for c in cases if c["id"] not in truth]
    if missing:
        print(f"corpus: no recorded truth for {missing}: run corpus/truth.py", file=sys.stderr)
        return 2
    # Repositories and venvs first, one at a time (they are shared between cases).
    t0 = time.monotonic()
    for c in cases:
        proj = lib.projects_by_id(m)[c["project"]]
        lib.release_repo(proj)
        if a.sandbox == "process":
            lib.venv_for(m, c.get("pytest", proj.get("pytest", "9")), proj.get("extras", []))
    if a.prepare:
        print(f"{len(cases)} cases prepared in {time.monotonic() - t0:.0f} s (cache {lib.CACHE})")
        return 0
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(a.out) if a.out else lib.CACHE / "runs" / stamp
    out.mkdir(parents=True, exist_ok=True)
    # A frozen copy of the binary: a rebuild during the run must not mix two builds.
    a.assay = out / "assay"
    shutil.copy2(assay_bin(), a.assay)
    print(f"assay: {assay_bin()} ({subprocess.run([str(a.assay), '--version'], capture_output=True, text=True).stdout.strip()}, "
          f"built {datetime.datetime.fromtimestamp(assay_bin().stat().st_mtime):%Y-%m-%d %H:%M}), copied to {a.assay}")
    print(f"{len(cases)} cases, {a.parallel} at once, sandbox {a.sandbox}; evidence in {out}")
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(a.parallel) as ex:
        results = list(ex.map(lambda c: run_case(m, c, a, out), cases))
    took = time.monotonic() - t0

    agree, false_proven, disagree = summarize(results, truth, took)
    (out / "results.json").write_text(json.dumps({
        "assay": str(assay_bin()),
        "checkout": subprocess.run(["git", "-C", str(lib.CORPUS.parent), "rev-parse", "HEAD"],
                                   capture_output=True, text=True).stdout.strip(),
        "sandbox": a.sandbox, "subset": a.subset,
        "seconds": round(took, 1), "agreement": f"{len(agree)}/{len(results)}",
        "false_proven": [r["id"] for r in false_proven],
        "cases": [dict(r, expected=truth[r["id"]]["expected"]) for r in results]}, indent=1))
    if false_proven:
        return 1
    if a.strict and disagree:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
