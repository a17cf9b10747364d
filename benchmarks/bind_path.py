"""CPU per pod of the broker's cluster side, in one thread, no scheduler (issue 29).

    .venv/bin/python benchmarks/bind_path.py [--nodes 300] [--pods 3000] [--repeat 3]
    .venv/bin/python benchmarks/bind_path.py --profile 40   # cProfile's top 40, by own time

Each pod goes the way it goes in a deterministic ``timewarp simulate``: JOB_SUBMITTED
(``Cluster.submit`` and the driver's ``process()`` rounds), the binding POST through the
facade's API in process (``Api.handle``: the request admits its pod at once, as with
``Cluster.admit_bindings_at_once``), JOB_COMPLETED (``Cluster.complete`` and the rounds
after it). ``out_decisions.csv``'s listener (``broker/cluster/decisions.py``) is on the
store, as ``timewarp simulate`` puts it. Time moves 1 ms per pod. No HTTP, no clock
service, no simulator: what is left is the cluster model, the controllers, the store and
the API handler — the part of "broker rest" (``benchmarks/scale_cost.py``) that the
binding path and the cluster hooks cost. CPU is ``time.process_time`` per pod (µs), min /
median / max over ``--repeat`` fresh clusters. To compare two checkouts, run this file
with each one's PYTHONPATH, alternated.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.cluster.cluster import JOB_ID_ANNOTATION, Cluster  # noqa: E402
from broker.cluster.decisions import DecisionLog  # noqa: E402
from broker.facade import Facade  # noqa: E402
from broker.facade.clock import ManualClock  # noqa: E402
from broker.facade.server import Request  # noqa: E402
from simulator import protocol as p  # noqa: E402
from simulator.testing import simulation_begins  # noqa: E402

PROFILE = {"one-cpu": {"type": "delay", "delay": 10, "cpu": "1"}}


def _world(nodes: int) -> tuple[Facade, Cluster, str]:
    facade = Facade(ManualClock())
    token = facade.add_token("sched")
    clock = facade.clock
    log = DecisionLog(
        lambda: clock.now_ns() / 1e9,
        clock.wall_epoch_ns(),
        lambda pod: str(((pod.get("metadata") or {}).get("annotations") or {}).get(
            JOB_ID_ANNOTATION, ""
        )),
        facade.store.types,
    )  # fmt: skip
    facade.store.add_listener(log.on_commit, skip=("events",))
    cluster = Cluster(facade, clock.now_ns)
    hosts = [{"id": i, "name": f"node-{i}", "properties": {"core": "4"}} for i in range(nodes)]
    cluster.begin(simulation_begins(hosts, PROFILE))
    cluster.admit_bindings_at_once()
    _settle(cluster)
    return facade, cluster, token


def _settle(cluster: Cluster) -> None:
    """The driver's step: process() until a round does nothing."""
    with cluster.state_lock:
        while cluster.process():
            cluster.refresh_metrics()
        cluster.take_decisions()


def _bind(facade: Facade, token: str, namespace: str, name: str, node: str) -> None:
    body = {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}}
    request = Request(
        "POST",
        f"/api/v1/namespaces/{namespace}/pods/{name}/binding",
        {"authorization": f"Bearer {token}", "content-type": "application/json"},
        json.dumps(body).encode(),
        1,
        lambda _frame: None,
    )
    response = facade.api.handle(request)
    assert response.status == 201, response.body  # type: ignore[union-attr]


def run(nodes: int, pods: int) -> float:
    """CPU µs per pod: submit, bind, complete, with the rounds each one causes."""
    facade, cluster, token = _world(nodes)
    clock = facade.clock
    started = time.process_time()
    for i in range(pods):
        job_id = f"w0!{i}"
        clock.advance(1_000_000)
        with cluster.state_lock:
            cluster.submit(p.JobSubmitted(job_id, {"id": job_id, "profile": "one-cpu"}))
        _settle(cluster)
        jp = cluster.jobs[job_id]
        _bind(facade, token, jp.namespace, jp.name, f"node-{i % nodes}")
        _settle(cluster)
        with cluster.state_lock:
            cluster.complete(p.JobCompleted(job_id, "COMPLETED_SUCCESSFULLY", 0, p.ProcSet()))
        _settle(cluster)
    return (time.process_time() - started) / pods * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=int, default=0, help="print cProfile's top N")
    args = parser.parse_args()
    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(run, args.nodes, args.pods)
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile)
        return 0
    cpu = [run(args.nodes, args.pods) for _ in range(args.repeat)]
    print(
        f"{args.nodes} nodes × {args.pods} pods: CPU µs/pod min {min(cpu):,.0f}  median "
        f"{statistics.median(cpu):,.0f}  max {max(cpu):,.0f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
