#!/usr/bin/env bash
# What confining the code under test costs: the same release binary, the same commands, run
# confined (the default: bubblewrap namespaces per job and per warm server) and unconfined
# (ASSAY_BWRAP naming no program), interleaved run by run, on
#   - the generated 200-test project of bench/prove-overhead.sh (`assay prove --no-mutation`),
#   - a real suite from a pinned PyPI sdist (`assay test --jobs 2`, inflection 0.5.1),
#   - a real mutation run (`assay mutate --jobs 2`, semver 3.1.2's version.py).
# Every run has --no-cache (an unconfined run never uses the cache, so neither may the
# confined one) and a fresh store. Prints the median wall time of each side, and their ratio
# (target: confined <= 1.05x unconfined on each).
#   cargo build --release && bash bench/confinement-cost.sh
#   ROUNDS=6 BENCHES="mutate" bash bench/confinement-cost.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ASSAY=${ASSAY:-$root/target/release/assay}
ROUNDS=${ROUNDS:-3}
cache="${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/assay-bench/sdists}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$cache"
[ -x "$ASSAY" ] || { echo "needs a release build: cargo build --release" >&2; exit 1; }
command -v bwrap >/dev/null || { echo "needs bubblewrap (apt-get install bubblewrap)" >&2; exit 1; }
# shellcheck source=bench/sdists.sh
. "$root/bench/sdists.sh"

# The generated project of prove-overhead.sh: its generator, run for each side.
proof_repo=$work/proof
mkdir -p "$proof_repo"
generator=$(sed -n '/^python3 - "\$repo" base <<.PY.$/,/^PY$/p' "$root/bench/prove-overhead.sh" | sed '1d;$d')
python3 - "$proof_repo" base <<<"$generator"
commit_all "$proof_repo" base
python3 - "$proof_repo" candidate <<<"$generator"
commit_all "$proof_repo" candidate

suite_repo=$work/suite
unpack inflection "$suite_repo"
commit_all "$suite_repo" inflection
mutate_repo=$work/mutate
unpack semver "$mutate_repo"
commit_all "$mutate_repo" semver

criteria=()
for m in $(seq 0 19); do criteria+=(--criterion "test: test_rounds_half_up_$m"); done

run() { # run SIDE NAME: one timed run, seconds on stdout
    local side="$1" name="$2" store
    store=$(mktemp -d "$work/store.XXXXXX")
    local env=(env)
    [ "$side" = unconfined ] && env+=(ASSAY_BWRAP="$work/no-bubblewrap")
    local start end
    start=$(date +%s.%N)
    case "$name" in
        prove) "${env[@]}" "$ASSAY" prove -C "$proof_repo" --base main~1 --candidate main \
            "${criteria[@]}" --no-mutation --no-cache --quiet --store "file://$store" \
            --state-dir "$store/state" >/dev/null 2>&1 || true ;;
        test) "${env[@]}" "$ASSAY" test -C "$suite_repo" --jobs 2 --no-cache --quiet \
            --store "file://$store" --state-dir "$store/state" >/dev/null 2>&1 || true ;;
        mutate) "${env[@]}" "$ASSAY" mutate -C "$mutate_repo" src/semver/version.py --jobs 2 \
            --no-cache --quiet --store "file://$store" >/dev/null 2>&1 || true ;;
    esac
    end=$(date +%s.%N)
    rm -rf "$store"
    echo "$end - $start" | bc
}

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

printf '%-8s %12s %12s %8s\n' bench confined unconfined ratio
for name in ${BENCHES:-prove test mutate}; do
    run confined "$name" >/dev/null # warm-up: page cache, interpreter bytecode
    confined=() unconfined=()
    # Interleaved, each side first in every other round, so drift and order favour neither.
    for round in $(seq "$ROUNDS"); do
        if [ $((round % 2)) -eq 1 ]; then
            confined+=("$(run confined "$name")")
            unconfined+=("$(run unconfined "$name")")
        else
            unconfined+=("$(run unconfined "$name")")
            confined+=("$(run confined "$name")")
        fi
    done
    c=$(printf '%s\n' "${confined[@]}" | median)
    u=$(printf '%s\n' "${unconfined[@]}" | median)
    printf '%-8s %11.2fs %11.2fs %7.3fx\n' "$name" "$c" "$u" "$(echo "$c / $u" | bc -l)"
done
