"""Binding for the rebalancer's schedulerName: replacements go where the plan said.

KSE reconciles a plan with evictions *and* bindings: after a pod is evicted its
ReplicaSet creates a replacement (a new name, Pending, same owner, same schedulerName),
and KSE binds that replacement to the plan's target node. :class:`TargetBook` remembers,
per ReplicaSet uid, the target nodes of pods evicted and not yet replaced;
:class:`Binder` watches pods and binds each pending pod of its schedulerName: to its
owner's next recorded target if it still fits there, else by the initial placement
policy (``random`` as the paper's experiments did, seeded; or ``least-requested``).
"""

from __future__ import annotations

import logging
import random
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Literal

from kubernetes import watch
from kubernetes.client.exceptions import ApiException
from kubernetes.utils import parse_quantity

from sample_schedulers.common.kube import bind_pod, watch_pods

from .snapshot import PodRecord, pod_record, usable_nodes

log = logging.getLogger("kse.binder")

Placement = Literal["random", "least-requested"]
_EPS = 1e-9


class TargetBook:
    """Thread-safe FIFO of target nodes per ReplicaSet uid."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._targets: dict[str, deque[str]] = {}

    def add(self, owner_uid: str, node: str) -> None:
        with self._lock:
            self._targets.setdefault(owner_uid, deque()).append(node)

    def take(self, owner_uid: str | None) -> str | None:
        with self._lock:
            queue = self._targets.get(owner_uid or "")
            if not queue:
                return None
            node = queue.popleft()
            if not queue:
                del self._targets[owner_uid]
            return node

    def discard(self, owner_uid: str, node: str) -> None:
        """Withdraw the most recent ``node`` added for ``owner_uid`` (an eviction failed)."""
        with self._lock:
            queue = self._targets.get(owner_uid)
            if queue and node in queue:
                items = list(queue)
                del items[len(items) - 1 - items[::-1].index(node)]
                if items:
                    self._targets[owner_uid] = deque(items)
                else:
                    del self._targets[owner_uid]

    def clear(self) -> int:
        """Forget all targets; returns how many were never used."""
        with self._lock:
            n = sum(len(q) for q in self._targets.values())
            self._targets.clear()
            return n

    def __len__(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._targets.values())


class Binder:
    """Binds pending pods whose ``spec.schedulerName`` is ours (see module docstring)."""

    def __init__(
        self,
        api,
        scheduler_name: str,
        targets: TargetBook,
        placement: Placement = "random",
        seed: int = 0,
        watch_timeout: int = 300,
        watch_factory: Callable[[], object] = watch.Watch,
    ) -> None:
        self.api = api
        self.scheduler_name = scheduler_name
        self.targets = targets
        self.placement = placement
        self.rng = random.Random(seed)
        self.watch_timeout = watch_timeout
        self.watch_factory = watch_factory
        self.retry_delay = 1.0
        """Seconds to wait before watching again after an error."""
        self._pods: dict[str, PodRecord] = {}
        self._stop = threading.Event()
        self._resource_version: str | None = None
        self.bindings: list[tuple[str, str, str]] = []
        """(pod key, node, why) for every binding made: "target" or the placement policy."""

    def resync(self) -> None:
        pods = self.api.list_pod_for_all_namespaces()
        self._pods = {r.uid: r for r in map(pod_record, pods.items)}
        self._resource_version = pods.metadata.resource_version if pods.metadata else None

    def handle_event(self, kind: str, pod) -> None:
        record = pod_record(pod)
        if pod.metadata.resource_version:
            self._resource_version = pod.metadata.resource_version
        if kind == "DELETED":
            self._pods.pop(record.uid, None)
        else:
            self._pods[record.uid] = record

    def bind_pending(self) -> None:
        """Bind every pending pod of ours, oldest first."""
        pending = sorted(
            (
                r
                for r in self._pods.values()
                if r.scheduler_name == self.scheduler_name
                and r.node is None
                and r.phase == "Pending"
                and not r.deleting
            ),
            key=lambda r: (r.created, r.key),
        )
        if not pending:
            return
        nodes = usable_nodes(self.api.list_node().items)
        for record in pending:
            node, why = self._choose(record, nodes)
            if node is None:
                log.info("%s stays pending: no node fits its requests and tolerations", record.key)
                continue
            if self._bind(record, node):
                self.bindings.append((record.key, node, why))
                log.info("bound %s to %s (%s)", record.key, node, why)

    def _free(self, node) -> tuple[float, float]:
        allocatable = (node.status.allocatable if node.status else None) or {}
        cpu = float(parse_quantity(allocatable.get("cpu", 0)))
        memory = float(parse_quantity(allocatable.get("memory", 0)))
        for r in self._pods.values():
            if r.node == node.metadata.name and r.phase not in ("Succeeded", "Failed"):
                cpu -= r.cpu
                memory -= r.memory
        return cpu, memory

    def _choose(self, record: PodRecord, nodes: list) -> tuple[str | None, str]:
        free = {n.metadata.name: self._free(n) for n in nodes if record.tolerates(n)}
        fitting = [
            name
            for name, (cpu, memory) in free.items()
            if record.cpu <= cpu + _EPS and record.memory <= memory + _EPS
        ]
        target = self.targets.take(record.owner_uid)
        if target is not None:
            if target in fitting:
                return target, "target"
            log.warning("%s: planned node %s has no room; placing it anew", record.key, target)
        if not fitting:
            return None, ""
        if self.placement == "random":
            return self.rng.choice(fitting), "random"
        return max(fitting, key=lambda n: (free[n][0], free[n][1], n)), "least-requested"

    def _bind(self, record: PodRecord, node: str) -> bool:
        try:
            bind_pod(self.api, record.namespace, record.name, node)
        except ApiException as exc:
            log.warning("binding %s to %s failed: %s %s", record.key, node, exc.status, exc.reason)
            if exc.status in (404, 409):
                self._pods.pop(record.uid, None)
            return False
        self._pods[record.uid] = replace(record, node=node)
        return True

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        """Resync, then watch pods and bind until :meth:`stop`."""
        self.resync()
        self.bind_pending()
        watch_pods(
            self.api,
            resource_version=lambda: self._resource_version,
            on_event=self.handle_event,
            resync=self.resync,
            react=self.bind_pending,
            stop=self._stop,
            log=log,
            watch_timeout=self.watch_timeout,
            retry_delay=self.retry_delay,
            watch_factory=self.watch_factory,
        )
