"""The facade's hooks into the simulated cluster: what the API asked for, recorded.

The facade calls these in request threads (some with the store lock held): a binding, an
eviction or a deletion, a create, a graceful DELETE. They only record what happened; the
driver applies it in :meth:`broker.cluster.cluster.Cluster.process` while time is frozen,
in a fixed order. In deterministic mode (:meth:`FacadeInbox.admit_at_once`) a binding or a
graceful DELETE is applied inside its own request instead, under the cluster's state lock.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from broker.cluster.kubelet import KubeletModel
from broker.cluster.state import ClusterState
from broker.facade.errors import not_found

Obj = dict[str, Any]
Binding = tuple[str, str, str]  # namespace, pod, node
Removal = tuple[str, str, Obj | None]  # namespace, pod, the pod as it was
PodKey = tuple[str, str]  # namespace, pod


class Driven(Protocol):
    """The cluster as the inbox drives it in a request (deterministic mode)."""

    state_lock: threading.RLock

    def process(self) -> bool: ...

    def refresh_metrics(self) -> None: ...


class FacadeInbox:
    """The facade's hooks (installed on construction) and the lists they fill."""

    def __init__(self, state: ClusterState, kubelet: KubeletModel, cluster: Driven) -> None:
        self.state = state
        self.kubelet = kubelet
        self.cluster = cluster
        self._lock = threading.Lock()  # the lists the facade's hooks fill
        self._admit_on_bind = False
        self._bindings: list[Binding] = []
        self._removed: list[Removal] = []
        self._created: list[PodKey] = []
        self._terminations: list[PodKey] = []  # DELETEs made graceful, to carry out
        hooks = state.facade.hooks
        hooks.on_bind = self.on_bind
        hooks.on_evict = self.on_remove
        hooks.on_delete_pod = self.on_remove
        hooks.on_create = self.on_create
        hooks.on_terminate_pod = self.on_terminate

    def admit_at_once(self, on: bool = True) -> None:
        """A binding request admits its pod itself (``Cluster.admit_bindings_at_once``)."""
        self._admit_on_bind = on
        self.state.facade.hooks.after_bind = self._after_bind if on else None

    def pending(self) -> bool:
        """Something recorded, not yet taken."""
        with self._lock:
            return bool(self._bindings or self._removed or self._created or self._terminations)

    def take(self) -> tuple[list[PodKey], list[Binding], list[Removal], list[PodKey]]:
        """What was recorded (created, bindings, removed, terminations), emptied."""
        with self._lock:
            created, self._created = self._created, []
            bindings, self._bindings = self._bindings, []
            removed, self._removed = self._removed, []
            terminations, self._terminations = self._terminations, []
        return created, bindings, removed, terminations

    def on_bind(self, namespace: str, pod: str, node: str) -> None:
        """A binding (request thread): refused for an unknown node, else recorded."""
        if node not in self.state.nodes:
            raise not_found("nodes", node)
        if self._admit_on_bind:
            return  # recorded once committed (_after_bind): process() never sees it early
        with self._lock:
            self._bindings.append((namespace, pod, node))

    def _after_bind(self, namespace: str, pod: str, node: str) -> None:
        with self.cluster.state_lock:
            with self._lock:
                self._bindings.append((namespace, pod, node))
            self._settle()

    def _settle(self) -> None:
        """Apply everything recorded (state lock held), as the driver would."""
        while self.cluster.process():
            pass
        self.cluster.refresh_metrics()

    def on_terminate(self, namespace: str, pod: str, grace: int | None) -> Obj | None:
        """A DELETE or eviction (request thread): a pod on a node goes gracefully — marked
        Terminating now, its containers stopped by the kubelet model (in the request in
        deterministic mode, else at the next step). None: it is deleted at once."""
        marked = self.kubelet.steps.mark_terminating(namespace, pod, grace)
        if marked is None:
            return None
        with self._lock:
            self._terminations.append((namespace, pod))
        if self._admit_on_bind:
            with self.cluster.state_lock:
                self._settle()
        return marked

    def on_remove(self, namespace: str, pod: str) -> None:
        """An eviction or an immediate deletion: the pod as it was, recorded."""
        obj = self.state.facade.store.get_or_none("pods", namespace, pod)
        with self._lock:
            self._removed.append((namespace, pod, obj))

    def on_create(self, obj: Obj) -> None:
        """Any API create (store lock held): remember new pods."""
        if obj.get("kind") == "Pod":
            meta = obj["metadata"]
            with self._lock:
                self._created.append((meta.get("namespace", "default"), meta["name"]))
