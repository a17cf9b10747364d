"""KubCG: a history-based CPU/GPU Kubernetes scheduler (El Haj Ahmed et al., 2020).

Written the ordinary way (real time, threads, the official ``kubernetes`` client); it
never imports timewarp. Pure decision logic: :mod:`.decider` (Algorithm 3, Eq. 13/16/17),
:mod:`.estimator` (Algorithm 2), :mod:`.history` (statistics), :mod:`.switch`
(Algorithm 1); :mod:`.kube` reads the client's objects; :mod:`.scheduler` is the loop.
Run with ``python -m sample_schedulers.kubcg --scheduler-name NAME``.
"""

from .decider import ClusterView, decide
from .estimator import correct
from .history import History
from .model import Decision, Estimate, NodeInfo, PodInfo, QueuedPod, Slot, Stats, Technique
from .scheduler import KubcgScheduler

__all__ = [
    "ClusterView",
    "Decision",
    "Estimate",
    "History",
    "KubcgScheduler",
    "NodeInfo",
    "PodInfo",
    "QueuedPod",
    "Slot",
    "Stats",
    "Technique",
    "correct",
    "decide",
]
