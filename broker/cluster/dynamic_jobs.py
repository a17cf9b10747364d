"""Pods the API made (a controller's, a bare pod) as Batsim *dynamic jobs*.

A pod that says how long it runs (``timewarp.io/duration``, or ``timewarp.io/serve-until``
for a service's) becomes REGISTER_JOB ``k8s!<namespace>.<pod>`` with a ``delay-<seconds>``
profile (registered once) when the simulator accepts dynamic jobs and registration is
not finished; its ``spec.activeDeadlineSeconds`` becomes the job's walltime. An API
ReplicaSet's pod (or a service's) is registered when it starts, not when it is made: a
pod that never starts never holds up the end of the simulation. Any other pod runs until
deleted, outside Batsim's accounting, with a Warning Event (``NotSimulated``) saying why.
"""

from __future__ import annotations

from typing import Any

from broker.cluster import pod_lifecycle
from broker.cluster.state import (
    DURATION_ANNOTATION,
    JOB_ID_ANNOTATION,
    NOT_SIMULATED,
    RS_LABEL,
    ClusterState,
    JobPod,
)
from broker.controllers import events as k8s_events
from broker.k8s import naming, podutil
from simulator import protocol as p


class DynamicJobs:
    """Registers the API's pods as Batsim jobs (see the module docstring)."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._profiles: set[str] = set()  # profiles registered in the API workload

    @staticmethod
    def pod_duration(pod: dict[str, Any]) -> tuple[float | None, str]:
        """``timewarp.io/duration`` of a pod (or pod template) in seconds, or None and
        why not."""
        value, why = pod_lifecycle.annotation_seconds(pod, DURATION_ANNOTATION)
        if value is None and not why:
            return None, f"no {DURATION_ANNOTATION} annotation"
        return value, why

    def adopt(self, pod: dict[str, Any]) -> JobPod:
        """A pod the broker did not make from a Batsim job: a dynamic job if it says how
        long it runs and the simulator can take it, else it runs until deleted."""
        state = self.state
        jp = JobPod.of_pod(pod)
        namespace, name = jp.namespace, jp.name
        state.pods[(namespace, name)] = jp
        duration, why = self.simulation_plan(pod)
        if duration is None:
            self.not_simulated(pod, why)
            return jp
        if defers(pod):
            # A ReplicaSet replaces its pods for ever: they do not keep the simulation
            # going, and one becomes a Batsim job when it starts (a pod that never
            # starts never holds up the end of the simulation).
            jp.counted, jp.deferred = False, True
            return jp
        job_id = self._register_api_pod(jp, pod, duration)
        if (pod["metadata"].get("annotations") or {}).get(JOB_ID_ANNOTATION) != job_id:

            def annotate(obj: dict[str, Any]) -> None:
                obj["metadata"].setdefault("annotations", {})[JOB_ID_ANNOTATION] = job_id

            state.facade.store.update_status("pods", namespace, name, annotate, copy=False)
        return jp

    def _register_api_pod(self, jp: JobPod, pod: dict[str, Any], duration: float) -> str:
        """REGISTER_JOB ``k8s!<namespace>.<pod>`` (and its ``delay-<s>`` profile, once)."""
        state = self.state
        meta = pod["metadata"]
        namespace, name = meta.get("namespace", "default"), meta["name"]
        occurrence = 1
        job_id = naming.api_pod_job_id(namespace, name)
        while state.job_id_taken(job_id):  # an earlier pod of this name (a name is free once gone)
            occurrence += 1
            job_id = naming.api_pod_job_id(namespace, name, occurrence)
        profile = f"delay-{duration:.15g}"
        if profile not in self._profiles:
            self._profiles.add(profile)
            state.decisions.append(
                p.RegisterProfile(
                    naming.API_WORKLOAD, profile, {"type": "delay", "delay": duration}
                )
            )
        job: dict[str, Any] = {
            "id": job_id,
            "subtime": state.now_ns() / 1e9,
            "res": 1,
            "profile": profile,
        }
        deadline = (pod.get("spec") or {}).get("activeDeadlineSeconds")
        if isinstance(deadline, int) and not isinstance(deadline, bool) and deadline > 0:
            job["walltime"] = deadline
        self.register(jp, job_id, job)
        return job_id

    def register_at_start(self, pod: dict[str, Any], jp: JobPod | None) -> str:
        """A ReplicaSet's pod starts: its Batsim job is registered now (then executed),
        or it runs outside Batsim (Warning Event) if it can no longer be one. Returns the
        job id to annotate the pod with ("" if none)."""
        if jp is None or not jp.deferred or jp.state not in ("pending", "starting"):
            return ""
        jp.deferred = False
        end, _ = pod_lifecycle.serve_until_s(pod)
        if end is not None and end * 1e9 <= self.state.now_ns():
            jp.service_over = True  # it will stop at once (service_ended), no Batsim job
            return ""
        duration, why = self.simulation_plan(pod)
        if duration is None:
            self.not_simulated(pod, why)
            return ""
        return self._register_api_pod(jp, pod, duration)

    def _lifetime(self, pod: dict[str, Any]) -> tuple[float | None, str]:
        """How long ``pod`` runs from now: ``timewarp.io/serve-until`` (a service's pod
        lives until the service ends) or ``timewarp.io/duration``, the earlier if both."""
        end, why = pod_lifecycle.serve_until_s(pod)
        duration, why_not = self.pod_duration(pod)
        if end is None:
            return (None, why) if why else (duration, why_not)
        left = max(0.0, round(end - self.state.now_ns() / 1e9, 6))  # Batsim's times: µs
        return (left if duration is None else min(left, duration)), ""

    def simulation_plan(self, pod: dict[str, Any]) -> tuple[float | None, str]:
        """How long ``pod`` runs as a Batsim job, or None and why it cannot be one."""
        duration, why = self._lifetime(pod)
        if duration is not None and not self.state.dynamic_jobs:
            why = "the simulator does not accept dynamic jobs (Batsim needs --enable-dynamic-jobs)"
        elif duration is not None and self.state.registration_finished:
            why = "it came after the workload ended (registration_finished was sent)"
        return (None, why) if why else (duration, "")

    def register(self, jp: JobPod, job_id: str, job: dict[str, Any]) -> None:
        """REGISTER_JOB ``job`` for ``jp``."""
        state = self.state
        jp.job_id = job_id
        jp.raw_job = job
        state.jobs[job_id] = jp
        if jp.counted:
            state.open_jobs += 1
        state.stats.dynamic_jobs += 1
        state.decisions.append(p.RegisterJob(job_id, job))

    def close(self, jp: JobPod) -> None:
        """A Batsim job ended (completed, killed, rejected): one open job less."""
        if jp.counted:
            self.state.open_jobs -= 1

    def not_simulated(self, pod: dict[str, Any], why: str) -> None:
        """``pod`` runs outside Batsim: count it and say why (Warning Event)."""
        self.state.stats.pods_outside_batsim += 1
        k8s_events.emit(
            self.state.facade.store,
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


def defers(pod: dict[str, Any]) -> bool:
    """A pod whose Batsim job is registered when it starts: an API ReplicaSet's (not a
    workload ReplicaSet's job), or a service's (its length depends on when it starts)."""
    ref = podutil.controller_of(pod) or {}
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if ref.get("kind") == "ReplicaSet" and RS_LABEL not in labels:
        return True
    return pod_lifecycle.SERVE_UNTIL in ((pod.get("metadata") or {}).get("annotations") or {})
