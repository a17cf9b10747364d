"""The ReplicaSets a Batsim workload declares (``"replicaset": NAME`` on its jobs).

A job naming a ReplicaSet has its pod labelled ``timewarp.io/replicaset=NAME`` and owned by
that ReplicaSet (made on first use, one replica more per job). Its pods are the workload's
jobs, not the ReplicaSet controller's: one evicted or deleted before it ended (or that
begins terminating) is replaced by a Pending pod from the same template, whose Batsim job
restarts from scratch (REGISTER_JOB ``<original>~r<n>``, :func:`broker.k8s.naming.replacement_job_id`)
or, with ``"timewarp": {"replacement": "remaining"}``, serves what is left of its time.
"""

from __future__ import annotations

import itertools
from typing import Any

from broker.cluster.dynamic_jobs import DynamicJobs
from broker.cluster.state import JOB_ID_ANNOTATION, RS_LABEL, ClusterState, JobPod
from broker.k8s import naming, podutil
from simulator import protocol as p

Obj = dict[str, Any]


class WorkloadReplicaSets:
    """The workload's ReplicaSets and the replacement of their pods (module docstring)."""

    def __init__(self, state: ClusterState, dynamic: DynamicJobs) -> None:
        self.state = state
        self.dynamic = dynamic
        self._rest_profiles = itertools.count(1)  # profiles of replacements serving the rest
        self._replacements: dict[str, int] = {}  # original job id -> replacements made
        self._replaced: set[tuple[str, str]] = set()  # pods replaced while Terminating

    def own(self, pod: Obj, namespace: str, job: Obj, profile: Obj) -> None:
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

    def _ensure_replicaset(self, namespace: str, name: str, pod: Obj) -> Obj:
        store = self.state.facade.store
        if store.get_or_none("replicasets.apps", namespace, name) is not None:

            def scale(obj: Obj) -> None:
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

    def pod_terminating(self, namespace: str, name: str, pod: Obj) -> None:
        """For the kubelet: ``pod`` stays Terminating a while. A workload ReplicaSet's pod
        is replaced now (a ReplicaSet does not count a Terminating pod)."""
        meta = pod["metadata"]
        owner = _replicaset_owner(meta)
        if owner is not None and RS_LABEL in (meta.get("labels") or {}):
            self._replaced.add((namespace, name))
            self._replace(namespace, pod, owner, self.state.pods.get((namespace, name)))

    def pod_removed(self, namespace: str, name: str, obj: Obj | None, jp: JobPod | None) -> None:
        """A pod was removed (its job ended already): a workload ReplicaSet's pod that
        had not finished, and was not replaced when it began terminating, is replaced."""
        meta = (obj or {}).get("metadata", {})
        owner = _replicaset_owner(meta)
        if obj is None or owner is None or RS_LABEL not in (meta.get("labels") or {}):
            return  # not a workload ReplicaSet's: its controller (if any) does the rest
        if (namespace, name) in self._replaced:
            self._replaced.discard((namespace, name))
            return  # replaced when it began terminating
        ended = (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if ended and not podutil.disruption(obj):  # failed by PodGC: its work was not done
            return
        self._replace(namespace, obj, owner, jp)

    def _replace(self, namespace: str, obj: Obj, owner: Obj, jp: JobPod | None) -> None:
        """The ReplicaSet controller: a new Pending pod from the same template. A Batsim
        job restarts as a new (dynamic) job with the same profile — or serves the rest of
        its time (:meth:`_serve_the_rest`); an API-made pod is adopted as one. Not when
        the ReplicaSet is gone too (e.g. with its namespace): no one replaces the pod."""
        state = self.state
        store = state.facade.store
        if store.get_or_none("replicasets.apps", namespace, owner["name"]) is None:
            return
        meta = obj["metadata"]
        annotations = {
            k: v for k, v in (meta.get("annotations") or {}).items() if k != JOB_ID_ANNOTATION
        }
        was_job = jp is not None and bool(jp.job_id) and jp.raw_job is not None
        new_id = self._replacement_job_id(jp) if was_job and state.can_register() else ""
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
        created = store.create("pods", replacement, namespace=namespace)
        state.stats.replacements += 1
        if not was_job:
            self.dynamic.adopt(created)  # an API-made pod: its annotations say how long it runs
            return
        assert jp is not None and jp.raw_job is not None
        new = JobPod.of_pod(created, usage=jp.usage)
        state.pods[(namespace, new.name)] = new
        if new_id:
            job = {**jp.raw_job, "id": new_id, "subtime": state.now_ns() / 1e9}
            self._serve_the_rest(jp, new, job)
            self.dynamic.register(new, new_id, job)
        elif not state.dynamic_jobs:
            self.dynamic.not_simulated(
                created,
                "it replaces a Batsim job but the simulator does not accept dynamic jobs "
                "(Batsim needs --enable-dynamic-jobs)",
            )
        else:
            self.dynamic.not_simulated(created, "it came after registration_finished was sent")

    def _replacement_job_id(self, jp: JobPod | None) -> str:
        """The next free id for a replacement of ``jp``'s job (see ``broker/k8s/naming.py``)."""
        assert jp is not None
        original = naming.original_job_id(jp.job_id)
        count = self._replacements.get(original, 0)
        new_id = ""
        while not new_id or self.state.job_id_taken(new_id):
            count += 1
            new_id = naming.replacement_job_id(original, count)
        self._replacements[original] = count
        return new_id

    def _serve_the_rest(self, old: JobPod, new: JobPod, job: Obj) -> None:
        """Workload extension ``"timewarp": {"replacement": "remaining"}`` on a delay
        profile: the job is a service needed for ``delay`` seconds from its first start
        (KSE's pods), so a replacement serves what is left of that time instead of starting
        the whole delay again (the default, ``"restart"``: a pod's work is redone)."""
        end = old.service_end_ns
        if end is None:
            if old.service_s is None or old.started_ns is None:
                return
            end = old.started_ns + round(old.service_s * 1e9)
        left = round(max(0, end - self.state.now_ns()) / 1e9, 6)  # Batsim times: µs in its CSVs
        workload = job["id"].split("!", 1)[0]
        name = f"{str(job['profile']).split('~rest', 1)[0]}~rest{next(self._rest_profiles)}"
        self.state.decisions.append(
            p.RegisterProfile(workload, name, {"type": "delay", "delay": left})
        )
        job["profile"] = name
        new.service_s, new.service_end_ns = old.service_s, end


def _replicaset_owner(meta: Obj) -> Obj | None:
    return next(
        (o for o in meta.get("ownerReferences") or [] if o.get("kind") == "ReplicaSet"), None
    )
