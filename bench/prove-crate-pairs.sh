#!/usr/bin/env bash
# `assay prove` on real release pairs of the two crates with dependencies that
# bench/mutate-vs-cargo-mutants.sh mutates: each pair is two published versions (the registry's
# archives, pinned by version and sha256), committed as base and candidate in a repository of
# their own, with no Cargo.lock, so the host pins and fetches each side's dependencies before
# any job. slab 0.4.8 -> 0.4.9 adds `Slab::clone_from` that keeps the target's capacity, with
# its test; lru 0.12.4 -> 0.12.5 moves to hashbrown 0.15, and the test that names the hasher is
# the guard. Prints each proof's verdict; exit 1 if one is not proven.
#
# With --fleet, each pair is also proven on a fleet on 127.0.0.1 (a nats-server, a file store,
# a coordinator and one process-sandbox worker whose CARGO_HOME is an empty directory, all
# stopped at exit): the dependencies travel as archives through the store. Prints a table of
# wall times (embedded, fleet) with the archives' sizes and upload times.
# Needs: cargo (rustup's proxies first on PATH), and nats-server for --fleet; Assay's release
# build (built here, unless ASSAY_BIN names a binary).
# Usage: bench/prove-crate-pairs.sh [--fleet]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
pids=()
cleanup() {
    if [ "${#pids[@]}" -gt 0 ]; then
        kill -TERM "${pids[@]}" 2> /dev/null || true
        wait "${pids[@]}" 2> /dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
source "$root/bench/lib/crates.sh"
source "$root/bench/lib/fleet.sh"
fleet=false
[ "${1:-}" = "--fleet" ] && fleet=true

if [ -n "${ASSAY_BIN:-}" ]; then
    assay="$ASSAY_BIN"
else
    (cd "$root" && cargo build --quiet --release --bin assay)
    assay="$root/target/release/assay"
fi

# name, base version and sha256, candidate version and sha256, criterion
pairs=(
    "slab 0.4.8 6528351c9bc8ab22353f9d776db39a20288e8d6c37ef8cfe3317cf875eecfc2d 0.4.9 8f92a496fb766b417c996b9c5e57daf2f7ad3b0bebe1ccfca4856390e3d3bb67|test: clone_from"
    "lru 0.12.4 37ee39891760e7d94734f6f63fedc29a2e4a152f836120753a72503f09fcf904 0.12.5 234cf4f4a04dc1f57e24b96cc0cd600cf2af460d4161ac5ecdd0af8e1f3b2a38|guard: tests::test_with_hasher"
)

commit_version() { # repo, unpacked crate dir, message
    (cd "$1" && git rm -rq --ignore-unmatch . && cp -r "$2/." . && rm -f .cargo_vcs_info.json \
        && printf '/target\n' > .gitignore && git add -A \
        && git -c user.name=bench -c user.email=bench@localhost commit --quiet -m "$3")
}

# A fleet on 127.0.0.1 for this run; sets cluster to its NATS URL.
start_fleet() {
    local port
    port=$(free_port)
    nats-server -js -a 127.0.0.1 -p "$port" -sd "$work/js" > /dev/null 2>&1 &
    pids+=($!)
    until (echo > "/dev/tcp/127.0.0.1/$port") 2> /dev/null; do sleep 0.05; done
    cluster=nats://127.0.0.1:$port
    mkdir -p "$work/empty-cargo-home"
    ASSAY_NATS_URL=$cluster ASSAY_STORE=file://$work/fleet-store ASSAY_HTTP_LISTEN= \
        ASSAY_LOG=info ASSAY_TREE_CACHE_DIR=$work/coordinator-trees \
        "$assay" coordinator > "$work/coordinator.log" 2>&1 &
    pids+=($!)
    wait_log "$work/coordinator.log" "coordinator started"
    # The worker keeps no cargo cache of its own: every dependency comes from an archive.
    CARGO_HOME=$work/empty-cargo-home ASSAY_NATS_URL=$cluster \
        ASSAY_STORE=file://$work/fleet-store ASSAY_HTTP_LISTEN= ASSAY_LOG=info \
        ASSAY_TREE_CACHE_DIR=$work/worker-trees \
        "$assay" worker --slots 2 --sandbox process > "$work/worker.log" 2>&1 &
    pids+=($!)
    wait_log "$work/worker.log" "worker started"
}

# Runs "$@", printing its wall time in seconds on fd 3; its exit code is the command's.
timed() {
    local start code=0
    start=$(date +%s.%N)
    "$@" || code=$?
    echo "$(echo "$(date +%s.%N) - $start" | bc)" >&3
    return "$code"
}

$fleet && start_fleet
failed=0
report=()
for entry in "${pairs[@]}"; do
    read -r name old old_sum new new_sum <<< "${entry%%|*}"
    criterion="${entry#*|}"
    fetch_crate "$name" "$old" "$old_sum" "$work"
    fetch_crate "$name" "$new" "$new_sum" "$work"
    repo="$work/$name"
    git init --quiet "$repo"
    commit_version "$repo" "$work/$name-$old" "$name $old"
    commit_version "$repo" "$work/$name-$new" "$name $new"
    echo "== $name $old -> $new: $criterion =="
    embedded=$( { timed "$assay" prove -C "$repo" --base HEAD~1 --criterion "$criterion" \
        --no-cache --progress plain --store "file://$work/store-$name" >&2 || failed=1; } 3>&1)
    $fleet || continue
    echo "== $name $old -> $new on the fleet =="
    on_fleet=$( { timed env ASSAY_LOG=info "$assay" prove -C "$repo" --base HEAD~1 \
        --criterion "$criterion" --no-cache --progress plain --cluster "$cluster" \
        --store "file://$work/fleet-store" 2> "$work/submit-$name.log" >&2 || failed=1; } 3>&1)
    grep -v ' INFO ' "$work/submit-$name.log" >&2 || true
    # Each archive the submission stored: its size and upload time, from the CLI's log.
    archives=$(sed 's/\x1b\[[0-9;]*m//g' "$work/submit-$name.log" \
        | sed -n 's/.*dependency archive stored .*bytes=\([0-9]*\) upload_ms=\([0-9]*\).*/\1 (\2 ms)/p' \
        | paste -sd' ' || true)
    report+=("$(printf '%-26s %9.1f %9.1f   %s' "$name $old -> $new" "$embedded" "$on_fleet" "${archives:-none stored}")")
done
if $fleet; then
    printf '%-26s %9s %9s   %s\n' "pair" "embedded" "fleet" "archives stored: bytes (upload)"
    printf '%s\n' "${report[@]}"
    echo "cores: $(nproc), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
fi
exit "$failed"
