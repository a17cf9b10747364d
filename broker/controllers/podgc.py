"""The pod garbage collector, in virtual time, as kube-controller-manager's
``pkg/controller/podgc`` (``gc_controller.go``) does it — but the terminated-pod threshold.

Every ``gcCheckPeriod`` (20 s, from the controller's start) a pass:

- **terminating pods on out-of-service nodes** (``gcTerminating``): a pod being deleted on
  a node that is not Ready and carries the ``node.kubernetes.io/out-of-service`` taint;
- **orphaned pods** (``gcOrphaned``): a pod bound to a node that does not exist puts that
  node in quarantine for 40 s (``quarantineTime``: a node the informer has not seen yet
  gets time to show up); at the first pass after the quarantine, a node still not found
  (a GET, here the store) is gone, and each pod bound to it is marked Failed with the
  condition ``DisruptionTarget`` (reason ``DeletionByPodGC``, message ``PodGC: node no
  longer exists``) and force-deleted (grace 0) — its Batsim job is killed (KILL_JOB) or,
  pending, rejected, through ``PodOps.delete_controlled_pod``. A node deleted at ``t`` has
  its pods collected 40 to 60 s later;
- **unscheduled terminating pods** (``gcUnscheduledTerminating``): a pod being deleted
  with no node is marked Failed and force-deleted.

A pod not already Succeeded or Failed is marked Failed before its deletion (the real one
patches the status: no kubelet is left to do it). Pods go in the store's order
(namespace, name); the out-of-service ones by creation time then name, as
``byEvictionAndCreationTimestamp`` sorts them.

The passes are those of a 20 s ticker, but a pass that would find nothing is not run: the
controller wakes at the next tick only while something is there to collect (a pod on a
missing node, a node in quarantine, a terminating pod with no node or on an out-of-service
node). A run that deletes no node and never leaves a terminating pod unbound has no timer
of it: its outputs are those of a cluster without the collector.
"""

from __future__ import annotations

from typing import Any

from broker.controllers.base import ControllerState, KeyedController, PodOps
from broker.facade.podstatus import set_condition
from broker.facade.store import Store
from broker.k8s import podutil

COMPONENT = "pod-garbage-collector-controller"
GC_CHECK_PERIOD_NS = 20 * 10**9
QUARANTINE_NS = 40 * 10**9
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
ORPHANED = ("DeletionByPodGC", "PodGC: node no longer exists")
_KEY = ("", "pod-gc")  # one work item: the pass
_ENDED = ("Succeeded", "Failed")

Obj = dict[str, Any]


def _out_of_service(node: Obj) -> bool:
    """Not Ready and tainted ``node.kubernetes.io/out-of-service`` (``gcTerminating``)."""
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions
    )
    taints = (node.get("spec") or {}).get("taints") or []
    return not ready and any(isinstance(t, dict) and t.get("key") == OUT_OF_SERVICE for t in taints)


class PodGCController(KeyedController[ControllerState]):
    """See the module docstring. The listener keeps the names of the existing nodes and
    of the out-of-service ones, and marks the pass when a pod or a node change may give
    it something to collect."""

    watches = ("nodes", "pods")
    listens = watches
    owns = ("pods",)  # it writes a pod's status (phase Failed) before deleting it
    state_type = ControllerState

    def __init__(self, store: Store, clock: Any, pods: PodOps) -> None:
        super().__init__(store, clock, pods)
        self._nodes: set[str] = set()  # existing nodes (listener)
        self._out_of_service: set[str] = set()
        self._quarantine: dict[str, int] = {}  # node -> when it leaves quarantine (driver)
        self._start_ns = 0
        self._last_pass_ns: int | None = None

    def start(self) -> None:
        if not self._started:
            self._start_ns = self.clock.now_ns()
        super().start()

    # ------------------------------------------------------------ change tracking
    def _on_change(self, key: str, event: str, obj: Obj) -> None:
        """Store listener (store lock held)."""
        if key == "nodes":
            name = obj["metadata"]["name"]
            with self._lock:
                if event == "DELETED":
                    self._nodes.discard(name)
                    self._out_of_service.discard(name)
                    self._dirty.add(_KEY)  # its pods, if any, are orphans now
                    return
                self._nodes.add(name)
                if _out_of_service(obj):
                    if name not in self._out_of_service:
                        self._out_of_service.add(name)
                        self._dirty.add(_KEY)
                else:
                    self._out_of_service.discard(name)
        elif key == "pods" and event != "DELETED":
            with self._lock:
                if _collectable(obj, self._nodes, self._out_of_service):
                    self._dirty.add(_KEY)

    # ------------------------------------------------------------ the pass
    def _sync(self, namespace: str, name: str) -> bool:
        """Run the pass if a tick is due now, else wake at the next tick while there is
        something to collect."""
        now = self.clock.now_ns()
        state = self.state_for(_KEY, "pod-gc")
        tick = self._next_tick(now)
        did = False
        if tick == now:
            self._last_pass_ns = now
            did = self._gc(now)
            tick = now + GC_CHECK_PERIOD_NS
        if self._quarantine or self._anything_to_collect():
            self.wake_at(state, _KEY, tick)
        return did

    def _next_tick(self, now: int) -> int:
        """The ticker's first instant at or after ``now`` not yet passed."""
        periods = -(-(now - self._start_ns) // GC_CHECK_PERIOD_NS)
        tick = self._start_ns + max(periods, 0) * GC_CHECK_PERIOD_NS
        if self._last_pass_ns is not None and tick <= self._last_pass_ns:
            tick = self._last_pass_ns + GC_CHECK_PERIOD_NS
        return tick

    def _anything_to_collect(self) -> bool:
        with self._lock:  # never held while the store's lock is taken (the listener's order)
            nodes, out_of_service = set(self._nodes), set(self._out_of_service)
        pods = self.store.list("pods")[0]
        return any(_collectable(pod, nodes, out_of_service) for pod in pods)

    def _gc(self, now: int) -> bool:
        """One pass (``PodGCController.gc``), on the pods and nodes as they are now."""
        pods = self.store.list("pods")[0]
        listed = self.store.list("nodes")[0]
        nodes = {n["metadata"]["name"] for n in listed}
        out_of_service = {n["metadata"]["name"] for n in listed if _out_of_service(n)}
        did = False
        terminating = [
            p for p in pods if podutil.is_terminating(p) and _node_of(p) in out_of_service
        ]
        terminating.sort(key=lambda p: (p["metadata"].get("creationTimestamp") or "", _name(p)))
        for pod in terminating:
            did = self._fail_and_delete(pod, None) or did
        for pod in pods:  # newly found unknown nodes go to quarantine (AddAfter: kept if there)
            node = _node_of(pod)
            if node and node not in nodes:
                self._quarantine.setdefault(node, now + QUARANTINE_NS)
        gone = set()
        for node, ready in sorted(self._quarantine.items()):
            if ready <= now:
                del self._quarantine[node]
                if node not in nodes and self.store.get_or_none("nodes", None, node) is None:
                    gone.add(node)
        for pod in pods:
            if _node_of(pod) in gone:
                did = self._fail_and_delete(pod, ORPHANED) or did
        for pod in pods:
            if podutil.is_terminating(pod) and not _node_of(pod):
                did = self._fail_and_delete(pod, None) or did
        return did

    def _fail_and_delete(self, pod: Obj, condition: tuple[str, str] | None) -> bool:
        """``markFailedAndDeletePodWithCondition``: phase Failed (with the condition
        ``DisruptionTarget`` when given) unless it already ended, then a deletion with
        grace 0. A pod gone (or re-created) since the pass listed it is left alone."""
        meta = pod["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        current = self.store.get_or_none("pods", namespace, name)
        if current is None or current["metadata"].get("uid") != meta.get("uid"):
            return False
        if (current.get("status") or {}).get("phase") not in _ENDED:
            stamp = self.store.timestamp()

            def failed(obj: Obj) -> None:
                obj.setdefault("status", {})["phase"] = "Failed"
                if condition is not None:
                    set_condition(obj, "DisruptionTarget", "True", stamp, *condition)

            self.store.update_status("pods", namespace, name, failed, copy=False)
        self.pods.delete_controlled_pod(namespace, name)
        return True


def _collectable(pod: Obj, nodes: set[str], out_of_service: set[str]) -> bool:
    """Whether a pass would collect ``pod``, given the existing and out-of-service nodes."""
    node = _node_of(pod)
    if node and node not in nodes:
        return True
    return podutil.is_terminating(pod) and (not node or node in out_of_service)


def _node_of(pod: Obj) -> str:
    return (pod.get("spec") or {}).get("nodeName") or ""


def _name(pod: Obj) -> str:
    return pod["metadata"]["name"]
