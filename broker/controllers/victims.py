"""Which pods a ReplicaSet deletes when it has too many: ``getPodsToDelete`` of
``pkg/controller/replicaset/replica_set.go`` with ``controller.ActivePodsWithRanks``'s
order (v1.30: PodDeletionCost and LogarithmicScaleDown on, as they are by default).

The pods that sort first go first:

1. unassigned < assigned (no ``spec.nodeName``);
2. Pending < Unknown < Running;
3. not Ready < Ready;
4. lower ``controller.kubernetes.io/pod-deletion-cost`` < higher;
5. doubled up < not: more active pods of the same owner on the pod's node first (the
   *rank*; "related" pods are those of every ReplicaSet of the same Deployment);
6. both Ready: Ready for less time first, comparing ``floor(log2(now − readySince))``
   (nanoseconds), ties in the same bucket broken by uid;
7. more container restarts first;
8. newer first, by creation time in the same logarithmic buckets, uid on ties.

Go sorts with ``sort.Sort`` (not stable, and the logarithmic steps are not a strict weak
order), so pods the comparator cannot tell apart come out in an order the real controller
does not define either; here it is their name order (a stable sort over pods sorted by
name), which keeps runs reproducible.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from broker.k8s import podutil

Obj = dict[str, Any]
_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}


def _log_rank_diff(t1: int, t2: int, now: int) -> int:
    """``logarithmicRankDiff``: floor(log2(now − t)) of each, −1 for a time not in the past."""
    d1, d2 = now - t1, now - t2
    r1 = int(math.log2(d1)) if d1 > 0 else -1
    r2 = int(math.log2(d2)) if d2 > 0 else -1
    return r1 - r2


def _after_or_zero(t1: int | None, t2: int | None) -> bool:
    if t1 is None or t2 is None:
        return t1 is None
    return t1 > t2


class _Key:
    __slots__ = (
        "pod",
        "node",
        "phase",
        "ready",
        "cost",
        "rank",
        "ready_ns",
        "restarts",
        "created",
        "uid",
    )

    def __init__(self, pod: Obj, rank: int) -> None:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        self.pod = pod
        self.node = spec.get("nodeName") or ""
        self.phase = _PHASE_ORDINAL.get((pod.get("status") or {}).get("phase"), 0)
        self.ready = podutil.is_ready(pod)
        self.cost = podutil.deletion_cost(pod)
        self.rank = rank
        self.ready_ns = podutil.ready_since_ns(pod)
        self.restarts = podutil.max_restarts(pod)
        stamp = meta.get("creationTimestamp")
        self.created = podutil.parse_time(stamp) if stamp else None
        self.uid = meta.get("uid", "")


def _less(a: _Key, b: _Key, now: int) -> bool:
    if a.node != b.node and (not a.node or not b.node):
        return not a.node
    if a.phase != b.phase:
        return a.phase < b.phase
    if a.ready != b.ready:
        return not a.ready
    if a.cost != b.cost:
        return a.cost < b.cost
    if a.rank != b.rank:
        return a.rank > b.rank
    if a.ready and b.ready and a.ready_ns != b.ready_ns:
        return _younger(a.ready_ns, b.ready_ns, a, b, now)
    if a.restarts != b.restarts:
        return a.restarts > b.restarts
    if a.created != b.created:
        return _younger(a.created, b.created, a, b, now)
    return False


def _younger(t1: int | None, t2: int | None, a: _Key, b: _Key, now: int) -> bool:
    """Newer first, in powers-of-two buckets of the age (uid order within one bucket);
    a missing time first."""
    if t1 is None or t2 is None:
        return _after_or_zero(t1, t2)
    diff = _log_rank_diff(t1, t2, now)
    return a.uid < b.uid if diff == 0 else diff < 0


def deletion_order(pods: Sequence[Obj], related: Sequence[Obj], now_epoch_ns: int) -> list[Obj]:
    """``pods`` (active) in the order the ReplicaSet controller deletes them."""
    on_node = Counter(
        (p.get("spec") or {}).get("nodeName") or "" for p in related if podutil.is_active(p)
    )
    keys = [
        _Key(p, on_node[(p.get("spec") or {}).get("nodeName") or ""])
        for p in sorted(pods, key=lambda p: p["metadata"]["name"])
    ]

    def compare(a: _Key, b: _Key) -> int:
        if _less(a, b, now_epoch_ns):
            return -1
        if _less(b, a, now_epoch_ns):
            return 1
        return 0

    keys.sort(key=functools.cmp_to_key(compare))
    return [k.pod for k in keys]


def pods_to_delete(
    pods: Sequence[Obj], related: Sequence[Obj], diff: int, now_epoch_ns: int
) -> list[Obj]:
    """``getPodsToDelete``: the first ``diff`` pods of :func:`deletion_order` (all of them,
    unsorted, when every pod goes)."""
    if diff >= len(pods):
        return list(pods)
    return deletion_order(pods, related, now_epoch_ns)[:diff]
