#!/usr/bin/env bash
# `assay mutate --jobs 2` against cargo-mutants `-j 2` on the same source files of four real
# crates from the Rust package registry (bench/lib/crates.sh: pinned by version and sha256; two of
# them with dependencies and dev-dependencies and no Cargo.lock, which each tool resolves and
# fetches itself before its first build), cold runs
# interleaved (the order alternates each round; every run starts from a fresh copy with no
# target directory). Reports per run the mutants, wall time and mutants per minute, per crate
# the ratio of the median rates, and the caught/missed agreement on the mutants both tools make
# (same file, place and replacement; bench/lib/agreement.py), with every difference listed.
# Needs: cargo; cargo-mutants (installed with `cargo install cargo-mutants --locked` if
# missing); Assay's release build (built here).
# Usage: bench/mutate-vs-cargo-mutants.sh [ROUNDS]     (default 2; ONLY="heck lru" some crates)
# Run it with rustup's proxies (`~/.cargo/bin`) first on PATH, as a Rust developer does.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
rounds="${1:-2}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$root/bench/lib/crates.sh"

command -v cargo-mutants >/dev/null || cargo install --quiet cargo-mutants --locked
(cd "$root" && cargo build --quiet --release --bin assay)
assay="$root/target/release/assay"
# The process sandbox hides the host; rustup's toolchains must stay visible to cargo.
sandbox_env=()
if [[ -n "${RUSTUP_HOME:-}" || -d "$HOME/.rustup" ]]; then
    rustup_home="${RUSTUP_HOME:-$HOME/.rustup}"
    export RUSTUP_HOME="$rustup_home" ASSAY_SANDBOX_EXPOSE="$rustup_home"
    sandbox_env=(--pass-env RUSTUP_HOME)
fi

now() { date +%s.%N; }
results="$work/results.tsv"
: > "$results"

run_cargo_mutants() { # crate dir, round
    local copy="$work/cm-$2"
    rm -rf "$copy" && cp -r "$1" "$copy"
    local start end
    start=$(now)
    (cd "$copy" && cargo mutants -j 2 --no-shuffle --output "$work/cm-out" >/dev/null 2>&1) || true
    end=$(now)
    local mutants
    mutants=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["total_mutants"])' \
        "$work/cm-out/mutants.out/outcomes.json")
    printf '%s\tcargo-mutants\t%s\t%s\t%s\n' "$name" "$2" "$mutants" "$(echo "$end - $start" | bc)" >> "$results"
    rm -rf "$copy"
}

run_assay() { # crate dir, round
    local copy="$work/as-$2"
    rm -rf "$copy" && git clone --quiet "$1" "$copy"
    local start end
    start=$(now)
    "$assay" mutate -C "$copy" --runner cargo --test-command "cargo test" --jobs 2 \
        --no-cache --quiet --json "$work/assay.json" --store "file://$work/store" \
        "${sandbox_env[@]}" >/dev/null 2>&1 || true
    end=$(now)
    local mutants
    mutants=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["assay"]["summary"]["mutants"])' \
        "$work/assay.json")
    printf '%s\tassay\t%s\t%s\t%s\n' "$name" "$2" "$mutants" "$(echo "$end - $start" | bc)" >> "$results"
    rm -rf "$copy" "$work/store"
}

for entry in "${rust_crates[@]}" "${rust_crates_with_dependencies[@]}"; do
    read -r name version sum <<< "$entry"
    if [[ -n "${ONLY:-}" && " $ONLY " != *" $name "* ]]; then continue; fi
    fetch_crate "$name" "$version" "$sum" "$work"
    crate="$work/$name-$version"
    (cd "$crate" && git init --quiet && printf '/target\n/mutants.out*\n' > .gitignore \
        && git add -A && git -c user.name=bench -c user.email=bench@localhost commit --quiet -m "$name $version")
    for round in $(seq 1 "$rounds"); do
        if (( round % 2 )); then
            run_cargo_mutants "$crate" "$round"; run_assay "$crate" "$round"
        else
            run_assay "$crate" "$round"; run_cargo_mutants "$crate" "$round"
        fi
    done
    echo "== $name $version: agreement (last round) =="
    python3 "$root/bench/lib/agreement.py" "$work/assay.json" "$work/cm-out/mutants.out/outcomes.json" --table
done

echo "== runs =="
python3 - "$results" <<'PY'
import statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
print(f"{'crate':8} {'tool':14} {'run':>3} {'mutants':>7} {'wall s':>8} {'mutants/min':>11}")
rates = {}
for crate, tool, run, mutants, wall in rows:
    rate = int(mutants) / float(wall) * 60
    rates.setdefault((crate, tool), []).append(rate)
    print(f"{crate:8} {tool:14} {run:>3} {mutants:>7} {float(wall):8.1f} {rate:11.1f}")
for crate in sorted({c for c, _ in rates}):
    a, c = rates.get((crate, "assay")), rates.get((crate, "cargo-mutants"))
    if a and c:
        print(f"{crate}: assay {statistics.median(a):.1f} against cargo-mutants "
              f"{statistics.median(c):.1f} mutants/min (median): {statistics.median(a) / statistics.median(c):.2f}x")
PY
