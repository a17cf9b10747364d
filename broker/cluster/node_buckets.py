"""The nodes of the decisions log grouped by what the kubelet's admission sees of them,
so that a binding's ``feasible_nodes`` and ``node_rank`` cost O(groups), not O(nodes).

Two nodes admit exactly the same pods when they have the same free amount of every
resource (``kubelet_admission.insufficient_resources`` compares a request with
allocatable − used, the pod count included, and a resource a node lacks counts as free
0), the same labels (node affinity) and the same ``NoExecute`` taints; the one exception
is a pod whose affinity names nodes (``matchFields`` on ``metadata.name``, as a
DaemonSet's pods do), checked node by node. A bucket holds the nodes of one such
signature (plus ``unschedulable``, which ``why_no_node`` reports), their names sorted;
the admission checks run once per bucket, on a ``NodeView`` whose allocatable is the
free amounts and whose used is empty — the same comparisons, the same reasons.

The rank of a node among the feasible ones, by (−free cpu, −free memory, name): the
feasible nodes of buckets with more free cpu (or as much and more memory), plus those of
equal free cpu and memory whose name sorts before. A homogeneous cluster has a handful
of buckets; at worst (every node different) one per node, as before.
"""

from __future__ import annotations

import json
from bisect import bisect_left, insort
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.cluster import kubelet_admission as admission
from broker.k8s import resource_names as rn

Key = tuple[Any, ...]


@dataclass
class Bucket:
    """Nodes that admit the same pods: ``view`` stands for each of them (its name is
    empty: checks that need the name take it from ``names``)."""

    view: admission.NodeView
    unschedulable: bool
    class_key: str  # labels, NoExecute taints, unschedulable: what the non-resource checks see
    names: list[str] = field(default_factory=list)

    @property
    def order(self) -> tuple[int, int]:
        """The rank's order of this bucket's nodes, before their names."""
        free = self.view.allocatable
        return (-free.get(rn.CPU, 0), -free.get(rn.MEMORY, 0))


def _names_node(pod: Mapping[str, Any]) -> bool:
    """Whether the pod's required node affinity looks at node names (``matchFields``)."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    affinity = spec.get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = (
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node_affinity, dict)
        else None
    )
    if not isinstance(required, dict):
        return False
    terms = required.get("nodeSelectorTerms")
    return isinstance(terms, list) and any(
        isinstance(t, dict) and t.get("matchFields") for t in terms
    )


class Placement:
    """The other checks (affinity, taints) of one pod, memoised per bucket class: what a
    node of a bucket refuses the pod for, apart from resources."""

    def __init__(self, pod: Mapping[str, Any]) -> None:
        self.pod = pod
        self.by_name = _names_node(pod)
        self._memo: dict[str, tuple[admission.Refusal | None, admission.Refusal | None]] = {}

    def refusals(self, bucket: Bucket) -> tuple[admission.Refusal | None, admission.Refusal | None]:
        """(node affinity, NoExecute taints) for the bucket's class (affinity: only if it
        does not depend on the node's name)."""
        out = self._memo.get(bucket.class_key)
        if out is None:
            view = bucket.view
            affinity = None if self.by_name else admission.check_node_affinity(self.pod, view)
            out = (affinity, admission.check_no_execute_taints(self.pod, view))
            self._memo[bucket.class_key] = out
        return out

    def affinity_of(self, bucket: Bucket, name: str) -> admission.Refusal | None:
        """Node affinity for one node of the bucket."""
        if not self.by_name:
            return self.refusals(bucket)[0]
        view = bucket.view
        named = admission.NodeView(name, view.labels, view.taints, view.allocatable)
        return admission.check_node_affinity(self.pod, named)


class NodeBuckets:
    """See the module docstring. ``place(name, …)`` after each change of a node's labels,
    taints, allocatable or use; ``remove(name)`` when it goes."""

    def __init__(self) -> None:
        self._buckets: dict[Key, Bucket] = {}
        self._of: dict[str, Key] = {}  # node name -> its bucket's key

    def __len__(self) -> int:
        return len(self._of)

    def buckets(self) -> Iterator[Bucket]:
        return iter(self._buckets.values())

    def bucket_of(self, name: str) -> Bucket | None:
        key = self._of.get(name)
        return None if key is None else self._buckets[key]

    def place(
        self,
        name: str,
        labels: Mapping[str, str],
        taints: list[Any],
        allocatable: Mapping[str, int],
        used: Mapping[str, int],
        unschedulable: bool,
    ) -> None:
        free = {
            r: allocatable.get(r, 0) - used.get(r, 0)
            for r in sorted({*allocatable, *used})
            if allocatable.get(r, 0) != used.get(r, 0)
        }  # a resource free 0 and one absent are refused alike
        no_execute = [
            t for t in taints if isinstance(t, dict) and t.get("effect") == admission.NO_EXECUTE
        ]
        class_key = json.dumps([labels, no_execute, unschedulable], sort_keys=True)
        key = (class_key, tuple(free.items()))
        if self._of.get(name) == key:
            return
        self.remove(name)
        bucket = self._buckets.get(key)
        if bucket is None:
            view = admission.NodeView("", dict(labels), no_execute, free)
            bucket = self._buckets[key] = Bucket(view, unschedulable, class_key)
        insort(bucket.names, name)
        self._of[name] = key

    def remove(self, name: str) -> None:
        key = self._of.pop(name, None)
        if key is None:
            return
        bucket = self._buckets[key]
        del bucket.names[bisect_left(bucket.names, name)]
        if not bucket.names:
            del self._buckets[key]

    def admitted(
        self, bucket: Bucket, requests: Mapping[str, int], placement: Placement
    ) -> list[str] | bool:
        """Which of the bucket's nodes admit the pod: all (True), none (False), or those
        named (sorted)."""
        if admission.insufficient_resources(requests, bucket.view):
            return False
        affinity, taints = placement.refusals(bucket)
        if taints is not None or affinity is not None:
            return False
        if not placement.by_name:
            return True
        return [n for n in bucket.names if placement.affinity_of(bucket, n) is None]

    def feasible(
        self, pod: Mapping[str, Any], requests: Mapping[str, int], node_name: str | None = None
    ) -> tuple[int, int | None]:
        """How many nodes admit the pod, and ``node_name``'s rank among them (1 = the
        emptiest; None when it is not one of them or not given)."""
        placement = Placement(pod)
        mine = self.bucket_of(node_name) if node_name is not None else None
        order = mine.order if mine is not None else None
        count = before = 0
        chosen = False
        for bucket in self._buckets.values():
            which = self.admitted(bucket, requests, placement)
            if which is False:
                continue
            names = bucket.names if which is True else which
            count += len(names)
            if order is None:
                continue
            if bucket.order < order:
                before += len(names)
            elif bucket.order == order:
                at = bisect_left(names, node_name)
                before += at
                chosen = chosen or (at < len(names) and names[at] == node_name)
        return count, (before + 1 if chosen else None)

    def why_not(self, pod: Mapping[str, Any], requests: Mapping[str, int]) -> tuple[int, dict]:
        """(nodes that would admit the pod, {reason: nodes refusing for it}), each node
        counting each of its reasons once — ``DecisionLog.why_no_node``'s figures."""
        placement = Placement(pod)
        reasons: dict[str, int] = {}
        fits = 0
        for bucket in self._buckets.values():
            common = [r.reason for r in admission.insufficient_resources(requests, bucket.view)]
            affinity, taints = placement.refusals(bucket)
            groups: dict[str | None, int] = {}  # affinity reason -> nodes
            if placement.by_name:
                for n in bucket.names:
                    refusal = placement.affinity_of(bucket, n)
                    reason = None if refusal is None else refusal.reason
                    groups[reason] = groups.get(reason, 0) + 1
            else:
                groups[None if affinity is None else affinity.reason] = len(bucket.names)
            for affinity_reason, nodes in groups.items():
                found = list(common)
                if affinity_reason is not None:
                    found.append(affinity_reason)
                if taints is not None:
                    found.append(taints.reason)
                if bucket.unschedulable:
                    found.append("Unschedulable")
                if not found:
                    fits += nodes
                for reason in dict.fromkeys(found):
                    reasons[reason] = reasons.get(reason, 0) + nodes
        return fits, reasons
