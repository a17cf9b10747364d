"""The apps/v1 Deployment controller, in virtual time, as kube-controller-manager's
``pkg/controller/deployment`` (v1.30) does it:

- the Deployment's ReplicaSets are those of its namespace it controls (orphans its
  selector selects are adopted, controlled ones it no longer selects released); the
  *new* one is the oldest whose template equals the Deployment's ignoring the
  ``pod-template-hash`` label, the others are *old*;
- a new ReplicaSet is named ``<deployment>-<hash>``, where the hash is ``ComputeHash``:
  FNV-32a over the pod template (and ``status.collisionCount`` when set) printed as a
  decimal number and mapped character by character onto ``bcdfghjklmnpqrstvwxz2456789``
  (``rand.SafeEncodeString``). The bytes hashed are the template's canonical JSON, not
  Go's ``spew`` dump of the struct, so a hash differs from a real cluster's for the same
  template — it looks, and behaves, the same. The hash is added to the new ReplicaSet's
  labels, selector and template labels; a name collision with a ReplicaSet that is not
  this Deployment's bumps ``collisionCount`` and tries again;
- annotations ``deployment.kubernetes.io/revision`` (also on the Deployment),
  ``…/revision-history``, ``…/desired-replicas`` and ``…/max-replicas`` (replicas +
  maxSurge), and the Deployment's own annotations copied to its new ReplicaSet;
- **scaling** (``spec.replicas`` changed, e.g. through ``…/scale``): with one active
  ReplicaSet it gets the new size; otherwise RollingUpdate scales every active one
  proportionally to its ``max-replicas`` annotation (``GetProportion``, leftovers to the
  largest), and a saturated new ReplicaSet scales the old ones to 0;
- **RollingUpdate** (a template change): the new ReplicaSet grows while the total stays
  within ``replicas + maxSurge`` (surge rounded up), the old ones shrink while the
  available pods stay at least ``replicas − maxUnavailable`` (unavailable rounded down;
  both 0 → maxUnavailable 1), unhealthy old pods first (``cleanupUnhealthyReplicas``),
  oldest ReplicaSets first; **Recreate**: old ReplicaSets to 0, wait until none of their
  pods runs (Terminating ones included), then the new one to ``replicas``;
- old ReplicaSets beyond ``revisionHistoryLimit`` with no pods are deleted once the
  rollout is complete; ``paused`` Deployments only scale (condition Progressing/Unknown
  ``DeploymentPaused``, then ``DeploymentResumed``);
- ``status`` from its ReplicaSets' statuses: ``replicas``, ``updatedReplicas``,
  ``readyReplicas``, ``availableReplicas``, ``unavailableReplicas``,
  ``observedGeneration``, ``collisionCount`` (zeros omitted), and the conditions with the
  real reasons and messages — ``Available`` (``MinimumReplicasAvailable`` /
  ``MinimumReplicasUnavailable``), ``Progressing`` (``NewReplicaSetCreated``,
  ``FoundNewReplicaSet``, ``ReplicaSetUpdated``, ``NewReplicaSetAvailable``,
  ``ProgressDeadlineExceeded`` once ``progressDeadlineSeconds`` pass without progress: a
  virtual-time timer), ``ReplicaFailure`` copied from the ReplicaSets;
- Events ``ScalingReplicaSet`` (``Scaled up replica set web-6f7d9 to 3``, ``Scaled down
  replica set web-6f7d9 to 1 from 3``), source ``deployment-controller``;
- deleting a Deployment deletes its ReplicaSets, which deletes their pods (background
  propagation, apps/v1's default).

Not done: ``rollbackTo`` (the removed extensions/v1beta1 field), the anti-affinity
deadlock escape of releases after v1.30, ``propagationPolicy: Orphan``.

Threading: the store listener only records what changed; :meth:`reconcile` runs in the
broker's driver thread, Deployments in sorted order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from broker.controllers import events as k8s_events
from broker.controllers.base import ControllerState, KeyedController, PodOps
from broker.controllers.ownership import claim, controller_ref
from broker.controllers.replicaset import RS_KEY, is_workload_replicaset
from broker.facade.errors import ApiError
from broker.facade.kinds.apps import scaled_value
from broker.facade.objects import format_time
from broker.facade.selectors import LabelSelector, selector_from_dict
from broker.facade.store import Store
from broker.k8s import podutil

COMPONENT = "deployment-controller"
DEPLOY_KEY = "deployments.apps"
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
_NOT_COPIED = {
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    DESIRED,
    MAX_REPLICAS,
    "deprecated.deployment.rollback.to",
}
MAX_REVISION_HISTORY_CHARS = 2000
_SAFE = "bcdfghjklmnpqrstvwxz2456789"

Obj = dict[str, Any]


# --------------------------------------------------------------------------- hashing


def _fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def compute_hash(template: Obj, collision_count: int | None) -> str:
    """``controller.ComputeHash`` over the template's canonical JSON (see the module
    docstring), ``rand.SafeEncodeString`` of the decimal FNV-32a."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count is not None:
        data += (collision_count & 0xFFFFFFFF).to_bytes(4, "little") + bytes(4)
    return "".join(_SAFE[b % len(_SAFE)] for b in str(_fnv32a(data)).encode())


def _semantic(value: Any) -> Any:
    """Go's semantic equality treats nil and empty maps and slices alike."""
    if isinstance(value, dict):
        out = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def equal_ignore_hash(t1: Obj, t2: Obj) -> bool:
    """``EqualIgnoreHash``: templates equal once the pod-template-hash label is dropped."""

    def strip(t: Obj) -> Obj:
        t = json.loads(json.dumps(t or {}))
        (t.get("metadata") or {}).get("labels", {}).pop(HASH_LABEL, None)
        return _semantic(t)

    return strip(t1) == strip(t2)


# --------------------------------------------------------------------------- helpers


def _spec_replicas(obj: Obj | None) -> int:
    if obj is None:
        return 0
    return int((obj.get("spec") or {}).get("replicas", 1))


def _status(obj: Obj | None, key: str) -> int:
    if obj is None:
        return 0
    return int((obj.get("status") or {}).get(key) or 0)


def _created(rs: Obj) -> tuple[str, str]:
    """``ReplicaSetsByCreationTimestamp``: creation time, then name."""
    return rs["metadata"].get("creationTimestamp", ""), rs["metadata"]["name"]


def _revision(rs: Obj) -> int:
    text = (rs["metadata"].get("annotations") or {}).get(REVISION)
    try:
        return int(text) if text is not None else 0
    except ValueError:
        return 0


def _annotation_int(rs: Obj, key: str) -> int | None:
    try:
        return int((rs["metadata"].get("annotations") or {})[key])
    except (KeyError, ValueError):
        return None


def _is_rolling(d: Obj) -> bool:
    return ((d.get("spec") or {}).get("strategy") or {}).get("type") == "RollingUpdate"


def resolve_fenceposts(d: Obj) -> tuple[int, int]:
    """``ResolveFenceposts``: (maxSurge rounded up, maxUnavailable rounded down) of
    ``spec.replicas``; both 0 → maxUnavailable 1."""
    rolling = ((d.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}
    desired = _spec_replicas(d)
    surge = scaled_value(rolling.get("maxSurge", 0), desired, True)
    unavailable = scaled_value(rolling.get("maxUnavailable", 0), desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_surge(d: Obj) -> int:
    return resolve_fenceposts(d)[0] if _is_rolling(d) else 0


def max_unavailable(d: Obj) -> int:
    desired = _spec_replicas(d)
    if not _is_rolling(d) or desired == 0:
        return 0
    return min(resolve_fenceposts(d)[1], desired)


def new_rs_new_replicas(d: Obj, all_rss: list[Obj], new_rs: Obj) -> int:
    """``NewRSNewReplicas``: what the new ReplicaSet may grow to now."""
    desired = _spec_replicas(d)
    if not _is_rolling(d):
        return desired
    surge = scaled_value(
        (((d["spec"].get("strategy") or {}).get("rollingUpdate") or {}).get("maxSurge", 0)),
        desired,
        True,
    )
    current = sum(_spec_replicas(rs) for rs in all_rss)
    if current >= desired + surge:
        return _spec_replicas(new_rs)
    grow = min(desired + surge - current, desired - _spec_replicas(new_rs))
    return _spec_replicas(new_rs) + grow


def deployment_complete(d: Obj, status: Obj) -> bool:
    desired = _spec_replicas(d)
    return (
        int(status.get("updatedReplicas") or 0) == desired
        and int(status.get("replicas") or 0) == desired
        and int(status.get("availableReplicas") or 0) == desired
        and int(status.get("observedGeneration") or 0) >= int(d["metadata"].get("generation") or 0)
    )


def _condition(status: Obj, type_: str) -> Obj | None:
    return next((c for c in status.get("conditions") or () if c.get("type") == type_), None)


def _set_condition(status: Obj, cond: Obj) -> None:
    """``SetDeploymentCondition``: no-op for the same status and reason; keeps
    ``lastTransitionTime`` when the status does not change; the condition goes last."""
    current = _condition(status, cond["type"])
    if (
        current is not None
        and current["status"] == cond["status"]
        and current.get("reason") == cond.get("reason")
    ):
        return
    if current is not None and current["status"] == cond["status"]:
        cond["lastTransitionTime"] = current["lastTransitionTime"]
    status["conditions"] = [
        c for c in status.get("conditions") or () if c.get("type") != cond["type"]
    ]
    status["conditions"].append(cond)


def _remove_condition(status: Obj, type_: str) -> None:
    if "conditions" in status:
        status["conditions"] = [c for c in status["conditions"] if c.get("type") != type_]


def _clean(status: Obj) -> Obj:
    """The status as the server stores it: zero counts and empty lists omitted."""
    return {k: v for k, v in status.items() if v not in (0, None, [])}


@dataclass
class _Known:
    uid: str
    selector: LabelSelector


class DeploymentController(KeyedController[ControllerState]):
    """apps/v1 Deployments (see the module docstring). Its ``_garbage`` entries are
    the deleted Deployments: (namespace, uid)."""

    watches = (DEPLOY_KEY, RS_KEY)
    listens = (DEPLOY_KEY, RS_KEY, "pods")
    owns = (DEPLOY_KEY, RS_KEY)
    state_type = ControllerState

    def __init__(self, store: Store, clock: Any, pods: PodOps) -> None:
        super().__init__(store, clock, pods)
        self._known: dict[tuple[str, str], _Known] = {}
        self._by_namespace: dict[str, set[str]] = {}
        self._rs_owner: dict[tuple[str, str], str] = {}  # ReplicaSet -> Deployment name

    # ------------------------------------------------------------ change tracking
    def _on_change(self, key: str, event: str, obj: Obj) -> None:
        """Store listener (store lock held): remember which Deployments to look at."""
        if key == DEPLOY_KEY:
            meta = obj["metadata"]
            dkey = (meta.get("namespace", ""), meta["name"])
            with self._lock:
                self._dirty.add(dkey)
                if event == "DELETED":
                    self._known.pop(dkey, None)
                    self._by_namespace.get(dkey[0], set()).discard(dkey[1])
                    self._garbage.append((dkey[0], meta["uid"]))
                else:
                    selector = selector_from_dict((obj.get("spec") or {}).get("selector"))
                    self._known[dkey] = _Known(meta["uid"], selector)
                    self._by_namespace.setdefault(dkey[0], set()).add(dkey[1])
        elif not self._known:
            return
        elif key == RS_KEY:
            self._replicaset_changed(event, obj)
        elif key == "pods" and event == "DELETED":
            ref = podutil.controller_of(obj)
            if ref is not None and ref.get("kind") == "ReplicaSet":
                namespace = obj["metadata"].get("namespace", "")
                with self._lock:
                    owner = self._rs_owner.get((namespace, ref.get("name", "")))
                    if owner is not None:
                        self._dirty.add((namespace, owner))  # Recreate waits for old pods

    def _replicaset_changed(self, event: str, rs: Obj) -> None:
        meta = rs["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        ref = podutil.controller_of(rs)
        with self._lock:
            if ref is not None and ref.get("kind") == "Deployment":
                known = self._known.get((namespace, ref.get("name", "")))
                if known is not None and known.uid == ref.get("uid"):
                    self._dirty.add((namespace, ref["name"]))
                    if event == "DELETED":
                        self._rs_owner.pop((namespace, name), None)
                    else:
                        self._rs_owner[(namespace, name)] = ref["name"]
                return
            if ref is None and not is_workload_replicaset(rs):
                labels = meta.get("labels") or {}
                for d_name in self._by_namespace.get(namespace, ()):
                    if self._known[(namespace, d_name)].selector.matches(labels):
                        self._dirty.add((namespace, d_name))

    # ------------------------------------------------------------ reconciliation
    def _sync(self, namespace: str, name: str) -> bool:
        return _Sync(self, namespace, name).run()

    def _collect_garbage(self, namespace: str, uid: str) -> bool:
        did = False
        for rs in self.store.list(RS_KEY, namespace)[0]:
            if (podutil.controller_of(rs) or {}).get("uid") == uid:
                self.store.delete(RS_KEY, namespace, rs["metadata"]["name"])
                did = True
        return did


class _Sync:
    """One ``syncDeployment`` of one Deployment (``d`` is the controller's working copy,
    as in Go: status and annotation changes are written with ``UpdateStatus``)."""

    def __init__(self, controller: DeploymentController, namespace: str, name: str) -> None:
        self.c = controller
        self.store = controller.store
        self.key = (namespace, name)
        self.namespace = namespace
        self.did = False

    # --- entry
    def run(self) -> bool:
        d = self.store.get_or_none(DEPLOY_KEY, *self.key)
        if d is None:
            self.c.forget(self.key)
            return False
        self.d = d
        self.state = self.c.state_for(self.key, d["metadata"]["uid"])
        rs_list = self._replicasets()
        pod_map = self._pods_by_replicaset(rs_list)
        if podutil.is_terminating(d):
            self._sync_status_only(rs_list)
            return self.did
        self._check_paused_conditions()
        if (d.get("spec") or {}).get("paused") or self._is_scaling_event(rs_list):
            self._scale_sync(rs_list)
        elif _is_rolling(d):
            self._rollout_rolling(rs_list)
        else:
            self._rollout_recreate(rs_list, pod_map)
        return self.did

    # --- lists
    def _replicasets(self) -> list[Obj]:
        """``getReplicaSetsForDeployment``: claim (adopt / release) and return them."""
        d = self.d
        selector = selector_from_dict(d["spec"].get("selector"))
        candidates = [
            rs
            for rs in self.store.list(RS_KEY, self.namespace)[0]
            if not is_workload_replicaset(rs)
        ]
        mine, did = claim(self.store, RS_KEY, d, selector, candidates)
        self.did = self.did or did
        return mine

    def _pods_by_replicaset(self, rs_list: list[Obj]) -> dict[str, list[Obj]]:
        uids = {rs["metadata"]["uid"] for rs in rs_list}
        selector = selector_from_dict(self.d["spec"].get("selector"))
        out: dict[str, list[Obj]] = {uid: [] for uid in uids}
        for pod in self.store.list("pods", self.namespace, label_selector=selector)[0]:
            ref = podutil.controller_of(pod)
            if ref is not None and ref.get("uid") in uids:
                out[ref["uid"]].append(pod)
        return out

    # --- new and old ReplicaSets
    def _new_and_old(self, rs_list: list[Obj], create: bool) -> tuple[Obj | None, list[Obj]]:
        """``getAllReplicaSetsAndSyncRevision``."""
        template = self.d["spec"]["template"]
        ordered = sorted(rs_list, key=_created)
        new = next(
            (rs for rs in ordered if equal_ignore_hash(rs["spec"]["template"], template)), None
        )
        old = [
            rs for rs in rs_list if new is None or rs["metadata"]["uid"] != new["metadata"]["uid"]
        ]
        return self._get_new(rs_list, old, new, create), old

    def _get_new(
        self, rs_list: list[Obj], old: list[Obj], existing: Obj | None, create: bool
    ) -> Obj | None:
        d = self.d
        revision = str(max((_revision(rs) for rs in old), default=0) + 1)
        if existing is not None:
            updated = json.loads(json.dumps(existing))
            changed = self._set_new_rs_annotations(updated, revision, exists=True)
            min_ready = int(d["spec"].get("minReadySeconds") or 0)
            if changed or int(updated["spec"].get("minReadySeconds") or 0) != min_ready:
                annotations = updated["metadata"]["annotations"]

                def edit(rs: Obj) -> None:
                    rs["metadata"]["annotations"] = dict(annotations)
                    rs["spec"]["minReadySeconds"] = min_ready

                return self._write_rs(updated["metadata"]["name"], edit)
            needs = self._set_revision(
                (updated["metadata"].get("annotations") or {}).get(REVISION, "")
            )
            if (
                self._has_deadline()
                and _condition(d.setdefault("status", {}), "Progressing") is None
            ):
                _set_condition(
                    d["status"],
                    self._cond(
                        "Progressing",
                        "True",
                        "FoundNewReplicaSet",
                        f'Found new replica set "{updated["metadata"]["name"]}"',
                    ),
                )
                needs = True
            if needs:
                self._update_status()
            return updated
        if not create:
            return None
        template = json.loads(json.dumps(d["spec"]["template"]))
        collisions = (d.get("status") or {}).get("collisionCount")
        hash_ = compute_hash(template, collisions)
        labels = {**((template.get("metadata") or {}).get("labels") or {}), HASH_LABEL: hash_}
        template.setdefault("metadata", {})["labels"] = labels
        selector = json.loads(json.dumps(d["spec"]["selector"]))
        selector.setdefault("matchLabels", {})[HASH_LABEL] = hash_
        meta = d["metadata"]
        new = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{meta['name']}-{hash_}",
                "namespace": self.namespace,
                "ownerReferences": [controller_ref(d)],
                "labels": dict(labels),
            },
            "spec": {
                "replicas": 0,
                "minReadySeconds": int(d["spec"].get("minReadySeconds") or 0),
                "selector": selector,
                "template": template,
            },
        }
        count = new_rs_new_replicas(d, [*old, new], new)
        new["spec"]["replicas"] = count
        self._set_new_rs_annotations(new, revision, exists=False)
        already = False
        try:
            created = self.store.create(RS_KEY, new, namespace=self.namespace)
        except ApiError as exc:
            if exc.code != 409:
                raise
            taken = self.store.get_or_none(RS_KEY, self.namespace, new["metadata"]["name"])
            ref = (podutil.controller_of(taken) or {}) if taken is not None else {}
            if (
                taken is None
                or ref.get("uid") != meta["uid"]
                or not equal_ignore_hash(d["spec"]["template"], taken["spec"]["template"])
            ):
                status = d.setdefault("status", {})
                status["collisionCount"] = int(status.get("collisionCount") or 0) + 1
                self._update_status()
                self.c.mark(*self.key)  # requeued: the next sync hashes anew
                return None
            created, already = taken, True  # ours already: a stale view, not a collision
        self.did = True
        if not already and count > 0:
            self._event(f"Scaled up replica set {created['metadata']['name']} to {count}")
        needs = self._set_revision(revision)
        if not already and self._has_deadline():
            name = created["metadata"]["name"]
            _set_condition(
                d.setdefault("status", {}),
                self._cond(
                    "Progressing",
                    "True",
                    "NewReplicaSetCreated",
                    f'Created new replica set "{name}"',
                ),
            )
            needs = True
        if needs:
            self._update_status()
        return created

    def _set_new_rs_annotations(self, rs: Obj, revision: str, exists: bool) -> bool:
        """``SetNewReplicaSetAnnotations``: the Deployment's annotations (but the
        controller's own), the revision (older ones kept in revision-history), and on a new
        ReplicaSet the desired/max replicas."""
        d = self.d
        annotations = rs["metadata"].setdefault("annotations", {})
        changed = False
        for k, v in (d["metadata"].get("annotations") or {}).items():
            if k not in _NOT_COPIED and annotations.get(k) != v:
                annotations[k] = v
                changed = True
        old_text = annotations.get(REVISION)
        try:
            old = int(old_text) if old_text not in (None, "") else 0
        except ValueError:
            return False
        if old < int(revision):
            annotations[REVISION] = revision
            changed = True
            if old_text is not None:
                history = annotations.get(REVISION_HISTORY, "")
                parts = history.split(",") if history else []
                total = len(history) + len(old_text) + 1
                start = 0
                while total > MAX_REVISION_HISTORY_CHARS and start < len(parts):
                    total -= len(parts[start]) + 1
                    start += 1
                if total <= MAX_REVISION_HISTORY_CHARS:
                    annotations[REVISION_HISTORY] = ",".join([*parts[start:], old_text])
        if not exists and self._set_replicas_annotations(rs):
            changed = True
        return changed

    def _set_replicas_annotations(self, rs: Obj) -> bool:
        desired = _spec_replicas(self.d)
        annotations = rs["metadata"].setdefault("annotations", {})
        want = {DESIRED: str(desired), MAX_REPLICAS: str(desired + max_surge(self.d))}
        if all(annotations.get(k) == v for k, v in want.items()):
            return False
        annotations.update(want)
        return True

    def _set_revision(self, revision: str) -> bool:
        annotations = self.d["metadata"].setdefault("annotations", {})
        if annotations.get(REVISION) == revision:
            return False
        annotations[REVISION] = revision
        return True

    # --- strategies
    def _rollout_rolling(self, rs_list: list[Obj]) -> None:
        new, old = self._new_and_old(rs_list, create=True)
        if new is None:
            return
        all_rss = [*old, new]
        if self._reconcile_new(all_rss, new):
            self._sync_rollout_status(all_rss, new)
            return
        active_old = [rs for rs in old if _spec_replicas(rs) > 0]
        if self._reconcile_old(all_rss, active_old, new):
            self._sync_rollout_status(all_rss, new)
            return
        if deployment_complete(self.d, self.d.get("status") or {}):
            self._cleanup(old)
        self._sync_rollout_status(all_rss, new)

    def _reconcile_new(self, all_rss: list[Obj], new: Obj) -> bool:
        desired = _spec_replicas(self.d)
        if _spec_replicas(new) == desired:
            return False
        if _spec_replicas(new) > desired:
            return self._scale_and_record(new, desired)[0]
        return self._scale_and_record(new, new_rs_new_replicas(self.d, all_rss, new))[0]

    def _reconcile_old(self, all_rss: list[Obj], old: list[Obj], new: Obj) -> bool:
        """``reconcileOldReplicaSets``: how far the old ReplicaSets may shrink."""
        if sum(_spec_replicas(rs) for rs in old) == 0:
            return False
        all_pods = sum(_spec_replicas(rs) for rs in all_rss)
        min_available = _spec_replicas(self.d) - max_unavailable(self.d)
        new_unavailable = _spec_replicas(new) - _status(new, "availableReplicas")
        most = all_pods - min_available - new_unavailable
        if most <= 0:
            return False
        old = sorted(old, key=_created)
        cleaned = 0
        for i, rs in enumerate(old):  # cleanupUnhealthyReplicas
            if cleaned >= most:
                break
            if _spec_replicas(rs) == 0 or _spec_replicas(rs) == _status(rs, "availableReplicas"):
                continue
            down = min(most - cleaned, _spec_replicas(rs) - _status(rs, "availableReplicas"))
            old[i] = self._scale(rs, _spec_replicas(rs) - down)[1]
            cleaned += down
        available = sum(_status(rs, "availableReplicas") for rs in [*old, new])
        scaled = 0
        if available > min_available:  # scaleDownOldReplicaSetsForRollingUpdate
            budget = available - min_available
            for rs in sorted(old, key=_created):
                if scaled >= budget:
                    break
                if _spec_replicas(rs) == 0:
                    continue
                down = min(_spec_replicas(rs), budget - scaled)
                self._scale(rs, _spec_replicas(rs) - down)
                scaled += down
        return cleaned + scaled > 0

    def _rollout_recreate(self, rs_list: list[Obj], pod_map: dict[str, list[Obj]]) -> None:
        new, old = self._new_and_old(rs_list, create=False)
        all_rss = [*old, new] if new is not None else list(old)
        scaled = False
        for rs in old:
            if _spec_replicas(rs) != 0 and self._scale_and_record(rs, 0)[0]:
                scaled = True
        if scaled:
            self._sync_rollout_status(all_rss, new)
            return
        if self._old_pods_running(new, old, pod_map):
            self._sync_rollout_status(all_rss, new)
            return
        if new is None:
            new, old = self._new_and_old(rs_list, create=True)
            if new is None:
                return
            all_rss = [*old, new]
        self._scale_and_record(new, _spec_replicas(self.d))
        if deployment_complete(self.d, self.d.get("status") or {}):
            self._cleanup(old)
        self._sync_rollout_status(all_rss, new)

    @staticmethod
    def _old_pods_running(new: Obj | None, old: list[Obj], pod_map: dict[str, list[Obj]]) -> bool:
        if sum(_status(rs, "replicas") for rs in old) > 0:
            return True
        new_uid = new["metadata"]["uid"] if new is not None else None
        for uid, pods in pod_map.items():
            if uid == new_uid:
                continue
            for pod in pods:
                if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                    return True
        return False

    # --- scaling
    def _is_scaling_event(self, rs_list: list[Obj]) -> bool:
        new, old = self._new_and_old(rs_list, create=False)
        for rs in [*old, new]:
            if rs is None or _spec_replicas(rs) == 0:
                continue
            desired = _annotation_int(rs, DESIRED)
            if desired is not None and desired != _spec_replicas(self.d):
                return True
        return False

    def _scale_sync(self, rs_list: list[Obj]) -> None:
        """``sync``: scale (proportionally during a rollout), clean up a paused one, status."""
        new, old = self._new_and_old(rs_list, create=False)
        self._scale_all(new, old)
        if (self.d.get("spec") or {}).get("paused"):
            self._cleanup(old)
        self._sync_status([*old, new] if new is not None else list(old), new)

    def _scale_all(self, new: Obj | None, old: list[Obj]) -> None:
        """``scale``."""
        d = self.d
        desired = _spec_replicas(d)
        newest_first = sorted(old, key=_created, reverse=True)
        active = [rs for rs in [*newest_first, new] if rs is not None and _spec_replicas(rs) > 0]
        target = None
        if len(active) == 1:
            target = active[0]
        elif not active and (new is not None or newest_first):
            target = new if new is not None else newest_first[0]
        if target is not None:
            if _spec_replicas(target) != desired:
                self._scale_and_record(target, desired)
            return
        if self._is_saturated(new):
            for rs in old:
                if _spec_replicas(rs) > 0:
                    self._scale_and_record(rs, 0)
            return
        if not _is_rolling(d):
            return
        current = sum(_spec_replicas(rs) for rs in active)
        allowed = desired + max_surge(d) if desired > 0 else 0
        to_add = allowed - current
        if to_add > 0:
            # ReplicaSetsBySizeNewer: larger first, newer first on ties
            active.sort(key=_created, reverse=True)
            active.sort(key=lambda rs: -_spec_replicas(rs))
            operation = "up"
        elif to_add < 0:
            # ReplicaSetsBySizeOlder: larger first, older first on ties
            active.sort(key=_created)
            active.sort(key=lambda rs: -_spec_replicas(rs))
            operation = "down"
        else:
            operation = ""
        added = 0
        sizes = {}
        for rs in active:
            if to_add != 0:
                share = self._proportion(rs, to_add, added)
                sizes[rs["metadata"]["name"]] = _spec_replicas(rs) + share
                added += share
            else:
                sizes[rs["metadata"]["name"]] = _spec_replicas(rs)
        for i, rs in enumerate(active):
            name = rs["metadata"]["name"]
            if i == 0 and to_add != 0:
                sizes[name] = max(0, sizes[name] + to_add - added)
            self._scale(rs, sizes[name], operation)

    def _proportion(self, rs: Obj, to_add: int, added: int) -> int:
        """``GetProportion``."""
        if _spec_replicas(rs) == 0 or to_add == 0 or to_add == added:
            return 0
        d = self.d
        if _spec_replicas(d) == 0:
            fraction = -_spec_replicas(rs)
        else:
            size = _spec_replicas(d) + max_surge(d)
            annotated = _annotation_int(rs, MAX_REPLICAS)
            if annotated is None:
                annotated = int((d.get("status") or {}).get("replicas") or 0)
            fraction = _round_half_away(_spec_replicas(rs) * size / annotated) - _spec_replicas(rs)
        allowed = to_add - added
        return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)

    def _is_saturated(self, rs: Obj | None) -> bool:
        if rs is None:
            return False
        desired = _spec_replicas(self.d)
        return (
            _spec_replicas(rs) == desired
            and _annotation_int(rs, DESIRED) == desired
            and _status(rs, "availableReplicas") == desired
        )

    def _scale_and_record(self, rs: Obj, size: int) -> tuple[bool, Obj]:
        if _spec_replicas(rs) == size:
            return False, rs
        return self._scale(rs, size, "up" if _spec_replicas(rs) < size else "down")

    def _scale(self, rs: Obj, size: int, operation: str = "") -> tuple[bool, Obj]:
        """``scaleReplicaSet``: its size and replicas annotations; an Event if it changed."""
        old = _spec_replicas(rs)
        probe = json.loads(json.dumps(rs))
        annotations_changed = self._set_replicas_annotations(probe)
        if old == size and not annotations_changed:
            return False, rs
        annotations = probe["metadata"]["annotations"]

        def edit(obj: Obj) -> None:
            obj["spec"]["replicas"] = size
            obj["metadata"].setdefault("annotations", {}).update(
                {k: annotations[k] for k in (DESIRED, MAX_REPLICAS)}
            )

        updated = self._write_rs(rs["metadata"]["name"], edit)
        if old != size:
            if not operation:
                operation = "up" if old < size else "down"
            self._event(
                f"Scaled {operation} replica set {rs['metadata']['name']} to {size} from {old}"
            )
            return True, updated
        return False, updated

    def _write_rs(self, name: str, edit: Any) -> Obj:
        """An Update of a ReplicaSet as a client makes it (its generation moves when its
        spec changes), on the current object: the driver is the only writer but for API
        clients, so a conflict is retried."""
        self.did = True
        for _ in range(5):
            current = self.store.get(RS_KEY, self.namespace, name)
            edit(current)
            try:
                return self.store.replace(RS_KEY, current, namespace=self.namespace, name=name)
            except ApiError as exc:
                if exc.code != 409:
                    raise
        raise RuntimeError(f"replicaset {self.namespace}/{name}: 5 conflicting writes in a row")

    # --- clean-up
    def _cleanup(self, old: list[Obj]) -> None:
        """``cleanupDeployment``: old ReplicaSets beyond revisionHistoryLimit, emptiest
        revisions first, if they have no pods."""
        limit = (self.d.get("spec") or {}).get("revisionHistoryLimit")
        if limit is None or limit >= 2**31 - 1:
            return
        alive = [rs for rs in old if not podutil.is_terminating(rs)]
        surplus = len(alive) - int(limit)
        if surplus <= 0:
            return
        alive.sort(key=lambda rs: (_revision(rs), _created(rs)))
        for rs in alive[:surplus]:
            meta = rs["metadata"]
            if (
                _status(rs, "replicas")
                or _spec_replicas(rs)
                or int(meta.get("generation") or 0) > _status(rs, "observedGeneration")
            ):
                continue
            self.store.delete(RS_KEY, self.namespace, meta["name"])
            self.did = True

    # --- status
    def _sync_status_only(self, rs_list: list[Obj]) -> None:
        new, old = self._new_and_old(rs_list, create=False)
        self._sync_status([*old, new] if new is not None else list(old), new)

    def _calculate_status(self, all_rss: list[Obj], new: Obj | None) -> Obj:
        d = self.d
        rss = [rs for rs in all_rss if rs is not None]
        available = sum(_status(rs, "availableReplicas") for rs in rss)
        total = sum(_spec_replicas(rs) for rs in rss)
        old_status = d.get("status") or {}
        status: Obj = {
            "observedGeneration": int(d["metadata"].get("generation") or 0),
            "replicas": sum(_status(rs, "replicas") for rs in rss),
            "updatedReplicas": _status(new, "replicas"),
            "readyReplicas": sum(_status(rs, "readyReplicas") for rs in rss),
            "availableReplicas": available,
            "unavailableReplicas": max(0, total - available),
        }
        if old_status.get("collisionCount") is not None:
            status["collisionCount"] = old_status["collisionCount"]
        status["conditions"] = [dict(c) for c in old_status.get("conditions") or ()]
        if available >= _spec_replicas(d) - max_unavailable(d):
            cond = self._cond(
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
            )
        else:
            cond = self._cond(
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
            )
        _set_condition(status, cond)
        return status

    def _sync_status(self, all_rss: list[Obj], new: Obj | None) -> None:
        """``syncDeploymentStatus``."""
        status = self._calculate_status(all_rss, new)
        if _clean(status) != _clean(self.d.get("status") or {}):
            self.d["status"] = status
            self._update_status()

    def _sync_rollout_status(self, all_rss: list[Obj], new: Obj | None) -> None:
        """``syncRolloutStatus``: the status, the Progressing condition, the failures of
        the ReplicaSets, and the progress-deadline timer."""
        d = self.d
        old_status = d.get("status") or {}
        status = self._calculate_status(all_rss, new)
        if not self._has_deadline():
            _remove_condition(status, "Progressing")
        current = _condition(old_status, "Progressing")
        complete_before = (
            status["replicas"] == status["updatedReplicas"]
            and current is not None
            and current.get("reason") == "NewReplicaSetAvailable"
        )
        what = (
            f'ReplicaSet "{new["metadata"]["name"]}"'
            if new is not None
            else f'Deployment "{d["metadata"]["name"]}"'
        )
        if self._has_deadline() and not complete_before:
            if deployment_complete(d, status):
                _set_condition(
                    status,
                    self._cond(
                        "Progressing",
                        "True",
                        "NewReplicaSetAvailable",
                        f"{what} has successfully progressed.",
                    ),
                )
            elif self._progressing(old_status, status):
                cond = self._cond(
                    "Progressing", "True", "ReplicaSetUpdated", f"{what} is progressing."
                )
                if current is not None:
                    if current["status"] == "True":
                        cond["lastTransitionTime"] = current["lastTransitionTime"]
                    _remove_condition(status, "Progressing")
                _set_condition(status, cond)
            elif self._timed_out(status):
                _set_condition(
                    status,
                    self._cond(
                        "Progressing",
                        "False",
                        "ProgressDeadlineExceeded",
                        f"{what} has timed out progressing.",
                    ),
                )
        failures = self._replica_failures(all_rss, new)
        if failures:
            _set_condition(status, failures[0])
        else:
            _remove_condition(status, "ReplicaFailure")
        if _clean(status) == _clean(old_status):
            self._requeue_stuck(status)
            return
        d["status"] = status
        self._update_status()

    @staticmethod
    def _progressing(old: Obj, new: Obj) -> bool:
        """``DeploymentProgressing``: more updated, ready or available pods, or fewer old."""

        def n(status: Obj, key: str) -> int:
            return int(status.get(key) or 0)

        return (
            n(new, "updatedReplicas") > n(old, "updatedReplicas")
            or n(new, "replicas") - n(new, "updatedReplicas")
            < n(old, "replicas") - n(old, "updatedReplicas")
            or n(new, "readyReplicas") > n(old, "readyReplicas")
            or n(new, "availableReplicas") > n(old, "availableReplicas")
        )

    def _timed_out(self, status: Obj) -> bool:
        cond = _condition(status, "Progressing")
        if not self._has_deadline() or cond is None:
            return False
        if cond.get("reason") == "NewReplicaSetAvailable":
            return False
        if cond.get("reason") == "ProgressDeadlineExceeded":
            return True
        deadline = (
            podutil.parse_time(cond["lastUpdateTime"])
            + int(self.d["spec"]["progressDeadlineSeconds"]) * 10**9
        )
        return deadline < self.store.now_epoch_ns()

    def _requeue_stuck(self, status: Obj) -> None:
        """``requeueStuckDeployment``: look again when the progress deadline has passed."""
        cond = _condition(self.d.get("status") or {}, "Progressing")
        if not self._has_deadline() or cond is None:
            return
        if deployment_complete(self.d, status) or cond.get("reason") == "ProgressDeadlineExceeded":
            return
        deadline = (
            podutil.parse_time(cond["lastUpdateTime"])
            + int(self.d["spec"]["progressDeadlineSeconds"]) * 10**9
        )
        # the real one adds a second "to avoid milliseconds skew": it is past the deadline
        # then; a deadline already past was checked by this very sync (the real
        # controller's rate-limited retries would find nothing new either)
        wake = deadline + 10**9 - self.c.clock.wall_epoch_ns()
        if wake > self.c.clock.now_ns():
            self.c.wake_at(self.state, self.key, wake)

    @staticmethod
    def _replica_failures(all_rss: list[Obj], new: Obj | None) -> list[Obj]:
        def of(rs: Obj) -> list[Obj]:
            return [
                {
                    "type": c["type"],
                    "status": c["status"],
                    "lastUpdateTime": c.get("lastTransitionTime"),
                    "lastTransitionTime": c.get("lastTransitionTime"),
                    "reason": c.get("reason"),
                    "message": c.get("message"),
                }
                for c in (rs.get("status") or {}).get("conditions") or ()
                if c.get("type") == "ReplicaFailure"
            ]

        if new is not None and of(new):
            return of(new)
        return [c for rs in all_rss if rs is not None for c in of(rs)]

    def _check_paused_conditions(self) -> None:
        """``checkPausedConditions``: Progressing Unknown while paused / on resume."""
        d = self.d
        if not self._has_deadline():
            return
        status = d.setdefault("status", {})
        cond = _condition(status, "Progressing")
        if cond is not None and cond.get("reason") == "ProgressDeadlineExceeded":
            return
        paused_cond = cond is not None and cond.get("reason") == "DeploymentPaused"
        paused = bool(d["spec"].get("paused"))
        if paused and not paused_cond:
            _set_condition(
                status,
                self._cond("Progressing", "Unknown", "DeploymentPaused", "Deployment is paused"),
            )
        elif not paused and paused_cond:
            _set_condition(
                status,
                self._cond("Progressing", "Unknown", "DeploymentResumed", "Deployment is resumed"),
            )
        else:
            return
        self._update_status()

    # --- writes
    def _has_deadline(self) -> bool:
        deadline = (self.d.get("spec") or {}).get("progressDeadlineSeconds")
        return deadline is not None and deadline != 2**31 - 1

    def _cond(self, type_: str, status: str, reason: str, message: str) -> Obj:
        now = format_time(self.store.now_epoch_ns())
        return {
            "type": type_,
            "status": status,
            "lastUpdateTime": now,
            "lastTransitionTime": now,
            "reason": reason,
            "message": message,
        }

    def _update_status(self) -> None:
        """``UpdateStatus`` of the working copy: its status and its annotations."""
        d = self.d
        status = _clean(d.get("status") or {})
        annotations = d["metadata"].get("annotations")

        def mutate(obj: Obj) -> None:
            obj["status"] = status
            if annotations:
                obj["metadata"]["annotations"] = dict(annotations)

        meta = d["metadata"]
        before = meta["resourceVersion"]
        stored = self.store.update(DEPLOY_KEY, self.namespace, meta["name"], mutate)
        if stored is not None and stored["metadata"]["resourceVersion"] != before:
            self.did = True
            meta["resourceVersion"] = stored["metadata"]["resourceVersion"]

    def _event(self, message: str) -> None:
        k8s_events.emit(
            self.store,
            self.d,
            type_="Normal",
            reason="ScalingReplicaSet",
            message=message,
            component=COMPONENT,
        )


def _round_half_away(x: float) -> int:
    """``integer.RoundToInt32``: Go's ``math.Round`` (halves away from zero)."""
    import math

    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))
