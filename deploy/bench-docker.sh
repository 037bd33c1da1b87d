#!/usr/bin/env bash
# Measures what a job pays for its container, on this machine:
#   bare     `docker run --rm --network none IMAGE true`, the floor the engine sets;
#   sandbox  the Docker sandbox's own per-job path (create + attach + start + wait + remove,
#            including handing the job's tree to the guest user), through the worker library;
#   floor    create + start + wait + remove of `true` through the same API, networking off as
#            in the sandbox, and none of its other settings;
#   copy     the per-job tree copy the worker makes before the sandbox runs;
#   bind     copy a tree per job, bind-mount it, run `true`        (the sandbox's choice);
#   tar      create with a volume, upload the tree as a tar, run `true`, remove.
# The sandbox target is at most 1.2x of bare. Needs the runner image (deploy/build-images.sh).
#
# Usage: [BENCH_PROFILE=dev] deploy/bench-docker.sh [RUNS] [TREE_FILES]
set -euo pipefail

runs="${1:-20}"
tree_files="${2:-200}"
image="${ASSAY_RUNNER_IMAGE:-assay-runner-python:latest}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

docker image inspect "$image" >/dev/null 2>&1 \
    || { echo "bench-docker: image $image is missing (hint: run deploy/build-images.sh)" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/assay-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
for ((file = 0; file < tree_files; file++)); do
    dir="$work/source/pager/module_$((file % 20))"
    mkdir -p "$dir"
    for ((line = 0; line < 40; line++)); do
        printf 'def page_%s():\n    return %s\n' "$file" "$file"
    done >"$dir/page_$file.py"
done

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# Runs "$@" RUNS times after one warm-up and prints the mean in milliseconds.
mean_ms() {
    "$@" 0 >/dev/null
    local started total i
    started=$(now_ms)
    for ((i = 1; i <= runs; i++)); do "$@" "$i" >/dev/null; done
    total=$(( $(now_ms) - started ))
    awk -v total="$total" -v runs="$runs" 'BEGIN { printf "%.1f", total / runs }'
}

bare() {
    docker run --rm --network none "$image" true
}

bind_job() {
    local job="$work/bind-$1"
    cp -r "$work/source" "$job"
    docker run --rm --network none --read-only -v "$job:/work/tree" "$image" true
    rm -rf "$job"
}

tar_job() {
    local id
    id=$(docker create --network none --read-only -v /work/tree "$image" true)
    docker cp "$work/source/." "$id:/work/tree" >/dev/null
    docker start -a "$id"
    docker rm -v "$id"
}

echo "bench-docker: $runs runs each, tree of $tree_files files ($(du -sh "$work/source" | cut -f1)), image $image" >&2
bare_ms=$(mean_ms bare)
echo "bare     docker run --rm IMAGE true            mean ${bare_ms} ms"
bind_ms=$(mean_ms bind_job)
echo "bind     copy tree + bind mount + run          mean ${bind_ms} ms"
tar_ms=$(mean_ms tar_job)
echo "tar      create + upload tar + start + rm      mean ${tar_ms} ms"

# BENCH_PROFILE=dev reuses a debug build (slower client, so its ratios are upper bounds).
profile="${BENCH_PROFILE:-release}"
(cd "$repo_root" && cargo build --profile "$profile" --quiet -p assay-worker --example docker_overhead)
profile_dir=$([[ "$profile" == dev ]] && echo debug || echo "$profile")
figures=$("$repo_root/target/$profile_dir/examples/docker_overhead" "$runs" "$tree_files")
field() { sed -n "s/^$1 .*mean=\([0-9.]*\).*/\1/p" <<<"$figures"; }
sandbox_ms=$(field sandbox_run_ms)
floor_ms=$(field api_floor_ms)
copy_ms=$(field tree_copy_ms)
echo "floor    API create+start+wait+rm, no network  mean ${floor_ms} ms  ($(grep ^api_floor_ms <<<"$figures"))"
echo "sandbox  DockerSandbox::run (create..remove)   mean ${sandbox_ms} ms  ($(grep ^sandbox_run_ms <<<"$figures"))"
echo "copy     per-job tree copy (not in sandbox)    mean ${copy_ms} ms  ($(grep ^tree_copy_ms <<<"$figures"))"
awk -v s="$sandbox_ms" -v b="$bare_ms" -v f="$floor_ms" -v c="$copy_ms" 'BEGIN {
    ratio = s / b
    printf "ratio    sandbox / bare = %.2fx (target <= 1.20x): %s\n", ratio, (ratio <= 1.2 ? "met" : "MISSED")
    printf "ratio    (sandbox + copy) / bare = %.2fx\n", (s + c) / b
    printf "ratio    sandbox / API floor = %.2fx (what the sandbox settings, attach and chown add)\n", s / f
}'
