"""What the two ways of serving requests share: the small protocol the traffic model
(``model.py``) drives them by, and the tally both write what became of the requests into.

``exact`` (``exact.py``) serves every request; ``fluid`` (``fluid.py``) takes each stretch
between two changes in its stationary regime. The model owns time, ticks, the replica set
and the rows; a :class:`Serving` owns only how requests are served between two instants.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from simulator.traffic.costs import Cost
from simulator.traffic.patterns import Pattern


@dataclass(frozen=True)
class ReplicaState:
    limit_cores: float  # processor-sharing capacity
    request_cores: float  # what utilisation is measured against (the HPA's view)
    ready: bool


@dataclass(frozen=True)
class TrafficConfig:
    name: str
    pattern: Pattern
    process: str  # regular | poisson
    cost: Cost
    timeout: float
    duration: float
    tick: float
    lag: float
    model: str  # exact | fluid
    seed: int


@dataclass
class PodCounters:
    """Per-pod counters at the last tick."""

    cpu: float = 0.0
    area: float = 0.0
    arrivals: float = 0.0  # fluid: expected, fractional
    since: float = 0.0


@dataclass
class _Outcomes:
    """What became of the requests: over the whole run (:class:`Totals`) or one
    reporting window."""

    arrivals: int = 0
    completed: int = 0
    timed_out: int = 0
    dropped: int = 0
    lost: int = 0  # in flight on a replica that went away


@dataclass
class Totals(_Outcomes):
    work_arrived: float = 0.0  # CPU-seconds of cost that arrived
    work_completed: float = 0.0


@dataclass
class Window(_Outcomes):
    ready_request_area: float = 0.0
    cpu: float = 0.0
    area: float = 0.0


@dataclass
class Tally:
    """The counts of the current metrics tick (``window``), of the whole run
    (``totals``) and per pod since the last tick (``pods``)."""

    window: Window = field(default_factory=Window)
    totals: Totals = field(default_factory=Totals)
    pods: dict[str, PodCounters] = field(default_factory=dict)

    def arrived(self, count: int, work: float) -> None:
        self.window.arrivals += count
        self.totals.arrivals += count
        self.totals.work_arrived += work

    def dropped(self, count: int) -> None:
        self.window.dropped += count
        self.totals.dropped += count

    def completed(self, count: int) -> None:
        self.window.completed += count
        self.totals.completed += count

    def timed_out(self, count: int) -> None:
        self.window.timed_out += count
        self.totals.timed_out += count

    def lost(self, count: int) -> None:
        self.window.lost += count
        self.totals.lost += count


class Serving(Protocol):
    """How one service's requests are served between two instants (exact or fluid)."""

    # True: every advance of time is settled as it comes (exact); False: stretches are cut
    # only at ticks and at changes, so rows do not depend on how often time is asked (fluid)
    splits_every_advance: bool

    def add(self, name: str, state: ReplicaState, t: float) -> None:
        """A replica starts at ``t``."""

    def remove(self, name: str, t: float) -> None:
        """A replica goes away at ``t`` (before its counters leave the tally)."""

    def resize(self, name: str, state: ReplicaState, t: float) -> None:
        """A replica's CPU limit changed at ``t``."""

    def serve(
        self, t0: float, t1: float, ready: Sequence[str], states: Mapping[str, ReplicaState]
    ) -> None:
        """Requests arriving in ``[t0, t1)``, routed over the ``ready`` replicas."""

    def usage(self, name: str, t: float) -> tuple[float, float]:
        """A replica's CPU-seconds and ∫ requests in flight dt since it started, at ``t``."""
        ...

    def take_latency_quantiles(self) -> tuple[float | None, float | None, float | None]:
        """p50, p95, p99 of the requests completed since the last call (None: none)."""
        ...

    def in_flight(self) -> int:
        """Requests in flight now."""
        ...
