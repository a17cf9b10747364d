"""What the controllers (``broker/controllers/``) may do to pods, as the simulated cluster
does it: :class:`ControllerPods` implements ``broker.controllers.base.PodOps``.

A pod a controller makes is stored through admission and becomes a Batsim dynamic job
when it can (``broker/cluster/dynamic_jobs.py``); a pod it deletes ends its job (killed if
running, rejected if pending) through the kubelet model.
"""

from __future__ import annotations

from typing import Any

from broker.cluster import pod_lifecycle
from broker.cluster.dynamic_jobs import DynamicJobs, defers
from broker.cluster.kubelet import KubeletModel
from broker.cluster.state import JOB_ID_ANNOTATION, ClusterState
from broker.k8s import naming

Obj = dict[str, Any]


class ControllerPods:
    """The controllers' pod operations on the simulated cluster."""

    def __init__(self, state: ClusterState, dynamic: DynamicJobs, kubelet: KubeletModel) -> None:
        self.state = state
        self.dynamic = dynamic
        self.kubelet = kubelet
        self._deferred: dict[tuple[str, str, str], int] = {}  # owner -> pods left for later

    def simulates(self, template: Obj) -> bool:
        """Pods from ``template`` would become Batsim jobs (the Job controller asks)."""
        return self.state.can_register() and self.dynamic.pod_duration(template)[0] is not None

    def create_controlled_pod(self, pod: Obj) -> Obj:
        """Store a pod a controller made and adopt it (annotated with its job id as it
        is stored: one write, not two)."""
        simulated = self.dynamic.simulation_plan(pod)[0] is not None and not defers(pod)

        def annotate(obj: Obj) -> None:
            if simulated:
                meta = obj["metadata"]
                job_id = naming.api_pod_job_id(meta["namespace"], meta["name"])
                meta.setdefault("annotations", {})[JOB_ID_ANNOTATION] = job_id

        namespace = pod["metadata"]["namespace"]
        created = self.state.facade.store.create(
            "pods", pod, namespace=namespace, prepare=annotate, built=True
        )
        self.dynamic.adopt(created)
        return created

    def terminate_pod(self, namespace: str, name: str) -> None:
        """Delete a pod as a DELETE with default options would (gracefully, see
        ``broker.cluster.pod_lifecycle``)."""
        if self.kubelet.steps.mark_terminating(namespace, name, None) is None:
            self.delete_controlled_pod(namespace, name)
        else:
            self.kubelet.steps.terminate(namespace, name)

    def may_create_for(self, template: Obj) -> bool:
        """Whether pods from ``template`` are still wanted (not once the service they
        serve ended)."""
        end, _ = pod_lifecycle.serve_until_s(template)
        return end is None or end * 1e9 > self.state.now_ns()

    def delete_controlled_pod(self, namespace: str, name: str) -> None:
        """Delete a pod now, killing or rejecting its job."""
        obj = self.state.facade.store.remove("pods", namespace, name)  # shared: not decoded
        if obj is None:
            return
        self.kubelet.removed_pod(namespace, name, obj)

    def defer_creations(self, kind: str, namespace: str, name: str, later: int) -> None:
        """An owner leaves ``later`` pods to later bursts (0: it has them all): the stats
        count each owner's last shortfall (``pods_deferred``: pods never made)."""
        key = (kind, namespace, name)
        if later:
            self._deferred[key] = later
        elif self._deferred.pop(key, None) is None:
            return
        self.state.stats.pods_deferred = sum(self._deferred.values())
