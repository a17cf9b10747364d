"""CPU of the broker's own store writes, per Event and per pod (issue 29 direction 1)

    .venv/bin/python benchmarks/store_writes.py --pods 2000

Three figures, each the best of 5 rounds of CPU time (``process_time``), with the load
average: an aside Event (``broker/controllers/events.py`` ``emit``, a new one each time,
as a kubelet's ``Pulled``), a controller's Event (named by ``generateName``), and a pod's
life in the store (create, bind, four aside Events, two status updates by the kubelet),
with a Facade's listeners and one watcher of pods and one of Events, drained as it goes.
Run it from two checkouts alternately (A B A B) to compare builds: a microbenchmark says
what a change saves, not what the whole run gains (``benchmarks/scale_cost.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.controllers import events  # noqa: E402
from broker.facade import Facade, ManualClock  # noqa: E402

MS = 10**6
POD = {
    "metadata": {"labels": {"app": "x", "job": "j"}, "annotations": {"a": "b"}},
    "spec": {
        "schedulerName": "default-scheduler",
        "containers": [
            {
                "name": "c",
                "image": "busybox",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
            }
        ],
    },
}


def _best_us(step: Callable[[int], None], count: int) -> float:
    """The best of 5 rounds of ``count`` steps, µs of CPU per step."""
    rounds = []
    for r in range(5):
        start = time.process_time()
        for i in range(r * 10**7, r * 10**7 + count):
            step(i)
        rounds.append((time.process_time() - start) / count * 1e6)
    return min(rounds)


def _pod_life(f: Facade, i: int) -> None:
    s, name, node = f.store, f"pod-{i}", f"node-{i % 300}"
    body = {**POD, "metadata": {**POD["metadata"], "name": name, "namespace": "default"}}
    s.create("pods", body, copy=False)
    pod = s.bind("default", name, node)
    f.clock.advance(MS)
    message = f"Successfully assigned default/{name} to {node}"
    events.emit(s, pod, type_="Normal", reason="Scheduled", message=message, component="default-scheduler", aside=True)  # fmt: skip
    for reason in ("Pulled", "Created", "Started"):
        events.emit(s, pod, type_="Normal", reason=reason, message=f"{reason} container c", component="kubelet", aside=True, host=node)  # fmt: skip

    def running(obj: dict) -> None:
        status = obj.setdefault("status", {})
        status.update(phase="Running", startTime=s.timestamp(), podIP="10.0.0.1")
        started = {"running": {"startedAt": s.timestamp()}}
        status["containerStatuses"] = [{"name": "c", "ready": True, "state": started}]

    def done(obj: dict) -> None:
        obj["status"]["phase"] = "Succeeded"
        ended = {"terminated": {"exitCode": 0, "finishedAt": s.timestamp()}}
        obj["status"]["containerStatuses"][0]["state"] = ended

    s.update("pods", "default", name, running, copy=False)
    f.clock.advance(1000 * MS)
    s.update("pods", "default", name, done, copy=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=2000, help="pod lives per round")
    parser.add_argument("--events", type=int, default=3000, help="Events per round")
    args = parser.parse_args()
    print(f"load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1/5/15 min)")

    f = Facade(ManualClock(), history_limit=1000)
    pod = f.store.create("pods", {**POD, "metadata": {"name": "p"}})

    def aside(i: int) -> None:
        f.clock.advance(MS)
        events.emit(f.store, pod, type_="Normal", reason="Pulled", message=f"m{i}", component="kubelet", aside=True, host="node-1")  # fmt: skip

    def controller(i: int) -> None:
        events.emit(f.store, pod, type_="Normal", reason="SuccessfulCreate", message=f"m{i}", component="job-controller")  # fmt: skip

    print(f"aside Event: {_best_us(aside, args.events):.1f} µs")
    print(f"controller Event: {_best_us(controller, args.events):.1f} µs")

    f = Facade(ManualClock(), history_limit=1000)
    watchers = (f.store.watch("pods"), f.store.watch("events"))

    def life(i: int) -> None:
        _pod_life(f, i)
        for w in watchers:
            w.drain()

    print(f"a pod's store life: {_best_us(life, args.pods):.0f} µs")
    print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1/5/15 min)")


if __name__ == "__main__":
    main()
