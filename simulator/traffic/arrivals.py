"""Arrival times from a rate pattern, in chunks, seeded.

Both processes are a time change of a unit-rate process through Λ (the pattern's
cumulative count): the k-th arrival is at ``Λ⁻¹(u_k)`` with

- ``regular``: ``u_k = k`` (k = 1, 2, …) — evenly spaced in "request units", so a
  constant 20/s gives an arrival every 50 ms exactly;
- ``poisson``: ``u_k`` = the arrival times of a unit-rate Poisson process (sums of
  standard exponentials) — a non-homogeneous Poisson process of rate λ(t).

Λ⁻¹(u) is the last t with Λ(t) ≤ u (where the rate is 0 nothing arrives; see
``Pattern.invert``). Chunks are consecutive windows ``[t0, t1)``; the same seed gives the same
times whatever the chunk boundaries.
"""

from __future__ import annotations

import math

import numpy as np

from simulator.traffic.patterns import Pattern

_BATCH = 4096  # exponentials drawn at a time (poisson)


class ArrivalStream:
    def __init__(self, pattern: Pattern, process: str, rng: np.random.Generator) -> None:
        if process not in ("regular", "poisson"):
            raise ValueError(f"unknown arrival process {process!r}")
        self.pattern = pattern
        self.process = process
        self.rng = rng
        self._next_unit = 1.0  # regular: the next unit
        self._pending = np.empty(0)  # poisson: unit times drawn, not yet used
        self._last_unit = 0.0
        self._t = 0.0

    def take(self, t1: float) -> np.ndarray:
        """Arrival times in ``[previous t1, t1)``, increasing."""
        t0 = self._t
        if t1 <= t0:
            return np.empty(0)
        self._t = t1
        lam0, lam1 = (float(x) for x in self.pattern.cumulative(np.array([t0, t1])))
        if lam1 <= lam0:
            return np.empty(0)
        units = self._units_below(lam1)
        if units.size == 0:
            return units
        times = self.pattern.invert(units, t0, t1)
        # the inverse must not push a time out of its chunk (float rounding)
        return np.clip(times, t0, math.nextafter(t1, -math.inf))

    def _units_below(self, lam1: float) -> np.ndarray:
        if self.process == "regular":
            first = self._next_unit
            if first >= lam1:
                return np.empty(0)
            count = math.ceil(lam1 - first)
            if first + count - 1 >= lam1:
                count -= 1
            count = max(count, 0)
            units = first + np.arange(count, dtype=float)
            self._next_unit = first + count
            return units
        # poisson: unit-rate event times, drawn in batches; what a chunk did not use is
        # kept, so the times do not depend on where the chunks end
        pending = self._pending
        while pending.size == 0 or pending[-1] < lam1:
            start = float(pending[-1]) if pending.size else self._last_unit
            gaps = self.rng.standard_exponential(_BATCH)
            pending = np.concatenate((pending, start + np.cumsum(gaps)))
        cut = int(np.searchsorted(pending, lam1, side="left"))
        units, self._pending = pending[:cut], pending[cut:]
        if units.size:
            self._last_unit = float(units[-1])
        return units
