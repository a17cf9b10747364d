"""Plain, immutable summaries of pods and nodes, made from the client's typed models.

Decision logic works on these (never on ``V1Pod``/``V1Node`` directly), so it is pure and
can be unit-tested with literal values. ``pod_summary``/``node_summary`` only read
attributes that exist under the same snake_case names in every release of the official
client (the old plain classes and the newer pydantic models alike).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .resources import (
    CPU,
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    MEMORY,
    PODS,
    Resources,
    total,
)

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str
    value: str = ""


@dataclass(frozen=True)
class Toleration:
    """A pod toleration. Empty ``key`` with operator Exists tolerates every taint;
    empty ``effect`` matches every effect."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:  # the API accepts an empty key only with Exists
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value  # Equal, the default operator


@dataclass(frozen=True)
class PodSummary:
    namespace: str
    name: str
    scheduler_name: str = "default-scheduler"
    node_name: str | None = None
    phase: str = "Pending"
    priority: int = 0
    created: float = 0.0
    """creationTimestamp in seconds since the epoch (0 when absent)."""
    requests: Resources = field(default_factory=Resources)
    """Effective requests: max(sum of containers, each init container) + overhead."""
    nonzero_requests: Resources = field(default_factory=Resources)
    """Like ``requests`` but containers without a cpu/memory request count kube-scheduler's
    defaults (100m, 200Mi); used for scoring only."""
    containers: int = 1
    images: tuple[str, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    deleting: bool = False
    uid: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminated(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def occupies_node(self) -> bool:
        """Bound and not finished: its requests count against the node's allocatable."""
        return self.node_name is not None and not self.terminated


@dataclass(frozen=True)
class NodeImage:
    names: tuple[str, ...]
    size_bytes: int


@dataclass(frozen=True)
class NodeSummary:
    name: str
    allocatable: Resources = field(default_factory=Resources)
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    images: tuple[NodeImage, ...] = ()
    ready: bool = True


@dataclass(frozen=True)
class NodeView:
    """A node together with the pods that occupy it (bound, or assumed by the scheduler,
    and not terminated). Totals are computed once."""

    node: NodeSummary
    pods: tuple[PodSummary, ...] = ()
    requested: Resources = field(init=False)
    nonzero_requested: Resources = field(init=False)
    name: str = field(init=False)
    containers: int = field(init=False)
    # plain ints for the hot paths of filtering and scoring (hundreds of nodes per pod)
    alloc_cpu: int = field(init=False)
    alloc_memory: int = field(init=False)
    requested_cpu: int = field(init=False)
    requested_memory: int = field(init=False)
    nonzero_cpu: int = field(init=False)
    nonzero_memory: int = field(init=False)
    free_cpu: int = field(init=False)
    free_memory: int = field(init=False)
    score_cache: dict = field(default_factory=dict, init=False, compare=False, repr=False)
    """A scorer's memo for this (immutable) view, e.g. default_like's score per pod
    shape; not part of the view's value."""

    def __post_init__(self) -> None:
        requested = total(p.requests for p in self.pods)
        nonzero = total(p.nonzero_requests for p in self.pods)
        alloc = self.node.allocatable
        for attr, value in (
            ("requested", requested),
            ("nonzero_requested", nonzero),
            ("name", self.node.name),
            ("containers", sum(p.containers for p in self.pods)),
            ("alloc_cpu", alloc[CPU]),
            ("alloc_memory", alloc[MEMORY]),
            ("requested_cpu", requested[CPU]),
            ("requested_memory", requested[MEMORY]),
            ("nonzero_cpu", nonzero[CPU]),
            ("nonzero_memory", nonzero[MEMORY]),
            ("free_cpu", alloc[CPU] - requested[CPU]),
            ("free_memory", alloc[MEMORY] - requested[MEMORY]),
        ):
            object.__setattr__(self, attr, value)

    def free(self, resource: str) -> int:
        """Allocatable minus requested (may be negative on an over-committed node)."""
        if resource == PODS:
            return self.node.allocatable[PODS] - len(self.pods)
        return self.node.allocatable[resource] - self.requested[resource]


def epoch_seconds(value: Any) -> float | None:
    """A client timestamp (a ``datetime``, or RFC 3339 text such as
    ``2024-01-02T03:04:05Z``) as seconds since the epoch; None stays None."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def _container_requests(container: Any) -> Resources:
    res = getattr(container, "resources", None)
    requests = dict(getattr(res, "requests", None) or {})
    # The API server defaults a missing request to the limit; do the same for objects
    # that did not pass through one.
    for name, q in (getattr(res, "limits", None) or {}).items():
        requests.setdefault(name, q)
    return Resources.parse(requests)


def _nonzero(r: Resources) -> Resources:
    amounts = dict(r.amounts)
    if not amounts.get(CPU):
        amounts[CPU] = DEFAULT_MILLI_CPU_REQUEST
    if not amounts.get(MEMORY):
        amounts[MEMORY] = DEFAULT_MEMORY_REQUEST
    return Resources(amounts)


def pod_summary(pod: Any) -> PodSummary:
    """Summarise a ``V1Pod``. Raises ValueError naming the pod on a malformed quantity."""
    meta = pod.metadata
    spec = pod.spec
    status = getattr(pod, "status", None)
    key = f"{meta.namespace}/{meta.name}"
    containers = list(getattr(spec, "containers", None) or [])
    init_containers = list(getattr(spec, "init_containers", None) or [])
    try:
        per_container = [_container_requests(c) for c in containers]
        per_init = [_container_requests(c) for c in init_containers]
        overhead = Resources.parse(getattr(spec, "overhead", None))
    except ValueError as exc:
        raise ValueError(f"pod {key}: {exc}") from exc
    requests = total(per_container)
    nonzero = total(_nonzero(r) for r in per_container)
    for r in per_init:
        requests = requests.maximum(r)
        nonzero = nonzero.maximum(_nonzero(r))
    tolerations = tuple(
        Toleration(
            key=t.key or "",
            operator=t.operator or "Equal",
            value=t.value or "",
            effect=t.effect or "",
        )
        for t in (getattr(spec, "tolerations", None) or [])
    )
    return PodSummary(
        namespace=meta.namespace or "default",
        name=meta.name,
        uid=meta.uid or "",
        scheduler_name=getattr(spec, "scheduler_name", None) or "default-scheduler",
        node_name=getattr(spec, "node_name", None) or None,
        phase=(getattr(status, "phase", None) or "Pending") if status else "Pending",
        priority=getattr(spec, "priority", None) or 0,
        created=epoch_seconds(meta.creation_timestamp) or 0.0,
        requests=requests + overhead,
        nonzero_requests=nonzero + overhead,
        containers=len(containers),
        images=tuple(c.image for c in containers if getattr(c, "image", None)),
        node_selector=dict(getattr(spec, "node_selector", None) or {}),
        tolerations=tolerations,
        labels=dict(meta.labels or {}),
        annotations=dict(meta.annotations or {}),
        deleting=meta.deletion_timestamp is not None,
    )


def node_summary(node: Any) -> NodeSummary:
    """Summarise a ``V1Node``. Allocatable falls back to capacity when absent."""
    meta = node.metadata
    spec = getattr(node, "spec", None)
    status = getattr(node, "status", None)
    alloc = getattr(status, "allocatable", None) or getattr(status, "capacity", None) or {}
    try:
        allocatable = Resources.parse(alloc)
    except ValueError as exc:
        raise ValueError(f"node {meta.name}: allocatable {exc}") from exc
    taints = tuple(
        Taint(key=t.key, effect=t.effect, value=t.value or "")
        for t in (getattr(spec, "taints", None) or [])
    )
    images = tuple(
        NodeImage(names=tuple(i.names or ()), size_bytes=int(i.size_bytes or 0))
        for i in (getattr(status, "images", None) or [])
    )
    ready = True
    for cond in getattr(status, "conditions", None) or []:
        if cond.type == "Ready":
            ready = cond.status == "True"
    return NodeSummary(
        name=meta.name,
        allocatable=allocatable,
        labels=dict(meta.labels or {}),
        annotations=dict(meta.annotations or {}),
        unschedulable=bool(getattr(spec, "unschedulable", None)),
        taints=taints,
        images=images,
        ready=ready,
    )
