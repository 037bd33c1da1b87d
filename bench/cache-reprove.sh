#!/usr/bin/env bash
# Re-proof after a product-only edit, with the result cache, against the first proof (target
# ratio <= 0.55). Uses the conformance corpus's sdists and venvs (cached on first use).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 bench/cache-reprove.py "$@"
