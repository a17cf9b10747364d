"""timewarp's own cost per pod at scale (issue 29): N nodes × 10·N pods, default_like.

    .venv/bin/python benchmarks/scale_cost.py --nodes 1000 --repeat 3
    .venv/bin/python benchmarks/scale_cost.py --nodes 1000 2000 --repeat 1 --json out.json

Inputs: ``timewarp workload platform`` (N one-core nodes) and ``timewarp workload
poisson`` (10·N jobs, 80 % offered load, seed 1), as ``experiments/scale.py synthetic``
makes them. Each run is one ``timewarp simulate -q --no-plots`` (deterministic mode).
While it runs, ``/proc`` is sampled per process *and per thread*
(``experiments/_common.py``, ``detail=True``): the broker process (``simulate``) is split
into its embedded simulator thread (OS name ``timewarp-sim``, set by
``commands/threadname.py``) and the rest of the broker; the scheduler process (the
scheduler with timewarp's runtime inside) is one figure. CPU is in ms per pod; wall time
from spawn to exit; peak RSS is each process's ``VmHWM``. Each figure is min / median /
max over ``--repeat`` runs; the load average before and after says how much of the wall
time was the queue for a CPU. All runs' ``out_jobs.csv`` must be byte-identical (the
script says so when they are not).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from experiments._common import (  # noqa: E402
    DEFAULT_LIKE,
    REPO,
    Run,
    Summary,
    load_average,
    print_table,
    run_simulate,
)
from experiments.scale import synthetic_inputs  # noqa: E402

SIM_THREAD = "timewarp-sim"  # commands/simulate.py names the embedded simulator's thread
PODS_PER_NODE = 10
HEADERS = [
    "nodes × pods",
    "runs",
    "wall (s)",
    "CPU/pod broker rest (ms)",
    "CPU/pod embedded sim (ms)",
    "CPU/pod scheduler (ms)",
    "CPU/pod total (ms)",
    "peak RSS broker (MiB)",
    "peak RSS scheduler (MiB)",
]


def split(run: Run, pods: int) -> dict[str, float]:
    """One run's figures: CPU ms per pod by part, wall seconds, peak RSS MiB."""
    threads = run.thread_cpu_s.get("broker", {})
    sim = threads.get(SIM_THREAD, float("nan"))
    broker = sum(threads.values()) if threads else run.cpu_s.get("broker", float("nan"))
    return {
        "wall_s": run.wall_s,
        "broker_rest": 1000 * (broker - sim) / pods,
        "sim": 1000 * sim / pods,
        "scheduler": 1000 * run.cpu_s.get("scheduler", float("nan")) / pods,
        "total": 1000 * run.cpu_total_s / pods,
        "rss_broker": run.peak_rss_kib.get("broker", 0) / 1024,
        "rss_scheduler": run.peak_rss_kib.get("scheduler", 0) / 1024,
    }


def build() -> str:
    """The checkout's commit (``+dirty`` with uncommitted changes): what the figures measure."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()

    return git("rev-parse", "--short", "HEAD") + ("+dirty" if git("status", "--porcelain") else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=3600.0, help="wall seconds per run")
    parser.add_argument("--keep", type=Path, help="keep inputs and outputs here")
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    args = parser.parse_args(argv)
    if args.repeat < 1 or min(args.nodes) < 1:
        parser.error("--repeat and --nodes must be >= 1")
    record: dict = {"build": build(), "cpus": os.cpu_count(), "load_before": load_average()}
    print(f"build {record['build']}; machine load before: {record['load_before']}", file=sys.stderr)
    rows, record["sizes"], ok = [], {}, True
    with tempfile.TemporaryDirectory(prefix="tw-scale-cost-") as tmp:
        work = args.keep or Path(tmp)
        for nodes in args.nodes:
            pods = PODS_PER_NODE * nodes
            platform, workload = synthetic_inputs(work / "inputs", nodes, pods, args.seed)
            runs: list[Run] = []
            for i in range(args.repeat):
                run = run_simulate(
                    [DEFAULT_LIKE], platform, [workload], work / f"{nodes}-{i}",
                    timeout_s=args.timeout, detail=True,
                )  # fmt: skip
                figures = split(run, pods)
                print(
                    f"  {nodes}×{pods} #{i}: ok={run.ok} "
                    + ", ".join(f"{k} {v:.2f}" for k, v in figures.items())
                    + f"; threads {run.thread_cpu_s}; load {load_average().split(' (')[0]}",
                    file=sys.stderr,
                    flush=True,
                )
                runs.append(run)
            good = [r for r in runs if r.ok]
            ok &= len(good) == len(runs)
            digests = {r.jobs_digest() for r in good}
            if len(digests) > 1:
                print(f"  {nodes}×{pods}: out_jobs.csv DIFFERS between runs", file=sys.stderr)
                ok = False
            per_run = [split(r, pods) for r in good]
            stats = {k: Summary.of(f[k] for f in per_run) for k in per_run[0]} if per_run else {}
            record["sizes"][f"{nodes}x{pods}"] = {
                "runs": per_run,
                "digests": sorted(digests),
                "threads": [r.thread_cpu_s for r in good],
                "failures": [r.stderr[-500:] for r in runs if not r.ok],
            }
            rows.append(
                [f"{nodes:,} × {pods:,}", f"{len(good)}/{len(runs)}"]
                + [
                    stats[k].spread(digits) if stats else "-"
                    for k, digits in (
                        ("wall_s", 1),
                        ("broker_rest", 2),
                        ("sim", 2),
                        ("scheduler", 2),
                        ("total", 2),
                        ("rss_broker", 0),
                        ("rss_scheduler", 0),
                    )
                ]  # fmt: skip
            )
    record["load_after"] = load_average()
    print_table(HEADERS, rows)
    print(
        f"build {record['build']}; figures min / median / max; machine: {os.cpu_count()} CPUs; "
        f"load before {record['load_before']}; after {record['load_after']}"
    )
    if args.json:
        args.json.write_text(json.dumps(record, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
