"""The filter step every scheduler shares: can this pod run on this node at all?

Mirrors kube-scheduler's filter plugins, in its order: NodeUnschedulable,
TaintToleration (NoSchedule and NoExecute taints), NodeAffinity (``nodeSelector`` only;
affinity expressions are not supported), NodeResourcesFit (every resource the pod requests,
plus the node's pod count when it publishes ``pods`` allocatable). The first failing
check gives the node's reason, worded like kube-scheduler's messages.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import chain

from .model import NodeView, PodSummary, Taint
from .resources import CPU, MEMORY, PODS

UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
FILTERED_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
_NO_REQUEST = float("-inf")  # below any free amount


def tolerated(pod: PodSummary, taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in pod.tolerations)


def _wanted(pod: PodSummary) -> list[tuple[str, int]]:
    return [(r, pod.requests[r]) for r in pod.requests.names() if r != PODS and pod.requests[r] > 0]


def unfit_reason(
    pod: PodSummary, view: NodeView, wanted: list[tuple[str, int]] | None = None
) -> str | None:
    """Why ``pod`` cannot go to ``view``'s node, or None when it can. ``wanted`` is
    ``_wanted(pod)``, precomputed by callers that check many nodes."""
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
    for resource, want in _wanted(pod) if wanted is None else wanted:
        if resource == CPU:
            free = view.alloc_cpu - view.requested_cpu
        elif resource == MEMORY:
            free = view.alloc_memory - view.requested_memory
        else:
            free = view.free(resource)
        if want > free:
            return f"Insufficient {resource}"
    return None


def feasible_nodes(pod: PodSummary, views: Iterable[NodeView]) -> tuple[list[NodeView], str]:
    """The nodes that pass every filter, and kube-scheduler's style summary of why the
    others did not (e.g. ``0/3 nodes are available: 2 Insufficient cpu, 1 node(s) were
    unschedulable.``). The summary is empty when some node fits."""
    views = list(views)
    fits, why, _ = find_feasible(pod, views, len(views), 0)
    return fits, why


def find_feasible(
    pod: PodSummary, views: Sequence[NodeView], want: int, start: int
) -> tuple[list[NodeView], str, int]:
    """kube-scheduler's search: examine nodes from index ``start`` (wrapping around)
    until ``want`` feasible ones are found or every node was examined. Returns the
    feasible nodes (in examination order), the why-not summary (when none fits: then
    every node was examined) and how many nodes were examined.

    A node without room for the pod's cpu or memory is passed over with two integer
    comparisons (on a busy cluster, most nodes); the reasons are worked out only when no
    node fits, the one case that reports them."""
    fits: list[NodeView] = []
    wanted = _wanted(pod)
    # a request of 0 is never checked (an over-committed node still fits it): compare
    # against a bar no free amount is below, so the loop needs one comparison a resource
    need_cpu = pod.requests[CPU] or _NO_REQUEST
    need_memory = pod.requests[MEMORY] or _NO_REQUEST
    n = len(views)
    first = start % n if n else 0
    examined = 0
    # this loop runs over thousands of nodes per decision on a large, busy cluster
    for i in chain(range(first, n), range(first)):
        view = views[i]
        examined += 1
        if need_cpu > view.free_cpu or need_memory > view.free_memory:
            continue  # fails NodeResourcesFit whatever the other filters say
        if unfit_reason(pod, view, wanted) is None:
            fits.append(view)
            if len(fits) >= want:
                break
    if fits:
        return fits, "", examined
    reasons = Counter(unfit_reason(pod, view, wanted) for view in views)
    detail = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    return fits, f"0/{n} nodes are available" + (f": {detail}." if detail else "."), examined
