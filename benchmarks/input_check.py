"""The pre-start check of a simulation's inputs (``broker/cluster/input_check.py``
``check_inputs``) against the number of nodes: it must grow linearly.

    .venv/bin/python benchmarks/input_check.py [--nodes 1000 2000 4000 10000] [--repeat 3]

Each figure: the wall time of ``check_inputs`` on a platform of N one-core hosts (with
labels) and a workload of 100 jobs of 10 distinct pod shapes, min/median/max over
``--repeat`` runs (the machine's noise); and the time per node, which stays flat when the
check is O(nodes).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from broker.cluster.input_check import check_inputs  # noqa: E402
from simulator.inputs import write_platform, write_workload  # noqa: E402
from simulator.platform import load_platform  # noqa: E402
from simulator.workload import load_workload  # noqa: E402


def measure(nodes: int, folder: Path) -> float:
    platform_path = write_platform(
        folder / f"p{nodes}.xml",
        nodes,
        props={i: {"labels": f"zone=z{i % 4}"} for i in range(nodes)},
    )
    jobs = [{"id": str(i), "subtime": i, "res": 1, "profile": f"p{i % 10}"} for i in range(100)]
    profiles = {
        f"p{k}": {"type": "delay", "delay": 10, "cpu": f"{100 + k}m", "memory": "10Mi"}
        for k in range(10)
    }
    workload_path = write_workload(folder / f"w{nodes}.json", jobs, profiles)
    platform = load_platform(platform_path)
    workload = load_workload(workload_path, "w0", len(platform.compute))
    started = time.perf_counter()
    check_inputs(platform, [workload])
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 2000, 4000, 10000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'nodes':>7} {'min s':>8} {'median s':>9} {'max s':>8} {'µs/node':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for nodes in args.nodes:
            times = [measure(nodes, Path(tmp)) for _ in range(args.repeat)]
            median = statistics.median(times)
            print(
                f"{nodes:>7} {min(times):>8.3f} {median:>9.3f} {max(times):>8.3f} "
                f"{median / nodes * 1e6:>8.1f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
