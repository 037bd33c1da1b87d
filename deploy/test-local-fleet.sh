#!/usr/bin/env bash
# End-to-end check of the local fleet (deploy/compose.yaml): builds the images it needs on this
# machine, brings the fleet up with deploy/fleet.sh, proves a small pytest fix through it with
# `assay prove --cluster`, checks the verdict, the workers' metrics and probes, and tears the
# fleet down on every path (trap), even when a step fails.
#
# Needs the Docker engine, docker-compose (or the compose plugin), python3 and curl. Nothing is
# pulled from an image registry: see deploy/build-images.sh and deploy/build-service-images.sh.
#
# assay:latest is made from the debug binary by default (`cargo build`, which a test run has
# already done, so it takes seconds); --release builds and ships the release binary instead.
#
# Usage: deploy/test-local-fleet.sh [--release]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$here/.." && pwd)"
# A project of its own, so a developer's running fleet is never the one torn down.
export ASSAY_FLEET_PROJECT="${ASSAY_FLEET_PROJECT:-assay-fleet-e2e}"
profile=debug
case "${1:-}" in
  "") ;;
  --release) profile=release ;;
  *) echo "usage: deploy/test-local-fleet.sh [--release]" >&2; exit 2 ;;
esac
assay="$repo_root/target/$profile/assay"
started=$(date +%s)

log() { printf 'test-local-fleet: %s\n' "$*" >&2; }
fail() { printf 'test-local-fleet: FAILED: %s\n' "$*" >&2; exit 1; }
elapsed() { echo "$(( $(date +%s) - started ))s"; }

command -v docker >/dev/null || fail "docker CLI not found (hint: install docker and start the engine)"
docker info >/dev/null 2>&1 || fail "cannot reach the docker engine (hint: start dockerd)"
docker-compose version >/dev/null 2>&1 || docker compose version >/dev/null 2>&1 \
  || fail "neither docker-compose nor the compose plugin is installed (hint: apt-get install docker-compose)"
for port in 4222 8222 9000 9464 9465 9466; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    fail "127.0.0.1:$port is taken (hint: deploy/fleet.sh down, or stop what listens there)"
  fi
done

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

log "images: the runner, and assay:latest from the $profile binary (each a no-op when current)"
if [[ $profile == release ]]; then
  (cd "$repo_root" && cargo build --release --bin assay --quiet)
else
  (cd "$repo_root" && cargo build --bin assay --quiet)
fi
"$here/build-images.sh" --runner-only
"$here/build-images.sh" --assay-only --binary "$assay"
have_image assay-nats:latest && have_image assay-s3:latest || "$here/build-service-images.sh"
log "images ready after $(elapsed)"

work="$(mktemp -d "${TMPDIR:-/tmp}/assay-fleet-e2e.XXXXXX")"
cleanup() {
  local code=$?
  if [[ $code -ne 0 ]]; then
    log "fleet logs (last 40 lines per service):"
    "$here/fleet.sh" logs --tail 40 >&2 || true
  fi
  "$here/fleet.sh" down >/dev/null 2>&1 || log "warning: fleet.sh down failed; run it by hand"
  rm -rf "$work"
}
trap cleanup EXIT

"$here/fleet.sh" up
# Ready means NATS connected and the store answering, for the coordinator and both workers.
for port in 9464 9465 9466; do
  deadline=$(( $(date +%s) + 120 ))
  until curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do
    [[ $(date +%s) -lt $deadline ]] || fail "service on 127.0.0.1:$port never became ready"
    sleep 1
  done
done
log "fleet ready after $(elapsed)"

# A pager library whose last partial page is lost, and the fix with the test that shows it.
repo="$work/pager"
mkdir -p "$repo/tests"
git_() { git -C "$repo" -c user.name="Dana Reviewer" -c user.email=dana@example.com -c commit.gpgsign=false "$@"; }
git_ init -q -b main
printf 'def page_count(total, size):\n    return total // size\n' >"$repo/pager.py"
: >"$repo/conftest.py"
printf 'from pager import page_count\n\n\ndef test_full_pages():\n    assert page_count(10, 5) == 2\n' >"$repo/tests/test_pages.py"
git_ add -A && git_ commit -qm "pager: count pages"
printf 'def page_count(total, size):\n    pages = total // size\n    if total %% size > 0:\n        pages += 1\n    return pages\n' >"$repo/pager.py"
printf '\n\ndef test_partial_last_page_is_counted():\n    assert page_count(11, 5) == 3\n' >>"$repo/tests/test_pages.py"
git_ add -A && git_ commit -qm "pager: count the last partial page"

# The CLI reaches the fleet's store on the published port with the fleet's placeholder keys.
export AWS_ENDPOINT=http://127.0.0.1:9000 AWS_ALLOW_HTTP=true AWS_REGION=us-east-1 \
  AWS_ACCESS_KEY_ID=assay-local AWS_SECRET_ACCESS_KEY=assay-local-fleet
set +e
"$assay" prove -C "$repo" --base main~1 --candidate main \
  --criterion "test: test_partial_last_page_is_counted" --criterion "guard: test_full_pages" \
  --cluster nats://127.0.0.1:4222 --store s3://assay-artifacts --json "$work/proof.json"
code=$?
set -e
[[ $code -eq 0 ]] || fail "assay prove --cluster exited $code, expected 0 (proven)"

for port in 9465 9466; do
  curl -fsS "http://127.0.0.1:$port/metrics" >"$work/metrics-$port.txt" || fail "no /metrics on 127.0.0.1:$port"
done
python3 - "$work/proof.json" "$work"/metrics-*.txt <<'EOF'
import json, sys

evidence = json.load(open(sys.argv[1]))
assert evidence["verdict"] == "proven", evidence["verdict"]
jobs = evidence["jobs"]
assert jobs and all(j["status"] == "completed" for j in jobs), [j["status"] for j in jobs]


def series(path):
    out = {}
    for line in open(path):
        if line.strip() and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


# The proven proof's diff coverage run and mutation check ran on the fleet too: the coverage
# run, the check's unmutated run and one job per mutant, each a container of its own.
check = evidence.get("mutation_check") or {}
assert check.get("mutants"), "a proven fleet proof carries its mutation check"
coverage = evidence.get("diff_coverage") or {}
assert coverage.get("hunks"), f"a fleet proof of a product change carries its diff coverage: {coverage}"
ran = len(jobs) + 1 + 1 + len(check["mutants"])

workers = [series(p) for p in sys.argv[2:]]
timed = sum(v for m in workers for k, v in m.items() if k.startswith("assay_job_duration_seconds_count"))
started = sum(m["assay_container_start_seconds_count"] for m in workers)
completed = sum(m['assay_job_outcomes_total{lane="guest",status="completed"}'] for m in workers)
assert timed == ran, f"{timed} jobs timed, {ran} in the evidence, its diff coverage and its mutation check"
assert started == ran, f"{started} containers started for {ran} jobs"
assert completed == ran, f"{completed} completed outcomes for {ran} jobs"
print(f"proven with {len(jobs)} jobs and {ran - len(jobs)} diff-coverage and mutation-check jobs in containers on {len({j['worker'] for j in jobs})} worker(s)")
EOF
log "passed in $(elapsed)"
