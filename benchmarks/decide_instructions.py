"""Instructions per default_like decision on a large, busy cluster (valgrind callgrind).

Deterministic counts for changes too small for the machine's timing noise: each case
runs twice under ``valgrind --tool=callgrind`` (same seed, ``PYTHONHASHSEED=0``), once
deciding ``--warmup`` + ``--pods`` pods and once deciding ``--warmup``; the difference
over ``--pods`` is the instructions of one decision in the steady state, start-up
(imports, building the nodes) and once-per-run work (caches filled by the first
decisions) cancelled out.

Cases (N one-core nodes, a share ``--busy`` of them running a one-core pod, one-core
pods decided by ``SampledDecide(0)``, kube-scheduler's adaptive search):

- ``static``: every pod decided on the same views (nothing assumed), as s7-prog measured
  (``benchmarks/scale_decide.busy_cluster``);
- ``churn``: the scheduling loop's steady state through a ``ClusterCache``: per pod
  ``views()``, the decision, the pod assumed then seen bound on its node, and one running
  pod (chosen at random) ends, so the cluster stays as busy.

    .venv/bin/python benchmarks/decide_instructions.py --nodes 10000 --pods 100
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.scale_decide import busy_cluster  # noqa: E402
from sample_schedulers.common.cluster import ClusterCache  # noqa: E402
from sample_schedulers.common.model import NodeSummary, PodSummary  # noqa: E402
from sample_schedulers.common.resources import Resources  # noqa: E402
from sample_schedulers.default_like.scoring import SampledDecide  # noqa: E402

GI = 1024**3
ONE_CORE = Resources({"cpu": 1000})


def _pod(name: str, node: str | None = None) -> PodSummary:
    phase = "Running" if node else "Pending"
    return PodSummary("default", name, node_name=node, phase=phase, requests=ONE_CORE,
                      nonzero_requests=ONE_CORE)  # fmt: skip


def run_static(nodes: int, busy: float, pods: int) -> None:
    views = busy_cluster(nodes, busy)
    decider = SampledDecide(0)
    for i in range(pods):
        assert decider(_pod(f"p{i}"), views).node is not None


def run_churn(nodes: int, busy: float, pods: int, seed: int = 1) -> None:
    rnd = random.Random(seed)
    cache = ClusterCache()
    allocatable = Resources({"cpu": 1000, "memory": 4 * GI})
    for i in range(nodes):
        cache.upsert_node(NodeSummary(f"node{i}", allocatable))
    running = []
    for i in sorted(rnd.sample(range(nodes), int(nodes * busy))):
        pod = _pod(f"r{i}", f"node{i}")
        cache.upsert_pod(pod)
        running.append(pod.key)
    cache.views()
    decider = SampledDecide(0)
    for i in range(pods):
        pod = _pod(f"p{i}")
        cache.upsert_pod(pod)
        decision = decider(pod, cache.views())
        assert decision.node is not None
        cache.assume(pod, decision.node)
        cache.upsert_pod(replace(pod, node_name=decision.node, phase="Running"))
        running.append(pod.key)
        k = rnd.randrange(len(running))
        running[k], running[-1] = running[-1], running[k]
        cache.delete_pod(running.pop())


def _instructions(case: str, nodes: int, busy: float, pods: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out",
               sys.executable, __file__, "--inner", case, "--nodes", str(nodes),
               "--busy", str(busy), "--pods", str(pods)]  # fmt: skip
        env = dict(os.environ, PYTHONHASHSEED="0")
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count in callgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[10000])
    parser.add_argument("--busy", type=float, default=0.8)
    parser.add_argument("--pods", type=int, default=100, help="decisions counted")
    parser.add_argument("--warmup", type=int, default=20, help="decisions not counted")
    parser.add_argument("--cases", nargs="+", default=["static", "churn"])
    parser.add_argument("--inner", choices=["static", "churn"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inner:
        run = run_static if args.inner == "static" else run_churn
        run(args.nodes[0], args.busy, args.pods)
        return 0
    print(f"{args.pods} decisions counted after {args.warmup}")
    print("| nodes | busy | case | instructions per decision |")
    print("|------:|-----:|------|--------------------------:|")
    for nodes in args.nodes:
        for case in args.cases:
            full = _instructions(case, nodes, args.busy, args.warmup + args.pods)
            empty = _instructions(case, nodes, args.busy, args.warmup)
            per = (full - empty) / args.pods
            print(f"| {nodes:,} | {args.busy:.0%} | {case} | {per / 1e6:.2f} M |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
