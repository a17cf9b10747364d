"""core/v1 Pods (and the Binding a scheduler posts): the defaults and admission plugins
a stock API server runs on create, the validation of the spec, the one update rule the
facade enforces (``spec.nodeName`` is set by a binding only), the field selectors
schedulers use, and graceful deletion (the cluster's hooks and the kubelet decide when a
pod is gone).

Limits (documented, deliberate): no ServiceAccount token volumes, no LimitRanges or
ResourceQuotas, no immutability checks on pod specs beyond ``spec.nodeName``.
"""

from __future__ import annotations

from typing import Any

from .. import admission
from .. import validation as v
from ..admission import CONDITION, META, POD_SPEC, STR, ListOf, Struct
from ..errors import ApiError, invalid
from ..selectors import COMMON_FIELDS, bool_field, fields_at
from . import printers_core
from .base import Context, Obj, Strategy, TypeNames, spec_of

POD = Struct(
    "Pod",
    {
        "metadata": META,
        "spec": POD_SPEC,
        "status": Struct(
            "PodStatus",
            {
                "phase": STR,
                "message": STR,
                "reason": STR,
                "nominatedNodeName": STR,
                "hostIP": STR,
                "podIP": STR,
                "qosClass": STR,
                "startTime": STR,
                "conditions": ListOf(CONDITION),
            },
        ),
    },
)
BINDING = Struct(
    "Binding",
    {
        "metadata": META,
        "target": Struct(
            "ObjectReference",
            {"kind": STR, "name": STR, "namespace": STR, "uid": STR, "apiVersion": STR},
        ),
    },
)


def _qos_class(containers: list[dict[str, Any]]) -> str:
    requests_any = limits_all = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            requests_any = True
        for r in ("cpu", "memory"):
            if r not in lim or (r in req and req[r] != lim[r]):
                guaranteed = False
        limits_all = limits_all or bool(lim)
    if not requests_any:
        return "BestEffort"
    return "Guaranteed" if guaranteed and limits_all else "Burstable"


def _default_container(c: dict[str, Any]) -> None:
    image = c.get("image") or ""
    tag = image.rsplit("/", 1)[-1]
    if "imagePullPolicy" not in c:
        c["imagePullPolicy"] = (
            "Always" if (":" not in tag or tag.endswith(":latest")) else "IfNotPresent"
        )
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("resources", {})
    res = c["resources"]
    # A container with limits but no requests gets requests = limits.
    if res.get("limits"):
        res.setdefault("requests", {})
        for k, val in res["limits"].items():
            res["requests"].setdefault(k, val)


def default_pod(pod: dict[str, Any], priority_of: dict[str, int]) -> None:
    """Apply the pod defaults and admission plugins a stock API server runs."""
    name = pod["metadata"].get("name", "")
    spec = pod.setdefault("spec", {})
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise invalid("Pod", name, ["spec.containers: Required value"])
    for i, c in enumerate(containers + (spec.get("initContainers") or [])):
        if not isinstance(c, dict) or not c.get("name"):
            raise invalid("Pod", name, [f"spec.containers[{i}].name: Required value"])
        if not c.get("image"):
            raise invalid("Pod", name, [f"spec.containers[{i}].image: Required value"])
        _default_container(c)
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    class_name = spec.get("priorityClassName")
    if class_name:
        if class_name not in priority_of:
            raise ApiError(
                403,
                f'pods "{name}" is forbidden: no PriorityClass with name {class_name} was found',
                "Forbidden",
                kind="pods",
                name=name,
            )
        spec["priority"] = priority_of[class_name]
    else:
        spec.setdefault("priority", 0)
    tolerations = spec.setdefault("tolerations", [])
    for taint in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(t.get("key") == taint for t in tolerations if isinstance(t, dict)):
            tolerations.append(
                {
                    "key": taint,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            )
    status = pod.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", _qos_class(containers))


class PodStrategy(Strategy):
    schema = POD
    printer = printers_core.POD
    fields = {
        **COMMON_FIELDS,
        **fields_at(
            "spec.nodeName",
            "spec.schedulerName",
            "spec.restartPolicy",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ),
        "spec.hostNetwork": bool_field("spec.hostNetwork"),
    }
    deletion = "graceful"
    delete_collection = False
    # default_pod reads the spec, the status and the PriorityClasses; validate_fields the
    # spec; the metadata only for the name in messages
    admits_by_shape = True

    def prepare_for_create(self, rt: TypeNames, obj: Obj, ctx: Context) -> None:
        default_pod(obj, ctx.priorities())

    def prepare_for_update(
        self, rt: TypeNames, new: Obj, old: Obj, subresource: str | None
    ) -> None:
        if subresource == "status":
            return
        old_node = (old.get("spec") or {}).get("nodeName")
        if (new.get("spec") or {}).get("nodeName") != old_node:
            raise invalid(
                "Pod",
                new["metadata"]["name"],
                [
                    "spec.nodeName: Forbidden: pod updates may not change spec.nodeName "
                    "(use the binding subresource)"
                ],
            )

    def validate_fields(self, rt: TypeNames, obj: Obj) -> list[v.FieldError]:
        return admission.validate_pod_spec(spec_of(obj), "spec")


class BindingStrategy(Strategy):
    """Bindings are not stored: only their decoding is the API server's."""

    schema = BINDING
