"""Batsim workload JSON → validated jobs and profiles (plus timewarp's profile extensions
and its ``services``, validated by :mod:`simulator.traffic.spec`).

A workload file is ``{"nb_res": int, "jobs": [...], "profiles": {...}}``. Workloads are
named ``w0``, ``w1``… in command-line order and job ids become ``w0!<id>``. Every check
that real Batsim would abort on (or, worse, silently accept: an unknown profile type is
taken as a trace file there) is reported here as a :class:`WorkloadError` naming the
file and the field, before the simulation starts.

Profile types modelled: ``delay`` {delay}, ``parallel_homogeneous`` {cpu, com} (cpu
flops on each host, com bytes between each ordered pair of hosts), ``parallel`` {cpu:
one flops per host, com: an n×n bytes matrix, row-major}, ``parallel_homogeneous_total``
{cpu, com: totals spread over the hosts}, ``composed`` {seq, repeat}; a task with
communication runs as SimGrid's ptask_L07 runs it (:mod:`simulator.network`). Other Batsim
types are rejected by name, with the reason. Extra fields (Batkube's ``cpu``/``memory``/``scheduler``) pass through.

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
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.traffic.spec import ServiceError, ServiceSpec, parse_services

SUPPORTED_PROFILE_TYPES = (
    "delay",
    "parallel_homogeneous",
    "parallel",
    "parallel_homogeneous_total",
    "composed",
)
#: what a ptask profile with communication needs: a network model (simulator.network)
PTASK_TYPES = ("parallel", "parallel_homogeneous_total")
BATSIM_ONLY_PROFILE_TYPES = (
    "parallel_homogeneous_pfs",
    "data_staging",
    "send",
    "recv",
    "trace",
    "smpi",
    "usage_trace",
)
_NOT_MODELLED = {
    # Batsim 4.2.1: a file naming one trace per rank; each rank an actor on its host (round
    # robin over the allocation) replaying "m_usage usage flops" lines as ptasks of
    # max(round(usage x cores), 1) copies of its host; the job waits for every rank's
    # 4-byte notice (under the walltime). Rank actors, their notices and the energy of a
    # partial usage are not modelled (docs/simulator.md, "What is modelled")
    "usage_trace": " (per-rank traces of (usage, flops) steps replayed by an actor per rank, "
    "each step a ptask on round(usage x cores) cores of its host: not modelled)",
    "trace": " (an SMPI-like time-independent trace)",
    "smpi": " (SimGrid's MPI replay)",
    "parallel_homogeneous_pfs": " (a parallel file system's storage hosts)",
    "data_staging": " (transfers between storage hosts)",
    "send": " (Batsim's inter-job messages)",
    "recv": " (Batsim's inter-job messages)",
}
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
        why = _NOT_MODELLED.get(kind, "")
        raise WorkloadError(
            f"{where}.type: {kind!r} is a Batsim profile type that timewarp sim does not "
            f"model{why} (supported: {', '.join(SUPPORTED_PROFILE_TYPES)}); use real Batsim"
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
    elif kind == "parallel_homogeneous_total":
        for key in ("cpu", "com"):
            value = profile.get(key)
            if not _is_number(value) or value < 0:
                raise WorkloadError(f"{where}.{key}: expected a number >= 0, got {value!r}")
    elif kind == "parallel":
        cpu, com = profile.get("cpu"), profile.get("com")
        if not isinstance(cpu, list) or not cpu or not all(_is_number(c) and c >= 0 for c in cpu):
            raise WorkloadError(f"{where}.cpu: expected a non-empty list of flops >= 0")
        if (
            not isinstance(com, list)
            or len(com) != len(cpu) ** 2
            or not all(_is_number(c) and c >= 0 for c in com)
        ):
            raise WorkloadError(
                f"{where}.com: expected a list of {len(cpu) ** 2} bytes >= 0 (an n×n matrix, "
                f"n = len(cpu) = {len(cpu)})"
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


def format_hint(path: str, data: Any = None) -> str:
    """What a file that is not a workload looks like, and the command that converts it
    (empty when it looks like nothing known). ``data``: its JSON, when it parsed."""
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        return (
            "it looks like a kubectl List (kubectl get ... -o json): convert it with "
            f"`timewarp workload from-cluster {path} -o wl.json -p cluster.xml`"
        )
    try:
        with open(path, "rb") as handle:
            head = handle.read(8192)
    except OSError:
        return ""
    if head[:2] == b"\x1f\x8b":
        return (
            "it is gzipped; a gzipped kubectl dump converts with "
            f"`timewarp workload from-cluster {path} -o wl.json -p cluster.xml`"
        )
    text = head.decode("utf-8", errors="replace")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if lines and lines[0].startswith("<"):
        return "it looks like XML (a SimGrid platform?): a platform is given with -p"
    if any(ln.startswith(("apiVersion:", "kind:", "- apiVersion:")) for ln in lines) or (
        lines and lines[0] == "---"
    ):
        return (
            "it looks like Kubernetes YAML: workloads are Batsim JSON; a cluster's objects "
            "convert from `kubectl get nodes,pods,deployments,hpa -A -o json` with "
            "`timewarp workload from-cluster`, and a Deployment with its traffic is a "
            "service of the workload (docs/services.md)"
        )
    data_lines = [ln for ln in lines if not ln.startswith(";")]
    if lines and (lines[0].startswith(";") or (data_lines and len(data_lines[0].split()) == 18)):
        return (
            "it looks like an SWF trace (Parallel Workloads Archive): convert it with "
            f"`timewarp workload from-swf {path} -o wl.json`"
        )
    if lines and "cpu_milli" in lines[0] and "," in lines[0]:
        return (
            "it looks like an Alibaba GPU trace's CSV: convert it with `timewarp workload "
            "from-alibaba PODS.csv --nodes NODES.csv -o wl.json -p cluster.xml`"
        )
    return ""


def _read_json(path: str) -> dict[str, Any]:
    try:
        if stat.S_ISCHR(os.stat(path).st_mode) or stat.S_ISBLK(os.stat(path).st_mode):
            # /dev/zero never ends (a pipe, as `-w <(gen)` gives, is fine)
            raise WorkloadError(f"{path}: a device, not a workload file")
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise WorkloadError(f"{path}: no such workload file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        hint = format_hint(path)
        if hint:
            raise WorkloadError(f"{path}: not a Batsim JSON workload: {hint}") from None
        if isinstance(exc, UnicodeDecodeError):
            raise WorkloadError(f"{path}: cannot read ({exc})") from None
        raise WorkloadError(f"{path}: malformed JSON at line {exc.lineno} ({exc.msg})") from None
    except RecursionError:  # Python's json recurses per level: 100,000 '[' exhaust it
        raise WorkloadError(f"{path}: JSON nested too deeply to read") from None
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read ({exc})") from None
    if not isinstance(data, dict):
        raise WorkloadError(f"{path}: top level must be a JSON object with jobs and profiles")
    if "jobs" not in data and format_hint(path, data):
        raise WorkloadError(f"{path}: not a Batsim JSON workload: {format_hint(path, data)}")
    return data


def load_workload(path: str | Path, name: str, nb_compute: int) -> Workload:
    """Read and validate one workload file (``name`` is ``w0``, ``w1``…)."""
    path = str(path)
    data = _read_json(path)
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
    return Workload(name, path, jobs, dict(profiles), _services(data, path))


def _services(data: dict[str, Any], path: str) -> list[ServiceSpec]:
    if "services" not in data:
        return []
    try:
        return parse_services(data["services"], path)
    except ServiceError as exc:
        raise WorkloadError(str(exc)) from None


# timewarp's extension: API objects created when the simulation begins, CRDs first
DECLARED_KEYS = ("customResourceDefinitions", "customResources")


def read_declared_objects(path: str | Path) -> list[tuple[str, dict[str, Any]]]:
    """The CustomResourceDefinitions, then the custom resources, a workload file
    declares (``customResourceDefinitions``, ``customResources``: lists of objects as
    ``kubectl apply`` takes them), each with where it is (``w.json: customResources[0]``);
    their shape only is checked here, the API's admission later."""
    path = str(path)
    data = _read_json(path)
    out = []
    for key in DECLARED_KEYS:
        items = data.get(key, [])
        if not isinstance(items, list):
            raise WorkloadError(f"{path}: {key}: expected a list of objects, got {items!r}")
        for index, obj in enumerate(items):
            where = f"{path}: {key}[{index}]"
            if not isinstance(obj, dict):
                raise WorkloadError(f"{where}: expected an object, got {obj!r}")
            for name in ("apiVersion", "kind"):
                if not isinstance(obj.get(name), str) or not obj[name]:
                    raise WorkloadError(f"{where}.{name}: missing")
            out.append((where, obj))
    return out


def read_services(path: str | Path) -> list[ServiceSpec]:
    """The services a workload file declares, checked; its jobs are not (the simulator
    that read the file judged them: ``timewarp broker`` learns the file from it)."""
    path = str(path)
    return _services(_read_json(path), path)


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
    if kind in PTASK_TYPES:  # its computation alone (communication adds to it)
        flops = ptask_matrices(profile, len(host_speeds))[0]
        return max((f / speed for f, speed in zip(flops, host_speeds, strict=True)), default=0.0)
    # parallel_homogeneous
    if durations:
        return max(
            float(durations[c]) if c in durations else profile["cpu"] / speed
            for c, speed in zip(host_classes, host_speeds, strict=True)
        )
    return max(profile["cpu"] / speed for speed in host_speeds)


def ptask_matrices(profile: dict[str, Any], hosts: int) -> tuple[list[float], list[float]]:
    """A parallel profile's computation vector and communication matrix (row-major,
    ``[]``: none) on ``hosts`` hosts, as Batsim 4.2.1 generates them."""
    kind = profile["type"]
    if kind == "parallel":
        return [float(c) for c in profile["cpu"]], [float(c) for c in profile["com"]]
    if kind == "parallel_homogeneous_total":
        cpu, com = profile["cpu"] / hosts, profile["com"] / hosts
    else:
        cpu, com = float(profile["cpu"]), float(profile.get("com", 0))
    matrix = []
    if com > 0:
        matrix = [0.0 if x == y else com for y in range(hosts) for x in range(hosts)]
    return [cpu] * hosts, matrix


def has_communication(profile: dict[str, Any]) -> bool:
    """Whether a profile's task sends bytes between its hosts (a ptask with a network)."""
    kind = profile["type"]
    if kind == "parallel":
        return any(c > 0 for c in profile["com"])
    if kind in ("parallel_homogeneous", "parallel_homogeneous_total"):
        return profile.get("com", 0) > 0
    return False


def plain_delay(profile: dict[str, Any]) -> float | None:
    """A ``delay`` profile without timewarp's extensions (most jobs): its run time on any
    hosts, known without looking at them; else ``None`` (see :func:`base_duration`)."""
    if profile["type"] == "delay" and "timewarp" not in profile:
        return float(profile["delay"])
    return None


def has_sharing_slowdown(profile: dict[str, Any]) -> bool:
    return bool((profile.get("timewarp") or {}).get("sharing_slowdown", False))
