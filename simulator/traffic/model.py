"""One service's traffic in simulated time: arrivals, replicas, ticks, metrics.

The caller (the broker) owns time and the replicas; this object is told, in time order:

- ``set_replicas(t, {pod: ReplicaState})`` whenever the service's pods change (a pod
  started, became Ready or not, went away),
- ``set_desired(t, n)`` when the Deployment's ``spec.replicas`` changes (for the table),
- ``advance_to(t)`` whenever simulated time moves,

and it answers with ``take_rows()`` (one :class:`TickRow` per closed metrics tick — the
rows of ``out_services.csv``) and ``published(t)`` (the newest per-pod metrics sample a
scraper could have seen at ``t``: the one of the last tick ``≤ t - lag``).

Everything before ``t`` is settled when ``advance_to(t)`` returns: arrivals at times
``< t`` are routed with the replica set that held when they arrived, and every tick at
``≤ t`` is closed. How requests are served between two instants is a
:class:`~simulator.traffic.serving.Serving`: ``exact`` serves every request (``exact.py``),
``fluid`` works per stretch between changes (``fluid.py``); one table (:data:`SERVINGS`)
names them. Both give the same kind of rows and samples; the metrics' names are those of
``metrics.py``.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from simulator.traffic.exact import ExactServing
from simulator.traffic.fluid import FluidServing
from simulator.traffic.metrics import COLUMNS, CUSTOM_POD_METRICS, PodWindow, cpu_cores
from simulator.traffic.serving import (
    PodCounters,
    ReplicaState,
    Serving,
    Tally,
    Totals,
    TrafficConfig,
    Window,
)

# the ways of serving requests, by the name a service's ``model`` gives
SERVINGS: dict[str, Callable[[TrafficConfig, Tally], Serving]] = {
    "exact": ExactServing,
    "fluid": FluidServing,
}


@dataclass
class TickRow:
    """One row of ``out_services.csv``: its fields are the columns of
    :data:`simulator.traffic.metrics.COLUMNS`, in that order
    (``tests/test_traffic_properties.py`` checks it)."""

    time: float
    service: str
    desired_replicas: int
    ready_replicas: int
    request_rate: float
    latency_p50: float | None
    latency_p95: float | None
    latency_p99: float | None
    failed_requests: int
    cpu_utilisation: float | None
    completed_requests: int
    timed_out_requests: int
    dropped_requests: int
    mean_concurrency: float
    cpu_cores: float

    def csv_values(self) -> list[str]:
        return [column.format(getattr(self, column.name)) for column in COLUMNS]


@dataclass(frozen=True)
class PodSample:
    """What a scraper reads of one pod at one tick (averages over ``window`` seconds
    ending at ``time``): its CPU use and the custom metrics of
    :data:`simulator.traffic.metrics.CUSTOM_POD_METRICS`, by name."""

    time: float
    window: float
    cpu_cores: float
    custom: dict[str, float]


class TrafficModel:
    def __init__(self, config: TrafficConfig) -> None:
        if config.model not in SERVINGS:
            raise ValueError(f"unknown model {config.model!r}")
        self.config = config
        self.tally = Tally()
        self.serving: Serving = SERVINGS[config.model](config, self.tally)
        self.now = 0.0
        self.desired = 0
        self.states: dict[str, ReplicaState] = {}
        self.ready: list[str] = []  # sorted names of Ready replicas
        self._window_start = 0.0
        self._tick_index = 0  # ticks closed; the next closes at (index + 1) × tick
        self._ready_request = 0.0  # Σ request cores of Ready replicas
        self._ready_at = 0.0
        self._rows: list[TickRow] = []
        self._samples: list[tuple[float, dict[str, PodSample]]] = []  # (visible at, samples)
        self._sample_times: list[float] = []
        self.ended = False

    @property
    def totals(self) -> Totals:
        return self.tally.totals

    # ------------------------------------------------------------------ inputs
    def set_desired(self, t: float, replicas: int) -> None:
        self._advance(t, split=True)
        self.desired = int(replicas)

    def set_replicas(self, t: float, states: Mapping[str, ReplicaState]) -> None:
        """The service's pods at ``t`` (every pod that runs; Ready or not)."""
        self._advance(t, split=True)
        if self.ended:  # the service is over: what is still in flight stays so
            return
        t = self.now
        self._integrate_ready(t)
        for name in sorted(set(self.states) - set(states)):
            self.serving.remove(name, t)
            del self.tally.pods[name]
        for name in sorted(states):
            state = states[name]
            old = self.states.get(name)
            if old is None:
                self.tally.pods[name] = PodCounters(since=t)
                self.serving.add(name, state, t)
            elif old.limit_cores != state.limit_cores:
                self.serving.resize(name, state, t)
        self.states = dict(states)
        self.ready = sorted(n for n, s in states.items() if s.ready)
        self._ready_request = sum(states[n].request_cores for n in self.ready)

    def _integrate_ready(self, t: float) -> None:
        self.tally.window.ready_request_area += self._ready_request * (t - self._ready_at)
        self._ready_at = t

    # ------------------------------------------------------------------ time
    def next_tick(self) -> float:
        return (self._tick_index + 1) * self.config.tick

    def advance_to(self, t: float) -> None:
        self._advance(t, split=self.serving.splits_every_advance)

    def _advance(self, t: float, split: bool) -> None:
        """Settle everything before ``t``. The fluid model cuts its stretches only at ticks
        and at changes (``split``), so its rows do not depend on how often it is asked."""
        end = self.config.duration
        while self.now < t and not self.ended:
            boundary = min(t, self.next_tick(), end)
            closes = boundary >= self.next_tick() or boundary >= end
            if not (split or closes):
                return
            self.serving.serve(self.now, boundary, self.ready, self.states)
            self.now = boundary
            if closes:
                self._close_tick(boundary)
                self._tick_index += 1
                if boundary >= end:
                    self.ended = True

    def _close_tick(self, t: float) -> None:
        self._integrate_ready(t)
        window, start = self.tally.window, self._window_start
        span = t - start
        samples: dict[str, PodSample] = {}
        pods = self.tally.pods
        for name in sorted(pods):
            counters = pods[name]
            cpu, area = self.serving.usage(name, t)
            d_cpu, d_area = cpu - counters.cpu, area - counters.area
            window.cpu += d_cpu
            window.area += d_area
            since = max(counters.since, start)
            width = t - since
            if width > 0:
                pod = PodWindow(width, d_cpu, d_area, counters.arrivals)
                custom = {m.name: m.value(pod) for m in CUSTOM_POD_METRICS}
                samples[name] = PodSample(t, width, cpu_cores(pod), custom)
            counters.cpu, counters.area, counters.arrivals, counters.since = cpu, area, 0, t
        rate = window.arrivals / span if span > 0 else 0.0
        p50, p95, p99 = self.serving.take_latency_quantiles()
        util = window.cpu / window.ready_request_area if window.ready_request_area > 0 else None
        self._rows.append(
            TickRow(
                time=t,
                service=self.config.name,
                desired_replicas=self.desired,
                ready_replicas=len(self.ready),
                request_rate=rate,
                latency_p50=p50,
                latency_p95=p95,
                latency_p99=p99,
                failed_requests=window.timed_out + window.dropped + window.lost,
                cpu_utilisation=util,
                completed_requests=window.completed,
                timed_out_requests=window.timed_out,
                dropped_requests=window.dropped + window.lost,
                mean_concurrency=window.area / span if span > 0 else 0.0,
                cpu_cores=window.cpu / span if span > 0 else 0.0,
            )
        )
        self._samples.append((t + self.config.lag, samples))
        self._sample_times.append(t + self.config.lag)
        self.tally.window = Window()
        self._window_start = t

    # ------------------------------------------------------------------ outputs
    def take_rows(self) -> list[TickRow]:
        rows, self._rows = self._rows, []
        return rows

    def published(self, t: float) -> tuple[float, dict[str, PodSample]] | None:
        """The newest (tick time, samples) visible at ``t`` (tick + lag ≤ t)."""
        i = bisect.bisect_right(self._sample_times, t + 1e-9) - 1
        if i < 0:
            return None
        visible, samples = self._samples[i]
        # older samples can never be seen again: drop them
        if i > 0:
            del self._samples[:i]
            del self._sample_times[:i]
        return visible - self.config.lag, samples

    def in_flight(self) -> int:
        return self.serving.in_flight()


def closed_form_replicas(rate: float, cost: float, target: float, limit: float) -> int:
    """Steady state of a utilisation-target autoscaler: ``ceil(rate × cost / (target ×
    limit))`` replicas (at least 1)."""
    return max(1, math.ceil(rate * cost / (target * limit) - 1e-9))
