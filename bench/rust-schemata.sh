#!/usr/bin/env bash
# Build once, fan out: Rust mutant schemata (the crate built once with every mutant behind the
# runtime switch, then one run of its test binaries per mutant) against a build per mutant
# (what cargo-mutants does, rebuilding incrementally) on the very same mutants of two real
# crates from crates.io that ship their tests, pinned by version and checksum.
# Reports per crate: mutants, wall time and mutants per minute of each way, schema builds,
# mutants built alone (and why), and the agreement of the two runs' statuses, mutant by mutant.
# Needs: cargo (the crates are fetched by cargo from the registry).
# Usage: bench/rust-schemata.sh          (SINGLE=0 times the schemata only; ONLY=heck one crate)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cargo_home="${CARGO_HOME:-$HOME/.cargo}"

crates=(
    "strsim 0.11.1 7da8b5736845d9f2fcb837ea5d9e2628564b3b043a70948a3f0b778838c5fb4f"
    "heck 0.5.0 2304e00983f87ffb38b55b444b5e3b60a884b5d30c0fca7d82fe33449bbe55ea"
)

# Fetches NAME VERSION through cargo, checks the archive's sha256, unpacks it under $work.
fetch() {
    local name="$1" version="$2" sum="$3" fetcher="$work/fetch-$1"
    mkdir -p "$fetcher/src"
    : > "$fetcher/src/lib.rs"
    printf '[package]\nname = "fetch-%s"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\n%s = "=%s"\n\n[workspace]\n' \
        "$name" "$name" "$version" > "$fetcher/Cargo.toml"
    (cd "$fetcher" && cargo fetch --quiet)
    local archive
    archive="$(ls "$cargo_home"/registry/cache/*/"$name-$version.crate" | head -n 1)"
    echo "$sum  $archive" | sha256sum --check --quiet
    tar -xzf "$archive" -C "$work"
}

cd "$root"
cargo test --quiet -p assay-engine --test rust_schemata --no-run
for entry in "${crates[@]}"; do
    read -r name version sum <<< "$entry"
    if [[ -n "${ONLY:-}" && "$name" != "$ONLY" ]]; then continue; fi
    fetch "$name" "$version" "$sum"
    ASSAY_SCHEMATA_CRATE="$work/$name-$version" ASSAY_SCHEMATA_SINGLE="${SINGLE:-1}" \
        cargo test --quiet -p assay-engine --test rust_schemata -- \
        --ignored --nocapture --exact schemata_against_a_build_per_mutant_on_a_real_crate \
        | grep -v '^$\|^running\|^test \|^test result'
done
