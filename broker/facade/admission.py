"""Admission of an object as kube-apiserver does it: decode, default, validate — the
pieces the kinds' strategies (``kinds/``) are made of.

1. Decoding (:func:`decode_as` with a :class:`Struct`, the Go type as far as the facade
   reads it; a kind's is its strategy's ``schema``): every field the facade or the broker
   reads has the JSON type of its Go field (a wrong type is the 400 ``Pod in version "v1"
   cannot be handled as a Pod: json: cannot unmarshal string into Go struct field
   ObjectMeta.metadata.labels of type map[string]string``); every resource quantity parses
   by the real grammar (broker.k8s.quantity) and is rewritten in its canonical form,
   core/v1 ResourceLists rounded up to a milli unit as the v1 defaulter does (``0.188`` →
   ``"188m"``); a known field sent as ``null`` is dropped (Go decodes it as the zero
   value, which is not written back). Fields unknown here are kept as sent.
2. Validation helpers shared by several kinds (the defaults and the rest of each kind's
   validation are its strategy's): container resources (names, non-negative quantities,
   requests within limits), pod specs, pod templates, label selectors. Errors are
   ``validation.FieldError`` lists, raised by the strategy as the 422 ``Invalid``
   Status with every cause and its field path.

Pure functions over JSON dicts (decoding rewrites quantities in place).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Any

from broker.k8s import gotime, quantity

from . import validation as v

MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1

# --- the Go types, as far as the facade reads them ----------------------------------------


class _Type:
    go = "?"

    def zero(self) -> Any:
        """What Go writes back for this type's zero value (None: nothing)."""
        return None

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
    def __init__(self, go: str, ok: Callable[[Any], bool], zero: Any = None) -> None:
        self.go = go
        self._ok = ok
        self._zero = zero

    def zero(self) -> Any:
        return self._zero

    def check(self, value: Any, path: str, struct: str) -> None:
        if value is not None and not self._ok(value):
            raise _mismatch(value, path, struct, self.go)


def _int_in(bound: int) -> Callable[[Any], bool]:
    return lambda x: isinstance(x, int) and not isinstance(x, bool) and -bound - 1 <= x <= bound


STR = _Scalar("string", lambda x: isinstance(x, str), "")
BOOL = _Scalar("bool", lambda x: isinstance(x, bool), False)
INT32 = _Scalar("int32", _int_in(MAX_INT32), 0)
INT64 = _Scalar("int64", _int_in(MAX_INT64), 0)
ANY_OBJ = _Scalar("map[string]interface {}", lambda x: isinstance(x, dict))


_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})\Z")


class _Time(_Type):
    """``metav1.Time``: an RFC 3339 date and time (or null)."""

    go = "metav1.Time"

    def check(self, value: Any, path: str, struct: str) -> None:
        if value is None:
            return
        if not isinstance(value, str):
            raise _mismatch(value, path, struct, "string")
        try:
            ok = _RFC3339.match(value) is not None and bool(
                datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
            )
        except ValueError:
            ok = False
        if not ok:
            raise DecodeError(
                f'parsing time "{value}" as "2006-01-02T15:04:05Z07:00": cannot parse '
                f'"{value}" as an RFC 3339 time (Go struct field {struct}.{path})'
            )


TIME = _Time()


class _Map(_Type):
    """``map[string]string``; a subclass checks each value further (``check_item``)."""

    go = "map[string]string"
    item_go = "string"  # the Go type a value that is not a JSON string fails to decode into

    def check(self, value: Any, path: str, struct: str) -> None:
        if value is None:
            return
        if not isinstance(value, dict):
            raise _mismatch(value, path, struct, self.go)
        for item in value.values():
            if not isinstance(item, str):
                raise _mismatch(item, path, struct, self.item_go)
            self.check_item(item)

    def check_item(self, item: str) -> None:
        """A value that is a string but not one the Go type takes: raise DecodeError."""


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


class ListOf(_Type):
    def __init__(self, item: _Type) -> None:
        self.item = item
        self.go = "[]" + item.go

    def check(self, value: Any, path: str, struct: str) -> None:
        if value is None:
            return
        if not isinstance(value, list):
            raise _mismatch(value, path, struct, self.go)
        for i, item in enumerate(value):
            if item is None and self.item.zero() is not None:
                value[i] = item = self.item.zero()  # Go decodes a null item as the zero
            self.item.check(item, path, struct)


class _Quantity(_Type):
    """``resource.Quantity`` outside a ResourceList: it must parse (a string or a
    number); kept as sent."""

    go = "resource.Quantity"

    def check(self, value: Any, path: str, struct: str) -> None:
        if value is None:
            return
        try:
            quantity.parse(value)
        except quantity.QuantityError as exc:
            raise DecodeError(str(exc)) from None


class _MicroTime(_Type):
    """``metav1.MicroTime``: RFC 3339 with exactly six fractional digits (400 with Go's
    ``time.Parse`` error otherwise), rewritten as kube-apiserver writes it back (UTC,
    ``…T11:00:00.000000Z``). One leniency, on purpose: a value with no fraction at all
    is taken as ``.000000`` — the official client's ``LeaseLock`` sends
    ``datetime.isoformat()``, which leaves the fraction out at a whole second, which a
    simulated clock reaches far more often than a real one (docs/compatibility.md)."""

    go = "v1.MicroTime"
    canonicalises = True

    def check(self, value: Any, path: str, struct: str) -> None:
        if value is not None and not isinstance(value, str):
            raise DecodeError(
                f"json: cannot unmarshal {_json_kind(value)} into Go value of type string"
            )

    def canonical(self, value: str) -> str:
        try:
            return gotime.format_micro_time(gotime.parse_micro_time(value, whole_seconds=True))
        except gotime.GoTimeError as exc:
            raise DecodeError(str(exc)) from None


MICRO_TIME = _MicroTime()


class Struct(_Type):
    """A Go struct: its fields' types (those the facade reads); ``package`` names it in
    messages (``v1.PodSpec``, ``v2.MetricTarget``)."""

    def __init__(
        self,
        name: str,
        fields: dict[str, _Type],
        package: str = "v1",
        *,
        written: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.go = f"{package}.{name}"
        self.fields = fields
        # the fields without ``omitempty``: Go writes them back even when zero (absent or
        # null in the request), so every client reads them (the official client's models
        # require them: a stored ``{"type": null}`` metric failed its deserialisation)
        self.written = written

    def zero(self) -> Any:
        return {}

    def check(self, value: Any, path: str, struct: str) -> None:
        if value is None:
            return
        if not isinstance(value, dict):
            raise _mismatch(value, path, struct, self.go)
        for key in self.written:
            if value.get(key) is None:
                value[key] = self.fields[key].zero()
        for key, kind in self.fields.items():
            if key in value:
                if value[key] is None:  # Go decodes null as the zero value: absent
                    del value[key]
                    continue
                where = f"{path}.{key}" if path else key
                kind.check(value[key], where, self.name)
                if kind is QUANTITY:  # as Go writes a Quantity back: its canonical text
                    value[key] = quantity.parse(value[key]).text
                elif getattr(kind, "canonicalises", False):
                    value[key] = kind.canonical(value[key])


MAP = _Map()
RESOURCES = _ResourceList()
QUANTITY = _Quantity()

META = Struct(
    "ObjectMeta",
    {
        "name": STR,
        "generateName": STR,
        "namespace": STR,
        "uid": STR,
        "resourceVersion": STR,
        "generation": INT64,
        "creationTimestamp": TIME,
        "deletionTimestamp": TIME,
        "deletionGracePeriodSeconds": INT64,
        "labels": MAP,
        "annotations": MAP,
        "finalizers": ListOf(STR),
        "ownerReferences": ListOf(
            Struct(
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
CONTAINER = Struct(
    "Container",
    {
        "name": STR,
        "image": STR,
        "command": ListOf(STR),
        "args": ListOf(STR),
        "workingDir": STR,
        "imagePullPolicy": STR,
        "resources": Struct("ResourceRequirements", {"limits": RESOURCES, "requests": RESOURCES}),
        "env": ListOf(Struct("EnvVar", {"name": STR, "value": STR})),
        "ports": ListOf(Struct("ContainerPort", {"containerPort": INT32, "name": STR})),
    },
)
TOLERATION = Struct(
    "Toleration",
    {"key": STR, "operator": STR, "value": STR, "effect": STR, "tolerationSeconds": INT64},
)
POD_SPEC = Struct(
    "PodSpec",
    {
        "containers": ListOf(CONTAINER),
        "initContainers": ListOf(CONTAINER),
        "restartPolicy": STR,
        "terminationGracePeriodSeconds": INT64,
        "activeDeadlineSeconds": INT64,
        "nodeSelector": MAP,
        "serviceAccountName": STR,
        "nodeName": STR,
        "schedulerName": STR,
        "tolerations": ListOf(TOLERATION),
        "priorityClassName": STR,
        "priority": INT32,
        "preemptionPolicy": STR,
        "affinity": ANY_OBJ,
        "overhead": RESOURCES,
    },
)
CONDITION = Struct("Condition", {"type": STR, "status": STR, "reason": STR, "message": STR})
TEMPLATE = Struct("PodTemplateSpec", {"metadata": META, "spec": POD_SPEC})
SELECTOR = Struct(
    "LabelSelector",
    {
        "matchLabels": MAP,
        "matchExpressions": ListOf(
            Struct("LabelSelectorRequirement", {"key": STR, "operator": STR, "values": ListOf(STR)})
        ),
    },
)
DELETE_OPTIONS = Struct(
    "DeleteOptions",
    {
        "gracePeriodSeconds": INT64,
        "propagationPolicy": STR,
        "preconditions": Struct("Preconditions", {"uid": STR, "resourceVersion": STR}),
    },
)
EVICTION = Struct("Eviction", {"metadata": META, "deleteOptions": DELETE_OPTIONS})


def decode_as(schema: Struct, kind: str, api_version: str, obj: Any) -> None:
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


def quantity_errors(name: str, text: str, path: str) -> list[v.FieldError]:
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
            errs += quantity_errors(name, text, where)
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
        errs += quantity_errors(name, text, f"{path}.overhead[{name}]")
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


def template_errors(template: dict[str, Any] | None, path: str) -> list[v.FieldError]:
    if not isinstance(template, dict):
        return []
    meta = template.get("metadata") or {}
    errs = v.validate_labels(meta.get("labels"), f"{path}.metadata.labels")
    errs += v.validate_annotations(meta.get("annotations"), f"{path}.metadata.annotations")
    errs += validate_pod_spec(template.get("spec") or {}, f"{path}.spec")
    return errs
