"""Standard Workload Format (Parallel Workloads Archive) → Batsim workload JSON.

An SWF file has ``;`` comment lines (header fields such as ``; MaxProcs: 1024``) and one
line per job with 18 whitespace-separated fields: job number, submit time, wait time, run
time, allocated processors, average cpu time, used memory, requested processors,
requested time, requested memory, status, user, group, application, queue, partition,
preceding job, think time. ``-1`` means unknown.

Batkube's conversion (the default, ``mode="batkube"``): each job is one pod, ``res`` 1, a
``delay`` profile of its run time with ``cpu = norm × procs / max_procs`` rounded to 0.001
(minimum 0.001, optionally capped) and ``scheduler``; jobs with run time ≤ 0 are skipped.
``mode="procs"`` keeps Batsim's classic reading: ``res`` = processors, no ``cpu``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


class SwfError(ValueError):
    """A malformed SWF file or option; the text names file and line."""


@dataclass(frozen=True)
class SwfJob:
    number: int
    submit: float
    run: float
    procs: int  # allocated processors, else requested
    requested_time: float


def read_swf(path: str | Path) -> tuple[list[SwfJob], dict[str, str]]:
    """Jobs and header fields (``MaxProcs`` …) of an SWF file."""
    jobs: list[SwfJob] = []
    header: dict[str, str] = {}
    try:
        handle = open(path, encoding="utf-8", errors="replace")
    except OSError as exc:
        raise SwfError(f"{path}: cannot read ({exc.strerror})") from None
    with handle:
        for lineno, line in enumerate(handle, 1):
            text = line.strip()
            if not text:
                continue
            if text.startswith(";"):
                key, sep, value = text[1:].partition(":")
                if sep:
                    header[key.strip()] = value.strip()
                continue
            fields = text.split()
            if len(fields) != 18:
                raise SwfError(f"{path}:{lineno}: expected 18 fields, found {len(fields)}")
            try:
                number = int(fields[0])
                submit = float(fields[1])
                run = float(fields[3])
                allocated = int(float(fields[4]))
                requested = int(float(fields[7]))
                requested_time = float(fields[8])
            except ValueError:
                raise SwfError(f"{path}:{lineno}: a field is not a number: {text!r}") from None
            procs = allocated if allocated > 0 else requested
            jobs.append(SwfJob(number, submit, run, procs, requested_time))
    return jobs, header


def convert(
    jobs: list[SwfJob],
    header: dict[str, str],
    *,
    source: str,
    mode: str = "batkube",
    norm: float = 1.0,
    max_procs: int | None = None,
    cpu_cap: float | None = None,
    trim: float | None = None,
    window: tuple[float, float] | None = None,
    scheduler: str = "default-scheduler",
    walltime_from_request: bool = False,
    nb_res: int | None = None,
) -> dict[str, Any]:
    """Build the workload dict. ``window`` (start, end) selects jobs by trace submit time;
    subtimes are relative to the first selected job. ``trim`` caps run times."""
    if mode not in ("batkube", "procs"):
        raise SwfError(f"mode must be 'batkube' or 'procs', not {mode!r}")
    selected = [j for j in jobs if j.run > 0 and j.procs > 0]
    if window is not None:
        start, end = window
        selected = [j for j in selected if start <= j.submit < end]
    if not selected:
        raise SwfError(f"{source}: no job with a positive run time in the selection")
    if max_procs is None:
        if "MaxProcs" in header:
            try:
                max_procs = int(header["MaxProcs"])
            except ValueError:
                raise SwfError(f"{source}: header MaxProcs {header['MaxProcs']!r}") from None
        else:
            max_procs = max(j.procs for j in selected)
    if max_procs <= 0:
        raise SwfError(f"{source}: MaxProcs must be > 0")
    origin = min(j.submit for j in selected)
    selected.sort(key=lambda j: (j.submit, j.number))
    out_jobs: list[dict[str, Any]] = []
    profiles: dict[str, dict[str, Any]] = {}
    by_content: dict[tuple, str] = {}
    for job in selected:
        run = min(job.run, trim) if trim is not None else job.run
        delay: float | int = int(run) if float(run).is_integer() else run
        profile: dict[str, Any] = {"type": "delay", "delay": delay}
        if mode == "batkube":
            cpu = max(0.001, round(norm * job.procs / max_procs, 3))
            if cpu_cap is not None:
                cpu = min(cpu, cpu_cap)
            profile["cpu"] = cpu
            profile["scheduler"] = scheduler
        key = tuple(sorted(profile.items()))
        name = by_content.get(key)
        if name is None:
            base = f"delay{int(job.run) if float(job.run).is_integer() else job.run}"
            name, n = base, 1
            while name in profiles:
                n += 1
                name = f"{base}_{n}"
            profiles[name] = profile
            by_content[key] = name
        subtime = job.submit - origin
        entry: dict[str, Any] = {
            "id": str(job.number),
            "subtime": int(subtime) if float(subtime).is_integer() else subtime,
            "res": 1 if mode == "batkube" else job.procs,
            "profile": name,
        }
        if walltime_from_request and job.requested_time > 0:
            entry["walltime"] = job.requested_time
        out_jobs.append(entry)
    if nb_res is None:
        nb_res = 1 if mode == "batkube" else max(j["res"] for j in out_jobs)
    return {"nb_res": nb_res, "jobs": out_jobs, "profiles": profiles}
