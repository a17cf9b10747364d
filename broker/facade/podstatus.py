"""Pod status shapes a kubelet writes, complete enough for every client's typed models.

The broker's kubelet model decides *when* a pod runs, finishes or is rejected; these
functions only write *what* a real kubelet would write, so that ``V1Pod`` deserializes
in old clients too (they require e.g. ``containerStatuses[].imageID`` and
``restartCount``). They edit the pod dict in place; use them inside ``Store.update``:

    store.update("pods", ns, name, lambda p: mark_running(p, now=store.timestamp(), host_ip=ip))
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def set_condition(
    pod: Obj,
    type_: str,
    status: str,
    now: str,
    reason: str | None = None,
    message: str | None = None,
) -> None:
    """Set (or add) the pod condition ``type_`` as the kubelet does: the transition time
    moves only when the status changes; reason and message as given (dropped if None)."""
    conditions = pod.setdefault("status", {}).setdefault("conditions", [])
    for cond in conditions:
        if cond.get("type") == type_:
            if cond.get("status") != status:
                cond["lastTransitionTime"] = now
            cond["status"] = status
            cond["lastProbeTime"] = None
            for key, value in (("reason", reason), ("message", message)):
                if value:
                    cond[key] = value
                else:
                    cond.pop(key, None)
            return
    cond = {"type": type_, "status": status, "lastProbeTime": None, "lastTransitionTime": now}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    conditions.append(cond)


def _container_status(container: Obj, state: Obj, ready: bool, started: bool) -> Obj:
    image = container.get("image", "")
    return {
        "name": container["name"],
        "image": image,
        "imageID": f"timewarp://{image}",
        "containerID": f"timewarp://{container['name']}",
        "ready": ready,
        "started": started,
        "restartCount": 0,
        "state": state,
        "lastState": {},
    }


def set_addresses(status: Obj, host_ip: str, pod_ip: str | None) -> None:
    """The node's address (``hostIP``/``hostIPs``) and the pod's (``podIP``/``podIPs``;
    the node's when it has none of its own: ``hostNetwork``)."""
    status["hostIP"] = host_ip
    status["hostIPs"] = [{"ip": host_ip}]
    status["podIP"] = pod_ip or host_ip
    status["podIPs"] = [{"ip": pod_ip or host_ip}]


def mark_running(pod: Obj, *, now: str, host_ip: str, pod_ip: str | None = None) -> None:
    """Phase Running, all containers running and ready since ``now``."""
    status = pod.setdefault("status", {})
    status["phase"] = "Running"
    set_addresses(status, host_ip, pod_ip)
    status.setdefault("startTime", now)
    for type_ in ("Initialized", "Ready", "ContainersReady", "PodScheduled"):
        set_condition(pod, type_, "True", now)
    status["containerStatuses"] = [
        _container_status(c, {"running": {"startedAt": now}}, True, True)
        for c in pod.get("spec", {}).get("containers", [])
    ]


def mark_finished(
    pod: Obj,
    *,
    now: str,
    succeeded: bool,
    exit_code: int | None = None,
    reason: str | None = None,
    message: str | None = None,
) -> None:
    """Phase Succeeded/Failed; containers terminated at ``now`` (exit code 0/1 by default)."""
    status = pod.setdefault("status", {})
    status["phase"] = "Succeeded" if succeeded else "Failed"
    code = exit_code if exit_code is not None else (0 if succeeded else 1)
    term_reason = "Completed" if succeeded else (reason or "Error")
    for type_ in ("Ready", "ContainersReady"):
        set_condition(pod, type_, "False", now, "PodCompleted" if succeeded else "PodFailed")
    started = {}
    for cs in status.get("containerStatuses") or []:
        started[cs["name"]] = (cs.get("state", {}).get("running") or {}).get("startedAt")
    statuses = []
    for c in pod.get("spec", {}).get("containers", []):
        terminated = {
            "exitCode": code,
            "reason": term_reason,
            "finishedAt": now,
            "startedAt": started.get(c["name"]) or status.get("startTime") or now,
            "containerID": f"timewarp://{c['name']}",
        }
        if message:
            terminated["message"] = message
        statuses.append(_container_status(c, {"terminated": terminated}, False, False))
    status["containerStatuses"] = statuses
    if not succeeded and reason:
        status["reason"] = reason
    if message:
        status["message"] = message


def mark_rejected(pod: Obj, *, now: str, reason: str, message: str) -> None:
    """What a kubelet writes when admission fails on the node (``OutOfcpu``,
    ``OutOfmemory``, ``OutOfpods``): phase Failed, no container ever started."""
    status = pod.setdefault("status", {})
    status["phase"] = "Failed"
    status["reason"] = reason
    status["message"] = message
    status.setdefault("startTime", now)
    status["containerStatuses"] = [
        _container_status(c, {"waiting": {"reason": "ContainerCreating"}}, False, False)
        for c in pod.get("spec", {}).get("containers", [])
    ]


def owner_reference(owner: Obj, *, controller: bool = True) -> Obj:
    """An ``ownerReferences`` entry pointing at ``owner`` (e.g. a ReplicaSet or Job)."""
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }
