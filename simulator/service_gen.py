"""A service workload (``docs/services.md``) with a realistic traffic: daily and weekly
patterns, flash crowds, or a recorded rate series — written as a ``step`` traffic (the
rate held for each ``step`` seconds), so the file says exactly what the model serves.

The daily shape is the one web traffic is usually drawn with: a night trough at 04:00,
a morning rise, a first peak at 11:00 and the day's highest at 20:00 (two Gaussian bumps
over a floor, scaled so the day's minimum is ``low`` and its maximum ``peak``); the
weekly pattern multiplies Saturdays and Sundays by ``weekend``. Day 0 is a Monday and
time 0 is midnight. ``noise`` multiplies each step by a seeded log-normal factor (its σ);
a flash crowd multiplies the rate by ``factor`` for ``duration`` seconds from ``at``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from simulator.generators import DEFAULT_SCHEDULER

DAY = 86400.0
PATTERNS = ("constant", "daily", "weekly")


@dataclass(frozen=True)
class Flash:
    at: float
    duration: float
    factor: float


def daily_shape(seconds: float) -> float:
    """The day's shape at ``seconds`` after midnight, within [0, 1]."""
    hour = (seconds % DAY) / 3600

    def bump(center: float, width: float) -> float:
        # the distance on the clock (23:00 is near 01:00)
        d = min(abs(hour - center), 24 - abs(hour - center))
        return math.exp(-0.5 * (d / width) ** 2)

    raw = 0.75 * bump(11, 2.5) + bump(20, 2.2)
    low, high = _SHAPE_RANGE
    return (raw - low) / (high - low)


def _shape_range() -> tuple[float, float]:
    values = []
    for minute in range(24 * 60):
        hour = minute / 60
        d = [min(abs(hour - c), 24 - abs(hour - c)) for c in (11, 20)]
        values.append(
            0.75 * math.exp(-0.5 * (d[0] / 2.5) ** 2) + math.exp(-0.5 * (d[1] / 2.2) ** 2)
        )
    return min(values), max(values)


_SHAPE_RANGE = _shape_range()


def _base_rate(
    pattern: str, t: float, step: float, low: float, peak: float, weekend: float
) -> float:
    if pattern == "constant":
        return low
    mid = t + step / 2  # a step's rate is the pattern's at its middle
    rate = low + (peak - low) * daily_shape(mid)
    if pattern == "weekly" and int(mid // DAY) % 7 in (5, 6):
        rate *= weekend
    return rate


def rate_series(
    *,
    pattern: str,
    duration: float,
    step: float,
    low: float,
    peak: float,
    weekend: float = 0.6,
    noise: float = 0.0,
    flashes: tuple[Flash, ...] = (),
    seed: int = 0,
    replay: list[tuple[float, float]] | None = None,
) -> list[list[float]]:
    """``[[t, rate], ...]``: a point every ``step`` seconds over ``duration`` (or the
    ``replay`` series' points), plus one at each start and end of a flash crowd; each
    point's rate multiplied by the flash crowds it falls in and by the noise."""
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, not {pattern!r}")
    rng = random.Random(seed)
    if replay is not None:
        grid = {t: r for t, r in replay if t < duration}
    else:
        count = math.ceil(duration / step)
        grid = {
            i * step: _base_rate(pattern, i * step, step, low, peak, weekend) for i in range(count)
        }
    times = sorted(grid)
    for edge in {e for f in flashes for e in (f.at, f.at + f.duration) if 0 < e < duration}:
        if edge not in grid:  # the rate held from the point before
            grid[edge] = grid[max(t for t in times if t < edge)]
    out = []
    for t in sorted(grid):
        rate = grid[t]
        if noise > 0:
            rate *= rng.lognormvariate(-noise * noise / 2, noise)  # mean 1
        for flash in flashes:
            if flash.at <= t < flash.at + flash.duration:
                rate *= flash.factor
        out.append([_num(t), _num(round(rate, 3))])
    return out


def _num(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def service_workload(
    *,
    name: str,
    steps: list[list[float]],
    duration: float,
    cpu: str = "500m",
    memory: str | None = "512Mi",
    cpu_limit: str | None = None,
    replicas: int = 1,
    hpa_target: int | None = None,
    min_replicas: int = 1,
    max_replicas: int = 10,
    cost: float = 0.05,
    timeout: float = 10.0,
    startup_delay: float = 10.0,
    arrivals: str = "poisson",
    seed: int = 0,
    scheduler: str = DEFAULT_SCHEDULER,
    nb_res: int = 1,
) -> dict[str, Any]:
    """A workload of one service (no batch jobs) serving ``steps``."""
    requests = {"cpu": cpu, **({"memory": memory} if memory else {})}
    resources: dict[str, Any] = {"requests": requests}
    limit = cpu_limit or cpu
    resources["limits"] = {"cpu": limit, **({"memory": memory} if memory else {})}
    labels = {"app": name}
    service: dict[str, Any] = {
        "name": name,
        "deployment": {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "schedulerName": scheduler,
                        "containers": [
                            {
                                "name": name,
                                "image": f"registry.timewarp.invalid/{name}:1",
                                "resources": resources,
                            }
                        ],
                    },
                },
            },
        },
        "startup_delay": _num(startup_delay),
        "traffic": {
            "type": "step",
            "steps": steps,
            "duration": _num(duration),
            "arrivals": arrivals,
        },
        "request": {
            "cost": {"distribution": "exponential", "mean": cost},
            "timeout": _num(timeout),
        },
        "seed": seed,
    }
    if hpa_target is not None:
        service["horizontalPodAutoscaler"] = {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                "minReplicas": min_replicas,
                "maxReplicas": max_replicas,
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "target": {"type": "Utilization", "averageUtilization": hpa_target},
                        },
                    }
                ],
            },
        }
    return {"nb_res": nb_res, "jobs": [], "profiles": {}, "services": [service]}
