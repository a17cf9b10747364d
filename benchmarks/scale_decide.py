"""default_like's decision cost on a large, busy cluster (no API server, no loop).

N one-core nodes, a share ``--busy`` of them running a one-core pod (the synthetic scale
ladder's steady state at 80 % load); one-core pods are decided one after another on
these same views (nothing is assumed, so the cluster stays as busy). Reported: ms per
decision, min / median / max over ``--repeat`` rounds, for kube-scheduler's adaptive
sampled search (the default) and for filtering and scoring every node
(``--percentage-of-nodes-to-score 100``).

    .venv/bin/python benchmarks/scale_decide.py --nodes 1000 10000 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sample_schedulers.common.model import NodeSummary, NodeView, PodSummary  # noqa: E402
from sample_schedulers.common.resources import Resources  # noqa: E402
from sample_schedulers.default_like.scoring import SampledDecide, decide  # noqa: E402

GI = 1024**3


def busy_cluster(nodes: int, busy: float, seed: int = 1) -> list[NodeView]:
    rnd = random.Random(seed)
    occupied = set(rnd.sample(range(nodes), int(nodes * busy)))
    one_core = Resources({"cpu": 1000, "memory": 4 * GI})
    views = []
    for i in range(nodes):
        name = f"node{i}"
        pods = ()
        if i in occupied:
            r = Resources({"cpu": 1000})
            pods = (PodSummary("default", f"r{i}", node_name=name, phase="Running",
                               requests=r, nonzero_requests=r),)  # fmt: skip
        views.append(NodeView(NodeSummary(name, one_core), pods))
    return sorted(views, key=lambda v: v.name)


def per_decision_ms(decider, views: list[NodeView], pods: int) -> float:
    r = Resources({"cpu": 1000})
    batch = [PodSummary("default", f"p{i}", requests=r, nonzero_requests=r) for i in range(pods)]
    started = time.perf_counter()
    for pod in batch:
        decision = decider(pod, views)
        assert decision.node is not None
    return (time.perf_counter() - started) * 1000 / pods


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--busy", type=float, default=0.8)
    parser.add_argument("--pods", type=int, default=100, help="decisions per round")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"load before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print("| nodes | busy | search | ms per decision, min / median / max |")
    print("|------:|-----:|--------|-------------------------------------|")
    for nodes in args.nodes:
        views = busy_cluster(nodes, args.busy)
        for label, make in (("adaptive (default)", lambda: SampledDecide(0)),
                            ("every node (100)", lambda: decide)):  # fmt: skip
            times = [per_decision_ms(make(), views, args.pods) for _ in range(args.repeat)]
            print(
                f"| {nodes:,} | {args.busy:.0%} | {label} | {min(times):.2f} / "
                f"{statistics.median(times):.2f} / {max(times):.2f} |"
            )
    print(f"load after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
