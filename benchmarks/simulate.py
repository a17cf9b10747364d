"""End-to-end wall time of ``timewarp simulate`` (issue 6's performance goals).

    .venv/bin/python benchmarks/simulate.py --runs 5            # burst + spaced, ~2 min
    .venv/bin/python benchmarks/simulate.py --runs 5 --nasa     # + the NASA iPSC quarter
    .venv/bin/python benchmarks/simulate.py --runs 5 --native-speed 20   # + unpatched baseline

For Batkube's burst and spaced inputs with ``default_like`` in deterministic mode, each
run is one ``timewarp simulate -q --no-plots`` process, timed from spawn to exit (what a
user waits for; ``internal`` is the manifest's wall time, without interpreter start-up).
CPU time is attributed by sampling ``/proc`` (see experiments/_common.py): ``sched`` is
the scheduler process (its own run time: what it would spend on a real cluster minus
the network), ``broker`` the simulate process, ``sim`` the simulator; ``total`` is exact
(rusage of all children). Goals: wall ≤ 2.5 s; wall ≤ 1.3 × the scheduler's own time.
The machine's load average is printed before and after: on a shared machine the wall
time measures the queue for a CPU as much as timewarp.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from experiments._common import (  # noqa: E402
    BATKUBE,
    DEFAULT_LIKE,
    Run,
    Summary,
    load_average,
    print_table,
    run_simulate,
    unwrapped_command,
)

CASES = {
    "burst": ("platforms/platform_graphene_16nodes.xml", "workloads/200_delay170.json"),
    "spaced": ("platforms/platform_graphene_16nodes.xml", "workloads/spaced_200_delay170.json"),
}
WALL_GOAL_S = 2.5
RATIO_GOAL = 1.3
HEADERS = [
    "case",
    "runs",
    "wall min/med/max (s)",
    "internal med (s)",
    "CPU sched med (s)",
    "CPU broker med (s)",
    "CPU sim med (s)",
    "CPU total med (s)",
    "wall / sched",
    "total CPU / sched",
]


def summarise(case: str, runs: list[Run]) -> tuple[list[str], dict]:
    good = [r for r in runs if r.ok]
    wall = Summary.of(r.wall_s for r in good)
    internal = Summary.of(r.manifest.get("wall_s", float("nan")) for r in good)
    sched = Summary.of(r.cpu_s.get("scheduler", float("nan")) for r in good)
    broker = Summary.of(r.cpu_s.get("broker", float("nan")) for r in good)
    # the embedded simulator runs inside the simulate process: its CPU is the broker's
    sim = Summary.of(r.cpu_s.get("simulator", 0.0) for r in good)
    total = Summary.of(r.cpu_total_s for r in good)
    row = [
        case,
        f"{len(good)}/{len(runs)}",
        wall.spread(2),
        f"{internal.median:.2f}",
        f"{sched.median:.2f}",
        f"{broker.median:.2f}",
        f"{sim.median:.2f}",
        f"{total.median:.2f}",
        f"{wall.median / sched.median:.2f}" if sched.n else "-",
        f"{total.median / sched.median:.2f}" if sched.n else "-",
    ]
    record = {
        "wall": wall.__dict__,
        "internal": internal.__dict__,
        "cpu_scheduler": sched.__dict__,
        "cpu_broker": broker.__dict__,
        "cpu_simulator": sim.__dict__,
        "cpu_total": total.__dict__,
        "figures": [r.figures for r in good],
        "failures": [r.stderr[-500:] for r in runs if not r.ok],
    }
    return row, record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--nasa", action="store_true", help="also the NASA iPSC quarter (once)")
    parser.add_argument(
        "--native-speed",
        type=float,
        metavar="X",
        help="also run each case once in --mode realtime --speed X: the scheduler then runs "
        "unpatched, and its CPU time is its own run time without timewarp",
    )
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    record: dict = {"cpus": os.cpu_count(), "load_before": load_average(), "cases": {}}
    print(f"machine load before: {record['load_before']}", file=sys.stderr)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tw-bench-") as tmp:
        for case, (platform, workload) in CASES.items():
            runs = []
            for i in range(args.runs):
                run = run_simulate(
                    [DEFAULT_LIKE],
                    BATKUBE / platform,
                    [BATKUBE / workload],
                    Path(tmp) / f"{case}{i}",
                )
                print(f"  {case} #{i}: wall {run.wall_s:.2f} s, cpu {run.cpu_s}", file=sys.stderr)
                runs.append(run)
            row, record["cases"][case] = summarise(case, runs)
            rows.append(row)
            if args.native_speed:
                native = run_simulate(
                    [unwrapped_command(DEFAULT_LIKE)],
                    BATKUBE / platform,
                    [BATKUBE / workload],
                    Path(tmp) / f"{case}-native",
                    extra=["--mode", "realtime", "--speed", f"{args.native_speed:g}"],
                )
                print(
                    f"  {case} realtime: wall {native.wall_s:.2f} s, cpu {native.cpu_s}",
                    file=sys.stderr,
                )
                row, record["cases"][f"{case}-realtime"] = summarise(
                    f"{case}, realtime ×{args.native_speed:g} (unpatched)", [native]
                )
                rows.append(row)
        if args.nasa:
            from experiments.scale import nasa_inputs

            platform, workload = nasa_inputs(Path(tmp) / "nasa", 0.25, "nodes")
            run = run_simulate([DEFAULT_LIKE], platform, [workload], Path(tmp) / "nasa-out")
            print(f"  NASA quarter: wall {run.wall_s:.1f} s, ok={run.ok}", file=sys.stderr)
            row, record["cases"]["nasa-quarter"] = summarise("NASA iPSC quarter", [run])
            rows.append(row)
    record["load_after"] = load_average()
    print_table(HEADERS, rows)
    print(
        f"machine: {os.cpu_count()} CPUs; load before {record['load_before']}; after {record['load_after']}"
    )
    for case in CASES:
        wall = record["cases"][case]["wall"]["median"]
        verdict = "met" if wall <= WALL_GOAL_S else "MISSED"
        print(f"{case}: median wall {wall:.2f} s vs goal {WALL_GOAL_S} s: {verdict}")
        native = record["cases"].get(f"{case}-realtime", {}).get("cpu_scheduler", {})
        if native.get("n"):
            ratio = wall / native["median"]
            verdict = "met" if ratio <= RATIO_GOAL else "MISSED"
            print(
                f"{case}: deterministic wall / unpatched scheduler CPU = {ratio:.2f} "
                f"vs goal {RATIO_GOAL}: {verdict}"
            )
    if args.json:
        args.json.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
