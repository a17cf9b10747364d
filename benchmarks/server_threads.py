"""What a server thread inside the scheduler costs on a long, sparse run (issue 25, item 4).

    .venv/bin/python benchmarks/server_threads.py              # 3 runs of each, ~1 min
    .venv/bin/python benchmarks/server_threads.py --runs 5 --server prometheus

The same scheduler (``sample_schedulers.default_like``) with and without a ``/metrics``
server thread beside it (``tests/programs/metrics_scheduler.py``: ``http.server`` +
``serve_forever``, whose selector polls every 0.5 s, or prometheus_client's
``start_http_server``), on a sparse workload: 7 jobs over one simulated hour (one every
10 minutes, 30 s each) on 4 nodes. Each run is one ``timewarp simulate -q --no-plots``
in deterministic mode, the two programs alternating. Printed per program: the
simulation's wall time (the manifest's ``wall_s``) and the command's, min/median/max, the
timer fires, the non-deterministic advances, whether the outputs were byte-identical
across runs; then the ratio of the medians (the issue's goal: ≤ 1.5) and the load average
before and after (on a shared machine the wall time measures the queue for a CPU too).
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from experiments._common import load_average, run_simulate  # noqa: E402
from simulator.testing import write_platform, write_workload  # noqa: E402

GOAL = 1.5
JOBS, GAP_S, DELAY_S = 7, 600, 30


def _inputs(folder: Path) -> tuple[Path, Path]:
    platform = write_platform(folder / "p.xml", 4, cores=2)
    profile = {"type": "delay", "delay": DELAY_S, "cpu": "1", "scheduler": "default"}
    jobs = [{"id": str(i), "subtime": GAP_S * i, "res": 1, "profile": "d"} for i in range(JOBS)]
    return platform, write_workload(folder / "w.json", jobs, {"d": profile})


def _digest(out: Path) -> str:
    h = hashlib.sha256()
    for name in ("out_jobs.csv", "out_schedule.csv", "scheduler-0.log"):
        path = out / name
        h.update(path.read_bytes() if path.exists() else b"-")
    return h.hexdigest()[:12]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--server", choices=("http", "prometheus"), default="http")
    args = parser.parse_args()
    programs = {
        "without server": "python -m sample_schedulers.default_like --scheduler-name default",
        f"with {args.server} server": (
            f"python tests/programs/metrics_scheduler.py --server {args.server} "
            "--scheduler-name default"
        ),
    }
    print(f"load average before: {load_average()}")
    results: dict[str, list] = {name: [] for name in programs}
    with tempfile.TemporaryDirectory(prefix="tw-server-bench-") as tmp:
        platform, workload = _inputs(Path(tmp))
        for i in range(args.runs):
            for name, command in programs.items():
                out = Path(tmp) / f"{name.replace(' ', '_')}-{i}"
                run = run_simulate([command], platform, [workload], out, timeout_s=600)
                if not run.ok:
                    print(f"{name}: run {i} failed:\n{run.stderr[-2000:]}")
                    return 1
                results[name].append((run.figure("wall_s"), run.wall_s, run.figures, _digest(out)))
    print(f"load average after:  {load_average()}")
    medians = {}
    for name, runs in results.items():
        sims = sorted(r[0] for r in runs)
        cmds = sorted(r[1] for r in runs)
        figures = runs[-1][2]
        medians[name] = statistics.median(sims)
        print(
            f"{name:>24}: simulation wall {sims[0]:.2f} / {medians[name]:.2f} / {sims[-1]:.2f} s, "
            f"command {cmds[0]:.2f} / {statistics.median(cmds):.2f} / {cmds[-1]:.2f} s "
            f"(min/med/max of {len(runs)}); timer fires {figures.get('timer_fires')}, "
            f"non-deterministic advances {figures.get('nondeterministic_advances')}, "
            f"simulated {figures.get('simulated_s')} s; outputs identical across runs: "
            f"{len({r[3] for r in runs}) == 1}"
        )
    without, with_server = medians.values()
    ratio = with_server / without
    print(f"ratio of the medians (with / without): {ratio:.2f} (goal <= {GOAL})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
