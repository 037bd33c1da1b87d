#!/usr/bin/env bash
# `assay mutate --operators extended` against mutmut on real projects: pinned PyPI sdists
# (fetched into a cache directory, never vendored), the same file and the same tests for both
# tools, a fresh copy and empty stores for every run (cold), tools interleaved run by run.
# Prints mutants, wall time, mutants/min, CPU seconds per mutant, peak RSS and score, medians
# of ROUNDS runs.
# Needs: python3 with pytest, coverage, packaging and mutmut (pip install pytest coverage
# packaging mutmut==3.8.1), perf (CPU of the whole process tree), Debian's `time` package
# (/usr/bin/time -v for peak RSS), and a release build (cargo build --release; ASSAY=PATH).
# Usage: bench/mutate-real.sh [JOBS]   (ROUNDS=3, PROJECTS="parse semver inflection",
#        CACHE=~/.cache/assay-bench/sdists)
set -euo pipefail
jobs="${1:-2}"
rounds="${ROUNDS:-3}"
projects="${PROJECTS:-parse semver inflection}"
root="$(cd "$(dirname "$0")/.." && pwd)"
assay="${ASSAY:-${CARGO_TARGET_DIR:-$root/target}/release/assay}"
cache="${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/assay-bench/sdists}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$cache"
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
[ -x "$assay" ] || { echo "needs a release build: cargo build --release" >&2; exit 1; }

# The pinned projects and how to set one up: `spec`, `fetch`, `unpack`, `commit_all`.
# shellcheck source=bench/sdists.sh
. "$root/bench/sdists.sh"

# A fresh copy of the project, committed (assay mutates HEAD), with mutmut's configuration.
prepare() {
    local project="$1" dir="$2"
    read -r name version file source <<< "$(spec "$project")"
    unpack "$project" "$dir"
    {
        echo
        echo '[tool.mutmut]'
        echo "source_paths = [\"$source\"]"
        echo "only_mutate = [\"$file\"]"
        echo 'also_copy = ["pytest.ini"]'
    } >> "$dir/pyproject.toml"
    commit_all "$dir" "$name $version"
}

# Runs a command, recording wall seconds, CPU seconds of the whole tree and peak RSS (KiB).
measure() {
    local out="$1"; shift
    local start end
    start=$(date +%s.%N)
    perf stat -x, -e task-clock -o "$out.perf" /usr/bin/time -v -o "$out.rss" "$@" \
        > "$out.log" 2>&1 || true
    end=$(date +%s.%N)
    printf '%.2f %s %s\n' "$(echo "$end - $start" | bc)" \
        "$(awk -F, '/task-clock/ {printf "%.2f", $1 / 1000}' "$out.perf")" \
        "$(awk -F: '/Maximum resident/ {gsub(/ /, "", $2); print $2}' "$out.rss")" > "$out"
}

run_assay() {
    local project="$1" n="$2" dir="$work/$1-assay-$2"
    read -r _ _ file _ <<< "$(spec "$project")"
    prepare "$project" "$dir"
    measure "$work/$project.assay.$n" "$assay" mutate -C "$dir" "$file" --jobs "$jobs" \
        --operators extended --quiet --json "$dir.json" --store "file://$dir.store"
    python3 - "$dir.json" >> "$work/$project.assay.$n" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["assay"]["summary"]
print(s["mutants"] - s["pending"], f'{(s["mutation_score"] or 0) * 100:.1f}')
PY
    rm -rf "$dir" "$dir.store"
}

run_mutmut() {
    local project="$1" n="$2" dir="$work/$1-mutmut-$2"
    prepare "$project" "$dir"
    (cd "$dir" && measure "$work/$project.mutmut.$n" mutmut run --max-children "$jobs")
    (cd "$dir" && mutmut export-cicd-stats > /dev/null 2>&1 || true)
    python3 - "$dir/mutants/mutmut-cicd-stats.json" >> "$work/$project.mutmut.$n" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
detected = s["killed"] + s["timeout"]
valid = detected + s["survived"] + s["no_tests"]
print(s["total"] - s["skipped"], f"{detected * 100 / max(valid, 1):.1f}")
PY
    rm -rf "$dir"
}

median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

printf '%-11s %-7s %8s %8s %12s %14s %9s %7s\n' project tool mutants "wall s" mutants/min \
    "cpu s/mutant" "rss MiB" score
for project in $projects; do
    for n in $(seq 1 "$rounds"); do
        # Interleaved, each tool first in turn, so drift on a shared machine hits both.
        if [ $((n % 2)) -eq 1 ]; then
            run_assay "$project" "$n"; run_mutmut "$project" "$n"
        else
            run_mutmut "$project" "$n"; run_assay "$project" "$n"
        fi
    done
    for tool in assay mutmut; do
        rows=$(for n in $(seq 1 "$rounds"); do paste -sd' ' "$work/$project.$tool.$n"; done)
        # wall cpu rss mutants score
        col() { echo "$rows" | awk -v c="$1" '{print $c}' | median; }
        wall=$(col 1); cpu=$(col 2); rss=$(col 3); mutants=$(col 4); score=$(col 5)
        printf '%-11s %-7s %8d %8.1f %12.1f %14.3f %9.1f %6s%%\n' "$project" "$tool" \
            "$mutants" "$wall" "$(echo "$mutants * 60 / $wall" | bc -l)" \
            "$(echo "$cpu / $mutants" | bc -l)" "$(echo "$rss / 1024" | bc -l)" "$score"
        if [ -n "${VERBOSE:-}" ]; then echo "$rows" | sed 's/^/    runs: /'; fi
    done
done
