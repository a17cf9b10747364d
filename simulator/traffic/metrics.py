"""The traffic model's metrics, each named once: the metrics pipelines, the per-pod custom
metrics, the columns of ``out_services.csv``.

Everything that names a metric reads these tables: the spec (``spec.py``: the pipelines),
the model (``model.py``: each pod's sample, each tick's row), the broker (the driver
``broker/cluster/traffic_driver.py`` publishes the samples; the facade's
``broker/facade/metrics.py`` serves ``custom.metrics.k8s.io`` for these names) and the
outputs (``commands/services_report.py``). A new per-pod metric is one row of
:data:`CUSTOM_POD_METRICS`; a new column one row of :data:`COLUMNS` plus the field of
:class:`~simulator.traffic.model.TickRow` the model fills.

No numpy here: the facade imports this module on every run, with services or not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# Metrics pipelines: (scrape tick, lag) in seconds. docs/services.md says where they come from.
PIPELINES = {
    "metrics-server": (15.0, 0.0),  # release manifest --metric-resolution=15s
    "metrics-server-code-default": (60.0, 0.0),  # the binary's own default resolution
    "skenario": (10.0, 4.0),  # Skenario's metrics tick and pipeline lag
}


@dataclass(frozen=True)
class PodWindow:
    """One pod's part of a metrics tick: what its metrics are computed from."""

    width: float  # seconds the pod ran in the tick (> 0)
    cpu_seconds: float  # CPU used
    area: float  # ∫ requests in flight dt
    arrivals: float  # requests routed to it (fluid: expected, fractional)


@dataclass(frozen=True)
class PodMetric:
    """A per-pod metric of ``custom.metrics.k8s.io/v1beta1`` (``pods/*/<name>``)."""

    name: str
    value: Callable[[PodWindow], float]
    meaning: str


CUSTOM_POD_METRICS = (
    PodMetric(
        "concurrency",
        lambda w: w.area / w.width,
        "requests in flight, time-averaged over the tick (what the KPA reads)",
    ),
    PodMetric(
        "requests_per_second",
        lambda w: w.arrivals / w.width,
        "requests routed to the pod in the tick, per second",
    ),
)
CUSTOM_METRIC_NAMES = tuple(m.name for m in CUSTOM_POD_METRICS)


def cpu_cores(window: PodWindow) -> float:
    """The pod's CPU use over the tick (``metrics.k8s.io``'s usage, in cores)."""
    return window.cpu_seconds / window.width


@dataclass(frozen=True)
class Column:
    """A column of ``out_services.csv``: ``digits`` decimals at most for a number that
    may be fractional (trailing zeros dropped, empty for None), else written as is."""

    name: str
    digits: int | None = None

    def format(self, value: object) -> str:
        if self.digits is None:
            return str(value)
        if value is None:
            return ""
        return f"{value:.{self.digits}f}".rstrip("0").rstrip(".") or "0"


COLUMNS = (
    Column("time", 3),
    Column("service"),
    Column("desired_replicas"),
    Column("ready_replicas"),
    Column("request_rate", 4),
    Column("latency_p50", 6),
    Column("latency_p95", 6),
    Column("latency_p99", 6),
    Column("failed_requests"),
    Column("cpu_utilisation", 4),
    Column("completed_requests"),
    Column("timed_out_requests"),
    Column("dropped_requests"),
    Column("mean_concurrency", 4),
    Column("cpu_cores", 4),
)
ROW_FIELDS = tuple(c.name for c in COLUMNS)
