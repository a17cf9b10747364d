"""The ``scale`` subresource (autoscaling/v1 ``Scale``) and autoscaling/v2
HorizontalPodAutoscaler admission, as kube-apiserver does them.

**Scale** (``GET/PUT/PATCH /apis/apps/v1/namespaces/NS/{deployments,replicasets,
statefulsets}/NAME/scale``, what ``read_namespaced_deployment_scale`` and
``patch_namespaced_deployment_scale`` call): a view of the parent —
``metadata`` {name, namespace, uid, resourceVersion, creationTimestamp} of the parent,
``spec.replicas`` = its ``spec.replicas`` (omitted when 0: ``omitempty``),
``status.replicas`` = its ``status.replicas``, ``status.selector`` = its selector as a
string (``app=web``). A write changes only the parent's ``spec.replicas`` (and so its
``generation``); a ``metadata.resourceVersion`` in the body must be the parent's (409
otherwise); ``spec.replicas`` < 0 is a 422. A PATCH applies to the Scale, then writes
as a PUT would.

**HorizontalPodAutoscaler** (autoscaling/v2): the server's defaults (``minReplicas: 1``;
no ``metrics`` → CPU at 80% average utilization; a ``behavior`` gets its missing rules
filled: scale-up 0 s window, ``Max`` of 4 pods / 100% per 15 s; scale-down ``Max`` of
100% per 15 s and no window, i.e. the controller's 300 s), ``status`` emptied on create
(``desiredReplicas: 0``), and its validation (min/max replicas, ``scaleTargetRef``,
metric sources and targets, behavior rules and policies) with the server's messages.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from broker.k8s import quantity

from .. import errors
from ..admission import INT32, INT64, META, QUANTITY, SELECTOR, STR, TIME, ListOf, Struct
from ..selectors import format_selector
from . import printers_workloads
from .apps import invalid_from
from .autoscaling_v1 import drop_round_trip
from .base import Context, Obj, Strategy, TypeNames

DEFAULT_CPU_UTILIZATION = 80
MAX_PERIOD_SECONDS = 1800
MAX_STABILIZATION_WINDOW_SECONDS = 3600

_SCALE_UP_RULES = {
    "stabilizationWindowSeconds": 0,
    "selectPolicy": "Max",
    "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15},
    ],
}
_SCALE_DOWN_RULES = {
    "selectPolicy": "Max",
    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
}
_METRIC_SOURCES = {
    "Object": "object",
    "Pods": "pods",
    "Resource": "resource",
    "External": "external",
    "ContainerResource": "containerResource",
}
_TARGET_TYPES = ("AverageValue", "Utilization", "Value")


def _v2(name: str, fields: dict[str, Any], written: tuple[str, ...] = ()) -> Struct:
    return Struct(name, fields, package="v2", written=written)


_REFERENCE = _v2("CrossVersionObjectReference", {"kind": STR, "name": STR, "apiVersion": STR})
_TARGET = _v2(
    "MetricTarget",
    {"type": STR, "value": QUANTITY, "averageValue": QUANTITY, "averageUtilization": INT32},
)
_IDENTIFIER = _v2("MetricIdentifier", {"name": STR, "selector": SELECTOR})
# what the HPA controller writes in its status (the Go types' non-omitempty fields are
# written back even when absent: the official client's models require them)
_CURRENT = _v2(
    "MetricValueStatus", {"value": QUANTITY, "averageValue": QUANTITY, "averageUtilization": INT32}
)
_STATUS_IDENTIFIER = Struct(
    "MetricIdentifier", {"name": STR, "selector": SELECTOR}, package="v2", written=("name",)
)
_STATUS_REFERENCE = Struct(
    "CrossVersionObjectReference",
    {"kind": STR, "name": STR, "apiVersion": STR},
    package="v2",
    written=("kind", "name"),
)


def _source_status(name: str, fields: dict[str, Any]) -> Struct:
    fields = {**fields, "current": _CURRENT}  # none of them omitempty
    return Struct(name, fields, package="v2", written=tuple(fields))


_METRIC_STATUS = Struct(
    "MetricStatus",
    {
        "type": STR,
        "resource": _source_status("ResourceMetricStatus", {"name": STR}),
        "containerResource": _source_status(
            "ContainerResourceMetricStatus", {"name": STR, "container": STR}
        ),
        "pods": _source_status("PodsMetricStatus", {"metric": _STATUS_IDENTIFIER}),
        "object": _source_status(
            "ObjectMetricStatus",
            {"metric": _STATUS_IDENTIFIER, "describedObject": _STATUS_REFERENCE},
        ),
        "external": _source_status("ExternalMetricStatus", {"metric": _STATUS_IDENTIFIER}),
    },
    package="v2",
    written=("type",),
)
_RULES = _v2(
    "HPAScalingRules",
    {
        "stabilizationWindowSeconds": INT32,
        "selectPolicy": STR,
        "policies": ListOf(
            _v2("HPAScalingPolicy", {"type": STR, "value": INT32, "periodSeconds": INT32})
        ),
    },
)
HPA = _v2(
    "HorizontalPodAutoscaler",
    {
        "metadata": META,
        "spec": _v2(
            "HorizontalPodAutoscalerSpec",
            {
                "scaleTargetRef": _REFERENCE,
                "minReplicas": INT32,
                "maxReplicas": INT32,
                "metrics": ListOf(
                    _v2(
                        "MetricSpec",
                        {
                            "type": STR,
                            "resource": _v2(
                                "ResourceMetricSource", {"name": STR, "target": _TARGET}
                            ),
                            "containerResource": _v2(
                                "ContainerResourceMetricSource",
                                {"name": STR, "container": STR, "target": _TARGET},
                            ),
                            "pods": _v2(
                                "PodsMetricSource", {"metric": _IDENTIFIER, "target": _TARGET}
                            ),
                            "object": _v2(
                                "ObjectMetricSource",
                                {
                                    "describedObject": _REFERENCE,
                                    "metric": _IDENTIFIER,
                                    "target": _TARGET,
                                },
                            ),
                            "external": _v2(
                                "ExternalMetricSource", {"metric": _IDENTIFIER, "target": _TARGET}
                            ),
                        },
                    )
                ),
                "behavior": _v2(
                    "HorizontalPodAutoscalerBehavior", {"scaleUp": _RULES, "scaleDown": _RULES}
                ),
            },
        ),
        "status": _v2(
            "HorizontalPodAutoscalerStatus",
            {
                "observedGeneration": INT64,
                "lastScaleTime": TIME,
                "currentReplicas": INT32,
                "desiredReplicas": INT32,
                "currentMetrics": ListOf(_METRIC_STATUS),
                "conditions": ListOf(
                    Struct(
                        "HorizontalPodAutoscalerCondition",
                        {
                            **dict.fromkeys(("type", "status", "reason", "message"), STR),
                            "lastTransitionTime": TIME,
                        },
                        package="v2",
                        written=("type", "status"),
                    )  # fmt: skip
                ),
            },
            written=("desiredReplicas",),  # without omitempty in the Go type
        ),
    },
)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------- Scale


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int:
    return value if _is_int(value) else 0


def scale_of(obj: dict[str, Any]) -> dict[str, Any]:
    """The autoscaling/v1 Scale of a Deployment, ReplicaSet or StatefulSet."""
    meta = obj["metadata"]
    # the parent as stored, whatever shape the broker's own writes gave it: a field of
    # the wrong type reads as its zero value, never as a 500
    parent_spec, parent_status = _object(obj.get("spec")), _object(obj.get("status"))
    spec: dict[str, Any] = {}
    replicas = _count(parent_spec.get("replicas"))
    if replicas:
        spec["replicas"] = replicas
    status: dict[str, Any] = {"replicas": _count(parent_status.get("replicas"))}
    selector = format_selector(_object(parent_spec.get("selector")))
    if selector:
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace", ""),
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
            "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": spec,
        "status": status,
    }


def wanted_replicas(body: Any, name: str, namespace: str) -> tuple[int, str | None]:
    """(spec.replicas, resourceVersion or None) of a Scale body (as sent by a PUT, or as
    a PATCH left it); 400/422 as the server (its ``checkName``: the name must be the
    URL's, a namespace the request's)."""
    if not isinstance(body, dict):
        raise errors.bad_request("the body must be a JSON object (a Scale)")
    if body.get("kind") not in (None, "", "Scale"):
        raise errors.bad_request(f"the body is a {body.get('kind')}, not a Scale")
    if body.get("apiVersion") not in (None, "", "autoscaling/v1"):
        raise errors.bad_request(
            f"the body has apiVersion {body.get('apiVersion')}, but the scale subresource "
            "speaks autoscaling/v1"
        )
    meta = body.get("metadata") or {}
    if not isinstance(meta, dict):
        raise errors.bad_request("metadata must be a JSON object")
    if meta.get("name") != name:
        raise errors.bad_request(
            f"the name of the object ({meta.get('name') or ''}) does not match the name on the "
            f"URL ({name})"
        )
    if meta.get("namespace") not in (None, "", namespace):
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    spec = body.get("spec") or {}
    replicas = spec.get("replicas", 0) if isinstance(spec, dict) else None
    if not _is_int(replicas):
        raise errors.bad_request(
            f'Scale in version "v1" cannot be handled as a Scale: spec.replicas: '
            f"{json.dumps(replicas)} is not an integer"
        )
    if replicas < 0:
        raise invalid_from(
            "Scale",
            "autoscaling",
            name,
            [f"spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0"],
        )
    rv = meta.get("resourceVersion")
    return replicas, (str(rv) if rv not in (None, "") else None)


# ------------------------------------------------------------ HorizontalPodAutoscaler


def default_hpa(hpa: dict[str, Any]) -> None:
    """A create: the defaults, the status it starts from, the validation."""
    default_hpa_spec(hpa)
    hpa["status"] = {"desiredReplicas": 0}
    validate_hpa(hpa)


def default_hpa_spec(hpa: dict[str, Any]) -> None:
    """``SetDefaults_HorizontalPodAutoscaler`` (v2), on every write of the spec."""
    spec = hpa.setdefault("spec", {})
    if isinstance(spec, dict):
        spec.setdefault("minReplicas", 1)
        if not spec.get("metrics"):
            spec["metrics"] = [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {
                            "type": "Utilization",
                            "averageUtilization": DEFAULT_CPU_UTILIZATION,
                        },
                    },
                }
            ]
        behavior = spec.get("behavior")
        if isinstance(behavior, dict):
            for key, rules in (("scaleUp", _SCALE_UP_RULES), ("scaleDown", _SCALE_DOWN_RULES)):
                given = behavior.get(key)
                filled = copy.deepcopy(rules)
                if isinstance(given, dict):
                    filled.update({k: v for k, v in given.items() if v is not None})
                behavior[key] = filled


def validate_hpa(hpa: dict[str, Any]) -> None:
    """422 naming every problem of an HPA's spec."""
    name = hpa.get("metadata", {}).get("name", "")
    spec = hpa.get("spec")
    problems: list[str] = []
    if not isinstance(spec, dict):
        problems.append("spec: Required value")
        spec = {}
    low, high = spec.get("minReplicas"), spec.get("maxReplicas")
    if low is not None and (not _is_int(low) or low < 1):
        problems.append(
            f"spec.minReplicas: Invalid value: {json.dumps(low)}: must be greater than or equal to 1"
        )
    if not _is_int(high) or high < 1:
        problems.append(
            f"spec.maxReplicas: Invalid value: {json.dumps(high)}: must be greater than 0"
        )
    elif _is_int(low) and high < low:
        problems.append(
            f"spec.maxReplicas: Invalid value: {high}: must be greater than or equal to `minReplicas`"
        )
    problems += _reference_problems(spec.get("scaleTargetRef"), "spec.scaleTargetRef")
    metrics = spec.get("metrics") or []
    if not isinstance(metrics, list):
        problems.append("spec.metrics: Invalid value: must be a list")
        metrics = []
    for i, metric in enumerate(metrics):
        problems += _metric_problems(metric, f"spec.metrics[{i}]")
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        for key in ("scaleUp", "scaleDown"):
            problems += _rules_problems(behavior.get(key), f"spec.behavior.{key}")
    if problems:
        raise invalid_from("HorizontalPodAutoscaler", "autoscaling", name, problems)


def validate_hpa_status(hpa: dict[str, Any]) -> None:
    name = hpa.get("metadata", {}).get("name", "")
    status = _object(hpa.get("status"))  # kept from the store if the body had none
    problems = []
    for key in ("currentReplicas", "desiredReplicas"):
        value = status.get(key, 0)
        if not _is_int(value) or value < 0:
            problems.append(
                f"status.{key}: Invalid value: {json.dumps(value)}: must be greater than or equal to 0"
            )
    if problems:
        raise invalid_from("HorizontalPodAutoscaler", "autoscaling", name, problems)


def _reference_problems(ref: Any, path: str) -> list[str]:
    if not isinstance(ref, dict):
        return [f"{path}.kind: Required value", f"{path}.name: Required value"]
    problems = []
    for key in ("kind", "name"):
        value = ref.get(key)
        if not value:
            problems.append(f"{path}.{key}: Required value")
        elif not isinstance(value, str) or value in (".", "..") or "/" in value or "%" in value:
            problems.append(
                f"{path}.{key}: Invalid value: {json.dumps(value)}: may not contain '/' or '%' "
                "and may not be '.' or '..'"
            )
    return problems


def _metric_problems(metric: Any, path: str) -> list[str]:
    if not isinstance(metric, dict):
        return [f"{path}.type: Required value: must specify a metric source type"]
    kind = metric.get("type")
    supported = ", ".join(f'"{k}"' for k in sorted(_METRIC_SOURCES))
    if not kind:
        return [f"{path}.type: Required value: must specify a metric source type"]
    if kind not in _METRIC_SOURCES:
        return [
            f"{path}.type: Unsupported value: {json.dumps(kind)}: supported values: {supported}"
        ]
    field = _METRIC_SOURCES[kind]
    problems = [
        f"{path}.{other}: Forbidden: must populate the given metric source only"
        for other in _METRIC_SOURCES.values()
        if other != field and metric.get(other) is not None
    ]
    source = metric.get(field)
    if not isinstance(source, dict):
        return problems + [
            f"{path}.{field}: Required value: must populate information for the given metric source"
        ]
    where = f"{path}.{field}"
    if kind in ("Resource", "ContainerResource"):
        if not source.get("name"):
            problems.append(f"{where}.name: Required value: must specify a resource name")
        if kind == "ContainerResource" and not source.get("container"):
            problems.append(f"{where}.container: Required value: must specify a container")
    if kind == "Object":
        problems += _reference_problems(source.get("describedObject"), f"{where}.describedObject")
    if kind in ("Object", "Pods", "External"):
        ident = source.get("metric")
        if not isinstance(ident, dict) or not ident.get("name"):
            problems.append(f"{where}.metric.name: Required value: must specify a metric name")
    problems += _target_problems(source.get("target"), f"{where}.target", kind)
    return problems


def _target_problems(target: Any, path: str, source: str) -> list[str]:
    if not isinstance(target, dict):
        return [f"{path}.type: Required value: must specify a metric target type"]
    kind = target.get("type")
    if not kind:
        return [f"{path}.type: Required value: must specify a metric target type"]
    if kind not in _TARGET_TYPES:
        supported = ", ".join(f'"{t}"' for t in _TARGET_TYPES)
        return [
            f"{path}.type: Unsupported value: {json.dumps(kind)}: supported values: {supported}"
        ]
    problems = [
        f"{path}.{key}: Invalid value: {json.dumps(str(target[key]))}: must be positive"
        for key in ("value", "averageValue")
        if target.get(key) is not None and quantity.parse(target[key]).sign != 1
    ]
    utilization = target.get("averageUtilization")
    if utilization is not None and (not _is_int(utilization) or utilization <= 0):
        problems.append(
            f"{path}.averageUtilization: Invalid value: {json.dumps(utilization)}: must be greater than 0"
        )
    if source in ("Resource", "ContainerResource"):
        if kind == "Utilization" and utilization is None:
            problems.append(
                f"{path}.averageUtilization: Required value: must set either a target raw "
                "value or a target utilization"
            )
        if kind == "AverageValue" and target.get("averageValue") is None:
            problems.append(
                f"{path}.averageValue: Required value: must set either a target raw value or "
                "a target utilization"
            )
    if source == "Pods" and target.get("averageValue") is None:
        problems.append(
            f"{path}.averageValue: Required value: must specify a positive target averageValue"
        )
    return problems


def _rules_problems(rules: Any, path: str) -> list[str]:
    if rules is None:
        return []
    if not isinstance(rules, dict):
        return [f"{path}: Invalid value: must be an object"]
    problems = []
    window = rules.get("stabilizationWindowSeconds")
    if window is not None:
        if not _is_int(window) or window < 0:
            problems.append(
                f"{path}.stabilizationWindowSeconds: Invalid value: {json.dumps(window)}: must "
                "be greater than or equal to zero"
            )
        elif window > MAX_STABILIZATION_WINDOW_SECONDS:
            problems.append(
                f"{path}.stabilizationWindowSeconds: Invalid value: {window}: must be less than "
                f"or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"
            )
    select = rules.get("selectPolicy")
    if select is not None and select not in ("Disabled", "Max", "Min"):
        problems.append(
            f"{path}.selectPolicy: Unsupported value: {json.dumps(select)}: supported values: "
            '"Disabled", "Max", "Min"'
        )
    policies = rules.get("policies")
    if not policies:
        problems.append(f"{path}.policies: Required value: must specify at least one Policy")
        return problems
    for i, policy in enumerate(policies):
        where = f"{path}.policies[{i}]"
        policy = policy if isinstance(policy, dict) else {}
        if policy.get("type") not in ("Percent", "Pods"):
            problems.append(
                f"{where}.type: Unsupported value: {json.dumps(policy.get('type'))}: supported "
                'values: "Percent", "Pods"'
            )
        value, period = policy.get("value"), policy.get("periodSeconds")
        if not _is_int(value) or value <= 0:
            problems.append(
                f"{where}.value: Invalid value: {json.dumps(value)}: must be greater than zero"
            )
        if not _is_int(period) or period <= 0:
            problems.append(
                f"{where}.periodSeconds: Invalid value: {json.dumps(period)}: must be greater than zero"
            )
        elif period > MAX_PERIOD_SECONDS:
            problems.append(
                f"{where}.periodSeconds: Invalid value: {period}: must be less than or equal to "
                f"{MAX_PERIOD_SECONDS}"
            )
    return problems


def _drop_round_trip(hpa: Obj) -> None:
    """v2 never stores autoscaling/v1's round-trip annotations (the server drops them on
    the way in: ``DropRoundTripHorizontalPodAutoscalerAnnotations``)."""
    meta = hpa.get("metadata")
    if isinstance(meta, dict):
        drop_round_trip(meta)


class HorizontalPodAutoscalerStrategy(Strategy):
    """Defaults and validation of the spec on every write of the object, the status
    emptied on create, the status validated on a status write."""

    schema = HPA
    printer = printers_workloads.HPA

    def prepare_for_create(self, rt: TypeNames, obj: Obj, ctx: Context) -> None:
        _drop_round_trip(obj)
        default_hpa(obj)

    def prepare_for_update(
        self, rt: TypeNames, new: Obj, old: Obj, subresource: str | None
    ) -> None:
        if subresource is None:
            _drop_round_trip(new)
            default_hpa_spec(new)
            validate_hpa(new)
        else:
            validate_hpa_status(new)
