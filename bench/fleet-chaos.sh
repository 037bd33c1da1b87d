#!/usr/bin/env bash
# The fleet losing one server at a time: a 3-node NATS cluster, two coordinators, three workers,
# PROOFS proofs while the leading coordinator, a NATS server and a worker are each killed and
# restarted KILLS times; then the same proofs with no kills. See the docstring of
# bench/fleet-chaos.py and bench/README.md, "Chaos".
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 bench/fleet-chaos.py "$@"
