"""The broker and the embedded simulator in one process, over their two links: message
objects (``local://``, what `timewarp simulate` uses) against JSON over ZeroMQ
``inproc://`` (the wire path it used before), on the same seeded workload.

    .venv/bin/python benchmarks/local_link.py                 # 2,000 jobs, 3 rounds
    .venv/bin/python benchmarks/local_link.py --jobs 5000 --rounds 5

The broker runs its cluster model with the built-in first-fit binder of
:mod:`broker.drivers.inprocess` (no scheduler process): what is left is the broker's and
the simulator's own cost per message, which is where the link's share shows. The rounds
alternate the two links; each prints CPU seconds of this process (both threads) and wall
seconds; the medians and their ratio come last, with the load average.
"""

from __future__ import annotations

import argparse
import io
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from broker.drivers.inprocess import InProcessRun  # noqa: E402
from experiments._common import load_average  # noqa: E402


def workload(jobs: int, seed: int) -> tuple[list[dict], dict]:
    rng = random.Random(seed)
    profiles = {
        f"p{i}": {"type": "delay", "delay": d, "cpu": "1", "scheduler": "default"}
        for i, d in enumerate((5, 30, 120))
    }
    t, out = 0.0, []
    for i in range(jobs):
        t += round(rng.expovariate(1.0), 3)
        out.append({"id": str(i), "subtime": t, "res": 1, "profile": f"p{rng.randrange(3)}"})
    return out, profiles


def one(endpoint: str, jobs: list[dict], profiles: dict, nodes: int) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory(prefix="local-link-") as tmp:
        world = InProcessRun(Path(tmp), nodes=nodes, cores=4, endpoint=endpoint)
        try:
            cpu, wall = time.process_time(), time.perf_counter()
            world.run_linked(jobs, profiles, io.StringIO())
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            return cpu, wall, world.broker.progress.messages
        finally:
            world.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    jobs, profiles = workload(args.jobs, args.seed)
    print(f"load before: {load_average()}")
    figures: dict[str, list[tuple[float, float]]] = {"inproc": [], "local": []}
    for round_ in range(args.rounds):
        for name in ("inproc", "local"):
            cpu, wall, messages = one(f"{name}://bench-{round_}", jobs, profiles, args.nodes)
            figures[name].append((cpu, wall))
            print(f"round {round_}: {name:6} CPU {cpu:6.2f} s  wall {wall:6.2f} s", flush=True)
    print(f"load after: {load_average()}")
    medians = {
        name: (statistics.median(c for c, _ in rows), statistics.median(w for _, w in rows))
        for name, rows in figures.items()
    }
    for name, (cpu, wall) in medians.items():
        print(f"median {name:6}: CPU {cpu:.2f} s, wall {wall:.2f} s ({args.jobs} jobs)")
    ratio_cpu = medians["inproc"][0] / medians["local"][0]
    ratio_wall = medians["inproc"][1] / medians["local"][1]
    saved = (medians["inproc"][0] - medians["local"][0]) / messages * 1e6
    print(
        f"inproc / local: CPU {ratio_cpu:.2f}x, wall {ratio_wall:.2f}x; CPU saved per message "
        f"{saved:.0f} µs ({messages} messages)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
