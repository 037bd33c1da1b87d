"""The fleet under load on one machine: nats-server, one coordinator, WORKERS workers (process
sandbox), PROOFS proofs submitted from CLIENTS CLI processes at once, while one worker is killed
(SIGKILL) and restarted and the coordinator is killed (SIGKILL, a crash) and restarted once.

Two projects share the run. PYTEST_PROOFS of the proofs are of a real pytest project (each job a
pytest session); the others are of a ledger whose test command is a shell script writing a
JUnit report (`--runner junit`), a near no-op job that still goes the whole way: tree
materialized, sandboxed process, report parsed, logs and report stored, result reassembled.

Reports: proofs completed and whether each verdict (and each criterion's) equals the same proof
run alone (embedded), results lost or applied twice (every planned job must appear once in each
evidence), proof latency p50/p99 (submission to verdict, as the CLI sees it), dispatch latency
p50/p99 (per job, from the proof wanting to submit it to its start; see `dispatch_waits`), peak
RSS of the coordinator and the workers (sampled every 0.2 s), the peak load average, and the
JetStream streams' and the proofs bucket's sizes and time to live after the run (/jsz).

Knobs (environment): PROOFS (250), PYTEST_PROOFS (25), CLIENTS (10), WORKERS (3), SLOTS (2 per
worker), JOBS (jobs in flight per proof, 4), REPEATS (stability repeats, at most 20: a proof then
plans 40 jobs on the ledger, 42 on the pytest project), ASSAY (binary; default the release
build, built if missing).
"""

import concurrent.futures
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROOFS = int(os.environ.get("PROOFS", "250"))
PYTEST_PROOFS = int(os.environ.get("PYTEST_PROOFS", "25"))
JOBS = int(os.environ.get("JOBS", "4"))
CLIENTS = int(os.environ.get("CLIENTS", "10"))
WORKERS = int(os.environ.get("WORKERS", "3"))
SLOTS = int(os.environ.get("SLOTS", "2"))
REPEATS = int(os.environ.get("REPEATS", "20"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def assay_binary():
    if os.environ.get("ASSAY"):
        return os.environ["ASSAY"]
    subprocess.run(
        ["cargo", "build", "--release", "--quiet", "-p", "assay", "--bin", "assay"],
        cwd=ROOT,
        check=True,
    )
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return str(target / "release" / "assay")


def git(repo, *args):
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def init_repository(repo):
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "billing@example.com")
    git(repo, "config", "user.name", "Billing Team")


def make_invoices(repo):
    """An invoicing library whose rounding bug the candidate fixes, with a guard test."""
    init_repository(repo)
    (repo / "tests").mkdir()
    (repo / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    (repo / "invoice.py").write_text(
        "def total(lines, tax_rate):\n"
        "    subtotal = sum(qty * price for qty, price in lines)\n"
        "    return int(subtotal * (1 + tax_rate))\n"
    )
    (repo / "tests" / "test_invoice.py").write_text(
        "from invoice import total\n\n\n"
        "def test_whole_amounts():\n    assert total([(2, 10)], 0.0) == 20\n"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "invoice totals")
    (repo / "invoice.py").write_text(
        "def total(lines, tax_rate):\n"
        "    subtotal = sum(qty * price for qty, price in lines)\n"
        "    return round(subtotal * (1 + tax_rate), 2)\n"
    )
    (repo / "tests" / "test_invoice.py").write_text(
        "from invoice import total\n\n\n"
        "def test_whole_amounts():\n    assert total([(2, 10)], 0.0) == 20\n\n\n"
        "def test_tax_keeps_cents():\n    assert total([(3, 9.99)], 0.2) == 35.96\n"
    )
    git(repo, "commit", "-q", "-am", "keep cents when tax applies")


# The ledger's checks: a shell script that reads the rounding mode and writes a JUnit report.
LEDGER_CHECK = """#!/bin/sh
mkdir -p reports
if [ "$(cat rounding.conf)" = "half-even" ]; then
    ties='<testcase classname="rounding" name="test_ties_round_to_even"/>'; failures=0
else
    ties='<testcase classname="rounding" name="test_ties_round_to_even"><failure message="2.5 rounded to 3"/></testcase>'; failures=1
fi
cat > reports/junit.xml <<XML
<testsuite name="rounding" tests="2" failures="$failures" errors="0" skipped="0">
<testcase classname="rounding" name="test_whole_amounts_unchanged"/>
$ties
</testsuite>
XML
"""


def make_ledger(repo):
    """A ledger whose rounding mode the candidate changes, checked by a shell script."""
    init_repository(repo)
    (repo / "check.sh").write_text(LEDGER_CHECK)
    (repo / "rounding.conf").write_text("half-up\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "ledger rounding checks")
    (repo / "rounding.conf").write_text("half-even\n")
    git(repo, "commit", "-q", "-am", "round ties to even")


def prove_args(repo, criteria, runner=()):
    args = ["prove", "-C", str(repo), "--base", "main~1", "--candidate", "main", *runner]
    for criterion in criteria:
        args += ["--criterion", criterion]
    return args + [
        "--repeats", str(REPEATS), "--jobs", str(JOBS), "--no-mutation", "--quiet",
        "--progress", "plain",
    ]


def projects(work):
    """The two projects, each with the arguments of its proof."""
    invoices, ledger = work / "invoices", work / "ledger"
    make_invoices(invoices)
    make_ledger(ledger)
    return {
        "pytest": prove_args(
            invoices, ["test: test_tax_keeps_cents", "guard: test_whole_amounts"]
        ),
        "ledger": prove_args(
            ledger,
            ["test: test_ties_round_to_even", "guard: test_whole_amounts_unchanged"],
            ["--runner", "junit", "--test-command", "sh check.sh",
             "--test-report", "junit:reports/junit.xml"],
        ),
    }


def project_of(i):
    """Proof i's project: the pytest proofs spread evenly through the run."""
    if PYTEST_PROOFS <= 0:
        return "ledger"
    every = max(1, PROOFS // PYTEST_PROOFS)
    return "pytest" if i % every == 0 and i // every < PYTEST_PROOFS else "ledger"


def verdicts(evidence):
    """What must equal the proof alone: the verdict and each criterion's."""
    return evidence["verdict"], [c.get("verdict") for c in evidence.get("criteria", [])]


class Fleet:
    def __init__(self, assay, work):
        self.assay, self.work = assay, work
        self.port, self.monitor = free_port(), free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.env = dict(
            os.environ,
            ASSAY_NATS_URL=self.url,
            ASSAY_STORE=f"file://{work / 'store'}",
            ASSAY_HTTP_LISTEN="",
            RUST_LOG="warn",
        )
        self.nats = subprocess.Popen(
            ["nats-server", "-js", "-a", "127.0.0.1", "-p", str(self.port), "-m",
             str(self.monitor), "-sd", str(work / "jetstream")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        self.coordinator = self.start("coordinator", ["coordinator"])
        time.sleep(1.0)
        self.workers = [self.start(f"worker-{i}", self.worker_args(i)) for i in range(WORKERS)]
        self.peak = {}
        self.sampling = True
        threading.Thread(target=self.sample, daemon=True).start()

    def worker_args(self, i):
        return ["worker", "--slots", str(SLOTS), "--sandbox", "process"]

    def start(self, name, args):
        log = open(self.work / f"{name}.log", "ab")
        # Each worker caches tree archives in a directory of its own.
        env = dict(self.env, ASSAY_TREE_CACHE_DIR=str(self.work / f"trees-{name}"))
        return subprocess.Popen([self.assay, *args], env=env, stdout=log, stderr=log)

    def sample(self):
        while self.sampling:
            for role, procs in (("coordinator", [self.coordinator]), ("worker", self.workers)):
                for proc in procs:
                    try:
                        status = Path(f"/proc/{proc.pid}/status").read_text()
                    except OSError:
                        continue
                    for line in status.splitlines():
                        if line.startswith("VmRSS:"):
                            kib = int(line.split()[1])
                            self.peak[role] = max(self.peak.get(role, 0), kib)
            self.peak["load"] = max(self.peak.get("load", 0.0), os.getloadavg()[0])
            time.sleep(0.2)

    def kill_and_restart_worker(self):
        victim = self.workers[0]
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        time.sleep(2.0)
        self.workers[0] = self.start("worker-0", self.worker_args(0))

    def crash_and_restart_coordinator(self):
        self.coordinator.send_signal(signal.SIGKILL)
        self.coordinator.wait()
        time.sleep(1.0)
        self.coordinator = self.start("coordinator", ["coordinator"])

    def jetstream_sizes(self):
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.monitor}/jsz?streams=true&config=true", timeout=10
        ) as reply:
            jsz = json.load(reply)
        sizes = {}
        for account in jsz.get("account_details", []):
            for stream in account.get("stream_detail", []):
                state = stream.get("state", {})
                max_age_s = stream.get("config", {}).get("max_age", 0) / 1e9
                sizes[stream["name"]] = (
                    state.get("messages", 0), state.get("bytes", 0), max_age_s
                )
        return sizes

    def stop(self):
        self.sampling = False
        for proc in [*self.workers, self.coordinator]:
            proc.send_signal(signal.SIGTERM)
        for proc in [*self.workers, self.coordinator]:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.nats.terminate()
        self.nats.wait()


def percentile(values, p):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def dispatch_waits(evidence):
    """Per job, seconds from the proof wanting to submit it to its start. The proof submits in
    plan order with at most JOBS in flight, the next job as soon as a result arrives, so job k
    is queued at the proof's start (k < JOBS) or when the (k - JOBS)-th result arrived; its start
    is the evidence's start offset (the result's arrival less the run time the worker measured),
    so the wait also counts the tree's materialization and the result's way back."""
    jobs = sorted(evidence["jobs"], key=lambda job: job["index"])
    if any(job.get("started_at_ms") is None for job in jobs):
        return []
    arrivals = sorted(job["started_at_ms"] + job["duration_s"] * 1000 for job in jobs)
    waits = []
    for k, job in enumerate(jobs):
        queued = 0.0 if k < JOBS else arrivals[k - JOBS]
        waits.append(max(0.0, job["started_at_ms"] - queued) / 1000)
    return waits


def main():
    assay = assay_binary()
    with tempfile.TemporaryDirectory(prefix="assay-fleet-load-") as tmp:
        work = Path(tmp)
        args = projects(work)
        expected, planned = {}, {}
        for name, project_args in args.items():
            alone = work / f"alone-{name}.json"
            run = subprocess.run(
                [assay, *project_args, "--store", f"file://{work / 'alone-store'}",
                 "--json", str(alone)],
                capture_output=True, text=True,
            )
            if not alone.is_file():
                sys.exit(f"the {name} proof alone wrote no evidence (exit {run.returncode}):\n"
                         f"{run.stderr}")
            evidence = json.loads(alone.read_text())
            expected[name], planned[name] = verdicts(evidence), len(evidence["jobs"])
            print(f"{name} proof alone: {evidence['verdict']}, {planned[name]} jobs")
        plan = [project_of(i) for i in range(PROOFS)]
        total = sum(planned[name] for name in plan)
        print(f"{PROOFS} proofs ({plan.count('pytest')} pytest, {plan.count('ledger')} ledger) = "
              f"{total} jobs from {CLIENTS} clients on {WORKERS} workers x {SLOTS} slots, "
              f"{JOBS} in flight a proof; load average before: {os.getloadavg()[0]:.1f}")

        fleet = Fleet(assay, work)

        def one(i):
            out = work / f"proof-{i}.json"
            started = time.monotonic()
            run = subprocess.run(
                [assay, *args[plan[i]], "--cluster", fleet.url, "--json", str(out)],
                env=fleet.env, capture_output=True, text=True,
            )
            finished = time.monotonic()
            evidence = json.loads(out.read_text()) if out.is_file() else None
            return i, run.returncode, started, finished, evidence, run.stderr[-400:]

        began = time.monotonic()
        crashed_at = None
        with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
            futures = [pool.submit(one, i) for i in range(PROOFS)]
            # The disruptions, a third and two thirds of the way in (by proofs finished).
            disrupted = {"worker": False, "coordinator": False}
            done = []
            for future in concurrent.futures.as_completed(futures):
                done.append(future.result())
                if not disrupted["worker"] and len(done) >= PROOFS // 3:
                    fleet.kill_and_restart_worker()
                    disrupted["worker"] = True
                if not disrupted["coordinator"] and len(done) >= 2 * PROOFS // 3:
                    crashed_at = time.monotonic()
                    fleet.crash_and_restart_coordinator()
                    disrupted["coordinator"] = True
        wall = time.monotonic() - began
        time.sleep(2.0)
        sizes = fleet.jetstream_sizes()
        peak = dict(fleet.peak)
        fleet.stop()

    completed = [d for d in done if d[4] is not None]
    same = [d for d in completed if verdicts(d[4]) == expected[plan[d[0]]]]
    lost = dup = 0
    waits = []
    for i, _, started, finished, evidence, _ in completed:
        indices = [job["index"] for job in evidence["jobs"]]
        lost += planned[plan[i]] - len(set(indices))
        dup += len(indices) - len(set(indices))
        # A proof the crashed coordinator left is resumed on a new clock: its offsets are not
        # one proof's timeline, so it counts for everything but the dispatch latency.
        if crashed_at is None or not started <= crashed_at <= finished:
            waits += dispatch_waits(evidence)
    latencies = [d[3] - d[2] for d in completed]
    print(f"proofs completed: {len(completed)}/{PROOFS}, same verdicts as alone: {len(same)}")
    print(f"results lost: {lost}, applied twice: {dup}")
    print(f"wall {wall:.1f} s, {total / wall:.0f} jobs/s; peak load average {peak.get('load', 0):.1f}")
    print(f"proof latency p50 {percentile(latencies, 50):.1f} s, p99 {percentile(latencies, 99):.1f} s")
    print(f"dispatch latency p50 {percentile(waits, 50) * 1000:.0f} ms, "
          f"p99 {percentile(waits, 99) * 1000:.0f} ms ({len(waits)} jobs)")
    print(f"peak RSS: coordinator {peak.get('coordinator', 0) / 1024:.1f} MiB, "
          f"largest worker {peak.get('worker', 0) / 1024:.1f} MiB")
    for name, (messages, size, max_age_s) in sorted(sizes.items()):
        ttl = f", records expire after {max_age_s / 86400:g} days" if max_age_s else ""
        print(f"stream {name}: {messages} messages, {size / 1024:.1f} KiB after the run{ttl}")
    failed = [d for d in done if d[4] is None or verdicts(d[4]) != expected[plan[d[0]]]]
    for i, code, _, _, _, stderr in failed[:5]:
        print(f"proof {i} ({plan[i]}): exit {code}: {stderr.strip()}", file=sys.stderr)
    sys.exit(0 if not failed and lost == 0 and dup == 0 else 1)


if __name__ == "__main__":
    main()
