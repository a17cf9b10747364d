"""Batch workloads with mixed pod sizes, a daily arrival cycle and GPU requests.

Arrivals are a Poisson process of rate ``rate × (1 + cycle × cos(2π (t − 14 h) / 1 day))``
(time 0 is midnight: busiest at 14:00, quietest at 02:00), drawn by thinning a process of
the highest rate; ``cycle`` 0 is a flat rate. Each job's pod size is drawn from a list of
weighted sizes (``--size 3:cpu=500m,memory=1Gi``), or its cpu from a log-normal
distribution of given mean and coefficient of variation with memory in proportion
(``--cpu-lognormal 2:1 --memory-per-cpu 2Gi``; cpu rounded to 100m, at least 100m); a
share ``gpu_fraction`` of the jobs also requests ``gpus`` ``nvidia.com/gpu``. Run times
are exponential with mean ``mean_delay``, whole seconds, at least 1. Seeded: the same
arguments give the same bytes.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from simulator.generators import DEFAULT_SCHEDULER
from simulator.trace_select import WorkloadBuilder

DAY = 86400.0
PEAK_HOUR = 14


@dataclass(frozen=True)
class Size:
    weight: float
    requests: dict[str, str]


def parse_size(text: str) -> Size:
    """``WEIGHT:cpu=2,memory=4Gi,nvidia.com/gpu=1`` (the weight may be left out: 1)."""
    weight_text, sep, spec = text.partition(":")
    if not sep:
        weight_text, spec = "1", text
    try:
        weight = float(weight_text)
    except ValueError:
        raise ValueError(f"--size {text!r}: the weight {weight_text!r} is not a number") from None
    if not weight > 0:
        raise ValueError(f"--size {text!r}: the weight must be > 0")
    requests = {}
    for item in spec.split(","):
        key, eq, value = item.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise ValueError(f"--size {text!r}: expected RESOURCE=QUANTITY, got {item!r}")
        requests[key.strip()] = value.strip()
    return Size(weight, requests)


def _arrivals(count: int, rate: float, cycle: float, rng: random.Random) -> list[float]:
    top = rate * (1 + cycle)
    times: list[float] = []
    now = 0.0
    while len(times) < count:
        now += rng.expovariate(top)
        wanted = rate * (1 + cycle * math.cos(2 * math.pi * (now - PEAK_HOUR * 3600) / DAY))
        if rng.random() * top <= wanted:
            times.append(now)
    # a flat rate starts at the first arrival (as the poisson generator); a cycle keeps
    # time 0 at midnight
    first = 0.0 if cycle else times[0]
    return [round(t - first, 3) for t in times]


def _lognormal(rng: random.Random, mean: float, cv: float) -> float:
    sigma = math.sqrt(math.log(1 + cv * cv))
    return rng.lognormvariate(math.log(mean) - sigma * sigma / 2, sigma)


def _clean(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def batch(
    count: int,
    rate: float,
    mean_delay: float,
    *,
    seed: int,
    sizes: list[Size] | None = None,
    cpu_lognormal: tuple[float, float] | None = None,
    memory_per_cpu_mi: int = 2048,
    cycle: float = 0.0,
    gpu_fraction: float = 0.0,
    gpus: int = 1,
    scheduler: str = DEFAULT_SCHEDULER,
) -> dict[str, Any]:
    if not 0 <= cycle <= 1:
        raise ValueError(f"--daily-cycle must be within [0, 1], got {cycle:g}")
    if not 0 <= gpu_fraction <= 1:
        raise ValueError(f"--gpu-fraction must be within [0, 1], got {gpu_fraction:g}")
    if sizes and cpu_lognormal:
        raise ValueError("give --size or --cpu-lognormal, not both")
    rng = random.Random(seed)
    times = _arrivals(count, rate, cycle, rng)
    sizes = sizes or ([] if cpu_lognormal else [Size(1, {"cpu": "1"})])
    weights = [s.weight for s in sizes]
    built = WorkloadBuilder()
    for subtime in times:
        if cpu_lognormal:
            milli = max(100, round(_lognormal(rng, *cpu_lognormal) * 10) * 100)
            requests = {"cpu": f"{milli}m", "memory": f"{milli * memory_per_cpu_mi // 1000}Mi"}
        else:
            requests = dict(rng.choices(sizes, weights)[0].requests)
        if gpu_fraction and rng.random() < gpu_fraction:
            requests["nvidia.com/gpu"] = str(gpus)
        delay = max(1, round(rng.expovariate(1 / mean_delay)))
        profile = {"type": "delay", "delay": delay, "requests": requests, "scheduler": scheduler}
        built.add(profile, _clean(subtime))
    return built.workload()
