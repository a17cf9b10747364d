"""The apps/v1 ReplicaSet controller, in virtual time: ``spec.replicas`` pods from the
template, for every ReplicaSet created through the API (and those the Deployment
controller makes), as kube-controller-manager's ``pkg/controller/replicaset`` does.

For one ReplicaSet:

- its pods are the *active* pods (not Succeeded, not Failed, not being deleted) of its
  namespace it controls; an active orphan its selector selects is adopted (an
  ``ownerReferences`` entry with ``controller: true``), an owned pod the selector no
  longer selects is released (``claimPods``);
- too few: it creates the missing ones (in slow-start batches of 1, 2, 4, …, at most 500
  per round, ``burstReplicas``; a ReplicaSet still short after a full burst makes its next
  one 25 s of virtual time later — the real one waits for its expectations and its
  client's rate limit, 20 requests/s — with a Warning Event ``CreationsDeferred``) from the
  template, ``generateName: <replicaset>-``, the template's labels and annotations, a
  controlling owner reference; too many: it deletes the surplus in
  :mod:`broker.controllers.victims`' order (unassigned, pending, not ready, cheaper, doubled-up,
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
the workload's jobs, replaced only when removed before they ended (``broker.cluster.replacements``).

Threading: the store listener only records what changed; :meth:`reconcile` runs in the
broker's driver thread, ReplicaSets in sorted order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.controllers import bursts, victims
from broker.controllers import events as k8s_events
from broker.controllers.base import ControllerState, KeyedController, PodOps
from broker.controllers.ownership import claim, pod_from_template
from broker.facade.errors import ApiError
from broker.facade.objects import format_time
from broker.facade.selectors import LabelSelector, selector_from_dict
from broker.facade.store import Store
from broker.k8s import podutil

COMPONENT = "replicaset-controller"
RS_KEY = "replicasets.apps"
WORKLOAD_LABEL = "timewarp.io/replicaset"  # the selector key of workload-declared ones
BURST_REPLICAS = bursts.BURST

Obj = dict[str, Any]


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
class _State(ControllerState):
    pass


class ReplicaSetController(KeyedController[_State]):
    """apps/v1 ReplicaSets (see the module docstring). Its ``_garbage`` entries are
    the deleted ReplicaSets: (namespace, uid, the pods it controlled)."""

    watches = (RS_KEY, "pods")
    listens = watches
    owns = (RS_KEY,)
    state_type = _State

    def __init__(self, store: Store, clock: Any, pods: PodOps) -> None:
        super().__init__(store, clock, pods)
        self._known: dict[tuple[str, str], _Known] = {}
        self._by_namespace: dict[str, set[str]] = {}  # API ReplicaSets per namespace
        # ReplicaSets whose template serves until a given instant (timewarp.io/serve-until):
        # (end ns, spec.replicas); they keep the simulation going until then
        self._services: dict[tuple[str, str], tuple[int, int]] = {}

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
                        self._garbage.append((key[0], known.uid, set(known.owned)))
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
                end, _ = podutil.serve_until_s(spec.get("template") or {})
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

    def keeps_simulation_alive(self, now_ns: int) -> bool:
        """A service's ReplicaSet wants pods until its end (``timewarp.io/serve-until``):
        the broker must not tell Batsim that registration is finished before then."""
        with self._lock:
            return any(end > now_ns and replicas > 0 for end, replicas in self._services.values())

    # ------------------------------------------------------------ reconciliation
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
        if rs is None or is_workload_replicaset(rs):
            self.forget(key)
            return False
        state = self.state_for(key, rs["metadata"]["uid"])
        with self._lock:
            service = self._services.get(key)
        if service is not None and service[0] > self.clock.now_ns():
            self.wake_at(state, key, service[0])  # the service ends: look again then
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
        namespace = meta["namespace"]
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
        active = [selected[n] for n in sorted(selected) if podutil.is_active(selected[n])]
        mine, did = claim(self.store, "pods", rs, selector, active)
        return did, mine

    def _manage(self, state: _State, rs: Obj, active: list[Obj]) -> tuple[bool, str | None]:
        """``manageReplicas``: create the missing pods or delete the surplus."""
        wanted = int((rs.get("spec") or {}).get("replicas", 1))
        diff = len(active) - wanted
        if diff < 0:
            return self._create(state, rs, -diff)
        bursts.no_creations_deferred(self, "ReplicaSet", *_key(rs))
        if diff > 0:
            related = self._related_pods(rs, active)
            now = self.store.now_epoch_ns()
            for pod in victims.pods_to_delete(active, related, diff, now):
                name = pod["metadata"]["name"]
                self.pods.terminate_pod(rs["metadata"]["namespace"], name)
                self._event(rs, "Normal", "SuccessfulDelete", f"Deleted pod: {name}")
            return True, None
        return False, None

    def _create(self, state: _State, rs: Obj, missing: int) -> tuple[bool, str | None]:
        """Create the ``missing`` pods, a burst at a time (``broker/controllers/bursts.py``)."""
        template = (rs.get("spec") or {}).get("template") or {}
        if not self.pods.may_create_for(template):
            return False, None  # (what it still lacked stays in the summary)
        made, error = bursts.create_in_bursts(
            self, state, rs, missing, lambda: self._create_one(rs, template)
        )
        return made > 0, error

    def _create_one(self, rs: Obj, template: Obj) -> str | None:
        """One pod from the template; the error's message if the API refused it."""
        meta = rs["metadata"]
        pod = pod_from_template(template, f"{meta['name']}-", meta["namespace"], rs)
        finalizers = (template.get("metadata") or {}).get("finalizers")
        if finalizers:
            pod["metadata"]["finalizers"] = list(finalizers)
        try:
            created = self.pods.create_controlled_pod(pod)
        except ApiError as exc:
            self._event(rs, "Warning", "FailedCreate", f"Error creating: {exc.message}")
            return exc.message
        self._event(rs, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}")
        return None

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
            self.wake_at(state, _key(rs), next_available - self.clock.wall_epoch_ns())
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


def _key(rs: Obj) -> tuple[str, str]:
    return rs["metadata"]["namespace"], rs["metadata"]["name"]
