"""The traffic model's cost and the exact/fluid comparison (no broker, no scheduler).

Scenarios, each one simulated hour advanced every 15 s (as a 15 s autoscaler loop makes
the broker do), metrics tick 15 s:

- ``steady``: 10^6 requests in the hour (277.8/s Poisson), 50 ms exponential cost, 16
  one-core replicas (ρ = 0.87);
- ``step``: the service_step example's traffic (20 → 200 → 20 /s) with the replica count
  an HPA at 50 % would reach (1, then 20 from 60 s after the step, 2 from 300 s after
  the fall), to show transients;
- ``overload``: 277.8/s on 12 one-core replicas (ρ = 1.16), 10 s timeout.

Reported per scenario and model: CPU seconds (min/median/max of ``--repeat``), requests
per CPU second, and how far the fluid rows are from the exact ones (mean absolute
difference of p50/p99 latency, CPU cores, mean concurrency; failed requests in total).

    .venv/bin/python benchmarks/traffic_model.py --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simulator.traffic import patterns  # noqa: E402
from simulator.traffic.costs import Cost  # noqa: E402
from simulator.traffic.model import TrafficModel  # noqa: E402
from simulator.traffic.serving import ReplicaState, TrafficConfig  # noqa: E402


def config(pattern, model: str, duration: float = 3600.0) -> TrafficConfig:
    return TrafficConfig(
        name="svc",
        pattern=pattern,
        process="poisson",
        cost=Cost("exponential", 0.05),
        timeout=10.0,
        duration=duration,
        tick=15.0,
        lag=0.0,
        model=model,
        seed=1,
    )


def replicas(n: int) -> dict[str, ReplicaState]:
    return {f"r{i:03d}": ReplicaState(1.0, 1.0, True) for i in range(n)}


def scenario(name: str):
    """(pattern, duration, [(time, replica count)])"""
    if name == "steady":
        return patterns.constant(1e6 / 3600), 3600.0, [(0, 16)]
    if name == "overload":
        return patterns.constant(1e6 / 3600), 3600.0, [(0, 12)]
    pattern = patterns.step([[0, 20], [600, 200], [1800, 20]])
    return pattern, 3000.0, [(0, 1), (660, 20), (2100, 2)]


def run(name: str, model: str):
    pattern, duration, changes = scenario(name)
    m = TrafficModel(config(pattern, model, duration))
    pending = list(changes)
    started = time.process_time()
    t = 0.0
    while t < duration:
        t = min(duration, t + 15.0)
        while pending and pending[0][0] <= t:
            at, count = pending.pop(0)
            m.set_replicas(at, replicas(count))
        m.advance_to(t)
    cpu = time.process_time() - started
    return cpu, m.take_rows(), m.totals


def compare(exact, fluid) -> dict[str, float]:
    def mad(key: str) -> float:
        diffs = [
            abs(getattr(a, key) - getattr(b, key))
            for a, b in zip(exact, fluid, strict=True)
            if getattr(a, key) is not None and getattr(b, key) is not None
        ]
        return statistics.fmean(diffs) if diffs else float("nan")

    return {
        "p50": mad("latency_p50"),
        "p99": mad("latency_p99"),
        "cpu_cores": mad("cpu_cores"),
        "concurrency": mad("mean_concurrency"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scenario", action="append", choices=("steady", "step", "overload"))
    args = parser.parse_args()
    for name in args.scenario or ["steady", "step", "overload"]:
        results = {}
        for model in ("exact", "fluid"):
            cpus = []
            for _ in range(args.repeat):
                cpu, rows, totals = run(name, model)
                cpus.append(cpu)
            results[model] = (rows, totals)
            print(
                f"{name:8s} {model:5s}: cpu {min(cpus):6.2f} / {statistics.median(cpus):6.2f} / "
                f"{max(cpus):6.2f} s (min/median/max of {args.repeat}); {totals.arrivals:,} "
                f"requests, {totals.arrivals / statistics.median(cpus):,.0f} per CPU second; "
                f"failed {totals.timed_out + totals.dropped + totals.lost:,}"
            )
        diff = compare(results["exact"][0], results["fluid"][0])
        mean = {
            k: statistics.fmean(
                getattr(r, k) for r in results["exact"][0] if getattr(r, k) is not None
            )
            for k in ("latency_p50", "latency_p99", "cpu_cores", "mean_concurrency")
        }
        print(
            f"{name:8s} fluid vs exact, mean |difference| per tick: p50 {diff['p50']:.4f} s "
            f"(exact mean {mean['latency_p50']:.4f}), p99 {diff['p99']:.4f} s (exact mean "
            f"{mean['latency_p99']:.4f}), cpu {diff['cpu_cores']:.3f} cores (exact mean "
            f"{mean['cpu_cores']:.2f}), concurrency {diff['concurrency']:.2f} (exact mean "
            f"{mean['mean_concurrency']:.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
