"""The strategy of one kind: what the API server does with an object of that kind on
the way in and out, as kube-apiserver's registry does it with a strategy per resource
(``pkg/registry/*/strategy.go``).

The facade's generic code (``store.py``, ``api.py``, the selectors) never tests which
kind it holds: it asks the kind's :class:`Strategy`, found as ``rt.strategy`` through
the table of ``resources.py``. :class:`Strategy` is the behaviour of a kind with nothing
special (a ConfigMap, a Lease): its metadata decoded and validated, nothing defaulted,
``metadata.name``/``metadata.namespace`` selectable, deleted at once. A kind with more
to it subclasses it and overrides what differs:

==============================  =========================================================
kube-apiserver                  here
==============================  =========================================================
the Go type (decoding)          :attr:`Strategy.schema`
``PrepareForCreate`` + defaults :meth:`Strategy.prepare_for_create`
``Validate``                    :meth:`Strategy.validate_fields` (after the metadata's)
``PrepareForUpdate``,           :meth:`Strategy.prepare_for_update` (``subresource`` is
``ValidateUpdate``, status      ``"status"`` for a status write: the status strategy)
strategies
``GetAttrs`` (field selectors)  :attr:`Strategy.fields`
``NameFunc`` of ``ObjectMeta``  :attr:`Strategy.name_rule`
graceful deletion, finalizers   :attr:`Strategy.deletion`, :attr:`Strategy.delete_collection`
``TableConvertor`` (printers)   :attr:`Strategy.printer` (``kinds/printers.py``)
==============================  =========================================================

Strategies hold no state (one instance serves every store); the methods take the
resource type (``rt``: its kind, group, scope, for messages) as the Go strategies take
their request context.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .. import admission
from .. import validation as v
from ..selectors import COMMON_FIELDS, FieldGetter
from . import printers

Obj = dict[str, Any]


class TypeNames(Protocol):
    """What a strategy reads of its resource type (``resources.ResourceType``)."""

    @property
    def group(self) -> str: ...
    @property
    def plural(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def namespaced(self) -> bool: ...
    @property
    def key(self) -> str: ...
    @property
    def api_version(self) -> str: ...


class Context(Protocol):
    """What admission may look up in the store (under its lock)."""

    def priorities(self) -> dict[str, int]:
        """PriorityClass name -> value, the built-in classes included."""
        ...

    def serves(self, group: str, version: str, plural: str) -> bool:
        """Whether a type of that group, version and plural is served (CRD names)."""
        ...


class Strategy:
    """The behaviour of a kind with nothing special; see the module docstring."""

    #: the Go type as far as the facade reads it; None: only ``metadata`` is typed
    schema: admission.Struct | None = None
    #: ``metadata.name`` (and ``generateName``) rule: a DNS-1123 subdomain by default
    name_rule: Callable[[str], list[str]] = staticmethod(v.is_dns1123_subdomain)
    #: field selector label -> how to read it from an object (400 for other labels)
    fields: Mapping[str, FieldGetter] = COMMON_FIELDS
    #: how a DELETE goes: "immediate" (the store removes it), "graceful" (a pod: the
    #: cluster's hooks decide, the kubelet removes it), "finalized" (a namespace: it
    #: turns Terminating, its content goes, then it does)
    deletion = "immediate"
    #: whether DELETE on the collection is served
    delete_collection = True
    #: whether a strategic merge patch is taken (kube-apiserver refuses it for custom
    #: resources: 415, there is no Go type to read the merge keys from)
    strategic_merge = True
    #: deleting one of these deletes the namespaced objects named after it (namespaces)
    holds_namespace_content = False
    #: what ``kubectl get`` prints of it (``as=Table``): the API server's default
    #: convertor (Name, Created At) unless the kind has a printer of its own
    printer: printers.Printer = printers.DEFAULT
    #: seconds an object lives after its last write (kube-apiserver's ``--event-ttl``
    #: for Events); None: until deleted
    ttl_s: float | None = None
    #: held as its encoding only, decoded on each read (``store._Packed``): for kinds
    #: stored by the hundred thousand and rarely read back (Events)
    packed = False
    #: its create-time decoding, defaults and validation of everything but the metadata
    #: read nothing of the metadata (its name in messages aside) and change nothing of
    #: it, and read of the store only what ``Context`` gives: an object the broker built
    #: whose other parts are another's admitted ones (``Store.create(built=True)``)
    admits_by_shape = False

    def __init__(self, printer: printers.Printer | None = None) -> None:
        if printer is not None:  # a kind with nothing special but its columns
            self.printer = printer

    def decode(self, rt: TypeNames, obj: Any) -> None:
        """What decoding into the Go type checks (400), quantities canonicalised."""
        schema = self.schema or admission.Struct(rt.kind, {"metadata": admission.META})
        admission.decode_as(schema, rt.kind, rt.api_version, obj)

    def prepare_for_create(self, rt: TypeNames, obj: Obj, ctx: Context) -> None:
        """Defaults and create-time admission (``obj`` has its name, uid, namespace)."""

    def prepare_for_update(
        self, rt: TypeNames, new: Obj, old: Obj, subresource: str | None
    ) -> None:
        """Defaults and update-only rules of a PUT or PATCH (``subresource`` None for the
        object, ``"status"`` for its status; ``new`` already carries the kept metadata and,
        for a status write, the stored spec)."""

    def scale_of(self, rt: TypeNames, obj: Obj) -> Obj | None:
        """The object's autoscaling/v1 Scale; None: the apps kinds' (``spec.replicas``,
        ``status.replicas``, ``spec.selector``: ``kinds/autoscaling.py``)."""
        return None

    def with_replicas(self, obj: Obj, replicas: int) -> None:
        """What a write of the Scale changes in the object."""
        obj.setdefault("spec", {})["replicas"] = replicas

    def validate(self, rt: TypeNames, obj: Obj) -> None:
        """The API server's validation of a decoded, defaulted object: 422 Invalid with
        every cause (the metadata's, then :meth:`validate_fields`')."""
        self.raise_invalid(rt, obj, self.validate_metadata(rt, obj) + self.validate_fields(rt, obj))

    def validate_metadata(self, rt: TypeNames, obj: Obj) -> list[v.FieldError]:
        """The validation of the object's metadata (``ValidateObjectMeta``)."""
        meta = obj.get("metadata") or {}
        return v.validate_object_meta(meta, self.name_rule, namespaced=rt.namespaced)

    def raise_invalid(self, rt: TypeNames, obj: Obj, errs: list[v.FieldError]) -> None:
        """422 Invalid with ``errs`` (nothing when there are none)."""
        if errs:
            meta = obj.get("metadata") or {}
            raise v.invalid(rt.kind, meta.get("name") or "", errs, rt.group)

    def validate_fields(self, rt: TypeNames, obj: Obj) -> list[v.FieldError]:
        """The kind's own validation beyond its metadata (``Validate``)."""
        return []


class Conversion:
    """A served version of a kind that is not its storage version, with a schema of its
    own (kube-apiserver's conversion functions, e.g. autoscaling/v1 HPAs stored as v2):
    a body in that version is decoded by :attr:`schema`, then :meth:`from_version` gives
    the stored object; every answer (object, list item, watch event) is the stored object
    through :meth:`to_version`. The storage version's strategy admits what is stored."""

    #: the version's Go type as far as the facade reads it (400 for what does not decode)
    schema: admission.Struct | None = None

    def to_version(self, stored: Obj) -> Obj:
        """The stored object as this version shows it."""
        raise NotImplementedError

    def from_version(self, obj: Obj) -> Obj:
        """The stored object an object of this version (decoded) stands for."""
        raise NotImplementedError


def spec_of(obj: Obj) -> Obj:
    """``obj["spec"]`` if it is an object, else an empty one (validation reads it)."""
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}
