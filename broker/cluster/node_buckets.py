"""The nodes of the decisions log grouped by what the kubelet's admission sees of them,
so that a binding's ``feasible_nodes`` and ``node_rank`` cost O(groups), not O(nodes).

Two nodes admit exactly the same pods when they have the same free amount of every
resource (``kubelet_admission.insufficient_resources`` compares a request with
allocatable − used, the pod count included, and a resource a node lacks counts as free
0), the same labels (node affinity) and the same ``NoExecute`` taints. Labels whose
value is the node's own name (``kubernetes.io/hostname``) are left out of that
signature, or every node would be alone in its bucket; a pod whose affinity looks at
such a label, or names nodes (``matchFields`` on ``metadata.name``, as a DaemonSet's
pods do), has its affinity checked node by node, on the node's whole labels. A bucket
holds the nodes of one signature (plus ``unschedulable``, which ``why_no_node``
reports), their names sorted; the admission checks run once per bucket, on a
``NodeView`` whose allocatable is the free amounts and whose used is empty — the same
comparisons, the same reasons.

The rank of a node among the feasible ones, by (−free cpu, −free memory, name): the
feasible nodes of buckets with more free cpu (or as much and more memory), plus those of
equal free cpu and memory whose name sorts before. A homogeneous cluster has a handful
of buckets; at worst (every node different) one per node, as before.
"""

from __future__ import annotations

import json
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Collection, Iterator, Mapping
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


def _label_keys(pod: Mapping[str, Any]) -> tuple[set[str], bool]:
    """The label keys the pod's node selector and required node affinity look at, and
    whether that affinity looks at node names (``matchFields``)."""
    selector, required = admission.node_selection(pod)
    keys = set(selector or ())
    terms = required.get("nodeSelectorTerms") if required is not None else None
    fields = False
    for term in terms if isinstance(terms, list) else ():
        if not isinstance(term, dict):
            continue
        fields = fields or bool(term.get("matchFields"))
        expressions = term.get("matchExpressions")
        for e in expressions if isinstance(expressions, list) else ():
            if isinstance(e, dict) and isinstance(e.get("key"), str):
                keys.add(e["key"])
    return keys, fields


class Placement:
    """The other checks (affinity, taints) of one pod, memoised per bucket class: what a
    node of a bucket refuses the pod for, apart from resources."""

    def __init__(
        self,
        pod: Mapping[str, Any],
        nodes: Mapping[str, tuple[Any, Mapping[str, str]]],
        named_keys: Collection[str],
    ) -> None:
        self.pod = pod
        self.nodes = nodes  # node name -> (its class, its whole labels)
        keys, fields = _label_keys(pod)
        self.by_name = fields or any(k in named_keys for k in keys)
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
        named = admission.NodeView(name, self.nodes[name][1], view.taints, view.allocatable)
        return admission.check_node_affinity(self.pod, named)


@dataclass(frozen=True)
class _Class:
    """What the checks other than resources see of a node (its name aside)."""

    key: str
    labels: dict[str, str]  # without those that name the node
    no_execute: list[Any]
    unschedulable: bool


class NodeBuckets:
    """See the module docstring. ``set_node`` when a node is added or changes (labels,
    taints, cordon, allocatable), ``set_use`` when what its pods use changes, ``remove``
    when it goes."""

    def __init__(self) -> None:
        self._buckets: dict[Key, Bucket] = {}
        self._of: dict[str, Key] = {}  # node name -> its bucket's key
        self._nodes: dict[str, tuple[_Class, dict[str, str]]] = {}  # and its whole labels
        self._named_keys: Counter[str] = Counter()  # label keys whose value names a node

    def __len__(self) -> int:
        return len(self._of)

    def buckets(self) -> Iterator[Bucket]:
        return iter(self._buckets.values())

    def bucket_of(self, name: str) -> Bucket | None:
        key = self._of.get(name)
        return None if key is None else self._buckets[key]

    def set_node(
        self,
        name: str,
        labels: Mapping[str, str],
        taints: list[Any],
        unschedulable: bool,
        allocatable: Mapping[str, int],
        used: Mapping[str, int],
    ) -> None:
        self.remove(name)
        no_execute = [
            t for t in taints if isinstance(t, dict) and t.get("effect") == admission.NO_EXECUTE
        ]
        common = {k: v for k, v in labels.items() if v != name}  # as other nodes may have
        key = json.dumps([common, no_execute, unschedulable], sort_keys=True)
        self._nodes[name] = (_Class(key, common, no_execute, unschedulable), dict(labels))
        self._named_keys.update(k for k, v in labels.items() if v == name)
        self._file(name, allocatable, used)

    def set_use(self, name: str, allocatable: Mapping[str, int], used: Mapping[str, int]) -> None:
        if name in self._nodes:
            self._unfile(name)
            self._file(name, allocatable, used)

    def remove(self, name: str) -> None:
        if name not in self._nodes:
            return
        self._unfile(name)
        _, labels = self._nodes.pop(name)
        for k, v in labels.items():
            if v == name:
                self._named_keys[k] -= 1
                if self._named_keys[k] <= 0:
                    del self._named_keys[k]

    def _file(self, name: str, allocatable: Mapping[str, int], used: Mapping[str, int]) -> None:
        free = {
            r: allocatable.get(r, 0) - used.get(r, 0)
            for r in sorted({*allocatable, *used})
            if allocatable.get(r, 0) != used.get(r, 0)
        }  # a resource free 0 and one absent are refused alike
        node_class = self._nodes[name][0]
        key = (node_class.key, tuple(free.items()))
        bucket = self._buckets.get(key)
        if bucket is None:
            view = admission.NodeView("", node_class.labels, node_class.no_execute, free)
            bucket = self._buckets[key] = Bucket(view, node_class.unschedulable, node_class.key)
        insort(bucket.names, name)
        self._of[name] = key

    def _unfile(self, name: str) -> None:
        bucket = self._buckets[self._of.pop(name)]
        del bucket.names[bisect_left(bucket.names, name)]
        if not bucket.names:
            del self._buckets[(bucket.class_key, tuple(bucket.view.allocatable.items()))]

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
        placement = Placement(pod, self._nodes, self._named_keys)
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
        placement = Placement(pod, self._nodes, self._named_keys)
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
