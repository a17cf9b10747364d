"""core/v1 Events the broker's controllers write, shaped like the real ones.

``kubectl describe`` and the official client's ``V1Event`` read them: ``involvedObject``
names the object, ``source.component`` the controller (``job-controller``,
``timewarp-broker``), ``firstTimestamp``/``lastTimestamp`` are virtual times. Names are
``<object>.<5 random chars>`` (the store's ``generateName``), not the real server's hex
timestamp: nothing parses them.
"""

from __future__ import annotations

from typing import Any

from broker.facade.store import Store


def emit(
    store: Store,
    obj: dict[str, Any],
    *,
    type_: str,
    reason: str,
    message: str,
    component: str,
) -> dict[str, Any]:
    """Record one Event about ``obj`` (a stored object) in its namespace; returns it."""
    meta = obj["metadata"]
    namespace = meta.get("namespace") or "default"
    now = store.timestamp()
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name'][:200]}.", "namespace": namespace},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion", "v1"),
            "kind": obj.get("kind", ""),
            "name": meta["name"],
            "namespace": namespace,
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "reason": reason,
        "message": message,
        "type": type_,
        "source": {"component": component},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": "",
    }
    return store.create("events", event, namespace=namespace)
