#!/usr/bin/env bash
# Builds Assay's container images on this machine, with no registry:
#   assay-runner-python:latest  a Debian root filesystem with Python 3, pytest and coverage and a
#                               non-root user (uid 10001, `assay`), made by debootstrap and
#                               imported with `docker import`; the Docker sandbox runs jobs in it.
#   assay:latest                the release `assay` binary and the shared libraries it links,
#                               imported the same way; coordinator and workers run from it.
#
# Nothing is pulled from an image registry. The Debian packages come from the mirror this
# machine's apt already uses (or --mirror / ASSAY_DEBIAN_MIRROR, e.g. file:///srv/debian for an
# air-gapped mirror). Each image carries a label with the hash of its recipe (and of the binary),
# so a second run with nothing changed returns in well under a second; --force rebuilds anyway.
#
# --binary PATH packages an already-built `assay` binary (e.g. target/debug/assay) into assay:latest
# instead of running `cargo build --release`.
#
# Usage: deploy/build-images.sh [--force] [--runner-only | --assay-only] [--mirror URL] [--binary PATH]
set -euo pipefail

force=0
build_runner=1
build_assay=1
mirror="${ASSAY_DEBIAN_MIRROR:-}"
binary=""
suite="${ASSAY_DEBIAN_SUITE:-bookworm}"
runner_image="${ASSAY_RUNNER_IMAGE:-assay-runner-python:latest}"
assay_image="${ASSAY_IMAGE:-assay:latest}"
runner_uid=10001

usage() {
    sed -n '2,18s/^# \{0,1\}//p' "$0"
}

while [ $# -gt 0 ]; do
    case "$1" in
        --force) force=1 ;;
        --runner-only) build_assay=0 ;;
        --assay-only) build_runner=0 ;;
        --mirror) mirror="${2:?--mirror needs a URL}"; shift ;;
        --mirror=*) mirror="${1#--mirror=}" ;;
        --binary) binary="${2:?--binary needs a path}"; shift ;;
        --binary=*) binary="${1#--binary=}" ;;
        -h|--help) usage; exit 0 ;;
        *) echo "build-images: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache_dir="${ASSAY_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/assay-images}"

log() { printf 'build-images: %s\n' "$*" >&2; }
die() { printf 'build-images: error: %s\n' "$*" >&2; exit 1; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

command -v docker >/dev/null || die "docker CLI not found (hint: install docker and start the engine)"
docker info >/dev/null 2>&1 || die "cannot reach the docker engine (hint: start dockerd, or check DOCKER_HOST and socket permissions)"

# The label value of an existing image, or nothing when the image is absent.
image_label() {
    docker image inspect --format "{{ index .Config.Labels \"$2\" }}" "$1" 2>/dev/null || true
}

# The first mirror apt is configured with for the Debian suite, from one-line sources.list
# files and deb822 .sources files alike.
detect_mirror() {
    local file
    for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -r "$file" ] || continue
        awk -v suite="$suite" '
            $1 == "deb" {
                i = 2
                if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                if ($(i + 1) == suite) { print $i; exit }
            }' "$file"
    done | head -n1 | grep . && return 0
    for file in /etc/apt/sources.list.d/*.sources; do
        [ -r "$file" ] || continue
        awk -v suite="$suite" '
            function flush() {
                if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ") && uri != "") {
                    print uri; found = 1; exit
                }
                types = ""; suites = ""; uri = ""
            }
            /^[[:space:]]*$/ { flush(); next }
            /^Types:/ { sub(/^Types:[[:space:]]*/, ""); types = $0 }
            /^Suites:/ { sub(/^Suites:[[:space:]]*/, ""); suites = $0 }
            /^URIs:/ { sub(/^URIs:[[:space:]]*/, ""); uri = $1 }
            END { if (!found) flush() }' "$file"
    done | head -n1 | grep .
}

build_runner_image() {
    # The recipe is this function's text: editing it changes the hash and forces a rebuild.
    local recipe
    recipe="$(declare -f build_runner_image | sha256sum | cut -c1-16)-$suite"
    if [ "$force" -eq 0 ] && [ "$(image_label "$runner_image" assay.recipe)" = "$recipe" ]; then
        log "$runner_image is up to date (recipe $recipe); --force rebuilds it"
        return 0
    fi
    if ! command -v debootstrap >/dev/null; then
        log "installing debootstrap"
        as_root apt-get install -y --no-install-recommends debootstrap >/dev/null \
            || { as_root apt-get update >/dev/null && as_root apt-get install -y --no-install-recommends debootstrap >/dev/null; } \
            || die "could not install debootstrap (hint: apt-get install debootstrap)"
    fi
    if [ -z "$mirror" ]; then
        mirror="$(detect_mirror)" \
            || die "no apt source for Debian $suite found (hint: pass --mirror URL or set ASSAY_DEBIAN_MIRROR)"
    fi
    local started rootfs
    started=$(date +%s)
    rootfs="$(mktemp -d "${TMPDIR:-/tmp}/assay-runner-rootfs.XXXXXX")"
    # shellcheck disable=SC2064 # expand now: the trap must remove this very directory
    trap "as_root rm -rf '$rootfs'" EXIT
    mkdir -p "$cache_dir/debootstrap"
    log "debootstrap $suite from $mirror into $rootfs"
    as_root debootstrap --variant=minbase --cache-dir="$cache_dir/debootstrap" \
        --include=python3,python3-pytest,python3-coverage \
        "$suite" "$rootfs" "$mirror" >"$cache_dir/debootstrap.log" 2>&1 \
        || die "debootstrap failed; see $cache_dir/debootstrap.log"

    # The sandbox runs jobs as this user; a read-only root means nothing below needs to change
    # at run time. /work/tree and /work/scratch are the sandbox's fixed mount points.
    as_root sh -c "
        set -e
        echo 'assay:x:$runner_uid:$runner_uid:assay test runner:/home/assay:/usr/sbin/nologin' >>'$rootfs/etc/passwd'
        echo 'assay:x:$runner_uid:' >>'$rootfs/etc/group'
        echo 'assay:*:19000:0:99999:7:::' >>'$rootfs/etc/shadow'
        mkdir -p '$rootfs/home/assay' '$rootfs/work/tree' '$rootfs/work/scratch'
        chown $runner_uid:$runner_uid '$rootfs/home/assay' '$rootfs/work/tree' '$rootfs/work/scratch'
        rm -rf '$rootfs'/var/cache/apt/archives/*.deb '$rootfs'/var/lib/apt/lists/* \
            '$rootfs'/usr/share/doc/* '$rootfs'/usr/share/man/* '$rootfs'/usr/share/locale/* \
            '$rootfs'/var/log/* '$rootfs'/tmp/*
    "
    as_root tar -C "$rootfs" --numeric-owner -c . | docker import \
        --change 'USER 10001:10001' \
        --change 'WORKDIR /work/tree' \
        --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 HOME=/tmp PYTHONDONTWRITEBYTECODE=1' \
        --change 'CMD ["python3"]' \
        --change "LABEL assay.recipe=$recipe org.opencontainers.image.title=assay-runner-python" \
        - "$runner_image" >/dev/null
    as_root rm -rf "$rootfs"
    trap - EXIT
    log "built $runner_image in $(( $(date +%s) - started ))s ($(docker image inspect --format '{{.Size}}' "$runner_image" | awk '{printf "%.0f MB", $1/1e6}'))"
}

build_assay_image() {
    if [ -n "$binary" ]; then
        [ -x "$binary" ] || die "--binary $binary is not an executable file"
    else
        command -v cargo >/dev/null || die "cargo not found (hint: install a Rust toolchain to build the assay binary)"
        if ! (cd "$repo_root" && cargo metadata --no-deps --format-version 1 2>/dev/null) \
            | grep -q '"kind":\["bin"\][^}]*"name":"assay"'; then
            log "skipping $assay_image: this checkout has no \`assay\` binary target yet"
            return 0
        fi
        log "cargo build --release --bin assay"
        (cd "$repo_root" && cargo build --release --bin assay --quiet) || die "cargo build --release --bin assay failed"
        binary="$repo_root/target/release/assay"
    fi
    local recipe
    recipe="$( { declare -f build_assay_image; sha256sum <"$binary"; } | sha256sum | cut -c1-16)"
    if [ "$force" -eq 0 ] && [ "$(image_label "$assay_image" assay.recipe)" = "$recipe" ]; then
        log "$assay_image is up to date (recipe $recipe); --force rebuilds it"
        return 0
    fi
    local rootfs lib
    rootfs="$(mktemp -d "${TMPDIR:-/tmp}/assay-rootfs.XXXXXX")"
    # shellcheck disable=SC2064 # expand now: the trap must remove this very directory
    trap "as_root rm -rf '$rootfs'" EXIT
    mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc" "$rootfs/tmp" "$rootfs/var/lib/assay"
    cp "$binary" "$rootfs/usr/local/bin/assay"
    # Every shared library the binary links, at the path the loader looks for it, plus the
    # loader itself: the image needs no distribution underneath.
    for lib in $(ldd "$binary" | awk '/=> \// { print $3 } /^[[:space:]]*\// { print $1 }'); do
        mkdir -p "$rootfs$(dirname "$lib")"
        cp -L "$lib" "$rootfs$lib"
    done
    if [ -r /etc/ssl/certs/ca-certificates.crt ]; then
        mkdir -p "$rootfs/etc/ssl/certs"
        cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
    fi
    printf 'root:x:0:0:root:/root:/sbin/nologin\nassay:x:%s:%s:assay:/var/lib/assay:/sbin/nologin\n' \
        "$runner_uid" "$runner_uid" >"$rootfs/etc/passwd"
    printf 'root:x:0:\nassay:x:%s:\n' "$runner_uid" >"$rootfs/etc/group"
    chmod 1777 "$rootfs/tmp"
    as_root chown -R 0:0 "$rootfs"
    as_root chown "$runner_uid:$runner_uid" "$rootfs/var/lib/assay"
    as_root tar -C "$rootfs" --numeric-owner -c . | docker import \
        --change "USER $runner_uid:$runner_uid" \
        --change 'ENTRYPOINT ["/usr/local/bin/assay"]' \
        --change 'WORKDIR /var/lib/assay' \
        --change "LABEL assay.recipe=$recipe org.opencontainers.image.title=assay" \
        - "$assay_image" >/dev/null
    as_root rm -rf "$rootfs"
    trap - EXIT
    log "built $assay_image ($(docker image inspect --format '{{.Size}}' "$assay_image" | awk '{printf "%.0f MB", $1/1e6}'))"
}

[ "$build_runner" -eq 1 ] && build_runner_image
[ "$build_assay" -eq 1 ] && build_assay_image
exit 0
