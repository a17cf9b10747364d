"""KubCG-style Poisson experiments: kubcg versus default_like, CPU-only versus CPU+GPU.

    .venv/bin/python -m experiments.kubcg -o out/kubcg                 # about 2 minutes
    .venv/bin/python -m experiments.kubcg --jobs 100 --seeds 1,2,3 -o out/kubcg-full

For each arrival rate λ (``--rates``, jobs per 10 minutes; the paper's 3, 5, 10, 20, 50)
a ``timewarp workload mixed`` workload of ``--jobs`` pods (half of them GPU-capable: 100 s
on a GPU node, 600 s on a CPU node; the others 300 s anywhere; a node's jobs share it,
progress 1/P) runs on two platforms of four 4-core nodes — ``cpu`` (four CPU nodes) and
``gpu`` (three CPU nodes and one GPU node) — under each scheduler. GPU-capable pods carry
the annotation ``kubcg.timewarp.io/gpu-image`` (kubcg's switch); default_like ignores it.

Reported per (λ, platform, scheduler): makespan, mean waiting time, mean turnaround
(KubCG's "total completion time" divided by the job count) and how many GPU-capable
jobs ran on the GPU node.

Honest limits: the simulator's model of a GPU is the node class (a job on the GPU node
takes its ``gpu`` duration whichever slot kubcg chose), and a single workload per
λ and seed is not the paper's averaged campaign; ``--seeds`` adds replicates.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from experiments._common import (
    DEFAULT_LIKE,
    Run,
    Summary,
    finish,
    load_average,
    read_rows,
    run_simulate,
    timewarp_cli,
)

RATES_PER_10MIN = (3, 5, 10, 20, 50)
GPU_IMAGE_ANNOTATION = "kubcg.timewarp.io/gpu-image"
SCHEDULERS = {
    "kubcg": "python -m sample_schedulers.kubcg --scheduler-name default",
    "default_like": DEFAULT_LIKE,
}
#: platform name -> (CPU nodes, GPU nodes); 4 cores each
PLATFORMS = {"cpu": (4, 0), "gpu": (3, 1)}
HEADERS = [
    "λ /10 min",
    "platform",
    "scheduler",
    "runs",
    "makespan (s)",
    "mean wait (s)",
    "mean turnaround (s)",
    "GPU jobs on GPU",
    "wall (s)",
]


def per_second(rate_per_10min: float) -> float:
    return rate_per_10min / 600.0


def annotate(workload: dict) -> dict:
    """Give each image class an image name, and GPU-capable ones kubcg's switch annotation."""
    for profile in workload["profiles"].values():
        klass = profile.get("image_class", "cpu")
        profile["image"] = f"registry.example/{klass}-app:cpu"
        if klass == "gpu":
            profile["annotations"] = {GPU_IMAGE_ANNOTATION: "registry.example/gpu-app:cuda"}
    return workload


def make_inputs(work: Path, rate: float, jobs: int, seed: int) -> tuple[dict[str, Path], Path]:
    work.mkdir(parents=True, exist_ok=True)
    platforms = {}
    for name, (cpu_nodes, gpu_nodes) in PLATFORMS.items():
        path = work / f"platform_{name}.xml"
        timewarp_cli(
            "workload", "platform", "--cpu-nodes", str(cpu_nodes), "--gpu-nodes",
            str(gpu_nodes), "-o", str(path),
        )  # fmt: skip
        platforms[name] = path
    raw = work / f"mixed_{rate:g}_{jobs}_{seed}.raw.json"
    timewarp_cli(
        "workload", "mixed", "-n", str(jobs), "--rate", f"{per_second(rate):.9g}",
        "--seed", str(seed), "-o", str(raw), "--scheduler", "default",  # as the schedulers
    )  # fmt: skip
    workload = work / f"mixed_{rate:g}_{jobs}_{seed}.json"
    workload.write_text(json.dumps(annotate(json.loads(raw.read_text())), indent=1))
    raw.unlink()
    return platforms, workload


def gpu_jobs_on_gpu(jobs_csv: Path, cpu_nodes: int, gpu_nodes: int) -> tuple[int, int]:
    """(GPU-capable jobs that ran on a GPU node, GPU-capable jobs) from ``out_jobs.csv``.

    Resource ids follow the platform's host order: CPU nodes first, then GPU nodes.
    """
    gpu_ids = {str(i) for i in range(cpu_nodes, cpu_nodes + gpu_nodes)}
    rows = [r for r in read_rows(jobs_csv) if r["profile"] == "gpu_image"]
    on_gpu = sum(1 for r in rows if r["allocated_resources"] in gpu_ids)
    return on_gpu, len(rows)


def cells(rate: float, platform: str, scheduler: str, runs: list[Run]) -> list[str]:
    good = [r for r in runs if r.ok]
    cpu_nodes, gpu_nodes = PLATFORMS[platform]
    placed = [gpu_jobs_on_gpu(r.jobs_csv, cpu_nodes, gpu_nodes) for r in good]
    return [
        f"{rate:g}",
        platform,
        scheduler,
        f"{len(good)}/{len(runs)}",
        Summary.of(r.figure("makespan") for r in good).mean_sd(0),
        Summary.of(r.figure("mean_waiting_time") for r in good).mean_sd(1),
        Summary.of(r.figure("mean_turnaround_time") for r in good).mean_sd(1),
        f"{sum(p for p, _ in placed)}/{sum(n for _, n in placed)}" if placed else "-",
        Summary.of(r.wall_s for r in good).spread(1),
    ]


def parse_list(text: str, kind=float) -> list:
    try:
        values = [kind(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive values, got {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.kubcg", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--rates",
        type=parse_list,
        default=list(RATES_PER_10MIN),
        help="λ per 10 min, comma-separated",
    )
    parser.add_argument("--jobs", type=int, default=30, help="pods per workload (default 30)")
    parser.add_argument(
        "--seeds",
        type=lambda t: parse_list(t, int),
        default=[1],
        help="workload seeds (replicates)",
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    parser.add_argument("-o", "--output", type=Path, default=Path("experiments-out/kubcg"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.jobs < 1:
        build_parser().error("--jobs must be >= 1")
    print(f"machine load before: {load_average()}", file=sys.stderr)
    table, record = [], []
    for rate in args.rates:
        results: dict[tuple[str, str], list[Run]] = {}
        for seed in args.seeds:
            platforms, workload = make_inputs(args.output / "inputs", rate, args.jobs, seed)
            for pname, platform in platforms.items():
                for sname, command in SCHEDULERS.items():
                    out = args.output / f"l{rate:g}-s{seed}-{pname}-{sname}"
                    run = run_simulate(
                        [command], platform, [workload], out,
                        timeout_s=args.timeout,
                    )  # fmt: skip
                    status = "ok" if run.ok else f"FAILED: {run.stderr.strip()[-300:]}"
                    print(f"  λ={rate:g} seed={seed} {pname} {sname}: {status}", file=sys.stderr)
                    results.setdefault((pname, sname), []).append(run)
                    record.append({"rate": rate, "seed": seed, "platform": pname, "scheduler": sname,
                                   "ok": run.ok, "wall_s": run.wall_s, "figures": run.figures})  # fmt: skip
        for (pname, sname), runs in results.items():
            table.append(cells(rate, pname, sname, runs))
    return finish(args.output, record, HEADERS, table)


if __name__ == "__main__":
    raise SystemExit(main())
