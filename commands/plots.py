"""The two PNG plots of ``timewarp simulate``: the Gantt chart and the running pods.

Both are drawn from exact data: the step curve of running pods changes only where a
job starts or ends (no resampling that would invent fractional pods), and the per-node
heat map shows, for each time slice, the *most* pods a node ran at once in it (a whole
number). Bars are drawn as one collection (not one artist per job), so a run of tens of
thousands of jobs plots in about the time of a small one; node labels are thinned to
what can be read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from commands.outfiles import write_atomically
from commands.timeaxis import time_unit

# resource -> (start, end, how it ended): True succeeded, False failed or killed,
# "deleted" deleted by its controller (a scale-down: not a failure), "running" still
# running when a partial run stopped
Lanes = dict[int, list[tuple[float, float, bool | str]]]

MAX_LABELS = 40  # node labels on an axis; more are thinned to every k-th
OK_COLOUR, FAILED_COLOUR = "#4c72b0", "#c44e52"
DELETED_COLOUR, RUNNING_COLOUR = "#a0a0a0", "#55a868"
COLOURS = {
    True: OK_COLOUR,
    False: FAILED_COLOUR,
    "deleted": DELETED_COLOUR,
    "running": RUNNING_COLOUR,
}
LEGEND = {
    OK_COLOUR: "job (succeeded)",
    FAILED_COLOUR: "job (killed or failed)",
    DELETED_COLOUR: "pod deleted by its controller (scale-down)",
    RUNNING_COLOUR: "still running at the stop",
}


def _save(fig, path: Path) -> Path:  # type: ignore[no-untyped-def]
    try:
        write_atomically(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    finally:
        plt.close(fig)
    return path


def _node_ticks(ax, names: list[str], *, axis: str = "y") -> None:  # type: ignore[no-untyped-def]
    """One label per node, or every k-th when there are too many to read."""
    step = max(1, -(-len(names) // MAX_LABELS))
    positions = list(range(0, len(names), step))
    size = 8 if len(names) <= 20 else 6
    setter: Callable = ax.set_yticks if axis == "y" else ax.set_xticks
    setter(positions, [names[i] for i in positions], fontsize=size)
    if step > 1:
        label = ax.get_ylabel() if axis == "y" else ax.get_xlabel()
        ax.set_ylabel(f"{label} (1 name in {step} of {len(names)} shown)")


def _slots(spans: list[tuple[float, float, bool]]) -> tuple[list[int], int]:
    """The sub-row of each span when several run at once (compute sharing), greedy in
    start order, and how many sub-rows the lane needs."""
    order = sorted(range(len(spans)), key=lambda i: spans[i][:2])
    ends: list[float] = []
    slot_of = [0] * len(spans)
    for i in order:
        start, end, _ = spans[i]
        slot = next((k for k, e in enumerate(ends) if e <= start), None)
        if slot is None:
            ends.append(end)
            slot = len(ends) - 1
        else:
            ends[slot] = end
        slot_of[i] = slot
    return slot_of, max(1, len(ends))


def gantt(lanes: Lanes, names: dict[int, str], path: Path) -> Path:
    """One row per node (top to bottom in resource order); a job is a bar from its start
    to its end. Jobs sharing a node at the same time split its row into sub-rows. Blue:
    succeeded; red: killed or failed; grey: a controller's pod it deleted (scale-down);
    green: still running when a partial run stopped (drawn to the stop)."""
    order = sorted(lanes)
    height = min(12.0, max(3.0, 1.2 + 0.25 * len(order)))
    horizon = max(e for spans in lanes.values() for _, e, _ in spans)
    scale, unit = time_unit(horizon)  # a week in seconds is unreadable: hours or days
    fig, ax = plt.subplots(figsize=(11, height))
    boxes, colours = [], []
    shared = 0
    for row, res in enumerate(order):
        spans = lanes[res]
        slot_of, depth_n = _slots(spans)
        shared = max(shared, depth_n)
        depth = 0.8 / depth_n
        for (start, end, ok), slot in zip(spans, slot_of, strict=True):
            y0 = row - 0.4 + slot * depth
            y1 = y0 + depth
            x0, x1 = start / scale, end / scale
            boxes.append([(x0, y0), (x0, y1), (x1, y1), (x1, y0)])
            colours.append(COLOURS[ok])
    edges = "white" if len(boxes) <= 2000 and len(order) <= 100 else "none"
    ax.add_collection(PolyCollection(boxes, facecolors=colours, edgecolors=edges, linewidths=0.3))
    ax.set_xlim(0, horizon / scale * 1.01 or 1)
    ax.set_ylim(len(order) - 0.5, -0.5)  # every bar inside its row, first node on top
    ax.set_xlabel(f"simulated time ({unit})")
    ax.set_ylabel("node")
    _node_ticks(ax, [names[r] for r in order])
    handles = [Patch(color=OK_COLOUR, label=LEGEND[OK_COLOUR])]
    handles += [
        Patch(color=c, label=LEGEND[c])
        for c in (FAILED_COLOUR, DELETED_COLOUR, RUNNING_COLOUR)
        if c in colours
    ]
    if shared > 1:
        handles.append(
            Patch(
                facecolor="none",
                edgecolor="none",
                label=f"jobs sharing a node at once split its row (up to {shared})",
            )
        )
    ax.set_title(f"Jobs on nodes (Gantt): {sum(map(len, lanes.values()))} job placements")
    # at the foot of the figure: a legend inside the axes would hide the first rows' bars
    fig.legend(
        handles=handles, loc="lower center", ncol=min(len(handles), 3), fontsize=8, frameon=False
    )
    fig.tight_layout(rect=(0, 0.35 / height, 1, 1))
    return _save(fig, path)


def _running_steps(spans: list[tuple[float, float, bool]]) -> tuple[np.ndarray, np.ndarray]:
    """Exact step curve: the times where the count changes and the count from each."""
    times = np.array([s for s, _, _ in spans] + [e for _, e, _ in spans], dtype=float)
    deltas = np.array([1] * len(spans) + [-1] * len(spans), dtype=int)
    order = np.lexsort((deltas, times))  # an end and a start at one instant: end first
    times, counts = times[order], np.cumsum(deltas[order])
    last = np.r_[times[1:] != times[:-1], True]  # one value per instant: the last
    return times[last], counts[last]


def utilisation(lanes: Lanes, names: dict[int, str], path: Path, bins: int = 400) -> Path:
    """Top: pods running in the whole cluster (exact). Bottom: per node and time slice,
    the most pods it ran at once in that slice (a whole number; 0 shows as white)."""
    order = sorted(lanes)
    everything = [span for res in order for span in lanes[res]]
    horizon = max(e for _, e, _ in everything) or 1.0
    scale, unit = time_unit(horizon)
    edges = np.linspace(0.0, horizon, bins + 1)
    grid = np.zeros((len(order), bins), dtype=int)
    for row, res in enumerate(order):
        times, counts = _running_steps(lanes[res])
        # the maximum over a slice: the value at its start and every value set inside it
        at_start = np.searchsorted(times, edges[:-1], side="right") - 1
        grid[row] = np.where(at_start >= 0, counts[np.clip(at_start, 0, None)], 0)
        inside = np.searchsorted(edges, times, side="right") - 1
        keep = (inside >= 0) & (inside < bins)
        np.maximum.at(grid[row], inside[keep], counts[keep])
    heat_height = min(8.0, max(2.0, 0.18 * len(order)))
    fig, (top, heat) = plt.subplots(
        2,
        1,
        figsize=(11, 2.6 + heat_height),
        sharex=True,
        gridspec_kw={"height_ratios": [2.2, heat_height]},
        layout="constrained",
    )
    times, counts = _running_steps(everything)
    top.step(np.r_[0.0, times] / scale, np.r_[0, counts], where="post", color=OK_COLOUR)
    top.set_ylim(0, max(1, int(counts.max())) * 1.08)
    top.yaxis.set_major_locator(MaxNLocator(integer=True))
    top.set_ylabel("running pods")
    top.set_title("Running pods: whole cluster (top), per node (bottom)")
    top.grid(axis="y", alpha=0.3)
    peak = max(1, int(grid.max()))
    colours = plt.get_cmap("viridis", peak)(np.arange(peak))
    cmap = ListedColormap(np.vstack([[1, 1, 1, 1], colours]))  # 0 pods: white
    norm = BoundaryNorm(np.arange(-0.5, peak + 1.5), cmap.N)
    image = heat.imshow(
        grid,
        aspect="auto",
        interpolation="nearest",
        cmap=cmap,
        norm=norm,
        extent=(0, horizon / scale, len(order) - 0.5, -0.5),
    )
    heat.set_xlabel(f"simulated time ({unit})")
    heat.set_ylabel("node")
    _node_ticks(heat, [names[r] for r in order])
    bar = fig.colorbar(image, ax=heat, fraction=0.04, pad=0.01)
    bar.set_label("most pods at once in the slice")
    bar.set_ticks(range(0, peak + 1, max(1, -(-(peak + 1) // 10))))
    return _save(fig, path)
