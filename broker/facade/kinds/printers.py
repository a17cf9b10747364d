"""What ``kubectl get`` prints of each kind: kube-apiserver's server-side printers
(``pkg/printers/internalversion/printers.go``), column for column.

A :class:`Printer` is a kind's column definitions and how one object becomes a row of
cells. The API server always prints the ``-o wide`` columns too (``priority`` 1);
kubectl hides them unless asked. Ages are read on the clock the facade is given (the
simulated one), through the ``since`` function a row is made with: an age of a
paused run is its simulated age. A kind's strategy names its printer
(``Strategy.printer``, ``kinds/base.py``); kinds without one print ``Name`` and
``Created At`` as the API server's default table convertor does; a custom resource
prints its CRD's ``additionalPrinterColumns`` (:func:`custom_resource_printer`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]

NAME_DOC = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
CREATED_DOC = (
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
    "UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)
CONTAINERS_DOC = "Names of each container in the template."
IMAGES_DOC = "Images referenced by each container in the template."


@dataclass(frozen=True)
class Column:
    """A ``TableColumnDefinition``."""

    name: str
    type: str = "string"
    description: str = ""
    priority: int = 0
    format: str = ""

    def definition(self) -> Obj:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


NAME = Column("Name", format="name", description=NAME_DOC)
AGE = Column("Age", description=CREATED_DOC)


@dataclass(frozen=True)
class Printer:
    """A kind's columns, and its row of cells for one object."""

    columns: tuple[Column, ...]
    cells: Callable[[Obj, Since], list[Any]]

    def definitions(self) -> list[Obj]:
        return [c.definition() for c in self.columns]


# --- the API server's helpers ------------------------------------------------------


def human_duration(seconds: float) -> str:
    """``k8s.io/apimachinery/pkg/util/duration.HumanDuration``: two or three
    significant figures ("45s", "2m5s", "3h10m", "12d", "2y30d")."""
    secs = int(seconds)
    if secs < -1:
        return "<invalid>"
    if secs < 0:
        return "0s"
    if secs < 60 * 2:
        return f"{secs}s"
    minutes = secs // 60
    if minutes < 10:
        s = secs % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = secs // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def parse_time(text: Any) -> float | None:
    """Seconds since the epoch of an RFC 3339 timestamp (``metav1.Time`` or
    ``MicroTime``); None if absent or unreadable."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).timestamp()
    except ValueError:
        return None


class Since:
    """``translateTimestampSince`` at ``now_s`` (epoch seconds of the simulated clock):
    a timestamp's age, "<unknown>" for no time."""

    __slots__ = ("now_s",)

    def __init__(self, now_s: float) -> None:
        self.now_s = now_s

    def __call__(self, text: Any) -> str:
        at = parse_time(text)
        return "<unknown>" if at is None else human_duration(self.now_s - at)


def _d(obj: Any, *path: str) -> Any:
    """``obj[path[0]][path[1]]...``; None as soon as a step is not an object."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _meta(obj: Obj, key: str) -> Any:
    return _d(obj, "metadata", key)


def format_labels(labels: Any) -> str:
    """``labels.FormatLabels``: sorted ``k=v`` joined by commas, ``<none>`` if empty."""
    if not isinstance(labels, dict) or not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def format_selector(selector: Any) -> str:
    """``metav1.FormatLabelSelector``: matchLabels then matchExpressions."""
    if not isinstance(selector, dict):
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in _list(selector.get("matchExpressions")):
        if not isinstance(expr, dict):
            continue
        key, op, values = expr.get("key"), expr.get("operator"), _list(expr.get("values"))
        if op == "In":
            parts.append(f"{key} in ({','.join(map(str, values))})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(map(str, values))})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    text = ",".join(parts)
    return text or "<none>"


def _containers(template_spec: Any) -> tuple[str, str]:
    """``layoutContainerCells``: container names and images, comma-joined."""
    containers = [c for c in _list(_d(template_spec, "containers")) if isinstance(c, dict)]
    return (
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
    )


# --- pods --------------------------------------------------------------------------


def _pod_cells(pod: Obj, since: Since) -> list[Any]:
    """``printPod``: READY, STATUS (the phase, then what the containers say),
    RESTARTS, AGE, then IP, NODE, NOMINATED NODE, READINESS GATES."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    conditions = [c for c in _list(status.get("conditions")) if isinstance(c, dict)]
    for cond in conditions:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    total = len(_list(spec.get("containers")))
    ready = restarts = 0
    initializing = False
    init_specs = {
        c.get("name"): c for c in _list(spec.get("initContainers")) if isinstance(c, dict)
    }
    sidecars = {n for n, c in init_specs.items() if c.get("restartPolicy") == "Always"}
    total += len(sidecars)
    sidecar_restarts = 0
    for i, cs in enumerate(_list(status.get("initContainerStatuses"))):
        if not isinstance(cs, dict):
            continue
        restarts += _int(cs.get("restartCount"))
        if cs.get("name") in sidecars:
            sidecar_restarts += _int(cs.get("restartCount"))
        state = cs.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if isinstance(terminated, dict) and terminated.get("exitCode") == 0:
            continue
        if cs.get("name") in sidecars and cs.get("started"):
            ready += 1 if cs.get("ready") else 0
            continue
        if isinstance(terminated, dict):
            if terminated.get("reason"):
                reason = "Init:" + str(terminated["reason"])
            elif terminated.get("signal"):
                reason = f"Init:Signal:{terminated['signal']}"
            else:
                reason = f"Init:ExitCode:{terminated.get('exitCode', 0)}"
        elif (
            isinstance(waiting, dict)
            and waiting.get("reason")
            and waiting["reason"] != "PodInitializing"
        ):
            reason = "Init:" + str(waiting["reason"])
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break
    initialized = any(
        c.get("type") == "Initialized" and c.get("status") == "True" for c in conditions
    )
    if not initializing or initialized:
        restarts = sidecar_restarts
        has_running = False
        for cs in reversed(_list(status.get("containerStatuses"))):
            if not isinstance(cs, dict):
                continue
            restarts += _int(cs.get("restartCount"))
            state = cs.get("state") or {}
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if isinstance(waiting, dict) and waiting.get("reason"):
                reason = str(waiting["reason"])
            elif isinstance(terminated, dict) and terminated.get("reason"):
                reason = str(terminated["reason"])
            elif isinstance(terminated, dict):
                if terminated.get("signal"):
                    reason = f"Signal:{terminated['signal']}"
                else:
                    reason = f"ExitCode:{terminated.get('exitCode', 0)}"
            elif cs.get("ready") and isinstance(state.get("running"), dict):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            pod_ready = any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
            )
            reason = "Running" if pod_ready else "NotReady"
    if _meta(pod, "deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"
    ips = [p for p in _list(status.get("podIPs")) if isinstance(p, dict)]
    gates = [g for g in _list(spec.get("readinessGates")) if isinstance(g, dict)]
    gates_text = "<none>"
    if gates:
        true = sum(
            1
            for g in gates
            if next((c for c in conditions if c.get("type") == g.get("conditionType")), {}).get(
                "status"
            )
            == "True"
        )
        gates_text = f"{true}/{len(gates)}"
    return [
        _meta(pod, "name"),
        f"{ready}/{total}",
        reason,
        str(restarts),
        since(_meta(pod, "creationTimestamp")),
        # v1 -> internal conversion: podIP is authoritative, else podIPs[0]
        status.get("podIP") or (ips[0].get("ip") if ips else "") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gates_text,
    ]


POD = Printer(
    (
        NAME,
        Column(
            "Ready", description="The aggregate readiness state of this pod for accepting traffic."
        ),
        Column("Status", description="The aggregate status of the containers in this pod."),
        Column(
            "Restarts",
            description="The number of times the containers in this pod have been restarted "
            "and when the last container in this pod has restarted.",
        ),
        AGE,
        Column("IP", priority=1, description="podIP address allocated to the pod."),
        Column(
            "Node",
            priority=1,
            description="NodeName is a request to schedule this pod onto a specific node.",
        ),
        Column(
            "Nominated Node",
            priority=1,
            description="nominatedNodeName is set only when this pod preempts other pods on the node.",
        ),
        Column(
            "Readiness Gates",
            priority=1,
            description="If specified, all readiness gates will be evaluated for pod readiness.",
        ),
    ),
    _pod_cells,
)

# --- nodes, namespaces, services, config maps --------------------------------------


def _node_cells(node: Obj, since: Since) -> list[Any]:
    """``printNode``: STATUS from the Ready condition (+ SchedulingDisabled), ROLES
    from the node-role labels, VERSION the kubelet's; wide: addresses, OS, kernel,
    container runtime."""
    status = node.get("status") or {}
    ready = next(
        (
            c
            for c in _list(status.get("conditions"))
            if isinstance(c, dict) and c.get("type") == "Ready"
        ),
        None,
    )
    states = (
        ["Unknown"] if ready is None else ["Ready" if ready.get("status") == "True" else "NotReady"]
    )
    if _d(node, "spec", "unschedulable") is True:
        states.append("SchedulingDisabled")
    roles = set()
    for key, value in (_meta(node, "labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/") and key[len("node-role.kubernetes.io/") :]:
            roles.add(key[len("node-role.kubernetes.io/") :])
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    info = status.get("nodeInfo") or {}
    addresses = [a for a in _list(status.get("addresses")) if isinstance(a, dict)]

    def address(kind: str) -> str:
        return next((a.get("address") for a in addresses if a.get("type") == kind), "<none>")

    return [
        _meta(node, "name"),
        ",".join(states),
        ",".join(sorted(roles)) or "<none>",
        since(_meta(node, "creationTimestamp")),
        info.get("kubeletVersion") or "",
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


NODE = Printer(
    (
        NAME,
        Column("Status", description="The status of the node"),
        Column("Roles", description="The roles of the node"),
        AGE,
        Column("Version", description="Kubelet Version reported by the node."),
        Column("Internal-IP", priority=1, description="List of addresses reachable to the node."),
        Column("External-IP", priority=1, description="List of addresses reachable to the node."),
        Column(
            "OS-Image",
            priority=1,
            description="OS Image reported by the node from /etc/os-release.",
        ),
        Column("Kernel-Version", priority=1, description="Kernel Version reported by the node."),
        Column(
            "Container-Runtime",
            priority=1,
            description="ContainerRuntime Version reported by the node.",
        ),
    ),
    _node_cells,
)

NAMESPACE = Printer(
    (NAME, Column("Status", description="The status of the namespace"), AGE),
    lambda ns, since: [
        _meta(ns, "name"),
        _d(ns, "status", "phase") or "",
        since(_meta(ns, "creationTimestamp")),
    ],
)


def _service_cells(svc: Obj, since: Since) -> list[Any]:
    """``printService``: TYPE, CLUSTER-IP, EXTERNAL-IP, PORT(S), AGE, SELECTOR."""
    spec = svc.get("spec") or {}
    kind = spec.get("type") or ""
    ips = _list(spec.get("clusterIPs"))
    external = ",".join(map(str, _list(spec.get("externalIPs"))))
    if kind in ("ClusterIP", "NodePort"):
        external = external or "<none>"
    elif kind == "LoadBalancer":
        lb = sorted(
            {
                i.get("ip") or i.get("hostname")
                for i in _list(_d(svc, "status", "loadBalancer", "ingress"))
                if isinstance(i, dict) and (i.get("ip") or i.get("hostname"))
            }
        )
        text = ",".join(lb)
        text = text[:13] + "..." if len(text) > 16 else text
        external = ",".join([*([text] if text else []), *([external] if external else [])])
        external = external or "<pending>"
    elif kind == "ExternalName":
        external = spec.get("externalName") or ""
    else:
        external = "<unknown>"
    ports = []
    for p in _list(spec.get("ports")):
        if isinstance(p, dict):
            node_port = p.get("nodePort")
            middle = f":{node_port}" if isinstance(node_port, int) and node_port > 0 else ""
            ports.append(f"{p.get('port', 0)}{middle}/{p.get('protocol', 'TCP')}")
    return [
        _meta(svc, "name"),
        kind,
        ips[0] if ips else "<none>",
        external,
        ",".join(ports) or "<none>",
        since(_meta(svc, "creationTimestamp")),
        format_labels(spec.get("selector")),
    ]


SERVICE = Printer(
    (
        NAME,
        Column("Type", description="type determines how the Service is exposed."),
        Column("Cluster-IP", description="clusterIP is the IP address of the service."),
        Column(
            "External-IP",
            description="externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
        ),
        Column("Port(s)", description="The list of ports that are exposed by this service."),
        AGE,
        Column(
            "Selector",
            priority=1,
            description="Route service traffic to pods with label keys and values matching this selector.",
        ),
    ),
    _service_cells,
)

CONFIG_MAP = Printer(
    (NAME, Column("Data", description="Data contains the configuration data."), AGE),
    lambda cm, since: [
        _meta(cm, "name"),
        len(cm.get("data") or {}) + len(cm.get("binaryData") or {}),
        since(_meta(cm, "creationTimestamp")),
    ],
)

# --- events ------------------------------------------------------------------------


def _event_cells(event: Obj, since: Since, *, v1: bool) -> list[Any]:
    """``printEvent`` (always wide on the server): LAST SEEN, TYPE, REASON, OBJECT,
    SUBOBJECT, SOURCE, MESSAGE, FIRST SEEN, COUNT, NAME. An events.k8s.io/v1 Event is
    read through its deprecated fields as the API server converts it."""
    if v1:
        involved = event.get("regarding") or {}
        first, last = event.get("deprecatedFirstTimestamp"), event.get("deprecatedLastTimestamp")
        count, message = event.get("deprecatedCount"), event.get("note")
        source = event.get("deprecatedSource") or {}
    else:
        involved = event.get("involvedObject") or {}
        first, last = event.get("firstTimestamp"), event.get("lastTimestamp")
        count, message = event.get("count"), event.get("message")
        source = event.get("source") or {}
    first_seen = since(first) if first else since(event.get("eventTime"))
    last_seen = since(last) if last else first_seen
    series = event.get("series")
    if isinstance(series, dict):
        last_seen = since(series.get("lastObservedTime"))
        count = series.get("count")
    elif not count:
        count = 1
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    component = source.get("component") or event.get("reportingController") or ""
    host = source.get("host") or event.get("reportingInstance") or ""
    return [
        last_seen,
        event.get("type") or "",
        event.get("reason") or "",
        target,
        involved.get("fieldPath") or "",
        f"{component}, {host}" if host else component,
        str(message or "").strip(),
        first_seen,
        _int(count),
        _meta(event, "name"),
    ]


_EVENT_COLUMNS = (
    Column(
        "Last Seen",
        description="The time at which the most recent occurrence of this event was recorded.",
    ),
    Column(
        "Type",
        description="Type of this event (Normal, Warning), new types could be added in the future",
    ),
    Column(
        "Reason",
        description="This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
    ),
    Column("Object", description="The object that this event is about."),
    Column(
        "Subobject",
        priority=1,
        description="If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement.",
    ),
    Column(
        "Source",
        priority=1,
        description="The component reporting this event. Should be a short machine understandable string.",
    ),
    Column("Message", description="A human-readable description of the status of this operation."),
    Column(
        "First Seen",
        priority=1,
        description="The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
    ),
    Column("Count", priority=1, description="The number of times this event has occurred."),
    Column("Name", priority=1, format="name", description=NAME_DOC),
)
EVENT = Printer(_EVENT_COLUMNS, lambda e, since: _event_cells(e, since, v1=False))
EVENT_V1 = Printer(_EVENT_COLUMNS, lambda e, since: _event_cells(e, since, v1=True))

# --- workloads ---------------------------------------------------------------------

_WIDE_TEMPLATE = (
    Column("Containers", priority=1, description=CONTAINERS_DOC),
    Column("Images", priority=1, description=IMAGES_DOC),
    Column(
        "Selector",
        priority=1,
        description="A label query over pods that should match the replica count.",
    ),
)


def _template_wide(obj: Obj) -> list[Any]:
    names, images = _containers(_d(obj, "spec", "template", "spec"))
    return [names, images, format_selector(_d(obj, "spec", "selector"))]


def _replica_set_cells(rs: Obj, since: Since) -> list[Any]:
    return [
        _meta(rs, "name"),
        _int(_d(rs, "spec", "replicas")),
        _int(_d(rs, "status", "replicas")),
        _int(_d(rs, "status", "readyReplicas")),
        since(_meta(rs, "creationTimestamp")),
        *_template_wide(rs),
    ]


REPLICA_SET = Printer(
    (
        NAME,
        Column("Desired", "integer", "Replicas is the number of desired replicas."),
        Column("Current", "integer", "Replicas is the most recently observed number of replicas."),
        Column("Ready", "integer", "The number of ready replicas for this replica set."),
        AGE,
        *_WIDE_TEMPLATE,
    ),
    _replica_set_cells,
)


def _deployment_cells(deploy: Obj, since: Since) -> list[Any]:
    status = deploy.get("status") or {}
    return [
        _meta(deploy, "name"),
        f"{_int(status.get('readyReplicas'))}/{_int(_d(deploy, 'spec', 'replicas'))}",
        _int(status.get("updatedReplicas")),
        _int(status.get("availableReplicas")),
        since(_meta(deploy, "creationTimestamp")),
        *_template_wide(deploy),
    ]


DEPLOYMENT = Printer(
    (
        NAME,
        Column("Ready", description="Number of the pod with ready state"),
        Column(
            "Up-to-date",
            description="Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
        ),
        Column(
            "Available",
            description="Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
        ),
        AGE,
        *_WIDE_TEMPLATE,
    ),
    _deployment_cells,
)

STATEFUL_SET = Printer(
    (
        NAME,
        Column("Ready", description="Number of the pod with ready state"),
        AGE,
        *_WIDE_TEMPLATE[:2],
    ),
    lambda ss, since: [
        _meta(ss, "name"),
        f"{_int(_d(ss, 'status', 'readyReplicas'))}/{_int(_d(ss, 'spec', 'replicas'))}",
        since(_meta(ss, "creationTimestamp")),
        *_template_wide(ss)[:2],
    ],
)


def _daemon_set_cells(ds: Obj, since: Since) -> list[Any]:
    status = ds.get("status") or {}
    return [
        _meta(ds, "name"),
        *(
            _int(status.get(k))
            for k in (
                "desiredNumberScheduled",
                "currentNumberScheduled",
                "numberReady",
                "updatedNumberScheduled",
                "numberAvailable",
            )
        ),
        format_labels(_d(ds, "spec", "template", "spec", "nodeSelector")),
        since(_meta(ds, "creationTimestamp")),
        *_template_wide(ds),
    ]


DAEMON_SET = Printer(
    (
        NAME,
        Column(
            "Desired", "integer", "The total number of nodes that should be running the daemon pod."
        ),
        Column("Current", "integer", "The number of nodes that are running at least 1 daemon pod."),
        Column(
            "Ready",
            "integer",
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
        ),
        Column(
            "Up-to-date", "integer", "The total number of nodes that are running updated daemon pod"
        ),
        Column(
            "Available",
            "integer",
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
        ),
        Column(
            "Node Selector",
            description="NodeSelector is a selector which must be true for the pod to fit on a node.",
        ),
        AGE,
        *_WIDE_TEMPLATE,
    ),
    _daemon_set_cells,
)


def _job_condition(job: Obj, kind: str) -> bool:
    for cond in _list(_d(job, "status", "conditions")):
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond.get("status") == "True"
    return False


def _job_cells_at(job: Obj, since: Since, now_s: float) -> list[Any]:
    """``printJob``: STATUS from the conditions, COMPLETIONS, DURATION (to now while
    running, on the simulated clock), AGE."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    succeeded = _int(status.get("succeeded"))
    if isinstance(spec.get("completions"), int):
        completions = f"{succeeded}/{spec['completions']}"
    elif _int(spec.get("parallelism")) > 1:
        completions = f"{succeeded}/1 of {spec['parallelism']}"
    else:
        completions = f"{succeeded}/1"
    start, end = parse_time(status.get("startTime")), parse_time(status.get("completionTime"))
    duration = "" if start is None else human_duration((end if end is not None else now_s) - start)
    if _job_condition(job, "Complete"):
        state = "Complete"
    elif _job_condition(job, "Failed"):
        state = "Failed"
    elif _meta(job, "deletionTimestamp"):
        state = "Terminating"
    elif _job_condition(job, "Suspended"):
        state = "Suspended"
    elif _job_condition(job, "FailureTarget"):
        state = "FailureTarget"
    else:
        state = "Running"
    return [
        _meta(job, "name"),
        state,
        completions,
        duration,
        since(_meta(job, "creationTimestamp")),
        *_template_wide(job),
    ]


JOB = Printer(
    (
        NAME,
        Column("Status", description="Status of the job."),
        Column("Completions", description="The number of pods which reached phase Succeeded."),
        Column("Duration", description="Time required to complete the job."),
        AGE,
        *_WIDE_TEMPLATE,
    ),
    lambda job, since: _job_cells_at(job, since, since.now_s),
)


def _cron_job_cells(cj: Obj, since: Since) -> list[Any]:
    spec = cj.get("spec") or {}
    last = _d(cj, "status", "lastScheduleTime")
    suspend = spec.get("suspend")
    job_template = _d(spec, "jobTemplate", "spec")
    names, images = _containers(_d(job_template, "template", "spec"))
    return [
        _meta(cj, "name"),
        spec.get("schedule") or "",
        spec.get("timeZone") or "<none>",
        "<unset>" if suspend is None else ("true" if suspend else "false"),
        len(_list(_d(cj, "status", "active"))),
        since(last) if last else "<none>",
        since(_meta(cj, "creationTimestamp")),
        names,
        images,
        format_selector(_d(job_template, "selector")),
    ]


CRON_JOB = Printer(
    (
        NAME,
        Column("Schedule", description="The schedule in Cron format."),
        Column("Timezone", description="The time zone name for the given schedule."),
        Column(
            "Suspend", "boolean", "This flag tells the controller to suspend subsequent executions."
        ),
        Column("Active", "integer", "A list of pointers to currently running jobs."),
        Column(
            "Last Schedule",
            description="Information when was the last time the job was successfully scheduled.",
        ),
        AGE,
        *_WIDE_TEMPLATE,
    ),
    _cron_job_cells,
)

# --- autoscaling -------------------------------------------------------------------


def _hpa_metrics(specs: list[Any], statuses: list[Any]) -> str:
    """``formatHPAMetrics``: "cpu: 40%/50%" per metric, two at most then "+ N more..."."""
    if not specs:
        return "<none>"
    out = []
    for i, spec in enumerate(specs):
        status = statuses[i] if i < len(statuses) and isinstance(statuses[i], dict) else {}
        kind = _d(spec, "type")
        if kind in ("External", "Object"):
            key = kind[0].lower() + kind[1:]
            target = _d(spec, key, "target") or {}
            current = _d(status, key, "current") or {}
            if target.get("averageValue") is not None:
                have = current.get("averageValue") if _d(status, key) else None
                out.append(f"{have or '<unknown>'}/{target['averageValue']} (avg)")
            else:
                have = current.get("value") if _d(status, key) else None
                out.append(f"{have or '<unknown>'}/{target.get('value')}")
        elif kind == "Pods":
            have = _d(status, "pods", "current", "averageValue")
            out.append(f"{have or '<unknown>'}/{_d(spec, 'pods', 'target', 'averageValue')}")
        elif kind in ("Resource", "ContainerResource"):
            key = "resource" if kind == "Resource" else "containerResource"
            name = _d(spec, key, "name")
            target = _d(spec, key, "target") or {}
            if target.get("averageValue") is not None:
                have = _d(status, key, "current", "averageValue")
                out.append(f"{name}: {have or '<unknown>'}/{target['averageValue']}")
            else:
                util = _d(status, key, "current", "averageUtilization")
                have = f"{util}%" if isinstance(util, int) else "<unknown>"
                want = target.get("averageUtilization")
                out.append(f"{name}: {have}/{f'{want}%' if isinstance(want, int) else '<auto>'}")
        else:
            out.append("<unknown type>")
    if len(out) > 2:
        return ", ".join(out[:2]) + f" + {len(out) - 2} more..."
    return ", ".join(out)


def _hpa_cells(hpa: Obj, since: Since) -> list[Any]:
    spec, status = hpa.get("spec") or {}, hpa.get("status") or {}
    ref = spec.get("scaleTargetRef") or {}
    metrics = _list(spec.get("metrics"))
    min_replicas = spec.get("minReplicas")
    return [
        _meta(hpa, "name"),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        _hpa_metrics(metrics, _list(status.get("currentMetrics"))),
        str(min_replicas) if isinstance(min_replicas, int) else "<unset>",
        _int(spec.get("maxReplicas")),
        _int(status.get("currentReplicas")),
        since(_meta(hpa, "creationTimestamp")),
    ]


HPA = Printer(
    (
        NAME,
        Column(
            "Reference",
            description="reference to scaled resource; horizontal pod autoscaler will learn the current resource consumption and will set the desired number of pods by using its Scale subresource.",
        ),
        Column(
            "Targets",
            description="metrics contains the specifications for which to use to calculate the desired replica count.",
        ),
        Column(
            "MinPods",
            description="minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.",
        ),
        Column(
            "MaxPods",
            description="maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up.",
        ),
        Column(
            "Replicas",
            description="currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.",
        ),
        AGE,
    ),
    _hpa_cells,
)

# --- the rest ----------------------------------------------------------------------

LEASE = Printer(
    (
        NAME,
        Column(
            "Holder",
            description="holderIdentity contains the identity of the holder of a current lease.",
        ),
        AGE,
    ),
    lambda lease, since: [
        _meta(lease, "name"),
        _d(lease, "spec", "holderIdentity") or "",
        since(_meta(lease, "creationTimestamp")),
    ],
)

PRIORITY_CLASS = Printer(
    (
        NAME,
        Column("Value", "integer", "value represents the integer value of this priority class."),
        Column(
            "Global-Default",
            "boolean",
            "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class.",
        ),
        AGE,
        Column(
            "PreemptionPolicy",
            priority=1,
            description="preemptionPolicy is the Policy for preempting pods with lower priority.",
        ),
    ),
    lambda pc, since: [
        _meta(pc, "name"),
        _int(pc.get("value")),
        pc.get("globalDefault") is True,
        since(_meta(pc, "creationTimestamp")),
        pc.get("preemptionPolicy") or "",
    ],
)


def _pdb_cells(pdb: Obj, since: Since) -> list[Any]:
    spec = pdb.get("spec") or {}
    pick = (
        "N/A" if spec.get(k) is None else str(spec[k]) for k in ("minAvailable", "maxUnavailable")
    )
    return [
        _meta(pdb, "name"),
        *pick,
        _int(_d(pdb, "status", "disruptionsAllowed")),
        since(_meta(pdb, "creationTimestamp")),
    ]


POD_DISRUPTION_BUDGET = Printer(
    (
        NAME,
        Column("Min Available", description="The minimum number of pods that must be available."),
        Column(
            "Max Unavailable", description="The maximum number of pods that may be unavailable."
        ),
        Column(
            "Allowed Disruptions",
            "integer",
            "Calculated number of pods that may be disrupted at this time.",
        ),
        AGE,
    ),
    _pdb_cells,
)


def _default_cells(obj: Obj, since: Since) -> list[Any]:
    at = parse_time(_meta(obj, "creationTimestamp"))
    created = (
        "" if at is None else datetime.fromtimestamp(int(at), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    return [_meta(obj, "name"), created]


#: kube-apiserver's default table convertor: a kind without a printer of its own
DEFAULT = Printer((NAME, Column("Created At", "date", CREATED_DOC)), _default_cells)

# --- custom resources ---------------------------------------------------------------

_STEP = re.compile(
    r"\.((?:\\\.|[^.\[])+)|\[(\*|-?\d+|\?\(@\.([\w.-]+)\s*==\s*['\"]([^'\"]*)['\"]\))\]"
)


def json_path(path: str) -> Callable[[Any], list[Any]]:
    """A CRD column's ``jsonPath``: fields (``.spec.replicas``, ``.metadata.labels.a\\.b``),
    indexes (``[0]``, ``[-1]``), ``[*]`` and ``[?(@.type=="Ready")]`` filters. Returns
    what reads the matches of an object (ValueError for a path it cannot read)."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    text = text.removeprefix("$")
    steps, pos = [], 0
    while pos < len(text):
        m = _STEP.match(text, pos)
        if m is None:
            raise ValueError(f"unsupported JSON path {path!r} at {text[pos:]!r}")
        steps.append(m.groups())
        pos = m.end()

    def read(obj: Any) -> list[Any]:
        nodes = [obj]
        for field, index, fkey, fval in steps:
            nxt: list[Any] = []
            for node in nodes:
                if field is not None:
                    if isinstance(node, dict) and field.replace("\\.", ".") in node:
                        nxt.append(node[field.replace("\\.", ".")])
                elif isinstance(node, list):
                    if index == "*":
                        nxt.extend(node)
                    elif fkey is not None:
                        nxt.extend(n for n in node if str(_d(n, *fkey.split("."))) == fval)
                    elif -len(node) <= int(index) < len(node):
                        nxt.append(node[int(index)])
            nodes = nxt
        return nodes

    return read


def _text(value: Any) -> str:
    """How kubectl's JSONPath printer writes a value (``fmt.Fprint``; JSON for
    objects and lists)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _cell(kind: str, value: Any, since: Since) -> Any:
    """``cellForJSONValue``: the value as the column's type says, None if it is not."""
    if value is None:
        return None
    if kind == "string":
        return _text(value)
    if kind == "integer" and isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "date" and isinstance(value, str):
        return "<invalid>" if parse_time(value) is None else since(value)
    return None


def custom_resource_printer(columns: Sequence[Obj]) -> Printer:
    """A custom resource's printer: ``Name``, then its version's
    ``additionalPrinterColumns`` (``Age`` from ``.metadata.creationTimestamp`` when it
    names none), as apiextensions' table convertor prints them."""
    if not columns:
        columns = [
            {
                "name": "Age",
                "type": "date",
                "jsonPath": ".metadata.creationTimestamp",
                "description": CREATED_DOC,
            }
        ]
    defs = [
        Column(
            str(c.get("name", "")),
            str(c.get("type", "string")),
            str(c.get("description") or ""),
            _int(c.get("priority")),
            str(c.get("format") or ""),
        )
        for c in columns
    ]
    readers = []
    for c in columns:
        try:
            readers.append(json_path(str(c.get("jsonPath", ""))))
        except ValueError:
            readers.append(lambda obj: [])

    def cells(obj: Obj, since: Since) -> list[Any]:
        row: list[Any] = [_meta(obj, "name")]
        for col, read in zip(defs, readers, strict=True):
            found = read(obj)
            row.append(_cell(col.type, found[0], since) if found else None)
        return row

    return Printer((NAME, *defs), cells)
