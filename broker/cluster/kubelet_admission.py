"""The kubelet's admission of a pod bound to its node, check by check, as
``pkg/kubelet/lifecycle/predicate.go`` (``predicateAdmitHandler.Admit``) does it.

In order, the first failure decides:

1. ``kubernetes.io/os`` — a pod *label* ``kubernetes.io/os`` other than the node's OS
   (``linux``) → ``PodOSSelectorNodeLabelDoesNotMatch``; ``spec.os.name`` other than
   ``linux`` → ``PodOSNotSupported``;
2. the general filter (the scheduler's ``AdmissionCheck`` plus one taint rule), all
   failures collected, the first reported:
   - resources (``noderesources.Fits``): the pod count first (``OutOfpods``, "requested:
     1, used: <pods on the node>"), then ``cpu``, ``memory``, ``ephemeral-storage`` and
     every other requested resource by name (``OutOfnvidia.com/gpu``); requests of the
     pod plus the node's admitted pods against the node's allocatable. An *extended*
     resource the node does not have at all is dropped from the check
     (``removeMissingExtendedResources``: cluster-level resources are unknown to nodes),
     so a GPU pod bound to a node without GPUs is admitted, as on a real cluster;
   - ``nodeSelector`` and required node affinity → ``NodeAffinity``;
   - ``spec.nodeName`` is this node → ``NodeName``;
   - host ports free → ``NodePorts``;
   - ``NoExecute`` taints tolerated → ``TaintToleration`` (the kubelet looks at no other
     effect).

Left to the scheduler (the kubelet admits regardless): ``NoSchedule`` and
``PreferNoSchedule`` taints, ``spec.unschedulable`` (a cordoned node runs what is bound
to it), pod affinity and anti-affinity, topology spread, volume limits. Not modelled:
the critical-pod admission handler (a ``system-*-critical`` pod that does not fit makes a
real kubelet evict others), device-plugin, eviction-manager and sysctl admission.

Messages are v1.30's (the facade reports v1.30): the Event says the predicate's message,
the pod's ``status.message`` is ``"Pod was rejected: "`` + it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.facade.selectors import LabelRequirement
from broker.k8s import resource_names as rn
from broker.k8s.quantity import QuantityError, parse

NODE_OS = "linux"
OS_LABEL = "kubernetes.io/os"
REJECTED_PREFIX = "Pod was rejected: "
NO_EXECUTE = "NoExecute"
_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}

HostPort = tuple[str, str, int]  # (hostIP, protocol, hostPort)


@dataclass(frozen=True)
class Refusal:
    """Why the kubelet refuses a pod: ``reason`` goes to ``status.reason`` and the Event,
    ``message`` to the Event (and, prefixed, to ``status.message``)."""

    reason: str
    message: str

    @property
    def status_message(self) -> str:
        return REJECTED_PREFIX + self.message


@dataclass
class NodeView:
    """What the kubelet knows of its node: the Node object's labels and taints, its
    allocatable, and what the pods it admitted use (``pods``: how many)."""

    name: str
    labels: Mapping[str, str]
    taints: list[Any]
    allocatable: Mapping[str, int]
    used: Mapping[str, int] = field(default_factory=dict)
    host_ports: Collection[HostPort] = ()


# --------------------------------------------------------------------------- the pod


def _container_requests(container: Any) -> dict[str, int]:
    """One container's requests in nano units (a malformed value counts as none: the
    API refuses such pods; the model must not fail on them)."""
    if not isinstance(container, dict):
        return {}
    resources = container.get("resources")
    requests = resources.get("requests") if isinstance(resources, dict) else None
    out: dict[str, int] = {}
    if isinstance(requests, dict):
        for name, value in requests.items():
            try:
                out[str(name)] = parse(value).nano
            except QuantityError:
                continue
    return out


def _add(total: dict[str, int], more: Mapping[str, int]) -> dict[str, int]:
    out = dict(total)
    for name, value in more.items():
        out[name] = out.get(name, 0) + value
    return out


def _max(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return {name: max(a.get(name, 0), b.get(name, 0)) for name in {*a, *b}}


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """The pod's effective requests (``resourcehelper.PodRequests``), in the kubelet's
    units: the sum over its containers; each init container runs alone (with the
    restartable ones — sidecars — started before it), so the pod needs the larger of
    that and the sum; sidecars add to the sum; ``spec.overhead`` is added. Resources
    requested as zero are left out."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    total: dict[str, int] = {}
    for container in _list(spec.get("containers")):
        total = _add(total, _container_requests(container))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in _list(spec.get("initContainers")):
        need = _container_requests(container)
        if isinstance(container, dict) and container.get("restartPolicy") == "Always":
            total = _add(total, need)
            sidecars = _add(sidecars, need)
            need = sidecars
        else:
            need = _add(need, sidecars)
        init_peak = _max(init_peak, need)
    total = _max(total, init_peak)
    overhead = spec.get("overhead")
    if isinstance(overhead, dict):
        total = _add(total, _container_requests({"resources": {"requests": overhead}}))
    out = {}
    for name, nano in total.items():
        units = _units(name, nano)
        if units:
            out[name] = units
    return out


def _units(name: str, nano: int) -> int:
    """Nano units → the kubelet's unit (millicores for cpu), rounded up."""
    div = 10**6 if name == rn.CPU else 10**9
    return -(-nano // div)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def host_ports(pod: Mapping[str, Any]) -> list[HostPort]:
    """The (hostIP, protocol, hostPort) a pod's containers ask for (hostPort > 0)."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    out = []
    for container in _list(spec.get("containers")) + _list(spec.get("initContainers")):
        if not isinstance(container, dict):
            continue
        for port in _list(container.get("ports")):
            if not isinstance(port, dict):
                continue
            number = port.get("hostPort")
            if isinstance(number, int) and not isinstance(number, bool) and number > 0:
                ip = port.get("hostIP") or "0.0.0.0"
                out.append((str(ip), str(port.get("protocol") or "TCP"), number))
    return out


# --------------------------------------------------------------------------- checks


def check_os_label(pod: Mapping[str, Any]) -> Refusal | None:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if isinstance(labels, dict) and OS_LABEL in labels and labels[OS_LABEL] != NODE_OS:
        return Refusal(
            "PodOSSelectorNodeLabelDoesNotMatch",
            "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
        )
    return None


def check_os_field(pod: Mapping[str, Any]) -> Refusal | None:
    os_field = (pod.get("spec") or {}).get("os")
    if isinstance(os_field, dict) and os_field.get("name") != NODE_OS:
        return Refusal(
            "PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS"
        )
    return None


def _insufficient(name: str, requested: int, used: int, capacity: int) -> Refusal:
    reason = f"OutOf{name}"
    return Refusal(
        reason,
        f"Node didn't have enough resource: {name}, requested: {requested}, used: {used}, "
        f"capacity: {capacity}",
    )


def without_missing_extended(requests: Mapping[str, int], node: NodeView) -> dict[str, int]:
    """``removeMissingExtendedResources``: extended resources the node does not list."""
    return {
        name: value
        for name, value in requests.items()
        if not (rn.is_extended(name) and name not in node.allocatable)
    }


def insufficient_resources(requests: Mapping[str, int], node: NodeView) -> list[Refusal]:
    """``noderesources.Fits``: the pod count, then cpu, memory, ephemeral-storage, then
    the other (scalar) resources — by name, for a fixed order (Go walks a map)."""
    out = []
    pods_used = node.used.get(rn.PODS, 0)
    allowed = node.allocatable.get(rn.PODS, 0)
    if pods_used + 1 > allowed:
        out.append(_insufficient(rn.PODS, 1, pods_used, allowed))
    scalars = sorted(n for n in requests if rn.is_scalar(n))
    for name in (rn.CPU, rn.MEMORY, rn.EPHEMERAL_STORAGE, *scalars):
        want = requests.get(name, 0)
        if want <= 0:
            continue
        used, capacity = node.used.get(name, 0), node.allocatable.get(name, 0)
        if want > capacity - used:
            out.append(_insufficient(name, want, used, capacity))
    return out


def _requirement(expression: Any) -> LabelRequirement | None:
    """A node selector requirement, or None when it is malformed (the term it is in then
    matches nothing, as ``nodeaffinity`` treats a term that does not parse)."""
    if not isinstance(expression, dict):
        return None
    key, op = expression.get("key"), expression.get("operator")
    values = expression.get("values") or []
    if not isinstance(key, str) or not isinstance(values, list):
        return None
    if not all(isinstance(v, str) for v in values):
        return None
    if op in ("In", "NotIn"):
        return LabelRequirement(key, _OPERATORS[op], tuple(values)) if values else None
    if op in ("Exists", "DoesNotExist"):
        return None if values else LabelRequirement(key, _OPERATORS[op])
    if op in ("Gt", "Lt") and len(values) == 1:
        try:
            int(values[0])
        except ValueError:
            return None
        return LabelRequirement(key, ">" if op == "Gt" else "<", (values[0],))
    return None


def _field_matches(expression: Any, node_name: str) -> bool | None:
    """``matchFields``: only ``metadata.name`` with In/NotIn and one value; None if not."""
    if not isinstance(expression, dict) or expression.get("key") != "metadata.name":
        return None
    values = expression.get("values")
    if not isinstance(values, list) or len(values) != 1:
        return None
    if expression.get("operator") == "In":
        return node_name == values[0]
    if expression.get("operator") == "NotIn":
        return node_name != values[0]
    return None


def _term_matches(term: Any, labels: Mapping[str, str], node_name: str) -> bool:
    if not isinstance(term, dict):
        return False
    expressions, fields = _list(term.get("matchExpressions")), _list(term.get("matchFields"))
    if not expressions and not fields:
        return False  # an empty term selects no node
    for expression in expressions:
        requirement = _requirement(expression)
        if requirement is None or not requirement.matches(dict(labels)):
            return False
    return all(_field_matches(f, node_name) for f in fields)


def node_affinity_matches(pod: Mapping[str, Any], labels: Mapping[str, str], name: str) -> bool:
    """``GetRequiredNodeAffinity(pod).Match(node)``: every ``nodeSelector`` pair, and one
    of the required affinity's terms (when there is one)."""
    selector, required = node_selection(pod)
    if selector is not None:
        if any(labels.get(k) != v for k, v in selector.items()):
            return False
    if required is None:
        return True
    return any(_term_matches(t, labels, name) for t in _list(required.get("nodeSelectorTerms")))


def node_selection(pod: Mapping[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The pod's ``nodeSelector`` and required node affinity, each None when absent (or
    not an object)."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    selector = spec.get("nodeSelector")
    affinity = spec.get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = (
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node_affinity, dict)
        else None
    )
    return (
        selector if isinstance(selector, dict) else None,
        required if isinstance(required, dict) else None,
    )


def _predicate(name: str) -> Refusal:
    return Refusal(name, f"Predicate {name} failed")


def check_node_affinity(pod: Mapping[str, Any], node: NodeView) -> Refusal | None:
    if node_affinity_matches(pod, node.labels, node.name):
        return None
    return _predicate("NodeAffinity")


def check_node_name(pod: Mapping[str, Any], node: NodeView) -> Refusal | None:
    bound = (pod.get("spec") or {}).get("nodeName")
    return None if not bound or bound == node.name else _predicate("NodeName")


def _ports_conflict(a: HostPort, b: HostPort) -> bool:
    ip_a, proto_a, port_a = a
    ip_b, proto_b, port_b = b
    if port_a != port_b or proto_a != proto_b:
        return False
    return ip_a == ip_b or "0.0.0.0" in (ip_a, ip_b)


def check_node_ports(wanted: list[HostPort], node: NodeView) -> Refusal | None:
    for port in wanted:
        if any(_ports_conflict(port, used) for used in node.host_ports):
            return _predicate("NodePorts")
    return None


def tolerates(toleration: Any, taint: Any) -> bool:
    """``Toleration.ToleratesTaint``: effect (empty = all), key (empty = all, with
    Exists), and Equal (the default) compares values."""
    if not isinstance(toleration, dict) or not isinstance(taint, dict):
        return False
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated_taint(taints: list[Any], tolerations: Any, effects: Collection[str]) -> Any:
    """The first taint with one of ``effects`` that no toleration tolerates, or None."""
    tolerations = _list(tolerations)
    for taint in taints:
        if isinstance(taint, dict) and taint.get("effect") in effects:
            if not any(tolerates(t, taint) for t in tolerations):
                return taint
    return None


def check_no_execute_taints(pod: Mapping[str, Any], node: NodeView) -> Refusal | None:
    tolerations = (pod.get("spec") or {}).get("tolerations")
    if untolerated_taint(node.taints, tolerations, (NO_EXECUTE,)) is None:
        return None
    return _predicate("TaintToleration")


# --------------------------------------------------------------------------- admission


def general_filter(
    pod: Mapping[str, Any], requests: Mapping[str, int], node: NodeView
) -> list[Refusal]:
    """Every failure of the general filter, in the kubelet's order."""
    reasons = insufficient_resources(without_missing_extended(requests, node), node)
    for check in (check_node_affinity, check_node_name):
        refusal = check(pod, node)
        if refusal is not None:
            reasons.append(refusal)
    ports = check_node_ports(host_ports(pod), node)
    if ports is not None:
        reasons.append(ports)
    taints = check_no_execute_taints(pod, node)
    if taints is not None:
        reasons.append(taints)
    return reasons


def admit(pod: Mapping[str, Any], requests: Mapping[str, int], node: NodeView) -> Refusal | None:
    """None if the kubelet of ``node`` admits ``pod`` (whose effective requests are
    ``requests``, see :func:`pod_requests`), else the first reason it refuses it."""
    for refusal in (check_os_label(pod), check_os_field(pod)):
        if refusal is not None:
            return refusal
    reasons = general_filter(pod, requests, node)
    return reasons[0] if reasons else None
