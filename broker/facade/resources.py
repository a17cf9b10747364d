"""The resource types the facade serves, and nothing else: one table drives routing,
storage, discovery and admission, so a type listed here is served everywhere at once.
Each names its kind's strategy (``kinds/``: defaults, validation, update rules, field
selectors, deletion); :func:`register` adds a type at run time (custom resources).

Keys: ``"pods"`` for the core group, ``"<plural>.<group>"`` otherwise (``"leases.coordination.k8s.io"``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .kinds.apps import (
    DaemonSetStrategy,
    DeploymentStrategy,
    ReplicaSetStrategy,
    StatefulSetStrategy,
)
from .kinds.autoscaling import HorizontalPodAutoscalerStrategy
from .kinds.base import Strategy
from .kinds.batch import CronJobStrategy, JobStrategy
from .kinds.core import (
    EventStrategy,
    EventsV1Strategy,
    NamespaceStrategy,
    NodeStrategy,
    ServiceStrategy,
)
from .kinds.pods import BindingStrategy, PodStrategy
from .kinds.scheduling import PriorityClassStrategy
from .metrics import CUSTOM_METRICS, CUSTOM_METRICS_GROUP

READ = ("get", "list", "watch")
CRUD = ("create", "delete", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" is the core group
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    verbs: tuple[str, ...] = CRUD
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    stored: bool = True  # False: served by special code (bindings, metrics)
    # what the API server does with objects of this kind (kinds/base.py)
    strategy: Strategy = field(default=Strategy(), compare=False, repr=False)

    @property
    def key(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


def _r(group, version, plural, singular, kind, namespaced, **kw) -> ResourceType:
    return ResourceType(group, version, plural, singular, kind, namespaced, **kw)


RESOURCE_TYPES: tuple[ResourceType, ...] = (
    _r(
        "",
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        False,
        short_names=("ns",),
        subresources=("status",),
        strategy=NamespaceStrategy(),
    ),
    _r(
        "",
        "v1",
        "nodes",
        "node",
        "Node",
        False,
        short_names=("no",),
        subresources=("status",),
        strategy=NodeStrategy(),
    ),
    _r(
        "",
        "v1",
        "pods",
        "pod",
        "Pod",
        True,
        short_names=("po",),
        subresources=("status", "binding", "eviction"),
        strategy=PodStrategy(),
    ),
    _r(
        "",
        "v1",
        "bindings",
        "binding",
        "Binding",
        True,
        verbs=("create",),
        stored=False,
        strategy=BindingStrategy(),
    ),
    _r("", "v1", "events", "event", "Event", True, short_names=("ev",), strategy=EventStrategy()),
    _r("", "v1", "configmaps", "configmap", "ConfigMap", True, short_names=("cm",)),
    _r(
        "",
        "v1",
        "services",
        "service",
        "Service",
        True,
        short_names=("svc",),
        subresources=("status",),
        strategy=ServiceStrategy(),
    ),
    _r(
        "",
        "v1",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        "PersistentVolumeClaim",
        True,
        short_names=("pvc",),
        subresources=("status",),
    ),
    _r(
        "",
        "v1",
        "persistentvolumes",
        "persistentvolume",
        "PersistentVolume",
        False,
        short_names=("pv",),
        subresources=("status",),
    ),
    _r(
        "apps",
        "v1",
        "replicasets",
        "replicaset",
        "ReplicaSet",
        True,
        short_names=("rs",),
        subresources=("status", "scale"),
        strategy=ReplicaSetStrategy(),
    ),
    _r(
        "apps",
        "v1",
        "deployments",
        "deployment",
        "Deployment",
        True,
        short_names=("deploy",),
        subresources=("status", "scale"),
        strategy=DeploymentStrategy(),
    ),
    _r(
        "apps",
        "v1",
        "statefulsets",
        "statefulset",
        "StatefulSet",
        True,
        short_names=("sts",),
        subresources=("status", "scale"),
        strategy=StatefulSetStrategy(),
    ),
    _r(
        "apps",
        "v1",
        "daemonsets",
        "daemonset",
        "DaemonSet",
        True,
        short_names=("ds",),
        subresources=("status",),
        strategy=DaemonSetStrategy(),
    ),
    _r(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        "HorizontalPodAutoscaler",
        True,
        short_names=("hpa",),
        subresources=("status",),
        strategy=HorizontalPodAutoscalerStrategy(),
    ),
    _r("batch", "v1", "jobs", "job", "Job", True, subresources=("status",), strategy=JobStrategy()),
    _r(
        "batch",
        "v1",
        "cronjobs",
        "cronjob",
        "CronJob",
        True,
        short_names=("cj",),
        subresources=("status",),
        strategy=CronJobStrategy(),
    ),
    _r(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        True,
        short_names=("pdb",),
        subresources=("status",),
    ),
    _r(
        "events.k8s.io",
        "v1",
        "events",
        "event",
        "Event",
        True,
        short_names=("ev",),
        strategy=EventsV1Strategy(),
    ),
    _r("coordination.k8s.io", "v1", "leases", "lease", "Lease", True),
    _r(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "priorityclass",
        "PriorityClass",
        False,
        short_names=("pc",),
        strategy=PriorityClassStrategy(),
    ),
    _r(
        "metrics.k8s.io",
        "v1beta1",
        "nodes",
        "",
        "NodeMetrics",
        False,
        verbs=("get", "list"),
        stored=False,
    ),
    _r(
        "metrics.k8s.io",
        "v1beta1",
        "pods",
        "",
        "PodMetrics",
        True,
        verbs=("get", "list"),
        stored=False,
    ),
    # per-pod custom metrics the traffic model publishes (docs/services.md); listed as a
    # custom-metrics adapter lists them: one "pods/<metric>" resource per metric
    *(
        _r(
            CUSTOM_METRICS_GROUP,
            "v1beta1",
            f"pods/{metric}",
            "",
            "MetricValueList",
            True,
            verbs=("get",),
            stored=False,
        )
        for metric in CUSTOM_METRICS
    ),
)

# The tables below are the one registry: the built-in types, then those registered.
BY_KEY: dict[str, ResourceType] = {}
BY_GROUP_VERSION: dict[tuple[str, str], dict[str, ResourceType]] = {}
# Groups in the order /apis lists them (the preferred version is the first).
GROUPS: dict[str, list[str]] = {}
_SERVED: list[ResourceType] = []


def register(rt: ResourceType) -> None:
    """Serve ``rt`` from now on, in every store and facade of the process (routing,
    storage, discovery, admission by ``rt.strategy``); ValueError if its key or its
    group/version/plural is taken."""
    if rt.stored and rt.key in BY_KEY:
        raise ValueError(f"resource {rt.key!r} is already served")
    if rt.plural in BY_GROUP_VERSION.get((rt.group, rt.version), {}):
        raise ValueError(f"resource {rt.plural!r} of {rt.api_version} is already served")
    _SERVED.append(rt)
    if rt.stored:
        BY_KEY[rt.key] = rt
    BY_GROUP_VERSION.setdefault((rt.group, rt.version), {})[rt.plural] = rt
    if rt.group:
        versions = GROUPS.setdefault(rt.group, [])
        if rt.version not in versions:
            versions.append(rt.version)


def unregister(rt: ResourceType) -> None:
    """Serve ``rt`` no more (its stored objects stay in the stores, unreachable)."""
    _SERVED.remove(rt)
    if BY_KEY.get(rt.key) is rt:
        del BY_KEY[rt.key]
    plurals = BY_GROUP_VERSION[(rt.group, rt.version)]
    del plurals[rt.plural]
    if not plurals:
        del BY_GROUP_VERSION[(rt.group, rt.version)]
    if rt.group and not any(
        other.group == rt.group and other.version == rt.version for other in _SERVED
    ):
        GROUPS[rt.group].remove(rt.version)
        if not GROUPS[rt.group]:
            del GROUPS[rt.group]


def served_types() -> tuple[ResourceType, ...]:
    """Every type served, built-in first, in the order they were registered."""
    return tuple(_SERVED)


for _rt in RESOURCE_TYPES:
    register(_rt)


def resource_type(key: str) -> ResourceType:
    """The stored type for ``key`` (``"pods"``, ``"leases.coordination.k8s.io"``); KeyError else."""
    try:
        return BY_KEY[key]
    except KeyError:
        raise KeyError(f"unknown resource {key!r}; known: {', '.join(sorted(BY_KEY))}") from None


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    return BY_GROUP_VERSION.get((group, version), {}).get(plural)
