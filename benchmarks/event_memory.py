"""What one stored Event costs the broker: bytes held (tracemalloc) and CPU per write (issue 29)

    .venv/bin/python benchmarks/event_memory.py --pods 5000

The broker writes ~4 Events per pod (``broker/controllers/events.py``: Scheduled, Pulled,
Created, Started) and keeps each an hour (``ttl_s``): at 10k nodes ~190k live ones. This
writes the same four aside Events for ``--pods`` stored pods and prints, for Events held
as their encoding only (``Strategy.packed``, the default) and as decoded dicts (the build
before), the bytes held per stored Event — the store's share alone and with the
correlator's memory of each (``_Aside.known``) — and the CPU per Event written (``process_time``),
alternating A B A B, with the load average.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.controllers import events  # noqa: E402
from broker.facade import Facade, ManualClock  # noqa: E402
from broker.facade.kinds.core import EventStrategy  # noqa: E402

KINDS = (  # what a pod's start writes (reason, message, component), as the broker does
    ("Scheduled", "Successfully assigned default/{pod} to node-{node}", "default-scheduler"),
    ("Pulled", 'Container image "registry.k8s.io/pause:3.9" already present on machine', "kubelet"),
    ("Created", "Created container c", "kubelet"),
    ("Started", "Started container c", "kubelet"),
)


def _pods(f: Facade, n: int) -> list[dict]:
    spec = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}
    return [
        f.store.create(
            "pods", {"metadata": {"name": f"pod-{i}", "namespace": "default"}, "spec": spec}
        )
        for i in range(n)
    ]


def _emit_all(f: Facade, pods: list[dict]) -> int:
    for i, pod in enumerate(pods):
        name = pod["metadata"]["name"]
        for reason, message, component in KINDS:
            events.emit(f.store, pod, type_="Normal", reason=reason, component=component,
                        message=message.format(pod=name, node=i % 1000), aside=True,
                        host=f"node-{i % 1000}" if component == "kubelet" else "")  # fmt: skip
        f.clock.advance(10**6)
    return len(pods) * len(KINDS)


def measure(n_pods: int, packed: bool) -> dict[str, float]:
    """Bytes held per stored Event (store only / with the correlator) and CPU per write."""
    EventStrategy.packed = packed
    try:
        f = Facade(ManualClock())
        pods = _pods(f, n_pods)
        t0 = time.process_time()
        _emit_all(f, pods)  # untraced: the CPU figure
        cpu = time.process_time() - t0
        f = Facade(ManualClock())
        pods = _pods(f, n_pods)
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        written = _emit_all(f, pods)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
        events._ASIDE.pop(f.store, None)  # the correlator's memory of them
        gc.collect()
        store_only = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        assert len(f.store.list("events")[0]) == written
    finally:
        EventStrategy.packed = True
    return {
        "store": store_only / written,
        "total": held / written,
        "cpu_us": cpu / written * 1e6,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    print("build | B/Event store | B/Event with correlator | CPU µs/Event | load")
    for _ in range(args.rounds):
        for packed in (False, True):
            m = measure(args.pods, packed)
            name = "packed" if packed else "dicts"
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            print(f"{name} | {m['store']:.0f} | {m['total']:.0f} | {m['cpu_us']:.1f} | {load}")


if __name__ == "__main__":
    main()
