"""Decision cost of the sample schedulers default_like and kcss, without any API server.

A burst of identical pods (1 cpu, 100Mi) arrives at once on N identical 6-cpu nodes; the
scheduling loop (``WatchScheduler`` with a recording binder) places pods until every
node is full and the rest wait. Reported: milliseconds per binding (decide + assume +
queue), which is what the scheduler adds to each API round trip of the client
(~1–2 ms).

    .venv/bin/python benchmarks/sched_decisions.py [--repeat 5]

With --repeat N, min/median/max over N runs are shown (the machine's noise).
"""

from __future__ import annotations

import argparse
import functools
import logging
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubernetes import client  # noqa: E402

from sample_schedulers.common.loop import WatchScheduler  # noqa: E402
from sample_schedulers.default_like.scoring import SampledDecide  # noqa: E402
from sample_schedulers.default_like.scoring import decide as default_decide  # noqa: E402
from sample_schedulers.kcss.criteria import KcssConfig  # noqa: E402
from sample_schedulers.kcss.decide import decide as kcss_decide  # noqa: E402


def node(name: str) -> client.V1Node:
    return client.V1Node(
        metadata=client.V1ObjectMeta(name=name, resource_version="1"),
        status=client.V1NodeStatus(allocatable={"cpu": "6", "memory": "16Gi", "pods": "110"}),
    )


def pod(i: int) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            name=f"job-{i}",
            namespace="default",
            resource_version="1",
            creation_timestamp=datetime.fromtimestamp(0, UTC),
        ),
        spec=client.V1PodSpec(
            scheduler_name="default",
            containers=[
                client.V1Container(
                    name="c",
                    image="app:1",
                    resources=client.V1ResourceRequirements(
                        requests={"cpu": "1", "memory": "100Mi"}
                    ),
                )
            ],
        ),
        status=client.V1PodStatus(phase="Pending"),
    )


def one_run(decide, nodes: int, pods: int) -> tuple[float, int]:
    bindings: list[tuple[str, str, str]] = []
    s = WatchScheduler(
        None,
        decide,
        scheduler_name="default",
        binder=lambda *b: bindings.append(b),
        fail_fast=True,
        logger=logging.getLogger("bench"),
    )
    s.replace_nodes([node(f"node-{i}") for i in range(nodes)])
    s.replace_pods([pod(i) for i in range(pods)])
    t0 = time.perf_counter()
    while s.schedule_one(timeout=0):
        pass
    return time.perf_counter() - t0, len(bindings)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    logging.getLogger("bench").setLevel(logging.WARNING)
    schedulers = {
        "default_like": lambda: default_decide,
        "default_like P=0": lambda: SampledDecide(0),  # kube's adaptive sampling
        "kcss": lambda: functools.partial(kcss_decide, config=KcssConfig()),
    }
    print(f"{'scheduler':<17} {'nodes':>5} {'pods':>6} {'bound':>6}  ms/binding min/median/max")
    for name, make in schedulers.items():
        for nodes, pods in ((16, 200), (128, 1000), (1024, 2000)):
            if name.endswith("P=0") and nodes < 1024:
                continue  # sampling only pays on the large cluster; keep the run short
            per_bind = []
            for _ in range(args.repeat):
                seconds, bound = one_run(make(), nodes, pods)
                per_bind.append(seconds / bound * 1000)
            print(
                f"{name:<17} {nodes:>5} {pods:>6} {bound:>6}  "
                f"{min(per_bind):.3f} / {statistics.median(per_bind):.3f} / {max(per_bind):.3f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
