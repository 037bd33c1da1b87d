# The two real crates the Rust benchmarks mutate, from the Rust package registry, pinned by version and the
# archive's sha256; both ship their tests (strsim: unit, integration and doc tests; heck: unit
# and doc tests). Sourced by bench/rust-schemata.sh and bench/mutate-vs-cargo-mutants.sh.

rust_crates=(
    "strsim 0.11.1 7da8b5736845d9f2fcb837ea5d9e2628564b3b043a70948a3f0b778838c5fb4f"
    "heck 0.5.0 2304e00983f87ffb38b55b444b5e3b60a884b5d30c0fca7d82fe33449bbe55ea"
)

# Two real crates with dependencies and dev-dependencies that ship no Cargo.lock, so the host
# pins and fetches them before any job (engine/src/dependencies.rs): lru (a data structure; the
# hashbrown dependency by default, scoped_threadpool and stats_alloc for its tests) and slab (a
# data structure; autocfg to build, serde, serde_test and rustversion for its tests). Used by
# bench/mutate-vs-cargo-mutants.sh.
rust_crates_with_dependencies=(
    "lru 0.12.5 234cf4f4a04dc1f57e24b96cc0cd600cf2af460d4161ac5ecdd0af8e1f3b2a38"
    "slab 0.4.9 8f92a496fb766b417c996b9c5e57daf2f7ad3b0bebe1ccfca4856390e3d3bb67"
)

# fetch_crate NAME VERSION SHA256 INTO: fetches the crate through cargo, checks the archive's
# sha256 and unpacks it as INTO/NAME-VERSION.
fetch_crate() {
    local name="$1" version="$2" sum="$3" into="$4"
    local fetcher="$into/fetch-$name" cargo_home="${CARGO_HOME:-$HOME/.cargo}"
    mkdir -p "$fetcher/src"
    : > "$fetcher/src/lib.rs"
    printf '[package]\nname = "fetch-%s"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\n%s = "=%s"\n\n[workspace]\n' \
        "$name" "$name" "$version" > "$fetcher/Cargo.toml"
    (cd "$fetcher" && cargo fetch --quiet)
    local archive
    archive="$(ls "$cargo_home"/registry/cache/*/"$name-$version.crate" | head -n 1)"
    echo "$sum  $archive" | sha256sum --check --quiet
    tar -xzf "$archive" -C "$into"
}
