"""GreedyLB and RefineLB (Zheng et al., 2011), as KSE uses them (Carvalho, 2024, §4.4).

Both take the movable pods with their measured loads and the nodes with their residual
load (what runs there but cannot move: kube-system pods, other schedulers' pods, the
node's own overhead) and return an allocation plan ``{pod key: node}`` covering every
movable pod; pods whose node does not change need no action.

- GreedyLB (Algorithm 1) ignores where pods are now: heaviest pod first onto the node
  with the least load so far, until all pods are placed. It balances well and moves many.
- RefineLB (Algorithm 2) starts from the current placement. With ``avg`` the mean node
  load and ``overload >= 1`` the user's factor, a node is heavy above ``avg * overload``
  and light below ``avg``. Repeatedly, from the heaviest heavy node, it moves the pod
  that brings some light node closest to ``avg * overload`` without exceeding it (the
  heaviest such pod), then re-classifies both nodes; a heavy node with no such pod is
  left as it is. It stops when no node is heavy or no light node remains.

Ties break by name, so the same input always gives the same plan. Loads are absolute
(millicores or bytes), as in the paper, whose nodes were identical.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PodLoad:
    """A movable pod: ``key`` is "namespace/name", ``node`` where it runs now."""

    key: str
    node: str
    load: float


Plan = dict[str, str]
_MAX_KEY = "\U0010ffff"  # sorts after every pod key


def node_loads(
    pods: Sequence[PodLoad], residual: Mapping[str, float], plan: Mapping[str, str] | None = None
) -> dict[str, float]:
    """Load per node (residual + pods), with pods placed as in ``plan`` when given."""
    loads = {name: float(r) for name, r in residual.items()}
    for pod in pods:
        node = plan.get(pod.key, pod.node) if plan else pod.node
        loads[node] = loads.get(node, 0.0) + pod.load
    return loads


def greedy_lb(pods: Sequence[PodLoad], residual: Mapping[str, float]) -> Plan:
    """Algorithm 1: heaviest pod to the least loaded node, ignoring the current placement."""
    if not residual:
        return {}
    nodes = [(load, name) for name, load in residual.items()]
    heapq.heapify(nodes)
    plan: Plan = {}
    for pod in sorted(pods, key=lambda p: (-p.load, p.key)):
        load, name = heapq.heappop(nodes)
        plan[pod.key] = name
        heapq.heappush(nodes, (load + pod.load, name))
    return plan


def refine_lb(
    pods: Sequence[PodLoad], residual: Mapping[str, float], overload: float = 1.0
) -> Plan:
    """Algorithm 2: move pods off heavy nodes onto light ones, up to ``avg * overload``."""
    if overload < 1.0:
        raise ValueError(f"overload factor must be >= 1.0, got {overload}")
    plan: Plan = {p.key: p.node for p in pods}
    loads = node_loads(pods, residual)
    if not loads:
        return plan
    avg = sum(loads.values()) / len(loads)
    cap = avg * overload
    # Pods per node sorted by (load, key): the best pod for a light node is found by bisection.
    on_node: dict[str, list[tuple[float, str, PodLoad]]] = {}
    for pod in pods:
        on_node.setdefault(pod.node, []).append((pod.load, pod.key, pod))
    for entries in on_node.values():
        entries.sort(key=lambda e: (e[0], e[1]))
    heavy = {n for n, load in loads.items() if load > cap}
    light = {n for n, load in loads.items() if load < avg}
    while heavy and light:
        donor = max(heavy, key=lambda n: (loads[n], n))
        entries = on_node.get(donor, [])
        best = None
        for target in light:
            # the heaviest pod (largest key among equals) with loads[target] + load <= cap
            i = bisect.bisect_right(entries, (cap - loads[target], _MAX_KEY)) - 1
            while i >= 0 and loads[target] + entries[i][0] > cap:
                i -= 1  # float rounding between the two comparisons
            while i + 1 < len(entries) and loads[target] + entries[i + 1][0] <= cap:
                i += 1
            if i < 0:
                continue
            load, key, pod = entries[i]
            rank = (loads[target] + load, load, key, target)
            if best is None or rank > best[0]:
                best = (rank, i, pod, target)
        if best is None:
            heavy.discard(donor)  # nothing on it fits anywhere: leave it
            continue
        _, i, pod, target = best
        del entries[i]
        bisect.insort(
            on_node.setdefault(target, []), (pod.load, pod.key, pod), key=lambda e: (e[0], e[1])
        )
        plan[pod.key] = target
        loads[donor] -= pod.load
        loads[target] += pod.load
        for node in (donor, target):
            (heavy.add if loads[node] > cap else heavy.discard)(node)
            (light.add if loads[node] < avg else light.discard)(node)
    return plan


def moves(plan: Mapping[str, str], pods: Sequence[PodLoad]) -> list[tuple[PodLoad, str]]:
    """The pods the plan moves, with their targets, heaviest first (then by key)."""
    changed = [(p, plan[p.key]) for p in pods if p.key in plan and plan[p.key] != p.node]
    return sorted(changed, key=lambda m: (-m[0].load, m[0].key))
