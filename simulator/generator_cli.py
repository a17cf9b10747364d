"""``timewarp workload service`` and ``timewarp workload batch``: the realistic
generators' flags (``simulator/service_gen.py``, ``simulator/batch_gen.py``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from simulator import batch_gen, cli_types, service_gen
from simulator.generators import DEFAULT_SCHEDULER
from simulator.traffic.spec import read_rate_csv

_positive = cli_types.positive
_non_negative = cli_types.non_negative
_share = cli_types.share
_count = cli_types.positive_int
_number = cli_types.number


def _flash(text: str) -> service_gen.Flash:
    parts = text.split(":")
    try:
        at, duration, factor = (float(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected AT:DURATION:FACTOR (seconds, seconds, a multiplier), got {text!r}"
        ) from None
    if at < 0 or duration <= 0 or factor < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: AT >= 0, DURATION > 0, FACTOR >= 0")
    return service_gen.Flash(at, duration, factor)


def _mean_cv(text: str) -> tuple[float, float]:
    mean, sep, cv = text.partition(":")
    try:
        value = (float(mean), float(cv))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected MEAN:CV, got {text!r}") from None
    if not sep or value[0] <= 0 or value[1] < 0:
        raise argparse.ArgumentTypeError(f"expected MEAN:CV with MEAN > 0, CV >= 0, got {text!r}")
    return value


def _size(text: str) -> batch_gen.Size:
    try:
        return batch_gen.parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).partition(": ")[2] or str(exc)) from None


def add_parsers(sub: Any, output_help: str, scheduler_help: str) -> None:
    svc = sub.add_parser(
        "service", help="a service with a daily/weekly traffic, flash crowds or a replayed rate"
    )
    svc.add_argument("--name", default="web", help="the service and its Deployment (default web)")
    svc.add_argument(
        "--pattern",
        choices=service_gen.PATTERNS,
        default="daily",
        help="daily (two peaks, 11:00 and 20:00, trough at 04:00), weekly (the daily pattern, "
        "weekends × --weekend), constant (--low) (default daily)",
    )
    svc.add_argument(
        "--low", type=_non_negative, default=5.0, help="the day's lowest rate, req/s (default 5)"
    )
    svc.add_argument(
        "--peak",
        type=_non_negative,
        default=50.0,
        help="the day's highest rate, req/s (default 50)",
    )
    svc.add_argument(
        "--weekend",
        type=_non_negative,
        default=0.6,
        help="weekly: the weekend's factor (default 0.6)",
    )
    svc.add_argument(
        "--duration", type=_positive, default=86400.0, help="seconds of traffic (default a day)"
    )
    svc.add_argument(
        "--step", type=_positive, default=300.0, help="seconds a rate is held (default 300)"
    )
    svc.add_argument(
        "--noise",
        type=_non_negative,
        default=0.0,
        help="σ of a log-normal factor per step (default 0: none)",
    )
    svc.add_argument(
        "--flash",
        type=_flash,
        action="append",
        default=[],
        metavar="AT:DURATION:FACTOR",
        help="a flash crowd: the rate × FACTOR for DURATION s from AT s (repeatable)",
    )
    svc.add_argument(
        "--rate-csv",
        metavar="FILE",
        help="replay this time,rate series (docs/services.md's replay format) instead of a pattern",
    )
    svc.add_argument("--cpu", default="500m", help="cpu request of a pod (default 500m)")
    svc.add_argument("--cpu-limit", help="cpu limit of a pod (default: the request)")
    svc.add_argument("--memory", default="512Mi", help="memory of a pod (default 512Mi)")
    svc.add_argument("--replicas", type=_count, default=1, help="replicas at start (default 1)")
    svc.add_argument(
        "--hpa-target",
        type=_number(int, lambda v: 1 <= v <= 1000, "a percentage in [1, 1000]"),
        metavar="PERCENT",
        help="add an HPA keeping this average cpu utilisation (default: no HPA)",
    )
    svc.add_argument("--min-replicas", type=_count, default=1, help="the HPA's (default 1)")
    svc.add_argument("--max-replicas", type=_count, default=10, help="the HPA's (default 10)")
    svc.add_argument(
        "--cost", type=_positive, default=0.05, help="mean CPU-seconds per request (default 0.05)"
    )
    svc.add_argument(
        "--timeout", type=_positive, default=10.0, help="request timeout, s (default 10)"
    )
    svc.add_argument(
        "--startup-delay",
        type=_non_negative,
        default=10.0,
        help="s from bound to Running (default 10)",
    )
    svc.add_argument("--seed", type=int, default=0, help="noise and request streams (default 0)")
    svc.add_argument("--scheduler", default=DEFAULT_SCHEDULER, help=scheduler_help)
    svc.add_argument("-o", "--output", required=True, help=output_help)

    bat = sub.add_parser(
        "batch", help="batch jobs: mixed pod sizes, a daily arrival cycle, GPU requests"
    )
    bat.add_argument("-n", "--count", type=_count, required=True, help="jobs")
    bat.add_argument("--rate", type=_positive, required=True, help="mean arrivals per second")
    bat.add_argument(
        "--daily-cycle",
        type=_share,
        default=0.0,
        metavar="A",
        help="arrival rate × (1 + A cos(...)): busiest at 14:00, quietest at 02:00 (default 0)",
    )
    bat.add_argument(
        "--mean-delay", type=_positive, required=True, help="mean run time, s (exponential)"
    )
    bat.add_argument(
        "--size",
        type=_size,
        action="append",
        default=[],
        metavar="WEIGHT:RES=Q,...",
        help="a pod size and its weight, e.g. 3:cpu=500m,memory=1Gi (repeatable: a list)",
    )
    bat.add_argument(
        "--cpu-lognormal",
        type=_mean_cv,
        metavar="MEAN:CV",
        help="draw each pod's cpu from a log-normal distribution (cores) instead of --size",
    )
    bat.add_argument(
        "--memory-per-cpu",
        type=_count,
        default=2048,
        metavar="MI",
        help="with --cpu-lognormal: memory Mi per cpu (default 2048)",
    )
    bat.add_argument(
        "--gpu-fraction", type=_share, default=0.0, help="share of jobs requesting GPUs (default 0)"
    )
    bat.add_argument(
        "--gpus", type=_count, default=1, help="nvidia.com/gpu of such a job (default 1)"
    )
    bat.add_argument("--seed", type=int, required=True, help="random seed (same seed, same file)")
    bat.add_argument("--scheduler", default=DEFAULT_SCHEDULER, help=scheduler_help)
    bat.add_argument("-o", "--output", required=True, help=output_help)


def build(args: argparse.Namespace) -> dict[str, Any]:
    """The workload ``args`` ask for; ValueError (or WorkloadError) on a bad combination."""
    if args.tool == "batch":
        return batch_gen.batch(
            args.count,
            args.rate,
            args.mean_delay,
            seed=args.seed,
            sizes=args.size,
            cpu_lognormal=args.cpu_lognormal,
            memory_per_cpu_mi=args.memory_per_cpu,
            cycle=args.daily_cycle,
            gpu_fraction=args.gpu_fraction,
            gpus=args.gpus,
            scheduler=args.scheduler,
        )
    if args.min_replicas > args.max_replicas:
        raise ValueError("--min-replicas is above --max-replicas")
    replay = None
    if args.rate_csv:
        replay = read_rate_csv(Path(args.rate_csv), "--rate-csv")
    steps = service_gen.rate_series(
        pattern=args.pattern,
        duration=args.duration,
        step=args.step,
        low=args.low,
        peak=args.peak,
        weekend=args.weekend,
        noise=args.noise,
        flashes=tuple(args.flash),
        seed=args.seed,
        replay=replay,
    )
    return service_gen.service_workload(
        name=args.name,
        steps=steps,
        duration=args.duration,
        cpu=args.cpu,
        memory=args.memory or None,
        cpu_limit=args.cpu_limit,
        replicas=args.replicas,
        hpa_target=args.hpa_target,
        min_replicas=args.min_replicas,
        max_replicas=args.max_replicas,
        cost=args.cost,
        timeout=args.timeout,
        startup_delay=args.startup_delay,
        seed=args.seed,
        scheduler=args.scheduler,
    )
