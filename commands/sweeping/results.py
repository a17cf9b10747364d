"""Tables and plots of a sweep: ``runs.csv``, ``summary.csv``, ``plots/*.png``.

``runs.csv`` has one tidy row per run (factors, replicate, seed, status, error, metrics,
resources). ``summary.csv`` has one row per point: for each metric the number of
successful runs, the mean, the sample standard deviation σ (n-1) and the half-width of
the 95 % confidence interval of the mean (Student's t, so small replicate counts are not
flattered). Failed runs count in ``n_failed`` and never in the statistics.
"""

from __future__ import annotations

import csv
import math
import re
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

METRICS = (
    "makespan",
    "mean_waiting_time",
    "mean_slowdown",
    "utilisation",
    "wall_s",
    "speedup",
    "nondeterministic_advances",
)
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
    record: dict[str, Any], result: dict[str, Any] | None, factor_columns: list[str]
) -> dict:
    """One runs.csv row from a run's point.json record and its result.json (None: not run)."""
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
    rss = result.get("peak_rss_bytes")
    row["peak_rss_mb"] = round(rss / 2**20, 1) if rss else ""
    row["result_bytes"] = result.get("result_bytes", "")
    return row


def runs_columns(factor_columns: list[str]) -> list[str]:
    return [
        "run_id",
        *factor_columns,
        "replicate",
        "seed",
        "status",
        "error",
        *METRICS,
        *EXTRA_COLUMNS,
    ]


def summarise(rows: Iterable[dict], factor_columns: list[str]) -> list[dict]:
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
        for metric in METRICS:
            values = [float(r[metric]) for r in ok if r[metric] != ""]
            mean, sd, ci = mean_sd_ci(values) if values else (None, None, None)
            summary[f"{metric}_mean"] = _fmt(mean)
            summary[f"{metric}_sd"] = _fmt(sd)
            summary[f"{metric}_ci95"] = _fmt(ci)
        out.append(summary)
    return out


def summary_columns(factor_columns: list[str]) -> list[str]:
    cols = [*factor_columns, "n_runs", "n_ok", "n_failed"]
    for metric in METRICS:
        cols += [f"{metric}_mean", f"{metric}_sd", f"{metric}_ci95"]
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


def plot_summary(summary: list[dict], factor_columns: list[str], out_dir: Path) -> list[Path]:
    """One PNG per factor with several levels (``plots/<factor>.png``), one panel per metric:
    the mean with its 95 % CI as error bars against the factor's levels.

    Points sharing the other factors' levels form one series. A point where the factor
    does not apply (e.g. deterministic mode has no ``timeout-value``) is drawn as a flat
    dashed line with its CI band across the axis: Batkube's figure with our σ = 0 line
    beside it. Metrics without any value are left out.
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
        metrics = [m for m in METRICS if any(r[f"{m}_mean"] != "" for r in summary)]
        if not metrics or not order:
            continue
        ncols = 2 if len(metrics) > 1 else 1
        nrows = math.ceil(len(metrics) / ncols)
        fig, axes = plt.subplots(nrows, ncols, figsize=(6.0 * ncols, 3.4 * nrows), squeeze=False)
        for ax, metric in zip(axes.flat, metrics, strict=False):
            _panel(ax, summary, factor, others, metric, order, position, numeric)
        for ax in list(axes.flat)[len(metrics) :]:
            ax.set_visible(False)
        fig.tight_layout()
        path = out_dir / f"{factor}.png"
        fig.savefig(path, dpi=80)
        plt.close(fig)
        written.append(path)
    return written


def _panel(ax, summary, factor, others, metric, order, position, numeric) -> None:  # type: ignore[no-untyped-def]
    series: dict[str, list[dict]] = {}
    for r in summary:
        if r[f"{metric}_mean"] == "":
            continue
        label = ", ".join(f"{c}={r[c]}" for c in others if r[c] != "") or metric
        series.setdefault(label, []).append(r)
    xs = [position[lv] for lv in order]
    for label, members in series.items():
        on_axis = sorted((m for m in members if m[factor] != ""), key=lambda m: position[m[factor]])
        if on_axis:
            ax.errorbar(
                [position[m[factor]] for m in on_axis],
                [float(m[f"{metric}_mean"]) for m in on_axis],
                yerr=[float(m[f"{metric}_ci95"] or 0) for m in on_axis],
                marker="o",
                capsize=4,
                label=label,
            )
        for m in (m for m in members if m[factor] == ""):
            mean = float(m[f"{metric}_mean"])
            ci = float(m[f"{metric}_ci95"] or 0)
            (line,) = ax.plot([min(xs), max(xs)], [mean, mean], "--", label=label)
            ax.fill_between(
                [min(xs), max(xs)], mean - ci, mean + ci, alpha=0.15, color=line.get_color()
            )
    labels = [str(lv) for lv in order]
    if not numeric:
        ax.set_xticks(range(len(order)), labels)
    elif len(order) <= 12:
        ax.set_xticks(xs, labels)
    if len(order) > 5 or sum(map(len, labels)) > 40:
        ax.tick_params(axis="x", labelrotation=60, labelsize="small")
    ax.set_xlabel(factor)
    ax.set_title(f"{metric} (mean, 95 % CI)", fontsize="medium")
    ax.grid(alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize="x-small")
