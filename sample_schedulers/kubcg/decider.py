"""The decider (the paper's Algorithm 3 with Eq. 13, 16 and 17): where a pod finishes first.

Candidates are slots: the CPUs of every node the pod fits on (unless it requires a GPU)
and the GPUs of every GPU node (if the pod can use one). With history for the pod's
image, each slot gets an estimated completion, seconds from now:

- CPU slot (Eq. 16): ``Δ_CPU = MIN(T_Run) * Θ_P`` with ``Θ_P = P``, P the number of pods
  that would share the node's CPUs counting the new one (so idle gives ``MIN(T_Run)``).
- GPU slot (Eq. 17): ``Δ_GPU = MIN(T_Run) + T_wGPU``, where ``T_wGPU`` (Eq. 13) is 0 when a
  GPU is free and nobody queues for it, else the time for the running GPU pods to end
  (their corrected estimates, ``T_rem``) plus the queued pods' runs (``T_queue``).

The smallest Δ wins (ties: shorter wait, CPU before GPU, node name). If it is a busy GPU,
the pod joins that node's waiting queue: waiting beats running on a CPU. A GPU counts as
busy while its holder runs, even when that holder's estimate says it ends now.

Without history for the image (the paper's first case): an idle slot is taken (a GPU
first if the pod can use one, since that is also how GPU history gets learned; then node
name); if none is idle, the slot that becomes idle first. Slots without statistics are
ignored as long as some slot has them.

Honest limits: Θ_P = P is the paper's linear fit (its Figure 10); the slowdown the new
pod inflicts on pods already running is not added to their estimates (the paper's Eq.
16 does not either); resource fit is by requests against allocatable, nothing more.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .model import Decision, Estimate, NodeInfo, PodInfo, QueuedPod, Slot, Stats

_EPS = 1e-9

StatsLookup = Callable[[str, NodeInfo, str], Stats | None]
"""``lookup(image, node, resource)`` -> statistics of that image on that slot, or None."""


@dataclass
class ClusterView:
    """What the decider knows at ``now``: nodes, running pods (EP table), queues, requests.

    Build it once per pass; :meth:`place` records a pod just bound so the next decision
    of the same pass sees it (index and requests updated in place, no rebuild).
    """

    now: float
    nodes: Sequence[NodeInfo]
    running: list[Estimate] = field(default_factory=list)
    requested: dict[str, tuple[float, float]] = field(default_factory=dict)
    """node name -> (cores, bytes) requested by the pods bound there."""
    queues: Mapping[str, Sequence[QueuedPod]] = field(default_factory=dict)
    """node name -> pods waiting for its GPUs, in queue order."""

    def __post_init__(self) -> None:
        self.running = list(self.running)
        self._by_name = {n.name: n for n in self.nodes}
        self._by_slot: dict[Slot, list[Estimate]] = {}
        for e in self.running:
            self._by_slot.setdefault(e.slot, []).append(e)

    def node(self, name: str) -> NodeInfo | None:
        return self._by_name.get(name)

    def on(self, node: str, resource: str) -> list[Estimate]:
        """The running pods using that slot."""
        return self._by_slot.get(Slot(node, resource), [])

    def place(self, estimate: Estimate, cpu: float = 0.0, memory: float = 0.0) -> None:
        """Record a pod bound during this pass: it runs and holds its requests."""
        self.running.append(estimate)
        self._by_slot.setdefault(estimate.slot, []).append(estimate)
        old_cpu, old_memory = self.requested.get(estimate.slot.node, (0.0, 0.0))
        self.requested[estimate.slot.node] = (old_cpu + cpu, old_memory + memory)


def fits(pod: PodInfo, node: NodeInfo, view: ClusterView, after_gpu_frees: bool = False) -> bool:
    """Node is schedulable, matches the pod's nodeSelector, its NoSchedule/NoExecute taints
    are tolerated, and it has room for the pod's requests.

    With ``after_gpu_frees`` the requests of the pods holding the node's GPUs are counted
    as released: the room a pod queued for that GPU will find when it is dispatched.
    """
    if not node.schedulable:
        return False
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    if any(not any(t.tolerates(taint) for t in pod.tolerations) for taint in node.taints):
        return False
    cpu, memory = view.requested.get(node.name, (0.0, 0.0))
    if after_gpu_frees:
        for holder in view.on(node.name, "gpu"):
            cpu, memory = cpu - holder.cpu, memory - holder.memory
    return cpu + pod.cpu <= node.cpu + _EPS and memory + pod.memory <= node.memory + _EPS


def cpu_sharers(view: ClusterView, node: str) -> int:
    """How many pods run on the node's CPUs."""
    return len(view.on(node, "cpu"))


def cpu_idle_at(view: ClusterView, node: str) -> float:
    """When the node's CPUs are expected to run no pod (``now`` if idle already)."""
    ends = [e.end for e in view.on(node, "cpu")]
    return max([view.now, *ends])


def gpu_wait(view: ClusterView, node: NodeInfo) -> float:
    """T_wGPU of Eq. 13 for a pod joining the end of the node's queue (seconds, >= 0).

    The node's GPUs are list-scheduled: each becomes free at its holder's estimated end
    (or now), each queued pod takes the GPU that frees first for its estimated run; the
    wait is until the first GPU is free after that. With one GPU this is T_rem + T_queue.
    """
    now = view.now
    holders = [max(e.end, now) for e in view.on(node.name, "gpu")]
    free_at = holders + [now] * max(0, node.gpus - len(holders))
    if not free_at:
        return float("inf")
    heapq.heapify(free_at)
    for queued in view.queues.get(node.name, ()):
        t = heapq.heappop(free_at)
        heapq.heappush(free_at, t + queued.duration)
    return max(0.0, free_at[0] - now)


def gpu_free(view: ClusterView, node: NodeInfo) -> bool:
    """A GPU of the node is unused and nobody queues for it: a pod may be bound there now."""
    holders = len(view.on(node.name, "gpu"))
    return holders < node.gpus and not view.queues.get(node.name)


def candidate_slots(pod: PodInfo, view: ClusterView) -> list[tuple[NodeInfo, Slot]]:
    """Every (node, slot) the pod may use, by node name then CPU before GPU.

    A CPU slot needs room now; a GPU slot needs room now, or, while its GPUs are held,
    room once they free (the pod would wait for one anyway).
    """
    slots: list[tuple[NodeInfo, Slot]] = []
    for node in sorted(view.nodes, key=lambda n: n.name):
        room_now = fits(pod, node, view)
        if pod.can_use_cpu and room_now:
            slots.append((node, Slot(node.name, "cpu")))
        if pod.can_use_gpu and node.gpus > 0:
            held = bool(view.on(node.name, "gpu"))
            if room_now or (held and fits(pod, node, view, after_gpu_frees=True)):
                slots.append((node, Slot(node.name, "gpu")))
    return slots


def decide(pod: PodInfo, view: ClusterView, lookup: StatsLookup) -> Decision:
    """Choose the slot where ``pod`` is expected to complete first (see module docstring)."""
    slots = candidate_slots(pod, view)
    if not slots:
        return Decision(
            "unschedulable", reason="no node fits the pod's requests, selector and tolerations"
        )
    known = [
        (node, slot, s) for node, slot in slots if (s := lookup(pod.image, node, slot.resource))
    ]
    if known:
        return _decide_with_history(pod, view, known)
    return _decide_without_history(pod, view, slots)


def _can_bind_gpu_now(pod: PodInfo, view: ClusterView, node: NodeInfo) -> bool:
    return gpu_free(view, node) and fits(pod, node, view)


def _decide_with_history(
    pod: PodInfo, view: ClusterView, known: list[tuple[NodeInfo, Slot, Stats]]
) -> Decision:
    scored = []
    for node, slot, stats in known:
        if slot.resource == "cpu":
            theta = cpu_sharers(view, node.name) + 1
            wait, delta = 0.0, stats.minimum * theta
        else:
            wait = gpu_wait(view, node)
            delta = stats.minimum + wait
        scored.append((delta, wait, slot.resource, slot.node, slot))
    delta, wait, _, _, slot = min(scored)
    busy = slot.resource == "gpu" and not _can_bind_gpu_now(pod, view, view.node(slot.node))
    action = "wait_gpu" if busy else "bind"
    reason = f"Δ={delta:.3f}s on {slot.node}/{slot.resource}" + (
        f" after waiting {wait:.3f}s for a GPU" if action == "wait_gpu" else ""
    )
    return Decision(action, slot, completion=delta, wait=wait, reason=reason)


def _decide_without_history(
    pod: PodInfo, view: ClusterView, slots: list[tuple[NodeInfo, Slot]]
) -> Decision:
    ready_at = []
    for node, slot in slots:
        if slot.resource == "cpu":
            t = view.now if cpu_sharers(view, node.name) == 0 else cpu_idle_at(view, node.name)
        else:
            t = view.now + gpu_wait(view, node)
        prefer_gpu = 0 if slot.resource == "gpu" else 1
        ready_at.append((t, prefer_gpu, slot.node, slot))
    t, _, _, slot = min(ready_at)
    wait = max(0.0, t - view.now)
    idle = wait <= _EPS
    if slot.resource == "gpu" and not _can_bind_gpu_now(pod, view, view.node(slot.node)):
        return Decision(
            "wait_gpu", slot, wait=wait, reason=f"no history; GPU of {slot.node} idle first"
        )
    how = "idle" if idle else f"idle first (in {wait:.3f}s)"
    return Decision("bind", slot, reason=f"no history; {slot.node}/{slot.resource} {how}")
