#!/usr/bin/env bash
# Times `assay test --jobs 2` with its default batching against `pytest -n 2` (pytest-xdist) on
# real suites from PyPI sdists, pinned by version and sha256 and downloaded into a cache, in
# paired interleaved runs (assay, xdist, assay, xdist, ...), and prints the medians and their
# ratio (target: assay <= 1.05x xdist on every suite). Before the timed pairs, one assay run
# records the suite's history (its durations balance later runs); that first run is printed
# apart.
#
# It also checks that a failure Assay reports is one pytest reports too: on each suite as
# released, and with one product function broken on purpose, the set of failed cases in
# Assay's report must equal the set pytest's own short summary names (exit 1 otherwise), both
# on a first run (cases listed) and on the next (cases batched from history).
#
# FLEET=1 repeats the timed pairs on a local fleet (nats-server on PATH, one coordinator, two
# workers with one slot each, process sandbox).
#
#   cargo build --release && bash bench/suite-vs-xdist.sh
#   SUITES="more-itertools" PAIRS=5 FLEET=1 bash bench/suite-vs-xdist.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ASSAY=${ASSAY:-$root/target/release/assay}
JOBS=${JOBS:-2}
PAIRS=${PAIRS:-3}
FLEET=${FLEET:-0}
SUITES=${SUITES:-"more-itertools inflection chardet"}
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/assay-bench/sdists}
PYTHON=${PYTHON:-python3}

# name, version, sdist sha256, a file of the product, and a sed edit that breaks it. Shapes:
# more-itertools, 663 cases of unittest-style tests with subtests; inflection, 455 tiny
# parametrized cases (the whole suite runs in a quarter second); chardet, 764 cases, two of
# which take a fifth of the suite's time.
suite_row() {
  case $1 in
    more-itertools) echo "10.4.0 fe0e63c4ab068eac62410ab05cccca2dc71ec44ba8ef29916a0090df061cf923 more_itertools/recipes.py s/return list(islice(iterable, n))\$/return list(islice(iterable, n + 1))/" ;;
    inflection) echo "0.5.1 1a29730d366e996aaacffb2f1f1cb9593dc38e2ddd30c91250c6dde09ea9b417 inflection/__init__.py s/in (11, 12, 13):/in (11, 12):/" ;;
    chardet) echo "5.2.0 1b3b6ff479a8c414bc3fa2c0852995695c4a026dcd6d0633b2dd092ca39c1cf7 chardet/big5prober.py s/return \"Big5\"/return \"Big6\"/" ;;
    *) echo "unknown suite $1" >&2; exit 2 ;;
  esac
}

[ -x "$ASSAY" ] || { echo "no $ASSAY (hint: cargo build --release)" >&2; exit 2; }
"$PYTHON" -c 'import xdist' 2>/dev/null || "$PYTHON" -m pip install -q pytest-xdist
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$CACHE"

# Both tools see the same interpreter settings: no bytecode written (Assay's jobs run so), and
# one hash seed, since some suites parametrize over sets and xdist requires every worker to
# collect the same order.
export PYTHONDONTWRITEBYTECODE=1 PYTHONHASHSEED=0

source "$root/bench/lib/sdist-suites.sh"

xdist() { (cd "$1" && "$PYTHON" -m pytest -p no:cacheprovider -n "$JOBS" -q -rfE "${@:2}"); }
# Every run runs the suite: the result cache would answer an unchanged tree's passes
# (bench/suite-cache.sh times that).
assay_test() { # dir state json [more flags]
  "$ASSAY" test -C "$1" --runner pytest --jobs "$JOBS" --state-dir "$2" --json "$3" \
    --store "${STORE:-file://$2/store}" --pass-env PYTHONHASHSEED --quiet --no-cache "${@:4}"
}

# The failed cases each tool names: Assay's report, pytest's short summary (FAILED/ERROR id).
assay_failed() { "$PYTHON" -c 'import json,sys
for c in json.load(open(sys.argv[1]))["cases"]:
    if c["outcome"] in ("failed", "error"): print(c["display"])' "$1" | sort; }
pytest_failed() { { grep -E '^(FAILED|ERROR) ' "$1" || true; } | sed -E 's/^(FAILED|ERROR) //; s/ - .*//' | sort -u; }

check_same_failures() { # label dir state
  local label=$1 dir=$2 state=$3 ran collected pass
  xdist "$dir" >"$work/check.out" 2>&1 || true
  pytest_failed "$work/check.out" >"$work/pytest.failed"
  # Node ids come first, one a line, up to the first blank line (warnings follow).
  collected=$( (cd "$dir" && "$PYTHON" -m pytest -p no:cacheprovider --collect-only --verbosity=-1 2>/dev/null) | awk 'NF == 0 {exit} /::/ {n++} END {print n + 0}')
  # Twice: the first run lists the cases, the second batches them from its history.
  for pass in "first run" "from history"; do
    rm -f "$work/check.json"
    assay_test "$dir" "$state" "$work/check.json" >/dev/null 2>"$work/check.err" || true
    [ -s "$work/check.json" ] || { echo "FAIL $label ($pass): assay wrote no report" >&2; cat "$work/check.err" >&2; exit 1; }
    # Equal empty sets prove nothing when nothing ran: both must have run the whole suite.
    ran=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["totals"]["total"])' "$work/check.json")
    [ "$ran" -gt 0 ] && [ "$ran" = "$collected" ] || { echo "FAIL $label ($pass): assay ran $ran cases, pytest collects $collected" >&2; exit 1; }
    assay_failed "$work/check.json" >"$work/assay.failed"
    if ! diff -u "$work/pytest.failed" "$work/assay.failed" >"$work/failed.diff"; then
      echo "FAIL $label ($pass): the failed cases differ (- pytest, + assay):" >&2
      cat "$work/failed.diff" "$work/check.err" >&2
      exit 1
    fi
  done
  printf '  %-28s %4d cases, %3d failed, the same in both (first run and from history)\n' "$label" "$ran" "$(wc -l <"$work/assay.failed")"
}

timed_pairs() { # dir state [assay flags] -> "xdist-median assay-median"
  local dir=$1 state=$2 a=() x=()
  for _ in $(seq "$PAIRS"); do
    a+=("$(seconds assay_test "$dir" "$state" "$work/run.json" "${@:3}")")
    x+=("$(seconds xdist "$dir")")
  done
  echo "$(printf '%s\n' "${x[@]}" | median) $(printf '%s\n' "${a[@]}" | median)"
}

start_fleet() {
  local port
  port=$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  nats-server -js -a 127.0.0.1 -p "$port" -sd "$work/nats" >"$work/nats.log" 2>&1 &
  pids+=($!)
  until (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do sleep 0.05; done
  export ASSAY_NATS_URL=nats://127.0.0.1:$port ASSAY_STORE=file://$work/fleet-store ASSAY_HTTP_LISTEN=
  STORE=$ASSAY_STORE
  ASSAY_TREE_CACHE_DIR=$work/trees-c "$ASSAY" coordinator >"$work/coordinator.log" 2>&1 &
  pids+=($!)
  for w in 1 2; do
    ASSAY_TREE_CACHE_DIR=$work/trees-$w "$ASSAY" worker --slots 1 --sandbox process \
      >"$work/worker-$w.log" 2>&1 &
    pids+=($!)
  done
  sleep 2
}

declare -A dirs
echo "== failures: assay's failed cases against pytest's own, as released and broken on purpose =="
for name in $SUITES; do
  read -r version sha file edit <<<"$(suite_row "$name")"
  dir=$(fetch "$name" "$version" "$sha")
  dirs[$name]=$dir
  check_same_failures "$name $version" "$dir" "$work/state-check-$name"
  broken=$work/$name-broken
  git clone -q "$dir" "$broken"
  sed -i "$edit" "$broken/$file"
  git -C "$broken" -c user.email=bench@example.com -c user.name=Bench commit -qam broken
  check_same_failures "$name $version, broken" "$broken" "$work/state-check-$name-broken"
done

echo "== wall time, --jobs $JOBS / -n $JOBS, medians of $PAIRS interleaved pairs =="
printf '%-16s %6s %9s %9s %7s %12s\n' suite cases xdist assay ratio "first run"
for name in $SUITES; do
  dir=${dirs[$name]}
  state=$work/state-$name
  first=$(seconds assay_test "$dir" "$state" "$work/first.json")
  cases=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["totals"]["total"])' "$work/first.json")
  xdist "$dir" >/dev/null 2>&1 || true # warms the page cache as assay's first run did
  read -r x a <<<"$(timed_pairs "$dir" "$state")"
  printf '%-16s %6s %8.2fs %8.2fs %6.2fx %11.2fs\n' "$name" "$cases" "$x" "$a" \
    "$(echo "$a / $x" | bc -l)" "$first"
done

if [ "$FLEET" = 1 ]; then
  echo "== the same on a local fleet: one coordinator, two workers of one slot =="
  start_fleet
  printf '%-16s %9s %9s %7s %12s\n' suite xdist assay ratio "first run"
  for name in $SUITES; do
    dir=${dirs[$name]}
    state=$work/fleet-state-$name
    first=$(seconds assay_test "$dir" "$state" "$work/first.json" --cluster "$ASSAY_NATS_URL")
    read -r x a <<<"$(timed_pairs "$dir" "$state" --cluster "$ASSAY_NATS_URL")"
    printf '%-16s %8.2fs %8.2fs %6.2fx %11.2fs\n' "$name" "$x" "$a" "$(echo "$a / $x" | bc -l)" "$first"
  done
fi
