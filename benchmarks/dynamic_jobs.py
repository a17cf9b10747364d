"""What controller-made pods cost the broker: the same amount of work as static Batsim jobs,
as the pods of one batch/v1 Job (dynamic jobs), and as ReplicaSet replacements after an
eviction of every pod.

    python benchmarks/dynamic_jobs.py --pods 200 1000 --runs 3

In process (:mod:`broker.drivers.inprocess`: broker + embedded simulator, a first-fit binder, no
scheduler process), 50 one-core nodes, pods of 1 cpu running 10 s. Prints a Markdown table
of wall time (min / median / max over the runs) and per-pod cost; quote ``uptime`` with it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker import naming  # noqa: E402
from broker.drivers.inprocess import InProcessRun  # noqa: E402
from simulator import protocol as p  # noqa: E402

NODES = 50
PROFILE = {"type": "delay", "delay": 10, "cpu": "1", "scheduler": "default"}


def static(run: InProcessRun, n: int) -> None:
    jobs = [{"id": str(i), "subtime": 0, "res": 1, "profile": "d"} for i in range(n)]
    run.run(jobs, {"d": PROFILE})


def job(run: InProcessRun, n: int) -> None:
    manifest = {
        "metadata": {"name": "bench", "namespace": "default"},
        "spec": {
            "completions": n,
            "parallelism": NODES,
            "template": {
                "metadata": {"annotations": {"timewarp.io/duration": "10"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}
                    ],
                },
            },
        },
    }

    def before(message: p.Message) -> None:
        if any(isinstance(e.data, p.SimulationBegins) for e in message.events):
            run.store.create("jobs.batch", manifest, prepare=run.facade.hooks.on_create)

    run.run([{"id": "0", "subtime": 0, "res": 1, "profile": "d"}], {"d": PROFILE}, before=before)
    assert run.store.get("jobs.batch", "default", "bench")["status"]["succeeded"] == n


def replicaset(run: InProcessRun, n: int) -> None:
    """n ReplicaSet pods, NODES running at a time; at t=5 every running pod is evicted."""
    jobs = [
        {"id": f"r{i}", "subtime": 0, "res": 1, "profile": "d", "replicaset": "web"}
        for i in range(n)
    ]

    def evict() -> None:
        pods = run.store.list("pods", "default", label_selector="timewarp.io/replicaset=web")[0]
        for pod in pods:
            if pod["status"]["phase"] == "Running":
                run.facade.hooks.on_evict("default", pod["metadata"]["name"])
                run.store.delete("pods", "default", pod["metadata"]["name"])

    def before(message: p.Message) -> None:
        if any(isinstance(e.data, p.SimulationBegins) for e in message.events):
            run.clock.call_at(5 * 10**9, evict)

    run.run(jobs, {"d": PROFILE}, before=before)
    replaced = [r for r in run.rows() if naming.original_job_id(r["job_id"]) != r["job_id"]]
    assert len(replaced) == min(n, NODES)


SCENARIOS = {"static jobs": static, "one Job (dynamic)": job, "ReplicaSet evictions": replicaset}


def measure(scenario, n: int) -> float:  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory() as tmp:
        run = InProcessRun(Path(tmp), nodes=NODES, cores=1)
        try:
            start = time.perf_counter()
            scenario(run, n)
            return time.perf_counter() - start
        finally:
            run.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
    print("| scenario | pods | wall s (min / median / max) | ms per pod (median) |")
    print("| --- | --- | --- | --- |")
    for n in args.pods:
        for name, scenario in SCENARIOS.items():
            times = sorted(measure(scenario, n) for _ in range(args.runs))
            median = statistics.median(times)
            print(
                f"| {name} | {n} | {times[0]:.2f} / {median:.2f} / {times[-1]:.2f} "
                f"| {median / n * 1000:.2f} |",
                flush=True,
            )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
