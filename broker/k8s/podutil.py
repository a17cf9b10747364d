"""Small facts about pods and owners that the controllers share, as
``k8s.io/kubernetes/pkg/api/v1/pod`` and ``pkg/controller`` compute them."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

Obj = dict[str, Any]
DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
# when a service's pod stops serving (the ReplicaSet controller and the kubelet model read it)
SERVE_UNTIL = "timewarp.io/serve-until"


# the form the store writes: two ASCII digits a field (strptime also takes one-digit fields)
_STAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)Z", re.ASCII)


@lru_cache(maxsize=4096)
def parse_time(text: str) -> int:
    """``metav1.Time`` (RFC 3339, second precision) as epoch nanoseconds."""
    # The stamps the store writes, read straight (strptime: ~4x the time; in a simulation
    # most pods' stamps fall on a second of their own, so the cache rarely hits). The
    # datetime constructor refuses what strptime's does (month 13, 30 February, second 60).
    m = _STAMP.fullmatch(text) if type(text) is str else None
    if m is not None:
        y, mo, d, h, mi, s = map(int, m.groups())
        stamp = datetime(y, mo, d, h, mi, s, tzinfo=UTC)
    else:
        stamp = datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return int(stamp.timestamp()) * 10**9


def controller_of(obj: Obj) -> Obj | None:
    """``metav1.GetControllerOf``: the owner reference with ``controller: true``."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


def is_terminating(obj: Obj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def is_active(pod: Obj) -> bool:
    """``controller.IsPodActive``: not Succeeded, not Failed, not being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not is_terminating(pod)


def disruption(pod: Obj) -> str:
    """The reason of the pod's ``DisruptionTarget`` condition when True (``DeletionByPodGC``:
    failed by the pod garbage collector, its work not done), else ``""``."""
    conditions = (pod.get("status") or {}).get("conditions")
    for cond in conditions if isinstance(conditions, list) else ():
        if isinstance(cond, dict) and cond.get("type") == "DisruptionTarget":
            if cond.get("status") == "True":
                return str(cond.get("reason") or "DisruptionTarget")
    return ""


def ready_condition(pod: Obj) -> Obj | None:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return cond
    return None


def is_ready(pod: Obj) -> bool:
    """``podutil.IsPodReady``: the Ready condition is True."""
    cond = ready_condition(pod)
    return cond is not None and cond.get("status") == "True"


def ready_since_ns(pod: Obj) -> int | None:
    """Epoch ns of the Ready condition's last transition, when the pod is Ready."""
    cond = ready_condition(pod)
    if cond is None or cond.get("status") != "True" or not cond.get("lastTransitionTime"):
        return None
    try:
        return parse_time(cond["lastTransitionTime"])
    except (TypeError, ValueError):
        return None  # a time that does not parse (written by a client): unknown


def available_at_ns(pod: Obj, min_ready_seconds: int) -> int | None:
    """The first epoch ns at which ``podutil.IsPodAvailable`` holds (None: not Ready).
    Available means Ready for more than ``minReadySeconds``: ``lastTransitionTime +
    minReadySeconds`` strictly before now (``Time.Before``)."""
    if not is_ready(pod):
        return None
    if min_ready_seconds <= 0:
        return 0
    since = ready_since_ns(pod)
    if since is None:
        return None
    return since + min_ready_seconds * 10**9 + 1


def is_available(pod: Obj, min_ready_seconds: int, now_epoch_ns: int) -> bool:
    at = available_at_ns(pod, min_ready_seconds)
    return at is not None and at <= now_epoch_ns


def deletion_cost(pod: Obj) -> int:
    """``controller.kubernetes.io/pod-deletion-cost`` (an int32; anything else is 0)."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(DELETION_COST_ANNOTATION)
    try:
        value = int(str(text))
    except (TypeError, ValueError):
        return 0
    return value if -(2**31) <= value < 2**31 else 0


def max_restarts(pod: Obj) -> int:
    return max(
        (
            int(cs.get("restartCount") or 0)
            for cs in (pod.get("status") or {}).get("containerStatuses") or ()
        ),
        default=0,
    )


def annotation_seconds(pod: Obj, key: str) -> tuple[float | None, str]:
    """A timewarp annotation holding seconds (on a pod or a template): (value, ""),
    (None, "") when absent, (None, why) when it is not a number >= 0."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(key)
    if text is None:
        return None, ""
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        return None, f"{key}={text!r} is not a number of seconds >= 0"
    return value, ""


def serve_until_s(pod: Obj) -> tuple[float | None, str]:
    """``timewarp.io/serve-until`` of a pod or template: the simulated second (from the
    simulation's start) its service ends; (None, "") when absent, (None, why) when bad."""
    return annotation_seconds(pod, SERVE_UNTIL)
