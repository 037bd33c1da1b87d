#!/usr/bin/env bash
# Mutants per minute of `assay mutate --cluster` on fleets of WORKERSxSLOTS (worker processes,
# each `--slots SLOTS`, `--jobs` the fleet's total slots, process sandbox, file store), the
# speed-up over the first fleet, and whether every mutant got the status an embedded run gives
# it (one embedded run, `--jobs 2`, same project and operators, also timed for comparison).
# PROJECT=toy (default): a small invoicing library whose pytest suite does a little real
# arithmetic per test, so a mutant's run is not only interpreter start-up; fleets 1x1 1x2 1x4.
# PROJECT=semver: semver 3.1.2's `src/semver/version.py` with its own tests and
# `--operators extended`, the pinned sdist bench/mutate-real.sh uses (fetched by
# bench/sdists.sh into CACHE); fleets 1x1 2x1 1x2 (one worker, two workers, one worker with two
# slots). FLEETS="1x1 2x1 …" picks others.
# Needs: nats-server (-js) on PATH, python3 with pytest and coverage, and a built assay
# (cargo build --release; ASSAY=PATH picks another binary).
# Usage: bench/mutate-fleet.sh [ROUNDS]  (best of ROUNDS per fleet)
set -euo pipefail
rounds="${1:-2}"
project="${PROJECT:-toy}"
root=$(cd "$(dirname "$0")/.." && pwd)
assay="${ASSAY:-${CARGO_TARGET_DIR:-$root/target}/release/assay}"
cache="${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/assay-bench/sdists}"
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

repo=$work/repo
mutate_args=()

# The toy invoicing library, committed.
make_toy() {
mkdir -p "$repo/invoices" "$repo/tests"
cat > "$repo/invoices/__init__.py" <<'PY'
def line_total(quantity, unit_cents):
    if quantity < 0:
        raise ValueError("negative quantity")
    return quantity * unit_cents


def discount(amount, percent):
    if percent <= 0:
        return amount
    if percent > 100:
        raise ValueError("percent above 100")
    return amount - amount * percent // 100


def tax(amount, rate_permille):
    return (amount * rate_permille + 500) // 1000


def instalments(amount, count):
    if count < 1:
        raise ValueError("at least one instalment")
    base = amount // count
    rest = amount - base * count
    return [base + 1 if i < rest else base for i in range(count)]


def overdue_days(due_day, paid_day):
    if paid_day <= due_day:
        return 0
    return paid_day - due_day


def late_fee(amount, days):
    if days == 0:
        return 0
    fee = amount * days // 365 // 10
    return max(fee, 100)
PY
cat > "$repo/tests/test_invoices.py" <<'PY'
import pytest
from invoices import discount, instalments, late_fee, line_total, overdue_days, tax


def ledger(n):
    # A little real work per test: a year of daily postings.
    return sum(line_total(q % 7, 125) for q in range(n))


def test_line_totals():
    assert line_total(3, 400) == 1200
    assert ledger(40000) == 14999375


def test_negative_quantity():
    with pytest.raises(ValueError):
        line_total(-1, 400)


def test_discount():
    assert discount(2000, 10) == 1800
    assert discount(2000, 0) == 2000
    assert sum(discount(a, 5) for a in range(30000)) == 427500000


def test_discount_above_100():
    with pytest.raises(ValueError):
        discount(100, 101)


def test_tax():
    assert tax(1000, 200) == 200
    assert tax(1234, 190) == 234
    assert sum(tax(a, 190) for a in range(30000)) == 85497300


def test_instalments():
    assert instalments(1000, 3) == [334, 333, 333]
    assert sum(sum(instalments(a, 4)) for a in range(20000)) == 199990000


def test_overdue():
    assert overdue_days(10, 15) == 5
    assert overdue_days(10, 10) == 0


def test_late_fee():
    assert late_fee(100000, 30) == 821
    assert late_fee(1000, 1) == 100
PY
touch "$repo/conftest.py"
(cd "$repo" && git init -q -b main && git add -A \
    && git -c user.name=Bench -c user.email=bench@example.com commit -qm invoices)
}

case "$project" in
    toy)
        make_toy
        fleets="${FLEETS:-1x1 1x2 1x4}"
        ;;
    semver)
        # shellcheck source=bench/sdists.sh
        . "$root/bench/sdists.sh"
        read -r name version file _ <<< "$(spec semver)"
        mkdir -p "$cache"
        unpack semver "$repo"
        commit_all "$repo" "$name $version"
        mutate_args=("$file" --operators extended)
        fleets="${FLEETS:-1x1 2x1 1x2}"
        ;;
    *) echo "unknown PROJECT $project (toy or semver)" >&2; exit 1 ;;
esac

source "$root/bench/lib/fleet.sh"

# The statuses of a --json report, one "id status" line per mutant, sorted.
statuses() {
    python3 - "$1" <<'PY'
import json, sys
files = json.load(open(sys.argv[1]))["files"]
for mutant in sorted((m["id"], m["status"]) for f in files.values() for m in f["mutants"]):
    print(*mutant)
PY
}

# Checks a run's report (no pending or errored mutant) and prints "evaluated_mutants".
evaluated() {
    python3 - "$1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["assay"]["summary"]
if s["pending"] or s["runtime_error"]:
    sys.exit(f"broken bench: {s['pending']} pending, {s['runtime_error']} errors")
print(s["mutants"] - s["no_coverage"])
PY
}

# 0 (all killed) or 5 (survivors) are verdicts; anything else is a broken bench.
check_exit() {
    if [ "$1" != 0 ] && [ "$1" != 5 ]; then
        cat "$work/mutate.err" "$work"/worker-*.log >&2 2> /dev/null || true
        exit 1
    fi
}

# The embedded run the fleets are compared with; prints "wall_seconds evaluated_mutants".
run_embedded() {
    local start end code=0
    rm -rf "$work/embedded-store"
    start=$(date +%s.%N)
    "$assay" mutate -C "$repo" "${mutate_args[@]}" --jobs 2 --quiet --json "$work/embedded.json" \
        --store "file://$work/embedded-store" > /dev/null 2> "$work/mutate.err" || code=$?
    end=$(date +%s.%N)
    check_exit "$code"
    statuses "$work/embedded.json" > "$work/embedded.statuses"
    echo "$(echo "$end - $start" | bc) $(evaluated "$work/embedded.json")"
}

# One fleet (fresh nats-server, coordinator, WORKERS workers with SLOTS slots each), one mutate
# run with --jobs WORKERS*SLOTS; prints "wall_seconds evaluated_mutants same_statuses".
run_once() {
    local workers=$1 slots=$2 port i
    port=$(free_port)
    rm -rf "$work/js" "$work/store" "$work"/trees-* "$work"/*.log
    nats-server -js -a 127.0.0.1 -p "$port" -sd "$work/js" > /dev/null 2>&1 &
    local nats=$!
    until (echo > "/dev/tcp/127.0.0.1/$port") 2> /dev/null; do sleep 0.05; done
    export ASSAY_NATS_URL=nats://127.0.0.1:$port ASSAY_STORE=file://$work/store \
        ASSAY_HTTP_LISTEN= ASSAY_LOG=info
    "$assay" coordinator > "$work/coordinator.log" 2>&1 &
    pids=("$nats" $!)
    wait_log "$work/coordinator.log" "coordinator started"
    for i in $(seq "$workers"); do
        # Each worker process caches tree archives in a directory of its own.
        ASSAY_TREE_CACHE_DIR=$work/trees-$i "$assay" worker --slots "$slots" --sandbox process \
            > "$work/worker-$i.log" 2>&1 &
        pids+=($!)
        wait_log "$work/worker-$i.log" "worker started"
    done
    local start end code=0
    start=$(date +%s.%N)
    "$assay" mutate -C "$repo" "${mutate_args[@]}" --cluster "$ASSAY_NATS_URL" \
        --jobs $((workers * slots)) --quiet --json "$work/m.json" > "$work/summary.txt" \
        2> "$work/mutate.err" || code=$?
    end=$(date +%s.%N)
    kill -TERM "${pids[@]:1}"; wait "${pids[@]:1}" 2> /dev/null || true
    kill "$nats"; wait "$nats" 2> /dev/null || true
    pids=()
    check_exit "$code"
    local same=yes
    statuses "$work/m.json" | cmp -s - "$work/embedded.statuses" || same=NO
    echo "$(echo "$end - $start" | bc) $(evaluated "$work/m.json") $same"
}

read -r embedded_wall embedded_n < <(run_embedded)
printf 'fleet                 mutants  wall s  mutants/min  speed-up  efficiency  statuses as embedded\n'
printf '%-21s %7d  %6.1f  %11.1f  %8s  %10s  %s\n' "embedded, --jobs 2" "$embedded_n" \
    "$embedded_wall" "$(echo "$embedded_n * 60 / $embedded_wall" | bc -l)" "" "" "-"
base_rate= base_slots=
differ=0
for fleet in $fleets; do
    workers=${fleet%x*} slots=${fleet#*x}
    best= all_same=yes
    for _ in $(seq "$rounds"); do
        read -r wall n same < <(run_once "$workers" "$slots")
        [ "$same" = yes ] || all_same=NO
        if [ -z "$best" ] || (( $(echo "$wall < $best" | bc) )); then best=$wall; fi
    done
    [ "$all_same" = yes ] || differ=1
    rate=$(echo "$n * 60 / $best" | bc -l)
    [ -z "$base_rate" ] && base_rate=$rate base_slots=$((workers * slots))
    speedup=$(echo "$rate / $base_rate" | bc -l)
    # Efficiency: the speed-up over the first fleet per multiple of its slots.
    printf '%-21s %7d  %6.1f  %11.1f  %7.2fx  %9.0f%%  %s\n' \
        "$workers worker(s) x $slots slot(s)" "$n" "$best" "$rate" "$speedup" \
        "$(echo "100 * $speedup * $base_slots / ($workers * $slots)" | bc -l)" "$all_same"
done
echo "project: $project, cores: $(nproc), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$differ"
