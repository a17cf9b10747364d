"""Admission of an object as kube-apiserver does it: decode, default, validate.

1. ``decode(rt, obj)`` — what decoding the body into the Go type checks: every field the
   facade or the broker reads has the JSON type of its Go field (a wrong type is the
   400 ``Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string
   into Go struct field ObjectMeta.metadata.labels of type map[string]string``); every
   resource quantity parses by the real grammar (broker.k8s.quantity) and is rewritten in
   its canonical form, core/v1 ResourceLists rounded up to a milli unit as the v1
   defaulter does (``0.188`` → ``"188m"``); a known field sent as ``null`` is dropped
   (Go decodes it as the zero value, which is not written back). Fields unknown here are
   kept as sent.
2. ``validate(rt, obj)`` — the API server's validation of what the facade models, after
   the defaults: object metadata (names, namespace, labels, annotations), container
   resources (names, non-negative quantities, requests within limits), node capacity,
   node selectors, pod templates of workload controllers, label selectors. Errors are
   the 422 ``Invalid`` Status with every cause and its field path.

Pure functions over JSON dicts (``decode`` rewrites quantities in place).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.k8s import quantity

from . import validation as v
from .resources import ResourceType

MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1

# --- the Go types, as far as the facade reads them ----------------------------------------


class _Type:
    go = "?"

    def check(self, value: Any, path: str, struct: str) -> None:
        raise NotImplementedError


class DecodeError(Exception):
    """A body that does not decode into its Go type; ``str()`` is the Go error."""


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _mismatch(value: Any, path: str, struct: str, go: str) -> DecodeError:
    kind = _json_kind(value)
    if kind == "number" and (isinstance(value, float) or go.startswith("int")):
        kind = f"number {value}"
    where = f"Go struct field {struct}.{path}" if struct else "Go value"
    return DecodeError(f"json: cannot unmarshal {kind} into {where} of type {go}")


class _Scalar(_Type):
    def __init__(self, go: str, ok: Callable[[Any], bool]) -> None:
        self.go = go
        self._ok = ok

    def check(self, value: Any, path: str, struct: str) -> None:
        if value is not None and not self._ok(value):
            raise _mismatch(value, path, struct, self.go)


def _int_in(bound: int) -> Callable[[Any], bool]:
    return lambda x: isinstance(x, int) and not isinstance(x, bool) and -bound - 1 <= x <= bound


STR = _Scalar("string", lambda x: isinstance(x, str))
BOOL = _Scalar("bool", lambda x: isinstance(x, bool))
INT32 = _Scalar("int32", _int_in(MAX_INT32))
INT64 = _Scalar("int64", _int_in(MAX_INT64))
ANY_OBJ = _Scalar("map[string]interface {}", lambda x: isinstance(x, dict))


class _Map(_Type):
    """``map[string]string``."""

    go = "map[string]string"

    def check(self, value: Any, path: str, struct: str) -> None:
        if value is None:
            return
        if not isinstance(value, dict):
            raise _mismatch(value, path, struct, self.go)
        for item in value.values():
            if not isinstance(item, str):
                raise _mismatch(item, path, struct, "string")


class _ResourceList(_Type):
    """``v1.ResourceList``: quantities, canonicalised in place (rounded up to milli)."""

    go = "v1.ResourceList"

    def check(self, value: Any, path: str, struct: str) -> None:
        if value is None:
            return
        if not isinstance(value, dict):
            raise _mismatch(value, path, struct, self.go)
        for name, raw in value.items():
            try:
                q = quantity.parse(0 if raw is None else raw)
            except quantity.QuantityError as exc:
                raise DecodeError(str(exc)) from None
            value[name] = quantity.round_up(q, -3).text


class _List(_Type):
    def __init__(self, item: _Type) -> None:
        self.item = item
        self.go = "[]" + item.go

    def check(self, value: Any, path: str, struct: str) -> None:
        if value is None:
            return
        if not isinstance(value, list):
            raise _mismatch(value, path, struct, self.go)
        for item in value:
            self.item.check(item, path, struct)


class _Struct(_Type):
    def __init__(self, name: str, fields: dict[str, _Type]) -> None:
        self.name = name
        self.go = f"v1.{name}"
        self.fields = fields

    def check(self, value: Any, path: str, struct: str) -> None:
        if value is None:
            return
        if not isinstance(value, dict):
            raise _mismatch(value, path, struct, self.go)
        for key, kind in self.fields.items():
            if key in value:
                if value[key] is None:  # Go decodes null as the zero value: absent
                    del value[key]
                    continue
                kind.check(value[key], f"{path}.{key}" if path else key, self.name)


MAP = _Map()
RESOURCES = _ResourceList()

META = _Struct(
    "ObjectMeta",
    {
        "name": STR,
        "generateName": STR,
        "namespace": STR,
        "uid": STR,
        "resourceVersion": STR,
        "generation": INT64,
        "creationTimestamp": STR,
        "deletionTimestamp": STR,
        "deletionGracePeriodSeconds": INT64,
        "labels": MAP,
        "annotations": MAP,
        "finalizers": _List(STR),
        "ownerReferences": _List(
            _Struct(
                "OwnerReference",
                {
                    "apiVersion": STR,
                    "kind": STR,
                    "name": STR,
                    "uid": STR,
                    "controller": BOOL,
                    "blockOwnerDeletion": BOOL,
                },
            )
        ),
    },
)
CONTAINER = _Struct(
    "Container",
    {
        "name": STR,
        "image": STR,
        "command": _List(STR),
        "args": _List(STR),
        "workingDir": STR,
        "imagePullPolicy": STR,
        "resources": _Struct("ResourceRequirements", {"limits": RESOURCES, "requests": RESOURCES}),
        "env": _List(_Struct("EnvVar", {"name": STR, "value": STR})),
        "ports": _List(_Struct("ContainerPort", {"containerPort": INT32, "name": STR})),
    },
)
TOLERATION = _Struct(
    "Toleration",
    {"key": STR, "operator": STR, "value": STR, "effect": STR, "tolerationSeconds": INT64},
)
POD_SPEC = _Struct(
    "PodSpec",
    {
        "containers": _List(CONTAINER),
        "initContainers": _List(CONTAINER),
        "restartPolicy": STR,
        "terminationGracePeriodSeconds": INT64,
        "activeDeadlineSeconds": INT64,
        "nodeSelector": MAP,
        "serviceAccountName": STR,
        "nodeName": STR,
        "schedulerName": STR,
        "tolerations": _List(TOLERATION),
        "priorityClassName": STR,
        "priority": INT32,
        "preemptionPolicy": STR,
        "affinity": ANY_OBJ,
        "overhead": RESOURCES,
    },
)
CONDITION = _Struct("Condition", {"type": STR, "status": STR, "reason": STR, "message": STR})
POD = _Struct(
    "Pod",
    {
        "metadata": META,
        "spec": POD_SPEC,
        "status": _Struct(
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
                "conditions": _List(CONDITION),
            },
        ),
    },
)
NODE = _Struct(
    "Node",
    {
        "metadata": META,
        "spec": _Struct(
            "NodeSpec",
            {
                "podCIDR": STR,
                "unschedulable": BOOL,
                "providerID": STR,
                "taints": _List(_Struct("Taint", {"key": STR, "value": STR, "effect": STR})),
            },
        ),
        "status": _Struct(
            "NodeStatus",
            {
                "capacity": RESOURCES,
                "allocatable": RESOURCES,
                "phase": STR,
                "conditions": _List(CONDITION),
            },
        ),
    },
)
TEMPLATE = _Struct("PodTemplateSpec", {"metadata": META, "spec": POD_SPEC})
SELECTOR = _Struct(
    "LabelSelector",
    {
        "matchLabels": MAP,
        "matchExpressions": _List(
            _Struct("LabelSelectorRequirement", {"key": STR, "operator": STR, "values": _List(STR)})
        ),
    },
)
JOB_SPEC = _Struct(
    "JobSpec",
    {
        "parallelism": INT32,
        "completions": INT32,
        "activeDeadlineSeconds": INT64,
        "backoffLimit": INT32,
        "selector": SELECTOR,
        "manualSelector": BOOL,
        "template": TEMPLATE,
        "ttlSecondsAfterFinished": INT32,
        "suspend": BOOL,
        "completionMode": STR,
    },
)


def _workload(kind: str) -> _Struct:
    return _Struct(
        kind,
        {
            "metadata": META,
            "spec": _Struct(
                f"{kind}Spec",
                {
                    "replicas": INT32,
                    "selector": SELECTOR,
                    "template": TEMPLATE,
                    "minReadySeconds": INT32,
                },
            ),
        },
    )


SCHEMAS: dict[str, _Struct] = {
    "pods": POD,
    "nodes": NODE,
    "namespaces": _Struct(
        "Namespace",
        {"metadata": META, "spec": _Struct("NamespaceSpec", {"finalizers": _List(STR)})},
    ),
    "jobs.batch": _Struct("Job", {"metadata": META, "spec": JOB_SPEC}),
    "cronjobs.batch": _Struct(
        "CronJob",
        {
            "metadata": META,
            "spec": _Struct(
                "CronJobSpec",
                {
                    "schedule": STR,
                    "suspend": BOOL,
                    "jobTemplate": _Struct("JobTemplateSpec", {"metadata": META, "spec": JOB_SPEC}),
                },
            ),
        },
    ),
    "deployments.apps": _workload("Deployment"),
    "replicasets.apps": _workload("ReplicaSet"),
    "statefulsets.apps": _workload("StatefulSet"),
    "daemonsets.apps": _workload("DaemonSet"),
    "bindings": _Struct(
        "Binding",
        {
            "metadata": META,
            "target": _Struct(
                "ObjectReference",
                {"kind": STR, "name": STR, "namespace": STR, "uid": STR, "apiVersion": STR},
            ),
        },
    ),
    "priorityclasses.scheduling.k8s.io": _Struct(
        "PriorityClass",
        {
            "metadata": META,
            "value": INT32,
            "globalDefault": BOOL,
            "preemptionPolicy": STR,
            "description": STR,
        },
    ),
}


DELETE_OPTIONS = _Struct(
    "DeleteOptions",
    {
        "gracePeriodSeconds": INT64,
        "propagationPolicy": STR,
        "preconditions": _Struct("Preconditions", {"uid": STR, "resourceVersion": STR}),
    },
)
EVICTION = _Struct("Eviction", {"metadata": META, "deleteOptions": DELETE_OPTIONS})


def decode(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Check the JSON types of ``obj`` against ``rt``'s Go type (what the facade reads)
    and canonicalise its quantities in place; the 400 of the real decoder otherwise."""
    schema = SCHEMAS.get(rt.key) or _Struct(rt.kind, {"metadata": META})
    decode_as(schema, rt.kind, rt.api_version, obj)


def decode_as(schema: _Struct, kind: str, api_version: str, obj: Any) -> None:
    try:
        schema.check(obj, "", "")
    except DecodeError as exc:
        raise v.cannot_handle(kind, api_version, str(exc)) from None


# --- validation (after defaults) ----------------------------------------------------------

_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _is_standard_container_resource(name: str) -> bool:
    return name in _CONTAINER_RESOURCES or name.startswith("hugepages-")


def _resource_name_errors(name: str, path: str) -> list[v.FieldError]:
    """``validateContainerResourceName``: a qualified name; without a domain it must be a
    standard container resource; extended resources are whole numbers (checked later)."""
    errs = [v.invalid_value(path, name, m) for m in v.is_qualified_name(name)]
    if not errs and "/" not in name and not _is_standard_container_resource(name):
        errs.append(v.invalid_value(path, name, "must be a standard resource for containers"))
    return errs


def _quantity_errors(name: str, text: str, path: str) -> list[v.FieldError]:
    q = quantity.parse(text)
    errs = []
    if q.sign < 0:
        errs.append(v.invalid_value(path, text, "must be greater than or equal to 0"))
    if "/" in name and q.nano % 10**9:
        errs.append(v.invalid_value(path, text, "must be an integer"))
    return errs


def validate_resource_requirements(res: dict[str, Any] | None, path: str) -> list[v.FieldError]:
    """``ValidateResourceRequirements`` (after ``decode``: quantities are canonical)."""
    res = res or {}
    limits = res.get("limits") or {}
    requests = res.get("requests") or {}
    errs: list[v.FieldError] = []
    for section, values in (("limits", limits), ("requests", requests)):
        for name, text in values.items():
            where = f"{path}.{section}[{name}]"
            errs += _resource_name_errors(name, where)
            errs += _quantity_errors(name, text, where)
    for name, text in requests.items():
        if name in limits:
            asked, cap = quantity.parse(text), quantity.parse(limits[name])
            if asked.nano > cap.nano:
                errs.append(
                    v.invalid_value(
                        f"{path}.requests[{name}]",
                        text,
                        f"must be less than or equal to {name} limit of {limits[name]}",
                    )
                )
    return errs


def validate_pod_spec(spec: dict[str, Any], path: str) -> list[v.FieldError]:
    errs: list[v.FieldError] = []
    for section in ("initContainers", "containers"):
        seen: set[str] = set()
        for i, c in enumerate(spec.get(section) or []):
            if not isinstance(c, dict):
                continue
            where = f"{path}.{section}[{i}]"
            name = c.get("name") or ""
            if not name:
                errs.append(v.required(f"{where}.name"))
            else:
                errs += [
                    v.invalid_value(f"{where}.name", name, m) for m in v.is_dns1123_label(name)
                ]
                if name in seen:
                    errs.append(v.FieldError("Duplicate value", f"{where}.name", name))
                seen.add(name)
            errs += validate_resource_requirements(c.get("resources"), f"{where}.resources")
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in _RESTART_POLICIES:
        errs.append(v.not_supported(f"{path}.restartPolicy", policy, _RESTART_POLICIES))
    errs += v.validate_labels(spec.get("nodeSelector"), f"{path}.nodeSelector")
    for name, text in (spec.get("overhead") or {}).items():
        errs += _quantity_errors(name, text, f"{path}.overhead[{name}]")
    return errs


def validate_label_selector(selector: dict[str, Any] | None, path: str) -> list[v.FieldError]:
    if not selector:
        return []
    errs = v.validate_labels(selector.get("matchLabels"), f"{path}.matchLabels")
    for i, req in enumerate(selector.get("matchExpressions") or []):
        where = f"{path}.matchExpressions[{i}]"
        if not isinstance(req, dict):
            continue
        key, op = req.get("key") or "", req.get("operator")
        errs += [v.invalid_value(f"{where}.key", key, m) for m in v.is_qualified_name(key)]
        if op not in _SELECTOR_OPERATORS:
            errs.append(v.not_supported(f"{where}.operator", op, _SELECTOR_OPERATORS))
    return errs


def _template_errors(template: dict[str, Any] | None, path: str) -> list[v.FieldError]:
    if not isinstance(template, dict):
        return []
    meta = template.get("metadata") or {}
    errs = v.validate_labels(meta.get("labels"), f"{path}.metadata.labels")
    errs += v.validate_annotations(meta.get("annotations"), f"{path}.metadata.annotations")
    errs += validate_pod_spec(template.get("spec") or {}, f"{path}.spec")
    return errs


def validate(rt: ResourceType, obj: dict[str, Any]) -> None:
    """The API server's validation of ``obj`` (decoded and defaulted): 422 Invalid."""
    meta = obj.get("metadata") or {}
    errs = v.validate_object_meta(meta, rt.kind, namespaced=rt.namespaced)
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    if rt.key == "pods":
        errs += validate_pod_spec(spec, "spec")
    elif rt.key == "nodes":
        status = obj.get("status") or {}
        for section in ("capacity", "allocatable"):
            for name, text in (status.get(section) or {}).items():
                errs += _quantity_errors(name, text, f"status.{section}[{name}]")
    elif rt.group in ("apps", "batch"):
        errs += validate_label_selector(spec.get("selector"), "spec.selector")
        errs += _template_errors(spec.get("template"), "spec.template")
        job_template = spec.get("jobTemplate")
        if isinstance(job_template, dict) and isinstance(job_template.get("spec"), dict):
            errs += _template_errors(
                job_template["spec"].get("template"), "spec.jobTemplate.spec.template"
            )
    if errs:
        raise v.invalid(rt.kind, meta.get("name") or "", errs, rt.group)
