"""Is the broker's memory flat in the number of pods that ended? (issue 29)

    .venv/bin/python benchmarks/scale_memory.py --nodes 1000 --pods 10000 20000 --threshold 500
    .venv/bin/python benchmarks/scale_memory.py --nodes 100 --pods 2000 4000 --off

The same cluster (N one-core nodes) and the same kind of load (Poisson arrivals at 80 %
of its capacity, seed 1: ``experiments/scale.py synthetic``), with more and more pods:
each run is one ``timewarp simulate -q --no-plots`` with ``default_like`` and
``--terminated-pod-gc-threshold T``. With the pods that ended collected past ``T``, what
the broker holds should not grow with the number of pods; the table prints each run's
peak RSS (``VmHWM``) of the broker process (the embedded simulator runs inside it) and of
the scheduler, and the growth per extra pod between the smallest and the largest size.
``--off`` adds the same runs without collection (threshold 0), for comparison. Each
run's CSVs with and without collection must be byte-identical (the script says so).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.scale_cost import build  # noqa: E402
from experiments._common import (  # noqa: E402
    DEFAULT_LIKE,
    Run,
    load_average,
    print_table,
    run_simulate,
)
from experiments.scale import synthetic_inputs  # noqa: E402

OUT_CSVS = ("out_jobs.csv", "out_schedule.csv", "out_machine_states.csv")
HEADERS = [
    "nodes × pods",
    "GC threshold",
    "ok",
    "wall (s)",
    "peak RSS broker (MiB)",
    "peak RSS scheduler (MiB)",
    "load (1 min) after",
]


def _mib(run: Run, who: str) -> float:
    return run.peak_rss_kib.get(who, 0) / 1024


def _outputs(run: Run) -> tuple[bytes, ...]:
    return tuple((run.out / name).read_bytes() for name in OUT_CSVS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, nargs="+", default=[10000, 20000])
    parser.add_argument("--threshold", type=int, default=500, help="--terminated-pod-gc-threshold")
    parser.add_argument("--off", action="store_true", help="also run without collection")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=3600.0, help="wall seconds per run")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    if args.nodes < 1 or min(args.pods) < 1 or args.threshold < 1:
        parser.error("--nodes, --pods and --threshold must be >= 1")
    record: dict = {"build": build(), "cpus": os.cpu_count(), "load_before": load_average()}
    print(f"build {record['build']}; machine load before: {record['load_before']}", file=sys.stderr)
    rows, runs, ok = [], {}, True
    thresholds = [args.threshold] + ([0] if args.off else [])
    with tempfile.TemporaryDirectory(prefix="tw-scale-memory-") as tmp:
        for pods in sorted(args.pods):
            platform, workload = synthetic_inputs(Path(tmp) / "inputs", args.nodes, pods, args.seed)
            for threshold in thresholds:
                run = run_simulate(
                    [DEFAULT_LIKE], platform, [workload], Path(tmp) / f"{pods}-{threshold}",
                    ["--terminated-pod-gc-threshold", str(threshold)],
                    timeout_s=args.timeout, detail=True,
                )  # fmt: skip
                ok &= run.ok
                load = load_average().split(" (")[0]
                runs[(pods, threshold)] = run
                print(f"  {args.nodes}×{pods} threshold {threshold}: ok={run.ok} "
                      f"broker {_mib(run, 'broker'):.0f} MiB, scheduler "
                      f"{_mib(run, 'scheduler'):.0f} MiB, wall {run.wall_s:.1f} s; load {load}",
                      file=sys.stderr, flush=True)  # fmt: skip
                rows.append([
                    f"{args.nodes:,} × {pods:,}", f"{threshold:,}" if threshold else "off",
                    "yes" if run.ok else f"no ({run.returncode})", f"{run.wall_s:.1f}",
                    f"{_mib(run, 'broker'):.0f}", f"{_mib(run, 'scheduler'):.0f}", load,
                ])  # fmt: skip
            if args.off and runs[(pods, args.threshold)].ok and runs[(pods, 0)].ok:
                same = _outputs(runs[(pods, args.threshold)]) == _outputs(runs[(pods, 0)])
                print(f"  {pods} pods: CSVs with and without GC "
                      f"{'byte-identical' if same else 'DIFFER'}", file=sys.stderr)  # fmt: skip
                ok &= same
            # the CSVs are gone with the folder: keep only the figures
    record["load_after"] = load_average()
    print_table(HEADERS, rows)
    small, large = min(args.pods), max(args.pods)
    record["runs"] = {
        f"{p}x{t}": {"ok": r.ok, "wall_s": r.wall_s, "rss_mib": {k: v / 1024 for k, v in r.peak_rss_kib.items()}}
        for (p, t), r in runs.items()
    }  # fmt: skip
    for threshold in thresholds:
        a, b = runs[(small, threshold)], runs[(large, threshold)]
        if large > small and a.ok and b.ok:
            per_pod = {
                who: (b.peak_rss_kib.get(who, 0) - a.peak_rss_kib.get(who, 0)) / (large - small)
                for who in ("broker", "scheduler")
            }
            record[f"kib_per_pod_threshold_{threshold}"] = per_pod
            print(
                f"threshold {threshold or 'off'}: peak RSS grows by {per_pod['broker']:.2f} KiB "
                f"(broker) and {per_pod['scheduler']:.2f} KiB (scheduler) per pod from "
                f"{small:,} to {large:,} pods"
            )
    print(
        f"build {record['build']}; machine: {os.cpu_count()} CPUs; load before "
        f"{record['load_before']}; after {record['load_after']}"
    )
    if args.json:
        args.json.write_text(json.dumps(record, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
