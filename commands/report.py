"""Figures, summary table and plots of a finished simulation (Batsim's CSV outputs)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, TextIO


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def summarise(prefix: Path, stats: dict[str, Any], wall_s: float) -> dict[str, Any]:
    """The figures of a run, from ``PREFIX_schedule.csv``/``_jobs.csv`` and the broker."""
    schedule = _rows(Path(f"{prefix}_schedule.csv"))
    jobs = _rows(Path(f"{prefix}_jobs.csv"))
    fig: dict[str, Any] = {"wall_s": round(wall_s, 3)}
    if schedule:
        row = schedule[0]
        for key in (
            "makespan",
            "mean_waiting_time",
            "mean_slowdown",
            "max_waiting_time",
            "mean_turnaround_time",
        ):
            fig[key] = float(row[key])
        for key in ("nb_jobs", "nb_jobs_success", "nb_jobs_rejected", "nb_jobs_killed"):
            fig[key] = int(float(row[key]))
    elif jobs:
        fig["nb_jobs"] = len(jobs)
    makespan = fig.get("makespan") or 0.0
    capacity = stats.get("capacity_cores") or 0.0
    if makespan > 0 and capacity > 0:
        fig["utilisation"] = round(stats.get("core_seconds", 0.0) / (capacity * makespan), 4)
    if makespan > 0 and wall_s > 0:
        fig["speedup"] = round(makespan / wall_s, 1)
    for key in (
        "rejected_by_kubelet",
        "dynamic_jobs",
        "pods_outside_batsim",
        "kills",
        "bindings",
        "nondeterministic_advances",
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
    ("rejected_by_kubelet", "pods refused by the kubelet (over-allocation)", "{}"),
    ("nondeterministic_advances", "non-deterministic advances", "{}"),
    ("wall_s", "wall time", "{:.2f} s"),
    ("speedup", "speed-up (simulated / wall)", "{:,.0f}x"),
]


_ONLY_IF_NONZERO = {"dynamic_jobs", "pods_outside_batsim"}


def print_summary(figures: dict[str, Any], stream: TextIO) -> None:
    from rich.console import Console
    from rich.table import Table

    outputs = figures.get("outputs", "complete")
    title = "timewarp simulate"
    if outputs != "complete":
        title += " — PARTIAL outputs (stopped early)" if outputs == "partial" else " — no outputs"
    table = Table(title=title, show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    if outputs == "partial":
        table.add_row("outputs", "partial: only jobs that ended before the stop")
    elif outputs == "none":
        table.add_row("outputs", "none (the simulator wrote no CSV)")
    for key, label, fmt in _LABELS:
        if key in _ONLY_IF_NONZERO and not figures.get(key):
            continue
        if key in figures:
            table.add_row(label, fmt.format(figures[key]))
    Console(file=stream, width=100).print(table)


def plot(prefix: Path, out_dir: Path) -> list[Path]:
    """``gantt.png`` (jobs on resources over time) and ``utilisation.png`` (per node)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    jobs = [j for j in _rows(Path(f"{prefix}_jobs.csv")) if j.get("starting_time")]
    written = []
    fig, ax = plt.subplots(figsize=(10, 4))
    lanes: dict[str, list[tuple[float, float]]] = {}
    for job in jobs:
        start, end = float(job["starting_time"]), float(job["finish_time"])
        for res in _expand(job["allocated_resources"]):
            lanes.setdefault(res, []).append((start, end))
    ymap = {res: i for i, res in enumerate(sorted(lanes, key=int))}
    for res, spans in lanes.items():
        # stack concurrent jobs (compute sharing) inside the resource's lane: one
        # collection per (lane, slot), not one artist per job
        ends: list[float] = []
        slots: dict[int, list[tuple[float, float]]] = {}
        for start, end in sorted(spans):
            slot = next((i for i, e in enumerate(ends) if e <= start), None)
            if slot is None:
                ends.append(end)
                slot = len(ends) - 1
            else:
                ends[slot] = end
            slots.setdefault(slot, []).append((start, end - start))
        depth = 0.8 / max(1, len(ends))
        for slot, bars in slots.items():
            ax.broken_barh(
                bars,
                (ymap[res] - 0.4 + slot * depth, depth),
                facecolors=f"C{slot % 10}",
                edgecolor="black",
                linewidth=0.2,
            )
    ax.set_yticks(list(ymap.values()), [f"res {r}" for r in ymap])
    ax.set_xlabel("simulated time (s)")
    ax.set_title("Jobs on resources (Gantt)")
    fig.tight_layout()
    path = out_dir / "gantt.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    # per-node load: a heat map (nodes x time) under the cluster-wide curve
    import numpy as np

    horizon = max((e for spans in lanes.values() for _, e in spans), default=0.0) or 1.0
    bins = 400
    edges = np.linspace(0.0, horizon, bins + 1)
    order = sorted(lanes, key=int)
    grid = np.zeros((len(order), bins))
    for row, res in enumerate(order):
        for start, end in lanes[res]:
            # fraction of each bin covered by [start, end)
            overlap = np.clip(np.minimum(edges[1:], end) - np.maximum(edges[:-1], start), 0, None)
            grid[row] += overlap / (edges[1] - edges[0])
    fig, (top, heat) = plt.subplots(
        2,
        1,
        figsize=(10, 5),
        sharex=True,
        gridspec_kw={"height_ratios": [1, 2]},
        layout="constrained",
    )
    top.step(edges[:-1], grid.sum(axis=0), where="post", color="C0")
    top.set_ylabel("running pods")
    top.set_title("Load over time: whole cluster (top), per node (bottom)")
    image = heat.imshow(
        grid,
        aspect="auto",
        interpolation="nearest",
        cmap="viridis",
        extent=(0, horizon, len(order) - 0.5, -0.5),
    )
    heat.set_yticks(range(len(order)), [f"res {r}" for r in order], fontsize=6)
    heat.set_xlabel("simulated time (s)")
    fig.colorbar(image, ax=[top, heat], label="running pods", fraction=0.04)
    path = out_dir / "utilisation.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written


def _expand(intervals: str) -> list[str]:
    out = []
    for part in intervals.split():
        if "-" in part:
            a, b = part.split("-")
            out.extend(str(i) for i in range(int(a), int(b) + 1))
        elif part:
            out.append(part)
    return out
