"""Resource names as Kubernetes classifies them (``k8s.io/kubernetes/pkg/apis/core/helper``)
and the integer units the scheduler and the kubelet count them in.

- native: a name without ``/``, or one in the ``kubernetes.io/`` domain (``cpu``,
  ``memory``, ``ephemeral-storage``, ``pods``, ``hugepages-2Mi``…);
- extended: any other domain-prefixed name (``nvidia.com/gpu``, ``example.com/foo``):
  never overcommitted (a container's request must equal its limit), counted in whole
  units;
- units: ``cpu`` in millicores (``MilliValue``), everything else in whole units rounded
  up (``Value``: bytes, pods, devices) — the numbers the kubelet's ``OutOf<resource>``
  message shows.
"""

from __future__ import annotations

from typing import Any

from broker.k8s.quantity import Quantity, QuantityError, parse
from broker.k8s.shape_rules import ShapeError, is_qualified_name

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
HUGEPAGES_PREFIX = "hugepages-"
STANDARD_CONTAINER_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE)
STANDARD_NODE_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)


def is_hugepages(name: str) -> bool:
    return name.startswith(HUGEPAGES_PREFIX)


def is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def is_extended(name: str) -> bool:
    """``IsExtendedResourceName``: not native, not a quota name, a valid qualified name."""
    if is_native(name) or name.startswith("requests."):
        return False
    return not is_qualified_name("requests." + name)


def is_scalar(name: str) -> bool:
    """Counted in the scheduler's ``ScalarResources``: extended resources, hugepages,
    ``kubernetes.io/``-prefixed and attachable-volume names."""
    return (
        is_extended(name)
        or is_hugepages(name)
        or ("kubernetes.io/" in name)
        or name.startswith("attachable-volumes-")
    )


def overcommit_allowed(name: str) -> bool:
    """A request may be below its limit only for native resources other than hugepages."""
    return is_native(name) and not is_hugepages(name)


def must_be_integer(name: str) -> bool:
    """Extended resources and ``pods`` have no fractions (``IsIntegerResourceName``)."""
    return name == PODS or is_extended(name)


def container_resource_problem(name: str) -> str | None:
    """Why ``name`` cannot be a container's request or limit (apiserver's
    ``validateContainerResourceName``), or None."""
    problems = is_qualified_name(name)
    if problems:
        return "; ".join(problems)
    if "/" not in name:
        if name not in STANDARD_CONTAINER_RESOURCES and not is_hugepages(name):
            return "must be a standard resource for containers"
    elif not is_native(name) and not is_extended(name):
        return "doesn't follow extended resource name standard"
    return None


def node_resource_problem(name: str) -> str | None:
    """Why ``name`` cannot be in a node's allocatable (``validateNodeResourceName``)."""
    problems = is_qualified_name(name)
    if problems:
        return "; ".join(problems)
    if "/" not in name and name not in STANDARD_NODE_RESOURCES and not is_hugepages(name):
        return "must be a standard resource for nodes"
    return None


def amount(name: str, quantity: Quantity) -> int:
    """The integer the kubelet counts ``quantity`` of ``name`` in."""
    return quantity.milli_value() if name == CPU else quantity.value()


def check_quantity(name: str, value: Any, field: str) -> Quantity:
    """An amount of resource ``name``: a quantity by the real grammar (a string or a JSON
    number), >= 0, whole for ``pods`` and extended resources."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ShapeError(field, f"expected a quantity (e.g. '500m', 2, '4Gi'), got {value!r}")
    try:
        quantity = parse(value)
    except QuantityError as exc:
        raise ShapeError(field, f"{value!r}: {exc}") from None
    if quantity.sign < 0:
        raise ShapeError(field, f"Invalid value: {value!r}: must be greater than or equal to 0")
    if must_be_integer(name) and quantity.nano % 10**9:
        raise ShapeError(field, f"Invalid value: {value!r}: must be an integer")
    return quantity
