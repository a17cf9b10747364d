"""KSE's synthetic workload (Carvalho 2024, §5.1-5.3) as a timewarp workload file.

    python experiments/kse_workload.py --pods 20 --rate 40 --shape constant \\
        --distribution exponential --seed 1 -o kse.json

The paper's experiment: ``pods`` load-generator pods of one Deployment (so one ReplicaSet)
are created at once and run 10 minutes; k6 sends HTTP requests at ``rate`` per second
(``constant``, or ``linear``: ramping from 0 to ``rate`` over the run), each to a pod
chosen by a distribution over the pod indices — ``exponential`` (λ = 5/pods: the first
pods get most requests) or ``normal`` (μ = pods/2, σ = μ/3: the middle ones) — and each
request costs CPU or memory on the pod that serves it. Here every ``--step`` seconds the
step's requests are drawn (seeded) and turned into each pod's usage for that step::

    cpu    = base-cpu    + cpu-per-request    × (the pod's requests per second)
    memory = base-memory + memory-per-request × (the pod's requests per second)

written as the pod's ``timewarp.usage`` curve (served on ``metrics.k8s.io``, which the
rebalancer reads). Every pod has its own profile, requests ``--request-cpu`` /
``--request-memory``, lives ``--duration`` seconds and belongs to ReplicaSet
``--replicaset``. The pods are services: their profiles say ``"replacement": "remaining"``
(timewarp's workload extension), so a moved pod's replacement serves the rest of the
``--duration`` rather than starting it over, and the run ends on time however often the
rebalancer moves pods. One extra job, ``keeper`` (10m CPU, 16Mi, no ReplicaSet, so never
moved), lasts the whole run too.

Defaults are sized for KSE's cluster (4 nodes × 2 CPU × 2 GiB): 40 requests/s cost 4 cores
and 2.5 GiB in all, about half the cluster, on top of the pods' base usage.

Honest limits: a replacement pod replays its usage curve from its own start (the broker
keys curves to the pod's start), so under ``linear`` a moved pod restarts low — moves look
better than they are; request costs are a model, not the paper's PHP measurements.
Writes atomically; exit 2 with a message on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
from pathlib import Path

DISTRIBUTIONS = ("exponential", "normal")
SHAPES = ("constant", "linear")


def draw_pod(rng: random.Random, pods: int, distribution: str) -> int:
    """One request's pod index in ``0..pods-1`` (redrawn when it falls outside)."""
    while True:
        if distribution == "exponential":
            index = int(rng.expovariate(5.0 / pods))
        else:
            mu = pods / 2
            index = int(round(rng.gauss(mu, mu / 3)))
        if 0 <= index < pods:
            return index


def request_rate(shape: str, rate: float, t: float, duration: float) -> float:
    """Requests per second at time ``t`` (mid-step): constant, or a ramp from 0 to ``rate``."""
    return rate if shape == "constant" else rate * min(1.0, t / duration)


def make_workload(args: argparse.Namespace) -> dict:
    rng = random.Random(args.seed)
    steps = max(1, math.ceil(args.duration / args.step))
    # per pod, per step: requests per second
    rps = [[0.0] * steps for _ in range(args.pods)]
    for k in range(steps):
        middle = (k + 0.5) * args.step
        count = round(request_rate(args.shape, args.rate, middle, args.duration) * args.step)
        for _ in range(count):
            rps[draw_pod(rng, args.pods, args.distribution)][k] += 1.0 / args.step
    jobs, profiles = [], {}
    for i in range(args.pods):
        cpu_curve, memory_curve = [], []
        for k in range(steps):
            cpu = args.base_cpu + args.cpu_per_request * rps[i][k]
            memory = args.base_memory + args.memory_per_request * rps[i][k]
            cpu_curve.append([round(k * args.step, 3), round(cpu, 4)])
            memory_curve.append([round(k * args.step, 3), f"{memory:.0f}Mi"])
        name = f"pod{i}"
        profiles[name] = {
            "type": "delay",
            "delay": args.duration,
            "cpu": args.request_cpu,
            "memory": args.request_memory,
            "scheduler": args.scheduler,
            "timewarp": {
                "usage": {"cpu": cpu_curve, "memory": memory_curve},
                "replacement": "remaining",
            },
        }
        jobs.append(
            {
                "id": str(i + 1),
                "subtime": 0,
                "res": 1,
                "profile": name,
                "replicaset": args.replicaset,
            }
        )
    profiles["keeper"] = {
        "type": "delay",
        "delay": args.duration,
        "cpu": "10m",
        "memory": "16Mi",
        "scheduler": args.scheduler,
        "timewarp": {"usage": {"cpu": [[0, 0.01]], "memory": [[0, "16Mi"]]}},
    }
    jobs.append({"id": "keeper", "subtime": 0, "res": 1, "profile": "keeper"})
    return {
        "nb_res": 1,
        "description": (
            f"KSE synthetic: {args.pods} pods, {args.rate:g} requests/s {args.shape}, "
            f"{args.distribution}, seed {args.seed}"
        ),
        "jobs": jobs,
        "profiles": profiles,
    }


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"expected a number > 0, got {text}")
        return value

    return parse


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="experiments/kse_workload.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--pods", type=_positive(int), required=True)
    parser.add_argument("--rate", type=_positive(float), required=True, help="requests/s")
    parser.add_argument("--shape", choices=SHAPES, required=True)
    parser.add_argument("--distribution", choices=DISTRIBUTIONS, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--duration", type=_positive(float), default=600.0, help="s (600)")
    parser.add_argument("--step", type=_positive(float), default=30.0, help="s per step (30)")
    parser.add_argument("--cpu-per-request", type=_non_negative, default=0.1, help="cores")
    parser.add_argument("--memory-per-request", type=_non_negative, default=64.0, help="MiB")
    parser.add_argument("--base-cpu", type=_non_negative, default=0.02, help="cores (0.02)")
    parser.add_argument("--base-memory", type=_non_negative, default=64.0, help="MiB (64)")
    parser.add_argument("--request-cpu", default="100m", help="each pod's request (100m)")
    parser.add_argument("--request-memory", default="128Mi", help="each pod's request (128Mi)")
    parser.add_argument("--replicaset", default="app", help="the pods' ReplicaSet (app)")
    parser.add_argument("--scheduler", default="default", help="the pods' schedulerName")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from kubernetes.utils import parse_quantity

    for flag, value in (
        ("--request-cpu", args.request_cpu),
        ("--request-memory", args.request_memory),
    ):
        try:
            parse_quantity(value)
        except ValueError:
            parser.error(f"{flag}: not a Kubernetes quantity: {value!r}")
    workload = make_workload(args)
    text = json.dumps(workload, indent=1) + "\n"
    target = args.output
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        print(f"kse_workload: -o {target}: cannot write there ({exc})", file=sys.stderr)
        return 2
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        _check(tmp)
        os.replace(tmp, target)
    except ValueError as exc:
        print(f"kse_workload: {exc}", file=sys.stderr)
        return 2
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return 0


def _check(path: str) -> None:
    """The simulator's own loader must accept the file (timewarp's checkout importable)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from simulator.workload import WorkloadError, load_workload

    try:
        load_workload(path, "w0", 1 << 30)
    except WorkloadError as exc:
        raise ValueError(str(exc)) from None


if __name__ == "__main__":
    raise SystemExit(main())
