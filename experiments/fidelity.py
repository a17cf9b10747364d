"""Fidelity: the same unpatched scheduler in realtime mode versus deterministic mode.

    .venv/bin/python -m experiments.fidelity -o out/fidelity                   # ~1 min
    .venv/bin/python -m experiments.fidelity --compress 10 --speed 10 --runs 3 \\
        -w /work/shared/data/batkube/workloads/spaced_200_delay170.json -o out/fidelity

The workload (default: Batkube's burst) is compressed in time by ``--compress`` k
(submission times, delays and walltimes divided by k), then run

- deterministically (the reference: decisions at the exact instants, σ = 0), and
- ``--runs`` times in ``--mode realtime --speed S``: the scheduler runs as it would on a
  cluster (no patching; virtual time = wall time × S), so every API round trip and
  every one of its computations takes simulated time, k·S times more than it would at
  the original scale.

Reported: the makespan and mean waiting time of each (×k, back at the original scale),
their difference from deterministic, and the decisions compared job by job: same node,
same start order (Kendall-style count of pairs in a different order), and the start
time shift (realtime − deterministic, at the original scale).

Honest limits: the scheduler's own timers (backoff, resync periods) are not compressed:
in realtime a timer of d seconds spans d·k·S seconds at the original scale, so a
compressed run is a different experiment unless the scheduler's timers are scaled too
(``--realtime-scheduler`` with, e.g., default_like's ``--initial-backoff`` and
``--max-backoff`` divided by k·S); realtime
results vary from run to run and with the machine's load (printed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from experiments._common import (
    BATKUBE,
    DEFAULT_LIKE,
    Run,
    Summary,
    load_average,
    print_table,
    read_rows,
    run_simulate,
    simulate_modes,
    unwrapped_command,
)

HEADERS = [
    "mode",
    "runs",
    "makespan ×k (s)",
    "Δ makespan (s)",
    "mean wait ×k (s)",
    "same node",
    "pairs reordered",
    "start shift med/max (s)",
    "wall (s)",
]


def compress(workload: dict, factor: float) -> dict:
    """A copy of ``workload`` with times divided by ``factor`` (delay profiles only)."""
    out = json.loads(json.dumps(workload))
    for job in out["jobs"]:
        job["subtime"] = job["subtime"] / factor
        if "walltime" in job and job["walltime"] not in (None, -1):
            job["walltime"] = job["walltime"] / factor
    for name, profile in out["profiles"].items():
        if profile.get("type") != "delay":
            raise ValueError(f"profile {name!r}: only delay profiles can be compressed")
        profile["delay"] = profile["delay"] / factor
    return out


def placements(jobs_csv: Path) -> dict[str, tuple[float, str]]:
    """job id -> (start time, allocated resources)."""
    return {
        r["job_id"]: (float(r["starting_time"]), r["allocated_resources"])
        for r in read_rows(jobs_csv)
        if r["starting_time"]
    }


def compare(reference: dict, other: dict, factor: float) -> tuple[int, int, int, list[float]]:
    """(jobs on the same node, jobs in both, pairs started in a different order, shifts).

    Shifts are start-time differences at the original scale (× ``factor``). Jobs that
    started at the same instant in one run are not counted as reordered.
    """
    common = sorted(set(reference) & set(other))
    same_node = sum(1 for j in common if reference[j][1] == other[j][1])
    reordered = 0
    for i, a in enumerate(common):
        for b in common[i + 1 :]:
            d_ref = reference[a][0] - reference[b][0]
            d_other = other[a][0] - other[b][0]
            if d_ref * d_other < 0:
                reordered += 1
    shifts = [(other[j][0] - reference[j][0]) * factor for j in common]
    return same_node, len(common), reordered, shifts


def row(mode: str, runs: list[Run], reference: Run | None, factor: float) -> list[str]:
    good = [r for r in runs if r.ok]
    makespan = Summary.of(r.figure("makespan") * factor for r in good)
    wait = Summary.of(r.figure("mean_waiting_time") * factor for r in good)
    cells = [mode, f"{len(good)}/{len(runs)}", makespan.mean_sd(1)]
    if reference is None or not good:
        return [
            *cells,
            "-",
            wait.mean_sd(1),
            "-",
            "-",
            "-",
            Summary.of(r.wall_s for r in good).spread(1),
        ]
    ref_makespan = reference.figure("makespan") * factor
    ref_place = placements(reference.jobs_csv)
    same, total, reordered, shifts = 0, 0, 0, []
    for run in good:
        s, t, o, sh = compare(ref_place, placements(run.jobs_csv), factor)
        same, total, reordered, shifts = same + s, total + t, reordered + o, shifts + sh
    abs_shifts = [abs(x) for x in shifts] or [0.0]
    return [
        *cells,
        f"{makespan.mean - ref_makespan:+.1f}",
        wait.mean_sd(1),
        f"{same}/{total}",
        str(reordered),
        f"{statistics.median(abs_shifts):.1f} / {max(abs_shifts):.1f}",
        Summary.of(r.wall_s for r in good).spread(1),
    ]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.fidelity", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "-w", "--workload", type=Path, default=BATKUBE / "workloads/200_delay170.json"
    )
    parser.add_argument(
        "-p", "--platform", type=Path, default=BATKUBE / "platforms/platform_graphene_16nodes.xml"
    )
    parser.add_argument("--compress", type=float, default=10.0, help="time compression k (10)")
    parser.add_argument("--speed", type=float, default=10.0, help="realtime speed S (10)")
    parser.add_argument("--runs", type=int, default=2, help="realtime runs")
    parser.add_argument("--scheduler", default=DEFAULT_LIKE)
    parser.add_argument(
        "--realtime-scheduler",
        metavar="CMD",
        help="the command for the realtime runs (default: --scheduler), e.g. with its own "
        "timers divided by k·S so they keep their length relative to the workload",
    )
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("-o", "--output", type=Path, default=Path("experiments-out/fidelity"))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.compress <= 0 or args.speed <= 0 or args.runs < 0:
        parser.error("--compress and --speed must be > 0, --runs >= 0")
    try:
        compressed = compress(json.loads(args.workload.read_text()), args.compress)
    except (OSError, ValueError, KeyError) as exc:
        parser.error(f"{args.workload}: {exc}")
    args.output.mkdir(parents=True, exist_ok=True)
    wpath = args.output / f"{args.workload.stem}_compressed_{args.compress:g}.json"
    wpath.write_text(json.dumps(compressed, indent=1))
    print(f"machine load before: {load_average()}", file=sys.stderr)
    det = run_simulate(
        [args.scheduler],
        args.platform,
        [wpath],
        args.output / "deterministic",
        timeout_s=args.timeout,
    )
    print(f"  deterministic: ok={det.ok} wall {det.wall_s:.1f} s", file=sys.stderr)
    rows = [row("deterministic", [det], None, args.compress)]
    real = []
    if "realtime" not in simulate_modes():
        print(
            "this build's `timewarp simulate` has no --mode realtime: only the reference ran",
            file=sys.stderr,
        )
    else:
        for i in range(args.runs):
            run = run_simulate(
                [unwrapped_command(args.realtime_scheduler or args.scheduler)], args.platform, [wpath], args.output / f"realtime-{i}",
                extra=["--mode", "realtime", "--speed", f"{args.speed:g}"], timeout_s=args.timeout,
            )  # fmt: skip
            print(
                f"  realtime #{i}: ok={run.ok} wall {run.wall_s:.1f} s {run.stderr[-300:] if not run.ok else ''}",
                file=sys.stderr,
            )
            real.append(run)
        rows.append(row(f"realtime ×{args.speed:g}", real, det if det.ok else None, args.compress))
    print_table(HEADERS, rows)
    print(
        f"compression k = {args.compress:g}; figures ×k are at the original scale; load after: {load_average()}"
    )
    return 0 if det.ok and all(r.ok for r in real) else 1


if __name__ == "__main__":
    raise SystemExit(main())
