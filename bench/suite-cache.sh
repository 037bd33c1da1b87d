#!/usr/bin/env bash
# `assay test`'s result cache on a real suite: more-itertools 10.4.0 (its PyPI sdist, pinned
# by sha256, downloaded into a cache). Each round is a cold run on an empty store (every case
# runs and its pass is stored) and then a warm run on that store, the tree unchanged (every
# pass is answered from the cache; failures run again), and a `--no-cache` run, for what
# looking up and storing costs a cold run. Rounds interleave the three;
# a run before them records the suite's history, so cold and warm runs alike are batched from
# it. Prints the medians of the whole-process wall times, how many cases the warm runs
# answered and how many jobs they ran, and the machine's load; exits 1 when a warm run's
# outcomes differ from its cold run's.
#
#   cargo build --release && bash bench/suite-cache.sh
#   ROUNDS=5 JOBS=2 bash bench/suite-cache.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ASSAY=${ASSAY:-$root/target/release/assay}
JOBS=${JOBS:-2}
ROUNDS=${ROUNDS:-3}
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/assay-bench/sdists}
PYTHON=${PYTHON:-python3}
version=10.4.0
sha=fe0e63c4ab068eac62410ab05cccca2dc71ec44ba8ef29916a0090df061cf923

[ -x "$ASSAY" ] || { echo "no $ASSAY (hint: cargo build --release)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$CACHE"
sdist=$CACHE/more-itertools-$version.tar.gz
[ -f "$sdist" ] || "$PYTHON" -m pip download -q --no-deps --no-binary :all: \
  "more-itertools==$version" -d "$CACHE" >&2
echo "$sha  $sdist" | sha256sum -c --quiet - || { echo "$sdist: sha256 mismatch" >&2; exit 1; }
dir=$work/more-itertools
mkdir -p "$dir"
tar -xzf "$sdist" -C "$dir" --strip-components=1
git -C "$dir" init -q -b main
git -C "$dir" -c user.email=bench@example.com -c user.name=Bench add -A
git -C "$dir" -c user.email=bench@example.com -c user.name=Bench commit -qm "more-itertools $version"
# As bench/suite-vs-xdist.sh: no bytecode written, one hash seed.
export PYTHONDONTWRITEBYTECODE=1 PYTHONHASHSEED=0

run() { # store-dir report [flags] -> wall seconds of the whole `assay test` process
  local s
  s=$(date +%s.%N)
  "$ASSAY" test -C "$dir" --runner pytest --jobs "$JOBS" --state-dir "$work/state" \
    --store "file://$1" --json "$2" --pass-env PYTHONHASHSEED --quiet "${@:3}" >/dev/null 2>&1 || true
  echo "$(date +%s.%N) - $s" | bc
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "load before: $(uptime)"
run "$work/store-history" "$work/history.json" >/dev/null
cold=() warm=() off=()
for i in $(seq "$ROUNDS"); do
  cold+=("$(run "$work/store-$i" "$work/cold-$i.json")")
  warm+=("$(run "$work/store-$i" "$work/warm-$i.json")")
  off+=("$(run "$work/store-off" "$work/off-$i.json" --no-cache)")
done
echo "load after:  $(uptime)"

"$PYTHON" - "$work" "$ROUNDS" <<'PY'
import json, sys
work, rounds = sys.argv[1], int(sys.argv[2])
for i in range(1, rounds + 1):
    cold = json.load(open(f"{work}/cold-{i}.json"))
    warm = json.load(open(f"{work}/warm-{i}.json"))
    outcomes = lambda r: {c["display"]: c["outcome"] for c in r["cases"]}
    if outcomes(cold) != outcomes(warm):
        sys.exit(f"round {i}: the warm run's outcomes differ from the cold run's")
    served = sum(1 for c in warm["cases"] if c.get("cached"))
    print(f"round {i}: {len(warm['cases'])} cases, {served} answered from the cache, "
          f"{len(warm['jobs'])} jobs run warm ({len(cold['jobs'])} cold), outcomes equal")
PY
c=$(printf '%s\n' "${cold[@]}" | median)
w=$(printf '%s\n' "${warm[@]}" | median)
o=$(printf '%s\n' "${off[@]}" | median)
printf 'more-itertools %s, --jobs %s, medians of %s rounds: cold %.2fs, warm %.2fs (%.1fx faster), --no-cache %.2fs\n' \
  "$version" "$JOBS" "$ROUNDS" "$c" "$w" "$(echo "$c / $w" | bc -l)" "$o"
