"""What the official `kubernetes` client costs a scheduler per event, per binding and per
list — the part of a simulation's wall time that is the scheduler's own, whatever
timewarp does (docs/user-guide.md, "What makes a scheduler slow here").

    .venv/bin/python benchmarks/client_costs.py [--repeat 5] [--pods 1000]

Each figure: min/median/max over --repeat rounds (the machine's noise), of the client's
own work with no network: a watch event's JSON decoded and deserialised into a V1Pod (what
`watch.Watch().stream` does per event), a V1Binding built and serialised, and a list of
--pods pods deserialised (a scheduler that lists every pod per decision pays this each
time).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubernetes import client  # noqa: E402


def a_pod(i: int) -> dict:
    """A pod as the facade serves a Running one (the shape matters, not the values)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"w0.{i}", "namespace": "default", "uid": f"uid-{i}",
            "resourceVersion": str(1000 + i), "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "batch"}, "annotations": {"timewarp.io/job-id": f"w0!{i}"},
        },
        "spec": {
            "schedulerName": "default", "nodeName": "node00", "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "registry.timewarp.invalid/job:1",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 300}],
        },
        "status": {
            "phase": "Running", "hostIP": "10.0.0.1", "podIP": "10.0.0.1",
            "startTime": "2026-01-01T00:00:00Z",
            "conditions": [{"type": t, "status": "True",
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}
                           for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
            "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0,
                                   "image": "registry.timewarp.invalid/job:1", "imageID": "",
                                   "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}],
        },
    }  # fmt: skip


def _deserialize(api: client.ApiClient, data: str, kind: str):  # type: ignore[no-untyped-def]
    """As ``watch.Watch`` does per event: 37.x takes the JSON text and its content type;
    older clients take a response object with ``.data``."""
    try:
        return api.deserialize(data, kind, "application/json")
    except (TypeError, AttributeError):
        return api.deserialize(_Raw(data), kind)


class _Raw:
    def __init__(self, data: str) -> None:
        self.data = data


def measure(fn, rounds: int, per: int) -> tuple[float, float, float]:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) / per)
    return min(times), statistics.median(times), max(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--pods", type=int, default=1000)
    args = parser.parse_args()
    api = client.ApiClient()
    event = json.dumps({"type": "MODIFIED", "object": a_pod(1)})
    listing = json.dumps({"apiVersion": "v1", "kind": "PodList", "metadata": {},
                          "items": [a_pod(i) for i in range(args.pods)]})  # fmt: skip
    n = 500

    def events() -> None:
        for _ in range(n):
            obj = json.loads(event)["object"]
            _deserialize(api, json.dumps(obj), "V1Pod")

    def bindings() -> None:
        for i in range(n):
            body = client.V1Binding(
                metadata=client.V1ObjectMeta(name=f"w0.{i}"),
                target=client.V1ObjectReference(kind="Node", name="node00"),
            )
            json.dumps(api.sanitize_for_serialization(body))

    def lists() -> None:
        _deserialize(api, listing, "V1PodList")

    rows = [
        ("a watch event -> V1Pod", measure(events, args.repeat, n)),
        ("a V1Binding built and serialised", measure(bindings, args.repeat, n)),
        (f"a list of {args.pods} pods -> V1PodList", measure(lists, args.repeat, 1)),
    ]
    import kubernetes

    print(f"kubernetes client {kubernetes.__version__}")
    print(f"{'what':<40} {'min ms':>9} {'median ms':>10} {'max ms':>9}")
    for what, (lo, mid, hi) in rows:
        print(f"{what:<40} {lo * 1e3:>9.3f} {mid * 1e3:>10.3f} {hi * 1e3:>9.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
