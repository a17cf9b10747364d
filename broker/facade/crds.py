"""What makes a stored CustomResourceDefinition served: on its commit, the store that
holds it registers one :class:`~broker.facade.resources.ResourceType` per served
version in its own registry (``Store.types``), so its custom kind is routed, stored,
discovered and admitted by that facade only (another facade of the process does not
see it); on its deletion its objects are deleted, then its types forgotten.

The served versions share one stored type (the storage version's key): no conversion,
an object read through another version only has its ``apiVersion`` changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from .kinds.crd import CustomResourceStrategy, names_of
from .resources import Registry, ResourceType

CRD_KEY = "customresourcedefinitions.apiextensions.k8s.io"


class _Store(Protocol):
    types: Registry

    def list(self, key: str, namespace: str | None = None) -> tuple[list[Any], str]: ...
    def delete(self, key: str, namespace: str | None, name: str) -> Any: ...


def _accepted(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "NamesAccepted" and c.get("status") == "True" for c in conditions)


def resource_types(crd: dict[str, Any]) -> list[ResourceType]:
    """The types a CRD serves: one per served version, the storage version's stored."""
    spec = crd["spec"]
    names = names_of(crd)
    out = []
    for version in spec["versions"]:
        if not version.get("served"):
            continue
        subs = tuple(s for s in ("status", "scale") if s in (version.get("subresources") or {}))
        out.append(
            ResourceType(
                spec["group"],
                version["name"],
                names["plural"],
                names["singular"],
                names["kind"],
                spec["scope"] == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                subresources=subs,
                stored=bool(version.get("storage")),
                strategy=CustomResourceStrategy(crd, version["name"]),
            )
        )
    return out


class Definitions:
    """The store's listener for CRDs: their types registered while they exist."""

    def __init__(self, store: _Store) -> None:
        self.store = store
        self._served: dict[str, list[ResourceType]] = {}  # CRD name -> its types

    def on_commit(self, key: str, event_type: str, obj: dict[str, Any]) -> None:
        if key != CRD_KEY:
            return
        name = obj["metadata"]["name"]
        if event_type == "DELETED":
            self._forget(name, delete_objects=True)
            return
        self._forget(name, delete_objects=False)
        if _accepted(obj):
            types = resource_types(obj)
            for rt in types:
                self.store.types.register(rt)
            self._served[name] = types

    def _forget(self, name: str, *, delete_objects: bool) -> None:
        types = self._served.pop(name, [])
        if delete_objects:
            for rt in types:
                if rt.stored:
                    for item in self.store.list(rt.key)[0]:
                        meta = item["metadata"]
                        self.store.delete(rt.key, meta.get("namespace"), meta["name"])
        for rt in types:
            self.store.types.unregister(rt)


def version_recoder(rt: ResourceType, registry: Registry) -> Callable[[bytes], bytes] | None:
    """For a request through a served version that is not the storage one: what turns
    an encoded answer (an object, a list, a watch frame) into that version, i.e. its
    ``apiVersion`` rewritten (no conversion: the versions share one schema). None when
    nothing needs it."""
    if rt.stored:
        return None
    stored = registry.by_key_or_none(rt.key)
    if stored is None or stored.group != rt.group or stored.version == rt.version:
        return None
    old = b'"apiVersion":"' + stored.api_version.encode() + b'"'
    new = b'"apiVersion":"' + rt.api_version.encode() + b'"'
    return lambda data: data.replace(old, new)


def key_of(registry: Registry, api_version: str, kind: str) -> str | None:
    """The stored type's key of objects of ``apiVersion``/``kind`` (``"crontabs.stable.
    example.com"``), None if no served type has them."""
    group, _, version = api_version.rpartition("/")
    for rt in registry.served():
        if (rt.group, rt.version, rt.kind) == (group, version, kind) and "/" not in rt.plural:
            return rt.key
    return None
