"""CPU time of `timewarp simulate`'s two plots (gantt.png, utilisation.png).

    python benchmarks/plots.py                      # 16 x 40, 1,000 x 3,000, 1,000 x 30,000
    python benchmarks/plots.py --nodes 200 --jobs 5000

Writes a synthetic out_jobs.csv (seeded: jobs of 60-600 s, one per node at a time, on
nodes drawn at random) and times ``commands.report.plot`` in this process: CPU seconds
(robust to a loaded machine), the import of matplotlib apart. Prints one line per size.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

HEADER = (
    "job_id,workload_name,profile,submission_time,requested_number_of_resources,"
    "requested_time,success,final_state,starting_time,execution_time,finish_time,"
    "waiting_time,turnaround_time,stretch,allocated_resources,consumed_energy,metadata"
)


def write_jobs(path: Path, nodes: int, jobs: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    free_at = [0.0] * nodes
    rows = [HEADER]
    for i in range(jobs):
        node = rng.randrange(nodes)
        start = free_at[node] + rng.uniform(0, 30)
        run = rng.uniform(60, 600)
        free_at[node] = start + run
        rows.append(
            f"{i},w0,p,0,1,-1,1,COMPLETED_SUCCESSFULLY,{start:.3f},{run:.3f},"
            f'{start + run:.3f},{start:.3f},{start + run:.3f},1,{node},-1,""'
        )
    path.write_text("\n".join(rows) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, help="nodes (default: the three sizes)")
    parser.add_argument("--jobs", type=int, help="jobs")
    parser.add_argument("--repeat", type=int, default=3, help="runs per size (default 3)")
    args = parser.parse_args()
    sizes = [(args.nodes, args.jobs)] if args.nodes else [(16, 40), (1000, 3000), (1000, 30000)]
    started = time.process_time()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401

    from commands import report

    print(f"import matplotlib + commands.report: {time.process_time() - started:.2f} s CPU")
    for nodes, jobs in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            write_jobs(out / "out_jobs.csv", nodes, jobs)
            names = [f"node{i}" for i in range(nodes)]
            times = []
            for _ in range(args.repeat):
                t0 = time.process_time()
                report.plot(out / "out", out, names)
                times.append(time.process_time() - t0)
            times.sort()
            print(
                f"{nodes} nodes x {jobs} jobs: two plots {times[len(times) // 2]:.2f} s CPU "
                f"(median of {args.repeat}; min {times[0]:.2f}, max {times[-1]:.2f})"
            )


if __name__ == "__main__":
    main()
