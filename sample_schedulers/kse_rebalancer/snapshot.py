"""Read the cluster for one rebalancing round: which pods may move, and every node's load.

Inputs are the official client's typed ``V1Node``/``V1Pod`` objects and the plain dicts
``CustomObjectsApi`` returns for ``metrics.k8s.io/v1beta1`` nodes and pods.

A pod may move (is *movable*) only if all hold: it is not in ``kube-system``; it is
owned by a ReplicaSet (which recreates it after eviction); it is Running on a node and
not being deleted; its ``spec.schedulerName`` is the rebalancer's (as in KSE, where only
pods naming the KSE scheduler are rebalanced); and metrics report its usage.
Control-plane nodes (label ``node-role.kubernetes.io/control-plane`` or ``.../master``),
unschedulable and not-Ready nodes take no part.

Loads: CPU in millicores, memory in MiB. A node's residual load is its measured usage
minus its movable pods' usage (never below 0); without node metrics, the sum of its
other pods' usage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from kubernetes.utils import parse_quantity

from .balancers import PodLoad

Metric = Literal["cpu", "memory"]
SYSTEM_NAMESPACE = "kube-system"
_CONTROL_PLANE = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")


@dataclass(frozen=True)
class PodRecord:
    """What the rebalancer needs of a V1Pod."""

    namespace: str
    name: str
    uid: str
    node: str | None
    phase: str
    scheduler_name: str
    owner_kind: str | None
    owner_uid: str | None
    deleting: bool
    cpu: float
    """Requested cores."""
    memory: float
    """Requested bytes."""
    created: float = 0.0
    tolerations: tuple[tuple[str, str, str, str], ...] = ()
    """(key, operator, value, effect) of each toleration."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def tolerates(self, node) -> bool:
        """True if every NoSchedule/NoExecute taint of the V1Node is tolerated."""
        for taint in (node.spec.taints if node.spec is not None else None) or []:
            if taint.effect not in ("NoSchedule", "NoExecute"):
                continue
            if not any(_matches(t, taint) for t in self.tolerations):
                return False
        return True


def _matches(toleration: tuple[str, str, str, str], taint) -> bool:
    key, operator, value, effect = toleration
    if effect and effect != taint.effect:
        return False
    if not key:
        return operator == "Exists"
    return key == taint.key and (operator == "Exists" or value == (taint.value or ""))


def pod_record(pod) -> PodRecord:
    meta, spec, status = pod.metadata, pod.spec, pod.status
    owner = next((o for o in meta.owner_references or [] if o.controller is not False), None)
    cpu = memory = 0.0
    for container in spec.containers or []:
        requests = (container.resources.requests or {}) if container.resources else {}
        cpu += float(parse_quantity(requests.get("cpu", 0)))
        memory += float(parse_quantity(requests.get("memory", 0)))
    created = meta.creation_timestamp.timestamp() if meta.creation_timestamp else 0.0
    return PodRecord(
        namespace=meta.namespace or "default",
        name=meta.name,
        uid=meta.uid or f"{meta.namespace}/{meta.name}",
        node=spec.node_name,
        phase=(status.phase if status else None) or "Pending",
        scheduler_name=spec.scheduler_name or "default-scheduler",
        owner_kind=owner.kind if owner else None,
        owner_uid=owner.uid if owner else None,
        deleting=meta.deletion_timestamp is not None,
        cpu=cpu,
        memory=memory,
        created=created,
        tolerations=tuple(
            (t.key or "", t.operator or "Equal", t.value or "", t.effect or "")
            for t in spec.tolerations or []
        ),
    )


def usable_nodes(nodes: Iterable) -> list:
    """Worker nodes that are schedulable and not reported NotReady, by name."""
    keep = []
    for node in nodes:
        labels = node.metadata.labels or {}
        if any(label in labels for label in _CONTROL_PLANE):
            continue
        if node.spec is not None and node.spec.unschedulable:
            continue
        conditions = (node.status.conditions if node.status else None) or []
        if any(c.type == "Ready" and c.status != "True" for c in conditions):
            continue
        keep.append(node)
    return sorted(keep, key=lambda n: n.metadata.name)


def usage_value(usage: Mapping[str, object], metric: Metric) -> float:
    """One metrics.k8s.io usage entry as millicores (cpu) or MiB (memory)."""
    raw = usage.get(metric, 0)
    value = float(parse_quantity(raw))
    return value * 1000.0 if metric == "cpu" else value / 2**20


def node_usage(node_metrics: Mapping, metric: Metric) -> dict[str, float]:
    """``{node: load}`` from a NodeMetricsList dict."""
    return {
        item["metadata"]["name"]: usage_value(item.get("usage") or {}, metric)
        for item in node_metrics.get("items", [])
    }


def pod_usage(pod_metrics: Mapping, metric: Metric) -> dict[str, float]:
    """``{"namespace/name": load}`` from a PodMetricsList dict (containers summed)."""
    loads: dict[str, float] = {}
    for item in pod_metrics.get("items", []):
        meta = item["metadata"]
        key = f"{meta.get('namespace', 'default')}/{meta['name']}"
        loads[key] = sum(
            usage_value(c.get("usage") or {}, metric) for c in item.get("containers", [])
        )
    return loads


def is_movable(record: PodRecord, scheduler_name: str) -> bool:
    return (
        record.namespace != SYSTEM_NAMESPACE
        and record.owner_kind == "ReplicaSet"
        and record.phase == "Running"
        and record.node is not None
        and not record.deleting
        and record.scheduler_name == scheduler_name
    )


@dataclass(frozen=True)
class Snapshot:
    """Movable pods with loads, residual load per usable node, and the records used."""

    pods: list[PodLoad]
    residual: dict[str, float]
    records: dict[str, PodRecord]


def take_snapshot(
    nodes: Iterable,
    pods: Iterable,
    node_metrics: Mapping,
    pod_metrics: Mapping,
    scheduler_name: str,
    metric: Metric,
) -> Snapshot:
    names = [n.metadata.name for n in usable_nodes(nodes)]
    node_load = node_usage(node_metrics, metric)
    pod_load = pod_usage(pod_metrics, metric)
    records = {r.key: r for r in map(pod_record, pods)}
    movable: list[PodLoad] = []
    others = dict.fromkeys(names, 0.0)
    for record in sorted(records.values(), key=lambda r: r.key):
        if record.node not in others or record.phase in ("Succeeded", "Failed"):
            continue
        load = pod_load.get(record.key)
        if load is not None and is_movable(record, scheduler_name):
            movable.append(PodLoad(record.key, record.node, load))
        else:
            others[record.node] += load or 0.0
    residual = {}
    for name in names:
        if name in node_load:
            mine = sum(p.load for p in movable if p.node == name)
            residual[name] = max(0.0, node_load[name] - mine)
        else:
            residual[name] = others[name]
    return Snapshot(movable, residual, records)
