"""KubCG's decision unit wired to the Kubernetes API: watch pods, decide, bind, learn.

One pass of :meth:`KubcgScheduler.schedule_pass` is the paper's DU workflow: read the
node status (NS table), filter the EP table to pods still running, run the
estimator-corrector, then decide for every waiting pod, GPU queue first (in arrival
order) and then new pods (by creation time). Passes run after every pod event and,
while pods wait for a GPU, every ``correct_interval`` seconds, so a GPU that overruns
its estimate can make a queued pod fall back to a CPU.

Threads: the watch loop (the caller of :meth:`run`) and a corrector thread; both take
``self._lock`` around state. All API calls go through the ``api`` object given
(a ``kubernetes.client.CoreV1Api`` in production; tests pass a fake).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from sample_schedulers.common.kube import bind_pod, watch_pods

from . import kube
from .decider import ClusterView, cpu_sharers, decide
from .estimator import correct, initial_estimate
from .history import History
from .model import Decision, Estimate, NodeInfo, PodInfo, QueuedPod, Resource, Slot, Stats
from .switch import select_image

log = logging.getLogger("kubcg")

_DONE = ("Succeeded", "Failed")


class KubcgScheduler:
    """History-based CPU/GPU scheduler for pods whose ``spec.schedulerName`` is ours."""

    def __init__(
        self,
        api,
        scheduler_name: str = "default-scheduler",
        *,
        history: History | None = None,
        history_path: Path | None = None,
        image_table: Mapping[str, str] | None = None,
        prior_duration: float = 60.0,
        correct_interval: float = 30.0,
        watch_timeout: int = 300,
        clock: Callable[[], float] = time.time,
        watch_factory: Callable[[], object] = watch.Watch,
    ) -> None:
        self.api = api
        self.scheduler_name = scheduler_name
        self.history = history if history is not None else History()
        self.history_path = history_path
        self.image_table = dict(image_table or {})
        self.prior = Stats(1, prior_duration, prior_duration, prior_duration)
        self.correct_interval = correct_interval
        self.watch_timeout = watch_timeout
        self.clock = clock
        self.watch_factory = watch_factory
        self.retry_delay = 1.0
        """Seconds to wait before watching again after an error."""
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._queued = threading.Event()  # set while the GPU queue may be non-empty
        self._pods: dict[str, PodInfo] = {}
        self._nodes: dict[str, NodeInfo] = {}
        self._estimates: dict[str, Estimate] = {}
        self._queue: dict[str, QueuedPod] = {}
        self._resource: dict[str, Resource] = {}
        self._bound_at: dict[str, float] = {}
        self._learned: set[str] = set()
        self._seq = itertools.count()
        self._resource_version: str | None = None
        self.decisions: deque[tuple[str, Decision]] = deque(maxlen=10_000)
        """The latest decisions taken, in order (pod key, decision)."""

    # -- cluster state -------------------------------------------------------------

    def resync(self) -> None:
        """List all pods (and nodes), rebuild the cache and learn from completed pods."""
        pods = self.api.list_pod_for_all_namespaces()
        with self._lock:
            self._refresh_nodes()
            self._pods.clear()
            for pod in pods.items:
                self._store(pod)
            self._resource_version = pods.metadata.resource_version if pods.metadata else None

    def handle_event(self, kind: str, pod) -> None:
        """Apply one watch event (ADDED / MODIFIED / DELETED) to the cache."""
        with self._lock:
            if pod.metadata.resource_version:
                self._resource_version = pod.metadata.resource_version
            if kind == "DELETED":
                uid = pod.metadata.uid
                self._store(pod)  # learn from a pod deleted right after it succeeded
                self._pods.pop(uid, None)
                self._queue.pop(uid, None)
                return
            self._store(pod)

    def _store(self, pod) -> None:
        """Cache an active pod; learn from a finished one and forget it (bounded memory)."""
        info = kube.pod_info(pod, self.image_table)
        if info.phase in _DONE:
            if info.phase == "Succeeded" and info.uid not in self._learned and info.node_name:
                self._learn(info, pod)
            self._pods.pop(info.uid, None)
            self._queue.pop(info.uid, None)
            self._resource.pop(info.uid, None)
            self._bound_at.pop(info.uid, None)
            return
        self._pods[info.uid] = info

    def _learn(self, info: PodInfo, pod) -> None:
        duration = kube.running_time(pod)
        if duration is None:
            return
        node = self._nodes.get(info.node_name) or self._refresh_nodes().get(info.node_name)
        node_class = node.node_class if node else "cpu"
        resource = self._resource.get(info.uid) or info.resource_hint or "cpu"
        self.history.record(info.image, info.node_name, node_class, resource, duration)
        self._learned.add(info.uid)
        log.info(
            "learned %s: image %s ran %.3fs on %s/%s",
            info.key,
            info.image,
            duration,
            info.node_name,
            resource,
        )
        if self.history_path is not None:
            self.history.save(self.history_path)

    def _refresh_nodes(self) -> dict[str, NodeInfo]:
        nodes = self.api.list_node()
        self._nodes = {n.name: n for n in map(kube.node_info, nodes.items)}
        return self._nodes

    def _stats(self, image: str, node: NodeInfo, resource: Resource) -> Stats | None:
        return self.history.lookup(image, node.name, node.node_class, resource)

    # -- the decision unit -----------------------------------------------------------

    def schedule_pass(self) -> list[tuple[str, Decision]]:
        """One DU pass over waiting pods; returns the decisions taken in this pass."""
        with self._lock:
            now = self.clock()
            self._refresh_nodes()
            requested: dict[str, tuple[float, float]] = {}
            for info in self._pods.values():
                if info.node_name and info.phase not in _DONE:
                    cpu, memory = requested.get(info.node_name, (0.0, 0.0))
                    requested[info.node_name] = (cpu + info.cpu, memory + info.memory)
            waiting = [
                p
                for p in self._pods.values()
                if p.scheduler_name == self.scheduler_name
                and p.node_name is None
                and p.phase == "Pending"
            ]
            queued = sorted(
                (p for p in waiting if p.uid in self._queue), key=lambda p: self._queue[p.uid].seq
            )
            fresh = sorted(
                (p for p in waiting if p.uid not in self._queue),
                key=lambda p: (p.created, p.namespace, p.name),
            )
            waiting_uids = {p.uid for p in waiting}
            self._queue = {uid: q for uid, q in self._queue.items() if uid in waiting_uids}
            queues: dict[str, list[QueuedPod]] = {}
            view = ClusterView(
                now=now,
                nodes=list(self._nodes.values()),
                running=self._running_estimates(now),
                requested=requested,
                queues=queues,
            )
            log.debug(
                "pass at %.3f: %d waiting; EP table: %s",
                now,
                len(waiting),
                ", ".join(
                    f"{e.uid}@{e.slot.node}/{e.slot.resource}->{e.end:.3f}" for e in view.running
                ),
            )
            taken: list[tuple[str, Decision]] = []
            room = _largest_room(view)
            for pod in [*queued, *fresh]:
                if pod.cpu > room[0] + 1e-9 or pod.memory > room[1] + 1e-9:
                    # fits no node now: skip the decider (cheap when many wait); a queued
                    # pod keeps its place
                    if pod.uid in self._queue:
                        entry = self._queue[pod.uid]
                        queues.setdefault(entry.node, []).append(entry)
                    continue
                decision = decide(pod, view, self._stats)
                previous = self._queue.pop(pod.uid, None)
                if decision.action == "bind" and decision.slot is not None:
                    if self._bind(pod, decision.slot):
                        slowdown = (
                            cpu_sharers(view, decision.slot.node) + 1
                            if decision.slot.resource == "cpu"
                            else 1
                        )
                        node = self._nodes[decision.slot.node]
                        stats = self._stats(pod.image, node, decision.slot.resource) or self.prior
                        est = initial_estimate(
                            pod.uid,
                            pod.image,
                            decision.slot,
                            now,
                            stats,
                            slowdown,
                            pod.cpu,
                            pod.memory,
                        )
                        self._estimates[pod.uid] = est
                        view.place(est, pod.cpu, pod.memory)
                        room = _largest_room(view)
                elif decision.action == "wait_gpu" and decision.slot is not None:
                    node = self._nodes[decision.slot.node]
                    stats = self._stats(pod.image, node, "gpu") or self.prior
                    seq = previous.seq if previous is not None else next(self._seq)
                    entry = QueuedPod(pod, decision.slot.node, seq, stats.minimum)
                    self._queue[pod.uid] = entry
                    self._queued.set()
                    queues.setdefault(decision.slot.node, []).append(entry)
                    if previous is None or previous.node != entry.node:
                        log.info(
                            "%s waits for a GPU of %s: %s", pod.key, entry.node, decision.reason
                        )
                else:
                    log.debug("%s stays pending: %s", pod.key, decision.reason)
                if previous is None or decision.action != "wait_gpu":
                    taken.append((pod.key, decision))
            self.decisions.extend(taken)
            return taken

    def _running_estimates(self, now: float) -> list[Estimate]:
        """The EP table filtered to pods still running, each corrected (Algorithm 2)."""
        estimates: dict[str, Estimate] = {}
        for info in self._pods.values():
            if not info.node_name or info.phase in _DONE:
                continue
            resource = self._resource.get(info.uid) or info.resource_hint or "cpu"
            slot = Slot(info.node_name, resource)
            node = self._nodes.get(info.node_name)
            stats = (self._stats(info.image, node, resource) if node else None) or self.prior
            est = self._estimates.get(info.uid)
            if est is None or est.slot != slot:
                started = info.started or self._bound_at.get(info.uid) or now
                est = initial_estimate(
                    info.uid, info.image, slot, started, stats, 1, info.cpu, info.memory
                )
            estimates[info.uid] = correct(est, now, stats)
        self._estimates = estimates
        return sorted(estimates.values(), key=lambda e: e.uid)

    def _bind(self, pod: PodInfo, slot: Slot) -> bool:
        image = select_image(pod, slot.resource, self.image_table)
        try:
            bind_pod(
                self.api,
                pod.namespace,
                pod.name,
                slot.node,
                annotations={kube.RESOURCE_ANNOTATION: slot.resource, kube.IMAGE_ANNOTATION: image},
            )
        except ApiException as exc:
            log.warning(
                "binding %s to %s failed: %s %s", pod.key, slot.node, exc.status, exc.reason
            )
            if exc.status in (404, 409):
                self._pods.pop(pod.uid, None)  # gone or bound by someone else; the watch tells
            return False
        self._pods[pod.uid] = replace(pod, node_name=slot.node, resource_hint=slot.resource)
        self._resource[pod.uid] = slot.resource
        self._bound_at[pod.uid] = self.clock()
        log.info("bound %s to %s/%s (image %s)", pod.key, slot.node, slot.resource, image)
        return True

    # -- loops -------------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()
        self._queued.set()  # let the corrector see the stop

    def run(self) -> None:
        """Resync, then watch pods until :meth:`stop`; a pass runs after every event."""
        self.resync()
        self.schedule_pass()
        corrector = threading.Thread(target=self._correct_loop, name="kubcg-corrector", daemon=True)
        corrector.start()
        watch_pods(
            self.api,
            resource_version=lambda: self._resource_version,
            on_event=self.handle_event,
            resync=self.resync,
            react=self.schedule_pass,
            stop=self._stop,
            log=log,
            watch_timeout=self.watch_timeout,
            retry_delay=self.retry_delay,
            watch_factory=self.watch_factory,
        )
        corrector.join(timeout=self.correct_interval + 1)

    def _correct_loop(self) -> None:
        """Re-run passes every ``correct_interval`` s, but only while pods wait for a GPU
        (an idle corrector would wake a simulated cluster for nothing)."""
        while not self._stop.is_set():
            self._queued.wait()
            if self._stop.wait(self.correct_interval):
                return
            with self._lock:
                if self._queue:
                    self.schedule_pass()
                if not self._queue:
                    self._queued.clear()


def _largest_room(view: ClusterView) -> tuple[float, float]:
    """The most free cores and the most free bytes on any schedulable node, counting GPU
    holders' requests as free (upper bounds for :func:`decider.fits`)."""
    cpu = memory = float("-inf")
    for node in view.nodes:
        if node.schedulable:
            used_cpu, used_memory = view.requested.get(node.name, (0.0, 0.0))
            for holder in view.on(node.name, "gpu"):  # released when the GPU frees
                used_cpu, used_memory = used_cpu - holder.cpu, used_memory - holder.memory
            cpu = max(cpu, node.cpu - used_cpu)
            memory = max(memory, node.memory - used_memory)
    return cpu, memory
