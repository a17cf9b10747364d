"""Batsim workload JSON → validated jobs and profiles (plus timewarp's profile extensions
and its ``services``, validated by :mod:`simulator.traffic.spec`).

A workload file is ``{"nb_res": int, "jobs": [...], "profiles": {...}}``. Workloads are
named ``w0``, ``w1``… in command-line order and job ids become ``w0!<id>``. Every check
that real Batsim would abort on (or, worse, silently accept: an unknown profile type is
taken as a trace file there) is reported here as a :class:`WorkloadError` naming the
file and the field, before the simulation starts.

Profile types modelled: ``delay`` {delay}, ``parallel_homogeneous`` {cpu, com=0}
(duration = cpu / host speed), ``composed`` {seq, repeat}. Other Batsim types are
rejected by name. Extra fields (Batkube's ``cpu``/``memory``/``scheduler``) pass through.

timewarp extensions live under one key, ``"timewarp"``, of a profile, so that real
Batsim still runs the same file (it ignores the key and uses the base fields)::

    "timewarp": {
        "durations": {"gpu": 100, "cpu": 600},   # seconds by host prop node_class
        "sharing_slowdown": true,                # progress rate 1/P with P jobs on a host
        "usage": {"cpu": [[0, 0.5], [60, 2]],     # usage over time since start, for metrics
                  "memory": [[0, "200Mi"]], "period": 120},
        "replacement": "remaining",              # (delay profiles of ReplicaSet pods) an
                                                 # evicted pod's replacement serves what is
                                                 # left of the delay; "restart" (default)
                                                 # runs the whole delay again
        "imagePullSeconds": 8,                   # the pod's start-up and shutdown in the
        "containerStartSeconds": 2,              # kubelet model (broker/cluster/pod_lifecycle.py);
        "shutdownSeconds": 0                     # all 0 by default
    }
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.traffic.spec import ServiceError, ServiceSpec, parse_services

SUPPORTED_PROFILE_TYPES = ("delay", "parallel_homogeneous", "composed")
BATSIM_ONLY_PROFILE_TYPES = (
    "parallel",
    "parallel_homogeneous_total",
    "parallel_homogeneous_pfs",
    "data_staging",
    "send",
    "recv",
    "trace",
    "smpi",
    "usage_trace",
)
LIFECYCLE_KEYS = ("imagePullSeconds", "containerStartSeconds", "shutdownSeconds")
TIMEWARP_KEYS = ("durations", "sharing_slowdown", "usage", "replacement", *LIFECYCLE_KEYS)
REPLACEMENT_RULES = ("restart", "remaining")


class WorkloadError(ValueError):
    """A workload that cannot be simulated; the text names file and field."""


@dataclass(slots=True)
class Job:
    """One job. ``raw`` is the workload's object with ``id`` rewritten to ``job_id``."""

    job_id: str  # "w0!1"
    workload: str
    local_id: str
    subtime: float
    res: int
    profile: str
    walltime: float  # -1: none
    raw: dict[str, Any]
    order: int  # position in its file; breaks ties between equal subtimes


@dataclass
class Workload:
    name: str
    path: str
    jobs: list[Job]
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    services: list[ServiceSpec] = field(default_factory=list)  # timewarp's extension


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def validate_profile(
    name: str,
    profile: Any,
    profiles: dict[str, Any],
    where: str,
) -> None:
    """Check one profile (and, for ``composed``, that its parts exist and do not loop)."""
    if not isinstance(profile, dict):
        raise WorkloadError(f"{where}: expected a JSON object, got {profile!r}")
    kind = profile.get("type")
    if kind is None:
        raise WorkloadError(f"{where}.type: missing")
    if kind in BATSIM_ONLY_PROFILE_TYPES:
        raise WorkloadError(
            f"{where}.type: {kind!r} is a Batsim profile type that timewarp sim does not "
            f"model (supported: {', '.join(SUPPORTED_PROFILE_TYPES)}); use real Batsim"
        )
    if kind not in SUPPORTED_PROFILE_TYPES:
        raise WorkloadError(
            f"{where}.type: unknown profile type {kind!r} "
            f"(supported: {', '.join(SUPPORTED_PROFILE_TYPES)})"
        )
    if kind == "delay":
        delay = profile.get("delay")
        if not _is_number(delay) or delay < 0:
            raise WorkloadError(f"{where}.delay: expected a number >= 0, got {delay!r}")
    elif kind == "parallel_homogeneous":
        cpu = profile.get("cpu")
        if not _is_number(cpu) or cpu < 0:
            raise WorkloadError(f"{where}.cpu: expected flops >= 0, got {cpu!r}")
        com = profile.get("com", 0)
        if not _is_number(com) or com < 0:
            raise WorkloadError(f"{where}.com: expected bytes >= 0, got {com!r}")
        if com > 0:
            raise WorkloadError(
                f"{where}.com: {com} bytes of communication: timewarp sim does not model "
                "the network (use com=0, or real Batsim)"
            )
    elif kind == "composed":
        seq = profile.get("seq")
        if not isinstance(seq, list) or not seq or not all(isinstance(s, str) for s in seq):
            raise WorkloadError(f"{where}.seq: expected a non-empty list of profile names")
        repeat = profile.get("repeat", 1)
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise WorkloadError(f"{where}.repeat: expected an integer >= 1, got {repeat!r}")
        for part in seq:
            if part not in profiles:
                raise WorkloadError(f"{where}.seq: profile {part!r} is not defined")
        _check_no_cycle(name, profiles, where)
        if isinstance(profile.get("timewarp"), dict) and "durations" in profile["timewarp"]:
            raise WorkloadError(
                f"{where}.timewarp.durations: a composed profile takes its durations from "
                "its parts; put them there"
            )
    _validate_extension(profile.get("timewarp"), f"{where}.timewarp")


def _check_no_cycle(start: str, profiles: dict[str, Any], where: str) -> None:
    stack = [(start, (start,))]
    while stack:
        current, path = stack.pop()
        profile = profiles.get(current)
        if not isinstance(profile, dict) or profile.get("type") != "composed":
            continue
        for part in profile.get("seq", []):
            if part in path:
                raise WorkloadError(f"{where}.seq: composed profiles loop ({' -> '.join(path)})")
            stack.append((part, (*path, part)))


def _validate_extension(ext: Any, where: str) -> None:
    if ext is None:
        return
    if not isinstance(ext, dict):
        raise WorkloadError(f"{where}: expected a JSON object")
    unknown = sorted(set(ext) - set(TIMEWARP_KEYS))
    if unknown:
        raise WorkloadError(f"{where}: unknown key(s) {unknown} (known: {list(TIMEWARP_KEYS)})")
    durations = ext.get("durations")
    if durations is not None:
        if not isinstance(durations, dict) or not durations:
            raise WorkloadError(f"{where}.durations: expected {{node_class: seconds}}")
        for klass, seconds in durations.items():
            if not _is_number(seconds) or seconds < 0:
                raise WorkloadError(
                    f"{where}.durations.{klass}: expected seconds >= 0, got {seconds!r}"
                )
    for key in LIFECYCLE_KEYS:
        seconds = ext.get(key)
        if seconds is not None and (not _is_number(seconds) or seconds < 0):
            raise WorkloadError(f"{where}.{key}: expected seconds >= 0, got {seconds!r}")
    replacement = ext.get("replacement")
    if replacement is not None and replacement not in REPLACEMENT_RULES:
        raise WorkloadError(
            f"{where}.replacement: expected one of {list(REPLACEMENT_RULES)}, got {replacement!r}"
        )
    slowdown = ext.get("sharing_slowdown")
    if slowdown is not None and not isinstance(slowdown, bool):
        raise WorkloadError(f"{where}.sharing_slowdown: expected true or false")
    usage = ext.get("usage")
    if usage is not None:
        if not isinstance(usage, dict):
            raise WorkloadError(f"{where}.usage: expected a JSON object")
        for key, series in usage.items():
            if key == "period":
                if not _is_number(series) or series <= 0:
                    raise WorkloadError(f"{where}.usage.period: expected seconds > 0")
                continue
            previous = -1.0
            if not isinstance(series, list) or not series:
                raise WorkloadError(f"{where}.usage.{key}: expected [[seconds, value], ...]")
            for i, point in enumerate(series):
                ok = isinstance(point, list) and len(point) == 2 and _is_number(point[0])
                if not ok or point[0] <= previous:
                    raise WorkloadError(
                        f"{where}.usage.{key}[{i}]: expected [seconds, value] with "
                        "increasing seconds"
                    )
                previous = point[0]
            if series[0][0] != 0:
                raise WorkloadError(f"{where}.usage.{key}[0]: the first point must be at 0 s")


def parse_job(
    raw: Any,
    workload: str,
    profiles: dict[str, Any],
    nb_compute: int,
    where: str,
    order: int,
    *,
    id_has_prefix: bool = False,
) -> Job:
    """Validate one job object; ``where`` prefixes error messages."""
    if not isinstance(raw, dict):
        raise WorkloadError(f"{where}: expected a JSON object, got {raw!r}")
    for name in ("id", "subtime", "res", "profile"):
        if name not in raw:
            raise WorkloadError(f"{where}.{name}: missing")
    jid = raw["id"]
    if isinstance(jid, bool) or not isinstance(jid, str | int) or jid == "":
        raise WorkloadError(f"{where}.id: expected a non-empty string or integer, got {jid!r}")
    jid = str(jid)
    if id_has_prefix:
        prefix, _, local = jid.partition("!")
        if prefix != workload or not local:
            raise WorkloadError(f"{where}.id: expected '{workload}!<id>', got {jid!r}")
    else:
        local = jid
        if "!" in local:
            raise WorkloadError(f"{where}.id: {jid!r} must not contain '!'")
    subtime = raw["subtime"]
    if not _is_number(subtime) or subtime < 0:
        raise WorkloadError(f"{where}.subtime: expected a number >= 0, got {subtime!r}")
    res = raw["res"]
    if isinstance(res, bool) or not isinstance(res, int) or res < 1:
        raise WorkloadError(f"{where}.res: expected an integer >= 1, got {res!r}")
    if res > nb_compute:
        raise WorkloadError(
            f"{where}.res: requests {res} resources but the platform has {nb_compute} "
            "compute resources"
        )
    profile = raw["profile"]
    if not isinstance(profile, str) or profile not in profiles:
        raise WorkloadError(f"{where}.profile: profile {profile!r} is not defined")
    walltime = raw.get("walltime", -1)
    if walltime is None:
        walltime = -1
    if not _is_number(walltime) or not (walltime == -1 or walltime > 0):
        raise WorkloadError(f"{where}.walltime: expected -1 or a number > 0, got {walltime!r}")
    job_id = f"{workload}!{local}"
    rewritten = dict(raw)
    rewritten["id"] = job_id
    return Job(
        job_id, workload, local, float(subtime), res, profile, float(walltime), rewritten, order
    )


def load_workload(path: str | Path, name: str, nb_compute: int) -> Workload:
    """Read and validate one workload file (``name`` is ``w0``, ``w1``…)."""
    path = str(path)
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise WorkloadError(f"{path}: no such workload file") from None
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"{path}: malformed JSON at line {exc.lineno} ({exc.msg})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"{path}: cannot read ({exc})") from None
    if not isinstance(data, dict):
        raise WorkloadError(f"{path}: top level must be a JSON object with jobs and profiles")
    for key in ("jobs", "profiles"):
        if key not in data:
            raise WorkloadError(f"{path}: missing top-level field {key!r}")
    if "nb_res" in data:
        nb_res = data["nb_res"]
        if isinstance(nb_res, bool) or not isinstance(nb_res, int) or nb_res < 1:
            raise WorkloadError(f"{path}: nb_res: expected an integer >= 1, got {nb_res!r}")
    profiles = data["profiles"]
    if not isinstance(profiles, dict):
        raise WorkloadError(f"{path}: profiles: expected a JSON object {{name: profile}}")
    for pname, profile in profiles.items():
        validate_profile(pname, profile, profiles, f"{path}: profiles.{pname}")
    raw_jobs = data["jobs"]
    if not isinstance(raw_jobs, list):
        raise WorkloadError(f"{path}: jobs: expected a list")
    jobs: list[Job] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(raw_jobs):
        job = parse_job(raw, name, profiles, nb_compute, f"{path}: jobs[{index}]", index)
        if job.local_id in seen:
            raise WorkloadError(
                f"{path}: jobs[{index}].id: duplicate job id {job.local_id!r} "
                f"(first at jobs[{seen[job.local_id]}])"
            )
        seen[job.local_id] = index
        jobs.append(job)
    services: list[ServiceSpec] = []
    if "services" in data:
        try:
            services = parse_services(data["services"], path)
        except ServiceError as exc:
            raise WorkloadError(str(exc)) from None
    return Workload(name, path, jobs, dict(profiles), services)


# --------------------------------------------------------------------------- durations


def base_duration(
    profile_name: str,
    profiles: dict[str, dict[str, Any]],
    host_speeds: list[float],
    host_classes: list[str | None],
) -> float:
    """Seconds the profile runs alone on the given hosts (one entry per allocated host).

    ``delay``: its delay, or — timewarp extension — the largest
    ``timewarp.durations[node_class]`` over the hosts (hosts whose class is not listed use
    ``delay``). ``parallel_homogeneous``: ``cpu`` flops on each host, so the slowest host
    decides. ``composed``: ``repeat`` × the sum of its parts.
    """
    profile = profiles[profile_name]
    kind = profile["type"]
    if kind == "composed":
        once = sum(base_duration(p, profiles, host_speeds, host_classes) for p in profile["seq"])
        return once * profile.get("repeat", 1)
    durations = (profile.get("timewarp") or {}).get("durations")
    if kind == "delay":
        if durations:
            return max(float(durations.get(c, profile["delay"])) for c in host_classes)
        return float(profile["delay"])
    # parallel_homogeneous
    if durations:
        return max(
            float(durations[c]) if c in durations else profile["cpu"] / speed
            for c, speed in zip(host_classes, host_speeds, strict=True)
        )
    return max(profile["cpu"] / speed for speed in host_speeds)


def plain_delay(profile: dict[str, Any]) -> float | None:
    """A ``delay`` profile without timewarp's extensions (most jobs): its run time on any
    hosts, known without looking at them; else ``None`` (see :func:`base_duration`)."""
    if profile["type"] == "delay" and "timewarp" not in profile:
        return float(profile["delay"])
    return None


def has_sharing_slowdown(profile: dict[str, Any]) -> bool:
    return bool((profile.get("timewarp") or {}).get("sharing_slowdown", False))
