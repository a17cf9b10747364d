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
        for key in ("makespan", "mean_waiting_time", "mean_slowdown", "max_waiting_time",
                    "mean_turnaround_time"):
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
    for key in ("rejected_by_kubelet", "kills", "bindings", "nondeterministic_advances", "timer_fires"):
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
    ("rejected_by_kubelet", "pods refused by the kubelet (over-allocation)", "{}"),
    ("nondeterministic_advances", "non-deterministic advances", "{}"),
    ("wall_s", "wall time", "{:.2f} s"),
    ("speedup", "speed-up (simulated / wall)", "{:,.0f}x"),
]


def print_summary(figures: dict[str, Any], stream: TextIO) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="timewarp simulate", show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, label, fmt in _LABELS:
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
        # stack concurrent jobs (compute sharing) inside the resource's lane
        ends: list[float] = []
        for start, end in sorted(spans):
            slot = next((i for i, e in enumerate(ends) if e <= start), None)
            if slot is None:
                ends.append(end)
                slot = len(ends) - 1
            else:
                ends[slot] = end
            depth = 0.8 / max(1, len(ends))
            ax.broken_barh([(start, end - start)], (ymap[res] - 0.4 + slot * depth, depth),
                           facecolors=f"C{slot % 10}", edgecolor="black", linewidth=0.2)
    ax.set_yticks(list(ymap.values()), [f"res {r}" for r in ymap])
    ax.set_xlabel("simulated time (s)")
    ax.set_title("Jobs on resources (Gantt)")
    fig.tight_layout()
    path = out_dir / "gantt.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    fig, ax = plt.subplots(figsize=(10, 4))
    for res in sorted(lanes, key=int):
        points = sorted([(s, 1) for s, _ in lanes[res]] + [(e, -1) for _, e in lanes[res]])
        xs, ys, level = [0.0], [0], 0
        for x, d in points:
            level += d
            xs.append(x)
            ys.append(level)
        ax.step(xs, ys, where="post", label=f"res {res}", linewidth=0.8)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("running pods")
    ax.set_title("Per-node load over time")
    if len(lanes) <= 16:
        ax.legend(fontsize=6, ncol=4)
    fig.tight_layout()
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
