#!/usr/bin/env bash
# Times `assay prove` on a generated pytest project (200 tests in 20 files, a change touching
# 20 product and 20 test files) against the ideal: the very pytest invocations Assay ran (read
# back from its evidence report), run directly on pre-extracted trees, in sequence and with the
# same parallelism. Prints the ratios; the target is Assay / parallel ideal <= 1.15. The proof
# runs with --no-mutation: the mutation check is a separate, report-only phase with its own
# budget and its own benchmark (bench/mutate-vs-mutmut.sh), and the ideal has no counterpart.
set -euo pipefail
ASSAY=${ASSAY:-$(cd "$(dirname "$0")/.." && pwd)/target/release/assay}
JOBS=${JOBS:-$(nproc)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
repo=$work/repo
mkdir -p "$repo"
git -C "$repo" init -q -b main
git -C "$repo" config user.email bench@example.com
git -C "$repo" config user.name Bench

python3 - "$repo" base <<'PY'
import pathlib, sys
repo, side = pathlib.Path(sys.argv[1]), sys.argv[2]
(repo / "conftest.py").write_text("")
(repo / "billing").mkdir(exist_ok=True)
(repo / "billing/__init__.py").write_text("")
(repo / "tests").mkdir(exist_ok=True)
for m in range(20):
    fixed = side == "candidate"
    body = f"def total_{m}(items):\n    return sum(items){' + 0' if fixed else ''}\n\n\ndef rounded_{m}(x):\n    return {'round(x)' if fixed else 'int(x)'}\n"
    (repo / f"billing/mod_{m}.py").write_text(body)
    tests = [f"from billing.mod_{m} import total_{m}, rounded_{m}\n"]
    for t in range(10 if fixed else 9):
        if t == 9:
            tests.append(f"\n\ndef test_rounds_half_up_{m}():\n    assert rounded_{m}(2.6) == 3\n")
        else:
            tests.append(f"\n\ndef test_total_{m}_{t}():\n    assert total_{m}([{t}, 1]) == {t + 1}\n")
    (repo / f"tests/test_mod_{m}.py").write_text("".join(tests))
PY
git -C "$repo" add -A && git -C "$repo" commit -qm base
# Re-run the generator for the candidate side.
sed -n '/^python3 - "\$repo" base <<.PY.$/,/^PY$/p' "$0" | sed '1d;$d' > "$work/gen.py"
python3 "$work/gen.py" "$repo" candidate
git -C "$repo" add -A && git -C "$repo" commit -qm candidate

criteria=()
for m in 0 7 13 19; do criteria+=(--criterion "test: test_rounds_half_up_$m"); done
criteria+=(--criterion "guard: test_total_3_4")

start=$(date +%s.%N)
"$ASSAY" prove -C "$repo" --base main~1 --candidate main --jobs "$JOBS" --quiet --no-mutation \
  --json "$work/proof.json" --store "file://$work/store" "${criteria[@]}" >/dev/null
assay_s=$(echo "$(date +%s.%N) - $start" | bc)

# The same invocations, run directly on trees extracted ahead of time (not timed).
python3 - "$work" "$repo" <<'PY'
import json, pathlib, subprocess, sys
work, repo = pathlib.Path(sys.argv[1]), sys.argv[2]
proof = json.loads((work / "proof.json").read_text())
lines = []
for job in proof["jobs"]:
    d = work / f"ideal-{job['index']}"
    d.mkdir()
    archive = subprocess.run(["git", "-C", repo, "archive", job["tree"]], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(d)], input=archive, check=True)
    cmd = [a.replace("{report}", str(d / "report.xml")) for a in job["command"]]
    lines.append("cd " + str(d) + " && " + " ".join(subprocess.list2cmdline([a]) for a in cmd) + " >/dev/null 2>&1; true")
(work / "ideal.sh").write_text("\n".join(lines) + "\n")
print(f"{len(lines)} jobs", file=sys.stderr)
PY
start=$(date +%s.%N); bash "$work/ideal.sh"; seq_s=$(echo "$(date +%s.%N) - $start" | bc)
start=$(date +%s.%N); tr '\n' '\0' < "$work/ideal.sh" | xargs -0 -P "$JOBS" -I{} bash -c {}; par_s=$(echo "$(date +%s.%N) - $start" | bc)

printf 'assay prove:            %6.2f s (jobs %s)\n' "$assay_s" "$JOBS"
printf 'ideal, in sequence:     %6.2f s\n' "$seq_s"
printf 'ideal, %s in parallel:   %6.2f s\n' "$JOBS" "$par_s"
printf 'ratio assay / parallel: %6.3f (target <= 1.15)\n' "$(echo "$assay_s / $par_s" | bc -l)"
