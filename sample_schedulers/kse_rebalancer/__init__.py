"""KSE rebalancer: dynamic pod balancing for Kubernetes (Carvalho, 2024, in Portuguese).

Every 60 s (APScheduler ``BackgroundScheduler``) it reads ``metrics.k8s.io``, computes
an allocation plan with GreedyLB or RefineLB, evicts the pods the plan moves (only
ReplicaSet-owned pods of its schedulerName, never ``kube-system``), binds their
replacements to the planned nodes, and records node imbalance (MAE) to a CSV.
Written the ordinary way; it never imports timewarp.
Run with ``python -m sample_schedulers.kse_rebalancer --scheduler-name NAME``.
"""

from .balancers import PodLoad, greedy_lb, moves, node_loads, refine_lb
from .binder import Binder, TargetBook
from .imbalance import ImbalanceLog, mae, spread
from .rebalancer import Rebalancer, RoundResult
from .snapshot import take_snapshot

__all__ = [
    "Binder",
    "ImbalanceLog",
    "PodLoad",
    "Rebalancer",
    "RoundResult",
    "TargetBook",
    "greedy_lb",
    "mae",
    "moves",
    "node_loads",
    "refine_lb",
    "spread",
    "take_snapshot",
]
