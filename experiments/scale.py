"""Scale: the NASA iPSC/860 trace and a synthetic ladder up to 10k nodes / 100k jobs.

    .venv/bin/python -m experiments.scale nasa --fraction 0.25 -o out/scale
    .venv/bin/python -m experiments.scale nasa --fraction 1 -o out/scale
    .venv/bin/python -m experiments.scale synthetic --budget 600 -o out/scale

``nasa``: ``NASA-iPSC-1993-3.1-cln.swf`` (18,239 jobs over 92 days) through
``timewarp workload from-swf --window`` (the first ``--fraction`` of its submit-time
span) and ``default_like``. Two shapes of the 128-processor machine (``--shape``):

- ``nodes`` (default): 128 one-core nodes; each job is one pod asking for one whole node
  (``--norm 128 --cpu-cap 1``). A Kubernetes pod cannot span nodes, so a 64-processor
  job becomes a one-node pod: the event count is the trace's, the load is not (≈1.4 %).
- ``cores``: one node of 128 cores; each job asks for as many cores as it had
  processors (``--norm 128``): the trace's own load (≈47 %), queueing included.

``synthetic``: a ladder of homogeneous one-core platforms and Poisson workloads at 80 %
offered load (``--sizes NODES:JOBS,…``; the issue's goal is 10000:100000). Each rung
gets ``--budget`` seconds of wall time; the ladder stops at the first rung that does not
finish within it, and the report says which sizes actually ran.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from experiments._common import (
    DATA,
    DEFAULT_LIKE,
    Run,
    load_average,
    print_table,
    run_simulate,
    timewarp_cli,
)

NASA = DATA / "swf/NASA-iPSC-1993-3.1-cln.swf"
NASA_SPAN_S = 7_948_936  # last submit time in the trace
MEAN_DELAY_S = 600.0
OFFERED_LOAD = 0.8
HEADERS = [
    "input",
    "nodes",
    "jobs",
    "status",
    "wall (s)",
    "simulated (s)",
    "speed-up",
    "mean wait (s)",
    "CPU broker/sim/sched (s)",
    "CPU per job (ms)",
    "load after",
]


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """``"100:1000,1000:10000"`` → ``[(100, 1000), (1000, 10000)]`` (nodes, jobs)."""
    sizes = []
    for part in text.split(","):
        nodes, sep, jobs = part.strip().partition(":")
        try:
            size = (int(nodes), int(jobs))
        except ValueError:
            size = (0, 0)
        if not sep or size[0] < 1 or size[1] < 1:
            raise argparse.ArgumentTypeError(f"expected NODES:JOBS with both >= 1, got {part!r}")
        sizes.append(size)
    return sizes


def poisson_rate(
    nodes: int, mean_delay_s: float = MEAN_DELAY_S, load: float = OFFERED_LOAD
) -> float:
    """Arrivals per second giving ``load`` on ``nodes`` one-core nodes: λ·d / N = load."""
    return load * nodes / mean_delay_s


def nasa_inputs(work: Path, fraction: float, shape: str) -> tuple[Path, Path]:
    work.mkdir(parents=True, exist_ok=True)
    end = NASA_SPAN_S * fraction + 1
    workload = work / f"nasa_{shape}_{fraction:g}.json"
    platform = work / f"nasa_{shape}.xml"
    if shape == "nodes":
        timewarp_cli("workload", "platform", "-n", "128", "--cores", "1", "-o", str(platform))
        conv = ["--norm", "128", "--cpu-cap", "1"]
    else:
        timewarp_cli("workload", "platform", "-n", "1", "--cores", "128", "-o", str(platform))
        conv = ["--norm", "128"]
    timewarp_cli(
        "workload", "from-swf", str(NASA), "-o", str(workload), "--window", f"0:{end:.0f}", *conv,
        "--scheduler", "default",  # the name DEFAULT_LIKE serves (Batkube's)
    )  # fmt: skip
    return platform, workload


def synthetic_inputs(work: Path, nodes: int, jobs: int, seed: int) -> tuple[Path, Path]:
    work.mkdir(parents=True, exist_ok=True)
    platform = work / f"synthetic_{nodes}.xml"
    workload = work / f"synthetic_{nodes}_{jobs}.json"
    timewarp_cli("workload", "platform", "-n", str(nodes), "--cores", "1", "-o", str(platform))
    timewarp_cli(
        "workload", "poisson", "-n", str(jobs), "--rate", f"{poisson_rate(nodes):.6g}",
        "--mean-delay", f"{MEAN_DELAY_S:g}", "--seed", str(seed), "-o", str(workload),
        "--scheduler", "default",  # the name DEFAULT_LIKE serves (Batkube's)
    )  # fmt: skip
    return platform, workload


def row(label: str, nodes: int, jobs: int, run: Run, budget: float | None) -> list[str]:
    if run.ok:
        status = "ok"
    elif run.returncode == -9:
        status = f"not done in {budget:g} s ({bound_pods(run.out)} pods bound)"
    else:
        status = f"failed ({run.returncode})"
    cpu = run.cpu_s
    makespan = run.figure("makespan")
    return [
        label,
        str(nodes),
        str(jobs),
        status,
        f"{run.wall_s:.1f}",
        f"{makespan:,.0f}" if run.ok else "-",
        f"{makespan / run.wall_s:,.0f}x" if run.ok else "-",
        f"{run.figure('mean_waiting_time'):,.1f}" if run.ok else "-",
        "/".join(f"{cpu.get(k, 0.0):.1f}" for k in ("broker", "simulator", "scheduler")),
        f"{1000 * run.cpu_total_s / jobs:.1f}",
        load_average().split(" (")[0],
    ]


def bound_pods(out: Path) -> int:
    """Pods the scheduler bound, from its log (default_like logs one ``bound`` line each):
    the progress of a run stopped before it wrote its figures."""
    log = out / "scheduler-0.log"
    if not log.exists():
        return 0
    with open(log, errors="replace") as f:
        return sum(1 for line in f if " bound " in line)


def _count_jobs(workload: Path) -> int:
    return len(json.loads(workload.read_text())["jobs"])


def cmd_nasa(args: argparse.Namespace) -> list[list[str]]:
    rows = []
    for fraction in args.fraction:
        platform, workload = nasa_inputs(args.output / "inputs", fraction, args.shape)
        jobs = _count_jobs(workload)
        print(f"NASA {fraction:g} ({args.shape}): {jobs} jobs ...", file=sys.stderr, flush=True)
        run = run_simulate(
            [args.scheduler], platform, [workload],
            args.output / f"nasa-{args.shape}-{fraction:g}", timeout_s=args.budget,
        )  # fmt: skip
        nodes = 128 if args.shape == "nodes" else 1
        rows.append(row(f"NASA iPSC ×{fraction:g} ({args.shape})", nodes, jobs, run, args.budget))
        print("  " + " | ".join(rows[-1]), file=sys.stderr, flush=True)
    return rows


def cmd_synthetic(args: argparse.Namespace) -> list[list[str]]:
    rows = []
    for nodes, jobs in args.sizes:
        platform, workload = synthetic_inputs(args.output / "inputs", nodes, jobs, args.seed)
        print(f"synthetic {nodes} nodes / {jobs} jobs ...", file=sys.stderr, flush=True)
        run = run_simulate(
            [args.scheduler], platform, [workload],
            args.output / f"synthetic-{nodes}-{jobs}", timeout_s=args.budget,
        )  # fmt: skip
        rows.append(row("Poisson, 80 % load", nodes, jobs, run, args.budget))
        print("  " + " | ".join(rows[-1]), file=sys.stderr, flush=True)
        if not run.ok:
            print("  stopping the ladder here", file=sys.stderr)
            break
    return rows


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1], got {text}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.scale", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="experiment", required=True)
    nasa = sub.add_parser("nasa", help="the NASA iPSC/860 trace")
    nasa.add_argument(
        "--fraction",
        type=_fraction,
        action="append",
        help="of the trace's span (repeatable; default 0.25)",
    )
    nasa.add_argument("--shape", choices=("nodes", "cores"), default="nodes")
    synth = sub.add_parser("synthetic", help="a ladder of synthetic sizes")
    synth.add_argument(
        "--sizes", type=parse_sizes, default=parse_sizes("100:1000,1000:10000,10000:100000")
    )
    synth.add_argument("--seed", type=int, default=1)
    for p in (nasa, synth):
        p.add_argument("--budget", type=_seconds, default=1800.0, help="wall seconds per run")
        p.add_argument("--scheduler", default=DEFAULT_LIKE)
        p.add_argument("-o", "--output", type=Path, default=Path("experiments-out/scale"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.experiment == "nasa" and not args.fraction:
        args.fraction = [0.25]
    print(f"machine load before: {load_average()}", file=sys.stderr)
    started = time.perf_counter()
    rows = cmd_nasa(args) if args.experiment == "nasa" else cmd_synthetic(args)
    print_table(HEADERS, rows)
    print(f"total {time.perf_counter() - started:.0f} s; machine load after: {load_average()}")
    return 0 if all(r[3] == "ok" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
