"""API objects a workload declares (``customResourceDefinitions``, then
``customResources``: ``simulator/workload.py`` ``read_declared_objects``), created in
the facade's store when the simulation begins, in the order given — a CRD before the
custom resources of its kind. The same creation on a scratch store checks them first,
so a refusal is said with the file and the field before anything runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from broker.facade import ManualClock
from broker.facade.crds import key_of
from broker.facade.errors import ApiError
from broker.facade.store import Store

Declared = Sequence[tuple[str, dict[str, Any]]]


class DeclaredError(ValueError):
    """A declared object the API would refuse, named by file and field."""


def create_declared(store: Store, declared: Declared) -> None:
    """Create each object as the API would (its admission, its 409 for a name taken);
    DeclaredError naming the object and its fields else."""
    for where, obj in declared:
        key = key_of(store.types, obj["apiVersion"], obj["kind"])
        if key is None:
            raise DeclaredError(
                f"{where}: no served type has apiVersion {obj['apiVersion']!r} and kind "
                f"{obj['kind']!r} (declare its CustomResourceDefinition in "
                "customResourceDefinitions)"
            )
        try:
            store.create(key, obj, create_namespace=True, copy=False)
        except ApiError as exc:
            causes = exc.details.get("causes") or []
            if not causes:
                raise DeclaredError(f"{where}: {exc.message}") from None
            raise DeclaredError(
                "; ".join(f"{where}.{c['field']}: {c['message']}" for c in causes)
            ) from None


def check_declared(declared: Declared) -> None:
    """What :func:`create_declared` would say, on a store of its own."""
    create_declared(Store(ManualClock()), declared)
