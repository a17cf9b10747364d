"""The embedded simulator and real Batsim 4.2.1, side by side under `timewarp simulate`.

    .venv/bin/python benchmarks/batsim_side_by_side.py                      # ~5 min
    .venv/bin/python benchmarks/batsim_side_by_side.py --schedulers default_like --runs 5
    .venv/bin/python benchmarks/batsim_side_by_side.py --mode lockstep --schedulers default_like

For each input (Batkube's burst, spaced and realistic KIT — on the ``_fixed`` platforms of
``shared/data/batsim-reference``, Batkube's own ones carry config keys SimGrid 3.32
refuses — and the bundled generated platform with its burst) and each sample scheduler,
in deterministic mode: one ``timewarp simulate`` with the embedded simulator and one with
``--batsim``, then makespan, mean waiting time, whether the two ``out_jobs.csv`` are the
same bytes, and each side's wall time (median of ``--runs``, spawn to exit). Prints a
Markdown table (docs/simulator.md, "embedded vs real Batsim"). ``--mode lockstep``
(Batkube's algorithm, which follows the wall clock): figures of the last run of each side,
which vary with the machine's load; CSVs are not expected to be identical.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from experiments._common import (  # noqa: E402
    BATKUBE,
    REFERENCE,
    REPO,
    load_average,
    print_table,
    run_simulate,
)

BATSIM = REPO.parent / "shared" / "tools" / "batsim-4.2.1" / "bin" / "batsim"
INPUTS = {
    "burst": (
        REFERENCE / "platforms/platform_graphene_16nodes_fixed.xml",
        BATKUBE / "workloads/200_delay170.json",
    ),
    "spaced": (
        REFERENCE / "platforms/platform_graphene_16nodes_fixed.xml",
        BATKUBE / "workloads/spaced_200_delay170.json",
    ),
    "KIT": (REFERENCE / "platforms/1node_6core_fixed.xml", BATKUBE / "workloads/KIT_10h_80.json"),
    "generated": (
        REPO / "examples/inputs/cluster16.xml",
        REPO / "examples/inputs/burst_40_delay170.json",
    ),
}
SCHEDULERS = {
    "default_like": ("python -m sample_schedulers.default_like --scheduler-name default", ()),
    "kcss": ("python -m sample_schedulers.kcss --scheduler-name default", ()),
    "kubcg": ("python -m sample_schedulers.kubcg --scheduler-name default", ()),
    "kse_rebalancer": (
        "python -m sample_schedulers.kse_rebalancer --scheduler-name default",
        ("--patch-module", "apscheduler"),
    ),
}
HEADERS = [
    "input",
    "scheduler",
    "makespan (s) embedded / real",
    "mean wait (s) embedded / real",
    "jobs CSV",
    "wall (s) embedded / real",
]


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}" if values else "-"


def compare(
    name: str, scheduler: str, runs: int, work: Path, mode: str = "deterministic"
) -> tuple[list[str], bool]:
    platform, workload = INPUTS[name]
    command, extra = SCHEDULERS[scheduler]
    extra = (*extra, "--mode", mode)
    results = {}
    for side, flags in (("embedded", ()), ("real", ("--batsim", str(BATSIM)))):
        walls, last = [], None
        for i in range(runs):
            last = run_simulate(
                [command], platform, [workload], work / name / scheduler / f"{side}-{i}",
                extra=(*extra, *flags), timeout_s=900,
            )  # fmt: skip
            if not last.ok:
                print(f"  {name} {scheduler} {side} #{i} FAILED: {last.stderr[-500:]}",
                      file=sys.stderr)  # fmt: skip
                break
            walls.append(last.wall_s)
        results[side] = (last, walls)
    (emb, emb_walls), (real, real_walls) = results["embedded"], results["real"]
    same = emb.ok and real.ok and emb.jobs_csv.read_bytes() == real.jobs_csv.read_bytes()

    def pair(key: str) -> str:
        return f"{emb.figure(key):.1f} / {real.figure(key):.1f}"

    row = [
        name,
        scheduler,
        pair("makespan"),
        pair("mean_waiting_time"),
        "identical" if same else ("differs" if emb.ok and real.ok else "run failed"),
        f"{_median(emb_walls)} / {_median(real_walls)}",
    ]
    print(f"  {name} {scheduler}: {row[2:]}", file=sys.stderr, flush=True)
    return row, same


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", default=",".join(INPUTS), help="comma-separated")
    parser.add_argument("--schedulers", default=",".join(SCHEDULERS), help="comma-separated")
    parser.add_argument("--runs", type=int, default=1, help="runs per side (wall median)")
    parser.add_argument("--mode", choices=("deterministic", "lockstep"), default="deterministic")
    parser.add_argument("-o", "--output", help="keep the runs here (default: a temp dir)")
    args = parser.parse_args(argv)
    if not BATSIM.exists():
        parser.error(f"real Batsim is not at {BATSIM}")
    inputs = args.inputs.split(",")
    schedulers = args.schedulers.split(",")
    for item in inputs:
        if item not in INPUTS:
            parser.error(f"unknown input {item!r} (known: {', '.join(INPUTS)})")
    for item in schedulers:
        if item not in SCHEDULERS:
            parser.error(f"unknown scheduler {item!r} (known: {', '.join(SCHEDULERS)})")
    print(f"machine load before: {load_average()}", file=sys.stderr)
    rows, all_same = [], True
    with tempfile.TemporaryDirectory(prefix="side-by-side-") as tmp:
        work = Path(args.output) if args.output else Path(tmp)
        for name in inputs:
            for scheduler in schedulers:
                row, same = compare(name, scheduler, args.runs, work, args.mode)
                rows.append(row)
                all_same &= same or args.mode == "lockstep"
    print(f"machine load after: {load_average()}", file=sys.stderr)
    print_table(HEADERS, rows)
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
