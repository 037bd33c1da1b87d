"""The fleet under load on one machine: nats-server, one coordinator, WORKERS workers (process
sandbox), PROOFS proofs of a real pytest project submitted from CLIENTS CLI processes at once,
while one worker is killed (SIGKILL) and restarted and the coordinator is restarted once.

Reports: proofs completed and whether each verdict equals the same proof run alone (embedded),
results lost or applied twice (every planned job must appear once in each evidence), proof
latency p50/p99 (submission to verdict, as the CLI sees it), per-job wait p50/p99 (from the
evidence's start offsets), peak RSS of the coordinator and the workers (sampled every 0.2 s),
and the JetStream streams' and the proofs bucket's sizes after the run (the server's /jsz).

Knobs (environment): PROOFS (100), CLIENTS (10), WORKERS (3), SLOTS (2 per worker), REPEATS
(stability repeats per criterion: 46 gives 100 jobs a proof), ASSAY (binary; default the release
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
PROOFS = int(os.environ.get("PROOFS", "100"))
CLIENTS = int(os.environ.get("CLIENTS", "10"))
WORKERS = int(os.environ.get("WORKERS", "3"))
SLOTS = int(os.environ.get("SLOTS", "2"))
REPEATS = int(os.environ.get("REPEATS", "46"))


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


def make_repository(repo):
    """An invoicing library whose rounding bug the candidate fixes, with a guard test."""
    (repo / "tests").mkdir(parents=True)
    (repo / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "billing@example.com")
    git(repo, "config", "user.name", "Billing Team")
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


def prove_args(repo):
    return [
        "prove", "-C", str(repo), "--base", "main~1", "--candidate", "main",
        "--criterion", "test: test_tax_keeps_cents", "--criterion", "guard: test_whole_amounts",
        "--repeats", str(REPEATS), "--no-mutation", "--quiet", "--progress", "plain",
    ]


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
            time.sleep(0.2)

    def kill_and_restart_worker(self):
        victim = self.workers[0]
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        time.sleep(2.0)
        self.workers[0] = self.start("worker-0", self.worker_args(0))

    def restart_coordinator(self):
        self.coordinator.send_signal(signal.SIGTERM)
        self.coordinator.wait(timeout=60)
        self.coordinator = self.start("coordinator", ["coordinator"])

    def jetstream_sizes(self):
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.monitor}/jsz?streams=true", timeout=10
        ) as reply:
            jsz = json.load(reply)
        sizes = {}
        for account in jsz.get("account_details", []):
            for stream in account.get("stream_detail", []):
                state = stream.get("state", {})
                sizes[stream["name"]] = (state.get("messages", 0), state.get("bytes", 0))
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


def main():
    assay = assay_binary()
    with tempfile.TemporaryDirectory(prefix="assay-fleet-load-") as tmp:
        work = Path(tmp)
        repo = work / "invoices"
        make_repository(repo)
        alone = work / "alone.json"
        run = subprocess.run(
            [assay, *prove_args(repo), "--store", f"file://{work / 'alone-store'}",
             "--json", str(alone)],
            capture_output=True, text=True,
        )
        if not alone.is_file():
            sys.exit(f"the proof alone wrote no evidence (exit {run.returncode}):\n{run.stderr}")
        expected = json.loads(alone.read_text())
        planned = len(expected["jobs"])
        print(f"one proof alone: {expected['verdict']}, {planned} jobs; "
              f"{PROOFS} proofs = {PROOFS * planned} jobs from {CLIENTS} clients on "
              f"{WORKERS} workers x {SLOTS} slots")

        fleet = Fleet(assay, work)

        def one(i):
            out = work / f"proof-{i}.json"
            started = time.monotonic()
            run = subprocess.run(
                [assay, *prove_args(repo), "--cluster", fleet.url, "--json", str(out)],
                env=fleet.env, capture_output=True, text=True,
            )
            took = time.monotonic() - started
            evidence = json.loads(out.read_text()) if out.is_file() else None
            return i, run.returncode, took, evidence, run.stderr[-400:]

        began = time.monotonic()
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
                    fleet.restart_coordinator()
                    disrupted["coordinator"] = True
        wall = time.monotonic() - began
        time.sleep(2.0)
        sizes = fleet.jetstream_sizes()
        peak = dict(fleet.peak)
        fleet.stop()

    completed = [d for d in done if d[3] is not None]
    same = [d for d in completed if d[3]["verdict"] == expected["verdict"]]
    lost = dup = 0
    waits = []
    for _, _, _, evidence, _ in completed:
        indices = [job["index"] for job in evidence["jobs"]]
        lost += planned - len(set(indices))
        dup += len(indices) - len(set(indices))
        for job in evidence["jobs"]:
            if job.get("started_at_ms") is not None:
                waits.append(job["started_at_ms"] / 1000)
    latencies = [d[2] for d in completed]
    print(f"proofs completed: {len(completed)}/{PROOFS}, same verdict as alone: {len(same)}")
    print(f"results lost: {lost}, applied twice: {dup}")
    print(f"wall {wall:.1f} s, {PROOFS * planned / wall:.0f} jobs/s")
    print(f"proof latency p50 {percentile(latencies, 50):.1f} s, p99 {percentile(latencies, 99):.1f} s")
    print(f"job start offset p50 {percentile(waits, 50):.1f} s, p99 {percentile(waits, 99):.1f} s")
    print(f"peak RSS: coordinator {peak.get('coordinator', 0) / 1024:.1f} MiB, "
          f"largest worker {peak.get('worker', 0) / 1024:.1f} MiB")
    for name, (messages, size) in sorted(sizes.items()):
        print(f"stream {name}: {messages} messages, {size / 1024:.1f} KiB after the run")
    failed = [d for d in done if d[3] is None or d[3]["verdict"] != expected["verdict"]]
    for i, code, _, _, stderr in failed[:5]:
        print(f"proof {i}: exit {code}: {stderr.strip()}", file=sys.stderr)
    sys.exit(0 if not failed and lost == 0 and dup == 0 else 1)


if __name__ == "__main__":
    main()
