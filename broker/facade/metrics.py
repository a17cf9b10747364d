"""``metrics.k8s.io/v1beta1`` in metrics-server's format, and per-pod custom metrics in
``custom.metrics.k8s.io/v1beta1``'s (what a custom-metrics adapter serves), from values
the broker sets.

Quantities are written the way metrics-server writes them: cpu in nanocores
(``"250000000n"``), memory in kibibytes (``"123456Ki"``, rounded down); custom metric
values in milli-units (``"1500m"``), as the adapters write them. The custom metrics
served are those of ``simulator/traffic/metrics.py`` (``CUSTOM_POD_METRICS``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from simulator.traffic.metrics import CUSTOM_METRIC_NAMES

CUSTOM_METRICS_GROUP = "custom.metrics.k8s.io"
# the per-pod custom metrics served: the traffic model's, named once in its table
CUSTOM_METRICS = CUSTOM_METRIC_NAMES


def cpu_quantity(nanocores: int) -> str:
    return f"{int(nanocores)}n"


def memory_quantity(bytes_: int) -> str:
    return f"{int(bytes_) // 1024}Ki"


@dataclass
class _Sample:
    usage: dict[str, tuple[int, int]]  # container (or "" for a node) -> (nanocores, bytes)
    timestamp_ns: int
    window_s: float = 30.0
    labels: dict[str, str] = field(default_factory=dict)


class MetricsBoard:
    """Latest usage per node and per pod. Thread-safe; the broker is the only writer."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._nodes: dict[str, _Sample] = {}
        self._pods: dict[tuple[str, str], _Sample] = {}
        self._custom: dict[
            tuple[str, str], tuple[dict[str, float], int, float, dict[str, str]]
        ] = {}

    def set_node(
        self,
        name: str,
        cpu_nanocores: int,
        memory_bytes: int,
        *,
        timestamp_ns: int,
        window_s: float = 30.0,
        labels: dict[str, str] | None = None,
    ) -> None:
        with self._lock:
            self._nodes[name] = _Sample(
                {"": (cpu_nanocores, memory_bytes)}, timestamp_ns, window_s, dict(labels or {})
            )

    def set_pod(
        self,
        namespace: str,
        name: str,
        containers: dict[str, tuple[int, int]],
        *,
        timestamp_ns: int,
        window_s: float = 30.0,
        labels: dict[str, str] | None = None,
    ) -> None:
        """``containers``: container name -> (cpu nanocores, memory bytes)."""
        with self._lock:
            self._pods[(namespace, name)] = _Sample(
                dict(containers), timestamp_ns, window_s, dict(labels or {})
            )

    def set_pod_custom(
        self,
        namespace: str,
        name: str,
        values: dict[str, float],
        *,
        timestamp_ns: int,
        window_s: float,
        labels: dict[str, str] | None = None,
    ) -> None:
        """Custom metrics of one pod (``custom.metrics.k8s.io``: ``pods/*/<metric>``)."""
        with self._lock:
            self._custom[(namespace, name)] = (
                dict(values),
                timestamp_ns,
                window_s,
                dict(labels or {}),
            )

    def custom_items(
        self, namespace: str, metric: str
    ) -> list[tuple[str, float, int, float, dict[str, str]]]:
        """(pod, value, timestamp ns, window s, labels) of the pods of ``namespace`` that
        have ``metric``, by name."""
        with self._lock:
            return sorted(
                (name, values[metric], stamp, window, labels)
                for (ns, name), (values, stamp, window, labels) in self._custom.items()
                if ns == namespace and metric in values
            )

    def remove_node(self, name: str) -> None:
        with self._lock:
            self._nodes.pop(name, None)

    def remove_pod(self, namespace: str, name: str) -> None:
        with self._lock:
            self._pods.pop((namespace, name), None)
            self._custom.pop((namespace, name), None)

    def node_items(self) -> list[tuple[str, _Sample]]:
        with self._lock:
            return sorted(self._nodes.items())

    def pod_items(self, namespace: str | None) -> list[tuple[tuple[str, str], _Sample]]:
        with self._lock:
            return sorted(
                (k, v) for k, v in self._pods.items() if namespace is None or k[0] == namespace
            )


def _usage(cpu: int, mem: int) -> dict[str, str]:
    return {"cpu": cpu_quantity(cpu), "memory": memory_quantity(mem)}


def node_metrics(name: str, sample: _Sample, format_time) -> dict[str, Any]:
    cpu, mem = sample.usage[""]
    return {
        "kind": "NodeMetrics",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {
            "name": name,
            "creationTimestamp": format_time(sample.timestamp_ns),
            "labels": sample.labels,
        },
        "timestamp": format_time(sample.timestamp_ns),
        "window": f"{sample.window_s:g}s",
        "usage": _usage(cpu, mem),
    }


def pod_metrics(namespace: str, name: str, sample: _Sample, format_time) -> dict[str, Any]:
    return {
        "kind": "PodMetrics",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "creationTimestamp": format_time(sample.timestamp_ns),
            "labels": sample.labels,
        },
        "timestamp": format_time(sample.timestamp_ns),
        "window": f"{sample.window_s:g}s",
        "containers": [
            {"name": c, "usage": _usage(cpu, mem)} for c, (cpu, mem) in sorted(sample.usage.items())
        ],
    }


def custom_metric_value(
    namespace: str,
    pod: str,
    metric: str,
    value: float,
    timestamp: str,
    window_s: float,
) -> dict[str, Any]:
    """One item of a ``MetricValueList`` (custom.metrics.k8s.io/v1beta1)."""
    return {
        "describedObject": {
            "kind": "Pod",
            "namespace": namespace,
            "name": pod,
            "apiVersion": "/v1",
        },
        "metricName": metric,
        "timestamp": timestamp,
        "windowSeconds": int(round(window_s)),
        "value": f"{int(round(value * 1000))}m",
        "selector": None,
    }
