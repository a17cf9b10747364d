"""kube-apiserver's printers (``pkg/printers/internalversion/printers.go``) of the
workload kinds: ReplicaSets, Deployments, StatefulSets, DaemonSets, Jobs, CronJobs, and
HorizontalPodAutoscalers (``printers.py`` has the pieces they share)."""

from __future__ import annotations

from typing import Any

from .printers import (
    AGE,
    CONTAINERS_DOC,
    IMAGES_DOC,
    NAME,
    Column,
    Obj,
    Printer,
    Since,
    as_int,
    as_list,
    container_cells,
    dig,
    format_labels,
    format_selector,
    human_duration,
    meta_field,
    parse_time,
)

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
    names, images = container_cells(dig(obj, "spec", "template", "spec"))
    return [names, images, format_selector(dig(obj, "spec", "selector"))]


def _replica_set_cells(rs: Obj, since: Since) -> list[Any]:
    return [
        meta_field(rs, "name"),
        as_int(dig(rs, "spec", "replicas")),
        as_int(dig(rs, "status", "replicas")),
        as_int(dig(rs, "status", "readyReplicas")),
        since(meta_field(rs, "creationTimestamp")),
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
        meta_field(deploy, "name"),
        f"{as_int(status.get('readyReplicas'))}/{as_int(dig(deploy, 'spec', 'replicas'))}",
        as_int(status.get("updatedReplicas")),
        as_int(status.get("availableReplicas")),
        since(meta_field(deploy, "creationTimestamp")),
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
        meta_field(ss, "name"),
        f"{as_int(dig(ss, 'status', 'readyReplicas'))}/{as_int(dig(ss, 'spec', 'replicas'))}",
        since(meta_field(ss, "creationTimestamp")),
        *_template_wide(ss)[:2],
    ],
)


def _daemon_set_cells(ds: Obj, since: Since) -> list[Any]:
    status = ds.get("status") or {}
    return [
        meta_field(ds, "name"),
        *(
            as_int(status.get(k))
            for k in (
                "desiredNumberScheduled",
                "currentNumberScheduled",
                "numberReady",
                "updatedNumberScheduled",
                "numberAvailable",
            )
        ),
        format_labels(dig(ds, "spec", "template", "spec", "nodeSelector")),
        since(meta_field(ds, "creationTimestamp")),
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
    for cond in as_list(dig(job, "status", "conditions")):
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond.get("status") == "True"
    return False


def _job_cells_at(job: Obj, since: Since, now_s: float) -> list[Any]:
    """``printJob``: STATUS from the conditions, COMPLETIONS, DURATION (to now while
    running, on the simulated clock), AGE."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    succeeded = as_int(status.get("succeeded"))
    if isinstance(spec.get("completions"), int):
        completions = f"{succeeded}/{spec['completions']}"
    elif as_int(spec.get("parallelism")) > 1:
        completions = f"{succeeded}/1 of {spec['parallelism']}"
    else:
        completions = f"{succeeded}/1"
    start, end = parse_time(status.get("startTime")), parse_time(status.get("completionTime"))
    duration = "" if start is None else human_duration((end if end is not None else now_s) - start)
    if _job_condition(job, "Complete"):
        state = "Complete"
    elif _job_condition(job, "Failed"):
        state = "Failed"
    elif meta_field(job, "deletionTimestamp"):
        state = "Terminating"
    elif _job_condition(job, "Suspended"):
        state = "Suspended"
    elif _job_condition(job, "FailureTarget"):
        state = "FailureTarget"
    else:
        state = "Running"
    return [
        meta_field(job, "name"),
        state,
        completions,
        duration,
        since(meta_field(job, "creationTimestamp")),
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
    last = dig(cj, "status", "lastScheduleTime")
    suspend = spec.get("suspend")
    job_template = dig(spec, "jobTemplate", "spec")
    names, images = container_cells(dig(job_template, "template", "spec"))
    return [
        meta_field(cj, "name"),
        spec.get("schedule") or "",
        spec.get("timeZone") or "<none>",
        "<unset>" if suspend is None else ("true" if suspend else "false"),
        len(as_list(dig(cj, "status", "active"))),
        since(last) if last else "<none>",
        since(meta_field(cj, "creationTimestamp")),
        names,
        images,
        format_selector(dig(job_template, "selector")),
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
        kind = dig(spec, "type")
        if kind in ("External", "Object"):
            key = kind[0].lower() + kind[1:]
            target = dig(spec, key, "target") or {}
            current = dig(status, key, "current") or {}
            if target.get("averageValue") is not None:
                have = current.get("averageValue") if dig(status, key) else None
                out.append(f"{have or '<unknown>'}/{target['averageValue']} (avg)")
            else:
                have = current.get("value") if dig(status, key) else None
                out.append(f"{have or '<unknown>'}/{target.get('value')}")
        elif kind == "Pods":
            have = dig(status, "pods", "current", "averageValue")
            out.append(f"{have or '<unknown>'}/{dig(spec, 'pods', 'target', 'averageValue')}")
        elif kind in ("Resource", "ContainerResource"):
            key = "resource" if kind == "Resource" else "containerResource"
            name = dig(spec, key, "name")
            target = dig(spec, key, "target") or {}
            if target.get("averageValue") is not None:
                have = dig(status, key, "current", "averageValue")
                out.append(f"{name}: {have or '<unknown>'}/{target['averageValue']}")
            else:
                util = dig(status, key, "current", "averageUtilization")
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
    metrics = as_list(spec.get("metrics"))
    min_replicas = spec.get("minReplicas")
    return [
        meta_field(hpa, "name"),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        _hpa_metrics(metrics, as_list(status.get("currentMetrics"))),
        str(min_replicas) if isinstance(min_replicas, int) else "<unset>",
        as_int(spec.get("maxReplicas")),
        as_int(status.get("currentReplicas")),
        since(meta_field(hpa, "creationTimestamp")),
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
