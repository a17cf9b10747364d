"""A workload's job (and its profile) → the Pod timewarp submits for it
(``docs/simulator.md``, "Kubernetes shapes of the workload").

Fields, on the job or else its profile (the job's win; ``requests``, ``limits`` and
``pod`` are merged, the job's over the profile's):

- ``cpu``, ``memory``: shortcuts for ``requests.cpu`` / ``requests.memory`` (Batkube's;
  cpu defaults to 1 when neither a cpu request nor a cpu limit is given, memory 0 means
  none);
- ``requests``, ``limits``: resource name → quantity, extended resources included
  (``{"nvidia.com/gpu": 1}``); an extended resource given only as a request is also its
  limit (Kubernetes requires both, equal); a limit without a request is also the
  request (the API server's default);
- ``namespace``, ``labels``, ``annotations``, ``image``, ``priorityClassName``,
  ``nodeSelector``, ``tolerations``; ``scheduler`` (the profile's first, Batkube's
  convention) → ``spec.schedulerName``; ``replicaset`` (handled by the cluster);
- ``pod``: a partial Pod manifest merged over the pod built from the fields above, as a
  JSON merge patch (objects merged key by key, a ``null`` removes a key, lists replaced)
  except that ``spec.containers[0]`` is merged into timewarp's container field by field
  and further containers are added.

:func:`check_fields` checks one job or profile object up front; :func:`build_pod` makes
the pod (the same code the cluster runs, so what was checked is what runs).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from broker.cluster import pod_manifest as pm
from broker.facade.patch import merge_patch
from broker.k8s import resource_names as rn
from broker.k8s.quantity import canonical
from broker.k8s.shape_rules import ShapeError

DEFAULT_CPU = "1"
DEFAULT_IMAGE = "registry.timewarp.invalid/simulated-job:latest"
DEFAULT_SCHEDULER = "default-scheduler"
CONTAINER_NAME = "main"
METADATA_FIELDS = ("namespace", "labels", "annotations", "replicaset")
SPEC_FIELDS = ("priorityClassName", "nodeSelector", "tolerations")
POD_FIELDS = (
    *METADATA_FIELDS,
    *SPEC_FIELDS,
    "image",
    "scheduler",
    "cpu",
    "memory",
    "requests",
    "limits",
    "pod",
)


def check_fields(obj: Mapping[str, Any]) -> None:
    """Check the Kubernetes fields of one job or profile object; ShapeError names the
    field (``requests.nvidia.com/gpu``, ``pod.spec.tolerations[0].effect``)."""
    checks = {
        "namespace": pm.check_namespace,
        "labels": pm.check_labels,
        "annotations": pm.check_annotations,
        "replicaset": pm.check_subdomain,
        "priorityClassName": pm.check_subdomain,
        "nodeSelector": pm.check_labels,
        "tolerations": pm.check_tolerations,
        "scheduler": pm.check_subdomain,
        "pod": pm.check_pod_manifest,
    }
    for name, check in checks.items():
        if name in obj:
            check(obj[name], name)
    if "image" in obj:
        image = pm.expect(obj["image"], pm.STR, "image")
        if not image or image != image.strip():
            raise ShapeError(
                "image", "Invalid value: must be non-empty, without leading or trailing whitespace"
            )
    for name in ("cpu", "memory"):
        if name in obj:
            rn.check_quantity(name, obj[name], name)
    for name in ("requests", "limits"):
        if name in obj:
            pm.check_resource_list(obj[name], name)
    for name in ("cpu", "memory"):
        if name in obj and name in (obj.get("requests") or {}):
            raise ShapeError(name, f"give {name} or requests.{name}, not both")


def _quantity_text(value: Any) -> str:
    """A workload's quantity as the pod carries it: a number as its canonical text
    (Batkube writes cpu 0.188), a string as written."""
    return value if isinstance(value, str) else canonical(value)


def _resources(profile: Mapping[str, Any], job: Mapping[str, Any]) -> tuple[dict, dict]:
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    for source in (profile, job):
        for name, value in (source.get("requests") or {}).items():
            requests[name] = _quantity_text(value)
        for name, value in (source.get("limits") or {}).items():
            limits[name] = _quantity_text(value)
        if "cpu" in source:
            requests["cpu"] = _quantity_text(source["cpu"])
        if "memory" in source:
            if str(source["memory"]) in ("0", ""):
                requests.pop("memory", None)  # Batkube's "no memory request"
            else:
                requests["memory"] = _quantity_text(source["memory"])
    if "cpu" not in requests and "cpu" not in limits:
        requests["cpu"] = DEFAULT_CPU
    return requests, limits


def merge_pod(pod: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``patch`` (a partial Pod) over ``pod``: a merge patch, but ``spec.containers[0]``
    merges into the first container and the others are added."""
    patch = dict(patch)
    spec = dict(patch.get("spec") or {})
    containers = spec.pop("containers", None)
    patch.pop("apiVersion", None)
    patch.pop("kind", None)
    patch["spec"] = spec
    merged = merge_patch(pod, patch)
    if containers:
        first = merge_patch(merged["spec"]["containers"][0], containers[0])
        merged["spec"]["containers"] = [first, *containers[1:]]
    return merged


def default_requests_from_limits(pod: dict[str, Any]) -> None:
    """What the API server does to every container: a limit without a request is also
    the request."""
    spec = pod.get("spec") or {}
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        limits = (container.get("resources") or {}).get("limits") or {}
        if limits:
            requests = container["resources"].setdefault("requests", {})
            for name, value in limits.items():
                requests.setdefault(name, value)


def check_containers_resources(pod: Mapping[str, Any]) -> None:
    """Requests within limits, extended resources equal, on the pod as built."""
    spec = pod.get("spec") or {}
    for key in ("containers", "initContainers"):
        for i, container in enumerate(spec.get(key) or []):
            resources = container.get("resources") or {}
            pm.check_requests_within_limits(
                resources.get("requests") or {},
                resources.get("limits") or {},
                "" if key == "containers" and i == 0 else f"pod.spec.{key}[{i}].resources",
            )


def build_pod(
    job_id: str, name: str, job: Mapping[str, Any], profile: Mapping[str, Any]
) -> dict[str, Any]:
    """The pod for ``job`` (with ``profile``'s fields under the job's)."""
    fields = {k: profile[k] for k in POD_FIELDS if k in profile}
    fields.update({k: job[k] for k in POD_FIELDS if k in job})
    requests, limits = _resources(profile, job)
    for resource, value in requests.items():
        if rn.is_extended(resource):
            limits.setdefault(resource, value)  # not overcommitted: limit = request
    resources: dict[str, Any] = {"requests": requests}
    if limits:
        resources["limits"] = limits
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": str(fields.get("namespace", "default")),
            "labels": dict(fields.get("labels") or {}),
            "annotations": dict(fields.get("annotations") or {}),
        },
        "spec": {
            "schedulerName": str(profile.get("scheduler", job.get("scheduler", DEFAULT_SCHEDULER))),
            "containers": [
                {
                    "name": CONTAINER_NAME,
                    "image": str(fields.get("image", DEFAULT_IMAGE)),
                    "resources": resources,
                }
            ],
        },
    }
    for key in SPEC_FIELDS:
        if key in fields:
            pod["spec"][key] = fields[key]
    for source in (profile, job):
        if isinstance(source.get("pod"), dict):
            pod = merge_pod(pod, json.loads(json.dumps(source["pod"])))
    default_requests_from_limits(pod)
    return pod
