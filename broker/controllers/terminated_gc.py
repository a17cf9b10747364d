"""Terminated-pod garbage collection, as kube-controller-manager's PodGC does it
(``pkg/controller/podgc/gc_controller.go``, ``gcTerminated``).

A real cluster does not keep every pod that ever ran: when more pods are terminated
(phase ``Succeeded`` or ``Failed``) than ``--terminated-pod-gc-threshold`` (12,500 by
default; 0 turns it off), PodGC deletes the surplus, evicted ones first (``Failed`` with
reason ``Evicted``), then the oldest by ``creationTimestamp``, the name breaking ties —
a deletion with grace period 0. It looks every ``gcCheckPeriod`` (20 s) from its start.

Here, in virtual time:

- the store listener keeps the set of terminated pods as they change (O(1) a commit),
  instead of listing every pod each period as the real one lists its informer's cache,
  and a heap of their ranks (O(log n) when a pod becomes terminated), so that a pass
  costs O(surplus · log n): choosing the surplus with ``heapq.nsmallest`` walked every
  terminated pod at each pass — at the default threshold 12,500 rank tuples every 20 s
  of virtual time, 0.1 ms per pod at 500 nodes (issue 29, s5-nodes). The heap keeps
  entries of pods no longer terminated (deleted, or their rank changed) until they
  surface and are skipped, and is rebuilt when they outnumber the live ones;
- a pass is due 20 s of virtual time after the previous one (the first at the start). It
  runs at the first step of the cluster at or after that instant: no timer of its own,
  so a run's Batsim messages, hence its outputs, are those of a run without it. A pod
  collected a little later than the real controller would is invisible to the
  simulation (it no longer runs, nor counts anywhere);
- a pod goes as the Job controller's own deletions go (``PodOps.delete_controlled_pod``):
  its Batsim job ended long ago, so nothing is killed or rejected; the controllers that
  count terminated pods have counted it when it ended (they run before this one, in the
  registry's order).

What this bounds is the broker's memory (and every informer-based scheduler's): with it
the store holds at most the threshold's worth of ended pods, whatever the length of the
run (``benchmarks/scale_memory.py``).
"""

from __future__ import annotations

import heapq
from typing import Any

from broker.controllers.base import ControllerState, KeyedController, PodOps
from broker.facade.store import Store

COMPONENT = "pod-garbage-collector"
DEFAULT_THRESHOLD = 12_500  # kube-controller-manager's --terminated-pod-gc-threshold
CHECK_PERIOD_NS = 20 * 10**9  # gcCheckPeriod
_TERMINATED = ("Succeeded", "Failed")
_SLACK = 1024  # stale heap entries tolerated beyond as many as the live ones

Key = tuple[str, str]
# (not evicted, creationTimestamp, name, namespace): the order PodGC deletes in
Rank = tuple[bool, str, str, str]


def _rank(pod: dict[str, Any]) -> Rank | None:
    """Where a terminated pod stands in the order of deletion; None if it is not one."""
    status = pod.get("status") or {}
    phase = status.get("phase")
    if phase not in _TERMINATED:
        return None
    meta = pod["metadata"]
    evicted = phase == "Failed" and status.get("reason") == "Evicted"
    created = meta.get("creationTimestamp")
    return (not evicted, created if isinstance(created, str) else "", meta["name"],
            meta.get("namespace") or "")  # fmt: skip


class TerminatedPodGC(KeyedController[ControllerState]):
    """See the module docstring. ``threshold`` may be set after construction (the
    cluster sets the run's ``--terminated-pod-gc-threshold``); <= 0 turns it off."""

    owns = ()
    listens = ("pods",)
    state_type = ControllerState

    def __init__(self, store: Store, clock: Any, pods: PodOps) -> None:
        super().__init__(store, clock, pods)
        self.threshold = DEFAULT_THRESHOLD
        self.collected = 0  # pods deleted so far
        self._terminated: dict[Key, Rank] = {}
        # the ranks of self._terminated's values, and stale ones (see the docstring)
        self._heap: list[Rank] = []
        self._next_ns = 0  # the next pass is due at this virtual instant

    def start(self) -> None:
        if self.threshold <= 0:
            return  # off: not even listening
        super().start()
        for pod in self.store.list("pods")[0]:
            self._on_change("pods", "ADDED", pod)

    def _on_change(self, key: str, event: str, obj: dict[str, Any]) -> None:
        """Store listener (store lock held): the terminated pods, as they change."""
        if key != "pods":
            return
        meta = obj["metadata"]
        pod_key = (meta.get("namespace") or "", meta["name"])
        rank = None if event == "DELETED" else _rank(obj)
        with self._lock:
            if rank is None:
                self._terminated.pop(pod_key, None)
            elif self._terminated.get(pod_key) != rank:  # a pod's every commit: push once
                self._terminated[pod_key] = rank
                heapq.heappush(self._heap, rank)
                if len(self._heap) > 2 * len(self._terminated) + _SLACK:
                    self._heap = list(self._terminated.values())
                    heapq.heapify(self._heap)

    def terminated(self) -> int:
        """How many terminated pods the store holds now."""
        with self._lock:
            return len(self._terminated)

    def has_work(self) -> bool:
        with self._lock:
            over = 0 < self.threshold < len(self._terminated)
        return over and self.clock.now_ns() >= self._next_ns

    def reconcile(self) -> bool:
        """A pass, when one is due: delete the terminated pods beyond the threshold."""
        now = self.clock.now_ns()
        if self.threshold <= 0 or now < self._next_ns:
            return False
        self._next_ns = now + CHECK_PERIOD_NS
        with self._lock:
            surplus = len(self._terminated) - self.threshold
            if surplus <= 0:
                return False
            victims = self._take_smallest_locked(surplus)
        try:
            for _, _, name, namespace in victims:
                self.pods.delete_controlled_pod(namespace, name)
        finally:
            self._keep_undeleted(victims)
        self.collected += len(victims)
        return True

    def _take_smallest_locked(self, count: int) -> list[Rank]:
        """The ``count`` smallest ranks of the terminated pods, in order (what
        ``heapq.nsmallest(count, self._terminated.values())`` gives), off the heap."""
        heap, live = self._heap, self._terminated
        taken: list[Rank] = []
        while len(taken) < count and heap:
            rank = heapq.heappop(heap)
            if live.get((rank[3], rank[2])) == rank and (not taken or rank != taken[-1]):
                taken.append(rank)  # (a pod gone and back with the same rank: twice here)
        return taken

    def _keep_undeleted(self, victims: list[Rank]) -> None:
        """Victims still terminated after the pass (a deletion that did not happen)
        go back on the heap, so that a later pass sees them."""
        with self._lock:
            for rank in victims:
                if self._terminated.get((rank[3], rank[2])) == rank:
                    heapq.heappush(self._heap, rank)
