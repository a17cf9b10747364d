"""How a modelled API latency (``timewarp simulate --api-latency``) changes Batkube's
figures: burst, spaced and realistic (KIT) with ``default_like``, at 0, 10 ms and 50 ms
per request, beside Batkube's simulated and real-k3s runs.

    .venv/bin/python -m experiments.api_latency --runs 2

Deterministic runs: each latency is run ``--runs`` times and must give byte-identical
``jobs.csv`` (checked). Every request's response comes that much virtual time later, so
each scheduling decision (list, bind: a few requests) costs simulated time, the way a
real API server's round trips do; the figures say how much of Batkube's real-cluster
waiting time that explains.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from experiments._common import (
    DEFAULT_LIKE,
    Summary,
    jobs_figures,
    load_average,
    print_table,
    run_simulate,
)
from experiments.batkube import SETUPS, csv_runs

LATENCIES = ("0", "10ms", "50ms")
HEADERS = ["setup", "source", "runs", "makespan (s)", "mean wait (s)", "wall med (s)"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs per latency (default 2)")
    parser.add_argument("--setup", action="append", choices=sorted(SETUPS), help="default: all")
    parser.add_argument("--latency", action="append", help=f"default: {', '.join(LATENCIES)}")
    args = parser.parse_args(argv)
    print(f"load average before: {load_average()}", file=sys.stderr)
    table = []
    ok = True
    with tempfile.TemporaryDirectory(prefix="api-latency-") as tmp:
        for name in args.setup or ["burst", "spaced", "realistic"]:
            setup = SETUPS[name]
            for source, pattern in (
                ("Batkube simulated", setup.simu_glob),
                ("Batkube real k3s", setup.real_glob),
            ):
                figures = csv_runs(pattern)
                table.append([name, source, len(figures),
                              Summary.of(m for m, _ in figures).mean_sd(1),
                              Summary.of(w for _, w in figures).mean_sd(1), "-"])  # fmt: skip
            for latency in args.latency or LATENCIES:
                runs = []
                for n in range(args.runs):
                    out = Path(tmp) / f"{name}-{latency}-{n}"
                    runs.append(run_simulate([DEFAULT_LIKE], setup.platform, [setup.workload],
                                             out, ["--api-latency", latency]))  # fmt: skip
                good = [r for r in runs if r.ok]
                same = len({(r.out / "out_jobs.csv").read_bytes() for r in good}) <= 1
                ok = ok and len(good) == len(runs) and same
                makespan, wait = jobs_figures(good[0].out / "out_jobs.csv") if good else (0, 0)
                wall = Summary.of(r.wall_s for r in good)
                table.append([name, f"timewarp --api-latency {latency}"
                              + ("" if same else " (RUNS DIFFER)"), f"{len(good)}/{len(runs)}",
                              f"{makespan:.1f}", f"{wait:.1f}", f"{wall.median:.2f}"])  # fmt: skip
    print_table(HEADERS, table)
    print(f"load average after: {load_average()}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
