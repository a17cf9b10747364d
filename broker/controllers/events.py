"""core/v1 Events the broker writes, shaped like the real ones.

``kubectl describe`` and the official client's ``V1Event`` read them: ``involvedObject``
names the object, ``source.component`` the writer (``job-controller``, ``kubelet``, the
pod's scheduler, ``timewarp-broker``), ``firstTimestamp``/``lastTimestamp`` are virtual
times. They live an hour after their last write, as on a real server (the store's
``ttl_s`` of Events).

Two kinds of writes:

- the controllers' Events (:func:`emit`): names ``<object>.<5 random chars>`` (the
  store's ``generateName``), as they always were — their names and uids are part of the
  run's bytes;
- Events the broker writes *beside* the run (:func:`emit` with ``aside=True``: the
  scheduler's ``Scheduled``, the kubelet's ``Pulled``/``Created``/``Started`` of a pod
  that starts at once): named as the real recorder names them, ``<object>.<hex of the
  time>``, their uids from a stream of their own, so that writing them changes no other
  object's name or uid; an identical Event about the same object within its life is
  counted (``count``, ``lastTimestamp``) rather than written again, as the client's
  EventCorrelator does.

Both are built here of JSON types from a stored object and are admissible as built: the
store takes them as ``trusted`` (no decoding, defaults, validation: a fifth of an
Event's cost); tests/test_store_trusted.py compares their stored bytes with the
admitted path's.
"""

from __future__ import annotations

import sys
import weakref
from collections import deque
from typing import Any

from broker.facade.errors import ApiError
from broker.facade.store import Store

Obj = dict[str, Any]
_NS = 10**9
#: how long the correlator remembers an Event (its life on the server)
REMEMBER_NS = 3600 * _NS


class _Aside:
    """The state of one store's aside Events: names made unique within an instant,
    identical Events counted."""

    def __init__(self) -> None:
        self.instant = -1
        self.offset = 0
        self.known: dict[tuple[str, ...], str] = {}  # identity -> event name
        # the identities in the order first written, and when (one int shared by the
        # Events of an instant): two flat deques rather than one (time, identity) pair
        # per Event — ~190k live ones at 10k nodes
        self.order: deque[tuple[str, ...]] = deque()
        self.times: deque[int] = deque()

    def name(self, obj_name: str, now_ns: int) -> str:
        """``<object>.<hex>`` of the time, one nanosecond on per Event of the instant."""
        if now_ns != self.instant:
            self.instant, self.offset = now_ns, 0
        self.offset += 1
        return f"{obj_name[:200]}.{now_ns + self.offset - 1:x}"

    def remember(self, identity: tuple[str, ...], name: str, now_ns: int) -> None:
        self.known[identity] = name
        times = self.times
        self.order.append(identity)
        times.append(times[-1] if times and times[-1] == now_ns else now_ns)

    def forget_before(self, now_ns: int) -> None:
        times = self.times
        while times and times[0] <= now_ns - REMEMBER_NS:
            times.popleft()
            self.known.pop(self.order.popleft(), None)


_ASIDE: weakref.WeakKeyDictionary[Store, _Aside] = weakref.WeakKeyDictionary()


def _event(obj: Obj, namespace: str, type_: str, reason: str, message: str, component: str, now: str) -> Obj:  # fmt: skip
    meta = obj["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"namespace": namespace},
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


def emit(
    store: Store,
    obj: Obj,
    *,
    type_: str,
    reason: str,
    message: str,
    component: str,
    aside: bool = False,
    host: str = "",
) -> Obj | None:
    """Record one Event about ``obj`` (a stored object) in its namespace; returns it
    (None for an ``aside`` one, whose write nothing reads back). ``host``: the node of a
    kubelet's Event (``source.host``, ``reportingInstance``)."""
    meta = obj["metadata"]
    namespace = meta.get("namespace") or "default"
    now = store.timestamp()
    event = _event(obj, namespace, type_, reason, message, component, now)
    if host:
        event["source"]["host"] = event["reportingInstance"] = host
    if not aside:
        event["metadata"]["generateName"] = f"{meta['name'][:200]}."
        return store.create("events", event, namespace=namespace, trusted=True)
    state = _ASIDE.setdefault(store, _Aside())
    now_ns = store.clock.now_ns()
    state.forget_before(now_ns)
    # interned: the tracker holds one identity per live Event (~190k at 10k nodes), and
    # most of its strings repeat (a pod's uid and namespace in its four Events, the
    # kubelet's messages across pods); equal strings, so the same matches
    identity = tuple(map(sys.intern, (namespace, meta.get("uid", ""), type_, reason, message, component)))  # fmt: skip
    known = state.known.get(identity)
    if known is not None:
        try:
            store.update("events", namespace, known, lambda e: _again(e, now), copy=False)
            return None
        except ApiError as exc:  # expired meanwhile: written anew
            if exc.code != 404:
                raise
    event["metadata"]["name"] = state.name(meta["name"], store.now_epoch_ns())
    store.create("events", event, namespace=namespace, copy=False, aside=True, trusted=True)
    state.remember(identity, event["metadata"]["name"], now_ns)
    return None


def _again(event: Obj, now: str) -> None:
    event["count"] = int(event.get("count") or 1) + 1
    event["lastTimestamp"] = now
