"""The resource types the facade serves, and nothing else: one table drives routing,
storage and discovery, so a type listed here is served everywhere at once.

Keys: ``"pods"`` for the core group, ``"<plural>.<group>"`` otherwise (``"leases.coordination.k8s.io"``).
"""

from __future__ import annotations

from dataclasses import dataclass

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
    ),
    _r("", "v1", "nodes", "node", "Node", False, short_names=("no",), subresources=("status",)),
    _r(
        "",
        "v1",
        "pods",
        "pod",
        "Pod",
        True,
        short_names=("po",),
        subresources=("status", "binding", "eviction"),
    ),
    _r("", "v1", "bindings", "binding", "Binding", True, verbs=("create",), stored=False),
    _r("", "v1", "events", "event", "Event", True, short_names=("ev",)),
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
    ),
    _r("batch", "v1", "jobs", "job", "Job", True, subresources=("status",)),
    _r(
        "batch",
        "v1",
        "cronjobs",
        "cronjob",
        "CronJob",
        True,
        short_names=("cj",),
        subresources=("status",),
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
    _r("events.k8s.io", "v1", "events", "event", "Event", True, short_names=("ev",)),
    _r("coordination.k8s.io", "v1", "leases", "lease", "Lease", True),
    _r(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "priorityclass",
        "PriorityClass",
        False,
        short_names=("pc",),
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

BY_KEY: dict[str, ResourceType] = {rt.key: rt for rt in RESOURCE_TYPES if rt.stored}
BY_GROUP_VERSION: dict[tuple[str, str], dict[str, ResourceType]] = {}
for _rt in RESOURCE_TYPES:
    BY_GROUP_VERSION.setdefault((_rt.group, _rt.version), {})[_rt.plural] = _rt

# Groups in the order /apis lists them (the preferred version is the first).
GROUPS: dict[str, list[str]] = {}
for _rt in RESOURCE_TYPES:
    if _rt.group:
        versions = GROUPS.setdefault(_rt.group, [])
        if _rt.version not in versions:
            versions.append(_rt.version)


def resource_type(key: str) -> ResourceType:
    """The stored type for ``key`` (``"pods"``, ``"leases.coordination.k8s.io"``); KeyError else."""
    try:
        return BY_KEY[key]
    except KeyError:
        raise KeyError(f"unknown resource {key!r}; known: {', '.join(sorted(BY_KEY))}") from None


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    return BY_GROUP_VERSION.get((group, version), {}).get(plural)
