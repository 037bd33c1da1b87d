"""Mine candidate cases from a release pair: run the candidate's whole suite on the base tree
(base release + candidate's test files) and on the candidate tree, once, and list per test
name what happened on each side. A helper for choosing cases; truth.py establishes the truth.

usage: python corpus/mine.py PROJECT_ID [--pytest 9]
"""
import argparse
import collections
import shutil

import lib
import runs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("project")
    ap.add_argument("--pytest", default=None)
    a = ap.parse_args()
    m = lib.load_manifest()
    proj = lib.projects_by_id(m)[a.project]
    py = lib.venv_for(m, a.pytest or proj.get("pytest", "9"), proj.get("extras", []))
    work = lib.tempdir("mine-")
    base, cand, overlaid = lib.build_trees(proj, work)
    print("overlaid test files:", ", ".join(overlaid) or "none")
    runner = proj.get("runner", "pytest")
    side = {}
    for label, tree in (("base", base), ("candidate", cand)):
        args = runs.unittest_files(tree) if runner == "unittest" else ["--continue-on-collection-errors"]
        recs, cmd, rc, out = runs.run_probe(py, tree, proj, runner, args)
        print(f"{label}: exit {rc}, {len(runs.items(recs))} items, "
              f"{len(runs.collect_errors(recs))} collection errors")
        for e in runs.collect_errors(recs):
            print("  collect-error", e["nodeid"], e["message"].strip().splitlines()[-1:])
        outc = runs.node_outcomes(recs)
        by = collections.defaultdict(list)
        files = collections.defaultdict(set)
        for it in runs.items(recs):
            by[it["name"]].append(outc.get(it["nodeid"], ("missing", "not run")))
            files[it["name"]].add(it["file"])
        side[label] = (by, files, runs.collect_errors(recs))
    bby, bfiles, berr = side["base"]
    cby, cfiles, _ = side["candidate"]
    base_rel, _ = lib.release_dirs(proj)
    old_names = set()
    for f in lib.files_of(base_rel):
        if lib.is_test_file(f) and f.endswith(".py"):
            old_names |= {l.split("def ", 1)[1].split("(")[0] for l in
                          (base_rel / f).read_text(errors="replace").splitlines()
                          if l.strip().startswith("def test")}
    for name in sorted(cby):
        c = runs.aggregate(cby[name])
        b = runs.aggregate(bby.get(name, []))
        if b[0] == "missing":
            errs = [e["nodeid"] for e in berr if e["nodeid"] in cfiles[name]]
            if errs:
                b = ("error", "collection-error")
        flags = []
        if len(cfiles[name]) > 1:
            flags.append("AMBIGUOUS:" + ",".join(sorted(cfiles[name])))
        if name not in old_names:
            flags.append("new")
        if len(cby[name]) > 1:
            flags.append(f"variants={len(cby[name])}")
        interesting = b[0] != "passed" or c[0] != "passed" or "new" in flags or len(cfiles[name]) > 1
        if interesting:
            print(f"{name:60s} base={b[0]}/{b[1]:18s} cand={c[0]}/{c[1]:12s} {' '.join(flags)} "
                  f"{sorted(cfiles[name])[0]}")
    print(f"{sum(1 for n in cby if runs.aggregate(cby[n])[0]=='passed' and runs.aggregate(bby.get(n,[]))[0]=='passed')} names pass on both")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
