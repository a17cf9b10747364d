"""Translate the official client's typed objects (V1Node, V1Pod) into KubCG's plain data.

Only attribute access is used, so the models of every client release (the classic ones
and the pydantic layer of 37.x) work alike.

Labels and annotations read (all optional):

- node label ``timewarp.io/node-class``: ``gpu`` or ``cpu``. A node is a GPU node if this
  label says ``gpu`` or its allocatable ``nvidia.com/gpu`` is > 0; it has that many GPUs
  (1 when only the label says so).
- pod requests/limits ``nvidia.com/gpu``: the pod needs a GPU (GPU slots only).
- pod annotation ``kubcg.timewarp.io/gpu-capable: "true"``: the application can run on a
  CPU or a GPU; ``kubcg.timewarp.io/gpu-image: IMAGE`` names its GPU variant (and implies
  capable). Images can also be declared capable on the command line.
- pod annotation ``kubcg.timewarp.io/resource`` (``cpu``/``gpu``): written by KubCG on
  the binding (the API server copies a binding's annotations to the pod), read back so a
  restarted scheduler knows which resource a running pod uses.
"""

from __future__ import annotations

from collections.abc import Iterable

from kubernetes.utils import parse_quantity

from sample_schedulers.common.model import epoch_seconds

from .model import NodeInfo, PodInfo, Resource, Taint, Toleration

NODE_CLASS_LABEL = "timewarp.io/node-class"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_CAPABLE_ANNOTATION = "kubcg.timewarp.io/gpu-capable"
GPU_IMAGE_ANNOTATION = "kubcg.timewarp.io/gpu-image"
RESOURCE_ANNOTATION = "kubcg.timewarp.io/resource"
IMAGE_ANNOTATION = "kubcg.timewarp.io/image"


def quantity(value: object) -> float:
    """A Kubernetes quantity ("1", "4000m", "0.188", "500Mi", 2) as a float."""
    return float(parse_quantity(value))


def node_info(node) -> NodeInfo:
    """NodeInfo from a V1Node."""
    meta, spec, status = node.metadata, node.spec, node.status
    labels = dict(meta.labels or {})
    allocatable = dict((status.allocatable if status else None) or {})
    gpus = int(quantity(allocatable.get(GPU_RESOURCE, 0)))
    if labels.get(NODE_CLASS_LABEL) == "gpu":
        gpus = max(gpus, 1)
    ready = True
    for condition in (status.conditions if status else None) or []:
        if condition.type == "Ready":
            ready = condition.status == "True"
    return NodeInfo(
        name=meta.name,
        node_class="gpu" if gpus > 0 else "cpu",
        gpus=gpus,
        cpu=quantity(allocatable.get("cpu", 0)),
        memory=quantity(allocatable.get("memory", 0)),
        schedulable=ready and not (spec is not None and spec.unschedulable),
        labels=labels,
        taints=tuple(
            Taint(key=t.key or "", effect=t.effect, value=t.value or "")
            for t in ((spec.taints if spec is not None else None) or [])
            if t.effect in ("NoSchedule", "NoExecute")
        ),
    )


def _requests(container) -> dict:
    resources = container.resources
    if resources is None:
        return {}
    merged = dict(resources.limits or {})
    merged.update(resources.requests or {})
    return merged


def pod_info(pod, gpu_capable_images: Iterable[str] = ()) -> PodInfo:
    """PodInfo from a V1Pod; ``gpu_capable_images`` marks images the switch can run on GPU."""
    meta, spec, status = pod.metadata, pod.spec, pod.status
    annotations = dict(meta.annotations or {})
    containers = list(spec.containers or [])
    cpu = memory = 0.0
    gpu_required = False
    for container in containers:
        requests = _requests(container)
        cpu += quantity(requests.get("cpu", 0))
        memory += quantity(requests.get("memory", 0))
        gpu_required |= quantity(requests.get(GPU_RESOURCE, 0)) > 0
    image = (containers[0].image if containers else None) or ""
    gpu_image = annotations.get(GPU_IMAGE_ANNOTATION)
    gpu_capable = (
        gpu_image is not None
        or annotations.get(GPU_CAPABLE_ANNOTATION, "").lower() == "true"
        or image in set(gpu_capable_images)
    )
    hint = annotations.get(RESOURCE_ANNOTATION)
    resource_hint: Resource | None = hint if hint in ("cpu", "gpu") else None  # type: ignore[assignment]
    if resource_hint is None and gpu_required:
        resource_hint = "gpu"
    started = epoch_seconds(status.start_time) if status else None
    for cs in (status.container_statuses if status else None) or []:
        state = cs.state
        running = state.running if state else None
        if running is not None and running.started_at is not None:
            t = epoch_seconds(running.started_at)
            started = t if started is None else min(started, t)
    return PodInfo(
        namespace=meta.namespace or "default",
        name=meta.name,
        uid=meta.uid or f"{meta.namespace}/{meta.name}",
        image=image,
        cpu=cpu,
        memory=memory,
        gpu_required=gpu_required,
        gpu_capable=gpu_capable,
        gpu_image=gpu_image,
        node_selector=dict(spec.node_selector or {}),
        tolerations=tuple(
            Toleration(t.key or "", t.operator or "Equal", t.value or "", t.effect or "")
            for t in spec.tolerations or []
        ),
        scheduler_name=spec.scheduler_name or "default-scheduler",
        node_name=spec.node_name,
        phase=(status.phase if status else None) or "Pending",
        created=epoch_seconds(meta.creation_timestamp) or 0.0,
        started=started,
        resource_hint=resource_hint,
    )


def running_time(pod) -> float | None:
    """T_Run of a Succeeded pod: first container startedAt to last finishedAt, in seconds.

    None unless the pod succeeded and every container reports a terminated state with
    both timestamps (a failed or half-reported pod teaches nothing).
    """
    status = pod.status
    if status is None or status.phase != "Succeeded":
        return None
    starts, ends = [], []
    for cs in status.container_statuses or []:
        terminated = cs.state.terminated if cs.state else None
        if terminated is None or terminated.started_at is None or terminated.finished_at is None:
            return None
        starts.append(epoch_seconds(terminated.started_at))
        ends.append(epoch_seconds(terminated.finished_at))
    if not starts:
        return None
    return max(0.0, max(ends) - min(starts))
