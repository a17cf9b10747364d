"""Resource quantities as integers: cpu in millicores, everything else in base units.

Kubernetes' own rule is used for rounding: ``Quantity.MilliValue()`` and ``Value()``
round *up*, so "0.0001" cpu is 1 millicore and "1.5" bytes is 2 bytes. Parsing is
delegated to the client's ``kubernetes.utils.parse_quantity``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from kubernetes.utils import parse_quantity

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

# kube-scheduler's defaults for containers without requests, used only for scoring
# (pkg/scheduler/util: DefaultMilliCPURequest, DefaultMemoryRequest).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024


def quantity_to_int(name: str, value: object) -> int:
    """One quantity as an integer: millicores for ``cpu``, base units otherwise.

    Raises ValueError naming the resource when the value is not a quantity.
    """
    try:
        amount = parse_quantity(value)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"resource {name!r}: {value!r} is not a Kubernetes quantity") from exc
    if name == CPU:
        amount = amount * 1000
    return int(math.ceil(Decimal(amount)))


@dataclass(frozen=True)
class Resources:
    """An immutable bag of resource amounts; absent resources count as 0."""

    amounts: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, quantities: Mapping[str, object] | None) -> Resources:
        """From a Kubernetes resource list such as ``{"cpu": "500m", "memory": "1Gi"}``."""
        if not quantities:
            return cls()
        return cls({name: quantity_to_int(name, q) for name, q in quantities.items()})

    def __getitem__(self, name: str) -> int:
        return self.amounts.get(name, 0)

    def names(self) -> list[str]:
        return sorted(self.amounts)

    def __add__(self, other: Resources) -> Resources:
        out = dict(self.amounts)
        for name, amount in other.amounts.items():
            out[name] = out.get(name, 0) + amount
        return Resources(out)

    def maximum(self, other: Resources) -> Resources:
        out = dict(self.amounts)
        for name, amount in other.amounts.items():
            out[name] = max(out.get(name, 0), amount)
        return Resources(out)

    @property
    def cpu_millis(self) -> int:
        return self[CPU]

    @property
    def memory_bytes(self) -> int:
        return self[MEMORY]


def total(resources: Iterable[Resources]) -> Resources:
    out = Resources()
    for r in resources:
        out = out + r
    return out
