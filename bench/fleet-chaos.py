"""The fleet losing one server at a time, on one machine: a 3-node nats-server cluster (JetStream,
replicas 3), two coordinators, three workers (process sandbox), PROOFS proofs from CLIENTS CLI
processes, while a chaos thread kills (SIGKILL) and restarts, each KILLS times at random moments,
the leading coordinator, one NATS server (the results stream's leader) and a worker. The same
proofs then run on a fresh fleet with no kills, for the latency baseline.

Reports: proofs completed with the verdict (and each criterion's) the same proof gets alone
(embedded), results lost or applied twice (every planned job exactly once in each evidence),
proofs whose evidence names more than one coordinator (they lived through a failover), proof
latency p50/p99 against the run with no kills, and per kill the failover time: for the
coordinator, from the kill to the standby's "leading" line; for a NATS server, from the kill to
a surviving server naming a new leader of the results stream; for a worker, none (its jobs are
redelivered after ack_wait). And the stall: the longest gap with no result applied, over the
whole run and after each kill (a gap is the first kill's that falls inside it, or else the last
kill's before it), from `assay_results_applied_total`, read every 50 ms from each
coordinator's /metrics. Exits non-zero on any lost, duplicated or different result.

Knobs (environment): PROOFS (100), PYTEST_PROOFS (10), CLIENTS (5), SLOTS (2 per worker), JOBS
(4), REPEATS (3), KILLS (2 of each kind), KINDS (what is killed: `coordinator,nats,worker`),
SEED (random), LEASE_TTL_MS (6000), KEEP (1: keep the processes' logs), ASSAY (binary; default
the release build, built if missing). Servers listen on 127.0.0.1 only.
"""

import concurrent.futures
import contextlib
import importlib.util
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("PROOFS", "100")
os.environ.setdefault("PYTEST_PROOFS", "10")
os.environ.setdefault("CLIENTS", "5")
os.environ.setdefault("REPEATS", "3")
# The projects, proof arguments, verdict comparison and percentiles are the load benchmark's.
_spec = importlib.util.spec_from_file_location(
    "fleet_load", Path(__file__).resolve().parent / "fleet-load.py"
)
load = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(load)

PROOFS, CLIENTS, SLOTS = load.PROOFS, load.CLIENTS, load.SLOTS
KILLS = int(os.environ.get("KILLS", "2"))
SEED = int(os.environ.get("SEED", str(random.randrange(1 << 30))))
LEASE_TTL_MS = os.environ.get("LEASE_TTL_MS", "6000")
KINDS = [k for k in os.environ.get("KINDS", "coordinator,nats,worker").split(",") if k]
if not KINDS or set(KINDS) - {"coordinator", "nats", "worker"}:
    sys.exit("KINDS lists what is killed: coordinator, nats, worker (comma-separated)")
# How often each coordinator's count of applied results is read.
APPLIED_POLL = 0.05
# Longer than any gap between results applied with no kill (the calm run's longest: under 1 s).
NATURAL_GAP = 1.0
NODES = 3
WORKERS = 3


def wait_for(what, done, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)
    return time.monotonic()


def jsz(monitor):
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{monitor}/jsz?streams=true", timeout=2
        ) as reply:
            return json.load(reply)
    except OSError:
        return None


class Cluster:
    """Three nats-servers routed to each other, each with its own store."""

    def __init__(self, work):
        self.work = work
        self.ports = [load.free_port() for _ in range(NODES)]
        self.routes = [load.free_port() for _ in range(NODES)]
        self.monitors = [load.free_port() for _ in range(NODES)]
        self.procs = [None] * NODES
        for i in range(NODES):
            self.start(i)
        wait_for("the JetStream cluster to elect its meta leader", self.has_meta_leader)

    @property
    def urls(self):
        return ",".join(f"nats://127.0.0.1:{p}" for p in self.ports)

    def start(self, i):
        routes = ",".join(f"nats://127.0.0.1:{p}" for j, p in enumerate(self.routes) if j != i)
        log = open(self.work / f"nats-{i}.log", "ab")
        self.procs[i] = subprocess.Popen(
            ["nats-server", "-js", "-a", "127.0.0.1", "-p", str(self.ports[i]),
             "-m", str(self.monitors[i]), "-n", f"node-{i}", "-sd", str(self.work / f"js-{i}"),
             "--cluster_name", "assay-chaos", "--cluster", f"nats://127.0.0.1:{self.routes[i]}",
             "--routes", routes],
            stdout=log, stderr=log,
        )

    def alive(self):
        return [i for i, p in enumerate(self.procs) if p and p.poll() is None]

    def has_meta_leader(self):
        for i in self.alive():
            info = jsz(self.monitors[i])
            if info and info.get("meta_cluster", {}).get("leader"):
                return True
        return False

    def stream_leader(self, name):
        """The server name leading stream `name`, as a live server sees it."""
        for i in self.alive():
            info = jsz(self.monitors[i]) or {}
            for account in info.get("account_details", []):
                for stream in account.get("stream_detail", []):
                    if stream["name"] == name:
                        leader = stream.get("cluster", {}).get("leader")
                        if leader:
                            return leader
        return None

    def stop(self):
        for p in self.procs:
            if p and p.poll() is None:
                p.terminate()
        for p in self.procs:
            if p:
                p.wait()


class Fleet:
    def __init__(self, assay, work):
        self.assay, self.work = assay, work
        self.cluster = Cluster(work)
        self.env = dict(
            os.environ,
            ASSAY_NATS_URL=self.cluster.urls,
            ASSAY_NATS_REPLICAS=str(NODES),
            ASSAY_LEASE_TTL_MS=LEASE_TTL_MS,
            ASSAY_STORE=f"file://{work / 'store'}",
            ASSAY_HTTP_LISTEN="",
            ASSAY_LOG="warn,assay_engine=info,assay_coordinator=info",
        )
        self.starts = {}
        # Each coordinator's /metrics, on the same port across its restarts.
        self.metrics_ports = [load.free_port() for _ in range(2)]
        self.coordinators = [self.start_coordinator(i) for i in range(2)]
        self.workers = [self.start(f"worker-{i}", self.worker_args()) for i in range(WORKERS)]

    def start_coordinator(self, i):
        listen = {"ASSAY_HTTP_LISTEN": f"127.0.0.1:{self.metrics_ports[i]}"}
        return self.start(f"coordinator-{i}", ["coordinator"], listen)

    def applied(self, i):
        """Coordinator i's count of results applied, or None when it does not answer."""
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.metrics_ports[i]}/metrics", timeout=1
            ) as reply:
                for line in reply.read().decode().splitlines():
                    if line.startswith("assay_results_applied_total"):
                        return int(float(line.split()[-1]))
        except (OSError, ValueError):
            return None
        return None

    def worker_args(self):
        return ["worker", "--slots", str(SLOTS), "--sandbox", "process"]

    def start(self, name, args, extra_env=None):
        n = self.starts[name] = self.starts.get(name, 0) + 1
        log_path = self.work / f"{name}.{n}.log"
        env = dict(self.env, ASSAY_TREE_CACHE_DIR=str(self.work / f"trees-{name}"),
                   **(extra_env or {}))
        proc = subprocess.Popen([self.assay, *args], env=env, stdout=open(log_path, "ab"),
                                stderr=subprocess.STDOUT)
        proc.log_path = log_path
        return proc

    @staticmethod
    def leads(proc):
        """Whether this coordinator process said it leads and has not stepped down since."""
        if proc.poll() is not None:
            return False
        text = proc.log_path.read_text(errors="replace")
        led = text.rfind("leading: this coordinator holds the lease")
        return led >= 0 and text.rfind("stepping down") < led

    def leader(self):
        leaders = [i for i, p in enumerate(self.coordinators) if self.leads(p)]
        return leaders[0] if len(leaders) == 1 else None

    def kill_leading_coordinator(self):
        i = wait_for_value("a leading coordinator", self.leader)
        self.coordinators[i].send_signal(signal.SIGKILL)
        self.coordinators[i].wait()
        killed = time.monotonic()
        other = 1 - i
        took_over = wait_for("the standby to lead", lambda: self.leads(self.coordinators[other]))
        self.coordinators[i] = self.start_coordinator(i)
        return took_over - killed

    def kill_nats_server(self):
        leader = self.cluster.stream_leader("ASSAY_RESULTS")
        victim = int(leader.split("-")[1]) if leader else random.choice(self.cluster.alive())
        self.cluster.procs[victim].send_signal(signal.SIGKILL)
        self.cluster.procs[victim].wait()
        killed = time.monotonic()
        elected = wait_for(
            "a new leader of ASSAY_RESULTS",
            lambda: self.cluster.stream_leader("ASSAY_RESULTS") not in (None, f"node-{victim}"),
        )
        time.sleep(2.0)
        self.cluster.start(victim)
        return elected - killed

    def kill_worker(self):
        i = random.randrange(WORKERS)
        self.workers[i].send_signal(signal.SIGKILL)
        self.workers[i].wait()
        time.sleep(2.0)
        self.workers[i] = self.start(f"worker-{i}", self.worker_args())
        return None

    def stop(self):
        for proc in [*self.workers, *self.coordinators]:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in [*self.workers, *self.coordinators]:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.cluster.stop()


def wait_for_value(what, value, timeout=60.0):
    deadline = time.monotonic() + timeout
    while (found := value()) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)
    return found


class AppliedLog:
    """When results were applied: each coordinator's count read every APPLIED_POLL seconds, a
    moment recorded whenever the count grew (a restarted coordinator counts from zero)."""

    def __init__(self, fleet):
        self.fleet, self.moments, self.stop = fleet, [], threading.Event()
        self.thread = threading.Thread(target=self.poll, daemon=True)
        self.thread.start()

    def poll(self):
        last = [0, 0]
        while not self.stop.wait(APPLIED_POLL):
            for i in range(2):
                count = self.fleet.applied(i)
                if count is None:
                    continue
                if count < last[i]:
                    last[i] = 0
                if count > last[i]:
                    self.moments.append(time.monotonic())
                    last[i] = count

    def finish(self):
        self.stop.set()
        self.thread.join()
        return sorted(self.moments)


def gaps(moments):
    """(start, length) of each gap between two results applied."""
    return [(a, b - a) for a, b in zip(moments, moments[1:])]


def longest_gap(moments):
    return max((length for _, length in gaps(moments)), default=0.0)


def gaps_by_kill(moments, kills):
    """The longest gap with no result applied that each kill caused, by kill time: a gap is the
    first kill's that falls inside it (from a moment before it began, as results come about
    every NATURAL_GAP seconds), or else the last kill's before it began."""
    times = sorted(at for _, at, _ in kills)
    longest = {at: 0.0 for at in times}
    for start, length in gaps(moments):
        inside = [at for at in times if start - NATURAL_GAP < at < start + length]
        before = [at for at in times if at <= start]
        owner = inside[0] if inside else (before[-1] if before else None)
        if owner is not None:
            longest[owner] = max(longest[owner], length)
    return longest


def run(assay, work, args, plan, chaos):
    """PROOFS proofs on a fresh fleet; with `chaos`, the kills meanwhile. Returns the proofs'
    outcomes, the kills' failover times, the wall time and when results were applied."""
    fleet = Fleet(assay, work)
    kills = []
    finished = threading.Event()

    def disrupt():
        order = KINDS * KILLS
        random.shuffle(order)
        actions = {
            "coordinator": fleet.kill_leading_coordinator,
            "nats": fleet.kill_nats_server,
            "worker": fleet.kill_worker,
        }
        for kind in order:
            if finished.wait(random.uniform(2.0, 8.0)):
                return
            at = time.monotonic()
            try:
                kills.append((kind, at, actions[kind]()))
            except TimeoutError as e:
                kills.append((kind, at, f"no recovery: {e}"))

    def one(i):
        out = work / f"proof-{i}.json"
        started = time.monotonic()
        proc = subprocess.run(
            [assay, *args[plan[i]], "--cluster", fleet.cluster.urls, "--json", str(out)],
            env=fleet.env, capture_output=True, text=True,
        )
        evidence = json.loads(out.read_text()) if out.is_file() else None
        return i, proc.returncode, started, time.monotonic(), evidence, proc.stderr[-400:]

    wait_for_value("a leading coordinator", fleet.leader)
    applied = AppliedLog(fleet)
    chaos_thread = threading.Thread(target=disrupt, daemon=True) if chaos else None
    if chaos_thread:
        chaos_thread.start()
    began = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        done = list(pool.map(one, range(PROOFS)))
    wall = time.monotonic() - began
    finished.set()
    if chaos_thread:
        chaos_thread.join()
    moments = applied.finish()
    fleet.stop()
    return done, kills, wall, moments


def main():
    random.seed(SEED)
    assay = load.assay_binary()
    # KEEP=1 leaves the logs of every process (and the servers' stores) for reading afterwards.
    keep = os.environ.get("KEEP") == "1"
    held = (contextlib.nullcontext(tempfile.mkdtemp(prefix="assay-fleet-chaos-")) if keep
            else tempfile.TemporaryDirectory(prefix="assay-fleet-chaos-"))
    with held as tmp:
        if keep:
            print(f"logs kept in {tmp}")
        work = Path(tmp)
        args = load.projects(work)
        expected, planned = {}, {}
        for name, project_args in args.items():
            alone = work / f"alone-{name}.json"
            subprocess.run(
                [assay, *project_args, "--store", f"file://{work / 'alone-store'}",
                 "--json", str(alone)],
                capture_output=True, text=True,
            )
            if not alone.is_file():
                sys.exit(f"the {name} proof alone wrote no evidence")
            evidence = json.loads(alone.read_text())
            expected[name], planned[name] = load.verdicts(evidence), len(evidence["jobs"])
        plan = [load.project_of(i) for i in range(PROOFS)]
        print(f"seed {SEED}: {PROOFS} proofs ({plan.count('pytest')} pytest) from {CLIENTS} "
              f"clients; {NODES} NATS servers (replicas {NODES}), 2 coordinators (lease "
              f"{LEASE_TTL_MS} ms), {WORKERS} workers x {SLOTS} slots; {KILLS} kills of each of "
              f"{', '.join(KINDS)}")
        runs = {}
        for label, chaos in (("chaos", True), ("calm", False)):
            (work / label).mkdir()
            runs[label] = run(assay, work / label, args, plan, chaos)
            done, kills, _, moments = runs[label]
            (work / label / "applied.json").write_text(json.dumps({
                "first_submission": min(d[2] for d in done),
                "kills": [[kind, at] for kind, at, _ in kills],
                "applied": moments,
            }))

    failed = lost = dup = 0
    for label, (done, kills, wall, moments) in runs.items():
        completed = [d for d in done if d[4] is not None]
        same = [d for d in completed if load.verdicts(d[4]) == expected[plan[d[0]]]]
        run_lost = run_dup = 0
        for i, _, _, _, evidence, _ in completed:
            indices = [job["index"] for job in evidence["jobs"]]
            run_lost += planned[plan[i]] - len(set(indices))
            run_dup += len(indices) - len(set(indices))
        failovers = sum(1 for d in completed if len(d[4].get("coordinators", [])) > 1)
        latencies = [d[3] - d[2] for d in completed]
        print(f"[{label}] proofs completed: {len(completed)}/{PROOFS}, same verdicts as alone: "
              f"{len(same)}; results lost: {run_lost}, applied twice: {run_dup}; "
              f"proofs that lived through a failover: {failovers}")
        print(f"[{label}] wall {wall:.1f} s; proof latency p50 {load.percentile(latencies, 50):.1f} s,"
              f" p99 {load.percentile(latencies, 99):.1f} s")
        print(f"[{label}] longest gap with no result applied: {longest_gap(moments):.2f} s "
              f"({len(moments)} moments results were applied)")
        by_kill = gaps_by_kill(moments, kills)
        stalls = {}
        for kind, at, took in kills:
            figure = f"{took:.2f} s" if isinstance(took, float) else (took or "-")
            stall = by_kill[at]
            stalls[kind] = max(stalls.get(kind, 0.0), stall)
            # A NATS server's failover is its stream's election, during which no result can be
            # stored: what the gap lasts beyond it is the fleet's own delay.
            beyond = (f" ({max(0.0, stall - took):.2f} s beyond the stream's election)"
                      if kind == "nats" and isinstance(took, float) else "")
            print(f"[{label}] kill {kind} at +{at - min(d[2] for d in done):.1f} s: "
                  f"failover {figure}; longest gap with no result applied after it "
                  f"{stall:.2f} s{beyond}")
        for kind, stall in sorted(stalls.items()):
            print(f"[{label}] longest gap with no result applied after a {kind} kill: {stall:.2f} s")
        bad = [d for d in done if d[4] is None or load.verdicts(d[4]) != expected[plan[d[0]]]]
        for i, code, _, _, _, stderr in bad[:5]:
            print(f"[{label}] proof {i} ({plan[i]}): exit {code}: {stderr.strip()}",
                  file=sys.stderr)
        failed += len(bad)
        lost += run_lost
        dup += run_dup
        if any(isinstance(took, str) for _, _, took in kills):
            failed += 1
    sys.exit(0 if not failed and lost == 0 and dup == 0 else 1)


if __name__ == "__main__":
    main()
