"""Plain data the KubCG decision unit works on (no Kubernetes client types here).

Times are seconds (floats) on one wall clock: the scheduler's ``time.time()`` and the
pods' ``startedAt``/``finishedAt`` timestamps converted with ``datetime.timestamp()``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from sample_schedulers.common.model import Taint, Toleration

Resource = Literal["cpu", "gpu"]
"""The resource of a node a pod runs on: its CPUs (shared) or one of its GPUs (exclusive)."""


@dataclass(frozen=True)
class NodeInfo:
    """A node as the decision unit sees it (the paper's NS table row)."""

    name: str
    node_class: str = "cpu"
    """``"gpu"`` when the node has at least one GPU, else ``"cpu"``."""
    gpus: int = 0
    cpu: float = 0.0
    """Allocatable cores."""
    memory: float = 0.0
    """Allocatable bytes."""
    schedulable: bool = True
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    """NoSchedule / NoExecute taints only (PreferNoSchedule does not forbid)."""


@dataclass(frozen=True)
class PodInfo:
    """A pod as the decision unit sees it."""

    namespace: str
    name: str
    uid: str
    image: str
    """The application's identity for the history: the first container's image."""
    cpu: float = 0.0
    """Requested cores (sum over containers)."""
    memory: float = 0.0
    """Requested bytes (sum over containers)."""
    gpu_required: bool = False
    """The pod requests ``nvidia.com/gpu``: it can only run on a GPU."""
    gpu_capable: bool = False
    """The application has a GPU variant (the switch can pick it): CPU or GPU."""
    gpu_image: str | None = None
    """The GPU variant's image, when the pod names one."""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    scheduler_name: str = "default-scheduler"
    node_name: str | None = None
    phase: str = "Pending"
    created: float = 0.0
    started: float | None = None
    """When the pod started running (``status.startTime`` or a container's startedAt)."""
    resource_hint: Resource | None = None
    """The resource recorded on the pod (binding annotation), if any."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def can_use_gpu(self) -> bool:
        return self.gpu_required or self.gpu_capable

    @property
    def can_use_cpu(self) -> bool:
        return not self.gpu_required


@dataclass(frozen=True)
class Slot:
    """Where a pod can run: a node's CPUs or one of its GPUs (the paper's CPU3 / GPU3)."""

    node: str
    resource: Resource


@dataclass(frozen=True)
class Stats:
    """Minimum, average and maximum observed running time of one image on one slot."""

    count: int
    minimum: float
    maximum: float
    total: float

    @property
    def average(self) -> float:
        return self.total / self.count

    @staticmethod
    def of(durations: list[float]) -> Stats:
        return Stats(len(durations), min(durations), max(durations), sum(durations))

    def add(self, duration: float) -> Stats:
        return Stats(
            self.count + 1,
            min(self.minimum, duration),
            max(self.maximum, duration),
            self.total + duration,
        )


class Technique(enum.IntEnum):
    """The estimator-corrector's successive estimates (Algorithm 2), in the order used."""

    MIN = 0
    AVG = 1
    MAX = 2
    PLUS_MIN = 3
    """``ED_N = ED_P + MIN_ED``, applied again at each later correction."""


@dataclass(frozen=True)
class Estimate:
    """A row of the EP table: when a running pod is expected to finish.

    Invariant: ``end == started + duration * slowdown``; ``duration`` is the estimated
    running time alone on its slot, ``slowdown`` the Θ_P = P it was placed with.
    """

    uid: str
    image: str
    slot: Slot
    started: float
    duration: float
    technique: Technique = Technique.MIN
    slowdown: int = 1
    cpu: float = 0.0
    """Cores the pod requests (released when it ends)."""
    memory: float = 0.0
    """Bytes the pod requests."""

    @property
    def end(self) -> float:
        return self.started + self.duration * self.slowdown


@dataclass(frozen=True)
class QueuedPod:
    """A pod waiting for a GPU of ``node`` (the waiting Pods queue), in arrival order ``seq``."""

    pod: PodInfo
    node: str
    seq: int
    duration: float
    """Its estimated running time on that GPU."""


Action = Literal["bind", "wait_gpu", "unschedulable"]


@dataclass(frozen=True)
class Decision:
    """The decider's answer for one pod."""

    action: Action
    slot: Slot | None = None
    completion: float | None = None
    """Estimated seconds from now until the pod completes there (Δ of Eq. 16/17)."""
    wait: float = 0.0
    """Estimated seconds before a GPU frees up (T_wGPU), 0 for CPU or a free GPU."""
    reason: str = ""
