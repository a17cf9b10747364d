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

import functools
import heapq
from collections.abc import Mapping

from sample_schedulers.common.feasibility import feasible_nodes, find_feasible
from sample_schedulers.common.loop import Decision
from sample_schedulers.common.model import NodeView, PodSummary
from sample_schedulers.common.queue import natural_key
from sample_schedulers.common.resources import CPU, MEMORY

MAX_NODE_SCORE = 100
SCORED_RESOURCES = (CPU, MEMORY)


def _least_allocated(view: NodeView, pod_cpu: int, pod_memory: int) -> int:
    score = 0
    for capacity, requested in (
        (view.alloc_cpu, view.nonzero_cpu + pod_cpu),
        (view.alloc_memory, view.nonzero_memory + pod_memory),
    ):
        if capacity and requested <= capacity:
            score += (capacity - requested) * MAX_NODE_SCORE // capacity
    return score // len(SCORED_RESOURCES)


def _balanced_allocation(view: NodeView, pod_cpu: int, pod_memory: int) -> int:
    cpu_capacity, memory_capacity = view.alloc_cpu, view.alloc_memory
    if not (cpu_capacity and memory_capacity):
        return MAX_NODE_SCORE  # one fraction (or none): its standard deviation is 0
    f_cpu = (view.requested_cpu + pod_cpu) / cpu_capacity
    f_memory = (view.requested_memory + pod_memory) / memory_capacity
    # the standard deviation of the two fractions (each capped at 1): half their distance
    std = abs((f_cpu if f_cpu < 1.0 else 1.0) - (f_memory if f_memory < 1.0 else 1.0)) / 2
    return int((1 - std) * MAX_NODE_SCORE)


def least_allocated(pod: PodSummary, view: NodeView) -> int:
    nonzero = pod.nonzero_requests
    return _least_allocated(view, nonzero.cpu_millis, nonzero.memory_bytes)


def balanced_allocation(pod: PodSummary, view: NodeView) -> int:
    return _balanced_allocation(view, pod.requests.cpu_millis, pod.requests.memory_bytes)


def score(pod: PodSummary, view: NodeView) -> int:
    return least_allocated(pod, view) + balanced_allocation(pod, view)


@functools.lru_cache(maxsize=1 << 16)
def _name_order(name: str) -> tuple[tuple[tuple[int, int | str], ...], str]:
    """The tie-break key of a node name (natural order, then the text), worked out once
    per name: on an idle cluster every feasible node ties, hundreds per decision."""
    return natural_key(name), name


SCORE_CACHE_ENTRIES = 16


def _cached_score(view: NodeView, key: tuple[int, int, int, int]) -> int:
    """``view``'s total score for a pod whose (nonzero cpu, nonzero memory, cpu, memory)
    requests are ``key``. A view is immutable (a node whose pods change gets a new one),
    so its scores are kept on it for the next pods of the same shape; the cache is
    cleared past SCORE_CACHE_ENTRIES shapes."""
    cache = view.score_cache
    total = cache.get(key)
    if total is None:
        if len(cache) >= SCORE_CACHE_ENTRIES:
            cache.clear()
        nz_cpu, nz_mem, cpu, mem = key
        total = _least_allocated(view, nz_cpu, nz_mem) + _balanced_allocation(view, cpu, mem)
        cache[key] = total
    return total


def choose(
    pod: PodSummary, fits: list[NodeView], why_not: str, order: Mapping[str, int] | None = None
) -> Decision:
    """The highest-scoring feasible node; ties to the smallest name (natural order).
    ``order``, when given, ranks every node name in that order (``natural_order``)."""
    if not fits:
        return Decision(None, why_not)
    nonzero, requests = pod.nonzero_requests, pod.requests
    key = (nonzero.cpu_millis, nonzero.memory_bytes, requests.cpu_millis, requests.memory_bytes)
    scored = [(_cached_score(v, key), v.name) for v in fits]
    top = max(scored)[0]
    tied = [name for s, name in scored if s == top]
    best = min(tied, key=_name_order if order is None else order.__getitem__)
    if len(tied) > 4:  # the runners-up tie with the best too: the next names, plain order
        # (fits come in node-name order, rotated: two sorted runs, a cheap sort)
        runners_up = [(-top, name) for name in sorted(tied)[:5] if name != best][:4]
    else:
        runners_up = heapq.nsmallest(4, ((-s, name) for s, name in scored if name != best))
    shown = ", ".join([f"{best}={top}"] + [f"{name}={-neg}" for neg, name in runners_up])
    more = f", +{len(scored) - 5} more" if len(scored) > 5 else ""
    return Decision(best, detail=f"[best scores {shown}{more}]")


def natural_order(views: list[NodeView]) -> Mapping[str, int] | None:
    """Each node's rank in the tie-break's order, worked out once per ``NodeViews`` (the
    cache's list keeps its node names until a node comes or goes, and then is a new
    list); None for a plain list. On an idle cluster hundreds of feasible nodes tie."""
    memo = getattr(views, "memo", None)
    if memo is None:
        return None
    order = memo.get("natural_order")
    if order is None:
        names = sorted((view.name for view in views), key=_name_order)
        order = memo["natural_order"] = {name: rank for rank, name in enumerate(names)}
    return order


def decide(pod: PodSummary, views: list[NodeView]) -> Decision:
    """Filter every node, score the feasible ones, pick. A pure function of its arguments."""
    return choose(pod, *feasible_nodes(pod, views), natural_order(views))


MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def nodes_to_find(percentage: int, all_nodes: int) -> int:
    """kube-scheduler's numFeasibleNodesToFind: every node below 100 nodes or at 100 %;
    ``percentage`` 0 means adaptive (50 % minus 1 % per 125 nodes, at least 5 %); never
    fewer than 100."""
    if all_nodes < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return all_nodes
    if percentage <= 0:
        percentage = max(50 - all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


class SampledDecide:
    """kube-scheduler's percentageOfNodesToScore: stop filtering once enough feasible
    nodes were found, and start the next search where this one stopped (round robin over
    the name-sorted nodes). Decisions then depend on the previous ones too — still
    deterministic for the same sequence of inputs. With 100 % it equals ``decide``."""

    def __init__(self, percentage_of_nodes_to_score: int = 100) -> None:
        if not 0 <= percentage_of_nodes_to_score <= 100:
            raise ValueError("--percentage-of-nodes-to-score must be between 0 and 100")
        self.percentage = percentage_of_nodes_to_score
        self.next_start = 0

    def __call__(self, pod: PodSummary, views: list[NodeView]) -> Decision:
        if not views:
            return decide(pod, views)
        want = nodes_to_find(self.percentage, len(views))
        start = self.next_start % len(views)
        fits, why_not, examined = find_feasible(pod, views, want, start)
        self.next_start = (start + examined) % len(views)
        return choose(pod, fits, why_not, natural_order(views))
