"""A reduced KSE-style factorial: default_like with and without the kse_rebalancer.

    .venv/bin/python -m experiments.kse -o out/kse                          # 8 runs, ~1 min
    .venv/bin/python -m experiments.kse --pods 20,40 --metric cpu,memory -o out/kse-full

Factors (Carvalho 2024's, reduced): pods (``--pods``, 20 and 40 in the paper), their
usage distribution (``normal`` or ``exponential`` per pod, seeded), usage over time
(``constant`` or ``growing``: a quarter of the final value at start, +1/4 every
``GROWTH_STEP_S``), submission (``--interval`` seconds between pods; 0: all at once) and
the balanced metric (``--metric`` cpu or memory). Every pod requests the same
(300m CPU, 256Mi), is owned by the ReplicaSet ``app`` and runs ``POD_LIFETIME_S``; its
measured usage comes from the workload's ``usage`` curves (the broker serves them on
``metrics.k8s.io``). Platform: four 4-core, 16 GiB nodes.

Arms: ``default_like`` alone, and ``default_like`` plus ``kse_rebalancer --no-bind``
(RefineLB, overload 1.05, every 60 s under ``--patch-module apscheduler``) serving the
same schedulerName: the rebalancer evicts, default_like places what comes back.

Imbalance (the paper's MAE: mean absolute deviation of node loads from their mean) is
computed the same way for both arms, from ``out_jobs.csv`` and the usage curves, once a
minute over the first ``HORIZON_S`` seconds; the rebalancer's own CSV
(``kse_imbalance.csv``) is kept beside it.

Honest limit: the broker has no ReplicaSet controller, so an evicted pod's job is
killed and no replacement appears (reported as "killed"): the rebalancer's
imbalance reduction here partly comes from load that simply leaves the cluster.
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
    load_average,
    print_table,
    read_rows,
    run_simulate,
    timewarp_cli,
)

POD_LIFETIME_S = 3600.0
GROWTH_STEP_S = 120.0
HORIZON_S = 1800.0
SAMPLE_EVERY_S = 60.0
NODES, CORES, NODE_MEMORY_MIB = 4, 4, 16 * 1024
REBALANCER = (
    "python -m sample_schedulers.kse_rebalancer --scheduler-name default --no-bind "
    "--algorithm refine --overload 1.05 --interval 60 --metric {metric} "
    "--imbalance-csv {csv}"
)
HEADERS = [
    "pods",
    "usage",
    "over time",
    "metric",
    "arm",
    "MAE t=0..10 min",
    "MAE t=20..30 min",
    "evictions (killed)",
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


def _value_at(curve: list, elapsed: float) -> float:
    value = 0.0
    for t, v in curve:
        if t <= elapsed:
            value = float(v[:-2]) if isinstance(v, str) else float(v)
    return value


def imbalance_series(
    jobs_csv: Path, workload: dict, nodes: int, horizon: float = HORIZON_S
) -> list[tuple[float, float]]:
    """(t, MAE of node loads) once a minute, from the jobs' placements and usage curves."""
    profiles = workload["profiles"]
    by_id = {j["id"]: j["profile"] for j in workload["jobs"]}
    spans = []
    for row in read_rows(jobs_csv):
        if not row["starting_time"]:
            continue
        curve = next(iter(profiles[by_id[row["job_id"]]]["timewarp"]["usage"].values()))
        node = int(row["allocated_resources"].split("-")[0])
        spans.append((float(row["starting_time"]), float(row["finish_time"]), node, curve))
    series = []
    t = 0.0
    while t <= horizon:
        loads = [0.0] * nodes
        for start, end, node, curve in spans:
            if start <= t < end:
                loads[node] += _value_at(curve, t - start)
        mean = statistics.fmean(loads)
        series.append((t, statistics.fmean(abs(x - mean) for x in loads)))
        t += SAMPLE_EVERY_S
    return series


def mean_between(series: list[tuple[float, float]], start: float, end: float) -> float:
    values = [v for t, v in series if start <= t <= end]
    return statistics.fmean(values) if values else float("nan")


def cells(factors: tuple, arm: str, run: Run, workload: dict, metric: str) -> list[str]:
    pods, dist, shape = factors
    if not run.jobs_csv.exists():
        return [str(pods), dist, shape, metric, arm, "-", "-", "-", "-", f"{run.wall_s:.1f} FAILED"]
    series = imbalance_series(run.jobs_csv, workload, NODES)
    unit = "cores" if metric == "cpu" else "MiB"
    return [
        str(pods),
        dist,
        shape,
        metric,
        arm,
        f"{mean_between(series, 0, 600):.3f} {unit}",
        f"{mean_between(series, 1200, 1800):.3f} {unit}",
        str(int(run.figures.get("nb_jobs_killed", 0))),
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
        for arm in ("default_like", "default_like + kse"):
            out = (
                args.output / f"{metric}-{pods}-{dist}-{shape}-{'kse' if 'kse' in arm else 'plain'}"
            )
            schedulers = [DEFAULT_LIKE]
            extra = ["--stall-timeout", "2"]
            if "kse" in arm:
                out.mkdir(parents=True, exist_ok=True)
                schedulers.append(
                    REBALANCER.format(metric=metric, csv=(out / "kse_imbalance.csv").resolve())
                )
                extra += ["--patch-module", "apscheduler"]
            run = run_simulate(
                schedulers, platform, [wpath], out, extra=extra, timeout_s=args.timeout
            )
            status = "ok" if run.ok else f"FAILED: {run.stderr.strip()[-300:]}"
            print(f"  {metric} {pods} {dist} {shape} {arm}: {status}", file=sys.stderr)
            table.append(cells((pods, dist, shape), arm, run, workload, metric))
            record.append(
                {
                    "factors": [metric, pods, dist, shape],
                    "arm": arm,
                    "ok": run.ok,
                    "figures": run.figures,
                    "wall_s": run.wall_s,
                }
            )
    (args.output / "results.json").write_text(json.dumps(record, indent=1) + "\n")
    print_table(HEADERS, table)
    print(f"machine load after: {load_average()}")
    return 0 if all(r["ok"] for r in record) else 1


if __name__ == "__main__":
    raise SystemExit(main())
