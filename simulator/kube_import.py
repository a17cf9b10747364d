"""A cluster snapshot (``kubectl get nodes,pods,deployments,hpa -A -o json``) → a
platform and a workload (``docs/simulator.md``, "Kubernetes workloads in").

- **Node** → a host named as the node: ``allocatable`` from ``status.allocatable`` (else
  ``capacity``), ``labels``, ``taints`` (``spec.taints``, less the cordon taint) and
  ``unschedulable``.
- **Deployment** → a service (``simulator/kube_services.py``) with the Deployment as it was, its
  HPA (``autoscaling/v2``, or ``v1``'s ``targetCPUUtilizationPercentage`` converted) and a
  constant traffic that keeps the CPU utilisation the HPA last saw
  (``status.currentMetrics``; else ``utilization``): ``rate = replicas × cpu request ×
  utilisation ÷ request cost``. Its pods (owned by a ReplicaSet, labels matching the
  selector) are the Deployment's, not jobs.
- **Any other Pod** → a job (one pod): ``subtime`` from ``metadata.creationTimestamp``,
  run time from its containers' ``state.terminated.finishedAt`` less ``status.startTime``
  (else the ``Started``/``Killing`` events of the pod, when the List has Events); a pod
  still running runs until the snapshot's time (the latest timestamp in the file); a pod
  that never started ``default_lifetime``. Its requests and limits (summed over
  containers), namespace, labels, owner ReplicaSet, ``nodeSelector``, ``tolerations``,
  ``affinity``, ``topologySpreadConstraints``, ``priorityClassName`` and
  ``schedulerName`` come along; a Job's ``activeDeadlineSeconds`` is not known from the
  pod and not set. DaemonSet pods and static (mirror) pods are left out: a scheduler does
  not place them.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from simulator.kube_services import (
    BUILTIN_PRIORITY_CLASSES,
    ServiceOptions,
    quantity,
    service,
    service_name,
)
from simulator.trace_select import WorkloadBuilder, clean, select, subtimes

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
SKIPPED_OWNERS = ("DaemonSet", "Node")
# fields of a pod's spec that come along on its job (under ``pod.spec``)
_SPEC_PASSTHROUGH = ("affinity", "topologySpreadConstraints")


class ClusterDumpError(ValueError):
    """A snapshot that is not a kubectl List, or an object missing what is needed."""


def _time(text: Any, where: str) -> float:
    """RFC 3339 (``2026-11-20T10:00:00Z``) → seconds since the epoch."""
    if not isinstance(text, str):
        raise ClusterDumpError(f"{where}: expected an RFC 3339 time, got {text!r}")
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ClusterDumpError(f"{where}: not an RFC 3339 time: {text!r}") from None


def _times(obj: Any) -> list[str]:
    """Every timestamp-looking string in ``obj`` (for the snapshot's time)."""
    found: list[str] = []
    if isinstance(obj, dict):
        for key, value in obj.items():
            if isinstance(value, str) and (key.endswith("Time") or key.endswith("Timestamp")):
                found.append(value)
            elif isinstance(value, dict | list):
                found += _times(value)
    elif isinstance(obj, list):
        for item in obj:
            found += _times(item)
    return found


@dataclass
class Snapshot:
    nodes: list[dict] = field(default_factory=list)
    pods: list[dict] = field(default_factory=list)
    deployments: list[dict] = field(default_factory=list)
    hpas: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    now: float = 0.0  # the latest timestamp in the file


def read_dump(path: str | Path) -> Snapshot:
    try:
        data = Path(path).read_bytes()
        if data[:2] == b"\x1f\x8b":  # `kubectl ... -o json | gzip`
            data = gzip.decompress(data)
        raw = json.loads(data)
    except OSError as exc:
        raise ClusterDumpError(f"{path}: cannot read ({exc.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError, gzip.BadGzipFile, EOFError) as exc:
        where = f" at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else ""
        raise ClusterDumpError(f"{path}: not JSON ({getattr(exc, 'msg', exc)}{where})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("items"), list):
        raise ClusterDumpError(
            f"{path}: expected a kubectl List (an object with 'items'), as "
            "`kubectl get nodes,pods,deployments,hpa -A -o json` prints"
        )
    snap = Snapshot()
    kinds = {
        "Node": snap.nodes,
        "Pod": snap.pods,
        "Deployment": snap.deployments,
        "HorizontalPodAutoscaler": snap.hpas,
        "Event": snap.events,
    }
    for i, item in enumerate(raw["items"]):
        if not isinstance(item, dict) or not isinstance(item.get("metadata"), dict):
            raise ClusterDumpError(f"{path}: items[{i}]: expected an object with metadata")
        if item.get("kind") in kinds:
            kinds[item["kind"]].append(item)
    stamps = [_time(t, f"{path}: a timestamp") for t in _times(raw["items"])]
    snap.now = max(stamps, default=0.0)
    return snap


def _owner_kind(obj: dict) -> str | None:
    owners = obj["metadata"].get("ownerReferences") or []
    return owners[0].get("kind") if owners else None


def _owner_name(obj: dict) -> str | None:
    owners = obj["metadata"].get("ownerReferences") or []
    return owners[0].get("name") if owners else None


# ------------------------------------------------------------------------------ nodes


NODE_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage")


def node_resource(name: str) -> bool:
    """A resource a node's allocatable may list for a scheduler: the standard ones,
    hugepages, and domain-prefixed extended ones (``nvidia.com/gpu``). Others a cloud adds
    (``attachable-volumes-aws-ebs``, volume limits the scheduler reads elsewhere) are left
    out."""
    return name in NODE_RESOURCES or name.startswith("hugepages-") or "/" in name


def node_props(node: dict) -> dict[str, str]:
    """A Node → the host props ``broker/cluster/node_shape.py`` reads."""
    status = node.get("status") or {}
    alloc = status.get("allocatable") or status.get("capacity") or {}
    alloc = {k: v for k, v in alloc.items() if node_resource(k)}
    props: dict[str, str] = {}
    if alloc:
        props["allocatable"] = ",".join(f"{k}={v}" for k, v in sorted(alloc.items()))
    labels = node["metadata"].get("labels") or {}
    if labels:
        props["labels"] = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    spec = node.get("spec") or {}
    taints = []
    for taint in spec.get("taints") or []:
        if taint.get("key") == UNSCHEDULABLE_TAINT:
            continue  # node_shape adds it back for an unschedulable node
        value = f"={taint['value']}" if taint.get("value") else ""
        taints.append(f"{taint.get('key')}{value}:{taint.get('effect')}")
    if taints:
        props["taints"] = ",".join(taints)
    if spec.get("unschedulable"):
        props["unschedulable"] = "true"
    return props


# ------------------------------------------------------------------------------- pods


def _selects(deployment: dict, pod: dict) -> bool:
    if deployment["metadata"].get("namespace", "default") != pod["metadata"].get(
        "namespace", "default"
    ):
        return False
    wanted = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    labels = pod["metadata"].get("labels") or {}
    return bool(wanted) and all(labels.get(k) == v for k, v in wanted.items())


def _summed(containers: list[dict], kind: str) -> dict[str, Any]:
    """The containers' requests (or limits) per resource; one container's as written,
    several summed (in milli-units for cpu, plain numbers otherwise, else the first)."""
    per: dict[str, list[str]] = {}
    for container in containers:
        for name, value in ((container.get("resources") or {}).get(kind) or {}).items():
            per.setdefault(name, []).append(str(value))
    out: dict[str, Any] = {}
    for name, values in per.items():
        out[name] = values[0] if len(values) == 1 else _sum_quantities(values)
    return out


def _sum_quantities(values: list[str]) -> str:
    total = sum(quantity(v) for v in values)
    if total < 1000 and any(v.endswith("m") for v in values):
        return f"{round(total * 1000)}m"
    return str(round(total)) if float(total).is_integer() or total > 1000 else f"{total:g}"


def _event_times(events: list[dict]) -> dict[tuple[str, str], dict[str, float]]:
    """(namespace, pod) → {reason: first time} from the List's Events."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for i, event in enumerate(events):
        obj = event.get("involvedObject") or event.get("regarding") or {}
        if obj.get("kind") != "Pod":
            continue
        stamp = event.get("eventTime") or event.get("firstTimestamp") or event.get("lastTimestamp")
        if not stamp:
            continue
        key = (obj.get("namespace", "default"), obj.get("name", ""))
        reasons = out.setdefault(key, {})
        when = _time(stamp, f"events[{i}]")
        reason = str(event.get("reason"))
        reasons[reason] = min(when, reasons.get(reason, when))
    return out


def pod_lifetime(pod: dict, now: float, events: dict[str, float], default_lifetime: float) -> float:
    """Seconds the pod ran (see the module's docstring)."""
    name = pod["metadata"].get("name")
    status = pod.get("status") or {}
    start = status.get("startTime")
    begun = _time(start, f"pod {name}: status.startTime") if start else events.get("Started")
    if begun is None:
        return default_lifetime
    ends = [
        _time(state["finishedAt"], f"pod {name}: finishedAt")
        for cs in status.get("containerStatuses") or []
        if (state := (cs.get("state") or {}).get("terminated")) and state.get("finishedAt")
    ]
    if not ends and "Killing" in events:
        ends = [events["Killing"]]
    end = max(ends) if ends else now
    return max(1.0, end - begun)


def _job_fields(pod: dict, scheduler: str) -> dict[str, Any]:
    meta, spec = pod["metadata"], pod.get("spec") or {}
    containers = spec.get("containers") or []
    fields: dict[str, Any] = {"type": "delay"}
    requests, limits = _summed(containers, "requests"), _summed(containers, "limits")
    if "cpu" not in requests and "cpu" not in limits:
        requests["cpu"] = "0"  # a pod without a cpu request asks for none (timewarp's default is 1)
    fields["requests"] = requests
    if limits:
        fields["limits"] = limits
    if meta.get("namespace", "default") != "default":
        fields["namespace"] = meta["namespace"]
    labels = meta.get("labels") or {}
    if labels:
        fields["labels"] = labels
    for key in ("nodeSelector", "tolerations"):
        if spec.get(key):
            fields[key] = spec[key]
    name = spec.get("schedulerName") or "default-scheduler"
    fields["scheduler"] = scheduler if name == "default-scheduler" else name
    extra = {k: spec[k] for k in _SPEC_PASSTHROUGH if spec.get(k)}
    # a cluster's own PriorityClasses are not in the dump (nor in the simulated API): the
    # pod keeps the priority the API server resolved for it; the built-in classes exist
    priority_class = spec.get("priorityClassName")
    if priority_class in BUILTIN_PRIORITY_CLASSES:
        fields["priorityClassName"] = priority_class
    elif priority_class and isinstance(spec.get("priority"), int):
        extra["priority"] = spec["priority"]
    if extra:
        fields["pod"] = {"spec": extra}
    if _owner_kind(pod) == "ReplicaSet":
        fields["replicaset"] = _owner_name(pod)
    return fields


# ----------------------------------------------------------------------------- convert


@dataclass
class Converted:
    workload: dict[str, Any]
    nodes: list[tuple[str, dict[str, str]]]
    skipped: dict[str, int]  # why → how many pods


def convert(
    snap: Snapshot,
    *,
    source: str,
    scheduler: str = "default-scheduler",
    window: tuple[float, float] | None = None,
    fraction: float = 1.0,
    scale: float = 1.0,
    default_lifetime: float = 600.0,
    services: ServiceOptions | None = None,
) -> Converted:
    services = services or ServiceOptions()
    if not snap.nodes:
        raise ClusterDumpError(
            f"{source}: no Node in the List (kubectl get nodes,pods,... -o json)"
        )
    nodes = [(n["metadata"]["name"], node_props(n)) for n in snap.nodes]
    skipped: dict[str, int] = {}
    jobs_pods: list[dict] = []
    for pod in snap.pods:
        if _owner_kind(pod) in SKIPPED_OWNERS:
            why = f"owned by a {_owner_kind(pod)}"
        elif _owner_kind(pod) == "ReplicaSet" and any(_selects(d, pod) for d in snap.deployments):
            why = "a Deployment's, replayed as its service"
        else:
            jobs_pods.append(pod)
            continue
        skipped[why] = skipped.get(why, 0) + 1
    for pod in jobs_pods:
        if "creationTimestamp" not in pod["metadata"]:
            raise ClusterDumpError(
                f"{source}: pod {pod['metadata'].get('name')}: no metadata.creationTimestamp"
            )
    created = {
        id(p): _time(p["metadata"]["creationTimestamp"], f"{source}: pod {p['metadata']['name']}")
        for p in jobs_pods
    }
    kept = select(
        jobs_pods,
        time_of=lambda p: created[id(p)],
        name_of=lambda p: f"{p['metadata'].get('namespace', 'default')}/{p['metadata']['name']}",
        window=window,
        fraction=fraction,
    )
    dropped = len(jobs_pods) - len(kept)
    if dropped:
        skipped["outside --window/--fraction"] = dropped
    events = _event_times(snap.events)
    built = WorkloadBuilder()
    for pod, subtime in zip(kept, subtimes([created[id(p)] for p in kept], scale), strict=True):
        meta = pod["metadata"]
        key = (meta.get("namespace", "default"), meta["name"])
        fields = _job_fields(pod, scheduler)
        fields["delay"] = clean(pod_lifetime(pod, snap.now, events.get(key, {}), default_lifetime))
        built.add(fields, subtime, f"{key[0]}/{key[1]}")
    hpas = {
        (
            h["metadata"].get("namespace", "default"),
            (h.get("spec") or {}).get("scaleTargetRef", {}).get("name"),
        ): h
        for h in snap.hpas
        if ((h.get("spec") or {}).get("scaleTargetRef") or {}).get("kind") == "Deployment"
    }
    taken: set[str] = set()
    service_list = [
        service(
            d,
            hpas.get((d["metadata"].get("namespace", "default"), d["metadata"]["name"])),
            service_name(d, taken),
            services,
        )
        for d in snap.deployments
    ]
    workload: dict[str, Any] = built.workload(len(nodes))
    if service_list:
        workload["services"] = service_list
    return Converted(workload, nodes, skipped)
