"""The core/v1 kinds with a little of their own (Pods have ``pods.py``): Namespaces,
Nodes, Services, and Events of both groups (core/v1 and events.k8s.io/v1)."""

from __future__ import annotations

from collections.abc import Callable

from .. import admission
from .. import validation as v
from ..admission import BOOL, CONDITION, META, RESOURCES, STR, ListOf, Struct
from ..errors import invalid
from ..selectors import COMMON_FIELDS, as_field_text, bool_field, fields_at, get_path
from . import printers_core
from .base import Context, Obj, Strategy, TypeNames

NODE = Struct(
    "Node",
    {
        "metadata": META,
        "spec": Struct(
            "NodeSpec",
            {
                "podCIDR": STR,
                "podCIDRs": ListOf(STR),
                "unschedulable": BOOL,
                "providerID": STR,
                "taints": ListOf(Struct("Taint", {"key": STR, "value": STR, "effect": STR})),
            },
        ),
        "status": Struct(
            "NodeStatus",
            {
                "capacity": RESOURCES,
                "allocatable": RESOURCES,
                "phase": STR,
                "conditions": ListOf(CONDITION),
            },
        ),
    },
)
NAMESPACE = Struct(
    "Namespace",
    {"metadata": META, "spec": Struct("NamespaceSpec", {"finalizers": ListOf(STR)})},
)


class NamespaceStrategy(Strategy):
    """A DNS-1123 label for a name, the ``kubernetes`` finalizer and the label of its
    name on create; deleted in steps (Terminating, emptied, gone)."""

    schema = NAMESPACE
    printer = printers_core.NAMESPACE
    name_rule = staticmethod(v.is_dns1123_label)
    fields = {**COMMON_FIELDS, **fields_at("status.phase")}
    deletion = "finalized"
    holds_namespace_content = True

    def prepare_for_create(self, rt: TypeNames, obj: Obj, ctx: Context) -> None:
        meta = obj["metadata"]
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj.setdefault("status", {}).setdefault("phase", "Active")
        meta.setdefault("labels", {}).setdefault(
            "kubernetes.io/metadata.name", meta.get("name", "")
        )


class NodeStrategy(Strategy):
    schema = NODE
    printer = printers_core.NODE
    fields = {**COMMON_FIELDS, "spec.unschedulable": bool_field("spec.unschedulable")}

    def validate_fields(self, rt: TypeNames, obj: Obj) -> list[v.FieldError]:
        status = obj.get("status") or {}
        errs: list[v.FieldError] = []
        for section in ("capacity", "allocatable"):
            for name, text in (status.get(section) or {}).items():
                errs += admission.quantity_errors(name, text, f"status.{section}[{name}]")
        return errs


class ServiceStrategy(Strategy):
    """A DNS-1035 label for a name (it becomes a DNS name of the cluster)."""

    name_rule = staticmethod(v.is_dns1035_label)
    printer = printers_core.SERVICE


def _required(field: str, check: Callable[[object], bool]) -> Callable[[Obj], None]:
    def require(obj: Obj) -> None:
        if not check(obj.get(field)):
            raise invalid("Event", obj["metadata"].get("name", ""), [f"{field}: Required value"])

    return require


#: kube-apiserver's ``--event-ttl`` default: an Event lives an hour after its last write
EVENT_TTL_S = 3600.0


class EventStrategy(Strategy):
    """core/v1 Events: any path segment for a name, ``involvedObject`` required."""

    name_rule = staticmethod(v.is_path_segment_name)
    printer = printers_core.EVENT
    ttl_s = EVENT_TTL_S
    packed = True
    fields = {
        **COMMON_FIELDS,
        **fields_at(
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "type",
        ),
        "source": lambda obj: as_field_text(get_path(obj, "source.component")),
    }
    _require = staticmethod(_required("involvedObject", lambda x: isinstance(x, dict)))

    def prepare_for_create(self, rt: TypeNames, obj: Obj, ctx: Context) -> None:
        self._require(obj)


class EventsV1Strategy(EventStrategy):
    """events.k8s.io/v1 Events: ``eventTime`` required."""

    printer = printers_core.EVENT_V1

    fields = {
        **COMMON_FIELDS,
        **fields_at("regarding.kind", "regarding.namespace", "regarding.name", "reason", "type"),
    }
    _require = staticmethod(_required("eventTime", bool))
