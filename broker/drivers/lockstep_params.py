"""Batkube's lockstep parameters and its Go-style durations: what the command line needs,
without importing the broker (``timewarp simulate`` checks its arguments before it
starts anything)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal

_UNITS_NS = {
    "ns": 1,
    "us": 10**3,
    "µs": 10**3,
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_duration_ns(text: str) -> int:
    """A Go-style duration (``20ms``, ``5s``, ``1m30s``, ``0``) -> nanoseconds.

    Raises ValueError with a message naming what was expected."""
    s = text.strip()
    if s == "0":
        return 0
    pos, total = 0, Decimal(0)
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            raise ValueError(
                f"expected a duration with a unit (ns, us, ms, s, m, h) like 20ms, 5s or 1m30s, "
                f"got {text!r}"
            )
        total += Decimal(m.group(1)) * _UNITS_NS[m.group(2)]
        pos = m.end()
    if not s:
        raise ValueError("expected a duration like 20ms, got an empty string")
    return int(total.to_integral_value())


@dataclass(frozen=True)
class LockstepParams:
    """Batkube's parameters (names and defaults of its command line), in nanoseconds."""

    timeout_ns: int = 20 * 10**6
    min_delay_ns: int = 0
    base_timestep_ns: int = 100 * 10**6
    max_timestep_ns: int = 20 * 10**9
    backoff_multiplier: float = 2.0
    fast_forward_on_no_pending_jobs: bool = False
    detect_scheduler_deadlock: bool = False
    scheduler_crash_timeout_ns: int = 5 * 10**9

    def __post_init__(self) -> None:
        problems = []
        if self.timeout_ns < 0:
            problems.append("--timeout-value must not be negative")
        if self.min_delay_ns < 0:
            problems.append("--min-delay must not be negative")
        if self.base_timestep_ns <= 0:
            problems.append("--base-simulation-timestep must be positive")
        if self.max_timestep_ns < self.base_timestep_ns:
            problems.append(
                "--max-simulation-timestep must be at least --base-simulation-timestep "
                f"({self.max_timestep_ns / 1e9:g} s < {self.base_timestep_ns / 1e9:g} s)"
            )
        if not (self.backoff_multiplier >= 1 and math.isfinite(self.backoff_multiplier)):
            problems.append(
                f"--backoff-multiplier must be a number >= 1, got {self.backoff_multiplier}"
            )
        if self.scheduler_crash_timeout_ns <= 0:
            problems.append("--scheduler-crash-timeout must be positive")
        if problems:
            raise ValueError("; ".join(problems))
