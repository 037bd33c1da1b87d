#!/usr/bin/env bash
# Times `assay test --runner unittest --jobs 2 --no-cache` against `python3 -m unittest` (the
# plain whole-suite run, one process) on real unittest suites from PyPI sdists, pinned by
# version and sha256 and downloaded into a cache, in paired interleaved runs (assay, unittest,
# assay, unittest, ...). Prints the medians and their ratio (target: assay <= 1.5x unittest on
# every suite). Every timed assay run is a first run (a fresh state directory and no result
# cache), the case a developer or an agent meets on a fresh checkout.
#
# It also checks that both runs agree: Assay's report must count as many cases as unittest ran
# and name no failure on a suite unittest passes (exit 1 otherwise).
#
#   cargo build --release && bash bench/suite-vs-unittest.sh
#   SUITES="pathspec" PAIRS=9 bash bench/suite-vs-unittest.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ASSAY=${ASSAY:-$root/target/release/assay}
JOBS=${JOBS:-2}
PAIRS=${PAIRS:-7}
SUITES=${SUITES:-"pathspec more-itertools"}
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/assay-bench/sdists}
PYTHON=${PYTHON:-python3}

# name, version, sdist sha256. Shapes: pathspec, 97 tests in 0.1 s, one test module sharing a
# class attribute between tests (order-dependent under per-case isolation); more-itertools,
# 817 cases with doctests a `load_tests` hook adds, about 2 s.
suite_row() {
  case $1 in
    pathspec) echo "0.11.2 e0d8d0ac2f12da61956eb2306b69f9469b42f4deb0f3cb6ed47b9cce9996ced3" ;;
    more-itertools) echo "10.5.0 5482bfef7849c25dc3c6dd53a6173ae4795da2a41a80faea6700d9f5846c5da6" ;;
    *) echo "unknown suite $1" >&2; exit 2 ;;
  esac
}

[ -x "$ASSAY" ] || { echo "no $ASSAY (hint: cargo build --release)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$CACHE"
# Both runs write no bytecode (Assay's jobs run so), so neither reads what the other compiled.
export PYTHONDONTWRITEBYTECODE=1

source "$root/bench/lib/sdist-suites.sh"

plain() { (cd "$1" && "$PYTHON" -m unittest); }
# A first run every time: no history (a fresh state directory) and no result cache.
assay_test() { # dir json
  local state
  state=$(mktemp -d -p "$work")
  "$ASSAY" test -C "$1" --runner unittest --test-command "$PYTHON" --jobs "$JOBS" \
    --state-dir "$state" --store "file://$state/store" --json "$2" --quiet --no-cache
}

check_agreement() { # label dir
  local label=$1 dir=$2 ran failed unittest_ran
  plain "$dir" >"$work/plain.out" 2>&1 || { echo "FAIL $label: python -m unittest fails" >&2; tail -5 "$work/plain.out" >&2; exit 1; }
  unittest_ran=$(sed -nE 's/^Ran ([0-9]+) tests? .*/\1/p' "$work/plain.out")
  assay_test "$dir" "$work/check.json" >/dev/null 2>"$work/check.err" || true
  [ -s "$work/check.json" ] || { echo "FAIL $label: assay wrote no report" >&2; cat "$work/check.err" >&2; exit 1; }
  read -r ran failed <<<"$("$PYTHON" -c 'import json,sys
t = json.load(open(sys.argv[1]))["totals"]
print(t["total"], t["failed"] + t["error"])' "$work/check.json")"
  # unittest counts a test with subtests once; Assay reports each subtest: at least as many.
  [ "$ran" -ge "$unittest_ran" ] || { echo "FAIL $label: assay ran $ran cases, unittest $unittest_ran" >&2; exit 1; }
  [ "$failed" = 0 ] || { echo "FAIL $label: assay reports $failed failures on a passing suite" >&2; cat "$work/check.err" >&2; exit 1; }
  printf '  %-24s unittest ran %4d tests, assay %4d cases, no failure in either\n' "$label" "$unittest_ran" "$ran"
}

declare -A dirs
echo "== agreement: assay's first run against python -m unittest =="
for name in $SUITES; do
  read -r version sha <<<"$(suite_row "$name")"
  dirs[$name]=$(fetch "$name" "$version" "$sha")
  check_agreement "$name $version" "${dirs[$name]}"
done

echo "== wall time, first runs with --jobs $JOBS against one unittest process, medians of $PAIRS interleaved pairs =="
printf '%-16s %10s %9s %7s\n' suite unittest assay ratio
for name in $SUITES; do
  dir=${dirs[$name]}
  a=() u=()
  for _ in $(seq "$PAIRS"); do
    a+=("$(seconds assay_test "$dir" "$work/run.json")")
    u+=("$(seconds plain "$dir")")
  done
  um=$(printf '%s\n' "${u[@]}" | median)
  am=$(printf '%s\n' "${a[@]}" | median)
  printf '%-16s %9.2fs %8.2fs %6.2fx\n' "$name" "$um" "$am" "$(echo "$am / $um" | bc -l)"
done
