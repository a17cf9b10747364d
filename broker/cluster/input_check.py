"""The Kubernetes side of a simulation's inputs, checked before anything starts
(``timewarp simulate`` exits 2 with the message): every compute host's properties
(``broker/cluster/node_shape.py``), every profile's and job's pod fields
(``broker/cluster/pod_shape.py``), and whether each job's pod could ever run.

"Could ever run" is the kubelet's admission (``broker/cluster/kubelet_admission.py``) on an empty node,
with one difference: an extended resource no node lists is a refusal (the kubelet would
not check it, but no scheduler can place the pod). A job is refused when no node passes,
naming the field that rules out every node (``requests.cpu``: 8 cpu on 1-core nodes;
``requests.nvidia.com/gpu``: no node has any; ``nodeSelector``/``pod.spec.affinity``: no
node has those labels; ``tolerations``: every node has a NoExecute taint it does not
tolerate) or saying that no single node satisfies them together. ``NoSchedule`` taints
and cordoned nodes do not count: they are the scheduler's business, and a scheduler may
choose to ignore them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from broker.cluster import kubelet_admission as admission
from broker.cluster.node_shape import NodeShape, node_name_for, node_shape
from broker.cluster.pod_shape import build_pod, check_containers_resources, check_fields
from broker.facade.errors import ApiError
from broker.facade.store import admissible
from broker.k8s import resource_names as rn
from broker.k8s.quantity import canonical
from broker.k8s.shape_rules import ShapeError
from simulator.platform import Platform
from simulator.traffic.spec import ServiceSpec
from simulator.workload import Workload


class InputError(ValueError):
    """A platform or workload the cluster model cannot use: names file and field."""


def check_inputs(platform: Platform, workloads: Sequence[Workload]) -> None:
    nodes = check_platform(platform)
    for workload in workloads:
        check_workload(workload, nodes)


def check_platform(platform: Platform) -> list[tuple[admission.NodeView, NodeShape]]:
    """Each compute host's node shape (InputError naming the host and property)."""
    return node_views(((h.name, h.properties) for h in platform.compute), str(platform.path))


def node_views(
    hosts: Iterable[tuple[str, dict[str, Any]]], where: str
) -> list[tuple[admission.NodeView, NodeShape]]:
    """The nodes hosts (name, properties) make, as an empty node would admit pods."""
    out = []
    for host_name, properties in hosts:
        try:
            shape = node_shape(properties)
        except ShapeError as exc:
            raise InputError(
                f"{where}: <host id={host_name!r}>: prop {exc.field}: {exc.message}"
            ) from None
        name = node_name_for(host_name)
        view = admission.NodeView(
            name, {"kubernetes.io/hostname": name, **shape.labels}, shape.taints, shape.amounts()
        )
        out.append((view, shape))
    return out


def api_refusal(key: str, obj: dict[str, Any], where: str) -> InputError | None:
    """What the API would answer a create of ``obj`` (its own decoding, defaults and
    validation: ``broker/facade/store.py`` ``admissible``), as an InputError naming
    each field under ``where``; None if it would be created."""
    try:
        admissible(key, obj)
    except ApiError as exc:
        causes = exc.details.get("causes") or []
        if not causes:
            return InputError(f"{where}: {exc.message}")
        return InputError("; ".join(f"{where}.{c['field']}: {c['message']}" for c in causes))
    return None


def check_services(
    services: Sequence[ServiceSpec], nodes: list[tuple[admission.NodeView, NodeShape]]
) -> None:
    """Each service's Deployment and HPA as the API would take them, and whether its
    pods could ever run (a template that fits no node fails every request: issue 27)."""
    for service in services:
        where = service.source
        for key, obj, field in (
            ("deployments.apps", service.deployment, "deployment"),
            ("horizontalpodautoscalers.autoscaling", service.hpa, "horizontalPodAutoscaler"),
        ):
            refusal = None if obj is None else api_refusal(key, obj, f"{where}.{field}")
            if refusal is not None:
                raise refusal
        template = service.deployment["spec"]["template"]
        meta = {**template.get("metadata", {}), "name": service.name}
        try:
            pod = admissible("pods", {"metadata": meta, "spec": template["spec"]})
        except ApiError as exc:
            raise InputError(f"{where}.deployment.spec.template: {exc.message}") from None
        verdict = never_fits(pod, nodes)
        if verdict is not None:
            raise InputError(
                f"{where}.deployment.spec.template.spec.containers: {verdict} (every "
                "request of the service would fail)"
            )


def check_workload(workload: Workload, nodes: list[tuple[admission.NodeView, NodeShape]]) -> None:
    check_services(workload.services, nodes)
    for name, profile in workload.profiles.items():
        try:
            check_fields(profile)
        except ShapeError as exc:
            raise InputError(
                f"{workload.path}: profiles.{name}.{exc.field}: {exc.message}"
            ) from None
    verdicts: dict[str, str | None] = {}  # pods alike get the same verdict
    never: list[tuple[str, str]] = []  # (where, verdict) of every job that can never run
    for index, job in enumerate(workload.jobs):
        where = f"{workload.path}: jobs[{index}] (id {job.local_id!r})"
        try:
            check_fields(job.raw)
            pod = build_pod(job.job_id, "pod", job.raw, workload.profiles[job.profile])
            check_containers_resources(pod)
        except ShapeError as exc:
            raise InputError(f"{where}.{exc.field}: {exc.message}") from None
        if job.res != 1:
            raise InputError(
                f"{where}.res: a job is one pod on one node under the broker: res must be 1, "
                f"got {job.res}"
            )
        key = json.dumps([pod["metadata"]["labels"], pod["spec"]], sort_keys=True)
        if key not in verdicts:
            verdicts[key] = never_fits(pod, nodes)
        if verdicts[key] is not None:
            never.append((where, verdicts[key]))
    if never:
        raise InputError(_never_message(never))


SHOWN_NEVER = 10  # jobs named in full after the first, when several can never run


def _never_message(never: list[tuple[str, str]]) -> str:
    """The first job that can never run in full, then every other one (the first few by
    index, id and field, then how many more): a user fixes them all in one go."""
    where, verdict = never[0]
    text = f"{where}.{verdict}"
    if len(never) == 1:
        return text
    others = [f"{w.partition(': ')[2]}.{v.partition(':')[0]}" for w, v in never[1:]]
    text += f"\n  {len(others)} more job(s) can never run either: " + "; ".join(
        others[:SHOWN_NEVER]
    )
    if len(others) > SHOWN_NEVER:
        text += f"; and {len(others) - SHOWN_NEVER} more"
    return text


def never_fits(
    pod: dict[str, Any], nodes: list[tuple[admission.NodeView, NodeShape]]
) -> str | None:
    """None if some empty node would admit ``pod``, else "<field>: can never run: why"."""
    requests = admission.pod_requests(pod)
    views = [view for view, _ in nodes]
    spec = pod["spec"]
    for refusal, field in (
        (admission.check_os_label(pod), "pod.metadata.labels"),
        (admission.check_os_field(pod), "pod.spec.os"),
    ):
        if refusal is not None:
            return f"{field}: can never run: {refusal.message}"
    fits = {v.name: True for v in views}
    for name, amount in sorted(requests.items(), key=lambda kv: (kv[0] not in _FIRST, kv[0])):
        ok = {v.name for v in views if v.allocatable.get(name, 0) >= amount}
        if not ok:
            return f"requests.{name}: can never run: {_short(name, amount, nodes)}"
        for v in views:  # by name: O(nodes) per request (NodeView equality is costly)
            fits[v.name] &= v.name in ok
    if not any(v.allocatable.get(rn.PODS, 0) >= 1 for v in views):
        return "pods: can never run: every node has allocatable pods 0"
    for v in views:
        fits[v.name] &= v.allocatable.get(rn.PODS, 0) >= 1
    affinity = {v.name for v in views if admission.check_node_affinity(pod, v) is None}
    if not affinity:
        field = "nodeSelector" if spec.get("nodeSelector") else "pod.spec.affinity.nodeAffinity"
        if spec.get("nodeSelector") and any(
            admission.node_affinity_matches(
                {"spec": {"nodeSelector": spec["nodeSelector"]}}, v.labels, v.name
            )
            for v in views
        ):
            field = "pod.spec.affinity.nodeAffinity"
        return f"{field}: can never run: no node has the labels it requires"
    tolerated = {v.name for v in views if admission.check_no_execute_taints(pod, v) is None}
    if not tolerated:
        taint = admission.untolerated_taint(
            views[0].taints, spec.get("tolerations"), ("NoExecute",)
        )
        return (
            "tolerations: can never run: every node has a NoExecute taint it does not "
            f"tolerate (e.g. {_taint_text(taint)} on {views[0].name})"
        )
    both = [v for v in views if fits[v.name] and v.name in affinity and v.name in tolerated]
    if not both:
        return (
            "requests: can never run: no single node has the resources, the labels and "
            "the tolerated taints it needs together"
        )
    return None


_FIRST = (rn.CPU, rn.MEMORY, rn.EPHEMERAL_STORAGE)


def _short(name: str, amount: int, nodes: list[tuple[admission.NodeView, NodeShape]]) -> str:
    listed = [shape.allocatable[name] for _, shape in nodes if name in shape.allocatable]
    if name == rn.CPU:
        want = canonical(f"{amount}m")
    elif name in (rn.MEMORY, rn.EPHEMERAL_STORAGE) or rn.is_hugepages(name):
        want = f"{amount} bytes of"
    else:
        want = str(amount)
    if not listed:
        return f"it requests {want} {name} and no node has {name}"
    largest = max(listed, key=lambda q: q.nano)
    return f"it requests {want} {name} and the largest node allocatable is {largest}"


def _taint_text(taint: Any) -> str:
    if not isinstance(taint, dict):
        return "?"
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"
