#!/usr/bin/env bash
# `assay mutate --jobs 2` on real Go modules against a per-mutant copy-and-rebuild run of the
# same mutants (what gremlins and go-mutesting do: a copy of the module with the mutant
# written, `go test -count=1 -vet=off` on its package, two at a time, with the host's warm build
# cache; `-vet=off` as Assay's own Go runs, so a mutant vet calls suspect runs in both ways).
# The modules are Debian's golang-github-blang-semver-dev (semver 4.0.0, its root package: its
# `v4/` directory is a copy) and golang-github-pmezard-go-difflib-dev (go-difflib 1.0.0, its
# `difflib` package, given a `go.mod`), pinned by the package versions; their `_test.go` files
# ship with them. For each, reports mutants, wall time and mutants per minute of both ways,
# their ratio, whether the statuses agree mutant by mutant (NoCoverage counts as Survived: both
# are undetected), and Assay's wall time against "the limit": the sum over the mutants that ran
# of their covering tests' durations (each test's own time in one `go test -json` run of the
# module, from its events' time stamps), divided by the 2 slots.
# Needs: go (golang-go), the packages (installed here with apt-get if missing), python3, git,
# bc; Assay's release build (built here unless ASSAY_BIN names a binary).
# Usage: bench/mutate-go.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

command -v go >/dev/null || { apt-get update -qq && apt-get install -y -qq golang-go; }
# ASSAY_BIN: an assay binary already built (the figures below say which build they used).
assay="${ASSAY_BIN:-}"
if [[ -z "$assay" ]]; then
    (cd "$root" && cargo build --quiet --release --bin assay)
    assay="$root/target/release/assay"
fi

now() { date +%s.%N; }
# Each timed phase starts on a settled machine: the writes and deletions of the phase before
# (hundreds of module copies) otherwise slow the next phase's file creation for seconds.
settle() { sync; sleep "${SETTLE_SECONDS:-20}"; }

# bench NAME PACKAGE VERSION SOURCE_DIR MODULE_PATH: copies SOURCE_DIR's `.go` files (and
# `go.mod`, or one naming MODULE_PATH) into a repository of their own and runs both ways.
bench() {
    local name=$1 package=$2 version=$3 source_dir=$4 module_path=$5
    [[ -d "$source_dir" ]] || apt-get install -y -qq "$package" >/dev/null
    local installed
    installed=$(dpkg-query -W -f='${Version}' "$package")
    [[ "$installed" == "$version" ]] || echo "warning: $package is $installed, not $version" >&2
    local dir="$work/$name"
    local module="$dir/module"
    mkdir -p "$module"
    cp "$source_dir"/*.go "$module"/
    if [[ -f "$source_dir/go.mod" ]]; then
        cp "$source_dir/go.mod" "$module"/
    else
        printf 'module %s\n\ngo 1.12\n' "$module_path" > "$module/go.mod"
    fi
    (cd "$module" && git init -q -b main && git add -A \
        && git -c user.email=bench@example.com -c user.name=bench commit -qm "$name $version")

    # Each test's own time, from one run of the module's tests.
    (cd "$module" && go test -json -count=1 ./... > "$dir/tests.json" 2>/dev/null) || true

    local start assay_s rebuild_s
    settle
    start=$(now)
    "$assay" mutate -C "$module" --jobs 2 --no-cache --quiet --json "$dir/assay.json" \
        --store "file://$dir/store" >/dev/null 2>&1 || true
    assay_s=$(echo "$(now) - $start" | bc)

    # The same mutants, each in a copy of its own, rebuilt and tested; the limit is the one
    # Assay gives a mutant whose tests took the whole unmutated run (10x + 2 s).
    settle
    start=$(now)
    python3 - "$dir/assay.json" "$module" "$dir" > "$dir/rebuild.tsv" <<'PY'
import json, os, shutil, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
report, module, work = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
t0 = time.time()
subprocess.run(["go", "test", "-count=1", "-vet=off", "./..."], cwd=module, capture_output=True)
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
        p = subprocess.run(["go", "test", "-count=1", "-vet=off", pkg], cwd=copy, capture_output=True,
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

    python3 - "$name $version" "$dir/rebuild.tsv" "$assay_s" "$rebuild_s" "$dir/assay.json" \
        "$dir/tests.json" <<'PY'
import json, sys
name, tsv, assay_s, rebuild_s, report, tests = sys.argv[1:7]
rows = [l.rstrip("\n").split("\t") for l in open(tsv) if l.strip()]
assay_s, rebuild_s = float(assay_s), float(rebuild_s)
n = len(rows)
fold = lambda s: "Survived" if s == "NoCoverage" else s
same = sum(fold(a) == fold(b) for _, a, b in rows)
# Each top-level test's own time: from its `run` event to its `pass`/`fail` event (their
# `Time` stamps; `Elapsed` is rounded to 10 ms, which most of these tests take less than).
from datetime import datetime
def stamp(t):
    t = t.rstrip("Z")
    if "." in t:
        head, frac = t.split(".")
        t = f"{head}.{frac[:6]}"
    return datetime.fromisoformat(t).timestamp()
started, elapsed = {}, {}
for line in open(tests):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    test = e.get("Test")
    if not test or "/" in test or "Time" not in e:
        continue
    key = f'{e["Package"]}::{test}'
    if e.get("Action") == "run":
        started[key] = stamp(e["Time"])
    elif e.get("Action") in ("pass", "fail") and key in started:
        elapsed[key] = stamp(e["Time"]) - started[key]
doc = json.load(open(report))
limit = 0.0
for f in doc["files"].values():
    for m in f["mutants"]:
        if m["status"] in ("NoCoverage", "CompileError"):
            continue
        limit += sum(elapsed.get(t, 0.0) for t in m.get("coveredBy", []))
limit /= 2
schemata = doc.get("assay", {}).get("schemata") or {}
print(f"### {name}")
print("| way | mutants | wall time | mutants/min |")
print("|---|---|---|---|")
print(f"| assay mutate --jobs 2 | {n} | {assay_s:.1f} s | {n / assay_s * 60:.1f} |")
print(f"| copy and rebuild, 2 at a time | {n} | {rebuild_s:.1f} s | {n / rebuild_s * 60:.1f} |")
print(f"ratio (assay / copy-and-rebuild, mutants per minute): {rebuild_s / assay_s:.2f}x")
print(f"the limit (covering tests' time / 2 slots): {limit:.2f} s; assay / limit: "
      + (f"{assay_s / limit:.1f}x" if limit > 0 else "n/a (no test took a measurable time)"))
print(f"schema: {schemata.get('builds')} build(s), {schemata.get('held')} held, "
      f"{schemata.get('unviable')} unviable, built alone: {schemata.get('builtAlone')}")
print(f"same status: {same} / {n}")
for id_, a, b in rows:
    if fold(a) != fold(b):
        print(f"  differs: {id_} assay {a}, copy-and-rebuild {b}")
PY
}

bench semver golang-github-blang-semver-dev 4.0.0-1 \
    /usr/share/gocode/src/github.com/blang/semver github.com/blang/semver
bench go-difflib golang-github-pmezard-go-difflib-dev 1.0.0-3 \
    /usr/share/gocode/src/github.com/pmezard/go-difflib/difflib github.com/pmezard/go-difflib/difflib
