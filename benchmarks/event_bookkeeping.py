"""What the broker keeps per live Event beside the Event itself (issue 29)

    .venv/bin/python benchmarks/event_bookkeeping.py --pods 5000 --rounds 2

Writes the four aside Events of a pod's start as the broker does (the scheduler's
``Scheduled`` from one copy of the pod, the kubelet's ``Pulled``/``Created``/``Started``
from another, messages made per call) for ``--pods`` pods, one simulated second apart, and
prints per live Event the bytes (tracemalloc) of the repeat-Event tracker
(``broker/controllers/events.py`` ``_Aside``), of the expiry deadlines
(``broker/facade/expiry.py``) and of the rest of the store, then the CPU per Event written
(``process_time``, untraced), with the load average. Run it from two checkouts (before and
after, A B A B) to compare: ``PYTHONPATH=<checkout>``.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, os.environ.get("PYTHONPATH") or str(Path(__file__).resolve().parent.parent))

from broker.controllers import events  # noqa: E402
from broker.facade import Facade, ManualClock  # noqa: E402

SPEC = {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]}


def _facade(n: int) -> Facade:
    f = Facade(ManualClock())
    for i in range(n):
        meta = {"name": f"pod-{i}", "namespace": "default"}
        f.store.create("pods", {"metadata": meta, "spec": SPEC})
    return f


def _emit_all(f: Facade, n: int) -> int:
    for i in range(n):
        node = f"node-{i % 1000}"
        pod = f.store.get("pods", "default", f"pod-{i}")
        message = f"Successfully assigned default/pod-{i} to {node}"
        events.emit(f.store, pod, type_="Normal", reason="Scheduled", message=message,
                    component="default-scheduler", aside=True)  # fmt: skip
        pod = f.store.get("pods", "default", f"pod-{i}")
        for c in pod["spec"]["containers"]:
            for reason, message in (
                ("Pulled", f'Container image "{c["image"]}" already present on machine'),
                ("Created", f"Created container {c['name']}"),
                ("Started", f"Started container {c['name']}"),
            ):
                events.emit(f.store, pod, type_="Normal", reason=reason, message=message,
                            component="kubelet", aside=True, host=node)  # fmt: skip
        f.clock.advance(10**9)
    return 4 * n


def measure(n: int) -> dict[str, float]:
    f = _facade(n)
    t0 = time.process_time()
    written = _emit_all(f, n)
    cpu_us = (time.process_time() - t0) / written * 1e6
    f = _facade(n)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    _emit_all(f, n)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    events._ASIDE.pop(f.store, None)
    gc.collect()
    without_tracker = tracemalloc.get_traced_memory()[0] - base
    f.store._expiry = None  # type: ignore[assignment]
    gc.collect()
    store_rest = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return {
        "tracker": (held - without_tracker) / written,
        "expiry": (without_tracker - store_rest) / written,
        "store rest": store_rest / written,
        "total": held / written,
        "cpu_us": cpu_us,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    print("B/Event tracker | expiry | store rest | total | CPU µs/Event written | load")
    for _ in range(args.rounds):
        m = measure(args.pods)
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"{m['tracker']:.0f} | {m['expiry']:.0f} | {m['store rest']:.0f} | "
              f"{m['total']:.0f} | {m['cpu_us']:.1f} | {load}")  # fmt: skip


if __name__ == "__main__":
    main()
