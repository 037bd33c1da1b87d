#!/usr/bin/env bash
# `assay mutate --jobs 2` on a real Go module against a per-mutant copy-and-rebuild run of the
# same mutants (what gremlins and go-mutesting do: a copy of the module with the mutant
# written, `go test -count=1` on its package, two at a time, with the host's warm build cache).
# The module is Debian's golang-github-blang-semver-dev (semver 4.0.0, pinned by the package
# version; its `_test.go` files ship with it), the root package only (its `v4/` directory is a
# copy). Reports mutants, wall time and mutants per minute of both, their ratio, and whether
# the statuses agree mutant by mutant (NoCoverage counts as Survived: both are undetected).
# Needs: go (golang-go), the package (installed here with apt-get if missing), python3, git;
# Assay's release build (built here unless ASSAY_BIN names a binary).
# Usage: bench/mutate-go.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
package=golang-github-blang-semver-dev
version=4.0.0-1
source_dir=/usr/share/gocode/src/github.com/blang/semver
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

command -v go >/dev/null || { apt-get update -qq && apt-get install -y -qq golang-go; }
[[ -d "$source_dir" ]] || apt-get install -y -qq "$package"
installed=$(dpkg-query -W -f='${Version}' "$package")
[[ "$installed" == "$version" ]] || echo "warning: $package is $installed, not $version" >&2
# ASSAY_BIN: an assay binary already built (the figures below say which build they used).
assay="${ASSAY_BIN:-}"
if [[ -z "$assay" ]]; then
    (cd "$root" && cargo build --quiet --release --bin assay)
    assay="$root/target/release/assay"
fi

module="$work/semver"
mkdir -p "$module"
cp "$source_dir"/*.go "$source_dir"/go.mod "$module"/
(cd "$module" && git init -q -b main && git add -A \
    && git -c user.email=bench@example.com -c user.name=bench commit -qm "semver $version")

now() { date +%s.%N; }
start=$(now)
"$assay" mutate -C "$module" --jobs 2 --no-cache --quiet --json "$work/assay.json" \
    --store "file://$work/store" >/dev/null 2>&1 || true
assay_s=$(echo "$(now) - $start" | bc)

# The same mutants, each in a copy of its own, rebuilt and tested; the limit is the one Assay
# gives a mutant whose tests took the whole unmutated run (10x + 2 s).
start=$(now)
python3 - "$work/assay.json" "$module" "$work" > "$work/rebuild.tsv" <<'PY'
import json, os, shutil, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
report, module, work = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
t0 = time.time()
subprocess.run(["go", "test", "-count=1", "./..."], cwd=module, capture_output=True)
limit = 10 * (time.time() - t0) + 2

def offset(text, line, column):
    lines = text.split("\n")
    return sum(len(l) + 1 for l in lines[: line - 1]) + column - 1

def run(item):
    path, m = item
    copy = tempfile.mkdtemp(dir=work)
    shutil.copytree(module, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git"))
    text = open(os.path.join(copy, path), encoding="utf-8").read()
    loc = m["location"]
    a = offset(text, loc["start"]["line"], loc["start"]["column"])
    b = offset(text, loc["end"]["line"], loc["end"]["column"])
    open(os.path.join(copy, path), "w", encoding="utf-8").write(text[:a] + m["replacement"] + text[b:])
    pkg = "./" + os.path.dirname(path) if os.path.dirname(path) else "."
    try:
        p = subprocess.run(["go", "test", "-count=1", pkg], cwd=copy, capture_output=True,
                           text=True, timeout=limit)
        if p.returncode == 0:
            status = "Survived"
        elif "[build failed]" in p.stdout + p.stderr:
            status = "CompileError"
        else:
            status = "Killed"
    except subprocess.TimeoutExpired:
        status = "Timeout"
    shutil.rmtree(copy, ignore_errors=True)
    return m["id"], m["status"], status

items = [(path, m) for path, f in report["files"].items() for m in f["mutants"]]
with ThreadPoolExecutor(2) as pool:
    for id_, ours, theirs in pool.map(run, items):
        print(f"{id_}\t{ours}\t{theirs}")
PY
rebuild_s=$(echo "$(now) - $start" | bc)

python3 - "$work/rebuild.tsv" "$assay_s" "$rebuild_s" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
assay_s, rebuild_s = float(sys.argv[2]), float(sys.argv[3])
n = len(rows)
fold = lambda s: "Survived" if s == "NoCoverage" else s
same = sum(fold(a) == fold(b) for _, a, b in rows)
print("| way | mutants | wall time | mutants/min |")
print("|---|---|---|---|")
print(f"| assay mutate --jobs 2 | {n} | {assay_s:.1f} s | {n / assay_s * 60:.1f} |")
print(f"| copy and rebuild, 2 at a time | {n} | {rebuild_s:.1f} s | {n / rebuild_s * 60:.1f} |")
print(f"ratio (assay / copy-and-rebuild, mutants per minute): {rebuild_s / assay_s:.2f}x")
print(f"same status: {same} / {n}")
for id_, a, b in rows:
    if fold(a) != fold(b):
        print(f"  differs: {id_} assay {a}, copy-and-rebuild {b}")
PY
