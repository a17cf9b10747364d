"""kube-scheduler's two default resource scores, in its integer arithmetic.

- LeastAllocated (NodeResourcesFit's default strategy): for cpu and memory (weight 1
  each), ``(allocatable - requested) * 100 // allocatable``, 0 when requested exceeds
  allocatable; the node score is the weighted sum ``// weight sum``. ``requested``
  counts the node's pods and the incoming pod with kube-scheduler's non-zero defaults
  (100m cpu, 200Mi memory for a container without requests).
- BalancedAllocation: with ``f_r = min(requested_r / allocatable_r, 1)`` over cpu and
  memory (actual requests, node's pods + incoming pod), score = ``int((1 - |f_cpu -
  f_mem| / 2) * 100)`` — the standard deviation of two fractions. Resources a node does
  not publish are skipped.

The decision is the highest total, ties broken by the smallest node name
(digit runs compared as numbers: ``node-2`` before ``node-10``), so the same
inputs always give the same node (kube-scheduler breaks ties at random).
"""

from __future__ import annotations

import math

from sample_schedulers.common.feasibility import feasible_nodes
from sample_schedulers.common.loop import Decision
from sample_schedulers.common.model import NodeView, PodSummary
from sample_schedulers.common.queue import natural_key
from sample_schedulers.common.resources import CPU, MEMORY

MAX_NODE_SCORE = 100
SCORED_RESOURCES = (CPU, MEMORY)


def least_allocated(pod: PodSummary, view: NodeView) -> int:
    score = weight_sum = 0
    for resource in SCORED_RESOURCES:
        capacity = view.node.allocatable[resource]
        requested = view.nonzero_requested[resource] + pod.nonzero_requests[resource]
        weight_sum += 1
        if capacity == 0 or requested > capacity:
            continue
        score += (capacity - requested) * MAX_NODE_SCORE // capacity
    return score // weight_sum


def balanced_allocation(pod: PodSummary, view: NodeView) -> int:
    fractions = []
    for resource in SCORED_RESOURCES:
        capacity = view.node.allocatable[resource]
        if capacity == 0:
            continue
        requested = view.requested[resource] + pod.requests[resource]
        fractions.append(min(requested / capacity, 1.0))
    if len(fractions) == 2:
        std = abs(fractions[0] - fractions[1]) / 2
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    else:
        std = 0.0
    return int((1 - std) * MAX_NODE_SCORE)


def score(pod: PodSummary, view: NodeView) -> int:
    return least_allocated(pod, view) + balanced_allocation(pod, view)


def decide(pod: PodSummary, views: list[NodeView]) -> Decision:
    """Filter, score, pick. Deterministic: a pure function of its arguments."""
    fits, why_not = feasible_nodes(pod, views)
    if not fits:
        return Decision(None, why_not)
    ranked = sorted((-score(pod, v), natural_key(v.name), v.name) for v in fits)
    shown = ", ".join(f"{name}={-neg}" for neg, _, name in ranked[:5])
    more = f", +{len(ranked) - 5} more" if len(ranked) > 5 else ""
    return Decision(ranked[0][2], detail=f"[best scores {shown}{more}]")
