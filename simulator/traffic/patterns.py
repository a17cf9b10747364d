"""Request-rate patterns λ(t) (requests per second) and their integrals Λ(t).

Every pattern is a pure function of simulated seconds since the service started. Arrivals
are made from Λ by time change (``arrivals.py``), so each pattern only has to give its
rate, its exact cumulative count and the inverse: exact for the piecewise-linear patterns
(constant, step, ramp, replay: a linear or quadratic equation per segment), linear
interpolation between whole seconds (``GRID_S``) for the sinusoid (the error in an
arrival time is below 1e-4 s for a daily cycle).

Patterns (the ``traffic`` object of a service, ``docs/services.md``):

- ``constant`` / ``poisson``: ``rate``;
- ``step``: ``steps`` ``[[t0, r0], [t1, r1], ...]`` (rate ``r_i`` from ``t_i``; ``t0`` = 0);
- ``ramp``: ``from``, ``to`` over ``[start, start + duration]`` (``from`` before, ``to`` after);
- ``sinusoid``: ``mean + amplitude * sin(2π (t + phase) / period)`` (``amplitude`` ≤ ``mean``);
- ``replay``: a CSV series ``time,rate`` held piecewise constant (the rate of a row holds
  until the next row's time; the last row holds to the end).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

GRID_S = 1.0  # the sinusoid's Λ⁻¹ is interpolated between multiples of this


class Pattern:
    """λ(t) ≥ 0 and Λ(t) = ∫₀ᵗ λ."""

    def rate(self, t: float) -> float:
        raise NotImplementedError

    def cumulative(self, t: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def breakpoints(self, t0: float, t1: float) -> list[float]:
        """Times in (t0, t1) where λ has a jump or a kink."""
        return []

    def invert(self, units: np.ndarray, t0: float, t1: float) -> np.ndarray:
        """Λ⁻¹(u) = the last t with Λ(t) ≤ u, for units with Λ(t0) ≤ u < Λ(t1). The result
        depends on ``u`` only (not on the window), so arrivals are the same floats however
        time is cut."""
        raise NotImplementedError

    def max_rate(self, t0: float, t1: float) -> float:
        raise NotImplementedError


@dataclass(frozen=True)
class Piecewise(Pattern):
    """Piecewise-linear λ through ``(times[i], rates[i])``; before ``times[0]`` (= 0) and
    after the last point it holds the end values. A jump is two points at one time."""

    times: tuple[float, ...]
    rates: tuple[float, ...]

    def __post_init__(self) -> None:
        t = np.asarray(self.times, dtype=float)
        r = np.asarray(self.rates, dtype=float)
        # cumulative count at each point (trapezoids; zero-width segments add nothing)
        cum = np.concatenate(([0.0], np.cumsum(np.diff(t) * (r[1:] + r[:-1]) / 2)))
        object.__setattr__(self, "_t", t)
        object.__setattr__(self, "_r", r)
        object.__setattr__(self, "_cum", cum)

    def rate(self, t: float) -> float:
        times = self.times
        if t >= times[-1]:
            return self.rates[-1]
        i = bisect.bisect_right(times, t) - 1
        if i < 0:
            return self.rates[0]
        t0, t1 = times[i], times[i + 1]
        r0, r1 = self.rates[i], self.rates[i + 1]
        return r0 if t1 == t0 else r0 + (r1 - r0) * (t - t0) / (t1 - t0)

    def cumulative(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        tp, rp, cum = self._t, self._r, self._cum  # type: ignore[attr-defined]
        i = np.clip(np.searchsorted(tp, t, side="right") - 1, 0, len(tp) - 1)
        t0 = tp[i]
        r0 = rp[i]
        nxt = np.minimum(i + 1, len(tp) - 1)
        span = tp[nxt] - t0
        slope = np.where((nxt > i) & (span > 0), (rp[nxt] - r0) / np.where(span > 0, span, 1), 0.0)
        dt = np.maximum(t - t0, 0.0)
        return cum[i] + r0 * dt + slope * dt * dt / 2

    def breakpoints(self, t0: float, t1: float) -> list[float]:
        return sorted({t for t in self.times if t0 < t < t1})

    def invert(self, units: np.ndarray, t0: float, t1: float) -> np.ndarray:
        tp, rp, cum = self._t, self._r, self._cum  # type: ignore[attr-defined]
        i = np.clip(np.searchsorted(cum, units, side="right") - 1, 0, len(tp) - 1)
        nxt = np.minimum(i + 1, len(tp) - 1)
        span = tp[nxt] - tp[i]
        r0 = rp[i]
        slope = np.where((nxt > i) & (span > 0), (rp[nxt] - r0) / np.where(span > 0, span, 1), 0.0)
        d = units - cum[i]
        # r0 x + slope x² / 2 = d
        with np.errstate(divide="ignore", invalid="ignore"):
            flat = d / np.where(r0 > 0, r0, np.inf)
            root = (-r0 + np.sqrt(np.maximum(r0 * r0 + 2 * slope * d, 0.0))) / np.where(
                slope != 0, slope, 1.0
            )
        return tp[i] + np.where(slope == 0, flat, root)

    def max_rate(self, t0: float, t1: float) -> float:
        inside = [r for t, r in zip(self.times, self.rates, strict=True) if t0 <= t <= t1]
        return max([self.rate(t0), self.rate(t1), *inside])


@dataclass(frozen=True)
class Sinusoid(Pattern):
    mean: float
    amplitude: float
    period: float
    phase: float = 0.0

    def rate(self, t: float) -> float:
        w = 2 * math.pi / self.period
        return self.mean + self.amplitude * math.sin(w * (t + self.phase))

    def cumulative(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        w = 2 * math.pi / self.period
        return self.mean * t + self.amplitude / w * (
            math.cos(w * self.phase) - np.cos(w * (t + self.phase))
        )

    def max_rate(self, t0: float, t1: float) -> float:
        return self.mean + abs(self.amplitude)

    def invert(self, units: np.ndarray, t0: float, t1: float) -> np.ndarray:
        # linear interpolation on a global grid (multiples of GRID_S): the same grid
        # points whatever the window, so the same floats
        lo = math.floor(t0 / GRID_S)
        hi = math.ceil(t1 / GRID_S)
        grid = np.arange(lo, hi + 1, dtype=float) * GRID_S
        cum = self.cumulative(grid)
        i = np.clip(np.searchsorted(cum, units, side="right"), 1, len(cum) - 1)
        c0, c1 = cum[i - 1], cum[i]
        return grid[i - 1] + (units - c0) / np.where(c1 > c0, c1 - c0, 1.0) * GRID_S


def constant(rate: float) -> Pattern:
    return Piecewise((0.0,), (float(rate),))


def step(steps: Sequence[Sequence[float]]) -> Pattern:
    times: list[float] = []
    rates: list[float] = []
    for i, (t, r) in enumerate(steps):
        if i:
            times.append(float(t))
            rates.append(rates[-1])  # hold the previous rate up to the jump
        times.append(float(t))
        rates.append(float(r))
    return Piecewise(tuple(times), tuple(rates))


def ramp(start_rate: float, end_rate: float, start: float, duration: float) -> Pattern:
    if duration <= 0:
        return step([[0.0, start_rate], [start, end_rate]]) if start > 0 else constant(end_rate)
    if start > 0:
        return Piecewise(
            (0.0, float(start), float(start + duration)),
            (float(start_rate), float(start_rate), float(end_rate)),
        )
    return Piecewise((0.0, float(duration)), (float(start_rate), float(end_rate)))


def replay(series: Sequence[tuple[float, float]]) -> Pattern:
    """``series``: (time, rate) rows, times increasing, the first at 0."""
    return step([[t, r] for t, r in series])


def expected_requests(pattern: Pattern, duration: float) -> float:
    return float(pattern.cumulative(np.array([duration]))[0])
