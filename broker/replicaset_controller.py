"""The apps/v1 ReplicaSet controller, in virtual time: ``spec.replicas`` pods from the
template, for every ReplicaSet created through the API (and those the Deployment
controller makes), as kube-controller-manager's ``pkg/controller/replicaset`` does.

For one ReplicaSet:

- its pods are the *active* pods (not Succeeded, not Failed, not being deleted) of its
  namespace it controls; an active orphan its selector selects is adopted (an
  ``ownerReferences`` entry with ``controller: true``), an owned pod the selector no
  longer selects is released (``claimPods``);
- too few: it creates the missing ones (at most 500 per round, ``burstReplicas``) from the
  template, ``generateName: <replicaset>-``, the template's labels and annotations, a
  controlling owner reference; too many: it deletes the surplus in
  :mod:`broker.victims`' order (unassigned, pending, not ready, cheaper, doubled-up,
  recently ready, restarted, newest first) — a graceful deletion, as a DELETE would be;
- ``status`` as ``calculateStatus`` writes it, from the pods seen *before* this round's
  creations and deletions (the next round, which they trigger, counts them): ``replicas``,
  ``fullyLabeledReplicas`` (pods with every template label), ``readyReplicas`` (Ready
  condition True), ``availableReplicas`` (Ready for more than ``minReadySeconds``; a
  virtual-time timer wakes the controller when the next pod becomes available),
  ``observedGeneration``; zeros omitted, as the server's ``omitempty`` does; a
  ``ReplicaFailure`` condition (reason ``FailedCreate``) while creating pods fails (e.g.
  an unknown priority class), retried after the work queue's back-off (5 ms doubling, at
  most 1000 s);
- Events ``SuccessfulCreate``/``SuccessfulDelete`` (``Created pod: X``), Warning
  ``FailedCreate``, source ``replicaset-controller``;
- deleting a ReplicaSet deletes its pods (apps/v1's default background propagation;
  ``propagationPolicy: Orphan`` is not honoured).

The ReplicaSets a Batsim workload declares (``"replicaset": NAME`` on jobs; selector
``timewarp.io/replicaset=NAME``) are the workload's, not this controller's: their pods are
the workload's jobs, replaced only when removed before they ended (``broker.cluster``).

Threading: the store listener only records what changed; :meth:`reconcile` runs in the
broker's driver thread, ReplicaSets in sorted order.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from broker import k8s_events, pod_lifecycle, podutil, victims
from broker.facade.errors import ApiError
from broker.facade.objects import format_time
from broker.facade.selectors import LabelSelector, selector_from_dict
from broker.facade.store import Store
from broker.wake_timers import WakeTimers

COMPONENT = "replicaset-controller"
RS_KEY = "replicasets.apps"
WORKLOAD_LABEL = "timewarp.io/replicaset"  # the selector key of workload-declared ones
BURST_REPLICAS = 500
BACKOFF_BASE_NS = 5_000_000  # client-go's default controller rate limiter: 5 ms …
BACKOFF_MAX_NS = 1000 * 10**9  # … doubling, at most 1000 s

Obj = dict[str, Any]


class PodOps(Protocol):
    """What the controller needs from the simulated cluster."""

    def create_controlled_pod(self, pod: Obj) -> Obj:
        """Store the pod (through admission) and make it a Batsim job if it can be one."""

    def terminate_pod(self, namespace: str, name: str) -> None:
        """Delete the pod as a DELETE with default options would (gracefully)."""

    def may_create_for(self, template: Obj) -> bool:
        """False when pods from ``template`` should no longer be made (a service over)."""


def is_workload_replicaset(rs: Obj) -> bool:
    selector = (rs.get("spec") or {}).get("selector") or {}
    return WORKLOAD_LABEL in (selector.get("matchLabels") or {})


@dataclass
class _Known:
    uid: str
    selector: LabelSelector
    workload: bool
    owned: set[str] = field(default_factory=set)  # pod names controlled by it (listener)


@dataclass
class _State:
    uid: str
    failures: int = 0
    timers: WakeTimers = field(default_factory=WakeTimers)


class ReplicaSetController:
    """apps/v1 ReplicaSets (see the module docstring)."""

    def __init__(self, store: Store, clock: Any, pods: PodOps) -> None:
        self.store = store
        self.clock = clock  # now_ns(), wall_epoch_ns(), call_at(deadline_ns, fn)
        self.pods = pods
        self._lock = threading.Lock()
        self._dirty: set[tuple[str, str]] = set()
        self._known: dict[tuple[str, str], _Known] = {}
        self._by_namespace: dict[str, set[str]] = {}  # API ReplicaSets per namespace
        self._orphaned: list[tuple[str, str, set[str]]] = []  # deleted: (ns, uid, pods)
        self._states: dict[tuple[str, str], _State] = {}
        # ReplicaSets whose template serves until a given instant (timewarp.io/serve-until):
        # (end ns, spec.replicas); they keep the simulation going until then
        self._services: dict[tuple[str, str], tuple[int, int]] = {}
        self._started = False

    def start(self) -> None:
        """Begin watching the store; ReplicaSets already there count as changed."""
        if self._started:
            return
        self._started = True
        self.store.add_listener(self._on_change)
        for rs in self.store.list(RS_KEY)[0]:
            self._on_change(RS_KEY, "ADDED", rs)
        for pod in self.store.list("pods")[0]:
            self._on_change("pods", "ADDED", pod)

    # ------------------------------------------------------------ change tracking
    def _on_change(self, key: str, event: str, obj: Obj) -> None:
        """Store listener (store lock held): remember which ReplicaSets to look at."""
        if key == RS_KEY:
            self._replicaset_changed(event, obj)
        elif key == "pods" and (self._known or self._by_namespace):
            self._pod_changed(event, obj)

    def _replicaset_changed(self, event: str, rs: Obj) -> None:
        meta = rs["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        with self._lock:
            known = self._known.get(key)
            if event == "DELETED":
                self._services.pop(key, None)
                if known is not None:
                    del self._known[key]
                    self._by_namespace.get(key[0], set()).discard(key[1])
                    if not known.workload:
                        self._orphaned.append((key[0], known.uid, set(known.owned)))
                self._dirty.add(key)
                return
            workload = is_workload_replicaset(rs)
            selector = selector_from_dict((rs.get("spec") or {}).get("selector"))
            if known is None or known.uid != meta["uid"]:
                known = self._known[key] = _Known(meta["uid"], selector, workload)
            else:
                known.selector = selector
            if not workload:
                self._by_namespace.setdefault(key[0], set()).add(key[1])
                self._dirty.add(key)
                spec = rs.get("spec") or {}
                end, _ = pod_lifecycle.serve_until_s(spec.get("template") or {})
                if end is None:
                    self._services.pop(key, None)
                else:
                    self._services[key] = (round(end * 1e9), int(spec.get("replicas", 1)))

    def _pod_changed(self, event: str, pod: Obj) -> None:
        meta = pod["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        ref = podutil.controller_of(pod)
        with self._lock:
            if ref is not None:
                if ref.get("kind") != "ReplicaSet":
                    return
                known = self._known.get((namespace, ref.get("name", "")))
                if known is None or known.uid != ref.get("uid") or known.workload:
                    return
                if event == "DELETED":
                    known.owned.discard(name)
                else:
                    known.owned.add(name)
                self._dirty.add((namespace, ref["name"]))
                return
            labels = meta.get("labels") or {}
            for rs_name in self._by_namespace.get(namespace, ()):
                if self._known[(namespace, rs_name)].selector.matches(labels):
                    self._dirty.add((namespace, rs_name))  # an orphan it may adopt

    def _mark(self, namespace: str, name: str) -> None:
        with self._lock:
            self._dirty.add((namespace, name))

    def has_work(self) -> bool:
        with self._lock:
            return bool(self._dirty or self._orphaned)

    def keeps_simulation_alive(self, now_ns: int) -> bool:
        """A service's ReplicaSet wants pods until its end (``timewarp.io/serve-until``):
        the broker must not tell Batsim that registration is finished before then."""
        with self._lock:
            return any(end > now_ns and replicas > 0 for end, replicas in self._services.values())

    # ------------------------------------------------------------ reconciliation
    def reconcile(self) -> bool:
        """Bring every changed ReplicaSet to its wanted state; True if anything was written."""
        with self._lock:
            dirty, self._dirty = sorted(self._dirty), set()
            orphaned, self._orphaned = self._orphaned, []
        did = False
        for namespace, uid, names in orphaned:
            did = self._collect_garbage(namespace, uid, names) or did
        for namespace, name in dirty:
            did = self._sync(namespace, name) or did
        return did

    def _collect_garbage(self, namespace: str, uid: str, names: set[str]) -> bool:
        """The garbage collector's part: a deleted ReplicaSet's pods are deleted."""
        did = False
        for name in sorted(names):
            pod = self.store.get_or_none("pods", namespace, name)
            if pod is not None and (podutil.controller_of(pod) or {}).get("uid") == uid:
                if not podutil.is_terminating(pod):
                    self.pods.terminate_pod(namespace, name)
                    did = True
        return did

    def _sync(self, namespace: str, name: str) -> bool:
        """``syncReplicaSet``: claim the pods, create or delete to ``spec.replicas``, write
        the status computed from the pods seen before doing so."""
        key = (namespace, name)
        rs = self.store.get_or_none(RS_KEY, namespace, name)
        state = self._states.get(key)
        if rs is None or is_workload_replicaset(rs):
            if state is not None:
                self._cancel_timers(state)
                del self._states[key]
            return False
        if state is None or state.uid != rs["metadata"]["uid"]:
            if state is not None:
                self._cancel_timers(state)
            state = self._states[key] = _State(rs["metadata"]["uid"])
        with self._lock:
            service = self._services.get(key)
        if service is not None and service[0] > self.clock.now_ns():
            self._wake_at(state, rs, service[0])  # the service ends: look again then
        did, active = self._claim(rs)
        error = None
        if not podutil.is_terminating(rs):
            changed, error = self._manage(state, rs, active)
            did = did or changed
        if self._write_status(state, rs, active, error):
            did = True
        return did

    def _claim(self, rs: Obj) -> tuple[bool, list[Obj]]:
        """``claimPods`` over the active pods: keep the controlled ones the selector
        selects, release those it no longer selects, adopt active orphans it selects."""
        meta, spec = rs["metadata"], rs.get("spec") or {}
        namespace, uid = meta["namespace"], meta["uid"]
        selector = selector_from_dict(spec.get("selector"))
        with self._lock:
            known = self._known.get((namespace, meta["name"]))
            owned = set(known.owned) if known is not None else set()
        selected = {
            p["metadata"]["name"]: p
            for p in self.store.list("pods", namespace, label_selector=selector)[0]
        }
        for pod_name in sorted(owned - selected.keys()):
            pod = self.store.get_or_none("pods", namespace, pod_name)
            if pod is not None:
                selected[pod_name] = pod
        did, mine = False, []
        for pod_name in sorted(selected):
            pod = selected[pod_name]
            if not podutil.is_active(pod):
                continue
            ref = podutil.controller_of(pod)
            matches = selector.matches(pod["metadata"].get("labels"))
            if ref is not None and ref.get("uid") == uid:
                if matches:
                    mine.append(pod)
                else:
                    self._set_owner(namespace, pod_name, uid, None)
                    did = True
            elif ref is None and matches and not podutil.is_terminating(rs):
                mine.append(self._set_owner(namespace, pod_name, None, rs))
                did = True
        return did, mine

    def _set_owner(self, namespace: str, name: str, release: str | None, adopt: Obj | None) -> Obj:
        return set_controller(self.store, "pods", namespace, name, release, adopt)

    def _manage(self, state: _State, rs: Obj, active: list[Obj]) -> tuple[bool, str | None]:
        """``manageReplicas``: create the missing pods or delete the surplus."""
        wanted = int((rs.get("spec") or {}).get("replicas", 1))
        diff = len(active) - wanted
        if diff < 0:
            return self._create(state, rs, min(-diff, BURST_REPLICAS))
        if diff > 0:
            related = self._related_pods(rs, active)
            now = self.store.now_epoch_ns()
            for pod in victims.pods_to_delete(active, related, diff, now):
                name = pod["metadata"]["name"]
                self.pods.terminate_pod(rs["metadata"]["namespace"], name)
                self._event(rs, "Normal", "SuccessfulDelete", f"Deleted pod: {name}")
            return True, None
        return False, None

    def _create(self, state: _State, rs: Obj, count: int) -> tuple[bool, str | None]:
        template = (rs.get("spec") or {}).get("template") or {}
        if not self.pods.may_create_for(template):
            return False, None
        meta = rs["metadata"]
        tmeta = template.get("metadata") or {}
        made = False
        for _ in range(count):
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "generateName": f"{meta['name']}-",
                    "namespace": meta["namespace"],
                    "labels": dict(tmeta.get("labels") or {}),
                    "annotations": dict(tmeta.get("annotations") or {}),
                    "ownerReferences": [controller_ref(rs)],
                },
                "spec": dict(template.get("spec") or {}),
            }
            if tmeta.get("finalizers"):
                pod["metadata"]["finalizers"] = list(tmeta["finalizers"])
            try:
                created = self.pods.create_controlled_pod(pod)
            except ApiError as exc:
                message = f"Error creating: {exc.message}"
                self._event(rs, "Warning", "FailedCreate", message)
                self._retry_later(state, rs)
                return made, exc.message
            made = True
            state.failures = 0
            self._event(
                rs, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}"
            )
        return made, None

    def _related_pods(self, rs: Obj, active: list[Obj]) -> list[Obj]:
        """The active pods of every ReplicaSet of the same owner (``getIndirectlyRelatedPods``)."""
        owner = podutil.controller_of(rs)
        if owner is None:
            return active
        namespace = rs["metadata"]["namespace"]
        siblings = {
            r["metadata"]["uid"]
            for r in self.store.list(RS_KEY, namespace)[0]
            if (podutil.controller_of(r) or {}).get("uid") == owner.get("uid")
        }
        return [
            p
            for p in self.store.list("pods", namespace)[0]
            if (podutil.controller_of(p) or {}).get("uid") in siblings and podutil.is_active(p)
        ]

    # ------------------------------------------------------------ status
    def _write_status(self, state: _State, rs: Obj, active: list[Obj], error: str | None) -> bool:
        spec = rs.get("spec") or {}
        min_ready = int(spec.get("minReadySeconds") or 0)
        template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        now = self.store.now_epoch_ns()
        labelled = ready = available = 0
        next_available: int | None = None
        for pod in active:
            labels = pod["metadata"].get("labels") or {}
            if all(labels.get(k) == v for k, v in template_labels.items()):
                labelled += 1
            at = podutil.available_at_ns(pod, min_ready)
            if at is None:
                continue
            ready += 1
            if at <= now:
                available += 1
            elif next_available is None or at < next_available:
                next_available = at
        wanted = int(spec.get("replicas", 1))
        if error is None and next_available is not None and ready == wanted and available != wanted:
            self._wake_at(state, rs, next_available - self.clock.wall_epoch_ns())
        stamp = format_time(now)

        def mutate(obj: Obj) -> None:
            old = obj.get("status") or {}
            status: Obj = {"replicas": len(active)}
            for field_name, value in (
                ("fullyLabeledReplicas", labelled),
                ("readyReplicas", ready),
                ("availableReplicas", available),
                ("observedGeneration", obj["metadata"].get("generation", 0)),
            ):
                if value:
                    status[field_name] = value
            conditions = [
                c for c in old.get("conditions") or () if c.get("type") != "ReplicaFailure"
            ]
            failure = next(
                (c for c in old.get("conditions") or () if c.get("type") == "ReplicaFailure"), None
            )
            if error is not None:
                conditions.append(
                    failure
                    or {
                        "type": "ReplicaFailure",
                        "status": "True",
                        "reason": "FailedCreate",
                        "message": error,
                        "lastTransitionTime": stamp,
                    }
                )
            if conditions:
                status["conditions"] = conditions
            obj["status"] = status

        meta = rs["metadata"]
        before = meta["resourceVersion"]
        after = self.store.update(RS_KEY, meta["namespace"], meta["name"], mutate)
        return after is not None and after["metadata"]["resourceVersion"] != before

    # ------------------------------------------------------------ helpers
    def _event(self, rs: Obj, type_: str, reason: str, message: str) -> None:
        k8s_events.emit(
            self.store, rs, type_=type_, reason=reason, message=message, component=COMPONENT
        )

    def _retry_later(self, state: _State, rs: Obj) -> None:
        delay = min(BACKOFF_BASE_NS * 2**state.failures, BACKOFF_MAX_NS)
        state.failures += 1
        self._wake_at(state, rs, self.clock.now_ns() + delay)

    def _wake_at(self, state: _State, rs: Obj, deadline_ns: int) -> None:
        key = (rs["metadata"]["namespace"], rs["metadata"]["name"])
        state.timers.wake_at(self.clock, deadline_ns, lambda: self._mark(*key))

    @staticmethod
    def _cancel_timers(state: _State) -> None:
        state.timers.cancel()


def set_controller(
    store: Store, key: str, namespace: str, name: str, release: str | None, adopt: Obj | None
) -> Obj:
    """Release (drop the owner reference with uid ``release``) or adopt (add a controlling
    one to ``adopt``) the object ``key``/``namespace``/``name``; returns it as stored."""

    def edit(obj: Obj) -> None:
        refs = [r for r in obj["metadata"].get("ownerReferences") or () if r.get("uid") != release]
        if adopt is not None:
            refs.append(controller_ref(adopt))
        if refs:
            obj["metadata"]["ownerReferences"] = refs
        else:
            obj["metadata"].pop("ownerReferences", None)

    return store.update(key, namespace, name, edit)


def controller_ref(owner: Obj) -> Obj:
    meta = owner["metadata"]
    return {
        "apiVersion": owner.get("apiVersion", "apps/v1"),
        "kind": owner.get("kind", "ReplicaSet"),
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
