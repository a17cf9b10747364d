"""The KSE factorial's results (experiments/kse_factorial.yaml): imbalance and moves.

    python experiments/kse_factorial_report.py results/kse [--docs docs/]

Reads the sweep's ``runs.csv`` and each run's ``kse_imbalance.csv`` (one row per balancer
round, measured on metrics.k8s.io before the round acts: the paper's MAE, mean absolute
deviation of the four node loads from their mean; CPU in millicores, memory in MiB).
Rounds 1-9 are the paper's window (a round a minute during a 10-minute run); a later row,
after the pods' jobs ended, is ignored. Per run: the mean MAE of rounds 1-9, the MAE of
round 1 (the placement, before any move) and the mean of rounds 7-9 (where the balancer
has had time), and the evictions of rounds 1-9.

Writes ``RESULTS/kse_report.csv`` (one row per scenario and scheduler: means and sample σ
over replicates), prints markdown tables — mean MAE per scenario, the paper's Table 9
(scenarios where a KSE balancer beats kube-scheduler: its mean MAE over rounds 1-9 lower
by more than both σ) and Table 10 (mean evictions) — and draws ``kse_mae.png`` (mean MAE
per scenario and scheduler with σ error bars) and ``kse_rounds.png`` (MAE per round in the
paper's Fig. 10 scenario: 20 pods, 40 requests/s, exponential, CPU) into RESULTS, or into
``--docs`` as ``sweep_kse_mae.png`` / ``sweep_kse_rounds.png``.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROUNDS = range(1, 10)
SCENARIO = ("pods", "rate", "shape", "distribution", "metric")
SCHEDULERS = ("kube-scheduler", "kse-greedy", "kse-refine")


def scheduler_of(row: dict[str, str]) -> str:
    return "kube-scheduler" if row["scheduler"] == "kube-scheduler" else f"kse-{row['algorithm']}"


def read_rounds(path: Path) -> dict[int, tuple[float, int]]:
    """round -> (MAE, evictions), rounds 1-9 only."""
    out = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            k = int(r["round"])
            if k in ROUNDS:
                out[k] = (float(r["mae"]), int(r["evictions"]))
    return out


def mean_sd(values: list[float]) -> tuple[float, float]:
    if not values:
        return float("nan"), float("nan")
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def run_rows(results: Path) -> list[dict[str, str]]:
    """runs.csv, or while the sweep is still running (no runs.csv yet) the finished runs'
    point.json and result.json."""
    if (results / "runs.csv").is_file():
        with open(results / "runs.csv", newline="") as f:
            return list(csv.DictReader(f))
    rows = []
    for point in sorted((results / "runs").glob("*/point.json")):
        try:
            result = json.loads((point.parent / "result.json").read_text())
        except (OSError, json.JSONDecodeError):
            continue  # still running
        record = json.loads(point.read_text())
        factors = {k: "" if v is None else str(v) for k, v in record["factors"].items()}
        rows.append({**factors, "run_id": record["run_id"], "status": result["status"]})
    return [{"algorithm": "", **r} for r in rows]


def collect(results: Path) -> tuple[dict, dict, int]:
    """(per (scenario, scheduler): per-run figures), (per (scenario, scheduler): per-round MAEs),
    number of runs without imbalance data."""
    runs: dict[tuple, list[dict[str, float]]] = defaultdict(list)
    curves: dict[tuple, list[dict[int, float]]] = defaultdict(list)
    missing = 0
    for row in run_rows(results):
        path = results / "runs" / row["run_id"] / "kse_imbalance.csv"
        if row["status"] != "ok" or not path.is_file():
            missing += 1
            continue
        rounds = read_rounds(path)
        if not rounds:
            missing += 1
            continue
        key = (tuple(row[c] for c in SCENARIO), scheduler_of(row))
        maes = [m for _, (m, _) in sorted(rounds.items())]
        late = [rounds[k][0] for k in (7, 8, 9) if k in rounds]
        runs[key].append(
            {
                "mae": statistics.fmean(maes),
                "mae_round1": rounds[min(rounds)][0],
                "mae_late": statistics.fmean(late) if late else float("nan"),
                "evictions": float(sum(e for _, e in rounds.values())),
            }
        )
        curves[key].append({k: m for k, (m, _) in rounds.items()})
    return runs, curves, missing


def summarise(runs: dict) -> list[dict[str, object]]:
    rows = []
    for (scenario, scheduler), values in sorted(runs.items()):
        row: dict[str, object] = dict(zip(SCENARIO, scenario, strict=True))
        row["scheduler"] = scheduler
        row["n"] = len(values)
        for fig in ("mae", "mae_round1", "mae_late", "evictions"):
            mean, sd = mean_sd([v[fig] for v in values])
            row[f"{fig}_mean"], row[f"{fig}_sd"] = round(mean, 3), round(sd, 3)
        rows.append(row)
    return rows


def _unit(metric: str) -> str:
    return "m" if metric == "cpu" else "MiB"


def markdown(summary: list[dict[str, object]]) -> str:
    by = {(tuple(str(r[c]) for c in SCENARIO), r["scheduler"]): r for r in summary}
    scenarios = sorted({k[0] for k in by}, key=lambda s: (s[4], s[3], int(s[0]), int(s[1]), s[2]))
    lines = [
        "| metric | distribution | pods | req/s | rate | "
        + " | ".join(f"{s} MAE 1-9 (7-9)" for s in SCHEDULERS)
        + " | moves greedy / refine |",
        "|" + " --- |" * (5 + len(SCHEDULERS) + 1),
    ]
    wins = defaultdict(int)
    compared = defaultdict(int)
    moves = defaultdict(list)
    for sc in scenarios:
        pods, rate, shape, dist, metric = sc
        cells = []
        base = by.get((sc, "kube-scheduler"))
        for s in SCHEDULERS:
            r = by.get((sc, s))
            if r is None:
                cells.append("–")
                continue
            cells.append(f"{r['mae_mean']:.0f} ± {r['mae_sd']:.0f} ({r['mae_late_mean']:.0f})")
            if s != "kube-scheduler":
                moves[(s, dist, metric)].append(float(r["evictions_mean"]))
                if base is not None:
                    compared[(s, dist, metric)] += 1
                if base is not None and (
                    float(r["mae_mean"]) + float(r["mae_sd"])
                    < float(base["mae_mean"]) - float(base["mae_sd"])
                ):
                    wins[(s, dist, metric)] += 1
        ev = [by.get((sc, s)) for s in SCHEDULERS[1:]]
        ev_text = " / ".join(f"{r['evictions_mean']:.1f}" if r else "–" for r in ev)
        lines.append(
            f"| {metric} ({_unit(metric)}) | {dist} | {pods} | {rate} | {shape} | "
            + " | ".join(cells)
            + f" | {ev_text} |"
        )
    combos = [(d, m) for d in ("normal", "exponential") for m in ("memory", "cpu")]
    lines += [
        "",
        "Scenarios where the balancer's mean MAE of rounds 1-9 is below kube-scheduler's by "
        "more than both σ, of those compared (cf. the paper's Table 9):",
        "",
        "| scheduler | " + " | ".join(f"{d} {m}" for d, m in combos) + " |",
        "|" + " --- |" * (1 + len(combos)),
    ]
    for s in SCHEDULERS[1:]:
        cells = [f"{wins[(s, d, m)]} of {compared[(s, d, m)]}" for d, m in combos]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Mean evictions per run, rounds 1-9 (cf. the paper's Table 10):",
        "",
        "| scheduler | " + " | ".join(f"{d} {m}" for d, m in combos) + " |",
        "|" + " --- |" * (1 + len(combos)),
    ]
    for s in SCHEDULERS[1:]:
        cells = [
            f"{statistics.fmean(moves[(s, d, m)]):.1f}" if moves[(s, d, m)] else "–"
            for d, m in combos
        ]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(summary: list[dict[str, object]], curves: dict, out_mae: Path, out_rounds: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 7), squeeze=False)
    panels = [(d, m) for m in ("memory", "cpu") for d in ("normal", "exponential")]
    for ax, (dist, metric) in zip(axes.flat, panels, strict=True):
        rows = [r for r in summary if r["distribution"] == dist and r["metric"] == metric]
        scen = sorted({(int(r["pods"]), int(r["rate"]), r["shape"]) for r in rows})
        width = 0.8 / len(SCHEDULERS)
        for i, s in enumerate(SCHEDULERS):
            xs, ys, es = [], [], []
            for j, sc in enumerate(scen):
                r = next(
                    (
                        r
                        for r in rows
                        if r["scheduler"] == s
                        and (int(r["pods"]), int(r["rate"]), r["shape"]) == sc
                    ),
                    None,
                )
                if r is not None:
                    xs.append(j + (i - 1) * width)
                    ys.append(float(r["mae_mean"]))
                    es.append(float(r["mae_sd"]))
            ax.bar(xs, ys, width, yerr=es, capsize=2, label=s)
        ax.set_xticks(range(len(scen)))
        ax.set_xticklabels([f"{p}p {q}/s\n{sh}" for p, q, sh in scen], fontsize="x-small")
        ax.set_title(f"{dist}, {metric}: MAE rounds 1-9 ({_unit(metric)})", fontsize="medium")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize="x-small")
    fig.tight_layout()
    fig.savefig(out_mae, dpi=80)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), squeeze=False)
    for ax, shape in zip(axes.flat, ("constant", "linear"), strict=True):
        sc = ("20", "40", shape, "exponential", "cpu")
        for s in SCHEDULERS:
            series = curves.get((sc, s), [])
            if not series:
                continue
            ks = sorted({k for c in series for k in c})
            means = [statistics.fmean([c[k] for c in series if k in c]) for k in ks]
            ax.plot(ks, means, marker="o", label=f"{s} (n={len(series)})")
        ax.set_title(f"20 pods, 40 req/s {shape}, exponential, CPU", fontsize="medium")
        ax.set_xlabel("round (minute)")
        ax.set_ylabel("MAE (millicores), mean of replicates")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize="x-small")
    fig.tight_layout()
    fig.savefig(out_rounds, dpi=80)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="the sweep's results directory")
    parser.add_argument("--docs", type=Path, help="write the PNGs here as sweep_kse_*.png")
    args = parser.parse_args(argv)
    if not (args.results / "runs.csv").is_file() and not (args.results / "runs").is_dir():
        print(f"kse_factorial_report: no {args.results}/runs.csv; run the sweep", file=sys.stderr)
        return 2
    runs, curves, missing = collect(args.results)
    if not runs:
        print(f"kse_factorial_report: no run in {args.results} has imbalance data", file=sys.stderr)
        return 1
    summary = summarise(runs)
    columns = list(summary[0])
    with open(args.results / "kse_report.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(summary)
    print(markdown(summary))
    if missing:
        print(f"\n({missing} runs without imbalance data: failed or not run)")
    where = args.docs or args.results
    prefix = "sweep_kse_" if args.docs else "kse_"
    plot(summary, curves, where / f"{prefix}mae.png", where / f"{prefix}rounds.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
