"""Tables and plots of a sweep: ``runs.csv``, ``summary.csv``, ``plots/*.png``.

``runs.csv`` has one tidy row per run (factors, replicate, seed, status, error, metrics,
resources). ``summary.csv`` has one row per point — a configuration over its replicates
(``seeds``: the seeds of its successful runs) — with, for each metric, the number of
successful runs that have it (``<metric>_n``), the mean, the sample standard deviation σ
(n-1), the half-width of the 95 % confidence interval of the mean (Student's t, so small
replicate counts are not flattered) and the lowest and highest value: the spread over
seeds. Failed runs count in ``n_failed`` and never in the statistics.

Metrics are results (the batch figures, then per service ``<service>.<figure>``: requests,
failed requests and their share, latency percentiles, highest replicas, replica-hours —
``commands/comparing/runs.py`` reads them from the run's ``out_services.csv``) and run
costs (wall time, speed-up, non-deterministic advances), which come last in the tables
and are plotted apart (``plots/<factor>-cost.png``): they say what a run cost, not what
the scheduler did.
"""

from __future__ import annotations

import csv
import math
import re
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

RESULT_METRICS = ("makespan", "mean_waiting_time", "mean_slowdown", "utilisation")
COST_METRICS = ("wall_s", "speedup", "nondeterministic_advances")
METRICS = (*RESULT_METRICS, *COST_METRICS)
SERVICE_FIGURES = (
    "requests",
    "failed",
    "failed_share",
    "latency_p50",
    "latency_p95",
    "latency_p99",
    "replicas_max",
    "replica_hours",
)


def service_columns(services: Iterable[str]) -> list[str]:
    """``web.failed_share`` … for every service seen in the sweep."""
    return [f"{name}.{fig}" for name in sorted(set(services)) for fig in SERVICE_FIGURES]


EXTRA_COLUMNS = ("nb_jobs", "nb_jobs_success", "peak_rss_mb", "result_bytes")

# two-sided 95 % Student t quantiles t(0.975, df), df = 1..30; beyond: the normal 1.96 (+ a
# first-order correction, good to 3 digits)
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t975(df: int) -> float:
    if df < 1:
        raise ValueError("no confidence interval with fewer than 2 values")
    if df <= len(_T975):
        return _T975[df - 1]
    return 1.96 + 2.4 / df


def mean_sd_ci(values: Sequence[float]) -> tuple[float, float | None, float | None]:
    """Mean, sample σ and 95 % CI half-width; σ and CI are None for a single value."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None, None
    sd = statistics.stdev(values)
    return mean, sd, t975(len(values) - 1) * sd / math.sqrt(len(values))


def run_row(
    record: dict[str, Any],
    result: dict[str, Any] | None,
    factor_columns: list[str],
    services: dict[str, dict[str, Any]] | None = None,
) -> dict:
    """One runs.csv row from a run's point.json record and its result.json (None: not
    run), and its services' figures (name → figure → value)."""
    row: dict[str, Any] = {"run_id": record["run_id"]}
    for col in factor_columns:
        row[col] = record["factors"].get(col, "")
    row["replicate"] = record["replicate"]
    row["seed"] = record["seed"]
    result = result or {"status": "not run", "error": "the sweep stopped before this run"}
    row["status"] = result.get("status", "failed")
    row["error"] = result.get("error", "")
    figures = result.get("figures") or {}
    for key in (*METRICS, "nb_jobs", "nb_jobs_success"):
        row[key] = figures.get(key, "")
    for name, figures_of in (services or {}).items():
        for fig in SERVICE_FIGURES:
            value = figures_of.get(fig)
            row[f"{name}.{fig}"] = "" if value is None else _fmt(value)
    rss = result.get("peak_rss_bytes")
    row["peak_rss_mb"] = round(rss / 2**20, 1) if rss else ""
    row["result_bytes"] = result.get("result_bytes", "")
    return row


def runs_columns(factor_columns: list[str], services: Sequence[str] = ()) -> list[str]:
    return [
        "run_id",
        *factor_columns,
        "replicate",
        "seed",
        "status",
        "error",
        *RESULT_METRICS,
        *services,
        *COST_METRICS,
        *EXTRA_COLUMNS,
    ]


def summarise(
    rows: Iterable[dict], factor_columns: list[str], services: Sequence[str] = ()
) -> list[dict]:
    """One summary row per point (same factor levels), in first-seen order."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(row[c] for c in factor_columns), []).append(row)
    out = []
    for key, members in groups.items():
        ok = [r for r in members if r["status"] == "ok"]
        summary: dict[str, Any] = dict(zip(factor_columns, key, strict=True))
        summary["n_runs"] = len(members)
        summary["n_ok"] = len(ok)
        summary["n_failed"] = len(members) - len(ok)
        summary["seeds"] = " ".join(str(r["seed"]) for r in ok)
        for metric in (*RESULT_METRICS, *services, *COST_METRICS):
            values = [float(r[metric]) for r in ok if r.get(metric, "") != ""]
            mean, sd, ci = mean_sd_ci(values) if values else (None, None, None)
            summary[f"{metric}_n"] = len(values)
            summary[f"{metric}_mean"] = _fmt(mean)
            summary[f"{metric}_sd"] = _fmt(sd)
            summary[f"{metric}_ci95"] = _fmt(ci)
            summary[f"{metric}_min"] = _fmt(min(values) if values else None)
            summary[f"{metric}_max"] = _fmt(max(values) if values else None)
        out.append(summary)
    return out


SUMMARY_STATS = ("_n", "_mean", "_sd", "_ci95", "_min", "_max")


def summary_columns(factor_columns: list[str], services: Sequence[str] = ()) -> list[str]:
    cols = [*factor_columns, "n_runs", "n_ok", "n_failed", "seeds"]
    for metric in (*RESULT_METRICS, *services, *COST_METRICS):
        cols += [f"{metric}{stat}" for stat in SUMMARY_STATS]
    return cols


def _fmt(value: float | None) -> Any:
    return "" if value is None else round(value, 6)


def write_csv(path: Path, columns: list[str], rows: Iterable[dict]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow(row)
    tmp.replace(path)


# --------------------------------------------------------------------------- plots
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ns|us|µs|ms|s|m|min|h)\s*$")
_UNIT_S = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
}


def _as_number(value: Any) -> float | None:
    """A level as a number for the x axis: plain numbers, or durations ("20ms") in seconds."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        pass
    match = _DURATION.match(str(value))
    return float(match.group(1)) * _UNIT_S[match.group(2)] if match else None


def plot_summary(
    summary: list[dict], factor_columns: list[str], out_dir: Path, services: Sequence[str] = ()
) -> list[Path]:
    """For each factor with several levels, ``plots/<factor>.png`` (one panel per result
    metric, service figures included) and ``plots/<factor>-cost.png`` (the run costs):
    the mean with its 95 % CI as error bars against the factor's levels.

    Points sharing the other factors' levels form one series, each with its own marker,
    and the series are set a little apart along the axis so identical ones stay visible.
    Numeric levels (numbers, durations) are an axis of numbers and a series is a line;
    names (schedulers, modes) are categories: points, no line between them. A point whose
    every run failed is a red ✕ at the foot of the panel (it has no value, not a low
    one); one with some failed runs has a hollow marker. A point where the factor does not
    apply (e.g. deterministic mode has no ``timeout-value``) is drawn as a flat dashed line
    with its CI band across the axis. Metrics without any value are left out.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    varying = [c for c in factor_columns if len({str(r[c]) for r in summary}) > 1]
    written: list[Path] = []
    if not summary:
        return written
    out_dir.mkdir(parents=True, exist_ok=True)
    for factor in varying:
        others = [c for c in varying if c != factor]
        levels = [r[factor] for r in summary if r[factor] != ""]
        numeric = all(_as_number(v) is not None for v in levels)
        order = sorted(set(levels), key=_as_number) if numeric else list(dict.fromkeys(levels))
        position = {lv: (_as_number(lv) if numeric else i) for i, lv in enumerate(order)}
        if not order:
            continue
        axis = _Axis(factor, others, order, position, numeric)
        for suffix, wanted in (("", (*RESULT_METRICS, *services)), ("-cost", COST_METRICS)):
            metrics = [m for m in wanted if any(r.get(f"{m}_mean", "") != "" for r in summary)]
            if not metrics:
                continue
            ncols = 2 if len(metrics) > 1 else 1
            nrows = math.ceil(len(metrics) / ncols)
            fig, axes = plt.subplots(
                nrows, ncols, figsize=(6.0 * ncols, 3.4 * nrows), squeeze=False
            )
            for ax, metric in zip(axes.flat, metrics, strict=False):
                _panel(ax, summary, metric, axis)
            for ax in list(axes.flat)[len(metrics) :]:
                ax.set_visible(False)
            if suffix:
                fig.suptitle("Run cost (not a result of the scheduler)", fontsize="medium")
            fig.tight_layout()
            path = out_dir / f"{factor}{suffix}.png"
            fig.savefig(path, dpi=80)
            plt.close(fig)
            written.append(path)
    return written


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


class _Axis:
    """How one factor is laid along x."""

    def __init__(self, factor: str, others: list[str], order: list, position: dict, numeric: bool):
        self.factor, self.others, self.order = factor, others, order
        self.position, self.numeric = position, numeric
        span = (max(position.values()) - min(position.values())) if numeric else len(order)
        self.dodge_unit = 0.02 * (span or 1) if numeric else 0.08

    def x(self, level: Any, series_index: int, series_count: int) -> float:
        offset = (series_index - (series_count - 1) / 2) * self.dodge_unit
        return self.position[level] + offset


def _panel(ax, summary: list[dict], metric: str, axis: _Axis) -> None:  # type: ignore[no-untyped-def]
    import matplotlib.transforms as mtransforms

    factor = axis.factor
    series: dict[str, list[dict]] = {}
    for r in summary:
        label = ", ".join(f"{c}={r[c]}" for c in axis.others if r[c] != "") or None
        series.setdefault(label, []).append(r)  # type: ignore[arg-type]
    xs = [axis.position[lv] for lv in axis.order]
    foot = mtransforms.blended_transform_factory(ax.transData, ax.transAxes)
    failed_drawn = False
    for k, (label, members) in enumerate(series.items()):
        marker = MARKERS[k % len(MARKERS)]
        valued = [m for m in members if m.get(f"{metric}_mean", "") != ""]
        on_axis = sorted(
            (m for m in valued if m[factor] != ""), key=lambda m: axis.position[m[factor]]
        )
        colour = None
        if on_axis:
            container = ax.errorbar(
                [axis.x(m[factor], k, len(series)) for m in on_axis],
                [float(m[f"{metric}_mean"]) for m in on_axis],
                yerr=[float(m[f"{metric}_ci95"] or 0) for m in on_axis],
                marker=marker,
                linestyle="-" if axis.numeric else "none",
                capsize=4,
                label=label,
            )
            colour = container.lines[0].get_color()
            partial = [m for m in on_axis if int(m.get("n_failed") or 0)]
            if partial:  # some runs of the point failed: a hollow marker over it
                ax.scatter(
                    [axis.x(m[factor], k, len(series)) for m in partial],
                    [float(m[f"{metric}_mean"]) for m in partial],
                    marker=marker, s=90, facecolors="white", edgecolors=colour, zorder=3,
                )  # fmt: skip
        for m in (m for m in valued if m[factor] == ""):
            mean = float(m[f"{metric}_mean"])
            ci = float(m[f"{metric}_ci95"] or 0)
            (line,) = ax.plot([min(xs), max(xs)], [mean, mean], "--", label=label, color=colour)
            ax.fill_between(
                [min(xs), max(xs)], mean - ci, mean + ci, alpha=0.15, color=line.get_color()
            )
        for m in members:
            if m[factor] != "" and int(m.get("n_ok") or 0) == 0 and int(m.get("n_runs") or 0):
                ax.plot(
                    [axis.x(m[factor], k, len(series))], [0.03], marker="x", color="#c00000",
                    markersize=10, mew=2.5, linestyle="none", transform=foot, clip_on=False,
                    label=None if failed_drawn else "every run failed",
                )  # fmt: skip
                failed_drawn = True
    labels = [str(lv) for lv in axis.order]
    if not axis.numeric:
        ax.set_xticks(range(len(axis.order)), labels)
        ax.set_xlim(-0.5, len(axis.order) - 0.5)
    elif len(axis.order) <= 12:
        ax.set_xticks(xs, labels)
    if len(axis.order) > 5 or sum(map(len, labels)) > 40:
        ax.tick_params(axis="x", labelrotation=60, labelsize="small")
    ax.set_xlabel(factor)
    ax.set_title(f"{metric} (mean, 95 % CI)", fontsize="medium")
    ax.grid(alpha=0.3)
    if len(series) > 1 or failed_drawn:
        ax.legend(fontsize="x-small")
