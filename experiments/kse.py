"""A reduced KSE-style factorial: default_like with and without the kse_rebalancer.

    .venv/bin/python -m experiments.kse -o out/kse                          # 12 runs, ~5 min
    .venv/bin/python -m experiments.kse --pods 20,40 --metric cpu,memory -o out/kse-full

Factors (Carvalho 2024's, reduced): pods (``--pods``, 20 and 40 in the paper), their
usage distribution (``normal`` or ``exponential`` per pod, seeded), usage over time
(``constant`` or ``growing``: a quarter of the final value at start, +1/4 every
``GROWTH_STEP_S``), submission (``--interval`` seconds between pods; 0: all at once) and
the balanced metric (``--metric`` cpu or memory). Every pod requests the same
(300m CPU, 256Mi), is owned by the ReplicaSet ``app`` and runs ``POD_LIFETIME_S``; its
measured usage comes from the workload's ``usage`` curves (the broker serves them on
``metrics.k8s.io``). Platform: four 4-core, 16 GiB nodes.

Arms (the rebalancer: RefineLB every 60 s, under ``--patch-module apscheduler``):

- ``default_like``: default_like places every pod; the rebalancer runs with
  ``--overload 100`` (nothing is ever heavy: it never moves a pod) only to measure;
- ``default_like + kse --no-bind``: the rebalancer evicts (overload 1.05), the broker's
  ReplicaSet controller creates a replacement, default_like places it where *it* likes;
- ``kse binds``: the rebalancer is the pods' scheduler (KSE's own set-up): its binder
  places new pods (``--placement least-requested``) and replacements on the plan's
  target.

Imbalance comes from the same code in every arm: the rebalancer's CSV
(``kse_imbalance.csv``, one row per round, measured on ``metrics.k8s.io`` before the round
acts; the paper's MAE, mean absolute deviation of node loads from their mean).

Honest limits: a replacement pod is an API pod, not a Batsim job (the broker does not
register dynamic jobs yet): it runs until the simulation ends, and the evicted pod's job
counts as killed in ``out_jobs.csv``, so makespan and the killed count describe the
Batsim jobs only. The default factorial is reduced (20 pods, both distributions, both
shapes, CPU); ``--pods 20,40 --metric cpu,memory`` runs the paper's sizes.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
from pathlib import Path

from experiments._common import (
    DEFAULT_LIKE,
    Run,
    finish,
    load_average,
    read_rows,
    run_simulate,
    timewarp_cli,
)

POD_LIFETIME_S = 3600.0
GROWTH_STEP_S = 120.0
NODES, CORES, NODE_MEMORY_MIB = 4, 4, 16 * 1024
REBALANCER = (
    "python -m sample_schedulers.kse_rebalancer --scheduler-name default {bind} "
    "--algorithm refine --overload {overload} --interval 60 --metric {metric} "
    "--imbalance-csv {csv}"
)
#: arm -> (short tag, default_like too?, RefineLB overload, the rebalancer's binding flags)
ARMS = {
    "default_like": ("plain", True, 100.0, "--no-bind"),
    "default_like + kse --no-bind": ("kse-nobind", True, 1.05, "--no-bind"),
    "kse binds (least-requested)": ("kse-binds", False, 1.05, "--placement least-requested"),
}
HEADERS = [
    "pods",
    "usage",
    "over time",
    "metric",
    "arm",
    "MAE rounds 1-10",
    "MAE rounds 21-30",
    "evictions (jobs killed)",
    "makespan (s)",
    "wall (s)",
]


def draw_usage(distribution: str, rng: random.Random, metric: str) -> float:
    """One pod's final usage: cores (cpu) or MiB (memory), mean 0.5 core / 512 MiB."""
    mean = 0.5 if metric == "cpu" else 512.0
    if distribution == "normal":
        value = rng.gauss(mean, mean * 0.4)
    else:
        value = rng.expovariate(1.0 / mean)
    return max(mean * 0.05, min(value, mean * 4))


def usage_curve(final: float, growing: bool) -> list[list[float]]:
    """Piecewise-constant ``[[seconds, value], ...]`` since the pod's start."""
    if not growing:
        return [[0, round(final, 3)]]
    return [[i * GROWTH_STEP_S, round(final * (i + 1) / 4, 3)] for i in range(4)]


def make_workload(
    pods: int, distribution: str, growing: bool, interval: float, metric: str, seed: int
) -> dict:
    rng = random.Random(seed)
    jobs, profiles = [], {}
    for i in range(pods):
        final = draw_usage(distribution, rng, metric)
        curve = usage_curve(final, growing)
        if metric == "cpu":
            usage = {"cpu": curve}
        else:
            usage = {"memory": [[t, f"{v:.0f}Mi"] for t, v in curve]}
        name = f"pod{i}"
        profiles[name] = {
            "type": "delay",
            "delay": POD_LIFETIME_S,
            "cpu": "300m",
            "memory": "256Mi",
            "scheduler": "default",
            "replicaset": "app",
            "timewarp": {"usage": usage},
        }
        jobs.append(
            {"id": str(i + 1), "subtime": round(i * interval, 3), "res": 1, "profile": name}
        )
    return {"nb_res": 1, "jobs": jobs, "profiles": profiles}


def imbalance_rounds(csv_path: Path) -> list[tuple[int, float, int]]:
    """(round, MAE measured before the round acted, evictions) from the rebalancer's CSV."""
    return [(int(r["round"]), float(r["mae"]), int(r["evictions"])) for r in read_rows(csv_path)]


def mean_between(series: list[tuple[int, float, int]], first: int, last: int) -> float:
    """Mean MAE of rounds ``first``..``last`` (round k runs about k minutes in)."""
    values = [mae for k, mae, _ in series if first <= k <= last]
    return statistics.fmean(values) if values else float("nan")


def cells(factors: tuple, arm: str, run: Run, metric: str) -> list[str]:
    pods, dist, shape = factors
    csv_path = run.out / "kse_imbalance.csv"
    if not csv_path.exists():
        return [str(pods), dist, shape, metric, arm, "-", "-", "-", "-", f"{run.wall_s:.1f} FAILED"]
    series = imbalance_rounds(csv_path)
    unit, scale = ("cores", 1000.0) if metric == "cpu" else ("MiB", 1.0)  # CSV: millicores
    return [
        str(pods),
        dist,
        shape,
        metric,
        arm,
        f"{mean_between(series, 1, 10) / scale:.3f} {unit}",
        f"{mean_between(series, 21, 30) / scale:.3f} {unit}",
        f"{sum(e for _, _, e in series)} ({int(run.figures.get('nb_jobs_killed', 0))})",
        f"{run.figure('makespan'):,.0f}",
        f"{run.wall_s:.1f}" + ("" if run.ok else " FAILED"),
    ]


def _list(kind):
    def parse(text: str) -> list:
        try:
            return [kind(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"bad list {text!r}") from None

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.kse", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--pods", type=_list(int), default=[20])
    parser.add_argument("--distributions", type=_list(str), default=["normal", "exponential"])
    parser.add_argument("--shapes", type=_list(str), default=["constant", "growing"])
    parser.add_argument("--metric", type=_list(str), default=["cpu"])
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between submissions")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("-o", "--output", type=Path, default=Path("experiments-out/kse"))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for name, values, allowed in (
        ("--distributions", args.distributions, {"normal", "exponential"}),
        ("--shapes", args.shapes, {"constant", "growing"}),
        ("--metric", args.metric, {"cpu", "memory"}),
    ):
        if not values or not set(values) <= allowed:
            parser.error(f"{name}: expected a comma-separated subset of {sorted(allowed)}")
    if not args.pods or min(args.pods) < 1:
        parser.error("--pods: expected positive counts")
    print(f"machine load before: {load_average()}", file=sys.stderr)
    inputs = args.output / "inputs"
    inputs.mkdir(parents=True, exist_ok=True)
    platform = inputs / "platform.xml"
    timewarp_cli(
        "workload",
        "platform",
        "-n",
        str(NODES),
        "--cores",
        str(CORES),
        "--memory",
        f"{NODE_MEMORY_MIB}Mi",
        "-o",
        str(platform),
    )
    table, record = [], []
    for metric, pods, dist, shape in itertools.product(
        args.metric, args.pods, args.distributions, args.shapes
    ):
        workload = make_workload(pods, dist, shape == "growing", args.interval, metric, args.seed)
        wpath = inputs / f"kse_{metric}_{pods}_{dist}_{shape}.json"
        wpath.write_text(json.dumps(workload, indent=1))
        for arm, (tag, with_default, overload, bind) in ARMS.items():
            out = args.output / f"{metric}-{pods}-{dist}-{shape}-{tag}"
            out.mkdir(parents=True, exist_ok=True)
            rebalancer = REBALANCER.format(
                bind=bind,
                overload=overload,
                metric=metric,
                csv=(out / "kse_imbalance.csv").resolve(),
            )
            schedulers = [DEFAULT_LIKE, rebalancer] if with_default else [rebalancer]
            extra = ["--patch-module", "apscheduler"]
            run = run_simulate(
                schedulers, platform, [wpath], out, extra=extra, timeout_s=args.timeout
            )
            status = "ok" if run.ok else f"FAILED: {run.stderr.strip()[-300:]}"
            print(f"  {metric} {pods} {dist} {shape} {arm}: {status}", file=sys.stderr)
            table.append(cells((pods, dist, shape), arm, run, metric))
            record.append(
                {
                    "factors": [metric, pods, dist, shape],
                    "arm": arm,
                    "ok": run.ok,
                    "figures": run.figures,
                    "wall_s": run.wall_s,
                }
            )
    return finish(args.output, record, HEADERS, table)


if __name__ == "__main__":
    raise SystemExit(main())
