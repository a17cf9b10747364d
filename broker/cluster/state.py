"""What every part of the simulated cluster reads and writes: the nodes, the pods and
Batsim jobs they stand for, the counters, and the decisions for Batsim.

:class:`ClusterState` is the base of ``broker.cluster.cluster.Cluster``; its parts (the
kubelet model, dynamic jobs, workload replacements, metrics, the facade's inbox, the
controllers' pod operations) each get it as their ``state``, so none of them imports
the cluster and the parts stay one module each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from broker.cluster import kubelet_admission as admission
from broker.cluster.pod_network import PodNetwork
from broker.cluster.traffic_driver import TrafficDriver
from broker.controllers.terminated_gc import DEFAULT_THRESHOLD
from broker.facade import Facade
from simulator.id_set import JobIdSet

JOB_ID_ANNOTATION = "timewarp.io/job-id"
DURATION_ANNOTATION = "timewarp.io/duration"
NOT_SIMULATED = "NotSimulated"  # reason of the Warning Event on pods outside Batsim
RS_LABEL = "timewarp.io/replicaset"


@dataclass
class NodeInfo:
    """The kubelet's side of a node: its allocatable and what its admitted pods take
    (``used["pods"]`` counts them), in the kubelet's units (see ``broker.kubelet``)."""

    name: str
    resource_id: int
    allocatable: dict[str, int]
    ip: str
    labels: dict[str, str] = field(default_factory=dict)
    used: dict[str, int] = field(default_factory=dict)
    pod_cidr: str | None = None  # spec.podCIDR (broker/cluster/pod_network.py)
    host_ports: list[admission.HostPort] = field(default_factory=list)

    @property
    def cpu_m(self) -> int:
        return self.allocatable.get("cpu", 0)

    @property
    def used_cpu_m(self) -> int:
        return self.used.get("cpu", 0)


@dataclass
class JobPod:
    job_id: str
    namespace: str
    name: str
    requests: dict[str, int]  # effective requests, the kubelet's units
    usage: dict[str, Any] | None
    node: str | None = None
    state: str = "pending"  # pending | starting | running | done | rejected | killed
    started_ns: int | None = None
    labels: dict[str, str] = field(default_factory=dict)
    raw_job: dict[str, Any] | None = None  # the Batsim job object (to restart it)
    service_s: float | None = None  # replacement "remaining": how long the service lasts
    service_end_ns: int | None = None  # ... and when it ends (set once it first ran)
    counted: bool = True  # its Batsim job keeps the simulation going (in open_jobs)
    deferred: bool = False  # a ReplicaSet's pod: its Batsim job is registered when it starts
    plan: Any = None  # pod_lifecycle.StartPlan of a pod whose start takes time
    service_over: bool = False  # a service's pod that started after the service ended
    host_ports: tuple[admission.HostPort, ...] = ()
    ip: str | None = None  # its own address while its sandbox exists (None: its node's)

    @property
    def cpu_m(self) -> int:
        return self.requests.get("cpu", 0)

    @property
    def memory(self) -> int:
        return self.requests.get("memory", 0)

    @classmethod
    def of_pod(cls, pod: dict[str, Any], job_id: str = "", usage: Any = None) -> JobPod:
        """The kubelet model's record of ``pod``: its requests, host ports and labels."""
        meta = pod["metadata"]
        jp = cls(job_id, meta.get("namespace", "default"), meta["name"], {}, usage)
        jp.requests = admission.pod_requests(pod)
        jp.host_ports = tuple(admission.host_ports(pod))
        jp.labels = dict(meta.get("labels") or {})
        return jp


@dataclass
class Stats:
    jobs_submitted: int = 0
    jobs_started: int = 0
    jobs_done: int = 0
    rejected_by_kubelet: int = 0
    kills: int = 0
    bindings: int = 0
    replacements: int = 0
    dynamic_jobs: int = 0  # REGISTER_JOB sent (controller-made pods)
    pods_outside_batsim: int = 0  # pods that run until deleted (Warning Event)
    pods_deferred: int = 0  # pods controllers wanted but had not made (bursts of 500)
    core_seconds: float = 0.0  # cpu requests x run time of finished jobs
    capacity_cores: float = 0.0


@dataclass
class ClusterState:
    """The simulated cluster's shared state (the fields of ``Cluster``)."""

    facade: Facade
    now_ns: Callable[[], int]  # virtual time
    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    jobs: dict[str, JobPod] = field(default_factory=dict)
    pods: dict[tuple[str, str], JobPod] = field(default_factory=dict)
    profiles: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    stats: Stats = field(default_factory=Stats)
    all_submitted: bool = False
    services: TrafficDriver | None = None  # the workload's services with traffic
    open_jobs: int = 0  # Batsim jobs submitted or registered, not yet ended
    dynamic_jobs: bool = False  # the simulator accepts REGISTER_JOB
    registration_finished: bool = False
    decisions: list[Any] = field(default_factory=list)  # for Batsim, in order
    pod_network: PodNetwork = field(default_factory=PodNetwork)  # pod CIDRs and addresses
    # kube-controller-manager's --terminated-pod-gc-threshold (0: off)
    terminated_pod_gc_threshold: int = DEFAULT_THRESHOLD

    # the ids of Batsim jobs that ended (their JobPods leave ``jobs``): an id is never
    # reused for another job (a dynamic job's, a replacement's). Bits, not strings: flat
    # in the number of jobs that ended when their ids are dense
    ended_job_ids: JobIdSet = field(default_factory=JobIdSet)

    def retire(self, jp: JobPod) -> None:
        """``jp``'s Batsim job ended for good (done or rejected): ``jobs`` forgets it, so
        that what the cluster holds does not grow with every job that ever ran (the pod's
        record stays in ``pods`` while the pod exists)."""
        if jp.job_id and self.jobs.get(jp.job_id) is jp:
            del self.jobs[jp.job_id]
            self.ended_job_ids.add(jp.job_id)

    def job_id_taken(self, job_id: str) -> bool:
        """Whether a Batsim job of this id exists or existed."""
        return job_id in self.jobs or job_id in self.ended_job_ids

    def can_register(self) -> bool:
        """Whether a dynamic job may still be registered (REGISTER_JOB)."""
        return self.dynamic_jobs and not self.registration_finished


def take(used: dict[str, int], requests: dict[str, int], sign: int) -> None:
    """Add (sign +1) or give back (-1) a pod's requests and its pod slot."""
    for name, value in requests.items():
        used[name] = used.get(name, 0) + sign * value
    used["pods"] = used.get("pods", 0) + sign
