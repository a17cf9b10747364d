"""Knative Serving's KPA decision (``pkg/autoscaler/scaling/autoscaler.go``), on total
request concurrency.

Every tick (2 s) the autoscaler records the observed concurrency (summed over the
revision's pods) and averages it over two windows: the **stable** window (60 s) and the
**panic** window (10 % of it, 6 s). With a per-pod target ``T`` (the
``autoscaling.knative.dev/target``, 100 by default, times the target utilisation, 70 %):

- ``stable = ceil(stable average / T)``, ``panic = ceil(panic average / T)``, each
  clamped to ``[floor(ready / max-scale-down-rate), ceil(ready × max-scale-up-rate)]``
  (rates 2 and 1000);
- panic starts when ``panic / ready ≥ panic threshold`` (200 %); while panicking the
  count never goes down (the highest panic recommendation since it started); panic ends
  once a whole stable window has passed without crossing the threshold again;
- outside panic the stable recommendation is the answer;
- the result is clamped to ``[min-scale, max-scale]``.

Knative scales to zero through its activator, which buffers requests while a pod
starts; timewarp's traffic model has no activator (a request with no Ready pod fails),
so this sample's ``min-scale`` defaults to 1 (``--allow-zero`` lifts it).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

STABLE_WINDOW_S = 60.0
PANIC_WINDOW_PERCENT = 10.0
PANIC_THRESHOLD_PERCENT = 200.0
TARGET = 100.0
TARGET_UTILIZATION_PERCENT = 70.0
MAX_SCALE_UP_RATE = 1000.0
MAX_SCALE_DOWN_RATE = 2.0
TICK_S = 2.0


@dataclass(frozen=True)
class Settings:
    target: float = TARGET
    utilization_percent: float = TARGET_UTILIZATION_PERCENT
    stable_window_s: float = STABLE_WINDOW_S
    panic_window_percent: float = PANIC_WINDOW_PERCENT
    panic_threshold_percent: float = PANIC_THRESHOLD_PERCENT
    max_scale_up_rate: float = MAX_SCALE_UP_RATE
    max_scale_down_rate: float = MAX_SCALE_DOWN_RATE
    min_scale: int = 1
    max_scale: int = 0  # 0: no bound

    @property
    def per_pod(self) -> float:
        return self.target * self.utilization_percent / 100

    @property
    def panic_window_s(self) -> float:
        return self.stable_window_s * self.panic_window_percent / 100


@dataclass
class Kpa:
    settings: Settings = field(default_factory=Settings)
    samples: deque[tuple[float, float]] = field(default_factory=deque)  # (time, concurrency)
    panic_since: float | None = None
    max_panic_pods: int = 0

    def record(self, now: float, concurrency: float) -> None:
        self.samples.append((now, concurrency))
        while self.samples and self.samples[0][0] <= now - self.settings.stable_window_s:
            self.samples.popleft()

    def _average(self, now: float, window: float) -> float | None:
        values = [c for t, c in self.samples if t > now - window]
        return sum(values) / len(values) if values else None

    def decide(self, now: float, ready: int) -> int | None:
        """The desired pod count, or None without data (Knative keeps the scale)."""
        s = self.settings
        stable_avg = self._average(now, s.stable_window_s)
        panic_avg = self._average(now, s.panic_window_s)
        if stable_avg is None or panic_avg is None:
            return None
        ready = max(ready, 1)
        up = math.ceil(s.max_scale_up_rate * ready)
        down = math.floor(ready / s.max_scale_down_rate) if s.max_scale_down_rate > 1 else 0
        stable = min(max(math.ceil(stable_avg / s.per_pod), down), up)
        panic = min(max(math.ceil(panic_avg / s.per_pod), down), up)
        over = panic / ready >= s.panic_threshold_percent / 100
        if self.panic_since is None and over:
            self.panic_since = now
        elif over:
            self.panic_since = now  # extend the panic
        elif self.panic_since is not None and now >= self.panic_since + s.stable_window_s:
            self.panic_since = None
            self.max_panic_pods = 0
        desired = stable
        if self.panic_since is not None:
            self.max_panic_pods = max(self.max_panic_pods, panic, ready)
            desired = self.max_panic_pods
        desired = max(desired, s.min_scale)
        if s.max_scale:
            desired = min(desired, s.max_scale)
        return desired

    @property
    def panicking(self) -> bool:
        return self.panic_since is not None
