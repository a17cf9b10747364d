"""Throughput of ``timewarp sweep``: runs per minute with 1 and 2 LocalCluster workers.

    .venv/bin/python benchmarks/sweep.py [--runs 6] [--repeats 3] [--workers 1 2]

Each measurement runs a fresh sweep of ``--runs`` tiny, independent simulations (the tiny
watch scheduler on a burst of 4 jobs, deterministic mode, distinct replicates) into a new
results directory and times the whole command: cluster start, every run, tables and plots.
Reports min / median / max runs per minute over ``--repeats``, and what one run costs a
larger cluster: peak resident memory of a run's process tree (simulate + simulator +
scheduler) and the bytes a run leaves in its results directory.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SPEC = """\
name: bench
root: {root}
replicates: {runs}
timeout: 300
schedulers:
  tiny: python tests/programs/tiny_scheduler.py --scheduler-name default-scheduler
platforms:
  c16: examples/inputs/cluster16.xml
workloads:
  burst4: {{generator: burst, count: 4, delay: 30}}
modes:
  deterministic: {{}}
"""


def one_sweep(workers: int, runs: int, tmp: Path) -> tuple[float, list[dict[str, str]]]:
    spec = tmp / "bench.yaml"
    spec.write_text(SPEC.format(root=ROOT, runs=runs))
    out = Path(tempfile.mkdtemp(prefix=f"w{workers}-", dir=tmp))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "timewarp", "sweep", str(spec), "-o", str(out), "-q"]
    started = time.perf_counter()
    proc = subprocess.run(
        [*cmd, "--workers", str(workers)], env=env, capture_output=True, text=True, cwd=ROOT
    )
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed ({proc.returncode}):\n{proc.stderr}")
    with open(out / "runs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return elapsed, rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6, help="runs per sweep")
    parser.add_argument("--repeats", type=int, default=3, help="sweeps per worker count")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    rss: list[float] = []
    sizes: list[int] = []
    walls: list[float] = []
    with tempfile.TemporaryDirectory(prefix="timewarp-bench-sweep-") as tmp:
        for workers in args.workers:
            rates = []
            for _ in range(args.repeats):
                elapsed, rows = one_sweep(workers, args.runs, Path(tmp))
                rates.append(args.runs / elapsed * 60)
                rss += [float(r["peak_rss_mb"]) for r in rows if r["peak_rss_mb"]]
                sizes += [int(r["result_bytes"]) for r in rows if r["result_bytes"]]
                walls += [float(r["wall_s"]) for r in rows if r["wall_s"]]
            print(
                f"{workers} worker(s), {args.runs} runs per sweep, {args.repeats} sweeps: "
                f"runs/min min {min(rates):.1f}  median {statistics.median(rates):.1f}  "
                f"max {max(rates):.1f}"
            )
    print(
        f"per run: simulate wall {min(walls):.1f}/{statistics.median(walls):.1f}/{max(walls):.1f} s, "
        f"peak RSS of the process tree {min(rss):.0f}/{statistics.median(rss):.0f}/{max(rss):.0f} MiB, "
        f"results {min(sizes) / 1024:.1f}/{statistics.median(sizes) / 1024:.1f}/"
        f"{max(sizes) / 1024:.1f} KiB (min/median/max)"
    )
    print(f"load average {os.getloadavg()[0]:.1f} at end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
