"""kube-apiserver's printers (``pkg/printers/internalversion/printers.go``) of the core
kinds: pods, nodes, namespaces, services, config maps, Events, and of leases, priority
classes and pod disruption budgets (``printers.py`` has the pieces they share)."""

from __future__ import annotations

from typing import Any

from .printers import (
    AGE,
    NAME,
    NAME_DOC,
    Column,
    Obj,
    Printer,
    Since,
    as_int,
    as_list,
    dig,
    format_labels,
    meta_field,
)

# --- pods --------------------------------------------------------------------------


def _pod_cells(pod: Obj, since: Since) -> list[Any]:
    """``printPod``: READY, STATUS (the phase, then what the containers say),
    RESTARTS, AGE, then IP, NODE, NOMINATED NODE, READINESS GATES."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    conditions = [c for c in as_list(status.get("conditions")) if isinstance(c, dict)]
    for cond in conditions:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    total = len(as_list(spec.get("containers")))
    ready = restarts = 0
    initializing = False
    init_specs = {
        c.get("name"): c for c in as_list(spec.get("initContainers")) if isinstance(c, dict)
    }
    sidecars = {n for n, c in init_specs.items() if c.get("restartPolicy") == "Always"}
    total += len(sidecars)
    sidecar_restarts = 0
    for i, cs in enumerate(as_list(status.get("initContainerStatuses"))):
        if not isinstance(cs, dict):
            continue
        restarts += as_int(cs.get("restartCount"))
        if cs.get("name") in sidecars:
            sidecar_restarts += as_int(cs.get("restartCount"))
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
        for cs in reversed(as_list(status.get("containerStatuses"))):
            if not isinstance(cs, dict):
                continue
            restarts += as_int(cs.get("restartCount"))
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
    if meta_field(pod, "deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"
    ips = [p for p in as_list(status.get("podIPs")) if isinstance(p, dict)]
    gates = [g for g in as_list(spec.get("readinessGates")) if isinstance(g, dict)]
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
        meta_field(pod, "name"),
        f"{ready}/{total}",
        reason,
        str(restarts),
        since(meta_field(pod, "creationTimestamp")),
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
            for c in as_list(status.get("conditions"))
            if isinstance(c, dict) and c.get("type") == "Ready"
        ),
        None,
    )
    states = (
        ["Unknown"] if ready is None else ["Ready" if ready.get("status") == "True" else "NotReady"]
    )
    if dig(node, "spec", "unschedulable") is True:
        states.append("SchedulingDisabled")
    roles = set()
    for key, value in (meta_field(node, "labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/") and key[len("node-role.kubernetes.io/") :]:
            roles.add(key[len("node-role.kubernetes.io/") :])
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    info = status.get("nodeInfo") or {}
    addresses = [a for a in as_list(status.get("addresses")) if isinstance(a, dict)]

    def address(kind: str) -> str:
        return next((a.get("address") for a in addresses if a.get("type") == kind), "<none>")

    return [
        meta_field(node, "name"),
        ",".join(states),
        ",".join(sorted(roles)) or "<none>",
        since(meta_field(node, "creationTimestamp")),
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
        meta_field(ns, "name"),
        dig(ns, "status", "phase") or "",
        since(meta_field(ns, "creationTimestamp")),
    ],
)


def _service_cells(svc: Obj, since: Since) -> list[Any]:
    """``printService``: TYPE, CLUSTER-IP, EXTERNAL-IP, PORT(S), AGE, SELECTOR."""
    spec = svc.get("spec") or {}
    kind = spec.get("type") or ""
    ips = as_list(spec.get("clusterIPs"))
    external = ",".join(map(str, as_list(spec.get("externalIPs"))))
    if kind in ("ClusterIP", "NodePort"):
        external = external or "<none>"
    elif kind == "LoadBalancer":
        lb = sorted(
            {
                i.get("ip") or i.get("hostname")
                for i in as_list(dig(svc, "status", "loadBalancer", "ingress"))
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
    for p in as_list(spec.get("ports")):
        if isinstance(p, dict):
            node_port = p.get("nodePort")
            middle = f":{node_port}" if isinstance(node_port, int) and node_port > 0 else ""
            ports.append(f"{p.get('port', 0)}{middle}/{p.get('protocol', 'TCP')}")
    return [
        meta_field(svc, "name"),
        kind,
        ips[0] if ips else "<none>",
        external,
        ",".join(ports) or "<none>",
        since(meta_field(svc, "creationTimestamp")),
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
        meta_field(cm, "name"),
        len(cm.get("data") or {}) + len(cm.get("binaryData") or {}),
        since(meta_field(cm, "creationTimestamp")),
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
        as_int(count),
        meta_field(event, "name"),
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
        meta_field(lease, "name"),
        dig(lease, "spec", "holderIdentity") or "",
        since(meta_field(lease, "creationTimestamp")),
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
        meta_field(pc, "name"),
        as_int(pc.get("value")),
        pc.get("globalDefault") is True,
        since(meta_field(pc, "creationTimestamp")),
        pc.get("preemptionPolicy") or "",
    ],
)


def _pdb_cells(pdb: Obj, since: Since) -> list[Any]:
    spec = pdb.get("spec") or {}
    pick = (
        "N/A" if spec.get(k) is None else str(spec[k]) for k in ("minAvailable", "maxUnavailable")
    )
    return [
        meta_field(pdb, "name"),
        *pick,
        as_int(dig(pdb, "status", "disruptionsAllowed")),
        since(meta_field(pdb, "creationTimestamp")),
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
