#!/usr/bin/env bash
# Brings the local fleet of deploy/compose.yaml up or down.
#   deploy/fleet.sh up     build missing images, create the workers' directories, start everything
#   deploy/fleet.sh down   stop everything and remove the containers, volumes and directories
#   deploy/fleet.sh ps|logs [SERVICE]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
fleet_dir=/var/tmp/assay-fleet
project="${ASSAY_FLEET_PROJECT:-assay-fleet}"

if command -v docker-compose >/dev/null 2>&1; then
  compose=(docker-compose)
else
  compose=(docker compose)
fi
compose+=(--project-name "$project" --file "$here/compose.yaml")

socket=/var/run/docker.sock
[[ -S "$socket" ]] || { echo "error: no Docker socket at $socket (hint: start the Docker engine)" >&2; exit 1; }
# The services never run as root: with every capability dropped, root could not hand job trees
# to the runner's user anyway. A root caller gets the runner's uid (10001), which then owns the
# workers' directories.
if [[ $(id -u) -eq 0 ]]; then
  export ASSAY_UID="${ASSAY_UID:-10001}" ASSAY_GID="${ASSAY_GID:-10001}"
else
  export ASSAY_UID="${ASSAY_UID:-$(id -u)}" ASSAY_GID="${ASSAY_GID:-$(id -g)}"
fi
export DOCKER_GID="${DOCKER_GID:-$(stat -c %g "$socket")}"

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

case "${1:-}" in
  up)
    have_image assay-nats:latest && have_image assay-s3:latest || "$here/build-service-images.sh"
    if ! have_image assay:latest || ! have_image assay-runner-python:latest; then
      [[ -x "$here/build-images.sh" ]] || { echo "error: assay:latest or assay-runner-python:latest is missing (hint: run deploy/build-images.sh)" >&2; exit 1; }
      "$here/build-images.sh"
    fi
    for worker in worker-1 worker-2; do
      mkdir -p "$fleet_dir/$worker/trees" "$fleet_dir/$worker/scratch"
    done
    [[ $(id -u) -ne 0 ]] || chown -R "$ASSAY_UID:$ASSAY_GID" "$fleet_dir"
    "${compose[@]}" up --detach
    echo "fleet up: assay prove --cluster nats://127.0.0.1:4222 ...; metrics on 127.0.0.1:9464 (coordinator), 9465/9466 (workers)"
    ;;
  down)
    "${compose[@]}" down --volumes --remove-orphans
    rm -rf "$fleet_dir"
    ;;
  ps) "${compose[@]}" ps ;;
  logs) shift; "${compose[@]}" logs "$@" ;;
  *) echo "usage: deploy/fleet.sh up|down|ps|logs [SERVICE]" >&2; exit 2 ;;
esac
