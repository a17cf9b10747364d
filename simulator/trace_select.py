"""What the trace importers share: which records to keep and how to lay them out in time.

``--window START:END`` keeps the records submitted in [START, END) seconds after the
trace's first one; ``--fraction F`` keeps a share F of them, chosen by a hash of each
record's name (so the same F keeps the same records whatever their order, and a smaller
F keeps a subset of a larger one's); ``--scale S`` multiplies the submission times
(0.5 packs the same arrivals into half the time: twice the load). Submission times
count from the first kept record.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


class SelectError(ValueError):
    """A selection that keeps nothing, or a bad option."""


def kept_by_fraction(name: str, fraction: float) -> bool:
    """Whether the record ``name`` is in the share ``fraction`` (stable, order-free)."""
    if fraction >= 1:
        return True
    return zlib.crc32(name.encode()) / 2**32 < fraction


def select(
    records: Sequence[T],
    *,
    time_of: Callable[[T], float],
    name_of: Callable[[T], str],
    window: tuple[float, float] | None = None,
    fraction: float = 1.0,
) -> list[T]:
    """The records in ``window`` (seconds after the earliest one) and in ``fraction``, in
    their order of submission (ties by name)."""
    if not 0 < fraction <= 1:
        raise SelectError(f"--fraction must be within (0, 1], got {fraction:g}")
    if not records:
        return []
    origin = min(time_of(r) for r in records)
    start, end = window if window is not None else (0.0, float("inf"))
    kept = [
        r
        for r in records
        if start <= time_of(r) - origin < end and kept_by_fraction(name_of(r), fraction)
    ]
    return sorted(kept, key=lambda r: (time_of(r), name_of(r)))


def clean(value: float) -> float | int:
    """A time as workload files write it: an integer when whole, else 3 decimals."""
    value = round(value, 3)
    return int(value) if float(value).is_integer() else value


def subtimes(times: Sequence[float], scale: float = 1.0) -> list[float | int]:
    """Submission times from the first, times ``scale``."""
    if not scale > 0:
        raise SelectError(f"--scale must be > 0, got {scale:g}")
    if not times:
        return []
    origin = min(times)
    return [clean((t - origin) * scale) for t in times]


# each imported job's pod carries the name it had in the trace
SOURCE_ANNOTATION = "timewarp.io/source-name"


def thin_and_scale(workload: dict, fraction: float = 1.0, scale: float = 1.0) -> dict:
    """``--fraction``/``--scale`` on a converted workload (from-swf's): jobs kept by a
    hash of their id, submission times from the first kept one, times ``scale``. The
    defaults leave the workload as it is."""
    if fraction >= 1 and scale == 1:
        return workload
    jobs = [j for j in workload["jobs"] if kept_by_fraction(str(j["id"]), fraction)]
    if not jobs:
        raise SelectError(f"--fraction {fraction:g} keeps no job")
    for job, subtime in zip(jobs, subtimes([j["subtime"] for j in jobs], scale), strict=True):
        job["subtime"] = subtime
    used = {j["profile"] for j in jobs}
    workload["profiles"] = {k: v for k, v in workload["profiles"].items() if k in used}
    workload["jobs"] = jobs
    return workload


class WorkloadBuilder:
    """Jobs one pod each, numbered from 1, their profiles shared by content (``p0``, ``p1``
    … in order of first use); a job from a trace carries its name there."""

    def __init__(self) -> None:
        self.jobs: list[dict] = []
        self.profiles: dict[str, dict] = {}
        self._names: dict[str, str] = {}

    def add(self, profile: dict, subtime: float | int, source_name: str | None = None) -> None:
        key = json.dumps(profile, sort_keys=True)
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = f"p{len(self.profiles)}"
            self.profiles[name] = profile
        job: dict = {"id": str(len(self.jobs) + 1), "subtime": subtime, "res": 1, "profile": name}
        if source_name is not None:
            job["annotations"] = {SOURCE_ANNOTATION: source_name}
        self.jobs.append(job)

    def workload(self, nb_res: int = 1) -> dict:
        return {"nb_res": nb_res, "jobs": self.jobs, "profiles": self.profiles}
