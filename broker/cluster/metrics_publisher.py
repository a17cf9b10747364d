"""metrics.k8s.io (and custom.metrics.k8s.io for services) from the kubelet model: what
each running pod uses and what each node's pods use in all.

A running pod uses its profile's usage curve (timewarp extension ``usage``), else its
requests; a service's pod what the traffic model's newest visible tick says; a node the
sum of its pods. The kubelet model tells :class:`MetricsPublisher` when a pod starts
(:meth:`~MetricsPublisher.started`) and stops (:meth:`~MetricsPublisher.stopped`);
:meth:`~MetricsPublisher.refresh` publishes what changed.
"""

from __future__ import annotations

from typing import Any

from broker.cluster.state import ClusterState, JobPod
from broker.k8s.quantity import parse_quantity

Key = tuple[str, str]  # (namespace, pod name)


class MetricsPublisher:
    """The usage board of the simulated cluster (``facade.metrics``), kept in step with
    the pods whose containers run (:attr:`running`)."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.running: dict[Key, JobPod] = {}  # pods whose containers run
        self._at: int | None = None  # when last refreshed (None: refresh again)
        self._node_usage: dict[str, list[int]] = {}
        self._pod_usage: dict[Key, tuple[int, int]] = {}
        # refresh works on what changed: pods started since the last refresh, running
        # pods whose usage follows a curve (re-read whenever time moves), and nodes whose
        # sum of pod usage changed; per-node sums are kept up to date
        self._unpublished: dict[Key, JobPod] = {}
        self._curved: dict[Key, JobPod] = {}
        self._curves_at: int | None = None
        self._node_sum: dict[str, list[int]] = {}
        self._dirty_nodes: set[str] = set()

    def invalidate(self) -> None:
        """Refresh again even if time did not move (the traffic model's pods changed)."""
        self._at = None

    def started(self, key: Key, jp: JobPod) -> None:
        """``jp``'s containers run: publish its usage at the next refresh."""
        self.running[key] = jp
        self._unpublished[key] = jp
        self._at = None

    def stopped(self, jp: JobPod) -> bool:
        """``jp`` no longer runs: its sample goes and its node's sum drops. False if it
        was not running."""
        key = (jp.namespace, jp.name)
        if self.running.pop(key, None) is None:
            return False
        self._at = None
        self._unpublished.pop(key, None)
        self._curved.pop(key, None)
        self._account(jp, self._pod_usage.pop(key, None), None)
        self.state.facade.metrics.remove_pod(jp.namespace, jp.name)
        return True

    def refresh(self) -> None:
        """Recompute when time moved or the running set changed.

        Cost O(changed), not O(nodes + running pods): a pod is evaluated when it starts
        and, if its usage follows a curve, whenever time moved; a pod's or node's sample
        is re-published only when its value changed (every node once, at the first
        refresh), with the refresh's timestamp."""
        state = self.state
        now = state.now_ns()
        if self._at == now:
            return
        self._at = now
        board = state.facade.metrics
        if state.services:
            self._publish_service_usage(now)
        if len(self._node_sum) != len(state.nodes):  # the first refresh, or new nodes
            for name in state.nodes:
                if name not in self._node_sum:
                    self._node_sum[name] = [0, 0]
                    self._dirty_nodes.add(name)
        pods = self._unpublished
        self._unpublished = {}
        if self._curves_at != now:
            self._curves_at = now
            pods = {**self._curved, **pods}
        for key, jp in pods.items():
            if state.services and state.services.serves(jp.namespace, jp.labels):
                continue  # its usage comes from the traffic model's ticks
            cpu_n, mem = jp.cpu_m * 1_000_000, jp.memory
            if jp.usage and jp.started_ns is not None:
                self._curved[key] = jp
                elapsed = (now - jp.started_ns) / 1e9
                period = jp.usage.get("period")
                cpu_n = int(float(_curve(jp.usage.get("cpu"), elapsed, period, cpu_n / 1e9)) * 1e9)
                mem = _bytes(_curve(jp.usage.get("memory"), elapsed, period, mem))
            old = self._pod_usage.get(key)
            if old != (cpu_n, mem):
                self._pod_usage[key] = (cpu_n, mem)
                self._account(jp, old, (cpu_n, mem))
                board.set_pod(
                    jp.namespace,
                    jp.name,
                    {"main": (cpu_n, mem)},
                    timestamp_ns=now,
                    labels=jp.labels,
                )
        dirty, self._dirty_nodes = self._dirty_nodes, set()
        for name in dirty:
            usage, node = self._node_sum.get(name), state.nodes.get(name)
            if usage is not None and node is not None and self._node_usage.get(name) != usage:
                self._node_usage[name] = list(usage)
                board.set_node(name, usage[0], usage[1], timestamp_ns=now, labels=node.labels)

    def _publish_service_usage(self, now: int) -> None:
        """Service pods: the traffic model's sample of the newest visible metrics tick
        (cpu from the requests served, memory = the pod's request), in metrics.k8s.io
        and custom.metrics.k8s.io; a pod has no metrics before its first tick, as with
        metrics-server."""
        services = self.state.services
        assert services is not None
        board = self.state.facade.metrics
        for key, usage in sorted(services.refresh(now).items()):
            jp = self.running.get(key)
            if jp is None:
                continue  # gone since the tick
            sample = (usage.cpu_nanocores, jp.memory)
            old = self._pod_usage.get(key)
            self._pod_usage[key] = sample
            self._account(jp, old, sample)
            board.set_pod(
                jp.namespace,
                jp.name,
                {usage.container: sample},
                timestamp_ns=usage.timestamp_ns,
                window_s=usage.window_s,
                labels=jp.labels,
            )
            board.set_pod_custom(
                jp.namespace,
                jp.name,
                usage.custom,
                timestamp_ns=usage.timestamp_ns,
                window_s=usage.window_s,
                labels=jp.labels,
            )

    def _account(
        self, jp: JobPod, old: tuple[int, int] | None, new: tuple[int, int] | None
    ) -> None:
        """Move a pod's published usage from ``old`` to ``new`` in its node's sum."""
        total = self._node_sum.get(jp.node) if jp.node is not None else None
        if total is None:
            return
        old_cpu, old_mem = old or (0, 0)
        new_cpu, new_mem = new or (0, 0)
        total[0] += new_cpu - old_cpu
        total[1] += new_mem - old_mem
        self._dirty_nodes.add(jp.node)


def _bytes(value: Any) -> int:
    return int(parse_quantity(str(value)))


def _curve(points: Any, elapsed: float, period: Any, default: Any) -> Any:
    """Piecewise-constant ``[[t, value], ...]`` from the job's start, optionally periodic."""
    if not points:
        return default
    if period:
        elapsed = elapsed % float(period)
    value = default
    for t, v in points:
        if float(t) <= elapsed:
            value = v
        else:
            break
    if isinstance(value, str):
        return parse_quantity(value) if not value.endswith("m") else float(parse_quantity(value))
    return value
