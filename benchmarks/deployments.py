"""What the Deployment, ReplicaSet and pod-lifecycle models cost: the broker and the
embedded simulator in one process (``broker.drivers.inprocess``, a first-fit binder instead of a
scheduler process), a Deployment of N replicas serving for 600 s, scaled down to N/10 at
t=100, back up to N at t=200, and rolled out to a new template at t=300 (25% / 25%),
with a 5 s start-up and a 10 s readiness probe per pod.

    python benchmarks/deployments.py [--replicas 100 500] [--runs 3]

Prints, per size: wall seconds (min / median / max), pods created, ms per pod.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.drivers.inprocess import InProcessRun  # noqa: E402
from simulator import protocol as p  # noqa: E402

NS = "default"


def manifest(replicas: int) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {
                    "labels": {"app": "web"},
                    "annotations": {
                        "timewarp.io/serve-until": "600",
                        "timewarp.io/container-start-seconds": "5",
                    },
                },
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": "shop/web:1",
                            "resources": {"requests": {"cpu": "100m"}},
                            "readinessProbe": {
                                "httpGet": {"port": 80},
                                "initialDelaySeconds": 10,
                                "periodSeconds": 5,
                            },
                        }
                    ]
                },
            },
        },
    }


def one_run(replicas: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        run = InProcessRun(Path(tmp), nodes=max(4, replicas // 40), cores=8)
        store, hooks = run.store, run.facade.hooks

        def before(message: p.Message) -> None:
            if not any(isinstance(e.data, p.SimulationBegins) for e in message.events):
                return
            store.create("deployments.apps", manifest(replicas), prepare=hooks.on_create)
            for t, size in ((100, max(1, replicas // 10)), (200, replicas)):
                run.clock.call_at(
                    t * 10**9,
                    lambda size=size: store.set_replicas("deployments.apps", NS, "web", size),
                )
            patch = {"spec": {"template": {"metadata": {"labels": {"app": "web", "v": "2"}}}}}
            run.clock.call_at(
                300 * 10**9, lambda: store.patch("deployments.apps", NS, "web", patch)
            )

        jobs = [{"id": "1", "subtime": 0, "res": 1, "profile": "p"}]
        profiles = {"p": {"type": "delay", "delay": 1, "cpu": "100m"}}
        start = time.perf_counter()
        try:
            run.run(jobs, profiles, before=before)
            wall = time.perf_counter() - start
            pods = run.cluster.stats.dynamic_jobs
        finally:
            run.close()
    return wall, pods


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, nargs="+", default=[100, 500])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print("| replicas | pods (Batsim jobs) | wall s (min / median / max) | ms per pod (median) |")
    print("| --- | --- | --- | --- |")
    for replicas in args.replicas:
        results = [one_run(replicas) for _ in range(args.runs)]
        walls = sorted(w for w, _ in results)
        pods = results[0][1]
        median = statistics.median(walls)
        print(
            f"| {replicas} | {pods} | {walls[0]:.2f} / {median:.2f} / {walls[-1]:.2f} "
            f"| {median / max(1, pods) * 1000:.1f} |"
        )


if __name__ == "__main__":
    main()
