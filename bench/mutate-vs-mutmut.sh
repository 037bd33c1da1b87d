#!/usr/bin/env bash
# Mutants per minute: `assay mutate` (embedded mode) against mutmut on the same small
# pure-Python project (a pager library with a pytest suite), on this machine.
# Needs: python3 with pytest, coverage and mutmut (pip install pytest coverage mutmut), and a
# release build of assay (cargo build --release; ASSAY=PATH picks another binary).
# Usage: bench/mutate-vs-mutmut.sh [JOBS]
set -euo pipefail
jobs="${1:-2}"
root="$(cd "$(dirname "$0")/.." && pwd)"
assay="${ASSAY:-${CARGO_TARGET_DIR:-$root/target}/release/assay}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

make_project() {
    local dir="$1"
    mkdir -p "$dir/pager" "$dir/tests"
    cat > "$dir/pager/__init__.py" <<'PY'
def page_count(total, size):
    if size <= 0:
        raise ValueError("size must be positive")
    pages = total // size
    if total % size > 0:
        pages += 1
    return pages


def page_bounds(page, total, size):
    if page < 1:
        return None
    start = (page - 1) * size
    if start >= total:
        return None
    end = min(start + size, total)
    return start, end


def clamp(page, last):
    if page > last:
        return last
    if page < 1:
        return 1
    return page


def is_last(page, total, size):
    return page >= page_count(total, size)
PY
    cat > "$dir/tests/test_pager.py" <<'PY'
import pytest
from pager import clamp, is_last, page_bounds, page_count


def test_full_pages():
    assert page_count(10, 5) == 2


def test_partial_last_page_is_counted():
    assert page_count(11, 5) == 3


def test_size_must_be_positive():
    with pytest.raises(ValueError):
        page_count(3, 0)


def test_bounds_of_the_second_page():
    assert page_bounds(2, 11, 5) == (5, 10)


def test_bounds_past_the_end():
    assert page_bounds(4, 11, 5) is None


def test_clamp_caps_at_the_last_page():
    assert clamp(9, 3) == 3


def test_last_page():
    assert is_last(3, 11, 5)
    assert not is_last(2, 11, 5)
PY
    touch "$dir/conftest.py"
    printf '[tool.mutmut]\nsource_paths = ["pager/"]\npytest_add_cli_args_test_selection = ["tests/"]\n' > "$dir/pyproject.toml"
    (cd "$dir" && git init -q -b main && git add -A \
        && git -c user.name=Bench -c user.email=bench@example.com commit -qm pager)
}

make_project "$work/assay"
make_project "$work/mutmut"

# Wall time and CPU time of the whole process tree (`perf stat` task-clock when perf is
# installed; otherwise the reaped children's rusage, which misses processes killed at exit).
# On a shared machine the CPU time is the steadier figure.
measure() {
    local out="$1"; shift
    if command -v perf > /dev/null; then
        local start end cpu
        start=$(date +%s.%N)
        perf stat -x, -e task-clock -o "$out.perf" "$@" > /dev/null 2>&1 || true
        end=$(date +%s.%N)
        cpu=$(awk -F, '/task-clock/ {printf "%.2f", $1 / 1000}' "$out.perf")
        printf '%.2f %s\n' "$(echo "$end - $start" | bc)" "$cpu" > "$out"
        return
    fi
    python3 - "$out" "$@" <<'PY'
import resource, subprocess, sys, time
out, argv = sys.argv[1], sys.argv[2:]
start = time.monotonic()
subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
wall = time.monotonic() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
open(out, "w").write(f"{wall:.2f} {usage.ru_utime + usage.ru_stime:.2f}\n")
PY
}

measure "$work/assay.time" "$assay" mutate -C "$work/assay" --jobs "$jobs" --quiet \
    --json "$work/assay.json" --store "file://$work/store"
read -r assay_s assay_cpu < "$work/assay.time"
assay_n=$(python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['assay']['summary']; print(s['mutants'] - s['pending'])" "$work/assay.json")

(cd "$work/mutmut" && measure "$work/mutmut.time" mutmut run --max-children "$jobs")
read -r mutmut_s mutmut_cpu < "$work/mutmut.time"
mutmut_n=$(cd "$work/mutmut" && mutmut results --all true 2>/dev/null | grep -c ':' || true)

printf 'tool      mutants  wall s   cpu s  mutants/min  mutants/cpu-min\n'
printf 'assay     %7d  %6.1f  %6.1f  %11.1f  %15.1f\n' "$assay_n" "$assay_s" "$assay_cpu" \
    "$(echo "$assay_n * 60 / $assay_s" | bc -l)" "$(echo "$assay_n * 60 / $assay_cpu" | bc -l)"
printf 'mutmut    %7d  %6.1f  %6.1f  %11.1f  %15.1f\n' "$mutmut_n" "$mutmut_s" "$mutmut_cpu" \
    "$(echo "$mutmut_n * 60 / $mutmut_s" | bc -l)" "$(echo "$mutmut_n * 60 / $mutmut_cpu" | bc -l)"
