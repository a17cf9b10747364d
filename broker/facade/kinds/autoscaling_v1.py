"""autoscaling/v1 HorizontalPodAutoscalers: the conversion kube-apiserver does between
the v1 representation and the stored autoscaling/v2 object
(``pkg/apis/autoscaling/v1/conversion.go``), on JSON objects.

v1 has one metric, ``spec.targetCPUUtilizationPercentage`` (a v2 ``Resource`` metric on
``cpu`` with a ``Utilization`` target), and one current value,
``status.currentCPUUtilizationPercentage``. Everything else v2 holds travels in
annotations, so that a v1 client reading an object and writing it back loses nothing:

=================================================  ==========================================
annotation                                         what
=================================================  ==========================================
``autoscaling.alpha.kubernetes.io/metrics``        the other metrics (v1 ``MetricSpec``, the
                                                   v2beta1 shape: ``targetAverageValue`` ...)
``autoscaling.alpha.kubernetes.io/current-metrics``  every current metric (v1 ``MetricStatus``)
``autoscaling.alpha.kubernetes.io/behavior``       ``spec.behavior``, as Go marshals the
                                                   internal type (Go field names: ``ScaleUp``)
``autoscaling.alpha.kubernetes.io/conditions``     ``status.conditions``
=================================================  ==========================================

Reading back (v1 → v2) the annotations are taken off; one that does not decode is
ignored, as the server ignores it ("only move well-formed data from annotations to
fields"). A v1 object without a CPU target and no other metric gets the CPU 80 % metric
(the controller's old implicit default). The v2 encoding never carries those
annotations (``DropRoundTripHorizontalPodAutoscalerAnnotations``): :func:`drop_round_trip`.
Key order is the Go structs' (what ``json.Marshal`` writes).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from ..admission import INT32, INT64, META, STR, Struct
from .base import Conversion, Obj

METRICS = "autoscaling.alpha.kubernetes.io/metrics"
CURRENT_METRICS = "autoscaling.alpha.kubernetes.io/current-metrics"
BEHAVIOR = "autoscaling.alpha.kubernetes.io/behavior"
CONDITIONS = "autoscaling.alpha.kubernetes.io/conditions"
ROUND_TRIP = (METRICS, BEHAVIOR, CURRENT_METRICS, CONDITIONS)
_CONDITION_KEYS = ("type", "status", "lastTransitionTime", "reason", "message")
DEFAULT_CPU_UTILIZATION = 80
API_VERSION = "autoscaling/v1"
STORED_API_VERSION = "autoscaling/v2"

_REFERENCE = Struct("CrossVersionObjectReference", {"kind": STR, "name": STR, "apiVersion": STR})
SCHEMA = Struct(
    "HorizontalPodAutoscaler",
    {
        "metadata": META,
        "spec": Struct(
            "HorizontalPodAutoscalerSpec",
            {
                "scaleTargetRef": _REFERENCE,
                "minReplicas": INT32,
                "maxReplicas": INT32,
                "targetCPUUtilizationPercentage": INT32,
            },
        ),
        "status": Struct(
            "HorizontalPodAutoscalerStatus",
            {
                "observedGeneration": INT64,
                "lastScaleTime": STR,
                "currentReplicas": INT32,
                "desiredReplicas": INT32,
                "currentCPUUtilizationPercentage": INT32,
            },
        ),
    },
)


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    """``omitempty`` of a pointer: written only when set."""
    if value is not None:
        out[key] = value


def _go_json(value: Any) -> str:
    """What Go's ``json.Marshal`` writes: compact, ``<``, ``>``, ``&`` escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _decoded_list(annotations: dict[str, Any], key: str) -> list[dict[str, Any]] | None:
    raw = annotations.get(key)
    if not isinstance(raw, str):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        return None
    return value


def drop_round_trip(meta: dict[str, Any]) -> None:
    """The round-trip annotations taken off ``meta`` (in place); an emptied map goes."""
    annotations = meta.get("annotations")
    if not isinstance(annotations, dict) or not any(k in annotations for k in ROUND_TRIP):
        return
    for key in ROUND_TRIP:
        annotations.pop(key, None)
    if not annotations:
        del meta["annotations"]


def _reference(ref: Any) -> dict[str, Any]:
    ref = _obj(ref)
    out = {"kind": ref.get("kind", ""), "name": ref.get("name", "")}
    _put(out, "apiVersion", ref.get("apiVersion") or None)
    return out


def _is_cpu(metric: dict[str, Any]) -> bool:
    resource = _obj(metric.get("resource"))
    return metric.get("type") == "Resource" and resource.get("name") == "cpu"


def _is_cpu_utilization(metric: dict[str, Any]) -> bool:
    target = _obj(_obj(metric.get("resource")).get("target"))
    return _is_cpu(metric) and target.get("averageUtilization") is not None


# ------------------------------------------------------------------ v2 -> v1 (reads)


def _identifier(source: dict[str, Any]) -> tuple[str, Any]:
    metric = _obj(source.get("metric"))
    return metric.get("name", ""), metric.get("selector")


def _metric_spec_v1(metric: dict[str, Any]) -> dict[str, Any]:
    """``Convert_autoscaling_MetricSpec_To_v1_MetricSpec`` (v2beta1 field names)."""
    out: dict[str, Any] = {"type": metric.get("type", "")}
    if (source := metric.get("object")) is not None:
        source, target = _obj(source), _obj(_obj(source).get("target"))
        name, selector = _identifier(source)
        v1 = {"target": _reference(source.get("describedObject")), "metricName": name}
        v1["targetValue"] = target.get("value", "0")
        _put(v1, "selector", selector)
        _put(v1, "averageValue", target.get("averageValue"))
        out["object"] = v1
    if (source := metric.get("pods")) is not None:
        source, target = _obj(source), _obj(_obj(source).get("target"))
        name, selector = _identifier(source)
        v1 = {"metricName": name, "targetAverageValue": target.get("averageValue", "0")}
        _put(v1, "selector", selector)
        out["pods"] = v1
    for key in ("resource", "containerResource"):
        if (source := metric.get(key)) is not None:
            source, target = _obj(source), _obj(_obj(source).get("target"))
            v1 = {"name": source.get("name", "")}
            _put(v1, "targetAverageUtilization", target.get("averageUtilization"))
            _put(v1, "targetAverageValue", target.get("averageValue"))
            if key == "containerResource":
                v1["container"] = source.get("container", "")
            out[key] = v1
    if (source := metric.get("external")) is not None:
        source, target = _obj(source), _obj(_obj(source).get("target"))
        name, selector = _identifier(source)
        v1 = {"metricName": name}
        _put(v1, "metricSelector", selector)
        _put(v1, "targetValue", target.get("value"))
        _put(v1, "targetAverageValue", target.get("averageValue"))
        out["external"] = v1
    return out


def _metric_status_v1(metric: dict[str, Any]) -> dict[str, Any]:
    """``Convert_autoscaling_MetricStatus_To_v1_MetricStatus``."""
    out: dict[str, Any] = {"type": metric.get("type", "")}
    if (source := metric.get("object")) is not None:
        source, current = _obj(source), _obj(_obj(source).get("current"))
        name, selector = _identifier(source)
        v1 = {"target": _reference(source.get("describedObject")), "metricName": name}
        v1["currentValue"] = current.get("value", "0")
        _put(v1, "selector", selector)
        _put(v1, "averageValue", current.get("averageValue"))
        out["object"] = v1
    if (source := metric.get("pods")) is not None:
        source, current = _obj(source), _obj(_obj(source).get("current"))
        name, selector = _identifier(source)
        v1 = {"metricName": name, "currentAverageValue": current.get("averageValue", "0")}
        _put(v1, "selector", selector)
        out["pods"] = v1
    for key in ("resource", "containerResource"):
        if (source := metric.get(key)) is not None:
            source, current = _obj(source), _obj(_obj(source).get("current"))
            v1 = {"name": source.get("name", "")}
            _put(v1, "currentAverageUtilization", current.get("averageUtilization"))
            v1["currentAverageValue"] = current.get("averageValue", "0")
            if key == "containerResource":
                v1["container"] = source.get("container", "")
            out[key] = v1
    if (source := metric.get("external")) is not None:
        source, current = _obj(source), _obj(_obj(source).get("current"))
        name, selector = _identifier(source)
        v1 = {"metricName": name}
        _put(v1, "metricSelector", selector)
        v1["currentValue"] = current.get("value", "0")
        _put(v1, "currentAverageValue", current.get("averageValue"))
        out["external"] = v1
    return out


def _condition_v1(condition: dict[str, Any]) -> dict[str, Any]:
    out = {"type": condition.get("type", ""), "status": condition.get("status", "")}
    out["lastTransitionTime"] = condition.get("lastTransitionTime")  # a zero Time is null
    _put(out, "reason", condition.get("reason") or None)
    _put(out, "message", condition.get("message") or None)
    return out


def _behavior_go(behavior: dict[str, Any]) -> dict[str, Any]:
    """The internal ``HorizontalPodAutoscalerBehavior`` as Go marshals it: no json tags,
    so Go field names, nil pointers as null (the server's own TODO says so)."""

    def rules(value: Any) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            return None
        policies = value.get("policies")
        return {
            "StabilizationWindowSeconds": value.get("stabilizationWindowSeconds"),
            "SelectPolicy": value.get("selectPolicy"),
            "Policies": None
            if not isinstance(policies, list)
            else [
                {
                    "Type": _obj(p).get("type", ""),
                    "Value": _obj(p).get("value", 0),
                    "PeriodSeconds": _obj(p).get("periodSeconds", 0),
                }
                for p in policies
            ],
        }

    return {
        "ScaleUp": rules(behavior.get("scaleUp")),
        "ScaleDown": rules(behavior.get("scaleDown")),
    }


def to_v1(stored: Obj) -> Obj:
    """``Convert_autoscaling_HorizontalPodAutoscaler_To_v1_HorizontalPodAutoscaler``: the
    v1 representation of a stored (v2) object."""
    meta = copy.deepcopy(_obj(stored.get("metadata")))
    drop_round_trip(meta)
    spec_in, status_in = _obj(stored.get("spec")), _obj(stored.get("status"))
    metrics = _list(spec_in.get("metrics"))
    spec: dict[str, Any] = {"scaleTargetRef": _reference(spec_in.get("scaleTargetRef"))}
    _put(spec, "minReplicas", spec_in.get("minReplicas"))
    spec["maxReplicas"] = spec_in.get("maxReplicas", 0)
    for metric in metrics:  # the first CPU resource metric, a utilization or not
        if _is_cpu(metric):
            target = _obj(_obj(metric.get("resource")).get("target"))
            _put(spec, "targetCPUUtilizationPercentage", target.get("averageUtilization"))
            break
    status: dict[str, Any] = {}
    _put(status, "observedGeneration", status_in.get("observedGeneration"))
    _put(status, "lastScaleTime", status_in.get("lastScaleTime"))
    status["currentReplicas"] = status_in.get("currentReplicas", 0)
    status["desiredReplicas"] = status_in.get("desiredReplicas", 0)
    current = _list(status_in.get("currentMetrics"))
    for metric in current:  # no break: the last CPU utilization wins
        value = _obj(_obj(metric.get("resource")).get("current")).get("averageUtilization")
        if _is_cpu(metric) and value is not None:
            status["currentCPUUtilizationPercentage"] = value
    carried: dict[str, str] = {}
    others = [_metric_spec_v1(m) for m in metrics if not _is_cpu_utilization(m)]
    if others:
        carried[METRICS] = _go_json(others)
    if current:
        carried[CURRENT_METRICS] = _go_json([_metric_status_v1(m) for m in current])
    if isinstance(spec_in.get("behavior"), dict):
        carried[BEHAVIOR] = _go_json(_behavior_go(spec_in["behavior"]))
    conditions = _list(status_in.get("conditions"))
    if conditions:
        carried[CONDITIONS] = _go_json([_condition_v1(c) for c in conditions])
    if carried:
        meta["annotations"] = {**_obj(meta.get("annotations")), **carried}
    return {
        "kind": stored.get("kind", "HorizontalPodAutoscaler"),
        "apiVersion": API_VERSION,
        "metadata": meta,
        "spec": spec,
        "status": status,
    }


# ----------------------------------------------------------------- v1 -> v2 (writes)


def _identifier_v2(source: dict[str, Any], selector_key: str) -> dict[str, Any]:
    out = {"name": source.get("metricName", "")}
    _put(out, "selector", source.get(selector_key))
    return out


def _metric_spec_v2(metric: dict[str, Any]) -> dict[str, Any]:
    """``Convert_v1_MetricSpec_To_autoscaling_MetricSpec``."""
    out: dict[str, Any] = {"type": metric.get("type", "")}
    if (source := metric.get("object")) is not None:
        source = _obj(source)
        average = source.get("averageValue")
        target = {"type": "Value" if average is None else "AverageValue"}
        target["value"] = source.get("targetValue", "0")  # a non-pointer: always set
        _put(target, "averageValue", average)
        out["object"] = {
            "describedObject": _reference(source.get("target")),
            "metric": _identifier_v2(source, "selector"),
            "target": target,
        }
    if (source := metric.get("pods")) is not None:
        source = _obj(source)
        out["pods"] = {
            "metric": _identifier_v2(source, "selector"),
            "target": {
                "type": "AverageValue",
                "averageValue": source.get("targetAverageValue", "0"),
            },
        }
    for key in ("resource", "containerResource"):
        if (source := metric.get(key)) is not None:
            source = _obj(source)
            utilization = source.get("targetAverageUtilization")
            target = {"type": "AverageValue" if utilization is None else "Utilization"}
            _put(target, "averageUtilization", utilization)
            _put(target, "averageValue", source.get("targetAverageValue"))
            v2: dict[str, Any] = {"name": source.get("name", "")}
            if key == "containerResource":
                v2["container"] = source.get("container", "")
            v2["target"] = target
            out[key] = v2
    if (source := metric.get("external")) is not None:
        source = _obj(source)
        value = source.get("targetValue")
        target = {"type": "AverageValue" if value is None else "Value"}
        _put(target, "value", value)
        _put(target, "averageValue", source.get("targetAverageValue"))
        out["external"] = {"metric": _identifier_v2(source, "metricSelector"), "target": target}
    return out


def _metric_status_v2(metric: dict[str, Any]) -> dict[str, Any]:
    """``Convert_v1_MetricStatus_To_autoscaling_MetricStatus``."""
    out: dict[str, Any] = {"type": metric.get("type", "")}
    if (source := metric.get("object")) is not None:
        source = _obj(source)
        current = {"value": source.get("currentValue", "0")}
        _put(current, "averageValue", source.get("averageValue"))
        out["object"] = {
            "metric": _identifier_v2(source, "selector"),
            "current": current,
            "describedObject": _reference(source.get("target")),
        }
    if (source := metric.get("pods")) is not None:
        source = _obj(source)
        out["pods"] = {
            "metric": _identifier_v2(source, "selector"),
            "current": {"averageValue": source.get("currentAverageValue", "0")},
        }
    for key in ("resource", "containerResource"):
        if (source := metric.get(key)) is not None:
            source = _obj(source)
            current = {"averageValue": source.get("currentAverageValue", "0")}
            _put(current, "averageUtilization", source.get("currentAverageUtilization"))
            v2: dict[str, Any] = {"name": source.get("name", "")}
            if key == "containerResource":
                v2["container"] = source.get("container", "")
            v2["current"] = current
            out[key] = v2
    if (source := metric.get("external")) is not None:
        source = _obj(source)
        current = {"value": source.get("currentValue", "0")}
        _put(current, "averageValue", source.get("currentAverageValue"))
        out["external"] = {"metric": _identifier_v2(source, "metricSelector"), "current": current}
    return out


def _field(obj: dict[str, Any], name: str) -> Any:
    """A key as ``encoding/json`` matches it: exactly, else ignoring case."""
    if name in obj:
        return obj[name]
    lowered = name.lower()
    return next((v for k, v in obj.items() if k.lower() == lowered), None)


def _behavior_v2(raw: Any) -> dict[str, Any] | None:
    """The behavior annotation read back; None when it does not decode or is empty."""
    if not isinstance(raw, str):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    out: dict[str, Any] = {}
    for key in ("scaleUp", "scaleDown"):
        rules = _field(value, key)
        if not isinstance(rules, dict):
            continue
        v2: dict[str, Any] = {}
        _put(v2, "stabilizationWindowSeconds", _field(rules, "StabilizationWindowSeconds"))
        _put(v2, "selectPolicy", _field(rules, "SelectPolicy"))
        policies = _field(rules, "Policies")
        if isinstance(policies, list):
            v2["policies"] = [
                {
                    "type": _field(_obj(p), "Type") or "",
                    "value": _field(_obj(p), "Value") or 0,
                    "periodSeconds": _field(_obj(p), "PeriodSeconds") or 0,
                }
                for p in policies
            ]
        out[key] = v2
    return out or None


def from_v1(obj: Obj) -> Obj:
    """``Convert_v1_HorizontalPodAutoscaler_To_autoscaling_HorizontalPodAutoscaler``: the
    stored (v2) object a v1 body stands for (decoded already: :data:`SCHEMA`)."""
    meta = copy.deepcopy(_obj(obj.get("metadata")))
    annotations = _obj(meta.get("annotations"))
    spec_in, status_in = _obj(obj.get("spec")), _obj(obj.get("status"))
    spec: dict[str, Any] = {"scaleTargetRef": _reference(spec_in.get("scaleTargetRef"))}
    spec["minReplicas"] = spec_in.get("minReplicas", 1)  # the v1 defaulter
    spec["maxReplicas"] = spec_in.get("maxReplicas", 0)
    metrics: list[dict[str, Any]] = []
    if spec_in.get("targetCPUUtilizationPercentage") is not None:
        target = {"type": "Utilization"}
        target["averageUtilization"] = spec_in["targetCPUUtilizationPercentage"]
        metrics.append({"type": "Resource", "resource": {"name": "cpu", "target": target}})
    others = _decoded_list(annotations, METRICS)
    if others is not None:  # the other metrics first, the CPU target (if any) last
        metrics = [_metric_spec_v2(m) for m in others] + metrics
    if not metrics:  # v1's implicit default, made explicit
        target = {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION}
        metrics.append({"type": "Resource", "resource": {"name": "cpu", "target": target}})
    spec["metrics"] = metrics
    behavior = _behavior_v2(annotations.get(BEHAVIOR))
    if behavior is not None:
        spec["behavior"] = behavior
    status: dict[str, Any] = {}
    _put(status, "observedGeneration", status_in.get("observedGeneration"))
    _put(status, "lastScaleTime", status_in.get("lastScaleTime"))
    if status_in.get("currentReplicas"):  # omitempty in v2
        status["currentReplicas"] = status_in["currentReplicas"]
    status["desiredReplicas"] = status_in.get("desiredReplicas", 0)
    current = _decoded_list(annotations, CURRENT_METRICS)
    if current is not None:  # "the ones here have more information"
        status["currentMetrics"] = [_metric_status_v2(m) for m in current]
    elif status_in.get("currentCPUUtilizationPercentage") is not None:
        utilization = status_in["currentCPUUtilizationPercentage"]
        resource = {"name": "cpu", "current": {"averageUtilization": utilization}}
        status["currentMetrics"] = [{"type": "Resource", "resource": resource}]
    conditions = _decoded_list(annotations, CONDITIONS)
    if conditions is not None:
        status["conditions"] = [
            {k: v for k, v in c.items() if v is not None and k in _CONDITION_KEYS}
            for c in conditions
        ]
    drop_round_trip(meta)
    return {
        "kind": obj.get("kind") or "HorizontalPodAutoscaler",
        "apiVersion": STORED_API_VERSION,
        "metadata": meta,
        "spec": spec,
        "status": status,
    }


class HorizontalPodAutoscalerV1(Conversion):
    """autoscaling/v1 served beside the stored autoscaling/v2 (``resources.py``)."""

    schema = SCHEMA

    def to_version(self, stored: Obj) -> Obj:
        return to_v1(stored)

    def from_version(self, obj: Obj) -> Obj:
        return from_v1(obj)
