"""The filter step every scheduler shares: can this pod run on this node at all?

Mirrors kube-scheduler's filter plugins, in its order: NodeUnschedulable,
TaintToleration (NoSchedule and NoExecute taints), NodeAffinity (``nodeSelector`` only;
affinity expressions are not supported), NodeResourcesFit (every resource the pod requests,
plus the node's pod count when it publishes ``pods`` allocatable). The first failing
check gives the node's reason, worded like kube-scheduler's messages.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from .model import NodeView, PodSummary, Taint
from .resources import PODS

UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
FILTERED_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def tolerated(pod: PodSummary, taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in pod.tolerations)


def unfit_reason(pod: PodSummary, view: NodeView) -> str | None:
    """Why ``pod`` cannot go to ``view``'s node, or None when it can."""
    node = view.node
    if node.unschedulable and not tolerated(pod, UNSCHEDULABLE_TAINT):
        return "node(s) were unschedulable"
    for taint in node.taints:
        if taint.effect in FILTERED_EFFECTS and not tolerated(pod, taint):
            shown = f"{taint.key}: {taint.value}" if taint.value else taint.key
            return f"node(s) had untolerated taint {{{shown}}}"
    for key, value in pod.node_selector.items():
        if node.labels.get(key) != value:
            return "node(s) didn't match Pod's node affinity/selector"
    if PODS in node.allocatable.amounts and len(view.pods) + 1 > node.allocatable[PODS]:
        return "Too many pods"
    for resource in pod.requests.names():
        want = pod.requests[resource]
        if resource == PODS or want <= 0:
            continue
        if want > view.free(resource):
            return f"Insufficient {resource}"
    return None


def feasible_nodes(pod: PodSummary, views: Iterable[NodeView]) -> tuple[list[NodeView], str]:
    """The nodes that pass every filter, and kube-scheduler's style summary of why the
    others did not (e.g. ``0/3 nodes are available: 2 Insufficient cpu, 1 node(s) were
    unschedulable.``). The summary is empty when some node fits."""
    fits: list[NodeView] = []
    reasons: Counter[str] = Counter()
    n = 0
    for view in views:
        n += 1
        reason = unfit_reason(pod, view)
        if reason is None:
            fits.append(view)
        else:
            reasons[reason] += 1
    if fits:
        return fits, ""
    detail = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    return fits, f"0/{n} nodes are available" + (f": {detail}." if detail else ".")
