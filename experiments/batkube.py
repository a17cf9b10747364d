"""Batkube's three setups (Larue 2020, thesis chapter 4, Table 4.1) under timewarp.

    .venv/bin/python -m experiments.batkube --runs 10 -o out/batkube

For burst (``200_delay170`` on ``platform_graphene_16nodes``), spaced
(``spaced_200_delay170``, same platform) and realistic (``KIT_10h_80`` on
``1node_6core``): ``--runs`` deterministic runs of ``default_like`` (their ``jobs.csv``
must be byte-identical: σ = 0, checked and reported), plus ``--lockstep-runs`` runs in
``--mode lockstep`` with Batkube's Table 4.1 parameters when this build has that mode.
Printed next to them:

- Batkube's simulated runs (``results/*_simu_*_jobs.csv``, 20 each; kube-scheduler
  v1.19 under Batkube with timeout 50 ms, min-delay 0, max timestep 1000 s) and their
  wall times (the ``max-timestep_*.csv`` sweep rows at 1000 s, the same parameters);
- Batkube's real k3s runs (``200_delay170_[0-9]``, ``spaced_200_delay170_[0-9]``,
  ``KIT_0``);
- real Batsim 4.2.1 with a strict FCFS decision process (``batsim-reference/``).

Honest limit: ``default_like`` is not kube-scheduler. Under deterministic time it makes
its decisions at the instant things happen, so it matches the FCFS reference rather than
a real cluster's scheduling and image-pull latencies (see docs/experiments.md).
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from experiments._common import (
    BATKUBE,
    DEFAULT_LIKE,
    REFERENCE,
    Run,
    Summary,
    jobs_figures,
    load_average,
    print_table,
    read_rows,
    run_simulate,
    schedule_figures,
    simulate_modes,
)

#: Batkube's Table 4.1 parameters, as ``timewarp simulate --mode lockstep`` flags.
LOCKSTEP_FLAGS = (
    "--mode",
    "lockstep",
    "--timeout-value",
    "50ms",
    "--min-delay",
    "0ms",
    "--max-simulation-timestep",
    "1000s",
    "--fast-forward-on-no-pending-jobs",
    "--detect-scheduler-deadlock",
)
#: Batkube's ``max_timestep`` column is in milliseconds; Table 4.1 used 1000 s.
BATKUBE_MAX_TIMESTEP_MS = 1_000_000


@dataclass(frozen=True)
class Setup:
    name: str
    platform: Path
    workload: Path
    simu_glob: str  # Batkube's simulated runs
    real_glob: str  # Batkube's real-cluster runs
    sweep_csv: str  # Batkube's max-timestep sweep (wall times)
    reference: str  # batsim-reference/ sub-directory


SETUPS: dict[str, Setup] = {
    "burst": Setup(
        "burst",
        BATKUBE / "platforms/platform_graphene_16nodes.xml",
        BATKUBE / "workloads/200_delay170.json",
        "200_delay170_simu_*_jobs.csv",
        "200_delay170_[0-9]_jobs.csv",
        "max-timestep_200_delay170.csv",
        "200_delay170",
    ),
    "spaced": Setup(
        "spaced",
        BATKUBE / "platforms/platform_graphene_16nodes.xml",
        BATKUBE / "workloads/spaced_200_delay170.json",
        "spaced_200_delay170_simu_*_jobs.csv",
        "spaced_200_delay170_[0-9]_jobs.csv",
        "max-timestep_spaced_200_delay170.csv",
        "spaced_200_delay170",
    ),
    "realistic": Setup(
        "realistic",
        BATKUBE / "platforms/1node_6core.xml",
        BATKUBE / "workloads/KIT_10h_80.json",
        "KIT_10h_80_simu_*_jobs.csv",
        "KIT_0_jobs.csv",
        "max-timestep_KIT_10h_80.csv",
        "KIT_10h_80",
    ),
}


@dataclass(frozen=True)
class Row:
    """One line of the comparison: a source's makespan, mean wait and wall time."""

    setup: str
    source: str
    makespan: Summary
    mean_wait: Summary
    wall: Summary

    def cells(self) -> list[str]:
        return [
            self.setup,
            self.source,
            str(self.makespan.n),
            self.makespan.mean_sd(1) if self.makespan.n else "-",
            self.mean_wait.mean_sd(1) if self.mean_wait.n else "-",
            self.wall.spread(2) if self.wall.n else "-",
        ]


HEADERS = [
    "setup",
    "source",
    "runs",
    "makespan μ ± σ (s)",
    "mean wait μ ± σ (s)",
    "wall min/med/max (s)",
]
_EMPTY = Summary.of([])


def csv_runs(pattern: str, results: Path = BATKUBE / "results") -> list[tuple[float, float]]:
    """(makespan, mean wait) of every ``jobs.csv`` matching ``pattern`` in ``results``."""
    paths = sorted(glob.glob(str(results / pattern)))
    if not paths:
        raise FileNotFoundError(f"no Batkube results match {results / pattern}")
    return [jobs_figures(p) for p in paths]


def batkube_walls(sweep_csv: str, results: Path = BATKUBE / "results") -> Summary:
    """Batkube's wall times at its Table 4.1 parameters, from its max-timestep sweep."""
    rows = read_rows(results / sweep_csv)
    return Summary.of(
        float(r["duration"]) for r in rows if int(r["max_timestep"]) == BATKUBE_MAX_TIMESTEP_MS
    )


def reference_rows(setup: Setup) -> list[Row]:
    """Batkube simulated, Batkube on k3s, and real Batsim's FCFS for one setup."""
    simu = csv_runs(setup.simu_glob)
    real = csv_runs(setup.real_glob)
    ref = schedule_figures(REFERENCE / setup.reference / "schedule.csv")
    return [
        Row(
            setup.name,
            "Batkube simulated (kube-scheduler)",
            Summary.of(m for m, _ in simu),
            Summary.of(w for _, w in simu),
            batkube_walls(setup.sweep_csv),
        ),
        Row(
            setup.name,
            "Batkube real k3s",
            Summary.of(m for m, _ in real),
            Summary.of(w for _, w in real),
            _EMPTY,
        ),
        Row(setup.name, "Batsim 4.2.1, FCFS", Summary.of([ref[0]]), Summary.of([ref[1]]), _EMPTY),
    ]


def runs_row(setup: str, source: str, runs: list[Run]) -> Row:
    good = [r for r in runs if r.ok]
    return Row(
        setup,
        f"{source} ({len(good)}/{len(runs)} ok)" if len(good) != len(runs) else source,
        Summary.of(r.figure("makespan") for r in good),
        Summary.of(r.figure("mean_waiting_time") for r in good),
        Summary.of(r.wall_s for r in good),
    )


def distinct_outputs(runs: list[Run]) -> int:
    """How many different ``jobs.csv`` byte strings the successful runs produced."""
    return len({r.jobs_digest() for r in runs if r.ok and r.jobs_csv.exists()})


def run_setup(
    setup: Setup,
    runs: int,
    lockstep_runs: int,
    out: Path,
    scheduler: str,
    timeout_s: float,
    lockstep: bool,
) -> tuple[list[Row], dict]:
    def repeat(mode: str, dirname: str, n: int, extra: Sequence[str] = ()) -> list[Run]:
        done = []
        for i in range(n):
            run = run_simulate(
                [scheduler],
                setup.platform,
                [setup.workload],
                out / setup.name / f"{dirname}-{i}",
                extra=extra,
                timeout_s=timeout_s,
            )
            _progress(setup.name, mode, i, run)
            done.append(run)
        return done

    rows: list[Row] = []
    det = repeat("deterministic", "det", runs)
    distinct = distinct_outputs(det)
    rows.append(runs_row(setup.name, "timewarp deterministic (default_like)", det))
    record = {
        "deterministic": [_run_record(r) for r in det],
        "deterministic_distinct_jobs_csv": distinct,
    }
    if lockstep and lockstep_runs:
        lock = repeat("lockstep", "lockstep", lockstep_runs, LOCKSTEP_FLAGS)
        rows.append(runs_row(setup.name, "timewarp lockstep (Batkube's parameters)", lock))
        record["lockstep"] = [_run_record(r) for r in lock]
    rows.extend(reference_rows(setup))
    return rows, record


def _run_record(run: Run) -> dict:
    return {
        "out": str(run.out),
        "ok": run.ok,
        "returncode": run.returncode,
        "wall_s": round(run.wall_s, 3),
        "cpu_s": run.cpu_s,
        "cpu_total_s": round(run.cpu_total_s, 3),
        "figures": run.figures,
        "jobs_sha256": run.jobs_digest() if run.jobs_csv.exists() else None,
    }


def _progress(setup: str, mode: str, i: int, run: Run) -> None:
    status = "ok" if run.ok else f"FAILED ({run.returncode}): {run.stderr.strip()[-300:]}"
    print(
        f"  {setup} {mode} #{i}: makespan {run.figure('makespan'):.1f}, "
        f"mean wait {run.figure('mean_waiting_time'):.1f}, wall {run.wall_s:.2f} s, {status}",
        file=sys.stderr,
        flush=True,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=_count, default=10, help="deterministic runs per setup")
    parser.add_argument(
        "--lockstep-runs", type=_count, default=3, help="lockstep runs per setup (0: none)"
    )
    parser.add_argument(
        "--setup",
        action="append",
        choices=sorted(SETUPS),
        help="only these setups (repeatable; default: all three)",
    )
    parser.add_argument("--scheduler", default=DEFAULT_LIKE, help="scheduler command line")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    parser.add_argument("-o", "--output", default="experiments-out/batkube", metavar="DIR")


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a count >= 0, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.batkube", description=__doc__.split("\n\n")[0]
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    out = Path(args.output)
    names = args.setup or list(SETUPS)
    lockstep = "lockstep" in simulate_modes()
    if not lockstep and args.lockstep_runs:
        print(
            "note: this build's `timewarp simulate` has no --mode lockstep; skipped",
            file=sys.stderr,
        )
    print(f"machine load before: {load_average()}", file=sys.stderr)
    rows: list[Row] = []
    record: dict = {"load_before": load_average(), "setups": {}}
    for name in names:
        setup_rows, setup_record = run_setup(
            SETUPS[name], args.runs, args.lockstep_runs, out, args.scheduler, args.timeout, lockstep
        )
        rows.extend(setup_rows)
        record["setups"][name] = setup_record
    record["load_after"] = load_average()
    record["rows"] = [
        {
            "setup": r.setup,
            "source": r.source,
            **{k: asdict(getattr(r, k)) for k in ("makespan", "mean_wait", "wall")},
        }
        for r in rows
    ]
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    print_table(HEADERS, [r.cells() for r in rows])
    failed = False
    for name in names:
        distinct = record["setups"][name]["deterministic_distinct_jobs_csv"]
        verdict = "identical (σ = 0)" if distinct == 1 else f"{distinct} DIFFERENT outputs"
        print(f"{name}: deterministic jobs.csv over {args.runs} runs: {verdict}")
        failed |= distinct > 1
        failed |= not all(r["ok"] for r in record["setups"][name]["deterministic"])
    print(f"machine load after: {record['load_after']}; details in {out / 'results.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
