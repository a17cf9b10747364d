"""The resource types the facade serves, and nothing else: one table drives routing,
storage, discovery and admission, so a type listed here is served everywhere at once.
Each names its kind's strategy (``kinds/``: defaults, validation, update rules, field
selectors, deletion); :func:`register` adds a type at run time (custom resources).

Keys: ``"pods"`` for the core group, ``"<plural>.<group>"`` otherwise (``"leases.coordination.k8s.io"``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .kinds import printers_core
from .kinds.apps import (
    DaemonSetStrategy,
    DeploymentStrategy,
    ReplicaSetStrategy,
    StatefulSetStrategy,
)
from .kinds.autoscaling import HorizontalPodAutoscalerStrategy
from .kinds.autoscaling_v1 import HorizontalPodAutoscalerV1
from .kinds.base import Conversion, Strategy
from .kinds.batch import CronJobStrategy, JobStrategy
from .kinds.coordination import LeaseStrategy
from .kinds.core import (
    EventStrategy,
    EventsV1Strategy,
    NamespaceStrategy,
    NodeStrategy,
    ServiceStrategy,
)
from .kinds.crd import CustomResourceDefinitionStrategy
from .kinds.pods import BindingStrategy, PodStrategy
from .kinds.scheduling import PriorityClassStrategy
from .kinds.secrets import SecretStrategy
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
    stored: bool = True  # False: served by special code (bindings, metrics), or another version of a stored kind
    # what the API server does with objects of this kind (kinds/base.py)
    strategy: Strategy = field(default=Strategy(), compare=False, repr=False)
    # a version served beside the storage version of its kind (``stored=False``, the same
    # key), whose objects are converted both ways (kinds/base.py Conversion); None: the
    # stored objects as they are (a CRD's other versions only have apiVersion rewritten)
    conversion: Conversion | None = field(default=None, compare=False, repr=False)

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
    _r(
        "",
        "v1",
        "configmaps",
        "configmap",
        "ConfigMap",
        True,
        short_names=("cm",),
        strategy=Strategy(printers_core.CONFIG_MAP),
    ),
    _r("", "v1", "secrets", "secret", "Secret", True, strategy=SecretStrategy()),
    _r("", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", True, short_names=("sa",)),
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
    # the same objects in autoscaling/v1 (after v2: v2 stays the group's preferred version)
    _r(
        "autoscaling",
        "v1",
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        "HorizontalPodAutoscaler",
        True,
        short_names=("hpa",),
        subresources=("status",),
        stored=False,
        strategy=HorizontalPodAutoscalerStrategy(),
        conversion=HorizontalPodAutoscalerV1(),
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
        strategy=Strategy(printers_core.POD_DISRUPTION_BUDGET),
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
    _r(
        "coordination.k8s.io",
        "v1",
        "leases",
        "lease",
        "Lease",
        True,
        strategy=LeaseStrategy(),
    ),
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
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        False,
        short_names=("crd", "crds"),
        subresources=("status",),
        strategy=CustomResourceDefinitionStrategy(),
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


class Registry:
    """The types served: the process's (``GLOBAL``: the built-in ones, then those of
    :func:`register`) or a store's own, over the process's (``Registry(GLOBAL)``: the
    custom resources its CRDs define, which no other facade of the process sees)."""

    def __init__(self, parent: Registry | None = None) -> None:
        self.parent = parent
        self.by_key: dict[str, ResourceType] = {}
        self.by_group_version: dict[tuple[str, str], dict[str, ResourceType]] = {}
        # groups in the order /apis lists them (the preferred version is the first)
        self.groups_own: dict[str, list[str]] = {}
        self._served: list[ResourceType] = []

    def register(self, rt: ResourceType) -> None:
        """Serve ``rt`` from now on (routing, storage, discovery, admission by
        ``rt.strategy``); ValueError if its key or its group/version/plural is taken."""
        if rt.stored and self.by_key_or_none(rt.key) is not None:
            raise ValueError(f"resource {rt.key!r} is already served")
        if self.lookup(rt.group, rt.version, rt.plural) is not None:
            raise ValueError(f"resource {rt.plural!r} of {rt.api_version} is already served")
        self._served.append(rt)
        if rt.stored:
            self.by_key[rt.key] = rt
        self.by_group_version.setdefault((rt.group, rt.version), {})[rt.plural] = rt
        if rt.group:
            versions = self.groups_own.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)

    def unregister(self, rt: ResourceType) -> None:
        """Serve ``rt`` no more (its stored objects stay in the stores, unreachable)."""
        self._served.remove(rt)
        if self.by_key.get(rt.key) is rt:
            del self.by_key[rt.key]
        plurals = self.by_group_version[(rt.group, rt.version)]
        del plurals[rt.plural]
        if not plurals:
            del self.by_group_version[(rt.group, rt.version)]
        if rt.group and not any(
            other.group == rt.group and other.version == rt.version for other in self._served
        ):
            self.groups_own[rt.group].remove(rt.version)
            if not self.groups_own[rt.group]:
                del self.groups_own[rt.group]

    def served(self) -> tuple[ResourceType, ...]:
        """Every type served, the parent's first, in the order they were registered."""
        return (self.parent.served() if self.parent else ()) + tuple(self._served)

    def stored_types(self) -> list[ResourceType]:
        return [rt for rt in self.served() if rt.stored and self.by_key_or_none(rt.key) is rt]

    def by_key_or_none(self, key: str) -> ResourceType | None:
        rt = self.by_key.get(key)
        if rt is None and self.parent is not None:
            return self.parent.by_key_or_none(key)
        return rt

    def resource_type(self, key: str) -> ResourceType:
        """The stored type for ``key`` (``"pods"``, ``"leases.coordination.k8s.io"``);
        KeyError else."""
        rt = self.by_key_or_none(key)
        if rt is None:
            known = ", ".join(sorted(r.key for r in self.stored_types()))
            raise KeyError(f"unknown resource {key!r}; known: {known}")
        return rt

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        rt = self.by_group_version.get((group, version), {}).get(plural)
        if rt is None and self.parent is not None:
            return self.parent.lookup(group, version, plural)
        return rt

    def group_version(self, group: str, version: str) -> dict[str, ResourceType] | None:
        """plural -> type of one group/version, None if none is served."""
        inherited = self.parent.group_version(group, version) if self.parent else None
        own = self.by_group_version.get((group, version))
        if own is None:
            return inherited
        return {**(inherited or {}), **own}

    def groups(self) -> dict[str, list[str]]:
        """group -> its versions, in the order /apis lists them."""
        out = {g: list(vs) for g, vs in (self.parent.groups() if self.parent else {}).items()}
        for group, versions in self.groups_own.items():
            have = out.setdefault(group, [])
            have.extend(v for v in versions if v not in have)
        return out


GLOBAL = Registry()
# The process's tables (the built-in types, then those registered), as GLOBAL holds them.
BY_KEY = GLOBAL.by_key
BY_GROUP_VERSION = GLOBAL.by_group_version
GROUPS = GLOBAL.groups_own
register = GLOBAL.register
unregister = GLOBAL.unregister
served_types = GLOBAL.served

for _rt in RESOURCE_TYPES:
    register(_rt)


resource_type = GLOBAL.resource_type
lookup = GLOBAL.lookup
