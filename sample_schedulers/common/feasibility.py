"""The filter step every scheduler shares: can this pod run on this node at all?

Mirrors kube-scheduler's filter plugins, in its order: NodeUnschedulable,
TaintToleration (NoSchedule and NoExecute taints), NodeAffinity (``nodeSelector`` only;
affinity expressions are not supported), NodeResourcesFit (every resource the pod requests,
plus the node's pod count when it publishes ``pods`` allocatable). The first failing
check gives the node's reason, worded like kube-scheduler's messages.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import chain, islice
from typing import Any

from .cluster import NodeViews
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
    views = views if isinstance(views, list) else list(views)  # a NodeViews stays one
    fits, why, _ = find_feasible(pod, views, len(views), 0)
    return fits, why


def find_feasible(
    pod: PodSummary, views: Sequence[NodeView], want: int, start: int
) -> tuple[list[NodeView], str, int]:
    """kube-scheduler's search: examine nodes from index ``start`` (wrapping around)
    until ``want`` feasible ones are found or every node was examined. Returns the
    feasible nodes (in examination order), the why-not summary (when none fits: then
    every node was examined) and how many nodes were examined.

    On a ``NodeViews`` (the cache's list), a pod shape seen before is looked up in an
    index of the feasible positions (``FeasibleIndex``): the same nodes, in the same
    order, without examining the others one by one. Otherwise a node without room for
    the pod's cpu or memory is passed over with two integer comparisons (on a busy
    cluster, most nodes). The reasons are worked out only when no node fits, the one
    case that reports them."""
    wanted = _wanted(pod)
    n = len(views)
    first = start % n if n else 0
    index = _index_of(views)
    positions = index.positions(views, pod, wanted) if index is not None else None
    if positions is None:
        fits, examined = _walk(pod, views, wanted, want, first)
    else:
        take = max(want, 1)  # as the walk: it stops at the first fit when want <= 0
        k = bisect_left(positions, first)
        found = list(islice(chain(islice(positions, k, None), islice(positions, k)), take))
        fits = [views[i] for i in found]
        examined = (found[-1] - first) % n + 1 if len(found) >= take else n
    if fits:
        return fits, "", examined
    reasons = Counter(unfit_reason(pod, view, wanted) for view in views)
    detail = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    return fits, f"0/{n} nodes are available" + (f": {detail}." if detail else "."), examined


def _needs(pod: PodSummary) -> tuple[float, float]:
    # a request of 0 is never checked (an over-committed node still fits it): compare
    # against a bar no free amount is below, so the check needs one comparison a resource
    return pod.requests[CPU] or _NO_REQUEST, pod.requests[MEMORY] or _NO_REQUEST


def _walk(
    pod: PodSummary, views: Sequence[NodeView], wanted: list[tuple[str, int]], want: int, first: int
) -> tuple[list[NodeView], int]:
    fits: list[NodeView] = []
    need_cpu, need_memory = _needs(pod)
    n = len(views)
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
    return fits, examined


def _index_of(views: Sequence[NodeView]) -> FeasibleIndex | None:
    memo = getattr(views, "memo", None)  # a NodeViews; a plain list has no index
    if memo is None:
        return None
    index = memo.get("feasible")
    if index is None:
        index = memo["feasible"] = FeasibleIndex()
    return index


INDEXED_SHAPES = 16
"""Pod shapes a ``FeasibleIndex`` keeps positions for (the least recently used goes)."""


class _Feasible:
    """The sorted positions of the nodes where one pod shape passes every filter."""

    def __init__(self, pod: PodSummary, wanted: list[tuple[str, int]]) -> None:
        self.pod = pod  # any pod of the shape: the filters read nothing else of it
        self.wanted = wanted
        self.need_cpu, self.need_memory = _needs(pod)
        self.positions: list[int] = []
        self.mark = -1  # entries of the list's ``replaced`` history taken into account

    def passes(self, view: NodeView) -> bool:
        if self.need_cpu > view.free_cpu or self.need_memory > view.free_memory:
            return False
        return unfit_reason(self.pod, view, self.wanted) is None

    def catch_up(self, views: NodeViews) -> None:
        if self.mark < views.forgotten:  # new, or too far behind: read every node
            passes = self.passes
            self.positions = [i for i, view in enumerate(views) if passes(view)]
        else:
            positions = self.positions
            for i in views.replaced[self.mark - views.forgotten :]:
                j = bisect_left(positions, i)
                present = j < len(positions) and positions[j] == i
                if self.passes(views[i]):
                    if not present:
                        positions.insert(j, i)
                elif present:
                    del positions[j]
        self.mark = views.changes


class FeasibleIndex:
    """For the pod shapes a ``NodeViews`` was asked about recently, the positions of the
    nodes that pass every filter, kept up to date from the list's ``replaced`` history.

    A shape is what the filters read of a pod: the requests checked, the tolerations and
    the node selector. It is indexed the second time it is seen (reading every node
    once costs more than one search; a shape seen once is searched node by node)."""

    def __init__(self) -> None:
        self._shapes: dict[tuple[Any, ...], _Feasible] = {}  # least recently used first
        self._seen: dict[tuple[Any, ...], int] = {}

    def positions(
        self, views: NodeViews, pod: PodSummary, wanted: list[tuple[str, int]]
    ) -> list[int] | None:
        """The feasible positions for ``pod``, ascending; None when its shape is not
        indexed (yet)."""
        shape = (tuple(wanted), pod.tolerations, tuple(pod.node_selector.items()))
        entry = self._shapes.pop(shape, None)
        if entry is None:
            if shape not in self._seen:
                if len(self._seen) >= 64:
                    self._seen.clear()
                self._seen[shape] = 1
                return None
            del self._seen[shape]
            entry = _Feasible(pod, wanted)
            if len(self._shapes) >= INDEXED_SHAPES:
                del self._shapes[next(iter(self._shapes))]
        entry.catch_up(views)
        self._shapes[shape] = entry
        return entry.positions
