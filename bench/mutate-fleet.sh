#!/usr/bin/env bash
# Mutants per minute of `assay mutate --cluster` with 1, 2 and 4 worker slots (one worker
# `--slots N`, `--jobs N`, process sandbox, file store), and the efficiency: speed-up over one
# slot divided by the slots. The project is a small invoicing library whose pytest suite does a
# little real arithmetic per test, so a mutant's run is not only interpreter start-up.
# Needs: nats-server (-js) on PATH, python3 with pytest and coverage, and a built assay
# (cargo build --release; ASSAY=PATH picks another binary).
# Usage: bench/mutate-fleet.sh [ROUNDS]  (best of ROUNDS per slot count)
set -euo pipefail
rounds="${1:-2}"
root=$(cd "$(dirname "$0")/.." && pwd)
assay="${ASSAY:-${CARGO_TARGET_DIR:-$root/target}/release/assay}"
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

repo=$work/repo
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

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_log() { until grep -q "$2" "$1" 2>/dev/null; do sleep 0.05; done; }

# One fleet (fresh nats-server, coordinator, one worker with SLOTS slots), one mutate run;
# prints "wall_seconds evaluated_mutants".
run_once() {
    local slots=$1 port
    port=$(free_port)
    rm -rf "$work/js" "$work/store" "$work/trees" "$work"/*.log
    nats-server -js -a 127.0.0.1 -p "$port" -sd "$work/js" > /dev/null 2>&1 &
    local nats=$!
    until (echo > "/dev/tcp/127.0.0.1/$port") 2> /dev/null; do sleep 0.05; done
    export ASSAY_NATS_URL=nats://127.0.0.1:$port ASSAY_STORE=file://$work/store \
        ASSAY_HTTP_LISTEN= ASSAY_TREE_CACHE_DIR=$work/trees ASSAY_LOG=info
    "$assay" coordinator > "$work/coordinator.log" 2>&1 &
    local coordinator=$!
    wait_log "$work/coordinator.log" "coordinator started"
    "$assay" worker --slots "$slots" --sandbox process > "$work/worker.log" 2>&1 &
    local worker=$!
    wait_log "$work/worker.log" "worker started"
    pids=("$nats" "$coordinator" "$worker")
    local start end code=0
    start=$(date +%s.%N)
    "$assay" mutate -C "$repo" --cluster "$ASSAY_NATS_URL" --jobs "$slots" --quiet \
        --json "$work/m.json" > "$work/summary.txt" 2> "$work/mutate.err" || code=$?
    end=$(date +%s.%N)
    kill -TERM "$worker" "$coordinator"; wait "$worker" "$coordinator" 2> /dev/null || true
    kill "$nats"; wait "$nats" 2> /dev/null || true
    pids=()
    # 0 (all killed) or 5 (survivors) are verdicts; anything else is a broken bench.
    if [ "$code" != 0 ] && [ "$code" != 5 ]; then
        cat "$work/mutate.err" "$work/worker.log" >&2
        exit 1
    fi
    python3 - "$work/m.json" "$(echo "$end - $start" | bc)" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["assay"]["summary"]
if s["pending"] or s["runtime_error"]:
    sys.exit(f"broken bench: {s['pending']} pending, {s['runtime_error']} errors")
print(sys.argv[2], s["mutants"] - s["no_coverage"])
PY
}

printf 'slots  mutants  wall s  mutants/min  speed-up  efficiency\n'
base_rate=
for slots in 1 2 4; do
    best=
    for _ in $(seq "$rounds"); do
        read -r wall n < <(run_once "$slots")
        if [ -z "$best" ] || (( $(echo "$wall < $best" | bc) )); then best=$wall; fi
    done
    rate=$(echo "$n * 60 / $best" | bc -l)
    [ -z "$base_rate" ] && base_rate=$rate
    speedup=$(echo "$rate / $base_rate" | bc -l)
    printf '%5d  %7d  %6.1f  %11.1f  %7.2fx  %9.0f%%\n' "$slots" "$n" "$best" "$rate" \
        "$speedup" "$(echo "100 * $speedup / $slots" | bc -l)"
done
echo "cores: $(nproc), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
