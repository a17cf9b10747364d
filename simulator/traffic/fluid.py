"""The fluid model: each stretch of time between two changes (a tick, a replica set
change) is taken in its stationary regime, per replica, in closed form.

Per Ready replica ``i`` (limit ``L`` cores) round-robin gives ``λ_i = λ / R``; with
``ρ = λ_i c / L`` (``c`` the mean cost):

- ``ρ < 1``: with Poisson arrivals the replica is the birth-death chain of the exact
  model (total service rate ``min(n, L)/c``); processor sharing with this rate is
  insensitive to the cost distribution, so the mean number in flight ``N`` is the
  chain's (computed exactly: Erlang-C-like finite part plus a geometric tail). A replica
  does not see Poisson arrivals, though: round-robin hands it every ``R``-th request, and
  regular traffic is regular, so the part of ``N`` above the offered load is scaled by
  ``(ca² + 1)/2`` (Allen–Cunneen; ``ca²`` = 1/R for Poisson traffic, 0 for regular).
  The mean latency is ``N / λ_i``
  (Little), and a request of cost ``x`` takes ``S·x`` with the slowdown ``S = N/(λ_i c)``
  (PS's latency is proportional to the cost on average). Latency quantiles are ``S``
  times the cost's; the timed-out fraction is ``P(cost > T/S)``.
- ``ρ ≥ 1`` (overload under processor sharing with a timeout ``T``): in flight requests
  pile up until they time out; the stationary state has ``N`` requests sharing ``L``
  cores, a request of cost ``x`` would take ``x N / L`` and completes iff
  ``x ≤ x* = T L / N``, with ``x*`` solving ``E[min(cost, x*)] = L / λ_i`` (work
  conservation: the replica is saturated). Latency of the completed ones is ``x T / x*``;
  the rest time out. This is PS's goodput collapse, which the exact model shows too.

What it does not model (and the exact model does): queues building up and draining
(transients: the first seconds after a step, a replica becoming Ready under a backlog),
the randomness of arrivals (counts are expected values), the variance of the slowdown
(the tails: ``p99`` is ``S`` times the cost's ``p99``). ``docs/services.md`` has the
measured differences.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from simulator.traffic.costs import Cost
from simulator.traffic.serving import ReplicaState, Tally, TrafficConfig


@dataclass(frozen=True)
class Regime:
    """Stationary regime of one replica for a given arrival rate."""

    in_flight: float  # mean requests in flight
    busy_cores: float  # mean CPU used (cores)
    completed_fraction: float  # of arrivals
    scale: float  # latency = scale × cost, for costs ≤ cutoff
    cutoff: float  # costs above it time out (inf: none)


def mean_in_system(lam: float, cost: float, limit: float) -> float:
    """Mean number in the chain with arrival rate ``lam`` and service rate
    ``min(n, limit)/cost`` (requires ``lam·cost < limit``)."""
    if lam <= 0:
        return 0.0
    a = lam * cost  # offered load in cores
    rho = a / limit
    k = max(1, math.floor(limit))  # up to k in flight, each has a core of its own
    # π(n) ∝ a^n / n!  for n ≤ k, then × (a / limit)^(n - k) beyond (rate min(n, L))
    weights = [1.0]
    for n in range(1, k + 1):
        weights.append(weights[-1] * a / min(n, limit))
    head_mass = sum(weights)
    head_mean = sum(n * w for n, w in enumerate(weights))
    # tail n = k + j, j ≥ 1: w_k ρ^j
    wk = weights[-1]
    tail_mass = wk * rho / (1 - rho)
    tail_mean = wk * (k * rho / (1 - rho) + rho / (1 - rho) ** 2)
    return (head_mean + tail_mean) / (head_mass + tail_mass)


def _partial_mean(cost: Cost, x: float, steps: int = 64) -> float:
    """E[min(cost, x)] = ∫₀ˣ P(cost > u) du (Simpson)."""
    if x <= 0:
        return 0.0
    h = x / steps
    total = cost.survival(0.0) + cost.survival(x)
    for i in range(1, steps):
        total += (4 if i % 2 else 2) * cost.survival(i * h)
    return total * h / 3


def _solve_partial_mean(cost: Cost, target: float) -> float:
    """x with E[min(cost, x)] = target (< mean): closed forms where there are."""
    m = cost.mean
    if cost.distribution == "exponential":
        return -m * math.log1p(-target / m)
    if cost.distribution == "constant":
        return target
    if cost.distribution == "uniform":
        lo, hi = cost.a, cost.b
        if target <= lo or hi == lo:
            return target
        # E[min(X, x)] = lo + (span² - (hi - x)²) / (2 span) for lo ≤ x ≤ hi
        span = hi - lo
        return hi - math.sqrt(max(0.0, span * span - 2 * span * (target - lo)))
    lo, hi = 0.0, max(m, 1e-12)
    while _partial_mean(cost, hi) < target and hi < 1e9:
        hi *= 2
    for _ in range(40):
        mid = (lo + hi) / 2
        if _partial_mean(cost, mid) < target:
            lo = mid
        else:
            hi = mid
    return hi


@lru_cache(maxsize=4096)
def regime(lam: float, cost: Cost, limit: float, timeout: float, ca2: float = 1.0) -> Regime:
    """``ca2``: squared coefficient of variation of the replica's inter-arrival times (1 for
    Poisson arrivals; round-robin over ``R`` replicas makes it ``1/R`` for a Poisson
    stream and 0 for a regular one)."""
    c = cost.mean
    if lam <= 0:
        return Regime(0.0, 0.0, 1.0, 1.0, math.inf)
    rho = lam * c / limit
    if rho < 1:
        # Allen–Cunneen: the part of N due to sharing scales with (ca² + 1) / 2 (the service
        # side is insensitive under PS, so its variability counts as exponential's)
        a = lam * c
        n = a + (mean_in_system(lam, c, limit) - a) * (ca2 + 1) / 2
        slowdown = max(1.0, n / (lam * c)) if c > 0 else 1.0
        cutoff = timeout / slowdown
        done = 1.0 - cost.survival(cutoff)
        return Regime(n, lam * c, done, slowdown, cutoff)
    # overload: solve E[min(cost, x)] = limit / lam for x (increasing in x)
    # (at ρ = 1 exactly nothing need time out in the fluid limit: keep x* finite)
    x_star = _solve_partial_mean(cost, min(limit / lam, c * (1 - 1e-9)))
    n = timeout * limit / x_star if x_star > 0 else math.inf
    done = 1.0 - cost.survival(x_star)
    return Regime(n, float(limit), done, timeout / x_star, x_star)


def mixture_quantile(cost: Cost, parts: list[tuple[float, Regime]], q: float) -> float | None:
    """Quantile ``q`` of the latency of completed requests over ``parts`` ((weight =
    arrivals, regime) pairs): latency = scale × cost for cost ≤ cutoff."""
    comps = []
    for weight, reg in parts:
        w = weight * reg.completed_fraction
        if w > 0:
            comps.append((w, reg.scale, reg.cutoff))
    if not comps:
        return None
    total = sum(w for w, _s, _x in comps)

    def cdf(y: float) -> float:
        acc = 0.0
        for w, scale, cutoff in comps:
            x = min(y / scale, cutoff)
            within = 1.0 - cost.survival(x)
            below_cut = 1.0 - cost.survival(cutoff)
            acc += w * (within / below_cut if below_cut > 0 else 0.0)
        return acc / total

    hi = max(
        scale * (cutoff if math.isfinite(cutoff) else cost.quantile(0.999999))
        for _w, scale, cutoff in comps
    )
    lo = 0.0
    for _ in range(50):
        mid = (lo + hi) / 2
        if cdf(mid) < q:
            lo = mid
        else:
            hi = mid
    return hi


class FluidServing:
    """Each stretch in its stationary regime (the
    :class:`~simulator.traffic.serving.Serving` protocol): expected counts, the Ready
    replicas sharing the arrivals evenly."""

    splits_every_advance = False

    def __init__(self, config: TrafficConfig, tally: Tally) -> None:
        self.config = config
        self.tally = tally
        self._pods: dict[str, tuple[float, float]] = {}  # (cpu, area) since it started
        self._parts: list[tuple[float, Regime]] = []  # (arrivals, regime) of the current tick
        self._carry = 0.0  # fractional arrivals not counted yet
        self._done_carry = 0.0  # ... and completions

    def add(self, name: str, state: ReplicaState, t: float) -> None:
        self._pods[name] = (0.0, 0.0)

    def remove(self, name: str, t: float) -> None:
        self._pods.pop(name, None)

    def resize(self, name: str, state: ReplicaState, t: float) -> None:
        """Nothing to do: each stretch takes the limit its replicas have then."""

    def serve(
        self, t0: float, t1: float, ready: Sequence[str], states: Mapping[str, ReplicaState]
    ) -> None:
        if t1 <= t0:
            return
        config, tally = self.config, self.tally
        lam0, lam1 = (float(x) for x in config.pattern.cumulative(np.array([t0, t1])))
        expected = max(0.0, lam1 - lam0)
        # expected counts are fractional: keep the remainder so totals stay exact integers
        self._carry += expected
        arrivals = int(self._carry)
        self._carry -= arrivals
        tally.arrived(arrivals, expected * config.cost.mean)
        dt = t1 - t0
        if not ready:
            tally.dropped(arrivals)
            return
        lam = expected / dt / len(ready)
        per_pod = arrivals / len(ready)
        ca2 = 1.0 / len(ready) if config.process == "poisson" else 0.0
        done_total = 0.0
        for name in ready:
            reg = regime(lam, config.cost, states[name].limit_cores, config.timeout, ca2)
            self._parts.append((per_pod, reg))
            cpu, area = self._pods[name]
            self._pods[name] = (cpu + reg.busy_cores * dt, area + reg.in_flight * dt)
            tally.pods[name].arrivals += per_pod
            done_total += per_pod * reg.completed_fraction
        self._done_carry += done_total
        completed = min(int(self._done_carry), arrivals)
        self._done_carry -= completed
        tally.completed(completed)
        tally.timed_out(arrivals - completed)
        tally.totals.work_completed += completed * config.cost.mean

    def usage(self, name: str, t: float) -> tuple[float, float]:
        return self._pods[name]

    def take_latency_quantiles(self) -> tuple[float | None, float | None, float | None]:
        parts, self._parts = self._parts, []
        if not parts:
            return None, None, None
        cost = self.config.cost
        p50, p95, p99 = (mixture_quantile(cost, parts, q) for q in (0.5, 0.95, 0.99))
        return p50, p95, p99

    def in_flight(self) -> int:
        return 0  # expected values: nothing is individually in flight
