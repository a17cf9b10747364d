"""What a real API server adds to an object on create: admission defaults and validation.

Pure functions over JSON dicts; the store calls them with its clock time and its seeded
random source, so the same sequence of requests yields the same uids and names.

Limits (documented, deliberate): no ServiceAccount token volumes, no LimitRanges or
ResourceQuotas, no immutability checks on pod specs beyond ``spec.nodeName`` (which
only a binding may set once).
"""

from __future__ import annotations

import functools
import random
import re
import uuid
from datetime import UTC, datetime
from typing import Any

from . import apps, autoscaling
from .errors import ApiError, invalid
from .resources import ResourceType

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# The API server's generateName alphabet (no vowels, no confusable digits).
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

BUILTIN_PRIORITY_CLASSES = {
    "system-node-critical": 2000001000,
    "system-cluster-critical": 2000000000,
}


def format_time(epoch_ns: int) -> str:
    """RFC 3339 with second precision, like ``metav1.Time``."""
    return _format_seconds(epoch_ns // 10**9)


@functools.lru_cache(maxsize=4096)  # every write stamps the time: most share their second
def _format_seconds(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(epoch_ns: int) -> str:
    """RFC 3339 with microseconds, like ``metav1.MicroTime``."""
    seconds, rest = divmod(epoch_ns, 10**9)
    base = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{rest // 1000:06d}Z"


def new_uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def generated_name(prefix: str, rng: random.Random) -> str:
    return prefix + "".join(rng.choice(_SUFFIX_ALPHABET) for _ in range(5))


def validate_name(rt: ResourceType, name: Any) -> None:
    if not isinstance(name, str) or not name:
        raise invalid(
            rt.kind,
            str(name or ""),
            ["metadata.name: Required value: name or generateName is required"],
        )
    pattern, limit = (_DNS_LABEL, 63) if rt.plural == "namespaces" else (_DNS_SUBDOMAIN, 253)
    if len(name) > limit or not pattern.match(name):
        raise invalid(
            rt.kind,
            name,
            [
                f"metadata.name: Invalid value: {name!r}: a lowercase RFC 1123 "
                f"{'label' if limit == 63 else 'subdomain'} must consist of lower case "
                "alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character"
            ],
        )


def _qos_class(containers: list[dict[str, Any]]) -> str:
    requests_any = limits_all = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            requests_any = True
        for r in ("cpu", "memory"):
            if r not in lim or (r in req and req[r] != lim[r]):
                guaranteed = False
        limits_all = limits_all or bool(lim)
    if not requests_any:
        return "BestEffort"
    return "Guaranteed" if guaranteed and limits_all else "Burstable"


def _default_container(c: dict[str, Any]) -> None:
    image = c.get("image") or ""
    tag = image.rsplit("/", 1)[-1]
    if "imagePullPolicy" not in c:
        c["imagePullPolicy"] = (
            "Always" if (":" not in tag or tag.endswith(":latest")) else "IfNotPresent"
        )
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("resources", {})
    res = c["resources"]
    # A container with limits but no requests gets requests = limits.
    if res.get("limits"):
        res.setdefault("requests", {})
        for k, v in res["limits"].items():
            res["requests"].setdefault(k, v)


def default_pod(pod: dict[str, Any], priority_of: dict[str, int]) -> None:
    """Apply the pod defaults and admission plugins a stock API server runs."""
    name = pod["metadata"].get("name", "")
    spec = pod.setdefault("spec", {})
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise invalid("Pod", name, ["spec.containers: Required value"])
    for i, c in enumerate(containers + (spec.get("initContainers") or [])):
        if not isinstance(c, dict) or not c.get("name"):
            raise invalid("Pod", name, [f"spec.containers[{i}].name: Required value"])
        if not c.get("image"):
            raise invalid("Pod", name, [f"spec.containers[{i}].image: Required value"])
        _default_container(c)
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    class_name = spec.get("priorityClassName")
    if class_name:
        if class_name not in priority_of:
            raise ApiError(
                403,
                f'pods "{name}" is forbidden: no PriorityClass with name {class_name} was found',
                "Forbidden",
                kind="pods",
                name=name,
            )
        spec["priority"] = priority_of[class_name]
    else:
        spec.setdefault("priority", 0)
    tolerations = spec.setdefault("tolerations", [])
    for taint in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(t.get("key") == taint for t in tolerations if isinstance(t, dict)):
            tolerations.append(
                {
                    "key": taint,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            )
    status = pod.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", _qos_class(containers))


def default_object(rt: ResourceType, obj: dict[str, Any], priority_of: dict[str, int]) -> None:
    """Kind-specific defaults and the validation that makes typed models deserialize."""
    meta = obj["metadata"]
    name = meta.get("name", "")
    if rt.key == "pods":
        default_pod(obj, priority_of)
    elif rt.key == "namespaces":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj.setdefault("status", {}).setdefault("phase", "Active")
        meta.setdefault("labels", {}).setdefault("kubernetes.io/metadata.name", name)
    elif rt.key == "events":
        if not isinstance(obj.get("involvedObject"), dict):
            raise invalid("Event", name, ["involvedObject: Required value"])
    elif rt.key == "events.events.k8s.io":
        if not obj.get("eventTime"):
            raise invalid("Event", name, ["eventTime: Required value"])
    elif rt.group in ("apps", "batch"):
        meta.setdefault("generation", 1)
        spec = obj.setdefault("spec", {})
        if rt.plural in ("replicasets", "deployments", "statefulsets", "daemonsets"):
            if not isinstance(spec.get("selector"), dict):
                raise invalid(rt.kind, name, ["spec.selector: Required value"])
            if not isinstance(spec.get("template"), dict):
                raise invalid(rt.kind, name, ["spec.template: Required value"])
            if rt.plural != "daemonsets":
                spec.setdefault("replicas", 1)
        if rt.key in apps.WORKLOADS:
            apps.default_workload(rt.key, obj)
        if rt.plural == "jobs":
            if not isinstance(spec.get("template"), dict):
                raise invalid("Job", name, ["spec.template: Required value"])
            default_job(obj)
        if rt.plural == "cronjobs" and not spec.get("schedule"):
            raise invalid("CronJob", name, ["spec.schedule: Required value"])
    elif rt.key == autoscaling.HPA_KEY:
        autoscaling.default_hpa(obj)
    elif rt.key == "priorityclasses.scheduling.k8s.io":
        if not isinstance(obj.get("value"), int):
            raise invalid("PriorityClass", name, ["value: Required value"])
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")


JOB_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")


def check_update(rt: ResourceType, obj: dict[str, Any], subresource: str | None) -> None:
    """What an update (PUT or PATCH) gets for the kinds whose controllers depend on it:
    the same defaults as on create (a real server defaults every object it decodes) and
    the same validation (422)."""
    if subresource is None and rt.key in apps.WORKLOADS:
        apps.default_workload(rt.key, obj)
    elif rt.key == autoscaling.HPA_KEY:
        if subresource is None:
            autoscaling.default_hpa_spec(obj)
            autoscaling.validate_hpa(obj)
        else:
            autoscaling.validate_hpa_status(obj)


def default_job(job: dict[str, Any]) -> None:
    """batch/v1 Job admission: the real server's defaults, the generated selector (unless
    ``manualSelector``) and the template labels that go with it, and the one validation a
    Job's pods depend on (``restartPolicy`` Never or OnFailure; a template without one
    defaults to Always, which a Job refuses, as the real server does)."""
    meta, spec = job["metadata"], job["spec"]
    name, uid = meta.get("name", ""), meta.get("uid", "")
    template = spec["template"]
    template_spec = template.get("spec")
    if not isinstance(template_spec, dict):
        raise invalid("Job", name, ["spec.template.spec: Required value"])
    policy = template_spec.setdefault("restartPolicy", "Always")
    if policy not in ("Never", "OnFailure"):
        raise invalid(
            "Job",
            name,
            [
                f'spec.template.spec.restartPolicy: Unsupported value: "{policy}": supported '
                'values: "OnFailure", "Never"'
            ],
        )
    for key in ("parallelism", "backoffLimit", "activeDeadlineSeconds"):
        value = spec.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise invalid("Job", name, [f"spec.{key}: Invalid value: {value!r}: must be >= 0"])
    if spec.get("completions") is not None:
        value = spec["completions"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise invalid(
                "Job", name, [f"spec.completions: Invalid value: {value!r}: must be >= 0"]
            )
    spec.setdefault("parallelism", 1)
    if "completions" not in spec:
        spec["completions"] = 1
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    if not spec.get("manualSelector"):
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        for key in JOB_LABELS:
            labels[key] = uid
        for key in JOB_NAME_LABELS:
            labels[key] = name
        spec["selector"] = {"matchLabels": {JOB_LABELS[0]: uid}}
    elif not isinstance(spec.get("selector"), dict):
        raise invalid("Job", name, ["spec.selector: Required value"])


def make_node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    address: str | None = None,
    heartbeat: str = "1970-01-01T00:00:00Z",
) -> dict[str, Any]:
    """A Ready node as a kubelet would register it, complete enough for every client
    version's typed ``V1Node`` (``nodeInfo`` fields are required by old clients)."""
    all_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "timewarp-simulated",
        **(labels or {}),
    }
    resources = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "100Gi"}
    condition = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status (simulated)",
        "lastHeartbeatTime": heartbeat,
        "lastTransitionTime": heartbeat,
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": {},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [condition],
            "addresses": [
                {"type": "InternalIP", "address": address or "10.0.0.1"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": "",
                "containerRuntimeVersion": "timewarp://0.1.0",
                "kernelVersion": "simulated",
                "kubeProxyVersion": "v1.30.0",
                "kubeletVersion": "v1.30.0",
                "machineID": "",
                "operatingSystem": "linux",
                "osImage": "timewarp simulated node",
                "systemUUID": "",
            },
            "phase": "Running",
        },
    }
