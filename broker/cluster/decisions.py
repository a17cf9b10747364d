"""Every decision taken in the simulated cluster, with the cluster as it stood at that
instant: ``out_decisions.csv``.

A decision is a write that changes where work runs or how much there is: a binding, a
pod deleted or evicted (``detail``: why, when the pod says it — ``DeletionByPodGC``), a
workload's replicas changed (a Deployment, a ReplicaSet, their ``scale``, a custom
resource's ``scale``), a node cordoned, uncordoned or tainted — and the kubelet's refusal of a pod.
For each, the row gives the simulated time, who acted (the scheduler process whose
request it was, ``kube-controller-manager`` for the broker's controllers, ``kubelet``),
the object and its target, and for a binding the cluster as the API showed it: how many
nodes would have admitted the pod (resources, node affinity, NoExecute taints, as the
kubelet checks them), the chosen node's free cpu, memory and GPUs before and after, its
rank among those nodes by free cpu (1 = the emptiest; ties by free memory, then name),
and how long the pod had waited.

It is a store listener (``Store.add_listener``): it sees the commits in the store's
order, which is deterministic, so the file is too. It keeps its own account of what the
bound, unfinished pods of each node request — what a scheduler's cache holds — so that
it needs nothing from the cluster model.
"""

from __future__ import annotations

import csv
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from broker.cluster import kubelet_admission as admission
from broker.cluster.node_buckets import NodeBuckets
from broker.facade import acting
from broker.k8s import podutil
from broker.k8s import resource_names as rn
from broker.k8s.podutil import parse_time
from broker.k8s.quantity import QuantityError, parse

DECISIONS_CSV = "out_decisions.csv"
COLUMNS = (
    "time", "actor", "action", "kind", "namespace", "name", "target", "job_id",
    "feasible_nodes", "node_rank", "node_free_cpu_before", "node_free_cpu_after",
    "node_free_memory_before", "node_free_memory_after", "node_free_gpu_before",
    "node_free_gpu_after", "waited_s", "detail",
)  # fmt: skip
GPU = "nvidia.com/gpu"
CONTROLLERS = "kube-controller-manager"
_ENDED = ("Succeeded", "Failed")
SPILL_ROWS = 256  # rows kept in memory at most (~0.5 KiB each)
_WORKLOADS = {"deployments.apps": "Deployment", "replicasets.apps": "ReplicaSet"}


@dataclass
class _Node:
    labels: dict[str, str]
    taints: list[Any]
    allocatable: dict[str, int]
    unschedulable: bool = False
    used: dict[str, int] = field(default_factory=dict)

    def free(self, resource: str) -> int:
        return self.allocatable.get(resource, 0) - self.used.get(resource, 0)


def _allocatable(node: dict[str, Any]) -> dict[str, int]:
    out = {}
    for name, value in ((node.get("status") or {}).get("allocatable") or {}).items():
        try:
            out[name] = rn.amount(name, parse(value))
        except (QuantityError, TypeError, ValueError):
            continue
    return out


def no_node_message(fits: int, total: int, reasons: dict[str, int]) -> str:
    """A pending pod's detail: how many of ``total`` nodes would take it, else the refusals
    counted by reason (as kube-scheduler's "0/16 nodes are available: 16 Insufficient cpu")."""
    if fits:
        return f"{fits}/{total} nodes would take it: no scheduler bound it"
    listed = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items(), key=lambda x: (-x[1], x[0])))
    return f"0/{total} nodes are available: {listed}" if total else "no node"


def _spec_replicas(obj: dict[str, Any]) -> Any:
    return (obj.get("spec") or {}).get("replicas")


def _fmt(value: float) -> str:
    return f"{value:.6f}".rstrip("0").rstrip(".")


class DecisionLog:
    """See the module docstring. ``now_s()``: the simulated seconds since the start;
    ``epoch_ns``: the simulated epoch (for the pods' creation times)."""

    def __init__(
        self, now_s: Callable[[], float], epoch_ns: int, job_id_of: Callable, types: Any = None
    ) -> None:
        self.now_s = now_s
        # the store's types (``Registry``): a custom resource with a ``scale`` subresource
        # is a workload too (its scale's spec.replicas), as the HPA sees it
        self.types = types
        self.epoch_ns = epoch_ns
        self.job_id_of = job_id_of  # pod -> its Batsim job id ("" if none)
        # the latest rows; earlier ones wait in a temporary file (SPILL_ROWS at a time),
        # so that a long run's log costs no memory per pod
        self.rows: list[tuple[str, ...]] = []
        self._spill: IO[str] | None = None
        self._nodes: dict[str, _Node] = {}
        self._buckets = NodeBuckets()  # the nodes by what admission sees of them
        self._placed: dict[tuple[str, str], tuple[str, dict[str, int]]] = {}  # pod -> node
        self._replicas: dict[tuple[str, str, str], int] = {}
        self._deleted: set[tuple[str, str]] = set()  # pods whose deletion was recorded
        self._unbound: dict[tuple[str, str], dict[str, Any]] = {}  # pods not yet bound
        self._lock = threading.Lock()

    # --- the store listener ---------------------------------------------------------

    def on_commit(self, key: str, event: str, obj: dict[str, Any]) -> None:
        with self._lock:
            if key == "pods":
                self._pod(event, obj)
            elif key == "nodes":
                self._node(event, obj)
            elif key in _WORKLOADS:
                self._workload(key, event, obj, _WORKLOADS[key], _spec_replicas(obj))
            elif self.types is not None and key != "events":
                self._custom_workload(key, event, obj)

    def _actor(self) -> str:
        return acting.current() or CONTROLLERS

    def _row(self, action: str, kind: str, obj: dict[str, Any], target: str, **extra: Any) -> None:
        meta = obj.get("metadata") or {}
        values = {
            "time": _fmt(self.now_s()),
            "actor": extra.pop("actor", None) or self._actor(),
            "action": action,
            "kind": kind,
            "namespace": meta.get("namespace") or "",
            "name": meta.get("name") or "",
            "target": target,
            **{k: str(v) for k, v in extra.items()},
        }
        self.rows.append(tuple(values.get(column, "") for column in COLUMNS))
        if len(self.rows) >= SPILL_ROWS:
            if self._spill is None:
                self._spill = tempfile.TemporaryFile("w+", newline="", encoding="utf-8")
            csv.writer(self._spill, lineterminator="\n").writerows(self.rows)
            self.rows = []

    def _node(self, event: str, obj: dict[str, Any]) -> None:
        name = (obj.get("metadata") or {}).get("name") or ""
        if event == "DELETED":
            self._nodes.pop(name, None)
            self._buckets.remove(name)
            self._row("delete-node", "Node", obj, name)
            return
        spec = obj.get("spec") or {}
        labels = (obj.get("metadata") or {}).get("labels") or {}
        taints = spec.get("taints") if isinstance(spec.get("taints"), list) else []
        unschedulable = bool(spec.get("unschedulable"))
        old = self._nodes.get(name)
        node = _Node(dict(labels) if isinstance(labels, dict) else {}, taints, _allocatable(obj))
        node.unschedulable = unschedulable
        if old is not None:
            node.used = old.used
            if old.unschedulable != unschedulable:
                self._row("cordon" if unschedulable else "uncordon", "Node", obj, name)
            if old.taints != taints:
                keys = ",".join(
                    f"{t.get('key')}:{t.get('effect')}" for t in taints if isinstance(t, dict)
                )
                self._row("taint", "Node", obj, name, detail=keys or "(none)")
        self._nodes[name] = node
        self._buckets.set_node(
            name, node.labels, node.taints, unschedulable, node.allocatable, node.used
        )

    def _pod(self, event: str, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        node_name = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        placed = self._placed.get(key)
        deleting = event == "DELETED" or bool(meta.get("deletionTimestamp"))
        disruption = podutil.disruption(pod)  # a pod failed to be deleted (PodGC) says why
        if deleting and (phase not in _ENDED or disruption) and key not in self._deleted:
            # the request's moment (a graceful deletion ends later, in the kubelet model)
            self._deleted.add(key)
            self._row(
                "delete", "Pod", pod, node_name or "", job_id=self.job_id_of(pod),
                detail=disruption,
            )  # fmt: skip
        if event == "DELETED":
            self._deleted.discard(key)
        if event == "DELETED" or phase in _ENDED:
            self._unbound.pop(key, None)
            if placed is not None:
                self._release(key)
            if (
                phase == "Failed"
                and placed is not None
                and (pod.get("status") or {}).get("reason")
                and not disruption
            ):
                status = pod["status"]
                self._row(
                    "refused", "Pod", pod, node_name or "", actor="kubelet",
                    job_id=self.job_id_of(pod), detail=status.get("reason", ""),
                )  # fmt: skip
            return
        if node_name and placed is None:
            self._unbound.pop(key, None)
            self._bind(key, pod, node_name)
        elif not node_name:
            self._unbound[key] = pod

    def _bind(self, key: tuple[str, str], pod: dict[str, Any], node_name: str) -> None:
        requests = admission.pod_requests(pod)
        node = self._nodes.get(node_name)
        feasible, rank = self._buckets.feasible(pod, requests, node_name)
        extra: dict[str, Any] = {"feasible_nodes": feasible, "job_id": self.job_id_of(pod)}
        if node is not None:
            extra["node_rank"] = rank if rank is not None else ""
            for resource, column in ((rn.CPU, "cpu"), (rn.MEMORY, "memory"), (GPU, "gpu")):
                if resource == GPU and GPU not in node.allocatable:
                    continue
                extra[f"node_free_{column}_before"] = node.free(resource)
                extra[f"node_free_{column}_after"] = node.free(resource) - requests.get(resource, 0)
            for resource, amount in requests.items():
                node.used[resource] = node.used.get(resource, 0) + amount
            self._buckets.set_use(node_name, node.allocatable, node.used)
        created = (pod.get("metadata") or {}).get("creationTimestamp")
        try:
            extra["waited_s"] = _fmt(
                max(0.0, self.now_s() - (parse_time(created) - self.epoch_ns) / 1e9)
            )
        except (TypeError, ValueError):
            pass
        self._placed[key] = (node_name, requests)
        self._row("bind", "Pod", pod, node_name, **extra)

    def _release(self, key: tuple[str, str]) -> None:
        node_name, requests = self._placed.pop(key)
        node = self._nodes.get(node_name)
        if node is None:
            return
        for resource, amount in requests.items():
            node.used[resource] = node.used.get(resource, 0) - amount
        self._buckets.set_use(node_name, node.allocatable, node.used)

    def _custom_workload(self, key: str, event: str, obj: dict[str, Any]) -> None:
        """A custom resource with a ``scale`` subresource: its scale's ``spec.replicas``."""
        rt = self.types.by_key_or_none(key)
        if rt is None or "scale" not in rt.subresources:
            return
        scale = rt.strategy.scale_of(rt, obj)
        if scale is None:
            return
        replicas = (scale.get("spec") or {}).get("replicas", 0)
        self._workload(key, event, obj, str(obj.get("kind") or rt.kind), replicas)

    def _workload(
        self, key: str, event: str, obj: dict[str, Any], kind: str, replicas: Any
    ) -> None:
        meta = obj.get("metadata") or {}
        ident = (key, meta.get("namespace") or "", meta.get("name") or "")
        if event == "DELETED":
            self._replicas.pop(ident, None)
            return
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            replicas = 1
        before = self._replicas.get(ident)
        self._replicas[ident] = replicas
        if before is not None and before != replicas:
            self._row("scale", kind, obj, str(replicas), detail=f"from {before}")

    def finish(self) -> None:
        """At the end of the run: a ``pending`` row for each pod never bound, saying why
        no node would take it as things stand (or that one would)."""
        with self._lock:
            for key in sorted(self._unbound):
                pod = self._unbound[key]
                self._row(
                    "pending", "Pod", pod, "", actor="-", job_id=self.job_id_of(pod),
                    feasible_nodes=self._feasible(pod), detail=self.why_no_node(pod),
                )  # fmt: skip

    def _feasible(self, pod: dict[str, Any]) -> int:
        """How many nodes would admit ``pod`` now."""
        return self._buckets.feasible(pod, admission.pod_requests(pod))[0]

    def why_no_node(self, pod: dict[str, Any]) -> str:
        """Why no node would admit ``pod`` now, counted by reason over the nodes (as
        kube-scheduler's "0/16 nodes are available: 16 Insufficient cpu")."""
        fits, reasons = self._buckets.why_not(pod, admission.pod_requests(pod))
        return no_node_message(fits, len(self._nodes), reasons)

    # --- output --------------------------------------------------------------------

    def write(self, path: Path) -> None:
        with self._lock:
            rows = list(self.rows)
            with open(path, "w", newline="", encoding="utf-8") as handle:
                writer = csv.writer(handle, lineterminator="\n")
                writer.writerow(COLUMNS)
                if self._spill is not None:
                    self._spill.seek(0)
                    shutil.copyfileobj(self._spill, handle)
                    self._spill.seek(0, 2)  # later rows go on at the end
                writer.writerows(rows)
