"""Which ``schedulerName`` each scheduler process asks the API for.

A scheduler that selects its pods on the server side lists or watches pods with a field
selector such as ``spec.schedulerName=my-scheduler`` (kube-scheduler does so, and so
do many scheduler frameworks). Recording those values per token lets a run that makes
no progress say what the pods ask for *and* what the schedulers look for. A scheduler
that filters pods itself leaves no trace here: nothing is recorded for it.
"""

from __future__ import annotations

import threading
from urllib.parse import parse_qs, unquote, urlsplit

from .errors import ApiError
from .resources import resource_type
from .selectors import parse_field_selector

FIELD = "spec.schedulerName"
PODS = resource_type("pods")


def _is_pod_collection(path: str) -> bool:
    """``/api/v1/pods`` or ``/api/v1/namespaces/NS/pods`` (a list or a watch)."""
    parts = [unquote(p) for p in path.split("/") if p]
    return parts[:2] == ["api", "v1"] and (
        parts[2:] == ["pods"]
        or (len(parts) == 5 and parts[2] == "namespaces" and parts[4] == "pods")
    )


class SchedulerNameInterest:
    """Per process name: the ``spec.schedulerName`` values its pod lists and watches
    select (``!=X`` is recorded as ``not X``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: dict[str, set[str]] = {}

    def observe(self, who: str, method: str, target: str) -> None:
        if method != "GET" or "schedulerName" not in target:  # the cheap test first
            return
        split = urlsplit(target)
        if not _is_pod_collection(split.path):
            return
        for text in parse_qs(split.query).get("fieldSelector", []):
            try:
                selector = parse_field_selector(text, PODS.key, PODS.strategy.fields)
            except ApiError:
                continue  # answered 400 by the API; nothing was selected
            for req in selector.requirements:
                if req.field == FIELD:
                    with self._lock:
                        self._names.setdefault(who, set()).add(
                            f"not {req.value}" if req.negate else req.value
                        )

    def snapshot(self) -> dict[str, list[str]]:
        """Process name -> sorted values asked for (only processes that asked)."""
        with self._lock:
            return {who: sorted(values) for who, values in sorted(self._names.items())}
