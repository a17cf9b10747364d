"""The scheduler's local picture of the cluster, fed by the pod and node watches.

Invariants: every pod is stored under ``namespace/name``; a pod *occupies* a node when it
is bound there (or assumed, below) and not terminated; ``views()`` returns every known
node, sorted by name, with exactly the pods occupying it.

*Assumed* pods: right after the scheduler decides, before the watch reports the
binding, the pod is recorded on its node (kube-scheduler's "assume"), so the next
decision already counts its requests. The assumption ends when the watch shows the pod
bound (anywhere) or deleted, or when ``forget`` is called because binding failed.

Not thread-safe by itself: the scheduling loop guards it with its lock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from .model import NodeSummary, NodeView, PodSummary

REPLACED_LOG = 4096
"""How many replaced positions a ``NodeViews`` remembers (then it forgets the older half)."""


class NodeViews(list):
    """``ClusterCache.views()``: the views in node-name order, and the positions the cache
    replaced since the list was built, so that an index over positions (the filter's,
    ``feasibility.find_feasible``) catches up with the changes instead of re-reading
    every node. ``memo`` holds such indexes: they live and die with the list."""

    def __init__(self, views: Iterable[NodeView] = ()) -> None:
        super().__init__(views)
        self.replaced: list[int] = []
        """Positions replaced, oldest first (a position may appear more than once)."""
        self.forgotten = 0
        """How many entries were dropped from the front of ``replaced``: entry k of
        the whole history is ``replaced[k - forgotten]``."""
        self.memo: dict[str, Any] = {}

    def replace(self, i: int, view: NodeView) -> None:
        if self[i] is not view:
            self[i] = view
            if len(self.replaced) >= REPLACED_LOG:
                half = REPLACED_LOG // 2
                del self.replaced[:half]
                self.forgotten += half
            self.replaced.append(i)

    @property
    def changes(self) -> int:
        """Entries in the whole history of ``replaced``: a consumer's mark."""
        return self.forgotten + len(self.replaced)


class ClusterCache:
    def __init__(self) -> None:
        self.nodes: dict[str, NodeSummary] = {}
        self.pods: dict[str, PodSummary] = {}
        self._assumed: dict[str, PodSummary] = {}
        self._on_node: dict[str, dict[str, PodSummary]] = {}
        self._views: dict[str, NodeView] = {}
        self._filed_under: dict[str, str] = {}
        # views() in node-name order, patched in place: O(changed nodes) per call,
        # instead of sorting (or copying) every node for every decision
        self._ordered: NodeViews | None = None  # None: rebuild (a node came or went)
        self._position: dict[str, int] = {}
        self._stale: set[str] = set()
        self.generation = 0
        """Bumped on every change that can alter ``views()``: equal generations mean
        equal views."""

    # -- nodes --------------------------------------------------------------------------

    def upsert_node(self, node: NodeSummary) -> NodeSummary | None:
        old = self.nodes.get(node.name)
        if old != node:
            self.nodes[node.name] = node
            self._invalidate(node.name)
            if old is None:
                self._ordered = None
        return old

    def delete_node(self, name: str) -> NodeSummary | None:
        self._invalidate(name)
        old = self.nodes.pop(name, None)
        if old is not None:
            self._ordered = None
        return old

    # -- pods -----------------------------------------------------------------------------

    def upsert_pod(self, pod: PodSummary) -> PodSummary | None:
        old = self.pods.get(pod.key)
        self.pods[pod.key] = pod
        if pod.node_name is not None:
            self._assumed.pop(pod.key, None)
        self._place(pod.key)
        return old

    def delete_pod(self, key: str) -> PodSummary | None:
        old = self.pods.pop(key, None)
        self._assumed.pop(key, None)
        self._place(key)
        return old

    def assume(self, pod: PodSummary, node_name: str) -> None:
        self._assumed[pod.key] = replace(pod, node_name=node_name)
        self._place(pod.key)

    def forget(self, key: str) -> None:
        if self._assumed.pop(key, None) is not None:
            self._place(key)

    def is_assumed(self, key: str) -> bool:
        return key in self._assumed

    def effective(self, key: str) -> PodSummary | None:
        """The pod as decisions see it: the assumption if any, else the watched pod."""
        return self._assumed.get(key) or self.pods.get(key)

    # -- views ---------------------------------------------------------------------------

    def views(self) -> NodeViews:
        """Every node's view, sorted by name. Like kube-scheduler's snapshot, it is one
        list updated in place at each call (O(nodes changed since the last call); a
        node added or deleted costs one O(n log n) rebuild, into a new list): valid
        until the next call, copy it to keep it. Only this method writes to it, so the
        scheduling loop may read it outside the lock while the watches record events."""
        ordered = self._ordered
        if ordered is None:
            names = sorted(self.nodes)
            self._position = {name: i for i, name in enumerate(names)}
            ordered = self._ordered = NodeViews(self._view(name) for name in names)
        else:
            for name in self._stale:
                i = self._position.get(name)
                if i is not None:
                    ordered.replace(i, self._view(name))
        self._stale.clear()
        return ordered

    def _view(self, name: str) -> NodeView:
        view = self._views.get(name)
        if view is None:
            pods = self._on_node.get(name, {})
            view = NodeView(self.nodes[name], tuple(pods[k] for k in sorted(pods)))
            self._views[name] = view
        return view

    def _invalidate(self, node_name: str) -> None:
        self._views.pop(node_name, None)
        self._stale.add(node_name)
        self.generation += 1

    def _place(self, key: str) -> None:
        """Re-file one pod under the node it now occupies (if any)."""
        old_node = self._filed_under.pop(key, None)
        if old_node is not None:
            pods = self._on_node[old_node]
            del pods[key]
            if not pods:
                del self._on_node[old_node]
            self._invalidate(old_node)
        pod = self.effective(key)
        if pod is not None and pod.occupies_node:
            self._on_node.setdefault(pod.node_name, {})[key] = pod
            self._filed_under[key] = pod.node_name
            self._invalidate(pod.node_name)
