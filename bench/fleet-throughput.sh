#!/usr/bin/env bash
# Fleet dispatch throughput and per-job overhead, on this machine.
#  1. No-op jobs coordinator -> worker -> result (coordinator/examples/fleet_dispatch.rs) with
#     1, 2 and 4 worker slots, against raw JetStream doing the same exchange with the same
#     message sizes. Target: fleet >= 50% of raw.
#  2. The same real proof (unittest, 20 jobs) embedded and on a one-worker fleet with the same
#     parallelism; per-job overhead = (fleet - embedded) / jobs.
# Needs nats-server (-js) on PATH. Each run gets a fresh server on a free port. JOBS stays
# below ~1500: one submission carries every JobSpec and must fit NATS's 1 MiB max_payload.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
JOBS=${JOBS:-1000}
ROUNDS=${ROUNDS:-3}
cargo build --release --manifest-path "$root/Cargo.toml" -p assay --bin assay >/dev/null
cargo build --release --manifest-path "$root/Cargo.toml" -p assay-coordinator \
  --example fleet_dispatch >/dev/null
target=${CARGO_TARGET_DIR:-$root/target}
ASSAY=$target/release/assay
DISPATCH=$target/release/examples/fleet_dispatch
work=$(mktemp -d)
nats_pid=
cleanup() { [ -n "$nats_pid" ] && kill "$nats_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start_nats() {
  [ -n "$nats_pid" ] && kill "$nats_pid" 2>/dev/null && wait "$nats_pid" 2>/dev/null || true
  port=$(free_port)
  # A new directory per server: a stopped server may still be closing the last one's files.
  nats-server -js -a 127.0.0.1 -p "$port" -sd "$(mktemp -d -p "$work")" >/dev/null 2>&1 &
  nats_pid=$!
  until (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do sleep 0.05; done
  url=nats://127.0.0.1:$port
}

echo "== dispatch: $JOBS no-op jobs, in-flight window 64, best of $ROUNDS =="
printf '%-6s %12s %12s %7s\n' slots raw/s fleet/s ratio
for slots in 1 2 4; do
  best_raw=0 best_fleet=0
  for _ in $(seq "$ROUNDS"); do
    start_nats
    out=$("$DISPATCH" "$url" "$JOBS" "$slots")
    raw=$(awk '$1=="raw"{print $5}' <<<"$out")
    fleet=$(awk '$1=="fleet"{print $5}' <<<"$out")
    (( raw > best_raw )) && best_raw=$raw
    (( fleet > best_fleet )) && best_fleet=$fleet
  done
  printf '%-6s %12s %12s %6.0f%%\n' "$slots" "$best_raw" "$best_fleet" \
    "$(echo "100 * $best_fleet / $best_raw" | bc -l)"
done

echo "== per-job overhead: one unittest proof, embedded vs fleet (process sandbox, file store) =="
repo=$work/repo
mkdir -p "$repo/tests" && cd "$repo"
git init -q -b main && git config user.email bench@example.com && git config user.name Bench
printf 'def price(amount, discount=0.0):\n    return amount\n' > pricing.py
touch tests/__init__.py
printf 'import unittest\nfrom pricing import price\n\n\nclass PriceTests(unittest.TestCase):\n    def test_full_price(self):\n        self.assertEqual(price(40), 40)\n' > tests/test_pricing.py
git add -A && git commit -qm pricing
printf 'def price(amount, discount=0.0):\n    return round(amount * (1 - discount), 2)\n' > pricing.py
printf '\n    def test_discount_is_applied(self):\n        self.assertEqual(price(40, discount=0.25), 30)\n' >> tests/test_pricing.py
git commit -qam discount
cd "$root"
proof=(prove -C "$repo" --base main~1 --candidate HEAD --repeats 9 --jobs 2 --quiet --no-mutation
  --criterion "test: test_discount_is_applied" --criterion "guard: test_full_price")
store=file://$work/store
# A proof that is not proven (exit 0) is a broken bench, not a figure.
seconds() { local s; s=$(date +%s.%N); "$@" >/dev/null 2>"$work/last.err" || { cat "$work/last.err" >&2; exit 1; }; echo "$(date +%s.%N) - $s" | bc; }
best() { sort -n | head -1; }

embedded=$(for _ in $(seq "$ROUNDS"); do seconds "$ASSAY" "${proof[@]}" --store "$store"; done | best)
start_nats
export ASSAY_NATS_URL=$url ASSAY_STORE=$store ASSAY_HTTP_LISTEN= ASSAY_TREE_CACHE_DIR=$work/trees
"$ASSAY" coordinator >"$work/coordinator.log" 2>&1 &
coordinator=$!
"$ASSAY" worker --slots 2 --sandbox process >"$work/worker.log" 2>&1 &
worker=$!
sleep 1
fleet=$(for _ in $(seq "$ROUNDS"); do seconds "$ASSAY" "${proof[@]}" --cluster "$url"; done | best)
kill -TERM "$worker" "$coordinator"; wait "$worker" "$coordinator" || true
jobs=$("$ASSAY" "${proof[@]}" --store "$store" --json "$work/p.json" >/dev/null && python3 -c "import json;print(len(json.load(open('$work/p.json'))['jobs']))")
printf 'embedded %.2f s, fleet %.2f s, %d jobs: %.1f ms per job\n' "$embedded" "$fleet" "$jobs" \
  "$(echo "1000 * ($fleet - $embedded) / $jobs" | bc -l)"
