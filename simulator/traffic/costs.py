"""CPU cost of one request (CPU-seconds at one core), a distribution.

``{"distribution": "exponential", "mean": 0.05}`` and friends:

- ``constant``: ``value``;
- ``exponential``: ``mean``;
- ``uniform``: ``low``, ``high``;
- ``lognormal``: ``mean`` and ``cv`` (coefficient of variation, std/mean).

Each knows its mean, its squared coefficient of variation, its quantiles and its
survival function — what the fluid model needs (``fluid.py``) — and draws samples from
the service's own random stream.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

DISTRIBUTIONS = ("constant", "exponential", "uniform", "lognormal")


@dataclass(frozen=True)
class Cost:
    distribution: str
    a: float  # constant: value; exponential: mean; uniform: low; lognormal: mean
    b: float = 0.0  # uniform: high; lognormal: cv

    @property
    def mean(self) -> float:
        if self.distribution == "uniform":
            return (self.a + self.b) / 2
        return self.a

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        kind = self.distribution
        if kind == "constant":
            return np.full(n, self.a)
        if kind == "exponential":
            return rng.exponential(self.a, n)
        if kind == "uniform":
            return rng.uniform(self.a, self.b, n)
        sigma, mu = self._lognormal()
        return rng.lognormal(mu, sigma, n)

    def _lognormal(self) -> tuple[float, float]:
        sigma = math.sqrt(math.log1p(self.b**2))
        return sigma, math.log(self.a) - sigma**2 / 2

    def quantile(self, q: float) -> float:
        kind = self.distribution
        if kind == "constant":
            return self.a
        if kind == "exponential":
            return -self.a * math.log1p(-q)
        if kind == "uniform":
            return self.a + q * (self.b - self.a)
        sigma, mu = self._lognormal()
        return math.exp(mu + sigma * NormalDist().inv_cdf(q))

    def survival(self, x: float) -> float:
        """P(cost > x)."""
        kind = self.distribution
        if x <= 0:
            return 1.0
        if kind == "constant":
            return 1.0 if self.a > x else 0.0
        if kind == "exponential":
            return math.exp(-x / self.a)
        if kind == "uniform":
            if self.b == self.a:
                return 1.0 if self.a > x else 0.0
            return min(1.0, max(0.0, (self.b - x) / (self.b - self.a)))
        sigma, mu = self._lognormal()
        if sigma == 0:
            return 1.0 if self.a > x else 0.0
        return 1.0 - NormalDist().cdf((math.log(x) - mu) / sigma)


def parse_cost(spec: dict) -> Cost:
    """A validated cost object (see ``simulator.traffic.spec``) → :class:`Cost`."""
    kind = spec["distribution"]
    if kind == "constant":
        return Cost(kind, float(spec["value"]))
    if kind == "exponential":
        return Cost(kind, float(spec["mean"]))
    if kind == "uniform":
        return Cost(kind, float(spec["low"]), float(spec["high"]))
    return Cost(kind, float(spec["mean"]), float(spec.get("cv", 1.0)))
