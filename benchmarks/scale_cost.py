"""timewarp's own cost per pod at scale (issue 29): N nodes × 10·N pods, default_like.

    .venv/bin/python benchmarks/scale_cost.py --nodes 1000 --repeat 3
    .venv/bin/python benchmarks/scale_cost.py --nodes 300 --repeat 2 --unpatched
    .venv/bin/python benchmarks/scale_cost.py --nodes 1000 2000 --repeat 1 --json out.json

Inputs: ``timewarp workload platform`` (N one-core nodes) and ``timewarp workload
poisson`` (10·N jobs, 80 % offered load, seed 1), as ``experiments/scale.py synthetic``
makes them. Each run is one ``timewarp simulate -q --no-plots`` (deterministic mode).
While it runs, ``/proc`` is sampled per process *and per thread*
(``experiments/_common.py``, ``detail=True``): the broker process (``simulate``) is split
into its embedded simulator thread (OS name ``timewarp-sim``, set by
``commands/threadname.py``) and the rest of the broker — since s6-hop the embedded
simulator is hosted in the driver's thread (``simulator/local_link.py``), so its CPU is in
the broker rest and the *embedded sim* column is 0; the scheduler process (the
scheduler with timewarp's runtime inside) into the runtime's share — what the runtime
measured of itself and reported in the manifest (``processes.*.runtime_cpu_s``,
``timewarp/_core/selftime.py``) — and the rest, the scheduler program's own CPU.
**timewarp's own** CPU is broker rest + embedded simulator + runtime (issue 29's
first goal: ≤ 1.0 ms per pod).

``--unpatched`` also runs, after each deterministic run (A B A B: the same load for
both), the same scheduler *unpatched* (no ``timewarp run`` around it: ``--mode
realtime``, as ``benchmarks/simulate.py --native-speed`` does) against the same facade
and pods, and prints the issue's second figure: the deterministic run's whole CPU (every
process, exact) / the unpatched scheduler process's CPU (goal ≤ 1.1). Realtime runs at
``--unpatched-speed`` virtual seconds per wall second (by default chosen so that the
pods arrive at ``UNPATCHED_PODS_PER_S`` per wall second: a rate the machine keeps up
with, or the scheduler would bind in batches it never sees in deterministic time).

CPU is in ms per pod; wall time from spawn to exit; peak RSS is each process's ``VmHWM``.
Each figure is min / median / max over ``--repeat`` runs; the load average before and
after says how much of the wall time was the queue for a CPU. All deterministic runs'
``out_jobs.csv`` must be byte-identical (the script says so when they are not).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
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
    unwrapped_command,
)
from experiments.scale import synthetic_inputs  # noqa: E402

SIM_THREAD = "timewarp-sim"  # commands/simulate.py names the embedded simulator's thread
PODS_PER_NODE = 10
UNPATCHED_PODS_PER_S = 40.0
OWN_GOAL_MS = 1.0
RATIO_GOAL = 1.1
# key, header, digits
COLUMNS = [
    ("wall_s", "wall (s)", 1),
    ("broker_rest", "CPU/pod broker rest (ms)", 2),
    ("sim", "CPU/pod embedded sim (ms)", 2),
    ("runtime", "CPU/pod runtime (ms)", 2),
    ("own", "CPU/pod timewarp's own (ms)", 2),
    ("program", "CPU/pod scheduler program (ms)", 2),
    ("total", "CPU/pod total (ms)", 2),
    ("unpatched", "CPU/pod unpatched scheduler (ms)", 2),
    ("ratio", "total / unpatched", 2),
    ("rss_broker", "peak RSS broker (MiB)", 0),
    ("rss_scheduler", "peak RSS scheduler (MiB)", 0),
]
HEADERS = ["nodes × pods", "runs"] + [header for _, header, _ in COLUMNS]


def runtime_cpu_s(manifest: Mapping) -> float:
    """CPU seconds timewarp's runtime spent inside the scheduler processes, as they
    reported it (the manifest's ``processes.*.runtime_cpu_s``); NaN when none did."""
    shares = [
        entry["runtime_cpu_s"]
        for entry in manifest.get("processes", {}).values()
        if isinstance(entry, Mapping) and "runtime_cpu_s" in entry
    ]
    return sum(shares) if shares else math.nan


def split(run: Run, pods: int, unpatched: Run | None = None) -> dict[str, float]:
    """One run's figures: CPU ms per pod by part, wall seconds, peak RSS MiB; with the
    unpatched run beside it, that scheduler's CPU per pod and the whole-run ratio."""
    threads = run.thread_cpu_s.get("broker", {})
    sim = threads.get(SIM_THREAD, 0.0) if threads else math.nan  # hosted: in the driver
    broker = sum(threads.values()) if threads else run.cpu_s.get("broker", math.nan)
    scheduler = run.cpu_s.get("scheduler", math.nan)
    runtime = runtime_cpu_s(run.manifest)
    native = unpatched.cpu_s.get("scheduler", math.nan) if unpatched is not None else math.nan
    ms = 1000 / pods
    return {
        "wall_s": run.wall_s,
        "broker_rest": ms * (broker - sim),
        "sim": ms * sim,
        "runtime": ms * runtime,
        "own": ms * (broker + runtime),  # broker rest + sim + runtime
        "program": ms * (scheduler - runtime),
        "total": ms * run.cpu_total_s,
        "unpatched": ms * native,
        "ratio": run.cpu_total_s / native if native else math.nan,
        "rss_broker": run.peak_rss_kib.get("broker", 0) / 1024,
        "rss_scheduler": run.peak_rss_kib.get("scheduler", 0) / 1024,
    }


def table_row(label: str, runs: int, per_run: list[dict[str, float]]) -> list[str]:
    """A size's row: each column's min / median / max over its runs ("-" when none)."""
    cells = [label, f"{len(per_run)}/{runs}"]
    for key, _, digits in COLUMNS:
        stats = Summary.of(f[key] for f in per_run)
        cells.append(stats.spread(digits))
    return cells


def unpatched_speed(workload: Path, pods: int) -> float:
    """Virtual seconds per wall second at which ``pods`` arrive at
    ``UNPATCHED_PODS_PER_S`` per wall second over the workload's submission span."""
    jobs = json.loads(workload.read_text())["jobs"]
    span = max(float(job["subtime"]) for job in jobs) if jobs else 0.0
    return max(1.0, span * UNPATCHED_PODS_PER_S / pods)


def build() -> str:
    """The checkout's commit (``+dirty`` with uncommitted changes): what the figures measure."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()

    return git("rev-parse", "--short", "HEAD") + ("+dirty" if git("status", "--porcelain") else "")


def _line(label: str, run: Run, figures: Mapping[str, float]) -> str:
    shown = ", ".join(f"{k} {v:.2f}" for k, v in figures.items() if not math.isnan(v))
    load = load_average().split(" (")[0]
    return f"  {label}: ok={run.ok} {shown}; threads {run.thread_cpu_s}; load {load}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=3600.0, help="wall seconds per run")
    parser.add_argument("--keep", type=Path, help="keep inputs and outputs here")
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    parser.add_argument(
        "--unpatched",
        action="store_true",
        help="after each run, also run the scheduler unpatched (--mode realtime) against "
        "the same facade and pods: the whole-run CPU / unpatched scheduler CPU ratio",
    )
    parser.add_argument(
        "--unpatched-speed",
        type=float,
        metavar="X",
        help=f"realtime speed of the unpatched runs (default: pods arrive at "
        f"{UNPATCHED_PODS_PER_S:g} per wall second)",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1 or min(args.nodes) < 1:
        parser.error("--repeat and --nodes must be >= 1")
    if args.unpatched_speed is not None and args.unpatched_speed <= 0:
        parser.error("--unpatched-speed must be > 0")
    record: dict = {"build": build(), "cpus": os.cpu_count(), "load_before": load_average()}
    print(f"build {record['build']}; machine load before: {record['load_before']}", file=sys.stderr)
    rows, record["sizes"], ok = [], {}, True
    with tempfile.TemporaryDirectory(prefix="tw-scale-cost-") as tmp:
        work = args.keep or Path(tmp)
        for nodes in args.nodes:
            pods = PODS_PER_NODE * nodes
            platform, workload = synthetic_inputs(work / "inputs", nodes, pods, args.seed)
            speed = args.unpatched_speed or unpatched_speed(Path(workload), pods)
            runs: list[Run] = []
            per_run: list[dict[str, float]] = []
            for i in range(args.repeat):
                run = run_simulate(
                    [DEFAULT_LIKE], platform, [workload], work / f"{nodes}-{i}",
                    timeout_s=args.timeout, detail=True,
                )  # fmt: skip
                print(_line(f"{nodes}×{pods} #{i}", run, split(run, pods)), file=sys.stderr)
                runs.append(run)
                native = None
                if args.unpatched:
                    native = run_simulate(
                        [unwrapped_command(DEFAULT_LIKE)], platform, [workload],
                        work / f"{nodes}-{i}-unpatched", timeout_s=args.timeout, detail=True,
                        extra=["--mode", "realtime", "--speed", f"{speed:g}"],
                    )  # fmt: skip
                    label = f"{nodes}×{pods} #{i} unpatched, realtime ×{speed:g}"
                    print(_line(label, native, split(native, pods)), file=sys.stderr, flush=True)
                    ok &= native.ok
                if run.ok:  # (a failed unpatched run leaves its columns empty)
                    per_run.append(split(run, pods, native if native and native.ok else None))
            good = [r for r in runs if r.ok]
            ok &= len(good) == len(runs)
            digests = {r.jobs_digest() for r in good}
            if len(digests) > 1:
                print(f"  {nodes}×{pods}: out_jobs.csv DIFFERS between runs", file=sys.stderr)
                ok = False
            record["sizes"][f"{nodes}x{pods}"] = {
                "runs": per_run,
                "unpatched_speed": speed if args.unpatched else None,
                "digests": sorted(digests),
                "threads": [r.thread_cpu_s for r in good],
                "failures": [r.stderr[-500:] for r in runs if not r.ok],
            }
            rows.append(table_row(f"{nodes:,} × {pods:,}", len(runs), per_run))
    record["load_after"] = load_average()
    print_table(HEADERS, rows)
    print(
        f"build {record['build']}; figures min / median / max; machine: {os.cpu_count()} CPUs; "
        f"load before {record['load_before']}; after {record['load_after']}"
    )
    for size, got in record["sizes"].items():
        own = Summary.of(f["own"] for f in got["runs"])
        ratio = Summary.of(f["ratio"] for f in got["runs"])
        verdicts = [f"timewarp's own {own.median:.2f} ms/pod (goal ≤ {OWN_GOAL_MS:g})"]
        if ratio.n:
            verdicts.append(f"whole-run CPU / unpatched {ratio.median:.2f} (goal ≤ {RATIO_GOAL:g})")
        print(f"{size}: median " + "; ".join(verdicts))
    if args.json:
        args.json.write_text(json.dumps(record, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
