"""Figures, summary table and plots of a finished simulation (Batsim's CSV outputs)."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

# the figures of out_schedule.csv that mean something only once a job has ended
CONTROLLER_WORKLOAD = "k8s"  # the Batsim workload of the pods controllers make
KILLED = "COMPLETED_KILLED"
_JOB_FIGURES = (
    "makespan",
    "mean_waiting_time",
    "mean_slowdown",
    "max_waiting_time",
    "mean_turnaround_time",
)


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _count_jobs(path: Path) -> tuple[int, int]:
    """(rows, controller pods deleted) of a jobs.csv: the pods of Deployments and other
    controllers (Batsim workload "k8s") end killed when they are scaled down or their
    service ends — deleted, not failed."""
    if not path.exists():
        return 0, 0
    rows = deleted = 0
    with open(path, newline="") as f:
        for job in csv.DictReader(f):
            rows += 1
            if job.get("workload_name") == CONTROLLER_WORKLOAD and job.get("final_state") == KILLED:
                deleted += 1
    return rows, deleted


def speedup(simulated_s: float, wall_s: float) -> float | None:
    """Simulated seconds per wall-clock second (None when either is not positive)."""
    if simulated_s > 0 and wall_s > 0:
        return simulated_s / wall_s
    return None


def format_speedup(value: float | None) -> str:
    """``1,234x``, ``12.3x``, ``0.42x``: never ``0x`` for a run slower than real time."""
    if value is None:
        return ""
    if value >= 100:
        return f"{value:,.0f}x"
    if value >= 1:
        return f"{value:.1f}x"
    return f"{value:.2g}x"


def summarise(
    prefix: Path, stats: dict[str, Any], wall_s: float, simulated_s: float | None = None
) -> dict[str, Any]:
    """The figures of a run, from ``PREFIX_schedule.csv``/``_jobs.csv`` and the broker.

    ``wall_s``: the simulation's wall time; ``simulated_s``: the simulated time at its end
    (the speed-up is their ratio; without it, the makespan's). A run in which no job
    ended has no makespan, waiting time or slowdown (Batsim's zeros would read as
    figures): its summary says where it stopped instead."""
    schedule = _rows(Path(f"{prefix}_schedule.csv"))
    # jobs.csv read row by row: a list of its rows would cost ~1.7 KiB per job at the end
    # of the run, the broker's peak (issue 29)
    jobs, deleted = _count_jobs(Path(f"{prefix}_jobs.csv"))
    fig: dict[str, Any] = {"wall_s": round(wall_s, 3)}
    if schedule:
        row = schedule[0]
        for key in ("nb_jobs", "nb_jobs_success", "nb_jobs_rejected", "nb_jobs_killed"):
            fig[key] = int(float(row[key]))
        if fig["nb_jobs"] > 0:
            for key in _JOB_FIGURES:
                fig[key] = float(row[key])
    elif jobs:
        fig["nb_jobs"] = jobs
    if deleted:
        fig["controller_pods_deleted"] = deleted
    makespan = fig.get("makespan") or 0.0
    capacity = stats.get("capacity_cores") or 0.0
    if makespan > 0 and capacity > 0:
        fig["utilisation"] = round(stats.get("core_seconds", 0.0) / (capacity * makespan), 4)
    if simulated_s is not None:
        fig["simulated_s"] = round(simulated_s, 3)
    ratio = speedup(simulated_s if simulated_s is not None else makespan, wall_s)
    if ratio is not None:
        fig["speedup"] = round(ratio, 3 if ratio < 10 else 1)
    for key in (
        "rejected_by_kubelet",
        "dynamic_jobs",
        "pods_outside_batsim",
        "pods_deferred",
        "pods_garbage_collected",
        "kills",
        "bindings",
        "nondeterministic_advances",
        "nondeterministic_causes",
        "timer_fires",
        "lockstep_windows",
        "lockstep_windows_with_decision",
        "realtime_max_lag_s",
    ):
        if key in stats:
            fig[key] = stats[key]
    return fig


_LABELS = [
    ("makespan", "makespan", "{:,.1f} s"),
    ("mean_waiting_time", "mean waiting time", "{:,.1f} s"),
    ("mean_slowdown", "mean slowdown", "{:,.3f}"),
    ("utilisation", "cpu utilisation", "{:.1%}"),
    ("nb_jobs", "jobs", "{}"),
    ("nb_jobs_success", "jobs succeeded", "{}"),
    ("nb_jobs_rejected", "jobs rejected", "{}"),
    ("dynamic_jobs", "jobs made by controllers (dynamic)", "{}"),
    ("pods_outside_batsim", "pods outside Batsim (run until deleted)", "{}"),
    ("pods_deferred", "pods wanted, never created (500 per 25 s: CreationsDeferred)", "{:,}"),
    ("pods_garbage_collected", "terminated pods deleted (--terminated-pod-gc-threshold)", "{:,}"),
    ("rejected_by_kubelet", "pods refused by the kubelet (over-allocation)", "{}"),
    ("nondeterministic_advances", "non-deterministic advances", "{}"),
    ("seed", "seed (--seed: entropy and hash order)", "{}"),
]


_ONLY_IF_NONZERO = {
    "dynamic_jobs",
    "pods_outside_batsim",
    "pods_deferred",
    "pods_garbage_collected",
}


def _outputs_row(figures: dict[str, Any]) -> str:
    outputs = figures.get("outputs", "complete")
    if outputs == "none":
        return "none: the simulator wrote no CSV"
    if outputs == "partial":
        return "PARTIAL: the jobs that ended before the stop (and those running, in the Gantt)"
    return "complete"


def print_summary(
    figures: dict[str, Any], stream: TextIO, title: str = "timewarp simulate"
) -> None:
    from rich.console import Console
    from rich.table import Table

    outputs = figures.get("outputs", "complete")
    if figures.get("stopped_by") == "no progress":
        title += " — stopped: no progress (PARTIAL outputs)"
    elif "stopped_at_s" in figures:
        title += " — stopped at --until (PARTIAL outputs)"
    elif outputs != "complete":
        title += " — PARTIAL outputs (stopped early)" if outputs == "partial" else " — no outputs"
    table = Table(title=title, show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("outputs", _outputs_row(figures))
    simulated = figures.get("simulated_s")
    if "makespan" not in figures and simulated is not None:
        table.add_row("no job ended", f"stopped at simulated t={simulated:,.1f} s")
    for key, label, fmt in _LABELS:
        if key in _ONLY_IF_NONZERO and not figures.get(key):
            continue
        if key in figures:
            value = fmt.format(figures[key])
            deleted = figures.get("controller_pods_deleted")
            if key == "nb_jobs_success" and deleted:
                value += (
                    f" (and {deleted} pods deleted by their controller: scale-downs, not failures)"
                )
            table.add_row(label, value)
    for cause in figures.get("nondeterministic_causes", ()):
        table.add_row("  cause", cause)  # (stall guard, input from outside)
    if simulated is not None and "makespan" in figures and simulated != figures["makespan"]:
        table.add_row("simulated time at the end", f"{simulated:,.1f} s")
    table.add_row("wall time of the simulation", f"{figures['wall_s']:.2f} s")
    if "speedup" in figures:
        table.add_row("speed-up (simulated / that wall time)", format_speedup(figures["speedup"]))
    if "command_wall_s" in figures:
        extra = ["start-up", "shut-down"]
        if "plots_s" in figures:
            extra.append(f"plots {figures['plots_s']:.1f} s (--no-plots skips them)")
        table.add_row(
            "wall time of the whole command",
            f"{figures['command_wall_s']:.2f} s (with {', '.join(extra)})",
        )
    if "plots" in figures:
        table.add_row("plots", figures["plots"])
    Console(file=stream, width=110).print(table)
    if figures.get("outputs_dir"):  # on a line of its own: never cut to fit a table cell
        print(f"outputs in {figures['outputs_dir']}/", file=stream)
    if figures.get("kubectl"):  # the observer's kubeconfig: read-only, changes nothing
        print(f"kubectl (while a run goes on): {figures['kubectl']}", file=stream)


# --------------------------------------------------------------------------- plots


def _job_spans(prefix: Path) -> list[tuple[float, float, list[int], bool | str]]:
    """(start, end, resource ids, how it ended: see ``commands.plots.Lanes``) of every job
    that ran."""
    spans: list[tuple[float, float, list[int], bool | str]] = []
    for job in _rows(Path(f"{prefix}_jobs.csv")):
        if not job.get("starting_time") or not job.get("allocated_resources"):
            continue
        start, end = float(job["starting_time"]), float(job["finish_time"])
        state = job.get("final_state", "")
        ok: bool | str = state == "COMPLETED_SUCCESSFULLY"
        if state == KILLED and job.get("workload_name") == CONTROLLER_WORKLOAD:
            ok = "deleted"
        spans.append((start, end, _expand(job["allocated_resources"]), ok))
    # a partial run: the jobs still running at the stop, drawn up to it
    for job in _rows(Path(f"{prefix}_running.csv")):
        start, end = float(job["starting_time"]), float(job["stopped_at"])
        spans.append((start, end, _expand(job["allocated_resources"]), "running"))
    return spans


def plot(prefix: Path, out_dir: Path, node_names: Sequence[str] = ()) -> list[Path]:
    """``gantt.png`` (jobs on nodes over time) and ``utilisation.png`` (running pods,
    whole cluster and per node); ``node_names[i]`` names resource ``i``. Nothing is
    drawn (an empty list returned) when no job ran. Each file is written atomically."""
    spans = _job_spans(prefix)
    if not spans:
        return []
    import matplotlib

    matplotlib.use("Agg")
    from commands import plots

    lanes: dict[int, list[tuple[float, float, bool | str]]] = {}
    for start, end, resources, ok in spans:
        for res in resources:
            lanes.setdefault(res, []).append((start, end, ok))
    names = {res: node_names[res] if res < len(node_names) else f"res {res}" for res in lanes}
    return [
        plots.gantt(lanes, names, out_dir / "gantt.png"),
        plots.utilisation(lanes, names, out_dir / "utilisation.png"),
    ]


def _expand(intervals: str) -> list[int]:
    out: list[int] = []
    for part in intervals.split():
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return out
