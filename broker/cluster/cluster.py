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

:class:`Cluster` is the Batsim side (SIMULATION_BEGINS, JOB_SUBMITTED, JOB_COMPLETED, the
decisions) and the step that applies the rest; its parts, one module each, share its
state (``broker/cluster/state.py``):

- ``broker/cluster/inbox.py`` — the facade's hooks, recording what the API asked for;
- ``broker/cluster/kubelet.py`` — the kubelet model (admission, start, removal);
- ``broker/cluster/dynamic_jobs.py`` — the API's pods as Batsim dynamic jobs;
- ``broker/cluster/replacements.py`` — the workload's ReplicaSets and their replacements;
- ``broker/cluster/metrics_publisher.py`` — metrics.k8s.io from the running pods;
- ``broker/cluster/controller_pods.py`` — what the controllers may do to pods; the
  controllers themselves come from ``broker/controllers/registry.py``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from broker.cluster import kubelet_admission as admission
from broker.cluster import pod_lifecycle
from broker.cluster.controller_pods import ControllerPods
from broker.cluster.dynamic_jobs import DynamicJobs
from broker.cluster.inbox import FacadeInbox
from broker.cluster.kubelet import KubeletModel
from broker.cluster.metrics_publisher import MetricsPublisher
from broker.cluster.node_shape import build_node, node_name_for, node_shape
from broker.cluster.pod_shape import build_pod
from broker.cluster.replacements import WorkloadReplicaSets
from broker.cluster.state import JOB_ID_ANNOTATION, ClusterState, JobPod, NodeInfo
from broker.controllers import registry
from broker.facade.errors import ApiError
from broker.k8s import naming
from broker.k8s.shape_rules import ShapeError
from simulator import protocol as p


@dataclass
class Cluster(ClusterState):
    """Mirror of the Batsim platform and workload in the facade's store."""

    def __post_init__(self) -> None:
        # The cluster's state: the driver's steps and, with admit_bindings_at_once, the
        # binding requests that admit their pod themselves.
        self.state_lock = threading.RLock()
        self.metrics = MetricsPublisher(self)
        self.dynamic = DynamicJobs(self)
        self.replacements = WorkloadReplicaSets(self, self.dynamic)
        self.kubelet = KubeletModel(self, self.dynamic, self.metrics, self.replacements)
        self.pod_ops = ControllerPods(self, self.dynamic, self.kubelet)
        store, clock = self.facade.store, self.facade.clock
        self.controllers = registry.build(store, clock, self.pod_ops)
        self.controllers[registry.TERMINATED_POD_GC].threshold = self.terminated_pod_gc_threshold
        self.last_actors: list[str] | None = None  # see process()
        self.inbox = FacadeInbox(self, self.kubelet, self)

    # ------------------------------------------------------------- Batsim side
    def begin(self, data: p.SimulationBegins) -> None:
        self.profiles = data.profiles
        self.dynamic_jobs = bool((data.config or {}).get("dynamic-jobs-enabled"))
        for controller in self.controllers.values():
            controller.start()
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
            pod_cidr = self.pod_network.add_node(name)
            node = build_node(name, shape, ip, int(res["id"]), pod_cidr)
            store.create("nodes", node, copy=False)
            info = NodeInfo(name, int(res["id"]), shape.amounts(), ip, node["metadata"]["labels"])
            info.pod_cidr = pod_cidr
            self.nodes[name] = info
            self.stats.capacity_cores += info.cpu_m / 1000

    def submit(self, data: p.JobSubmitted) -> None:
        """JOB_SUBMITTED: the job becomes a Pending pod (shaped from the job and its
        profile, owned by its workload ReplicaSet if it names one), tracked as a
        :class:`~broker.cluster.state.JobPod` until its job ends."""
        if self.job_id_taken(data.job_id):
            return  # a job we registered, acknowledged (--acknowledge-dynamic-jobs)
        job = data.job
        workload = data.job_id.split("!", 1)[0]
        profile = data.profile or self.profiles.get(workload, {}).get(str(job.get("profile")), {})
        name = naming.pod_name(data.job_id)
        pod = _pod_for_job(data.job_id, name, job, profile)
        namespace = pod["metadata"]["namespace"]
        self.replacements.own(pod, namespace, job, profile)
        jp = _job_pod(data.job_id, namespace, name, pod, job, profile)
        self.jobs[data.job_id] = jp
        self.pods[(namespace, name)] = jp
        self.open_jobs += 1
        self.stats.jobs_submitted += 1
        self.facade.store.create("pods", pod, namespace=namespace, copy=False, built=True)

    def complete(self, data: p.JobCompleted) -> None:
        """JOB_COMPLETED: the pod's containers terminated (Succeeded, or Failed with the
        job's return code); a Terminating pod is removed now."""
        jp = self.jobs.get(data.job_id)
        if jp is None or jp.state not in ("running", "killed"):
            return
        self.kubelet.release(jp)
        if jp.started_ns is not None:
            self.stats.core_seconds += jp.cpu_m / 1000 * (self.now_ns() - jp.started_ns) / 1e9
        killed = jp.state == "killed"
        jp.state = "done"
        self.dynamic.close(jp)
        self.retire(jp)
        self.stats.jobs_done += 1
        if killed:
            return
        pods = self.kubelet.store  # a malformed pod status reads as absent
        now = self.facade.store.timestamp()
        terminating = False
        found = False

        def finish(pod: dict[str, Any]) -> None:
            nonlocal terminating, found
            found = True
            terminating = bool(pod["metadata"].get("deletionTimestamp"))
            _completed_status(pod, data, now)

        try:
            # trusted: _completed_status builds fresh JSON values of its own
            pods.update_status("pods", jp.namespace, jp.name, finish, copy=False, trusted=True)
        except ApiError as exc:
            # the pod is gone (deleted meanwhile): nothing to finish. No read before the
            # write (a copy of the whole pod and its decode, once per pod) to learn it.
            if exc.code == 404 and not found:
                return
            raise
        if terminating:
            # a Terminating pod whose container ends: the kubelet removes it now
            self.facade.store.delete("pods", jp.namespace, jp.name)
            self.pods.pop((jp.namespace, jp.name), None)

    def all_done(self) -> bool:
        """Every static job was submitted, every Batsim job ended, and no more can appear
        (no controller may still make simulated pods). O(1) but for the controllers."""
        if not self.all_submitted or self.open_jobs:
            return False
        if self.services and self.services.keeps_simulation_alive(self.now_ns()):
            return False  # a service still gets traffic
        if not self.can_register():
            return True
        now = self.now_ns()
        return not any(c.keeps_simulation_alive(now) for c in self.controllers.values())

    def take_decisions(self) -> list[Any]:
        out, self.decisions = self.decisions, []
        return out

    # ------------------------------------------------------------- the step
    def admit_bindings_at_once(self, on: bool = True) -> None:
        """Deterministic mode: a binding request admits its pod (and does whatever else
        the API asked for so far) before it is answered, instead of when every scheduler
        is idle. The outcome is the same — time cannot move while a request is in
        flight, and the request order is the order of the changes — but the work is
        done while the scheduler is still busy, not while it waits to be let go.
        ``on=False``: back to recording bindings for the next :meth:`process`."""
        self.inbox.admit_at_once(on)

    def process_pending(self) -> bool:
        """Whether :meth:`process` would do anything now (quick; no store access)."""
        return self.has_work() or (self.can_register() and self.all_done())

    def has_work(self) -> bool:
        if self.inbox.pending():
            return True
        if self.kubelet.timeline.due(self.now_ns()):
            return True
        if self.services and self.services.has_dirty():
            return True
        return any(c.has_work() for c in self.controllers.values())

    def process(self) -> bool:
        """Adopt pods the API created, apply kills and recorded bindings (kubelet
        admission) in the order they happened, play the pods' due steps, run the
        controllers, and say ``registration_finished`` when it is time. Returns whether
        anything was done."""
        created, bindings, removed, terminations = self.inbox.take()
        for namespace, name in created:
            pod = self.facade.store.get_or_none("pods", namespace, name)
            if pod is not None and (namespace, name) not in self.pods:
                self.dynamic.adopt(pod)
                node = (pod.get("spec") or {}).get("nodeName")
                if node in self.nodes:  # created bound: the kubelet takes it directly
                    self.kubelet.admit(namespace, name, node)
        for namespace, pod, obj in removed:
            self.kubelet.removed_pod(namespace, pod, obj)
        for namespace, pod, node in bindings:
            self.kubelet.admit(namespace, pod, node)
        for namespace, pod in terminations:
            self.kubelet.steps.terminate(namespace, pod)
        stepped = self.kubelet.run_due()
        did = bool(bindings or removed or created or terminations or stepped)
        # the controllers that did something this round with no input from outside them
        # (no request, no kubelet step): rounds of those alone that never end are the
        # broker's own busy loop, and the stall guard names them
        self.last_actors = None if did else []
        for name, controller in self.controllers.items():
            if controller.reconcile():
                did = True
                if self.last_actors is not None:
                    self.last_actors.append(name)
        if self.services and self.services.has_dirty():
            # a service's pods changed: the traffic model learns it at this instant
            self.metrics.invalidate()
            self.refresh_metrics()
        if self.can_register() and self.all_done():
            self.registration_finished = True
            self.decisions.append(p.Notify("registration_finished"))
            did = True
        return did

    def refresh_metrics(self) -> None:
        """metrics.k8s.io (``broker/cluster/metrics_publisher.py``), recomputed when time
        moved or the running set changed."""
        self.metrics.refresh()


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


def _completed_status(pod: dict[str, Any], data: p.JobCompleted, now: str) -> None:
    """A pod's status once its Batsim job completed at ``now``: Succeeded (or Failed,
    ``DeadlineExceeded`` past its walltime), each container terminated, not Ready."""
    ok = data.job_state == "COMPLETED_SUCCESSFULLY"
    walltime = data.job_state == "COMPLETED_WALLTIME_REACHED"
    status = pod.setdefault("status", {})
    status["phase"] = "Succeeded" if ok else "Failed"
    if walltime:
        status["reason"] = "DeadlineExceeded"
        status["message"] = "Pod was active on the node longer than the specified deadline"
    exit_code = 0 if ok else (data.return_code if data.return_code > 0 else 137 if walltime else 1)
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
