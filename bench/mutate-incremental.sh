#!/usr/bin/env bash
# Incremental `assay mutate`: a cold run on semver 3.1.2's src/semver/version.py, then a
# one-function edit (a rename inside `Version.compare`, committed) and a second run on the same
# store. Prints the mutants re-run out of the total and both wall times; checks that the warm
# run's verdicts equal a `--no-cache` run's on the edited tree.
# Needs: python3 with pytest and coverage (pip install pytest coverage), and a release build
# (cargo build --release; ASSAY=PATH).
# Usage: bench/mutate-incremental.sh [JOBS]   (CACHE=~/.cache/assay-bench/sdists)
set -euo pipefail
jobs="${1:-2}"
root="$(cd "$(dirname "$0")/.." && pwd)"
assay="${ASSAY:-${CARGO_TARGET_DIR:-$root/target}/release/assay}"
cache="${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/assay-bench/sdists}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$cache"
[ -x "$assay" ] || { echo "needs a release build: cargo build --release" >&2; exit 1; }
# shellcheck source=bench/sdists.sh
. "$root/bench/sdists.sh"

read -r name version file _ <<< "$(spec semver)"
dir="$work/$name"
unpack semver "$dir"
commit_all "$dir" "$name $version"

run() {
    local label="$1"; shift
    local start end
    start=$(date +%s.%N)
    "$assay" mutate -C "$dir" "$file" --jobs "$jobs" --quiet --json "$work/$label.json" \
        --store "file://$work/store" "$@" > "$work/$label.log" 2>&1 || true
    end=$(date +%s.%N)
    echo "$end - $start" | bc > "$work/$label.wall"
}

run cold
# One function edited: a local renamed in `Version.compare`, behaviour unchanged.
python3 - "$dir/$file" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
old = "        x = _cmp(v1, v2)\n        if x:\n            return x\n"
new = "        difference = _cmp(v1, v2)\n        if difference:\n            return difference\n"
assert text.count(old) == 1, "the edit's anchor is not in the file"
open(path, "w").write(text.replace(old, new))
PY
commit_all "$dir" "compare: name the difference"
run warm
run full --no-cache

python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
def load(label):
    return json.load(open(f"{work}/{label}.json"))
def wall(label):
    return float(open(f"{work}/{label}.wall").read())
def verdicts(doc):
    # A timeout's reason names its limit, which follows measured durations: statuses only.
    return sorted((m["id"], m["status"]) for f in doc["files"].values() for m in f["mutants"])
cold, warm, full = load("cold"), load("warm"), load("full")
cache = warm["assay"]["cache"]
total = warm["assay"]["summary"]["mutants"]
rerun = cache["eligible"] - cache["served"]
print(f"mutants: {total} ({cache['eligible']} with coverage)")
print(f"cold run:  {wall('cold'):7.1f} s wall, every mutant run")
print(f"warm run:  {wall('warm'):7.1f} s wall, {rerun} of {total} mutants re-run "
      f"({cache['served']} from the cache, {cache['stored']} stored)")
print(f"full run:  {wall('full'):7.1f} s wall (--no-cache on the edited tree)")
same = verdicts(warm) == verdicts(full)
print(f"warm verdicts equal the full run's: {'yes' if same else 'NO'}")
sys.exit(0 if same else 1)
PY
