"""The simulated cluster: Batsim resources and jobs as Kubernetes Nodes and Pods, and the
kubelet that admits bound pods.

Translation (timewarp's workload extension, documented in ``docs/broker.md``):

- a compute resource becomes a Ready Node named after the host (lowercased, invalid
  characters replaced by ``-``), shaped by its properties (``broker/cluster/node_shape.py``:
  ``core``/``memory``/``gpu``/``allocatable``, ``labels``, ``taints``,
  ``unschedulable``); every other host property ``p`` becomes the annotation
  ``timewarp.io/<p>`` (``_`` -> ``-``) and, when it is a valid label value, the label of
  the same name (``node_class`` -> ``timewarp.io/node-class``);
- a submitted job becomes a Pending Pod named by :func:`broker.k8s.naming.pod_name`, built by
  ``broker/cluster/pod_shape.py`` from the job's (else its profile's) fields: ``scheduler``
  (Batkube's convention; default ``default-scheduler``), ``cpu``/``memory``,
  ``requests``/``limits``, ``namespace``, ``labels``, ``annotations``, ``image``,
  ``priorityClassName``, ``nodeSelector``, ``tolerations``, a partial ``pod`` merged over
  it; ``replicaset`` (owner name) adds an ``ownerReferences`` entry to that ReplicaSet;
- a bound pod goes once through the kubelet's admission (``broker/cluster/kubelet_admission.py``: every
  requested resource and the pod count, node selector and required affinity, host
  ports, NoExecute taints); admitted pods turn Running and their job is executed on that
  node (EXECUTE_JOB); refused ones fail with the kubelet's reason (``OutOfcpu``,
  ``OutOfnvidia.com/gpu``, ``NodeAffinity``…) and their job is rejected (REJECT_JOB) — no
  silent over-allocation;
- JOB_COMPLETED turns the pod Succeeded (or Failed) with a terminated container state;
  evicting or deleting a running pod kills its job (KILL_JOB).

Pods made by controllers are Batsim *dynamic jobs* when the simulator accepts them
(SIMULATION_BEGINS says ``dynamic-jobs-enabled``; ``timewarp simulate`` always asks):

- a ReplicaSet pod evicted or deleted before it ended is replaced by a Pending pod whose
  job restarts from scratch: REGISTER_JOB ``<original>~r<n>`` with the original job's
  profile, in the original's workload (:func:`broker.k8s.naming.replacement_job_id`);
- a pod created through the API (a Job controller's pod, a bare pod, a ReplicaSet pod
  the API made) runs for ``timewarp.io/duration`` seconds (an annotation on the pod or
  its template): REGISTER_PROFILE ``delay-<seconds>`` (once) and REGISTER_JOB
  ``k8s!<namespace>.<pod>`` (:func:`broker.k8s.naming.api_pod_job_id`); its
  ``spec.activeDeadlineSeconds`` becomes the job's walltime;
- a pod with no way to know its run time (no or a bad annotation, a simulator without
  dynamic jobs, registration already finished) runs until deleted, outside Batsim's
  accounting, and gets a Warning Event (reason ``NotSimulated``) saying why;
- NOTIFY ``registration_finished`` goes out once no more dynamic job can appear: every
  static job was submitted, every known job ended, and no Job still needs simulated pods.

Everything here runs in the broker's driver thread, except the facade hooks, which only
record what happened; the driver applies it while time is frozen, in a fixed order.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

from procset import ProcSet

from broker.cluster import kubelet_admission as admission
from broker.cluster import pod_lifecycle
from broker.cluster.node_shape import build_node, node_name_for, node_shape
from broker.cluster.pod_shape import DEFAULT_IMAGE, build_pod
from broker.cluster.traffic_driver import TrafficDriver
from broker.controllers import events as k8s_events
from broker.controllers.deployment import DeploymentController
from broker.controllers.job import JobController
from broker.controllers.replicaset import ReplicaSetController
from broker.facade import Facade
from broker.facade.errors import not_found
from broker.k8s import naming, podutil
from broker.k8s.quantity import parse_quantity
from broker.k8s.shape_rules import ShapeError
from simulator import protocol as p

JOB_ID_ANNOTATION = "timewarp.io/job-id"
DURATION_ANNOTATION = "timewarp.io/duration"
NOT_SIMULATED = "NotSimulated"  # reason of the Warning Event on pods outside Batsim
RS_LABEL = "timewarp.io/replicaset"


def _bytes(value: Any) -> int:
    return int(parse_quantity(str(value)))


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

    @property
    def cpu_m(self) -> int:
        return self.requests.get("cpu", 0)

    @property
    def memory(self) -> int:
        return self.requests.get("memory", 0)


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
    core_seconds: float = 0.0  # cpu requests x run time of finished jobs
    capacity_cores: float = 0.0


@dataclass
class Cluster:
    """Mirror of the Batsim platform and workload in the facade's store."""

    JOB_ID = JOB_ID_ANNOTATION

    facade: Facade
    now_ns: Any  # () -> int, virtual time
    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    jobs: dict[str, JobPod] = field(default_factory=dict)
    pods: dict[tuple[str, str], JobPod] = field(default_factory=dict)
    profiles: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    stats: Stats = field(default_factory=Stats)
    all_submitted: bool = False
    services: TrafficDriver | None = None  # the workload's services with traffic

    def __post_init__(self) -> None:
        self._running: dict[tuple[str, str], JobPod] = {}
        self._metrics_at: int | None = None
        self._node_usage: dict[str, list[int]] = {}
        self._pod_usage: dict[tuple[str, str], tuple[int, int]] = {}
        # refresh_metrics works on what changed: pods started since the last refresh,
        # running pods whose usage follows a curve (re-read whenever time moves), and
        # nodes whose sum of pod usage changed; per-node sums are kept up to date
        self._unpublished: dict[tuple[str, str], JobPod] = {}
        self._curved: dict[tuple[str, str], JobPod] = {}
        self._curves_at: int | None = None
        self._node_sum: dict[str, list[int]] = {}
        self._dirty_nodes: set[str] = set()
        self._lock = threading.Lock()  # the lists the facade's hooks fill
        self._node_objects: dict[str, dict[str, Any]] = {}  # the store's Nodes, by name
        self.facade.store.add_listener(self._on_commit)
        # The cluster's state: the driver's steps and, with admit_bindings_at_once, the
        # binding requests that admit their pod themselves.
        self.state_lock = threading.RLock()
        self._admit_on_bind = False
        self._bindings: list[tuple[str, str, str]] = []
        self._removed: list[tuple[str, str, dict[str, Any] | None]] = []
        self._created: list[tuple[str, str]] = []
        self._decisions: list[Any] = []
        self.open_jobs = 0  # Batsim jobs submitted or registered, not yet ended
        self.dynamic_jobs = False  # the simulator accepts REGISTER_JOB
        self.registration_finished = False
        self._profiles: set[str] = set()  # profiles registered in the API workload
        self._rest_profiles = itertools.count(1)  # profiles of replacements serving the rest
        self._replacements: dict[str, int] = {}  # original job id -> replacements made
        self.controller = JobController(self.facade.store, self.facade.clock, self)
        self.timeline = pod_lifecycle.Timeline(self.facade.clock)
        self.kubelet = pod_lifecycle.Kubelet(self)
        self._replaced: set[tuple[str, str]] = set()  # workload pods replaced while Terminating
        self._terminations: list[tuple[str, str]] = []  # DELETEs made graceful, to carry out
        self.replicasets = ReplicaSetController(self.facade.store, self.facade.clock, self)
        self.deployments = DeploymentController(self.facade.store, self.facade.clock)
        hooks = self.facade.hooks
        hooks.on_bind = self._on_bind
        hooks.on_evict = self._on_remove
        hooks.on_delete_pod = self._on_remove
        hooks.on_create = self._on_create
        hooks.on_terminate_pod = self._on_terminate

    # ------------------------------------------------------------- Batsim side
    def begin(self, data: p.SimulationBegins) -> None:
        self.profiles = data.profiles
        self.dynamic_jobs = bool((data.config or {}).get("dynamic-jobs-enabled"))
        self.controller.start()
        self.replicasets.start()
        self.deployments.start()
        if self.services:
            self.services.begin()
        store = self.facade.store
        for index, res in enumerate(data.compute_resources):
            host = str(res.get("name", f"node-{res['id']}"))
            name = node_name_for(host)
            if name in self.nodes:
                name = f"{name}-{res['id']}"
            try:
                shape = node_shape(res.get("properties") or {})
            except ShapeError as exc:
                raise ShapeError(f"host {host!r}: prop {exc.field}", exc.message) from None
            ip = f"10.{(index >> 16) & 255}.{(index >> 8) & 255}.{index & 255}"
            node = build_node(name, shape, ip, int(res["id"]))
            store.create("nodes", node, copy=False)
            info = NodeInfo(name, int(res["id"]), shape.amounts(), ip, node["metadata"]["labels"])
            self.nodes[name] = info
            self.stats.capacity_cores += info.cpu_m / 1000

    def submit(self, data: p.JobSubmitted) -> None:
        """JOB_SUBMITTED: the job becomes a Pending pod (shaped from the job and its
        profile, owned by its workload ReplicaSet if it names one), tracked as a
        :class:`JobPod` until its job ends."""
        if data.job_id in self.jobs:
            return  # a job we registered, acknowledged (--acknowledge-dynamic-jobs)
        job = data.job
        workload = data.job_id.split("!", 1)[0]
        profile = data.profile or self.profiles.get(workload, {}).get(str(job.get("profile")), {})
        name = naming.pod_name(data.job_id)
        pod = self._pod_for_job(data.job_id, name, job, profile)
        namespace = pod["metadata"]["namespace"]
        self._own_by_replicaset(pod, namespace, job, profile)
        jp = self._job_pod(data.job_id, namespace, name, pod, job, profile)
        self.jobs[data.job_id] = jp
        self.pods[(namespace, name)] = jp
        self.open_jobs += 1
        self.stats.jobs_submitted += 1
        self.facade.store.create("pods", pod, namespace=namespace, copy=False)

    @staticmethod
    def _pod_for_job(
        job_id: str, name: str, job: dict[str, Any], profile: dict[str, Any]
    ) -> dict[str, Any]:
        """The pod of a submitted job (``broker/cluster/pod_shape.py``), annotated with its job
        id and its start-up and shutdown times (``broker/cluster/pod_lifecycle.py``)."""
        pod = build_pod(job_id, name, job, profile)
        pod["metadata"]["annotations"][JOB_ID_ANNOTATION] = job_id
        extension = profile.get("timewarp") or {}
        for key, annotation in pod_lifecycle.PROFILE_KEYS.items():
            if key in extension:  # start-up and shutdown times (broker/cluster/pod_lifecycle.py)
                pod["metadata"]["annotations"][annotation] = f"{float(extension[key]):g}"
        return pod

    def _own_by_replicaset(
        self, pod: dict[str, Any], namespace: str, job: dict[str, Any], profile: dict[str, Any]
    ) -> None:
        """A job (or its profile) naming a ``replicaset``: its pod is labelled and owned by
        that ReplicaSet, made on first use."""
        spec = {k: profile[k] for k in ("replicaset",) if k in profile}
        spec.update({k: job[k] for k in ("replicaset",) if k in job})
        if "replicaset" not in spec:
            return
        rs_name = str(spec["replicaset"])
        pod["metadata"]["labels"][RS_LABEL] = rs_name
        rs = self._ensure_replicaset(namespace, rs_name, pod)
        pod["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": rs_name,
                "uid": rs["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]

    @staticmethod
    def _job_pod(
        job_id: str,
        namespace: str,
        name: str,
        pod: dict[str, Any],
        job: dict[str, Any],
        profile: dict[str, Any],
    ) -> JobPod:
        """What the kubelet model keeps of a job's pod: requests, host ports, labels, its
        usage curve and, for ``"replacement": "remaining"``, its service time."""
        extension = profile.get("timewarp") or {}
        jp = JobPod(job_id, namespace, name, admission.pod_requests(pod), extension.get("usage"))
        jp.host_ports = tuple(admission.host_ports(pod))
        jp.labels = dict(pod["metadata"]["labels"])
        jp.raw_job = dict(job)
        if extension.get("replacement") == "remaining":
            if profile.get("type") == "delay":
                jp.service_s = float(profile["delay"])
        return jp

    def complete(self, data: p.JobCompleted) -> None:
        jp = self.jobs.get(data.job_id)
        if jp is None or jp.state not in ("running", "killed"):
            return
        self._release(jp)
        if jp.started_ns is not None:
            self.stats.core_seconds += jp.cpu_m / 1000 * (self.now_ns() - jp.started_ns) / 1e9
        killed = jp.state == "killed"
        jp.state = "done"
        self._close(jp)
        self.stats.jobs_done += 1
        if killed or self.facade.store.get_or_none("pods", jp.namespace, jp.name) is None:
            return
        ok = data.job_state == "COMPLETED_SUCCESSFULLY"
        walltime = data.job_state == "COMPLETED_WALLTIME_REACHED"
        now = self.facade.store.timestamp()

        terminating = False

        def finish(pod: dict[str, Any]) -> dict[str, Any]:
            nonlocal terminating
            terminating = bool(pod["metadata"].get("deletionTimestamp"))
            status = pod.setdefault("status", {})
            status["phase"] = "Succeeded" if ok else "Failed"
            if walltime:
                status["reason"] = "DeadlineExceeded"
                status["message"] = "Pod was active on the node longer than the specified deadline"
            exit_code = (
                0 if ok else (data.return_code if data.return_code > 0 else 137 if walltime else 1)
            )
            for cs in status.get("containerStatuses") or []:
                started = (cs.get("state") or {}).get("running", {}).get("startedAt", now)
                cs["state"] = {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": "Completed" if ok else "Error",
                        "startedAt": started,
                        "finishedAt": now,
                        "containerID": cs.get("containerID", ""),
                    }
                }
                cs["ready"] = False
                cs["started"] = False
            for cond in status.get("conditions") or []:
                if cond["type"] in ("Ready", "ContainersReady"):
                    cond.update(status="False", reason="PodCompleted", lastTransitionTime=now)
            return pod

        self.facade.store.update("pods", jp.namespace, jp.name, finish, copy=False)
        if terminating:
            # a Terminating pod whose container ends: the kubelet removes it now
            self.facade.store.delete("pods", jp.namespace, jp.name)
            self.pods.pop((jp.namespace, jp.name), None)

    def all_done(self) -> bool:
        """Every static job was submitted, every Batsim job ended, and no more can appear
        (no Job controller still needs simulated pods). O(1) but for the Jobs."""
        if not self.all_submitted or self.open_jobs:
            return False
        if self.services and self.services.keeps_simulation_alive(self.now_ns()):
            return False  # a service still gets traffic
        if not self._can_register():
            return True
        return not (
            self.controller.keeps_simulation_alive()
            or self.replicasets.keeps_simulation_alive(self.now_ns())
        )

    def process_pending(self) -> bool:
        """Whether :meth:`process` would do anything now (quick; no store access)."""
        return self.has_work() or (self._can_register() and self.all_done())

    def _can_register(self) -> bool:
        return self.dynamic_jobs and not self.registration_finished

    # ------------------------------------------------------------ facade hooks
    def admit_bindings_at_once(self, on: bool = True) -> None:
        """Deterministic mode: a binding request admits its pod (and does whatever else
        the API asked for so far) before it is answered, instead of when every scheduler
        is idle. The outcome is the same — time cannot move while a request is in
        flight, and the request order is the order of the changes — but the work is
        done while the scheduler is still busy, not while it waits to be let go.
        ``on=False``: back to recording bindings for the next :meth:`process`."""
        self._admit_on_bind = on
        self.facade.hooks.after_bind = self._after_bind if on else None

    def _on_bind(self, namespace: str, pod: str, node: str) -> None:
        if node not in self.nodes:
            raise not_found("nodes", node)
        if self._admit_on_bind:
            return  # recorded once committed (_after_bind): process() never sees it early
        with self._lock:
            self._bindings.append((namespace, pod, node))

    def _after_bind(self, namespace: str, pod: str, node: str) -> None:
        with self.state_lock:
            with self._lock:
                self._bindings.append((namespace, pod, node))
            while self.process():
                pass
            self.refresh_metrics()

    def _on_terminate(self, namespace: str, pod: str, grace: int | None) -> dict[str, Any] | None:
        """A DELETE or eviction (request thread): a pod on a node goes gracefully — marked
        Terminating now, its containers stopped by the kubelet model (in the request in
        deterministic mode, else at the next step). None: it is deleted at once."""
        marked = self.kubelet.mark_terminating(namespace, pod, grace)
        if marked is None:
            return None
        with self._lock:
            self._terminations.append((namespace, pod))
        if self._admit_on_bind:
            with self.state_lock:
                while self.process():
                    pass
                self.refresh_metrics()
        return marked

    def _on_remove(self, namespace: str, pod: str) -> None:
        obj = self.facade.store.get_or_none("pods", namespace, pod)
        with self._lock:
            self._removed.append((namespace, pod, obj))

    def _on_create(self, obj: dict[str, Any]) -> None:
        """Any API create (store lock held): remember new pods."""
        if obj.get("kind") == "Pod":
            meta = obj["metadata"]
            with self._lock:
                self._created.append((meta.get("namespace", "default"), meta["name"]))

    # ------------------------------------------------------------- kubelet
    def has_work(self) -> bool:
        with self._lock:
            if self._bindings or self._removed or self._created or self._terminations:
                return True
        if self.timeline.due(self.now_ns()):
            return True
        if self.services and self.services.has_dirty():
            return True
        return (
            self.controller.has_work() or self.deployments.has_work() or self.replicasets.has_work()
        )

    def process(self) -> bool:
        """Adopt pods the API created, apply kills and recorded bindings (kubelet
        admission) in the order they happened, run the Job controller, and say
        ``registration_finished`` when it is time. Returns whether anything was done."""
        with self._lock:
            created, self._created = self._created, []
            bindings, self._bindings = self._bindings, []
            removed, self._removed = self._removed, []
            terminations, self._terminations = self._terminations, []
        for namespace, name in created:
            pod = self.facade.store.get_or_none("pods", namespace, name)
            if pod is not None and (namespace, name) not in self.pods:
                self._adopt(pod)
                node = (pod.get("spec") or {}).get("nodeName")
                if node in self.nodes:  # created bound: the kubelet takes it directly
                    self._admit(namespace, name, node)
        for namespace, pod, obj in removed:
            self._removed_pod(namespace, pod, obj)
        for namespace, pod, node in bindings:
            self._admit(namespace, pod, node)
        for namespace, pod in terminations:
            self.kubelet.terminate(namespace, pod)
        steps = self.timeline.take_due(self.now_ns())
        for step, namespace, pod, uid in steps:
            self.kubelet.step(step, namespace, pod, uid)
        did = bool(bindings or removed or created or terminations or steps)
        if self.controller.reconcile():
            did = True
        if self.deployments.reconcile():
            did = True
        if self.replicasets.reconcile():
            did = True
        if self.services and self.services.has_dirty():
            # a service's pods changed: the traffic model learns it at this instant
            self._metrics_at = None
            self.refresh_metrics()
        if self._can_register() and self.all_done():
            self.registration_finished = True
            self._decisions.append(p.Notify("registration_finished"))
            did = True
        return did

    # ------------------------------------------------------------- dynamic jobs
    @staticmethod
    def pod_duration(pod: dict[str, Any]) -> tuple[float | None, str]:
        """``timewarp.io/duration`` of a pod (or pod template) in seconds, or None and
        why not."""
        value, why = pod_lifecycle.annotation_seconds(pod, DURATION_ANNOTATION)
        if value is None and not why:
            return None, f"no {DURATION_ANNOTATION} annotation"
        return value, why

    def simulates(self, template: dict[str, Any]) -> bool:
        """Pods from ``template`` would become Batsim jobs (the Job controller asks)."""
        return self._can_register() and self.pod_duration(template)[0] is not None

    def create_controlled_pod(self, pod: dict[str, Any]) -> dict[str, Any]:
        """For the Job and ReplicaSet controllers: store a pod it made and adopt it
        (annotated with its job id as it is stored: one write, not two)."""
        simulated = self._simulation_plan(pod)[0] is not None and not _defers(pod)

        def annotate(obj: dict[str, Any]) -> None:
            if simulated:
                meta = obj["metadata"]
                job_id = naming.api_pod_job_id(meta["namespace"], meta["name"])
                meta.setdefault("annotations", {})[JOB_ID_ANNOTATION] = job_id

        namespace = pod["metadata"]["namespace"]
        created = self.facade.store.create("pods", pod, namespace=namespace, prepare=annotate)
        self._adopt(created)
        return created

    def terminate_pod(self, namespace: str, name: str) -> None:
        """For the ReplicaSet controller: delete a pod as a DELETE with default options
        (gracefully, see ``broker.cluster.pod_lifecycle``)."""
        if self.kubelet.mark_terminating(namespace, name, None) is None:
            self.delete_controlled_pod(namespace, name)
        else:
            self.kubelet.terminate(namespace, name)

    def pod_terminating(self, namespace: str, name: str, pod: dict[str, Any]) -> None:
        """For the kubelet: ``pod`` stays Terminating a while. A workload ReplicaSet's pod
        is replaced now (a ReplicaSet does not count a Terminating pod)."""
        meta = pod["metadata"]
        owner = next(
            (o for o in meta.get("ownerReferences") or [] if o.get("kind") == "ReplicaSet"), None
        )
        if owner is not None and RS_LABEL in (meta.get("labels") or {}):
            self._replaced.add((namespace, name))
            self._replace_pod(namespace, pod, owner, self.pods.get((namespace, name)))

    def may_create_for(self, template: dict[str, Any]) -> bool:
        """For the ReplicaSet controller: whether pods from ``template`` are still wanted
        (not once the service they serve ended)."""
        end, _ = pod_lifecycle.serve_until_s(template)
        return end is None or end * 1e9 > self.now_ns()

    def delete_controlled_pod(self, namespace: str, name: str) -> None:
        """For the Job controller: delete a pod now, killing or rejecting its job."""
        obj = self.facade.store.get_or_none("pods", namespace, name)
        if obj is None:
            return
        self.facade.store.delete("pods", namespace, name)
        self._removed_pod(namespace, name, obj)

    def _adopt(self, pod: dict[str, Any]) -> JobPod:
        """A pod the broker did not make from a Batsim job: a dynamic job if it says how
        long it runs and the simulator can take it, else it runs until deleted."""
        meta = pod["metadata"]
        namespace, name = meta.get("namespace", "default"), meta["name"]
        jp = JobPod("", namespace, name, admission.pod_requests(pod), None)
        jp.host_ports = tuple(admission.host_ports(pod))
        jp.labels = dict(meta.get("labels") or {})
        self.pods[(namespace, name)] = jp
        duration, why = self._simulation_plan(pod)
        if duration is None:
            self._not_simulated(pod, why)
            return jp
        if _defers(pod):
            # A ReplicaSet replaces its pods for ever: they do not keep the simulation
            # going, and one becomes a Batsim job when it starts (a pod that never
            # starts never holds up the end of the simulation).
            jp.counted, jp.deferred = False, True
            return jp
        job_id = self._register_api_pod(jp, pod, duration)
        if (meta.get("annotations") or {}).get(JOB_ID_ANNOTATION) != job_id:

            def annotate(obj: dict[str, Any]) -> None:
                obj["metadata"].setdefault("annotations", {})[JOB_ID_ANNOTATION] = job_id

            self.facade.store.update("pods", namespace, name, annotate, copy=False)
        return jp

    def _register_api_pod(self, jp: JobPod, pod: dict[str, Any], duration: float) -> str:
        """REGISTER_JOB ``k8s!<namespace>.<pod>`` (and its ``delay-<s>`` profile, once)."""
        meta = pod["metadata"]
        namespace, name = meta.get("namespace", "default"), meta["name"]
        occurrence = 1
        job_id = naming.api_pod_job_id(namespace, name)
        while job_id in self.jobs:  # an earlier pod of this name (a name is free once gone)
            occurrence += 1
            job_id = naming.api_pod_job_id(namespace, name, occurrence)
        profile = f"delay-{duration:.15g}"
        if profile not in self._profiles:
            self._profiles.add(profile)
            self._decisions.append(
                p.RegisterProfile(
                    naming.API_WORKLOAD, profile, {"type": "delay", "delay": duration}
                )
            )
        job: dict[str, Any] = {
            "id": job_id,
            "subtime": self.now_ns() / 1e9,
            "res": 1,
            "profile": profile,
        }
        deadline = (pod.get("spec") or {}).get("activeDeadlineSeconds")
        if isinstance(deadline, int) and not isinstance(deadline, bool) and deadline > 0:
            job["walltime"] = deadline
        self._register(jp, job_id, job)
        return job_id

    def _register_at_start(self, pod: dict[str, Any], jp: JobPod | None) -> str:
        """A ReplicaSet's pod starts: its Batsim job is registered now (then executed),
        or it runs outside Batsim (Warning Event) if it can no longer be one. Returns the
        job id to annotate the pod with ("" if none)."""
        if jp is None or not jp.deferred or jp.state not in ("pending", "starting"):
            return ""
        jp.deferred = False
        end, _ = pod_lifecycle.serve_until_s(pod)
        if end is not None and end * 1e9 <= self.now_ns():
            jp.service_over = True  # it will stop at once (service_ended), no Batsim job
            return ""
        duration, why = self._simulation_plan(pod)
        if duration is None:
            self._not_simulated(pod, why)
            return ""
        return self._register_api_pod(jp, pod, duration)

    def _lifetime(self, pod: dict[str, Any]) -> tuple[float | None, str]:
        """How long ``pod`` runs from now: ``timewarp.io/serve-until`` (a service's pod
        lives until the service ends) or ``timewarp.io/duration``, the earlier if both."""
        end, why = pod_lifecycle.serve_until_s(pod)
        duration, why_not = self.pod_duration(pod)
        if end is None:
            return (None, why) if why else (duration, why_not)
        left = max(0.0, round(end - self.now_ns() / 1e9, 6))  # Batsim's times: µs
        return (left if duration is None else min(left, duration)), ""

    def _simulation_plan(self, pod: dict[str, Any]) -> tuple[float | None, str]:
        """How long ``pod`` runs as a Batsim job, or None and why it cannot be one."""
        duration, why = self._lifetime(pod)
        if duration is not None and not self.dynamic_jobs:
            why = "the simulator does not accept dynamic jobs (Batsim needs --enable-dynamic-jobs)"
        elif duration is not None and self.registration_finished:
            why = "it came after the workload ended (registration_finished was sent)"
        return (None, why) if why else (duration, "")

    def _register(self, jp: JobPod, job_id: str, job: dict[str, Any]) -> None:
        jp.job_id = job_id
        jp.raw_job = job
        self.jobs[job_id] = jp
        if jp.counted:
            self.open_jobs += 1
        self.stats.dynamic_jobs += 1
        self._decisions.append(p.RegisterJob(job_id, job))

    def _close(self, jp: JobPod) -> None:
        """A Batsim job ended (completed, killed, rejected): one open job less."""
        if jp.counted:
            self.open_jobs -= 1

    def _not_simulated(self, pod: dict[str, Any], why: str) -> None:
        self.stats.pods_outside_batsim += 1
        k8s_events.emit(
            self.facade.store,
            pod,
            type_="Warning",
            reason=NOT_SIMULATED,
            message=(
                f"timewarp: {why}; this pod is not a Batsim job: once running it runs until "
                "deleted, and the simulation's outputs and end ignore it. Give the pod (or its "
                f'template) the annotation {DURATION_ANNOTATION}: "<seconds>" to simulate it.'
            ),
            component="timewarp-broker",
        )

    def _removed_pod(self, namespace: str, name: str, obj: dict[str, Any] | None) -> None:
        """An eviction or deletion: end its job (kill a running one, reject a pending
        one), then, for a pod a ReplicaSet owns that had not finished, let the
        ReplicaSet controller replace it."""
        jp = self.pods.pop((namespace, name), None)
        if jp is not None:
            self._end_removed_job(jp)
        meta = (obj or {}).get("metadata", {})
        owner = next(
            (o for o in meta.get("ownerReferences") or [] if o.get("kind") == "ReplicaSet"), None
        )
        if obj is None or owner is None or RS_LABEL not in (meta.get("labels") or {}):
            return  # not a workload ReplicaSet's: its controller (if any) does the rest
        if (namespace, name) in self._replaced:
            self._replaced.discard((namespace, name))
            return  # replaced when it began terminating
        if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return
        self._replace_pod(namespace, obj, owner, jp)

    def _end_removed_job(self, jp: JobPod) -> None:
        """A removed pod's job: a running one frees its node and is killed (an API-made
        pod is simply done), a pending one is rejected."""
        if jp.state == "starting":  # killed before its containers started: it never ran
            self._release(jp)
            jp.state = "pending"
        if jp.state == "running":
            self._release(jp)
            if jp.job_id:
                jp.state = "killed"
                self.stats.kills += 1
                self._decisions.append(p.KillJob([jp.job_id]))
            else:
                jp.state = "done"
        elif jp.state == "pending" and jp.job_id:
            jp.state = "rejected"
            self._close(jp)
            self._decisions.append(p.RejectJob(jp.job_id))

    def _replace_pod(
        self,
        namespace: str,
        obj: dict[str, Any],
        owner: dict[str, Any],
        jp: JobPod | None,
    ) -> None:
        """The ReplicaSet controller: a new Pending pod from the same template. A Batsim
        job restarts as a new (dynamic) job with the same profile — or serves the rest of
        its time (:meth:`_serve_the_rest`); an API-made pod is adopted as one. Not when
        the ReplicaSet is gone too (e.g. with its namespace): no one replaces the pod."""
        if self.facade.store.get_or_none("replicasets.apps", namespace, owner["name"]) is None:
            return
        meta = obj["metadata"]
        annotations = {
            k: v for k, v in (meta.get("annotations") or {}).items() if k != JOB_ID_ANNOTATION
        }
        was_job = jp is not None and bool(jp.job_id) and jp.raw_job is not None
        new_id = self._replacement_job_id(jp) if was_job and self._can_register() else ""
        if new_id:
            annotations[JOB_ID_ANNOTATION] = new_id
        replacement = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{owner['name']}-",
                "namespace": namespace,
                "labels": dict(meta.get("labels") or {}),
                "annotations": annotations,
                "ownerReferences": meta["ownerReferences"],
            },
            "spec": {k: v for k, v in obj["spec"].items() if k != "nodeName"},
        }
        created = self.facade.store.create("pods", replacement, namespace=namespace)
        self.stats.replacements += 1
        if not was_job:
            self._adopt(created)  # an API-made pod: its annotations say how long it runs
            return
        assert jp is not None and jp.raw_job is not None
        new = JobPod(
            "", namespace, created["metadata"]["name"], admission.pod_requests(created), jp.usage
        )
        new.host_ports = tuple(admission.host_ports(created))
        new.labels = dict(created["metadata"].get("labels") or {})
        self.pods[(namespace, new.name)] = new
        if new_id:
            job = {**jp.raw_job, "id": new_id, "subtime": self.now_ns() / 1e9}
            self._serve_the_rest(jp, new, job)
            self._register(new, new_id, job)
        elif not self.dynamic_jobs:
            self._not_simulated(
                created,
                "it replaces a Batsim job but the simulator does not accept dynamic jobs "
                "(Batsim needs --enable-dynamic-jobs)",
            )
        else:
            self._not_simulated(created, "it came after registration_finished was sent")

    def _replacement_job_id(self, jp: JobPod) -> str:
        """The next free id for a replacement of ``jp``'s job (see ``broker/k8s/naming.py``)."""
        original = naming.original_job_id(jp.job_id)
        count = self._replacements.get(original, 0)
        new_id = ""
        while not new_id or new_id in self.jobs:
            count += 1
            new_id = naming.replacement_job_id(original, count)
        self._replacements[original] = count
        return new_id

    def _serve_the_rest(self, old: JobPod, new: JobPod, job: dict[str, Any]) -> None:
        """Workload extension ``"timewarp": {"replacement": "remaining"}`` on a delay
        profile: the job is a service needed for ``delay`` seconds from its first start
        (KSE's pods), so a replacement serves what is left of that time instead of starting
        the whole delay again (the default, ``"restart"``: a pod's work is redone)."""
        end = old.service_end_ns
        if end is None:
            if old.service_s is None or old.started_ns is None:
                return
            end = old.started_ns + round(old.service_s * 1e9)
        left = round(max(0, end - self.now_ns()) / 1e9, 6)  # Batsim times: µs in its CSVs
        workload = job["id"].split("!", 1)[0]
        name = f"{str(job['profile']).split('~rest', 1)[0]}~rest{next(self._rest_profiles)}"
        self._decisions.append(p.RegisterProfile(workload, name, {"type": "delay", "delay": left}))
        job["profile"] = name
        new.service_s, new.service_end_ns = old.service_s, end

    def _ensure_replicaset(self, namespace: str, name: str, pod: dict[str, Any]) -> dict[str, Any]:
        store = self.facade.store
        if store.get_or_none("replicasets.apps", namespace, name) is not None:

            def scale(obj: dict[str, Any]) -> None:
                obj["spec"]["replicas"] = int(obj["spec"].get("replicas", 0)) + 1

            return store.update("replicasets.apps", namespace, name, scale)
        labels = dict(pod["metadata"]["labels"])
        return store.create(
            "replicasets.apps",
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {"name": name, "namespace": namespace, "labels": labels},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {RS_LABEL: name}},
                    "template": {"metadata": {"labels": labels}, "spec": pod["spec"]},
                },
            },
            namespace=namespace,
        )

    def _admit(self, namespace: str, pod_name: str, node_name: str) -> None:
        """The kubelet model for one binding (``broker/cluster/kubelet_admission.py``): the pod is refused
        (Failed, with the kubelet's reason: ``OutOf<resource>``, ``NodeAffinity``,
        ``TaintToleration``…) or it runs — its resources are taken, its status says
        Running and Ready, and its Batsim job is executed."""
        pod = self.facade.store.get_or_none("pods", namespace, pod_name)
        if pod is None or (pod.get("spec") or {}).get("nodeName") != node_name:
            return  # the binding did not go through
        jp = self.pods.get((namespace, pod_name))
        if (jp is not None and jp.state != "pending") or (pod.get("status") or {}).get(
            "phase", "Pending"
        ) != "Pending":
            return  # admitted (or refused) once already: a pod created and bound in one step
        self.stats.bindings += 1
        node = self.nodes[node_name]
        requests = admission.pod_requests(pod) if jp is None else jp.requests
        now = self.facade.store.timestamp()
        refusal = admission.admit(pod, requests, self._node_view(node))
        if refusal is not None:
            self._refuse(pod, jp, refusal, now)
            return
        if jp is None:  # a pod the broker did not adopt (created bound, say)
            jp = JobPod("", namespace, pod_name, requests, None)
            jp.host_ports = tuple(admission.host_ports(pod))
            jp.labels = dict(pod["metadata"].get("labels") or {})
            self.pods[(namespace, pod_name)] = jp
        _take(node.used, jp.requests, +1)  # its requests, a pod slot, its host ports
        node.host_ports.extend(jp.host_ports)
        jp.node = node.name
        if self.kubelet.admit(pod, jp, node):
            return  # its containers start later (pod_lifecycle)
        self._start(namespace, pod_name, pod, jp, node, now)

    def _start(
        self,
        namespace: str,
        pod_name: str,
        pod: dict[str, Any],
        jp: JobPod,
        node: NodeInfo,
        now: str,
    ) -> None:
        """The containers start now and the pod is Ready: its Batsim job executes."""
        job_id = self._register_at_start(pod, jp)

        def running(obj: dict[str, Any]) -> dict[str, Any]:
            if job_id:
                obj["metadata"].setdefault("annotations", {})[JOB_ID_ANNOTATION] = job_id
            return _running_status(obj, node, now)

        self.facade.store.update("pods", namespace, pod_name, running, copy=False)
        self._track_running(namespace, pod_name, jp, node)
        self.service_ended(namespace, pod_name)

    def service_ended(self, namespace: str, pod_name: str) -> None:
        """A service's pod that started after its service ended exits at once (code 0),
        outside Batsim: there is nothing left for it to serve."""
        jp = self.pods.get((namespace, pod_name))
        if jp is None or not jp.service_over:
            return
        self._release(jp)
        jp.state, jp.service_over = "done", False
        stamp = self.facade.store.timestamp()
        self.facade.store.update(
            "pods",
            namespace,
            pod_name,
            lambda obj: pod_lifecycle.exited_status(obj, stamp, killed=False),
            copy=False,
        )

    def _node_view(self, node: NodeInfo) -> admission.NodeView:
        """The kubelet's node: the Node object as it is now (labels and taints a
        scheduler may have changed through the API), the platform's allocatable."""
        obj = self._node_objects.get(node.name) or {}
        labels = (obj.get("metadata") or {}).get("labels") or {}
        taints = (obj.get("spec") or {}).get("taints") or []
        return admission.NodeView(
            node.name,
            labels if isinstance(labels, dict) else {},
            taints if isinstance(taints, list) else [],
            node.allocatable,
            node.used,
            node.host_ports,
        )

    def _on_commit(self, key: str, event: str, obj: dict[str, Any]) -> None:
        """Store listener (store lock held): keep the Node objects the kubelet reads."""
        if key == "nodes":
            name = obj["metadata"]["name"]
            if event == "DELETED":
                self._node_objects.pop(name, None)
            else:
                self._node_objects[name] = obj  # stored objects are never mutated

    def _refuse(
        self, pod: dict[str, Any], jp: JobPod | None, refusal: admission.Refusal, now: str
    ) -> None:
        """The kubelet's refusal: the pod fails with its reason and message, a Warning
        Event says why, and its Batsim job, still pending, is rejected."""
        meta = pod["metadata"]

        def refuse(obj: dict[str, Any]) -> dict[str, Any]:
            status = obj.setdefault("status", {})
            status["phase"] = "Failed"
            status["reason"] = refusal.reason
            status["message"] = refusal.status_message
            status["startTime"] = now
            return obj

        self.facade.store.update("pods", meta["namespace"], meta["name"], refuse, copy=False)
        k8s_events.emit(
            self.facade.store,
            pod,
            type_="Warning",
            reason=refusal.reason,
            message=refusal.message,
            component="kubelet",
        )
        self.stats.rejected_by_kubelet += 1
        if jp is not None and jp.state == "pending":
            jp.state = "rejected"
            if jp.job_id:
                self._close(jp)
                self._decisions.append(p.RejectJob(jp.job_id))

    def _track_running(self, namespace: str, pod_name: str, jp: JobPod, node: NodeInfo) -> None:
        """A pod whose containers run (its resources were taken at admission): its Batsim
        job executes on the node's resource (an API-made pod, not a job, runs until
        deleted), and its usage is published."""
        if jp.state in ("pending", "starting"):
            jp.node = node.name
            jp.started_ns = self.now_ns()
            if jp.job_id:
                self.stats.jobs_started += 1
                self._decisions.append(p.ExecuteJob(jp.job_id, ProcSet(node.resource_id)))
            jp.state = "running"
        self._running[(namespace, pod_name)] = jp
        self._unpublished[(namespace, pod_name)] = jp
        self._metrics_at = None

    def _release(self, jp: JobPod) -> None:
        key = (jp.namespace, jp.name)
        if self._running.pop(key, None) is not None:
            self._metrics_at = None
            self._unpublished.pop(key, None)
            self._curved.pop(key, None)
            self._account(jp, self._pod_usage.pop(key, None), None)
            self.facade.metrics.remove_pod(jp.namespace, jp.name)
        if jp.node is not None and jp.state in ("running", "killed", "starting"):
            node = self.nodes[jp.node]
            _take(node.used, jp.requests, -1)
            for port in jp.host_ports:
                node.host_ports.remove(port)
            jp.node = None  # released once

    def take_decisions(self) -> list[Any]:
        out, self._decisions = self._decisions, []
        return out

    # ------------------------------------------------------------- metrics
    def refresh_metrics(self) -> None:
        """metrics.k8s.io: running pods use their profile's usage curve (timewarp
        extension ``usage``), else their requests; nodes the sum of their pods. Recomputed
        when time moved or the running set changed.

        Cost O(changed), not O(nodes + running pods): a pod is evaluated when it starts
        and, if its usage follows a curve, whenever time moved; a pod's or node's sample
        is re-published only when its value changed (every node once, at the first
        refresh), with the refresh's timestamp."""
        now = self.now_ns()
        if self._metrics_at == now:
            return
        self._metrics_at = now
        board = self.facade.metrics
        if self.services:
            self._publish_service_usage(now)
        if len(self._node_sum) != len(self.nodes):  # the first refresh, or new nodes
            for name in self.nodes:
                if name not in self._node_sum:
                    self._node_sum[name] = [0, 0]
                    self._dirty_nodes.add(name)
        pods = self._unpublished
        self._unpublished = {}
        if self._curves_at != now:
            self._curves_at = now
            pods = {**self._curved, **pods}
        for key, jp in pods.items():
            if self.services and self.services.serves(jp.namespace, jp.labels):
                continue  # its usage comes from the traffic model's ticks
            cpu_n, mem = jp.cpu_m * 1_000_000, jp.memory
            if jp.usage and jp.started_ns is not None:
                self._curved[key] = jp
                elapsed = (now - jp.started_ns) / 1e9
                period = jp.usage.get("period")
                cpu_n = int(float(_curve(jp.usage.get("cpu"), elapsed, period, cpu_n / 1e9)) * 1e9)
                mem = _bytes(_curve(jp.usage.get("memory"), elapsed, period, mem))
            old = self._pod_usage.get(key)
            if old != (cpu_n, mem):
                self._pod_usage[key] = (cpu_n, mem)
                self._account(jp, old, (cpu_n, mem))
                board.set_pod(
                    jp.namespace,
                    jp.name,
                    {"main": (cpu_n, mem)},
                    timestamp_ns=now,
                    labels=jp.labels,
                )
        dirty, self._dirty_nodes = self._dirty_nodes, set()
        for name in dirty:
            usage, node = self._node_sum.get(name), self.nodes.get(name)
            if usage is not None and node is not None and self._node_usage.get(name) != usage:
                self._node_usage[name] = list(usage)
                board.set_node(name, usage[0], usage[1], timestamp_ns=now, labels=node.labels)

    def _publish_service_usage(self, now: int) -> None:
        """Service pods: the traffic model's sample of the newest visible metrics tick
        (cpu from the requests served, memory = the pod's request), in metrics.k8s.io
        and custom.metrics.k8s.io; a pod has no metrics before its first tick, as with
        metrics-server."""
        assert self.services is not None
        board = self.facade.metrics
        for key, usage in sorted(self.services.refresh(now).items()):
            jp = self._running.get(key)
            if jp is None:
                continue  # gone since the tick
            sample = (usage.cpu_nanocores, jp.memory)
            old = self._pod_usage.get(key)
            self._pod_usage[key] = sample
            self._account(jp, old, sample)
            board.set_pod(
                jp.namespace,
                jp.name,
                {usage.container: sample},
                timestamp_ns=usage.timestamp_ns,
                window_s=usage.window_s,
                labels=jp.labels,
            )
            board.set_pod_custom(
                jp.namespace,
                jp.name,
                usage.custom,
                timestamp_ns=usage.timestamp_ns,
                window_s=usage.window_s,
                labels=jp.labels,
            )

    def _account(
        self, jp: JobPod, old: tuple[int, int] | None, new: tuple[int, int] | None
    ) -> None:
        """Move a pod's published usage from ``old`` to ``new`` in its node's sum."""
        total = self._node_sum.get(jp.node) if jp.node is not None else None
        if total is None:
            return
        old_cpu, old_mem = old or (0, 0)
        new_cpu, new_mem = new or (0, 0)
        total[0] += new_cpu - old_cpu
        total[1] += new_mem - old_mem
        self._dirty_nodes.add(jp.node)


def _take(used: dict[str, int], requests: dict[str, int], sign: int) -> None:
    """Add (sign +1) or give back (-1) a pod's requests and its pod slot."""
    for name, value in requests.items():
        used[name] = used.get(name, 0) + sign * value
    used["pods"] = used.get("pods", 0) + sign


def _defers(pod: dict[str, Any]) -> bool:
    """A pod whose Batsim job is registered when it starts: an API ReplicaSet's (not a
    workload ReplicaSet's job), or a service's (its length depends on when it starts)."""
    ref = podutil.controller_of(pod) or {}
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if ref.get("kind") == "ReplicaSet" and RS_LABEL not in labels:
        return True
    return pod_lifecycle.SERVE_UNTIL in ((pod.get("metadata") or {}).get("annotations") or {})


def _running_status(obj: dict[str, Any], node: NodeInfo, now: str) -> dict[str, Any]:
    """A pod's status once the kubelet started it on ``node`` at ``now``: Running,
    every condition True, each container running."""
    status = obj.setdefault("status", {})
    uid = obj["metadata"].get("uid", "")
    status.update(
        phase="Running",
        hostIP=node.ip,
        podIP=node.ip,
        startTime=now,
        conditions=[
            {"type": t, "status": "True", "lastTransitionTime": now, "lastProbeTime": None}
            for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ],
        containerStatuses=[
            {
                "name": c["name"],
                "image": c.get("image", DEFAULT_IMAGE),
                "imageID": "",
                "containerID": f"timewarp://{uid}-{c['name']}",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
                "lastState": {},
            }
            for c in obj["spec"].get("containers", [])
        ],
    )
    return obj


def _curve(points: Any, elapsed: float, period: Any, default: Any) -> Any:
    """Piecewise-constant ``[[t, value], ...]`` from the job's start, optionally periodic."""
    if not points:
        return default
    if period:
        elapsed = elapsed % float(period)
    value = default
    for t, v in points:
        if float(t) <= elapsed:
            value = v
        else:
            break
    if isinstance(value, str):
        return parse_quantity(value) if not value.endswith("m") else float(parse_quantity(value))
    return value
