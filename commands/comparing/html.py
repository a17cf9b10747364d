"""One self-contained HTML page for a comparison (or one run): the figures table, the
plots as PNG data URIs (nothing fetched: it opens offline, from a mail attachment), the
sameness of inputs and seeds, and each run's manifest.

Plots: with replicates, the spread over seeds of the key figures (a dot per run, a bar at
the mean); the ECDFs of waiting time and slowdown, the share of nodes busy over time, each
node's load, and per service its Ready replicas, latency p99 and failed requests over
time. Runs are told apart by colour *and* line style, and a series identical to an
earlier one says so in the legend (it would otherwise hide under it). Times are shown in
seconds, hours or days, whichever reads best.
"""

from __future__ import annotations

import base64
import html
import io
import json
import statistics
from typing import Any

from commands.comparing.figures import (
    BATCH,
    BEST,
    BEST_WITHIN_SPREAD,
    SERVICE,
    Group,
    has_batch,
    sameness,
    services_of,
)
from commands.comparing.runs import Run
from commands.comparing.table import rows
from commands.timeaxis import time_unit

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
STYLES = ("-", "--", ":", "-.")


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=90)
    finally:
        plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _style(i: int) -> dict[str, Any]:
    return {"color": COLOURS[i % len(COLOURS)], "linestyle": STYLES[i % len(STYLES)]}


class _Series:
    """Labels series, noting one identical to an earlier one."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def label(self, label: str, data: Any) -> str:
        key = json.dumps(data, default=float)
        if key in self.seen:
            return f"{label} (identical to {self.seen[key]})"
        self.seen[key] = label
        return label


def _ecdf(groups: list[Group], attr: str, title: str, xlabel: str, log: bool) -> str | None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6), layout="constrained")
    names = _Series()
    drawn = False
    for i, group in enumerate(groups):
        values = sorted(v for run in group.runs for v in getattr(run, attr))
        if not values:
            continue
        # from 0 at the smallest value: a distribution of one value is a visible step
        ys = [0.0] + [(k + 1) / len(values) for k in range(len(values))]
        ax.step(
            [values[0], *values],
            ys,
            where="post",
            label=names.label(group.label, values),
            **_style(i),
        )
        drawn = True
    if not drawn:
        plt.close(fig)
        return None
    if log and ax.get_xlim()[1] > 10:
        ax.set_xscale("symlog", linthresh=1)
    ax.set_xlim(left=0 if attr == "waiting" else None)  # no negative waits to show
    ax.set(title=title, xlabel=xlabel, ylabel="share of jobs ≤ x", ylim=(0, 1.02))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def _over_time(
    groups: list[Group], series: Any, title: str, ylabel: str, horizon: float
) -> str | None:
    """``series(run)`` → (times, values) or None; one step curve per run."""
    import matplotlib.pyplot as plt

    scale, unit = time_unit(horizon)
    fig, ax = plt.subplots(figsize=(8, 3.2), layout="constrained")
    names = _Series()
    drawn = False
    for i, group in enumerate(groups):
        for k, run in enumerate(group.runs):
            got = series(run)
            if not got or not got[0]:
                continue
            times, values = got
            label = names.label(group.label, [times, values]) if k == 0 else None
            xs = [t / scale for t in times]
            ys = [float("nan") if v is None else v for v in values]
            alpha = 1.0 if len(group.runs) == 1 else 0.6
            ax.step(xs, ys, where="post", label=label, alpha=alpha, **_style(i))
            drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.set(title=title, xlabel=f"simulated time ({unit})", ylabel=ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def _node_load(groups: list[Group]) -> str | None:
    import matplotlib.pyplot as plt

    nodes = sorted({n for g in groups for run in g.runs for n in run.node_load})
    if not nodes:
        return None
    fig, ax = plt.subplots(figsize=(min(16, 4 + 0.25 * len(nodes) * len(groups)), 3.6),
                           layout="constrained")  # fmt: skip
    width = 0.8 / len(groups)
    for i, group in enumerate(groups):
        loads = [
            sum(run.node_load.get(n, 0.0) for run in group.runs) / len(group.runs) for n in nodes
        ]
        xs = [k + (i - (len(groups) - 1) / 2) * width for k in range(len(nodes))]
        ax.bar(xs, loads, width=width, color=COLOURS[i % len(COLOURS)], label=group.label,
               hatch=("", "//", "..", "xx")[i % 4], edgecolor="white")  # fmt: skip
    step = max(1, len(nodes) // 40)
    ax.set_xticks(range(0, len(nodes), step), nodes[::step], rotation=90, fontsize=6)
    ax.set(title="Load per node: pods running on it, on average over the run", ylabel="pods")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


SPREAD_BATCH = ("makespan", "waiting_mean", "slowdown_mean")
SPREAD_SERVICE = ("failed_share", "latency_p99", "replica_hours")


def _spread(groups: list[Group]) -> str | None:
    """With replicates: per key figure, each run's value as a dot and the group's mean as
    a bar, one column per group — which is better, and by how much against the seeds."""
    import matplotlib.pyplot as plt

    if all(len(g.runs) < 2 for g in groups):
        return None
    wanted = [(f, None) for f in BATCH if f.key in SPREAD_BATCH]
    wanted += [
        (f, name) for name in services_of(groups) for f in SERVICE if f.key in SPREAD_SERVICE
    ]
    panels = [(f, svc) for f, svc in wanted if any(g.values(f.key, svc) for g in groups)]
    if not panels:
        return None
    cols = min(3, len(panels))
    rows_ = -(-len(panels) // cols)
    longest = max(len(g.label) for g in groups)  # rotated tick labels take height
    height = 2.6 + min(longest, 60) * 0.045
    fig, axes = plt.subplots(rows_, cols, figsize=(4.2 * cols, height * rows_), squeeze=False,
                             layout="constrained")  # fmt: skip
    for ax, (figure, service) in zip(axes.flat, panels, strict=False):
        for i, group in enumerate(groups):
            values = group.values(figure.key, service)
            if not values:
                continue
            colour = COLOURS[i % len(COLOURS)]
            n = len(values)
            xs = [i + (k - (n - 1) / 2) * min(0.5 / max(n, 1), 0.08) for k in range(n)]
            ax.scatter(xs, values, color=colour, s=18, alpha=0.8, zorder=3)
            ax.hlines(statistics.fmean(values), i - 0.3, i + 0.3, color=colour, linewidth=2.5)
        ax.set_xticks(range(len(groups)), [g.label for g in groups], rotation=30, ha="right",
                      fontsize=7)  # fmt: skip
        where = f"{service}: " if service else ""
        better = f" ({figure.better} is better)" if figure.better else ""
        ax.set_title(f"{where}{figure.label}{better}", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle("Spread over seeds: a dot per run, a bar at the mean", fontsize=9)
    return _png(fig)


def _service_series(name: str, attr: str) -> Any:
    """run → (tick times, the service's ``attr`` per tick), or None without the service."""

    def series(run: Run) -> tuple[list[float], list[Any]] | None:
        svc = run.services.get(name)
        return (svc.times, getattr(svc, attr)) if svc else None

    return series


def _horizon(groups: list[Group]) -> float:
    ends = [run.busy[0][-1] for g in groups for run in g.runs if run.busy[0]]
    ends += [svc.times[-1] for g in groups for run in g.runs for svc in run.services.values()]
    return max(ends, default=1.0)


def plots(groups: list[Group]) -> list[tuple[str, str]]:
    """(caption, data URI) of every plot."""
    horizon = _horizon(groups)
    out: list[tuple[str, str | None]] = [("Spread over seeds", _spread(groups))]
    if has_batch(groups):
        out.append(("Waiting time, ECDF", _ecdf(groups, "waiting", "Waiting time (ECDF)",
                                                "waiting time (s)", True)))  # fmt: skip
        out.append(("Slowdown, ECDF", _ecdf(groups, "slowdown", "Slowdown (ECDF)",
                                            "slowdown (turnaround ÷ run time)", True)))  # fmt: skip
        out.append(("Nodes busy over time", _over_time(
            groups, lambda r: r.busy, "Share of nodes running a pod", "nodes busy", horizon)))  # fmt: skip
        out.append(("Load per node", _node_load(groups)))
    for name in services_of(groups):
        for attr, caption, title, ylabel in (
            ("ready", "Ready replicas", "Ready replicas", "replicas"),
            ("p99", "latency p99", "latency p99 per metrics tick", "seconds"),
            ("failed_rate", "failed requests", "failed requests per second", "failed / s"),
        ):
            series = _service_series(name, attr)
            out.append((f"{name}: {caption}", _over_time(
                groups, series, f"Service {name}: {title}", ylabel, horizon)))  # fmt: skip
    return [(caption, uri) for caption, uri in out if uri]


_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:0.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;font-variant-numeric:tabular-nums}
td:first-child,th:first-child{text-align:left}
tr.section td{background:#eef;font-weight:bold;text-align:left}
td.best{background:#dfd;font-weight:bold}
td.best.within{background:#effaef;font-weight:normal}
figure{margin:0 0 1.5em}
figure img{max-width:100%;border:1px solid #ddd}
pre{background:#f6f6f6;padding:0.5em;overflow-x:auto;font-size:85%}
"""

# after loading, the page records how many of its plots decoded (a test reads it back
# from the rendered DOM; a person never sees it)
_SCRIPT = """
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  document.body.setAttribute('data-images', imgs.length);
  document.body.setAttribute('data-images-decoded',
    imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length);
});
"""


def _manifest(run: Run) -> str:
    m = run.manifest
    shown = {k: m.get(k) for k in ("schedulers", "inputs", "arguments", "mode", "timewarp", "seed")
             if k in m}  # fmt: skip
    return (
        f"<details><summary>{html.escape(run.label)}: {html.escape(str(run.path))}</summary>"
        f"<pre>{html.escape(json.dumps(shown, indent=1))}</pre></details>"
    )


def _decisions(groups: list[Group]) -> list[str]:
    """How many decisions of each kind each run took, by whom (``out_decisions.csv``)."""
    from collections import Counter

    runs = [run for g in groups for run in g.runs if run.decisions]
    if not runs:
        return []
    counts = {run.label: Counter((d["actor"], d["action"]) for d in run.decisions) for run in runs}
    keys = sorted({k for c in counts.values() for k in c})
    esc = html.escape
    head = "".join(f"<th>{esc(label)}</th>" for label in counts)
    out = ["<h2>Decisions</h2>", '<table id="decisions"><tr><th>who, what</th>' + head + "</tr>"]
    for actor, action in keys:
        cells = "".join(f"<td>{c[(actor, action)]:,}</td>" for c in counts.values())
        out.append(f"<tr><td>{esc(actor)}: {esc(action)}</td>{cells}</tr>")
    out.append("</table><p>Every decision with the cluster as it stood: each run's "
               "<code>out_decisions.csv</code>; one pod's life: <code>timewarp explain OUT POD"
               "</code>.</p>")  # fmt: skip
    return out


def _td(text: str) -> str:
    esc = html.escape
    if text.startswith(BEST):
        return f'<td class="best">{esc(text[len(BEST) :])}</td>'
    if text.startswith(BEST_WITHIN_SPREAD):
        plain = esc(text[len(BEST_WITHIN_SPREAD) :])
        return f'<td class="best within" title="best mean, within the spread">(★) {plain}</td>'
    return f"<td>{esc(text)}</td>"


def render(groups: list[Group], title: str) -> str:
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        "<h2>Figures</h2>",
    ]
    if len(groups) > 1:
        parts.append(
            "<p>Best value of each figure in green. A group of runs (e.g. one configuration "
            "over seeds) shows its mean ± σ [lowest–highest]; its best mean is pale green "
            "with (★) when its range overlaps another column's (the seeds alone could have "
            "made the difference).</p>"
        )
    header = "".join(f"<th>{esc(g.label)}{f' ({len(g.runs)} runs)' if len(g.runs) > 1 else ''}</th>"
                     for g in groups)  # fmt: skip
    parts.append(f'<table id="figures"><tr><th>figure</th>{header}</tr>')
    section = None
    for sec, label, cells in rows(groups):
        if sec != section:
            parts.append(
                f'<tr class="section"><td colspan="{len(groups) + 1}">{esc(sec)}</td></tr>'
            )
            section = sec
        tds = "".join(_td(c) for c in cells)
        parts.append(f"<tr><td>{esc(label)}</td>{tds}</tr>")
    parts.append("</table>")
    parts.append('<h2>Inputs and seeds</h2><table id="sameness">')
    for what, verdict in sameness(groups).items():
        parts.append(f"<tr><td>{esc(what)}</td><td>{esc(verdict)}</td></tr>")
    parts.append("</table><h2>Plots</h2>")
    for caption, uri in plots(groups):
        parts.append(f'<figure><img alt="{esc(caption)}" src="{uri}"><figcaption>{esc(caption)}'
                     "</figcaption></figure>")  # fmt: skip
    parts += _decisions(groups)
    parts.append("<h2>Runs</h2>")
    parts += [_manifest(run) for g in groups for run in g.runs]
    parts.append(f"<script>{_SCRIPT}</script></body></html>\n")
    return "\n".join(parts)
