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
``≤ t`` is closed. ``exact`` serves every request (``exact.py``); ``fluid`` works per
stretch between changes (``fluid.py``). Both give the same rows and samples.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from simulator.traffic.arrivals import ArrivalStream
from simulator.traffic.costs import Cost
from simulator.traffic.exact import Replica
from simulator.traffic.fluid import Regime, mixture_quantile, regime
from simulator.traffic.patterns import Pattern

# Metrics pipelines: (scrape tick, lag) in seconds. docs/services.md says where they come from.
PIPELINES = {
    "metrics-server": (15.0, 0.0),  # release manifest --metric-resolution=15s
    "metrics-server-code-default": (60.0, 0.0),  # the binary's own default resolution
    "skenario": (10.0, 4.0),  # Skenario's metrics tick and pipeline lag
}
ROW_FIELDS = (
    "time",
    "service",
    "desired_replicas",
    "ready_replicas",
    "request_rate",
    "latency_p50",
    "latency_p95",
    "latency_p99",
    "failed_requests",
    "cpu_utilisation",
    "completed_requests",
    "timed_out_requests",
    "dropped_requests",
    "mean_concurrency",
    "cpu_cores",
)


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
class TickRow:
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
        def num(x: float | None, digits: int = 6) -> str:
            return "" if x is None else f"{x:.{digits}f}".rstrip("0").rstrip(".") or "0"

        return [
            num(self.time, 3),
            self.service,
            str(self.desired_replicas),
            str(self.ready_replicas),
            num(self.request_rate, 4),
            num(self.latency_p50),
            num(self.latency_p95),
            num(self.latency_p99),
            str(self.failed_requests),
            num(self.cpu_utilisation, 4),
            str(self.completed_requests),
            str(self.timed_out_requests),
            str(self.dropped_requests),
            num(self.mean_concurrency, 4),
            num(self.cpu_cores, 4),
        ]


@dataclass(frozen=True)
class PodSample:
    """What a scraper reads of one pod at one tick (averages over ``window`` seconds
    ending at ``time``)."""

    time: float
    window: float
    cpu_cores: float
    concurrency: float
    requests_per_second: float


@dataclass
class _Acc:
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
class _Window(_Outcomes):
    latencies: list[float] = field(default_factory=list)
    fluid: list[tuple[float, Regime]] = field(default_factory=list)
    ready_request_area: float = 0.0
    cpu: float = 0.0
    area: float = 0.0


class ServiceModel:
    def __init__(self, config: TrafficConfig) -> None:
        if config.model not in ("exact", "fluid"):
            raise ValueError(f"unknown model {config.model!r}")
        self.config = config
        seeds = np.random.SeedSequence([config.seed & 0xFFFFFFFF, config.seed >> 32 & 0xFFFFFFFF])
        arrival_seed, cost_seed = seeds.spawn(2)
        self._arrivals = ArrivalStream(
            config.pattern, config.process, np.random.Generator(np.random.PCG64(arrival_seed))
        )
        self._cost_rng = np.random.Generator(np.random.PCG64(cost_seed))
        self.now = 0.0
        self.desired = 0
        self.states: dict[str, ReplicaState] = {}
        self.ready: list[str] = []  # sorted names of Ready replicas
        self._next_rr = 0  # index into ready of the next to serve
        self._last_served: str | None = None
        self.replicas: dict[str, Replica] = {}  # exact: the servers
        self._acc: dict[str, _Acc] = {}
        self._fluid_pods: dict[str, tuple[float, float]] = {}  # fluid: (cpu, area) totals
        self._seq = 0
        self.totals = Totals()
        self._window = _Window()
        self._window_start = 0.0
        self._tick_index = 0  # ticks closed; the next closes at (index + 1) × tick
        self._fluid_carry = 0.0  # fluid: fractional arrivals not counted yet
        self._fluid_done_carry = 0.0  # ... and completions
        self._ready_request = 0.0  # Σ request cores of Ready replicas
        self._ready_at = 0.0
        self._rows: list[TickRow] = []
        self._samples: list[tuple[float, dict[str, PodSample]]] = []  # (visible at, samples)
        self._sample_times: list[float] = []
        self.ended = False

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
            self._remove(name, t)
        for name in sorted(states):
            state = states[name]
            old = self.states.get(name)
            if old is None:
                self._add(name, state, t)
            elif old.limit_cores != state.limit_cores and name in self.replicas:
                self._exact_flush(name, t)
                self.replicas[name].limit = state.limit_cores
        self.states = dict(states)
        ready = sorted(n for n, s in states.items() if s.ready)
        if ready != self.ready:
            self.ready = ready
            # round-robin goes on after the last replica served (in name order)
            last = self._last_served
            self._next_rr = 0 if last is None else bisect.bisect_right(ready, last)
        self._ready_request = sum(states[n].request_cores for n in ready)

    def _add(self, name: str, state: ReplicaState, t: float) -> None:
        self._acc[name] = _Acc(since=t)
        if self.config.model == "exact":
            self.replicas[name] = Replica(state.limit_cores, t)
        else:
            self._fluid_pods[name] = (0.0, 0.0)

    def _remove(self, name: str, t: float) -> None:
        replica = self.replicas.pop(name, None)
        if replica is not None:
            replica.advance(t, self._window.latencies)
            self._harvest(replica)
            self._window.cpu += replica.cpu - self._acc[name].cpu
            self._window.area += replica.area - self._acc[name].area
            lost = replica.drop_all()
            self._window.lost += lost
            self.totals.lost += lost
        self._fluid_pods.pop(name, None)
        self._acc.pop(name, None)

    def _exact_flush(self, name: str, t: float) -> None:
        replica = self.replicas[name]
        replica.advance(t, self._window.latencies)
        self._harvest(replica)

    def _harvest(self, replica: Replica) -> None:
        """Move a replica's completion/timeout counts into the window and totals."""
        if replica.completed:
            self._window.completed += replica.completed
            self.totals.completed += replica.completed
            replica.completed = 0
        if replica.expired:
            self._window.timed_out += replica.expired
            self.totals.timed_out += replica.expired
            replica.expired = 0
        if replica.work_done:
            self.totals.work_completed += replica.work_done
            replica.work_done = 0.0

    def _integrate_ready(self, t: float) -> None:
        self._window.ready_request_area += self._ready_request * (t - self._ready_at)
        self._ready_at = t

    # ------------------------------------------------------------------ time
    def next_tick(self) -> float:
        return (self._tick_index + 1) * self.config.tick

    def advance_to(self, t: float) -> None:
        self._advance(t, split=self.config.model == "exact")

    def _advance(self, t: float, split: bool) -> None:
        """Settle everything before ``t``. The fluid model cuts its stretches only at ticks
        and at changes (``split``), so its rows do not depend on how often it is asked."""
        end = self.config.duration
        while self.now < t and not self.ended:
            boundary = min(t, self.next_tick(), end)
            closes = boundary >= self.next_tick() or boundary >= end
            if not (split or closes):
                return
            if self.config.model == "exact":
                self._serve_until(boundary)
            else:
                self._fluid_until(boundary)
            self.now = boundary
            if closes:
                self._close_tick(boundary)
                self._tick_index += 1
                if boundary >= end:
                    self.ended = True

    def _serve_until(self, t1: float) -> None:
        times = self._arrivals.take(t1)
        if not times.size:
            return
        costs = self.config.cost.sample(self._cost_rng, times.size)
        window, totals = self._window, self.totals
        window.arrivals += times.size
        totals.arrivals += times.size
        totals.work_arrived += float(costs.sum())
        ready = self.ready
        if not ready:
            window.dropped += times.size
            totals.dropped += times.size
            return
        replicas, acc, timeout = self.replicas, self._acc, self.config.timeout
        latencies = window.latencies
        k = self._next_rr
        count = len(ready)
        seq = self._seq
        targets = [replicas[name] for name in ready]
        per = [0] * count
        for arrival, cost in zip(times.tolist(), costs.tolist(), strict=True):
            if k >= count:
                k = 0
            replica = targets[k]
            replica.advance(arrival, latencies)
            replica.accept(arrival, cost, seq, timeout)
            seq += 1
            per[k] += 1
            k += 1
        self._seq = seq
        self._next_rr = k % count
        self._last_served = ready[(k - 1) % count]
        for name, n in zip(ready, per, strict=True):
            acc[name].arrivals += n
        for replica in targets:
            self._harvest(replica)

    def _fluid_until(self, t1: float) -> None:
        t0 = self.now
        if t1 <= t0:
            return
        lam0, lam1 = (float(x) for x in self.config.pattern.cumulative(np.array([t0, t1])))
        expected = max(0.0, lam1 - lam0)
        window, totals = self._window, self.totals
        # expected counts are fractional: keep the remainder so totals stay exact integers
        self._fluid_carry += expected
        arrivals = int(self._fluid_carry)
        self._fluid_carry -= arrivals
        window.arrivals += arrivals
        totals.arrivals += arrivals
        totals.work_arrived += expected * self.config.cost.mean
        dt = t1 - t0
        if not self.ready:
            window.dropped += arrivals
            totals.dropped += arrivals
            return
        lam = expected / dt / len(self.ready)
        per_pod = arrivals / len(self.ready)
        ca2 = 1.0 / len(self.ready) if self.config.process == "poisson" else 0.0
        done_total = 0.0
        for name in self.ready:
            state = self.states[name]
            reg = regime(lam, self.config.cost, state.limit_cores, self.config.timeout, ca2)
            window.fluid.append((per_pod, reg))
            cpu, area = self._fluid_pods[name]
            self._fluid_pods[name] = (cpu + reg.busy_cores * dt, area + reg.in_flight * dt)
            self._acc[name].arrivals += per_pod
            done_total += per_pod * reg.completed_fraction
        self._fluid_done_carry += done_total
        completed = min(int(self._fluid_done_carry), arrivals)
        self._fluid_done_carry -= completed
        window.completed += completed
        totals.completed += completed
        window.timed_out += arrivals - completed
        totals.timed_out += arrivals - completed
        totals.work_completed += completed * self.config.cost.mean

    def _close_tick(self, t: float) -> None:
        self._integrate_ready(t)
        window, start = self._window, self._window_start
        span = t - start
        samples: dict[str, PodSample] = {}
        exact = self.config.model == "exact"
        for name in sorted(self._acc):
            acc = self._acc[name]
            if exact:
                replica = self.replicas[name]
                replica.advance(t, window.latencies)
                self._harvest(replica)
                cpu, area = replica.cpu, replica.area
            else:
                cpu, area = self._fluid_pods[name]
            d_cpu, d_area = cpu - acc.cpu, area - acc.area
            window.cpu += d_cpu
            window.area += d_area
            since = max(acc.since, start)
            width = t - since
            if width > 0:
                rps = acc.arrivals / width
                samples[name] = PodSample(t, width, d_cpu / width, d_area / width, rps)
            acc.cpu, acc.area, acc.arrivals, acc.since = cpu, area, 0, t
        rate = window.arrivals / span if span > 0 else 0.0
        p50 = p95 = p99 = None
        if exact and window.latencies:
            p50, p95, p99 = (float(x) for x in np.percentile(window.latencies, [50, 95, 99]))
        elif not exact and window.fluid:
            cost = self.config.cost
            p50, p95, p99 = (mixture_quantile(cost, window.fluid, q) for q in (0.5, 0.95, 0.99))
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
        self._window = _Window()
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
        return sum(r.n for r in self.replicas.values())


def closed_form_replicas(rate: float, cost: float, target: float, limit: float) -> int:
    """Steady state of a utilisation-target autoscaler: ``ceil(rate × cost / (target ×
    limit))`` replicas (at least 1)."""
    return max(1, math.ceil(rate * cost / (target * limit) - 1e-9))
