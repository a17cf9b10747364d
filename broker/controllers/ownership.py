"""Controller ownership, as kube-controller-manager's ``pkg/controller`` handles it for
every workload controller: the controlling owner reference, claiming (adopting and
releasing) objects by selector, and a pod made from a template."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from broker.facade.selectors import LabelSelector
from broker.facade.store import Store
from broker.k8s import podutil

Obj = dict[str, Any]


def controller_ref(owner: Obj) -> Obj:
    """The ``ownerReferences`` entry that makes ``owner`` the controller."""
    meta = owner["metadata"]
    return {
        "apiVersion": owner.get("apiVersion", "apps/v1"),
        "kind": owner.get("kind", "ReplicaSet"),
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


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


def claim(
    store: Store, key: str, owner: Obj, selector: LabelSelector, candidates: Iterable[Obj]
) -> tuple[list[Obj], bool]:
    """``ControllerRefManager.ClaimObjects`` over ``candidates`` (objects ``key`` of the
    owner's namespace), in their order: keep the ones ``owner`` controls that the
    selector selects, release those it no longer selects, adopt the orphans it selects
    (unless the owner is being deleted). Returns (the claimed objects, as stored;
    whether anything was written)."""
    meta = owner["metadata"]
    namespace, uid = meta["namespace"], meta["uid"]
    mine: list[Obj] = []
    did = False
    for obj in candidates:
        name = obj["metadata"]["name"]
        ref = podutil.controller_of(obj)
        matches = selector.matches(obj["metadata"].get("labels"))
        if ref is not None and ref.get("uid") == uid:
            if matches:
                mine.append(obj)
            else:
                set_controller(store, key, namespace, name, uid, None)
                did = True
        elif ref is None and matches and not podutil.is_terminating(owner):
            mine.append(set_controller(store, key, namespace, name, None, owner))
            did = True
    return mine, did


def pod_from_template(template: Obj, generate_name: str, namespace: str, owner: Obj) -> Obj:
    """``GetPodFromTemplate``: a pod with the template's labels, annotations and spec,
    controlled by ``owner``."""
    tmeta = template.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": generate_name,
            "namespace": namespace,
            "labels": dict(tmeta.get("labels") or {}),
            "annotations": dict(tmeta.get("annotations") or {}),
            "ownerReferences": [controller_ref(owner)],
        },
        "spec": dict(template.get("spec") or {}),
    }
