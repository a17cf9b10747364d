"""A cluster snapshot's Deployments and HPAs → services (``docs/services.md``), for
``simulator/kube_import.py``: the Deployment as it was (a container without a cpu request
gets ``default_cpu``; a dotted name becomes a DNS label), its HPA (``autoscaling/v2``, or
``v1``'s ``targetCPUUtilizationPercentage`` converted), and a constant traffic that keeps
the CPU utilisation the HPA last saw (``status.currentMetrics``; else ``utilization``):
``rate = replicas × cpu request × utilisation ÷ request cost``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_DNS_LABEL = re.compile(r"[^a-z0-9-]")
BUILTIN_PRIORITY_CLASSES = ("system-node-critical", "system-cluster-critical")


_SUFFIX = {"m": 1e-3, "": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_SUFFIX.update({"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40})
_QTY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")


def quantity(text: str) -> float:
    """A Kubernetes quantity's value (the suffixes pods use)."""
    match = _QTY.match(str(text))
    if not match or match.group(2) not in _SUFFIX:
        raise ValueError(f"quantity {text!r}: unsupported")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def service_name(deployment: dict, taken: set[str]) -> str:
    meta = deployment["metadata"]
    name = _DNS_LABEL.sub("-", meta["name"].lower())[:63].strip("-") or "svc"
    if name in taken:
        name = f"{name}-{meta.get('namespace', 'default')}"[:63].strip("-")
    taken.add(name)
    return name


def _hpa_v2(hpa: dict) -> dict[str, Any]:
    spec = dict(hpa.get("spec") or {})
    if hpa.get("apiVersion") == "autoscaling/v1":
        target = spec.pop("targetCPUUtilizationPercentage", 80)
        spec["metrics"] = [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": target},
                },
            }
        ]
    ref = dict(spec.get("scaleTargetRef") or {})
    ref["apiVersion"] = "apps/v1"
    spec["scaleTargetRef"] = ref
    meta = hpa["metadata"]
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": meta["name"], "namespace": meta.get("namespace", "default")},
        "spec": spec,
    }


def _observed_utilization(hpa: dict | None) -> float | None:
    """The cpu utilisation (1 = 100 %) the HPA last saw, if it says."""
    if hpa is None:
        return None
    status = hpa.get("status") or {}
    if "currentCPUUtilizationPercentage" in status:  # autoscaling/v1
        return status["currentCPUUtilizationPercentage"] / 100
    for metric in status.get("currentMetrics") or []:
        resource = metric.get("resource") or {}
        current = resource.get("current") or {}
        if resource.get("name") == "cpu" and "averageUtilization" in current:
            return current["averageUtilization"] / 100
    return None


def _deployment_manifest(deployment: dict, default_cpu: str) -> dict[str, Any]:
    meta, spec = deployment["metadata"], deployment.get("spec") or {}
    template = json.loads(json.dumps(spec.get("template") or {}))
    template.setdefault("metadata", {}).pop("creationTimestamp", None)
    pod_spec = template.get("spec") or {}
    # a cluster's own PriorityClass is not in the dump (the simulated API would refuse
    # the pods): its name goes; the built-in classes stay
    if pod_spec.get("priorityClassName") not in (None, *BUILTIN_PRIORITY_CLASSES):
        del pod_spec["priorityClassName"]
    for container in (template.get("spec") or {}).get("containers") or []:
        resources = container.setdefault("resources", {})
        if "cpu" not in (resources.get("requests") or {}) and "cpu" not in (
            resources.get("limits") or {}
        ):
            resources.setdefault("requests", {})["cpu"] = default_cpu
    out_spec: dict[str, Any] = {
        "replicas": spec.get("replicas", 1),
        "selector": spec.get("selector") or {},
        "template": template,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace", "default"),
            "labels": meta.get("labels") or {},
        },
        "spec": out_spec,
    }


def _cpu_request(manifest: dict) -> float:
    total = 0.0
    for container in manifest["spec"]["template"]["spec"].get("containers") or []:
        resources = container.get("resources") or {}
        value = (resources.get("requests") or {}).get("cpu") or (resources.get("limits") or {}).get(
            "cpu", "0"
        )
        total += quantity(value)
    return total


@dataclass(frozen=True)
class ServiceOptions:
    duration: float = 3600.0
    request_cost: float = 0.05
    timeout: float = 10.0
    utilization: float = 0.5
    default_cpu: str = "100m"


def service(deployment: dict, hpa: dict | None, name: str, opts: ServiceOptions) -> dict:
    manifest = _deployment_manifest(deployment, opts.default_cpu)
    # timewarp's Deployments are named by DNS labels (their pods' names grow from them):
    # a dotted name becomes the service's, and so does the HPA's target
    if manifest["metadata"]["name"] != _DNS_LABEL.sub("", manifest["metadata"]["name"]):
        manifest["metadata"]["name"] = name
    replicas = (deployment.get("status") or {}).get("replicas", manifest["spec"]["replicas"])
    utilization = _observed_utilization(hpa)
    if utilization is None:
        utilization = opts.utilization
    rate = max(replicas, 1) * _cpu_request(manifest) * utilization / opts.request_cost
    entry: dict[str, Any] = {
        "name": name,
        "deployment": manifest,
        "traffic": {"type": "constant", "rate": round(rate, 3), "duration": opts.duration},
        "request": {
            "cost": {"distribution": "exponential", "mean": opts.request_cost},
            "timeout": opts.timeout,
        },
    }
    if hpa is not None:
        entry["horizontalPodAutoscaler"] = _hpa_v2(hpa)
        entry["horizontalPodAutoscaler"]["spec"]["scaleTargetRef"]["name"] = manifest["metadata"][
            "name"
        ]
    return entry
