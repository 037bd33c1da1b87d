#!/usr/bin/env bash
# The fleet under load on one machine: PROOFS concurrent proofs from CLIENTS CLI processes on
# WORKERS workers, one worker killed and restarted, the coordinator restarted once. See the
# docstring of bench/fleet-load.py and docs/operations.md, "Load".
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 bench/fleet-load.py "$@"
