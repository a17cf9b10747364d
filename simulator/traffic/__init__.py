"""Services with traffic: request arrivals, processor-sharing replicas, metrics ticks.

Pure and deterministic: no Kubernetes, no Batsim, no clock of its own. The broker tells a
:class:`ServiceModel` which replicas exist and when time moves; the model answers with
per-tick rows (``out_services.csv``) and per-pod samples (what ``metrics.k8s.io`` and the
concurrency metric publish). ``docs/services.md`` documents the model.
"""

from simulator.traffic.costs import Cost, parse_cost
from simulator.traffic.patterns import Pattern
from simulator.traffic.service import (
    PIPELINES,
    ROW_FIELDS,
    PodSample,
    ReplicaState,
    ServiceModel,
    TickRow,
    TrafficConfig,
    closed_form_replicas,
)

__all__ = [
    "PIPELINES",
    "ROW_FIELDS",
    "Cost",
    "Pattern",
    "PodSample",
    "ReplicaState",
    "ServiceModel",
    "TickRow",
    "TrafficConfig",
    "closed_form_replicas",
    "parse_cost",
]
