"""Decision cost of the KubCG and KSE sample schedulers (pure functions, no API).

Usage: python benchmarks/bench_sched_kubcg_kse.py [--repeat 7]

Prints min / median / max over ``--repeat`` runs of:
- KubCG ``decide()`` for one pod on clusters of 16, 128 and 512 nodes (a quarter with a
  GPU), two pods running per node, full history;
- GreedyLB and RefineLB plans for 100 / 1 000 / 10 000 pods on 4 / 32 / 128 nodes.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from sample_schedulers.kse_rebalancer.balancers import PodLoad, greedy_lb, refine_lb
from sample_schedulers.kubcg.decider import ClusterView, decide
from sample_schedulers.kubcg.history import History
from sample_schedulers.kubcg.model import Estimate, NodeInfo, PodInfo, Slot


def timed(fn, repeat: int, inner: int) -> tuple[float, float, float]:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        runs.append((time.perf_counter() - t0) / inner)
    return min(runs), statistics.median(runs), max(runs)


def kubcg_case(n_nodes: int):
    rng = random.Random(n_nodes)
    nodes = [
        NodeInfo(
            f"n{i:04d}",
            node_class="gpu" if i % 4 == 0 else "cpu",
            gpus=1 if i % 4 == 0 else 0,
            cpu=16,
            memory=64e9,
        )
        for i in range(n_nodes)
    ]
    history = History()
    for node in nodes:
        for _ in range(5):
            history.record("app", node.name, node.node_class, "cpu", rng.uniform(50, 150))
            if node.gpus:
                history.record("app", node.name, node.node_class, "gpu", rng.uniform(5, 30))
    running = [
        Estimate(f"r{i}-{k}", "app", Slot(n.name, "cpu"), 0.0, rng.uniform(10, 100))
        for i, n in enumerate(nodes)
        for k in range(2)
    ]
    view = ClusterView(now=5.0, nodes=nodes, running=running)
    pod = PodInfo("default", "p", "uid-p", "app", cpu=1, memory=1e9, gpu_capable=True)

    def lookup(image, node, resource):
        return history.lookup(image, node.name, node.node_class, resource)

    return lambda: decide(pod, view, lookup)


def kse_case(n_pods: int, n_nodes: int):
    rng = random.Random(n_pods)
    pods = [
        PodLoad(f"p{i}", f"n{rng.randrange(n_nodes // 2 or 1)}", rng.expovariate(1 / 100))
        for i in range(n_pods)
    ]
    residual = {f"n{i}": 0.0 for i in range(n_nodes)}
    return (lambda: greedy_lb(pods, residual)), (lambda: refine_lb(pods, residual, 1.05))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print("| case | min | median | max |")
    print("| --- | --- | --- | --- |")
    for n in (16, 128, 512):
        lo, mid, hi = timed(kubcg_case(n), args.repeat, inner=max(1, 2000 // n))
        print(
            f"| KubCG decide, {n} nodes | {lo * 1e3:.3f} ms | {mid * 1e3:.3f} ms | {hi * 1e3:.3f} ms |"
        )
    for pods, nodes in ((100, 4), (1000, 32), (10000, 128)):
        greedy, refine = kse_case(pods, nodes)
        for name, fn in (("GreedyLB", greedy), ("RefineLB", refine)):
            lo, mid, hi = timed(fn, args.repeat, inner=max(1, 2000 // pods))
            print(
                f"| {name}, {pods} pods / {nodes} nodes | {lo * 1e3:.3f} ms"
                f" | {mid * 1e3:.3f} ms | {hi * 1e3:.3f} ms |"
            )


if __name__ == "__main__":
    main()
