#!/usr/bin/env bash
# Conformance corpus: runs `assay prove` (embedded, --no-mutation) on every case of
# corpus/manifest.json — criteria on real release pairs of PyPI projects — and compares each
# verdict with the truth recorded in corpus/truth.json, established without Assay by
# corpus/truth.py. Prints the confusion matrix (truth x verdict), the false proven count and
# the agreement figure.
#
#   bash bench/corpus.sh                    # every case
#   bash bench/corpus.sh --subset ci        # the CI subset (about 3 minutes once cached)
#   bash bench/corpus.sh --subset ci --prepare   # only fetch and build its repositories and venvs
#   bash bench/corpus.sh --subset docker --sandbox docker   # in assay-runner-python:latest
#   bash bench/corpus.sh --case wc-kr-jamo --strict
#   bash bench/corpus.sh --truth            # re-establish corpus/truth.json first
#
# Exit 1 on any false proven (and, with --strict, on agreement below 100 %).
# ASSAY_BIN picks the binary (default target/release/assay, else target/debug/assay);
# ASSAY_CORPUS_CACHE the cache of sdists (pip download, sha256-checked), repositories, venvs
# (pytest 8 and 9 pinned in the manifest) and run evidence (default ~/.cache/assay-corpus).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
if [ "${1:-}" = "--truth" ]; then
    shift
    "$python" "$root/corpus/truth.py"
fi
exec "$python" "$root/corpus/driver.py" "$@"
