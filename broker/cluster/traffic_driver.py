"""Services with traffic in the broker: the workload's services meet the simulated cluster.

For each service (``simulator.traffic.spec``) the driver

- creates its Deployment (and its HorizontalPodAutoscaler, when the workload declares
  one) in the store at SIMULATION_BEGINS, before any scheduler looks;
- follows the pods its Deployment's selector names (a store listener marks the service
  when one changes) and tells its traffic model
  (:class:`~simulator.traffic.model.TrafficModel`) which run and which are Ready: a pod
  serves while its phase is ``Running`` and it has no ``deletionTimestamp``; it gets new
  requests while its ``Ready`` condition is True; its processor-sharing capacity is its
  CPU limit (else its request, else one core), and its utilisation is measured against
  its request (else its limit);
- advances the model with simulated time (``refresh``, called from the cluster's metrics
  refresh, so whenever time moved or pods changed), and hands back, per pod, the sample
  of the newest metrics tick a scraper could have seen: the cluster publishes it in
  ``metrics.k8s.io`` (cpu from the traffic, memory = the pod's request) and in
  ``custom.metrics.k8s.io`` (the metrics of ``simulator.traffic.metrics``'s
  ``CUSTOM_POD_METRICS``, e.g. ``concurrency``), stamped with the tick's time and window;
- keeps the simulation going until the last service's traffic ends (a timer at that
  instant, and ``keeps_simulation_alive``), and collects the per-tick rows of
  ``out_services.csv``.

Runs in the broker's driver thread (the listener only records names), in a fixed order
(services by name), so runs are reproducible.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from broker.facade.selectors import parse_label_selector
from broker.k8s.quantity import parse_quantity
from simulator.traffic.model import TickRow, TrafficModel
from simulator.traffic.serving import ReplicaState
from simulator.traffic.spec import ServiceSpec


@dataclass
class PodUsage:
    """What the cluster publishes for one service pod."""

    cpu_nanocores: int
    timestamp_ns: int
    window_s: float
    container: str
    custom: dict[str, float]


@dataclass
class _Service:
    spec: ServiceSpec
    model: TrafficModel
    selector_text: str
    published_tick: float | None = None
    dirty: bool = True
    desired: int | None = None
    containers: dict[str, str] = field(default_factory=dict)  # pod -> first container name


def _cores(value: Any) -> float:
    return float(parse_quantity(str(value)))


def replica_state(pod: dict[str, Any]) -> ReplicaState | None:
    """How the traffic model sees a pod, or None if it does not serve (not Running, or
    being deleted)."""
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return None
    limit = request = Decimal(0)
    missing_limit = missing_request = False
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        lim = (res.get("limits") or {}).get("cpu")
        req = (res.get("requests") or {}).get("cpu")
        if lim is None:
            missing_limit = True
        else:
            limit += parse_quantity(str(lim))
        if req is None:
            missing_request = True
        else:
            request += parse_quantity(str(req))
    cap = float(request) if missing_limit else float(limit)
    base = float(limit) if missing_request else float(request)
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    return ReplicaState(cap if cap > 0 else 1.0, base if base > 0 else cap or 1.0, ready)


class TrafficDriver:
    def __init__(self, specs: Sequence[ServiceSpec], store: Any, clock: Any) -> None:
        self.store = store
        self.clock = clock  # now_ns(), call_at(deadline_ns, fn)
        self.services = [
            _Service(
                spec,
                TrafficModel(spec.traffic),
                ",".join(f"{k}={v}" for k, v in sorted(spec.selector.items())),
            )
            for spec in sorted(specs, key=lambda s: s.name)
        ]
        self._selectors = [
            (s.spec.namespace, parse_label_selector(s.selector_text), s) for s in self.services
        ]
        self._by_deployment = {
            (s.spec.namespace, s.spec.deployment["metadata"]["name"]): s for s in self.services
        }
        self._lock = threading.Lock()
        self.rows: list[TickRow] = []
        self.end_ns = max((round(s.spec.duration * 1e9) for s in self.services), default=0)
        self._started = False
        self.cpu_s = 0.0  # the driver thread's CPU spent in the traffic model (benchmarks)

    def __bool__(self) -> bool:
        return bool(self.services)

    # ------------------------------------------------------------------ start
    def begin(self) -> None:
        """At SIMULATION_BEGINS: create the Deployments (and HPAs), follow their pods,
        and make sure time reaches the end of the traffic."""
        if self._started or not self.services:
            return
        self._started = True
        self.store.add_listener(self._on_change, ("pods", "deployments.apps"))
        for service in self.services:
            spec = service.spec
            self.store.create("deployments.apps", spec.deployment, namespace=spec.namespace)
            service.dirty = True
            if spec.hpa is not None:
                self.store.create(
                    "horizontalpodautoscalers.autoscaling", spec.hpa, namespace=spec.namespace
                )
        self.clock.call_at(self.end_ns, lambda: None)  # wake the broker when traffic ends

    def _on_change(self, key: str, _event: str, obj: dict[str, Any]) -> None:
        """Store listener (store lock held): mark the services a change concerns."""
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace", "")
        if key == "pods":
            labels = meta.get("labels") or {}
            for ns, selector, service in self._selectors:
                if ns == namespace and selector.matches(labels):
                    with self._lock:
                        service.dirty = True
        elif key == "deployments.apps":
            service = self._by_deployment.get((namespace, meta.get("name")))
            if service is not None:
                with self._lock:
                    service.dirty = True

    # ------------------------------------------------------------------ time
    def has_dirty(self) -> bool:
        """Some service's pods changed since the last refresh (quick)."""
        with self._lock:
            return any(s.dirty for s in self.services)

    def keeps_simulation_alive(self, now_ns: int) -> bool:
        return bool(self.services) and now_ns < self.end_ns

    def serves(self, namespace: str, labels: dict[str, str]) -> bool:
        """Whether a pod with these labels is one of a service's (its usage comes from
        the traffic, not from its requests)."""
        return any(ns == namespace and sel.matches(labels) for ns, sel, _s in self._selectors)

    def refresh(self, now_ns: int) -> dict[tuple[str, str], PodUsage]:
        """Bring every service to ``now``; returns the pods whose published sample
        changed (a newer tick became visible)."""
        now = now_ns / 1e9
        started = time.thread_time()
        updates: dict[tuple[str, str], PodUsage] = {}
        for service in self.services:
            model = service.model
            with self._lock:
                dirty, service.dirty = service.dirty, False
            if dirty:
                self._observe(service, now)
            else:
                model.advance_to(now)
            self.rows.extend(model.take_rows())
            visible = model.published(now)
            if visible is None or visible[0] == service.published_tick:
                continue
            tick, samples = visible
            service.published_tick = tick
            stamp = round(tick * 1e9)
            for pod, sample in samples.items():
                updates[(service.spec.namespace, pod)] = PodUsage(
                    int(sample.cpu_cores * 1e9),
                    stamp,
                    sample.window,
                    service.containers.get(pod, "main"),
                    dict(sample.custom),
                )
        self.cpu_s += time.thread_time() - started
        return updates

    def _observe(self, service: _Service, now: float) -> None:
        spec = service.spec
        pods, _rv = self.store.list("pods", spec.namespace, label_selector=service.selector_text)
        states: dict[str, ReplicaState] = {}
        for pod in pods:
            state = replica_state(pod)
            if state is not None:
                name = pod["metadata"]["name"]
                states[name] = state
                containers = (pod.get("spec") or {}).get("containers") or [{}]
                service.containers[name] = str(containers[0].get("name", "main"))
        dep = self.store.get_or_none(
            "deployments.apps", spec.namespace, spec.deployment["metadata"]["name"]
        )
        desired = int(((dep or {}).get("spec") or {}).get("replicas", 0))
        if desired != service.desired:
            service.desired = desired
            service.model.set_desired(now, desired)
        service.model.set_replicas(now, states)

    def finish(self) -> None:
        """At the end of the run: settle what is left (rows of the last ticks)."""
        for service in self.services:
            self.rows.extend(service.model.take_rows())

    def summary(self) -> dict[str, dict[str, float]]:
        out = {}
        for service in self.services:
            t = service.model.totals
            out[service.spec.name] = {
                "requests": t.arrivals,
                "completed": t.completed,
                "failed": t.timed_out + t.dropped + t.lost,
                "model": service.spec.traffic.model,
            }
        return out
