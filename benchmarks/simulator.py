"""Benchmark of the embedded simulator: events per second and peak memory.

A trivial FCFS decision process (one-node jobs, a free-host stack) drives the simulator
in-process, in two modes: ``engine`` (messages passed as objects: the simulator's own
cost) and ``json`` (every message encoded and decoded both ways as on the wire, zmq
transport excluded; the decision side's parsing is counted too). Each configuration runs
in a fresh subprocess so that its peak RSS is its own.

    .venv/bin/python benchmarks/simulator.py                 # 100k jobs on 1k and 10k hosts
    .venv/bin/python benchmarks/simulator.py --jobs 20000 --hosts 1000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simulator import protocol as p  # noqa: E402
from simulator.engine import Options, Simulator, drive  # noqa: E402
from simulator.platform import Host, Platform  # noqa: E402
from simulator.workload import Workload, parse_job  # noqa: E402


class TrivialFcfs:
    def __init__(self) -> None:
        self.free: list[int] = []
        self.queue: list[str] = []
        self.head = 0
        self.alloc: dict[str, int] = {}

    def __call__(self, message: p.Message) -> p.Message:
        out = []
        for event in message.events:
            data = event.data
            if isinstance(data, p.SimulationBegins):
                self.free = list(range(data.nb_compute_resources - 1, -1, -1))
            elif isinstance(data, p.JobSubmitted):
                self.queue.append(data.job_id)
            elif isinstance(data, p.JobCompleted):
                self.free.append(self.alloc.pop(data.job_id))
        while self.head < len(self.queue) and self.free:
            job_id = self.queue[self.head]
            self.head += 1
            host = self.free.pop()
            self.alloc[job_id] = host
            out.append(p.Event(message.now, p.ExecuteJob(job_id, p.ProcSet(host))))
        return p.Message(message.now, out)


def build(jobs: int, hosts: int, seed: int) -> Simulator:
    rng = random.Random(seed)
    master = Host("master_host", 1e9, 1, {"role": "master"})
    compute = [Host(f"node{i:05d}", 1e9, 1, {}) for i in range(hosts)]
    platform = Platform("bench.xml", master, compute, [])
    profiles = {f"d{d}": {"type": "delay", "delay": d} for d in range(60, 3601, 60)}
    names = sorted(profiles)
    # offered load ~90% of the platform: mean delay ~1830 s
    rate = 0.9 * hosts / 1830.0
    now, parsed = 0.0, []
    for i in range(jobs):
        now += rng.expovariate(rate)
        raw = {"id": str(i), "subtime": round(now, 3), "res": 1, "profile": rng.choice(names)}
        parsed.append(parse_job(raw, "w0", profiles, hosts, f"jobs[{i}]", i))
    return Simulator(platform, [Workload("w0", "bench.json", parsed, profiles)], Options())


def one_run(jobs: int, hosts: int, seed: int, mode: str) -> dict:
    sim = build(jobs, hosts, seed)
    began = time.perf_counter()
    messages = drive(sim, TrivialFcfs(), through_json=mode == "json")
    wall = time.perf_counter() - began
    decisions = len(sim.records)  # one EXECUTE_JOB per job
    events = sim.events_processed + decisions
    return {
        "jobs": jobs,
        "hosts": hosts,
        "wall_s": wall,
        "messages": messages,
        "events": events,
        "events_per_s": events / wall,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "makespan": max(r.finish for r in sim.records.values()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--hosts", type=int, action="append")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mode", choices=("engine", "json"), action="append")
    args = parser.parse_args()
    hosts_list = args.hosts or [1000, 10000]
    modes = args.mode or ["engine", "json"]
    if args.child:
        print(json.dumps(one_run(args.jobs, hosts_list[0], args.seed, modes[0])))
        return 0
    for hosts, mode in [(h, m) for h in hosts_list for m in modes]:
        runs = []
        for _ in range(args.repeat):
            out = subprocess.run(
                [sys.executable, __file__, "--child", "--jobs", str(args.jobs),
                 "--hosts", str(hosts), "--seed", str(args.seed), "--mode", mode],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            runs.append(json.loads(out.stdout))
        rates = [r["events_per_s"] for r in runs]
        walls = [r["wall_s"] for r in runs]
        rss = [r["peak_rss_mib"] for r in runs]
        print(
            f"{mode:6} {args.jobs} jobs, {hosts} hosts: {runs[0]['events']} events, "
            f"{runs[0]['messages']} messages, makespan {runs[0]['makespan']:.0f} s | "
            f"events/s min/median/max {min(rates):,.0f} / {statistics.median(rates):,.0f} / "
            f"{max(rates):,.0f} | wall {min(walls):.2f}/{statistics.median(walls):.2f}/"
            f"{max(walls):.2f} s | peak RSS {min(rss):.0f}/{statistics.median(rss):.0f}/"
            f"{max(rss):.0f} MiB"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
