"""The three time modes side by side: the same scheduler, platform and workload under
``deterministic``, ``lockstep`` (Batkube's algorithm, several runs: it varies) and
``realtime`` (the "reality" baseline, scaled wall clock).

    python benchmarks/modes.py --runs 5 --speed 20 -o /tmp/modes-bench

Prints a Markdown table (min / median / max over the runs of each mode) of makespan, mean
waiting time, kubelet refusals and wall time, and writes every run's figures to
``OUT/results.json``. Needs only this checkout (embedded simulator).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_once(mode: str, args: argparse.Namespace, out: Path, extra: list[str]) -> dict:
    scheduler = args.scheduler
    if mode == "realtime" and scheduler.startswith("python "):
        scheduler = f"{sys.executable} {scheduler[len('python ') :]}"  # no `timewarp run`
    cmd = [
        sys.executable,
        "-m",
        "timewarp",
        "simulate",
        "--mode",
        mode,
        "--scheduler",
        scheduler,
        "-p",
        args.platform,
        "-w",
        args.workload,
        "-o",
        str(out),
        "-q",
        "--no-plots",
        "--cwd",
        str(ROOT),
        *extra,
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    except subprocess.TimeoutExpired:
        return {"ok": False, "reason": "timed out after 900 s"}
    manifest_path = out / "manifest.json"
    if not manifest_path.exists():
        return {"ok": False, "reason": proc.stderr[-500:]}
    manifest = json.loads(manifest_path.read_text())
    return {"ok": manifest["ok"], "reason": manifest["reason"], **manifest["figures"]}


def summary(values: list[float]) -> str:
    if not values:
        return "–"
    return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scheduler", default="python tests/programs/tiny_scheduler.py --scheduler-name default"
    )
    parser.add_argument("-p", "--platform", default="examples/inputs/cluster16.xml")
    parser.add_argument("-w", "--workload", default="examples/inputs/burst_40_delay170.json")
    parser.add_argument("--runs", type=int, default=5, help="runs of lockstep (and realtime)")
    parser.add_argument("--realtime-runs", type=int, default=2)
    parser.add_argument("--speed", default="20", help="realtime speed")
    parser.add_argument(
        "--lockstep-args",
        default="",
        help="extra lockstep flags, e.g. '--timeout-value 50ms --max-simulation-timestep 1000s'",
    )
    parser.add_argument("-o", "--output", default="/tmp/timewarp-modes-bench")
    args = parser.parse_args()
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    plan = [
        ("deterministic", 2, []),
        ("lockstep", args.runs, args.lockstep_args.split()),
        ("realtime", args.realtime_runs, ["--speed", args.speed]),
    ]
    results: dict[str, list[dict]] = {}
    for mode, runs, extra in plan:
        for i in range(runs):
            figures = run_once(mode, args, out / f"{mode}-{i}", extra)
            results.setdefault(mode, []).append(figures)
            print(
                f"{mode} #{i}: ok={figures['ok']} makespan={figures.get('makespan')} "
                f"mean_wait={figures.get('mean_waiting_time')} wall={figures.get('wall_s')}",
                file=sys.stderr,
                flush=True,
            )
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"\n{args.scheduler} on {args.workload} ({args.platform}); min / median / max\n")
    print("| mode | runs ok | makespan (s) | mean waiting (s) | kubelet refusals | wall (s) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for mode, runs in results.items():
        ok = [r for r in runs if r["ok"]]
        cols = [
            summary([r["makespan"] for r in ok]),
            summary([r["mean_waiting_time"] for r in ok]),
            summary([r["rejected_by_kubelet"] for r in ok]),
            summary([r["wall_s"] for r in ok]),
        ]
        label = f"{mode} (speed {args.speed})" if mode == "realtime" else mode
        print(f"| {label} | {len(ok)}/{len(runs)} | " + " | ".join(cols) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
