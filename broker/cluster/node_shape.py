"""A platform host's properties → the Node the scheduler sees (``docs/simulator.md``,
"Kubernetes shapes of the platform").

Host ``<prop>`` read here (every other one becomes the annotation ``timewarp.io/<p>``,
and a label of that name when it makes a valid label):

- ``core`` (cpu, default 1), ``memory`` (default 4Gi), ``gpu`` (``nvidia.com/gpu``):
  Batkube's shortcuts for allocatable;
- ``allocatable``: ``cpu=2,memory=8Gi,nvidia.com/gpu=4,pods=110`` — any resource name a
  node may list (``pods`` default 110, ``ephemeral-storage`` default 100Gi);
- ``labels``: ``env=prod,zone=a`` as ``kubectl label`` takes them;
- ``taints``: ``dedicated=gpu:NoSchedule,maintenance:NoExecute`` as ``kubectl taint``;
- ``unschedulable``: ``true`` — cordoned: ``spec.unschedulable`` and the
  ``node.kubernetes.io/unschedulable:NoSchedule`` taint the node controller adds.

Every value is checked by the API server's rules; :class:`ShapeError` names the
property and says what is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.facade.objects import make_node
from broker.k8s import resource_names as rn
from broker.k8s.quantity import Quantity, parse
from broker.k8s.resource_names import check_quantity
from broker.k8s.shape_rules import ShapeError, is_label_value, is_qualified_name

DEFAULTS = {"cpu": "1", "memory": "4Gi", "pods": "110", "ephemeral-storage": "100Gi"}
SHORTCUTS = {"core": rn.CPU, "memory": rn.MEMORY, "gpu": "nvidia.com/gpu"}
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
PROPS = ("core", "memory", "gpu", "allocatable", "labels", "taints", "unschedulable", "role")
_TRUE = ("1", "t", "T", "true", "TRUE", "True")  # Go's strconv.ParseBool
_FALSE = ("0", "f", "F", "false", "FALSE", "False")


@dataclass
class NodeShape:
    allocatable: dict[str, Quantity]
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    unschedulable: bool = False

    def amounts(self) -> dict[str, int]:
        """Allocatable in the kubelet's units (millicores, bytes, pods, devices)."""
        return {name: rn.amount(name, q) for name, q in self.allocatable.items()}


def node_name_for(host: str) -> str:
    """A host's Node name: lowercased, characters outside ``[a-z0-9.-]`` as ``-``."""
    name = re.sub(r"[^a-z0-9.-]", "-", host.lower()).strip("-.") or "node"
    return name[:253]


def _items(text: str, prop: str, what: str) -> list[str]:
    items = [item.strip() for item in text.split(",")]
    if any(not item for item in items):
        raise ShapeError(prop, f"{text!r}: an empty item; expected {what}")
    return items


def _pairs(text: str, prop: str, what: str) -> list[tuple[str, str, str]]:
    """``key=value,...`` → (item, key, value); an item without ``=`` or a key given twice
    is refused."""
    out: list[tuple[str, str, str]] = []
    if not text.strip():
        return out
    for item in _items(text, prop, f"{what},..."):
        key, sep, value = item.partition("=")
        if not sep:
            raise ShapeError(prop, f"{item!r}: expected {what}")
        if any(key == seen for _, seen, _ in out):
            raise ShapeError(prop, f"{key!r} is given twice")
        out.append((item, key, value))
    return out


def parse_labels(text: str, prop: str = "labels") -> dict[str, str]:
    """``k=v,k2=v2`` (``kubectl label``'s syntax): keys and values by the real rules."""
    labels: dict[str, str] = {}
    for item, key, value in _pairs(text, prop, "key=value"):
        problems = [f"key {key!r}: {m}" for m in is_qualified_name(key)]
        problems += [f"value {value!r}: {m}" for m in is_label_value(value)]
        if problems:
            raise ShapeError(prop, f"{item!r}: " + "; ".join(problems))
        labels[key] = value
    return labels


def parse_taints(text: str, prop: str = "taints") -> list[dict[str, str]]:
    """``key=value:Effect,key:Effect`` (``kubectl taint``'s syntax)."""
    taints: list[dict[str, str]] = []
    if not text.strip():
        return taints
    for item in _items(text, prop, "key[=value]:Effect,..."):
        spec, sep, effect = item.rpartition(":")
        if not sep:
            raise ShapeError(
                prop, f"{item!r}: expected key[=value]:Effect (Effect: {', '.join(TAINT_EFFECTS)})"
            )
        if effect not in TAINT_EFFECTS:
            raise ShapeError(
                prop, f"{item!r}: unsupported taint effect {effect!r} ({', '.join(TAINT_EFFECTS)})"
            )
        key, has_value, value = spec.partition("=")
        problems = [f"key {key!r}: {m}" for m in is_qualified_name(key)]
        if has_value:
            problems += [f"value {value!r}: {m}" for m in is_label_value(value)]
        if problems:
            raise ShapeError(prop, f"{item!r}: " + "; ".join(problems))
        if any(t["key"] == key and t["effect"] == effect for t in taints):
            raise ShapeError(
                prop, f"{item!r}: a taint with key {key!r} and effect {effect} is given twice"
            )
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        taints.append(taint)
    return taints


def parse_bool(text: str, prop: str) -> bool:
    if text.strip() in _TRUE:
        return True
    if text.strip() in _FALSE:
        return False
    raise ShapeError(prop, f"{text!r} is not true or false")


def parse_allocatable(text: str, prop: str = "allocatable") -> dict[str, Quantity]:
    """``cpu=2,memory=8Gi,nvidia.com/gpu=4,pods=110``."""
    out: dict[str, Quantity] = {}
    for item, name, value in _pairs(text, prop, "resource=quantity"):
        problem = rn.node_resource_problem(name)
        if problem:
            raise ShapeError(prop, f"{item!r}: resource name {name!r}: {problem}")
        out[name] = check_quantity(name, value, f"{prop}: {name}")
    return out


def node_shape(props: Mapping[str, Any]) -> NodeShape:
    """Read and check a host's properties (Batsim's ``properties`` of the resource)."""
    text = {str(k): str(v) for k, v in props.items()}
    allocatable = {name: parse(value) for name, value in DEFAULTS.items()}
    given = parse_allocatable(text.get("allocatable", ""))
    for prop, name in SHORTCUTS.items():
        if prop in text:
            if name in given:
                raise ShapeError(
                    "allocatable",
                    f"{name} is given twice (the {prop!r} property and allocatable {name}=…)",
                )
            allocatable[name] = check_quantity(name, text[prop], prop)
    allocatable.update(given)
    shape = NodeShape(allocatable)
    shape.labels = parse_labels(text.get("labels", ""))
    shape.taints = parse_taints(text.get("taints", ""))
    shape.unschedulable = (
        parse_bool(text["unschedulable"], "unschedulable") if ("unschedulable" in text) else False
    )
    if shape.unschedulable and not any(
        t["key"] == UNSCHEDULABLE_TAINT and t["effect"] == "NoSchedule" for t in shape.taints
    ):
        shape.taints.append({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"})
    for prop, value in sorted(text.items()):
        if prop in PROPS:
            continue
        key = f"timewarp.io/{prop.replace('_', '-').lower()}"
        if is_qualified_name(key):
            continue  # not representable in Kubernetes metadata: Batsim's only
        shape.annotations[key] = value
        if not is_label_value(value):
            shape.labels.setdefault(key, value)
    return shape


def build_node(
    name: str, shape: NodeShape, ip: str, resource_id: int, pod_cidr: str | None = None
) -> dict[str, Any]:
    """The Node object a kubelet would register for this host (with the pod CIDR the
    node-ipam controller gave it)."""
    node = make_node(name, labels=shape.labels, address=ip)
    resources = {n: str(q) for n, q in shape.allocatable.items()}
    node["status"]["capacity"] = dict(resources)
    node["status"]["allocatable"] = dict(resources)
    node["metadata"]["annotations"] = {
        **shape.annotations,
        "timewarp.io/resource-id": str(resource_id),
    }
    if shape.taints:
        node["spec"]["taints"] = [dict(t) for t in shape.taints]
    if shape.unschedulable:
        node["spec"]["unschedulable"] = True
    if pod_cidr is not None:
        node["spec"]["podCIDR"] = pod_cidr
        node["spec"]["podCIDRs"] = [pod_cidr]
    return node
