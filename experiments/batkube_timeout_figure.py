"""Batkube's Fig. 4.5 redrawn with timewarp's results on top.

    python experiments/batkube_timeout_figure.py results/batkube_timeout \\
        --batkube /work/shared/data/batkube/results -o results/batkube_timeout/fig4.5.png

Reads the sweep's ``summary.csv`` (experiments/batkube_timeout.yaml) and the thesis'
measured curves ``timeout_200_delay170.csv`` (burst) and ``timeout_spaced_200_delay170.csv``
(columns: timeout in ms, duration, makespan, mean_waiting_time). Draws, per workload and
metric, the thesis curve against the timeout, our lockstep points with 95 % CI (when
``--mode lockstep`` runs succeeded) and our deterministic mean as a flat line with its CI
band. ``--table`` also prints a markdown table per workload and level: replicates, makespan
and mean waiting time (mean and sample σ), wall seconds per run (min / median / max, from
``runs.csv``) and the thesis' single run at the same timeout.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

THESIS_FILES = {"burst": "timeout_200_delay170.csv", "spaced": "timeout_spaced_200_delay170.csv"}
METRICS = ("makespan", "mean_waiting_time")


def _ms(level: str) -> float | None:
    text = level.strip()
    for unit, factor in (("ms", 1.0), ("us", 1e-3), ("s", 1000.0)):
        if text.endswith(unit):
            try:
                return float(text[: -len(unit)]) * factor
            except ValueError:
                return None
    try:
        return float(text)
    except ValueError:
        return None


def _n(points: list) -> str:
    """The replicates behind the points: '5', or '3-5' when they differ."""
    counts = sorted({int(r["n_ok"]) for _, r in points})
    return str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="the sweep's results directory")
    parser.add_argument("--batkube", type=Path, default=Path("/work/shared/data/batkube/results"))
    parser.add_argument("-o", "--output", type=Path, help="PNG (default: RESULTS/fig4.5.png)")
    parser.add_argument("--table", action="store_true", help="print a markdown table too")
    args = parser.parse_args(argv)
    summary_path = args.results / "summary.csv"
    if not summary_path.is_file():
        print(f"batkube_timeout_figure: no {summary_path}; run the sweep first", file=sys.stderr)
        return 2
    with open(summary_path, newline="") as f:
        summary = list(csv.DictReader(f))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(len(METRICS), len(THESIS_FILES), figsize=(11, 7), squeeze=False)
    for col, (workload, name) in enumerate(THESIS_FILES.items()):
        thesis = []
        path = args.batkube / name
        if path.is_file():
            with open(path, newline="") as f:
                thesis = list(csv.DictReader(f))
        ours = [r for r in summary if r.get("workload") == workload]
        for row, metric in enumerate(METRICS):
            ax = axes[row][col]
            if thesis:
                ax.plot(
                    [float(t["timeout"]) for t in thesis],
                    [float(t[metric]) for t in thesis],
                    color="grey",
                    linewidth=1,
                    label="Batkube (thesis, lockstep)",
                )
            lock = sorted(
                (
                    (_ms(r["timeout-value"]), r)
                    for r in ours
                    if r["mode"] == "lockstep" and r[f"{metric}_mean"]
                ),
                key=lambda p: p[0] or 0.0,
            )
            if lock:
                ax.errorbar(
                    [x for x, _ in lock],
                    [float(r[f"{metric}_mean"]) for _, r in lock],
                    yerr=[float(r[f"{metric}_ci95"] or 0) for _, r in lock],
                    marker="o",
                    capsize=3,
                    label=f"timewarp lockstep (mean, 95 % CI, n={_n(lock)})",
                )
            for r in (r for r in ours if r["mode"] == "deterministic" and r[f"{metric}_mean"]):
                mean, ci = float(r[f"{metric}_mean"]), float(r[f"{metric}_ci95"] or 0)
                ax.axhline(
                    mean,
                    color="C3",
                    linestyle="--",
                    label=f"timewarp deterministic (n={r['n_ok']})",
                )
                ax.axhspan(mean - ci, mean + ci, color="C3", alpha=0.15)
            ax.set_yscale("log")
            # the curve bends within the first milliseconds: linear to 5 ms, log beyond
            ax.set_xscale("symlog", linthresh=5, linscale=1.5)
            ax.set_xlim(-0.5, 110)
            ticks = [0, 1, 2, 3, 4, 5, 10, 20, 50, 100]
            ax.set_xticks(ticks)
            ax.set_xticklabels([str(t) for t in ticks], fontsize="small")
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            ax.set_xlabel("timeout-value (ms; linear to 5, log beyond)")
            ax.set_title(f"{workload}: {metric} (s)", fontsize="medium")
            ax.grid(alpha=0.3)
            ax.legend(fontsize="x-small")
    fig.tight_layout()
    out = args.output or args.results / "fig4.5.png"
    fig.savefig(out, dpi=90)
    print(out)
    if args.table:
        print(table(summary, args.results / "runs.csv", args.batkube))
    return 0


def _mean_sd(row: dict[str, str], metric: str) -> str:
    sd = row[f"{metric}_sd"]
    mean = row[f"{metric}_mean"]
    return f"{float(mean):.1f} ± {float(sd):.1f}" if sd else mean


def table(summary: list[dict[str, str]], runs_csv: Path, thesis_dir: Path) -> str:
    """Markdown: one row per workload, mode and timeout level."""
    import statistics

    walls: dict[tuple[str, str, str], list[float]] = {}
    if runs_csv.is_file():
        with open(runs_csv, newline="") as f:
            for r in csv.DictReader(f):
                if r["status"] == "ok":
                    key = (r["workload"], r["mode"], r.get("timeout-value", ""))
                    walls.setdefault(key, []).append(float(r["wall_s"]))
    lines = [
        "| workload | mode | timeout | n | makespan (s) mean ± σ | mean waiting (s) mean ± σ "
        "| wall s/run min / median / max | thesis makespan / waiting |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for workload, name in THESIS_FILES.items():
        thesis: dict[float, dict[str, str]] = {}
        if (thesis_dir / name).is_file():
            with open(thesis_dir / name, newline="") as f:
                thesis = {float(t["timeout"]): t for t in csv.DictReader(f)}
        rows = [r for r in summary if r.get("workload") == workload and r["makespan_mean"]]
        rows.sort(key=lambda r: (r["mode"], _ms(r.get("timeout-value", "")) or 0.0))
        for r in rows:
            level = r.get("timeout-value", "")
            w = sorted(walls.get((workload, r["mode"], level), []))
            wall = f"{w[0]:.1f} / {statistics.median(w):.1f} / {w[-1]:.1f}" if w else ""
            t = thesis.get(_ms(level)) if level else None
            ref = f"{float(t['makespan']):.0f} / {float(t['mean_waiting_time']):.0f}" if t else ""

            lines.append(
                f"| {workload} | {r['mode']} | {level or '–'} | {r['n_ok']} | {_mean_sd(r, 'makespan')} "
                f"| {_mean_sd(r, 'mean_waiting_time')} | {wall} | {ref} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
