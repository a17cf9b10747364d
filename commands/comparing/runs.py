"""A finished run's outputs (``timewarp simulate -o DIR``) read back as figures for
``timewarp compare`` and ``timewarp report``.

Batch figures come from ``out_jobs.csv``, over the workload's jobs only (the pods of
services and of other controllers, Batsim workload ``k8s``, are not batch jobs): waiting
time and slowdown (turnaround ÷ run time, Batsim's stretch) as distributions, the
makespan (the last end less the first submission). Utilisation over time is the share of
nodes running at least one pod (``out_machine_states.csv``); a node's load, the pods it
ran on average over the run (pod-seconds ÷ the run's length). Service figures come from
``out_services.csv``, per service: requests, failed requests and their share, the
latency percentiles averaged over the metrics ticks weighted by the requests completed in
each (percentiles of a tick cannot be merged exactly), the worst tick's p99, the share of
ticks whose p99 met a target, mean and highest Ready replicas and replica-hours (Ready
replicas × tick length). ``manifest.json`` gives the inputs' hashes, the schedulers and
any seed.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DECISIONS_CSV = (
    "out_decisions.csv"  # every binding, deletion, scaling... (broker/cluster/decisions.py)
)
DECISION_KEY = ("time", "action", "kind", "namespace", "name", "target")
CONTROLLER_WORKLOAD = "k8s"  # the Batsim workload of pods made by controllers (dynamic jobs)
OK = "COMPLETED_SUCCESSFULLY"


class RunError(ValueError):
    """Not a run's output folder."""


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0–100), linear between order statistics (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass
class ServiceFigures:
    name: str
    times: list[float] = field(default_factory=list)
    ready: list[float] = field(default_factory=list)
    desired: list[float] = field(default_factory=list)
    p99: list[float | None] = field(default_factory=list)
    failed_rate: list[float] = field(default_factory=list)
    figures: dict[str, float | None] = field(default_factory=dict)


@dataclass
class Run:
    """One run folder, read."""

    path: Path
    label: str
    manifest: dict[str, Any]
    waiting: list[float]
    slowdown: list[float]
    figures: dict[str, float | None]
    busy: tuple[list[float], list[float]]  # times, share of nodes busy
    node_load: dict[str, float]  # node name -> mean pods running
    services: dict[str, ServiceFigures]
    seed: str | None = None  # the seed a sweep gave the run (its manifest may not say)
    placements: dict[str, tuple[float, str]] = field(default_factory=dict)  # job -> start, node
    decisions: list[dict[str, str]] = field(default_factory=list)  # out_decisions.csv


def _node_names(manifest: dict[str, Any], base: Path) -> list[str]:
    """The platform's compute hosts in resource order, if the platform file is still there
    and the same (its hash); else no names."""
    from simulator.platform import PlatformError, load_platform

    args = manifest.get("arguments") or []
    for flag, value in zip(args, args[1:], strict=False):
        if flag in ("-p", "--platform"):
            path = Path(value) if Path(value).is_absolute() else base / value
            try:
                return [h.name for h in load_platform(path).compute]
            except (PlatformError, OSError):
                return []
    return []


def _batch(rows: list[dict[str, str]]) -> tuple[list[float], list[float], dict[str, Any]]:
    jobs = [r for r in rows if r.get("workload_name") != CONTROLLER_WORKLOAD]
    ended = [r for r in jobs if r.get("finish_time")]
    waiting = [float(r["waiting_time"]) for r in ended if r.get("waiting_time")]
    slowdown = [
        float(r["turnaround_time"]) / float(r["execution_time"])
        for r in ended
        if r.get("execution_time") and float(r["execution_time"]) > 0
    ]
    figures: dict[str, Any] = {
        "jobs": len(jobs),
        "jobs_failed": sum(1 for r in jobs if r.get("final_state") != OK),
    }
    if ended:
        first = min(float(r["submission_time"]) for r in jobs)
        figures["makespan"] = max(float(r["finish_time"]) for r in ended) - first
    for name, values in (("waiting", waiting), ("slowdown", slowdown)):
        if values:
            figures[f"{name}_mean"] = sum(values) / len(values)
            for q in (50, 95, 99):
                figures[f"{name}_p{q}"] = percentile(values, q)
            figures[f"{name}_max"] = max(values)
    return waiting, slowdown, figures


def _busy(rows: list[dict[str, str]]) -> tuple[list[float], list[float]]:
    times, shares = [], []
    for row in rows:
        total = sum(
            int(float(row[k]))
            for k in (
                "nb_sleeping",
                "nb_switching_on",
                "nb_switching_off",
                "nb_idle",
                "nb_computing",
            )
        )
        if total:
            times.append(float(row["time"]))
            shares.append(int(float(row["nb_computing"])) / total)
    return times, shares


def _time_average(times: list[float], values: list[float], end: float) -> float | None:
    """The mean of a step curve from its first time to ``end``."""
    if not times or end <= times[0]:
        return None
    area = 0.0
    for i, (t, v) in enumerate(zip(times, values, strict=True)):
        nxt = times[i + 1] if i + 1 < len(times) else end
        area += v * (max(nxt, t) - t)
    return area / (end - times[0])


def _node_load(rows: list[dict[str, str]], names: list[str]) -> dict[str, float]:
    busy: dict[int, float] = {}
    ends = [float(r["finish_time"]) for r in rows if r.get("finish_time")]
    if not ends:
        return {}
    length = max(ends) - min(float(r["submission_time"]) for r in rows)
    for row in rows:
        if not row.get("starting_time") or not row.get("allocated_resources"):
            continue
        span = float(row["finish_time"]) - float(row["starting_time"])
        for res in _expand(row["allocated_resources"]):
            busy[res] = busy.get(res, 0.0) + span
    count = max(len(names), max(busy, default=-1) + 1)
    label = lambda r: names[r] if r < len(names) else f"res {r}"  # noqa: E731
    return {label(r): busy.get(r, 0.0) / length if length > 0 else 0.0 for r in range(count)}


def _expand(intervals: str) -> list[int]:
    out: list[int] = []
    for part in intervals.split():
        low, _, high = part.partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return out


def _services(rows: list[dict[str, str]], slo_p99: float | None) -> dict[str, ServiceFigures]:
    out: dict[str, ServiceFigures] = {}
    last: dict[str, float] = {}
    weights: dict[str, dict[str, float]] = {}
    for row in rows:
        name = row["service"]
        svc = out.setdefault(name, ServiceFigures(name))
        t = float(row["time"])
        tick = t - last.get(name, 0.0)
        last[name] = t
        ready = float(row["ready_replicas"])
        svc.times.append(t)
        svc.ready.append(ready)
        svc.desired.append(float(row["desired_replicas"]))
        failed = float(row["failed_requests"] or 0)
        svc.failed_rate.append(failed / tick if tick > 0 else 0.0)
        p99 = float(row["latency_p99"]) if row["latency_p99"] else None
        svc.p99.append(p99)
        acc = weights.setdefault(name, {})
        completed = float(row["completed_requests"] or 0)
        acc["completed"] = acc.get("completed", 0) + completed
        acc["failed"] = acc.get("failed", 0) + failed
        acc["replica_s"] = acc.get("replica_s", 0) + ready * tick
        acc["ticks"] = acc.get("ticks", 0) + 1
        if p99 is not None and slo_p99 is not None and p99 <= slo_p99 and failed == 0:
            acc["ticks_ok"] = acc.get("ticks_ok", 0) + 1
        for q in ("p50", "p95", "p99"):
            value = row[f"latency_{q}"]
            if value and completed:
                acc[q] = acc.get(q, 0) + float(value) * completed
                acc[f"{q}_w"] = acc.get(f"{q}_w", 0) + completed
    for name, svc in out.items():
        acc = weights[name]
        total = acc["completed"] + acc["failed"]
        figures: dict[str, float | None] = {
            "requests": total,
            "failed": acc["failed"],
            "failed_share": acc["failed"] / total if total else None,
        }
        for q in ("p50", "p95", "p99"):
            figures[f"latency_{q}"] = acc[q] / acc[f"{q}_w"] if acc.get(f"{q}_w") else None
        known = [p for p in svc.p99 if p is not None]
        figures["latency_p99_worst_tick"] = max(known) if known else None
        if slo_p99 is not None:
            figures["ticks_within_slo"] = acc.get("ticks_ok", 0) / acc["ticks"]
        figures["replicas_mean"] = _time_average([0.0, *svc.times[:-1]], svc.ready, svc.times[-1])
        figures["replicas_max"] = max(svc.desired)
        figures["replica_hours"] = acc["replica_s"] / 3600
        svc.figures = figures
    return out


def service_figures(folder: Path) -> dict[str, dict[str, float | None]]:
    """Per service of the run in ``folder``, its figures (none without ``out_services.csv``)."""
    services = _services(_rows(Path(folder) / "out_services.csv"), None)
    return {name: svc.figures for name, svc in services.items()}


def read_run(
    path: Path, label: str | None = None, slo_p99: float | None = None, seed: Any = None
) -> Run:
    """The run in folder ``path``; RunError when it has no ``out_jobs.csv``."""
    path = Path(path)
    jobs_csv = path / "out_jobs.csv"
    if not jobs_csv.exists():
        raise RunError(
            f"{path}: not a run's folder (no out_jobs.csv; timewarp simulate -o writes one)"
        )
    try:
        manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = {}
    rows = _rows(jobs_csv)
    names = _node_names(manifest, Path.cwd())
    waiting, slowdown, figures = _batch(rows)
    busy = _busy(_rows(path / "out_machine_states.csv"))
    end = float(manifest.get("figures", {}).get("simulated_s") or 0) or (
        busy[0][-1] if busy[0] else 0.0
    )
    figures["utilisation_mean"] = _time_average(*busy, end) if busy[0] else None
    run_figures = manifest.get("figures") or {}
    figures["wall_s"] = run_figures.get("wall_s")
    figures["nondeterministic_advances"] = run_figures.get("nondeterministic_advances")
    return Run(
        path=path,
        label=label or path.name,
        manifest=manifest,
        waiting=waiting,
        slowdown=slowdown,
        figures=figures,
        busy=busy,
        node_load=_node_load(rows, names),
        services=_services(_rows(path / "out_services.csv"), slo_p99),
        seed=None if seed is None else str(seed),
        placements=_placements(rows, names),
        decisions=_rows(path / DECISIONS_CSV),
    )


def _placements(rows: list[dict[str, str]], names: list[str]) -> dict[str, tuple[float, str]]:
    """Job → (start, node) of every job that started (a binding the scheduler decided)."""
    out = {}
    for row in rows:
        if row.get("starting_time") and row.get("allocated_resources"):
            res = _expand(row["allocated_resources"])
            node = ",".join(names[r] if r < len(names) else f"res {r}" for r in res)
            out[row["job_id"]] = (float(row["starting_time"]), node)
    return out


def _decision(run: Run, row: dict[str, str] | None) -> str:
    if row is None:
        return f"{run.label} took no more decisions"
    what = f"{row['action']} {row['kind']} {row['namespace']}/{row['name']}".replace(" /", " ")
    target = f" -> {row['target']}" if row.get("target") else ""
    return f"{run.label}: {what}{target} at {float(row['time']):,.1f} s ({row['actor']})"


def first_decision_divergence(a: Run, b: Run) -> str | None:
    """The first decision (``out_decisions.csv``, in order) that differs between the runs
    in time, action, object or target — who took it may differ — or None when they took
    the same ones."""
    for i in range(max(len(a.decisions), len(b.decisions))):
        da = a.decisions[i] if i < len(a.decisions) else None
        db = b.decisions[i] if i < len(b.decisions) else None
        key = lambda d: None if d is None else tuple(d.get(k, "") for k in DECISION_KEY)  # noqa: E731
        if key(da) != key(db):
            return f"decision #{i + 1}: {_decision(a, da)}; {_decision(b, db)}"
    return None


def first_divergence(a: Run, b: Run) -> str | None:
    """Where ``b`` first decided otherwise than ``a``: from both runs' decision logs when
    they have them, else the earliest job started at another time or on another node
    (the decisions as they landed); None when nothing differs."""
    if a.decisions and b.decisions:
        return first_decision_divergence(a, b)
    differ = [
        (min(a.placements[j][0], b.placements[j][0]), j)
        for j in a.placements.keys() & b.placements.keys()
        if a.placements[j] != b.placements[j]
    ]
    if not differ:
        return None
    _, job = min(differ, key=lambda d: (d[0], natural(d[1])))
    (ta, na), (tb, nb) = a.placements[job], b.placements[job]
    return (
        f"job {job}: {a.label} started it at {ta:,.1f} s on {na}, {b.label} at {tb:,.1f} s on {nb}"
    )


def natural(text: str) -> tuple:
    """``job 9`` before ``job 10``."""
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


def inputs_of(run: Run) -> tuple[str, ...]:
    """The run's inputs by content (their hashes, in the order given)."""
    return tuple((run.manifest.get("inputs") or {}).values())


def seed_of(run: Run) -> str | None:
    """The run's seed: the sweep's, else the manifest's ``seed`` or ``--seed`` argument."""
    if run.seed is not None:
        return run.seed
    if "seed" in run.manifest:
        return str(run.manifest["seed"])
    args = run.manifest.get("arguments") or []
    for flag, value in zip(args, args[1:], strict=False):
        if flag == "--seed":
            return value
    return None
