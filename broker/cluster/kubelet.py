"""The kubelet model of the simulated cluster: what happens to a pod once it is bound.

A bound pod goes once through the kubelet's admission (``broker/cluster/kubelet_admission.py``:
every requested resource and the pod count, node selector and required affinity, host
ports, NoExecute taints); a refused one fails with the kubelet's reason (``OutOfcpu``,
``NodeAffinity``…) and its Batsim job is rejected (REJECT_JOB); an admitted one takes its
node's resources, starts (now, or after its start-up time: ``broker/cluster/pod_lifecycle.py``),
turns Running and its Batsim job executes (EXECUTE_JOB). A pod removed (deleted, evicted,
its containers stopped) gives its resources back; a running job is killed (KILL_JOB), a
pending one rejected, and a workload ReplicaSet's pod replaced
(``broker/cluster/replacements.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from procset import ProcSet

from broker.cluster import kubelet_admission as admission
from broker.cluster import pod_lifecycle
from broker.cluster.dynamic_jobs import DynamicJobs
from broker.cluster.metrics_publisher import MetricsPublisher
from broker.cluster.pod_shape import DEFAULT_IMAGE
from broker.cluster.replacements import WorkloadReplicaSets
from broker.cluster.state import JOB_ID_ANNOTATION, ClusterState, JobPod, NodeInfo, take
from broker.controllers import events as k8s_events
from broker.controllers.typed import TypedStore
from broker.facade.podstatus import set_addresses
from simulator import protocol as p

Obj = dict[str, Any]


class KubeletModel:
    """Every node's kubelet (see the module docstring); :attr:`steps` plays the timed
    steps of a pod's life (start-up, readiness, graceful termination)."""

    def __init__(
        self,
        state: ClusterState,
        dynamic: DynamicJobs,
        metrics: MetricsPublisher,
        replacements: WorkloadReplicaSets,
    ) -> None:
        self.state = state
        self.dynamic = dynamic
        self.metrics = metrics
        self.replacements = replacements
        self._node_objects: dict[str, Obj] = {}  # the store's Nodes, by name
        self._deleted_nodes: set[str] = set()  # Nodes deleted through the API: no kubelet
        # the kubelet owns pods' status: it reads a malformed one (a client's status
        # write) as absent, and rewrites it decoded (broker/controllers/typed.py)
        self.store = TypedStore(state.facade.store, ("pods",))
        state.facade.store.add_listener(self._on_commit, ("nodes",))
        self.timeline = pod_lifecycle.Timeline(state.facade.clock)
        self.steps = pod_lifecycle.Kubelet(self)

    def _on_commit(self, key: str, event: str, obj: Obj) -> None:
        """Store listener (store lock held): keep the Node objects the kubelet reads."""
        if key == "nodes":
            name = obj["metadata"]["name"]
            if event == "DELETED":
                self._node_objects.pop(name, None)
                self._deleted_nodes.add(name)
            else:
                self._node_objects[name] = obj  # stored objects are never mutated
                self._deleted_nodes.discard(name)

    def node_deleted(self, name: str) -> bool:
        """Whether the Node ``name`` was deleted through the API (no kubelet runs there)."""
        return name in self._deleted_nodes

    def admit(self, namespace: str, pod_name: str, node_name: str) -> None:
        """The kubelet model for one binding (``broker/cluster/kubelet_admission.py``): the
        pod is refused (Failed, with the kubelet's reason: ``OutOf<resource>``,
        ``NodeAffinity``, ``TaintToleration``…) or it runs — its resources are taken, its
        status says Running and Ready, and its Batsim job is executed."""
        state = self.state
        pod = self.store.get_or_none("pods", namespace, pod_name)
        if pod is None or (pod.get("spec") or {}).get("nodeName") != node_name:
            return  # the binding did not go through
        if self.node_deleted(node_name):
            return  # no kubelet on a deleted node: the pod stays Pending, an orphan (podgc)
        jp = state.pods.get((namespace, pod_name))
        if (jp is not None and jp.state != "pending") or (pod.get("status") or {}).get(
            "phase", "Pending"
        ) != "Pending":
            return  # admitted (or refused) once already: a pod created and bound in one step
        state.stats.bindings += 1
        self._scheduled(pod, node_name)
        node = state.nodes[node_name]
        requests = admission.pod_requests(pod) if jp is None else jp.requests
        now = state.facade.store.timestamp()
        refusal = admission.admit(pod, requests, self._node_view(node))
        if refusal is not None:
            self._refuse(pod, jp, refusal, now)
            return
        if jp is None:  # a pod the broker did not adopt (created bound, say)
            jp = JobPod.of_pod(pod)
            state.pods[(namespace, pod_name)] = jp
        take(node.used, jp.requests, +1)  # its requests, a pod slot, its host ports
        node.host_ports.extend(jp.host_ports)
        jp.node = node.name
        # its sandbox: an address of the node's pod CIDR (broker/cluster/pod_network.py)
        jp.ip = state.pod_network.allocate(node.name, _host_network(pod))
        if self.steps.admit(pod, jp, node):
            return  # its containers start later (pod_lifecycle)
        for c in (pod.get("spec") or {}).get("containers") or []:  # they start now
            image = c.get("image", DEFAULT_IMAGE)
            self._aside_event(pod, "Pulled", f'Container image "{image}" already present on machine', node.name)  # fmt: skip
            self._aside_event(pod, "Created", f"Created container {c['name']}", node.name)
            self._aside_event(pod, "Started", f"Started container {c['name']}", node.name)
        self.start_containers(
            namespace, pod_name, pod, jp, node, lambda obj: _running_status(obj, node, now, jp.ip)
        )

    def _scheduled(self, pod: Obj, node_name: str) -> None:
        """The scheduler's ``Scheduled`` Event of a pod bound by a binding (not of one
        created on its node), from the pod's scheduler."""
        conditions = (pod.get("status") or {}).get("conditions") or []
        if not any(
            c.get("type") == "PodScheduled" and c.get("status") == "True" for c in conditions
        ):
            return
        meta = pod["metadata"]
        scheduler = (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"
        message = f"Successfully assigned {meta['namespace']}/{meta['name']} to {node_name}"
        self._aside_event(pod, "Scheduled", message, "", component=scheduler)

    def _aside_event(self, pod: Obj, reason: str, message: str, host: str, component: str = "kubelet") -> None:  # fmt: skip
        """A Normal Event the broker writes beside the run (``broker/controllers/events.py``),
        by the kubelet of node ``host`` unless ``component`` says otherwise."""
        k8s_events.emit(
            self.store, pod, type_="Normal", reason=reason, message=message,
            component=component, aside=True, host=host,
        )  # fmt: skip

    def start_containers(
        self,
        namespace: str,
        pod_name: str,
        pod: Obj,
        jp: JobPod,
        node: NodeInfo,
        status: Callable[[Obj], Any],
    ) -> None:
        """The containers start now (``status`` edits the pod's status to say so): its
        Batsim job, registered now if it was deferred, executes."""
        job_id = self.dynamic.register_at_start(pod, jp)

        def running(obj: Obj) -> None:
            if job_id:
                obj["metadata"].setdefault("annotations", {})[JOB_ID_ANNOTATION] = job_id
            status(obj)

        # trusted: the status functions build fresh JSON values of their own
        self.store.update_status("pods", namespace, pod_name, running, copy=False, trusted=True)
        self._track_running(namespace, pod_name, jp, node)
        self._service_ended(namespace, pod_name)

    def _service_ended(self, namespace: str, pod_name: str) -> None:
        """A service's pod that started after its service ended exits at once (code 0),
        outside Batsim: there is nothing left for it to serve."""
        jp = self.state.pods.get((namespace, pod_name))
        if jp is None or not jp.service_over:
            return
        self.release(jp)
        jp.state, jp.service_over = "done", False
        self.state.retire(jp)
        store = self.store
        stamp = store.timestamp()
        store.update_status(
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

    def _refuse(self, pod: Obj, jp: JobPod | None, refusal: admission.Refusal, now: str) -> None:
        """The kubelet's refusal: the pod fails with its reason and message, a Warning
        Event says why, and its Batsim job, still pending, is rejected."""
        state = self.state
        meta = pod["metadata"]

        def refuse(obj: Obj) -> Obj:
            status = obj.setdefault("status", {})
            status["phase"] = "Failed"
            status["reason"] = refusal.reason
            status["message"] = refusal.status_message
            status["startTime"] = now
            return obj

        self.store.update_status("pods", meta["namespace"], meta["name"], refuse, copy=False)
        k8s_events.emit(
            state.facade.store,
            pod,
            type_="Warning",
            reason=refusal.reason,
            message=refusal.message,
            component="kubelet",
        )
        state.stats.rejected_by_kubelet += 1
        if jp is not None and jp.state == "pending":
            jp.state = "rejected"
            if jp.job_id:
                self.dynamic.close(jp)
                state.decisions.append(p.RejectJob(jp.job_id))
                state.retire(jp)

    def _track_running(self, namespace: str, pod_name: str, jp: JobPod, node: NodeInfo) -> None:
        """A pod whose containers run (its resources were taken at admission): its Batsim
        job executes on the node's resource (an API-made pod, not a job, runs until
        deleted), and its usage is published."""
        state = self.state
        if jp.state in ("pending", "starting"):
            jp.node = node.name
            jp.started_ns = state.now_ns()
            if jp.job_id:
                state.stats.jobs_started += 1
                state.decisions.append(p.ExecuteJob(jp.job_id, ProcSet(node.resource_id)))
            jp.state = "running"
        self.metrics.started((namespace, pod_name), jp)

    def release(self, jp: JobPod) -> None:
        """``jp`` no longer runs: its usage goes, its node's resources come back (once)."""
        self.metrics.stopped(jp)
        if jp.node is not None and jp.state in ("running", "killed", "starting"):
            node = self.state.nodes[jp.node]
            take(node.used, jp.requests, -1)
            for port in jp.host_ports:
                node.host_ports.remove(port)
            self.state.pod_network.release(node.name, jp.ip)
            jp.node = jp.ip = None  # released once

    def run_due(self) -> bool:
        """Play the pods' timed steps due now; whether there were any."""
        steps = self.timeline.take_due(self.state.now_ns())
        for step, namespace, pod, uid in steps:
            self.steps.step(step, namespace, pod, uid)
        return bool(steps)

    def pod_terminating(self, namespace: str, name: str, pod: Obj) -> None:
        """``pod`` stays Terminating a while (a workload ReplicaSet replaces it now)."""
        self.replacements.pod_terminating(namespace, name, pod)

    def removed_pod(self, namespace: str, name: str, obj: Obj | None) -> None:
        """An eviction or deletion: end its job (kill a running one, reject a pending
        one), then, for a pod a workload ReplicaSet owns that had not finished, replace
        it. ``obj`` (its last state) may be the store's own, shared: read it, never
        change it (``Store.remove``)."""
        jp = self.state.pods.pop((namespace, name), None)
        if jp is not None:
            self._end_job(jp)
        self.replacements.pod_removed(namespace, name, obj, jp)

    def _end_job(self, jp: JobPod) -> None:
        """A removed pod's job: a running one frees its node and is killed (an API-made
        pod is simply done), a pending one is rejected."""
        state = self.state
        if jp.state == "starting":  # killed before its containers started: it never ran
            self.release(jp)
            jp.state = "pending"
        if jp.state == "running":
            self.release(jp)
            if jp.job_id:
                jp.state = "killed"
                state.stats.kills += 1
                state.decisions.append(p.KillJob([jp.job_id]))
            else:
                jp.state = "done"
        elif jp.state == "pending" and jp.job_id:
            jp.state = "rejected"
            self.dynamic.close(jp)
            state.decisions.append(p.RejectJob(jp.job_id))
            state.retire(jp)


def _host_network(pod: Obj) -> bool:
    return (pod.get("spec") or {}).get("hostNetwork") is True


def _running_status(obj: Obj, node: NodeInfo, now: str, pod_ip: str | None) -> Obj:
    """A pod's status once the kubelet started it on ``node`` at ``now``: Running,
    every condition True, each container running, its address (``pod_ip``, else the
    node's)."""
    status = obj.setdefault("status", {})
    uid = obj["metadata"].get("uid", "")
    set_addresses(status, node.ip, pod_ip)
    status.update(
        phase="Running",
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
