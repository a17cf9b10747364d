"""Checks of the Kubernetes parts of a workload's pods, by the API server's rules, before
the simulation starts: a workload's ``pod`` (a partial Pod manifest), its tolerations,
node selector, affinity, topology spread constraints, containers and their resources.

Every check raises :class:`broker.cluster.node_shape.ShapeError` naming the field (relative to
the job or profile: ``pod.spec.affinity.nodeAffinity…``) and, where the API server has
one, with its message. What is checked: the field names of a PodSpec and a Container
(an unknown field is refused, as ``kubectl apply --validate=strict`` does: a typo would
otherwise be dropped silently), the JSON type of every field, and the content rules of
the fields the cluster model and schedulers act on (scheduling, resources, ports). The
content of the rest (probes, volumes, env…) passes through as given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from broker.cluster.node_shape import TAINT_EFFECTS
from broker.k8s import resource_names as rn
from broker.k8s.quantity import Quantity, parse
from broker.k8s.shape_rules import (
    ShapeError,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_value,
    is_qualified_name,
)

STR, INT, BOOL, OBJ, LIST = "string", "integer", "boolean", "object", "array"

POD_SPEC_FIELDS: dict[str, str] = {
    "activeDeadlineSeconds": INT, "affinity": OBJ, "automountServiceAccountToken": BOOL,
    "containers": LIST, "dnsConfig": OBJ, "dnsPolicy": STR, "enableServiceLinks": BOOL,
    "ephemeralContainers": LIST, "hostAliases": LIST, "hostIPC": BOOL, "hostNetwork": BOOL,
    "hostPID": BOOL, "hostUsers": BOOL, "hostname": STR, "imagePullSecrets": LIST,
    "initContainers": LIST, "nodeName": STR, "nodeSelector": OBJ, "os": OBJ, "overhead": OBJ,
    "preemptionPolicy": STR, "priority": INT, "priorityClassName": STR,
    "readinessGates": LIST, "resourceClaims": LIST, "restartPolicy": STR,
    "runtimeClassName": STR, "schedulerName": STR, "schedulingGates": LIST,
    "securityContext": OBJ, "serviceAccount": STR, "serviceAccountName": STR,
    "setHostnameAsFQDN": BOOL, "shareProcessNamespace": BOOL, "subdomain": STR,
    "terminationGracePeriodSeconds": INT, "tolerations": LIST,
    "topologySpreadConstraints": LIST, "volumes": LIST,
}  # fmt: skip
CONTAINER_FIELDS: dict[str, str] = {
    "args": LIST, "command": LIST, "env": LIST, "envFrom": LIST, "image": STR,
    "imagePullPolicy": STR, "lifecycle": OBJ, "livenessProbe": OBJ, "name": STR,
    "ports": LIST, "readinessProbe": OBJ, "resizePolicy": LIST, "resources": OBJ,
    "restartPolicy": STR, "securityContext": OBJ, "startupProbe": OBJ, "stdin": BOOL,
    "stdinOnce": BOOL, "terminationMessagePath": STR, "terminationMessagePolicy": STR,
    "tty": BOOL, "volumeDevices": LIST, "volumeMounts": LIST, "workingDir": STR,
}  # fmt: skip
METADATA_FIELDS = ("labels", "annotations")
TOLERATION_OPERATORS = ("Equal", "Exists")
NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
ANNOTATIONS_MAX_BYTES = 256 * 1024

_TYPES: dict[str, Callable[[Any], bool]] = {
    STR: lambda v: isinstance(v, str),
    INT: lambda v: isinstance(v, int) and not isinstance(v, bool),
    BOOL: lambda v: isinstance(v, bool),
    OBJ: lambda v: isinstance(v, dict),
    LIST: lambda v: isinstance(v, list),
}


def fail(field: str, message: str) -> ShapeError:
    return ShapeError(field, message)


def expect(value: Any, kind: str, field: str) -> Any:
    if not _TYPES[kind](value):
        raise fail(field, f"expected {'an' if kind[0] in 'aeiou' else 'a'} {kind}, got {value!r}")
    return value


def _problems(field: str, value: str, problems: list[str]) -> None:
    if problems:
        raise fail(field, f"Invalid value: {value!r}: " + "; ".join(problems))


# --------------------------------------------------------------------------- metadata


def check_labels(value: Any, field: str) -> dict[str, str]:
    """A label map (labels, nodeSelector, matchLabels): string keys and values by the rules."""
    expect(value, OBJ, field)
    for key, label in value.items():
        _problems(field, key, is_qualified_name(key))
        if not isinstance(label, str):
            raise fail(f"{field}.{key}", f"expected a string, got {label!r}")
        _problems(f"{field}.{key}", label, is_label_value(label))
    return value


def check_annotations(value: Any, field: str) -> dict[str, str]:
    expect(value, OBJ, field)
    total = 0
    for key, text in value.items():
        _problems(field, key, is_qualified_name(key.lower()))
        if not isinstance(text, str):
            raise fail(f"{field}.{key}", f"expected a string, got {text!r}")
        total += len(key.encode()) + len(text.encode())
    if total > ANNOTATIONS_MAX_BYTES:
        raise fail(field, f"Too long: must have at most {ANNOTATIONS_MAX_BYTES} bytes")
    return value


def check_namespace(value: Any, field: str) -> str:
    expect(value, STR, field)
    _problems(field, value, is_dns1123_label(value))
    return value


def check_subdomain(value: Any, field: str) -> str:
    expect(value, STR, field)
    _problems(field, value, is_dns1123_subdomain(value))
    return value


# --------------------------------------------------------------------------- resources


def check_resource_list(value: Any, field: str) -> dict[str, Quantity]:
    """``requests`` or ``limits``: resource name → quantity."""
    expect(value, OBJ, field)
    out = {}
    for name, amount in value.items():
        problem = rn.container_resource_problem(name)
        if problem:
            raise fail(field, f"Invalid value: {name!r}: {problem}")
        out[name] = rn.check_quantity(name, amount, f"{field}.{name}")
    return out


def check_requests_within_limits(
    requests: Mapping[str, Any], limits: Mapping[str, Any], field: str
) -> None:
    """A request above its limit, or an extended resource whose request is not its limit
    (they cannot be overcommitted), is refused as the API server refuses it."""
    for name, value in requests.items():
        if name not in limits:
            continue
        want, limit = parse(value), parse(limits[name])
        where = f"{field}.requests.{name}" if field else f"requests.{name}"
        if not rn.overcommit_allowed(name) and want.nano != limit.nano:
            raise fail(
                where, f"Invalid value: {str(want)!r}: must be equal to {name} limit of {limit}"
            )
        if want.nano > limit.nano:
            raise fail(
                where,
                f"Invalid value: {str(want)!r}: must be less than or equal to {name} limit "
                f"of {limit}",
            )


# --------------------------------------------------------------------------- scheduling


def check_tolerations(value: Any, field: str) -> None:
    """``validateTolerations``."""
    for i, toleration in enumerate(expect(value, LIST, field)):
        where = f"{field}[{i}]"
        expect(toleration, OBJ, where)
        unknown = sorted(
            set(toleration) - {"key", "operator", "value", "effect", "tolerationSeconds"}
        )
        if unknown:
            raise fail(where, f'unknown field "{unknown[0]}"')
        key = expect(toleration.get("key", ""), STR, f"{where}.key")
        operator = expect(toleration.get("operator", ""), STR, f"{where}.operator")
        value_ = expect(toleration.get("value", ""), STR, f"{where}.value")
        effect = expect(toleration.get("effect", ""), STR, f"{where}.effect")
        if key:
            _problems(f"{where}.key", key, is_qualified_name(key))
        elif operator != "Exists":
            raise fail(
                f"{where}.operator",
                f"Invalid value: {operator!r}: operator must be Exists when `key` is empty, "
                'which means "match all values and all keys"',
            )
        if "tolerationSeconds" in toleration:
            expect(toleration["tolerationSeconds"], INT, f"{where}.tolerationSeconds")
            if effect != "NoExecute":
                raise fail(
                    f"{where}.effect",
                    f"Invalid value: {effect!r}: effect must be 'NoExecute' when "
                    "`tolerationSeconds` is set",
                )
        if operator in ("", "Equal"):
            _problems(f"{where}.operator", value_, is_label_value(value_))
        elif operator == "Exists":
            if value_:
                raise fail(
                    f"{where}.operator",
                    "Invalid value: value must be empty when `operator` is 'Exists'",
                )
        else:
            raise _unsupported(f"{where}.operator", operator, TOLERATION_OPERATORS)
        if effect and effect not in TAINT_EFFECTS:
            raise _unsupported(f"{where}.effect", effect, TAINT_EFFECTS)


def _unsupported(field: str, value: Any, supported: tuple[str, ...]) -> ShapeError:
    listed = ", ".join(f'"{s}"' for s in supported)
    return fail(field, f"Unsupported value: {value!r}: supported values: {listed}")


def _requirement(req: Any, field: str, operators: tuple[str, ...]) -> tuple[str, list[str]]:
    """A selector requirement's operator and values (its key a qualified name)."""
    expect(req, OBJ, field)
    key = expect(req.get("key"), STR, f"{field}.key")
    _problems(f"{field}.key", key, is_qualified_name(key))
    operator = req.get("operator")
    if operator not in operators:
        raise _unsupported(f"{field}.operator", operator, operators)
    values = expect(req.get("values", []), LIST, f"{field}.values")
    for j, v in enumerate(values):
        expect(v, STR, f"{field}.values[{j}]")
    return operator, values


def _check_node_selector_requirement(req: Any, field: str) -> None:
    operator, values = _requirement(req, field, NODE_SELECTOR_OPERATORS)
    if operator in ("In", "NotIn") and not values:
        raise fail(
            f"{field}.values",
            "Required value: must be specified when `operator` is 'In' or 'NotIn'",
        )
    if operator in ("Exists", "DoesNotExist") and values:
        raise fail(
            f"{field}.values",
            "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )
    if operator in ("Gt", "Lt"):
        if len(values) != 1:
            raise fail(
                f"{field}.values",
                "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'",
            )
        try:
            int(values[0])
        except ValueError:
            raise fail(
                f"{field}.values[0]", f"Invalid value: {values[0]!r}: must be an integer"
            ) from None


def _check_node_selector_term(term: Any, field: str) -> None:
    expect(term, OBJ, field)
    for i, req in enumerate(
        expect(term.get("matchExpressions", []), LIST, f"{field}.matchExpressions")
    ):
        _check_node_selector_requirement(req, f"{field}.matchExpressions[{i}]")
    for i, req in enumerate(expect(term.get("matchFields", []), LIST, f"{field}.matchFields")):
        where = f"{field}.matchFields[{i}]"
        expect(req, OBJ, where)
        if req.get("key") != "metadata.name":
            raise fail(
                f"{where}.key", f"Invalid value: {req.get('key')!r}: not a valid field selector key"
            )
        if req.get("operator") not in ("In", "NotIn"):
            raise _unsupported(f"{where}.operator", req.get("operator"), ("In", "NotIn"))
        values = expect(req.get("values"), LIST, f"{where}.values")
        if len(values) != 1 or not isinstance(values[0], str):
            raise fail(
                f"{where}.values",
                "Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
            )


def check_label_selector(value: Any, field: str) -> None:
    """A ``metav1.LabelSelector`` (pod affinity, topology spread)."""
    expect(value, OBJ, field)
    if "matchLabels" in value:
        check_labels(value["matchLabels"], f"{field}.matchLabels")
    for i, req in enumerate(
        expect(value.get("matchExpressions", []), LIST, f"{field}.matchExpressions")
    ):
        where = f"{field}.matchExpressions[{i}]"
        operator, values = _requirement(req, where, LABEL_SELECTOR_OPERATORS)
        if (operator in ("In", "NotIn")) != bool(values):
            raise fail(
                f"{where}.values",
                "Required value: must be specified when `operator` is 'In' or 'NotIn' (and only then)",
            )


def _check_weight(term: Any, field: str) -> None:
    weight = expect(term.get("weight"), INT, f"{field}.weight")
    if not 1 <= weight <= 100:
        raise fail(f"{field}.weight", f"Invalid value: {weight}: must be in the range 1-100")


def _check_pod_affinity_term(term: Any, field: str) -> None:
    expect(term, OBJ, field)
    if "labelSelector" in term:
        check_label_selector(term["labelSelector"], f"{field}.labelSelector")
    key = term.get("topologyKey")
    if not key:
        raise fail(f"{field}.topologyKey", "Required value: can not be empty")
    _problems(
        f"{field}.topologyKey", expect(key, STR, f"{field}.topologyKey"), is_qualified_name(key)
    )


def _check_preferred(
    owner: dict[str, Any], where: str, inner: str, check: Callable[[Any, str], None]
) -> None:
    """``preferredDuringSchedulingIgnoredDuringExecution``: weighted terms."""
    key = "preferredDuringSchedulingIgnoredDuringExecution"
    for i, term in enumerate(expect(owner.get(key, []), LIST, f"{where}.{key}")):
        term_where = f"{where}.{key}[{i}]"
        _check_weight(expect(term, OBJ, term_where), term_where)
        check(term.get(inner), f"{term_where}.{inner}")


def check_affinity(value: Any, field: str) -> None:
    expect(value, OBJ, field)
    node = value.get("nodeAffinity")
    if node is not None:
        where = f"{field}.nodeAffinity"
        expect(node, OBJ, where)
        required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
        if required is not None:
            req_where = f"{where}.requiredDuringSchedulingIgnoredDuringExecution"
            terms = expect(
                expect(required, OBJ, req_where).get("nodeSelectorTerms"),
                LIST,
                f"{req_where}.nodeSelectorTerms",
            )
            if not terms:
                raise fail(
                    f"{req_where}.nodeSelectorTerms",
                    "Required value: must have at least one node selector term",
                )
            for i, term in enumerate(terms):
                _check_node_selector_term(term, f"{req_where}.nodeSelectorTerms[{i}]")
        _check_preferred(node, where, "preference", _check_node_selector_term)
    for kind in ("podAffinity", "podAntiAffinity"):
        pods = value.get(kind)
        if pods is None:
            continue
        where = f"{field}.{kind}"
        expect(pods, OBJ, where)
        required = pods.get("requiredDuringSchedulingIgnoredDuringExecution", [])
        for i, term in enumerate(
            expect(required, LIST, f"{where}.requiredDuringSchedulingIgnoredDuringExecution")
        ):
            _check_pod_affinity_term(
                term, f"{where}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"
            )
        _check_preferred(pods, where, "podAffinityTerm", _check_pod_affinity_term)


def check_topology_spread(value: Any, field: str) -> None:
    for i, c in enumerate(expect(value, LIST, field)):
        where = f"{field}[{i}]"
        expect(c, OBJ, where)
        skew = expect(c.get("maxSkew"), INT, f"{where}.maxSkew")
        if skew <= 0:
            raise fail(f"{where}.maxSkew", f"Invalid value: {skew}: must be greater than zero")
        key = c.get("topologyKey")
        if not key:
            raise fail(f"{where}.topologyKey", "Required value: can not be empty")
        _problems(
            f"{where}.topologyKey", expect(key, STR, f"{where}.topologyKey"), is_qualified_name(key)
        )
        when = c.get("whenUnsatisfiable")
        if when not in ("DoNotSchedule", "ScheduleAnyway"):
            raise _unsupported(
                f"{where}.whenUnsatisfiable", when, ("DoNotSchedule", "ScheduleAnyway")
            )
        if "labelSelector" in c:
            check_label_selector(c["labelSelector"], f"{where}.labelSelector")
        if "minDomains" in c:
            domains = expect(c["minDomains"], INT, f"{where}.minDomains")
            if domains <= 0 or when != "DoNotSchedule":
                raise fail(
                    f"{where}.minDomains",
                    f"Invalid value: {domains}: must be greater than zero and used with whenUnsatisfiable DoNotSchedule",
                )
        for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            if policy in c and c[policy] not in ("Honor", "Ignore"):
                raise _unsupported(f"{where}.{policy}", c[policy], ("Honor", "Ignore"))


# --------------------------------------------------------------------------- containers


def _check_ports(value: Any, field: str) -> None:
    for i, port in enumerate(expect(value, LIST, field)):
        where = f"{field}[{i}]"
        expect(port, OBJ, where)
        number = expect(port.get("containerPort"), INT, f"{where}.containerPort")
        if not 1 <= number <= 65535:
            raise fail(
                f"{where}.containerPort",
                f"Invalid value: {number}: must be between 1 and 65535, inclusive",
            )
        if "hostPort" in port:
            host = expect(port["hostPort"], INT, f"{where}.hostPort")
            if not 0 <= host <= 65535:
                raise fail(
                    f"{where}.hostPort",
                    f"Invalid value: {host}: must be between 1 and 65535, inclusive",
                )
        if port.get("protocol", "TCP") not in ("TCP", "UDP", "SCTP"):
            raise _unsupported(f"{where}.protocol", port.get("protocol"), ("TCP", "UDP", "SCTP"))


def check_container(container: Any, field: str, *, partial: bool) -> None:
    """A container; ``partial``: only the fields given (merged over timewarp's own)."""
    expect(container, OBJ, field)
    for key, value in container.items():
        if key not in CONTAINER_FIELDS:
            raise fail(f"{field}.{key}", f'unknown field "{key}" of a Container')
        expect(value, CONTAINER_FIELDS[key], f"{field}.{key}")
    if not partial:
        for key in ("name", "image"):
            if not container.get(key):
                raise fail(f"{field}.{key}", "Required value")
    if "name" in container:
        _problems(f"{field}.name", container["name"], is_dns1123_label(container["name"]))
    image = container.get("image")
    if isinstance(image, str) and image != image.strip():
        raise fail(f"{field}.image", "Invalid value: must not have leading or trailing whitespace")
    resources = container.get("resources")
    if resources is not None:
        for key in resources:
            if key not in ("requests", "limits", "claims"):
                raise fail(
                    f"{field}.resources.{key}", f'unknown field "{key}" of ResourceRequirements'
                )
        requests = check_resource_list(resources.get("requests", {}), f"{field}.resources.requests")
        limits = check_resource_list(resources.get("limits", {}), f"{field}.resources.limits")
        check_requests_within_limits(requests, limits, f"{field}.resources")
    if "ports" in container:
        _check_ports(container["ports"], f"{field}.ports")


# --------------------------------------------------------------------------- the manifest


_SPEC_CHECKS: dict[str, Callable[[Any, str], Any]] = {
    "nodeSelector": check_labels,
    "tolerations": check_tolerations,
    "affinity": check_affinity,
    "topologySpreadConstraints": check_topology_spread,
    "schedulerName": check_subdomain,
    "priorityClassName": check_subdomain,
}


def check_pod_manifest(value: Any, field: str = "pod") -> None:
    """A partial Pod: ``metadata`` (labels, annotations) and ``spec``; ``null`` removes a
    field timewarp set (JSON merge patch)."""
    expect(value, OBJ, field)
    for key in value:
        if key in ("apiVersion", "kind"):
            if value[key] not in ({"apiVersion": "v1", "kind": "Pod"}[key], None):
                raise fail(f"{field}.{key}", f"Invalid value: {value[key]!r}: this is a v1 Pod")
        elif key not in ("metadata", "spec"):
            raise fail(
                f"{field}.{key}", f'unknown or not settable field "{key}" (give metadata and spec)'
            )
    meta = value.get("metadata") or {}
    for key, item in expect(meta, OBJ, f"{field}.metadata").items():
        if key not in METADATA_FIELDS:
            raise fail(
                f"{field}.metadata.{key}",
                "not settable here: timewarp names the pod after its job (use the job's "
                "namespace field for the namespace)",
            )
        if item is not None:
            (check_labels if key == "labels" else check_annotations)(
                item, f"{field}.metadata.{key}"
            )
    spec = value.get("spec") or {}
    for key, item in expect(spec, OBJ, f"{field}.spec").items():
        where = f"{field}.spec.{key}"
        if key not in POD_SPEC_FIELDS:
            raise fail(where, f'unknown field "{key}" of a PodSpec')
        if key == "nodeName":
            raise fail(where, "Forbidden: a workload's pods are bound by the scheduler under test")
        if item is None:
            continue
        expect(item, POD_SPEC_FIELDS[key], where)
        if key in ("containers", "initContainers"):
            for i, container in enumerate(item):
                check_container(container, f"{where}[{i}]", partial=key == "containers" and i == 0)
        elif key in _SPEC_CHECKS:
            _SPEC_CHECKS[key](item, where)
