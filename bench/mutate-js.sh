#!/usr/bin/env bash
# `assay mutate --jobs 2` on real JavaScript libraries with their own tests, every mutant behind
# one schema's switch (the default), against the same run with a job per mutant and its edit
# applied (`ASSAY_MUTATE_SCHEMATA=0`, the way before schemata). The libraries are Debian's
# node-bytes 3.1.2 and node-negotiator 0.6.3, and node-file-uri-to-path 2.0.0, written in
# TypeScript (sources and tests; its types erased by Debian's node-typescript), pinned by the
# source package versions; their upstream tarballs (`.orig.tar.gz`, fetched with `apt-get
# source --download-only`: the Debian part is not needed) ship the mocha suites. node:test runs them through a small `--require`
# preload that maps mocha's globals to node:test's own: it belongs to this benchmark, and lives
# in the repository under `.bench/`, which is never mutated (only the library's own files are).
#
# Reports, per library: mutants, wall time and mutants per minute of both ways, their ratio,
# whether the statuses agree mutant by mutant (NoCoverage counts as Survived: both are
# undetected; the schema's trace finds code no test reaches, the per-mutant run cannot), and the
# ratio to the limit: the sum over mutants of the durations of the test files that cover each
# (node's own `duration_ms` of each file's tests, measured once), over the 2 slots.
# Needs: node (nodejs), dpkg-dev, a deb-src line for Debian's main archive (a `Types: deb-src`
# twin of the `deb` entry in /etc/apt/sources.list.d, then `apt-get update`), python3, git;
# Assay's release build (built here unless ASSAY_BIN names a binary).
# Usage: bench/mutate-js.sh   (LIBRARIES="node-bytes" runs only the libraries it names)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
slots=2

command -v node >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs; }
command -v tsc >/dev/null || { apt-get update -qq && apt-get install -y -qq node-typescript; }
assay="${ASSAY_BIN:-}"
if [[ -z "$assay" ]]; then
    (cd "$root" && cargo build --quiet --release --bin assay)
    assay="$root/target/release/assay"
fi

# source package, upstream version, Debian revision, the tarball's directory, paths mutated
libraries=(
    "node-bytes 3.1.2 1 bytes.js-3.1.2 index.js"
    "node-negotiator 0.6.3+~0.6.1 1 negotiator-0.6.3 index.js,lib"
    "node-file-uri-to-path 2.0.0 2 file-uri-to-path-2.0.0 src"
)

cat > "$work/mocha-globals.cjs" <<'JS'
// mocha's globals as node:test's own, so a `describe`/`it` suite runs under `node --test`:
// suites share a `this` (each nested suite's inherits its parent's, as in mocha), and a
// callback that takes `done` gets it first, as mocha passes it.
const t = require('node:test');
let context = {};
const bind = (fn, ctx) => (fn.length >= 1
  ? (_, done) => fn.call(ctx, (error) => done(error))
  : () => fn.call(ctx));
const suite = (define) => (name, fn) => define(name, () => {
  const parent = context;
  context = Object.create(parent);
  try { fn && fn.call(context); } finally { context = parent; }
});
const test = (define) => (name, fn) => (fn ? define(name, bind(fn, context)) : define(name, { todo: true }));
const hook = (define) => (fn) => define(bind(fn, context));
const describe = Object.assign(suite(t.describe), { skip: suite(t.describe.skip), only: suite(t.describe.only) });
const it = Object.assign(test(t.it), { skip: test(t.it.skip), only: test(t.it.only) });
Object.assign(globalThis, {
  describe, context: describe, it, specify: it,
  before: hook(t.before), after: hook(t.after), beforeEach: hook(t.beforeEach), afterEach: hook(t.afterEach),
});
JS

now() { date +%s.%N; }

for entry in "${libraries[@]}"; do
    read -r package version revision dir paths <<<"$entry"
    [[ -z "${LIBRARIES:-}" || " $LIBRARIES " == *" $package "* ]] || continue
    # The upstream tarball only: the mirror may not hold the Debian part, which is not needed.
    (cd "$work" && apt-get source --download-only -qq "$package=$version-$revision" >/dev/null 2>&1) || true
    tarball=$(compgen -G "$work/${package}_${version}.orig.tar.*" | head -1 || true)
    [[ -n "$tarball" ]] || { echo "$package $version: no upstream tarball (is there a deb-src line?)" >&2; exit 1; }
    repo="$work/$package"
    mkdir -p "$repo"
    tar xf "$tarball" -C "$repo" --strip-components=1 "$dir"
    mkdir -p "$repo/.bench"
    cp "$work/mocha-globals.cjs" "$repo/.bench/"
    # The suites are `test/*.js`: what `node --test` finds by itself, and Assay's test files.
    (cd "$repo" && rm -rf .github examples && git init -q -b main && git add -A \
        && git -c user.email=bench@example.com -c user.name=bench commit -qm "$package $version")
    IFS=, read -r -a targets <<<"$paths"
    run() { # $1: label, then environment
        local label=$1; shift
        local start; start=$(now)
        env "$@" "$assay" mutate -C "$repo" --runner node --jobs "$slots" --no-cache --quiet \
            --json "$work/$package-$label.json" --store "file://$work/store-$package-$label" \
            --test-command "node --require ./.bench/mocha-globals.cjs" "${targets[@]}" \
            >/dev/null 2>&1 || true
        echo "$(now) - $start" | bc
    }
    schema_s=$(run schema ASSAY_MUTATE_SCHEMATA=1)
    alone_s=$(run alone ASSAY_MUTATE_SCHEMATA=0)
    # Each test file's own duration, as node reports its tests (no process start-up). A
    # TypeScript library's tests run as the JavaScript its types erase to: timed on a copy
    # erased by Assay's own script, as each job erases its tree.
    timed="$repo"
    if compgen -G "$repo/test/*.ts" >/dev/null; then
        timed="$work/$package-erased"
        cp -r "$repo" "$timed"
        (cd "$timed" && node -e "$(cat "$root/engine/src/mutation/mutants/javascript/erase_types.cjs")" \
            assay-erase-types write)
    fi
    for file in "$timed"/test/*.js; do
        ms=$(cd "$timed" && node --require ./.bench/mocha-globals.cjs --test --test-reporter=tap \
            "test/$(basename "$file")" 2>/dev/null \
            | awk '/^  duration_ms:/ {s+=$2} END {print s+0}' || true)
        printf 'test/%s\t%s\n' "$(basename "$file")" "$ms"
    done > "$work/$package-durations.tsv"
    python3 - "$package" "$work/$package-schema.json" "$work/$package-alone.json" \
        "$schema_s" "$alone_s" "$work/$package-durations.tsv" "$slots" <<'PY'
import json, sys
package, schema, alone = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
schema_s, alone_s, slots = float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[7])
durations = {l.split("\t")[0]: float(l.split("\t")[1]) / 1000 for l in open(sys.argv[6]) if l.strip()}

def mutants(doc):
    return {m["id"]: m for f in doc["files"].values() for m in f["mutants"]}

a, b = mutants(schema), mutants(alone)
n = len(a)
fold = lambda s: "Survived" if s == "NoCoverage" else s
same = sum(fold(a[i]["status"]) == fold(b[i]["status"]) for i in a if i in b)
# The limit: each mutant's covering files' test time, over the slots; a mutant no test reaches
# costs nothing, one the trace could not narrow costs every file.
limit = 0.0
for m in a.values():
    if m["status"] == "NoCoverage":
        continue
    files = [t for t in m.get("coveredBy") or [] if t in durations] or list(durations)
    limit += sum(durations[f] for f in files)
limit /= slots
held = (schema["assay"].get("schemata") or {}).get("held", 0)
print(f"### {package}")
print("| way | mutants | wall time | mutants/min |")
print("|---|---|---|---|")
print(f"| schema (one tree, switch per mutant) | {n} | {schema_s:.1f} s | {n / schema_s * 60:.1f} |")
print(f"| a job per mutant, edit applied | {len(b)} | {alone_s:.1f} s | {len(b) / alone_s * 60:.1f} |")
print(f"held by the schema: {held} / {n}")
print(f"ratio (per mutant / schema, wall time): {alone_s / schema_s:.2f}x")
print(f"limit (covering test files' time / {slots} slots): {limit:.2f} s; schema / limit: {schema_s / max(limit, 1e-9):.1f}x")
# A mutant that never ends cannot cost less than its limit, whatever runs it: the floor with
# each timeout at its own limit (`ran past its Ns limit`) instead of its tests' time.
import re
waits = sum(int(m.group(1)) for t in a.values() if t["status"] == "Timeout"
            for m in [re.search(r"past its (\d+)s limit", t.get("statusReason") or "")] if m)
batched = (schema["assay"].get("schemata") or {}).get("batched", 0)
print(f"timeouts: {sum(t['status'] == 'Timeout' for t in a.values())}, {waits} s of limits; "
      f"schema / (limit + their limits / {slots}): {schema_s / max(limit + waits / slots, 1e-9):.1f}x; "
      f"batched: {batched} / {n}")
print(f"same status: {same} / {n}")
for i in a:
    if i in b and fold(a[i]["status"]) != fold(b[i]["status"]):
        print(f"  differs: {i} schema {a[i]['status']}, per mutant {b[i]['status']}")
PY
done
