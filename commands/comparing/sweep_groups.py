"""A sweep's results as comparison groups: one per point (a configuration), of its
successful runs over its seeds or replicates — what ``timewarp compare RESULTS`` and
``timewarp sweep --report`` put side by side, each column with its spread over seeds.

A column is named by the factors that vary between points (every point may share the
platform, say): ``scheduler=kcss workload=heavy``; a run by its point and replicate.
"""

from __future__ import annotations

import csv
from pathlib import Path

from commands.comparing.figures import Group
from commands.comparing.runs import RunError, read_run

RUNS_CSV = "runs.csv"  # commands/sweeping/results.py writes it
RUNS_DIR = "runs"  # RESULTS/runs/<run_id>: one run's timewarp simulate -o


def is_sweep_results(path: Path) -> bool:
    """A ``timewarp sweep -o`` folder (rather than one run's)."""
    return (path / RUNS_CSV).is_file() and not (path / "out_jobs.csv").exists()


def groups_of_rows(
    rows: list[dict], directories: list[Path], factors: list[str], slo_p99: float | None = None
) -> tuple[list[Group], list[str]]:
    """(groups with at least one successful run, labels of points where every run
    failed), in the rows' order."""
    varying = [c for c in factors if len({str(r[c]) for r in rows}) > 1]
    groups: dict[str, Group] = {}
    for row, directory in zip(rows, directories, strict=True):
        label = " ".join(f"{c}={row[c]}" for c in varying if row[c] != "") or "all"
        group = groups.setdefault(label, Group(label, []))
        if row["status"] != "ok":
            continue
        try:
            run = read_run(directory, f"{label} #{row['replicate']}", slo_p99, seed=row["seed"])
        except RunError:
            continue  # its outputs were removed since: the tables still count it
        group.runs.append(run)
    failed = [label for label, g in groups.items() if not g.runs]
    return [g for g in groups.values() if g.runs], failed


def read_sweep_results(results: Path, slo_p99: float | None = None) -> list[Group]:
    """The groups of the sweep in ``results`` (RunError when no run succeeded)."""
    with open(results / RUNS_CSV, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        rows = list(reader)
    if "run_id" not in header or "replicate" not in header:
        raise RunError(f"{results / RUNS_CSV}: not a timewarp sweep's runs.csv")
    factors = header[header.index("run_id") + 1 : header.index("replicate")]
    directories = [results / RUNS_DIR / row["run_id"] for row in rows]
    groups, _ = groups_of_rows(rows, directories, factors, slo_p99)
    if not groups:
        raise RunError(f"{results}: no run of this sweep succeeded: nothing to compare")
    return groups
