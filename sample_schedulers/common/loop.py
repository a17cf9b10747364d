"""The watch-driven scheduling loop shared by the samples that place pods one at a time.

Three threads, like kube-scheduler's informers + scheduleOne loop:

- a pod watcher and a node watcher, each *list, then watch from the list's
  resourceVersion*, re-watching when a watch ends and re-listing after ``410 Gone`` or an
  error; every event updates the ``ClusterCache`` and the ``SchedulingQueue``;
- the scheduling loop (the caller's thread): waits until both lists arrived, then pops
  the next pod, asks ``decide(pod, views)`` for a node, assumes the pod there and binds
  it; a pod no node fits goes back to the queue, retried after its backoff once the
  cluster changed (see ``queue``).

A pod is ours when ``spec.schedulerName`` equals ``scheduler_name``, it has no
``spec.nodeName``, it is not terminated and not being deleted. All pods (whoever
scheduled them) count against node resources.

The decision function gets an immutable snapshot, so decisions depend only on the cache
contents and the order pods are popped — the same events give the same bindings.
Waiting uses ``threading.Condition.wait`` with a timeout until the next backoff expiry:
no polling.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from .cluster import ClusterCache
from .kube import bind_pod
from .model import NodeView, PodSummary, node_summary, pod_summary
from .queue import SchedulingQueue


def _monotonic() -> float:
    # a call in a function body, not a reference bound at import, so that a source
    # rewriter (timewarp's) sees and reroutes it like any other clock reading
    return time.monotonic()


@dataclass(frozen=True)
class Decision:
    """Where to put a pod (``node``), or None with ``reason`` saying why nowhere.
    ``detail`` is free text for the log (scores, criteria)."""

    node: str | None
    reason: str = ""
    detail: str = ""


Decide = Callable[[PodSummary, list[NodeView]], Decision]
Binder = Callable[[str, str, str], None]


class WatchScheduler:
    def __init__(
        self,
        core: Any,
        decide: Decide,
        *,
        scheduler_name: str = "default-scheduler",
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_unschedulable: float = 300.0,
        watch_timeout: int = 300,
        retry_delay: float = 1.0,
        logger: logging.Logger | None = None,
        clock: Callable[[], float] | None = None,
        binder: Binder | None = None,
        fail_fast: bool = False,
    ) -> None:
        self.core = core
        self.decide = decide
        self.scheduler_name = scheduler_name
        self.watch_timeout = watch_timeout
        self.retry_delay = retry_delay
        self.log = logger or logging.getLogger(__name__)
        self.clock = clock or _monotonic
        self.bind: Binder = binder or (lambda ns, pod, node: bind_pod(self.core, ns, pod, node))
        self.cache = ClusterCache()
        self.queue = SchedulingQueue(initial_backoff, max_backoff, max_unschedulable)
        self.bound = 0
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._synced = {"pods": False, "nodes": False}
        self.fail_fast = fail_fast
        self._failures: list[tuple[PodSummary, str]] = []
        self._failures_generation = -1

    # -- events (called by the watchers; public so tests can drive them) ---------------

    def is_ours(self, pod: PodSummary) -> bool:
        return (
            pod.scheduler_name == self.scheduler_name
            and pod.node_name is None
            and not pod.terminated
            and not pod.deleting
        )

    def on_pod_event(self, kind: str, obj: Any) -> None:
        """Apply one watch event (ADDED, MODIFIED, DELETED) for a ``V1Pod``."""
        try:
            pod = pod_summary(obj)
        except ValueError as exc:
            self.log.warning("ignoring pod event: %s", exc)
            return
        with self._cond:
            now = self.clock()
            if kind == "DELETED":
                old = self.cache.delete_pod(pod.key)
                self.queue.remove(pod.key)
                if old is not None and old.occupies_node:
                    self.queue.move_all(now)
            else:
                old = self.cache.upsert_pod(pod)
                self._file(pod, now)
                freed = old is not None and old.occupies_node and not pod.occupies_node
                if freed:
                    self.queue.move_all(now)
            self._cond.notify_all()

    def on_node_event(self, kind: str, obj: Any) -> None:
        """Apply one watch event for a ``V1Node``; any change may let waiting pods fit."""
        try:
            node = node_summary(obj)
        except ValueError as exc:
            self.log.warning("ignoring node event: %s", exc)
            return
        with self._cond:
            if kind == "DELETED":
                self.cache.delete_node(node.name)
            elif self.cache.upsert_node(node) != node:  # new, or changed in what we read
                self.queue.move_all(self.clock())
            self._cond.notify_all()

    def replace_pods(self, objs: Iterable[Any]) -> None:
        """A fresh list: pods missing from it were deleted while we were not watching."""
        seen = set()
        for obj in objs:
            self.on_pod_event("ADDED", obj)
            seen.add(f"{obj.metadata.namespace}/{obj.metadata.name}")
        with self._cond:
            for key in sorted(set(self.cache.pods) - seen):
                old = self.cache.delete_pod(key)
                self.queue.remove(key)
                if old is not None and old.occupies_node:
                    self.queue.move_all(self.clock())
            self._synced["pods"] = True
            self._cond.notify_all()

    def replace_nodes(self, objs: Iterable[Any]) -> None:
        seen = set()
        for obj in objs:
            self.on_node_event("ADDED", obj)
            seen.add(obj.metadata.name)
        with self._cond:
            for name in sorted(set(self.cache.nodes) - seen):
                self.cache.delete_node(name)
            self._synced["nodes"] = True
            self._cond.notify_all()

    def _file(self, pod: PodSummary, now: float) -> None:
        if not self.is_ours(pod):
            self.queue.remove(pod.key)
        elif not self.cache.is_assumed(pod.key):
            self.queue.add(pod, now)
        # else: assumed but still unbound in the watch — the binding is under way and
        # its outcome (done, or back to the queue on failure) settles the pod's place

    # -- the scheduling loop -----------------------------------------------------------

    @property
    def synced(self) -> bool:
        return all(self._synced.values())

    def schedule_one(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds; None = until something happens) for a pod
        to be ready, then try it. Returns False when nothing was tried."""
        with self._cond:
            pod = self.queue.pop(self.clock()) if self.synced else None
            if pod is None:
                wait = self.queue.next_wakeup(self.clock()) if self.synced else None
                if timeout is not None:
                    wait = timeout if wait is None else min(wait, timeout)
                if not self._stop.is_set():
                    self._cond.wait(wait)
                return False
            generation = self.cache.generation
            decision = self._known_failure(pod, generation)
            views = self.cache.views() if decision is None else []
        if decision is None:
            decision = self.decide(pod, views)
            if decision.node is None and self.fail_fast:
                self._remember_failure(pod, decision.reason, generation)
        with self._cond:
            now = self.clock()
            if pod.key not in self.queue:  # deleted or bound elsewhere meanwhile
                return True
            if decision.node is None:
                self.queue.failed(pod.key, now)
                self._cond.notify_all()  # for observers waiting on progress
                attempts = self.queue.attempts(pod.key)
                # like kube-scheduler, do not flood the log with retries of a backlog
                self.log.log(
                    logging.INFO if attempts == 1 else logging.DEBUG,
                    "%s unschedulable (attempt %d): %s",
                    pod.key,
                    attempts,
                    decision.reason,
                )
                return True
            self.cache.assume(pod, decision.node)
        try:
            self.bind(pod.namespace, pod.name, decision.node)
        except Exception as exc:  # the API said no, or the connection failed
            with self._cond:
                self.cache.forget(pod.key)
                status = getattr(exc, "status", None)
                if isinstance(exc, ApiException) and status in (404, 409):
                    # gone, or already bound: the watch will tell us the rest
                    self.queue.remove(pod.key)
                else:
                    self.queue.failed(pod.key, self.clock(), unschedulable=False)
            self.log.warning("binding %s to %s failed: %s", pod.key, decision.node, exc)
            return True
        with self._cond:
            self.queue.done(pod.key)
            self.bound += 1
            self._cond.notify_all()
        self.log.info("bound %s to %s %s", pod.key, decision.node, decision.detail)
        return True

    # -- fail fast: a pod needing at least as much as one that just failed fails too ---

    def _known_failure(self, pod: PodSummary, generation: int) -> Decision | None:
        """With ``fail_fast`` (valid when ``decide`` fails exactly when no node passes
        ``feasible_nodes``, whose checks are monotone in the requests): if, on these very
        views, a pod with the same selector and tolerations and requests no larger
        failed, this one fails for the same reason, without looking at every node."""
        if not self.fail_fast or generation != self._failures_generation:
            return None
        for failed, reason in self._failures:
            if (
                failed.node_selector == pod.node_selector
                and failed.tolerations == pod.tolerations
                and all(
                    pod.requests[r] >= failed.requests[r]
                    for r in set(failed.requests.names()) | set(pod.requests.names())
                )
            ):
                if failed.requests == pod.requests:
                    return Decision(None, reason)
                return Decision(None, f"{reason} (needs at least what {failed.key} needed)")
        return None

    def _remember_failure(self, pod: PodSummary, reason: str, generation: int) -> None:
        if generation != self._failures_generation:
            self._failures = []
            self._failures_generation = generation
        if len(self._failures) < 64:
            self._failures.append((pod, reason))

    def stop(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()

    def run(self) -> None:
        """Start the watchers and schedule until ``stop()`` (or an exception)."""
        for name, target in (("pod-watch", self._watch_pods), ("node-watch", self._watch_nodes)):
            threading.Thread(target=target, name=name, daemon=True).start()
        self.log.info("scheduler %r started", self.scheduler_name)
        while not self._stop.is_set():
            self.schedule_one()

    # -- watchers ----------------------------------------------------------------------

    def _watch_pods(self) -> None:
        self._informer(
            "pods", self.core.list_pod_for_all_namespaces, self.replace_pods, self.on_pod_event
        )

    def _watch_nodes(self) -> None:
        self._informer("nodes", self.core.list_node, self.replace_nodes, self.on_node_event)

    def _informer(
        self,
        what: str,
        list_call: Callable[..., Any],
        replace: Callable[[Iterable[Any]], None],
        on_event: Callable[[str, Any], None],
    ) -> None:
        """List, then watch from the list's resourceVersion; re-list when the watch says
        the version is gone (410) or anything fails."""
        while not self._stop.is_set():
            try:
                listing = list_call()
                replace(listing.items or [])
                version = listing.metadata.resource_version
                # the cache keeps summaries: let the listed objects go rather than hold
                # them (every node, as the client's models) for the whole watch
                del listing
                while not self._stop.is_set():
                    version = self._watch_once(list_call, version, on_event)
                    if version is None:
                        self.log.info("%s watch expired; listing again", what)
                        break
            except ApiException as exc:
                if self._stop.is_set():
                    return  # shutting down: connections die, nothing to report
                if exc.status == 410:
                    self.log.info("%s watch expired (410); listing again", what)
                    continue
                self.log.warning("%s watch failed: %s; retrying", what, exc)
                self._stop.wait(self.retry_delay)
            except Exception as exc:  # connection reset, undecodable event, ...
                if self._stop.is_set():
                    return
                self.log.warning("%s watch failed: %r; retrying", what, exc)
                self._stop.wait(self.retry_delay)

    def _watch_once(
        self, list_call: Callable[..., Any], version: str, on_event: Callable[[str, Any], None]
    ) -> str | None:
        """One watch request. Returns the resourceVersion to resume from, or None when
        the server reported an ERROR event (the version is too old)."""
        stream = watch.Watch().stream(
            list_call, resource_version=version, timeout_seconds=self.watch_timeout
        )
        for event in stream:
            kind = event["type"]
            if kind == "ERROR":
                return None
            obj = event["object"]
            on_event(kind, obj)
            version = obj.metadata.resource_version or version
            if self._stop.is_set():
                break
        return version
