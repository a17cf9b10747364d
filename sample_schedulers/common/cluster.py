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

from dataclasses import replace

from .model import NodeSummary, NodeView, PodSummary


class ClusterCache:
    def __init__(self) -> None:
        self.nodes: dict[str, NodeSummary] = {}
        self.pods: dict[str, PodSummary] = {}
        self._assumed: dict[str, PodSummary] = {}
        self._on_node: dict[str, dict[str, PodSummary]] = {}
        self._views: dict[str, NodeView] = {}
        self._filed_under: dict[str, str] = {}
        # views() in node-name order, patched in place: O(changed nodes) per call plus
        # one list copy, instead of sorting every node name for every decision
        self._ordered: list[NodeView] | None = None  # None: rebuild (a node came or went)
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

    def views(self) -> list[NodeView]:
        """Every node's view, sorted by name: a new list the caller may keep (the views
        are immutable). Costs O(nodes changed since the last call) plus a list copy; a
        node added or deleted costs one O(n log n) rebuild."""
        if self._ordered is None:
            names = sorted(self.nodes)
            self._position = {name: i for i, name in enumerate(names)}
            self._ordered = [self._view(name) for name in names]
        else:
            for name in self._stale:
                i = self._position.get(name)
                if i is not None:
                    self._ordered[i] = self._view(name)
        self._stale.clear()
        return list(self._ordered)

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
