#!/usr/bin/env bash
# `assay prove` on real release pairs of the two crates with dependencies that
# bench/mutate-vs-cargo-mutants.sh mutates: each pair is two published versions (the registry's
# archives, pinned by version and sha256), committed as base and candidate in a repository of
# their own, with no Cargo.lock, so the host pins and fetches each side's dependencies before
# any job. slab 0.4.8 -> 0.4.9 adds `Slab::clone_from` that keeps the target's capacity, with
# its test; lru 0.12.4 -> 0.12.5 moves to hashbrown 0.15, and the test that names the hasher is
# the guard. Prints each proof's verdict; exit 1 if one is not proven.
# Needs: cargo (rustup's proxies first on PATH); Assay's release build (built here).
# Usage: bench/prove-crate-pairs.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$root/bench/lib/crates.sh"

(cd "$root" && cargo build --quiet --release --bin assay)
assay="$root/target/release/assay"

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

failed=0
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
    "$assay" prove -C "$repo" --base HEAD~1 --criterion "$criterion" --no-cache \
        --progress plain --store "file://$work/store-$name" || failed=1
done
exit "$failed"
