"""One KSE round: read metrics, plan with GreedyLB or RefineLB, evict, record imbalance.

The round is KSE's ``scheduling_workflow`` (Carvalho 2024, Listing 2), meant to run every
60 s from APScheduler's ``BackgroundScheduler``. Reconciliation evicts (policy/v1
Eviction) each movable pod the plan moves, heaviest first, and records the plan's
target under the pod's ReplicaSet in the :class:`~.binder.TargetBook` (unless there is
none: evicting only); the binder puts the replacement there. A round is skipped (at
most ``settle_rounds`` in a row) while earlier moves have not been re-bound or pods of
ours are pending: a cluster measured mid-move would make the plan move pods again. A pod is never evicted to the node it is on (KSE's loop guard).
An eviction refused (e.g. 429 by a PodDisruptionBudget) is logged and skipped.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Literal

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .balancers import greedy_lb, moves, node_loads, refine_lb
from .binder import TargetBook
from .imbalance import ImbalanceLog, mae
from .snapshot import Metric, take_snapshot

log = logging.getLogger("kse")

Algorithm = Literal["greedy", "refine"]


@dataclass(frozen=True)
class RoundResult:
    round_no: int
    loads: dict[str, float]
    planned: dict[str, float]
    planned_moves: int
    evicted: list[tuple[str, str, str]]
    """(pod key, from node, to node) for each eviction accepted."""
    skipped: bool = False
    """The round did nothing: earlier moves were still settling."""


def _eviction_body(name: str, namespace: str):
    model = getattr(client, "V1Eviction", None) or client.V1beta1Eviction  # clients < 22
    return model(metadata=client.V1ObjectMeta(name=name, namespace=namespace))


class Rebalancer:
    def __init__(
        self,
        core,
        custom,
        scheduler_name: str,
        targets: TargetBook | None,
        *,
        algorithm: Algorithm = "refine",
        metric: Metric = "cpu",
        overload: float = 1.0,
        evict: bool = True,
        imbalance_log: ImbalanceLog | None = None,
    ) -> None:
        if overload < 1.0:
            raise ValueError(f"overload factor must be >= 1.0, got {overload}")
        self.core = core
        self.custom = custom
        self.scheduler_name = scheduler_name
        self.targets = targets
        self.algorithm = algorithm
        self.metric = metric
        self.overload = overload
        self.evict = evict
        self.imbalance_log = imbalance_log
        self.rounds = 0
        self.settle_rounds = 2
        """Rounds skipped at most in a row while moved pods are not re-bound yet (or pods
        of ours are pending): measuring a cluster in mid-move would plan more moves."""
        self._skipped = 0
        self._lock = threading.Lock()

    def round(self) -> RoundResult:
        """One rebalancing round (safe to call from the scheduler's thread)."""
        with self._lock:
            self.rounds += 1
            nodes = self.core.list_node().items
            pods = self.core.list_pod_for_all_namespaces().items
            in_flight = len(self.targets) if self.targets is not None else 0
            pending = sum(
                1
                for p in pods
                if p.spec.scheduler_name == self.scheduler_name
                and not p.spec.node_name
                and (p.status is None or p.status.phase in (None, "Pending"))
            )
            if (in_flight or pending) and self._skipped < self.settle_rounds:
                self._skipped += 1
                log.info(
                    "round %d skipped: %d moves not re-bound yet, %d pods pending",
                    self.rounds,
                    in_flight,
                    pending,
                )
                return RoundResult(self.rounds, {}, {}, 0, [], skipped=True)
            self._skipped = 0
            stale = self.targets.clear() if self.targets is not None else 0
            if stale:
                log.warning("round %d: %d planned moves were never replaced", self.rounds, stale)
            node_metrics = self.custom.list_cluster_custom_object(
                "metrics.k8s.io", "v1beta1", "nodes"
            )
            pod_metrics = self.custom.list_cluster_custom_object(
                "metrics.k8s.io", "v1beta1", "pods"
            )
            snap = take_snapshot(
                nodes, pods, node_metrics, pod_metrics, self.scheduler_name, self.metric
            )
            if self.algorithm == "greedy":
                plan = greedy_lb(snap.pods, snap.residual)
            else:
                plan = refine_lb(snap.pods, snap.residual, self.overload)
            loads = node_loads(snap.pods, snap.residual)
            planned = node_loads(snap.pods, snap.residual, plan)
            todo = moves(plan, snap.pods)
            evicted = []
            for pod, target in todo if self.evict else []:
                record = snap.records[pod.key]
                # Record the target first: the replacement may be seen before evict returns.
                if self.targets is not None:
                    self.targets.add(record.owner_uid, target)
                if self._evict(record.name, record.namespace):
                    evicted.append((pod.key, pod.node, target))
                    log.info("evicted %s from %s for %s", pod.key, pod.node, target)
                elif self.targets is not None:
                    self.targets.discard(record.owner_uid, target)
            log.info(
                "round %d (%s, %s): MAE %.3f -> planned %.3f, %d moves, %d evicted",
                self.rounds,
                self.algorithm,
                self.metric,
                mae(loads),
                mae(planned),
                len(todo),
                len(evicted),
            )
            if self.imbalance_log is not None:
                self.imbalance_log.write(
                    self.rounds,
                    self.algorithm,
                    self.metric,
                    loads,
                    planned,
                    len(todo),
                    len(evicted),
                )
            return RoundResult(self.rounds, loads, planned, len(todo), evicted)

    def _evict(self, name: str, namespace: str) -> bool:
        try:
            self.core.create_namespaced_pod_eviction(
                name=name,
                namespace=namespace,
                body=_eviction_body(name, namespace),
                _preload_content=False,
            )
        except ApiException as exc:
            log.warning("eviction of %s/%s refused: %s %s", namespace, name, exc.status, exc.reason)
            return False
        return True
