#!/usr/bin/env bash
# Build once, fan out: Rust mutant schemata (the crate built once with every mutant behind the
# runtime switch, then one run of its test binaries per mutant) against a build per mutant
# (what cargo-mutants does, rebuilding incrementally) on the very same mutants of two real
# crates from the Rust package registry that ship their tests, pinned by version and checksum.
# Reports per crate: mutants, wall time and mutants per minute of each way, schema builds,
# mutants built alone (and why), and the agreement of the two runs' statuses, mutant by mutant.
# Needs: cargo (the crates are fetched by cargo from the registry).
# Usage: bench/rust-schemata.sh          (SINGLE=0 times the schemata only; ONLY=heck one crate)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

source "$root/bench/lib/crates.sh"

cd "$root"
cargo test --quiet -p assay-engine --test rust_schemata --no-run
for entry in "${rust_crates[@]}"; do
    read -r name version sum <<< "$entry"
    if [[ -n "${ONLY:-}" && "$name" != "$ONLY" ]]; then continue; fi
    fetch_crate "$name" "$version" "$sum" "$work"
    ASSAY_SCHEMATA_CRATE="$work/$name-$version" ASSAY_SCHEMATA_SINGLE="${SINGLE:-1}" \
        cargo test --quiet -p assay-engine --test rust_schemata -- \
        --ignored --nocapture --exact schemata_against_a_build_per_mutant_on_a_real_crate \
        | grep -v '^$\|^running\|^test \|^test result'
done
